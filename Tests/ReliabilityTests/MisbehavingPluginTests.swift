import Foundation
import Paging
import PagingHost
import Testing

/// Misbehaving plugins not covered by Tests/PagingHostTests/BridgeTests.swift: one that blocks
/// in intercept(), and ones that return an enormous page.
@Suite("Misbehaving plugins")
struct MisbehavingPluginTests {
    let log = LogRecorder(limit: 5_000)

    func jsonLinesSource(count: Int, limits: PluginLimits = PluginLimits()) throws -> LoadedSource {
        let file = scratchFolder() + "/data.jsonl"
        writeJSONLines(count: count, to: file)
        return try PluginLibrary.open(path: shippedPlugin("jsonlines"))
            .makeSource(config: .object([("path", .string(file))]), sink: log.sink, limits: limits)
    }

    /// An intercept that blocks (the fixture sleeps until the test wakes it): with a call timeout,
    /// each load fails with a retryable timeout in time, also while earlier calls are stuck.
    @Test(.timeLimit(.minutes(3)))
    func blockingIntercept_failsWithATimeout() async throws {
        let limits = PluginLimits(fetchTimeout: .seconds(5), callTimeout: .milliseconds(200))
        // The plugin sleeps until the test creates `wake` (a minute at most): however late a
        // loaded machine fires the timeouts, the loads end while it still sleeps.
        let wake = scratchFolder() + "/wake"
        let interceptor = try PluginLibrary.open(path: try await fixturePlugin("blocking_intercept"))
            .makeInterceptor(config: .object([("sleep_ms", .int(60_000)), ("until_path", .string(wake))]), sink: log.sink, limits: limits)
        let pager = Pager(source: try jsonLinesSource(count: 30, limits: limits), interceptors: [interceptor])
        // The second intercept waits behind the first (the plugin's calls do not overlap).
        for expected in ["intercept did not return within", "intercept could not be called within 0.2 seconds (call_timeout_ms): an earlier call"] {
            do {
                _ = try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
                Issue.record("a load through a blocked intercept succeeded")
            } catch let error as PluginError {
                #expect(error.status == .timeout)
                #expect(error.isRetryable)
                #expect(error.message.contains(expected), "\(error.message)")
            }
        }
        #expect(!log.contains("blocking-intercept: woke after"), "both loads ended before the plugin woke up")
        #expect(FileManager.default.createFile(atPath: wake, contents: nil))
        // The abandoned calls still run to their end, on the plugin's own thread.
        #expect(await log.waitFor("blocking-intercept: woke after"))
    }

    /// Without a call timeout the call runs on the caller's thread: the load waits for the
    /// plugin, and then succeeds.
    @Test(.timeLimit(.minutes(3)))
    func blockingIntercept_withoutACallTimeout_holdsTheLoad() async throws {
        let interceptor = try PluginLibrary.open(path: try await fixturePlugin("blocking_intercept"))
            .makeInterceptor(config: .object([("sleep_ms", .int(300))]), sink: log.sink)
        let pager = Pager(source: try jsonLinesSource(count: 30), interceptors: [interceptor])
        let clock = ContinuousClock()
        let start = clock.now
        let page = try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
        #expect(page.values.count == 10)
        #expect(clock.now - start >= .milliseconds(300))
    }

