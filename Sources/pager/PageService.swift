import Dispatch
import FoundationEssentials
import Paging
import PagingHost

/// What `pager serve` answers: pages of the pipeline under signed cursors, health and metrics.
final class PageService: Sendable {
    private let pipeline: Pipeline
    private let secret: [UInt8]
    private let maxRequests: Int
    private let timeout: Duration
    /// A health check's bound: one call of each plugin, timed as a fetch is (`timeout_ms`), or
    /// the request timeout when shorter; no retries.
    private let healthTimeout: Duration
    /// The deadlines of the requests being answered, of pages and of health checks.
    private let pageDeadlines: Deadlines<ObjectIdentifier>, healthDeadlines: Deadlines<ObjectIdentifier>
    private static let deadlineQueue = DispatchQueue(label: "pager.serve-deadlines")
    private let metrics = ServeMetrics()
    private let running = Locked(0)
    /// Loads given up on (their client gone, or past the timeout) that still run: they hold no
    /// request's slot, but while `maxRequests` of them run, new requests are refused.
    private let abandoned = Locked(0)
    private let sharedLoads: SharedPageLoads
    private let allowed: Set<String>

    init(pipeline: Pipeline, secret: ServeSecret, maxRequests: Int, timeout: Duration) {
        self.pipeline = pipeline
        self.secret = secret.bytes
        self.maxRequests = maxRequests
        self.timeout = timeout
        healthTimeout = min(timeout, pipeline.manifest.fetchTimeout)
        pageDeadlines = Deadlines(timeout: timeout, queue: Self.deadlineQueue)
        healthDeadlines = Deadlines(timeout: healthTimeout, queue: Self.deadlineQueue)
        allowed = Set(pipeline.manifest.serveParams)
        sharedLoads = SharedPageLoads(countingAbandonedIn: abandoned)
    }

    /// The route a path is counted under.
    private static func route(of path: String) -> String {
        ["/pages", "/healthz", "/metrics"].contains(path) ? path : "other"
    }

    /// Counts a request: one answered by ``answer(_:)``, with the status sent and how long it
    /// took (HTTPService's `answered`: a 503 when the server had no room for the answer), or one
    /// the HTTP server answered itself (its `refused`).
    func record(_ path: String, status: Int, duration: Duration = .zero) {
        metrics.record(route: Self.route(of: path), status: status, duration: duration)
    }

    func answer(_ request: HTTPRequest) async -> HTTPAnswer {
        var answer: HTTPAnswer
        if request.method != "GET" && request.method != "HEAD" {
            answer = .error(405, "only GET and HEAD are served")
            answer.header = ("Allow", "GET, HEAD")
        } else if request.path != "/pages" {
            // Health and metrics are answered however many pages are being loaded: a busy
            // server was taken for a sick one, and its metrics were lost under load.
            answer = await route(request)
        } else if let refusal = reserveSlot() {
            answer = refusal
        } else {
            answer = await route(request)
            running.withLock { $0 -= 1 }
        }
        return answer
    }

    /// Takes a request's slot; or the 503 when none is free, or too many loads given up on
    /// still run (a plugin that goes on after a cancel would otherwise pile them up, a client
    /// that leaves at once freeing each slot).
    private func reserveSlot() -> HTTPAnswer? {
        let left = abandoned.withLock { $0 }
        guard left < maxRequests else {
            return .error(503, "the server is still ending \(left) load\(left == 1 ? "" : "s") its clients left or that timed out; try again shortly")
        }
        let reserved = running.withLock { running in
            guard running < maxRequests else { return false }
            running += 1
            return true
        }
        return reserved ? nil : .error(503, "the server is answering \(maxRequests) requests already; try again shortly")
    }

    private func route(_ request: HTTPRequest) async -> HTTPAnswer {
        switch request.path {
        case "/pages": return await page(request)
        case "/healthz": return await health()
        case "/metrics":
            return HTTPAnswer(status: 200, contentType: "text/plain; version=0.0.4", body: Array(metrics.render(pipeline.stats, joined: sharedLoads.joinedCount).utf8))
        default: return .error(404, "no such route: GET /pages, /healthz or /metrics")
        }
    }

    // MARK: Pages

