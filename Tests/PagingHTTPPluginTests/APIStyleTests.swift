// The http source against fixtures that answer as real APIs do (Tests/Fixtures/http/
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
// api_server.py): Stripe's has_more and starting_after, GitLab's X-Next-Page and X-Total,
// Slack's POST cursor, OAuth2 client credentials with quickly expiring tokens, GitHub's 403
// rate limit, an API key in the query (redacted everywhere), nested items and a projection.
import Foundation
import Paging
import PagingHost
import PagingTestSupport
import Testing

@Suite("http source against API-style fixtures", .serialized)
struct APIStyleTests {
    let server: FixtureServer

    init() throws {
        server = try FixtureServer("http/api_server.py")
    }

    private func pagedIDs(_ config: String, pageSize: Int) async throws -> [Int] {
        let source = try makeSource(config)
        return try ids(try await pageToEnd(source, pageSize: pageSize).output.values)
    }

    @Test func stripe_hasMore_andStartingAfterTheLastItem() async throws {
        defer { server.stop() }
        let found = try await pagedIDs("""
            {"url": "\(server.baseURL)/stripe/v1/customers?limit={pageSize}&starting_after={key}", "items": "/data",
             "pagination": {"type": "cursor", "next": "/data/*/id", "has_more": "/has_more"}}
            """, pageSize: 10)
        #expect(found == Array(1...25))
    }

    @Test func gitlab_nextPageHeader_andTotalHeader() async throws {
        defer { server.stop() }
        let found = try await pagedIDs("""
            {"url": "\(server.baseURL)/gitlab/projects?page={key}&per_page={pageSize}",
             "pagination": {"type": "header", "next": "X-Next-Page", "first": "1"}}
            """, pageSize: 10)
        #expect(found == Array(1...25))
        // The total stops page-number paging without asking for an empty page.
        let byTotal = try await pagedIDs("""
            {"url": "\(server.baseURL)/gitlab/projects?page={key}&per_page={pageSize}",
             "pagination": {"type": "page", "total_header": "X-Total"}}
            """, pageSize: 5)
        #expect(byTotal == Array(1...25))
    }

    @Test func linkHeaders_inEveryStyleRFC8288Allows() async throws {
        defer { server.stop() }
        // Relative targets, REL in capitals, unquoted, "prev first", other links and
        // parameters around the one wanted: each page's next is found.
        let found = try await pagedIDs("""
            {"url": "\(server.baseURL)/link-styles?page=1", "pagination": {"type": "link"}}
            """, pageSize: 10)
        #expect(found == Array(1...25))
    }

    @Test func slack_postBody_carriesTheCursor() async throws {
        defer { server.stop() }
        let found = try await pagedIDs("""
            {"url": "\(server.baseURL)/slack/conversations.list", "method": "POST",
             "body": {"cursor": "{key}", "limit": "{pageSize}"}, "items": "/channels",
             "pagination": {"type": "cursor", "next": "/response_metadata/next_cursor"}}
            """, pageSize: 7)
        #expect(found == Array(1...25))
    }

