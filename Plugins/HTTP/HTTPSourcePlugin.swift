// The http source as a plugin: pages of JSON items fetched over HTTP(S) with libcurl. The
// reference of every config key is in the README ("Shipped plugins") and HTTPSourceConfig.swift.
//
// A fetch: the key becomes a URL (FetchTarget), the request goes out on the instance's libcurl
// client (HTTPTransport), redirects are followed here, one hop at a time, so that configured
// headers and credentials only ever go to the configured host (or `allowed_hosts`); the body
// is validated and its items found in one pass without a tree (BodyScanner), and the items are
// handed to the host straight from the transport's buffer.
//
// Threads: the instance is thread-safe. Responses arrive on the client's thread. Every
// completion (and cancellation) first claims the fetch id from a Mutex-protected table and
// calls the host while holding that lock, so a fetch is completed exactly once and never after
// the instance is destroyed (willDestroy closes the table, waiting for completions under way;
// deinit frees the client, which ends every transfer still running).
import CPaging
import FoundationEssentials
import Glibc
import PagingPluginKit
import Synchronization

final class HTTPSourcePlugin: SourcePlugin {
    static let info = PluginInfo(
        id: "http", name: "HTTP JSON source", version: "2.0.0",
        description: "Pages of JSON items over HTTP(S) with libcurl: page, offset, cursor or Link-header pagination",
        isThreadSafe: true)

