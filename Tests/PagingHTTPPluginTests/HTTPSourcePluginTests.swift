// The http source plugin, loaded by path through the host (dlopen), against a real loopback
// HTTP server: each pagination scheme paged to the end through a PaginationManager, each error
// class, headers from the environment, cancellation, and (opt-in) a throughput benchmark.
#if canImport(Glibc)
import Glibc
#endif
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GitHubFixtureServer
import LoopbackHTTP
import Paging
import PagingHost
import PagingTestSupport
import Synchronization
import Testing

// MARK: - Helpers

/// The built libhttp.so.
func httpPluginPath() throws -> String { shippedPlugin("http") }

/// An http source of `configJSON`, whose pages fetched ahead wait an hour to be asked for
/// unless it says otherwise: the tests count requests, and under the whole suite's load a page
/// ahead once waited past the default 10 s and was fetched again.
func makeSource(_ configJSON: String, log: LogRecorder = LogRecorder(),
                limits: PluginLimits = PluginLimits()) throws -> LoadedSource {
    let library = try PluginLibrary.open(path: try httpPluginPath())
    var config = try JSONValue.parse(configJSON)
    if case .object(let members) = config, !members.contains(where: { $0.0 == "prefetch_max_age_ms" }) {
        config = .object(members + [("prefetch_max_age_ms", .int(3_600_000))])
    }
    return try library.makeSource(config: config, sink: log.sink, limits: limits)
}

func startServer(_ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws -> LoopbackHTTPServer {
    let server = try LoopbackHTTPServer(handler: handler)
    server.start()
    return server
}

/// `{"id": i}` items as compact JSON text, as the plugin re-serializes them.
func itemsJSON(_ range: Range<Int>) -> String {
    "[" + range.map { #"{"id":\#($0)}"# }.joined(separator: ",") + "]"
}

/// Pages to the end with a PaginationManager (refresh, then appends), failing on any error.
func pageToEnd(_ source: LoadedSource, pageSize: Int, userInfo: [String: String] = [:],
               maxLoads: Int = 10_000) async throws -> PaginationManager<PluginKey, PluginItem> {
    let manager = PaginationManager(pager: Pager(source: source),
                                    configuration: .init(pageSize: pageSize, userInfo: userInfo))
    await manager.refresh().value
    var loads = 1
    while !manager.output.appendState.isEndReached {
        if let error = manager.output.refreshState.error ?? manager.output.appendState.error {
            Issue.record("load failed: \(error)")
            break
        }
        try #require(loads < maxLoads, "paging did not end")
        await manager.append().value
        loads += 1
    }
    return manager
}

func ids(_ values: some Sequence<PluginItem>) throws -> [Int] {
    try values.map { item in
        let object = try #require(try JSONSerialization.jsonObject(with: Data(item.bytes)) as? [String: Any])
        return try #require(object["id"] as? Int)
    }
}

/// Loads the refresh page once with `policy`, returning the error it fails with.
func loadError(_ source: LoadedSource, retry policy: RetryPolicy = .none, pageSize: Int = 10) async -> (any Error)? {
    let pager = Pager(source: source)
    do {
        _ = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: pageSize, retryPolicy: policy)))
        return nil
    } catch {
        return error
    }
}

/// A port nobody listens on (bound once, then released).
func closedPort() throws -> UInt16 {
    let server = try LoopbackHTTPServer { _ in HTTPResponse(status: 200) }
    let port = server.port
    server.stop()
    return port
}

// MARK: - Tests

@Suite("http source plugin", .serialized)
struct HTTPSourcePluginTests {
    @Test func descriptor_isAThreadSafeSourceNamedHttp() throws {
        let library = try PluginLibrary.open(path: try httpPluginPath())
        let descriptor = try library.descriptor(id: "http", kind: .source)
        #expect(descriptor.isThreadSafe)
    }

