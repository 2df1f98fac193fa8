// Real servers for the tests: Redis and PostgreSQL on free loopback ports, each in a scratch
// folder of its own, stopped by `stop()` (and when the value goes away). A server that cannot
// start throws a ServerStartError saying why, with the end of its log: a test failure, never a skip.
import Foundation
import Synchronization

/// A server that did not start, with what it said.
public struct ServerStartError: Error, CustomStringConvertible {
    public let server: String
    public let reason: String
    public var description: String { "\(server) could not start: \(reason)" }
}

/// A port on 127.0.0.1 that nothing listened on a moment ago (the kernel's pick for port 0),
/// and that this process has not handed out before: a server stopped to be restarted on its
/// port found it taken by another test's server, given the port it had just freed.
public func freeLoopbackPort() -> Int {
    for _ in 0..<1_000 {
        let port = kernelsFreePort()
        if handedOutPorts.withLock({ $0.insert(port).inserted }) { return port }
    }
    preconditionFailure("no loopback port left that was not handed out before")
}

private let handedOutPorts = Mutex(Set<Int>())

private func kernelsFreePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Bool in
            bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
        }
    }
    precondition(bound, "cannot bind a loopback socket: errno \(errno)")
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Waits until `ready()` holds (looking every 10 ms), `failed()` says why it never will, or
/// `seconds` pass. Returns nil when ready, else the reason.
func waitForServer(seconds: Double, ready: () -> Bool, failed: () -> String?) async -> String? {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if ready() { return nil }
        if let reason = failed() { return reason }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return ready() ? nil : "not ready after \(seconds) s"
}

/// The last lines of a log file, for an error message.
func tail(_ path: String, lines: Int = 15) -> String {
    let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? "(no log at \(path))"
    return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
}

// MARK: - Redis

/// A `redis-server` of the test's own on 127.0.0.1 (no persistence), in a scratch folder.
///
///     let redis = try await RedisServer.start()
///     defer { redis.stop() }
///     ... "address": redis.address ...
public final class RedisServer: Sendable {
    public let port: Int
    public let folder: String
    private let process = Mutex<Process?>(nil)

    /// "127.0.0.1:PORT", as redis-cache's `address`.
    public var address: String { "127.0.0.1:\(port)" }

    private init(port: Int, folder: String) {
        self.port = port
        self.folder = folder
    }

    /// Starts a server on a free port; throws ``ServerStartError`` when it does not answer PING.
    public static func start() async throws -> RedisServer {
        var lastError: ServerStartError?
        for _ in 0..<5 { // a port taken between the pick and the bind: pick again
            let server = RedisServer(port: freeLoopbackPort(), folder: scratchFolder())
            do {
                try await server.launch()
                return server
            } catch let error as ServerStartError {
                lastError = error
                server.stop()
                if !error.reason.contains("Address already in use") { break }
            }
        }
        throw lastError!
    }

    /// Starts the server again on the same port (after ``stop()`` or ``kill()``).
    public func restart() async throws {
        try await launch()
    }