    private let host: PluginHost
    let config: HTTPSourceConfig
    private let client: TransportClient
    private let fetches = InFlightFetches()
    private let chains = Mutex(KeyChains())
    private let plan: ScanPlan
    private let slots: ScanSlots
    /// The `fields` to keep of each item, as pointers to scan an item for.
    private let projection: ScanPlan?
    /// Whether a page whose items had none of the `fields` was logged (once an instance).
    private let saidNoFields = Atomic(false)
    /// Whether a rate limit spent without a reset to wait for was logged (once an instance).
    private let saidNoReset = Atomic(false)
    /// The url's placeholders said to have been sent empty (each once an instance).
    private let saidUnset = Mutex(Set<String>())
    private let pacer: Pacer
    private let tokens: TokenCache?
    private let prefetcher: Prefetcher<Exchange>
    let refreshKey: [UInt8]

    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        let parsed = try HTTPSourceConfig(json: config.json, environment: ProcessInfo.processInfo.environment)
        self.host = host
        self.config = parsed
        switch parsed.pagination {
        case .page(let first), .offset(let first): refreshKey = Array(String(first).utf8)
        case .cursor(_, _, let first), .header(_, let first): refreshKey = Array(first.utf8)
        case .link, .nextURL: refreshKey = []
        }
        let (pointers, slots) = parsed.scanPointers
        // Items go to the host as the server sent them (which validates each) unless projected.
        plan = ScanPlan(pointers, checksItems: parsed.fields != nil)
        self.slots = slots
        projection = parsed.fields.map { ScanPlan($0.map { JSONPointer(member: $0) }) }
        client = try TransportClient()
        pacer = Pacer(perSecond: parsed.maxRequestsPerSecond)
        prefetcher = Prefetcher(depth: parsed.prefetchPages, maxAge: parsed.prefetchMaxAge)
        tokens = parsed.auth.flatMap { auth in
            if case .clientCredentials(let url, let id, let secret, let scope) = auth {
                return TokenCache(tokenURL: url, clientID: id, clientSecret: secret, scope: scope)
            }
            return nil
        }
        for warning in parsed.warnings { host.log(.warning, parsed.redact(warning)) }
    }

    /// Waits for the completions running on the transfers' threads (a page the host refused
    /// is logged with its URL before its fetch is finished): none reaches the host after this.
    func willDestroy() {
        _ = fetches.close()
    }

    deinit { willDestroy() }

    /// Page numbers are computable: the chain of page `n` is n - 1 (unless first) and n + 1.
    /// Offsets need the page size, which the chain does not get; cursors and links come with
    /// pages. Those return nil: the keys come with each page. So do page numbers with a stop
    /// rule (a total, has_more): a short page is then followed only when the server says more
    /// remain, and a next key the chain also gave was taken for a guess, the page asked for
    /// again before paging went on (each page of a server that caps its page size, twice).
    func keyChain(for key: [UInt8]) -> (prev: [UInt8]?, next: [UInt8]?)? {
        guard case .page(let first) = config.pagination, !config.stop.decidesTheEnd,
              let number = Int(String(decoding: key, as: UTF8.self)) else { return nil }
        // No chain for keys the fetch refuses (FetchTarget): negative, or the last Int.
        guard number >= 0, number < Int.max else { return nil }
        return (number > first ? Array(String(number - 1).utf8) : nil, Array(String(number + 1).utf8))
    }

    func fetch(_ request: PagingPluginRequest, completion: FetchCompletion) {
        let target: FetchTarget
        do {
            target = try FetchTarget(request, config: config)
        } catch {
            completion.fail(PluginFailure(error.status, redact(error.message)))
            return
        }
        // Not refused: the params may come from a client of pager serve, whose names cannot be
        // known at load. A misspelt one was sent empty without a word.
        for placeholder in target.isFromTemplate ? config.url.unsetParams(request.params) : []
        where saidUnset.withLock({ $0.insert(placeholder).inserted }) {
            host.log(.warning, "url: \(placeholder) has no value among the request's params (the manifest's user_info, "
                     + "or what a client of pager serve gave): sent empty")
        }
        // A refresh starts its walk's chains again; a key a page of the walk linked back to, in
        // this direction, is the cycle.
        if let refusal = chains.withLock({ $0.begin(target.chainKey, walk: target.walk, kind: request.kind) }) {
            completion.fail(PluginFailure(refusal.status, redact(refusal.message)))
            return
        }
        guard fetches.register(completion) else {
            completion.fail(PluginFailure(PAGING_ERR_CANCELLED, "the http source was destroyed"))
            return
        }
        let exchange = Exchange(target: target, kind: request.kind, completion: completion, request: request)
        if config.prefetchPages > 0 {
            let (claim, dropped) = prefetcher.claim(url: target.url, body: target.body, waiter: exchange)
            dropped.forEach(client.cancel)
            switch claim {
            case .ready(let stored):
                stored.withResponse { received($0, exchange, url: target.url, hops: []) }
                return
            case .waiting:
                return
            case .none:
                break
            }
        }
        send(exchange, url: target.url, hops: [])
    }

    func cancel(fetch id: UInt64) {
        if let transfer = fetches.cancel(id, message: "cancelled") { client.cancel(transfer) }
    }

    // MARK: - One exchange

    /// What the responses of one fetch need: the request's target and how to complete it.
    struct Exchange: Sendable {
        var target: FetchTarget
        var kind: PagingPluginRequest.Kind
        var completion: FetchCompletion
        /// The OAuth2 token the request went with.
        var token: String?
        /// A 401 already made it fetch a new token: the next 401 fails.
        var renewedToken = false
        /// The request, to build the next page's from.
        var request: PagingPluginRequest
        /// A request for the next page sent ahead (`completion` is the page's before, done).
        var ahead = false
        /// A POST redirected with 301, 302 or 303: the hops from there on are GETs without a body.
        var asGet = false
        /// When `timeout_ms` is up for the whole exchange, its redirects included (set as its
        /// first request goes).
        var deadline: ContinuousClock.Instant?

        func until(_ deadline: ContinuousClock.Instant) -> Exchange {
            var exchange = self
            exchange.deadline = deadline
            return exchange
        }
    }

    /// Sends one hop of `exchange`: after the request budget allows, with the credentials a
    /// trusted host gets (fetching an OAuth2 token first when none is fresh).
    private func send(_ exchange: Exchange, url: String, hops: [String]) {
        let trusted = config.isTrusted(url)
        if trusted, let tokens {
            tokens.withToken(client: client, config: config) { [weak self] result in
                switch result {
                case .success(let token):
                    var exchange = exchange
                    exchange.token = token
                    self?.transmit(exchange, url: url, hops: hops, extraHeaders: ["Authorization: Bearer \(token)"])
                case .failure(let failure): self?.fail(exchange, failure)
                }
            }
            return
        }
        transmit(exchange, url: url, hops: hops, extraHeaders: [])
    }

    /// The longest request URL sent (a cursor or a link may be any length).
    static let maxURLBytes = 64 << 10

    private func transmit(_ exchange: Exchange, url: String, hops: [String], extraHeaders: [String]) {
        // timeout_ms is the whole transfer: a redirect's hop has what its first request left.
        let now = ContinuousClock.now
        let deadline = exchange.deadline ?? now + .milliseconds(config.timeoutMilliseconds)
        let exchange = exchange.until(deadline)
        let left = (deadline - now) / .milliseconds(1)
        guard left >= 1 else {
            fail(exchange, PluginFailure(PAGING_ERR_TIMEOUT, "timed out after \(config.timeoutMilliseconds) ms (timeout_ms) following redirects from \(hops.first ?? url) (\(hops.count) hops, the next to \(url))"))
            return
        }
        let trusted = config.isTrusted(url)
        var target = url
        // The token a key holds as a reference, in the URL asked for (a redirect's is the server's).
        if trusted, let token = exchange.token, hops.isEmpty, url == exchange.target.url { target = exchange.target.url(token: token) }
        if trusted, case .query(let name, let value) = config.auth {
            target += (url.hasUTF8("?") ? "&" : "?") + percentEncode(name) + "=" + percentEncode(value)
        }
        var headers = trusted ? config.trustedHeaderLines + extraHeaders : config.publicHeaderLines
        var body: [UInt8]?
        let method = exchange.asGet ? "GET" : config.method
        if method == "POST" {
            body = exchange.target.body ?? Array("{}".utf8)
            headers.append("Content-Type: application/json")
        }
        // A cursor may be anything a server sends; libcurl calls a URL it will not take "out of memory".
        guard target.utf8.count <= Self.maxURLBytes else {
            fail(exchange, .invalidRequest("the request URL would be \(target.utf8.count) bytes long (at most \(Self.maxURLBytes)): \(url.prefix(200))…"))
            return
        }
        // A rate limit that resets after longer than a request may take: fail now with the wait
        // as a retry hint (the host's retry policy decides) rather than hold the fetch past its timeout.
        if let pause = pacer.pauseLeft, pause > .milliseconds(config.timeoutMilliseconds) {
            let seconds = pause.components.seconds + 1
            fail(exchange, .transient("the rate limit of \(url)'s server resets in \(seconds) s (X-RateLimit-Remaining was 0), longer than timeout_ms",
                                      retryAfter: .seconds(seconds)))
            return
        }
        let request = TransportRequest(url: target, method: method, headers: headers, body: body,
                                       timeoutMilliseconds: Int(left),
                                       maxBodyBytes: config.maxPageBytes, maxHeaderBytes: config.maxHeaderBytes, caFile: config.caFile)
        pacer.whenAllowed { [weak self] in
            guard let self else { return }
            let transfer = client.start(request) { [weak self] response in
                self?.received(response, exchange, url: url, hops: hops)
            }
            guard let transfer else {
                fail(exchange, .invalidRequest("libcurl refused the request for \(url)"))
                return
            }
            if exchange.ahead {
                prefetcher.attach(url: url, transfer: transfer)
            } else {
                fetches.attach(exchange.completion.id, transfer: transfer)
            }
        }
    }

    /// `text` with every secret replaced by "***", however it is written there: the config's,
    /// and the OAuth2 tokens issued (for every message and log line).
    private func redact(_ text: String) -> String {
        config.redact(text, also: issuedTokens)
    }

    /// The OAuth2 tokens handed out (none without OAuth2), hidden and redacted with the config's
    /// secrets.
    private var issuedTokens: [EncodedSecret] { tokens?.issued ?? [] }

    /// ``HTTPSourceConfig/snippet(_:limit:also:)`` of a body, the OAuth2 tokens issued redacted
    /// with the config's secrets (a token the cut went through left its head behind).
    private func snippet(_ body: UnsafeBufferPointer<UInt8>, limit: Int = 200) -> String {
        config.snippet(body, limit: limit, also: issuedTokens)
    }

    private func snippet(_ text: String, limit: Int = 200) -> String {
        config.snippet(text, limit: limit, also: issuedTokens)
    }

    /// Whether a request to `url` (a redirect, a next link) may go: to a host trusted with the
    /// secrets, or holding none of them (a server may echo a token or key in a link) but the
    /// `api_key` of the query, which is dropped from it.
    private func maySend(_ url: String) -> Bool {
        guard !config.isTrusted(url) else { return true }
        let sent = config.withoutQueryKey(url)
        return redact(sent) == sent
    }

    /// What an OAuth2 token a server echoed in a key is written as there; the request fills in
    /// the token it goes with (for a trusted host).
    static let tokenReference = "${oauth2:access_token}"

    /// A key read from a response, holding no secret: the config's as their `${...}`
    /// references (``HTTPSourceConfig/hidingSecrets(_:)``), the OAuth2 tokens issued as
    /// ``tokenReference``.
    ///
    /// A key that already holds such a reference is refused: a server wrote it (echoing a
    /// client's parameter, say), and filled in it would send the secret where the server says.
    private func hidingSecrets(_ key: String?, from url: String) throws(PluginFailure) -> String? {
        guard let key else { return nil }
        if config.revealed(key) != key || fillingIn(key, reference: Self.tokenReference, with: "") != key {
            throw .invalidRequest("refusing a key from \(url): it holds what reads as a ${...} reference to a secret of the config")
        }
        return config.hidingSecrets(key, also: issuedTokens.map { ($0, Self.tokenReference) })
    }

    static let carriesSecret = "it carries a secret of the config to another host (allowed_hosts lists the hosts it may go to)"

    private func fail(_ exchange: Exchange, _ failure: PluginFailure) {
        if exchange.ahead {
            aheadEnded(exchange, nil)
            return
        }
        let redacted = PluginFailure(failure.status, redact(failure.message), retryAfter: failure.retryAfter)
        fetches.finish(exchange.completion.id) { exchange.completion.fail(redacted) }
    }

    private func received(_ response: TransportResponse, _ exchange: Exchange, url: String, hops: [String]) {
        if exchange.ahead {
            aheadEnded(exchange, response)
            return
        }
        if case .cancelled = response.outcome { return }
        if let failure = config.failure(of: response, url: url) {
            fail(exchange, failure)
            return
        }
        let status = response.status
        switch status {
        case 200..<300:
            if response.header("x-ratelimit-remaining") == "0" {
                if let wait = ResponseParsing.rateLimitWait(response) {
                    if wait > 0 {
                        let pause = min(wait, Pacer.longestPause)
                        pacer.pause(seconds: pause)
                        host.log(.info, redact("\(url): X-RateLimit-Remaining is 0; the next request waits \(pause) s for the reset"
                                               + (pause < wait ? " (the server said \(wait) s; a day at most)" : "")))
                    }
                } else if saidNoReset.exchange(true, ordering: .relaxed) == false {
                    // The header that says no time, quoted (redacted before it is cut).
                    let said = [("Retry-After", "retry-after"), ("X-RateLimit-Reset", "x-ratelimit-reset")].compactMap { name, key in
                        response.header(key).map { "\"\(name): \(snippet($0, limit: 40))\"" }
                    }
                    let reset = said.isEmpty ? "no X-RateLimit-Reset or Retry-After" : said.joined(separator: " and ")
                    host.log(.warning, redact("\(url): X-RateLimit-Remaining is 0, and \(reset) says no time to wait for (seconds, or an epoch time): the next requests do not wait"))
                }
            }
            deliver(response, exchange, url: url)
        case 300..<400 where response.redirectURL != nil:
            follow(response.redirectURL!, status: status, from: url, exchange, hops: hops)
        case 429, 500..<600:
            let wait = ResponseParsing.rateLimitWait(response)
            // The hint is the failure's retryAfter, which the host says after the message.
            fail(exchange, .transient("HTTP \(status) from \(url): \(snippet(response.body))",
                                      retryAfter: wait.map { .seconds($0) }))
        case 403 where response.header("x-ratelimit-remaining") == "0":
            let wait = ResponseParsing.rateLimitWait(response)
            fail(exchange, .transient("HTTP 403 from \(url): rate limit exhausted (X-RateLimit-Remaining: 0\(wait.map { "; resets in \($0) s" } ?? "")): \(snippet(response.body))",
                                      retryAfter: wait.map { .seconds($0) }))
        case 401 where exchange.token != nil && !exchange.renewedToken:
            // The token was revoked or expired early: fetch a new one and try once more.
            tokens?.invalidate(exchange.token!)
            host.log(.info, redact("HTTP 401 from \(url) with a cached OAuth2 token: fetching a new token and trying once more"))
            var again = exchange
            again.renewedToken = true
            send(again, url: url, hops: hops)
        case 404, 410:
            // 410 Gone: a page (a stale cursor's) that was there and is not any more.
            fail(exchange, PluginFailure(PAGING_ERR_NOT_FOUND, "HTTP \(status) from \(url): \(snippet(response.body))"))
        case 400..<500:
            fail(exchange, .invalidRequest("HTTP \(status) from \(url): \(snippet(response.body))"))
        default:
            fail(exchange, .internal("unexpected HTTP \(status) from \(url): \(snippet(response.body))"))
        }
    }

    // MARK: - The next page, fetched ahead

    /// Sends the request ahead for the page of key `next`, built from `exchange`'s request,
    /// unless that page is ahead already or `prefetch` pages are: its response waits for the
    /// fetch that asks for it.
    private func fetchAhead(_ next: [UInt8], after exchange: Exchange) {
        var request = exchange.request
        request.kind = .append
        request.key = next
        request.prevKey = nil
        request.nextKey = nil
        guard let target = try? FetchTarget(request, config: config),
              prefetcher.begin(url: target.url, body: target.body) else { return }
        var ahead = Exchange(target: target, kind: .append, completion: exchange.completion, request: request)
        ahead.ahead = true
        send(ahead, url: target.url, hops: [])
    }

    /// The request `ahead` ended with `response`, or nil when it was not sent. The fetch that
    /// asks for it takes a 2xx as its page, and an answer that asks to wait (``asksToWait(_:)``)
    /// as its failure, the wait its retry hint: its own request at once would not wait. A fetch
    /// waiting for it also takes a transfer that failed (a timeout) as its failure: its own
    /// request would have it wait as long again. Any other answer is dropped: the fetch sends
    /// its own request, which reports it.
    private func aheadEnded(_ ahead: Exchange, _ response: TransportResponse?) {
        let url = ahead.target.url
        var page = false, wait = false
        if let response, case .response = response.outcome {
            page = (200..<300).contains(response.status)
            wait = !page && Self.asksToWait(response)
        }
        switch prefetcher.arrived(url: url, usable: page || wait) {
        case .waiter(let waiter):
            if let response, page || wait || response.failedInTransfer {
                received(response, waiter, url: url, hops: [])
            } else {
                send(waiter, url: url, hops: [])
            }
        case .keep:
            guard let response else { return }
            let stored = StoredResponse(response, scannedWith: plan)
            // Nothing is fetched after an answer that asks to wait.
            if page { stored.keys = stored.withResponse { keysAhead(of: $0, ahead.target) } }
            let next = page ? stored.withResponse { nextKey(after: $0, ahead) } : nil
            if let waiter = prefetcher.store(url: url, stored, next: next) {
                stored.withResponse { received($0, waiter, url: url, hops: []) }
            } else if let key = prefetcher.keyToFetch(after: nil) {
                fetchAhead(key, after: ahead)
            }
        case .drop:
            return
        }
    }

    /// Whether an answer asks the client to wait before it asks again: a 429, a 403 saying
    /// `X-RateLimit-Remaining: 0` (GitHub), a 5xx saying how long (`Retry-After`).
    static func asksToWait(_ response: TransportResponse) -> Bool {
        switch response.status {
        case 429: true
        case 403: response.header("x-ratelimit-remaining") == "0"
        case 500..<600: ResponseParsing.rateLimitWait(response) != nil
        default: false
        }
    }

    /// The key of the page after the page ahead in `response`, to fetch ahead in turn: nil when
    /// it is the last, its keys are malformed, its next key goes round the chain, or the server
    /// said the rate limit is spent (the fetch that claims the page pauses for it).
    private func nextKey(after response: TransportResponse, _ ahead: Exchange) -> [UInt8]? {
        guard response.header("x-ratelimit-remaining") != "0",
              let keys = response.keysAhead?.keys, !keys.isLast,
              let next = keys.nextKey,
              !chains.withLock({ $0.goesRound(from: ahead.target.chainKey, to: String(decoding: next, as: UTF8.self), walk: ahead.target.walk) }) else { return nil }
        return next
    }

    /// The keys of the page ahead in `response`, for `target`, when its body is a page: kept
    /// with the response, so that the fetch that claims it (for the same key and page size)
    /// does not find them again.
    private func keysAhead(of response: TransportResponse, _ target: FetchTarget) -> KeysAhead? {
        guard case .success(let scan)? = response.scanned, scan.itemsPathProblem == nil,
              let keys = try? pageKeys(scan, response, target, url: target.url) else { return nil }
        return KeysAhead(key: target.key, pageSize: target.pageSize, keys: keys)
    }

    /// A 3xx: the next hop, if it is http(s), not a loop, within 10 hops, and holds no secret
    /// when it goes to a host not trusted with them. Headers for the
    /// new URL are chosen again by its host (`send`). A POST goes on as a GET after a 301, 302 or
    /// 303 (as user agents do; RFC 9110 asks it of a 303), and as a POST with its body after a 307
    /// or 308, to a trusted host only: the body may hold the config's secrets.
    private func follow(_ target: String, status: Int, from url: String, _ exchange: Exchange, hops: [String]) {
        guard URLParts(target)?.isHTTP == true else {
            fail(exchange, .invalidRequest("refusing the redirect from \(url) to \(target): only http and https URLs are followed"))
            return
        }
        let target = config.withoutQueryKey(target)
        // A server that moved keeps the query, and a `${...}` of the url with it.
        guard maySend(target) else {
            fail(exchange, .invalidRequest("refusing the HTTP \(status) redirect from \(url) to \(target): \(Self.carriesSecret)"))
            return
        }
        var exchange = exchange
        if config.method == "POST", !exchange.asGet {
            if [301, 302, 303].contains(status) {
                exchange.asGet = true
            } else if !config.isTrusted(target) {
                fail(exchange, .invalidRequest("refusing the HTTP \(status) redirect from \(url) to \(target): the POST body would go to another host (allowed_hosts lists the hosts it may go to)"))
                return
            }
        }
        let chain = hops + [url]
        if chain.contains(target) {
            fail(exchange, .invalidRequest("redirect loop: \((chain + [target]).joined(separator: " -> "))"))
            return
        }
        guard chain.count <= 10 else {
            fail(exchange, .invalidRequest("more than 10 redirects from \(chain[0]) (last: \(url) -> \(target))"))
            return
        }
        send(exchange, url: target, hops: chain)
    }

    // MARK: - A page

    /// A 2xx: validate the body, find the items and keys, complete the fetch.
    private func deliver(_ response: TransportResponse, _ exchange: Exchange, url: String) {
        // No Content: no items, and the end of paging in the direction loaded.
        if response.status == 204 || response.status == 205, response.body.isEmpty {
            let kind = exchange.kind
            let keys = PageContent(items: [], isFirst: kind != .append, isLast: kind != .prepend)
            fetches.finish(exchange.completion.id) { _ = exchange.completion.succeed(keys) }
            return
        }
        /// A body that is not a page, with what came: the status and the first 200 bytes.
        func malformed(_ failure: PluginFailure) {
            fail(exchange, PluginFailure(failure.status, "\(failure.message) (HTTP \(response.status), \(response.body.count) bytes: \(snippet(response.body)))",
                                         retryAfter: failure.retryAfter))
        }
        let scan: BodyScan
        do {
            scan = try (response.scanned ?? Result { () throws(ScanError) in try plan.scan(response.body) }).get()
        } catch {
            malformed(.internal("malformed body from \(url): not JSON: \(error.message)"))
            return
        }
        if let problem = scan.itemsPathProblem {
            malformed(.internal("malformed body from \(url): the items pointer \(config.items) \(ResponseParsing.unresolved(config.items, problem))"))
            return
        }
        let keys: PageContent
        do {
            if let ahead = response.keysAhead, ahead.key == exchange.target.key, ahead.pageSize == exchange.target.pageSize {
                keys = ahead.keys
            } else {
                keys = try pageKeys(scan, response, exchange.target, url: url)
            }
        } catch {
            malformed(error)
            return
        }
        // With fields, an item that is not an object fails the page (before the page after it
        // is asked for: it would be spent for nothing).
        if projection != nil, let index = (0..<scan.itemCount).first(where: { scan.item($0).bytes.first != UInt8(ascii: "{") }) {
            malformed(.internal("malformed body from \(url): fields: item \(index) is \(ResponseParsing.kind(of: scan.item(index).bytes)), not an object (fields keeps members of objects)"))
            return
        }
        let chainKey = exchange.target.chainKey, walk = exchange.target.walk, kind = exchange.kind
        let nextGoesRound = chains.withLock { chains in
            chains.record(keys, of: chainKey, walk: walk, kind: kind, url: url)
            return keys.nextKey.map { chains.refusal(of: String(decoding: $0, as: UTF8.self), walk: walk, kind: .append) != nil } ?? false
        }
        // After an append the caller is paging on: the next appends are likely (after a refresh
        // it may be the only page wanted, and a request ahead would be spent for nothing).
        if config.prefetchPages > 0, kind == .append, !keys.isLast, !nextGoesRound,
           let next = prefetcher.keyToFetch(after: keys.nextKey) {
            fetchAhead(next, after: exchange)
        }
        let items = ItemBytes(scan, projection: projection)
        if items.noneHasAField, saidNoFields.exchange(true, ordering: .relaxed) == false, let fields = config.fields {
            host.log(.warning, redact("fields: no item of the page from \(url) has any of the members \(fields.map { "\"\($0)\"" }.joined(separator: ", ")): each is {}"))
        }
        fetches.finish(exchange.completion.id) {
            guard !items.withItems({ count, item in exchange.completion.succeed(count: count, item: item, keys: keys) }) else { return }
            // The host refused the page (an item that is not JSON, which the scan did not check,
            // or one of its limits): the error is the host's; say which body, and where it is not
            // JSON. Logged before the fetch is finished: destroy() waits for the line (a run that
            // ended at once lost it).
            do throws(ScanError) {
                if !plan.checksItems { _ = try plan.scan(response.body, checkingItems: true) }
                host.log(.error, redact("the host refused the page from \(url) (\(scan.itemCount) items, \(response.body.count) bytes)"))
            } catch {
                host.log(.error, redact("malformed body from \(url): not JSON: \(error.message) (HTTP \(response.status), \(response.body.count) bytes: \(snippet(response.body)))"))
            }
        }
    }

    /// What a has_more flag says: true or false (also as 1 or 0, or as a string, and null as
    /// false). Missing, or anything else, is a malformed body: it ended paging without a word,
    /// as a typo in the pointer would.
    private static func more(_ value: UnsafeBufferPointer<UInt8>?, at pointer: JSONPointer, url: String) throws(PluginFailure) -> Bool {
        guard let value else { throw .internal("malformed body from \(url): the has_more pointer \(pointer) does not resolve") }
        switch JSONScalar(value) {
        case .bool(let flag): return flag
        case .null: return false
        case .number(let text) where text == "0" || text == "1": return text == "1"
        case .string(let text) where ["true", "false"].contains(text.lowercased()): return text.lowercased() == "true"
        default: throw .internal("malformed body from \(url): has_more at \(pointer) is \(ResponseParsing.kind(of: value)), not true or false")
        }
    }

    /// What a total count says: a whole number of items, written as JSON writes one (4, 4.0,
    /// 4e0), bare or in a string. Missing, or anything else, is a malformed page: paging went
    /// on past the total without a word, as a typo in the pointer would.
    private static func count(_ text: String??, _ what: String, url: String) throws(PluginFailure) -> Int {
        guard let found = text else { throw .internal("malformed page from \(url): \(what) is missing") }
        // As JSON writes a number: "+10" and "0x10" (16) were taken.
        if let text = found, isJSONNumber(text) {
            if let count = Int(text), count >= 0 { return count }
            if let value = Double(text), value >= 0, value < 0x1p63, value.rounded() == value { return Int(value) }
        }
        throw .internal("malformed page from \(url): \(what) is \(found.map { "\"\($0)\", " } ?? "")not a whole number of items")
    }

    /// Whether `text` is a number as JSON writes one: an optional "-", then digits, a fraction
    /// and an exponent (no "+" in front, no hex, no inf or nan).
    private static func isJSONNumber(_ text: String) -> Bool {
        var bytes = text.utf8[...]
        if bytes.first == UInt8(ascii: "-") { bytes = bytes.dropFirst() }
        guard let first = bytes.first, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(first) else { return false }
        return bytes.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || ".eE+-".utf8.contains($0) }
    }

    /// The page's keys and ends by the pagination type (its `items` are empty), then the stop
    /// rules: an empty page, a has_more flag that is not true, or a total reached ends paging.
    /// A has_more that is true, or a total not reached, goes on past a short page (a server may
    /// cap the page size; a has_more past an empty one too), and a has_more that is true fails a
    /// page without a next key: paging would end there without a word.
    private func pageKeys(_ scan: BodyScan, _ response: TransportResponse, _ target: FetchTarget, url: String) throws(PluginFailure) -> PageContent {
        let count = scan.itemCount
        var more: Bool?
        if let slot = slots.hasMore, let pointer = config.stop.hasMore { more = try Self.more(scan.value(slot), at: pointer, url: url) }
        var total: Int?
        if let slot = slots.total, let pointer = config.stop.total {
            total = try Self.count(scan.value(slot).map { JSONScalar($0).countText }, "the total at \(pointer)", url: url)
        } else if let name = config.stop.totalHeader {
            total = try Self.count(response.header(name).map { $0.trimmingSpaces }, "the total header \(name)", url: url)
        }
        let (cap, sawFull) = chains.withLock { ($0.cap(of: target.walk), $0.sawFullPage(of: target.walk)) }
        let remaining = total.map {
            Self.itemsRemain(after: target, count: count, total: $0, pagination: config.pagination, cap: cap, sawFull: sawFull)
        }
        var page = try paginationKeys(scan, response, target, url: url, goesOn: more == true || remaining == true)
        if more == true, page.nextKey == nil {
            throw .internal("malformed page from \(url): has_more at \(config.stop.hasMore!) is true, but \(config.pagination.nextKeyMissing)")
        }
        if (count == 0 && more != true) || more == false || remaining == false {
            page.nextKey = nil
            page.isLast = true
        }
        // A short page paging goes on from: the server caps its page size, for the rest of the
        // walk; a full page: it does not cap it below the page size.
        if count >= target.pageSize, !sawFull {
            chains.withLock { $0.setSawFullPage(of: target.walk) }
        } else if cap == nil, count > 0, count < target.pageSize, page.nextKey != nil {
            chains.withLock { $0.setCap(count, of: target.walk) }
        }
        return page
    }

    /// Whether a total count says items remain after the page of `target` with `count` items
    /// (page and offset pagination; `false` for an empty page). An offset says exactly. A page
    /// number says it by the page size, or, for a short page that does not end the total there,
    /// by its own length: a server that caps the page size (GitHub's 100) sends pages of its cap.
    /// Once a short page of the walk went on, every page before is of its length (`cap`): a
    /// short page whose count happens to end the total by the page size (4 pages of 5 and 3
    /// items make 23) is not taken for the last one (it ended paging with 15 of 23 items, exit 0).
    /// It is taken for the last only when the walk had a full page (`sawFull`: the server does
    /// not cap); when the pages before it are unknown here (a `pager serve` cursor another
    /// process gave out, pages a store answered), the next page tells, one request more at most.
    private static func itemsRemain(after target: FetchTarget, count: Int, total: Int, pagination: Pagination,
                                    cap: Int?, sawFull: Bool) -> Bool {
        guard count > 0 else { return false }
        switch pagination {
        case .offset:
            return target.number.addingReportingOverflow(count).partialValue < total
        case .page(let first):
            let before = target.number - first
            if let cap {
                let (full, overflow) = before.multipliedReportingOverflow(by: cap)
                return !overflow && full.addingReportingOverflow(count).partialValue < total
            }
            let (seen, overflow) = (before + 1).multipliedReportingOverflow(by: min(count, target.pageSize))
            guard !overflow else { return false }
            if count < target.pageSize, sawFull {
                let (honest, overflow) = before.multipliedReportingOverflow(by: target.pageSize)
                if !overflow, honest.addingReportingOverflow(count) == (total, false) { return false }
            }
            return seen < total
        default:
            return true
        }
    }

    private func paginationKeys(_ scan: BodyScan, _ response: TransportResponse, _ target: FetchTarget, url: String,
                                goesOn: Bool) throws(PluginFailure) -> PageContent {
        let count = scan.itemCount
        let short = count < target.pageSize && !goesOn
        /// The cursor at `slot`: a string or a number; null, "" or no member ends paging; an
        /// object, an array or a boolean is a malformed body (it ended paging without a word).
        func text(_ slot: Int?, _ pointer: JSONPointer?) throws(PluginFailure) -> String? {
            guard let slot, let pointer, let value = scan.value(slot) else { return nil }
            let scalar = JSONScalar(value)
            switch scalar {
            case .string, .number, .null: return scalar.cursorText
            case .other where value.first == UInt8(ascii: "\""):
                // A JSON string no text is: an escaped surrogate without its pair ("\ud800").
                throw .internal("malformed body from \(url): the cursor at \(pointer) is \(ResponseParsing.kind(of: value)), "
                                + "which holds an unpaired surrogate (\\uD800-\\uDFFF): no text, so no key")
            default: throw .internal("malformed body from \(url): the cursor at \(pointer) is \(ResponseParsing.kind(of: value)), not a string or a number")
            }
        }
        func keys(prev: String?, next: String?) -> PageContent {
            PageContent(items: [], prevKey: prev.map { Array($0.utf8) }, nextKey: next.map { Array($0.utf8) },
                        isFirst: prev == nil, isLast: next == nil)
        }
        switch config.pagination {
        case .page(let first):
            let number = target.number
            return PageContent(items: [], prevKey: number > first ? Array(String(number - 1).utf8) : nil,
                               nextKey: short ? nil : Array(String(number + 1).utf8),
                               isFirst: number <= first, isLast: short)
        case .offset(let first):
            let number = target.number
            // More items than the page size may come back: the next offset is checked again.
            let next = number.addingReportingOverflow(count)
            guard short || !next.overflow else {
                throw .invalidRequest("key \"\(target.key)\": the offset after its \(count) items overflows a 64-bit integer (from \(url))")
            }
            return PageContent(items: [], prevKey: number > first ? Array(String(max(first, number - target.pageSize)).utf8) : nil,
                               nextKey: short ? nil : Array(String(next.partialValue).utf8),
                               isFirst: number <= first, isLast: short)
        case .cursor(let next, let prev, _):
            return keys(prev: try hidingSecrets(try text(slots.prev, prev), from: url), next: try hidingSecrets(try text(slots.next, next), from: url))
        case .header(let name, _):
            // Its bytes could not be sent back as they came (they were U+FFFD: another page).
            guard !response.headersNotUTF8.contains(name) else {
                throw .internal("malformed response from \(url): the \(name) header is not UTF-8 text; its next key cannot be sent back as it came")
            }
            let next = response.header(name).flatMap { $0.isEmpty ? nil : $0 }
            return keys(prev: nil, next: try hidingSecrets(next, from: url))
        case .nextURL(let pointer):
            guard let next = try text(slots.next, pointer) else { return keys(prev: nil, next: nil) }
            let resolved = ResponseParsing.resolve(next, base: url)
            guard !ResponseParsing.hasControlCharacter(resolved.utf8) else {
                throw .invalidRequest("refusing the next URL \(next.debugDescription) from \(url): it holds a control character")
            }
            guard URLParts(resolved)?.isHTTP == true else {
                throw .invalidRequest("refusing the next URL \(next) from \(url): only http and https URLs are followed")
            }
            guard maySend(resolved) else { throw .invalidRequest("refusing the next URL \(redact(resolved)) from \(url): \(Self.carriesSecret)") }
            return keys(prev: nil, next: try hidingSecrets(resolved, from: url))
        case .link:
            let header = response.headerList("link")
            let (links, unreadable) = header.map { ResponseParsing.links($0, base: url) } ?? ([:], false)
            if unreadable, links["next"] == nil, let header {
                // Redacted before it is cut (snippet): a secret across the cut leaves nothing behind.
                let said = snippet(header)
                host.log(.warning, redact("the Link header from \(url) has a link-value that cannot be read (RFC 8288: <URL>; rel=\"next\"), and no rel=\"next\" besides: paging ends here. It says: \(said)"))
            }
            for (rel, link) in links where rel == "next" || rel == "prev" {
                guard URLParts(link)?.isHTTP == true else {
                    throw .invalidRequest("refusing the rel=\"\(rel)\" link \(link) from \(url): only http and https links are followed")
                }
                guard maySend(link) else {
                    throw .invalidRequest("refusing the rel=\"\(rel)\" link \(redact(link)) from \(url): \(Self.carriesSecret)")
                }
            }
            return keys(prev: try hidingSecrets(links["prev"], from: url), next: try hidingSecrets(links["next"], from: url))
        }
    }
}

