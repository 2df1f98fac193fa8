import Paging
import PagingTesting
import Testing

/// Keeps the even values of a page and says how many it dropped, in the page's metadata.
struct EvenOnly: PagingInterceptor {
    let journal: Journal

    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        .proceed(request, handleAfterwards: true)
    }

    func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
        journal.add("even.transform(\(page.values))")
        var page = page
        let count = page.values.count
        page.values.removeAll { !$0.isMultiple(of: 2) }
        page.metadata["dropped"] = "\(count - page.values.count)"
        return page
    }
}

/// Records the failures it hears of, and fails its first `failures` intercepts.
final class FailureListener: PagingInterceptor, Sendable {
    let name: String
    let journal: Journal
    private let failuresLeft: Locked<Int>
    let retryAfter: Duration?

    init(_ name: String, journal: Journal, failing failures: Int = 0, retryAfter: Duration? = nil) {
        self.name = name
        self.journal = journal
        failuresLeft = Locked(failures)
        self.retryAfter = retryAfter
    }

    struct Refusal: Error, RetryHintedError, CustomStringConvertible {
        let retryAfter: Duration?
        var description: String { "refused" }
    }

    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        journal.add("\(name).intercept(\(request.key))")
        let fail = failuresLeft.withLock { left in
            defer { left = max(0, left - 1) }
            return left > 0
        }
        if fail { throw Refusal(retryAfter: retryAfter) }
        return .proceed(request, handleAfterwards: false)
    }

    func loadFailed(_ request: PagingRequest<Int>, error: any Error) async {
        journal.add("\(name).failed(\(request.key), \(error))")
    }
}

/// Observes every page and fails to transform it.
struct BrokenTransform: PagingInterceptor {
    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        .proceed(request, handleAfterwards: true)
    }

    func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> { throw ScriptedError("broken", isRetryable: false) }
}