    private func launch() async throws {
        guard let program = findProgram("redis-server") else {
            throw ServerStartError(server: "redis-server", reason: "not installed (run scripts/install-deps.sh)")
        }
        let log = folder + "/redis.log"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = ["--port", "\(port)", "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                             "--dir", folder, "--daemonize", "no", "--logfile", log]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try spawning { try process.run() }
        self.process.withLock { $0 = process }
        let port = self.port
        // Ready when the server answering on the port is this one: a port freed by a stopped
        // server may have gone to another test's server before this one restarts on it.
        let pid = process.processIdentifier
        if let reason = await waitForServer(seconds: 20, ready: { redisServerPID(port: port) == pid },
                                             failed: { process.isRunning ? nil : "exited with status \(process.terminationStatus)" }) {
            throw ServerStartError(server: "redis-server on port \(port)", reason: "\(reason); its log:\n\(tail(log))")
        }
    }

    /// Stops the server (SIGKILL: nothing is persisted) and waits for it. Safe to call twice.
    public func stop() {
        let process = self.process.withLock { process in
            defer { process = nil }
            return process
        }
        guard let process, process.isRunning else { return }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// Stops the server (SIGSTOP): it answers nothing, while its kernel still accepts connections.
    public func pause() {
        if let pid = process.withLock({ $0?.processIdentifier }) { kill(pid, SIGSTOP) }
    }

    /// Lets a paused server go on (SIGCONT).
    public func resume() {
        if let pid = process.withLock({ $0?.processIdentifier }) { kill(pid, SIGCONT) }
    }

    /// Runs `redis-cli` against the server and returns its output (raw: `--no-raw` off).
    public func cli(_ arguments: [String], input: String? = nil) async throws -> String {
        let result = try await run(findProgram("redis-cli") ?? "/usr/bin/redis-cli",
                                   ["-h", "127.0.0.1", "-p", "\(port)"] + arguments, input: input, deadline: .seconds(30))
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: folder)
    }
}

extension RedisServer {
    /// Sends one command (binary-safe arguments) and returns the first bytes of the raw RESP
    /// reply ("+OK\r\n", ":1\r\n", "$-1\r\n"...), or "" when the server did not answer.
    @discardableResult
    public func command(_ arguments: [[UInt8]]) -> String {
        var request = Array("*\(arguments.count)\r\n".utf8)
        for argument in arguments { request += Array("$\(argument.count)\r\n".utf8) + argument + Array("\r\n".utf8) }
        return redisExchange(port: port, request) ?? ""
    }

    /// ``command(_:)`` with text arguments.
    @discardableResult
    public func command(_ arguments: String...) -> String { command(arguments.map { Array($0.utf8) }) }
}

/// Whether a Redis server on the port answers PING with PONG.
/// The process id of the Redis server answering on `port`, if one answers.
func redisServerPID(port: Int) -> Int32? {
    guard let info = redisExchange(port: port, Array("INFO server\r\n".utf8)),
          let line = info.split(whereSeparator: \.isNewline).first(where: { $0.hasPrefix("process_id:") }) else { return nil }
    return Int32(line.dropFirst("process_id:".count).trimmingCharacters(in: .whitespaces))
}

/// Sends `request` to the Redis server on `port` and returns what one read brings back.
func redisExchange(port: Int, _ request: [UInt8]) -> String? {
    guard let fd = try? connectLoopback(port: UInt16(port)) else { return nil }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 1, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    guard write(fd, request, request.count) == request.count else { return nil }
    var buffer = [UInt8](repeating: 0, count: 65536)
    let count = read(fd, &buffer, buffer.count)
    return count > 0 ? String(decoding: buffer.prefix(count), as: UTF8.self) : nil
}

/// A program on the PATH (or in /usr/sbin, /usr/bin), or nil.
func findProgram(_ name: String) -> String? {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
    for folder in path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/sbin", "/usr/local/bin"] {
        let candidate = "\(folder)/\(name)"
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
    }
    return nil
}

// MARK: - PostgreSQL

/// A PostgreSQL server of the test's own on 127.0.0.1 (trust authentication, user `test`), in
/// a scratch folder. PostgreSQL refuses to run as root: as root, its programs run as the
/// `postgres` user (runuser); as anyone else, as that user.
///
///     let postgres = try await PostgresServer.start()
///     defer { postgres.stop() }
///     ... "conninfo": postgres.conninfo ...
public final class PostgresServer: Sendable {
    public let port: Int
    public let folder: String
    private let process = Mutex<Process?>(nil)

    /// A libpq connection string for the server's `postgres` database as `test`.
    public var conninfo: String { conninfo(database: "postgres") }

    /// A libpq connection string for `database` as `test`.
    public func conninfo(database: String) -> String { "host=127.0.0.1 port=\(port) user=test dbname=\(database)" }