/// The keys loaded in each direction since the last refresh of each walk, each with the key of
/// the page whose link led to it. A walk is the loads of one page size and params (a `pager
/// serve` client's query): walks of other queries, and those of one query meeting at a key by
/// other routes (data changed between them), never refuse each other's keys. A link back to a
/// page the walk came through (A -> B -> A, however long, or a page to itself) stays on its
/// page, whose items are new, and the load of that key in that direction fails instead of
/// paging forever.
struct KeyChains {
    private struct Chain {
        var after: [String: String] = [:]
        var before: [String: String] = [:]
        /// Keys whose load in a direction would go round again, and why.
        var repeatsAfter: [String: String] = [:]
        var repeatsBefore: [String: String] = [:]

        /// The length of a short page of the walk that paging went on from: the server's cap on
        /// the page size (``itemsRemain``).
        var cap: Int?
        /// A page of the walk held the page size.
        var sawFullPage = false

        var size: Int { after.count + before.count + repeatsAfter.count + repeatsBefore.count }
    }

    private var chains: [String: Chain] = [:]
    /// The keys the chains hold, all walks together.
    private var size = 0
    private static let root = "\u{0}refresh"
    /// The most walks, and keys in all, kept (a `pager serve` of many queries, each paged far):
    /// past them, the chains start again (a cycle is then found within its length).
    private static let maxWalks = 1024, maxKeys = 200_000

