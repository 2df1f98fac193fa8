#!/usr/bin/env python3
"""A loopback HTTP server that misbehaves on purpose, for the http source's tests.

Prints "PORT <n>" on its first line once it listens on 127.0.0.1. Every request is recorded;
GET /seen answers them as JSON lines: {"path": ..., "host": ..., "authorization": ..., ...}.
With `--seen-file PATH` each record is appended to that file too (for an https server, whose
/seen a plain client cannot read); `--tls CERT KEY` serves https (loopback.py).

Paths (query strings are ignored unless said):
  /items?page=N        a well-formed page {"items": [...]} of 2 items
  /endless             200, no length, then '{"items":[' and items forever (until the peer goes)
  /gzip-bomb           200, Content-Encoding: gzip, a body inflating to 256 MiB of spaces
  /fake-gzip           200, Content-Encoding: gzip, and a body that is plain JSON
  /huge-header         200 with one 1 MiB header line
  /many-headers        200 with 20,000 headers of 60 bytes (1.2 MB)
  /slow                200, Content-Length 1000, then 1 byte a second
  /not-http            "SSH-2.0-OpenSSH_9.2p1" and a line break, no HTTP at all
  /bad-status?code=C   the status line "HTTP/1.1 C OK" (C: 2000, -200, abc), then an empty JSON body
  /bad-chunk?kind=K    200, chunked, with a chunk size that is not hex (K=hex) or a chunk not
                       followed by CR LF (K=crlf)
  /next-latin1         items; X-Next-Page: caf? where ? is the byte 0xE9 (Latin-1, not UTF-8)
  /not-json            200 text/html "<html>..."
  /truncated           200 '{"items":[{"id":1},{"id":' (a Content-Length that matches)
  /not-array           200 {"items": {"id": 1}}
  /redirect-other      302 to http://localhost:PORT/items?page=1 (another host name, same server)
  /redirect-loop-a     302 to /redirect-loop-b, which 302s back to /redirect-loop-a
  /redirect-file       302 to file:///etc/passwd
  /link-other?page=N   items; Link rel="next" to http://localhost:PORT/link-other?page=N+1 (page 1 only)
  /link-combining?page=N  items; page 1's Link rel="next" is http://localhost:PORT/ then U+0301 (a
                       combining accent, which makes "/" and it one Character) and
                       @127.0.0.1:PORT/...: its host is localhost, whatever a Character-wise
                       reading finds after the "@"
  /link-port?to=P      items; Link rel="next" to http://127.0.0.1:P/items?page=2 (the same host,
                       another port: another server; &scheme=https for an https link)
  /redirect-port?to=P  302 to http://127.0.0.1:P/items?page=1 (&scheme=https for https)
  /mixed-items         {"items": [{"a": 1, "b": 2}, 7, "s"]} (an object, then a number and a string)
  /link-latin1?page=N  items; page 1's Link rel="next" is </link-latin1?page=2&q=caf?> where ? is
                       the byte 0xE9 ("é" in Latin-1, not UTF-8), as it is
  /link-file           items; Link rel="next" <file:///etc/passwd>
  /link-gopher         items; Link rel="next" <gopher://127.0.0.1/1>
  /next-nul            items and {"next": "http://127.0.0.1:1\u0000@127.0.0.1:PORT/items?page=2"}: a
                       NUL before an "@" (libcurl, reading up to the NUL, would go to port 1)
  /trailer?page=N      items, chunked, with a Link rel="next" (pages 1 and 2) and a trailer
                       (X-Checksum) after the last chunk
  /link-cycle?page=N   items; Link rel="next" page 1 -> 2 -> 3 -> 2 (a cycle two steps long)
  /link-fragment?page=N  the same cycle, each link with a fragment no link had before (#v1, #v2, ...)
  /bad-third?page=N    items with a Link rel="next" on pages 1 and 2; page 3 is truncated JSON
                       (the page fetched ahead after the first append)
  /cursor-cycle?c=X    items; {"next": ...}: "" -> "a" -> "b" -> "a"
  /retry-huge          429 with Retry-After: 99999999999999999 (seconds)
  /reset-huge          403 with X-RateLimit-Remaining: 0 and X-RateLimit-Reset: 9223372036854775807
  POST /token-huge     {"access_token": "tok-huge-1", "expires_in": 1000000000000}
  POST /token-crlf     {"access_token": "tok-crlf" CR LF "X-Injected: yes"}
  POST /token-short    {"access_token": "a"}
  POST /token-form     access_token=tok-form%2B1&expires_in=3600&token_type=bearer (form-encoded)
  POST /token-html     <html>access token=tok-html-secret-1</html> (text/html)
  POST /token-nested   {"data": {"access_token": "tok-nested-secret-1"}}
  POST /token-refused-form  error=bad_verification_code&error_description=...&error_uri=... (form, 200)
  POST /token-refused-json  {"error": "invalid_client", "error_description": "...client-secret-789...", "other": ...}
  POST /post-307-other 307 to http://localhost:PORT/items?page=1 (another host name)
  POST /post-307-same  307 to /items?page=1 (the same host)
  POST /post-303       303 to /items?page=1
  /two-links?page=N    items; two Link lines: rel="first", then rel="next" (pages 1 and 2)
  /link-quoted?page=N  items; page 1's Link has a title holding "<http://localhost:PORT/evil>" and
                       a param holding "rel=prev", then rel="next" to /items?page=2
  /http-lines          200 with 1,000 header lines named "HTTP/x-pad<i>" (200 bytes each)
  /echo-secret         401 {"error": "bad token <the bearer token JSON-escaped as Python writes it (a
                       backslash as two, a character beyond ASCII as \\uXXXX), each "/" as "\\/">"}
  /echo-secret-cut     401, 185 bytes of "x" then the bearer token (across a 200-byte cut)
  /echo-query-link?page=N  items; Link rel="next" to the same query with page N+1 (all of it,
                       any api_key too), pages 1 and 2; with other=1 the Link names localhost
  /wild?case=C         {"groups": ...} bodies for the items pointer /groups/*/repos: C is
                       "missing" (no groups), "null", "object" (groups an object), "element"
                       (one group's repos a string), "nothing" (a group without repos), "empty"
                       (no groups: no items, no problem)
  /no-content          204 No Content
  /cursor-object       items; {"next": {"after": 2}} (a cursor that is an object)
  /cursor-long         items; {"next": <a cursor of 100,000 characters>}
  /limited-long?ahead=S  items; X-RateLimit-Remaining: 0 and an X-RateLimit-Reset S s ahead (1,000);
                       with &reset=R, that X-RateLimit-Reset ("fraction": an epoch time 500.5 s
                       ahead, written with a tenth)
  /limited-third?page=N  items; page 3 says X-RateLimit-Remaining: 0, the reset 1,000 s ahead
  /busy-third?page=N     items; the first request for page 3 gets 429 with Retry-After: 7
  /echo-key-lower      400 {"error": "bad key <the api_key of the query, percent-encoded in lower case>"}
  /link-key-lower?page=N  items; Link rel="next" with the api_key of the query percent-encoded in
                       lower case (pages 1 and 2)
  /redirect-key        302 to /items?page=1&api_key=<the query's api_key, in lower case hex>
  /redirect-key-other  the same, to http://localhost:PORT/items (another host name)
  /redirect-query-other  302 to http://localhost:PORT/items?<the whole query, as received> (a
                       server moved to another host that keeps the query)
  /echo-auth?via=V&page=N  echoes the bearer token it was sent as access_token=<token> in a
                       URL on another host name (http://localhost:PORT/items?page=2&...): V is
                       "link" (page 1's items and a Link rel="next" to it) or "redirect" (a 302 to it)
  /echo-secret-encoded?times=T&pad=P  401 whose body is P "x" then the bearer token it was sent,
                       percent-encoded T times (quote, nothing safe)
  /echo-same?via=V&page=N  echoes the credential it was sent (the bearer token, else X-Api-Key)
                       for page N+1 on the same host (pages 1 and 2): V is "link" (Link
                       rel="next" to /echo-same?via=link&page=N+1&t=<credential>), "link2" (the
                       same, the credential percent-encoded twice) or "cursor" (the body's "next"
                       is "<N+1>-<credential>"; its page is the cursor's number); with form=url or
                       form=unpadded, a basic credential is echoed in that base64 form
  /cursor-last-no-id?starting_after=X  Stripe-style pages of 3 ("data", "has_more": true, the
                       cursor "/data/*/id"), whose last item has no "id" on the first page
  /clamp-total?total=T&page=N  items 2 a page of 4 (a page past 2 repeats page 2, as APIs that
                       clamp do) with "total": T (JSON text) in the body and X-Total-Count: T
  /slow-redirect?n=K   waits 0.4 s, then a 302 to n=K+1, up to n=8, which answers items
  POST /token-429      429 with Retry-After: 120 (a token endpoint rate limiting)
  /gzip-trailing?members=M  gzip bodies: M=1 a gzip body then bytes that are no gzip, M=2 two
                       gzip members (the items, then a space)
  /odd-links?case=C&page=N  pages 1 and 2: C "empty" gives page 1 a Link <>; rel="next" (the
                       page itself), C "spaced" a header "Link : <...?page=2>; rel="next"",
                       C "malformed" a Link that cannot be read ("<...q=a>b>; rel=next"),
                       C "unclosed" page 1 a Link to page 2, then "<a," 21,000 times (63 KB)
  /repos/...           items (any path under /repos)
  /self-prev           items; Link rel="first prev" to itself
  /capped?page=N or ?offset=O  `total` records (default 45: ids 0-44), at most `cap` a page (default 7) whatever the limit asked
                       (pages of `cap` by number), with "total": `total`
  /empty-middle?cursor=C  cursor pages c0-c4 of 10 ids each, c2 empty; "has_more" true up to c3
                       and "next" "c<n+1>" (null on c4)
  /has-more?case=C&page=N  items and a has_more of each case: "missing" (none), "yes" (the string),
                       "numbers" (1 on page 1, 0 on page 2), "null"

Each record of /seen has the method and the body (text) too.
"""
import gzip
import json
import re
import sys
import threading

