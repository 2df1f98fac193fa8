// A tiny HTTP/1.1 server on 127.0.0.1 for tests and offline demos.
//
// One thread accepts; each connection gets its own thread (at most `maxConnections`).
// Keep-alive, Content-Length bodies and `Expect: 100-continue` are supported;
// chunked request bodies are not (501).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import Paging
import Synchronization

/// Errors from creating the listening socket.
public struct LoopbackHTTPError: Error, CustomStringConvertible, Sendable {
    public var operation: String
    public var errno: Int32
    public var description: String { "\(operation) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}

public final class LoopbackHTTPServer: Sendable {
    /// Maximum number of simultaneous connections; further ones get `503` and are closed.
    public static let maxConnections = 64

    private let state: ServerState

    /// The bound port (the real one when created with port 0).
    public var port: UInt16 { state.port }
    /// `http://127.0.0.1:PORT`
    public var baseURL: String { "http://127.0.0.1:\(state.port)" }
    /// Requests handed to the handler so far (malformed requests are not counted).
    public var requestCount: Int { state.requestCount.load(ordering: .relaxed) }
    /// Connections accepted so far (including refused ones).
    public var connectionCount: Int { state.connectionCount.load(ordering: .relaxed) }
    /// Connections currently open.
    public var activeConnections: Int { state.inner.withLock { $0.connections.count } }

    /// Binds 127.0.0.1:`port` (0 = ephemeral). Call `start()` to serve.
    /// - Parameter idleTimeout: seconds an idle keep-alive connection is kept open.
    public init(port: UInt16 = 0, idleTimeout: Int = 30, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws {
        state = try ServerState(port: port, idleTimeout: idleTimeout, handler: handler)
    }

    /// Starts the accept loop on a background thread. Calling it again does nothing.
    public func start() {
        state.start()
    }

    /// Closes the listener and every connection, then waits for all server threads to finish.
    /// Do not call from inside a handler (it would wait for itself).
    public func stop() {
        state.stop()
    }

    deinit {
        state.stop()
    }
}

private struct Inner {
    var started = false
    var stopping = false
    var listenerClosed = false
    var connections: Set<Int32> = []
}

private final class ServerState: Sendable {
    let listenFD: Int32
    let port: UInt16
    let idleTimeout: Int
    let handler: @Sendable (HTTPRequest) -> HTTPResponse
    let inner = Locked(Inner())
    let requestCount = Atomic<Int>(0)
    let connectionCount = Atomic<Int>(0)
    let threads = DispatchGroup()

    init(port requestedPort: UInt16, idleTimeout: Int, handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse) throws {
        self.idleTimeout = max(1, idleTimeout)
        self.handler = handler
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw LoopbackHTTPError(operation: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))

        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = requestedPort.bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian // 127.0.0.1
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0 else {
            let error = LoopbackHTTPError(operation: "bind 127.0.0.1:\(requestedPort)", errno: errno)
            close(fd)
            throw error
        }
        guard listen(fd, 128) == 0 else {
            let error = LoopbackHTTPError(operation: "listen", errno: errno)
            close(fd)
            throw error
        }
        var actual = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard named == 0 else {
            let error = LoopbackHTTPError(operation: "getsockname", errno: errno)
            close(fd)
            throw error
        }
        listenFD = fd
        port = UInt16(bigEndian: actual.sin_port)
    }

    func start() {
        let go = inner.withLock { inner -> Bool in
            guard !inner.started, !inner.stopping else { return false }
            inner.started = true
            return true
        }
        guard go else { return }
        threads.enter()
        let thread = Thread { [self] in
            acceptLoop()
            threads.leave()
        }
        thread.name = "LoopbackHTTP accept :\(port)"
        thread.start()
    }

    func stop() {
        let connections = inner.withLock { inner -> Set<Int32>? in
            guard !inner.stopping else { return nil }
            inner.stopping = true
            return inner.connections
        }
        guard let connections else {
            // Someone else is stopping (or stopped): still wait for the threads.
            threads.wait()
            return
        }
        // Wakes a blocked accept() on Linux (it returns EINVAL).
        shutdown(listenFD, Int32(SHUT_RDWR))
        // Connection fds are only closed by their own thread after deregistering under the lock,
        // so shutting them down here (under the lock) never touches a reused descriptor.
        inner.withLock { inner in
            for fd in inner.connections { shutdown(fd, Int32(SHUT_RDWR)) }
        }
        _ = connections
        threads.wait()
        inner.withLock { inner in
            if !inner.listenerClosed {
                inner.listenerClosed = true
                close(listenFD)
            }
        }
    }

    private var isStopping: Bool { inner.withLock { $0.stopping } }

    private func acceptLoop() {
        while true {
            let fd = accept(listenFD, nil, nil)
            if fd < 0 {
                let error = errno
                if isStopping { return }
                switch error {
                case EINTR, ECONNABORTED, EAGAIN, EPROTO:
                    continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    usleep(10_000)
                    continue
                default:
                    return
                }
            }
            connectionCount.add(1, ordering: .relaxed)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var timeout = timeval(tv_sec: idleTimeout, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var sendTimeout = timeval(tv_sec: 30, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &sendTimeout, socklen_t(MemoryLayout<timeval>.size))

            enum Admission { case accepted, full, stopping }
            let admission = inner.withLock { inner -> Admission in
                if inner.stopping { return .stopping }
                if inner.connections.count >= LoopbackHTTPServer.maxConnections { return .full }
                inner.connections.insert(fd)
                return .accepted
            }
            switch admission {
            case .stopping:
                close(fd)
                return
            case .full:
                let response = HTTPResponse.text("Too many connections\n", status: 503)
                _ = Self.sendAll(fd, HTTPParser.serialize(response, keepAlive: false, http10: false, headOnly: false))
                shutdown(fd, Int32(SHUT_WR))
                close(fd)
                continue
            case .accepted:
                break
            }
            threads.enter()
            let thread = Thread { [self] in
                serveConnection(fd)
                inner.withLock { inner in
                    inner.connections.remove(fd)
                    close(fd)
                }
                threads.leave()
            }
            thread.name = "LoopbackHTTP conn \(fd)"
            thread.start()
        }
    }

    /// Serves requests on one connection until it closes, errors, or asks to close.
    private func serveConnection(_ fd: Int32) {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(4096)
        var scanFrom = 0
        let maxHead = 64 * 1024
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)

        func fill() -> Bool {
            let n = chunk.withUnsafeMutableBytes { raw -> Int in
                while true {
                    let r = recv(fd, raw.baseAddress, raw.count, 0)
                    if r < 0 && errno == EINTR { continue }
                    return r
                }
            }
            guard n > 0 else { return false }
            buffer.append(contentsOf: chunk[0..<n])
            return true
        }

        func fail(_ error: HTTPParseError) {
            let response = HTTPResponse.text(error.message + "\n", status: error.status)
            _ = Self.sendAll(fd, HTTPParser.serialize(response, keepAlive: false, http10: false, headOnly: false))
            shutdown(fd, Int32(SHUT_WR))
        }

        while true {
            // 1. Read the head.
            var headEnd = HTTPParser.headEnd(in: buffer, from: scanFrom)
            while headEnd == nil {
                if buffer.count > maxHead {
                    fail(.badRequest("request head too large"))
                    return
                }
                scanFrom = max(0, buffer.count - 3)
                guard fill() else { return }
                headEnd = HTTPParser.headEnd(in: buffer, from: scanFrom)
            }
            guard let headEnd else { return }
            if headEnd > maxHead + 4 {
                fail(.badRequest("request head too large"))
                return
            }

            // 2. Parse it.
            let parsed: ParsedHead
            do {
                parsed = try HTTPParser.parseHead(buffer[0..<(headEnd - 4)])
            } catch {
                fail(error)
                return
            }

            // 3. Read the body.
            let total = headEnd + parsed.contentLength
            if parsed.expectsContinue, parsed.contentLength > 0, buffer.count < total {
                guard Self.sendAll(fd, Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)) else { return }
            }
            while buffer.count < total {
                guard fill() else { return }
            }
            var request = parsed.request
            request.body = Array(buffer[headEnd..<total])
            buffer.removeFirst(total)
            scanFrom = 0

            // 4. Handle.
            if isStopping { return }
            requestCount.add(1, ordering: .relaxed)
            let response = handler(request)
            if response.dropsConnection {
                // Reset rather than FIN so clients see a network error, not an empty reply.
                var lingerOption = linger(l_onoff: 1, l_linger: 0)
                setsockopt(fd, SOL_SOCKET, SO_LINGER, &lingerOption, socklen_t(MemoryLayout<linger>.size))
                return
            }
            let keepAlive = parsed.keepAlive && !isStopping
            let bytes = HTTPParser.serialize(
                response, keepAlive: keepAlive, http10: request.version == "HTTP/1.0",
                headOnly: request.method == "HEAD")
            guard Self.sendAll(fd, bytes) else { return }
            if !keepAlive {
                shutdown(fd, Int32(SHUT_WR))
                return
            }
        }
    }

    /// Writes all bytes; false on error. Uses MSG_NOSIGNAL so a closed peer never raises SIGPIPE.
    static func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw -> Bool in
            var offset = 0
            while offset < raw.count {
                let n = send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    return false
                }
                offset += n
            }
            return true
        }
    }
}
