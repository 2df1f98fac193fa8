import Foundation
import LoopbackHTTP
import Paging
import PagingHost
import PagingTestSupport
import Testing

/// `pager serve`: pages under signed cursors, user info from the manifest's serve_params,
/// health, metrics, limits, bad requests, and SIGTERM draining what is in flight.
@Suite("pager serve")
struct ServeCommandTests {
    static let secret = ["PAGER_SERVE_SECRET": "a secret of more than sixteen bytes"]

    /// A manifest over the offsets fixture source (45 items, pages of 20), `tag` a serve param.
    func manifest(_ extra: String = "", interceptors: String = "[]", source: String = #""count": 45"#) async throws -> String {
        let folder = scratchFolder()
        try """
        {"source": {"plugin": "\(try await fixturePlugin("interceptor_work"))", "id": "offsets", "config": {\(source)}},
         "interceptors": \(interceptors), "page_size": 20, "serve_params": ["tag"]\(extra)}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return folder + "/m.json"
    }

    func numbers(_ reply: HTTPReply) throws -> [Int] {
        try #require(reply.json()["items"] as? [[String: Any]]).compactMap { $0["n"] as? Int }
    }

    /// The items of the first page and of each page its `next` cursors lead to, as a client
    /// reads to the end (100 pages at most), the count of pages and the last answer.
    func followingNextCursors(_ server: ServeProcess) throws -> (items: [Int], pages: Int, last: HTTPReply) {
        var reply = try server.get("/pages")
        var items = try numbers(reply), pages = 1
        while let next = try reply.json()["next"] as? String, pages < 100 {
            reply = try server.get("/pages?cursor=\(next)")
            #expect(reply.status == 200, "\(reply.text)")
            items += try numbers(reply)
            pages += 1
        }
        return (items, pages, reply)
    }

    /// The same with every plugin in a child process of its own (`--isolate-all`).
    @Test(.timeLimit(.minutes(3)), arguments: [[], ["--isolate-all"]])
    func pagesThroughEveryItem_onceAndInOrder_andBack(options: [String]) async throws {
        let server = try await ServeProcess([try await manifest()] + options, environment: Self.secret)
        var reply = try server.get("/pages")
        #expect(reply.status == 200 && reply.headers["content-type"] == "application/json", "\(reply.text)")
        var items = try numbers(reply)
        #expect(try reply.json()["prev"] is NSNull)
        var pages = [reply]
        while let next = try reply.json()["next"] as? String {
            reply = try server.get("/pages?cursor=\(next)")
            #expect(reply.status == 200, "\(reply.text)")
            items += try numbers(reply)
            pages.append(reply)
        }
        #expect(items == Array(0..<45) && pages.count == 3)
        // The last page's prev cursor names the page before it.
        let prev = try #require(try pages[2].json()["prev"] as? String)
        #expect(try numbers(try server.get("/pages?cursor=\(prev)")) == Array(20..<40))
        #expect(await server.stop() == 0, "\(server.stderr)")
    }

    /// A source whose key chain names pages past its last (45 items, a chain to 1,000): the
    /// first empty page met going on gives no next cursor. Each gave one, and a client that
    /// follows cursors until there is none fetched 47 empty pages (with a chain without end,
    /// for ever).
    @Test(.timeLimit(.minutes(3)))
    func anEmptyPageNamedByTheKeyChainAlone_endsTheCursors() async throws {
        let server = try await ServeProcess([try await manifest(source: #""count": 45, "count_after": 1000"#)], environment: Self.secret)
        let (items, pages, last) = try followingNextCursors(server)
        #expect(items == Array(0..<45))
        #expect(pages == 4, "3 pages of items, then one empty page")
        // Its previous cursor still leads back to the items.
        let prev = try #require(try last.json()["prev"] as? String)
        #expect(try numbers(try server.get("/pages?cursor=\(prev)")) == Array(40..<45))
        #expect(await server.stop() == 0, "\(server.stderr)")
    }

    /// The empty page a store kept where the data ended is asked of the source once more when a
    /// client reaches it: after the data grew, a later server's clients stopped there (30 of 38
    /// items).
    @Test(.timeLimit(.minutes(3)))
    func anEmptyPageAStoreKept_isAskedOfTheSource_beforeItEndsAWalk() async throws {
        let folder = scratchFolder(), plugin = try await fixturePlugin("interceptor_work")
        for count in [30, 38] {
            // The key chain names pages past the data (to 45), as an offset API's does.
            try """
            {"source": {"plugin": "\(plugin)", "id": "offsets", "config": {"count": \(count), "count_after": 45, "change_at": 100000}},
             "interceptors": [{"plugin": "sqlite-store", "config": {"path": "pages.db"}}], "page_size": 10}
            """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
            let server = try await ServeProcess([folder + "/m.json"], environment: Self.secret)
            #expect(try followingNextCursors(server).items == Array(0..<count), "\(server.stderr)")
            #expect(await server.stop() == 0, "\(server.stderr)")
        }
    }

    /// A source that caps its pages below the page size, unmarked, behind a filter that empties
    /// one: the emptied page is not the end, and its cursor leads on (the client stopped at 0, 1).
    @Test(.timeLimit(.minutes(3)))
    func aCappedPageAFilterEmptied_leadsOn() async throws {
        let filter = #"[{"plugin": "filter", "config": {"where": [{"pointer": "/n", "not_equals": 2}, {"pointer": "/n", "not_equals": 3}]}}]"#
        let server = try await ServeProcess([try await manifest(interceptors: filter, source: #""count": 6, "cap": 2"#)], environment: Self.secret)
        let (items, pages, _) = try followingNextCursors(server)
        #expect(items == [0, 1, 4, 5], "\(server.stderr)")
        #expect(pages == 3, "[0, 1], the page emptied, [4, 5]")
        #expect(await server.stop() == 0, "\(server.stderr)")
    }

    @Test(.timeLimit(.minutes(3)))
    func serveParams_reachTheSource_andStayWithTheCursors() async throws {
        let server = try await ServeProcess([try await manifest()], environment: Self.secret)
        let first = try server.get("/pages?tag=blue")
        let tags = try #require(first.json()["items"] as? [[String: Any]]).compactMap { $0["tag"] as? String }
        #expect(tags == Array(repeating: "blue", count: 20), "\(first.text)")
        let next = try #require(try first.json()["next"] as? String)
        let second = try #require(try server.get("/pages?cursor=\(next)").json()["items"] as? [[String: Any]])
        #expect(second.compactMap { $0["tag"] as? String } == Array(repeating: "blue", count: 20))
        // A cursor carries its parameters: more beside it is refused.
        let both = try server.get("/pages?cursor=\(next)&tag=red")
        #expect(both.status == 400 && both.text.contains("send it alone"), "\(both.text)")
    }

    /// Cursors are signed: a made-up one, a changed one and one signed with another secret are
    /// refused; servers that share the secret take each other's.
    @Test(.timeLimit(.minutes(3)))
    func cursors_areSigned_andSharedByServersWithTheSameSecret() async throws {
        let manifest = try await manifest()
        let server = try await ServeProcess([manifest], environment: Self.secret)
        let twin = try await ServeProcess([manifest], environment: Self.secret)
        let other = try await ServeProcess([manifest], environment: ["PAGER_SERVE_SECRET": "another secret, sixteen bytes or more"])
        let next = try #require(try server.get("/pages").json()["next"] as? String)
        #expect(try numbers(try twin.get("/pages?cursor=\(next)")) == Array(20..<40))
        var tampered = Array(next.utf8)
        tampered[6] = tampered[6] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        for cursor in [String(decoding: tampered, as: UTF8.self), "AQECAAAAMjA", "not base64!", String(repeating: "A", count: 9_000)] {
            let reply = try server.get("/pages?cursor=\(cursor.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)")
            #expect(reply.status == 400 && (try? reply.json()["error"]) is String, "\(cursor.prefix(20)): \(reply.text)")
        }
        // Found by a probe: another spelling of the same bytes (the unused bits of the last
        // character, padding) was taken: a cursor has one spelling.
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        for spelling in alphabet.map({ String(next.dropLast()) + String($0) }).filter({ $0 != next }) + [next + "=", next + "%3D", next + "=="] {
            let reply = try server.get("/pages?cursor=\(spelling)")
            #expect(reply.status == 400, "\(spelling): \(reply.text)")
        }
        let foreign = try other.get("/pages?cursor=\(next)")
        #expect(foreign.status == 400 && foreign.text.contains("its signature does not match"), "\(foreign.text)")
        // The same manifest elsewhere takes them; one of another source, under the same secret,
        // refuses them (found by a probe: a cursor was served from another file).
        let copy = try await ServeProcess([try await self.manifest()], environment: Self.secret)
        #expect(try numbers(try copy.get("/pages?cursor=\(next)")) == Array(20..<40))
        let otherSource = try String(contentsOfFile: manifest, encoding: .utf8).replacingOccurrences(of: #""count": 45"#, with: #""count": 46"#)
        let otherFile = scratchFolder() + "/m.json"
        try otherSource.write(toFile: otherFile, atomically: true, encoding: .utf8)
        let otherService = try await ServeProcess([otherFile], environment: Self.secret)
        let refused = try otherService.get("/pages?cursor=\(next)")
        #expect(refused.status == 400 && refused.text.contains("its signature does not match"), "\(refused.text)")
        // Found by a probe: one of another page size, or user info, took them, and its pages
        // skipped or repeated items (a page number means other items at another page size).
        for (changed, with) in [(#""page_size": 20"#, #""page_size": 10"#), (#""serve_params""#, #""user_info": {"lang": "fr"}, "serve_params""#)] {
            let file = scratchFolder() + "/m.json"
            try String(contentsOfFile: manifest, encoding: .utf8).replacingOccurrences(of: changed, with: with).write(toFile: file, atomically: true, encoding: .utf8)
            let service = try await ServeProcess([file], environment: Self.secret)
            let reply = try service.get("/pages?cursor=\(next)")
            #expect(reply.status == 400 && reply.text.contains("its signature does not match"), "\(with): \(reply.text)")
        }
    }

    /// The value incremental loading keeps is no part of a cursor's signature: each `pager run`
    /// moves it, and a server restarted after one refused every cursor it had given out.
    @Test(.timeLimit(.minutes(3)))
    func cursors_outliveAChangeOfTheValueIncrementalLoadingKeeps() async throws {
        let manifest = try await manifest(#", "user_info": {"q": "after {state.since}"}, "incremental": {"cursor": "/n"}"#)
        let first = try await ServeProcess([manifest], environment: Self.secret)
        let next = try #require(try first.get("/pages").json()["next"] as? String)
        await first.stop()
        try #"{"default": {"since": 19}}"#.write(toFile: manifest + ".state", atomically: true, encoding: .utf8)
        let restarted = try await ServeProcess([manifest], environment: Self.secret)
        #expect(try numbers(try restarted.get("/pages?cursor=\(next)")) == Array(20..<40))
    }

    /// A client that sends a request and closes its connection has its load cancelled and its
    /// request slot freed: such loads went on for nobody until the timeout, each holding one of
    /// the slots (one address took them all with requests it never waited for).
    @Test(.timeLimit(.minutes(3)))
    func aClientThatGoesAway_hasItsLoadCancelled_andItsSlotFreed() async throws {
        let folder = scratchFolder()
        let never = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/never_complete.c", name: "never_complete_logging",
                                       extraFlags: ["-DFIXTURE_CANCEL_LOGS"])
        try #"{"source": {"plugin": "\#(never)"}, "page_size": 3, "timeout_ms": 600000, "serve_params": ["q"]}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let server = try await ServeProcess([folder + "/m.json", "--max-requests", "1"], environment: Self.secret)
        // The second client sends a byte more (the start of its next request) before it closes:
        // unread, it hid the close from the server.
        for round in 1...2 {
            let fd = try connectLoopback(port: server.port)
            let request = "GET /pages?q=gone\(round) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            #expect(await server.waitFor { $0.components(separatedBy: "never-complete: fetch ").count > round }, "\(server.stderr)")
            if round == 2 { _ = "G".withCString { send(fd, $0, 1, Int32(MSG_NOSIGNAL)) } }
            close(fd)
            // Cancelled for the plugin, and the one slot free again (counted once it is): the
            // next round's request is taken (it was answered 503 until the timeout).
            #expect(await server.waitFor { $0.components(separatedBy: "never-complete: cancel ").count > round }, "\(server.stderr)")
            #expect(await server.waitFor { _ in answeredClosed(server) == round }, "\((try? server.get("/metrics").text) ?? "")")
        }
        #expect(!server.stderr.contains("failed"), "\(server.stderr)")
    }

    /// The requests answered 499 (their client gone), from /metrics.
    func answeredClosed(_ server: ServeProcess) -> Int {
        let metrics = (try? server.get("/metrics").text) ?? ""
        return metrics.firstMatch(of: /route="\/pages",code="499"} (\d+)/).flatMap { Int($0.1) } ?? 0
    }

    /// A client that goes away leaves the load of its page running for the clients that asked
    /// for the same page meanwhile and wait for it: cancelled, it was fetched again for them
    /// from the start (a slow upstream was asked again after each client that gave up).
    @Test(.timeLimit(.minutes(3)))
    func aClientGoingAway_leavesTheLoadOthersWaitForRunning() async throws {
        let fetches = Locked(0)
        let answer = DispatchSemaphore(value: 0)
        let upstream = try LoopbackHTTPServer { _ in
            fetches.withLock { $0 += 1 }
            // Held until the test lets it go (or two minutes); then every other one goes too.
            _ = answer.wait(timeout: .now() + 120)
            answer.signal()
            return .json(#"{"items": [{"n": 1}]}"#)
        }
        upstream.start()
        defer {
            answer.signal()
            upstream.stop()
        }
        let folder = scratchFolder()
        try """
        {"source": {"plugin": "\(try shippedPlugin("http"))",
                    "config": {"url": "\(upstream.baseURL)/list?page=1", "items": "/items", "prefetch": false}},
         "page_size": 3, "timeout_ms": 600000}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let server = try await ServeProcess([folder + "/m.json"], environment: Self.secret)
        let leaving = try connectLoopback(port: server.port)
        _ = "GET /pages HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".withCString { send(leaving, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        #expect(await eventually { fetches.withLock { $0 } == 1 })
        let staying = WaitingServer.Request(server, "/pages")
        #expect(await server.waitFor { _ in ((try? server.get("/metrics").text) ?? "").contains("\npager_joined_requests 1\n") },
                "\((try? server.get("/metrics").text) ?? "")")
        close(leaving)
        #expect(await server.waitFor { _ in answeredClosed(server) == 1 }, "\((try? server.get("/metrics").text) ?? "")")
        answer.signal()
        let page = try #require(staying.answer())
        #expect(page.status == 200, "\(page.text)")
        #expect(try numbers(page) == [1])
        #expect(fetches.withLock { $0 } == 1)
    }

    /// Clients that asked for one page at once and all went away have its load cancelled: no
    /// slot stays taken. (Each waited on for the others, none cancelled it, and two clients that
    /// left had every request refused 503 until the request timeout.)
    @Test(.timeLimit(.minutes(3)))
    func clientsThatAllGoAway_haveTheirSharedLoadCancelled() async throws {
        let folder = scratchFolder()
        let never = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/never_complete.c", name: "never_complete_logging",
                                             extraFlags: ["-DFIXTURE_CANCEL_LOGS"])
        try #"{"source": {"plugin": "\#(never)"}, "page_size": 3, "timeout_ms": 600000}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let server = try await ServeProcess([folder + "/m.json", "--max-requests", "2"], environment: Self.secret)
        let clients = try (0..<2).map { _ in try connectLoopback(port: server.port) }
        for (index, client) in clients.enumerated() {
            _ = "GET /pages HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".withCString { send(client, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
            if index == 0 { #expect(await server.waitFor("never-complete: fetch "), "\(server.stderr)") }
        }
        #expect(await server.waitFor { _ in ((try? server.get("/metrics").text) ?? "").contains("\npager_joined_requests 1\n") })
        clients.forEach { close($0) }
        #expect(await server.waitFor("never-complete: cancel "), "\(server.stderr)")
        // Refused before it is read when loads given up on fill the slots; else a 400.
        #expect(await server.waitFor { _ in (try? server.get("/pages?unknown=1").status) == 400 }, "\(server.stderr)")
    }

    /// A client that goes away while the plugin is stuck in its fetch() call (which no cancel
    /// reaches) frees its slot at once all the same (it was held until the request timeout).
    /// Such loads that run on are bounded too: while --max-requests of them run, a request gets
    /// a 503 saying so (clients leaving at once could pile them up without end); once they end,
    /// requests are served again.
    @Test(.timeLimit(.minutes(3)))
    func aClientThatGoesAway_whileThePluginIsStuck_freesItsSlotAtOnce_andItsLoadIsBounded() async throws {
        let folder = scratchFolder()
        let wake = folder + "/wake"
        try #"{"source": {"plugin": "\#(try await fixturePlugin("blocking_fetch"))", "config": {"sleep_ms": 600000, "until_path": "\#(wake)"}}, "page_size": 3, "timeout_ms": 600000}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let server = try await ServeProcess([folder + "/m.json", "--max-requests", "1"], environment: Self.secret)
        defer { FileManager.default.createFile(atPath: wake, contents: nil) }
        let fd = try connectLoopback(port: server.port)
        let request = "GET /pages HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        #expect(await server.waitFor("blocking-fetch: asleep"), "\(server.stderr)")
        close(fd)
        #expect(await server.waitFor { _ in answeredClosed(server) == 1 }, "\((try? server.get("/metrics").text) ?? "")")
        #expect(!server.stderr.contains("blocking-fetch: woke"), "answered while the plugin still sleeps: \(server.stderr)")
        let refused = try server.get("/pages")
        #expect(refused.status == 503 && refused.text.contains("the server is still ending 1 load its clients left or that timed out"), "\(refused.status) \(refused.text)")
        FileManager.default.createFile(atPath: wake, contents: nil)
        #expect(await server.waitFor { _ in (try? server.get("/pages").status) == 200 }, "\(server.stderr)")
    }

    /// `--bind ::` listens on every address, IPv4 ones too (IPv4 clients could not connect).
    @Test(.timeLimit(.minutes(3)))
    func bindingTheIPv6AnyAddress_servesIPv4ClientsToo() async throws {
        let server = try await ServeProcess([try await manifest(), "--bind", "::"], environment: Self.secret)
        #expect(server.stderr.contains("listening on http://[::]:"), "\(server.stderr)")
        #expect(try server.get("/healthz").status == 200)
    }

    /// A binary secret file is its bytes: two different ones are two secrets (read as UTF-8,
    /// both were U+FFFD repeated, one secret), 6 bytes are 6 (they passed for 18), and a file
    /// other users can read is warned about.
    @Test(.timeLimit(.minutes(3)))
    func aBinarySecretFile_isItsBytes_andOneOthersCanReadIsWarnedAbout() async throws {
        let manifest = try await manifest()
        let folder = scratchFolder()
        func secretFile(_ name: String, _ bytes: [UInt8], mode: mode_t = 0o600) throws -> String {
            let path = folder + "/" + name
            try Data(bytes).write(to: URL(fileURLWithPath: path))
            #expect(chmod(path, mode) == 0)
            return path
        }
        let a = try await ServeProcess([manifest, "--secret-file", try secretFile("a", Array(0x80..<0xA0))])
        let b = try await ServeProcess([manifest, "--secret-file", try secretFile("b", [UInt8](repeating: 0xC0, count: 32))])
        let next = try #require(try a.get("/pages").json()["next"] as? String)
        let foreign = try b.get("/pages?cursor=\(next)")
        #expect(foreign.status == 400 && foreign.text.contains("its signature does not match"), "\(foreign.text)")
        #expect(!a.stderr.contains("can be read by other users"), "\(a.stderr)")
        let short = try await run(pagerCommand, ["serve", manifest, "--secret-file", try secretFile("short", [UInt8](repeating: 0xFF, count: 6) + [0x0A])])
        #expect(short.code == 2 && short.stderr.contains("the secret must be at least 16 bytes, got 6"), "\(short.stderr)")
        let shared = try await ServeProcess([manifest, "--secret-file", try secretFile("shared", Array("a secret of more than sixteen bytes\n".utf8), mode: 0o644)])
        #expect(shared.stderr.contains("can be read by other users (mode 644)"), "\(shared.stderr)")
        // The line break at its end is no part of it, nor of the variable's: one secret.
        let sharedNext = try #require(try shared.get("/pages").json()["next"] as? String)
        for secret in ["a secret of more than sixteen bytes", "a secret of more than sixteen bytes\n"] {
            let twin = try await ServeProcess([manifest], environment: ["PAGER_SERVE_SECRET": secret])
            #expect(try numbers(try twin.get("/pages?cursor=\(sharedNext)")) == Array(20..<40))
        }
    }

    /// Found by a probe: clients that send a request and never read the answer held a copy of
    /// their page each (60 of them, 600 MB). The answers not read yet are bounded
    /// (--max-unsent-mib): beyond, a 503 with Retry-After, counted as such.
    @Test(.timeLimit(.minutes(3)))
    func answersClientsDoNotRead_areBounded() async throws {
        let folder = scratchFolder()
        // A page twice what the socket's send buffer may grow to (tcp_wmem's largest, 4 MiB by
        // default), 8 MiB at least: the server holds the rest while its client does not read.
        let sendBuffer = (try? String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8))
            .flatMap { $0.split(whereSeparator: \.isWhitespace).last.flatMap { Int($0) } } ?? (4 << 20)
        let pageMiB = max(8, 2 * sendBuffer >> 20)
        let item = #"{"pad":""# + String(repeating: "x", count: 10_000) + "\"}\n"
        let perPage = pageMiB * 105
        try String(repeating: item, count: 2 * perPage).write(toFile: folder + "/big.jsonl", atomically: true, encoding: .utf8)
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "big.jsonl"}}, "page_size": \#(perPage)}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        // Room for one page (a little over pageMiB): the silent client's answer holds at least
        // the half its socket's send buffer cannot take (room for one and a half pages took a
        // second page too).
        let server = try await ServeProcess([folder + "/m.json", "--max-unsent-mib", "\(pageMiB + 1)"], environment: Self.secret)
        // A client that asks for a page and never reads it, with a small receive buffer: one
        // the kernel grows (tcp_rmem here lets it reach 32 MiB) took most of the page.
        let silent = try connectLoopback(port: server.port)
        var small: Int32 = 4_096
        setsockopt(silent, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var closed = false
        defer { if !closed { close(silent) } }
        _ = "GET /pages HTTP/1.1\r\nHost: x\r\n\r\n".withCString { send(silent, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
        // Once its answer is queued (counted), another page does not fit beside it.
        let deadline = ContinuousClock.now + .seconds(30)
        while !(try server.get("/metrics").text.contains(#"pager_http_requests_total{route="/pages",code="200"} 1"#)), ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(20))
        }
        var reply = try server.get("/pages")
        #expect(reply.status == 503 && reply.headers["retry-after"] == "1"
                && reply.text.contains("the server holds too many answers its clients have not read; try again shortly"),
                "\(reply.status) \(reply.headers) \(reply.text.prefix(200))")
        #expect(try server.get("/metrics").text.contains(#"pager_http_requests_total{route="/pages",code="503"}"#))
        // Small answers still fit; once the silent client is gone, its room is given back.
        #expect(try server.get("/healthz").status == 200)
        close(silent)
        closed = true
        reply = try server.get("/pages")
        while reply.status == 503, ContinuousClock.now < deadline {
            reply = try server.get("/pages")
        }
        #expect(reply.status == 200)
    }

    /// Found by a hostile probe: a request whose line and headers came within ~150 bytes of the
    /// memory libmicrohttpd keeps for them got no answer at all (its connection closed; a page
    /// request was loaded and counted as a 200). Every size gets an answer now: served up to
    /// 32 KiB, 431 with a JSON error past it (and past ~45–48 KiB, libmicrohttpd's own 431).
    @Test(.timeLimit(.minutes(3)))
    func requestsAroundTheHeaderLimit_eachGetAnAnswer() async throws {
        let server = try await ServeProcess([try await manifest()], environment: Self.secret)
        let parameters = (0..<50).map { "t\($0)=1" }.joined(separator: "&")
        var refused = 0
        for target in ["/healthz", "/pages", "/healthz?" + parameters] {
            var refusedSmaller = false
            for size in stride(from: 25_000, through: 52_000, by: 47) {
                let request = "GET \(target) HTTP/1.1\r\nHost: x\r\nX-A: \(String(repeating: "a", count: size))\r\nConnection: close\r\n\r\n"
                let reply: HTTPReply
                do {
                    reply = try httpGet(port: server.port, "", request: request, timeout: .seconds(30))
                } catch {
                    Issue.record("\(target) with \(request.utf8.count) bytes of line and headers: \(error)")
                    return
                }
                if reply.status == 431 {
                    refused += 1
                    if request.utf8.count < 45_000 {
                        #expect(reply.text.contains("the request line and headers take more than 32 KiB (64 bytes more for each header and parameter)"), "\(reply.text)")
                    }
                } else {
                    #expect(!refusedSmaller, "\(target): \(reply.status) after a 431 at a smaller size")
                    #expect(request.utf8.count <= 32 << 10, "\(target) with \(request.utf8.count) bytes: \(reply.status)")
                    #expect([200, 400].contains(reply.status), "\(target): \(reply.status) \(reply.text)")
                }
                refusedSmaller = refusedSmaller || reply.status == 431
            }
        }
        #expect(refused > 300)
        #expect(try server.get("/healthz").status == 200)
        let metrics = try server.get("/metrics").text
        #expect(metrics.contains(#"pager_http_requests_total{route="/pages",code="431"}"#), "\(metrics)")
    }

    @Test(.timeLimit(.minutes(3)))
    func badRequests_getA4xxWithAJSONError_andTheServerGoesOn() async throws {
        let server = try await ServeProcess([try await manifest()], environment: Self.secret)
        let cases: [(String, Int, String)] = [
            ("/pages?color=red", 400, "unknown query parameter 'color' (this server takes: cursor, tag)"),
            ("/pages?tag", 400, "query parameter 'tag' has no value"),
            ("/pages?tag=a&tag=b", 400, "query parameter 'tag' is given twice"),
            ("/pages?cursor=a&cursor=b", 400, "more than one cursor"),
            ("/pages?tag=" + String(repeating: "x", count: 20_000), 414, "the query is longer than 16 KiB"),
            // Were served as other values: "ab" (cut at the NUL) and U+FFFD.
            ("/pages?tag=ab%00cd", 400, "a query name or value holds a NUL byte (%00)"),
            ("/pages?tag=%ff", 400, "a query name or value is not valid UTF-8"),
            ("/pages?%ff=1", 400, "a query name or value is not valid UTF-8"),
            // Were taken as they are ("%zz" a tag of three characters).
            ("/pages?tag=%zz", 400, "the URL holds a % not followed by two hex digits (a % itself is written %25)"),
            ("/pages?tag=a%2", 400, "the URL holds a % not followed by two hex digits"),
            ("/nothing", 404, "no such route"),
            // Found by a probe: libmicrohttpd neither answered nor closed a request with ~500
            // parameters (they did not fit its connection's memory) until the header timeout.
            ("/pages?" + (0..<101).map { "t\($0)=1" }.joined(separator: "&"), 414, "more than 100 query parameters"),
            ("/pages?" + (0..<2_000).map { "t\($0)=1" }.joined(separator: "&"), 414, "more than 100 query parameters"),
            // Fewer, longer ones that with the line did not fit its memory either (found by a review).
            ("/pages?" + (0..<50).map { "t\($0)=" + String(repeating: "v", count: 600) }.joined(separator: "&"), 414,
             "the query is longer than 16 KiB"),
        ]
        for (target, status, message) in cases {
            let reply = try server.get(target)
            #expect(reply.status == status && reply.text.contains(message), "\(target.prefix(40)): \(reply.status) \(reply.text)")
        }
        let post = try httpGet(port: server.port, "", request: "POST /pages HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc")
        #expect(post.status == 405 && post.text.contains("only GET and HEAD are served") && post.headers["allow"] == "GET, HEAD",
                "\(post.status) \(post.headers) \(post.text)")
        // Counted like every answer (it was not).
        // Found by a hostile probe: a body is refused before it is read and its connection
        // closed (a POST, or a GET, trickling its body a byte every few seconds held its
        // connection for ever, and 4 addresses every connection); every refusal is counted.
        let clock = ContinuousClock()
        let started = clock.now
        let trickled = try httpGet(port: server.port, "", request: "POST /pages HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\na",
                                   timeout: .seconds(5))
        #expect(trickled.status == 405 && trickled.headers["connection"] == "close" && trickled.headers["cache-control"] == "no-store",
                "\(trickled.status) \(trickled.headers)")
        #expect(clock.now - started < .seconds(5), "answered before its body came")
        let getBody = try httpGet(port: server.port, "", request: "GET /pages HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n")
        #expect(getBody.status == 400 && getBody.text.contains("a GET or HEAD request with a body"), "\(getBody.status) \(getBody.text)")
        // A NUL in the path cut it short: /metrics%00x was served as /metrics.
        for target in ["/metrics%00x", "/healthz%00.json"] {
            let reply = try server.get(target)
            #expect(reply.status == 400 && reply.text.contains("the path holds a NUL byte (%00)"), "\(target): \(reply.status) \(reply.text)")
        }
        let badEscape = try server.get("/healthz%g0")
        #expect(badEscape.status == 400 && badEscape.text.contains("a % not followed by two hex digits"), "\(badEscape.status) \(badEscape.text)")
        let metrics = try server.get("/metrics").text
        #expect(metrics.contains(#"pager_http_requests_total{route="/pages",code="405"} 2"#), "\(metrics)")
        #expect(metrics.contains(#"pager_http_requests_total{route="/pages",code="414"} 4"#), "\(metrics)")
        // The 400s of the table above for /pages (the NUL and the bytes that are not UTF-8
        // went uncounted, the stray %s were not refused), and the GET with a body.
        #expect(metrics.contains(#"pager_http_requests_total{route="/pages",code="400"} 10"#), "\(metrics)")
        // A request whose end is ambiguous is refused and its connection closed: a proxy in
        // front may read it otherwise (request smuggling). The request after it was answered
        // (a 400 for its parameter). A Content-Length that is no number or too large is
        // libmicrohttpd's to refuse (400, 413).
        let smuggled = "GET /pages?zz=smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
        // "Transfer-Encoding :" (whitespace before the colon, RFC 9112 5.1) was not taken for
        // the header, and the request after it was answered.
        for framing in ["Content-Length: 0\r\nContent-Length: 44", "Content-Length: 4\r\nTransfer-Encoding: chunked",
                        "Transfer-Encoding : chunked\r\nContent-Length: 0",
                        "Content-Length: -1", "Content-Length: 99999999999999999999999"] {
            let reply = try httpGet(port: server.port, "", request: "GET /healthz HTTP/1.1\r\nHost: x\r\n\(framing)\r\n\r\n" + smuggled)
            #expect(reply.status == 400 || (framing.hasPrefix("Content-Length: ") && !framing.contains("\r\n") && reply.status == 413),
                    "\(framing): \(reply.status) \(reply.text)")
            #expect(!reply.text.contains("unknown query parameter"), "\(framing): the request after it was answered: \(reply.text)")
        }
        let garbage = try httpGet(port: server.port, "", request: "\u{1}\u{2} nonsense\r\n\r\n")
        #expect((400..<500).contains(garbage.status))
        // A client that sends half a request and waits holds up no one else.
        let slow = try connectLoopback(port: server.port)
        defer { close(slow) }
        _ = "GET /pa".withCString { send(slow, $0, 7, 0) }
        #expect(try server.get("/healthz").status == 200)
        #expect(try numbers(try server.get("/pages")) == Array(0..<20))
    }