    private func page(_ request: HTTPRequest) async -> HTTPAnswer {
        let pager = pipeline.pager
        var params = pipeline.requestParams
        let pagingRequest: PluginRequest
        do {
            let query = try parameters(request.query)
            if let text = query.cursor {
                guard query.userInfo.isEmpty else {
                    return .error(400, "a cursor carries the parameters of its first page: send it alone")
                }
                let cursor = try ServeCursor(text, secret: secret)
                guard cursor.userInfo.keys.allSatisfy(allowed.contains) else { return .error(400, "the cursor names parameters this server does not take") }
                params.userInfo.merge(cursor.userInfo) { $1 }
                pagingRequest = pager.request(cursor.kind, key: cursor.key, params: params)
            } else {
                let size = query.userInfo.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
                guard size <= ServeCursor.maxUserInfoBytes else {
                    return .error(400, "the parameters are \(size) bytes, more than the \(ServeCursor.maxUserInfoBytes) each cursor can carry")
                }
                params.userInfo.merge(query.userInfo) { $1 }
                pagingRequest = pager.refreshRequest(params: params)
            }
        } catch let refused as ServeCursor.Refused {
            return .error(400, refused.message)
        } catch {
            return .error(400, "\(error)")
        }
        let userInfo = params.userInfo.filter { allowed.contains($0.key) }
        var loaded: PluginPage
        do {
            loaded = try await within(pageDeadlines, countingAbandonedIn: abandoned) { [sharedLoads] in
                try await sharedLoads.load(pagingRequest, with: pager)
            }
            // An empty page a store answered with, where it would end the client's walk, is asked
            // of the source once more: kept while the data ended there, it ended every later walk
            // there, whatever the data gained.
            if loaded.isKept, Self.endsTheWalk(loaded, going: pagingRequest.kind) {
                var fresh = pagingRequest
                fresh.params.userInfo[PagingUserInfoKey.reload] = "true"
                loaded = try await within(pageDeadlines, countingAbandonedIn: abandoned) { [sharedLoads, fresh] in
                    try await sharedLoads.load(fresh, with: pager)
                }
            }
        } catch is ServeTimeout {
            Output.problem("pager serve: \(pagingRequest.kind) of key \"\(pagingRequest.key)\": no answer within \(timeout)")
            return .error(504, "the page was not loaded within \(timeout.wholeMilliseconds) ms")
        } catch where Task.isCancelled {
            // Its client went away, and the load was cancelled: answered to no one, counted
            // as nginx counts it.
            return .error(499, "the client closed its connection before the answer")
        } catch {
            // The details (plugin, upstream) go to the log, not to the client.
            Output.problem("pager serve: \(pagingRequest.kind) of key \"\(pagingRequest.key)\" failed: \(error)")
            let status = (error as? PluginError)?.status
            // The source no longer has the page a cursor it gave out named (the data changed
            // under it): the client's to start again, not a failing upstream.
            if status == .notFound, pagingRequest.kind != .refresh {
                return .error(410, "the page this cursor names is gone (the source has it no more): load the first page again")
            }
            // A failure that said when to try again (a rate limit): the client is told when.
            if let wait = retryHint(of: error) {
                let seconds = max(1, Int(wait.seconds.rounded(.up)))
                var answer = HTTPAnswer.error(503, "the page could not be loaded now; retry after \(seconds) s")
                answer.header = ("Retry-After", "\(seconds)")
                return answer
            }
            return .error(status == .timeout ? 504 : 502, "the page could not be loaded (\(status?.description ?? "failed"))")
        }
        var body: [UInt8] = Array(#"{"items": ["#.utf8)
        body.reserveCapacity(loaded.values.reduce(64) { $0 + $1.bytes.count + 1 })
        for (index, item) in loaded.values.enumerated() {
            if index > 0 { body.append(UInt8(ascii: ",")) }
            body += item.bytes
        }
        var next = loaded.nextKey, prev = loaded.prevKey
        if Self.endsTheWalk(loaded, going: pagingRequest.kind) {
            if pagingRequest.kind == .append { next = nil } else { prev = nil }
        }
        // A cursor this server would refuse is never given out.
        var cursors: [String] = []
        for (kind, key) in [(PagingRequestKind.append, next), (.prepend, prev)] {
            guard let key else {
                cursors.append("null")
                continue
            }
            let cursor = ServeCursor(kind: kind, key: key, userInfo: userInfo).encoded(secret: secret)
            guard cursor.utf8.count <= ServeCursor.maxLength else {
                let which = kind == .append ? "next" : "previous"
                Output.problem("pager serve: \(pagingRequest.kind) at \(pagingRequest.key): the \(which) page's key is \(key.bytes.count) bytes, "
                               + "too long for a cursor of at most \(ServeCursor.maxLength) characters")
                return .error(502, "the \(which) page's key is too long for a cursor of this server")
            }
            cursors.append(JSONValue.string(cursor).jsonText)
        }
        body += Array("], \"next\": \(cursors[0]), \"prev\": \(cursors[1])}\n".utf8)
        return HTTPAnswer(status: 200, body: body)
    }

    /// Whether `page`, met going on (`kind`), ends the data that way for now, as such a page ends
    /// paging in the manager: empty, its key on that side from the key chain alone (a source
    /// whose chain always names a page after the last handed out a cursor with every empty
    /// page, and a client following cursors to the end never stopped). A page a filter emptied
    /// ends nothing (the source's page had items).
    private static func endsTheWalk(_ page: PluginPage, going kind: PagingRequestKind) -> Bool {
        guard page.values.isEmpty, !page.isShortened, !page.isEmptiedByTransform else { return false }
        switch kind {
        case .append: return page.nextKey == page.request.keyChain.nextKey
        case .prepend: return page.prevKey == page.request.keyChain.prevKey
        case .refresh: return false
        }
    }

    /// The cursor and the user info a request's query sets.
    private func parameters(_ query: [(name: String, value: String?)]) throws -> (cursor: String?, userInfo: [String: String]) {
        var cursor: String?
        var userInfo: [String: String] = [:]
        // A query over 16 KiB is refused (414) by the HTTP server, before it is split.
        for (name, value) in query {
            guard let value else { throw ServeBadRequest("query parameter '\(name)' has no value") }
            if name == "cursor" {
                guard cursor == nil else { throw ServeBadRequest("more than one cursor") }
                cursor = value
            } else if allowed.contains(name) {
                guard userInfo[name] == nil else { throw ServeBadRequest("query parameter '\(name)' is given twice") }
                guard !value.utf8.contains(0) else { throw ServeBadRequest("query parameter '\(name)' holds a NUL byte") }
                userInfo[name] = value
            } else {
                let names = (["cursor"] + allowed.sorted()).joined(separator: ", ")
                throw ServeBadRequest("unknown query parameter '\(name.prefix(64))' (this server takes: \(names))")
            }
        }
        return (cursor, userInfo)
    }

    // MARK: Health

    /// A health check under way: the plugin it is asking, and its answer.
    private struct HealthCheck: Sendable {
        let asking: Locked<String?>
        let answer: Task<HTTPAnswer, Never>
    }

    /// The check under way: /healthz requests that come while it runs share its answer. Each
    /// request made a check of its own, and checks of a store waiting on a lock queued one
    /// behind another (4 s each), holding the threads that answer every route.
    private let healthCheck = Locked<HealthCheck?>(nil)

    /// Every plugin's health check, on a thread of its own, for `timeout` at most: a check
    /// that has not answered by then is 503, naming the plugin it waits for.
    private func health() async -> HTTPAnswer {
        let check = healthCheck.withLock { current -> HealthCheck in
            if let current { return current }
            let asking = Locked<String?>(nil)
            let members = pipeline.members
            let answer = Task { [healthCheck] in
                await withCheckedContinuation { continuation in
                    detachThread(named: "paging-health") {
                        var sick: [String] = []
                        for plugin in members {
                            asking.withLock { $0 = plugin.id }
                            if case .unhealthy(let status) = plugin.health() { sick.append("\(plugin.id): \(status)") }
                        }
                        healthCheck.withLock { $0 = nil }
                        continuation.resume(returning: Self.healthAnswer(sick))
                    }
                }
            }
            let check = HealthCheck(asking: asking, answer: answer)
            current = check
            return check
        }
        do {
            return try await within(healthDeadlines) { await check.answer.value }
        } catch {
            let plugin = check.asking.withLock { $0 } ?? "the health check"
            return Self.healthAnswer(["\(plugin): no answer within \(healthTimeout.wholeMilliseconds) ms"])
        }
    }

    private static func healthAnswer(_ sick: [String]) -> HTTPAnswer {
        guard sick.isEmpty else {
            let list = sick.map { JSONValue.string($0).jsonText }.joined(separator: ", ")
            return HTTPAnswer(status: 503, body: Array("{\"status\": \"unhealthy\", \"plugins\": [\(list)]}\n".utf8))
        }
        return HTTPAnswer(status: 200, body: Array("{\"status\": \"ok\"}\n".utf8))
    }
}

struct ServeBadRequest: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

struct ServeTimeout: Error {}

/// `body`'s result, or ``ServeTimeout`` when it takes longer than the timeout of `deadlines`, or a
/// `CancellationError` at once when cancelled (its client went away). Either way `body` is
/// cancelled and left to end when it can: a plugin may hold its thread for good, and the
/// request's slot must not wait for it. While it runs on, it is counted in `abandoned`.
func within<T: Sendable>(
    _ deadlines: Deadlines<ObjectIdentifier>, countingAbandonedIn abandoned: Locked<Int>? = nil, _ body: @escaping @Sendable () async throws -> T
) async throws -> T {
    let work = Task { try await body() }
    let outcome = FirstOutcome<T>()
    let left = Locked((ended: false, counted: false))
    // Its id lives while it is watched: the expiry holds it, and so do the unwatching task and handler.
    let timer = ObjectIdentifier(outcome)
    deadlines.watch(timer) {
        outcome.finish(.failure(ServeTimeout()))
        work.cancel()
    }
    Task {
        outcome.finish(await work.result)
        deadlines.unwatch(timer)
        let counted = left.withLock { left in
            left.ended = true
            return left.counted
        }
        if counted { abandoned?.withLock { $0 -= 1 } }
    }
    do {
        return try await withTaskCancellationHandler {
            try await outcome.value()
        } onCancel: {
            outcome.finish(.failure(CancellationError()))
            work.cancel()
            deadlines.unwatch(timer)
        }
    } catch {
        let runsOn = left.withLock { left in
            left.counted = !left.ended
            return left.counted
        }
        if runsOn { abandoned?.withLock { $0 += 1 } }
        throw error
    }
}

/// The first of several results, for one waiter that may come before or after it.
private final class FirstOutcome<T: Sendable>: Sendable {
    private enum State {
        case waiting(CheckedContinuation<T, any Error>?)
        /// The first result, until the waiter takes it (then nil).
        case finished(Result<T, any Error>?)
    }

