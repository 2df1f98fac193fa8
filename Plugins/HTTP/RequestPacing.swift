// Waiting before requests without holding a thread: the `max_requests_per_second` budget and
// a pause until a rate limit resets (X-RateLimit-Remaining: 0); and OAuth2 client-credentials
// tokens, fetched once, shared by concurrent fetches, and fetched again before they expire.
import CPaging
import FoundationEssentials
import Dispatch
import PagingPluginKit
import Synchronization

/// Starts work at most `perSecond` times a second, and not before a pause ends.
final class Pacer: Sendable {
    private let interval: UInt64?
    private let state = Mutex<(next: UInt64, pausedUntil: UInt64)>((0, 0))

    init(perSecond: Double?) {
        interval = perSecond.map { UInt64(1e9 / $0) }
    }

    /// Runs `body` now, or later on a global queue when the budget or a pause says to wait.
    func whenAllowed(_ body: @escaping @Sendable () -> Void) {
        let now = DispatchTime.now().uptimeNanoseconds
        let start = state.withLock { state -> UInt64 in
            let start = max(now, state.next, state.pausedUntil)
            if let interval { state.next = start + interval }
            return start
        }
        if start <= now {
            body()
        } else {
            DispatchQueue.global().asyncAfter(deadline: DispatchTime(uptimeNanoseconds: start), execute: body)
        }
    }

    /// How long the pause (``pause(seconds:)``) still holds requests back, if it does.
    var pauseLeft: Duration? {
        let now = DispatchTime.now().uptimeNanoseconds
        let until = state.withLock { $0.pausedUntil }
        return until > now ? .nanoseconds(Int64(until - now)) : nil
    }

    /// The longest pause: a day.
    static let longestPause = 86_400

    /// No request starts for `seconds` (at most ``longestPause``).
    func pause(seconds: Int) {
        let until = DispatchTime.now().uptimeNanoseconds + UInt64(min(max(0, seconds), Self.longestPause)) * 1_000_000_000
        state.withLock { $0.pausedUntil = max($0.pausedUntil, until) }
    }
}

/// An OAuth2 client-credentials token: fetched from the token endpoint when first needed,
/// cached, and fetched again once less than a tenth of its life (at most 60 s) is left.
final class TokenCache: Sendable {
    private struct State {
        var token: String?
        var refreshAt: UInt64 = 0
        var waiters: [@Sendable (Result<String, PluginFailure>) -> Void] = []
        var fetching = false
        /// The last tokens handed out, for redaction (an older one has long expired).
        var issued: [EncodedSecret] = []
    }

    private let tokenURL: String
    private let form: [UInt8]
    private let state = Mutex(State())
    /// The token, its lifetime, and RFC 6749's error fields (5.2) of a response without one.
    private let plan = ScanPlan(["access_token", "expires_in", "error", "error_description"].map { JSONPointer(member: $0) })

    init(tokenURL: String, clientID: String, clientSecret: String, scope: String?) {
        self.tokenURL = tokenURL
        var fields = ["grant_type=client_credentials", "client_id=" + percentEncode(clientID), "client_secret=" + percentEncode(clientSecret)]
        if let scope { fields.append("scope=" + percentEncode(scope)) }
        form = Array(fields.joined(separator: "&").utf8)
    }

    /// The last tokens handed out (to redact from messages), those long enough to redact (as
    /// the config's secrets: replacing every "a" would garble every message).
    var issued: [EncodedSecret] { state.withLock { $0.issued } }

    /// Forgets `token` when it is the cached one (a server refused it), so the next request
    /// fetches a new one.
    func invalidate(_ token: String) {
        state.withLock { state in
            if state.token == token { state.refreshAt = 0 }
        }
    }

    /// Calls `body` with a fresh token (at once when cached), or with the failure of the
    /// token request.
    func withToken(client: TransportClient, config: HTTPSourceConfig, _ body: @escaping @Sendable (Result<String, PluginFailure>) -> Void) {
        let now = DispatchTime.now().uptimeNanoseconds
        let (cached, start) = state.withLock { state -> (String?, Bool) in
            if let token = state.token, now < state.refreshAt { return (token, false) }
            state.waiters.append(body)
            defer { state.fetching = true }
            return (nil, !state.fetching)
        }
        if let cached { return body(.success(cached)) }
        guard start else { return }
        let request = TransportRequest(url: tokenURL, method: "POST",
                                       headers: ["Content-Type: application/x-www-form-urlencoded", "Accept: application/json"] + config.publicHeaderLines,
                                       body: form, timeoutMilliseconds: config.timeoutMilliseconds,
                                       maxBodyBytes: 1 << 20, maxHeaderBytes: config.maxHeaderBytes, caFile: config.caFile)
        let started = client.start(request) { [self] response in
            finish(tokenResult(response, config: config))
        }
        if started == nil { finish(.failure(.internal("libcurl refused the OAuth2 token request to \(tokenURL)"))) }
    }