    /// A client that trickles its request line a byte at a time, never silent for the idle
    /// timeout, is closed once --header-timeout-ms has passed (it held its connection for ever,
    /// and 1,024 such clients every connection); other clients are answered meanwhile.
    @Test(.timeLimit(.minutes(3)))
    func aClientTricklingItsHeaders_isClosedAfterTheHeaderTimeout() async throws {
        let server = try await ServeProcess([try await manifest(), "--header-timeout-ms", "500"], environment: Self.secret)
        let slow = try connectLoopback(port: server.port)
        defer { close(slow) }
        let request = Array(("GET /pages?tag=" + String(repeating: "x", count: 5_000)).utf8)
        var closed = false
        // A byte every 50 ms, until the server ends the connection or 30 s have passed.
        for byte in request.prefix(600) {
            var one = byte
            guard send(slow, &one, 1, Int32(MSG_NOSIGNAL)) == 1 else {
                closed = true
                break
            }
            var ready = pollfd(fd: slow, events: Int16(POLLIN), revents: 0)
            if poll(&ready, 1, 50) > 0 {
                var answer = [UInt8](repeating: 0, count: 512)
                if recv(slow, &answer, answer.count, 0) <= 0 {
                    closed = true
                    break
                }
            }
        }
        #expect(closed, "a client trickling its headers for 30 s kept its connection")
        #expect(try server.get("/healthz").status == 200)
        #expect(try numbers(try server.get("/pages")) == Array(0..<20))
    }

