// The http source as a plugin: pages of JSON items fetched over HTTP(S) with URLSession.
//
// Config (the plugin's `config` object; an unknown key, or a value of the wrong kind, refuses
// the config with a message naming the key and what was expected):
//   url         required. A URL template with placeholders:
//                 {key}         the page's key (percent-encoded; "" for the first cursor page)
//                 {pageSize}    the request's page size
//                 {offset}      page: (key - first) * pageSize; offset: the key itself
//                               (not available with cursor or link pagination)
//                 {param.NAME}  the request param (user info) NAME, percent-encoded ("" if absent)
//   items       JSON pointer (RFC 6901) to the array of items in the body; default "" (the body
//               itself is the array). Each item is handed back as compact JSON: its own bytes
//               in the body without the whitespace between tokens (member order and number
//               spelling as the server sent them; re-serializing with JSONSerialization cost
//               ~25 µs an item on Linux, so it is only the fallback).
//   pagination  {"type": ...}, default {"type": "page"}:
//                 "page"    keys are page numbers (decimal text); "first" (default 1). next =
//                           key + 1 unless the page holds fewer items than the page size (last
//                           page); prev = key - 1 unless key == first. Has a key chain.
//                 "offset"  keys are item offsets; "first" (default 0). next = key + items
//                           unless fewer than the page size (last page); prev = max(first,
//                           key - pageSize) unless key == first.
//                 "cursor"  "next": JSON pointer to the next cursor (null, missing or "" = last
//                           page); optional "prev": pointer to the previous cursor (without it,
//                           every page is a first page: no prepend); "first": the refresh key
//                           (default "", no cursor). Keys are the cursors (numbers as text).
//                 "link"    the Link header (RFC 8288, as GitHub sends it): the key of the next
//                           page is its rel="next" URL, of the previous its rel="prev" URL; no
//                           rel="next" = last page, no rel="prev" = first page. A key that is an
//                           absolute http(s) URL is fetched as is; the refresh key is "", which
//                           stands for the `url` template expanded for the first page (expanded
//                           at fetch time, since {pageSize} and {param.*} come with the request).
//   headers     {"Name": "value"}; "${VAR}" in a value is replaced from the environment when
//               the instance is created (so a token never sits in a manifest), e.g.
//               "Authorization": "Bearer ${GITHUB_TOKEN}". An unset or empty variable omits the
//               header and logs a warning. Defaults: User-Agent: SwiftPaging (GitHub requires
//               one), Accept: application/json.
//   timeout_ms  the URLSession request timeout in milliseconds (default 30000).
//
// Errors (the status decides whether the host's retry policy retries):
//   - a network failure (refused, DNS, reset)      TRANSIENT, naming the URL
//   - a request timeout                            TIMEOUT, naming the URL
//   - HTTP 429 or 5xx                              TRANSIENT: "HTTP 503 from URL"
//   - HTTP 404                                     NOT_FOUND  } "HTTP 400 from URL: " + the
//   - any other 4xx                                INVALID_REQUEST } first 200 bytes of the body
//   - a body that is not JSON, or whose items pointer is not an array: INTERNAL, naming the URL
//   - a page or offset key whose offset, or the key after it, overflows a 64-bit integer (a
//     key from a store or a caller): INVALID_REQUEST naming the key, before any request
//   - cancel(fetch:)                               CANCELLED, at once, exactly once
//
// Retry-After (on 429 and 5xx): the host's retry policy owns the backoff and cannot see HTTP
// headers, so the plugin does two things: the message carries the Retry-After seconds, and the
// plugin waits that long (at most 60 s, and only when it is no longer than the request
// timeout) before it completes the fetch with the failure. An immediate retry by the host then
// respects the server's wish. The wait holds no thread (a timer on a global queue) and ends
// early, with CANCELLED, when the fetch is cancelled. Mind the host's own fetch timeout
// (PluginLimits.fetchTimeout, default 30 s): a longer Retry-After wait surfaces as the host's
// timeout instead.
//
// Threads: the instance is thread-safe. Each instance has one ephemeral URLSession; fetches
// complete from its callback queue. Every completion (and cancellation) first claims the fetch
// id from a Mutex-protected table, and calls the host while holding that lock, so a fetch is
// completed exactly once and never after the instance is destroyed (deinit closes the table).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import CPaging
import PagingPluginKit
import Synchronization

final class HTTPSourcePlugin: SourcePlugin {
    static let info = PluginInfo(
        id: "http", name: "HTTP JSON source", version: "1.0.0",
        description: "Pages of JSON items over HTTP(S): page, offset, cursor or Link-header pagination",
        isThreadSafe: true)

