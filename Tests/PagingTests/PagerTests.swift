import Paging
import PagingTesting
import Testing

@Suite("Pager: the chain")
struct PagerChainTests {
    @Test func interceptorsRunInOrder_andPagesComeBackInReverse() async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, interceptors: [
            RecordingInterceptor(name: "a", journal: journal),
            RecordingInterceptor(name: "b", journal: journal, handleAfterwards: false),
            RecordingInterceptor(name: "c", journal: journal),
        ])
        let page = try await pager.load(pager.request(.append, key: 1, params: params()))
        #expect(page.values == [3, 4, 5])
        #expect(journal.all == ["a.intercept(1)", "b.intercept(1)", "c.intercept(1)", "c.handle(1)", "a.handle(1)"])
    }

    @Test func completingInterceptor_skipsTheRestAndTheSource() async throws {
        struct Answering: PagingInterceptor {
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
                .complete(Page(request: request, values: [42]))
            }
        }
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, interceptors: [
            RecordingInterceptor(name: "before", journal: journal),
            Answering(),
            RecordingInterceptor(name: "after", journal: journal),
        ])
        let page = try await pager.load(pager.request(.append, key: 1, params: params()))
        #expect(page.values == [42])
        #expect(source.fetchCount == 0)
        #expect(journal.all == ["before.intercept(1)", "before.handle(1)"])
    }

    @Test func rewrittenRequest_reachesTheSource() async throws {
        struct Rewriting: PagingInterceptor {
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
                var request = request
                request.keyChain = PagingKeyChain(key: 2)
                return .proceed(request, handleAfterwards: false)
            }
        }
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, interceptors: [Rewriting()])
        let page = try await pager.load(pager.request(.append, key: 0, params: params()))
        #expect(page.values == [6, 7, 8])
        #expect(source.fetchedKeys == [2])
    }

    @Test func throwingInterceptor_failsTheLoad_withoutCallingTheSource() async throws {
        struct Refusing: PagingInterceptor {
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
                throw ScriptedError("refused")
            }
        }
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, interceptors: [Refusing()])
        await #expect(throws: ScriptedError("refused")) {
            try await pager.load(pager.request(.append, key: 0, params: params()))
        }
        #expect(source.fetchCount == 0)
    }

    @Test func pageKeysFromTheSource_overrideTheKeyChain() async throws {
        struct CursorSource: PagingSource {
            let refreshKey = "start"
            func fetch(request: PagingRequest<String>) async throws -> Page<String, Int> {
                Page(request: request, values: [1], prevKey: nil, nextKey: "cursor-2")
            }
        }
        let pager = Pager(source: CursorSource())
        let page = try await pager.load(pager.refreshRequest(params: params()))
        #expect(page.nextKey == "cursor-2")
        #expect(page.prevKey == nil)
    }
}