    private var data: String { folder + "/data" }
    private var log: String { folder + "/postgres.log" }

    private init(port: Int, folder: String) {
        self.port = port
        self.folder = folder
    }

    /// Starts a server on a free port; throws ``ServerStartError`` when it does not start.
    public static func start() async throws -> PostgresServer {
        let template = try await PostgresTemplate.shared.folder()
        var lastError: ServerStartError?
        for _ in 0..<5 {
            let server = PostgresServer(port: freeLoopbackPort(), folder: scratchFolder())
            do {
                try await server.copy(template)
                try await server.launch()
                return server
            } catch let error as ServerStartError {
                lastError = error
                server.stop()
                if !error.reason.contains("already in use") { break }
            }
        }
        throw lastError!
    }

    private func copy(_ template: String) async throws {
        let copied = try await run("/bin/cp", ["-a", template, data])
        guard copied.code == 0 else { throw ServerStartError(server: "postgres", reason: "cannot copy the cluster: \(copied.stderr)") }
        try await PostgresTemplate.giveToServerUser(folder)
    }

    /// Starts the server again on the same port (after ``stop()`` or ``kill()``).
    public func restart() async throws {
        try await launch()
    }

    private func launch() async throws {
        guard let bin = PostgresTemplate.binFolder else {
            throw ServerStartError(server: "postgres", reason: "no /usr/lib/postgresql/*/bin/initdb (run scripts/install-deps.sh)")
        }
        // The postmaster runs as a child of ours (not daemonized by pg_ctl, whose daemon would keep
        // the pipes of a reader waiting), its output into the log file.
        FileManager.default.createFile(atPath: log, contents: nil)
        let output = try FileHandle(forWritingTo: URL(fileURLWithPath: log))
        defer { try? output.close() }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: PostgresTemplate.asServerUser.program)
        process.arguments = PostgresTemplate.asServerUser.prefix + ["\(bin)/postgres", "-D", data, "-p", "\(port)", "-k", folder,
                                                                   "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = output
        try spawning { try process.run() }
        self.process.withLock { $0 = process }
        let port = self.port
        // Ready when this server says so in its postmaster.pid (line 8, "ready"): a port freed by a
        // stopped server may have gone to another test's server, which pg_isready would find.
        let pidFile = data + "/postmaster.pid"
        if let reason = await waitForServer(seconds: 60, ready: {
            let lines = ((try? String(contentsOfFile: pidFile, encoding: .utf8)) ?? "").split(separator: "\n", omittingEmptySubsequences: false)
            return lines.count >= 8 && lines[3].trimmingCharacters(in: .whitespaces) == "\(port)" && lines[7].trimmingCharacters(in: .whitespaces) == "ready"
        }, failed: { process.isRunning ? nil : "exited with status \(process.terminationStatus)" }) {
            throw ServerStartError(server: "postgres on port \(port)", reason: "\(reason); its log:\n\(tail(log))")
        }
    }