    private let host: PluginHost
    private let config: HTTPSourceConfig
    private let session: URLSession
    private let fetches = InFlightFetches()
    let refreshKey: [UInt8]

    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        let parsed = try HTTPSourceConfig(json: config.json, environment: ProcessInfo.processInfo.environment)
        self.host = host
        self.config = parsed
        switch parsed.pagination {
        case .page(let first), .offset(let first): refreshKey = Array(String(first).utf8)
        case .cursor(_, _, let first): refreshKey = Array(first.utf8)
        case .link: refreshKey = []
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = parsed.timeout
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        session = URLSession(configuration: configuration)
        for warning in parsed.warnings { host.log(.warning, warning) }
    }

    deinit {
        for task in fetches.close() { task.cancel() }
        session.invalidateAndCancel()
    }

    /// Page numbers are computable: the chain of page `n` is n - 1 (unless first) and n + 1.
    /// Offsets need the page size, which the chain does not get; cursors and links come with
    /// pages. Those return nil: the keys come with each page.
    func keyChain(for key: [UInt8]) -> (prev: [UInt8]?, next: [UInt8]?)? {
        guard case .page(let first) = config.pagination,
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
            completion.fail(error)
            return
        }
        var urlRequest = URLRequest(url: target.url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: config.timeout)
        for header in config.headers { urlRequest.setValue(header.value, forHTTPHeaderField: header.name) }
        let context = FetchContext(target: target, config: config, completion: completion, fetches: fetches, host: host)
        let task = session.dataTask(with: urlRequest) { data, response, error in
            context.finish(data: data, response: response, error: error)
        }
        guard fetches.register(completion, task: task) else {
            completion.fail(PluginFailure(PAGING_ERR_CANCELLED, "the http source was destroyed"))
            return
        }
        task.resume()
    }

    func cancel(fetch id: UInt64) {
        fetches.cancel(id)?.cancel()
    }
}

/// What one fetch asks for: the URL, and the numeric key for page and offset pagination.
struct FetchTarget: Sendable {
    var url: URL
    var key: String
    var number: Int
    var pageSize: Int

    init(_ request: PagingPluginRequest, config: HTTPSourceConfig) throws(PluginFailure) {
        key = request.keyText
        pageSize = request.pageSize
        number = 0
        let text: String
        switch config.pagination {
        case .page(let first), .offset(let first):
            if key.isEmpty {
                number = first
            } else {
                guard let parsed = Int(key), parsed >= 0 else {
                    throw .invalidRequest("key \"\(key)\" is not a \(config.pagination.typeName == "page" ? "page number" : "offset")")
                }
                number = parsed
            }
            let isPage = config.pagination.typeName == "page"
            let offset = try Self.offset(key: key, number: number, first: first, pageSize: pageSize, isPage: isPage)
            key = String(number)
            text = config.url.expand(key: key, pageSize: pageSize, offset: offset, params: request.params)
        case .cursor:
            text = config.url.expand(key: key, pageSize: pageSize, offset: nil, params: request.params)
        case .link:
            let lowered = key.lowercased()
            if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
                text = key
            } else {
                text = config.url.expand(key: key, pageSize: pageSize, offset: nil, params: request.params)
            }
        }
        guard let url = URL(string: text) else {
            throw .invalidRequest("\"\(text)\" (for key \"\(key)\") is not a valid URL")
        }
        self.url = url
    }

    /// The `{offset}` of a page or offset key, refusing a key from outside (a store, a caller)
    /// whose offset, or the key of the page after it, a 64-bit integer cannot hold.
    static func offset(key: String, number: Int, first: Int, pageSize: Int, isPage: Bool) throws(PluginFailure) -> Int {
        let offset: Int, next: (partialValue: Int, overflow: Bool)
        if isPage {
            let product = max(0, number - first).multipliedReportingOverflow(by: pageSize)
            guard !product.overflow else {
                throw .invalidRequest("key \"\(key)\" is too large: its offset ((key - \(first)) x page size \(pageSize)) overflows a 64-bit integer")
            }
            offset = product.partialValue
            next = number.addingReportingOverflow(1)
        } else {
            offset = number
            next = number.addingReportingOverflow(pageSize)
        }
        guard !next.overflow else {
            throw .invalidRequest("key \"\(key)\" is too large: the key after it overflows a 64-bit integer")
        }
        return offset
    }
}