    /// The load of `key` as `kind` in walk `walk` begins: a refresh starts its chains again from
    /// it; otherwise why loading it would go round the chain again, if it would.
    mutating func begin(_ key: String, walk: String, kind: PagingPluginRequest.Kind) -> PluginFailure? {
        guard kind == .refresh else { return refusal(of: key, walk: walk, kind: kind) }
        let chain = Chain(after: [key: Self.root], before: [key: Self.root])
        store(chain, replacingSize: chains.removeValue(forKey: walk)?.size ?? 0, walk: walk)
        return nil
    }

    /// Records the links of the page of `key`, loaded as `kind` from `url`.
    mutating func record(_ page: PageContent, of key: String, walk: String, kind: PagingPluginRequest.Kind, url: String) {
        // Taken out while it changes, and held only here: changed in the dictionary, or while
        // another copy of it lives, its maps would be copied whole for every page.
        var chain = chains.removeValue(forKey: walk) ?? Chain()
        let oldSize = chain.size
        if kind != .prepend, let next = page.nextKey.map({ String(decoding: $0, as: UTF8.self) }) {
            Self.link(&chain.after, &chain.repeatsAfter, from: key, to: next, direction: "next", url: url)
        }
        if kind != .append, let prev = page.prevKey.map({ String(decoding: $0, as: UTF8.self) }) {
            Self.link(&chain.before, &chain.repeatsBefore, from: key, to: prev, direction: "previous", url: url)
        }
        store(chain, replacingSize: oldSize, walk: walk)
    }

