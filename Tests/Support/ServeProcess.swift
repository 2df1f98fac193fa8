import Foundation
import Paging

/// A `pager` process for tests: what it says on stdout and stderr is collected as it comes;
/// ended by ``stop(_:)`` or, at the latest, when the object goes.
public final class PagerProcess: @unchecked Sendable {
    private let process = Process()
    private let output = Locked(Data())
    private let errors = Locked(Data())
    private let ended = DispatchSemaphore(value: 0)
    /// Signalled by each of the two readers at the end of its pipe.
    private let drained = DispatchSemaphore(value: 0)
    private let readersLeft = Locked(2)

    /// Starts `pager` with `arguments` (the command first).
    public init(_ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: pagerCommand)
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.terminationHandler = { [ended] _ in ended.signal() }
        let (out, err) = try spawning {
            let out = ExecSafePipe(), err = ExecSafePipe()
            process.standardOutput = out.write
            process.standardError = err.write
            process.standardInput = FileHandle.nullDevice
            try process.run()
            return (out, err)
        }
        for (pipe, collected) in [(out, output), (err, errors)] {
            try? pipe.write.close()
            Thread.detachNewThread { [drained] in
                while true {
                    let data = pipe.read.availableData
                    if data.isEmpty { break }
                    collected.withLock { $0.append(data) }
                }
                drained.signal()
            }
        }
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
    }

    /// What the process wrote on stdout so far.
    public var stdout: String { String(decoding: output.withLock { $0 }, as: UTF8.self) }

    /// What the process said on stderr so far.
    public var stderr: String { String(decoding: errors.withLock { $0 }, as: UTF8.self) }

    public var pid: Int32 { process.processIdentifier }

    public var isRunning: Bool { process.isRunning }

    /// Returns once `found` holds for stderr, or false when the process ended (and all it wrote
    /// was read) or after `deadline`. Polls without holding a thread: the tests' tasks share a
    /// pool of as many threads as the machine has cores, and a test blocking two of them for
    /// a minute stalled every other test.
    public func waitFor(deadline: Duration = .seconds(60), _ found: (String) -> Bool) async -> Bool {
        let until = ContinuousClock.now + deadline
        while !found(stderr) {
            guard ContinuousClock.now < until else { return false }
            if !process.isRunning {
                try? await onAThreadOfItsOwn { [self] in readToTheEnd() }
                return found(stderr)
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return true
    }

    /// Waits, once the process ended, until both pipes were read to their end (10 s at most
    /// each: a child of the process may hold them open): what it wrote last is then collected.
    private func readToTheEnd() {
        while readersLeft.withLock({ $0 }) > 0 {
            guard drained.wait(timeout: .now() + .seconds(10)) == .success else { return }
            readersLeft.withLock { $0 -= 1 }
        }
    }

    /// Returns once stderr holds `text`, or false when the process ended or after `deadline`.
    public func waitFor(_ text: String, deadline: Duration = .seconds(60)) async -> Bool {
        await waitFor(deadline: deadline) { $0.contains(text) }
    }

    /// Sends `signal` and waits, on a thread of its own, for the process to end; its exit status.
    @discardableResult
    public func stop(_ signal: Int32 = SIGTERM) async -> Int32 {
        if process.isRunning { kill(process.processIdentifier, signal) }
        try? await onAThreadOfItsOwn { [self] in
            ended.wait()
            ended.signal()
            readToTheEnd()
        }
        return process.terminationStatus
    }

    /// Waits for the process to end by itself, `deadline` at most (then kills it), polling as
    /// ``waitFor(deadline:_:)`` does; its exit status, or nil when it had to be killed.
    public func ended(within deadline: Duration = .seconds(60)) async -> Int32? {
        let until = ContinuousClock.now + deadline
        while process.isRunning {
            guard ContinuousClock.now < until else {
                await stop(SIGKILL)
                return nil
            }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return await stop()
    }
}

/// A `pager serve` process for tests: started with `--port 0`, its port read from the line it
/// says on stderr; ended by ``stop(_:)`` or, at the latest, when the object goes.
public final class ServeProcess: @unchecked Sendable {
    public private(set) var port: UInt16 = 0
    private let process: PagerProcess

    /// Starts `pager serve` with `arguments` (the manifest first); throws when it ends or says
    /// nothing of its port within `deadline`, with what it said.
    public init(_ arguments: [String], environment: [String: String] = [:], deadline: Duration = .seconds(60)) async throws {
        process = try PagerProcess(["serve"] + arguments + ["--port", "0"], environment: environment)
        var found: UInt16?
        _ = await process.waitFor(deadline: deadline) { stderr in
            found = stderr.firstMatch(of: /listening on http:\/\/[^ ]+:(\d+)/).flatMap { UInt16($0.1) }
            return found != nil
        }
        guard let found else { throw ServeStartError(description: "pager serve did not start: \(process.stderr)") }
        port = found
    }

    /// What the process said on stderr so far.
    public var stderr: String { process.stderr }

    public var pid: Int32 { process.pid }

    /// Returns once stderr holds `text`, or false after `deadline`.
    public func waitFor(_ text: String, deadline: Duration = .seconds(60)) async -> Bool {
        await process.waitFor(text, deadline: deadline)
    }

    /// Returns once `found` holds for stderr, or false after `deadline`.
    public func waitFor(deadline: Duration = .seconds(60), _ found: (String) -> Bool) async -> Bool {
        await process.waitFor(deadline: deadline, found)
    }

    /// Sends `signal` and waits for the process to end; its exit status.
    @discardableResult
    public func stop(_ signal: Int32 = SIGTERM) async -> Int32 { await process.stop(signal) }

    /// GET `target` (a path and query) from this server.
    public func get(_ target: String) throws -> HTTPReply { try httpGet(port: port, target) }
}

public struct ServeStartError: Error, CustomStringConvertible {
    public let description: String
}

/// An HTTP answer, as a test client read it.
public struct HTTPReply: Sendable {
    public var status: Int
    public var headers: [String: String]
    public var body: [UInt8]
    public var text: String { String(decoding: body, as: UTF8.self) }

    /// The body as JSON (objects as `[String: Any]`).
    public func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else {
            throw ServeStartError(description: "not a JSON object: \(text)")
        }
        return object
    }
}

/// A one-request HTTP/1.1 client over a plain socket (`Connection: close`), for tests of servers
/// on loopback; `request` replaces the whole request when given (a malformed one, say).
public func httpGet(port: UInt16, _ target: String, request: String? = nil, timeout: Duration = .seconds(60),
                    from source: String = "127.0.0.1") throws -> HTTPReply {
    let fd = try connectLoopback(port: port, from: source)
    defer { close(fd) }
    var seconds = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &seconds, socklen_t(MemoryLayout<timeval>.size))
    let text = request ?? "GET \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    _ = text.withCString { send(fd, $0, strlen($0), Int32(MSG_NOSIGNAL)) }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = recv(fd, &buffer, buffer.count, 0)
        if count < 0 && errno == EINTR { continue }
        guard count > 0 else { break }
        received += buffer[..<count]
    }
    guard let end = received.firstRange(of: Array("\r\n\r\n".utf8)) else {
        throw ServeStartError(description: "no HTTP answer: \(String(decoding: received, as: UTF8.self))")
    }
    let head = String(decoding: received[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
    let status = head.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
    var headers: [String: String] = [:]
    for line in head.dropFirst() {
        guard let colon = line.firstIndex(of: ":") else { continue }
        headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    }
    return HTTPReply(status: status, headers: headers, body: Array(received[end.upperBound...]))
}

/// A TCP connection to 127.0.0.1:`port`.
public func connectLoopback(port: UInt16, from source: String = "127.0.0.1") throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    // Another loopback address (127.0.0.2) is another client to the server.
    var local = sockaddr_in()
    local.sin_family = sa_family_t(AF_INET)
    local.sin_addr.s_addr = inet_addr(source)
    _ = withUnsafePointer(to: &local) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        let reason = String(cString: strerror(errno))
        close(fd)
        throw ServeStartError(description: "cannot connect to port \(port): \(reason)")
    }
    return fd
}
