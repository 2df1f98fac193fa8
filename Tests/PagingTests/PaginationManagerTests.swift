import Foundation
import Synchronization
import Paging
import PagingTesting
import Testing

@Suite("PaginationManager")
struct PaginationManagerTests {
    func manager(
        _ source: ScriptedPagingSource<Int>, pageSize: Int = 3, maxSize: Int? = nil,
        prefetchDistance: Int = 0, interceptors: [any PagingInterceptor<Int, Int>] = []
    ) -> PaginationManager<Int, Int> {
        PaginationManager(source: source, pageSize: pageSize, interceptors: interceptors,
                          maxSize: maxSize, prefetchDistance: prefetchDistance)
    }

    @Test func refreshThenAppends_growTheList_untilTheEnd() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = manager(source)
        await manager.refresh().value
        #expect(Array(manager.output.values) == [0, 1, 2])
        #expect(manager.output.prependState.isEndReached)
        await manager.append().value
        await manager.append().value
        #expect(Array(manager.output.values) == Array(0..<9))
        #expect(manager.output.appendState.isEndReached)
        await manager.append().value
        #expect(source.fetchCount == 3)
    }

    /// `append()` while an append runs returns a task that waits for it: awaiting it waits for
    /// the page (a probe: an ended task came back, and 99 of 100 callers read the list before the
    /// page was in it).
    @Test func appendWhileAnAppendRuns_returnsATaskThatWaitsForIt() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let manager = manager(source)
        await manager.refresh().value
        let first = manager.append()
        await source.waitUntilSuspended()
        let again = (0..<20).map { _ in manager.append() }
        source.release(key: 1)
        await again[0].value
        #expect(Array(manager.output.values) == Array(0..<6))
        #expect(source.fetchCount == 2)
        await first.value
    }

    /// Found by a probe: cancelling the task of an append asked for while another caller's load
    /// ran (a refresh, or an append) cancelled that load: the refresh's list was left empty and
    /// idle, with nothing for retry() to load, and the append's page was dropped. Only a load's
    /// starter's task cancels it.
    @Test(.timeLimit(.minutes(3)), arguments: [PagingRequestKind.refresh, .append])
    func cancellingTheTaskOfAnAppendThatJoinedALoad_leavesThatLoadAlone(_ running: PagingRequestKind) async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = manager(source)
        let key = running == .refresh ? 0 : 1
        source.script(key: key, .suspend)
        if running == .append { await manager.refresh().value }
        let load = running == .refresh ? manager.refresh() : manager.append()
        await source.waitUntilSuspended()
        manager.append().cancel()
        source.release(key: key)
        await load.value
        #expect(!load.isCancelled)
        #expect(Array(manager.output.values) == Array(0..<(running == .refresh ? 3 : 6)))
        #expect(manager.output[running].error == nil)
    }

    /// `append()` while a refresh around the reader (what an invalidation runs) or a `load(_:)`
    /// runs returns a task that waits for it (a probe: those loads were not in flight for
    /// `append()`, which handed out a task already ended).
    @Test(.timeLimit(.minutes(3)), arguments: ["refreshAroundReader", "load"])
    func appendWhileALoadNotStartedByItRuns_returnsATaskThatWaitsForIt(_ how: String) async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = manager(source)
        await manager.refresh().value
        let key = how == "load" ? 1 : 0
        source.script(key: key, .suspend)
        let running = how == "load" ? Task { await manager.load(.append) } : manager.refreshAroundReader()
        await source.waitUntilSuspended()
        let append = manager.append()
        let waited = Locked(false)
        let waiter = Task {
            await append.value
            waited.withLock { $0 = true }
        }
        // Still held: the task from append() must not have ended.
        try await Task.sleep(for: .milliseconds(50))
        #expect(!waited.withLock { $0 })
        source.release(key: key)
        await waiter.value
        await running.value
        #expect(!manager.output.isAppending && !manager.output.isRefreshing)
        #expect(Array(manager.output.values) == (how == "load" ? Array(0..<6) : [0, 1, 2]))
    }

    /// A task handed out for a `load(.refresh)` in flight still ends when a newer refresh takes
    /// its place before it is applied.
    @Test(.timeLimit(.minutes(3))) func aTaskForACallersRefresh_endsWhenANewerRefreshTakesItsPlace() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 0, .suspend, .suspend)
        let manager = manager(source)
        let first = Task { await manager.load(.refresh) }
        await source.waitUntilSuspended()
        let waiting = manager.append()
        let newer = manager.refresh()
        await source.waitUntilSuspended(count: 2)
        source.release(key: 0)
        await waiting.value
        await first.value
        await newer.value
        #expect(Array(manager.output.values) == [0, 1, 2])
    }

    /// A failure at an end goes back to idle once `maxSize` dropped the page it followed: the
    /// end moved, and the page now after it had loaded (a probe: the failure stayed, and
    /// `itemVisible` never loaded at that end again).
    @Test(arguments: [PagingRequestKind.append, .prepend])
    func aFailureAtAnEnd_goesIdle_whenMaxSizeDropsThatEnd(_ end: PagingRequestKind) async throws {
        let source = ScriptedPagingSource(pages: numberedPages(10))
        let manager = manager(source, pageSize: 3, maxSize: 6)
        await manager.load(.refresh, refreshKey: 5)
        if end == .append {
            await manager.append().value
            source.script(key: 7, .fail(ScriptedError("offline")))
            await manager.append().value
            #expect(manager.output.appendState.error != nil)
            await manager.prepend().value
            await manager.prepend().value
            #expect(Array(manager.output.values) == Array(9..<15))
            #expect(manager.output.appendState.isIdle)
            manager.itemVisible(at: manager.output.values.count - 1)
            await manager.append().value
            #expect(Array(manager.output.values) == Array(12..<18))
        } else {
            await manager.prepend().value
            source.script(key: 3, .fail(ScriptedError("offline")))
            await manager.prepend().value
            #expect(manager.output.prependState.error != nil)
            await manager.append().value
            await manager.append().value
            #expect(Array(manager.output.values) == Array(18..<24))
            #expect(manager.output.prependState.isIdle)
            manager.itemVisible(at: 0)
            await manager.prepend().value
            #expect(Array(manager.output.values) == Array(15..<21))
        }
        #expect(source.fetchCount(forKey: end == .append ? 7 : 3) == 1)
    }

    /// A source's refresh key is asked outside the manager's lock: a source that reads the
    /// manager's output there (or a plugin that takes its time) held every other caller, and
    /// this one deadlocked.
    @Test(.timeLimit(.minutes(3))) func aSourceWhoseRefreshKeyReadsTheOutput_refreshes() async throws {
        let source = OutputReadingSource()
        let manager = PaginationManager(source: source, pageSize: 3)
        source.manager.withLock { $0 = manager }
        await manager.refresh().value
        #expect(Array(manager.output.values) == [0, 1, 2])
        await manager.append().value
        #expect(Array(manager.output.values) == Array(0..<6))
    }

    /// Cancelling the task `retry()` returns cancels its loads, as cancelling those of
    /// `append()` does (a probe: the retry ran on, and its page was applied).
    @Test(.timeLimit(.minutes(3))) func cancellingRetrysTask_cancelsItsLoads() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .fail(ScriptedError("offline")), .suspend)
        let manager = manager(source)
        await manager.refresh().value
        await manager.append().value
        #expect(manager.output.appendState.error != nil)
        let retry = manager.retry()
        await source.waitUntilSuspended()
        retry.cancel()
        await retry.value
        #expect(Array(manager.output.values) == [0, 1, 2])
        #expect(!manager.output.isAppending && source.suspendedCount == 0)
    }

    /// Keys that disagree are not enough to call a prepend wrong (cursor APIs name one page by
    /// several cursors); keys that disagree and values that repeat are.
    @Test(arguments: [(overlap: 0, fails: false), (overlap: 4, fails: true)])
    func prepend_failsOnlyWhenItsKeysDisagree_andItsValuesRepeat(overlap: Int, fails: Bool) async throws {
        let manager = PaginationManager(source: CursorLikeSource(overlap: overlap), pageSize: 10)
        await manager.refresh().value
        await manager.prepend().value
        let error = manager.output.prependState.error as? PagingError
        #expect((error != nil) == fails, "\(String(describing: error))")
        if fails {
            #expect("\(error!)".contains("CursorLikeSource"), "the source is named: \(error!)")
            #expect("\(error!)".contains("repeats the first \(overlap) values"))
            #expect(Array(manager.output.values) == Array(100..<110))
        } else {
            #expect(Array(manager.output.values) == Array(90..<110))
        }
    }

    /// In data whose values repeat (every value 7), equal values at the seam are no sign of an
    /// overlap: the prepend goes through (it was refused, and every retry with it).
    @Test func prepend_ofDataWhoseValuesRepeat_isNotTakenForAnOverlap() async throws {
        let manager = PaginationManager(source: CursorLikeSource(overlap: 0, repeating: 7), pageSize: 10)
        await manager.refresh().value
        await manager.prepend().value
        #expect(manager.output.prependState.error == nil, "\(String(describing: manager.output.prependState.error))")
        #expect(Array(manager.output.values) == Array(repeating: 7, count: 20))
    }

    /// Found by a probe: a store whose page named an earlier page as its next one repeated the
    /// same pages for as long as paging went on (147 lines of 14 items, exit 0). A key the list
    /// holds already fails that direction, unfetched.
    @Test func aKeyTheListHoldsAlready_failsTheLoad_unfetched() async throws {
        final class GoingRound: PagingSource, Sendable {
            let fetched = Locked<[Int]>([])
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> { PagingKeyChain(key: key) }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                fetched.withLock { $0.append(request.key) }
                // 0 -> 1 -> 2 -> 1, and 0 <- 2 before page 0.
                let next = [0: 1, 1: 2, 2: 1][request.key]
                return Page(request: request, values: [request.key * 10], prevKey: request.key == 0 ? 2 : nil, nextKey: next)
            }
        }
        let source = GoingRound()
        let manager = PaginationManager(source: source, pageSize: 1)
        await manager.refresh().value
        for _ in 0..<4 { await manager.append().value }
        #expect(Array(manager.output.values) == [0, 10, 20])
        let error = manager.output.appendState.error as? PagingError
        #expect(error == .repeatedKey(source: "GoingRound", kind: .append, key: "1"), "\(String(describing: error))")
        #expect("\(error!)" == "GoingRound: the append would load the page at key 1, which the list loaded already (the keys go round); nothing was loaded")
        await manager.prepend().value
        #expect(manager.output.prependState.error as? PagingError == .repeatedKey(source: "GoingRound", kind: .prepend, key: "2"))
        #expect(source.fetched.withLock { $0 } == [0, 1, 2])
    }

    /// Found by a probe: with maxSize, the keys of dropped pages were forgotten, so keys that go
    /// round repeated the same pages for as long as paging went on (`pager run`, which keeps only
    /// the last page as it streams, printed a cycle of two pages as many times as asked). An
    /// append to a page dropped at the start fails as one to a page held does; a prepend loads
    /// it again, as paging back should, and so does an append a page a prepend dropped. Paging
    /// back forgets the keys dropped before: the cycle is found again on the way on.
    @Test func withMaxSize_keysThatGoRoundPastDroppedPages_failTheLoad() async throws {
        final class GoingRoundLater: PagingSource, Sendable {
            let fetched = Locked<[Int]>([])
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> { PagingKeyChain(key: key) }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                fetched.withLock { $0.append(request.key) }
                // 0 -> 1 -> 2 -> 3 -> 1; before each page, the one numbered before it.
                let next = [0: 1, 1: 2, 2: 3, 3: 1][request.key]
                return Page(request: request, values: [request.key * 10], prevKey: request.key == 0 ? nil : request.key - 1, nextKey: next)
            }
        }
        let source = GoingRoundLater()
        let manager = PaginationManager(source: source, pageSize: 1, maxSize: 1)
        await manager.refresh().value
        for _ in 0..<5 { await manager.append().value }
        #expect(Array(manager.output.values) == [30])
        #expect(manager.output.appendState.error as? PagingError == .repeatedKey(source: "GoingRoundLater", kind: .append, key: "1"))
        #expect(source.fetched.withLock { $0 } == [0, 1, 2, 3])
        // Back: page 2 again (page 3 dropped at the end); on: pages 3 and 1 again, then 2 is refused.
        await manager.retry().value
        await manager.prepend().value
        #expect(Array(manager.output.values) == [20])
        for _ in 0..<4 { await manager.append().value }
        #expect(Array(manager.output.values) == [10])
        #expect(manager.output.appendState.error as? PagingError == .repeatedKey(source: "GoingRoundLater", kind: .append, key: "2"))
        #expect(source.fetched.withLock { $0 } == [0, 1, 2, 3, 2, 3, 1])
    }

    /// Found by review: a page named by one key going on and by another going back (a cursor
    /// API's after and before cursors) was refused going on again after paging back, with
    /// maxSize: the key it had been dropped under was still remembered.
    @Test func withMaxSize_pagingOnAfterPagingBack_loadsPagesNamedOtherwiseFromTheOtherSide() async throws {
        struct Cursors: PagingSource {
            var refreshKey: String { "f0" }
            func keyChain(for key: String, pageSize: Int) -> PagingKeyChain<String> { PagingKeyChain(key: key) }
            func fetch(request: PagingRequest<String>) async throws -> Page<String, Int> {
                // Page n is "f<n>" going on and "b<n>" going back.
                let n = Int(request.key.dropFirst())!
                return Page(request: request, values: [n], prevKey: n == 0 ? nil : "b\(n - 1)", nextKey: n == 5 ? nil : "f\(n + 1)")
            }
        }
        let manager = PaginationManager(source: Cursors(), pageSize: 1, maxSize: 1)
        await manager.refresh().value
        for _ in 0..<2 { await manager.append().value }
        for _ in 0..<2 { await manager.prepend().value }
        #expect(Array(manager.output.values) == [0])
        for _ in 0..<5 { await manager.append().value }
        #expect(Array(manager.output.values) == [5])
        #expect(manager.output.appendState.isEndReached, "\(manager.output.appendState)")
    }

    /// The keys of dropped pages are remembered up to a bound: paging on for ever with maxSize
    /// keeps as little memory, and a key forgotten may be loaded again.
    @Test func withMaxSize_theDroppedKeysRememberedAreBounded() async throws {
        final class Endless: PagingSource, Sendable {
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> { PagingKeyChain(key: key) }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                // 0 -> 1 -> ... -> 5,000 -> 0: a cycle longer than what is remembered.
                Page(request: request, values: [request.key], prevKey: nil, nextKey: request.key == 5_000 ? 0 : request.key + 1)
            }
        }
        let manager = PaginationManager(source: Endless(), pageSize: 1, maxSize: 1)
        await manager.refresh().value
        for _ in 0..<5_001 { await manager.append().value }
        #expect(Array(manager.output.values) == [0], "page 0, forgotten, was loaded again")
        #expect(manager.output.appendState.error == nil)
    }

    /// Keys an interceptor's transform sets that go round: the error does not lay them on the
    /// source alone (a plugin author debugged the wrong plugin).
    @Test func aKeyAnInterceptorSetThatGoesRound_isNotLaidOnTheSourceAlone() async throws {
        struct Straight: PagingSource {
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> { PagingKeyChain(key: key) }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                Page(request: request, values: [request.key], prevKey: nil, nextKey: request.key + 1)
            }
        }
        struct BackToStart: PagingInterceptor {
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
                .proceed(request, handleAfterwards: true)
            }
            func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
                var page = page
                page.nextKey = 0
                return page
            }
        }
        let manager = PaginationManager(pager: Pager(source: Straight(), interceptors: [BackToStart()]), configuration: .init(pageSize: 1))
        await manager.refresh().value
        await manager.append().value
        let error = manager.output.appendState.error as? PagingError
        #expect(error == .repeatedKey(source: "Straight, or an interceptor that set page keys", kind: .append, key: "0"), "\(String(describing: error))")
    }

    // MARK: Found by a probe of the Swift API

    /// The refresh planned last reached the pager first (its key chain came quicker): the pager
    /// superseded it for the one planned before, whose page this manager dropped, and the list
    /// stayed empty with every state idle. The refresh planned last is the one shown.
    @Test func twoRefreshesReachingThePagerInTheOtherOrder_showTheLastOnesPage() async throws {
        final class SlowFirstKeyChain: PagingSource, Sendable {
            let calls = Locked(0)
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> {
                if calls.withLock({ calls in defer { calls += 1 }; return calls }) == 0 { usleep(50_000) }
                return PagingKeyChain(key: key, nextKey: key + 1)
            }
            // Longer than the first key chain: the second refresh is still loading when the
            // first reaches the pager.
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                try await Task.sleep(for: .milliseconds(300))
                return Page(request: request, values: [1, 2, 3])
            }
        }
        let source = SlowFirstKeyChain()
        let manager = PaginationManager(source: source, pageSize: 3)
        let first = manager.refresh()
        #expect(await eventually { source.calls.withLock { $0 } == 1 })
        let second = manager.refresh()
        await first.value
        await second.value
        #expect(Array(manager.output.values) == [1, 2, 3] && manager.output.refreshState.isIdle, "\(manager.output.refreshState)")
    }

    /// Found by a second probe: the refresh planned last was superseded twice by refreshes
    /// planned before it (their key chains came late) and loaded again only once: the list
    /// stayed empty, every state idle, no error. It loads again as often as it is superseded.
    @Test(.timeLimit(.minutes(3)))
    func theLastRefresh_supersededTwiceByEarlierOnes_showsItsPage() async throws {
        final class Gated: PagingSource, Sendable {
            var refreshKey: Int { 0 }
            /// The first two key chains wait for their semaphore (on threads of their own).
            let heldKeyChains = [DispatchSemaphore(value: 0), DispatchSemaphore(value: 0)]
            let keyChains = Locked(0)
            /// Fetches 1 and 3 wait to be let go.
            let fetches = Locked(0)
            let waitingFetches = Locked<[Int: CheckedContinuation<Void, Never>]>([:])
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> {
                let call = keyChains.withLock { $0 += 1; return $0 }
                if call <= 2 { heldKeyChains[call - 1].wait() }
                return PagingKeyChain(key: key, nextKey: key + 1)
            }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, String> {
                let call = fetches.withLock { $0 += 1; return $0 }
                if call == 1 || call == 3 {
                    await withCheckedContinuation { continuation in waitingFetches.withLock { $0[call] = continuation } }
                }
                return Page(request: request, values: [request.params.userInfo["who"] ?? "?"])
            }
            func letGo(fetch call: Int) async -> Bool {
                guard await eventually({ waitingFetches.withLock { $0[call] != nil } }) else { return false }
                waitingFetches.withLock { $0.removeValue(forKey: call) }?.resume()
                return true
            }
        }
        /// Runs its tasks on a queue of its own: a key chain blocking there holds none of the
        /// few threads that run the tests' tasks.
        final class QueueExecutor: TaskExecutor {
            let queue = DispatchQueue(label: "paging.tests.refresh-order")
            func enqueue(_ job: consuming ExecutorJob) {
                let job = UnownedJob(job)
                queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
            }
        }
        let source = Gated()
        let manager = PaginationManager(source: source, pageSize: 1)
        let first = Task(executorPreference: QueueExecutor()) { await manager.load(.refresh, userInfo: ["who": "first"]) }
        #expect(await eventually { source.keyChains.withLock { $0 } == 1 })
        let second = Task(executorPreference: QueueExecutor()) { await manager.load(.refresh, userInfo: ["who": "second"]) }
        #expect(await eventually { source.keyChains.withLock { $0 } == 2 })
        let last = Task { await manager.load(.refresh, userInfo: ["who": "last"]) }
        #expect(await eventually { source.fetches.withLock { $0 } == 1 })
        // The first reaches the pager and supersedes the last's fetch; the last loads again.
        source.heldKeyChains[0].signal()
        await first.value
        #expect(await source.letGo(fetch: 1))
        #expect(await eventually { source.fetches.withLock { $0 } == 3 })
        // The second supersedes the last's second fetch.
        source.heldKeyChains[1].signal()
        await second.value
        #expect(await source.letGo(fetch: 3))
        await last.value
        #expect(Array(manager.output.values) == ["last"] && manager.output.refreshState.isIdle,
                "\(Array(manager.output.values)) \(manager.output.refreshState)")
    }

    /// Found by a review: two managers sharing one pager each loaded their refresh again when
    /// the other's superseded it, superseding the other in turn: 119 fetches in 3 s, without
    /// end. A refresh of another manager supersedes it for good (its own older ones do not).
    @Test(.timeLimit(.minutes(3)))
    func twoManagersOfOnePager_refreshingAtOnce_doNotSupersedeEachOtherForEver() async throws {
        final class Slow: PagingSource, Sendable {
            var refreshKey: Int { 0 }
            let fetches = Locked(0)
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, String> {
                fetches.withLock { $0 += 1 }
                try await Task.sleep(for: .milliseconds(50))
                return Page(request: request, values: ["a"])
            }
        }
        let source = Slow()
        let pager = Pager(source: source)
        let configuration = PaginationManager<Int, String>.Configuration(pageSize: 1)
        let a = PaginationManager(pager: pager, configuration: configuration)
        let b = PaginationManager(pager: pager, configuration: configuration)
        let first = Task { await a.load(.refresh) }
        #expect(await eventually { source.fetches.withLock { $0 } == 1 })
        await b.load(.refresh)
        await first.value
        #expect(source.fetches.withLock { $0 } <= 3, "\(source.fetches.withLock { $0 }) fetches")
        #expect(Array(b.output.values) == ["a"])
        // Found by a probe: the manager whose refresh the other's superseded ended idle with an
        // empty list and no error. It says so, and its retry loads it.
        #expect(a.output.values.isEmpty && a.output.refreshState.error as? PagingError == .supersededByRefresh,
                "\(a.output.refreshState)")
        await a.retry().value
        #expect(Array(a.output.values) == ["a"] && a.output.refreshState.isIdle, "\(a.output.refreshState)")
    }

    /// A full page whose next key is its own was fetched again by every append, for ever.
    @Test func aPageWhoseNextKeyIsItsOwn_failsTheAppend() async throws {
        final class SelfLoop: PagingSource, Sendable {
            let fetches = Locked(0)
            var refreshKey: Int { 0 }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, String> {
                fetches.withLock { $0 += 1 }
                return Page(request: request, values: ["a", "b"], prevKey: nil, nextKey: 0)
            }
        }
        let source = SelfLoop()
        let manager = PaginationManager(source: source, pageSize: 2)
        await manager.refresh().value
        for _ in 0..<3 { await manager.append().value }
        #expect("\(manager.output.appendState.error.map { "\($0)" } ?? "no error")".contains("the append would load the page at key 0, which the list loaded already"))
        #expect(source.fetches.withLock { $0 } == 1)
    }

    /// A prepend and an append naming one page, started together, both added it.
    @Test func aPrependAndAnAppendOfOnePage_addItOnce() async throws {
        struct BothEnds: PagingSource {
            var refreshKey: Int { 5 }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, String> {
                request.key == 5 ? Page(request: request, values: ["e1", "e2"], prevKey: 4, nextKey: 4)
                    : Page(request: request, values: ["d1", "d2"], prevKey: nil, nextKey: 5)
            }
        }
        let manager = PaginationManager(source: BothEnds(), pageSize: 2)
        await manager.refresh().value
        let prepend = manager.prepend(), append = manager.append()
        await prepend.value
        await append.value
        #expect(Set(manager.output.values).count == manager.output.values.count, "\(Array(manager.output.values))")
        #expect(manager.output.values.count == 4)
        let failed = [manager.output.prependState, manager.output.appendState].compactMap { $0.error as? PagingError }
        #expect(failed.count == 1 && "\(failed[0])".contains("which the list loaded already"), "\(failed)")
    }

    /// A failed refresh keeps the list, and what its ends say (both ends read "more to load").
    @Test func aFailedRefresh_keepsTheEndsOfTheListShown() async throws {
        let source = ScriptedPagingSource(pages: [[1, 2], [3, 4]])
        let manager = manager(source, pageSize: 2)
        await manager.refresh().value
        await manager.append().value
        source.script(key: 0, .fail(ScriptedError("offline")))
        await manager.refresh().value
        #expect(manager.output.refreshState.error != nil)
        #expect(manager.output.prependState.isEndReached && manager.output.appendState.isEndReached)
        #expect(Array(manager.output.values) == [1, 2, 3, 4])
    }

    /// A CancellationError a source throws while nobody cancelled the load is a failure (it
    /// left the direction idle, with nothing to retry).
    @Test func aCancellationErrorNobodyAskedFor_isAFailure() async throws {
        let source = ScriptedPagingSource(pages: [[1, 2], [3, 4]])
        source.script(key: 1, .fail(CancellationError()))
        let manager = manager(source, pageSize: 2)
        await manager.refresh().value
        await manager.append().value
        #expect(manager.output.appendState.error is CancellationError)
        await manager.retry().value
        #expect(Array(manager.output.values) == [1, 2, 3, 4])
    }

    @Test func appendWithNothingLoaded_refreshes() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = manager(source)
        await manager.append().value
        #expect(Array(manager.output.values) == [0, 1, 2])
    }

    /// A first page without items (a filter dropped them all) still names the next page: an
    /// append follows it (it refreshed again and again, and the items after it were never loaded).
    @Test func anEmptyFirstPage_isFollowed_notRefreshedAgain() async throws {
        let source = ScriptedPagingSource(pages: [[], [], [1, 2, 3], [4]])
        let manager = manager(source)
        await manager.refresh().value
        #expect(manager.output.values.isEmpty && manager.output.values.pageCount == 1)
        for _ in 0..<8 where !manager.output.appendState.isEndReached { await manager.append().value }
        #expect(Array(manager.output.values) == [1, 2, 3, 4])
        #expect(manager.output.appendState.isEndReached)
        // On screen (pager browse tells the manager after each page): with pages but no item,
        // the end is near, and the pages after load.
        let visible = self.manager(ScriptedPagingSource(pages: [[], [5, 6, 7]]), prefetchDistance: 2)
        await visible.refresh().value
        #expect(await eventually {
            visible.itemVisible(at: 0)
            return Array(visible.output.values) == [5, 6, 7]
        })
    }

    @Test func refresh_replacesEverything() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = manager(source)
        await manager.refresh().value
        await manager.append().value
        source.setPages([[10, 11, 12], [13, 14, 15]])
        await manager.refresh().value
        #expect(Array(manager.output.values) == [10, 11, 12])
        #expect(manager.output.appendState.isIdle)
    }

    @Test func prepend_addsAtTheStart_fromAMiddleRefreshKey() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3), refreshKey: 2)
        let manager = manager(source)
        await manager.refresh().value
        #expect(Array(manager.output.values) == [6, 7, 8])
        await manager.prepend().value
        await manager.prepend().value
        #expect(Array(manager.output.values) == Array(0..<9))
        #expect(manager.output.prependState.isEndReached)
        #expect(manager.output.appendState.isEndReached)
    }

    @Test func incompleteLastPage_isRequestedAgain_andReplaced_untilTheEnd() async throws {
        let source = ScriptedPagingSource(pages: [[0, 1, 2], [3], []])
        let manager = manager(source)
        await manager.refresh().value
        await manager.append().value
        #expect(Array(manager.output.values) == [0, 1, 2, 3])
        source.setPages([[0, 1, 2], [3, 4, 5], [6]])
        await manager.append().value
        #expect(Array(manager.output.values) == [0, 1, 2, 3, 4, 5])
        #expect(manager.output.values.pageCount == 2)
        await manager.append().value
        #expect(Array(manager.output.values) == Array(0...6))
        #expect(manager.output.appendState.isEndReached)
        // The last page is incomplete, but the end is reached: nothing more is fetched.
        await manager.append().value
        #expect(source.fetchedKeys == [0, 1, 1, 2])
    }

    /// Found by a probe: with a cache in front, the cache answered the reload with the short
    /// page it held, and the items the page had gained were never loaded.
    @Test func anIncompleteLastPage_isReloadedFromTheSource_pastACache() async throws {
        let source = ScriptedPagingSource(pages: [[0, 1, 2], [3], []])
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(600), maxEntries: 100)
        let manager = manager(source, interceptors: [cache])
        await manager.refresh().value
        await manager.append().value
        source.setPages([[0, 1, 2], [3, 4, 5], [6]])
        await manager.append().value
        await manager.append().value
        #expect(Array(manager.output.values) == Array(0...6))
        #expect(source.fetchedKeys == [0, 1, 1, 2])
        // The reloaded page replaced the short one under the same identity: a plain request
        // for it is answered with the grown page.
        let plain = PagingRequest(kind: .append, keyChain: PagingKeyChain(key: 1), params: PagingRequestParams(pageSize: 3))
        #expect(cache.cachedPage(for: plain)?.values == [3, 4, 5])
    }

    /// Found by a probe: a transform that drops values (a filter) made full pages short, and
    /// each was fetched again as a short last page; with a cache before the filter, too.
    @Test func pagesAFilterMadeShort_areNotLoadedAgain() async throws {
        struct EvenOnly: PagingInterceptor {
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
                .proceed(request, handleAfterwards: true)
            }
            func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
                var page = page
                page.values.removeAll { $0 % 2 == 1 }
                return page
            }
        }
        let source = ScriptedPagingSource(pages: numberedPages(4))
        let filtered = manager(source, interceptors: [EvenOnly()])
        await filtered.refresh().value
        for _ in 0..<4 { await filtered.append().value }
        #expect(Array(filtered.output.values) == [0, 2, 4, 6, 8, 10])
        #expect(source.fetchedKeys == [0, 1, 2, 3])
        #expect(filtered.output.appendState.isEndReached)

        // An interceptor before the filter that builds the page anew from its request (whose
        // key chain names the next page): the mark stays, and no next key is lost.
        struct Rebuilding: PagingInterceptor {
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
                .proceed(request, handleAfterwards: true)
            }
            func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
                Page(request: page.request, values: page.values)
            }
        }
        let rebuilt = ScriptedPagingSource(pages: numberedPages(4))
        let rebuilding = manager(rebuilt, interceptors: [Rebuilding(), EvenOnly()])
        await rebuilding.refresh().value
        for _ in 0..<4 { await rebuilding.append().value }
        #expect(Array(rebuilding.output.values) == [0, 2, 4, 6, 8, 10])
        #expect(rebuilt.fetchedKeys == [0, 1, 2, 3])

        // Behind a cache: its hits are not loaded again either.
        let cached = ScriptedPagingSource(pages: numberedPages(4))
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(600), maxEntries: 100)
        let behindCache = manager(cached, interceptors: [cache, EvenOnly()])
        await behindCache.refresh().value
        for _ in 0..<4 { await behindCache.append().value }
        await behindCache.refresh().value
        for _ in 0..<4 { await behindCache.append().value }
        #expect(Array(behindCache.output.values) == [0, 2, 4, 6, 8, 10])
        #expect(cached.fetchedKeys == [0, 1, 2, 3], "the second pass is answered by the cache")
    }

    /// Found by a probe: a page-number source whose key chain always names a next page (it does
    /// not know where the data ends) got an empty page added after its short last page, which
    /// paging then went on from: items the short page gained later were skipped for good. The
    /// empty page reaches the end, for now; a refresh looks again.
    @Test func anEmptyPageAfterAShortLastPage_reachesTheEnd_andARefreshLooksAgain() async throws {
        final class Growing: PagingSource, Sendable {
            let count = Locked(47)
            let fetched = Locked<[Int]>([])
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> {
                PagingKeyChain(key: key, prevKey: key == 0 ? nil : key - 1, nextKey: key + 1)
            }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                fetched.withLock { $0.append(request.key) }
                let size = request.params.pageSize, low = request.key * size, count = count.withLock { $0 }
                return Page(request: request, values: Array(low..<max(low, min(count, low + size))))
            }
        }
        let source = Growing()
        let manager = PaginationManager(source: source, pageSize: 10, maxSize: 100)
        await manager.refresh().value
        for _ in 0..<14 { await manager.append().value }
        #expect(Array(manager.output.values) == Array(0..<47))
        #expect(manager.output.values.pageCount == 5)
        #expect(manager.output.appendState.isEndReached, "\(manager.output.appendState)")
        #expect(source.fetched.withLock { $0 } == [0, 1, 2, 3, 4, 4, 5], "nothing fetched once the end is reached")
        source.count.withLock { $0 = 200 }
        await manager.refresh().value
        for _ in 0..<19 { await manager.append().value }
        #expect(Array(manager.output.values) == Array(100..<200), "every item, none skipped")
    }

    /// Found by a probe: the same source with a full last page got an empty page added after it,
    /// then another after each reload, without end (maxSize, which counts values, dropped none;
    /// a reader at the end kept loading). Empty pages in a row are followed (a source may have
    /// none to show in a page), two of them: a third reaches the end.
    @Test func emptyPagesInARow_atTheEnd_reachItAfterTwo() async throws {
        final class EndsOnAPage: PagingSource, Sendable {
            let fetched = Locked<[Int]>([])
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> { PagingKeyChain(key: key, nextKey: key + 1) }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                fetched.withLock { $0.append(request.key) }
                let low = request.key * request.params.pageSize
                return Page(request: request, values: Array(low..<max(low, min(20, low + request.params.pageSize))))
            }
        }
        let source = EndsOnAPage()
        let manager = PaginationManager(source: source, pageSize: 10, maxSize: 30)
        await manager.refresh().value
        for _ in 0..<200 { await manager.append().value }
        #expect(Array(manager.output.values) == Array(0..<20))
        #expect(manager.output.values.pageCount == 4, "two empty pages at most")
        #expect(manager.output.appendState.isEndReached, "\(manager.output.appendState)")
        #expect(source.fetched.withLock { $0 } == [0, 1, 2, 2, 3, 3, 4])
    }

    /// Found by a probe: with maxSize under pageSize + 2 × prefetchDistance, a reader that did not
    /// move loaded at both ends in turn, each load dropping the other end, until the item on
    /// screen itself was dropped. The distance used is at most (maxSize - pageSize) / 2.
    @Test func aPrefetchDistanceTooLargeForMaxSize_loadsNothingWhileTheReaderStaysStill() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(1_000, size: 10))
        let manager = PaginationManager(source: source, pageSize: 10, maxSize: 20, prefetchDistance: 10)
        await manager.refresh().value
        for _ in 0..<5 { await manager.append().value }
        let fetched = source.fetchedKeys.count
        for _ in 0..<50 {
            let output = manager.output
            manager.itemVisible(at: output.values.count / 2, of: output)
            // What the report started, if anything, ends before the next report.
            for await current in manager.outputs() where !current.appendState.isLoading && !current.prependState.isLoading { break }
        }
        #expect(source.fetchedKeys.count == fetched, "\(source.fetchedKeys)")
    }

    /// Found by a second probe: at the distance the first fix allowed, (maxSize - pageSize) / 2,
    /// a reader that stayed on the first item loaded at both ends in turn, for ever: a prepend
    /// left its item within the distance of the end, the append after it within the distance of
    /// the start. Each report now loads until the item is farther than the distance from both
    /// ends, then nothing more.
    @Test(arguments: [(12, 4, 4), (100, 20, 50), (10, 4, 10), (30, 10, 10)])
    func aStillReaderAtAnEnd_loadsAFewPages_thenNothing(maxSize: Int, pageSize: Int, distance: Int) async throws {
        let source = ScriptedPagingSource(pages: numberedPages(1_000, size: pageSize), refreshKey: 500)
        let manager = PaginationManager(source: source, pageSize: pageSize, maxSize: maxSize, prefetchDistance: distance)
        await manager.refresh().value
        while manager.output.values.count + pageSize <= maxSize { await manager.append().value }
        let item = try #require(manager.output.values.first)
        let fetched = source.fetchedKeys.count
        for _ in 0..<30 {
            let output = manager.output
            let index = try #require(Array(output.values).firstIndex(of: item), "the item on screen was dropped")
            manager.itemVisible(at: index, of: output)
            for await current in manager.outputs() where !current.appendState.isLoading && !current.prependState.isLoading { break }
        }
        #expect(source.fetchedKeys.count - fetched <= maxSize / pageSize, "\(source.fetchedKeys.dropFirst(fetched))")
    }

    /// Found by a probe: a refresh whose key chain took its time reached the pager after a newer
    /// refresh had loaded and an append had started; the pager let it supersede the append, and
    /// the manager dropped both pages (the older refresh's, and the append's without a word:
    /// the direction idle, no page, no error). The append is asked for again.
    @Test(.timeLimit(.minutes(3)))
    func anOlderRefreshReachingThePagerLate_doesNotLoseANewerAppend() async throws {
        let source = LateChainSource()
        let manager = PaginationManager(source: source, pageSize: 2)
        // Its key chain blocks a thread: one of its own, not one of the pool every test shares.
        let older = Task(executorPreference: ThreadExecutor()) { await manager.load(.refresh) }
        while !source.chainBlocked.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(1)) }
        await manager.refresh().value
        #expect(Array(manager.output.values) == [0, 1])
        let append = manager.append()
        while source.appendsStarted.withLock({ $0 }) == 0 { try await Task.sleep(for: .milliseconds(1)) }
        source.release.withLock { $0 = true }
        await older.value
        await append.value
        #expect(Array(manager.output.values) == [0, 1, 2, 3], "\(manager.output)")
        #expect(manager.output.appendState.isIdle && manager.output.lastError == nil, "\(manager.output)")
    }

    /// Found by a probe: the check of a prepended page's overlap with the first page tried every
    /// place its first value repeats, each compared to its end: quadratic in a page of repeated
    /// values (38 s for 20,000, the manager's lock held throughout). It compares each value a
    /// few times.
    @Test func aPrependedPageOfRepeatedValues_isComparedInLinearTime() async throws {
        let count = 2_000
        let manager = PaginationManager(source: RepeatedValuesSource(count: count), pageSize: count)
        await manager.refresh().value
        CountedValue.comparisons.store(0, ordering: .relaxed)
        await manager.prepend().value
        #expect(manager.output.values.count == 2 * count, "\(manager.output)")
        let comparisons = CountedValue.comparisons.load(ordering: .relaxed)
        #expect(comparisons <= 10 * count, "\(comparisons) comparisons")
    }

    /// Found by a probe: an append with no page loaded (a refresh) asked the source's refresh
    /// key under the manager's lock, and a source whose refresh key reads the manager's output
    /// deadlocked it (a refresh asked it outside).
    @Test func anAppendWithNothingLoaded_asksTheRefreshKeyOutsideTheLock() async throws {
        let source = OutputReadingSource()
        let manager = PaginationManager(source: source, pageSize: 3)
        source.manager.withLock { $0 = manager }
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            await manager.append().value
            done.signal()
        }
        // A deadlocked lock cannot be waited out in the test's task: a thread waits, with a bound.
        let finished = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: done.wait(timeout: .now() + 60) == .success) }
        }
        // Unfinished, the lock is held for good: the output cannot be read.
        guard finished else { Issue.record("the append never ended (the manager's lock is held)"); return }
        #expect(Array(manager.output.values) == [0, 1, 2])
    }

    /// Each short page is loaded again once, and once more when the page after it has values
    /// (it may have grown meanwhile); a source that marks its short pages (``Page/isShortened``)
    /// has each loaded once.
    @Test func shortPages_fromAServerThatCapsItsPageSize_areReloaded_thenPagingMovesOn() async throws {
        let source = ScriptedPagingSource(pages: [[0, 1], [2, 3], [4]])
        let manager = manager(source)
        await manager.refresh().value
        for _ in 0..<6 { await manager.append().value }
        #expect(Array(manager.output.values) == [0, 1, 2, 3, 4])
        #expect(manager.output.appendState.isEndReached)
        #expect(source.fetchedKeys == [0, 0, 1, 0, 1, 2, 1])

        let capped = ScriptedPagingSource(pages: [[0, 1], [2, 3], [4]])
        let marked = PaginationManager(source: MarkingShortPages(inner: capped), pageSize: 3)
        await marked.refresh().value
        for _ in 0..<3 { await marked.append().value }
        #expect(Array(marked.output.values) == [0, 1, 2, 3, 4])
        #expect(marked.output.appendState.isEndReached)
        #expect(capped.fetchedKeys == [0, 1, 2])

        // Marked empty pages are not followed for ever: an empty page from the source ends the
        // data, marked or not (these 20 were all followed).
        let endless = ScriptedPagingSource(pages: [[0, 1], [2, 3]] + Array(repeating: [], count: 20))
        let markedEmpty = PaginationManager(source: MarkingShortPages(inner: endless), pageSize: 3)
        await markedEmpty.refresh().value
        for _ in 0..<10 { await markedEmpty.append().value }
        #expect(Array(markedEmpty.output.values) == [0, 1, 2, 3])
        #expect(markedEmpty.output.appendState.isEndReached)
        #expect(endless.fetchedKeys == [0, 1, 2])
    }

    /// Empty pages the key chain alone named, which paging went past, and which the data grew
    /// into meanwhile: the first of them with values is loaded again before the pages after it
    /// are added, whatever shows the growth (a page after them, the last of them loaded again),
    /// also when the list holds one item at most (as `pager run` streams), and when the first
    /// page was empty. 6, 7 and 8 were skipped, and 0, 1 and 2 of an empty first page.
    @Test(arguments: [nil, 1])
    func emptyPagesThatTheDataGrewInto_areLoadedAgain_beforeThePagesAfterThem(maxSize: Int?) async throws {
        var printed: [Int] = []
        func walk(_ manager: PaginationManager<Int, Int>, appends: Int) async {
            for _ in 0..<appends {
                await manager.append().value
                // What a reader shown the last page each time sees, as pager run prints.
                if let last = manager.output.values.lastPage, !last.values.isEmpty, !printed.contains(last.values[0]) { printed += last.values }
            }
        }
        // Grown while paging waited at the last of the empty pages (the next one is its reload).
        let source = ScriptedPagingSource(pages: [[0, 1, 2], [3, 4, 5], [], [], []])
        let manager = manager(source, maxSize: maxSize)
        await manager.refresh().value
        printed = [0, 1, 2]
        await walk(manager, appends: 4)
        source.setPages([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11], []])
        await walk(manager, appends: 6)
        #expect(printed == Array(0..<12))
        if maxSize == nil { #expect(Array(manager.output.values) == Array(0..<12)) }
        #expect(manager.output.appendState.isEndReached)

        // Grown while paging waited for the page after them.
        let passed = ScriptedPagingSource(pages: [[0, 1, 2], [], [], []])
        let later = self.manager(passed, maxSize: maxSize)
        await later.refresh().value
        printed = [0, 1, 2]
        await walk(later, appends: 4)
        #expect(passed.fetchedKeys == [0, 1, 1, 2, 2], "each empty page loaded again once: the next append loads page 3")
        passed.setPages([[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]])
        await walk(later, appends: 8)
        #expect(printed == Array(0..<10))
        #expect(later.output.appendState.isEndReached)

        // The first page empty.
        let empty = ScriptedPagingSource<Int>(pages: [[], [], []])
        let fromEmpty = self.manager(empty, maxSize: maxSize)
        await fromEmpty.refresh().value
        printed = []
        await walk(fromEmpty, appends: 2)
        empty.setPages([[0, 1, 2], [3, 4, 5], [6]])
        await walk(fromEmpty, appends: 6)
        #expect(printed == Array(0..<7))
        #expect(fromEmpty.output.appendState.isEndReached)
    }

    /// Rechecking the empty pages at the end costs an append as many loads as appends follow
    /// empty pages, however many a prepend added (30 prepended were each loaded again).
    @Test func theEmptyPagesLoadedAgain_areAsManyAsAppendsFollow() async throws {
        let source = ScriptedPagingSource(pages: Array(repeating: [Int](), count: 31) + [[7, 8, 9]], refreshKey: 29)
        let manager = manager(source)
        await manager.refresh().value
        for _ in 0..<40 { await manager.prepend().value }
        #expect(manager.output.values.pageCount == 30 && manager.output.prependState.isEndReached)
        let before = source.fetchCount
        for _ in 0..<4 { await manager.append().value }
        #expect(Array(manager.output.values) == [7, 8, 9] && manager.output.appendState.isEndReached)
        #expect(source.fetchCount - before <= 8, "\(source.fetchedKeys.suffix(source.fetchCount - before))")
    }

    /// The mark of a page a filter emptied means nothing on a page from the source: marked so,
    /// a source's empty pages end the data as unmarked ones do (followed, they would be
    /// followed for as long as the key chain goes on).
    @Test func emptyPagesASourceMarksEmptied_endTheDataAsUnmarkedOnesDo() async throws {
        func walk(_ source: some PagingSource<Int, Int>) async -> PaginationManagerOutput<Int, Int> {
            let manager = PaginationManager(source: source, pageSize: 3)
            await manager.refresh().value
            for _ in 0..<10 { await manager.append().value }
            return manager.output
        }
        let pages: [[Int]] = [[0, 1], [2, 3]] + Array(repeating: [], count: 20)
        let plain = ScriptedPagingSource(pages: pages), marked = ScriptedPagingSource(pages: pages)
        let unmarkedOutput = await walk(plain)
        let markedOutput = await walk(MarkingShortPages(inner: marked, as: \.isEmptiedByTransform))
        #expect(Array(markedOutput.values) == [0, 1, 2, 3] && markedOutput.appendState.isEndReached)
        #expect(Array(unmarkedOutput.values) == [0, 1, 2, 3] && unmarkedOutput.appendState.isEndReached)
        #expect(marked.fetchedKeys == plain.fetchedKeys)
    }

    /// A source that caps its pages below the page size without saying so, behind a filter
    /// that empties one of them: the empty page is not the end (the source's page had values).
    /// Only the first page was kept: the filtered empty page after it read as the end, exit 0.
    @Test func aCappedPageAFilterEmptied_isNotTheEnd() async throws {
        let source = ScriptedPagingSource(pages: [[0, 1], [2, 3], [4, 5]])
        let manager = manager(source, interceptors: [DroppingValues { [2, 3].contains($0) }])
        await manager.refresh().value
        for _ in 0..<6 { await manager.append().value }
        #expect(Array(manager.output.values) == [0, 1, 4, 5])
        #expect(manager.output.appendState.isEndReached)

        // The same page answered by a cache before the filter, with an interceptor before the
        // cache that sees the pages: the second walk reads it as the first did (the pages the
        // cache's observers hand back lost the mark, and the walk stopped at [0, 1]).
        let cached = ScriptedPagingSource(pages: [[0, 1], [2, 3], [4, 5]])
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(600), maxEntries: 100)
        let behindCache = self.manager(cached, interceptors: [Observing(), cache, DroppingValues { [2, 3].contains($0) }])
        for walk in 1...2 {
            await behindCache.refresh().value
            for _ in 0..<6 { await behindCache.append().value }
            #expect(Array(behindCache.output.values) == [0, 1, 4, 5], "walk \(walk)")
        }
    }

    /// A short page a filter emptied is loaded again as a short last page is: it may have
    /// grown (marked as a page that goes on, it was not, and 5 was lost).
    @Test func aShortPageAFilterEmptied_isLoadedAgain_andWhatItGainsIsKept() async throws {
        let source = ScriptedPagingSource(pages: [[0, 1, 2], [100, 101], []])
        let manager = manager(source, interceptors: [DroppingValues { $0 >= 100 }])
        await manager.refresh().value
        await manager.append().value
        #expect(Array(manager.output.values) == [0, 1, 2] && !manager.output.appendState.isEndReached)
        source.setPages([[0, 1, 2], [100, 101, 5], []])
        for _ in 0..<4 { await manager.append().value }
        #expect(Array(manager.output.values) == [0, 1, 2, 5])
        #expect(manager.output.appendState.isEndReached)
    }

    /// As below, when a filter empties the page after the stalled short page: what the short
    /// page gained is loaded all the same (5 was skipped, exit 0).
    @Test func aShortLastPageThatGrows_beforeAPageAFilterEmpties_losesNothing() async throws {
        let source = ScriptedPagingSource(pages: [[0, 1, 2], [3, 4], []])
        let manager = manager(source, interceptors: [DroppingValues { $0 >= 100 }])
        await manager.refresh().value
        await manager.append().value
        await manager.append().value
        source.setPages([[0, 1, 2], [3, 4, 5], [100]])
        for _ in 0..<3 { await manager.append().value }
        #expect(Array(manager.output.values) == [0, 1, 2, 3, 4, 5])
        #expect(manager.output.appendState.isEndReached)
    }

    /// A short last page that grows after its reload, before the page after it is loaded: what it
    /// gained comes before that page (it was skipped: 5 missing, exit 0 in `pager run`).
    @Test func aShortLastPageThatGrowsAfterItsReload_losesNothing() async throws {
        let source = ScriptedPagingSource(pages: [[0, 1, 2], [3, 4], []])
        let manager = manager(source)
        await manager.refresh().value
        await manager.append().value
        await manager.append().value
        #expect(source.fetchedKeys == [0, 1, 1], "loaded, then loaded again: stalled")
        source.setPages([[0, 1, 2], [3, 4, 5], [6]])
        await manager.append().value
        #expect(Array(manager.output.values) == [0, 1, 2, 3, 4, 5], "the page it grew into is added first")
        await manager.append().value
        #expect(Array(manager.output.values) == Array(0...6))
        #expect(manager.output.appendState.isEndReached)
        // A reload that fails fails the append: the page after it is not added without it.
        let failing = ScriptedPagingSource(pages: [[0, 1, 2], [3, 4], [5]])
        let other = self.manager(failing)
        await other.refresh().value
        await other.append().value
        await other.append().value
        failing.script(key: 1, .fail(ScriptedError("offline")))
        await other.append().value
        #expect(other.output.appendState.error as? ScriptedError == ScriptedError("offline"))
        #expect(Array(other.output.values) == [0, 1, 2, 3, 4])
        await other.retry().value
        #expect(Array(other.output.values) == [0, 1, 2, 3, 4, 5])
    }

    @Test func appendWithNothingLoaded_isNotCancelledByTheRefreshItBecomes() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(2))
        source.script(key: 0, .delay(.milliseconds(50)))
        let manager = manager(source)
        await manager.append().value
        #expect(Array(manager.output.values) == [0, 1, 2])
        #expect(manager.output.refreshState.isIdle)
    }

    @Test func failedAppend_isAState_keepsTheValues_andRetryLoadsIt() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .fail(ScriptedError("offline")))
        let manager = manager(source)
        await manager.refresh().value
        await manager.append().value
        let failed = manager.output
        #expect(failed.appendState.error as? ScriptedError == ScriptedError("offline"))
        #expect(failed.lastError as? ScriptedError == ScriptedError("offline"))
        #expect(Array(failed.values) == [0, 1, 2])
        await manager.retry().value
        #expect(Array(manager.output.values) == Array(0..<6))
        #expect(manager.output.appendState.isIdle)
    }

    @Test func retryAfterFailures_givesTheSameListAsARunWithoutFailures() async throws {
        let clean = ScriptedPagingSource(pages: numberedPages(6))
        let flaky = ScriptedPagingSource(pages: numberedPages(6))
        for key in [0, 2, 3, 5] { flaky.script(key: key, .fail(ScriptedError("flaky \(key)"))) }
        let reference = manager(clean)
        let recovering = manager(flaky)
        for _ in 0..<6 { await reference.append().value }
        while !recovering.output.appendState.isEndReached {
            await recovering.append().value
            if recovering.output.appendState.error != nil || recovering.output.refreshState.error != nil {
                await recovering.retry().value
            }
        }
        #expect(Array(recovering.output.values) == Array(reference.output.values))
    }

    @Test func refreshDuringAppend_dropsTheAppendsPage() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = manager(source)
        await manager.refresh().value
        source.script(key: 1, .suspend)
        let append = manager.append()
        await source.waitUntilSuspended()
        #expect(manager.output.isAppending)
        await manager.refresh().value
        await append.value
        #expect(Array(manager.output.values) == [0, 1, 2])
        #expect(manager.output.appendState.isIdle)
        #expect(source.suspendedCount == 0)
    }

    @Test func maxSize_dropsFarPages_andTheyLoadAgain() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(5))
        let manager = manager(source, maxSize: 6)
        await manager.refresh().value
        for _ in 0..<4 { await manager.append().value }
        #expect(Array(manager.output.values) == Array(9..<15))
        #expect(manager.output.prependState.isIdle)
        await manager.prepend().value
        #expect(Array(manager.output.values) == Array(6..<12))
        #expect(manager.output.appendState.isIdle)
        await manager.prepend().value
        await manager.prepend().value
        #expect(Array(manager.output.values) == Array(0..<6))
        #expect(manager.output.prependState.isEndReached)
        #expect(source.fetchedKeys == [0, 1, 2, 3, 4, 2, 1, 0])
    }

    /// Pages dropped at the start while a prepend is in flight leave it loading: a second
    /// prepend starts no other fetch (the trim set the state idle, and one did). Its page, no
    /// longer next to the first, is dropped, and the next prepend loads from the new first page.
    @Test func maxSize_trimmingWhileAPrependLoads_keepsItTheOnlyPrepend() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(5), refreshKey: 2)
        let manager = manager(source, maxSize: 6)
        await manager.refresh().value
        await manager.append().value
        source.script(key: 1, .suspend)
        let prepend = manager.prepend()
        await source.waitUntilSuspended()
        await manager.append().value
        #expect(Array(manager.output.values) == Array(9..<15))
        #expect(manager.output.prependState.isLoading)
        // A prepend while one loads starts none: it waits for the one loading.
        let again = manager.prepend()
        #expect(source.fetchedKeys == [2, 3, 1, 4])
        source.release(key: 1)
        await again.value
        await prepend.value
        #expect(manager.output.prependState.isIdle && Array(manager.output.values) == Array(9..<15))
        await manager.prepend().value
        #expect(Array(manager.output.values) == Array(6..<12) && source.fetchedKeys == [2, 3, 1, 4, 2])
    }

    @Test func prefetch_loadsWhenTheVisibleItemIsNearTheEnd() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(4))
        let manager = manager(source, prefetchDistance: 1)
        await manager.refresh().value
        manager.itemVisible(at: 0)
        #expect(source.fetchCount == 1)
        manager.itemVisible(at: 1)
        #expect(await eventually { manager.output.values.count == 6 })
        manager.itemVisible(at: 3)
        try await Task.sleep(for: .milliseconds(20))
        #expect(manager.output.values.count == 6)
    }

    /// A direction is loading once append() returns, so calls in a row start one load. Tasks
    /// that planned later each loaded one more page once the one before them had ended.
    @Test func appendsInARow_startOneLoad() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(5))
        let manager = manager(source)
        await manager.refresh().value
        let tasks = (0..<3).map { _ in manager.append() }
        #expect(manager.output.isAppending)
        for task in tasks { await task.value }
        #expect(Array(manager.output.values) == Array(0..<6))
        #expect(source.fetchCount == 2)
    }

    /// `pager browse` reports the cursor after every event: a burst of reports near the end
    /// loads one page, not one a report (with max_size, the extra pages dropped the page on
    /// screen).
    @Test func itemVisible_inABurst_loadsOnePage() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(5))
        let manager = manager(source, prefetchDistance: 1)
        await manager.refresh().value
        for _ in 0..<5 { manager.itemVisible(at: 2) }
        #expect(manager.output.isAppending)
        #expect(await eventually { !manager.output.isAppending })
        #expect(Array(manager.output.values) == Array(0..<6))
        #expect(source.fetchCount == 2)
    }

    /// An index is into the output the screen was drawn from. With max_size, a page that came
    /// after the screen was drawn dropped the first page: the row drawn was taken as an item
    /// ten further on, near the end, and the append it started dropped the item on screen
    /// (`pager browse` moved its cursor to another item).
    @Test func itemVisible_ofTheOutputDrawn_isTheItemDrawn_afterPagesWereDropped() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(8, size: 10))
        let manager = manager(source, pageSize: 10, maxSize: 30, prefetchDistance: 5)
        await manager.refresh().value
        await manager.append().value
        await manager.append().value
        let drawn = manager.output
        #expect(Array(drawn.values) == Array(0..<30))
        await manager.append().value
        let now = manager.output
        #expect(Array(now.values) == Array(10..<40))
        #expect(now.index(25, from: drawn) == 15 && now.values[15] == drawn.values[25])
        #expect(now.index(5, from: drawn) == nil, "dropped")

        manager.itemVisible(at: 25, of: drawn)
        #expect(!manager.output.isAppending && !manager.output.isPrepending && source.fetchCount == 4)
        // The same row of the list as it is now is near its end.
        manager.itemVisible(at: 25, of: now)
        #expect(manager.output.isAppending)
        #expect(await eventually { Array(manager.output.values) == Array(20..<50) })
        // Prepended pages move the items the other way.
        let appended = manager.output
        await manager.prepend().value
        #expect(Array(manager.output.values) == Array(10..<40))
        #expect(manager.output.index(0, from: appended) == 10 && manager.output.index(25, from: appended) == nil)
        // After a refresh, an index into the values before it names nothing.
        await manager.refresh().value
        #expect(manager.output.index(0, from: appended) == nil)
        let fetches = source.fetchCount
        manager.itemVisible(at: 0, of: appended)
        #expect(!manager.output.isAppending && source.fetchCount == fetches)
    }

    @Test func outputs_startWithTheCurrentOutput_andFollowEveryChange_whenUnbounded() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(2))
        let manager = manager(source)
        await manager.refresh().value
        var iterator = manager.outputs(buffering: .unbounded).makeAsyncIterator()
        #expect(await iterator.next().map { Array($0.values) } == [0, 1, 2])
        await manager.append().value
        let loading = await iterator.next()
        #expect(loading?.isAppending == true)
        let loaded = await iterator.next()
        #expect(loaded.map { Array($0.values) } == Array(0..<6))
        #expect(loaded?.isAppending == false)
    }

    /// Found by a probe: with maxSize, a cursor source (no previous keys) whose first pages were
    /// dropped said "idle" before, then "end reached" on a prepend, while earlier items existed.
    @Test func droppedPagesOfASourceWithoutPreviousKeys_sayTheyCannotBeReloaded() async throws {
        struct CursorSource: PagingSource {
            let refreshKey = "start"
            func fetch(request: PagingRequest<String>) async throws -> Page<String, String> {
                if request.params.userInfo["fail"] != nil { throw ScriptedError("offline") }
                let n = request.key == "start" ? 0 : Int(request.key.dropFirst())!
                return Page(request: request, values: (0..<5).map { "item\(n * 5 + $0)" }, prevKey: nil, nextKey: n < 9 ? "c\(n + 1)" : nil)
            }
        }
        let manager = PaginationManager(source: CursorSource(), pageSize: 5, maxSize: 10)
        await manager.refresh().value
        await manager.append().value
        #expect(manager.output.prependState.isEndReached, "nothing dropped: the start")
        for _ in 0..<3 { await manager.append().value }
        let unreachable = PagingError.droppedPagesUnreachable(source: "CursorSource", firstKey: "c3")
        #expect(manager.output.prependState.error as? PagingError == unreachable, "\(manager.output.prependState)")
        await manager.prepend().value
        #expect(manager.output.prependState.error as? PagingError == unreachable, "\(manager.output.prependState)")
        #expect(manager.output.values.first == "item15")
        // A refresh that fails keeps the list, and what its top says (found by a review).
        let failing = PaginationManager(source: CursorSource(), pageSize: 5, maxSize: 10)
        await failing.refresh().value
        for _ in 0..<4 { await failing.append().value }
        await failing.refresh(userInfo: ["fail": "yes"]).value
        #expect(failing.output.refreshState.error != nil)
        #expect(failing.output.prependState.error as? PagingError == unreachable, "\(failing.output.prependState)")
        // A refresh goes back to the start.
        await manager.refresh().value
        #expect(manager.output.prependState.isEndReached && manager.output.values.first == "item0")
    }

    /// Found by a probe: the append a retry starts is cancelled by a refresh, as one append()
    /// starts is (it ran on, its fetch in the source's hands).
    @Test func theAppendARetryStarts_isCancelledByARefresh() async throws {
        let source = ScriptedPagingSource(pages: [[0], [1], [2]])
        source.script(key: 1, .fail(ScriptedError("offline")), .suspend)
        let manager = PaginationManager(source: source, pageSize: 1)
        await manager.refresh().value
        await manager.append().value
        #expect(manager.output.appendState.error != nil)
        manager.retry()
        await source.waitUntilSuspended()
        await manager.refresh().value
        #expect(await eventually { source.suspendedCount == 0 }, "the retried append still runs")
        #expect(Array(manager.output.values) == [0])
    }

    /// Found by a probe: an append on a list a failed refresh left empty loads what that refresh
    /// asked for, as a retry does (it loaded the source's refresh key without the refresh's
    /// user info: the results of no query).
    @Test func anAppendAfterAFailedFirstRefresh_loadsWhatTheRefreshAskedFor() async throws {
        let scripted = ScriptedPagingSource(pages: [[0, 1], [2, 3]])
        scripted.script(key: 0, .fail(ScriptedError("offline")))
        let manager = PaginationManager(source: QueryTaggingSource(scripted: scripted), pageSize: 2)
        await manager.refresh(userInfo: ["q": "swift"]).value
        #expect(manager.output.refreshState.error != nil && manager.output.values.isEmpty)
        await manager.append().value
        #expect(Array(manager.output.values) == ["swift:0", "swift:1"])
    }

    /// Found by a probe: a consumer slower than the loads buffered every output, each holding
    /// its pages, whatever maxSize dropped (250 MB). By default it gets the newest one.
    @Test func aConsumerThatFallsBehind_getsTheNewestOutput() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(200))
        let manager = manager(source, maxSize: 9)
        await manager.refresh().value
        var iterator = manager.outputs().makeAsyncIterator()
        for _ in 0..<100 { await manager.append().value }
        let next = await iterator.next()
        #expect(next.map { Array($0.values) } == Array(294..<303), "the output it missed, not the newest")
        #expect(next?.isAppending == false)
    }

    @Test func codableValues_travelThroughTheManager() async throws {
        struct Repo: Codable, Equatable, Sendable {
            let id: Int
            let name: String
        }
        struct RepoSource: PagingSource {
            let refreshKey = 0
            func keyChain(for key: Int) -> PagingKeyChain<Int> {
                PagingKeyChain(key: key, prevKey: key > 0 ? key - 1 : nil, nextKey: key < 1 ? key + 1 : nil)
            }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Repo> {
                let json = #"[{"id": \#(request.key * 2), "name": "a"}, {"id": \#(request.key * 2 + 1), "name": "b"}]"#
                return Page(request: request, values: try JSONDecoder().decode([Repo].self, from: Data(json.utf8)))
            }
        }
        let manager = PaginationManager(source: RepoSource(), pageSize: 2)
        await manager.refresh().value
        await manager.append().value
        #expect(Array(manager.output.values) == [Repo(id: 0, name: "a"), Repo(id: 1, name: "b"),
                                                  Repo(id: 2, name: "a"), Repo(id: 3, name: "b")])
    }
}

