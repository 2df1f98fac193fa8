// The benchmark's driver: runs the rows in order and prints the machine and the table.
import Foundation

/// Runs off the main actor, so that the measured `await`s do not hop executors.
func runBench() async -> Int32 {
    let arguments = CommandLine.arguments
    if arguments.count >= 3, arguments[1] == "--child" {
        switch arguments[2] {
        case "rss" where arguments.count == 5:
            await rssChild(maxSize: Int(arguments[3]) ?? 0, totalItems: Int(arguments[4]) ?? 1_000_000)
        case "load" where arguments.count == 4:
            loadChild(arguments[3])
        case "profile" where arguments.count == 4:
            // For perf / callgrind: one Pager variant of row 1 in a loop of N requests.
            do { try await profileVariant(arguments[3]) } catch { print("error: \(error)"); return 1 }
        default:
            print("unknown child \(arguments.dropFirst().joined(separator: " "))")
            return 2
        }
        return 0
    }
    let only = Set(arguments.dropFirst().flatMap { $0.split(separator: ",").map(String.init) })
    let report = Report()
    let start = nowNs()
    FileHandle.standardError.write(Data("paging-bench: plugins from \(productsFolder)\n".utf8))
    let rows: [(String, (Report) async throws -> Void)] = [
        ("5", benchPluginLoad), // first, before this process has opened the shipped plugins
        ("1", benchPagerRequests),
        ("2", benchCacheHits),
        ("3", benchLogging),
        ("4", benchManagerAppends),
        ("6", benchSQLiteStore),
        ("7", benchHTTP),
        ("8", benchPeakRSS),
        ("9", benchJSONCheck),
        ("10", benchFilter),
        ("11", benchRateLimitThreads),
        ("12", benchIsolation),
        ("13", benchHTTPFloor),
        ("14", benchFleet),
    ]
    for (id, row) in rows where only.isEmpty || only.contains(id) {
        do {
            try await row(report)
        } catch {
            report.add(id, "row \(id)", "—", .notMeasured, "failed: \(error)")
            report.miss("\(id): failed: \(error)")
        }
    }
    let order = ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14"]
    report.sortRows(by: order)
    let elapsed = Double(nowNs() - start) / 1e9
    var out = "## paging-bench\n\nMachine:\n" + machineDescription().joined(separator: "\n") + "\n\n"
    out += report.markdown + "\n\n"
    out += "Each figure is the median of at least 5 runs; ratios compare figures of this run. Bench time \(fmt(elapsed)) s.\n"
    if !report.misses.isEmpty {
        out += "\nMissed targets:\n" + report.misses.map { "- " + $0 }.joined(separator: "\n") + "\n"
    }
    print(out)
    cleanUp()
    return report.misses.isEmpty ? 0 : 1
}