    /// Keeps `chain` as `walk`'s in place of a chain of `oldSize` keys, within the bounds.
    private mutating func store(_ chain: Chain, replacingSize oldSize: Int, walk: String) {
        size += chain.size - oldSize
        if chains.count >= Self.maxWalks || size > Self.maxKeys {
            chains = [:]
            size = chain.size
        }
        chains[walk] = chain
    }

    /// Whether the page of `key`, fetched ahead, would link round the chain to `next` once
    /// loaded as an append, for all this can tell: a page ahead is recorded only when it is
    /// asked for, so the pages before it may not be yet, and any key the walk reached already
    /// counts (the page ahead is then not fetched; its fetch finds out).
    func goesRound(from key: String, to next: String, walk: String) -> Bool {
        if next == key { return true }
        guard let chain = chains[walk] else { return false }
        return chain.repeatsAfter[next] != nil || chain.after[next].map { $0 != key } ?? false
    }

    func cap(of walk: String) -> Int? { chains[walk]?.cap }

    mutating func setCap(_ cap: Int, of walk: String) {
        chains[walk]?.cap = cap
    }

    func sawFullPage(of walk: String) -> Bool { chains[walk]?.sawFullPage ?? false }

    mutating func setSawFullPage(of walk: String) {
        chains[walk]?.sawFullPage = true
    }

