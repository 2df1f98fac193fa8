import FoundationEssentials
import PagingHost

/// `--stats` of `pager run`: per plugin, calls, completions, failures by class, latency p50/p99,
/// and what the plugin published; as text for people or JSON for machines.
enum StatsReport {
    enum Format: Equatable {
        case text, json
    }

    /// Consumes `--stats` / `--stats=json` / `--stats=text`; `nil` when `argument` is neither.
    static func parse(_ argument: String) throws -> Format? {
        switch argument {
        case "--stats", "--stats=text": return .text
        case "--stats=json": return .json
        case _ where argument.hasPrefix("--stats="):
            throw UsageError("--stats: unknown format '\(shown(argument.dropFirst("--stats=".count)))' (expected text or json)")
        default: return nil
        }
    }

    static let help = """
      --stats[=FORMAT]  at the end, on stderr: per plugin (named by its id and where the
                        manifest names it), calls, completions (a source's pages; the loads
                        an interceptor answered itself), failures by class, latency p50/p99,
                        and the counters and gauges it published; FORMAT is text (the
                        default) or json
    """

    static func render(_ figures: [Pipeline.PluginFigures], as format: Format) -> String {
        switch format {
        case .text: text(figures)
        case .json: json(figures)
        }
    }

    /// One line a plugin and one a published figure; the names plugins chose are escaped (``OneLine``).
    private static func text(_ figures: [Pipeline.PluginFigures]) -> String {
        func name(_ text: String) -> String { OneLine.escape(text, limit: Output.nameLimit) }
        var lines = ["stats:"]
        for plugin in figures {
            let stats = plugin.stats
            let failures = stats.failures.isEmpty ? "0" : stats.failures.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            let latency = stats.p50.map { "p50 \(microseconds($0)) µs, p99 \(microseconds(stats.p99 ?? $0)) µs" } ?? "no calls"
            // A source's calls complete with a page; an interceptor's let the load through or
            // answer it (COMPLETE), which is what it counts.
            let completions = plugin.kind == .source ? "\(stats.completions) completed" : "answered \(stats.completions) itself"
            lines.append("  \(name(plugin.id)) (\(plugin.kind.rawValue) at \(plugin.at), \(plugin.library)): \(Output.counted(stats.calls, "call")), "
                         + "\(completions), failed: \(failures); \(latency)")
            for (key, value) in stats.counters.sorted(by: { $0.key < $1.key }) { lines.append("    counter \(name(key)) = \(value)") }
            for (key, value) in stats.gauges.sorted(by: { $0.key < $1.key }) { lines.append("    gauge \(name(key)) = \(value)") }
        }
        return lines.joined(separator: "\n")
    }

    private struct Entry: Encodable {
        let id, kind, at, library: String
        let calls, completions: Int
        let failures: [String: Int]
        let p50Microseconds, p99Microseconds: Double?
        let counters: [String: Int64]
        let gauges: [String: Double]

        enum CodingKeys: String, CodingKey {
            case id, kind, at, library, calls, completions, failures, counters, gauges
            case p50Microseconds = "p50_us", p99Microseconds = "p99_us"
        }
    }

    private static func json(_ figures: [Pipeline.PluginFigures]) -> String {
        let entries = figures.map { plugin in
            Entry(id: plugin.id, kind: plugin.kind.rawValue, at: plugin.at, library: plugin.library, calls: plugin.stats.calls,
                  completions: plugin.stats.completions, failures: plugin.stats.failures,
                  p50Microseconds: plugin.stats.p50.map(microseconds), p99Microseconds: plugin.stats.p99.map(microseconds),
                  counters: plugin.stats.counters, gauges: plugin.stats.gauges)
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let data = (try? encoder.encode(["plugins": entries])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }

    private static func microseconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return ((Double(seconds) * 1e6 + Double(attoseconds) / 1e12) * 10).rounded() / 10
    }
}
