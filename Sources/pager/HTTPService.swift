import CHTTPServer
import FoundationEssentials
import Paging
import PagingHost

/// A GET request to `pager serve`, as GNU libmicrohttpd parsed it.
struct HTTPRequest: Sendable {
    var method = "GET"
    var path: String
    /// Query arguments in order, percent-decoded; `nil` for an argument without `=`.
    var query: [(name: String, value: String?)]
}

/// An answer: a status and a JSON or text body.
struct HTTPAnswer: Sendable {
    var status: Int
    var contentType = "application/json"
    var body: [UInt8]
    /// One more header, as `Allow` of a 405.
    var header: (name: String, value: String)?

    /// `{"error": message}` with `status`.
    static func error(_ status: Int, _ message: String) -> HTTPAnswer {
        HTTPAnswer(status: status, body: Array("{\"error\": \(JSONValue.string(message).jsonText)}\n".utf8))
    }
}

/// The HTTP side of `pager serve`: libmicrohttpd listens, parses and limits connections (its own
/// thread), and each GET request is answered by `handler` in a task of its own.
final class HTTPService: @unchecked Sendable {
    struct Limits {
        /// Open connections at most.
        var connections: UInt32 = 1_024
        /// Open connections from one address at most (0: no limit): a client holding half-open
        /// connections took all 1,024, and every other client waited for the header timeout.
        var connectionsPerAddress: UInt32 = 256
        /// A connection silent this long is closed: a client that sends a byte a minute holds
        /// no more than a connection, and not for long.
        var idleTimeoutSeconds: UInt32 = 15
        /// A request's line and headers at most; a larger one is refused with a 4xx.
        var requestBytes = 32 << 10
        /// A request's line and headers must arrive within this, from the connection's start or
        /// its last response: a client that trickles a byte every few seconds, never silent for
        /// the idle timeout, held its connection for ever (1,024 of them, every connection).
        var headerTimeoutMilliseconds: UInt32 = 10_000
        /// The answers queued and not read by their clients yet, in bytes, at most (beyond, a
        /// 503): each holds a copy of its page until it is read (60 clients that never read
        /// held 600 MB).
        var unsentAnswerBytes = 256 << 20
    }

    private var server: OpaquePointer?
    private let handler: @Sendable (HTTPRequest) async -> HTTPAnswer
    private let answered: @Sendable (_ path: String, _ status: Int, _ duration: Duration) -> Void
    private let refused: @Sendable (_ path: String, _ status: Int) -> Void
    /// The task answering each request, by its exchange's id: cancelled when its client goes away.
    private let tasks = Locked<[UInt64: Task<Void, Never>]>([:])
    /// Set by ``cancelRequests()``: a request cancelled from then on is answered 503.
    private let cancelledToStop = Locked(false)

    /// Listens on `address` and `port` (0: any free port). `refused` hears of each request
    /// answered without `handler` (ambiguous framing, a body, a NUL, a query that is not UTF-8),
    /// on the server's thread: it must not block.
    init(address: String, port: UInt16, limits: Limits, handler: @escaping @Sendable (HTTPRequest) async -> HTTPAnswer,
         answered: @escaping @Sendable (_ path: String, _ status: Int, _ duration: Duration) -> Void,
         refused: @escaping @Sendable (_ path: String, _ status: Int) -> Void) throws {
        self.handler = handler
        self.answered = answered
        self.refused = refused
        var error = [CChar](repeating: 0, count: 256)
        let cLimits = paging_http_limits(connections: limits.connections, connections_per_address: limits.connectionsPerAddress,
                                         idle_timeout_seconds: limits.idleTimeoutSeconds,
                                         request_bytes: limits.requestBytes, header_timeout_ms: limits.headerTimeoutMilliseconds,
                                         unsent_answer_bytes: limits.unsentAnswerBytes)
        // The server outlives no request of its own: `stop()` ends it before this object goes.
        let context = Unmanaged.passUnretained(self).toOpaque()
        server = paging_http_start(address, port, cLimits, { context, exchange in
            guard let context, let exchange else { return }
            Unmanaged<HTTPService>.fromOpaque(context).takeUnretainedValue().accept(Exchange(pointer: exchange))
        }, { context, path, status in
            guard let context else { return }
            Unmanaged<HTTPService>.fromOpaque(context).takeUnretainedValue().refused(path.map { String(cString: $0) } ?? "", Int(status))
        }, { context, id in
            // The client went away: its load is cancelled (it loaded for nobody, holding a
            // request slot); the task still answers, to a closed connection.
            guard let context else { return }
            Unmanaged<HTTPService>.fromOpaque(context).takeUnretainedValue().tasks.withLock { $0[id] }?.cancel()
        }, context, &error, error.count)
        guard server != nil else {
            throw UsageError("serve: \(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))")
        }
    }