    /// A template's numbers go out as written: a whole number past 2^53 is not rounded to the
    /// nearest Double, a fraction stays a fraction.
    @Test func postBodyTemplate_sendsItsNumbersExactly() async throws {
        defer { server.stop() }
        let found = try await pagedIDs("""
            {"url": "\(server.baseURL)/slack/conversations.list", "method": "POST",
             "body": {"cursor": "{key}", "limit": "{pageSize}", "team": 9007199254740993, "ratio": 0.25, "floor": -12},
             "items": "/channels", "pagination": {"type": "cursor", "next": "/response_metadata/next_cursor"}}
            """, pageSize: 10)
        #expect(found == Array(1...25))
        let (data, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/slack/last-body")!)
        let body = try #require((try JSONSerialization.jsonObject(with: data) as? [String: String])?["body"])
        #expect(body == #"{"cursor":"c-20","floor":-12,"limit":10,"ratio":0.25,"team":9007199254740993}"#, "\(body)")
    }

    /// Placeholders within a longer string are filled in too, as text, and other braces are
    /// left alone (a probe found `"q": "updated:>{state.since}"` sent as written).
    @Test func postBodyTemplate_fillsPlaceholdersWithinStrings() async throws {
        defer { server.stop() }
        let found = try await pagedIDs("""
            {"url": "\(server.baseURL)/slack/conversations.list", "method": "POST",
             "body": {"cursor": "{key}", "limit": "{pageSize}", "q": "after:{key} size:{pageSize} {kept} {param.absent}.", "graphql": "{ viewer { login } }"},
             "items": "/channels", "pagination": {"type": "cursor", "next": "/response_metadata/next_cursor"}}
            """, pageSize: 10)
        #expect(found == Array(1...25))
        let (data, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/slack/last-body")!)
        let body = try #require((try JSONSerialization.jsonObject(with: data) as? [String: String])?["body"])
        #expect(body == #"{"cursor":"c-20","graphql":"{ viewer { login } }","limit":10,"q":"after:c-20 size:10 {kept} ."}"#, "\(body)")
    }

    /// Found by a probe of `pager serve`: a key that holds what reads as a reference to a
    /// secret of the config ("${API_TEST_TOKEN}", written by a client as a parameter that the
    /// server echoed in its next link, or by the server as its cursor) had the secret filled in
    /// and sent to the server, which echoed it back; a parameter was filled in too, and one
    /// reading "${oauth2:access_token}" was sent as the OAuth2 token itself. Such a key is
    /// refused, and a parameter goes as written.
    @Test func keysAndParametersReadingAsSecretReferences_neverReveal() async throws {
        defer { server.stop() }
        setTestEnvironment("API_TEST_TOKEN", "tok-very-secret")
        setTestEnvironment("API_TEST_CLIENT_SECRET", "csecret")
        let header = #""headers": {"Authorization": "Bearer ${API_TEST_TOKEN}"}"#
        let oauth = #""auth": {"type": "oauth2_client_credentials", "token_url": "\#(server.baseURL)/oauth/token", "#
            + #""client_id": "cid", "client_secret": "${API_TEST_CLIENT_SECRET}"}"#
        let cases = [("/echo?page=1&q={param.q}", #"{"type": "link"}"#, header, "${API_TEST_TOKEN}"),
                     ("/echo?forge=1&q={param.q}&after={key}", #"{"type": "cursor", "next": "/next"}"#, header, "${API_TEST_TOKEN}"),
                     ("/echo?page=1&q={param.q}", #"{"type": "link"}"#, oauth, "${oauth2:access_token}")]
        for (url, pagination, credentials, reference) in cases {
            let source = try makeSource(#"{"url": "\#(server.baseURL)\#(url)", "items": "/items", "pagination": \#(pagination), \#(credentials)}"#)
            let pager = Pager(source: source)
            let error = await #expect(throws: PluginError.self) {
                try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 1, userInfo: ["q": reference])))
            }
            #expect(error?.message.contains("it holds what reads as a ${...} reference to a secret of the config") == true, "\(String(describing: error))")
        }
        let (data, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/echo/seen")!)
        let seen = try #require(try JSONSerialization.jsonObject(with: data) as? [String])
        #expect(seen == cases.map { "\($0.3)|" }, "\(seen)")
        #expect(try await statsOf(server)["token_requests"] == 1, "the OAuth2 request went with a token")
    }

    @Test func nestedItems_withAWildcard_andAProjection() async throws {
        defer { server.stop() }
        let source = try makeSource("""
            {"url": "\(server.baseURL)/nested?page={key}", "items": "/groups/*/repos", "fields": ["id"]}
            """)
        let manager = try await pageToEnd(source, pageSize: 10)
        #expect(try ids(manager.output.values) == Array(0..<30))
        #expect(manager.output.values.allSatisfy { String(decoding: $0.bytes, as: UTF8.self).hasPrefix(#"{"id":"#) && !String(decoding: $0.bytes, as: UTF8.self).contains("extra") })
    }

    /// Fields no item has make every item `{}`: said once, with the URL (it went unsaid).
    @Test func fieldsNoItemHas_areLoggedOnce() async throws {
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource("""
            {"url": "\(server.baseURL)/nested?page={key}", "items": "/groups/*/repos", "fields": ["ID", "nom"]}
            """, log: log)
        let manager = try await pageToEnd(source, pageSize: 10)
        #expect(manager.output.values.count == 30 && manager.output.values.allSatisfy { $0.bytes == Array("{}".utf8) })
        let said = log.entries.filter { $0.message.hasPrefix("fields: no item of the page from ") }
        #expect(said.count == 1 && said.first?.level == .warning, "\(log.messages)")
        #expect(said.first?.message == #"fields: no item of the page from \#(server.baseURL)/nested?page=1 has any of the members "ID", "nom": each is {}"#,
                "\(log.messages)")
    }

    @Test func oauth2ClientCredentials_fetchesCachesAndRefreshesTheToken() async throws {
        defer { server.stop() }
        setTestEnvironment("API_TEST_CLIENT_SECRET", "csecret")
        let source = try makeSource("""
            {"url": "\(server.baseURL)/oauth/items?page={key}", "items": "/items",
             "auth": {"type": "oauth2_client_credentials", "token_url": "\(server.baseURL)/oauth/token",
                      "client_id": "cid", "client_secret": "${API_TEST_CLIENT_SECRET}"}}
            """)
        let clock = ContinuousClock(), start = clock.now
        let manager = try await pageToEnd(source, pageSize: 5)
        let paging = clock.now - start
        #expect(try ids(manager.output.values) == Array(1...25))
        let stats = try await statsOf(server)
        // One token serves every page while it lives (1.8 s before it is fetched again): on a
        // machine so busy that paging took longer, a second token is right.
        #expect(stats["token_requests"] == 1 || (paging > .milliseconds(1_800) && stats["token_requests"] == 2),
                "\(stats["token_requests"] ?? 0) tokens for paging that took \(paging)")
        // Tokens live 2 s and are fetched again in their last tenth: wait one out.
        try await Task.sleep(for: .seconds(2))
        let before = try await statsOf(server)["token_requests"] ?? 0
        #expect(await loadError(source, pageSize: 5) == nil)
        #expect(try await statsOf(server)["token_requests"] == before + 1)
    }

    @Test func oauth2_a401WithACachedToken_fetchesANewTokenOnce() async throws {
        defer { server.stop() }
        setTestEnvironment("API_TEST_CLIENT_SECRET", "csecret")
        func source(_ path: String) throws -> LoadedSource {
            try makeSource("""
                {"url": "\(server.baseURL)\(path)", "items": "/items",
                 "auth": {"type": "oauth2_client_credentials", "token_url": "\(server.baseURL)/oauth/token",
                          "client_id": "cid", "client_secret": "${API_TEST_CLIENT_SECRET}"}}
                """)
        }
        let items = try source("/oauth/items?page={key}")
        #expect(await loadError(items, pageSize: 5) == nil)
        #expect(try await statsOf(server)["token_requests"] == 1)
        // The server revokes the token while it is cached: the 401 fetches a new one.
        try await post(server, "/oauth/revoke")
        #expect(await loadError(items, pageSize: 5) == nil)
        #expect(try await statsOf(server)["token_requests"] == 2)
        // A server that refuses every token: one new token, then the 401 is the answer.
        let refused = try source("/oauth/refused")
        let error = try #require(await loadError(refused, pageSize: 5) as? PluginError)
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("HTTP 401 from \(server.baseURL)/oauth/refused"), "\(error.message)")
        #expect(try await statsOf(server)["token_requests"] == 4)
    }

    @Test func secretsInTheURL_areRedacted_andKeptOutOfLinkKeys() async throws {
        defer { server.stop() }
        let folder = scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let manifest = folder + "/linked.json"
        try """
            {"source": {"plugin": "\(try httpPluginPath())",
                        "config": {"url": "\(server.baseURL)/linked?api_key=${API_TEST_URL_KEY}&page=1", "pagination": {"type": "link"}}},
             "interceptors": [{"plugin": "logging", "config": {"level": "debug"}}],
             "page_size": 10}
            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let good = try await run(pagerCommand, ["run", manifest, "--refresh", "--append", "5", "--verbose"],
                                 environment: ["API_TEST_URL_KEY": "k-123"])
        #expect(good.code == 0, "\(good.stderr)")
        #expect(good.stdout.split(separator: "\n").count == 25)
        #expect(good.stderr.contains("api_key=${API_TEST_URL_KEY}&page=2"), "the next keys hold the reference: \(good.stderr)")
        #expect(!(good.stdout + good.stderr).contains("k-123"))
        let bad = try await run(pagerCommand, ["run", manifest, "--refresh", "--verbose"], environment: ["API_TEST_URL_KEY": "k-999"])
        #expect(bad.code == 1)
        #expect(bad.stderr.contains("HTTP 401 from \(server.baseURL)/linked?api_key=***&page=1"), "\(bad.stderr)")
        #expect(!(bad.stdout + bad.stderr).contains("k-999"))
        // A Link to another host that holds the secret is refused: the key is not sent there.
        let elsewhere = folder + "/elsewhere.json"
        try String(contentsOfFile: manifest, encoding: .utf8).replacingOccurrences(of: "&page=1", with: "&page=1&elsewhere=1")
            .write(toFile: elsewhere, atomically: true, encoding: .utf8)
        let other = try await run(pagerCommand, ["run", elsewhere, "--refresh", "--append", "1"], environment: ["API_TEST_URL_KEY": "k-123"])
        #expect(other.code == 1)
        #expect(other.stderr.contains("it carries a secret of the config to another host"), "\(other.stderr)")
        #expect(!(other.stdout + other.stderr).contains("k-123"))
        // Unset, the url cannot work: the config is refused, naming the variable.
        let unset = try await run(pagerCommand, ["validate", manifest])
        #expect(unset.code == 2)
        #expect(unset.stderr.contains("url: environment variable API_TEST_URL_KEY is not set"), "\(unset.stderr)")
    }

    @Test func theNextPage_isFetchedAhead_andAFailureAheadIsAskedAgain() async throws {
        defer { server.stop() }
        let url = "\(server.baseURL)/events?page={key}&per_page={pageSize}"
        // Page 3's first request fails: it is the one sent ahead, so page 3's own succeeds.
        try await post(server, "/events/fail", #"{"page": 3}"#)
        let source = try makeSource(#"{"url": "\#(url)"}"#)
        let manager = try await pageToEnd(source, pageSize: 5)
        #expect(try ids(manager.output.values) == Array(1...12))
        // The POST above, then pages 1 (a refresh: nothing ahead), 2 (an append), 3 ahead (500),
        // 3; the short page 3 ends paging: nothing after it is asked for.
        #expect(try await statsOf(server)["requests"] == 5)
        // Not fetched ahead, the same failure fails page 3's load.
        try await post(server, "/events/fail", #"{"page": 3}"#)
        let plain = try makeSource(#"{"url": "\#(url)", "prefetch": false}"#)
        let pager = Pager(source: plain)
        let params = PagingRequestParams(pageSize: 5)
        let first = try await pager.load(pager.refreshRequest(params: params))
        let second = try await pager.load(pager.request(.append, key: try #require(first.nextKey), params: params))
        await #expect(throws: PluginError.self) { try await pager.load(pager.request(.append, key: try #require(second.nextKey), params: params)) }
    }

    @Test func github403RateLimit_isTransient_withTheResetAsRetryHint() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/github/limited?page={key}"}"#)
        let error = try #require(await loadError(source, pageSize: 10) as? PluginError)
        #expect(error.status == .transient)
        #expect(error.message.contains("rate limit exhausted (X-RateLimit-Remaining: 0"))
        #expect(error.retryAfter != nil && error.retryAfter! <= .seconds(2))
        // A retry waits the reset out and succeeds.
        #expect(await loadError(source, retry: RetryPolicy(maxRetries: 1, backoff: .immediate), pageSize: 10) == nil)
    }

    @Test func maxRequestsPerSecond_spacesTheRequests() async throws {
        defer { server.stop() }
        let clock = ContinuousClock()
        let start = clock.now
        let found = try await pagedIDs("""
            {"url": "\(server.baseURL)/gitlab/projects?page={key}&per_page={pageSize}", "max_requests_per_second": 10}
            """, pageSize: 5)
        #expect(found == Array(1...25))
        // 6 requests (the last page is empty) at most 10 a second: at least 0.5 s.
        #expect(clock.now - start >= .milliseconds(500))
    }

    @Test func anAPIKeyInTheQuery_isRedactedFromEveryLineOfARun() async throws {
        defer { server.stop() }
        let folder = scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let manifest = folder + "/keyed.json"
        let secretFile = folder + "/key.txt"
        try "k-999\n".write(toFile: secretFile, atomically: true, encoding: .utf8)
        try """
            {"source": {"plugin": "\(try httpPluginPath())",
                        "config": {"url": "\(server.baseURL)/keyed?page={key}",
                                   "auth": {"type": "api_key", "in": "query", "name": "api_key", "value": "${file:\(secretFile)}"}}},
             "interceptors": [{"plugin": "logging", "config": {"level": "debug"}}],
             "page_size": 10, "retry": {"max_retries": 1, "initial_backoff_ms": 10}}
            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", manifest, "--refresh", "--verbose"])
        #expect(result.code != 0)
        #expect(result.stderr.contains("HTTP 401 from \(server.baseURL)/keyed?page=1: "), "\(result.stderr)")
        #expect(result.stderr.contains("api_key=***"), "the server's echo of the key is redacted")
        #expect(!(result.stdout + result.stderr).contains("k-999"))
        // With the right key the pages come.
        try "k-123".write(toFile: secretFile, atomically: true, encoding: .utf8)
        let good = try await run(pagerCommand, ["run", manifest, "--refresh", "--append", "5", "--verbose"])
        #expect(good.code == 0, "\(good.stderr)")
        #expect(good.stdout.split(separator: "\n").count == 25)
        #expect(!(good.stdout + good.stderr).contains("k-123"))
    }
}

/// POSTs `body` to the fixture server's `path`.
@discardableResult
func post(_ server: FixtureServer, _ path: String, _ body: String = "{}") async throws -> Data {
    var request = URLRequest(url: URL(string: server.baseURL + path)!)
    request.httpMethod = "POST"
    request.httpBody = Data(body.utf8)
    return try await URLSession.shared.data(for: request).0
}

private func statsOf(_ server: FixtureServer) async throws -> [String: Int] {
    let (data, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/stats")!)
    return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Int])
}

@Test func everyHTTPSourceExample_validates() async throws {
    let folder = repositoryRoot + "/Examples/HTTPSources"
    let examples = try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.hasSuffix(".json") }.sorted()
    #expect(examples.count >= 7)
    for example in examples {
        let result = try await run(pagerCommand, ["validate", folder + "/" + example])
        #expect(result.code == 0, "\(example): \(result.stderr)")
    }
}