/// Pages of 10 numbers from key 100; the page before is at key - 10 + `overlap`, and each page
/// names its next page by a cursor of its own (key + 1000), never by the key it was loaded at.
/// With `repeating`, every value is that number (data whose values repeat, such as ratings).
private struct CursorLikeSource: PagingSource {
    let overlap: Int
    var repeating: Int?
    let refreshKey = 100

    func keyChain(for key: Int) -> PagingKeyChain<Int> { PagingKeyChain(key: key) }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
        let key = request.key % 1_000
        let values = repeating.map { Array(repeating: $0, count: 10) } ?? Array(key..<key + 10)
        return Page(request: request, values: values, prevKey: key - 10 + overlap, nextKey: key + 1_000 + 10)
    }
}

@Suite struct PaginationManagerInvalidationTests {
    /// A source whose data changed is refreshed around the reader: at the key it names for the
    /// item last shown, not at its refresh key.
    @Test func invalidation_refreshesAroundTheItemLastShown() async throws {
        final class ChangingSource: PagingSource, Sendable {
            let version = Locked(0)
            let anchors = Locked<[PagingAnchor<Int, String>]>([])
            let hardRefreshes = Locked(0)
            let invalidation: PagingInvalidation? = PagingInvalidation()
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> {
                PagingKeyChain(key: key, prevKey: key > 0 ? max(0, key - pageSize) : nil, nextKey: key + pageSize)
            }
            func refreshKey(around anchor: PagingAnchor<Int, String>) -> Int? {
                anchors.withLock { $0.append(anchor) }
                return anchor.pageKey
            }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, String> {
                let version = version.withLock { $0 }
                if request.params.isHardRefresh { hardRefreshes.withLock { $0 += 1 } }
                return Page(request: request, values: (request.key..<request.key + request.params.pageSize).map { "v\(version):\($0)" })
            }
        }
        let source = ChangingSource()
        let manager = PaginationManager(source: source, pageSize: 10)
        await manager.refresh().value
        await manager.append().value
        await manager.append().value
        manager.itemVisible(at: 25)
        let outputs = manager.outputs()
        source.version.withLock { $0 = 1 }
        source.invalidation?.invalidate()
        var refreshed: [String] = []
        for await output in outputs where output.values.first?.hasPrefix("v1:") == true && !output.isRefreshing {
            refreshed = Array(output.values)
            break
        }
        #expect(refreshed == (20..<30).map { "v1:\($0)" })
        let anchor = try #require(source.anchors.withLock { $0.first })
        #expect(anchor.pageKey == 20 && anchor.indexInPage == 5 && anchor.value == "v0:25" && anchor.pageSize == 10)
        // What caches and stores hold is from before the change: a hard refresh.
        #expect(source.hardRefreshes.withLock { $0 } == 1)
    }