    private let state = Locked(State.waiting(nil))

    func value() async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let early = state.withLock { state -> Result<T, any Error>? in
                guard case .finished(let result) = state else {
                    state = .waiting(continuation)
                    return nil
                }
                state = .finished(nil)
                return result
            }
            if let early { continuation.resume(with: early) }
        }
    }

    /// Ignored after the first.
    func finish(_ result: Result<T, any Error>) {
        let waiter = state.withLock { state -> CheckedContinuation<T, any Error>? in
            guard case .waiting(let waiter) = state else { return nil }
            state = .finished(waiter == nil ? result : nil)
            return waiter
        }
        waiter?.resume(with: result)
    }
}

/// Requests by route and status, and their latency, in Prometheus' text format with the
/// pipeline's plugin figures.
final class ServeMetrics: Sendable {
    private struct Route {
        var byStatus: [Int: Int] = [:]
        var buckets = [Int](repeating: 0, count: PluginStats.histogramBounds.count)
        var seconds = 0.0
        var count = 0
    }

    private let routes = Locked<[String: Route]>([:])

    func record(route: String, status: Int, duration: Duration) {
        routes.withLock { routes in
            var entry = routes[route] ?? Route()
            entry.byStatus[status, default: 0] += 1
            for (index, bound) in PluginStats.histogramBounds.enumerated() where duration <= bound { entry.buckets[index] += 1 }
            entry.seconds += duration.seconds
            entry.count += 1
            routes[route] = entry
        }
    }

