#!/usr/bin/env python3
"""A loopback server that answers whatever a connection sends first (a TLS hello, say) with an
HTTP 400, then closes it, as a plain HTTP server does. Prints "PORT <n>" once it listens on
127.0.0.1; exits when its standard input closes."""
import socket
import sys
import threading

listener = socket.socket()
listener.bind(("127.0.0.1", 0))
listener.listen(16)
print("PORT %d" % listener.getsockname()[1], flush=True)


def serve():
    while True:
        connection, _ = listener.accept()
        with connection:
            connection.settimeout(5)
            try:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            except OSError:
                pass


threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