    /// A refresh around the reader that fails is retried where it was: at the key the source
    /// named, hard (the retry loaded the refresh key, and the reader was taken to the top).
    @Test func retryAfterAFailedRefreshAroundTheReader_loadsTheSameKey() async throws {
        final class AnchoredSource: PagingSource, Sendable {
            let failNext = Locked(false)
            let fetched = Locked<[(key: Int, hard: Bool)]>([])
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> {
                PagingKeyChain(key: key, prevKey: key > 0 ? max(0, key - pageSize) : nil, nextKey: key + pageSize)
            }
            func refreshKey(around anchor: PagingAnchor<Int, Int>) -> Int? { anchor.pageKey }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                fetched.withLock { $0.append((request.key, request.params.isHardRefresh)) }
                if failNext.withLock({ failing in defer { failing = false }; return failing }) { throw ScriptedError("offline") }
                return Page(request: request, values: Array(request.key..<request.key + request.params.pageSize))
            }
        }
        let source = AnchoredSource()
        let manager = PaginationManager(source: source, pageSize: 10)
        await manager.refresh().value
        for _ in 0..<3 { await manager.append().value }
        manager.itemVisible(at: 35)
        source.failNext.withLock { $0 = true }
        await manager.refreshAroundReader().value
        #expect(manager.output.refreshState.error != nil)
        await manager.retry().value
        #expect(Array(manager.output.values) == Array(30..<40))
        #expect(source.fetched.withLock { $0.suffix(2).map { "\($0.key) \($0.hard)" } } == ["30 true", "30 true"])
    }
}