    /// Stops the server at once (SIGQUIT to the postmaster: an immediate shutdown) and waits for
    /// it. Safe to call twice.
    /// The server's processes: the postmaster (its postmaster.pid) and its children, the backends.
    private func serverProcesses() throws -> [pid_t] {
        let text = try String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8)
        guard let postmaster = pid_t(text.split(separator: "\n").first ?? "") else { throw ServerStartError(server: "PostgreSQL", reason: "no postmaster pid in \(data)/postmaster.pid") }
        var pids = [postmaster]
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { continue }
            // pid (comm) state ppid ...
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            if fields.count > 1, pid_t(fields[1]) == postmaster { pids.append(pid) }
        }
        return pids
    }

    /// Stops every process of the server (SIGSTOP): it then answers nothing, connections stay open.
    public func pause() throws {
        for pid in try serverProcesses() { kill(pid, SIGSTOP) }
    }

    /// Lets a paused server go on (SIGCONT), and the wrapper that started it as the server's
    /// user (runuser stops itself when its child stops).
    public func resume() throws {
        for pid in try serverProcesses() { kill(pid, SIGCONT) }
        if let wrapper = process.withLock({ $0?.processIdentifier }) { kill(wrapper, SIGCONT) }
    }

    public func stop() {
        let process = self.process.withLock { process in
            defer { process = nil }
            return process
        }
        guard let process, process.isRunning else { return }
        if let text = try? String(contentsOfFile: data + "/postmaster.pid", encoding: .utf8),
           let pid = Int32(text.split(separator: "\n").first ?? "") {
            kill(pid, SIGQUIT)
        } else {
            kill(process.processIdentifier, SIGTERM)
        }
        process.waitUntilExit()
    }

    /// Runs SQL with psql (unaligned, tuples only) and returns its output; throws when psql fails.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") async throws -> String {
        let bin = PostgresTemplate.binFolder ?? "/usr/bin"
        let result = try await run("\(bin)/psql", [conninfo(database: database), "-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-c", sql], deadline: .seconds(60))
        guard result.code == 0 else { throw ServerStartError(server: "psql", reason: "\(sql): \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: folder)
    }
}

/// The template's folder, removed when the test process exits.
private let templateToRemove = Mutex<String?>(nil)

/// One `initdb` a test process: each server starts from a copy of its cluster (0.1 s, not 1 s).
final class PostgresTemplate: Sendable {
    static let shared = PostgresTemplate()
    private let made = Mutex<Task<String, Error>?>(nil)

    /// The newest /usr/lib/postgresql/N/bin holding initdb.
    static let binFolder: String? = {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.reversed().map { "\(root)/\($0)/bin" }.first { FileManager.default.isExecutableFile(atPath: "\($0)/initdb") }
    }()

    /// How to run a program as the server's user: through runuser as root, directly otherwise.
    static let asServerUser: (program: String, prefix: [String]) =
        getuid() == 0 ? ("/usr/sbin/runuser", ["-u", "postgres", "--"]) : ("/usr/bin/env", [])

    static func runAsServerUser(_ tool: String, _ arguments: [String]) async throws -> ProgramResult {
        guard let bin = binFolder else {
            throw ServerStartError(server: "postgres", reason: "no /usr/lib/postgresql/*/bin/initdb (run scripts/install-deps.sh)")
        }
        return try await run(asServerUser.program, asServerUser.prefix + ["\(bin)/\(tool)"] + arguments, deadline: .seconds(120))
    }

    /// Hands `folder` to the server's user (as root; otherwise it is the caller's already).
    static func giveToServerUser(_ folder: String) async throws {
        guard getuid() == 0 else { return }
        let result = try await run("/bin/chown", ["-R", "postgres:", folder])
        guard result.code == 0 else {
            throw ServerStartError(server: "postgres", reason: "chown postgres \(folder): \(result.stderr) (is there a postgres user? run scripts/install-deps.sh)")
        }
    }

    /// The template cluster's folder, made on first use.
    func folder() async throws -> String {
        let task = made.withLock { task in
            if let task { return task }
            let new = Task { try await Self.initdb() }
            task = new
            return new
        }
        return try await task.value
    }

    private static func initdb() async throws -> String {
        let folder = scratchFolder()
        try await giveToServerUser(folder)
        let result = try await runAsServerUser("initdb", ["-D", folder + "/data", "-A", "trust", "-U", "test", "-E", "UTF8",
                                                           "--locale=C.UTF-8", "--no-sync"])
        guard result.code == 0 else {
            throw ServerStartError(server: "postgres", reason: "initdb failed: \(result.stderr)")
        }
        templateToRemove.withLock { $0 = folder }
        atexit { if let folder = templateToRemove.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: folder) } }
        return folder + "/data"
    }
}