    @Test(.timeLimit(.minutes(3)))
    func healthz_saysWhichPluginCannotServe() async throws {
        let healthy = try await ServeProcess([try await manifest()], environment: Self.secret)
        let ok = try healthy.get("/healthz")
        #expect(ok.status == 200 && ok.text.contains(#""status": "ok""#))
        let lifecycle = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c")
        let sick = try await ServeProcess([try await manifest(interceptors: #"[{"plugin": "\#(lifecycle)", "config": {"health": 2}}]"#)],
                                    environment: Self.secret)
        let reply = try sick.get("/healthz")
        #expect(reply.status == 503 && reply.text.contains("lifecycle: transient"), "\(reply.text)")
    }

    /// Found by a probe: each /healthz asked every plugin itself, on a thread that answers
    /// requests, however long a check took (a store waiting on a lock, 4 s): checks queued one
    /// behind another, and /pages and /metrics waited behind them. Requests that come while a
    /// check runs share its answer, and a check not answered within timeout_ms is a 503 that
    /// names the plugin it waits for.
    @Test(.timeLimit(.minutes(3)))
    func slowHealthChecks_areSharedAndBounded() async throws {
        let lifecycle = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c")
        // A check far longer than the timeout: on a loaded machine the four requests may come
        // seconds apart, and one that came after a 4 s check had ended shared its "ok".
        let server = try await ServeProcess([try await manifest(#", "timeout_ms": 1000"#, interceptors: #"[{"plugin": "\#(lifecycle)", "config": {"health_sleep_ms": 30000}}]"#)],
                                      environment: Self.secret)
        let replies = try await withThrowingTaskGroup(of: HTTPReply.self) { group in
            for _ in 0..<4 { group.addTask { try server.get("/healthz") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        for reply in replies {
            // timeout_ms: one call (not the request timeout, which leaves room for retries).
            #expect(reply.status == 503 && reply.text.contains("lifecycle: no answer within 1000 ms"), "\(reply.text)")
        }
        #expect(try server.get("/metrics").status == 200)
        #expect(server.stderr.components(separatedBy: "health check").count - 1 == 1, "one check for the four requests: \(server.stderr)")
    }

    /// A request target in absolute form (as a proxy sends it) is its path (it was a 404).
    @Test(.timeLimit(.minutes(3)))
    func anAbsoluteFormTarget_isItsPath() async throws {
        let server = try await ServeProcess([try await manifest()], environment: Self.secret)
        let request = "GET http://127.0.0.1:\(server.port)/pages?tag=abs HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let reply = try httpGet(port: server.port, "", request: request)
        #expect(reply.status == 200, "\(reply.text)")
        #expect(try numbers(reply) == Array(0..<20))
    }

    @Test(.timeLimit(.minutes(3)))
    func metrics_countRequestsAndUpstreamFetches_inPrometheusText() async throws {
        let server = try await ServeProcess([try await manifest()], environment: Self.secret)
        _ = try server.get("/pages")
        _ = try server.get("/pages?bad=1")
        let reply = try server.get("/metrics")
        #expect(reply.status == 200 && reply.headers["content-type"]?.hasPrefix("text/plain") == true)
        let text = reply.text
        #expect(text.contains(#"pager_http_requests_total{route="/pages",code="200"} 1"#), "\(text)")
        #expect(text.contains(#"pager_http_requests_total{route="/pages",code="400"} 1"#))
        #expect(text.contains(#"pager_http_request_duration_seconds_count{route="/pages"} 2"#))
        #expect(text.contains(#"pager_plugin_calls_total{plugin="offsets",kind="source",at="$.source"} 1"#))
        #expect(text.contains(#"pager_plugin_call_duration_seconds_bucket{plugin="offsets",kind="source",at="$.source",le="+Inf"} 1"#))
        // With its sum, as every Prometheus histogram has (an average latency is sum / count).
        #expect(text.contains(#"pager_plugin_call_duration_seconds_sum{plugin="offsets",kind="source",at="$.source"} "#), "\(text)")
        // Every sample line is a name, optional labels and a number.
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            #expect(line.wholeMatch(of: /[a-z_]+(\{[^}]*\})? -?[0-9.e+-]+/) != nil, "\(line)")
        }
    }

    /// A server whose loads each wait in a deferring interceptor until ``WaitingServer/resumeOne(waiting:)``.
    struct WaitingServer {
        let server: ServeProcess
        let resume: String

        /// A request sent on a thread of its own.
        final class Request: Sendable {
            private let reply = Locked<HTTPReply?>(nil)
            private let done = DispatchSemaphore(value: 0)

            init(_ server: ServeProcess, _ target: String) {
                Thread.detachNewThread { [reply, done] in
                    reply.withLock { $0 = try? server.get(target) }
                    done.signal()
                }
            }

            /// Its answer, once it came.
            func answer() -> HTTPReply? {
                done.wait()
                done.signal()
                return reply.withLock { $0 }
            }
        }

        init(_ test: ServeCommandTests, options: [String]) async throws {
            resume = scratchFolder() + "/resume"
            let waiting = #"[{"plugin": "\#(try await fixturePlugin("interceptor_work"))", "id": "deferring", "#
                + #""config": {"mode": "late", "resume_file": "\#(resume)"}}]"#
            // Loads are held as long as a test likes: a starved machine outlasted the default
            // timeout_ms (30 s) between a load's deferral and its resume, and answered 504.
            server = try await ServeProcess([try await test.manifest(#", "timeout_ms": 600000"#, interceptors: waiting), "-v"] + options,
                                            environment: ServeCommandTests.secret)
        }

        /// How many times stderr says `text`.
        private func count(_ text: String, in stderr: String) -> Int { stderr.components(separatedBy: text).count - 1 }

        /// Sends GET `target`; returns it once the interceptor holds it (nil if it never does).
        func startRequest(_ target: String = "/pages") async -> Request? {
            let held = count("deferred ", in: server.stderr)
            let request = Request(server, target)
            return await server.waitFor { count("deferred ", in: $0) > held } ? request : nil
        }

        /// Lets one of the loads held go on; returns once it has, unless `waiting` is false
        /// (after SIGTERM: the server may destroy the plugin as soon as the load is answered,
        /// and the line the plugin logs after its resume is then dropped; wait for the answer).
        func resumeOne(waiting: Bool = true) async {
            let resumed = count("late resume", in: server.stderr)
            #expect(FileManager.default.createFile(atPath: resume, contents: Data()))
            guard waiting else { return }
            #expect(await server.waitFor { count("late resume", in: $0) > resumed }, "\(server.stderr)")
        }
    }

    /// Requests past --max-requests get 503; a load past --request-timeout-ms gets 504.
    @Test(.timeLimit(.minutes(3)))
    func limits_refuseWhatIsTooMuch_with503And504() async throws {
        let waiting = try await WaitingServer(self, options: ["--max-requests", "1", "--request-timeout-ms", "60000"])
        let held = try #require(await waiting.startRequest(), "\(waiting.server.stderr)")
        let busy = try waiting.server.get("/pages")
        #expect(busy.status == 503 && busy.text.contains("answering 1 requests already"), "\(busy.text)")
        // Health and metrics are answered however busy the server is (a load balancer took a
        // busy server for a sick one, and the metrics were lost under load).
        #expect(try waiting.server.get("/healthz").status == 200)
        #expect(try waiting.server.get("/metrics").status == 200)
        await waiting.resumeOne()
        #expect(held.answer()?.status == 200)

        let folder = scratchFolder()
        let hanging = #"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "config": {"hang": true}}, "timeout_ms": 60000}"#
        try hanging.write(toFile: folder + "/hang.json", atomically: true, encoding: .utf8)
        let slow = try await ServeProcess([folder + "/hang.json", "--request-timeout-ms", "300"], environment: Self.secret)
        let reply = try slow.get("/pages")
        #expect(reply.status == 504 && reply.text.contains("not loaded within 300 ms"), "\(reply.text)")
    }

    /// `pager serve` over a source whose first fetch passes and the next never return, with
    /// timeout_ms 500 and no call_timeout_ms.
    func serverWhoseSecondFetchNeverReturns(isolation: String = "none") async throws -> ServeProcess {
        let folder = scratchFolder()
        let manifest = #"{"source": {"plugin": "\#(try await fixturePlugin("blocking_fetch"))", "isolation": "\#(isolation)", "#
            + #""config": {"sleep_ms": 600000, "pass_first": 1}}, "page_size": 3, "timeout_ms": 500, "serve_params": ["q"]}"#
        try manifest.write(toFile: folder + "/blocking.json", atomically: true, encoding: .utf8)
        return try await ServeProcess([folder + "/blocking.json"], environment: Self.secret)
    }

    /// A source whose fetch() never returns, with the next loads' calls queued behind it, held
    /// every thread that runs requests: nothing was answered any more, /healthz included, and
    /// SIGTERM went unheard. Without call_timeout_ms, serve bounds each plugin call by
    /// timeout_ms: the stuck load is answered 504, the next at once, and the server stays up.
    @Test(.timeLimit(.minutes(3)))
    func aFetchThatNeverReturns_holdsNoOtherRequest() async throws {
        let server = try await serverWhoseSecondFetchNeverReturns()
        #expect(try server.get("/pages").status == 200)
        // The next fetch gets stuck; loads of other queries come meanwhile (none shares it), whose
        // key chains wait for the plugin's turn behind it: each call_timeout_ms at most (they
        // waited for good, and two held every thread). Spread out, so that most come while the
        // stuck fetch holds the turn; each is answered 504 whenever it comes.
        let statuses = Locked<[Int]>([])
        DispatchQueue.concurrentPerform(iterations: 4) { index in
            usleep(useconds_t(index * 50_000))
            let status = (try? server.get("/pages?q=\(index)").status) ?? 0
            statuses.withLock { $0.append(status) }
        }
        #expect(statuses.withLock { $0 } == [504, 504, 504, 504], "\(statuses.withLock { $0 }) \(server.stderr)")
        for _ in 0..<3 {
            let next = try server.get("/pages")
            #expect(next.status == 504 && next.text.contains("could not be loaded (timeout)"), "\(next.text)")
        }
        #expect(try server.get("/healthz").status == 200)
        // Named by the setting it came from (it said call_timeout_ms, which the manifest lacks).
        #expect(await server.waitFor("fetch did not return within 0.5 seconds (timeout_ms, which bounds every plugin call of pager serve and browse without call_timeout_ms)"),
                "\(server.stderr)")
        #expect(await server.waitFor("an earlier fetch() has not returned yet"), "\(server.stderr)")
        #expect(await server.stop(SIGTERM) == 0, "\(server.stderr)")
    }

    /// An isolated plugin's process named call_timeout_ms too: it was not told where its bound
    /// came from.
    @Test(.timeLimit(.minutes(3)))
    func anIsolatedFetchThatNeverReturns_isNamedByTheSettingItsBoundCameFrom() async throws {
        let server = try await serverWhoseSecondFetchNeverReturns(isolation: "process")
        #expect(try server.get("/pages").status == 200)
        #expect(try server.get("/pages").status == 504)
        #expect(await server.waitFor("fetch did not return within 0.5 seconds (timeout_ms, which bounds every plugin call of pager serve and browse without call_timeout_ms)"),
                "\(server.stderr)")
        #expect(!server.stderr.contains("(call_timeout_ms)"), "\(server.stderr)")
        #expect(await server.stop(SIGTERM) == 0, "\(server.stderr)")
    }

    /// Found by a probe: `network-first` answers with its stored page when the load fails, but
    /// the request's default timeout counted each attempt's `timeout_ms` only: with a hung
    /// source the load failed at that very moment, or after it when the retries waited (here:
    /// 0.5 s, a second's backoff, a retry refused at once), and the request got 504 first. The
    /// default counts the backoff, and leaves a second for the stored page.
    @Test(.timeLimit(.minutes(3)))
    func networkFirst_answersWithItsStoredPage_whenTheSourceHangs() async throws {
        let folder = scratchFolder()
        try #"""
        {"source": {"plugin": "\#(try await fixturePlugin("blocking_fetch"))", "config": {"sleep_ms": 600000, "pass_first": 1}},
         "interceptors": [{"plugin": "sqlite-store", "config": {"path": "\#(folder)/store.db", "policy": "network-first"}}],
         "page_size": 3, "timeout_ms": 500, "retry": {"max_retries": 1, "initial_backoff_ms": 1000, "jitter": 0}}
        """#.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let server = try await ServeProcess([folder + "/m.json"], environment: Self.secret)
        let first = try server.get("/pages")
        #expect(first.status == 200, "\(first.text)")
        let fallback = try server.get("/pages")
        #expect(fallback.status == 200 && fallback.text == first.text, "\(fallback.status) \(fallback.text) \(server.stderr)")
        #expect(await server.waitFor("answered with the page this plugin holds"), "\(server.stderr)")
        #expect(await server.stop(SIGTERM) == 0, "\(server.stderr)")
    }

    /// A cursor whose page the source no longer has (its upstream answers 404, as an API does
    /// for a stale cursor) gets 410, to start again; an upstream that fails the first page is
    /// still the gateway's failure (502).
    @Test(.timeLimit(.minutes(3)))
    func aCursorWhosePageIsGone_gets410_aFailingFirstPage502() async throws {
        let gone = Locked(false)
        let upstream = try LoopbackHTTPServer { request in
            if request.query["page"] == "2" || gone.withLock({ $0 }) { return .json(#"{"message": "Not Found"}"#, status: 404) }
            return .json(#"{"items": [{"n": 1}]}"#, headers: [("Link", "</list?page=2>; rel=\"next\"")])
        }
        upstream.start()
        defer { upstream.stop() }
        let folder = scratchFolder()
        try """
        {"source": {"plugin": "\(try shippedPlugin("http"))",
                    "config": {"url": "\(upstream.baseURL)/list?page=1", "items": "/items", "pagination": {"type": "link"}}}}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let server = try await ServeProcess([folder + "/m.json"], environment: Self.secret)
        let first = try server.get("/pages")
        let next = try #require(try first.json()["next"] as? String, "\(first.text)")
        let stale = try server.get("/pages?cursor=\(next)")
        #expect(stale.status == 410 && stale.text.contains("load the first page again"), "\(stale.status) \(stale.text)")
        gone.withLock { $0 = true }
        let failed = try server.get("/pages")
        #expect(failed.status == 502, "\(failed.status) \(failed.text)")
        // The first page's key is empty: quoted, the line says so (it read "refresh at  failed").
        #expect(await server.waitFor(#"pager serve: refresh of key "" failed: "#), "\(server.stderr)")
        #expect(try server.get("/metrics").text.contains(#"pager_http_requests_total{route="/pages",code="410"} 1"#))
    }

    /// SIGTERM: new connections are refused, the request in flight is answered, exit 0. A second
    /// signal during the drain stops the server now: the request is answered 503 and the process
    /// exits 0, saying so in one line (that signal went unheard: the process exited when the
    /// request ended, behind a slow upstream up to the request timeout).
    @Test(.timeLimit(.minutes(3)), arguments: [false, true])
    func sigterm_drainsTheRequestsInFlight_thenExits0(secondSignal: Bool) async throws {
        let waiting = try await WaitingServer(self, options: [])
        let server = waiting.server
        let held = try #require(await waiting.startRequest(), "\(server.stderr)")
        kill(server.pid, SIGTERM)
        #expect(await server.waitFor("not accepting connections; finishing 1 request"), "\(server.stderr)")
        #expect(throws: ServeStartError.self) { _ = try connectLoopback(port: server.port) }
        if secondSignal {
            kill(server.pid, SIGINT)
            // The load stays held: only the signal can end the request.
            try #require(await server.waitFor("pager serve: stopped"), "\(server.stderr)")
            #expect(server.stderr.contains("pager serve: SIGINT: stopping now: cancelling 1 request in flight\n"), "\(server.stderr)")
            let answer = try #require(held.answer())
            #expect(answer.status == 503 && answer.text.contains("the server is stopping"), "\(answer.status) \(answer.text)")
        } else {
            await waiting.resumeOne(waiting: false)
            #expect(try numbers(try #require(held.answer())) == Array(0..<20))
        }
        #expect(await server.stop() == 0, "\(server.stderr)")
        #expect(server.stderr.contains("pager serve: stopped"))
    }

    /// A health check in flight when SIGTERM comes is waited for and answered (a probe: only
    /// /pages requests were counted; with a check longer than the 5 s the server waits for its
    /// answers, libmicrohttpd was stopped with the request suspended and aborted the process,
    /// exit 134, its client unanswered). The check ends when the test says: one of a fixed
    /// length had ended, now and then, before a test starved by the suite's load signalled.
    @Test(.timeLimit(.minutes(3)))
    func sigterm_waitsForAHealthCheckInFlight() async throws {
        let done = scratchFolder() + "/done"
        let slow = #"[{"plugin": "\#(try await fixturePlugin("check_bad_extensions"))", "id": "slow-health", "config": {"health_ms": 60000, "until_path": "\#(done)"}}]"#
        let server = try await ServeProcess([try await manifest(#", "timeout_ms": 90000"#, interceptors: slow)], environment: Self.secret)
        defer { FileManager.default.createFile(atPath: done, contents: nil) }
        let health = Task.detached { try server.get("/healthz") }
        #expect(await server.waitFor("health check started"), "\(server.stderr)")
        kill(server.pid, SIGTERM)
        #expect(await server.waitFor("not accepting connections; finishing 1 request"), "\(server.stderr)")
        // Past the 5 s the server waits for answers it cannot send yet.
        try await Task.sleep(for: .seconds(6))
        #expect(FileManager.default.createFile(atPath: done, contents: nil))
        #expect(try await health.value.status == 200)
        #expect(await server.stop() == 0, "\(server.stderr)")
        #expect(server.stderr.contains("pager serve: stopped"), "\(server.stderr)")
    }

    /// After SIGTERM, a request on a connection kept alive is answered 503 and the connection
    /// closed: handled, it started work after the requests in flight were counted, and the
    /// server could be stopped with it suspended (a probe: 20 keep-alive clients, SIGTERM, and
    /// the process aborted in 3 runs of 5).
    @Test(.timeLimit(.minutes(3)))
    func afterSigterm_aRequestOnAKeptAliveConnection_is503_andClosed() async throws {
        let waiting = try await WaitingServer(self, options: [])
        let server = waiting.server
        let held = try #require(await waiting.startRequest(), "\(server.stderr)")
        let kept = try connectLoopback(port: server.port)
        defer { close(kept) }
        // Kept alive after a first answer: a connection the server has not accepted yet is reset
        // when it stops listening, as a connection to any server that stops (one CI run in many).
        #expect(oneReply(on: kept, to: "/nothing").hasPrefix("HTTP/1.1 404"))
        kill(server.pid, SIGTERM)
        #expect(await server.waitFor("not accepting connections; finishing 1 request"), "\(server.stderr)")
        let request = Array("GET /pages HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        #expect(request.withUnsafeBytes { send(kept, $0.baseAddress, $0.count, 0) } == request.count)
        var reply: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while case let count = recv(kept, &chunk, chunk.count, 0), count > 0 { reply += chunk[..<count] }
        let text = String(decoding: reply, as: UTF8.self)
        #expect(text.hasPrefix("HTTP/1.1 503"), "\(text)")
        #expect(text.lowercased().contains("connection: close") && text.contains("the server is stopping"), "\(text)")
        await waiting.resumeOne(waiting: false)
        #expect(try numbers(try #require(held.answer())) == Array(0..<20))
        #expect(await server.stop() == 0, "\(server.stderr)")
    }

    /// Clients page on their own: a client's first page, asked while another client's next page
    /// is loading, cancels nothing (that client got a 502).
    @Test(.timeLimit(.minutes(3)))
    func aClientsFirstPage_leavesAnotherClientsPageInFlight() async throws {
        let waiting = try await WaitingServer(self, options: [])
        let first = try #require(await waiting.startRequest(), "\(waiting.server.stderr)")
        await waiting.resumeOne()
        let firstPage = try #require(first.answer())
        let next = try #require(try firstPage.json()["next"] as? String, "\(firstPage.text)")
        let second = try #require(await waiting.startRequest("/pages?cursor=\(next)"), "\(waiting.server.stderr)")
        let other = try #require(await waiting.startRequest(), "\(waiting.server.stderr)")
        await waiting.resumeOne()
        await waiting.resumeOne()
        let page = try #require(second.answer())
        #expect(page.status == 200, "\(page.text)")
        #expect(try numbers(page) == Array(20..<40))
        #expect(try numbers(try #require(other.answer())) == Array(0..<20))
    }

    /// A load that failed saying when to try again (here a rate limit's refusal) was answered
    /// 502, its hint lost: it is 503 with Retry-After (found by a probe).
    @Test(.timeLimit(.minutes(3)))
    func aRefusalThatSaysWhenToRetry_is503_withRetryAfter() async throws {
        let server = try await ServeProcess([try await manifest(interceptors: #"[{"plugin": "rate-limit", "config": {"per_second": 0.2, "max_wait_ms": 0}}]"#)],
                                            environment: Self.secret)
        #expect(try server.get("/pages").status == 200)
        let refused = try server.get("/pages?tag=other")
        #expect(refused.status == 503, "\(refused.text)")
        let seconds = Int(refused.headers["retry-after"] ?? "") ?? 0
        #expect((1...5).contains(seconds), "\(refused.headers)")
        #expect(refused.text.contains("retry after \(seconds) s"), "\(refused.text)")
    }

    /// One client address holds at most --max-connections-per-address connections: one that
    /// holds them half-open locks no other client out (1,024 took every connection, and every
    /// client waited for the header timeout).
    @Test(.timeLimit(.minutes(3)))
    func oneAddress_cannotTakeEveryConnection() async throws {
        let server = try await ServeProcess([try await manifest(), "--max-connections-per-address", "3"], environment: Self.secret)
        let held = try (0..<3).map { _ in try connectLoopback(port: server.port) }
        defer { held.forEach { close($0) } }
        for fd in held { _ = "GET /pa".withCString { send(fd, $0, 7, Int32(MSG_NOSIGNAL)) } }
        // The same address gets no more (the connection is closed unanswered); another one is served.
        #expect(throws: (any Error).self) { _ = try httpGet(port: server.port, "/healthz", timeout: .seconds(5)) }
        #expect(try httpGet(port: server.port, "/healthz", from: "127.0.0.2").status == 200)
    }

    /// Every cursor given out is taken back: parameters too long to travel in cursors are
    /// refused up front, a key that fits goes (one of 6.5 KB made a cursor this server refused,
    /// every page after the first out of reach), and a key too long for any cursor fails the
    /// page with 502.
    @Test(.timeLimit(.minutes(3)))
    func cursorsGivenOut_areAlwaysTakenBack() async throws {
        let server = try await ServeProcess([try await manifest()], environment: Self.secret)
        let long = try server.get("/pages?tag=" + String(repeating: "a", count: 6_200))
        #expect(long.status == 400 && long.text.contains("more than the 4096 each cursor can carry"), "\(long.text)")
        let fits = try server.get("/pages?tag=" + String(repeating: "a", count: 4_000))
        let next = try #require(try fits.json()["next"] as? String)
        #expect(try server.get("/pages?cursor=\(next)").status == 200)

        let folder = scratchFolder()
        for (padding, status) in [(6_500, 200), (14_000, 502)] {
            let path = folder + "/keys\(padding).json"
            try """
            {"source": {"plugin": "\(try await fixturePlugin("interceptor_work"))", "id": "offsets", "config": {"count": 45, "key_padding": \(padding)}},
             "page_size": 20}
            """.write(toFile: path, atomically: true, encoding: .utf8)
            let keyed = try await ServeProcess([path], environment: Self.secret)
            let first = try keyed.get("/pages")
            #expect(first.status == status, "\(first.text)")
            if status == 200 {
                let cursor = try #require(try first.json()["next"] as? String)
                #expect(try numbers(try keyed.get("/pages?cursor=\(cursor)")) == Array(20..<40))
            } else {
                #expect(first.text.contains("the next page's key is too long for a cursor"), "\(first.text)")
                #expect(await keyed.waitFor("the next page's key is 14003 bytes"), "\(keyed.stderr)")
            }
        }
    }

    @Test
    func aTakenPort_orABadAddressOrSecret_isBadInput() async throws {
        let manifest = try await manifest()
        let server = try await ServeProcess([manifest], environment: Self.secret)
        let taken = try await run(pagerCommand, ["serve", manifest, "--port", "\(server.port)"], environment: Self.secret)
        #expect(taken.code == 2 && taken.stderr.contains("cannot listen on 127.0.0.1 port \(server.port)"), "\(taken.stderr)")
        let address = try await run(pagerCommand, ["serve", manifest, "--bind", "localhost"], environment: Self.secret)
        #expect(address.code == 2 && address.stderr.contains("'localhost' is not an IPv4 or IPv6 address"), "\(address.stderr)")
        let short = try await run(pagerCommand, ["serve", manifest], environment: ["PAGER_SERVE_SECRET": "short"])
        #expect(short.code == 2 && short.stderr.contains("PAGER_SERVE_SECRET: the secret must be at least 16 bytes, got 5"), "\(short.stderr)")
        // A secret file that cannot be read says why (it said only "cannot be read").
        for (file, reason) in [("/nonexistent/secret", "No such file or directory"), ("/tmp", "is a folder, expected a secret file")] {
            let unread = try await run(pagerCommand, ["serve", manifest, "--secret-file", file])
            #expect(unread.code == 2 && unread.stderr.contains("--secret-file \(file): \(reason)"), "\(unread.stderr)")
        }
    }
}

/// Sends a GET of `target` on `fd`, kept alive, and returns its one reply: the head, and a body
/// of the Content-Length it says.
private func oneReply(on fd: Int32, to target: String) -> String {
    let request = "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    var received: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        if let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
            let head = String(decoding: received[..<end.lowerBound], as: UTF8.self).lowercased().components(separatedBy: "\r\n")
            let length = head.first { $0.hasPrefix("content-length:") }.flatMap { Int($0.dropFirst(15).trimmingCharacters(in: .whitespaces)) } ?? 0
            if received.count - end.upperBound >= length { break }
        }
        let count = recv(fd, &chunk, chunk.count, 0)
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        received += chunk[..<count]
    }
    return String(decoding: received, as: UTF8.self)
}