/// Pages of 3 numbers at keys 0 and up; its refresh key reads the output of the manager over it.
private final class OutputReadingSource: PagingSource, Sendable {
    let manager = Locked<PaginationManager<Int, Int>?>(nil)

    var refreshKey: Int { manager.withLock { $0 }?.output.values.count ?? 0 }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
        Page(request: request, values: Array(request.key * 3..<request.key * 3 + 3),
             prevKey: request.key > 0 ? request.key - 1 : nil, nextKey: request.key + 1)
    }
}

/// Runs its jobs on a thread of its own (a task that blocks it holds no thread of the shared pool).
private final class ThreadExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "ThreadExecutor")

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}

/// Page k holds 2k and 2k + 1. The first key chain of key 0 blocks until `release` (a refresh that
/// reaches the pager late); the first append ends once that refresh has been fetched (the pager
/// then says the append was superseded).
private final class LateChainSource: PagingSource, Sendable {
    let refreshKey = 0
    let chainBlocked = Locked(false), release = Locked(false), appendsStarted = Locked(0), refreshes = Locked(0)

    func keyChain(for key: Int) -> PagingKeyChain<Int> {
        if key == 0, !chainBlocked.withLock({ blocked in defer { blocked = true }; return blocked }) {
            while !release.withLock({ $0 }) { usleep(1_000) }
        }
        return PagingKeyChain(key: key, nextKey: key + 1)
    }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
        if request.kind == .refresh { refreshes.withLock { $0 += 1 } }
        if request.kind == .append, appendsStarted.withLock({ $0 += 1; return $0 }) == 1 {
            while refreshes.withLock({ $0 }) < 2 { try await Task.sleep(for: .milliseconds(1)) }
        }
        return Page(request: request, values: [request.key * 2, request.key * 2 + 1])
    }
}