@Suite("Pager: failures and retries")
struct PagerFailureTests {
    @Test func sourceFails_thenTheNextAppendSucceeds_andTheStreamGoesOn() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .fail(ScriptedError("offline")))
        let pager = Pager(source: source)
        let collector = StateCollector(pager.states())
        let request = pager.request(.append, key: 1, params: params())
        await #expect(throws: ScriptedError("offline")) { try await pager.load(request) }
        let page = try await pager.load(request)
        #expect(page.values == [3, 4, 5])
        let states = await collector.wait { $0.count >= 4 }
        #expect(states.map(\.label) == ["loading 1", "failed 1", "loading 1", "loaded 1"])
    }

    @Test func retryPolicy_fetchesAgain_untilItSucceeds() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 0, .fail(ScriptedError("1")), .fail(ScriptedError("2")))
        let pager = Pager(source: source)
        let retry = RetryPolicy(maxRetries: 3, backoff: .immediate)
        let page = try await pager.load(pager.request(.append, key: 0, params: params(retry: retry)))
        #expect(page.values == [0, 1, 2])
        #expect(source.fetchCount == 3)
    }

    @Test func retryPolicy_givesUpAfterMaxRetries() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 0, .fail(ScriptedError("1")), .fail(ScriptedError("2")), .fail(ScriptedError("3")))
        let pager = Pager(source: source)
        let retry = RetryPolicy(maxRetries: 1, backoff: .immediate)
        await #expect(throws: ScriptedError("2")) {
            try await pager.load(pager.request(.append, key: 0, params: params(retry: retry)))
        }
        #expect(source.fetchCount == 2)
    }

    @Test func retryConditionFalse_meansNoRetry() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 0, .fail(ScriptedError("bad request", isRetryable: false)))
        let pager = Pager(source: source)
        let retry = RetryPolicy(maxRetries: 5, backoff: .immediate)
        await #expect(throws: ScriptedError("bad request", isRetryable: false)) {
            try await pager.load(pager.request(.append, key: 0, params: params(retry: retry)))
        }
        #expect(source.fetchCount == 1)

        source.script(key: 1, .fail(ScriptedError("retryable, but the condition says no")))
        let never = RetryPolicy(maxRetries: 5, backoff: .immediate, condition: { _ in false })
        await #expect(throws: ScriptedError.self) {
            try await pager.load(pager.request(.append, key: 1, params: params(retry: never)))
        }
        #expect(source.fetchCount(forKey: 1) == 1)
    }

    @Test func backoff_growsExponentially_isCapped_andJitterOnlyShortensIt() {
        let backoff = RetryPolicy.Backoff(initial: .milliseconds(100), multiplier: 2, maximum: .milliseconds(500), jitter: 0.5)
        #expect(backoff.delay(forAttempt: 1, random: 0) == .milliseconds(100))
        #expect(backoff.delay(forAttempt: 2, random: 0) == .milliseconds(200))
        #expect(backoff.delay(forAttempt: 3, random: 0) == .milliseconds(400))
        #expect(backoff.delay(forAttempt: 4, random: 0) == .milliseconds(500))
        #expect(backoff.delay(forAttempt: 60, random: 0) == .milliseconds(500))
        #expect(backoff.delay(forAttempt: 2, random: 0.999) > .milliseconds(100))
        #expect(backoff.delay(forAttempt: 2, random: 1) == .milliseconds(100))
    }

    /// Found by a probe: a multiplier of 1e10 or more (infinity too) trapped converting the
    /// grown Duration on the second retry; the delay is the maximum.
    @Test(arguments: [1e10, 1e300, .infinity])
    func backoff_ofAHugeMultiplier_isTheMaximum(_ multiplier: Double) {
        let backoff = RetryPolicy.Backoff(initial: .seconds(1 << 40), multiplier: multiplier, maximum: .seconds(30), jitter: 0)
        #expect(backoff.delay(forAttempt: 2) == .seconds(30))
        #expect(backoff.delay(forAttempt: 60) == .seconds(30))
        #expect(RetryPolicy.Backoff(initial: .zero, multiplier: multiplier).delay(forAttempt: 5) == .zero)
    }

    @Test func retries_arePublishedAsStates() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 0, .fail(ScriptedError("1")))
        let pager = Pager(source: source)
        let collector = StateCollector(pager.states())
        _ = try await pager.load(pager.request(.append, key: 0, params: params(retry: RetryPolicy(maxRetries: 1, backoff: .immediate))))
        let states = await collector.wait { $0.count >= 3 }
        #expect(states.map(\.label) == ["loading 0", "retrying 0", "loaded 0"])
    }
}

