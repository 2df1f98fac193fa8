"""What the fixture servers share: a threaded server on 127.0.0.1 (an ephemeral port) that
prints "PORT <n>" once it listens and stops when its standard input closes."""
import socketserver
import sys
import threading


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(handler):
    server = Server(("127.0.0.1", 0), handler)
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()