/// A value that counts how often it is compared.
private struct CountedValue: Hashable, Sendable {
    static let comparisons = Atomic<Int>(0)
    let value: Int

    static func == (lhs: CountedValue, rhs: CountedValue) -> Bool {
        comparisons.add(1, ordering: .relaxed)
        return lhs.value == rhs.value
    }

    func hash(into hasher: inout Hasher) { hasher.combine(value) }
}

/// Key 10 holds `count` zeros; the page before it, key 5, `count - 1` zeros and a 1, and names a
/// next key of its own (99, a cursor's), so its overlap with the first page is looked at.
private struct RepeatedValuesSource: PagingSource {
    let count: Int
    var refreshKey: Int { 10 }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, CountedValue> {
        if request.key == 10 {
            return Page(request: request, values: Array(repeating: CountedValue(value: 0), count: count), prevKey: 5, nextKey: nil)
        }
        return Page(request: request, values: Array(repeating: CountedValue(value: 0), count: count - 1) + [CountedValue(value: 1)],
                    prevKey: nil, nextKey: 99)
    }
}

/// Found by a randomized stress test against a model: with `maxSize`, a load next to a page the
/// other end's load dropped, and readers on lists too short to keep their item and a page more.
@Suite("PaginationManager with maxSize, at both ends")
struct PaginationManagerBothEndsTests {
    /// Pages of two values, page k holding k*100 and k*100+1.
    static let pages = (0..<10).map { k in [k * 100, k * 100 + 1] }

