// What the test targets share: where the repository and the built plugins are, scratch
// folders, running programs without blocking Swift's thread pool, compiling C plugins with cc,
// and recording plugin logs.
import CTestEnvironment
import Foundation
import Paging
import PagingHost
import Synchronization

/// The repository's root, from this file's place in it.
public let repositoryRoot = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The built products folder, where `swift build` put the shipped plugins and `pager`
/// (overridable with PAGING_PLUGIN_DIR).
public let productsFolder: String = ProcessInfo.processInfo.environment["PAGING_PLUGIN_DIR"]
    ?? PluginSearchPath.executableFolder()!

/// A shipped plugin's library, built by SwiftPM.
public func shippedPlugin(_ name: String) -> String { "\(productsFolder)/lib\(name).so" }

/// The built `pager` command.
public var pagerCommand: String { productsFolder + "/pager" }

/// A new scratch folder, removed with everything in it when the test process exits.
public func scratchFolder() -> String {
    let path = NSTemporaryDirectory() + "paging-tests-\(getpid())-\(UUID().uuidString.prefix(8))"
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    scratchFolders.withLock { folders in
        if folders.isEmpty { atexit { removeScratchFolders() } }
        folders.append(path)
    }
    return path
}

/// The scratch folders this process made.
private let scratchFolders = Locked<[String]>([])

private func removeScratchFolders() {
    for path in scratchFolders.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: path) }
}

/// What a program did.
public struct ProgramResult: Sendable {
    /// The exit code, or the signal that ended the process (see `signaled`).
    public let code: Int32
    public let signaled: Bool
    /// The deadline passed and the process was killed.
    public let timedOut: Bool
    public let elapsed: Duration
    public let stdout: String
    public let stderr: String
}

/// Runs a program to its end on a thread of its own, so that waiting for it does not hold one
/// of the few threads that run tasks (on 2 cores, two blocked tests would stall every timer).
public func run(
    _ program: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil,
    deadline: Duration = .seconds(300), killAfter: Duration? = nil
) async throws -> ProgramResult {
    try await onAThreadOfItsOwn {
        try runBlocking(program, arguments, environment: environment, input: input, deadline: deadline, killAfter: killAfter)
    }
}

/// Runs `body` (blocking, or busy for long: a fuzzer's loop) on a thread of its own rather
/// than on one of the few threads that run tasks, where it would hold back the other tests'
/// tasks and make their timeouts fire late.
public func onAThreadOfItsOwn<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try body() }) }
    }
}

/// A pipe whose two ends are closed on exec, so that a child another test spawns at the same
/// moment cannot inherit them. (Foundation's `Pipe` can be inherited that way; a reader then
/// waits for the end of the data until that unrelated child exits, which may be never.) Make
/// it, and start the process that gets one end, inside ``spawning(_:)``; then close that end
/// in the parent.
public struct ExecSafePipe: @unchecked Sendable {
    public let read: FileHandle
    public let write: FileHandle

    public init() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe failed: errno \(errno)")
        for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        read = FileHandle(fileDescriptor: fds[0], closeOnDealloc: true)
        write = FileHandle(fileDescriptor: fds[1], closeOnDealloc: true)
    }
}

private let spawnLock = Locked(())

/// Runs `body` (making pipes, starting a process) while no other test starts one: a pipe is
/// inheritable between its creation and its close-on-exec mark.
public func spawning<R>(_ body: () throws -> R) rethrows -> R {
    try spawnLock.withLock { _ in try body() }
}

/// Starts `process` with a pipe to its standard input and one from its standard output (its
/// standard error goes to `standardError`; nil leaves the tests' own). The child's ends are
/// closed here: the parent reads the end of the output once the child exits.
public func runWithPipes(_ process: Process, standardError: FileHandle? = nil) throws -> (input: ExecSafePipe, output: ExecSafePipe) {
    let (input, output) = try spawning {
        let input = ExecSafePipe(), output = ExecSafePipe()
        process.standardInput = input.read
        process.standardOutput = output.write
        if let standardError { process.standardError = standardError }
        try process.run()
        return (input, output)
    }
    try? input.read.close()
    try? output.write.close()
    return (input, output)
}