    /// Why loading `key` as `kind` would go round the chain again, if it would.
    func refusal(of key: String, walk: String, kind: PagingPluginRequest.Kind) -> PluginFailure? {
        switch kind {
        case .append: chains[walk]?.repeatsAfter[key].map { .invalidRequest($0) }
        case .prepend: chains[walk]?.repeatsBefore[key].map { .invalidRequest($0) }
        case .refresh: nil
        }
    }

    private static func link(_ map: inout [String: String], _ repeats: inout [String: String], from key: String, to target: String,
                             direction: String, url: String) {
        if target == key {
            repeats[target] = "pagination cycle at \(url): the \(direction) key \"\(target)\" is the page itself"
        } else if leadsBack(map, from: key, to: target) {
            repeats[target] = "pagination cycle at \(url): the \(direction) key \"\(target)\" was already loaded in this direction since the refresh, before this page"
        } else {
            map[target] = key
        }
    }

    /// Whether `target` is a page the walk came through to reach `key` (its link's page, that
    /// page's, and so on back to the refresh). Every link recorded leads from a page not reached
    /// through its target, so the way back ends; and it is walked only for a target reached
    /// before (every page behind `key` is), so a walk that goes straight on costs nothing.
    private static func leadsBack(_ map: [String: String], from key: String, to target: String) -> Bool {
        guard map[target] != nil else { return false }
        var page = key
        while let parent = map[page], parent != root {
            if parent == target { return true }
            page = parent
        }
        return false
    }
}