import loopback
import time
from urllib.parse import quote

seen = []
seen_lock = threading.Lock()
seen_file = sys.argv[sys.argv.index("--seen-file") + 1] if "--seen-file" in sys.argv else None
bomb = None
bomb_lock = threading.Lock()


def gzip_bomb():
    global bomb
    with bomb_lock:
        if bomb is None:
            bomb = gzip.compress(b"[" + b" " * (256 << 20) + b"]", compresslevel=9)
        return bomb


def items_body(page):
    return json.dumps({"items": [{"id": page * 10 + i} for i in range(2)]}).encode()


class Handler(loopback.Handler):
    def answer(self, method, url, query, headers, body):
        if url.path != "/seen":
            record = {"path": url.path, "query": url.query, "host": headers.get("host", ""),
                      "authorization": headers.get("authorization"), "x-api-key": headers.get("x-api-key"),
                      "x-injected": headers.get("x-injected"), "method": method, "body": body.decode("latin-1")}
            with seen_lock:
                seen.append(record)
                if seen_file:
                    with open(seen_file, "a") as out:
                        out.write(json.dumps(record) + "\n")
        return self.route(url.path, query, headers, url.query)

    def route(self, path, query, headers, raw_query=""):
        port = self.server.server_address[1]
        page = int(query.get("page", "1") or 1)
        if path == "/seen":
            with seen_lock:
                body = "".join(json.dumps(s) + "\n" for s in seen).encode()
            self.send(200, body, content_type="text/plain")
        elif path == "/items":
            self.send(200, items_body(page))
        elif path == "/endless":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{\"items\":[")
            chunk = b'{"id":1,"pad":"' + b"x" * 1000 + b'"},'
            chunk = chunk * 64
            try:
                while True:
                    self.wfile.write(chunk)
            except OSError:
                return False
        elif path == "/gzip-bomb":
            body = gzip_bomb()
            self.send(200, body, headers=[("Content-Encoding", "gzip")])
        elif path == "/fake-gzip":
            self.send(200, items_body(1), headers=[("Content-Encoding", "gzip")])
        elif path == "/huge-header":
            self.send(200, items_body(1), headers=[("X-Huge", "a" * (1 << 20))])
        elif path == "/many-headers":
            self.send(200, items_body(1), headers=[(f"X-H{i}", "b" * 50) for i in range(20000)])
        elif path == "/slow":
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
            try:
                for _ in range(1000):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                pass
            return False
        elif path == "/folded-link":
            # The Link header folded over two lines (obsolete line folding).
            links = [("Link", f'</folded-link?page={page + 1}>;\r\n rel="next"')] if page < 3 else []
            self.send(200, items_body(page), headers=links)
        elif path == "/then-slow":
            # Two pages, then one that never ends (a byte a second).
            if page >= 3:
                return self.route("/slow", query, headers)
            self.send(200, items_body(page), headers=[("Link", f'</then-slow?page={page + 1}>; rel="next"')])
        elif path == "/not-http":
            self.wfile.write(b"SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
            self.wfile.flush()
            time.sleep(5)
            return False
        elif path == "/bad-status":
            self.wfile.write(b"HTTP/1.1 " + query.get("code", "abc").encode() + b" OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            self.wfile.flush()
            return False
        elif path == "/bad-chunk":
            chunks = b"zz\r\n{}\r\n0\r\n\r\n" if query.get("kind") == "hex" else b"2\r\n{}XX0\r\n\r\n"
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                             b"Connection: close\r\n\r\n" + chunks)
            self.wfile.flush()
            return False
        elif path == "/next-latin1":
            body = items_body(page)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Next-Page: caf\xe9\r\n"
                             b"Content-Length: " + str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
            self.wfile.flush()
            return False
        elif path == "/not-json":
            self.send(200, b"<html><body>Service moved</body></html>", content_type="text/html")
        elif path == "/truncated":
            self.send(200, b'{"items":[{"id":1},{"id":')
        elif path == "/not-array":
            self.send(200, b'{"items": {"id": 1}}')
        elif path == "/redirect-other":
            self.send(302, headers=[("Location", f"http://localhost:{port}/items?page=1")])
        elif path == "/redirect-query-other":
            self.send(302, headers=[("Location", f"http://localhost:{port}/items?{raw_query}")])
        elif path == "/redirect-loop-a":
            self.send(302, headers=[("Location", "/redirect-loop-b")])
        elif path == "/redirect-loop-b":
            self.send(302, headers=[("Location", "/redirect-loop-a")])
        elif path == "/redirect-file":
            self.send(302, headers=[("Location", "file:///etc/passwd")])
        elif path == "/link-other":
            links = [("Link", f'<http://localhost:{port}/link-other?page={page + 1}>; rel="next"')] if page == 1 else []
            self.send(200, items_body(page), headers=links)
        elif path.endswith("/link-combining"):
            links = [("Link", f'<http://localhost:{port}/\u0301@127.0.0.1:{port}/link-combining?page=2>; rel="next"')] if page == 1 else []
            self.send(200, items_body(page), headers=links)
        elif path == "/link-port":
            to, scheme = int(query.get("to", "0") or 0), query.get("scheme", "http")
            self.send(200, items_body(1), headers=[("Link", f'<{scheme}://127.0.0.1:{to}/items?page=2>; rel="next"')])
        elif path == "/redirect-port":
            to, scheme = int(query.get("to", "0") or 0), query.get("scheme", "http")
            self.send(302, headers=[("Location", f"{scheme}://127.0.0.1:{to}/items?page=1")])
        elif path == "/mixed-items":
            self.send(200, b'{"items": [{"a": 1, "b": 2}, 7, "s"]}')
        elif path == "/link-latin1":
            links = [("Link", '</link-latin1?page=2&q=caf\udce9>; rel="next"')] if page == 1 else []
            self.send(200, items_body(page), headers=links)
        elif path == "/link-file":
            self.send(200, items_body(1), headers=[("Link", '<file:///etc/passwd>; rel="next"')])
        elif path == "/next-nul":
            nxt = f"http://127.0.0.1:1\u0000@127.0.0.1:{port}/items?page=2"
            self.send(200, json.dumps({"items": [{"id": 1}], "next": nxt}).encode())
        elif path == "/link-gopher":
            self.send(200, items_body(1), headers=[("Link", '<gopher://127.0.0.1/1>; rel="next"')])
        elif path == "/trailer":
            body = items_body(page)
            link = f'Link: </trailer?page={page + 1}>; rel="next"\r\n' if page < 3 else ""
            self.wfile.write(("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                              + link + "Trailer: X-Checksum\r\n\r\n").encode()
                             + b"%x\r\n" % len(body) + body + b"\r\n0\r\nX-Checksum: abc\r\n\r\n")
        elif path in ("/link-cycle", "/link-fragment"):
            nxt = {1: 2, 2: 3, 3: 2}[page]
            fragment = f"#v{len(seen)}" if path == "/link-fragment" else ""
            self.send(200, items_body(page), headers=[("Link", f'<{path}?page={nxt}{fragment}>; rel="next"')])
        elif path == "/bad-third":
            if page == 3:
                self.send(200, b'{"items":[{"id":1},{"id":')
            else:
                self.send(200, items_body(page), headers=[("Link", f'</bad-third?page={page + 1}>; rel="next"')])
        elif path == "/cursor-cycle":
            c = query.get("c", "")
            nxt = {"": "a", "a": "b", "b": "a"}[c]
            body = json.dumps({"items": [{"id": c or "first"}], "next": nxt}).encode()
            self.send(200, body)
        elif path == "/retry-huge":
            self.send(429, b'{"message":"slow down"}', headers=[("Retry-After", "99999999999999999")])
        elif path == "/reset-huge":
            self.send(403, b'{"message":"rate limited"}',
                      headers=[("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", "9223372036854775807")])
        elif path == "/token-huge":
            self.send(200, json.dumps({"access_token": "tok-huge-1", "expires_in": 1000000000000}).encode())
        elif path == "/token-form":
            self.send(200, b"access_token=tok-form%2B1&expires_in=3600&token_type=bearer",
                      content_type="application/x-www-form-urlencoded")
        elif path == "/token-html":
            self.send(200, b"<html>access token=tok-html-secret-1</html>", content_type="text/html")
        elif path == "/token-refused-form":
            self.send(200, b"error=bad_verification_code&error_description=The+code+passed+is+incorrect+or+expired."
                           b"&error_uri=https%3A%2F%2Fdocs.example%2Foauth",
                      content_type="application/x-www-form-urlencoded")
        elif path == "/token-refused-json":
            self.send(200, json.dumps({"error": "invalid_client", "other": "tok-other-secret-1",
                                       "error_description": "no client with secret client-secret-789"}).encode())
        elif path == "/token-refused-400":
            # RFC 6749 5.2's refusal, with the form it was sent echoed back beside it.
            with seen_lock:
                echo = seen[-1]["body"]
            self.send(400, json.dumps({"error": "invalid_client", "error_description": "unknown client", "echo": echo}).encode())
        elif path == "/token-nested":
            self.send(200, json.dumps({"data": {"access_token": "tok-nested-secret-1"}}).encode())
        elif path == "/token-short":
            self.send(200, b'{"access_token": "a"}')
        elif path == "/token-crlf":
            self.send(200, json.dumps({"access_token": "tok-crlf\r\nX-Injected: yes"}).encode())
        elif path == "/post-307-other":
            self.send(307, headers=[("Location", f"http://localhost:{port}/items?page=1")])
        elif path == "/post-307-same":
            self.send(307, headers=[("Location", "/items?page=1")])
        elif path == "/post-303":
            self.send(303, headers=[("Location", "/items?page=1")])
        elif path == "/two-links":
            links = [("Link", '</two-links?page=1>; rel="first"')]
            if page < 3:
                links.append(("Link", f'</two-links?page={page + 1}>; rel="next"'))
            self.send(200, items_body(page), headers=links)
        elif path == "/link-quoted":
            link = (f'<http://127.0.0.1:{port}/items?page=2>; title="<http://localhost:{port}/evil>"; '
                    'foo="a;rel=prev"; rel="next"')
            self.send(200, items_body(page), headers=[("Link", link)] if page == 1 else [])
        elif path == "/http-lines":
            self.send(200, items_body(1), headers=[(f"HTTP/x-pad{i}", "a" * 200) for i in range(1000)])
        elif path == "/echo-secret-encoded":
            token = (headers.get("authorization") or "")[len("Bearer "):].encode("latin-1").decode("utf-8", "replace")
            for _ in range(int(query.get("times", "1"))):
                token = quote(token, safe="")
            self.send(401, ("x" * int(query.get("pad", "0")) + token).encode())
        elif path in ("/echo-secret", "/echo-secret-cut"):
            token = (headers.get("authorization") or "")[len("Bearer "):].encode("latin-1").decode("utf-8", "replace")
            if path == "/echo-secret":
                body = ('{"error":"bad token ' + json.dumps(token)[1:-1].replace("/", "\\/") + '"}').encode()
            else:
                body = ("x" * 185 + token).encode()
            self.send(401, body)
        elif path == "/echo-query-link":
            rest = "&".join(p for p in raw_query.split("&") if not p.startswith("page="))
            origin = f"http://localhost:{port}" if "other=1" in raw_query.split("&") else ""
            links = [("Link", f'<{origin}/echo-query-link?page={page + 1}&{rest}>; rel="next"')] if page < 3 else []
            self.send(200, items_body(page), headers=links)
        elif path == "/wild":
            groups = {"missing": None, "null": "null", "object": '{"a": {"repos": [1]}}',
                      "element": '[{"repos": [1, 2]}, {"repos": "oops"}, {"repos": [3]}]',
                      "nothing": '[{"repos": [1]}, {"name": "x"}]', "empty": "[]"}[query.get("case", "")]
            body = '{"other": []}' if groups is None else '{"groups": ' + groups + '}'
            self.send(200, body.encode())
        elif path in ("/echo-key-lower", "/link-key-lower", "/redirect-key", "/redirect-key-other"):
            key = quote(query.get("api_key", ""), safe="")
            lower = re.sub("%[0-9A-F]{2}", lambda m: m.group(0).lower(), key)
            if path == "/echo-key-lower":
                self.send(400, ('{"error":"bad key ' + lower + '"}').encode())
            elif path == "/link-key-lower":
                links = [("Link", f'</link-key-lower?page={page + 1}&api_key={lower}>; rel="next"')] if page < 3 else []
                self.send(200, items_body(page), headers=links)
            else:
                host = f"http://localhost:{port}" if path.endswith("other") else ""
                self.send(302, headers=[("Location", f"{host}/items?page=1&api_key={lower}")])
        elif path == "/echo-auth":
            token = (headers.get("authorization") or "").partition(" ")[2]
            target = f"http://localhost:{port}/items?page=2&access_token={quote(token, safe='')}"
            if query.get("via") == "redirect":
                self.send(302, headers=[("Location", target)])
            else:
                self.send(200, items_body(1), headers=[("Link", f'<{target}>; rel="next"')])
        elif path == "/echo-same":
            credential = (headers.get("authorization") or "").partition(" ")[2] or headers.get("x-api-key") or ""
            if query.get("form") in ("url", "unpadded"):
                credential = credential.rstrip("=")
                if query.get("form") == "url":
                    credential = credential.replace("+", "-").replace("/", "_")
            if query.get("via") == "cursor":
                page = int((query.get("cursor") or "1").partition("-")[0])
                body = {"items": [{"id": page * 10 + i} for i in range(2)],
                        "next": f"{page + 1}-{credential}" if page < 2 else None}
                self.send(200, json.dumps(body).encode())
            else:
                echoed = quote(credential, safe="")
                if query.get("via") == "link2":
                    echoed = quote(echoed, safe="")
                links = [("Link", f'</echo-same?via={query.get("via")}&page={page + 1}&t={echoed}>; rel="next"')] if page < 2 else []
                self.send(200, items_body(page), headers=links)
        elif path == "/cursor-last-no-id":
            pages = {"": [{"id": "a"}, {"id": "b"}, {"uid": "c"}], "b": [{"id": "d"}], "c": [{"id": "e"}]}
            data = pages.get(query.get("starting_after", ""), [])
            self.send(200, json.dumps({"data": data, "has_more": True}).encode())
        elif path == "/capped":
            total, cap = int(query.get("total", "45")), int(query.get("cap", "7"))
            start = int(query["offset"]) if "offset" in query else (page - 1) * cap
            records = [{"id": i} for i in range(start, min(total, start + cap))]
            self.send(200, json.dumps({"items": records, "total": total}).encode())
        elif path == "/empty-middle":
            n = int(query.get("cursor", "c0")[1:] or 0)
            records = [] if n == 2 else [{"id": n * 10 + i} for i in range(10)]
            self.send(200, json.dumps({"items": records, "has_more": n < 4, "next": f"c{n + 1}" if n < 4 else None}).encode())
        elif path == "/clamp-total":
            total = query.get("total", "4")
            body = '{"items": %s, "total": %s}' % (json.dumps([{"id": min(page, 2) * 10 + i} for i in range(2)]), total)
            self.send(200, body.encode(), headers=[("X-Total-Count", total)])
        elif path == "/slow-redirect":
            n = int(query.get("n", "1"))
            time.sleep(0.4)
            if n < 8:
                self.send(302, headers=[("Location", f"/slow-redirect?n={n + 1}")])
            else:
                self.send(200, items_body(1))
        elif path == "/token-429":
            self.send(429, b'{"error":"slow down"}', headers=[("Retry-After", "120")])
        elif path == "/gzip-trailing":
            tail = gzip.compress(b" ") if query.get("members") == "2" else b"GARBAGE-TRAILING-BYTES"
            self.send(200, gzip.compress(items_body(1)) + tail, headers=[("Content-Encoding", "gzip")])
        elif path == "/odd-links":
            if query.get("case") == "empty":
                self.send(200, items_body(page), headers=[("Link", '<>; rel="next"')])
            elif query.get("case") == "malformed":
                self.send(200, items_body(page), headers=[("Link", '</odd-links?case=malformed&q=a>b>; rel=next')])
            elif query.get("case") == "unclosed":
                link = '</odd-links?case=unclosed&page=2>; rel="next", ' + "<a," * 21000
                self.send(200, items_body(page), headers=[("Link", link)] if page == 1 else [])
            elif page == 1:
                self.send(200, items_body(page), headers=[("Link ", '</odd-links?case=spaced&page=2>; rel="next"')])
            else:
                self.send(200, items_body(page))
        elif path.startswith("/repos/"):
            self.send(200, items_body(page))
        elif path == "/self-prev":
            self.send(200, items_body(1), headers=[("Link", '</self-prev>; rel="first prev"')])
        elif path == "/has-more":
            flag = {"missing": None, "yes": '"yes"', "numbers": "1" if page == 1 else "0", "null": "null"}[query.get("case", "")]
            body = '{"items": [{"id": ' + str(page) + '}]' + ('' if flag is None else ', "has_more": ' + flag) + '}'
            self.send(200, body.encode())
        elif path == "/no-content":
            self.send(204)
        elif path == "/cursor-object":
            self.send(200, json.dumps({"items": [{"id": 1}], "next": {"after": 2}}).encode())
        elif path == "/cursor-long":
            self.send(200, json.dumps({"items": [{"id": 1}], "next": "x" * 100000}).encode())
        elif path == "/limited-long":
            reset = query.get("reset") or str(int(time.time()) + int(query.get("ahead", "1000")))
            if reset == "fraction":
                reset = f"{time.time() + 500.5:.1f}"
            self.send(200, items_body(page), headers=[("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", reset)])
        elif path == "/limited-third":
            spent = [("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", str(int(time.time()) + 1000))]
            self.send(200, items_body(page), headers=spent if page == 3 else [("X-RateLimit-Remaining", "10")])
        elif path == "/busy-third":
            with seen_lock:
                asked = sum(1 for s in seen if s["path"] == path and s["query"] == f"page={page}")
            if page == 3 and asked == 1:
                self.send(429, b'{"message":"slow down"}', headers=[("Retry-After", "7")])
            else:
                self.send(200, items_body(page))
        else:
            self.send(404, b'{"message":"no such fixture"}')
        return True


if __name__ == "__main__":
    loopback.serve(Handler)
