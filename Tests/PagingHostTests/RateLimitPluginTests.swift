import Foundation
import Paging
import PagingHost
import Testing

/// The rate-limit interceptor (Plugins/RateLimit/rate_limit.c) through real dlopen, in front of a
/// JSON Lines source. Times are only ever checked from below: a slow machine may take longer.
/// Where a test needs loads to wait, the slots are minutes apart, so that however late a load
/// comes, the bucket has not refilled; the host's fetch timeout (which ends a wait) is an hour.
@Suite("The rate-limit plugin")
struct RateLimitPluginTests {
    let log = LogRecorder()

    func limiter(_ config: [(String, JSONValue)]) throws -> LoadedInterceptor {
        try PluginLibrary.open(path: shippedPlugin("rate-limit"))
            .makeInterceptor(config: .object(config), sink: log.sink, limits: PluginLimits(fetchTimeout: .seconds(3_600)))
    }

    /// A pager of 1,000 lines behind `limiter`, every load its own (no sharing).
    func pager(_ limiter: LoadedInterceptor) throws -> PluginPager {
        let folder = scratchFolder()
        writeJSONLines(count: 1_000, to: folder + "/data.jsonl")
        let source = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
            .makeSource(config: .object([("path", .string(folder + "/data.jsonl"))]), sink: log.sink)
        return Pager(source: source, interceptors: [limiter], deduplication: .disabled)
    }

    /// Starts loading line `line` as a page of its own.
    func send(_ pager: PluginPager, _ line: Int, retry: RetryPolicy = .none) -> Task<PluginPage, any Error> {
        Task { try await pager.load(pager.request(.append, key: PluginKey("\(line)"), params: params(pageSize: 1, retry: retry))) }
    }

    /// Waits until `count` lines contain `text` (a minute at most).
    func waitForLines(_ text: String, count: Int) async -> Bool {
        let until = ContinuousClock.now + .seconds(60)
        while log.count(containing: text) < count, ContinuousClock.now < until, !Task.isCancelled {
            try? await Task.sleep(for: .milliseconds(10))
        }
        return log.count(containing: text) >= count
    }

    @Test func loadsAtOnce_takeAtLeast_theLoadsBeyondTheBurstOverTheRate() async throws {
        for (perSecond, burst, count) in [(20.0, 1, 11), (40.0, 5, 25)] {
            let pager = try pager(try limiter([("per_second", .double(perSecond)), ("burst", .int(Int64(burst)))]))
            let clock = ContinuousClock()
            let started = clock.now
            let pages = try await withThrowingTaskGroup(of: (Int, PluginPage).self) { group in
                for line in 0..<count {
                    group.addTask {
                        (line, try await pager.load(pager.request(.append, key: PluginKey("\(line)"), params: params(pageSize: 1))))
                    }
                }
                return try await group.reduce(into: [:]) { $0[$1.0] = $1.1 }
            }
            let elapsed = clock.now - started
            let least = Duration.seconds(Double(count - burst) / perSecond)
            #expect(elapsed >= least, "\(count) loads at \(perSecond)/s, burst \(burst): \(elapsed)")
            #expect(pages.count == count)
            #expect(pages.allSatisfy { $0.value.values.texts == [#"{"n":\#($0.key)}"#] })
        }
    }