/// Everything a URLSession callback needs to complete one fetch.
struct FetchContext: Sendable {
    let target: FetchTarget
    let config: HTTPSourceConfig
    let completion: FetchCompletion
    let fetches: InFlightFetches
    let host: PluginHost

    private var url: String { target.url.absoluteString }

    func finish(data: Data?, response: URLResponse?, error: (any Error)?) {
        if let error {
            fail(networkFailure(error))
            return
        }
        guard let http = response as? HTTPURLResponse else {
            fail(.internal("no HTTP response from \(url)"))
            return
        }
        switch http.statusCode {
        case 200..<300:
            let page: PageContent
            do {
                page = try self.page(data ?? Data(), response: http)
            } catch {
                fail(error)
                return
            }
            _ = fetches.finish(completion.id) { completion.succeed(page) }
        case 429, 500..<600:
            failLater(http, data: data)
        case 404:
            fail(PluginFailure(PAGING_ERR_NOT_FOUND, "HTTP 404 from \(url): \(ResponseParsing.snippet(data))"))
        case 400..<500:
            fail(.invalidRequest("HTTP \(http.statusCode) from \(url): \(ResponseParsing.snippet(data))"))
        default:
            fail(.internal("unexpected HTTP \(http.statusCode) from \(url): \(ResponseParsing.snippet(data))"))
        }
    }

    private func fail(_ failure: PluginFailure) {
        _ = fetches.finish(completion.id) { completion.fail(failure) }
    }

    /// 429 and 5xx: transient; with Retry-After, wait (see the file comment) before failing.
    private func failLater(_ response: HTTPURLResponse, data: Data?) {
        var message = "HTTP \(response.statusCode) from \(url)"
        guard let seconds = ResponseParsing.retryAfterSeconds(header(response, "Retry-After")) else {
            fail(.transient(message + ": " + ResponseParsing.snippet(data, limit: 200)))
            return
        }
        guard seconds > 0, Double(seconds) <= config.timeout else {
            message += " (Retry-After: \(seconds) s\(seconds > 0 ? "; not waited: longer than the request timeout" : ""))"
            fail(.transient(message))
            return
        }
        let wait = min(seconds, 60)
        message += " (Retry-After: \(seconds) s; waited \(wait) s before reporting\(wait < seconds ? ", capped" : ""))"
        let failure = PluginFailure.transient(message)
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(wait)) { [self] in
            fail(failure)
        }
    }

    private func networkFailure(_ error: any Error) -> PluginFailure {
        guard let urlError = error as? URLError else {
            return .transient("network error fetching \(url): \(error)")
        }
        switch urlError.code {
        case .timedOut:
            return PluginFailure(PAGING_ERR_TIMEOUT, "timed out after \(config.timeoutMilliseconds) ms fetching \(url)")
        case .cancelled:
            return PluginFailure(PAGING_ERR_CANCELLED, "cancelled fetching \(url)")
        case .badURL, .unsupportedURL:
            return .invalidRequest("cannot fetch \(url): unsupported or bad URL")
        case .cannotConnectToHost:
            return .transient("cannot connect to the server (connection refused) fetching \(url)")
        case .cannotFindHost, .dnsLookupFailed:
            return .transient("cannot find the host (DNS lookup failed) fetching \(url)")
        case .networkConnectionLost:
            return .transient("the connection was lost fetching \(url)")
        case .notConnectedToInternet:
            return .transient("not connected to a network fetching \(url)")
        default:
            return .transient("network error fetching \(url): URLError \(urlError.code.rawValue) (\(urlError.localizedDescription))")
        }
    }

    /// The page of a 2xx response: items at the pointer, keys by the pagination type.
    private func page(_ data: Data, response: HTTPURLResponse) throws(PluginFailure) -> PageContent {
        let body: Any
        do {
            body = try JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
        } catch {
            throw .internal("malformed body from \(url): not JSON (\(data.count) bytes: \(ResponseParsing.snippet(data, limit: 80)))")
        }
        guard let found = config.items.resolve(body) else {
            throw .internal("malformed body from \(url): the items pointer \(config.items) does not resolve (no such member)")
        }
        guard let array = found as? [Any] else {
            throw .internal("malformed body from \(url): the items pointer \(config.items) resolves to \(describe(found)), not an array")
        }
        var items: [[UInt8]]
        if let raw = RawJSONScanner(data).items(at: config.items), raw.count == array.count {
            items = raw
        } else {
            items = []
            items.reserveCapacity(array.count)
            for item in array {
                do {
                    items.append(try ResponseParsing.serialize(item))
                } catch {
                    throw .internal("malformed body from \(url): an item could not be serialized (\(error))")
                }
            }
        }
        let count = items.count
        let short = count < target.pageSize || count == 0
        switch config.pagination {
        case .page(let first):
            let number = target.number
            return PageContent(items: items,
                               prevKey: number > first ? Array(String(number - 1).utf8) : nil,
                               nextKey: short ? nil : Array(String(number + 1).utf8),
                               isFirst: number <= first, isLast: short)
        case .offset(let first):
            let number = target.number
            // More items than the page size may come back: the next offset is checked again.
            let next = number.addingReportingOverflow(count)
            guard short || !next.overflow else {
                throw .invalidRequest("key \"\(target.key)\": the offset after its \(count) items overflows a 64-bit integer (from \(url))")
            }
            return PageContent(items: items,
                               prevKey: number > first ? Array(String(max(first, number - target.pageSize)).utf8) : nil,
                               nextKey: short ? nil : Array(String(next.partialValue).utf8),
                               isFirst: number <= first, isLast: short)
        case .cursor(let nextPointer, let prevPointer, _):
            var next = ResponseParsing.cursor(nextPointer.resolve(body))
            if let cursor = next, cursor == target.key {
                host.log(.warning, "\(url): the next cursor equals the current one (\"\(cursor)\"); treating the page as the last")
                next = nil
            }
            let prev = prevPointer.flatMap { ResponseParsing.cursor($0.resolve(body)) }
            return PageContent(items: items, prevKey: prev.map { Array($0.utf8) }, nextKey: next.map { Array($0.utf8) },
                               isFirst: prev == nil, isLast: next == nil)
        case .link:
            let links = header(response, "Link").map { ResponseParsing.links($0, base: response.url ?? target.url) } ?? [:]
            var next = links["next"]
            if let link = next, link == target.url.absoluteString {
                host.log(.warning, "\(url): rel=\"next\" points at the page itself; treating the page as the last")
                next = nil
            }
            let prev = links["prev"]
            return PageContent(items: items, prevKey: prev.map { Array($0.utf8) }, nextKey: next.map { Array($0.utf8) },
                               isFirst: prev == nil, isLast: next == nil)
        }
    }

    private func header(_ response: HTTPURLResponse, _ name: String) -> String? {
        let lowered = name.lowercased()
        for (key, value) in response.allHeaderFields {
            if let key = key as? String, key.lowercased() == lowered { return value as? String ?? "\(value)" }
        }
        return nil
    }
}

