// Timing, statistics, the result table, and the environment (machine, plugin folder, C fixtures).
import Foundation
import PagingHost

// MARK: - Time

/// Nanoseconds on the monotonic clock.
@inline(__always)
func nowNs() -> UInt64 {
    var ts = timespec()
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
}

func medianOf(_ values: [Double]) -> Double { median(values) }

func median(_ values: [Double]) -> Double {
    precondition(!values.isEmpty, "median of nothing")
    let sorted = values.sorted()
    let mid = sorted.count / 2
    return sorted.count % 2 == 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

/// Progress lines go to stderr, the table to stdout.
func progress(_ message: String) {
    FileHandle.standardError.write(Data(("  · " + message + "\n").utf8))
}

// MARK: - Formatting

func fmt(_ value: Double, _ decimals: Int = 0) -> String { String(format: "%.\(decimals)f", value) }

/// A duration in ns, shown in the unit that reads best.
func formatNs(_ ns: Double) -> String {
    if ns >= 1_000_000 { return fmt(ns / 1_000_000, 2) + " ms" }
    if ns >= 10_000 { return fmt(ns / 1_000, 1) + " µs" }
    if ns >= 1_000 { return fmt(ns / 1_000, 2) + " µs" }
    return fmt(ns) + " ns"
}

func formatRate(_ perSecond: Double) -> String {
    perSecond >= 10_000 ? fmt(perSecond / 1_000, 1) + "k/s" : fmt(perSecond) + "/s"
}

func formatKiB(_ kib: Int) -> String {
    kib >= 10_240 ? fmt(Double(kib) / 1024, 1) + " MiB" : "\(kib) KiB"
}

// MARK: - The table

enum Verdict: String {
    case pass = "pass"
    case miss = "**MISS**"
    case info = "—"
    case notMeasured = "not measured"
}

struct Row {
    var id: String
    var what: String
    var figure: String
    var target: String
    var verdict: Verdict
    var notes: String
}

final class Report: @unchecked Sendable {
    private(set) var rows: [Row] = []
    /// One line per missed target: what limits it.
    private(set) var misses: [String] = []

    func add(_ id: String, _ what: String, _ figure: String, target: String = "", _ verdict: Verdict = .info, _ notes: String = "") {
        rows.append(Row(id: id, what: what, figure: figure, target: target, verdict: verdict, notes: notes))
    }

    func add(_ id: String, _ what: String, _ figure: String, notes: String) {
        add(id, what, figure, target: "", .info, notes)
    }

    func miss(_ line: String) { misses.append(line) }

    /// Groups rows by their row number (sub-rows and continuation rows stay with their row).
    func sortRows(by order: [String]) {
        var groups: [(String, [Row])] = []
        for row in rows {
            let number = String(row.id.prefix { $0.isNumber })
            if !number.isEmpty, groups.last?.0 != number { groups.append((number, [row])) } else if groups.isEmpty { groups.append(("", [row])) } else { groups[groups.count - 1].1.append(row) }
        }
        rows = groups.sorted { (order.firstIndex(of: $0.0) ?? 99) < (order.firstIndex(of: $1.0) ?? 99) }.flatMap(\.1)
    }

    var markdown: String {
        var lines = ["| # | What | Figure (median) | Target | Result | Ratios and notes (same run) |",
                     "|---|------|-----------------|--------|--------|-----------------------------|"]
        for row in rows {
            let cells = [row.id, row.what, row.figure, row.target, row.verdict.rawValue, row.notes]
                .map { $0.replacingOccurrences(of: "|", with: "\\|") }
            lines.append("| " + cells.joined(separator: " | ") + " |")
        }
        return lines.joined(separator: "\n")
    }
}

func verdict(_ ok: Bool) -> Verdict { ok ? .pass : .miss }

// MARK: - Environment

/// The repository root, from this file's place in it (or PAGING_REPO).
let repositoryRoot: String = ProcessInfo.processInfo.environment["PAGING_REPO"]
    ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent().path

/// Where `swift build` put the plugin libraries: this executable's folder (or PAGING_PLUGIN_DIR).
let productsFolder: String = ProcessInfo.processInfo.environment["PAGING_PLUGIN_DIR"] ?? PluginSearchPath.executableFolder()!

func shippedPlugin(_ name: String) -> String? {
    let path = "\(productsFolder)/lib\(name).so"
    return FileManager.default.fileExists(atPath: path) ? path : nil
}

/// The bench's scratch folder, removed at exit by `cleanUp()`.
let scratch: String = {
    let path = NSTemporaryDirectory() + "paging-bench-\(getpid())"
    try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}()

func cleanUp() { try? FileManager.default.removeItem(atPath: scratch) }

struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Runs a program; returns its exit code and stdout (stderr passes through).
@discardableResult
func runProcess(_ program: String, _ arguments: [String]) throws -> (code: Int32, stdout: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: program)
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    try process.run()
    let data = out.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}

/// Compiles Tests/Fixtures/plugins/pass_through.c the third-party way (cc, headers only).
func compilePassThroughC() throws -> String {
    let output = "\(scratch)/libpass_through.so"
    if FileManager.default.fileExists(atPath: output) { return output }
    let result = try runProcess("/usr/bin/env", ["cc", "-O2", "-shared", "-fPIC",
                                                 "-I", "\(repositoryRoot)/Sources/CPaging/include",
                                                 "\(repositoryRoot)/Tests/Fixtures/plugins/pass_through.c", "-o", output])
    guard result.code == 0 else { throw BenchError("cc failed on pass_through.c (exit \(result.code))") }
    return output
}

/// A log sink that drops everything (plugins log at debug when created).
let silentSink: PluginLogSink = { _, _, _ in }

// MARK: - Machine

func readLines(_ path: String) -> [String] {
    guard let file = fopen(path, "r") else { return [] }
    defer { fclose(file) }
    var lines: [String] = []
    var buffer = [CChar](repeating: 0, count: 4096)
    while fgets(&buffer, Int32(buffer.count), file) != nil {
        lines.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return lines
}

/// A field of /proc/self/status in KiB (VmHWM, VmRSS), read with stdio: Foundation truncates /proc files.
func procStatusKiB(_ field: String) -> Int {
    for line in readLines("/proc/self/status") where line.hasPrefix(field + ":") {
        let digits = line.dropFirst(field.count + 1).filter(\.isNumber)
        return Int(digits) ?? -1
    }
    return -1
}

func machineDescription() -> [String] {
    let model = readLines("/proc/cpuinfo").first { $0.hasPrefix("model name") }
        .map { $0.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) } ?? "?" } ?? "?"
    let swift = (try? runProcess("/usr/bin/env", ["swift", "--version"]).stdout)?
        .split(separator: "\n").first.map(String.init) ?? "?"
    let os = readLines("/etc/os-release").first { $0.hasPrefix("PRETTY_NAME=") }
        .map { $0.dropFirst(12).trimmingCharacters(in: CharacterSet(charactersIn: "\"\n")) } ?? "Linux"
    let memory = readLines("/proc/meminfo").first { $0.hasPrefix("MemTotal:") }
        .map { Int($0.filter(\.isNumber)) ?? 0 } ?? 0
    return ["- CPU: \(model), nproc \(ProcessInfo.processInfo.activeProcessorCount)",
            "- Memory: \(fmt(Double(memory) / 1_048_576, 1)) GiB; \(os)",
            "- \(swift)"]
}