    /// A manifest's pipeline pages at the rate: `pager run` of 5 pages, one a tenth of a second.
    @Test func manifestPipeline_pagesAtTheRate() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 10, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "rate-limit", "config": {"per_second": 10, "burst": 1, "max_wait_ms": 5000}}],
         "page_size": 2}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", folder + "/m.json", "--refresh", "--append", "4"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 10)
        #expect(result.elapsed >= .milliseconds(400))
    }

    @Test func aWaitBeyondMaxWait_failsTransient_namingTheWait_withARetryHint() async throws {
        let pager = try pager(try limiter([("per_second", .double(0.01)), ("max_wait_ms", .int(100))])) // a slot every 100 s
        _ = try await send(pager, 0).value
        let error = await #expect(throws: PluginError.self) { try await send(pager, 1).value }
        #expect(error?.status == .transient)
        let message = error?.message ?? ""
        #expect(message.hasPrefix("rate limit: next slot in ") && message.hasSuffix(" ms, beyond max_wait_ms 100"), "\(message)")
        let wait = Int(message.dropFirst("rate limit: next slot in ".count).prefix { $0.isNumber }) ?? 0
        #expect((101...100_000).contains(wait), "\(message)")
        #expect(error?.retryAfter == .milliseconds(wait))
    }

    /// The refusal's hint is what the retry policy waits for: the retry finds the slot free.
    @Test func aRefusal_isRetriedAfterItsHint_andThenProceeds() async throws {
        let pager = try pager(try limiter([("per_second", .int(2)), ("max_wait_ms", .int(0))])) // a slot every 500 ms
        let clock = ContinuousClock()
        let started = clock.now
        _ = try await send(pager, 0).value
        let retry = RetryPolicy(maxRetries: 2, backoff: .init(initial: .zero, maximum: .seconds(5)))
        let page = try await send(pager, 1, retry: retry).value
        #expect(page.values.texts == [#"{"n":1}"#])
        #expect(clock.now - started >= .milliseconds(500))
    }

    /// A cancelled load ends without waiting for its slot, and the plugin hears it: the slot goes
    /// to the loads behind, so that a later load fits within max_wait_ms, which it would not if
    /// the cancelled load still held a slot.
    @Test func cancellingAWaitingLoad_endsIt_andItsSlotGoesToThoseBehind() async throws {
        // A slot every 1,000 s: the first load takes the token, the next two wait 1,000 and
        // 2,000 s. With the first of them cancelled, a fourth waits 2,000 s (within 2,500); were
        // its slot not given back, 3,000 s (refused).
        let limiter = try limiter([("per_second", .double(0.001)), ("max_wait_ms", .int(2_500_000))])
        let pager = try pager(limiter)
        _ = try await send(pager, 0).value
        let cancelled = send(pager, 1)
        #expect(await waitForLines("waits for its slot", count: 1))
        let behind = send(pager, 2)
        #expect(await waitForLines("waits for its slot", count: 2))
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
        #expect(await log.waitFor("stopped waiting; its slot was given back"), "\(log.messages)")
        let later = send(pager, 3)
        #expect(await waitForLines("waits for its slot", count: 3), "\(log.messages)")
        limiter.destroy()
        for task in [behind, later] {
            await #expect(throws: PluginError.self) { try await task.value }
        }
    }

    /// Destroying the interceptor with loads waiting ends them (the host does) and joins the
    /// plugin's timer thread; nothing is resumed afterwards.
    @Test func destroyingWithLoadsWaiting_endsThem_cleanly() async throws {
        let limiter = try limiter([("per_second", .double(0.001)), ("max_wait_ms", .int(10_000_000))]) // a slot every 1,000 s
        let pager = try pager(limiter)
        _ = try await send(pager, 0).value
        let waiting = (1...3).map { send(pager, $0) }
        #expect(await waitForLines("waits for its slot", count: 3))
        limiter.destroy()
        for task in waiting {
            let error = await #expect(throws: PluginError.self) { try await task.value }
            #expect(error?.status == .cancelled && error?.message == "the interceptor was destroyed", "\(String(describing: error))")
        }
        let after = await #expect(throws: PluginError.self) { try await send(pager, 4).value }
        #expect(after?.message == "the plugin was destroyed")
    }

    @Test func badConfigs_areRefused_namingTheKeyAndWhatIsExpected() throws {
        let library = try PluginLibrary.open(path: shippedPlugin("rate-limit"))
        let rate: (String, JSONValue) = ("per_second", .int(1))
        let cases: [([(String, JSONValue)], String)] = [
            ([], "config `per_second` (number > 0) is required"),
            ([("per_second", .int(0))], "config `per_second` must be a number > 0"),
            ([("per_second", .double(-2.5))], "config `per_second` must be a number > 0"),
            ([("per_second", .string("fast"))], "config `per_second` must be a number > 0"),
            ([rate, ("burst", .int(0))], "config `burst` must be an integer in 1...1000000"),
            ([rate, ("burst", .double(1.5))], "config `burst` must be an integer in 1...1000000"),
            ([rate, ("max_wait_ms", .int(-1))], "config `max_wait_ms` must be an integer in 0...2147483647"),
            ([rate, ("max_wait_ms", .string("1s"))], "config `max_wait_ms` must be an integer in 0...2147483647"),
            ([rate, ("rate", .int(5))], "unknown config key `rate` (the keys are per_second, burst and max_wait_ms)"),
            ([("limits", .object([("per_second", .int(1))]))], "unknown config key `limits`"),
        ]
        for (config, expected) in cases {
            do {
                _ = try library.makeInterceptor(config: .object(config), sink: log.sink)
                Issue.record("\(config) was accepted")
            } catch {
                guard case let .createFailed(_, _, status, message) = error else {
                    Issue.record("\(config): \(error)")
                    continue
                }
                #expect(status == .invalidConfig, "\(config)")
                #expect(message.hasPrefix("rate-limit: ") && message.contains(expected), "\(config): \(message)")
            }
        }
    }
}