/// A page's items as the host gets them: the body's own bytes, except items that hold
/// whitespace, which are compacted into one buffer first.
struct ItemBytes: ~Copyable {
    private let scan: BodyScan
    private var compacted: [UInt8] = []
    /// Per item: nil = the body's bytes; else its range in `compacted`.
    private var ranges: [Range<Int>?] = []
    /// Projected, the page has items and none of them has any of the members kept.
    let noneHasAField: Bool

    init(_ scan: BodyScan, projection: ScanPlan?) {
        var compacted: [UInt8] = []
        var ranges: [Range<Int>?] = []
        var anyField = false
        for index in 0..<scan.itemCount {
            let (bytes, hasSpace) = scan.item(index)
            if let projection {
                let start = compacted.count
                Self.project(bytes, projection, into: &compacted)
                ranges.append(start..<compacted.count)
                anyField = anyField || compacted.count - start > 2
                continue
            }
            guard hasSpace else {
                if !ranges.isEmpty { ranges.append(nil) }
                continue
            }
            if ranges.isEmpty { ranges = Array(repeating: nil, count: index) }
            let start = compacted.count
            compacted.append(contentsOf: repeatElement(0, count: bytes.count))
            let written = compacted.withUnsafeMutableBufferPointer { out in
                hj_compactBytes(bytes, into: UnsafeMutableBufferPointer(rebasing: out[start...]))
            }
            compacted.removeLast(bytes.count - written)
            ranges.append(start..<(start + written))
        }
        self.scan = scan
        self.compacted = compacted
        self.ranges = ranges
        noneHasAField = projection != nil && scan.itemCount > 0 && !anyField
    }

    /// `{"name": value, ...}` of the projection's members the object `item` has (items that are
    /// not objects failed their page before), values compacted.
    private static func project(_ item: UnsafeBufferPointer<UInt8>, _ projection: ScanPlan, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "{"))
        if let scan = try? projection.scan(item) {
            var first = true
            for (index, pointer) in projection.pointers.enumerated() {
                guard let value = scan.value(index) else { continue }
                if !first { out.append(UInt8(ascii: ",")) }
                first = false
                out.append(contentsOf: ResponseParsing.jsonString(pointer.tokens[0]))
                out.append(UInt8(ascii: ":"))
                let start = out.count
                out.append(contentsOf: repeatElement(0, count: value.count))
                let written = out.withUnsafeMutableBufferPointer { hj_compactBytes(value, into: UnsafeMutableBufferPointer(rebasing: $0[start...])) }
                out.removeLast(value.count - written)
            }
        }
        out.append(UInt8(ascii: "}"))
    }

    func withItems<R>(_ body: (Int, (Int) -> UnsafeBufferPointer<UInt8>) -> R) -> R {
        compacted.withUnsafeBufferPointer { buffer in
            body(scan.itemCount) { index in
                if index < ranges.count, let range = ranges[index] { return UnsafeBufferPointer(rebasing: buffer[range]) }
                return scan.item(index).bytes
            }
        }
    }
}