/// Runs a program, blocking the calling thread. Past `deadline` the process is killed
/// (SIGKILL) and the result says so; `killAfter` kills it on purpose after that delay.
public func runBlocking(
    _ program: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil,
    deadline: Duration = .seconds(300), killAfter: Duration? = nil
) throws -> ProgramResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let ended = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in ended.signal() }
    let clock = ContinuousClock()
    let start = clock.now
    let (out, err, inputPipe) = try spawning {
        let out = ExecSafePipe(), err = ExecSafePipe(), inputPipe = ExecSafePipe()
        process.standardOutput = out.write
        process.standardError = err.write
        process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe.read
        try process.run()
        return (out, err, inputPipe)
    }
    // The child has its copies; without closing ours, the readers would never see the end.
    try? out.write.close()
    try? err.write.close()
    try? inputPipe.read.close()
    if let input {
        // A child may exit without reading its input: that must not kill the tests with SIGPIPE.
        ignoreBrokenPipes
        try? inputPipe.write.write(contentsOf: Data(input.utf8))
    }
    try? inputPipe.write.close()
    // Read both pipes on threads of their own, so that neither can fill up and stall the child.
    let collected = Locked([Data(), Data()])
    let reads = DispatchGroup()
    for (index, pipe) in [out, err].enumerated() {
        reads.enter()
        Thread.detachNewThread {
            let data = pipe.read.readDataToEndOfFile()
            collected.withLock { $0[index] = data }
            reads.leave()
        }
    }
    var timedOut = false
    if ended.wait(timeout: .now() + .nanoseconds(Int(nanoseconds(killAfter ?? deadline)))) == .timedOut {
        timedOut = killAfter == nil
        kill(process.processIdentifier, SIGKILL)
        ended.wait()
    }
    reads.wait()
    let data = collected.withLock { $0 }
    return ProgramResult(code: process.terminationStatus, signaled: process.terminationReason == .uncaughtSignal,
                         timedOut: timedOut, elapsed: clock.now - start,
                         stdout: String(decoding: data[0], as: UTF8.self), stderr: String(decoding: data[1], as: UTF8.self))
}

/// Writing to a pipe whose reader has gone then fails with EPIPE instead of ending the process.
private let ignoreBrokenPipes: Void = { signal(SIGPIPE, SIG_IGN) }()

private func nanoseconds(_ duration: Duration) -> Int64 {
    duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
}

/// Compiles a plain C plugin with `cc` against the ABI headers alone (once per process and
/// name) and returns the library's path. `headers` is the folder holding `paging/`: the
/// repository's, or a frozen copy of an earlier version's. The compiler runs on a thread of its
/// own and callers wait without holding one of the few threads that run tasks (a test waiting
/// for a fixture's compiler stalled every other test's timers on 2 cores).
public func compileCPlugin(
    _ source: String, name: String? = nil, extraFlags: [String] = [],
    headers: String = "\(repositoryRoot)/Sources/CPaging/include"
) async throws -> String {
    let name = name ?? URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
    let compilation = compiledPlugins.withLock { compiled in
        if let compilation = compiled[name] { return compilation }
        let output = "\(compiledFolder)/lib\(name).so"
        let compilation = Task {
            await compileSlots.acquire()
            let result: ProgramResult
            do {
                result = try await run("/usr/bin/env", [
                    "cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", "-shared", "-fPIC", "-pthread",
                    "-Wl,-z,nodelete", "-I", headers,
                ] + extraFlags + [source, "-o", output])
            } catch {
                await compileSlots.release()
                throw error
            }
            await compileSlots.release()
            guard result.code == 0, !result.signaled else { throw CompileError(message: result.stderr) }
            return output
        }
        compiled[name] = compilation
        return compilation
    }
    return try await compilation.value
}

/// A fixture plugin of Tests/Fixtures/plugins, compiled.
public func fixturePlugin(_ name: String) async throws -> String {
    try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/\(name).c")
}

public struct CompileError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { "cc failed: \(message)" }
}

private let compiledFolder = scratchFolder()
/// Two compilations at a time, one a core: the forty fixtures asked for at the start of a run,
/// compiled at once, loaded the machine past 25 and starved the tests' own waits.
private let compileSlots = Slots(2)