    /// The transfer thread is named, so that top, perf and gdb tell it from the host's threads.
    @Test func aSource_runsItsTransfersOnAThreadNamedPagingHttp() throws {
        let source = try makeSource(#"{"url": "http://127.0.0.1:1/items", "items": "/items"}"#)
        #expect(threadNames().contains("paging-http"), "\(threadNames())")
        withExtendedLifetime(source) {}
    }

    /// With and without `paging.fetch-items/1` (withheld, as a host before ABI 1.2 lacks it:
    /// PagingPluginKit then hands over the items one `fetch_add_item` each).
    @Test(arguments: [Set<String>(), ["paging.fetch-items/1"]])
    func pagePagination_pagesToTheEnd_inOrder_exactlyOnce(withheld: Set<String>) async throws {
        let total = 100 // a multiple of the page size: the last page is empty
        let server = try startServer { request in
            let page = Int(request.query["page"] ?? "") ?? -1
            let perPage = Int(request.query["per_page"] ?? "") ?? -1
            guard page >= 1, perPage > 0 else { return .json(#"{"message":"bad"}"#, status: 400) }
            let start = min(total, (page - 1) * perPage)
            return .json(#"{"data":\#(itemsJSON(start..<min(total, start + perPage)))}"#)
        }
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/items?page={key}&per_page={pageSize}", "items": "/data",
             "pagination": {"type": "page"}}
            """, limits: PluginLimits(withheldExtensions: withheld))
        #expect(source.refreshKey == "1")
        #expect(source.keyChain(for: "3") == PagingKeyChain(key: "3", prevKey: "2", nextKey: "4"))
        #expect(source.keyChain(for: "1") == PagingKeyChain(key: "1", prevKey: nil, nextKey: "2"))
        let manager = try await pageToEnd(source, pageSize: 20)
        #expect(try ids(manager.output.values) == Array(0..<total))
        #expect(server.requestCount == 6)
        #expect(manager.output.prependState.isEndReached)
    }

    @Test func offsetPagination_pagesToTheEnd_inOrder_exactlyOnce() async throws {
        let total = 95
        let server = try startServer { request in
            let offset = Int(request.query["offset"] ?? "") ?? -1
            let limit = Int(request.query["limit"] ?? "") ?? -1
            guard offset >= 0, limit > 0 else { return .json(#"{"message":"bad"}"#, status: 400) }
            let start = min(total, offset)
            return .json(itemsJSON(start..<min(total, start + limit)))
        }
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/items?offset={offset}&limit={pageSize}", "pagination": {"type": "offset"}}
            """)
        #expect(source.refreshKey == "0")
        let manager = try await pageToEnd(source, pageSize: 20)
        #expect(try ids(manager.output.values) == Array(0..<total))
        #expect(manager.output.values.pages.map(\.key) == ["0", "20", "40", "60", "80"])
        #expect(server.requestCount == 5)
    }

    /// Found by a probe: a cursor "a\ud800b" was said to be "the string ..., not a string".
    @Test func aCursorWithAnUnpairedSurrogate_isSaidToBeNoText() async throws {
        let server = try startServer { _ in .json(#"{"items": [{"id": 1}], "next": "a\ud800b"}"#) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?c={key}", "items": "/items", "pagination": {"type": "cursor", "next": "/next"}}"#)
        let error = try #require(await loadError(source) as? PluginError)
        #expect(error.message.contains(#"the cursor at "/next" is the string "a\ud800b", which holds an unpaired surrogate (\uD800-\uDFFF): no text, so no key"#),
                "\(error.message)")
    }

    @Test func offsetPagination_prependsFromAMiddleOffset() async throws {
        let server = try startServer { request in
            let offset = Int(request.query["offset"] ?? "") ?? 0
            return .json(itemsJSON(offset..<min(50, offset + 10)))
        }
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/items?offset={key}&limit={pageSize}", "pagination": {"type": "offset", "first": 0}}
            """)
        let pager = Pager(source: source)
        let params = PagingRequestParams(pageSize: 10)
        let middle = try await pager.load(pager.request(.refresh, key: "25", params: params))
        #expect(middle.prevKey == "15")
        #expect(middle.nextKey == "35")
        let before = try await pager.load(pager.request(.prepend, key: "15", params: params))
        #expect(before.prevKey == "5")
        let first = try await pager.load(pager.request(.prepend, key: "5", params: params))
        #expect(first.prevKey == "0")
        let start = try await pager.load(pager.request(.prepend, key: "0", params: params))
        #expect(start.prevKey == nil)
        #expect(try ids(start.values) == Array(0..<10))
    }

    @Test func cursorPagination_pagesToTheEnd_inOrder_exactlyOnce() async throws {
        let total = 47
        let seen = Mutex<[String]>([])
        let server = try startServer { request in
            let cursor = request.query["cursor"] ?? ""
            seen.withLock { $0.append(cursor) }
            // Opaque cursors with characters that need percent-encoding.
            let offset = cursor.isEmpty ? 0 : Int(cursor.dropFirst(4)) ?? -1
            guard offset >= 0, cursor.isEmpty || cursor.hasPrefix("c+/=") else { return .json(#"{"message":"bad cursor"}"#, status: 400) }
            let limit = Int(request.query["limit"] ?? "") ?? 10
            let end = min(total, offset + limit)
            let next = end < total ? #""c+/=\#(end)""# : "null"
            return .json(#"{"result":{"entries":\#(itemsJSON(offset..<end))},"meta":{"next_cursor":\#(next)}}"#)
        }
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/items?cursor={key}&limit={pageSize}", "items": "/result/entries",
             "pagination": {"type": "cursor", "next": "/meta/next_cursor"}}
            """)
        #expect(source.refreshKey == "")
        let manager = try await pageToEnd(source, pageSize: 10)
        #expect(try ids(manager.output.values) == Array(0..<total))
        #expect(seen.withLock { $0 } == ["", "c+/=10", "c+/=20", "c+/=30", "c+/=40"])
    }

    @Test func linkPagination_githubFixture_pagesToTheEnd_inOrder_exactlyOnce() async throws {
        let fixture = GitHubFixture.synthetic(count: 95)
        let handler = gitHubSearchHandler(fixture: fixture)
        let queries = Mutex<[String]>([])
        let server = try startServer { request in
            queries.withLock { $0.append(request.query["q"] ?? "-") }
            return handler(request)
        }
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/search/repositories?q={param.q}&sort=stars&order=desc&per_page={pageSize}",
             "items": "/items", "pagination": {"type": "link"}}
            """)
        let manager = try await pageToEnd(source, pageSize: 20, userInfo: ["q": "swift in:name"])
        let names = manager.output.values.map { item -> String in
            let object = (try? JSONSerialization.jsonObject(with: Data(item.bytes))) as? [String: Any]
            return object?["name"] as? String ?? "?"
        }
        #expect(names == (1...95).map { "swift-repo-\($0)" })
        #expect(manager.output.values.pageCount == 5)
        // The first page is the template; the others are the Link header's absolute URLs.
        let keys = manager.output.values.pages.map { $0.key.text ?? "" }
        #expect(keys.first == "")
        #expect(keys.dropFirst().allSatisfy { $0.hasPrefix(server.baseURL + "/search/repositories?") && $0.contains("page=") })
        #expect(queries.withLock { $0 } == Array(repeating: "swift in:name", count: 5))
        #expect(manager.output.prependState.isEndReached)
    }

    /// A {param.NAME} that the request's params lack is sent empty, as before (the params may
    /// come from a client of pager serve), and said once: a misspelt one went without a word.
    @Test func aParamTheRequestLacks_isSentEmpty_andSaidOnce() async throws {
        let handler = gitHubSearchHandler(fixture: .synthetic(count: 45))
        let owners = Mutex<[String]>([])
        let server = try startServer { request in
            owners.withLock { $0.append(request.query["owner"] ?? "-") }
            return handler(request)
        }
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/search/repositories?q={param.q}&owner={param.ownr}&per_page={pageSize}", "#
            + #""items": "/items", "pagination": {"type": "link"}}"#, log: log)
        let manager = try await pageToEnd(source, pageSize: 20, userInfo: ["q": "swift", "owner": "apple"])
        #expect(manager.output.values.count == 45)
        #expect(owners.withLock { $0.first } == "")
        let said = log.messages.filter { $0.contains("url: {param.ownr} has no value among the request's params") }
        #expect(said.count == 1, "\(log.messages)")
    }

    /// A page size above the server's cap (GitHub: 100): each short page names its next page in
    /// its Link header, so it is followed, not loaded again - one request a page (there were 3
    /// for 2 pages, 399 for 200).
    @Test(arguments: [150, 1_000])
    func linkPagination_serverCappingThePageSize_oneRequestAPage(pageSize: Int) async throws {
        let handler = gitHubSearchHandler(fixture: .synthetic(count: 250))
        let server = try startServer(handler)
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/search/repositories?q=swift&per_page={pageSize}",
             "items": "/items", "pagination": {"type": "link"}}
            """)
        let manager = try await pageToEnd(source, pageSize: pageSize)
        #expect(manager.output.values.count == 250)
        #expect(manager.output.values.pageCount == 3)
        #expect(server.requestCount == 3)
    }