    /// A prepend (or append) that failed after the append (or prepend) beside it dropped its
    /// page stayed failed, for a page next to none the list holds (itemVisible loads only in an
    /// idle direction). It is dropped as its page would have been: the direction is idle.
    @Test(.timeLimit(.minutes(3)), arguments: [PagingRequestKind.prepend, .append])
    func aLoadFailingAfterItsNeighbourWasDropped_leavesItsDirectionIdle(_ kind: PagingRequestKind) async throws {
        let source = ScriptedPagingSource(pages: Self.pages, refreshKey: 5)
        let manager = PaginationManager(source: source, pageSize: 2, maxSize: 2)
        await manager.refresh().value
        source.script(key: kind == .prepend ? 4 : 6, .suspendThenFail(ScriptedError("offline")))
        let held = kind == .prepend ? manager.prepend() : manager.append()
        await source.waitUntilSuspended()
        await (kind == .prepend ? manager.append() : manager.prepend()).value
        source.release(key: kind == .prepend ? 4 : 6)
        await held.value
        let output = manager.output
        #expect(output.values.pages.map(\.key) == [kind == .prepend ? 6 : 4])
        #expect(output[kind].isIdle, "\(output[kind])")
        // Loading there goes on from the page now at that end.
        _ = kind == .prepend ? manager.prepend() : manager.append()
        #expect(manager.output[kind].isLoading)
    }

