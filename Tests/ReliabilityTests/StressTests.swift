import Foundation
import Paging
import PagingHost
import Synchronization
import Testing

/// Fails a seeded share of requests with a retryable error, so that retry() has work to do.
final class InjectedFailures: PagingInterceptor, Sendable {
    typealias Key = PluginKey
    typealias Value = PluginItem

    struct Injected: Error, RetryClassifiedError, CustomStringConvertible {
        var isRetryable: Bool { true }
        var description: String { "injected failure" }
    }

    private let state: Locked<(rng: SeededGenerator, failed: Int)>
    private let percent: Int

    init(seed: UInt64, percent: Int) {
        state = Locked((SeededGenerator(seed: seed), 0))
        self.percent = percent
    }

    var failed: Int { state.withLock { $0.failed } }

    func intercept(request: PluginRequest) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        let fail = state.withLock { state -> Bool in
            let fail = Int.random(in: 0..<100, using: &state.rng) < percent
            if fail { state.failed += 1 }
            return fail
        }
        if fail { throw Injected() }
        return .proceed(request, handleAfterwards: false)
    }
}

final class Problems: Sendable {
    let list = Locked<[String]>([])
}

/// Checks a list of jsonlines items: a contiguous run of the file's lines, no duplicates.
func contiguityProblem(_ values: PagedValues<PluginKey, PluginItem>, lineCount: Int) -> String? {
    let numbers = lineNumbers(values)
    guard let first = numbers.first else { return nil }
    if first < 0 || numbers.last! >= lineCount { return "values outside the file: \(first)...\(numbers.last!)" }
    for (offset, number) in numbers.enumerated() where number != first + offset {
        return "not contiguous at \(offset): \(number) after \(offset > 0 ? numbers[offset - 1] : -1)"
    }
    return nil
}

@Suite("Concurrency stress")
struct StressTests {
    /// 8 tasks × PAGING_STRESS_CALLS (default 2,000; the full size is 10,000) mixed
    /// refresh / append / prepend / retry calls on one PaginationManager over a loaded pipeline:
    /// jsonlines source, cache plugin, sqlite-store plugin (temporary database), an in-process
    /// CacheInterceptor and an in-process interceptor that fails 3 % of requests.
    @Test(.timeLimit(.minutes(60)))
    func mixedLoads_fromEightTasks_leaveAConsistentState() async throws {
        let tasks = environmentCount("PAGING_STRESS_TASKS", default: 8)
        let calls = environmentCount("PAGING_STRESS_CALLS", default: 2_000)
        let lineCount = 2_000
        let folder = scratchFolder()
        writeJSONLines(count: lineCount, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "cache", "config": {"max_entries": 40}},
                          {"plugin": "sqlite-store", "config": {"path": "pages.db"}}],
         "page_size": 20, "max_size": 200}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let log = LogRecorder(limit: 1_000)
        let failures = InjectedFailures(seed: 42, percent: 3)
        let pipeline = try Pipeline(
            manifest: try Manifest.load(path: folder + "/m.json"), sink: log.sink,
            extraInterceptors: [failures, CacheInterceptor<PluginKey, PluginItem>(timeToLive: .seconds(600), maxEntries: 30)])
        let manager = pipeline.makeManager()
        let problems = Problems()
        let clock = ContinuousClock()
        let start = clock.now
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<tasks {
                group.addTask {
                    var rng = SeededGenerator(seed: UInt64(task) &+ 1_000)
                    for _ in 0..<calls {
                        switch Int.random(in: 0..<100, using: &rng) {
                        case 0..<4: await manager.load(.refresh)
                        case 4..<50: await manager.load(.append)
                        case 50..<90: await manager.load(.prepend)
                        default: await manager.retry().value
                        }
                        if let problem = contiguityProblem(manager.output.values, lineCount: lineCount) {
                            problems.list.withLock { $0.append(problem) }
                        }
                    }
                }
            }
        }
        let elapsed = clock.now - start
        let output = manager.output
        let numbers = lineNumbers(output.values)
        report("stress: \(tasks) tasks × \(calls) calls in \(elapsed); \(failures.failed) injected failures; final list "
               + "\(numbers.first ?? -1)...\(numbers.last ?? -1) (\(numbers.count) values, \(output.values.pageCount) pages); "
               + "states refresh \(output.refreshState), prepend \(output.prependState), append \(output.appendState); "
               + "\(log.total) plugin log lines")
        #expect(problems.list.withLock { $0.isEmpty }, "inconsistent states seen: \(problems.list.withLock { Array($0.prefix(5)) })")
        #expect(contiguityProblem(output.values, lineCount: lineCount) == nil)
        #expect(Set(numbers).count == numbers.count, "duplicates in the list")
        #expect(!output.refreshState.isLoading && !output.appendState.isLoading && !output.prependState.isLoading,
                "a load state is stuck in .loading")
        #expect(output.values.count <= 200 + 20)
        #expect(!log.messages.contains { $0.contains("write: page not stored") || $0.contains("cannot") }, "\(log.messages.prefix(5))")
    }
}