    @Test func linkPagination_prevLinks_prepend() async throws {
        let handler = gitHubSearchHandler(fixture: .synthetic(count: 30))
        let server = try startServer(handler)
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/search/repositories?q=swift&per_page={pageSize}&page=3",
             "items": "/items", "pagination": {"type": "link"}}
            """)
        let pager = Pager(source: source)
        let params = PagingRequestParams(pageSize: 10)
        let third = try await pager.load(pager.refreshRequest(params: params))
        #expect(third.nextKey == nil)
        let prev = try #require(third.prevKey)
        let second = try await pager.load(pager.request(.prepend, key: prev, params: params))
        #expect(second.values.count == 10)
        #expect(second.nextKey != nil)
        let first = try await pager.load(pager.request(.prepend, key: try #require(second.prevKey), params: params))
        #expect(first.prevKey == nil)
    }

    @Test func items_areCompactJSON_asTheServerWroteThem() async throws {
        let body = """
            { "meta": {"a/b": [ {"x": 1}, { "list" : [ {"b": "x y", "a": [1, 2.50, 1e3]} ,
              "s\\"t r" , 3 , null, true, [ ], {"k\\u0041": "\\u00e9"} ] } ] } }
            """
        let server = try startServer { _ in .json(body) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}", "items": "/meta/a~1b/1/list"}"#)
        let pager = Pager(source: source)
        let page = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 7)))
        #expect(page.values.map(\.text) == [
            #"{"b":"x y","a":[1,2.50,1e3]}"#, #""s\"t r""#, "3", "null", "true", "[]", #"{"k\u0041":"\u00e9"}"#,
        ])
        #expect(page.nextKey == "2")
    }

    // MARK: Errors

    @Test func http429_withRetryAfter_isTransient_withARetryHint_thatTheRetryWaitsFor() async throws {
        let server = try startServer { _ in .json(#"{"message":"slow down"}"#, status: 429, headers: [("Retry-After", "1")]) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}"}"#)
        let error = try #require(await loadError(source) as? PluginError)
        #expect(error.status == .transient)
        #expect(error.isRetryable)
        #expect(error.retryAfter == .seconds(1))
        #expect(error.message.contains("HTTP 429 from \(server.baseURL)/items?page=1"))
        // Said once, by the host: the message said it too, and pager printed it twice.
        #expect("\(error)".hasSuffix(" (retry after 1 s)") && "\(error)".components(separatedBy: "retry after").count == 2, "\(error)")
        #expect(error.message.contains("slow down"))
        // With a retry, the host waits the hint out (immediate backoff otherwise).
        let clock = ContinuousClock()
        let start = clock.now
        _ = await loadError(source, retry: RetryPolicy(maxRetries: 1, backoff: .immediate))
        #expect(clock.now - start >= .seconds(1))
        #expect(server.requestCount == 3)
    }

    /// Retry-After is digits or an HTTP date (RFC 9110 10.2.3): a value with a sign is none,
    /// and X-RateLimit-Reset says the wait if it is there ("-5" was a wait of 0 s, which pager
    /// serve answered 503 with Retry-After: 1); digits past Int are more than a year, as such an
    /// X-RateLimit-Reset is (they were no hint at all, which pager serve answered 502).
    @Test(arguments: [("-5", nil, nil), ("+5", nil, nil), ("-5", "7", "7 s"), ("99999999999999999999", nil, "more than a year")])
    func retryAfter_notDigits_isNoHint_andDigitsPastInt_areCapped(_ value: String, _ reset: String?, _ said: String?) async throws {
        let headers: [(name: String, value: String)] = [("Retry-After", value)] + (reset.map { [("X-RateLimit-Reset", $0)] } ?? [])
        let server = try startServer { _ in .json(#"{"message":"busy"}"#, status: 503, headers: headers) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}"}"#)
        let error = try #require(await loadError(source) as? PluginError)
        #expect(error.status == .transient)
        if let said {
            #expect("\(error)".hasSuffix(" (retry after \(said))"), "\(error)")
        } else {
            #expect(error.retryAfter == nil && !"\(error)".contains("retry after"), "\(error)")
        }
    }

    @Test func http500_isTransient_andRetried() async throws {
        let server = try startServer { _ in .text("boom", status: 500) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}"}"#)
        let error = try #require(await loadError(source, retry: RetryPolicy(maxRetries: 2, backoff: .immediate)) as? PluginError)
        #expect(error.status == .transient)
        #expect(error.message.hasPrefix("HTTP 500 from \(server.baseURL)/items?page=1"))
        #expect(server.requestCount == 3)
    }

    /// 410 Gone too (found by a probe: a stale cursor's page an API answers 410 was an invalid
    /// request, which `pager serve` answers 502, not the 410 that says to start again).
    @Test(arguments: [404, 410])
    func http404or410_isNotFound_withURLAndBody(_ status: Int) async throws {
        let server = try startServer { _ in .json(#"{"message":"Not Found"}"#, status: status) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/nothing/{key}"}"#)
        let error = try #require(await loadError(source, retry: RetryPolicy(maxRetries: 3, backoff: .immediate)) as? PluginError)
        #expect(error.status == .notFound)
        #expect(error.message.contains("HTTP \(status) from \(server.baseURL)/nothing/1"))
        #expect(error.message.contains(#"{"message":"Not Found"}"#))
        #expect(server.requestCount == 1)
    }

    @Test func http400_isInvalidRequest_notRetried_bodyCutAt200Bytes() async throws {
        let longBody = String(repeating: "x", count: 500)
        let server = try startServer { _ in .text(longBody, status: 400) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}"}"#)
        let error = try #require(await loadError(source, retry: RetryPolicy(maxRetries: 3, backoff: .immediate)) as? PluginError)
        #expect(error.status == .invalidRequest)
        #expect(!error.isRetryable)
        #expect(server.requestCount == 1)
        #expect(error.message.contains(String(repeating: "x", count: 200)))
        #expect(!error.message.contains(String(repeating: "x", count: 201)))
    }

    @Test func malformedBody_isInternal_namingTheURL() async throws {
        let server = try startServer { request in
            request.path == "/notjson" ? .text("<html>oops</html>") : .json(#"{"items":{"a":1}}"#)
        }
        defer { server.stop() }
        let notJSON = try makeSource(#"{"url": "\#(server.baseURL)/notjson?page={key}"}"#)
        let error = try #require(await loadError(notJSON) as? PluginError)
        #expect(error.status == .internal)
        #expect(error.message.contains("\(server.baseURL)/notjson?page=1"))
        #expect(error.message.contains("not JSON"))

        let notArray = try makeSource(#"{"url": "\#(server.baseURL)/obj?page={key}", "items": "/items"}"#)
        let error2 = try #require(await loadError(notArray) as? PluginError)
        #expect(error2.status == .internal)
        #expect(error2.message.contains("\(server.baseURL)/obj?page=1"))
        #expect(error2.message.contains("\"/items\""))
        #expect(error2.message.contains("not an array"))
    }

    /// The plugin finds array and object items by their brackets only; the host validates each
    /// item it is handed. An item that is not JSON fails the page there, nothing of it is kept,
    /// and the plugin logs which body and where it stops being JSON. Projected, the same item
    /// is refused by the plugin's own check (the host would only see the projection).
    @Test func anItemThatIsNotJSON_failsItsPage_andTheLogNamesTheURL() async throws {
        let server = try startServer { _ in .json(#"{"items": [{"id": 1}, {"id": 2, "name": tru}]}"#) }
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/bad-item?page={key}", "items": "/items"}"#, log: log)
        let error = try #require(await loadError(source) as? PluginError)
        #expect(error.message.contains("item 1 is not valid JSON"), "\(error.message)")
        #expect(!error.isRetryable)
        // Logged once the host's refusal returns to the plugin, perhaps after the load ended;
        // with the status and the body's first bytes, as every error of the source says them.
        let expected = "malformed body from \(server.baseURL)/bad-item?page=1: not JSON: unexpected '}'"
        #expect(await eventually { log.contains(#"(HTTP 200, 46 bytes: {"items": [{"id": 1}, {"id": 2, "name": tru}]})"#) }, "\(log.messages)")
        #expect(await eventually { log.entries.contains { $0.level == .error && $0.message.contains(expected) } }, "\(log.messages)")

        let projected = try makeSource(#"{"url": "\#(server.baseURL)/bad-item?page={key}", "items": "/items", "fields": ["id"]}"#)
        let error2 = try #require(await loadError(projected) as? PluginError)
        #expect(error2.status == .internal)
        #expect(error2.message.contains("malformed body from \(server.baseURL)/bad-item?page=1: not JSON"), "\(error2.message)")
    }

    @Test func connectionRefused_isTransient_namingTheURL() async throws {
        let port = try closedPort()
        let source = try makeSource(#"{"url": "http://127.0.0.1:\#(port)/items?page={key}"}"#)
        let error = try #require(await loadError(source) as? PluginError)
        #expect(error.status == .transient)
        #expect(error.message.contains("http://127.0.0.1:\(port)/items?page=1"))
    }

    @Test func requestTimeout_isTimeout() async throws {
        let server = try startServer { _ in
            Thread.sleep(forTimeInterval: 1.5)
            return .json("[]")
        }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/slow?page={key}", "timeout_ms": 300}"#)
        let error = try #require(await loadError(source) as? PluginError)
        #expect(error.status == .timeout)
        #expect(error.message.contains("\(server.baseURL)/slow?page=1"))
    }

    /// Keys come from outside (a store, a caller): one whose offset, or the key after it, a
    /// 64-bit integer cannot hold fails its request, naming the key, and the source goes on.
    @Test(arguments: [
        ("page", "9223372036854775807", 1, "is too large: the key after it overflows a 64-bit integer", 0),
        ("page", "9223372036854775807", 10, "is too large: its offset ((key - 1) x page size 10) overflows a 64-bit integer", 0),
        ("page", "1000000000000000000", 10, "is too large: its offset ((key - 1) x page size 10) overflows a 64-bit integer", 0),
        ("offset", "9223372036854775807", 10, "is too large: the key after it overflows a 64-bit integer", 0),
        ("offset", "9223372036854775800", 10, "is too large: the key after it overflows a 64-bit integer", 0),
        // Served more items than the page size: the next offset is checked once they are in.
        ("offset", "9223372036854775787", 10, "the offset after its 30 items overflows a 64-bit integer", 1),
    ])
    func aKeyNearIntMax_failsItsRequest_asInvalid_namingTheKey(
        _ probe: (type: String, key: String, pageSize: Int, message: String, requests: Int)
    ) async throws {
        let server = try startServer { _ in .json(itemsJSON(0..<30)) }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?key={key}&offset={offset}", "pagination": {"type": "\#(probe.type)"}}"#)
        let pager = Pager(source: source)
        let request = PagingRequest(kind: .append, keyChain: PagingKeyChain(key: PluginKey(probe.key)),
                                    params: PagingRequestParams(pageSize: probe.pageSize))
        await #expect {
            _ = try await pager.load(request)
        } throws: { error in
            guard let error = error as? PluginError else { return false }
            return error.status == .invalidRequest && error.message.contains("key \"\(probe.key)\"") && error.message.contains(probe.message)
        }
        #expect(server.requestCount == probe.requests)
        let page = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 10)))
        #expect(page.values.count == 30)
    }

    // MARK: Headers

    @Test func headers_fromEnvironment_missingVariableOmitsTheHeader() async throws {
        // Declared empty at start (Tests/CTestEnvironment): the second stays empty, as if unset.
        let variable = "HTTP_PLUGIN_TEST_TOKEN"
        let missing = "HTTP_PLUGIN_TEST_UNSET"
        setTestEnvironment(variable, "s3cret")
        defer { setTestEnvironment(variable, "") }
        let seen = Mutex<[String: String]>([:])
        let server = try startServer { request in
            seen.withLock { $0 = request.headers }
            return .json("[]")
        }
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource("""
            {"url": "\(server.baseURL)/items?page={key}",
             "headers": {"Authorization": "Bearer ${\(variable)}", "X-Api-Key": "${\(missing)}", "X-Plain": "yes"}}
            """, log: log)
        #expect(await loadError(source) == nil)
        let headers = seen.withLock { $0 }
        #expect(headers["authorization"] == "Bearer s3cret")
        #expect(headers["x-api-key"] == nil)
        #expect(headers["x-plain"] == "yes")
        #expect(headers["user-agent"] == "SwiftPaging")
        #expect(headers["accept"] == "application/json")
        #expect(log.entries.contains { $0.level == .warning && $0.message.contains(missing) && $0.message.contains("headers.X-Api-Key") })
        #expect(!log.messages.contains { $0.contains("s3cret") })
    }

    @Test func headers_overrideTheDefaults() async throws {
        let seen = Mutex<[String: String]>([:])
        let server = try startServer { request in
            seen.withLock { $0 = request.headers }
            return .json("[]")
        }
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/items?page={key}", "headers": {"User-Agent": "me/1.0", "accept": "application/vnd.github+json"}}
            """)
        #expect(await loadError(source) == nil)
        #expect(seen.withLock { $0["user-agent"] } == "me/1.0")
        #expect(seen.withLock { $0["accept"] } == "application/vnd.github+json")
    }

    // MARK: Cancellation

    @Test func cancellation_stopsQuickly_withExactlyOneCompletion() async throws {
        let server = try startServer { _ in
            Thread.sleep(forTimeInterval: 5)
            return .json("[]")
        }
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/slow?page={key}"}"#, log: log)
        let pager = Pager(source: source)
        let task = Task { try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 10))) }
        while server.requestCount == 0 { try await Task.sleep(for: .milliseconds(10)) }
        let clock = ContinuousClock()
        let start = clock.now
        task.cancel()
        let result = await task.result
        let elapsed = clock.now - start
        // Well before the answer (5 s): cancelling does not wait for it (0.5 s was once just
        // missed under the whole suite).
        #expect(elapsed < .seconds(3))
        switch result {
        case .success: Issue.record("a cancelled load succeeded")
        case .failure(let error):
            #expect(error is CancellationError || (error as? PluginError)?.status == .cancelled)
        }
        // The host finishes the fetch before it tells the plugin; the plugin's one completion
        // (CANCELLED, from cancel) is then expected, and no second may follow: wait past the
        // server's reply.
        #expect(await log.waitFor("which the host already ended (cancelled)"))
        try await Task.sleep(until: start + .milliseconds(5_500), clock: clock)
        #expect(log.count(containing: "unknown or finished fetch id") == 0, "the plugin's completion after a cancel is expected")
        #expect(log.count(containing: "which the host already ended (cancelled)") == 1)
    }