    /// The metrics, with the plugins' figures and how many requests wait for a load another runs.
    func render(_ plugins: [Pipeline.PluginFigures], joined: Int) -> String {
        var out = ""
        let routes = routes.withLock { $0 }.sorted { $0.key < $1.key }
        out += "# HELP pager_http_requests_total Requests answered, by route and status.\n# TYPE pager_http_requests_total counter\n"
        for (route, entry) in routes {
            for (status, count) in entry.byStatus.sorted(by: { $0.key < $1.key }) {
                out += "pager_http_requests_total{route=\(label(route)),code=\"\(status)\"} \(count)\n"
            }
        }
        out += "# HELP pager_http_request_duration_seconds Time to answer a request, by route.\n"
        out += "# TYPE pager_http_request_duration_seconds histogram\n"
        for (route, entry) in routes {
            histogram("pager_http_request_duration_seconds", "route=\(label(route))", entry.buckets, count: entry.count, sum: entry.seconds, into: &out)
        }
        out += "# HELP pager_joined_requests Requests waiting for the load of their page that another request runs.\n"
        out += "# TYPE pager_joined_requests gauge\npager_joined_requests \(joined)\n"
        out += "# HELP pager_plugin_calls_total Calls into each plugin (a source's are upstream fetches).\n# TYPE pager_plugin_calls_total counter\n"
        for plugin in plugins { out += "pager_plugin_calls_total{\(labels(plugin))} \(plugin.stats.calls)\n" }
        out += "# HELP pager_plugin_completions_total Calls that ended with a page.\n# TYPE pager_plugin_completions_total counter\n"
        for plugin in plugins { out += "pager_plugin_completions_total{\(labels(plugin))} \(plugin.stats.completions)\n" }
        out += "# HELP pager_plugin_failures_total Failed calls, by status.\n# TYPE pager_plugin_failures_total counter\n"
        for plugin in plugins {
            for (status, count) in plugin.stats.failures.sorted(by: { $0.key < $1.key }) {
                out += "pager_plugin_failures_total{\(labels(plugin)),status=\(label(status))} \(count)\n"
            }
        }
        out += "# HELP pager_plugin_call_duration_seconds Time of each call into a plugin.\n"
        out += "# TYPE pager_plugin_call_duration_seconds histogram\n"
        for plugin in plugins {
            histogram("pager_plugin_call_duration_seconds", labels(plugin), plugin.stats.histogram, count: plugin.stats.calls, sum: plugin.stats.seconds, into: &out)
        }
        out += "# HELP pager_plugin_counter What a plugin counted (a store's hits and misses, for one).\n# TYPE pager_plugin_counter counter\n"
        for plugin in plugins {
            for (name, value) in plugin.stats.counters.sorted(by: { $0.key < $1.key }) {
                out += "pager_plugin_counter{\(labels(plugin)),name=\(label(name))} \(value)\n"
            }
        }
        out += "# HELP pager_plugin_gauge What a plugin measured.\n# TYPE pager_plugin_gauge gauge\n"
        for plugin in plugins {
            for (name, value) in plugin.stats.gauges.sorted(by: { $0.key < $1.key }) {
                out += "pager_plugin_gauge{\(labels(plugin)),name=\(label(name))} \(value)\n"
            }
        }
        return out
    }

    private func histogram(_ name: String, _ labels: String, _ cumulative: [Int], count: Int, sum: Double, into out: inout String) {
        for (bound, value) in zip(PluginStats.histogramBounds, cumulative) {
            out += "\(name)_bucket{\(labels),le=\"\(bound.seconds)\"} \(value)\n"
        }
        out += "\(name)_bucket{\(labels),le=\"+Inf\"} \(count)\n"
        out += "\(name)_sum{\(labels)} \(sum)\n"
        out += "\(name)_count{\(labels)} \(count)\n"
    }

    private func labels(_ plugin: Pipeline.PluginFigures) -> String {
        // `at`: a plugin named twice in the manifest is two series, not one twice.
        "plugin=\(label(plugin.id)),kind=\(label(plugin.kind.rawValue)),at=\(label(plugin.at))"
    }

    /// A label value, quoted and escaped as the text format asks.
    private func label(_ value: String) -> String {
        var out = "\""
        for character in value.unicodeScalars {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.unicodeScalars.append(character)
            }
        }
        return out + "\""
    }
}