    /// A source whose fetch() blocks: with a call timeout, the load fails with a retryable
    /// timeout in time and the plugin hears the fetch cancelled; while the call is stuck, the
    /// serialized instance's next load fails at once rather than waiting behind it; once the
    /// call returns, its late completion is dropped and loads go through again.
    @Test(.timeLimit(.minutes(3)))
    func blockingFetch_failsWithATimeout_andLaterLoadsDoNotWaitBehindIt() async throws {
        let limits = PluginLimits(fetchTimeout: .seconds(5), callTimeout: .milliseconds(200))
        let wake = scratchFolder() + "/wake"
        let source = try PluginLibrary.open(path: try await fixturePlugin("blocking_fetch"))
            .makeSource(config: .object([("sleep_ms", .int(60_000)), ("until_path", .string(wake))]), sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        let first = await #expect(throws: PluginError.self) { try await pager.load(pager.refreshRequest(params: params(pageSize: 10))) }
        #expect(first?.status == .timeout)
        #expect(first?.isRetryable == true)
        #expect(first?.message.contains("fetch did not return within 0.2 seconds (call_timeout_ms)") == true, "\(String(describing: first))")
        #expect(await log.waitFor("blocking-fetch: cancel"))
        let start = ContinuousClock.now
        let second = await #expect(throws: PluginError.self) { try await pager.load(pager.refreshRequest(params: params(pageSize: 10))) }
        #expect(second?.status == .timeout)
        #expect(second?.message.contains("an earlier fetch() has not returned yet") == true, "\(String(describing: second))")
        #expect(ContinuousClock.now - start < .seconds(30), "the second load waited for the stuck call")
        #expect(!log.contains("blocking-fetch: woke after"), "both loads ended before the plugin woke up")

        #expect(FileManager.default.createFile(atPath: wake, contents: nil))
        #expect(await log.waitFor("blocking-fetch: woke after"))
        let page = try await firstLoadThatSucceeds(pager)
        #expect(page?.values.map(\.text) == [#"{"woke":true}"#])
    }

    /// A fetch that outlasted the call timeout (which counts from the request) after waiting
    /// its turn says so: it said the fetch "did not return within" the timeout, of a fetch()
    /// never called, and of one that ran a fraction of it (behind a serialized plugin's slow
    /// call). (The messages, not a race of two fetches: one asked a moment late on a loaded
    /// machine ran more of its time than it waited.)
    @Test func aFetchThatWaitedItsTurn_saysSo() {
        let timeout = Duration.seconds(6), described = "6.0 seconds (call_timeout_ms)"
        #expect(LoadedSource.fetchTimedOut(ran: .seconds(6), within: timeout, described) == "fetch did not return within 6.0 seconds (call_timeout_ms)")
        #expect(LoadedSource.fetchTimedOut(ran: .milliseconds(3_500), within: timeout, described) == "fetch did not return within 6.0 seconds (call_timeout_ms)")
        #expect(LoadedSource.fetchTimedOut(ran: .milliseconds(2_000), within: timeout, described)
                == "fetch did not end within 6.0 seconds (call_timeout_ms): fetch() was called 4000 ms after the request (behind earlier calls), then ran 2000 ms")
        #expect(LoadedSource.fetchTimedOut(ran: nil, within: timeout, described)
                == "fetch did not get its turn within 6.0 seconds (call_timeout_ms): an earlier call of the plugin has not returned")
        // A scheduling delay is no turn waited for.
        #expect(LoadedSource.fetchTimedOut(ran: .milliseconds(150), within: .milliseconds(200), "0.2 seconds (call_timeout_ms)")
                == "fetch did not return within 0.2 seconds (call_timeout_ms)")
    }

    /// A source whose key_chain blocks: with a call timeout, building the request waits for it
    /// that long at most and the load fails with a timeout (it held the engine's thread for
    /// good); while the call is stuck, the next key chain fails at once rather than queueing
    /// behind it; once it returns, loads go through again.
    @Test(.timeLimit(.minutes(3)))
    func blockingKeyChain_failsWithATimeout_andLaterLoadsDoNotWaitBehindIt() async throws {
        // A second: the key call must have started on its thread by then on a loaded machine
        // (else it "did not get its turn").
        let limits = PluginLimits(fetchTimeout: .seconds(5), callTimeout: .seconds(1))
        let wake = scratchFolder() + "/wake"
        let config = JSONValue.object([("sleep_ms", .int(60_000)), ("until_path", .string(wake)), ("pass_first", .int(1_000)), ("block_key_chain", .int(1))])
        let source = try PluginLibrary.open(path: try await fixturePlugin("blocking_fetch")).makeSource(config: config, sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        let first = await #expect(throws: PluginError.self) { try await pager.load(pager.refreshRequest(params: params(pageSize: 10))) }
        #expect(first?.status == .timeout)
        #expect(first?.message.contains("did not return within 1.0 seconds (call_timeout_ms)") == true, "\(String(describing: first))")
        #expect(first?.message.contains("key_chain(") == true, "\(String(describing: first))")
        let start = ContinuousClock.now
        let second = await #expect(throws: PluginError.self) { try await pager.load(pager.refreshRequest(params: params(pageSize: 10))) }
        #expect(second?.status == .timeout)
        #expect(second?.message.contains("an earlier key_chain() or refresh_key_at() has not returned yet") == true, "\(String(describing: second))")
        #expect(ContinuousClock.now - start < .seconds(30), "the second load waited for the stuck call")
        #expect(!log.contains("key_chain woke after"), "both loads ended before the plugin woke up")

        #expect(FileManager.default.createFile(atPath: wake, contents: nil))
        #expect(await log.waitFor("blocking-fetch: key_chain woke after"))
        let page = try await firstLoadThatSucceeds(pager)
        #expect(page?.values.map(\.text) == [#"{"woke":true}"#])
        #expect(page?.nextKey == PluginKey("1"))
    }

    /// The first refresh of `pager` that succeeds within a minute, tries 20 ms apart (the
    /// instance is free again right after its stuck call returns).
    private func firstLoadThatSucceeds(_ pager: Pager<PluginKey, PluginItem>) async throws -> PluginPage? {
        let until = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < until {
            if let page = try? await pager.load(pager.refreshRequest(params: params(pageSize: 10))) { return page }
            try await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    /// A source that tries to return 2 GiB in one page: the host stops copying at
    /// `PluginLimits.maxPageBytes`, the load fails with a clear error, memory stays bounded.
    @Test func enormousPageFromASource_failsAtTheByteLimit_withoutExhaustingMemory() async throws {
        let limits = PluginLimits(maxItemsPerPage: 1_000_000, maxPageBytes: 8 << 20)
        let before = peakResidentBytes()
        #expect(before > 1 << 20, "the peak RSS reads as \(before) bytes") // it read 0: every bound held
        let source = try PluginLibrary.open(path: try await fixturePlugin("enormous_page")).makeSource(
            id: "enormous-source", config: .object([("item_len", .int(65_536)), ("total_bytes", .int(2 << 30))]),
            sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        let error = await #expect(throws: PluginError.self) {
            try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
        }
        #expect(error?.status == .invalidArgument)
        #expect(error?.message.contains("more than 8388608 bytes in one page (max_page_bytes)") == true, "\(String(describing: error))")
        let growth = peakResidentBytes() - before
        report("enormous page (source, 2 GiB tried, 8 MiB limit): \(error.map(\.description) ?? "no error"); peak RSS grew \(growth >> 20) MiB")
        #expect(growth < 512 << 20, "peak memory grew by \(growth >> 20) MiB")
        #expect(await log.waitFor("enormous: stopped after 128 items (8388608 bytes), last status 8"))
    }

    @Test func enormousItemCount_failsAtTheItemLimit() async throws {
        let limits = PluginLimits(maxItemsPerPage: 10_000)
        let source = try PluginLibrary.open(path: try await fixturePlugin("enormous_page")).makeSource(
            id: "enormous-source", config: .object([("item_len", .int(1)), ("item_count", .int(50_000_000))]),
            sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        let error = await #expect(throws: PluginError.self) {
            try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
        }
        #expect(error?.message.contains("more than 10000 items in one page (max_items_per_page)") == true, "\(String(describing: error))")
    }

    /// A runaway plugin that ignores the refusals and keeps adding: every later call is refused
    /// (said at debug level: the fetch the host ended, not an unknown one) and nothing more is kept.
    @Test func runawaySource_thatIgnoresRefusals_isRefusedEveryTime() async throws {
        let limits = PluginLimits(maxItemsPerPage: 1_000_000, maxPageBytes: 1 << 20)
        let before = peakResidentBytes()
        #expect(before > 1 << 20, "the peak RSS reads as \(before) bytes") // it read 0: every bound held
        let source = try PluginLibrary.open(path: try await fixturePlugin("enormous_page")).makeSource(
            id: "enormous-source",
            config: .object([("item_len", .int(65_536)), ("total_bytes", .int(256 << 20)), ("ignore_errors", .bool(true))]),
            sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        await #expect(throws: PluginError.self) { try await pager.load(pager.refreshRequest(params: params(pageSize: 10))) }
        #expect(await log.waitFor("enormous: stopped after 4096 items"))
        #expect(log.messages.filter { $0.contains("fetch_add_item for fetch id ") && $0.hasSuffix(", which the host already ended (invalid argument)") }
            .count == 4096 - 16 - 1, "\(log.messages.suffix(3))")
        #expect(!log.contains("fetch_add_item for unknown or finished fetch id"))
        let growth = peakResidentBytes() - before
        #expect(growth < 512 << 20, "peak memory grew by \(growth >> 20) MiB")
    }

    @Test func enormousPageFromAnInterceptor_failsAtTheByteLimit() async throws {
        let limits = PluginLimits(maxItemsPerPage: 1_000_000, maxPageBytes: 4 << 20)
        let before = peakResidentBytes()
        #expect(before > 1 << 20, "the peak RSS reads as \(before) bytes") // it read 0: every bound held
        let interceptor = try PluginLibrary.open(path: try await fixturePlugin("enormous_page")).makeInterceptor(
            id: "enormous-interceptor", config: .object([("item_len", .int(1 << 20)), ("total_bytes", .int(2 << 30))]),
            sink: log.sink, limits: limits)
        let pager = Pager(source: try jsonLinesSource(count: 10), interceptors: [interceptor])
        let error = await #expect(throws: PluginError.self) {
            try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
        }
        #expect(error?.status == .invalidArgument)
        #expect(error?.message.contains("out_add_item: more than 4194304 bytes in one page") == true, "\(String(describing: error))")
        #expect(peakResidentBytes() - before < 512 << 20)
    }

    /// Through a manifest, only the item count is configurable (`max_items_per_page`); the byte
    /// limit stays at PluginLimits' default (256 MiB) because the manifest has no key for it.
    @Test func manifestLimit_onItems_reachesTheHost() async throws {
        let folder = scratchFolder()
        let plugin = try await fixturePlugin("enormous_page")
        let text = """
        {"source": {"plugin": "\(plugin)", "id": "enormous-source", "config": {"item_len": 1, "item_count": 1000000}},
         "max_items_per_page": 100}
        """
        try text.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let pipeline = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"), sink: log.sink)
        let manager = pipeline.makeManager()
        await manager.load(.refresh)
        let error = manager.output.refreshState.error as? PluginError
        #expect(error?.message.contains("more than 100 items in one page") == true, "\(String(describing: error))")
        #expect(manager.output.values.isEmpty)
    }
}
