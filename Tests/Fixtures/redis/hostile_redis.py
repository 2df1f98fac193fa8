#!/usr/bin/env python3
"""A server that answers Redis commands with replies too large to hold, for redis-cache's tests.

Usage: hostile_redis.py MODE RECORD. Prints "PORT <n>" once it listens on 127.0.0.1 and stops
when its standard input closes. To the first command of each connection it answers:
  bulk    "$1073741824" (a 1 GiB string), then its bytes, 64 KiB at a time
  array   "*100000000" (an array of 100 million values), then ":1" values
and goes on sending until the client hangs up or 256 MiB (bulk) or 32 MiB (array: 8 million
values) went out. When a connection ends, it
appends "SENT <bytes>" (what the client was sent before it hung up) to the file RECORD.
"""
import socket
import sys
import threading

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/http")
import loopback  # noqa: E402

MODE, RECORD = sys.argv[1], sys.argv[2]
CAP = (256 if MODE == "bulk" else 32) << 20
record_lock = threading.Lock()


class Handler(loopback.Handler):
    def handle(self):
        if not self.connection.recv(65536):
            return
        head, unit = (b"$1073741824\r\n", b"x" * 65536) if MODE == "bulk" else (b"*100000000\r\n", b":1\r\n" * 16384)
        sent = 0
        try:
            self.connection.sendall(head)
            sent = len(head)
            while sent < CAP:
                self.connection.sendall(unit)
                sent += len(unit)
        except OSError:
            pass
        with record_lock, open(RECORD, "a") as out:
            out.write(f"SENT {sent}\n")


loopback.serve(Handler)