    private func tokenResult(_ response: TransportResponse, config: HTTPSourceConfig) -> Result<(String, Int?), PluginFailure> {
        if let failure = config.failure(of: response, url: tokenURL) {
            return .failure(PluginFailure(failure.status, "the OAuth2 token request failed: \(failure.message)"))
        }
        guard (200..<300).contains(response.status) else {
            guard response.status >= 500 || response.status == 429 else {
                // A refusal (RFC 6749 5.2: 400 or 401 with `error`) is said by its code and
                // description, not the body, which may hold other fields (the form echoed).
                if let (code, described) = refusal(fields(of: response.body), config: config) {
                    return .failure(.invalidConfig("the OAuth2 token request to \(tokenURL) was refused: HTTP \(response.status): \(code)\(described)"))
                }
                return .failure(.invalidConfig("the OAuth2 token request to \(tokenURL) failed: HTTP \(response.status): \(config.snippet(response.body, also: issued))"))
            }
            // Busy or rate limited: the host's retry policy waits as the server says, as for a page.
            let wait = ResponseParsing.rateLimitWait(response)
            return .failure(.transient("the OAuth2 token request to \(tokenURL) failed: HTTP \(response.status): \(config.snippet(response.body, also: issued))",
                                       retryAfter: wait.map { .seconds($0) }))
        }
        // The body is never quoted: it may hold the token, which is not known to redact yet.
        guard let fields = fields(of: response.body) else {
            return .failure(.internal("the OAuth2 token response from \(tokenURL) is neither JSON nor form-encoded (\(response.body.count) bytes; expected an object with an access_token)"))
        }
        guard let token = fields.token else {
            // An error a server answers with 200 (GitHub's "bad_verification_code") is said:
            // its code and description, not the body, which may hold other fields.
            if let (code, described) = refusal(fields, config: config) {
                return .failure(.invalidConfig("the OAuth2 token request to \(tokenURL) was refused: \(code)\(described)"))
            }
            return .failure(.internal("the OAuth2 token response from \(tokenURL) has no access_token (a string or number at its top level; \(response.body.count) bytes)"))
        }
        // It goes into a header line: visible ASCII only (RFC 6750's b64token is narrower still).
        guard !token.isEmpty, token.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            return .failure(.internal("the OAuth2 token response from \(tokenURL) has an access_token that cannot go in a header (empty, or a space, control or non-ASCII character)"))
        }
        return .success((token, fields.lifetime))
    }

    /// What a token response says: the token, its lifetime in seconds, an error's code and
    /// description.
    private typealias Fields = (token: String?, lifetime: Int?, error: String?, description: String?)

    /// The fields of a token response (JSON, or form-encoded as GitHub and older servers
    /// answer, though RFC 6749 says JSON); nil when it is neither.
    private func fields(of body: UnsafeBufferPointer<UInt8>) -> Fields? {
        if let scan = try? plan.scan(body) {
            let text = { (slot: Int) in scan.value(slot).flatMap { JSONScalar($0).cursorText } }
            return (text(0), scan.value(1).flatMap { JSONScalar($0).integer }, text(2), text(3))
        }
        guard let form = Self.formFields(body) else { return nil }
        return (form["access_token"], form["expires_in"].flatMap { Int($0) }, form["error"], form["error_description"])
    }

    /// The `error` of a token response's `fields` and ": " its `error_description` (each cut
    /// and redacted), or nil when it has no `error`.
    private func refusal(_ fields: Fields?, config: HTTPSourceConfig) -> (String, String)? {
        guard let fields, let code = fields.error else { return nil }
        return (config.snippet(code, limit: 60, also: issued), fields.description.map { ": \(config.snippet($0, also: issued))" } ?? "")
    }

    /// The fields of an application/x-www-form-urlencoded body ("a=1&b=x%2By"), or nil when it
    /// is not one (a field without "=", a bad escape, a character a form encodes, such as a
    /// space or "<", or not UTF-8).
    static func formFields(_ body: UnsafeBufferPointer<UInt8>) -> [String: String]? {
        guard let text = String(validating: body, as: UTF8.self), let first = text.firstIndex(where: { !$0.isWhitespace }),
              let last = text.lastIndex(where: { !$0.isWhitespace }),
              !text[first...last].utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F || #""<>\{}|^`"#.utf8.contains($0) }) else { return nil }
        var fields: [String: String] = [:]
        for field in text[first...last].split(separator: "&") {
            guard let equals = field.firstIndex(of: "="),
                  let name = formDecoded(field[..<equals]), let value = formDecoded(field[field.index(after: equals)...]) else { return nil }
            fields[name] = value
        }
        return fields
    }

    /// A form field's name or value decoded ("+" is a space, "%XX" a byte); nil for a bad escape.
    private static func formDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var i = text.utf8.startIndex
        let utf8 = text.utf8
        while i < utf8.endIndex {
            let byte = utf8[i]
            if byte == UInt8(ascii: "%") {
                let digits = utf8[utf8.index(after: i)...].prefix(2).compactMap { Character(Unicode.Scalar($0)).hexDigitValue.map(UInt8.init) }
                guard digits.count == 2 else { return nil }
                bytes.append(digits[0] << 4 | digits[1])
                i = utf8.index(i, offsetBy: 3)
            } else {
                bytes.append(byte == UInt8(ascii: "+") ? 0x20 : byte)
                i = utf8.index(after: i)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private func finish(_ result: Result<(String, Int?), PluginFailure>) {
        let now = DispatchTime.now().uptimeNanoseconds
        let waiters = state.withLock { state in
            defer { state.waiters = []; state.fetching = false }
            if case .success(let (token, lifetime)) = result {
                // expires_in is the server's word: from 1 s to a year.
                let life = UInt64(min(max(1, lifetime ?? 3600), 366 * 86_400)) * 1_000_000_000
                state.token = token
                state.refreshAt = now + life - min(life / 10, 60_000_000_000)
                if token.utf8.count >= HTTPSourceConfig.shortestRedacted {
                    state.issued = state.issued.suffix(7) + [EncodedSecret(token)]
                }
            }
            return state.waiters
        }
        let outcome = result.map(\.0)
        for waiter in waiters { waiter(outcome) }
    }
}