/// At most `count` holders at a time; the others wait, holding no thread, in turn.
private actor Slots {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(_ count: Int) { free = count }

    func acquire() async {
        guard free == 0 else {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    func release() {
        if waiting.isEmpty { free += 1 } else { waiting.removeFirst().resume() }
    }
}
/// Each fixture's compilation, by name: compiled once, fixtures of different names at the same
/// time.
private let compiledPlugins = Locked<[String: Task<String, any Error>]>([:])

/// Collects plugin log lines (the first `limit`; beyond, it only counts them).
public final class LogRecorder: Sendable {
    private let lines = Locked<(kept: [(PluginLogLevel, String, String, ContinuousClock.Instant)], total: Int)>(([], 0))
    public let limit: Int

    public init(limit: Int = 100_000) {
        self.limit = limit
    }

    public var sink: PluginLogSink {
        { [self] level, plugin, message in
            lines.withLock { lines in
                lines.total += 1
                if lines.kept.count < limit { lines.kept.append((level, plugin, message, .now)) }
            }
        }
    }

    public var messages: [String] { lines.withLock { $0.kept.map(\.2) } }

    /// The lines kept, with their level and the plugin that logged them.
    public var entries: [(level: PluginLogLevel, plugin: String, message: String)] {
        lines.withLock { $0.kept.map { (level: $0.0, plugin: $0.1, message: $0.2) } }
    }

    /// Every line logged, kept or not.
    public var total: Int { lines.withLock { $0.total } }

    public func contains(_ text: String) -> Bool { messages.contains { $0.contains(text) } }

    public func count(containing text: String) -> Int { messages.filter { $0.contains(text) }.count }

    /// When each line containing `text` was logged, in order.
    public func times(containing text: String) -> [ContinuousClock.Instant] {
        lines.withLock { $0.kept.filter { $0.2.contains(text) }.map(\.3) }
    }

    /// Waits until a line contains `text` (`deadline` at most, or until the task is cancelled).
    public func waitFor(_ text: String, deadline: Duration = .seconds(60)) async -> Bool {
        // A deadline, not a count of sleeps: 1,000 sleeps of 10 ms (10 s) ran out while the
        // suite started, with every test running at once on 2 cores.
        let until = ContinuousClock.now + deadline
        while !contains(text), ContinuousClock.now < until, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return contains(text)
    }
}

/// Writes a JSON Lines file of `count` objects {"n": i}.
public func writeJSONLines(count: Int, to path: String) {
    let text = (0..<count).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n"
    try! Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

/// A whole number from the environment, or `fallback`.
public func environmentCount(_ name: String, default fallback: Int) -> Int {
    ProcessInfo.processInfo.environment[name].flatMap { Int($0) } ?? fallback
}

/// SplitMix64: a small seeded generator, so that a failing run can be replayed from its seed.
public struct SeededGenerator: RandomNumberGenerator {
    public var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The process's peak resident set (VmHWM), in bytes.
/// The names of this process's threads (/proc/self/task/*/comm).
public func threadNames() -> [String] {
    let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
    return tasks.compactMap { try? String(contentsOfFile: "/proc/self/task/\($0)/comm", encoding: .utf8) }
        .map { $0.trimmingCharacters(in: .whitespacesAndNewlines) }
}

public func peakResidentBytes() -> Int { statusKilobytes("VmHWM:") * 1024 }

/// The process's resident set now (VmRSS), in bytes.
public func residentBytes() -> Int { statusKilobytes("VmRSS:") * 1024 }

/// A "kB" line of /proc/self/status, read with stdio (Foundation's file reading truncates /proc).
private func statusKilobytes(_ field: String) -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 512)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if text.hasPrefix(field) {
            // "VmHWM:\t   51720 kB": a tab, then spaces.
            return Int(text.dropFirst(field.count).split(whereSeparator: \.isWhitespace).first ?? "") ?? 0
        }
    }
    return 0
}

/// Sets environment variable `name`, one declared at start by CTestEnvironment: setting a
/// variable that is not yet there can move the environment under a thread that is spawning a
/// process (other tests run meanwhile), which crashed the test process.
public func setTestEnvironment(_ name: String, _ value: String) {
    precondition(paging_test_environment_declares(name) != 0 && getenv(name) != nil,
                 "\(name) is not declared in Tests/CTestEnvironment/test_environment.c (or was not set at start)")
    setenv(name, value, 1)
}