@Suite struct InterceptorWorkTests {
    @Test func transform_changesThePage_fromTheLastObserverToTheFirst() async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: [[1, 2, 3, 4, 5, 6]])
        let pager = Pager(source: source, interceptors: [
            RecordingInterceptor(name: "outer", journal: journal),
            EvenOnly(journal: journal),
        ])
        let states = StateCollector(pager.states())
        let page = try await pager.load(pager.request(.refresh, key: 0, params: params(pageSize: 6)))
        #expect(page.values == [2, 4, 6])
        #expect(page.metadata == ["dropped": "3"])
        // The outer interceptor sees the transformed page; the caller and the state get it too.
        #expect(journal.all == ["outer.intercept(0)", "even.transform([1, 2, 3, 4, 5, 6])", "outer.handle(0)"])
        let published = await states.wait { $0.contains { $0.label == "loaded 0" } }
        guard case .loaded(let loaded)? = published.last(where: { $0.label == "loaded 0" }) else {
            Issue.record("no loaded state")
            return
        }
        #expect(loaded.values == [2, 4, 6])
    }

    @Test func failedSource_isHeardByEveryInterceptorThatLetTheLoadProceed_lastFirst() async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(2))
        source.script(key: 0, .fail(ScriptedError("down", isRetryable: false)))
        let pager = Pager(source: source, interceptors: [
            FailureListener("a", journal: journal), FailureListener("b", journal: journal),
        ])
        await #expect(throws: ScriptedError("down", isRetryable: false)) {
            try await pager.load(pager.request(.refresh, key: 0, params: params()))
        }
        #expect(journal.all == ["a.intercept(0)", "b.intercept(0)", "b.failed(0, down)", "a.failed(0, down)"])
    }

    @Test func failedInterceptor_isHeardByThoseBeforeIt_only() async throws {
        let journal = Journal()
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(2)), interceptors: [
            FailureListener("a", journal: journal), FailureListener("b", journal: journal, failing: 1),
            FailureListener("c", journal: journal),
        ])
        await #expect(throws: FailureListener.Refusal.self) {
            try await pager.load(pager.request(.refresh, key: 0, params: params()))
        }
        #expect(journal.all == ["a.intercept(0)", "b.intercept(0)", "a.failed(0, refused)"])
    }

    @Test func failedTransform_failsTheLoad_andTheInterceptorsBeforeItHearOfIt() async throws {
        let journal = Journal()
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(1)), interceptors: [
            FailureListener("a", journal: journal), BrokenTransform(),
        ])
        await #expect(throws: ScriptedError("broken", isRetryable: false)) {
            try await pager.load(pager.request(.refresh, key: 0, params: params()))
        }
        #expect(journal.all == ["a.intercept(0)", "a.failed(0, broken)"])
    }

    @Test func interceptorFailure_isRetried_perTheRequestsPolicy() async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(1))
        let pager = Pager(source: source, interceptors: [FailureListener("a", journal: journal, failing: 2)])
        let states = StateCollector(pager.states())
        let retry = RetryPolicy(maxRetries: 3, backoff: .immediate)
        let page = try await pager.load(pager.request(.refresh, key: 0, params: params(retry: retry)))
        #expect(page.values == [0, 1, 2])
        #expect(journal.all == ["a.intercept(0)", "a.intercept(0)", "a.intercept(0)"])
        #expect(source.fetchCount == 1)
        let published = await states.wait { $0.contains { $0.label == "loaded 0" } }
        #expect(published.map(\.label) == ["loading 0", "retrying 0", "retrying 0", "loaded 0"])
    }

    @Test func retryHint_isWaitedFor_atLeast() async throws {
        let journal = Journal()
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(1)), interceptors: [
            FailureListener("a", journal: journal, failing: 1, retryAfter: .milliseconds(150)),
        ])
        let retry = RetryPolicy(maxRetries: 1, backoff: .immediate)
        let clock = ContinuousClock()
        let started = clock.now
        _ = try await pager.load(pager.request(.refresh, key: 0, params: params(retry: retry)))
        #expect(clock.now - started >= .milliseconds(150))
        #expect(journal.all.count == 2)
    }

    @Test func retryHint_longerThanTheLongestBackoff_failsTheLoad_namingTheHint() async throws {
        let journal = Journal()
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(1)), interceptors: [
            FailureListener("a", journal: journal, failing: 1, retryAfter: .seconds(90)),
        ])
        let retry = RetryPolicy(maxRetries: 3, backoff: .init(initial: .zero, maximum: .seconds(30)))
        let error = await #expect(throws: PagingError.self) {
            try await pager.load(pager.request(.refresh, key: 0, params: params(retry: retry)))
        }
        #expect(error == .retryAfterBeyondBackoff(retryAfter: .seconds(90), maximum: .seconds(30), error: "refused"))
        #expect(error.map { "\($0)" } == "refused (it says to retry after 90 s, longer than the retry policy's longest wait, 30 s)")
        // Its own failure is not told back to it.
        #expect(journal.all == ["a.intercept(0)"])
    }

    @Test func waits_areSaidAsPeopleReadThem() {
        let said = [Duration.milliseconds(250), .milliseconds(1_500), .seconds(90), .seconds(1_500), .seconds(3 * 3_600),
                    .seconds(12 * 86_400), .milliseconds(Int64.max)].map(\.readable)
        #expect(said == ["250 ms", "1.5 s", "90 s", "25 min", "3 h", "12 days", "more than a year"])
    }

    @Test func keyChain_isAskedWithThePageSize() async throws {
        /// Offsets: the page at offset k holds k ..< k + pageSize.
        struct OffsetSource: PagingSource {
            var refreshKey: Int { 0 }
            func keyChain(for key: Int, pageSize: Int) -> PagingKeyChain<Int> {
                PagingKeyChain(key: key, prevKey: key > 0 ? max(0, key - pageSize) : nil, nextKey: key + pageSize)
            }
            func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
                Page(request: request, values: Array(request.key ..< request.key + request.params.pageSize))
            }
        }
        let pager = Pager(source: OffsetSource())
        let first = try await pager.load(pager.request(.refresh, key: 0, params: params(pageSize: 25)))
        #expect(first.nextKey == 25)
        let second = try await pager.load(pager.request(.append, key: first.nextKey!, params: params(pageSize: 25)))
        #expect(second.values.first == 25 && second.prevKey == 0 && second.nextKey == 50)
    }

    /// Cancelling the wait for the loads in the background cancels them: it returns without
    /// waiting for their source, and the interceptor that asked for the load hears it failed.
    @Test(.timeLimit(.minutes(3))) func cancellingTheWaitForBackgroundLoads_cancelsThem() async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(1))
        source.script(key: 0, .suspend)
        let pager = Pager(source: source, interceptors: [StaleInterceptor(journal: journal)])
        #expect(try await pager.load(pager.request(.refresh, key: 0, params: params())).values == [-1])
        #expect(await eventually { source.suspendedCount == 1 })
        let waiting = Task { await pager.backgroundLoadsFinished() }
        waiting.cancel()
        await waiting.value
        #expect(journal.all == ["stale.failed"])
        source.release(key: 0)
    }

    /// A background revalidation whose transform fails is heard by the interceptor that asked
    /// for it, never by those before it: for them the load succeeded (with the stored page).
    @Test func failedRevalidation_isNotHeardByTheInterceptorsBeforeTheOneThatAskedForIt() async throws {
        let journal = Journal()
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(1)), interceptors: [
            FailureListener("a", journal: journal), StaleInterceptor(journal: journal), BrokenTransform(),
        ])
        let page = try await pager.load(pager.request(.refresh, key: 0, params: params()))
        #expect(page.values == [-1])
        await pager.backgroundLoadsFinished()
        #expect(journal.all == ["a.intercept(0)", "stale.failed"])
    }

    /// An interceptor that tells a failed revalidation from other failed loads hears it as such
    /// (the plugin host warns of it: no caller waits for that load), and not as loadFailed.
    /// The load fails at the source, or in a transform on the page's way back.
    @Test(arguments: [false, true])
    func aFailedRevalidation_isHeardAsOne_byAnInterceptorThatTellsItApart(inATransform: Bool) async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(1))
        if !inATransform { source.script(key: 0, .fail(ScriptedError("down", isRetryable: false))) }
        let pager = Pager(source: source, interceptors: [RevalidationListener(journal: journal)] + (inATransform ? [BrokenTransform()] : []))
        #expect(try await pager.load(pager.request(.refresh, key: 0, params: params())).values == [-1])
        await pager.backgroundLoadsFinished()
        #expect(journal.all == ["revalidation.failed(0)"])
    }
    /// The asker's own transform (storing the fresh page) fails: it hears of it too (the range
    /// of those told, the interceptors before the failing one, was empty).
    @Test func aRevalidationThatTheAskersOwnTransformFails_isHeardByIt() async throws {
        let journal = Journal()
        let pager = Pager(source: ScriptedPagingSource(pages: numberedPages(1)),
                          interceptors: [RevalidationListener(journal: journal, failsItsTransform: true)])
        #expect(try await pager.load(pager.request(.refresh, key: 0, params: params())).values == [-1])
        await pager.backgroundLoadsFinished()
        #expect(journal.all == ["revalidation.failed(0)"])
    }

    /// Superseded by a refresh on its page's way back, a revalidation is heard as one, as when it
    /// is superseded before (it was heard as loadFailed).
    @Test(.timeLimit(.minutes(3))) func aRevalidationSupersededOnItsWayBack_isHeardAsOne() async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 0, .suspend)
        let pager = Pager(source: source, interceptors: [RevalidationListener(journal: journal, staleKeys: [0])])
        #expect(try await pager.load(pager.request(.refresh, key: 0, params: params())).values == [-1])
        #expect(await eventually { source.suspendedCount == 1 })
        _ = try await pager.load(pager.request(.refresh, key: 1, params: params()))
        source.release(key: 0)
        await pager.backgroundLoadsFinished()
        #expect(journal.all == ["revalidation.failed(0)"])
    }

    /// A revalidation that fails after a refresh came is heard with its own error, not as
    /// superseded: a refresh does not cancel it, and a second stale answer starts no other
    /// (`pager run --refresh --refresh` against a failing server said nothing).
    @Test(.timeLimit(.minutes(3))) func aRevalidationFailingAfterARefresh_isHeardWithItsOwnError() async throws {
        let journal = Journal()
        let source = ScriptedPagingSource(pages: numberedPages(3))
        source.script(key: 0, .suspendThenFail(ScriptedError("down", isRetryable: false)))
        let pager = Pager(source: source, interceptors: [RevalidationListener(journal: journal, staleKeys: [0], recordsErrors: true)])
        #expect(try await pager.load(pager.request(.refresh, key: 0, params: params())).values == [-1])
        #expect(await eventually { source.suspendedCount == 1 })
        _ = try await pager.load(pager.request(.refresh, key: 1, params: params()))
        source.release(key: 0)
        await pager.backgroundLoadsFinished()
        #expect(journal.all == ["revalidation.failed(0): \(ScriptedError("down", isRetryable: false))"])
    }
}