    // MARK: Config

    @Test func config_errors_nameTheKey() throws {
        func failure(_ json: String) -> String {
            do {
                _ = try makeSource(json)
                return "created"
            } catch let error as PluginLoadError {
                guard case .createFailed(_, _, let status, let message) = error else { return "\(error)" }
                #expect(status == .invalidConfig)
                return message
            } catch {
                return "\(error)"
            }
        }
        #expect(failure(#"{"url": "http://x/{key}", "bogus": 1}"#).hasPrefix("bogus: unknown key"))
        #expect(failure(#"{"url": "http://x/{key}", "method": "POST", "prefetch": true}"#).hasPrefix("prefetch: only with \"method\": \"GET\""))
        #expect(failure(#"{"url": "http://x/{key}", "method": "POST", "prefetch": 1}"#).hasPrefix("prefetch: only with \"method\": \"GET\""))
        for bad in ["5", "-1", "1.5", #""yes""#, "null"] {
            #expect(failure(#"{"url": "http://x/{key}", "prefetch": \#(bad)}"#).hasPrefix("prefetch: expected true, false or a number of pages from 0 to 4, got "), "\(bad)")
        }
        #expect(failure(#"{"url": "http://x/{key}", "method": "POST", "prefetch": 0}"#) == "created")
        for bad in ["0", "3600001", "1.5", "\"10\""] {
            #expect(failure(#"{"url": "http://x/{key}", "prefetch_max_age_ms": \#(bad)}"#)
                .hasPrefix("prefetch_max_age_ms: expected a whole number of milliseconds from 1 to 3600000, got "), "\(bad)")
        }
        #expect(failure(#"{}"#).hasPrefix("url: required"))
        // Found by a probe: libcurl sent them as basic auth with the first request only, and
        // their encoded form went unredacted into an error quoting an echoing body.
        setTestEnvironment("HTTP_PLUGIN_TEST_TOKEN", "sekrit-TOKEN-123")
        for url in ["http://u:${HTTP_PLUGIN_TEST_TOKEN}@127.0.0.1:9/items", "http://user@x/{key}"] {
            let message = failure(#"{"url": "\#(url)"}"#)
            #expect(message.hasPrefix("url: credentials before the host (user:password@) are refused"), "\(message)")
            #expect(!message.contains("sekrit") && message.contains(#""type": "basic""#), "\(message)")
        }
        #expect(failure(#"{"url": "http://x/{key}?email=a@b", "auth": {"type": "oauth2_client_credentials", "token_url": "http://a:b@x/token", "#
                        + #""client_id": "c", "client_secret": "s"}}"#).hasPrefix("auth.token_url: credentials before the host"))
        #expect(failure(#"{"url": "ftp://x/{key}"}"#).hasPrefix("url: expected an absolute http(s) URL"))
        #expect(failure(#"{"url": "http://x/{nope}"}"#).hasPrefix("url: unknown placeholder {nope}"))
        #expect(failure(#"{"url": "http://x/{key}", "items": "items"}"#).hasPrefix("items: expected a JSON pointer"))
        #expect(failure(#"{"url": "http://x/{key}", "pagination": {"type": "cursor"}}"#).hasPrefix("pagination.next: required"))
        #expect(failure(#"{"url": "http://x/{key}", "pagination": {"type": "page", "next": "/n"}}"#).hasPrefix("pagination.next: unknown key"))
        let manyFields = (0..<65).map { "\"f\($0)\"" }.joined(separator: ", ")
        #expect(failure(#"{"url": "http://x/{key}", "fields": [\#(manyFields)]}"#) == "fields: at most 64 member names, got 65")
        // A total was ignored by these types: now refused, saying what ends them.
        #expect(failure(#"{"url": "http://x/{key}", "pagination": {"type": "header", "next": "X-Next-Page", "total_header": "X-Total"}}"#)
            .hasPrefix("pagination.total_header: a total count ends page and offset pagination only; header pagination ends where its next key does"))
        #expect(failure(#"{"url": "http://x/{key}", "pagination": {"type": "cursor", "next": "/n", "total": "/t"}}"#)
            .hasPrefix("pagination.total: a total count ends page and offset pagination only; cursor pagination"))
        #expect(failure(#"{"url": "http://x/", "pagination": {"type": "link", "total": "/t"}}"#).hasPrefix("pagination.total: a total count ends page"))
        #expect(failure(#"{"url": "http://x/{key}", "pagination": {"type": "pages"}}"#).hasPrefix("pagination.type: expected"))
        #expect(failure(#"{"url": "http://x/{key}", "pagination": "page"}"#)
            .hasPrefix(#"pagination: expected an object with "type": "page", "offset", "cursor", "link", "next_url" or "header""#))
        #expect(failure(#"{"url": "http://x/{key}", "timeout_ms": "5"}"#).hasPrefix("timeout_ms: expected a positive integer"))
        #expect(failure(#"{"url": "http://x/{key}", "timeout_ms": true}"#).hasPrefix("timeout_ms: expected a positive integer"))
        #expect(failure(#"{"url": "http://x/{key}", "headers": {"A": 1}}"#).hasPrefix("headers.A: expected a string"))
        // Found by a probe: sent as written, the placeholder reached the server as text.
        #expect(failure(#"{"url": "http://x/{key}", "headers": {"X-Since": "{state.since}"}}"#)
            == "headers.X-Since: {state.NAME} is not filled in headers (only in the url and the body)")
        #expect(failure(#"{"url": "http://x/{key}", "pagination": {"type": "cursor", "next": "/n"}, "url2": 1}"#).hasPrefix("url2: unknown key"))
        // Found by a hostile probe: a tiny rate crashed create or the first request, and a
        // header name with a line break went out as header lines of its own.
        for rate in ["1e-300", "1e-11", "6e-11", "0"] {
            #expect(failure(#"{"url": "http://x/{key}", "max_requests_per_second": \#(rate)}"#)
                .hasPrefix("max_requests_per_second: expected a number from 0.0000116 (one request a day) to 10000"), "\(rate)")
        }
        #expect(failure(#"{"url": "http://x/{key}", "auth": {"type": "api_key", "name": "X-Key: v\r\nX-Injected: yes", "value": "k"}}"#)
            .hasPrefix(#"auth.name: "X-Key: v\#r\#nX-Injected: yes" is not a valid header name"#))
        #expect(failure(#"{"url": "http://x/{key}", "max_header_bytes": 1000000}"#)
            .hasPrefix("max_header_bytes: expected an integer number of bytes, at least 1024 and at most 262144"))
        #expect(failure(#"{"url": "http://x/{key}", "auth": {"type": "api_key", "in": "query", "name": "api key", "value": "k"}}"#) == "created")
        #expect(failure(#"{"url": "http://x/{key}", "fields": ["id", "name", "id"]}"#) == #"fields: "id" is listed twice"#)
        // Found by a probe: pointers, as the filter's fields are, made every item `{}`.
        #expect(failure(#"{"url": "http://x/{key}", "fields": ["/id", "name"]}"#)
            == #"fields: "/id" is a JSON pointer; fields are the names of the members each item keeps, such as "id" (the filter interceptor projects nested ones)"#)
        #expect(failure(#"{"url": "http://x/{key}", "fields": ["id", ""]}"#) == "fields: a member name is empty")
        // A secret file of 100 MB took 20 s and 534 MB; a NUL cut the credential short.
        let folder = NSTemporaryDirectory() + "http-secrets-\(UUID().uuidString)"
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        #expect(FileManager.default.createFile(atPath: folder + "/big", contents: Data(repeating: 0x61, count: 100_000)))
        #expect(FileManager.default.createFile(atPath: folder + "/nul", contents: Data("abcd\u{0}efgh\n".utf8)))
        // Each refusal says why (a probe: one message for a missing file, a folder and a big one).
        #expect(FileManager.default.createFile(atPath: folder + "/latin1", contents: Data([0x61, 0xE9, 0x62, 0x63])))
        for (file, why) in [(folder + "/big", "100000 bytes, over 64 KiB"), ("/dev/zero", "not a regular file"), (folder, "not a regular file"),
                            (folder + "/missing", "No such file or directory"),
                            ("missing-\(UUID().uuidString)", "No such file or directory (a relative path is read from the working directory, ")] {
            #expect(failure(#"{"url": "http://x/{key}", "auth": {"type": "bearer", "token": "${file:\#(file)}"}}"#)
                .hasPrefix("auth.token: cannot read the secret file \"\(file)\": \(why)"), "\(file)")
        }
        #expect(failure(#"{"url": "http://x/{key}", "auth": {"type": "bearer", "token": "${file:\#(folder)/latin1}"}}"#)
            == "auth.token: the secret file \"\(folder)/latin1\" is not UTF-8")
        #expect(failure(#"{"url": "http://x/{key}", "auth": {"type": "bearer", "token": "${file:\#(folder)/nul}"}}"#)
            .hasPrefix("auth.token: the secret file \"\(folder)/nul\" holds a control character"))
        // From the environment too (a probe: an ESC and a \u{1} went into the header as they were).
        setTestEnvironment("HTTP_TEST_CONTROL", "abcd\u{1B}[2Jefg\u{1}")
        #expect(failure(#"{"url": "http://x/{key}", "auth": {"type": "bearer", "token": "${HTTP_TEST_CONTROL}"}}"#)
            == "auth.token: the environment variable HTTP_TEST_CONTROL holds a control character")
        // A final line break written CRLF (a file saved on Windows) was refused as a control character.
        #expect(FileManager.default.createFile(atPath: folder + "/crlf", contents: Data("abcd-efgh\r\n".utf8)))
        #expect(failure(#"{"url": "http://x/{key}", "auth": {"type": "bearer", "token": "${file:\#(folder)/crlf}"}}"#) == "created")
    }

    /// Secrets of the `url` in its host, and a secret too short to redact: Link pagination
    /// still reaches the next page (the host's secret became a reference that no host trusted,
    /// and a secret "1" rewrote every 1 of the link), and a warning says the short one is not
    /// redacted.
    @Test func urlSecrets_inTheHost_orTooShortToRedact_stillPage() async throws {
        let server = try startServer { request in
            let page = Int(request.query["page"] ?? "") ?? 1
            let next = page < 3 ? [("Link", "<http://127.0.0.1:\(request.headers["host"]?.split(separator: ":").last ?? "")/items?page=\(page + 1)&k=1>; rel=\"next\"")] : []
            return .json(bytes: Array(#"{"data":\#(itemsJSON((page - 1) * 2..<page * 2))}"#.utf8), headers: next)
        }
        defer { server.stop() }
        setTestEnvironment("HTTP_TEST_HOSTPORT", "127.0.0.1:\(server.port)")
        setTestEnvironment("HTTP_TEST_SHORT", "1")
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "http://${HTTP_TEST_HOSTPORT}/items?page=1&k=${HTTP_TEST_SHORT}", "items": "/data", "pagination": {"type": "link"}}"#, log: log)
        let manager = try await pageToEnd(source, pageSize: 2)
        #expect(try ids(manager.output.values) == Array(0..<6))
        #expect(manager.output.values.pages.map { $0.key.text ?? "" } == ["", "http://${HTTP_TEST_HOSTPORT}/items?page=2&k=1", "http://${HTTP_TEST_HOSTPORT}/items?page=3&k=1"])
        #expect(log.contains("shorter than 4 characters: too short to redact from messages"), "\(log.messages)")
    }

    // MARK: Benchmark (opt-in: HTTP_PLUGIN_BENCH=1)

    @Test(.enabled(if: ProcessInfo.processInfo.environment["HTTP_PLUGIN_BENCH"] != nil))
    func benchmark_pipelineVersusRawURLSession() async throws {
        let pages = 2_000, pageSize = 20
        let total = pages * pageSize
        let server = try startServer { request in
            let page = Int(request.query["page"] ?? "") ?? 1
            let size = Int(request.query["per_page"] ?? "") ?? pageSize
            let start = min(total, (page - 1) * size)
            let items = (start..<min(total, start + size)).map { #"{"id":\#($0),"name":"item-\#($0)","score":\#($0 % 97)}"# }
            return .json("{\"data\":[" + items.joined(separator: ",") + "]}")
        }
        defer { server.stop() }
        let url = "\(server.baseURL)/items?page={key}&per_page={pageSize}"
        let clock = ContinuousClock()

        func pipelineRun() async throws -> Double {
            let source = try makeSource(#"{"url": "\#(url)", "items": "/data"}"#)
            let start = clock.now
            let manager = try await pageToEnd(source, pageSize: pageSize)
            let elapsed = clock.now - start
            #expect(manager.output.values.count == total)
            return Double(pages) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
        }
        func rawRun(parse: Bool, callback: Bool = false) async throws -> Double {
            let configuration = URLSessionConfiguration.ephemeral
            let session = URLSession(configuration: configuration)
            defer { session.invalidateAndCancel() }
            let start = clock.now
            var count = 0
            for page in 1...pages + 1 { // the same requests as the pipeline, including the empty last page
                var request = URLRequest(url: URL(string: "\(server.baseURL)/items?page=\(page)&per_page=\(pageSize)")!)
                request.setValue("SwiftPaging", forHTTPHeaderField: "User-Agent")
                request.setValue("application/json", forHTTPHeaderField: "Accept")
                let data: Data
                if callback {
                    data = try await withCheckedThrowingContinuation { continuation in
                        session.dataTask(with: request) { data, _, error in
                            if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: data ?? Data()) }
                        }.resume()
                    }
                } else {
                    (data, _) = try await session.data(for: request)
                }
                if parse {
                    let body = try JSONSerialization.jsonObject(with: data) as? [String: Any]
                    count += (body?["data"] as? [Any])?.count ?? 0
                } else {
                    count += data.isEmpty ? 0 : 1
                }
            }
            let elapsed = clock.now - start
            #expect(count > 0)
            return Double(pages) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18)
        }
        func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }

        _ = try await rawRun(parse: false) // warm-up
        var pipeline: [Double] = [], raw: [Double] = [], rawParsed: [Double] = [], rawCallback: [Double] = []
        for _ in 0..<5 {
            var connections = server.connectionCount
            pipeline.append(try await pipelineRun())
            let pipelineConnections = server.connectionCount - connections
            connections = server.connectionCount
            raw.append(try await rawRun(parse: false))
            let rawConnections = server.connectionCount - connections
            rawParsed.append(try await rawRun(parse: true))
            rawCallback.append(try await rawRun(parse: false, callback: true))
            #expect(pipelineConnections <= 1 && rawConnections <= 1, "keep-alive: \(pipelineConnections) / \(rawConnections) connections")
        }
        print(String(format: "BENCH raw URLSession dataTask+completionHandler %.0f pages/s", median(rawCallback)))
        // Diagnostics: the loaded source's fetch alone (no Pager, no manager).
        var direct: [Double] = []
        for _ in 0..<5 {
            let source = try makeSource(#"{"url": "\#(url)", "items": "/data"}"#)
            let start = clock.now
            for page in 1...pages {
                let request = PagingRequest(kind: .append, keyChain: PagingKeyChain(key: PluginKey("\(page)")), params: PagingRequestParams(pageSize: pageSize))
                _ = try await source.fetch(request: request)
            }
            let elapsed = clock.now - start
            direct.append(Double(pages) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18))
        }
        print(String(format: "BENCH loaded source fetch loop %.0f pages/s", median(direct)))
        let line = String(format: "BENCH http plugin: pipeline %.0f pages/s (runs %@), raw URLSession %.0f pages/s (runs %@), raw+JSONSerialization %.0f pages/s (runs %@)",
                          median(pipeline), pipeline.map { String(format: "%.0f", $0) }.joined(separator: "/"),
                          median(raw), raw.map { String(format: "%.0f", $0) }.joined(separator: "/"),
                          median(rawParsed), rawParsed.map { String(format: "%.0f", $0) }.joined(separator: "/"))
        print(line)
        FileHandle.standardError.write(Data((line + "\n").utf8))
    }

    /// Found by a probe of `pager serve`: the cycle check kept one record for every walk of the
    /// source, so two walks meeting at a key by other routes (a client whose first page came
    /// after the data changed; another query's) were refused as a "pagination cycle", until a
    /// client asked for a first page again. Each walk (page size and params) keeps its own chain,
    /// and only a link back to a page the walk came through is a cycle.
    @Test func walksThatMeetAtAKeyByOtherRoutes_areNoCycle() async throws {
        let dropped = Mutex(0) // items with ids below it are gone
        let server = try startServer { request in
            let after = Int(request.query["after"] ?? "") ?? -1, limit = Int(request.query["limit"] ?? "") ?? 10
            let start = max(after + 1, dropped.withLock { $0 }, Int(request.query["min"] ?? "") ?? 0)
            let ids = start..<min(start + limit, 100)
            return .json(#"{"data":\#(itemsJSON(ids)),"next":\#(ids.upperBound < 100 ? "\(ids.upperBound - 1)" : "null")}"#)
        }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/cursor?limit={pageSize}&after={key}&min={param.min}", "items": "/data", "prefetch": false, "#
                                    + #""pagination": {"type": "cursor", "next": "/next", "first": "-1"}}"#)
        let pager = Pager(source: source, deduplication: .disabled)
        func load(_ key: PluginKey?, min: Int) async throws -> (ids: [Int], next: PluginKey?) {
            let params = PagingRequestParams(pageSize: 10, userInfo: ["min": "\(min)"])
            let page = try await pager.load(key.map { pager.request(.append, key: $0, params: params) } ?? pager.refreshRequest(params: params))
            return (try ids(page.values), page.nextKey)
        }
        // The data changes between two clients' first pages: their walks meet at "19".
        let a1 = try await load(nil, min: 0)
        dropped.withLock { $0 = 10 }
        let b1 = try await load(nil, min: 0)
        let a2 = try await load(a1.next, min: 0)
        #expect(a1.ids == Array(0..<10) && b1.ids == Array(10..<20) && a2.ids == Array(10..<20))
        #expect(try await load(b1.next, min: 0).ids == Array(20..<30))
        #expect(try await load(a2.next, min: 0).ids == Array(20..<30))
        // Another query's walk reaches "29" from "19" too.
        let c1 = try await load(nil, min: 20)
        #expect(try await load(c1.next, min: 20).ids == Array(30..<40))
        #expect(try await load(try await load(b1.next, min: 0).next, min: 0).ids == Array(30..<40))
    }
}
