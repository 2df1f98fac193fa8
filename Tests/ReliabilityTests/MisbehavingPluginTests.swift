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

    /// The issue asks for a timeout on an intercept that blocks. Today the host has none:
    /// `LoadedInterceptor.intercept` calls the plugin synchronously on the caller's thread (a
    /// thread of the cooperative pool) and waits as long as the plugin sleeps; `fetchTimeout`
    /// applies to fetches only. The expected behaviour is written as a known issue: when the
    /// host gets an intercept timeout, `withKnownIssue` reports that the issue is gone and this
    /// test must be updated (drop the wrapper).
    @Test(.timeLimit(.minutes(1)))
    func blockingIntercept_shouldFailWithATimeout() async throws {
        let limits = PluginLimits(fetchTimeout: .milliseconds(200))
        let interceptor = try PluginLibrary.open(path: try fixturePlugin("blocking_intercept"))
            .makeInterceptor(config: .object([("sleep_ms", .int(5_000))]), sink: log.sink, limits: limits)
        let pager = Pager(source: try jsonLinesSource(count: 30, limits: limits), interceptors: [interceptor])
        let clock = ContinuousClock()
        let start = clock.now
        let result: Result<PluginPage, any Error>
        do {
            result = .success(try await pager.load(pager.refreshRequest(params: params(pageSize: 10))))
        } catch {
            result = .failure(error)
        }
        let elapsed = clock.now - start
        report("blocking intercept (sleeps 5 s, fetch timeout 200 ms): the load ended after \(elapsed) with "
               + "\((try? result.get()).map { "a page of \($0.values.count) items" } ?? "an error: \(String(describing: result))")")
        // Holds today: the host survives, the load ends once the plugin returns.
        #expect(elapsed < .seconds(10))
        withKnownIssue("""
            no intercept timeout: LoadedInterceptor.intercept runs the C call synchronously on a \
            cooperative thread and waits for it; PluginLimits has no intercept timeout
            """) {
            #expect(elapsed < .seconds(2), "the load waited \(elapsed) for a blocked intercept")
            if case .failure(let error as PluginError) = result {
                #expect(error.status == .timeout)
            } else {
                Issue.record("expected a PluginError with status timeout, got \(result)")
            }
        }
    }

    /// A source that tries to return 2 GiB in one page: the host stops copying at
    /// `PluginLimits.maxPageBytes`, the load fails with a clear error, memory stays bounded.
    @Test func enormousPageFromASource_failsAtTheByteLimit_withoutExhaustingMemory() async throws {
        let limits = PluginLimits(maxItemsPerPage: 1_000_000, maxPageBytes: 8 << 20)
        let before = peakResidentBytes()
        let source = try PluginLibrary.open(path: try fixturePlugin("enormous_page")).makeSource(
            id: "enormous-source", config: .object([("item_len", .int(65_536)), ("total_bytes", .int(2 << 30))]),
            sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        let error = await #expect(throws: PluginError.self) {
            try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
        }
        #expect(error?.status == .invalidArgument)
        #expect(error?.message.contains("more than 8388608 bytes in one page") == true, "\(String(describing: error))")
        let growth = peakResidentBytes() - before
        report("enormous page (source, 2 GiB tried, 8 MiB limit): \(error.map(\.description) ?? "no error"); peak RSS grew \(growth >> 20) MiB")
        #expect(growth < 512 << 20, "peak memory grew by \(growth >> 20) MiB")
        #expect(await log.waitFor("enormous: stopped after 128 items (8388608 bytes), last status 8"))
    }

    @Test func enormousItemCount_failsAtTheItemLimit() async throws {
        let limits = PluginLimits(maxItemsPerPage: 10_000)
        let source = try PluginLibrary.open(path: try fixturePlugin("enormous_page")).makeSource(
            id: "enormous-source", config: .object([("item_len", .int(1)), ("item_count", .int(50_000_000))]),
            sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        let error = await #expect(throws: PluginError.self) {
            try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
        }
        #expect(error?.message.contains("more than 10000 items in one page") == true, "\(String(describing: error))")
    }

    /// A runaway plugin that ignores the refusals and keeps adding: every later call is refused
    /// (logged) and nothing more is kept.
    @Test func runawaySource_thatIgnoresRefusals_isRefusedEveryTime() async throws {
        let limits = PluginLimits(maxItemsPerPage: 1_000_000, maxPageBytes: 1 << 20)
        let before = peakResidentBytes()
        let source = try PluginLibrary.open(path: try fixturePlugin("enormous_page")).makeSource(
            id: "enormous-source",
            config: .object([("item_len", .int(65_536)), ("total_bytes", .int(256 << 20)), ("ignore_errors", .bool(true))]),
            sink: log.sink, limits: limits)
        let pager = Pager(source: source)
        await #expect(throws: PluginError.self) { try await pager.load(pager.refreshRequest(params: params(pageSize: 10))) }
        #expect(await log.waitFor("enormous: stopped after 4096 items"))
        #expect(log.messages.filter { $0.contains("fetch_add_item for unknown or finished fetch id") }.count == 4096 - 16 - 1)
        #expect(log.contains("fetch_add_item for unknown or finished fetch id"))
        let growth = peakResidentBytes() - before
        #expect(growth < 512 << 20, "peak memory grew by \(growth >> 20) MiB")
    }

    @Test func enormousPageFromAnInterceptor_failsAtTheByteLimit() async throws {
        let limits = PluginLimits(maxItemsPerPage: 1_000_000, maxPageBytes: 4 << 20)
        let before = peakResidentBytes()
        let interceptor = try PluginLibrary.open(path: try fixturePlugin("enormous_page")).makeInterceptor(
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
        let plugin = try fixturePlugin("enormous_page")
        let text = """
        {"source": {"plugin": "\(plugin)", "id": "enormous-source", "config": {"item_len": 0, "item_count": 1000000}},
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