/// The fetches in flight: who completes each one first (a response, cancel) claims its id;
/// everyone else finds it gone.
final class InFlightFetches: Sendable {
    private struct Entry {
        var completion: FetchCompletion
        var transfer: UInt64?
    }

    private struct State {
        var closed = false
        var entries: [UInt64: Entry] = [:]
        /// The threads completing a fetch with the host right now (outside the lock).
        var completing: [pthread_t] = []
    }

    private let state = Mutex(State())

    /// Records a fetch about to start; false once the instance is closed.
    func register(_ completion: FetchCompletion) -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.entries[completion.id] = Entry(completion: completion)
            return true
        }
    }

    /// Records the transfer now serving fetch `id` (for cancel).
    func attach(_ id: UInt64, transfer: UInt64) {
        state.withLock { $0.entries[id]?.transfer = transfer }
    }

    /// Claims `id` and runs `body` (which completes it with the host); false when the fetch
    /// was already completed, cancelled, or the instance closed. `body` runs outside the lock,
    /// so the fetch the host starts as soon as it has the page does not wait for this call to
    /// return; `close` waits for it instead.
    @discardableResult
    func finish(_ id: UInt64, _ body: () -> Void) -> Bool {
        let me = pthread_self()
        let claimed = state.withLock { state in
            guard !state.closed, state.entries.removeValue(forKey: id) != nil else { return false }
            state.completing.append(me)
            return true
        }
        guard claimed else { return false }
        body()
        state.withLock { state in
            if let index = state.completing.firstIndex(of: me) { state.completing.remove(at: index) }
        }
        return true
    }

    /// Claims `id`, completes it with CANCELLED and returns its transfer to cancel (nil for an
    /// unknown or finished id, which is ignored).
    func cancel(_ id: UInt64, message: String) -> UInt64? {
        state.withLock { state in
            guard !state.closed, let entry = state.entries.removeValue(forKey: id) else { return nil }
            entry.completion.fail(PluginFailure(PAGING_ERR_CANCELLED, message))
            return entry.transfer
        }
    }

    /// Closes the table (the instance is being destroyed): nothing completes afterwards. Waits
    /// for completions running on other threads (one on this thread, a host that destroys the
    /// source from inside its completion, is not waited for).
    func close() -> [UInt64] {
        let transfers = state.withLock { state in
            state.closed = true
            defer { state.entries = [:] }
            return state.entries.values.compactMap(\.transfer)
        }
        // Asleep, not spinning: a completion may take a while (its host calls, a log line to a
        // full pipe), and destroy() should cost no processor meanwhile.
        let me = pthread_self()
        while state.withLock({ $0.completing.contains { $0 != me } }) { usleep(200) }
        return transfers
    }
}

@c(paging_plugin_entry)
public func pagingPluginEntry() -> UnsafeRawPointer { PluginExport.entry(HTTPSourcePlugin.self) }

extension HTTPSourceConfig {
    /// Why a transfer to `url` gave no response to read, or nil when it did (`.response`).
    /// A cancelled transfer is reported as such; callers that cancel it themselves drop it first.
    func failure(of response: TransportResponse, url: String) -> PluginFailure? {
        // The status, when the headers came before the transfer failed.
        let status = response.status > 0 ? " (HTTP \(response.status))" : ""
        switch response.outcome {
        case .response:
            return nil
        case .cancelled:
            return PluginFailure(PAGING_ERR_CANCELLED, "the request to \(url) was cancelled")
        case .bodyTooLarge:
            return .internal("the body from \(url)\(status) is larger than max_page_bytes (\(maxPageBytes) bytes, counted after any decompression); reading stopped")
        case .headersTooLarge:
            return .internal("the response headers from \(url) are larger than max_header_bytes (\(maxHeaderBytes) bytes); reading stopped")
        case .headerLineTooLarge:
            return .internal("the response headers from \(url) are too large: one line passed libcurl's limit of 100 KiB; reading stopped")
        case .notHTTP(let prefix):
            return .internal("the reply from \(url) is not HTTP: it begins with \(ResponseParsing.quoted(prefix))")
        case .failed(let code, let message):
            return networkFailure(code: code, message: message, url: url, status: status)
        }
    }

    private func networkFailure(code: Int32, message: String, url: String, status: String) -> PluginFailure {
        switch code {
        case 28: return PluginFailure(PAGING_ERR_TIMEOUT, "timed out after \(timeoutMilliseconds) ms fetching \(url) (\(message))")
        case 7: return .transient("cannot connect to the server (connection refused) fetching \(url): \(message)")
        case 5, 6: return .transient("cannot find the host (DNS lookup failed) fetching \(url): \(message)")
        case 52: return .transient("the server closed the connection without a reply fetching \(url)")
        // libcurl's words for chunk framing it cannot read: the server's, sent so again if asked.
        case 56 where message.lowercased().contains("chunk"):
            return .internal("the body from \(url)\(status) is not valid chunked encoding: \(message)")
        case 18, 55, 56: return .transient("the connection was lost fetching \(url): \(message)")
        // libcurl's words for a status line it cannot read (no three-digit code, no version it
        // knows): the server's fault.
        case 1 where message.contains("response code") || message.contains("HTTP version"):
            return .internal("the reply from \(url) is not HTTP: its status line is not valid (\(message))")
        case 1, 3: return .invalidRequest("cannot fetch \(url): \(message)")
        case 61: return .internal("the body from \(url)\(status) cannot be decompressed: \(message)")
        // Not this source's writing (its limits say so themselves): libcurl's decoder refusing
        // what follows a compressed body (trailing bytes, a second gzip member).
        case 23: return .internal("the body from \(url)\(status) cannot be decompressed: the decoder stopped after the first compressed member (bytes after it, or a second gzip member; \(message))")
        case 60: return .invalidConfig("the server's certificate is not trusted fetching \(url): \(message) "
                                       + (caFile == nil ? "(a private certificate authority needs ca_file)" : "(ca_file's authorities do not vouch for it)"))
        case 77: return .invalidConfig("cannot use the certificates of ca_file fetching \(url): \(message)")
        // OpenSSL's words for a reply to its hello that is not TLS: retried, it never is.
        case 35 where message.contains("wrong version number") || message.contains("packet length too long"):
            return .invalidConfig("the server at \(url) does not speak TLS (is the url http://?): \(message)")
        default: return .transient("network error fetching \(url): \(message) (libcurl error \(code))")
        }
    }
}