    /// A source whose refresh page names a previous one but whose later pages name none (a
    /// forward cursor): a prepend that came back after an append dropped its page left the
    /// prepend state idle, not "cannot prepend", and the correction itemVisible made later was
    /// never published to outputs().
    @Test(.timeLimit(.minutes(3)))
    func aPrependDroppedWithItsPage_saysNothingCanLoadBefore_andPublishesIt() async throws {
        let source = ScriptedPagingSource(pages: Self.pages, refreshKey: 5)
        let forward = ForwardCursorSource(base: source)
        let manager = PaginationManager(source: forward, pageSize: 2, maxSize: 2)
        await manager.refresh().value
        source.script(key: 4, .suspend)
        let prepend = manager.prepend()
        await source.waitUntilSuspended()
        await manager.append().value
        source.release(key: 4)
        await prepend.value
        guard case .failed(PagingError.droppedPagesUnreachable) = manager.output.prependState else {
            Issue.record("prepend state \(manager.output.prependState)")
            return
        }
        var outputs = manager.outputs().makeAsyncIterator()
        let published = await outputs.next()
        guard case .failed(PagingError.droppedPagesUnreachable)? = published?.prependState else {
            Issue.record("published prepend state \(String(describing: published?.prependState))")
            return
        }
    }

    /// With one page kept (maxSize = pageSize), or two of one value, no prefetch distance keeps
    /// a still reader's item: reporting the first row dropped the item on screen, and a reader
    /// on one of two single-value pages loaded at both ends in turn, for ever. itemVisible
    /// loads nothing then.
    @Test(.timeLimit(.minutes(3)), arguments: [(10, 10), (1, 2)])
    func aListTooShortToKeepTheItemOnScreen_loadsNothingForItemVisible(_ pageSize: Int, _ maxSize: Int) async throws {
        let source = ScriptedPagingSource(pages: (0..<1000).map { page in (0..<pageSize).map { page * pageSize + $0 } }, refreshKey: 500)
        let manager = PaginationManager(source: source, pageSize: pageSize, maxSize: maxSize)
        await manager.refresh().value
        if maxSize > pageSize { await manager.append().value }
        let fetched = source.fetchCount
        let output = manager.output
        for row in [0, output.values.count - 1] {
            manager.itemVisible(at: row, of: output)
            #expect(!manager.output.isPrepending && !manager.output.isAppending, "row \(row): \(manager.output)")
        }
        #expect(source.fetchCount == fetched)
        // A page more kept (pageSize + 2 values) and a reader at the end loads again.
        let roomy = PaginationManager(source: source, pageSize: pageSize, maxSize: pageSize * 3)
        await roomy.refresh().value
        roomy.itemVisible(at: roomy.output.values.count - 1)
        #expect(roomy.output.isAppending)
    }
}

