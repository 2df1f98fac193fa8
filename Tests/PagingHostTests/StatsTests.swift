import Foundation
import Paging
import PagingHost
import Testing

@Suite("pager run --stats")
struct StatsTests {
    /// The offsets source fails its first fetch (transient, retried); the listener proceeds and
    /// publishes a counter and a gauge (paging.metrics/1).
    func manifest() async throws -> String {
        let folder = scratchFolder()
        let library = try await fixturePlugin("interceptor_work")
        try """
        {"source": {"plugin": "\(library)", "id": "offsets", "config": {"count": 30, "fail_times": 1, "retry_after_ms": 1}},
         "interceptors": [{"plugin": "\(library)", "id": "listener"}],
         "page_size": 10, "retry": {"max_retries": 2, "initial_backoff_ms": 1}}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return folder + "/m.json"
    }

    struct Report: Decodable {
        struct Plugin: Decodable {
            let id, kind, at: String
            let calls, completions: Int
            let failures: [String: Int]
            let p50_us, p99_us: Double?
            let counters: [String: Int64]
            let gauges: [String: Double]
        }
        let plugins: [Plugin]
    }

    /// With `--isolate-all`, the same figures: isolated plugins' calls are timed by the host,
    /// round trips included, and their counters and gauges come from their child processes.
    @Test(arguments: [[], ["--isolate-all"]])
    func json_countsCallsCompletionsFailuresByClass_andWhatPluginsPublished(options: [String]) async throws {
        let result = try await run(pagerCommand, ["run", try await manifest(), "--refresh", "--append", "1", "--stats=json"] + options)
        #expect(result.code == 0, "\(result.stderr)")
        let line = try #require(result.stderr.split(separator: "\n").last)
        let report = try JSONDecoder().decode(Report.self, from: Data(line.utf8))
        let source = try #require(report.plugins.first)
        #expect(source.id == "offsets" && source.kind == "source")
        // Two pages, the first after one failed attempt.
        #expect(source.calls == 3 && source.completions == 2 && source.failures == ["transient": 1])
        let p50 = try #require(source.p50_us), p99 = try #require(source.p99_us)
        #expect(p50 > 0 && p99 >= p50)
        let listener = try #require(report.plugins.last)
        #expect(listener.id == "listener" && listener.calls == 2 && listener.completions == 0 && listener.failures.isEmpty)
        #expect(listener.counters == ["proceeded": 2] && listener.gauges == ["page_size": 10])
    }

    /// A transform that fails the load is counted with the interceptor's failures, in-process
    /// and isolated (--stats said "failed: 0" for it).
    @Test(arguments: [[], ["--isolate-all"]])
    func aFailedTransform_isCountedWithTheInterceptorsFailures(options: [String]) async throws {
        let folder = scratchFolder()
        let library = try await fixturePlugin("interceptor_work")
        try """
        {"source": {"plugin": "\(library)", "id": "offsets", "config": {"count": 30}},
         "interceptors": [{"plugin": "\(library)", "id": "transformer", "config": {"mode": "fail"}}], "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", folder + "/m.json", "--stats=json"] + options)
        #expect(result.code == 1, "\(result.stderr)")
        let line = try #require(result.stderr.split(separator: "\n").last)
        let transformer = try #require(try JSONDecoder().decode(Report.self, from: Data(line.utf8)).plugins.last)
        #expect(transformer.id == "transformer" && transformer.failures == ["transient": 1], "\(line)")
    }

    @Test func text_namesEveryPlugin_andIsAbsentWithoutTheFlag() async throws {
        let manifest = try await manifest()
        let result = try await run(pagerCommand, ["run", manifest, "--stats"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stderr.contains("stats:\n  offsets (source at $.source, "), "\(result.stderr)")
        #expect(result.stderr.contains("): 2 calls, 1 completed, failed: 1 transient; p50 "), "\(result.stderr)")
        // An interceptor that let every load through answered none itself ("0 completed" read
        // as if its calls had not ended).
        #expect(result.stderr.contains("  listener (interceptor at $.interceptors[0], "), "\(result.stderr)")
        #expect(result.stderr.contains("): 1 call, answered 0 itself, failed: 0; p50 "), "\(result.stderr)")
        #expect(result.stderr.contains("    counter proceeded = 1\n    gauge page_size = 10.0"), "\(result.stderr)")
        let quiet = try await run(pagerCommand, ["run", manifest])
        #expect(!quiet.stderr.contains("stats:"))
        let bad = try await run(pagerCommand, ["run", manifest, "--stats=xml"])
        #expect(bad.code == 2 && bad.stderr.contains("--stats: unknown format 'xml' (expected text or json)"))
    }

    /// And a counter never goes down: a negative delta is refused, and one at INT64_MAX stays
    /// there (they wrapped and went negative, which Prometheus reads as a restart).
    @Test func publishing_tooLongANameOrTooManyNames_isRefused_theFirstOverflowSaidOnce() async throws {
        let log = LogRecorder()
        let listener = try PluginLibrary.open(path: try await fixturePlugin("interceptor_work"))
            .makeInterceptor(id: "listener", config: .object([("mode", .string("spam"))]), sink: log.sink)
        let source = try PluginLibrary.open(path: try await fixturePlugin("interceptor_work")).makeSource(id: "offsets", sink: log.sink)
        let pager = Pager(source: source, interceptors: [listener])
        for key in ["0", "10"] {
            _ = try await pager.load(pager.request(.append, key: PluginKey(key), params: params(pageSize: 10)))
        }
        #expect(listener.stats.counters.count + listener.stats.gauges.count == 64)
        #expect(listener.stats.counters["c0"] == Int64.max && listener.stats.counters["c1"] == 2 && listener.stats.counters["c69"] == nil)
        #expect(log.count(containing: "counter_add: 'c1': a counter only goes up; the delta -1 is refused") == 2, "\(log.messages)")
        #expect(log.count(containing: "counter_add: more than 64 names; 'c62' and later ones are ignored") == 1, "\(log.messages)")
        #expect(log.count(containing: "counter_add: a name of 65 bytes (1 to 64 expected)") == 2)
        #expect(log.count(containing: "gauge_set: 'page_size': the value is not a finite number") == 2)
        #expect(listener.stats.gauges["page_size"] == 10)
    }

    /// A plugin named twice (here once in a child process) is two entries, each saying where
    /// the manifest names it, in the manifest's order (they were alike, isolated ones last).
    @Test func aPluginNamedTwice_isTwoEntries_inManifestOrder() async throws {
        let folder = scratchFolder()
        let library = try await fixturePlugin("interceptor_work")
        try """
        {"source": {"plugin": "\(library)", "id": "offsets", "config": {"count": 30}},
         "interceptors": [{"plugin": "\(library)", "id": "listener", "isolation": "process"}, {"plugin": "\(library)", "id": "listener"}],
         "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", folder + "/m.json", "--stats=json"])
        #expect(result.code == 0, "\(result.stderr)")
        let report = try JSONDecoder().decode(Report.self, from: Data(try #require(result.stderr.split(separator: "\n").last).utf8))
        #expect(report.plugins.map { "\($0.id) \($0.at)" } == ["offsets $.source", "listener $.interceptors[0]", "listener $.interceptors[1]"])
        let text = try await run(pagerCommand, ["run", folder + "/m.json", "--stats"])
        #expect(text.stderr.contains("  listener (interceptor at $.interceptors[1], \(library)): 1 call, answered 0 itself"), "\(text.stderr)")
    }

    /// The shipped plugins publish what they did: the store its hits and misses, the rate
    /// limiter how many requests passed.
    @Test func shippedPlugins_publishTheirCounters() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 30, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "rate-limit", "config": {"per_second": 1000, "burst": 100}},
                          {"plugin": "sqlite-store", "config": {"path": "pages.db", "namespace": "n"}}],
         "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        func counters() async throws -> [String: [String: Int64]] {
            let result = try await run(pagerCommand, ["run", folder + "/m.json", "--refresh", "--append", "1", "--stats=json"])
            #expect(result.code == 0, "\(result.stderr)")
            let line = try #require(result.stderr.split(separator: "\n").last)
            let report = try JSONDecoder().decode(Report.self, from: Data(line.utf8))
            return Dictionary(uniqueKeysWithValues: report.plugins.map { ($0.id, $0.counters) })
        }
        let first = try await counters()
        #expect(first["sqlite-store"] == ["misses": 2] && first["rate-limit"] == ["passed": 2], "\(first)")
        let second = try await counters()
        #expect(second["sqlite-store"] == ["hits": 2], "\(second)")
    }

    /// Latencies of seconds are reported in microseconds as they are (they once came out ten
    /// times too small).
    @Test func latenciesOfSeconds_areReportedWhole() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 5, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "example-plugins", "id": "delay", "config": {"delay_ms": 1100}}], "page_size": 5}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", folder + "/m.json", "--stats=json"])
        #expect(result.code == 0, "\(result.stderr)")
        let line = try #require(result.stderr.split(separator: "\n").last)
        let report = try JSONDecoder().decode(Report.self, from: Data(line.utf8))
        let delay = try #require(report.plugins.first { $0.id == "delay" })
        let p50 = try #require(delay.p50_us)
        #expect(p50 >= 1_100_000, "\(p50)")
    }
}