    /// The port listened on.
    var port: UInt16 { server.map { paging_http_port($0) } ?? 0 }

    /// Stops accepting connections; requests being answered go on, and a request that comes
    /// later on a connection kept alive is answered 503 and its connection closed.
    func stopAccepting() {
        if let server { paging_http_stop_accepting(server) }
    }

    /// Cancels the requests being answered, for a server that stops now: each handler gives up
    /// at once (what it waits for is left to end on its own), and its request is answered 503
    /// "the server is stopping", or its connection closed when its client went away.
    func cancelRequests() {
        cancelledToStop.withLock { $0 = true }
        tasks.withLock { Array($0.values) }.forEach { $0.cancel() }
    }

    /// Requests being answered (every route: a health check in flight is one).
    var inFlight: Int { tasks.withLock { $0.count } }

    /// Returns when no request is being answered (true), or after `limit` (false).
    func drained(within limit: Duration) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while inFlight > 0, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(10)) }
        return inFlight == 0
    }

    /// Ends the server once the answers given are sent, or after `wait`: every request must
    /// have been answered. (An answer is sent by the server's thread after the handler returns:
    /// stopping at once could close a connection before its answer went out.) False when an
    /// answer was still unsent then: the server is left to end with the process.
    func stop(sendingAnswersWithin wait: Duration = .seconds(5)) -> Bool {
        defer { server = nil }
        guard let server else { return true }
        return paging_http_stop(server, UInt32(wait.components.seconds * 1000)) != 0
    }

    /// One request waiting for its answer; answered once.
    private struct Exchange: @unchecked Sendable {
        let pointer: OpaquePointer
    }

    private func accept(_ exchange: Exchange) {
        let pointer = exchange.pointer
        var query: [(name: String, value: String?)] = []
        for index in 0..<paging_http_query_count(pointer) {
            // Not repaired: a byte that is not UTF-8 would become U+FFFD, another value.
            // (`value`: nil for a name without "=", .some(nil) for bytes that are not UTF-8.)
            let name = paging_http_query_key(pointer, index).map { String(validatingCString: $0) } ?? ""
            let value = paging_http_query_value(pointer, index).map { String(validatingCString: $0) }
            guard let name, value != .some(nil) else {
                refused(String(cString: paging_http_path(pointer)), 400)
                _ = Self.respond(exchange, .error(400, "a query name or value is not valid UTF-8"))
                paging_http_send(pointer)
                return
            }
            query.append((name, value ?? nil))
        }
        let request = HTTPRequest(method: String(cString: paging_http_method(pointer)),
                                  path: Self.originForm(String(cString: paging_http_path(pointer))), query: query)
        let id = paging_http_exchange_id(pointer)
        // Registered before the task can end (it removes itself), on the server's thread,
        // before the server watches the request (after this returns).
        tasks.withLock { tasks in
            tasks[id] = Task { [handler, answered, cancelledToStop, weak self] in
                let start = ContinuousClock.now
                var answer = await handler(request)
                // What a handler answers to its cancel is said to a client gone away (a 499), not
                // to one the server stops on.
                if Task.isCancelled, cancelledToStop.withLock({ $0 }) { answer = .error(503, "the server is stopping") }
                let status = Self.respond(exchange, answer)
                // Counted before it goes out: a client that read its answer finds it in /metrics,
                // and a SIGTERM after it read it finds it answered (counted after, it was one of
                // the requests to finish, now and then). Sending it is the server's to wait for.
                answered(request.path, status, .now - start)
                self?.tasks.withLock { _ = $0.removeValue(forKey: id) }
                paging_http_send(exchange.pointer)
            }
        }
    }

    /// The path of a request target in absolute form ("http://host:port/pages", which a server
    /// must take, RFC 9112 3.2.2, as a proxy sends it); other targets as they are.
    static func originForm(_ target: String) -> String {
        guard let scheme = target.firstRange(of: "://"), target[..<scheme.lowerBound].allSatisfy({ $0.isLetter }) else { return target }
        let rest = target[scheme.upperBound...]
        return rest.firstIndex(of: "/").map { String(rest[$0...]) } ?? "/"
    }

    /// Sets `answer` (sent by `paging_http_send`); the status that will be sent (503 when the
    /// answers clients have not read yet leave no room for it).
    private static func respond(_ exchange: Exchange, _ answer: HTTPAnswer) -> Int {
        Int(answer.body.withUnsafeBufferPointer { body in
            paging_http_respond_with_header(exchange.pointer, UInt32(answer.status), answer.contentType,
                                            answer.header?.name, answer.header?.value, body.baseAddress, body.count)
        })
    }
}