/// The fetches in flight: who completes each one first (the URLSession callback, the
/// Retry-After timer, or cancel) claims its id; everyone else finds it gone.
final class InFlightFetches: Sendable {
    private struct Entry {
        var completion: FetchCompletion
        var task: URLSessionDataTask
    }

    private struct State {
        var closed = false
        var entries: [UInt64: Entry] = [:]
    }

    private let state = Mutex(State())

    /// Records a fetch about to start; false once the instance is closed.
    func register(_ completion: FetchCompletion, task: URLSessionDataTask) -> Bool {
        state.withLock { state in
            guard !state.closed else { return false }
            state.entries[completion.id] = Entry(completion: completion, task: task)
            return true
        }
    }

    /// Claims `id` and runs `body` (which completes it with the host) under the lock; false
    /// when the fetch was already completed, cancelled, or the instance closed.
    @discardableResult
    func finish(_ id: UInt64, _ body: () -> Void) -> Bool {
        state.withLock { state in
            guard !state.closed, state.entries.removeValue(forKey: id) != nil else { return false }
            body()
            return true
        }
    }

    /// Claims `id`, completes it with CANCELLED and returns its task to cancel (nil for an
    /// unknown or finished id, which is ignored).
    func cancel(_ id: UInt64) -> URLSessionDataTask? {
        state.withLock { state in
            guard !state.closed, let entry = state.entries.removeValue(forKey: id) else { return nil }
            entry.completion.fail(PluginFailure(PAGING_ERR_CANCELLED, "cancelled: \(entry.task.originalRequest?.url?.absoluteString ?? "request")"))
            return entry.task
        }
    }

    /// Closes the table (the instance is being destroyed): nothing completes afterwards.
    /// Returns the tasks still running, to cancel.
    func close() -> [URLSessionDataTask] {
        state.withLock { state in
            state.closed = true
            defer { state.entries = [:] }
            return state.entries.values.map(\.task)
        }
    }
}

@c(paging_plugin_entry)
public func pagingPluginEntry() -> UnsafeRawPointer { PluginExport.entry(HTTPSourcePlugin.self) }
