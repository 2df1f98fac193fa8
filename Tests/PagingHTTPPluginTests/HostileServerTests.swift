// The http source against servers that misbehave (Tests/Fixtures/http/hostile_server.py):
// credentials never leave the configured host, every byte read is bounded, a timeout ends the
// transfer (and the process), cycles and non-http links are refused, and what came instead of
// HTTP or JSON is said.
import Foundation
import Paging
import PagingHost
import PagingTestSupport
import Testing

/// Loads the refresh page of `url` (an http source config around it) and returns its error.
private func refreshError(_ config: String, pageSize: Int = 2, log: LogRecorder = LogRecorder()) async throws -> PluginError {
    let source = try makeSource(config, log: log)
    return try #require(await loadError(source, pageSize: pageSize) as? PluginError)
}

@Suite("http source against hostile servers", .serialized)
struct HostileServerTests {
    let server: FixtureServer

    init() throws {
        server = try FixtureServer("http/hostile_server.py")
    }

    // MARK: Credentials stay with the configured host

    @Test func aRedirectToAnotherHost_getsNoConfiguredHeaders() async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_TEST_TOKEN", "tok-redirect-123")
        let source = try makeSource("""
            {"url": "\(server.baseURL)/redirect-other", "items": "/items",
             "headers": {"Authorization": "Bearer ${HOSTILE_TEST_TOKEN}", "X-Api-Key": "${HOSTILE_TEST_TOKEN}"}}
            """)
        #expect(await loadError(source, pageSize: 2) == nil)
        let seen = try await server.seen()
        let first = try #require(seen.first { $0["path"] as? String == "/redirect-other" })
        #expect(first["authorization"] as? String == "Bearer tok-redirect-123")
        let second = try #require(seen.first { $0["path"] as? String == "/items" })
        #expect((second["host"] as? String)?.hasPrefix("localhost:") == true)
        #expect(second["authorization"] is NSNull)
        #expect(second["x-api-key"] is NSNull)
    }

    /// A server moved to another host keeps the query, and with it a secret the `url` holds:
    /// that redirect is refused, and goes on where `allowed_hosts` trusts the host.
    @Test func aRedirectCarryingASecretOfTheURL_toAnotherHost_isRefused() async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_URL_SECRET", "url-secret-789")
        func config(_ extra: String) -> String {
            #"{"url": "\#(server.baseURL)/redirect-query-other?page=1&token=${HOSTILE_URL_SECRET}", "items": "/items"\#(extra)}"#
        }
        let error = try await refreshError(config(""))
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("refusing the HTTP 302 redirect from \(server.baseURL)/redirect-query-other?page=1&token=*** to http://localhost:\(server.port)/items?page=1&token=***: it carries a secret of the config to another host"), "\(error.message)")
        #expect(try await server.seen().allSatisfy { ($0["host"] as? String)?.hasPrefix("localhost") != true })

        #expect(await loadError(try makeSource(config(#", "allowed_hosts": ["localhost"]"#))) == nil)
        let moved = try #require(try await server.seen().first { $0["path"] as? String == "/items" })
        #expect(moved["query"] as? String == "page=1&token=url-secret-789", "\(moved)")
    }

    /// A server that echoes the credentials it was sent (an OAuth2 token, a bearer token) in a
    /// redirect or a next link to another host: the request there is refused (the OAuth2 token
    /// went along, its config secret being no config value, and a Link was never checked).
    @Test(arguments: ["redirect", "link"])
    func credentialsEchoedInAURLToAnotherHost_areNotSentThere(_ via: String) async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_TEST_TOKEN", "tok-echoed-777")
        let bearer = #"{"url": "\#(server.baseURL)/echo-auth?via=\#(via)&page=1", "items": "/items", "pagination": {"type": "link"}, "auth": {"type": "bearer", "token": "${HOSTILE_TEST_TOKEN}"}}"#
        let oauth = #"{"url": "\#(server.baseURL)/echo-auth?via=\#(via)&page=1", "items": "/items", "pagination": {"type": "link"}, "auth": {"type": "oauth2_client_credentials", "token_url": "\#(server.baseURL)/token-huge", "client_id": "cid", "client_secret": "${HOSTILE_TEST_TOKEN}"}}"#
        for config in [bearer, oauth] {
            let error = try #require(await loadError(try makeSource(config), pageSize: 2) as? PluginError)
            #expect(error.status == .invalidRequest)
            #expect(error.message.contains("it carries a secret of the config to another host"), "\(error.message)")
            #expect(!error.message.contains("tok-"), "\(error.message)")
        }
        #expect(try await server.seen().allSatisfy { ($0["host"] as? String)?.hasPrefix("localhost") != true })
    }

    /// A credential a server echoes in a next link or a cursor on its own host: the key holds
    /// it as its reference (`${NAME}`, or the OAuth2 token's), never in clear (it reached log
    /// lines, stores and `pager serve`'s cursors), and the next request sends it filled in.
    @Test(arguments: ["link", "cursor"])
    func credentialsEchoedInAKeyOnTheSameHost_stayReferences(_ via: String) async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_TEST_TOKEN", "tok-same-4242")
        let pagination = via == "link" ? #"{"type": "link"}"# : #"{"type": "cursor", "next": "/next"}"#
        let url = "\(server.baseURL)/echo-same?via=\(via)" + (via == "link" ? "&page=1" : "&cursor={key}")
        let auths = [
            (#"{"type": "bearer", "token": "${HOSTILE_TEST_TOKEN}"}"#, "tok-same-4242", "${HOSTILE_TEST_TOKEN}"),
            (#"{"type": "api_key", "name": "X-Api-Key", "value": "${HOSTILE_TEST_TOKEN}"}"#, "tok-same-4242", "${HOSTILE_TEST_TOKEN}"),
            (#"{"type": "oauth2_client_credentials", "token_url": "\#(server.baseURL)/token-huge", "client_id": "cid", "client_secret": "${HOSTILE_TEST_TOKEN}"}"#,
             "tok-huge-1", "${oauth2:access_token}"),
            // Found by a probe: basic's encoded credentials were kept in clear in the key.
            (#"{"type": "basic", "username": "${HOSTILE_TEST_TOKEN}", "password": "pw-same-99"}"#,
             Data("tok-same-4242:pw-same-99".utf8).base64EncodedString(), "${basic:credentials}"),
        ]
        for (auth, credential, reference) in auths {
            let log = LogRecorder()
            let source = try makeSource(#"{"url": "\#(url)", "items": "/items", "pagination": \#(pagination), "auth": \#(auth)}"#, log: log)
            let pager = Pager(source: source)
            let first = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 2)))
            let key = try #require(first.nextKey.map { String(decoding: $0.bytes, as: UTF8.self) })
            #expect(key.contains(reference) && !key.contains(credential), "\(key)")
            let second = try await pager.load(pager.request(.append, key: first.nextKey!, params: PagingRequestParams(pageSize: 2)))
            #expect(second.values.count == 2)
            let sent = try #require(try await server.seen().last { $0["path"] as? String == "/echo-same" })
            let query = try #require(sent["query"] as? String)
            #expect(query.contains(credential), "the request for the key fills the credential in: \(query)")
            #expect(!log.contains(credential), "\(log.messages)")
        }
    }

    /// A secret whose text is written inside another one's reference (a password
    /// "credentials" inside `${basic:credentials}`): the key kept the reference with the
    /// password's own reference inside it, and the next request sent that text, not the
    /// credentials. Each reference is now written once, and filled in whole.
    @Test func aSecretWrittenInsideAnotherSecretsReference_leavesThatReferenceWhole() async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_TEST_PASSWORD", "credentials")
        let credential = Data("tok-same-4242:credentials".utf8).base64EncodedString()
        let (key, query, log) = try await cursorEchoed(query: "", auth: #"{"type": "basic", "username": "tok-same-4242", "password": "${HOSTILE_TEST_PASSWORD}"}"#)
        #expect(key == "2-${basic:credentials}", "\(key)")
        #expect(query.contains("cursor=2-\(credential)"), "the request for the key fills the credentials in: \(query)")
        #expect(!log.contains(credential), "\(log.messages)")
    }

    /// Found by a review: secrets that overlap where a server echoes them ("acct-K9fq" and
    /// "K9fq2LmZ8xWc4RtY" in "acct-K9fq2LmZ8xWc4RtY"), or a config value an OAuth2 token begins
    /// with: the one that began first was hidden, and most of the other was left in clear in the
    /// key and in the error quoting it. The longer is hidden whole, and a message redacts both.
    /// And (a review) one whose start repeats at its end ("s3cr3ts3cr3ts"): its second place,
    /// beginning inside a first that overlapped the longer secret, was left in clear.
    @Test(arguments: ["overlap", "token", "repeat"])
    func overlappingSecrets_theLongerIsHiddenWhole_andMessagesShowNeither(_ kind: String) async throws {
        let folder = scratchFolder()
        let token = "acme-7f3k9q2wzzTOKENTAIL"
        let (short, long, echoed, shown) = switch kind {
        case "overlap": ("acct-K9fq", "K9fq2LmZ8xWc4RtY", "acct-K9fq2LmZ8xWc4RtY", "acct-${file:\(folder)/long}")
        case "token": ("acme", token, token, "${oauth2:access_token}")
        default: ("s3cr3ts", "acct-9s3", "acct-9s3cr3ts3cr3ts", "${file:\(folder)/long}cr3t${file:\(folder)/short}")
        }
        try short.write(toFile: folder + "/short", atomically: true, encoding: .utf8)
        try long.write(toFile: folder + "/long", atomically: true, encoding: .utf8)
        let server = try startServer { request in
            if request.path == "/token" { return .json(#"{"access_token": "\#(token)", "expires_in": 3600}"#) }
            let cursor = request.query["cursor"] ?? ""
            if cursor.isEmpty { return .json(#"{"items": [{"id": 1}], "next": "2-\#(echoed)"}"#) }
            return .json(#"{"message": "bad cursor \#(cursor)"}"#, status: 400)
        }
        defer { server.stop() }
        let auth = kind != "token" ? #"{"type": "bearer", "token": "${file:\#(folder)/long}"}"#
            : #"{"type": "oauth2_client_credentials", "token_url": "\#(server.baseURL)/token", "client_id": "cid", "client_secret": "csecret-1234"}"#
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?cursor={key}", "items": "/items", "pagination": {"type": "cursor", "next": "/next"}, "#
                                    + #""headers": {"X-Account": "${file:\#(folder)/short}"}, "auth": \#(auth)}"#, log: log)
        let pager = Pager(source: source)
        let first = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 2)))
        let key = try #require(first.nextKey.map { String(decoding: $0.bytes, as: UTF8.self) })
        #expect(key == "2-" + shown, "\(key)")
        let error = await #expect(throws: PluginError.self) {
            try await pager.load(pager.request(.append, key: first.nextKey!, params: PagingRequestParams(pageSize: 2)))
        }
        let message = try #require(error?.message)
        #expect(message.contains("bad cursor 2-***") && !message.contains("K9fq") && !message.contains("7f3k") && !message.contains("cr3ts"), "\(message)")
        #expect(!log.contains("K9fq") && !log.contains("7f3k") && !log.contains("cr3ts"), "\(log.messages)")
    }

    /// Found by a review: an OAuth2 token that the 200-byte cut of an error body went through
    /// left its head in the message (the config's secrets were redacted before the cut, tokens
    /// only after it).
    @Test func anOAuth2TokenAcrossTheCutOfAnErrorBody_leavesNothingBehind() async throws {
        let token = "tok-0123456789abcdefghijklmnopqrstuvwxyz"
        let server = try startServer { request in
            if request.path == "/token" { return .json(#"{"access_token": "\#(token)", "expires_in": 3600}"#) }
            let pad = String(repeating: "x", count: 160)
            return .json(#"{"message": "\#(pad) \#(token) is not valid for this resource"}"#, status: 400)
        }
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items", "items": "/items", "auth": {"type": "oauth2_client_credentials", "#
                                    + #""token_url": "\#(server.baseURL)/token", "client_id": "cid", "client_secret": "csecret-1234"}}"#)
        let error = try #require(await loadError(source, pageSize: 2) as? PluginError)
        #expect(error.message.contains("HTTP 400 from ") && error.message.contains("xxxx"), "\(error.message)")
        #expect(!error.message.contains("tok-0"), "\(error.message)")
    }

    /// Found by a probe: basic's encoded credentials echoed in another base64 form (URL-safe,
    /// without padding) were kept in clear in the key. Each form is kept as a reference of its
    /// own, filled in as that form.
    @Test(arguments: ["url", "unpadded"])
    func basicCredentialsEchoedInAnotherBase64Form_stayReferences(_ form: String) async throws {
        defer { server.stop() }
        let encoded = Data("tok:~~~a??x".utf8).base64EncodedString()
        #expect(encoded == "dG9rOn5+fmE/P3g=")
        let unpadded = String(encoded.dropLast())
        let echoed = form == "url" ? unpadded.replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_") : unpadded
        let (key, query, log) = try await cursorEchoed(query: "&form=\(form)", auth: #"{"type": "basic", "username": "tok", "password": "~~~a??x"}"#)
        #expect(key == "2-${basic:credentials-\(form)}", "\(key)")
        #expect(query.contains("cursor=2-\(echoed)"), "the request for the key fills the form in: \(query)")
        #expect(!log.contains(echoed), "\(log.messages)")
    }

    /// Pages twice through /echo-same, which echoes the credentials sent in its cursor, with
    /// `auth`: the next key read from the first page, the query of the request for it (percent
    /// decoded), and the source's log.
    private func cursorEchoed(query: String, auth: String) async throws -> (key: String, query: String, log: LogRecorder) {
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/echo-same?via=cursor\#(query)&cursor={key}", "items": "/items", "#
                                    + #""pagination": {"type": "cursor", "next": "/next"}, "auth": \#(auth)}"#, log: log)
        let pager = Pager(source: source)
        let first = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 2)))
        let key = try #require(first.nextKey.map { String(decoding: $0.bytes, as: UTF8.self) })
        let second = try await pager.load(pager.request(.append, key: first.nextKey!, params: PagingRequestParams(pageSize: 2)))
        #expect(second.values.count == 2)
        let sent = try #require(try await server.seen().last { $0["path"] as? String == "/echo-same" })
        return (key, try #require((sent["query"] as? String)?.removingPercentEncoding), log)
    }

    /// Found by a probe: a credential with reserved characters ("+", "/", "=") that a server
    /// echoed percent-encoded in a next link went back raw ("+" then reads as a space): it goes
    /// back encoded, as the server wrote it; echoed raw in a cursor, it is encoded as the url's
    /// {key} encodes any key. Echoed encoded twice ("%252B"), it was not found at all: the key
    /// held it, and so did the log lines and stores that keys reach.
    @Test(arguments: ["link", "link2", "cursor"])
    func aCredentialWithReservedCharacters_echoedInAKey_goesBackAsItWas(_ via: String) async throws {
        defer { server.stop() }
        let credential = "tok+same/4242=="
        setTestEnvironment("HOSTILE_TEST_TOKEN", credential)
        let pagination = via == "cursor" ? #"{"type": "cursor", "next": "/next"}"# : #"{"type": "link"}"#
        let url = "\(server.baseURL)/echo-same?via=\(via)" + (via == "cursor" ? "&cursor={key}" : "&page=1")
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(url)", "items": "/items", "pagination": \#(pagination), "auth": {"type": "bearer", "token": "${HOSTILE_TEST_TOKEN}"}}"#,
                                    log: log)
        let pager = Pager(source: source)
        let first = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 2)))
        let key = try #require(first.nextKey.map { String(decoding: $0.bytes, as: UTF8.self) })
        #expect(!key.contains("tok") && !key.contains("4242"), "\(key)")
        let second = try await pager.load(pager.request(.append, key: first.nextKey!, params: PagingRequestParams(pageSize: 2)))
        #expect(second.values.count == 2)
        let sent = try #require(try await server.seen().last { $0["path"] as? String == "/echo-same" })
        let query = try #require(sent["query"] as? String)
        let items = URLComponents(string: "http://x/?" + query)?.queryItems ?? []
        let echoed = items.first { $0.name == (via == "cursor" ? "cursor" : "t") }?.value
        let expected = ["link": credential, "link2": "tok%2Bsame%2F4242%3D%3D", "cursor": "2-" + credential]
        #expect(echoed == expected[via], "\(query)")
        #expect(!log.contains("4242"), "\(log.messages)")
    }

    /// A cursor "/data/*/id" is the last item's id: a last item without one is no cursor (an
    /// earlier item's was taken, and the next page repeated items, exit 0).
    @Test func aCursorThroughAStar_whoseLastItemHasNone_isNoCursor() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/cursor-last-no-id?starting_after={key}", "items": "/data", "#
            + #""pagination": {"type": "cursor", "next": "/data/*/id", "has_more": "/has_more"}}"#, pageSize: 3)
        #expect(error.message.contains(#"has_more at "/has_more" is true, but there is no cursor at "/data/*/id""#), "\(error.message)")
        #expect(try await server.seen().count == 1)
    }

    /// A total written as a whole number in any JSON form ends paging there; one that is
    /// missing or no whole number fails the page (paging went on past it, repeating the last
    /// page of a server that clamps, exit 0).
    @Test func aTotal_endsPagingWhateverItsForm_andOneThatIsNoCount_failsThePage() async throws {
        defer { server.stop() }
        for (total, place) in [("4.0", #""total": "/total""#), ("4e0", #""total": "/total""#), ("%224%22", #""total": "/total""#),
                               ("4.0", #""total_header": "X-Total-Count""#)] {
            let source = try makeSource(#"{"url": "\#(server.baseURL)/clamp-total?total=\#(total)&page={key}", "items": "/items", "#
                + #""pagination": {"type": "page", \#(place)}}"#)
            let manager = try await pageToEnd(source, pageSize: 2)
            #expect(manager.output.values.count == 4, "\(total) at \(place)")
        }
        for (total, place, expected) in [("4", #""total": "/totl""#, #"the total at "/totl" is missing"#),
                                         ("4.5", #""total": "/total""#, #"the total at "/total" is "4.5", not a whole number of items"#),
                                         ("null", #""total": "/total""#, #"the total at "/total" is not a whole number of items"#),
                                         ("-1", #""total_header": "X-Total-Count""#, #"the total header x-total-count is "-1""#),
                                         // Found by a probe: taken as 4, and as 4 (hexadecimal).
                                         ("%22%2B4%22", #""total": "/total""#, #"the total at "/total" is "+4", not a whole number"#),
                                         ("%220x4%22", #""total": "/total""#, #"the total at "/total" is "0x4", not a whole number"#)] {
            let error = try await refreshError(#"{"url": "\#(server.baseURL)/clamp-total?total=\#(total)&page={key}", "items": "/items", "#
                + #""pagination": {"type": "page", \#(place)}}"#)
            #expect(error.message.contains(expected), "\(error.message)")
        }
    }

    /// Found by a probe: a server that caps the page size (7 of the 10 asked) sent a short first
    /// page, and paging ended there with 38 of 45 items lost, exit 0, though the total said
    /// more. A short page goes on while the total says items remain; every item comes once.
    /// Found by a second probe: pages of 3 for a page size of 5 and a total of 23 ended after the
    /// fifth page, 15 items, exit 0: 4 pages of 5 and one of 3 make 23, so it was taken for the
    /// last one. Once a short page of the walk went on, every page is taken for one of the cap,
    /// and each page is asked for once.
    @Test(arguments: [("page", "page={key}", 45, 7, 10), ("offset", "offset={offset}", 45, 7, 10), ("page", "page={key}", 23, 3, 5),
                      ("page", "page={key}", 1000, 100, 150)])
    func aServerThatCapsThePageSize_isPagedToItsTotal(_ type: String, _ query: String, total: Int, cap: Int, pageSize: Int) async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/capped?\#(query)&limit={pageSize}&total=\#(total)&cap=\#(cap)", "#
            + #""items": "/items", "pagination": {"type": "\#(type)", "total": "/total"}}"#)
        let manager = try await pageToEnd(source, pageSize: pageSize)
        #expect(try ids(manager.output.values) == Array(0..<total))
        // One request a page: each short page was asked for twice (the manager reloads a short
        // page whose next key the key chain also gave, as a guess), or once more after the last.
        let requests = try await server.seen().filter { $0["path"] as? String == "/capped" }.count
        #expect(requests == (total + cap - 1) / cap, "\(requests) requests")
    }

    /// Found by a probe: an empty page whose has_more is true and which names the next cursor
    /// (APIs that filter on the server send them) ended paging, 30 of 50 items lost, exit 0.
    /// has_more goes on past it; without has_more an empty page still ends paging.
    @Test func anEmptyPageWhoseHasMoreIsTrue_isPagedPast() async throws {
        defer { server.stop() }
        for (stop, expected) in [(#", "has_more": "/has_more""#, Array(0..<20) + Array(30..<50)), ("", Array(0..<20))] {
            let source = try makeSource(#"{"url": "\#(server.baseURL)/empty-middle?cursor={key}", "items": "/items", "#
                + #""pagination": {"type": "cursor", "next": "/next"\#(stop)}}"#)
            let manager = try await pageToEnd(source, pageSize: 10)
            #expect(try ids(manager.output.values) == expected, "\(stop)")
        }
    }

    /// timeout_ms is the whole transfer, its redirects included: 8 hops of 0.4 s each with
    /// timeout_ms 1,000 time out (each hop had timeout_ms of its own: 3.2 s, loaded).
    @Test func timeoutMs_boundsTheRedirectsToo() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/slow-redirect?n=1", "items": "/items", "timeout_ms": 1000}"#)
        #expect(error.status == .timeout, "\(error.message)")
        #expect(error.message.contains("timed out after 1000 ms"), "\(error.message)")
        #expect(try await server.seen().count < 8)
    }

    /// A token endpoint that says 429 with Retry-After: the load fails as transient with the
    /// wait as its retry hint, as a page's 429 does (the hint was dropped, and the host's retries
    /// asked the endpoint again at once).
    @Test func aTokenEndpointRateLimiting_givesItsRetryHint() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items", "items": "/items", "#
            + #""auth": {"type": "oauth2_client_credentials", "token_url": "\#(server.baseURL)/token-429", "client_id": "cid", "client_secret": "s3cret-x"}}"#)
        let error = try #require(await loadError(source, pageSize: 2) as? PluginError)
        #expect(error.status == .transient)
        #expect(error.message.contains("failed: HTTP 429: "), "\(error.message)")
        #expect(error.retryAfter == .seconds(120))
        // Said once, by the host (the message said it too, and pager printed it twice).
        #expect("\(error)".components(separatedBy: "retry after").count == 2, "\(error)")
        // A retry policy whose longest wait is shorter gives up at once.
        let retried = await loadError(source, retry: RetryPolicy(maxRetries: 3, backoff: .immediate), pageSize: 2)
        guard case .retryAfterBeyondBackoff(let hint, _, _) = retried as? PagingError else {
            Issue.record("\(String(describing: retried))")
            return
        }
        #expect(hint == .seconds(120))
        #expect(try await server.seen().filter { $0["path"] as? String == "/token-429" }.count == 2)
    }

    /// A gzip body libcurl's decoder stops on (bytes after it, a second member) cannot be
    /// decompressed, and no retry helps (it was a transient "failed writing received data to
    /// disk", asked again by every retry).
    @Test(arguments: [1, 2])
    func aGzipBodyWithMoreAfterIt_cannotBeDecompressed(_ members: Int) async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/gzip-trailing?members=\#(members)", "items": "/items"}"#)
        let error = try #require(await loadError(source, retry: RetryPolicy(maxRetries: 2, backoff: .immediate), pageSize: 2) as? PluginError)
        #expect(error.status == .internal)
        #expect(error.message.contains("cannot be decompressed"), "\(error.message)")
        #expect(try await server.seen().count == 1)
    }

    @Test func allowedHosts_letConfiguredHeadersFollow() async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_TEST_TOKEN", "tok-allowed-456")
        let source = try makeSource("""
            {"url": "\(server.baseURL)/redirect-other", "items": "/items", "allowed_hosts": ["localhost"],
             "headers": {"Authorization": "Bearer ${HOSTILE_TEST_TOKEN}"}}
            """)
        #expect(await loadError(source, pageSize: 2) == nil)
        let second = try #require(try await server.seen().first { $0["path"] as? String == "/items" })
        #expect(second["authorization"] as? String == "Bearer tok-allowed-456")
    }

    /// Page 1 links to another host name of the same server: plainly, and hidden behind a
    /// combining mark after a "/" (read by Character, the host after the "@" seemed trusted).
    @Test(arguments: ["/link-other?page=1", "/link-combining?page=1"])
    func aLinkToAnotherHost_isFetchedWithoutConfiguredHeaders(_ path: String) async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_TEST_TOKEN", "tok-link-789")
        let source = try makeSource("""
            {"url": "\(server.baseURL)\(path)", "items": "/items", "pagination": {"type": "link"},
             "headers": {"Authorization": "Bearer ${HOSTILE_TEST_TOKEN}"}}
            """)
        let manager = try await pageToEnd(source, pageSize: 2)
        #expect(manager.output.values.count == 4)
        let seen = try await server.seen()
        #expect(seen.count == 2)
        #expect(seen[0]["authorization"] as? String == "Bearer tok-link-789")
        #expect((seen[1]["host"] as? String)?.hasPrefix("localhost:") == true, "\(seen)")
        #expect(seen[1]["authorization"] is NSNull, "\(seen)")
    }

    /// The same host on another port is another server: a Link there goes without the
    /// configured headers, unless `allowed_hosts` names that host:port.
    @Test func aLinkToAnotherPortOfTheHost_isFetchedWithoutConfiguredHeaders() async throws {
        defer { server.stop() }
        let other = try FixtureServer("http/hostile_server.py")
        defer { other.stop() }
        setTestEnvironment("HOSTILE_TEST_TOKEN", "tok-port-321")
        let config = { (allowed: String) in
            """
            {"url": "\(server.baseURL)/link-port?page=1&to=\(other.port)", "items": "/items", "pagination": {"type": "link"},
             "headers": {"Authorization": "Bearer ${HOSTILE_TEST_TOKEN}"}, "allowed_hosts": [\(allowed)]}
            """
        }
        #expect(try await pageToEnd(try makeSource(config("")), pageSize: 2).output.values.count == 4)
        #expect(try await server.seen().first?["authorization"] as? String == "Bearer tok-port-321")
        let away = try #require(try await other.seen().last)
        #expect(away["path"] as? String == "/items" && away["authorization"] is NSNull, "\(away)")
        // Allowed by host:port, the headers follow.
        #expect(try await pageToEnd(try makeSource(config(#""127.0.0.1:\#(other.port)""#)), pageSize: 2).output.values.count == 4)
        #expect(try await other.seen().last?["authorization"] as? String == "Bearer tok-port-321")
    }

    @Test func allowedHosts_refusesWhatIsNotAHostOrHostAndPort() throws {
        // The last four were accepted, and could never match a host.
        for entry in ["http://a.example", "a.example/x", "a.example?x", "a.example:", "a.example:http", "a.example:70000", "user@a.example",
                      "*", "::1", "127.0.0.1:18802:1", "[::1"] {
            let error = #expect(throws: (any Error).self, "\(entry)") {
                try makeSource(#"{"url": "http://127.0.0.1:1/x?page={key}", "allowed_hosts": ["\#(entry)"]}"#)
            }
            let message = error.map { "\($0)" } ?? ""
            #expect(message.contains(#"allowed_hosts: "\#(entry)" is not a host name or host:port"#), "\(message)")
        }
        _ = try makeSource(#"{"url": "http://127.0.0.1:1/x?page={key}", "allowed_hosts": ["a.example", "A.Example:8443", "[::1]:8080", "[::1]", "10.0.0.1"]}"#)
    }

    // MARK: Every byte read is bounded

    @Test func anEndlessBody_stopsAtMaxPageBytes() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/endless", "items": "/items", "max_page_bytes": 1048576}"#)
        #expect(error.status == .internal)
        #expect(error.message.contains("the body from \(server.baseURL)/endless (HTTP 200) is larger than max_page_bytes (1048576 bytes"))
    }

    /// A body that says gzip and is not: the error names the URL and the status.
    @Test func aBodyThatIsNotTheGzipItSays_failsNamingTheStatus() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/fake-gzip", "items": "/items"}"#)
        #expect(error.status == .internal)
        #expect(error.message.contains("the body from \(server.baseURL)/fake-gzip (HTTP 200) cannot be decompressed"), "\(error.message)")
    }

    @Test func aGzipBomb_stopsAtMaxPageBytes_countedAfterDecompression() async throws {
        defer { server.stop() }
        let before = peakResidentBytes()
        #expect(before > 1 << 20, "the peak RSS reads as \(before) bytes") // it read 0: every bound held
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/gzip-bomb", "items": "", "max_page_bytes": 4194304}"#)
        #expect(error.message.contains("larger than max_page_bytes (4194304 bytes, counted after any decompression)"))
        // Unbounded, the 256 MiB inflated would show; the limit keeps the growth to a few MiB.
        // (The peak is the whole test process's: the bound leaves room for other suites.)
        #expect(peakResidentBytes() - before < 128 << 20)
    }

    @Test(arguments: ["/huge-header", "/many-headers"])
    func hugeResponseHeaders_stopWithAClearError(_ path: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)\#(path)", "items": "/items"}"#)
        #expect(error.message.contains("response headers from \(server.baseURL)\(path)"), "\(error.message)")
        #expect(error.message.contains("too large") || error.message.contains("larger than max_header_bytes"))
    }

    @Test func aServerSendingAByteASecond_endsAtTheTimeout() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/slow", "items": "/items", "timeout_ms": 1000}"#)
        #expect(error.status == .timeout)
        #expect(error.message.contains("timed out after 1000 ms fetching \(server.baseURL)/slow"))
    }

    @Test func pagerRun_exitsAfterTimeoutsAndRetries_onAnEndlessTrickle() async throws {
        defer { server.stop() }
        let folder = scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let manifest = folder + "/slow.json"
        try """
            {"source": {"plugin": "\(try httpPluginPath())",
                        "config": {"url": "\(server.baseURL)/slow", "items": "/items", "timeout_ms": 500}},
             "page_size": 2, "retry": {"max_retries": 1, "initial_backoff_ms": 10}}
            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", manifest, "--refresh"], deadline: .seconds(120))
        #expect(!result.timedOut, "pager run did not exit")
        #expect(result.code != 0)
        #expect(result.stderr.contains("timed out after 500 ms"), "\(result.stderr)")
    }

    /// Interrupted, `pager run` cancels the load in flight (here one that would take a quarter
    /// of an hour), prints the items it loaded and ends with 128 + the signal's number. SIGHUP
    /// (the terminal closed) is one such signal: it ended pager with the items buffered unwritten.
    /// Killed, it has written out every page it reported (it buffered up to 64 KiB).
    @Test(arguments: [SIGINT, SIGTERM, SIGHUP, SIGKILL])
    func pagerRun_interrupted_printsTheItemsLoaded(_ signal: Int32) async throws {
        defer { server.stop() }
        let folder = scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let manifest = folder + "/then-slow.json"
        try """
            {"source": {"plugin": "\(try httpPluginPath())",
                        "config": {"url": "\(server.baseURL)/then-slow?page=1", "items": "/items",
                                   "pagination": {"type": "link"}, "timeout_ms": 600000}},
             "page_size": 2}
            """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let run = try PagerProcess(["run", manifest, "--append", "10"])
        #expect(await run.waitFor("append: +2 items, 4 in all"), "\(run.stderr)")
        let status = await run.stop(signal)
        let ids = run.stdout.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Int] }
        #expect(ids == [["id": 10], ["id": 11], ["id": 20], ["id": 21]], "\(run.stdout)")
        guard signal != SIGKILL else {
            #expect(status == SIGKILL)
            return
        }
        #expect(status == 128 + signal)
        #expect(run.stderr.contains("4 items in 2 pages"), "\(run.stderr)")
        let name = [SIGINT: "SIGINT", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP"][signal]!
        #expect(run.stderr.contains("stopped by \(name); the items loaded are printed"), "\(run.stderr)")
    }

    // MARK: What came instead is said

    @Test func aReplyThatIsNotHTTP_saysWhatCame() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/not-http", "items": "/items"}"#)
        #expect(error.message.contains("the reply from \(server.baseURL)/not-http is not HTTP: it begins with \"SSH-2.0-OpenSSH_9.2p1"), "\(error.message)")
    }

    /// Found by a probe: a status line without a three-digit code was taken for a bad
    /// request of this source ("invalid request: cannot fetch", never retried); it is the
    /// server's fault, said as such.
    @Test(arguments: ["2000", "-200", "abc"])
    func aStatusLineWithoutAValidCode_isTheServersFault(_ code: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/bad-status?code=\#(code)", "items": "/items"}"#)
        #expect(error.status == .internal)
        #expect(error.message.contains("the reply from \(server.baseURL)/bad-status?code=\(code) is not HTTP: its status line is not valid"), "\(error.message)")
    }

    /// Found by a review: a walk whose earlier pages this process never loaded (a `pager serve`
    /// cursor another process gave out, pages a store answered) has no cap to go by; a short
    /// page whose count ends the total by the page size was then taken for the last (15 of 23
    /// items). Without a full page seen first, the next page is asked for.
    @Test func aShortPageOfAWalkLoadedElsewhere_isNotTakenForTheLast() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/capped?page={key}&limit={pageSize}&total=23&cap=5", "#
            + #""items": "/items", "pagination": {"type": "page", "total": "/total"}}"#)
        let pager = Pager(source: source)
        // Pages of 5 for a page size of 9: page 3 holds 10 to 14, and 2 × 9 + 5 = 23.
        let third = try await pager.load(pager.request(.append, key: PluginKey("3"), params: PagingRequestParams(pageSize: 9)))
        #expect(third.values.count == 5)
        #expect(third.nextKey == PluginKey("4"), "\(String(describing: third.nextKey))")
    }

    /// Found by a probe: a body whose chunked encoding is broken was called "the connection was
    /// lost" and retried, though the server sends it the same way each time.
    @Test(arguments: ["hex", "crlf"])
    func aBrokenChunkedBody_isTheServersFault(_ kind: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/bad-chunk?kind=\#(kind)", "items": "/items"}"#)
        #expect(error.status == .internal)
        #expect(error.message.contains("the body from \(server.baseURL)/bad-chunk?kind=\(kind) (HTTP 200) is not valid chunked encoding"), "\(error.message)")
        #expect(!error.message.contains("connection was lost"), "\(error.message)")
    }

    /// Found by a probe: a next-page header that is not UTF-8 became U+FFFD, and the next
    /// request asked for another page than the server named.
    @Test func aNextPageHeaderThatIsNotUTF8_failsTheLoad_sayingSo() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/next-latin1?page={key}", "items": "/items", "pagination": {"type": "header", "next": "X-Next-Page", "first": "1"}}"#)
        #expect(error.status == .internal)
        #expect(error.message.contains("malformed response from \(server.baseURL)/next-latin1?page=1: the x-next-page header is not UTF-8 text"), "\(error.message)")
    }

    @Test(arguments: [
        ("/not-json", "not JSON: unexpected '<' at byte 0, where a value was expected (HTTP 200, 39 bytes: <html><body>Service moved</body></html>)"),
        ("/truncated", #"the body ends early at byte 25, inside an array or object (truncated JSON) (HTTP 200, 25 bytes: {"items":[{"id":1},{"id":)"#),
        ("/not-array", #"the items pointer "/items" resolves to an object, not an array (HTTP 200, 20 bytes: {"items": {"id": 1}})"#),
        ("/cursor-object", #"the cursor at "/next" is an object, not a string or a number (HTTP 200, "#),
    ])
    func aBodyThatIsNotTheItems_isInternal_sayingWhereWithStatusAndBody(_ path: String, _ expected: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)\#(path)", "items": "/items", "pagination": {"type": "cursor", "next": "/next"}}"#)
        #expect(error.status == .internal)
        #expect(error.message.contains("malformed body from \(server.baseURL)\(path)"))
        #expect(error.message.contains(expected), "\(error.message)")
    }

    /// A page fetched ahead is scanned when it comes, before it is asked for: a body that is
    /// not JSON fails its load as it would have without the request ahead.
    @Test func aBadPageFetchedAhead_failsItsLoad_sayingWhere() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/bad-third?page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        let manager = PaginationManager(pager: Pager(source: source), configuration: .init(pageSize: 2))
        await manager.refresh().value
        await manager.append().value
        #expect(manager.output.appendState.error == nil)
        // Page 3 went out ahead with the append of page 2: wait until the server has seen it.
        #expect(try await eventually {
            try await server.seen().contains { $0["path"] as? String == "/bad-third" && $0["query"] as? String == "page=3" }
        })
        await manager.append().value
        let error = try #require(manager.output.appendState.error as? PluginError)
        #expect(error.status == .internal)
        #expect(error.message.contains("malformed body from \(server.baseURL)/bad-third?page=3: not JSON: the body ends early at byte 25"), "\(error.message)")
        #expect(manager.output.values.count == 4)
    }

    /// A trailer after a chunked body is not a header of the response: it replaced them, and
    /// with them the Link to the next page (paging ended after the first page, exit 0).
    @Test func aTrailerAfterAChunkedBody_keepsTheResponseHeaders() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/trailer?page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        #expect(try ids(try await pageToEnd(source, pageSize: 2).output.values) == [10, 11, 20, 21, 30, 31])
    }

    /// A fetch waiting for a page ahead whose transfer times out fails with that timeout: its
    /// own request sent then made it wait as long again.
    @Test func aPageAheadThatTimesOut_failsTheFetchWaitingForIt_withoutAskingAgain() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/then-slow?page=1", "items": "/items", "pagination": {"type": "link"}, "timeout_ms": 3000}"#)
        let manager = PaginationManager(pager: Pager(source: source), configuration: .init(pageSize: 2))
        await manager.refresh().value
        await manager.append().value
        #expect(manager.output.values.count == 4)
        await manager.append().value
        let error = try #require(manager.output.appendState.error as? PluginError)
        #expect(error.message.contains("\(server.baseURL)/then-slow?page=3") && error.message.contains("3000 ms"), "\(error.message)")
        #expect(try await server.seen().filter { $0["query"] as? String == "page=3" }.count == 1)
    }

    /// The `prefetch` depth: the pages ahead go out one after another before anyone asks for
    /// them, up to that many; each page is requested once, those ahead handed out without a
    /// request of their own. (The /items pages never end.)
    @Test(arguments: [
        (nil, [1, 2, 3, 4], [1, 2, 3, 4, 5, 6]),
        ("1", [1, 2, 3], [1, 2, 3, 4, 5]),
        ("4", [1, 2, 3, 4, 5, 6], [1, 2, 3, 4, 5, 6, 7, 8]),
        ("false", [1, 2], [1, 2, 3, 4]),
    ] as [(String?, [Int], [Int])])
    func thePagesAhead_goOutUpToThePrefetchDepth_eachOnce(_ prefetch: String?, _ afterTwo: [Int], _ afterFour: [Int]) async throws {
        defer { server.stop() }
        let option = prefetch.map { #", "prefetch": \#($0)"# } ?? ""
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}", "items": "/items"\#(option)}"#)
        let pager = Pager(source: source)
        let params = PagingRequestParams(pageSize: 2)
        func requested() async throws -> [Int] {
            try await server.seen().map { try #require(($0["query"] as? String).flatMap { Int($0.dropFirst("page=".count)) }) }
        }
        var page = try await pager.load(pager.refreshRequest(params: params))
        page = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: params))
        #expect(try await eventually { try await requested() == afterTwo })
        for _ in 0..<2 { page = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: params)) }
        #expect(try ids(page.values) == [40, 41])
        #expect(try await eventually { try await requested() == afterFour })
        #expect(try await requested() == afterFour)
    }

    /// A pager over `path` (`?page={key}`, pages of 2: `params`) with `options` in its config,
    /// and the second page it loaded: the third went out ahead (the server saw it).
    private func pagedToTwo(_ path: String, options: String? = nil) async throws -> (PluginPager, PluginPage, params: PagingRequestParams) {
        let extra = options.map { ", \($0)" } ?? ""
        let pager = Pager(source: try makeSource(#"{"url": "\#(server.baseURL)\#(path)?page={key}", "items": "/items"\#(extra)}"#))
        let params = PagingRequestParams(pageSize: 2)
        let first = try await pager.load(pager.refreshRequest(params: params))
        let second = try await pager.load(pager.request(.append, key: try #require(first.nextKey), params: params))
        #expect(try await eventually { try await server.seen().count == 3 })
        return (pager, second, params)
    }

    /// Found by a probe: a page fetched ahead waited for its fetch however long it took (30 s
    /// later it was handed out, and stored as fresh). One older than `prefetch_max_age_ms` is
    /// dropped, and the fetch that asks for it sends its own request.
    @Test func aPageAheadOlderThanItsMaxAge_isFetchedAgain() async throws {
        defer { server.stop() }
        var (pager, page, params) = try await pagedToTwo("/items", options: #""prefetch": 1, "prefetch_max_age_ms": 100"#)
        // Past its age however late it was stored (the server saw the request before).
        try await Task.sleep(for: .seconds(1))
        page = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: params))
        #expect(try ids(page.values) == [30, 31])
        let expected = ["page=1", "page=2", "page=3", "page=3", "page=4"]
        #expect(try await eventually { try await server.seen().compactMap { $0["query"] as? String } == expected })
    }

    /// The keys of a page fetched ahead are found once, for the page size it was asked with: a
    /// fetch that claims it with another page size gets keys for its own (2 items of 3 asked
    /// is the last page; of 2 asked, it was not).
    @Test func aPageAheadClaimedWithAnotherPageSize_getsTheKeysOfThatSize() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}", "items": "/items"}"#)
        let pager = Pager(source: source)
        var page = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 2)))
        page = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: PagingRequestParams(pageSize: 2)))
        #expect(try await eventually { try await server.seen().count == 4 })
        let claimed = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: PagingRequestParams(pageSize: 3)))
        #expect(try ids(claimed.values) == [30, 31])
        #expect(claimed.nextKey == nil, "\(String(describing: claimed.nextKey))")
        #expect(try await server.seen().count == 4, "the page ahead was asked for again")
    }

    /// Found by a probe: a 429 (a 403 rate limit, a 503 saying when) to a page fetched ahead
    /// was dropped, and the fetch that asked for it sent its own request at once, not waiting
    /// as the server said. The fetch fails with it, the server's wait its retry hint.
    @Test func aPageAheadAnswered429_failsItsFetchWithTheWait_insteadOfAskingAgainAtOnce() async throws {
        defer { server.stop() }
        let (pager, page, params) = try await pagedToTwo("/busy-third")
        let error = await #expect(throws: PluginError.self) {
            _ = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: params))
        }
        #expect(error?.status == .transient && error?.retryAfter == .seconds(7), "\(String(describing: error))")
        #expect(error?.message.contains("HTTP 429 from \(server.baseURL)/busy-third?page=3") == true, "\(String(describing: error))")
        #expect(try await server.seen().compactMap { $0["query"] as? String } == ["page=1", "page=2", "page=3"])
    }

    /// A page ahead saying the rate limit is spent sends nothing after it: the fetch that claims
    /// it pauses for the reset (here longer than the timeout: the next load fails at once).
    @Test func aPageAheadSayingTheLimitIsSpent_stopsThePagesAhead() async throws {
        defer { server.stop() }
        var (pager, page, params) = try await pagedToTwo("/limited-third")
        page = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: params))
        #expect(try ids(page.values) == [30, 31])
        do {
            _ = try await pager.load(pager.request(.append, key: try #require(page.nextKey), params: params))
            Issue.record("page 4 loaded while the rate limit held")
        } catch let error as PluginError {
            #expect(error.status == .transient, "\(error)")
        }
        #expect(try await server.seen().compactMap { $0["query"] as? String } == ["page=1", "page=2", "page=3"])
    }

    // MARK: Loops and schemes

    @Test func aRedirectLoop_failsNamingTheHops() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/redirect-loop-a", "items": "/items"}"#)
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("redirect loop: \(server.baseURL)/redirect-loop-a -> \(server.baseURL)/redirect-loop-b -> \(server.baseURL)/redirect-loop-a"), "\(error.message)")
    }

    @Test func aRedirectToFile_isRefused() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/redirect-file", "items": "/items"}"#)
        #expect(error.message.contains("refusing the redirect from \(server.baseURL)/redirect-file to file:///etc/passwd"), "\(error.message)")
    }

    @Test(arguments: [("/link-file", "file:///etc/passwd"), ("/link-gopher", "gopher://127.0.0.1/1")])
    func aNextLinkThatIsNotHTTP_isRefused(_ path: String, _ link: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)\#(path)", "items": "/items", "pagination": {"type": "link"}}"#)
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("refusing the rel=\"next\" link \(link)"), "\(error.message)")
        #expect(try await server.seen().count == 1)
    }

    /// A next URL with a NUL is refused: libcurl would read it only up to the NUL, another host
    /// than the one the credentials were checked against (before, it was followed with them).
    @Test func aNextURLWithANul_isRefused() async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_TEST_TOKEN", "tok-nul-1234")
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/next-nul", "items": "/items", "pagination": {"type": "next_url", "next": "/next"}, "auth": {"type": "bearer", "token": "${HOSTILE_TEST_TOKEN}"}}"#)
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("it holds a control character"), "\(error.message)")
        #expect(try await server.seen().count == 1)
    }

    /// The page whose link goes round keeps its items (page 3 of 1 -> 2 -> 3 -> 2 was dropped
    /// with the error); the load of the repeated key fails, and it is not fetched ahead. The
    /// plugin refuses it (a caller without a list, as `pager serve`'s cursors); a list refuses
    /// it before asking the plugin.
    @Test(arguments: [
        (#""pagination": {"type": "link"}"#, "/link-cycle?page=1", [10, 11, 20, 21, 30, 31]),
        // A fragment never reaches the server: a new one each time hid the cycle.
        (#""pagination": {"type": "link"}"#, "/link-fragment?page=1", [10, 11, 20, 21, 30, 31]),
        (#""pagination": {"type": "cursor", "next": "/next"}"#, "/cursor-cycle?c={key}", nil),
    ] as [(String, String, [Int]?)])
    func aCycleLongerThanOneStep_failsInsteadOfRepeating(_ pagination: String, _ path: String, _ expectedIDs: [Int]?) async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)\#(path)", "items": "/items", \#(pagination)}"#)
        let pager = Pager(source: source)
        var page = try await pager.load(pager.refreshRequest(params: PagingRequestParams(pageSize: 1)))
        var loaded = Array(page.values)
        var failure: PluginError?
        for _ in 0..<6 {
            guard let next = page.nextKey else { break }
            do {
                page = try await pager.load(pager.request(.append, key: next, params: PagingRequestParams(pageSize: 1)))
                loaded += page.values
            } catch {
                failure = error as? PluginError
                break
            }
        }
        let error = try #require(failure)
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("pagination cycle at \(server.baseURL)"), "\(error.message)")
        #expect(error.message.contains("was already loaded in this direction"))
        if let expectedIDs { #expect(try ids(loaded) == expectedIDs) }
        #expect(try await server.seen().count <= 4)

        let manager = PaginationManager(pager: Pager(source: try makeSource(#"{"url": "\#(server.baseURL)\#(path)", "items": "/items", \#(pagination)}"#)),
                                        configuration: .init(pageSize: 1))
        await manager.refresh().value
        for _ in 0..<6 where manager.output.appendState.error == nil && !manager.output.appendState.isEndReached {
            await manager.append().value
        }
        #expect("\(manager.output.appendState.error.map { "\($0)" } ?? "no error")".contains("which the list loaded already"))
        if let expectedIDs { #expect(try ids(manager.output.values) == expectedIDs) }
    }

    // MARK: Found by a hostile probe: numbers, redirects of a POST, Link headers, secrets

    /// A server's hint may be any number: the load fails as a rate limit saying so, and nothing
    /// overflows (both crashed pager with an arithmetic overflow).
    @Test(arguments: [("/retry-huge", "HTTP 429", "(retry after more than a year)"),
                      ("/reset-huge", "HTTP 403", "rate limit exhausted (X-RateLimit-Remaining: 0; resets in ")])
    func aHugeRetryHint_failsTheLoad_withoutOverflowing(_ path: String, _ status: String, _ expected: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)\#(path)", "items": "/items"}"#)
        #expect(error.status == .transient)
        #expect(error.message.contains("\(status) from \(server.baseURL)\(path)") && "\(error)".contains(expected), "\(error)")
    }

    /// A source of /items paged by number, its OAuth2 token from `tokenPath`.
    func oauth2Config(_ tokenPath: String) -> String {
        setTestEnvironment("HOSTILE_CLIENT_SECRET", "client-secret-789")
        return #"{"url": "\#(server.baseURL)/items?page={key}", "items": "/items", "auth": {"type": "oauth2_client_credentials", "#
            + #""token_url": "\#(server.baseURL)\#(tokenPath)", "client_id": "cid", "client_secret": "${HOSTILE_CLIENT_SECRET}"}}"#
    }

    /// A token that lives "forever" is cached (an overflow crashed pager); one holding a line
    /// break is refused, never sent as header lines of its own.
    @Test func oauth2Tokens_aHugeLifetimeIsKept_andALineBreakIsRefused() async throws {
        defer { server.stop() }
        let pager = Pager(source: try makeSource(oauth2Config("/token-huge")))
        for key in ["1", "2"] {
            #expect(try await pager.load(pager.request(.refresh, key: PluginKey(key), params: PagingRequestParams(pageSize: 2))).values.count == 2)
        }
        let items = try await server.seen().filter { $0["path"] as? String == "/items" }
        #expect(!items.isEmpty && items.allSatisfy { $0["authorization"] as? String == "Bearer tok-huge-1" }, "\(items)")
        #expect(try await server.seen().filter { $0["path"] as? String == "/token-huge" }.count == 1)

        let error = try await refreshError(oauth2Config("/token-crlf"))
        #expect(error.message.contains("has an access_token that cannot go in a header"), "\(error.message)")
        #expect(try await server.seen().allSatisfy { $0["x-injected"] is NSNull })

        // A token of one letter is too short to redact: every "a" of a message was "***".
        let short = try await refreshError(oauth2Config("/token-short").replacingOccurrences(of: "/items?page={key}", with: "/not-array"))
        #expect(short.message.contains("/not-array: the items pointer \"/items\" resolves to an object, not an array"), "\(short.message)")
    }

    /// A token response that is not JSON was quoted in the error, the token in clear (it is
    /// redacted only once read): a form-encoded one (as GitHub answers without Accept) is read,
    /// and one without a token at its top level is said without a byte of its body.
    @Test func oauth2Tokens_formEncodedAreRead_andAResponseWithoutOneIsNotQuoted() async throws {
        defer { server.stop() }
        let pager = Pager(source: try makeSource(oauth2Config("/token-form")))
        #expect(try await pager.load(pager.request(.refresh, key: PluginKey("1"), params: PagingRequestParams(pageSize: 2))).values.count == 2)
        let items = try await server.seen().filter { $0["path"] as? String == "/items" }
        #expect(!items.isEmpty && items.allSatisfy { $0["authorization"] as? String == "Bearer tok-form+1" }, "\(items)")

        for (path, said) in [("/token-html", "is neither JSON nor form-encoded"), ("/token-nested", "has no access_token")] {
            let log = LogRecorder()
            let error = try await refreshError(oauth2Config(path), log: log)
            #expect(error.message.contains("the OAuth2 token response from \(server.baseURL)\(path) \(said)"), "\(error.message)")
            #expect(!error.message.contains("secret-1") && !log.contains("secret-1"), "\(error.message) \(log.messages)")
        }
        // RFC 6749's error fields of a refusal answered with 200 (as GitHub does) are said, the
        // config's secrets in them redacted, and nothing else of the body.
        // So are a 400's (found by a probe: its whole body was quoted, the form it echoed too).
        for (path, said) in [("/token-refused-form", "refused: bad_verification_code: The code passed is incorrect or expired."),
                             ("/token-refused-json", "refused: invalid_client: no client with secret ***"),
                             ("/token-refused-400", "refused: HTTP 400: invalid_client: unknown client")] {
            let error = try await refreshError(oauth2Config(path))
            #expect(error.status == .invalidConfig && error.message.contains("the OAuth2 token request to \(server.baseURL)\(path) was \(said)"),
                    "\(error.status) \(error.message)")
            #expect(!error.message.contains("secret-1") && !error.message.contains("client-secret-789") && !error.message.contains("docs.example")
                    && !error.message.contains("grant_type"), "\(error.message)")
        }
    }

    /// A POST's body may hold the config's secrets: a 307 to another host is refused, a 307 to
    /// the same host keeps the POST and its body, a 303 goes on as a GET without one.
    @Test func aRedirectedPost_keepsItsBodyFromOtherHosts() async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_POST_TOKEN", "post-secret-321")
        func config(_ path: String) -> String {
            #"{"url": "\#(server.baseURL)\#(path)", "items": "/items", "method": "POST", "#
                + #""body": {"token": "${HOSTILE_POST_TOKEN}", "cursor": "{key}"}, "pagination": {"type": "cursor", "next": "/next"}}"#
        }
        let refused = try await refreshError(config("/post-307-other"))
        #expect(refused.status == .invalidRequest)
        #expect(refused.message.contains("refusing the HTTP 307 redirect from \(server.baseURL)/post-307-other to http://localhost:"), "\(refused.message)")
        #expect(try await server.seen().allSatisfy { $0["path"] as? String != "/items" })

        #expect(await loadError(try makeSource(config("/post-307-same")), pageSize: 2) == nil)
        #expect(await loadError(try makeSource(config("/post-303")), pageSize: 2) == nil)
        let hops = try await server.seen().filter { $0["path"] as? String == "/items" }
        #expect(hops.count == 2)
        #expect(hops.first?["method"] as? String == "POST")
        #expect((hops.first?["body"] as? String)?.contains("post-secret-321") == true)
        #expect(hops.last?["method"] as? String == "GET")
        #expect(hops.last?["body"] as? String == "")
    }

    /// Link headers as RFC 8288 writes them: in several lines (the second line's rel="next" was
    /// not read: paging ended after page 1), folded (the same), and with "<" and ";" inside
    /// quoted values (the title's URL was taken for the next page).
    @Test func linkHeaders_inSeveralLines_andWithQuotedValues_areReadWhole() async throws {
        defer { server.stop() }
        let twoLines = try makeSource(#"{"url": "\#(server.baseURL)/two-links?page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        #expect(try ids(try await pageToEnd(twoLines, pageSize: 2).output.values) == [10, 11, 20, 21, 30, 31])

        // Folded over two lines (obsolete line folding): the fold is a space (rel="next" was lost).
        let folded = try makeSource(#"{"url": "\#(server.baseURL)/folded-link?page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        #expect(try ids(try await pageToEnd(folded, pageSize: 2).output.values) == [10, 11, 20, 21, 30, 31])

        let quoted = try makeSource(#"{"url": "\#(server.baseURL)/link-quoted?page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        let page = try await Pager(source: quoted).load(Pager(source: quoted).refreshRequest(params: PagingRequestParams(pageSize: 2)))
        #expect(page.nextKey == PluginKey("\(server.baseURL)/items?page=2"))
        #expect(page.prevKey == nil)
    }

    /// max_header_bytes counts every header line: lines that begin with "HTTP/" once made it
    /// start counting again (1,000 such lines, 200 KB, passed a limit of 4,096 bytes).
    @Test func maxHeaderBytes_countsLinesThatLookLikeStatusLines() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/http-lines", "items": "/items", "max_header_bytes": 4096}"#)
        #expect(error.message.contains("the response headers from \(server.baseURL)/http-lines are larger than max_header_bytes (4096 bytes)"), "\(error.message)")
    }

    /// A secret a server echoes is redacted whole, JSON-escaped ("/" as "\/", a backslash as
    /// two, "ö" as "\u00f6", an emoji as a surrogate pair: the last three showed in clear) or
    /// cut by the 200 bytes of body a message quotes (15 of its characters showed before the "…").
    @Test(arguments: ["/echo-secret", "/echo-secret-cut"], ["s3cr3t-ABC/DEFGHIJKLMNOPQRSTUVWXYZ", #"s3cr3t-back\slash\XYZ"#, "s3cr3t-tökén-ünïcode", "s3cr3t-😀-astral-XYZ"])
    func anEchoedSecret_leavesNoPartOfItselfInTheMessage(_ path: String, _ secret: String) async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_ECHO_TOKEN", secret)
        let error = try await refreshError(#"{"url": "\#(server.baseURL)\#(path)", "items": "/items", "auth": {"type": "bearer", "token": "${HOSTILE_ECHO_TOKEN}"}}"#)
        #expect(error.message.contains("HTTP 401 from \(server.baseURL)\(path)"), "\(error.message)")
        #expect(error.message.contains("***"), "\(error.message)")
        #expect(!error.message.contains("s3cr3t"), "\(error.message)")
    }

    /// A secret echoed percent-encoded several times, whole or across the cut of the 200 bytes
    /// a message quotes, leaves no part of itself: one encoded 3 times or more outgrew the
    /// window the cut allowed for, and a "%" of the secret, itself encoded, was not found.
    @Test(arguments: [1, 3, 5], [0, 120, 185])
    func aSecretEchoedEncodedManyTimes_leavesNoPartOfItselfInTheMessage(_ times: Int, _ pad: Int) async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_ENCODED_TOKEN", "s3cr3t-50%-off/all+XYZ")
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/echo-secret-encoded?times=\#(times)&pad=\#(pad)", "items": "/items", "#
                                          + #""auth": {"type": "bearer", "token": "${HOSTILE_ENCODED_TOKEN}"}}"#)
        #expect(error.message.contains("HTTP 401"), "\(error.message)")
        for part in ["s3cr", "3t-50", "off", "all", "XYZ"] {
            #expect(!error.message.contains(part), "\(part) in \(error.message)")
        }
    }

    /// An api_key in the query, echoed in the next link (as many APIs do): the key of the next
    /// page holds no secret, and each request carries the key once (it was added again to the
    /// echoed one, page after page, and logged and stored with the keys).
    @Test func anApiKeyInTheQuery_echoedInLinks_staysOutOfKeys() async throws {
        defer { server.stop() }
        setTestEnvironment("HOSTILE_QUERY_KEY", "QKEYSECRET")
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/echo-query-link?page=1", "items": "/items", "pagination": {"type": "link"}, "#
                                    + #""auth": {"type": "api_key", "in": "query", "name": "api_key", "value": "${HOSTILE_QUERY_KEY}"}}"#, log: log)
        let manager = try await pageToEnd(source, pageSize: 2)
        #expect(try ids(manager.output.values) == [10, 11, 20, 21, 30, 31])
        let keys = manager.output.values.pages.map { $0.key.text ?? "" }
        #expect(keys.count == 3 && keys.allSatisfy { !$0.contains("QKEYSECRET") && !$0.contains("api_key") }, "\(keys)")
        let queries = try await server.seen().compactMap { $0["query"] as? String }
        #expect(queries.count == 3 && queries.allSatisfy { $0.components(separatedBy: "api_key=QKEYSECRET").count == 2 }, "\(queries)")
        #expect(!log.messages.joined().contains("QKEYSECRET"))
        // A Link to another host that echoes the key is followed without it (found by a probe:
        // the page failed as carrying a secret, though the key is dropped from links).
        let other = try makeSource(#"{"url": "\#(server.baseURL)/echo-query-link?page=1&other=1", "items": "/items", "pagination": {"type": "link"}, "#
                                   + #""auth": {"type": "api_key", "in": "query", "name": "api_key", "value": "${HOSTILE_QUERY_KEY}"}}"#)
        #expect(try ids(try await pageToEnd(other, pageSize: 2).output.values) == [10, 11, 20, 21, 30, 31])
        let elsewhere = try await server.seen().filter { ($0["host"] as? String)?.hasPrefix("localhost") == true }
        #expect(elsewhere.count == 2 && elsewhere.allSatisfy { ($0["query"] as? String)?.contains("QKEYSECRET") == false }, "\(elsewhere)")
    }

    /// An items pointer through "*" that stops resolving says where (it was an empty page: paging
    /// ended without a word); an empty array under "*" is no items, and no problem.
    @Test(arguments: [
        ("missing", #"does not resolve: the body has no member "groups""#),
        ("null", "does not resolve: /groups is null, not an array"),
        ("object", "does not resolve: /groups is an object, not an array"),
        ("element", #"resolves to the string "oops", not an array"#),
        ("nothing", #"does not resolve: /groups/* (one of them) has no member "repos""#),
    ])
    func aWildcardItemsPointer_thatDoesNotResolve_saysWhere(_ scenario: String, _ expected: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/wild?case=\#(scenario)", "items": "/groups/*/repos"}"#)
        #expect(error.status == .internal)
        #expect(error.message.contains(#"the items pointer "/groups/*/repos" \#(expected)"#), "\(error.message)")
        let empty = try makeSource(#"{"url": "\#(server.baseURL)/wild?case=empty", "items": "/groups/*/repos"}"#)
        #expect(await loadError(empty) == nil)
    }

    /// A token that is no array index ("01", "-") where the pointer meets an array was said as
    /// "is an array, not an object".
    @Test(arguments: ["01", "-"])
    func anItemsPointerWithNoIndexForAnArray_saysSo(_ token: String) async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/wild?case=element", "items": "/groups/\#(token)/repos"}"#)
        #expect(error.message.contains(#"does not resolve: /groups is an array, and "\#(token)" is no index of it"#), "\(error.message)")
    }

    /// 204 No Content is an empty last page, not a body that is not JSON.
    @Test func noContent_isAnEmptyLastPage() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/no-content", "items": "/items", "pagination": {"type": "link"}}"#)
        let manager = try await pageToEnd(source, pageSize: 2)
        #expect(manager.output.values.isEmpty)
        #expect(manager.output.appendState.isEndReached)
    }

    /// A cursor that is an object fails the page naming the pointer (it ended paging, exit 0);
    /// one of 100,000 characters fails the next load naming the length (libcurl said "out of
    /// memory", a transient error).
    @Test func aCursorThatCannotBeSent_failsSayingWhy() async throws {
        defer { server.stop() }
        let object = try await refreshError(#"{"url": "\#(server.baseURL)/cursor-object?c={key}", "items": "/items", "pagination": {"type": "cursor", "next": "/next"}}"#)
        #expect(object.status == .internal)
        #expect(object.message.contains(#"the cursor at "/next" is an object, not a string or a number"#), "\(object.message)")

        let long = try makeSource(#"{"url": "\#(server.baseURL)/cursor-long?c={key}", "items": "/items", "pagination": {"type": "cursor", "next": "/next"}}"#)
        let manager = PaginationManager(pager: Pager(source: long), configuration: .init(pageSize: 1))
        await manager.refresh().value
        await manager.append().value
        let error = try #require(manager.output.appendState.error as? PluginError)
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("the request URL would be 100"), "\(error.message)")
        #expect(error.message.contains("bytes long (at most 65536)"), "\(error.message)")
    }

    /// A rate limit that resets in 1,000 s (or a day), with timeout_ms 1,000: the next load
    /// fails at once as transient, the wait as its retry hint (it waited until the host's fetch
    /// timeout, then failed saying only that the fetch did not complete; a wait past an hour
    /// was cut to one, its log line saying otherwise).
    @Test(arguments: [1_000, 86_400])
    func aRateLimitResettingAfterTheTimeout_failsAtOnce_withTheWait(_ ahead: Int) async throws {
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/limited-long?ahead=\#(ahead)&page={key}", "items": "/items", "timeout_ms": 1000}"#, log: log)
        let pager = Pager(source: source)
        let params = PagingRequestParams(pageSize: 2)
        _ = try await pager.load(pager.request(.refresh, key: "1", params: params))
        let clock = ContinuousClock()
        let start = clock.now
        do {
            _ = try await pager.load(pager.request(.refresh, key: "2", params: params))
            Issue.record("loaded while the rate limit held")
        } catch let error as PluginError {
            #expect(error.status == .transient)
            #expect(error.message.contains(" s (X-RateLimit-Remaining was 0), longer than timeout_ms"), "\(error.message)")
            #expect(error.retryAfter.map { $0 >= .seconds(ahead - 10) && $0 <= .seconds(ahead + 2) } == true, "\(String(describing: error.retryAfter))")
            let waits = log.messages.compactMap { $0.firstMatch(of: /the next request waits (\d+) s for the reset$/).flatMap { Int($0.1) } }
            #expect(waits.count == 1 && waits.allSatisfy { $0 >= ahead - 10 && $0 <= ahead }, "\(log.messages)")
        }
        // At once; before, at the host's fetch timeout (30 s).
        #expect(clock.now - start < .seconds(20))
    }

    /// A spent rate limit whose reset is an epoch time with a fraction was not waited for, nor
    /// one that is no time at all ("soon"), without a word: the first is waited for, the second
    /// said once.
    @Test func aRateLimitResetWithAFraction_isWaitedFor_andOneThatIsNoTime_isSaid() async throws {
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/limited-long?reset=fraction&page={key}", "items": "/items"}"#, log: log)
        let pager = Pager(source: source)
        _ = try await pager.load(pager.request(.refresh, key: "1", params: PagingRequestParams(pageSize: 2)))
        let waits = log.messages.compactMap { $0.firstMatch(of: /the next request waits (\d+) s for the reset$/).flatMap { Int($0.1) } }
        #expect(waits.count == 1 && waits.allSatisfy { (490...502).contains($0) }, "\(log.messages)")

        let vague = LogRecorder()
        let soon = Pager(source: try makeSource(#"{"url": "\#(server.baseURL)/limited-long?reset=soon&page={key}", "items": "/items"}"#, log: vague))
        for key in ["1", "2"] {
            _ = try await soon.load(soon.request(.refresh, key: PluginKey(key), params: PagingRequestParams(pageSize: 2)))
        }
        let said = vague.entries.filter { $0.level == .warning && $0.message.contains(#"X-RateLimit-Remaining is 0, and "X-RateLimit-Reset: soon" says no time to wait for"#) }
        #expect(said.count == 1, "\(vague.messages)")
    }

    /// The host refusing a page over one of its limits: the plugin's log names the URL, by the
    /// time the source is destroyed (it was logged after the fetch was finished, and a run that
    /// ended at once lost the line).
    @Test func aPageTheHostRefuses_isLoggedWithItsURL_beforeTheSourceIsDestroyed() async throws {
        defer { server.stop() }
        for _ in 0..<20 {
            let log = LogRecorder()
            let source = try makeSource(#"{"url": "\#(server.baseURL)/items?page={key}", "items": "/items"}"#, log: log,
                                        limits: PluginLimits(maxItemsPerPage: 1))
            #expect(await loadError(source) != nil)
            source.destroy()
            #expect(log.entries.contains { $0.level == .error && $0.message == "the host refused the page from \(server.baseURL)/items?page=1 (2 items, 35 bytes)" },
                    "\(log.messages)")
        }
    }

    /// A secret written back in lower-case hex (or partly encoded) is still a secret: redacted
    /// from messages, dropped from next links and from redirects, never sent to another host
    /// (each reached the message, the keys, a second api_key of every request, or another host).
    @Test func anApiKeyEchoedInLowerCaseHex_isFoundWhereverItGoes() async throws {
        defer { server.stop() }
        let secret = "Zm9vYmFy/YmF6+cXV4=="
        setTestEnvironment("HOSTILE_ENCODED_KEY", secret)
        func config(_ path: String, link: Bool = false) -> String {
            #"{"url": "\#(server.baseURL)\#(path)", "items": "/items", "auth": {"type": "api_key", "in": "query", "name": "api_key", "value": "${HOSTILE_ENCODED_KEY}"}"#
                + (link ? #", "pagination": {"type": "link"}}"# : "}")
        }
        let echoed = try await refreshError(config("/echo-key-lower"))
        #expect(echoed.message.contains("HTTP 400 from \(server.baseURL)/echo-key-lower") && echoed.message.contains("bad key ***"), "\(echoed.message)")
        #expect(!echoed.message.lowercased().contains("zm9vymfy"), "\(echoed.message)")

        let log = LogRecorder()
        let manager = try await pageToEnd(try makeSource(config("/link-key-lower?page=1", link: true), log: log), pageSize: 2)
        #expect(try ids(manager.output.values) == [10, 11, 20, 21, 30, 31])
        let keys = manager.output.values.pages.map { $0.key.text ?? "" }
        #expect(keys.allSatisfy { !$0.contains("api_key") }, "\(keys)")

        #expect(await loadError(try makeSource(config("/redirect-key"))) == nil)
        #expect(await loadError(try makeSource(config("/redirect-key-other"))) == nil)
        let items = try await server.seen().filter { $0["path"] as? String == "/items" }
        #expect(items.count == 2)
        let own = try #require(items.first { ($0["host"] as? String)?.hasPrefix("127.0.0.1") == true })
        #expect((own["query"] as? String)?.components(separatedBy: "api_key=").count == 2, "\(own)")
        let other = try #require(items.first { ($0["host"] as? String)?.hasPrefix("localhost") == true })
        #expect(other["query"] as? String == "page=1", "\(other)")
        let queries = try await server.seen().compactMap { $0["query"] as? String }
        #expect(queries.filter { $0.contains("link-key-lower") || $0.hasPrefix("page=") }.allSatisfy { $0.components(separatedBy: "api_key=").count <= 2 })
    }

    /// A `{param.NAME}` (which any client of `pager serve` may set) or a key of ".." in the
    /// path is refused: libcurl drops dot segments, and the request, with the credentials, went
    /// to another path of the API. In the query it is only a value.
    @Test func aDotSegmentFromAPlaceholder_isRefusedInThePath() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/repos/{param.owner}/items?page={key}&q={param.q}", "items": "/items"}"#)
        let pager = Pager(source: source)
        func load(owner: String, q: String = "x") async throws -> Page<PluginKey, PluginItem> {
            try await pager.load(pager.request(.refresh, key: "1", params: PagingRequestParams(pageSize: 2, userInfo: ["owner": owner, "q": q])))
        }
        for owner in ["..", "."] {
            do {
                _ = try await load(owner: owner)
                Issue.record("loaded with owner \(owner)")
            } catch let error as PluginError {
                #expect(error.status == .invalidRequest)
                #expect(error.message.contains(#"{param.owner} is "\#(owner)" in the url's path"#), "\(error.message)")
            }
        }
        #expect(try await load(owner: "...").values.count == 2)
        #expect(try await load(owner: "octo", q: "..").values.count == 2)
        #expect(try await server.seen().allSatisfy { ($0["path"] as? String)?.hasPrefix("/repos/") == true })
    }

    /// A has_more flag that is missing or not a flag fails the page naming the pointer (it ended
    /// paging with exit 0, as a typo in the pointer would); 1 and 0, and null, are flags.
    @Test func aHasMoreFlagThatIsNoFlag_failsThePage() async throws {
        defer { server.stop() }
        func config(_ scenario: String) -> String {
            #"{"url": "\#(server.baseURL)/has-more?case=\#(scenario)&page={key}", "items": "/items", "pagination": {"type": "page", "has_more": "/has_more"}}"#
        }
        let missing = try await refreshError(config("missing"))
        #expect(missing.message.contains(#"the has_more pointer "/has_more" does not resolve"#), "\(missing.message)")
        let yes = try await refreshError(config("yes"))
        #expect(yes.message.contains(#"has_more at "/has_more" is the string "yes", not true or false"#), "\(yes.message)")
        #expect(try ids(try await pageToEnd(try makeSource(config("numbers")), pageSize: 1).output.values) == [1, 2])
        #expect(try ids(try await pageToEnd(try makeSource(config("null")), pageSize: 1).output.values) == [1])
    }

    /// A has_more that is true goes on past a page shorter than asked for (a server that caps
    /// the page size ended paging after its first page), and fails a page that has no next
    /// key (paging ended there with exit 0).
    @Test func aHasMoreThatIsTrue_goesPastAShortPage_andFailsAPageWithoutANextKey() async throws {
        defer { server.stop() }
        let capped = #"{"url": "\#(server.baseURL)/has-more?case=numbers&page={key}", "items": "/items", "pagination": {"type": "page", "has_more": "/has_more"}}"#
        #expect(try ids(try await pageToEnd(try makeSource(capped), pageSize: 5).output.values) == [1, 2])
        let noCursor = try await refreshError(#"{"url": "\#(server.baseURL)/has-more?case=numbers&c={key}", "items": "/items", "pagination": {"type": "cursor", "next": "/next", "has_more": "/has_more"}}"#)
        #expect(noCursor.message.contains(#"malformed page from \#(server.baseURL)/has-more?case=numbers&c=: has_more at "/has_more" is true, but there is no cursor at "/next" (missing, null or "")"#), "\(noCursor.message)")
        let noLink = try await refreshError(#"{"url": "\#(server.baseURL)/has-more?case=numbers", "items": "/items", "pagination": {"type": "link", "has_more": "/has_more"}}"#)
        #expect(noLink.message.contains(#"has_more at "/has_more" is true, but there is no Link rel="next""#), "\(noLink.message)")
    }

    /// A first page whose previous link is itself loads (the refresh failed, printing nothing);
    /// the prepend of it fails as a cycle.
    @Test func aPageLinkingBackToItself_loads_andThePrependFails() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/self-prev", "items": "/items", "pagination": {"type": "link"}}"#)
        let manager = PaginationManager(pager: Pager(source: source), configuration: .init(pageSize: 2))
        await manager.refresh().value
        #expect(try ids(manager.output.values) == [10, 11])
        await manager.prepend().value
        let error = try #require(manager.output.prependState.error as? PluginError)
        #expect(error.status == .invalidRequest)
        #expect(error.message.contains("pagination cycle at \(server.baseURL)/self-prev: the previous key \"\(server.baseURL)/self-prev\" is the page itself"), "\(error.message)")
        #expect(try await server.seen().count == 1)
    }

    /// `Link: <>` is the page itself (an empty reference is its base): its items load, the
    /// append fails as a cycle (it failed the page as a link that is not http, shown empty).
    /// `Link : <...>` (a space before the colon) is a Link all the same (it was ignored, and
    /// paging ended after page 1, exit 0).
    @Test func oddlyWrittenLinks_areReadAsTheyMean() async throws {
        defer { server.stop() }
        let empty = try makeSource(#"{"url": "\#(server.baseURL)/odd-links?case=empty&page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        let manager = PaginationManager(pager: Pager(source: empty), configuration: .init(pageSize: 2))
        await manager.refresh().value
        #expect(try ids(manager.output.values) == [10, 11])
        await manager.append().value
        let error = try #require(manager.output.appendState.error as? PluginError)
        #expect(error.message.contains("is the page itself"), "\(error.message)")
        let spaced = try makeSource(#"{"url": "\#(server.baseURL)/odd-links?case=spaced&page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        #expect(try ids(try await pageToEnd(spaced, pageSize: 2).output.values) == [10, 11, 20, 21])
    }

    /// A Link header that cannot be read ended paging without a word: it still ends it (the
    /// next page cannot be known), with a warning that quotes the header.
    @Test func aLinkThatCannotBeRead_endsPagingSayingSo() async throws {
        defer { server.stop() }
        let log = LogRecorder()
        let source = try makeSource(#"{"url": "\#(server.baseURL)/odd-links?case=malformed&page=1", "items": "/items", "pagination": {"type": "link"}}"#, log: log)
        #expect(try ids(try await pageToEnd(source, pageSize: 2).output.values) == [10, 11])
        let said = log.entries.filter { $0.level == .warning && $0.message.contains("has a link-value that cannot be read") }
        #expect(said.count == 1 && said.first?.message.contains("q=a>b>; rel=next") == true, "\(log.messages)")
    }

    /// A Link header of "<a," repeated (63 KB, within max_header_bytes) after the link to the
    /// next page was read in the square of its length: 25 s of the transfer thread, which every
    /// fetch of the source waits for. Read in one pass, the page comes well within the timeout.
    @Test func aLinkHeaderOfUnclosedTargets_isReadInOnePass() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/odd-links?case=unclosed&page=1", "items": "/items", "pagination": {"type": "link"}}"#,
                                    limits: PluginLimits(fetchTimeout: .seconds(10)))
        #expect(try ids(try await pageToEnd(source, pageSize: 2).output.values) == [10, 11, 20, 21])
    }

    /// With `fields`, an item that is not an object was handed out as `{}`, without a word: it
    /// fails the page, saying which item it is.
    @Test func fields_anItemThatIsNoObject_failsThePage() async throws {
        defer { server.stop() }
        let error = try await refreshError(#"{"url": "\#(server.baseURL)/mixed-items", "items": "/items", "fields": ["a"]}"#)
        #expect(error.message.contains("malformed body from \(server.baseURL)/mixed-items: fields: item 1 is the number 7, not an object"), "\(error.message)")
    }

    /// A Link target with a byte that is not UTF-8 (Latin-1 "é", 0xE9, as some servers write
    /// it) was read as U+FFFD and asked for as "%EF%BF%BD": it goes back as the byte, "%E9".
    @Test func aLinkWithALatin1Byte_asksForThatByte() async throws {
        defer { server.stop() }
        let source = try makeSource(#"{"url": "\#(server.baseURL)/link-latin1?page=1", "items": "/items", "pagination": {"type": "link"}}"#)
        #expect(try ids(try await pageToEnd(source, pageSize: 2).output.values) == [10, 11, 20, 21])
        let sent = try await server.seen().filter { $0["path"] as? String == "/link-latin1" }.compactMap { $0["query"] as? String }
        #expect(sent == ["page=1", "page=2&q=caf%E9"])
    }
}
