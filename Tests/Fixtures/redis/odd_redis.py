#!/usr/bin/env python3
"""A small RESP server that answers some commands oddly, for redis-cache's tests.

Usage: odd_redis.py MODE. Prints "PORT <n>" once it listens on 127.0.0.1 and stops when its
standard input closes. Every command gets a plausible answer (PING +PONG, a miss for reads,
+OK for writes), except, by MODE:
  auth-echo     AUTH <password> is refused quoting it: "-WRONGPASS invalid password <password>"
  scan-forever  SCAN answers cursor 1 and no keys, whatever the cursor asked for (a walk that
                never ends)
  noauth        every command but PING is refused "-NOAUTH Authentication required." (a Redis
                with a password, sent none)
  stored-late   a page SET is kept out of sight until the next lease is taken (EVAL with SET NX):
                then it shows, as if its holder stored it and let its lease go just before. Leases
                are always taken; GETRANGE answers what shows.
"""
import sys

sys.path.insert(0, __file__.rsplit("/", 2)[0] + "/http")
import loopback  # noqa: E402

MODE = sys.argv[1]
shown, unseen = {}, {}


class Handler(loopback.Handler):
    def handle(self):
        while True:
            command = self.read_command()
            if command is None:
                return
            self.wfile.write(self.answer_command(command))
            self.wfile.flush()

    def read_command(self):
        line = self.rfile.readline()
        if not line.startswith(b"*"):
            return None
        args = []
        for _ in range(int(line[1:])):
            size = int(self.rfile.readline()[1:])
            args.append(self.rfile.read(size + 2)[:size])
        return args

    def answer_command(self, args):
        name = args[0].upper()
        if name == b"AUTH" and MODE == "auth-echo":
            return b"-WRONGPASS invalid password " + args[-1] + b"\r\n"
        if name != b"PING" and MODE == "noauth":
            return b"-NOAUTH Authentication required.\r\n"
        if name == b"SCAN" and MODE == "scan-forever":
            return b"*2\r\n$1\r\n1\r\n*0\r\n"
        if name == b"PING":
            return b"+PONG\r\n"
        if MODE == "stored-late" and name == b"SET":
            unseen[args[1]] = args[2]
            return b"+OK\r\n"
        if MODE == "stored-late" and name == b"EVAL" and b"'NX'" in args[1]:
            shown.update(unseen)
            unseen.clear()
            return b":1\r\n"
        if name in (b"GET", b"GETRANGE"):
            value = shown.get(args[1])
            return b"$-1\r\n" if value is None else b"$%d\r\n%s\r\n" % (len(value), value)
        if name in (b"UNLINK", b"EVAL", b"EVALSHA", b"DEL"):
            return b":0\r\n"
        return b"+OK\r\n"


loopback.serve(Handler)
