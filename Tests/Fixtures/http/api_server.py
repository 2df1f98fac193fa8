#!/usr/bin/env python3
"""A loopback server answering as real paging APIs do, for the http source's tests.

Prints "PORT <n>" once it listens on 127.0.0.1; exits when its standard input closes.
25 records {"id": 1..25, "name": "r<id>", "group": ...} are served as:
  GET  /stripe/v1/customers?limit=N&starting_after=ID   {"object":"list","data":[...],"has_more":bool}
  GET  /gitlab/projects?page=P&per_page=N               a JSON array; X-Next-Page ("" on the last),
                                                        X-Total, X-Total-Pages headers
  POST /slack/conversations.list  {"cursor": C, "limit": N}
                                   {"ok":true,"channels":[...],"response_metadata":{"next_cursor":C}}
  GET  /slack/last-body            the body of the last POST to /slack/conversations.list, as sent
  GET  /nested?page=P              {"groups":[{"repos":[...]},{"repos":[...]}]} (5 a group, 2 groups
                                   a page, 3 pages)
  POST /oauth/token                client credentials (client_id "cid", client_secret "csecret"):
                                   {"access_token":"tok-<n>","expires_in":2}; tokens expire after 2 s
  GET  /oauth/items?page=P         needs "Authorization: Bearer tok-<n>" with a live token, else 401
  POST /oauth/revoke               every token issued stops working (the client's cache does not know)
  GET  /oauth/refused              401 whatever the token
  GET  /linked?api_key=K&page=P    needs api_key=k-123, else 401; 10 records a page, and a Link
                                   rel="next" that repeats the query (the key too), as GitHub's do;
                                   with &elsewhere the Link names localhost instead of 127.0.0.1;
                                   a bad key is echoed in the 401
  GET  /link-styles?page=P        10 records a page; Link headers as RFC 8288 allows them: several
                                   links, relative targets, rel in any case, unquoted, with several
                                   relation types and with other parameters around it
  GET  /github/limited?page=P      the first request of each page: 403 with X-RateLimit-Remaining: 0
                                   and X-RateLimit-Reset (now + 1 s); then the page
  GET  /keyed?page=P&api_key=K     needs api_key=k-123, else 401 echoing the query
  GET  /events?since=S&page=P&per_page=N
                                   the events updated after S ("" = all), oldest first:
                                   [{"id": n, "updated_at": "2024-01-01T00:00:<n>Z"}, ...];
                                   12 at the start
  POST /events/add {"count": n}    adds n events, updated after every other ("updated_at": S
                                   gives them that value instead)
  POST /events/fail {"page": P, "times": n}
                                   the next n requests (default 1) for page P answer 500
  GET  /events/since               every since asked for, in order
  GET  /echo?page=P&q=Q            [{"id": P, "q": Q}] under /items, Link to page P+1 with q
                                   echoed (pages 1-3); with forge=1 and page=P&after=A, the
                                   next cursor /next is "${API_TEST_TOKEN}" on page 1
  GET  /echo/seen                  "q|after" of every /echo request, in order
  GET  /stats                      {"token_requests": n, "requests": n}
"""
import json
import threading

import loopback
import time
from urllib.parse import parse_qs, quote

RECORDS = [{"id": i, "name": f"r{i}", "group": i % 3} for i in range(1, 26)]
lock = threading.Lock()
tokens = {}            # token -> expiry time
stats = {"token_requests": 0, "requests": 0}
since_asked = []
echo_seen = []     # q|after of every /echo request
limited_seen = set()
events = [{"id": i, "updated_at": f"2024-01-01T00:00:{i:02d}Z"} for i in range(1, 13)]
failing_pages = {}     # page -> how many more requests for it fail
slack_body = [""]      # the body of the last POST to /slack/conversations.list


