import Paging
import PagingTesting
import Synchronization
import Testing

@Suite("Pager: refresh and cancellation")
struct PagerCancellationTests {
    @Test func refreshDuringAppend_dropsTheAppendsPage_andNeverPublishesIt() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let pager = Pager(source: source)
        let collector = StateCollector(pager.states())
        async let append = Result { try await pager.load(pager.request(.append, key: 1, params: params())) }
        await source.waitUntilSuspended()
        let refreshed = try await pager.load(pager.refreshRequest(params: params()))
        #expect(refreshed.values == [0, 1, 2])
        source.release(key: 1)
        let result = await append
        #expect(throws: PagingError.supersededByRefresh) { try result.get() }
        let states = await collector.wait { $0.count >= 4 }
        #expect(states.map(\.label) == ["loading 1", "loading 0", "loaded 0", "cancelled 1"])
    }

    /// A pager of independent readers (`refreshSupersedes: false`, as `pager serve`): one
    /// reader's refresh neither drops nor cancels another's append in flight (a client's first
    /// page failed every other client's cursor request in flight with 502).
    @Test func aRefreshThatSupersedesNothing_leavesTheAppendsInFlight() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        source.script(key: 2, .suspend)
        let pager = Pager(source: source, refreshSupersedes: false)
        async let append = Result { try await pager.load(pager.request(.append, key: 1, params: params())) }
        let sent = pager.send(pager.request(.append, key: 2, params: params()))
        #expect(await eventually { source.suspendedCount == 2 })
        let refreshed = try await pager.load(pager.refreshRequest(params: params()))
        #expect(refreshed.values == [0, 1, 2])
        source.release(key: 1)
        source.release(key: 2)
        #expect(try await append.get().values == [3, 4, 5])
        #expect(try await sent.value.values == [6, 7, 8])
        #expect(!sent.isCancelled)
    }

    @Test func refresh_cancelsTheFetchOfASentAppend() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let pager = Pager(source: source)
        let append = pager.send(pager.request(.append, key: 1, params: params()))
        await source.waitUntilSuspended()
        _ = try await pager.send(pager.refreshRequest(params: params())).value
        // The suspended fetch was cancelled, not released.
        #expect(await eventually { source.suspendedCount == 0 })
        await #expect(throws: (any Error).self) { try await append.value }
        #expect(append.isCancelled)
    }

    @Test func cancellingTheCaller_cancelsItsFetch() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let pager = Pager(source: source)
        let collector = StateCollector(pager.states())
        let task = Task { try await pager.load(pager.request(.append, key: 1, params: params())) }
        await source.waitUntilSuspended()
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(source.suspendedCount == 0)
        let states = await collector.wait { $0.count >= 2 }
        #expect(states.map(\.label) == ["loading 1", "cancelled 1"])
    }

    @Test func whenTheCallerRunningASharedFetchIsCancelled_anotherCallerTakesOver() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let pager = Pager(source: source)
        let request = pager.request(.append, key: 1, params: params())
        let owner = Task { try await pager.load(request) }
        await source.waitUntilSuspended()
        let joiner = Task { try await pager.load(request) }
        #expect(await eventually { pager.joinedCallerCount == 1 })
        owner.cancel()
        let page = try await joiner.value
        #expect(page.values == [3, 4, 5])
        #expect(source.fetchCount == 2)
        await #expect(throws: CancellationError.self) { try await owner.value }
    }

    @Test func cancellingAJoiner_leavesTheSharedFetchRunning() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let pager = Pager(source: source)
        let request = pager.request(.append, key: 1, params: params())
        let owner = Task { try await pager.load(request) }
        await source.waitUntilSuspended()
        let joiner = Task { try await pager.load(request) }
        #expect(await eventually { pager.joinedCallerCount == 1 })
        joiner.cancel()
        await #expect(throws: CancellationError.self) { try await joiner.value }
        // It left: no longer counted (a probe: it was, until the load ended).
        #expect(pager.joinedCallerCount == 0)
        source.release(key: 1)
        #expect(try await owner.value.values == [3, 4, 5])
        #expect(source.fetchCount == 1)
    }

    /// Waiting for a suspension that never comes returns when the waiting task is cancelled
    /// (a probe: it yielded in a loop for ever, a core busy, the test hung).
    @Test(.timeLimit(.minutes(3))) func waitUntilSuspended_returnsWhenCancelled() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let waiter = Task { await source.waitUntilSuspended() }
        waiter.cancel()
        await waiter.value
        // And, not cancelled, when the count is reached: two suspended fetches.
        source.script(key: 1, .suspend)
        source.script(key: 2, .suspend)
        let pager = Pager(source: source)
        let two = Task { await source.waitUntilSuspended(count: 2) }
        let loads = [1, 2].map { key in Task { try await pager.load(pager.request(.append, key: key, params: params())) } }
        await two.value
        #expect(source.suspendedCount == 2)
        source.release(key: 1)
        source.release(key: 2)
        for load in loads { _ = try await load.value }
    }

    /// An older refresh that ends after a newer one is superseded: the cache keeps the newer
    /// refresh's page (the older one's replaced it, and the next load served the old data).
    @Test func anOlderRefreshEndingAfterANewerOne_isSuperseded_andTheCacheKeepsTheNewerPage() async throws {
        let source = ScriptedPagingSource(pages: [[1, 2, 3]])
        source.script(key: 0, .suspend)
        let cache = CacheInterceptor<Int, Int>()
        let pager = Pager(source: source, interceptors: [cache])
        async let older = Result { try await pager.load(pager.refreshRequest(params: params())) }
        await source.waitUntilSuspended()
        source.setPages([[7, 8, 9]])
        #expect(try await pager.load(pager.refreshRequest(params: params())).values == [7, 8, 9])
        // The older fetch answers with the data as it read it.
        source.setPages([[1, 2, 3]])
        source.release(key: 0)
        let result = await older
        #expect(throws: PagingError.supersededByRefresh) { try result.get() }
        #expect(cache.cachedPage(for: pager.refreshRequest(params: params()))?.values == [7, 8, 9])
    }

    /// A page on its way back through the interceptors when a refresh comes goes no further:
    /// the cache before it does not store it over the refresh's page, and the interceptors not
    /// yet handed it hear that the load was superseded.
    @Test func aPageOnItsWayBackWhenARefreshComes_goesNoFurther() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let journal = Journal()
        let cache = CacheInterceptor<Int, Int>()
        let gate = GateInterceptor(key: 1)
        let pager = Pager(source: source, interceptors: [
            RecordingInterceptor(name: "log", journal: journal, recordsFailures: true), cache, gate,
        ])
        let append = pager.request(.append, key: 1, params: params())
        async let appended = Result { try await pager.load(append) }
        #expect(await eventually { gate.reached })
        source.setPages(numberedPages(3).map { $0.map { $0 + 100 } })
        #expect(try await pager.load(pager.refreshRequest(params: params(userInfo: [PagingUserInfoKey.hardRefresh: "true"]))).values == [100, 101, 102])
        gate.open()
        let result = await appended
        #expect(throws: PagingError.supersededByRefresh) { try result.get() }
        #expect(cache.cachedPage(for: append) == nil, "the page from before the refresh was stored")
        #expect(journal.all.contains("log.loadFailed(1, \(PagingError.supersededByRefresh))"), "\(journal.all)")
        #expect(!journal.all.contains("log.handle(1)"))
        // The next append loads the data as it is now.
        #expect(try await pager.load(append).values == [103, 104, 105])
    }

    /// A load superseded before its page was handed back: the interceptors that let it proceed
    /// and asked to handle its page hear that it was superseded (they heard nothing).
    @Test func aLoadSupersededBeforeItsPageWasHandedBack_isHeardOf() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let journal = Journal()
        let pager = Pager(source: source, interceptors: [RecordingInterceptor(name: "log", journal: journal, recordsFailures: true)])
        async let appended = Result { try await pager.load(pager.request(.append, key: 1, params: params())) }
        await source.waitUntilSuspended()
        _ = try await pager.load(pager.refreshRequest(params: params()))
        source.release(key: 1)
        let result = await appended
        #expect(throws: PagingError.supersededByRefresh) { try result.get() }
        #expect(journal.all == ["log.intercept(1)", "log.intercept(0)", "log.handle(0)", "log.loadFailed(1, \(PagingError.supersededByRefresh))"])
    }

    /// Found by a probe: an append a manager's refresh cuts off (the manager cancels its task)
    /// was heard of as a CancellationError, not as superseded by the refresh.
    @Test func anAppendTheManagersRefreshCutsOff_isHeardOfAsSuperseded() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let journal = Journal()
        let manager = PaginationManager(source: source, pageSize: 3,
                                        interceptors: [RecordingInterceptor(name: "log", journal: journal, recordsFailures: true)])
        await manager.refresh().value
        source.script(key: 1, .suspend)
        let append = manager.append()
        await source.waitUntilSuspended()
        await manager.refresh().value
        await append.value
        #expect(journal.all.contains("log.loadFailed(1, \(PagingError.supersededByRefresh))"), "\(journal.all)")
        #expect(!journal.all.contains { $0.contains("CancellationError") }, "\(journal.all)")
        #expect(Array(manager.output.values) == [0, 1, 2])
    }

    /// A stale page's revalidation that started before a hard refresh, and ends after it, is
    /// dropped: the hard refresh's page stays cached.
    @Test func aRevalidationStartedBeforeAHardRefresh_isDropped() async throws {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: [[1, 2, 3]])
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(10), policy: .staleWhileRevalidate, clock: clock.pagingClock)
        let pager = Pager(source: source, interceptors: [cache])
        _ = try await pager.load(pager.refreshRequest(params: params()))
        clock.advance(by: .seconds(11))
        source.script(key: 0, .suspend)
        #expect(try await pager.load(pager.refreshRequest(params: params())).values == [1, 2, 3])
        await source.waitUntilSuspended()
        source.setPages([[7, 8, 9]])
        let hard = params(userInfo: [PagingUserInfoKey.hardRefresh: "true"])
        #expect(try await pager.load(pager.refreshRequest(params: hard)).values == [7, 8, 9])
        source.setPages([[1, 2, 3]])
        source.release(key: 0)
        await pager.backgroundLoadsFinished()
        #expect(cache.cachedPage(for: pager.refreshRequest(params: params()))?.values == [7, 8, 9])
    }

    @Test func manyConsumers_eachSeeEveryState() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source)
        let collectors = (0..<5).map { _ in StateCollector(pager.states()) }
        for key in 0..<3 { _ = try await pager.load(pager.request(.append, key: key, params: params())) }
        for collector in collectors {
            let states = await collector.wait { $0.count >= 6 }
            #expect(states.map(\.label) == ["loading 0", "loaded 0", "loading 1", "loaded 1", "loading 2", "loaded 2"])
        }
    }

    @Test func hundredConcurrentCallers_getTheirPages() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(10))
        let journal = Journal()
        let cache = CacheInterceptor<Int, Int>(maxEntries: 4)
        let pager = Pager(source: source, interceptors: [RecordingInterceptor(name: "r", journal: journal), cache])
        let collector = StateCollector(pager.states())
        try await withThrowingTaskGroup(of: (Int, [Int]).self) { group in
            for caller in 0..<100 {
                group.addTask {
                    let key = caller % 10
                    let kind: PagingRequestKind = caller % 7 == 0 ? .refresh : .append
                    do {
                        let page = try await pager.load(pager.request(kind, key: key, params: params()))
                        return (key, page.values)
                    } catch PagingError.supersededByRefresh {
                        return (key, Array(key * 3 ..< key * 3 + 3))
                    }
                }
            }
            for try await (key, values) in group {
                #expect(values == Array(key * 3 ..< key * 3 + 3))
            }
        }
        #expect(journal.all.count >= 100)
        _ = collector.all
    }
}
