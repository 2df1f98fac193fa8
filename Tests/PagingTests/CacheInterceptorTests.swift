import Paging
import PagingTesting
import Testing

@Suite("CacheInterceptor")
struct CacheInterceptorTests {
    func request(_ key: Int, pageSize: Int = 3, userInfo: [String: String] = [:]) -> PagingRequest<Int> {
        PagingRequest(kind: .append, keyChain: PagingKeyChain(key: key), params: params(pageSize: pageSize, userInfo: userInfo))
    }

    @Test func secondRequest_isServedFromTheCache() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, interceptors: [CacheInterceptor<Int, Int>()])
        _ = try await pager.load(request(1))
        let cached = try await pager.load(request(1))
        #expect(cached.values == [3, 4, 5])
        #expect(source.fetchCount == 1)
        _ = try await pager.load(request(1, pageSize: 4))
        _ = try await pager.load(request(1, userInfo: ["query": "swift"]))
        #expect(source.fetchCount == 3)
    }

    /// Found by a probe: a cache hit came back without the metadata the page was stored with.
    @Test func aCacheHit_keepsThePagesMetadata() async throws {
        struct Tag: PagingInterceptor {
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> { .proceed(request, handleAfterwards: true) }
            func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
                var page = page
                page.metadata["origin"] = "network"
                return page
            }
        }
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, interceptors: [CacheInterceptor<Int, Int>(), Tag()])
        #expect(try await pager.load(request(1)).metadata == ["origin": "network"])
        #expect(try await pager.load(request(1)).metadata == ["origin": "network"])
        #expect(source.fetchCount == 1)
    }

    /// An interceptor after the cache that asks for another page (a token added to the user
    /// info) does not keep the cache from answering: the page is cached under the request the
    /// cache saw (it was stored under the rewritten one, looked up under the original, and
    /// never hit). The caller still gets the page under the request the source answered.
    @Test func aRewriteAfterTheCache_isCachedUnderTheRequestTheCacheSaw() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let cache = CacheInterceptor<Int, Int>()
        let pager = Pager(source: source, interceptors: [cache, AddToken()])
        let first = try await pager.load(request(1))
        #expect(first.request.params.userInfo["token"] == "t")
        for _ in 0..<2 { #expect(try await pager.load(request(1)).values == [3, 4, 5]) }
        #expect(source.fetchCount == 1 && cache.cachedPage(for: request(1))?.values == [3, 4, 5])
    }

    /// The same for a network-first cache, whose loads run with a fallback: the fresh page
    /// replaces the one it holds, and a failed load falls back to it (the fresh page was
    /// stored under the rewritten request, and the failure answered with the first one).
    @Test func aRewriteAfterANetworkFirstCache_replacesThePageItFallsBackTo() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, interceptors: [CacheInterceptor<Int, Int>(policy: .networkFirst), AddToken()])
        _ = try await pager.load(request(1))
        source.setPages([[0], [7, 8, 9], [0]])
        #expect(try await pager.load(request(1)).values == [7, 8, 9])
        source.script(key: 1, .fail(ScriptedError("offline", isRetryable: false)))
        #expect(try await pager.load(request(1)).values == [7, 8, 9])
    }

    @Test func leastRecentlyUsed_isEvictedFirst() async throws {
        let cache = CacheInterceptor<Int, Int>(maxEntries: 3)
        for key in [1, 2, 3] { await cache.handle(page: Page(request: request(key), values: [key])) }
        #expect(cache.keysByRecency == [3, 2, 1])
        // A hit makes 1 the most recent; inserting 4 then evicts 2.
        guard case .complete = try await cache.intercept(request: request(1)) else {
            Issue.record("expected a hit"); return
        }
        await cache.handle(page: Page(request: request(4), values: [4]))
        #expect(cache.keysByRecency == [4, 1, 3])
        guard case .proceed = try await cache.intercept(request: request(2)) else {
            Issue.record("2 should have been evicted"); return
        }
        #expect(cache.count == 3)
    }

    @Test func entries_expireAfterTheirTimeToLive() async throws {
        let clock = ManualClock()
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(60), clock: clock.pagingClock)
        await cache.handle(page: Page(request: request(1), values: [1]))
        clock.advance(by: .seconds(59))
        guard case .complete(let page) = try await cache.intercept(request: request(1)) else {
            Issue.record("expected a hit before expiry"); return
        }
        #expect(page.values == [1])
        clock.advance(by: .seconds(2))
        guard case .proceed = try await cache.intercept(request: request(1)) else {
            Issue.record("expected a miss after expiry"); return
        }
        #expect(cache.count == 0)
    }

    @Test func networkFirst_loadsEveryTime_andAnswersWithTheCachedPageWhenTheLoadFails() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let fallbacks = Locked<[String]>([])
        let cache = CacheInterceptor<Int, Int>(policy: .networkFirst, whenFallingBack: { error in fallbacks.withLock { $0.append("\(error)") } })
        let pager = Pager(source: source, interceptors: [cache])
        _ = try await pager.load(request(1))
        source.setPages([[0, 0, 0], [9, 9, 9], [0, 0, 0]])
        #expect(try await pager.load(request(1)).values == [9, 9, 9], "the source answers first")
        source.script(key: 1, .fail(ScriptedError("server down", isRetryable: false)))
        #expect(try await pager.load(request(1)).values == [9, 9, 9], "the cached page answers the failed load")
        #expect(fallbacks.withLock { $0 } == ["server down"])
        #expect(source.fetchCount == 3)
        source.script(key: 2, .fail(ScriptedError("server down", isRetryable: false)))
        await #expect(throws: ScriptedError.self, "nothing cached: the failure stands") { try await pager.load(self.request(2)) }
    }

    /// A pager of 3 numbered pages of 3 behind a stale-while-revalidate cache whose pages go
    /// stale after 60 s of `clock`.
    func staleWhileRevalidatePager() -> (ManualClock, ScriptedPagingSource<Int>, Pager<Int, Int>) {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(60), policy: .staleWhileRevalidate, clock: clock.pagingClock)
        return (clock, source, Pager(source: source, interceptors: [cache], deduplication: .disabled))
    }

    @Test func staleWhileRevalidate_answersAtOnce_andCachesTheFreshPageInTheBackground() async throws {
        let (clock, source, pager) = staleWhileRevalidatePager()
        _ = try await pager.load(request(1))
        source.setPages([[0, 0, 0], [9, 9, 9], [0, 0, 0]])
        #expect(try await pager.load(request(1)).values == [3, 4, 5], "fresh: the cache answers, nothing is loaded")
        #expect(source.fetchCount == 1)
        clock.advance(by: .seconds(61))
        #expect(try await pager.load(request(1)).values == [3, 4, 5], "stale: the cache answers at once")
        await pager.backgroundLoadsFinished()
        #expect(source.fetchCount == 2, "and the page is loaded again in the background")
        #expect(try await pager.load(request(1)).values == [9, 9, 9], "the fresh page was cached")
    }

    /// Found by a probe: each hit of a stale page started a revalidation of its own (20 hits,
    /// 20 fetches of the same page); one runs at a time, and the hits meanwhile share it.
    @Test func staleWhileRevalidate_hitsWhileARevalidationRuns_startNoOther() async throws {
        let (clock, source, pager) = staleWhileRevalidatePager()
        _ = try await pager.load(request(1))
        clock.advance(by: .seconds(61))
        source.script(key: 1, .suspend)
        for _ in 0..<20 { #expect(try await pager.load(request(1)).values == [3, 4, 5]) }
        await source.waitUntilSuspended()
        source.release(key: 1)
        await pager.backgroundLoadsFinished()
        #expect(source.fetchCount == 2, "one revalidation")
        // Once it ended, a stale hit revalidates again.
        clock.advance(by: .seconds(61))
        _ = try await pager.load(request(1))
        await pager.backgroundLoadsFinished()
        #expect(source.fetchCount == 3)
    }

    /// Found by a probe: a stale page's revalidation published its failure (or its cancellation)
    /// with no `loading` before it, and its success nothing: an app counting the loads in flight
    /// from the states went below zero. It is published as any load is.
    @Test(.timeLimit(.minutes(3))) func staleWhileRevalidate_publishesEachRevalidationsStartAndEnd() async throws {
        let (clock, source, pager) = staleWhileRevalidatePager()
        let states = pager.states(buffering: .unbounded)
        _ = try await pager.load(request(1))
        clock.advance(by: .seconds(61))
        _ = try await pager.load(request(1))
        await pager.backgroundLoadsFinished()
        clock.advance(by: .seconds(61))
        source.script(key: 1, .fail(ScriptedError("offline")))
        _ = try await pager.load(request(1))
        await pager.backgroundLoadsFinished()
        // The last state: page 0's, never cached.
        _ = try await pager.load(request(0))
        var started = 0, ended = 0, failed = 0
        for await state in states {
            switch state {
            case .loading: started += 1
            case .retrying: break
            case .loaded, .cancelled: ended += 1
            case .failed: ended += 1; failed += 1
            }
            if case .loaded(let page) = state, page.request.key == 0 { break }
        }
        // Four loads of the callers', two revalidations (one failed).
        #expect(started == 6 && ended == 6 && failed == 1, "\(started) started, \(ended) ended")
    }

    @Test func hardRefresh_goesToTheSource_andItsPageReplacesTheCache() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let cache = CacheInterceptor<Int, Int>()
        let pager = Pager(source: source, interceptors: [cache])
        _ = try await pager.load(request(0))
        _ = try await pager.load(request(1))
        _ = try await pager.load(request(0, userInfo: [PagingUserInfoKey.hardRefresh: "true"]))
        #expect(source.fetchCount == 3)
        #expect(cache.keysByRecency == [0])
        // The page stored by the hard refresh serves ordinary requests.
        _ = try await pager.load(request(0))
        #expect(source.fetchCount == 3)
    }

    /// A hard refresh that fails loses nothing: what was cached still answers (before, the
    /// cache was emptied before the load).
    @Test func hardRefresh_thatFails_leavesTheCacheAsItWas() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let cache = CacheInterceptor<Int, Int>()
        let pager = Pager(source: source, interceptors: [cache])
        _ = try await pager.load(request(0))
        _ = try await pager.load(request(1))
        source.script(key: 0, .fail(ScriptedError("offline", isRetryable: false)))
        await #expect(throws: ScriptedError.self) {
            try await pager.load(request(0, userInfo: [PagingUserInfoKey.hardRefresh: "true"]))
        }
        #expect(cache.keysByRecency == [1, 0])
        #expect(try await pager.load(request(0)).values == [0, 1, 2])
        #expect(try await pager.load(request(1)).values == [3, 4, 5])
        #expect(source.fetchCount == 3)
    }

    @Test func cachedPage_keepsTheKeysTheSourceReturned() async throws {
        let cache = CacheInterceptor<Int, Int>()
        await cache.handle(page: Page(request: request(1), values: [1], prevKey: nil, nextKey: 7))
        guard case .complete(let page) = try await cache.intercept(request: request(1)) else {
            Issue.record("expected a hit"); return
        }
        #expect(page.nextKey == 7)
        #expect(page.prevKey == nil)
    }

    @Test func concurrentRequests_stayWithinTheBound() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(200))
        let cache = CacheInterceptor<Int, Int>(maxEntries: 16)
        let pager = Pager(source: source, interceptors: [cache])
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<8 {
                group.addTask {
                    for index in 0..<250 {
                        let key = (index * 7 + task * 13) % 200
                        let page = try await pager.load(self.request(key))
                        #expect(page.values == Array(key * 3 ..< key * 3 + 3))
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(cache.count <= 16)
        #expect(Set(cache.keysByRecency).count == cache.count)
    }
}

@Suite("LoggingInterceptor")
struct LoggingInterceptorTests {
    /// A key that counts how often it is turned into text.
    struct TracedKey: Hashable, Sendable, CustomStringConvertible {
        static let formatted = Journal()
        let value: Int
        var description: String {
            Self.formatted.add("\(value)")
            return "\(value)"
        }
    }

    struct TracedSource: PagingSource {
        var refreshKey: TracedKey { TracedKey(value: 0) }
        func fetch(request: PagingRequest<TracedKey>) async throws -> Page<TracedKey, Int> {
            Page(request: request, values: [request.key.value])
        }
    }

    @Test func logsRequestsAndPages_atTheirLevels() async throws {
        let journal = Journal()
        let logging = LoggingInterceptor<Int, Int>(minimumLevel: .debug) { level, message in
            journal.add("\(level): \(message)")
        }
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(2)), interceptors: [logging])
        _ = try await pager.load(pager.request(.append, key: 1, params: params()))
        #expect(journal.all.count == 2)
        #expect(journal.all[0].hasPrefix("debug: request append(key: 1"))
        #expect(journal.all[1].hasPrefix("info: received Page(append, key: 1, 3 values"))
    }

    @Test func failedLoads_areLoggedAtWarning() async throws {
        let journal = Journal()
        let logging = LoggingInterceptor<Int, Int>(minimumLevel: .warning) { level, message in journal.add("\(level): \(message)") }
        let source = ScriptedPagingSource(pages: numberedPages(2))
        source.script(key: 1, .fail(ScriptedError("down", isRetryable: false)))
        let pager = Pager(source: source, interceptors: [logging])
        _ = try? await pager.load(pager.request(.append, key: 1, params: params()))
        #expect(journal.all.count == 1)
        #expect(journal.all.first?.hasPrefix("warning: failed append(key: 1") == true && journal.all.first?.hasSuffix(": down") == true)
    }

    @Test func levelAboveInfo_dropsDebugAndInfo() async throws {
        let journal = Journal()
        let logging = LoggingInterceptor<Int, Int>(minimumLevel: .warning) { _, message in journal.add(message) }
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(2)), interceptors: [logging])
        _ = try await pager.load(pager.request(.append, key: 1, params: params()))
        #expect(journal.all.isEmpty)
    }

    @Test func levelOff_buildsNoString() async throws {
        let logged = Journal()
        let logging = LoggingInterceptor<TracedKey, Int>(minimumLevel: .off) { _, message in logged.add(message) }
        let pager = Pager(source: TracedSource(), interceptors: [logging])
        let before = TracedKey.formatted.all.count
        _ = try await pager.load(PagingRequest(kind: .append, keyChain: PagingKeyChain(key: TracedKey(value: 5)), params: params()))
        #expect(TracedKey.formatted.all.count == before)
        #expect(logged.all.isEmpty)

        let verbose = LoggingInterceptor<TracedKey, Int>(minimumLevel: .trace) { _, message in logged.add(message) }
        let loud = Pager(source: TracedSource(), interceptors: [verbose])
        _ = try await loud.load(PagingRequest(kind: .append, keyChain: PagingKeyChain(key: TracedKey(value: 6)), params: params()))
        #expect(TracedKey.formatted.all.count > before)
    }
}

/// Adds a token to every request's user info, as an authenticating interceptor does.
private struct AddToken: PagingInterceptor {
    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        var next = request
        next.params.userInfo["token"] = "t"
        return .proceed(next, handleAfterwards: false)
    }
}