/// ``StaleInterceptor`` that hears failed revalidations apart (`revalidationFailed`).
private struct RevalidationListener: PagingInterceptor {
    let journal: Journal
    var failsItsTransform = false
    /// The keys it answers stale; it lets the others proceed. `nil`: every key.
    var staleKeys: Set<Int>?
    /// Whether it journals the error of a failed revalidation too.
    var recordsErrors = false
    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        guard staleKeys?.contains(request.key) ?? true else { return .proceed(request, handleAfterwards: false) }
        return .completeThenRevalidate(Page(request: request, values: [-1]))
    }
    func transform(page: Page<Int, Int>) async throws -> Page<Int, Int> {
        if failsItsTransform { throw ScriptedError("cannot store", isRetryable: false) }
        return page
    }
    func loadFailed(_ request: PagingRequest<Int>, error: any Error) async { journal.add("load.failed(\(request.key))") }
    func revalidationFailed(_ request: PagingRequest<Int>, error: any Error) async {
        journal.add("revalidation.failed(\(request.key))" + (recordsErrors ? ": \(error)" : ""))
    }
}

/// Answers every request with a stale page [-1] and has it loaded again in the background;
/// journals "stale.failed" when that load fails.
private struct StaleInterceptor: PagingInterceptor {
    let journal: Journal
    func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Int> {
        .completeThenRevalidate(Page(request: request, values: [-1]))
    }
    func loadFailed(_ request: PagingRequest<Int>, error: any Error) async { journal.add("stale.failed") }
}