/// `base`'s pages, of which only the refresh key's names a previous page.
private struct ForwardCursorSource: PagingSource {
    let base: ScriptedPagingSource<Int>
    var refreshKey: Int { base.refreshKey }

    func keyChain(for key: Int) -> PagingKeyChain<Int> {
        let chain = base.keyChain(for: key)
        return PagingKeyChain(key: key, prevKey: key == base.refreshKey ? chain.prevKey : nil, nextKey: chain.nextKey)
    }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
        let page = try await base.fetch(request: request)
        return Page(request: request, values: page.values, prevKey: request.key == base.refreshKey ? page.prevKey : nil, nextKey: page.nextKey)
    }
}

/// A source whose server caps its page size and says so: each page it answers is marked
/// ``Page/isShortened`` (or with another mark).
private struct MarkingShortPages: PagingSource {
    let inner: ScriptedPagingSource<Int>
    var mark: WritableKeyPath<Page<Int, Int>, Bool> & Sendable = \.isShortened
    init(inner: ScriptedPagingSource<Int>, as mark: WritableKeyPath<Page<Int, Int>, Bool> & Sendable = \.isShortened) {
        self.inner = inner
        self.mark = mark
    }
    var refreshKey: Int { inner.refreshKey }
    func keyChain(for key: Int) -> PagingKeyChain<Int> { inner.keyChain(for: key) }
    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
        var page = try await inner.fetch(request: request)
        page[keyPath: mark] = true
        return page
    }
}

/// A filter: drops the values `drops` says to.
private struct DroppingValues: PagingInterceptor {
    let drops: @Sendable (Int) -> Bool
    init(_ drops: @escaping @Sendable (Int) -> Bool) { self.drops = drops }
    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        .proceed(request, handleAfterwards: true)
    }
    func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
        var page = page
        page.values.removeAll(where: drops)
        return page
    }
}

/// Sees every page on its way back, and changes none.
private struct Observing: PagingInterceptor {
    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        .proceed(request, handleAfterwards: true)
    }
    func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> { page }
}