@Suite("Pager: deduplication")
struct PagerDeduplicationTests {
    @Test func twoConcurrentIdenticalAppends_makeOneFetch_andBothGetThePage() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend)
        let pager = Pager(source: source)
        let request = pager.request(.append, key: 1, params: params())
        async let first = pager.load(request)
        await source.waitUntilSuspended()
        async let second = pager.load(request)
        // The second caller has joined before the fetch ends.
        #expect(await eventually { pager.joinedCallerCount == 1 })
        source.release(key: 1)
        let pages = try await [first, second]
        #expect(pages.map(\.values) == [[3, 4, 5], [3, 4, 5]])
        #expect(source.fetchCount == 1)
    }

    @Test func differentPageSizes_areFetchedApart() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend, .suspend)
        let pager = Pager(source: source)
        async let first = pager.load(pager.request(.append, key: 1, params: params(pageSize: 3)))
        async let second = pager.load(pager.request(.append, key: 1, params: params(pageSize: 4)))
        await source.waitUntilSuspended(count: 2)
        source.release(key: 1)
        _ = try await [first, second]
        #expect(source.fetchCount == 2)
    }

    /// Two queries for the same key at once: the user info is part of the request's identity,
    /// so each caller gets the page of its own query (they once shared the first one's).
    @Test(.timeLimit(.minutes(3)))
    func sameKey_differentUserInfo_inFlightAtOnce_eachGetsItsOwnPage() async throws {
        let scripted = ScriptedPagingSource(pages: numberedPages(3))
        scripted.script(key: 1, .suspend, .suspend)
        let pager = Pager(source: QueryTaggingSource(scripted: scripted))
        async let swift = pager.load(pager.request(.append, key: 1, params: params(userInfo: ["q": "swift"])))
        async let rust = pager.load(pager.request(.append, key: 1, params: params(userInfo: ["q": "rust"])))
        await scripted.waitUntilSuspended(count: 2)
        scripted.release(key: 1)
        let (swiftPage, rustPage) = try await (swift, rust)
        #expect(swiftPage.values == ["swift:3", "swift:4", "swift:5"])
        #expect(rustPage.values == ["rust:3", "rust:4", "rust:5"])
    }

    /// A hard refresh must reach the source: it neither joins an identical load in flight nor
    /// takes a page from the reuse window.
    @Test func hardRefresh_isNeverAnsweredFromTheReuseWindow() async throws {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, deduplication: Deduplication(
            sharesInFlight: true, reuseWindow: .seconds(10), clock: clock.pagingClock))
        _ = try await pager.load(pager.refreshRequest(params: params()))
        _ = try await pager.load(pager.refreshRequest(params: params()))
        #expect(source.fetchCount == 1)
        _ = try await pager.load(pager.refreshRequest(params: params(userInfo: [PagingUserInfoKey.hardRefresh: "true"])))
        #expect(source.fetchCount == 2)
    }

    @Test func identity_isKeyPageSizeAndUserInfo_notTheKindNorTheHardRefreshOrReloadFlag() {
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(3)))
        let append = pager.request(.append, key: 1, params: params(userInfo: ["q": "swift"]))
        #expect(append.identity == pager.request(.prepend, key: 1, params: params(userInfo: ["q": "swift"])).identity)
        #expect(append.identity == pager.request(.append, key: 1, params: params(
            userInfo: ["q": "swift", PagingUserInfoKey.hardRefresh: "true"])).identity)
        #expect(append.identity == pager.request(.append, key: 1, params: params(
            userInfo: ["q": "swift", PagingUserInfoKey.reload: "true"])).identity)
        #expect(!PagingRequestIdentity<Int>.identifies(PagingUserInfoKey.reload) && PagingRequestIdentity<Int>.identifies("q"))
        #expect(append.identity != pager.request(.append, key: 1, params: params(userInfo: ["q": "rust"])).identity)
        #expect(append.identity != pager.request(.append, key: 1, params: params()).identity)
        #expect(append.identity != pager.request(.append, key: 1, params: params(pageSize: 4, userInfo: ["q": "swift"])).identity)
        #expect(append.identity != pager.request(.append, key: 2, params: params(userInfo: ["q": "swift"])).identity)
    }

    /// User info is compared by its bytes: "café" with "é" (U+00E9) and with "e" and a
    /// combining accent (U+0301) are two queries, canonically equivalent as Swift strings (a
    /// cache served one's page for the other, and a load in flight was shared between them).
    @Test func identity_comparesUserInfoByItsBytes_notAsCanonicallyEquivalentStrings() async throws {
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(3)))
        let composed = pager.request(.append, key: 1, params: params(userInfo: ["q": "caf\u{E9}"]))
        let decomposed = pager.request(.append, key: 1, params: params(userInfo: ["q": "cafe\u{301}"]))
        #expect(composed.params.userInfo == decomposed.params.userInfo, "Swift strings take them as equal")
        #expect(composed.identity != decomposed.identity)
        #expect(composed.identity == pager.request(.prepend, key: 1, params: params(userInfo: ["q": "caf\u{E9}"])).identity)
        #expect(Set([composed.identity, decomposed.identity, composed.identity]).count == 2)
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let cached = Pager(source: source, interceptors: [CacheInterceptor<Int, Int>()])
        _ = try await cached.load(composed)
        _ = try await cached.load(decomposed)
        _ = try await cached.load(composed)
        #expect(source.fetchCount == 2)
    }

    @Test func disabledDeduplication_fetchesEveryRequest() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspend, .suspend)
        let pager = Pager(source: source, deduplication: .disabled)
        let request = pager.request(.append, key: 1, params: params())
        async let first = pager.load(request)
        async let second = pager.load(request)
        await source.waitUntilSuspended(count: 2)
        source.release(key: 1)
        _ = try await [first, second]
        #expect(source.fetchCount == 2)
    }

    @Test func reuseWindow_answersARepeat_untilTheWindowPasses() async throws {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, deduplication: Deduplication(
            sharesInFlight: true, reuseWindow: .milliseconds(250), clock: clock.pagingClock))
        let request = pager.request(.append, key: 1, params: params())
        _ = try await pager.load(request)
        clock.advance(by: .milliseconds(200))
        let repeated = try await pager.load(request)
        #expect(repeated.values == [3, 4, 5])
        #expect(source.fetchCount == 1)
        clock.advance(by: .milliseconds(100))
        _ = try await pager.load(request)
        #expect(source.fetchCount == 2)
    }

    /// Found by a probe: a states() stream kept and not read buffered every state, and its
    /// page, without bound; it keeps the newest 1,024 now, or every one when asked.
    @Test func aStatesStreamNotRead_keepsTheNewestStates() async throws {
        var pager: Pager<Int, Int>? = Pager(source: ScriptedPagingSource(pages: numberedPages(1_000)))
        let bounded = pager!.states()
        let unbounded = pager!.states(buffering: .unbounded)
        for key in 0..<1_000 { _ = try await pager!.load(pager!.request(.append, key: key, params: params())) }
        pager = nil
        var kept: [PagingState<Int, Int>] = []
        for await state in bounded { kept.append(state) }
        var all = 0
        for await _ in unbounded { all += 1 }
        #expect(all == 2_000, "loading and loaded, a load")
        #expect(kept.count == 1_024)
        if case .loaded(let page)? = kept.last { #expect(page.key == 999) } else { Issue.record("the newest state is not the last load's: \(String(describing: kept.last))") }
    }

    /// The reuse window keeps the latest 1,024 pages: past them the oldest is loaded again,
    /// the latest still reused (it kept every page the window held, and filtered them all on
    /// each load past 1,024: 4,000 loads took 6 s).
    @Test func reuseWindow_keepsTheLatestPages_only() async throws {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: numberedPages(3_000))
        let pager = Pager(source: source, deduplication: Deduplication(
            sharesInFlight: true, reuseWindow: .seconds(600), clock: clock.pagingClock))
        for key in 0..<3_000 { _ = try await pager.load(pager.request(.append, key: key, params: params())) }
        #expect(source.fetchCount == 3_000)
        _ = try await pager.load(pager.request(.append, key: 2_999, params: params()))
        _ = try await pager.load(pager.request(.append, key: 3_000 - 1_024, params: params()))
        #expect(source.fetchCount == 3_000, "the latest 1,024 pages are reused")
        _ = try await pager.load(pager.request(.append, key: 3_000 - 1_025, params: params()))
        #expect(source.fetchCount == 3_001, "an older one is loaded again")
    }

    /// A page loaded before a refresh is not reused after it: the appends after a hard refresh
    /// load the data as it is now (they were answered from the reuse window). A repeated
    /// refresh still is, when no other refresh came in between.
    @Test func reuseWindow_doesNotReachAcrossARefresh() async throws {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let pager = Pager(source: source, deduplication: Deduplication(
            sharesInFlight: true, reuseWindow: .seconds(10), clock: clock.pagingClock))
        let append = pager.request(.append, key: 1, params: params())
        #expect(try await pager.load(append).values == [3, 4, 5])
        source.setPages(numberedPages(3).map { $0.map { $0 + 100 } })
        _ = try await pager.load(pager.refreshRequest(params: params(userInfo: [PagingUserInfoKey.hardRefresh: "true"])))
        #expect(try await pager.load(append).values == [103, 104, 105])
        source.setPages(numberedPages(3).map { $0.map { $0 + 200 } })
        #expect(try await pager.load(pager.refreshRequest(params: params())).values == [200, 201, 202])
        #expect(try await pager.load(append).values == [203, 204, 205])
        let fetches = source.fetchCount
        #expect(try await pager.load(pager.refreshRequest(params: params())).values == [200, 201, 202])
        #expect(source.fetchCount == fetches, "a repeated refresh is answered from the window")
    }

    /// A manager of pages of 3 over a Pager of `source` that reuses results for `window` of `clock`.
    private func managerReusingResults(for window: Duration, of source: ScriptedPagingSource<Int>,
                                       clock: ManualClock) -> PaginationManager<Int, Int> {
        let pager = Pager(source: source, deduplication: Deduplication(sharesInFlight: true, reuseWindow: window, clock: clock.pagingClock))
        return PaginationManager(pager: pager, configuration: .init(pageSize: 3))
    }

    /// A manager's refresh while a load is in flight (it supersedes that load, then refreshes)
    /// is still answered from the window when no other refresh came in between: superseding
    /// counted as a refresh of its own, and the page was loaded again.
    @Test func reuseWindow_aManagersRefreshWithALoadInFlight_isStillAnsweredFromTheWindow() async throws {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = managerReusingResults(for: .seconds(10), of: source, clock: clock)
        await manager.refresh().value
        #expect(Array(manager.output.values) == [0, 1, 2])
        source.script(key: 1, .suspend)
        let append = Task { await manager.load(.append) }
        await source.waitUntilSuspended()
        await manager.refresh().value
        source.release(key: 1)
        await append.value
        #expect(Array(manager.output.values) == [0, 1, 2])
        #expect(source.fetchCount(forKey: 0) == 1, "the repeated refresh is answered from the window: \(source.fetchedKeys)")
    }

    /// A refresh answered from the window starts no new data: the append after it is answered
    /// from the window too, and the list is of one snapshot (it was the kept first page and the
    /// changed data's second: an item twice, another missing).
    @Test func reuseWindow_aRefreshItAnswers_keepsTheAppendsAfterItOnTheSameData() async throws {
        let clock = ManualClock()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        let manager = managerReusingResults(for: .seconds(10), of: source, clock: clock)
        await manager.refresh().value
        await manager.load(.append)
        #expect(Array(manager.output.values) == Array(0..<6))
        source.setPages(numberedPages(3).map { $0.map { $0 + 100 } })
        await manager.refresh().value
        await manager.load(.append)
        #expect(Array(manager.output.values) == Array(0..<6), "one snapshot: \(Array(manager.output.values))")
        #expect(source.fetchCount == 2)
        // Once the window passed, a refresh loads the data as it is now, and so do the appends.
        clock.advance(by: .seconds(11))
        await manager.refresh().value
        await manager.load(.append)
        #expect(Array(manager.output.values) == Array(100..<106))
    }

    /// An interceptor that asks for another key, naming no neighbours, gets the source's key
    /// chain for it (the page named none, and paging ended there); one that names them keeps them.
    @Test func aRequestAnInterceptorRewrites_getsTheKeyChainOfItsNewKey() async throws {
        struct Rewriter: PagingInterceptor {
            let to: Int
            var neighbours: (prev: Int?, next: Int?)?
            func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
                var next = request
                next.keyChain = PagingKeyChain(key: to, prevKey: neighbours?.prev, nextKey: neighbours?.next)
                return .proceed(next, handleAfterwards: false)
            }
        }
        let source = ScriptedPagingSource(pages: numberedPages(5))
        let rewritten = try await Pager(source: source, interceptors: [Rewriter(to: 2)]).load(
            Pager(source: source).refreshRequest(params: params()))
        #expect(rewritten.key == 2 && rewritten.prevKey == 1 && rewritten.nextKey == 3, "\(rewritten)")
        let named = try await Pager(source: source, interceptors: [Rewriter(to: 2, neighbours: (nil, 4))]).load(
            Pager(source: source).refreshRequest(params: params()))
        #expect(named.key == 2 && named.prevKey == nil && named.nextKey == 4, "\(named)")
    }

    @Test func failedSharedFetch_failsEveryCaller() async throws {
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 1, .suspendThenFail(ScriptedError("server down")))
        let pager = Pager(source: source)
        let request = pager.request(.append, key: 1, params: params())
        async let first = Result { try await pager.load(request) }
        await source.waitUntilSuspended()
        async let second = Result { try await pager.load(request) }
        #expect(await eventually { pager.joinedCallerCount == 1 })
        source.release(key: 1)
        let results = await [first, second]
        #expect(source.fetchCount == 1)
        for result in results {
            #expect(throws: ScriptedError("server down")) { try result.get() }
        }
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do { self = .success(try await body()) } catch { self = .failure(error) }
    }
}
