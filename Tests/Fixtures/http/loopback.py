"""What the fixture servers share: a threaded server on 127.0.0.1 (an ephemeral port) that
prints "PORT <n>" once it listens and stops when its standard input closes, and a handler that
reads the requests of a keep-alive connection one after another. With the arguments
`--tls CERT KEY` (PEM files) the server speaks https."""
import socket
import socketserver
import ssl
import sys
import threading
from urllib.parse import urlsplit, parse_qs


class Handler(socketserver.StreamRequestHandler):
    """Hands each request to `answer(method, url, query, headers, body)` (the url split, the
    query's first values, header names in lower case); an answer of False ends the connection."""

    def setup(self):
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.handshake_failed = False
        if isinstance(self.request, ssl.SSLSocket):
            # On this connection's thread, not in accept(): a client that never finishes its
            # handshake holds up no other.
            try:
                self.request.do_handshake()
            except (ssl.SSLError, OSError):
                self.handshake_failed = True
        super().setup()

    def send(self, status, body=b"", headers=(), content_type="application/json"):
        head = [f"HTTP/1.1 {status} X", f"Content-Type: {content_type}", f"Content-Length: {len(body)}"]
        head += [f"{k}: {v}" for k, v in headers]
        # A lone surrogate ("\udce9") is the byte it escapes (0xE9): a header not in UTF-8.
        self.wfile.write(("\r\n".join(head) + "\r\n\r\n").encode("utf-8", "surrogateescape") + body)
        self.wfile.flush()

    def handle(self):
        if self.handshake_failed:
            return
        while True:
            line = self.rfile.readline(65537)
            if not line:
                return
            parts = line.decode("latin-1").split()
            if len(parts) < 2:
                return
            headers = {}
            while True:
                h = self.rfile.readline(65537)
                if h in (b"\r\n", b"\n", b""):
                    break
                k, _, v = h.decode("latin-1").partition(":")
                headers[k.strip().lower()] = v.strip()
            body = self.rfile.read(int(headers.get("content-length", "0") or 0))
            url = urlsplit(parts[1])
            query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
            if self.answer(parts[0], url, query, headers, body) is False:
                return


class Server(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


def serve(handler):
    server = Server(("127.0.0.1", 0), handler)
    if "--tls" in sys.argv:
        at = sys.argv.index("--tls")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(sys.argv[at + 1], sys.argv[at + 2])
        server.socket = context.wrap_socket(server.socket, server_side=True, do_handshake_on_connect=False)
    print(f"PORT {server.server_address[1]}", flush=True)
    threading.Thread(target=lambda: (sys.stdin.read(), server.shutdown()), daemon=True).start()
    server.serve_forever()
