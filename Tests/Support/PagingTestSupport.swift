// What the test targets share: where the repository and the built plugins are, scratch
// folders, running programs without blocking Swift's thread pool, compiling C plugins with cc,
// and recording plugin logs.
import Foundation
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

/// A new scratch folder.
public func scratchFolder() -> String {
    let path = NSTemporaryDirectory() + "paging-tests-\(getpid())-\(UUID().uuidString.prefix(8))"
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// What a program did: its exit code (or 128 + the signal that ended it), stdout and stderr.
public struct ProgramResult: Sendable {
    public let code: Int32
    public let stdout: String
    public let stderr: String
}

/// Runs a program to its end on a thread of its own, so that waiting for it does not hold one
/// of the few threads that run tasks (on 2 cores, two blocked tests would stall every timer).
public func run(
    _ program: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil
) async throws -> ProgramResult {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result { try runBlocking(program, arguments, environment: environment, input: input) })
        }
    }
}

/// Runs a program to its end, blocking the calling thread.
public func runBlocking(
    _ program: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil
) throws -> ProgramResult {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let out = Pipe(), err = Pipe(), inputPipe = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input == nil ? FileHandle.nullDevice : inputPipe
    try process.run()
    if let input {
        inputPipe.fileHandleForWriting.write(Data(input.utf8))
        try? inputPipe.fileHandleForWriting.close()
    }
    // Read stderr on another thread, so that neither pipe can fill up and stall the child.
    let errorData = Mutex(Data())
    let errorRead = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        let data = err.fileHandleForReading.readDataToEndOfFile()
        errorData.withLock { $0 = data }
        errorRead.signal()
    }
    let outputData = out.fileHandleForReading.readDataToEndOfFile()
    errorRead.wait()
    process.waitUntilExit()
    let code = process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    return ProgramResult(code: code, stdout: String(decoding: outputData, as: UTF8.self),
                         stderr: String(decoding: errorData.withLock { $0 }, as: UTF8.self))
}

/// Compiles a plain C plugin with `cc` against the ABI headers alone (once per process and
/// name) and returns the library's path.
public func compileCPlugin(_ source: String, name: String? = nil) throws -> String {
    let name = name ?? URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
    return try compiledPlugins.withLock { compiled in
        if let path = compiled[name] { return path }
        let output = "\(compiledFolder)/lib\(name).so"
        let result = try runBlocking("/usr/bin/env", [
            "cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1", "-shared", "-fPIC", "-pthread",
            "-Wl,-z,nodelete", "-I", "\(repositoryRoot)/Sources/CPaging/include", source, "-o", output,
        ])
        guard result.code == 0 else { throw CompileError(message: result.stderr) }
        compiled[name] = output
        return output
    }
}

/// A fixture plugin of Tests/Fixtures/plugins, compiled.
public func fixturePlugin(_ name: String) throws -> String {
    try compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/\(name).c")
}

public struct CompileError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { "cc failed: \(message)" }
}

private let compiledFolder = scratchFolder()
private let compiledPlugins = Mutex<[String: String]>([:])

/// Collects plugin log lines.
public final class LogRecorder: Sendable {
    private let lines = Mutex<[(PluginLogLevel, String, String)]>([])

    public init() {}

    public var sink: PluginLogSink {
        { [self] level, plugin, message in lines.withLock { $0.append((level, plugin, message)) } }
    }

    public var messages: [String] { lines.withLock { $0.map(\.2) } }

    public func contains(_ text: String) -> Bool { messages.contains { $0.contains(text) } }

    public func count(containing text: String) -> Int { messages.filter { $0.contains(text) }.count }

    /// Waits until a line contains `text` (10 s at most).
    public func waitFor(_ text: String) async -> Bool {
        for _ in 0..<1_000 {
            if contains(text) { return true }
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
