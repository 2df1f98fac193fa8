import Foundation
import Paging
import PagingHost
import Synchronization
import Testing

/// The repository's root, from this file's place in it.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// The built products folder, where `swift build` put the shipped plugins.
let productsFolder: String = ProcessInfo.processInfo.environment["PAGING_PLUGIN_DIR"] ?? PluginSearchPath.executableFolder()!

/// A shipped plugin's library, built by SwiftPM.
func shippedPlugin(_ name: String) -> String { "\(productsFolder)/lib\(name).so" }

/// A scratch folder for one test, removed when the process ends.
func scratchFolder() -> String {
    let path = NSTemporaryDirectory() + "paging-tests-\(getpid())-\(UUID().uuidString.prefix(8))"
    try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Runs a program and returns its exit code, stdout and stderr.
@discardableResult
func run(_ program: String, _ arguments: [String], environment: [String: String] = [:], input: String? = nil)
    throws -> (code: Int32, stdout: String, stderr: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    if let input {
        let inputPipe = Pipe()
        process.standardInput = inputPipe
        inputPipe.fileHandleForWriting.write(Data(input.utf8))
        try? inputPipe.fileHandleForWriting.close()
    }
    try process.run()
    // Read stderr on a thread of its own (not a task: this function blocks), so that neither
    // pipe can fill up and stall the child.
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
    return (process.terminationStatus, String(decoding: outputData, as: UTF8.self),
            String(decoding: errorData.withLock { $0 }, as: UTF8.self))
}

/// Compiles a plain C plugin with `cc` against the ABI headers alone, once per process.
func compileCPlugin(_ source: String, name: String? = nil) throws -> String {
    let name = name ?? URL(fileURLWithPath: source).deletingPathExtension().lastPathComponent
    return try compiledPlugins.withLock { compiled in
        if let path = compiled[name] { return path }
        let output = "\(compiledFolder)/lib\(name).so"
        let result = try run("/usr/bin/env", ["cc", "-std=c99", "-Wall", "-Wextra", "-pedantic", "-Werror", "-O1",
                                              "-shared", "-fPIC", "-pthread", "-Wl,-z,nodelete",
                                              "-I", "\(repositoryRoot)/Sources/CPaging/include", source, "-o", output])
        guard result.code == 0 else { throw CompileError(message: result.stderr) }
        compiled[name] = output
        return output
    }
}

/// A fixture plugin of Tests/Fixtures/plugins, compiled.
func fixturePlugin(_ name: String) throws -> String {
    try compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/\(name).c")
}

struct CompileError: Error, CustomStringConvertible {
    let message: String
    var description: String { "cc failed: \(message)" }
}

private let compiledFolder = scratchFolder()
private let compiledPlugins = Mutex<[String: String]>([:])

/// Collects plugin log lines.
final class LogRecorder: Sendable {
    private let lines = Mutex<[(PluginLogLevel, String, String)]>([])

    var sink: PluginLogSink {
        { [self] level, plugin, message in lines.withLock { $0.append((level, plugin, message)) } }
    }

    var messages: [String] { lines.withLock { $0.map(\.2) } }

    func contains(_ text: String) -> Bool { messages.contains { $0.contains(text) } }

    /// Waits until a line contains `text` (about 5 s at most).
    func waitFor(_ text: String) async -> Bool {
        for _ in 0..<500 {
            if contains(text) { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return contains(text)
    }
}

/// Writes a JSON Lines file of `count` objects {"n": i}.
func writeJSONLines(count: Int, to path: String) {
    let text = (0..<count).map { #"{"n":\#($0)}"# }.joined(separator: "\n") + "\n"
    try! Data(text.utf8).write(to: URL(fileURLWithPath: path))
}

func params(pageSize: Int, retry: RetryPolicy = .none, userInfo: [String: String] = [:]) -> PagingRequestParams {
    PagingRequestParams(pageSize: pageSize, retryPolicy: retry, userInfo: userInfo)
}

extension Array where Element == PluginItem {
    var texts: [String] { map(\.text) }
}