class Handler(loopback.Handler):
    def send(self, status, obj, headers=()):
        super().send(status, json.dumps(obj).encode(), headers)

    def answer(self, method, url, q, headers, body):
        with lock:
            if url.path != "/stats":
                stats["requests"] += 1
        self.route(method, url.path, q, headers, body)

    def route(self, method, path, q, headers, body):
        if path == "/stats":
            with lock:
                return self.send(200, dict(stats))
        if path.startswith("/events"):
            return self.events(method, path, q, body)
        if path == "/stripe/v1/customers":
            limit = int(q.get("limit", "10"))
            after = q.get("starting_after", "")
            start = 0 if not after else next(i for i, r in enumerate(RECORDS) if str(r["id"]) == after) + 1
            page = RECORDS[start:start + limit]
            return self.send(200, {"object": "list", "data": page, "has_more": start + limit < len(RECORDS)})
        if path == "/gitlab/projects":
            page, per = int(q.get("page", "1")), int(q.get("per_page", "20"))
            chunk = RECORDS[(page - 1) * per: page * per]
            pages = (len(RECORDS) + per - 1) // per
            nxt = str(page + 1) if page < pages else ""
            return self.send(200, chunk, headers=[("X-Next-Page", nxt), ("X-Total", len(RECORDS)), ("X-Total-Pages", pages)])
        if path == "/slack/last-body":
            with lock:
                return self.send(200, {"body": slack_body[0]})
        if path == "/slack/conversations.list" and method == "POST":
            with lock:
                slack_body[0] = (body or b"").decode()
            req = json.loads(body or b"{}")
            cursor, limit = req.get("cursor", ""), int(req.get("limit", 10))
            start = int(cursor.split("-")[1]) if cursor else 0
            page = RECORDS[start:start + limit]
            nxt = f"c-{start + limit}" if start + limit < len(RECORDS) else ""
            return self.send(200, {"ok": True, "channels": page, "response_metadata": {"next_cursor": nxt}})
        if path == "/nested":
            page = int(q.get("page", "1"))
            if page > 3:
                return self.send(200, {"groups": []})
            base = (page - 1) * 10
            groups = [{"repos": [{"id": base + g * 5 + i, "extra": {"deep": True}} for i in range(5)]} for g in range(2)]
            return self.send(200, {"groups": groups})
        if path == "/oauth/token" and method == "POST":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            if form.get("grant_type") != "client_credentials" or form.get("client_id") != "cid" or form.get("client_secret") != "csecret":
                return self.send(401, {"error": "invalid_client"})
            with lock:
                stats["token_requests"] += 1
                token = f"tok-{stats['token_requests']}"
                tokens[token] = time.time() + 2
            return self.send(200, {"access_token": token, "token_type": "bearer", "expires_in": 2})
        if path == "/oauth/items":
            auth = headers.get("authorization", "")
            token = auth[7:] if auth.startswith("Bearer ") else ""
            with lock:
                live = tokens.get(token, 0) > time.time()
            if not live:
                return self.send(401, {"error": "expired or missing token"})
            page = int(q.get("page", "1"))
            return self.send(200, {"items": RECORDS[(page - 1) * 5: page * 5]})
        if path == "/oauth/revoke" and method == "POST":
            with lock:
                tokens.clear()
            return self.send(200, {})
        if path == "/oauth/refused":
            return self.send(401, {"error": "invalid_token"})
        if path == "/linked":
            if q.get("api_key") != "k-123":
                return self.send(401, {"message": "bad key: " + q.get("api_key", "")})
            page = int(q.get("page", "1"))
            links = []
            if page * 10 < len(RECORDS):
                host = headers.get("host", "127.0.0.1")
                if "elsewhere" in q:
                    host = host.replace("127.0.0.1", "localhost")
                    q["api_key"] += "&elsewhere=1"
                links = [("Link", f'<http://{host}/linked?api_key={q["api_key"]}&page={page + 1}>; rel="next"')]
            return self.send(200, RECORDS[(page - 1) * 10: page * 10], headers=links)
        if path == "/link-styles":
            page = int(q.get("page", "1"))
            link = {1: '<http://example.invalid/link-styles?page=3>; rel="last", '
                       '</link-styles?page=2> ;  title="two; of three" ; REL = "Next" , <https://example.invalid/x>; rel="alternate"',
                    2: '</link-styles?page=1>; rel="prev first",\t</link-styles?page=3>;rel=next'}.get(page)
            return self.send(200, RECORDS[(page - 1) * 10: page * 10], headers=[("Link", link)] if link else [])
        if path == "/github/limited":
            page = int(q.get("page", "1"))
            with lock:
                first = page not in limited_seen
                limited_seen.add(page)
            if first:
                return self.send(403, {"message": "API rate limit exceeded"},
                                 headers=[("X-RateLimit-Remaining", "0"), ("X-RateLimit-Reset", int(time.time()) + 1)])
            return self.send(200, RECORDS[(page - 1) * 10: page * 10])
        if path == "/echo":
            # Echoes q in its items and in the next link (percent-encoded, as GitHub does), and
            # with forge=1 says its next cursor is "${API_TEST_TOKEN}": keys a client or a
            # server wrote, holding what reads as a reference to a secret of the config.
            page = int(q.get("page", "1"))
            with lock:
                echo_seen.append(q.get("q", "") + "|" + q.get("after", ""))
            if "forge" in q:
                return self.send(200, {"items": [{"id": page}], "next": "${API_TEST_TOKEN}" if page == 1 else None})
            link = [("Link", f'</echo?page={page + 1}&q={quote(q.get("q", ""), safe="")}>; rel="next"')] if page < 3 else []
            return self.send(200, {"items": [{"id": page, "q": q.get("q", "")}]}, headers=link)
        if path == "/echo/seen":
            with lock:
                return self.send(200, list(echo_seen))
        if path == "/keyed":
            if q.get("api_key") != "k-123":
                return self.send(401, {"message": "bad key in " + "&".join(f"{k}={v}" for k, v in q.items())})
            page = int(q.get("page", "1"))
            return self.send(200, RECORDS[(page - 1) * 10: page * 10])
        return self.send(404, {"message": "no such fixture"})

    def events(self, method, path, q, body):
        with lock:
            if path == "/events/add" and method == "POST":
                order = json.loads(body)
                for _ in range(order["count"]):
                    n = len(events) + 1
                    events.append({"id": n, "updated_at": order.get("updated_at", f"2024-01-01T00:{n // 60:02d}:{n % 60:02d}Z")})
                return self.send(200, {"events": len(events)})
            if path == "/events/since":
                return self.send(200, list(since_asked))
            if path == "/events/fail" and method == "POST":
                order = json.loads(body)
                failing_pages[order["page"]] = order.get("times", 1)
                return self.send(200, {})
            page, size, since = int(q.get("page", "1")), int(q.get("per_page", "5")), q.get("since", "")
            since_asked.append(since)
            if failing_pages.get(page, 0) > 0:
                failing_pages[page] -= 1
                return self.send(500, {"message": "the events store is down"})
            new = [e for e in events if e["updated_at"] > since]
        return self.send(200, new[(page - 1) * size: page * size])


if __name__ == "__main__":
    loopback.serve(Handler)
