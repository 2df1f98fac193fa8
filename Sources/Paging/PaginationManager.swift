import Synchronization

/// Keeps a paged list: refresh replaces it, prepend and append grow it at their ends, and every
/// change is published as a ``PaginationManagerOutput``.
///
/// - A direction reaches its end when the page there has no key beyond it; then nothing more is
///   loaded in that direction until a refresh.
/// - Before that, an incomplete last page (fewer values than the page size) whose next key comes
///   from the key chain alone is requested again by the next append and replaced, as in the
///   original SwiftPaging, until a reload brings nothing new; then paging moves on, and an empty
///   page after it (its key from the key chain alone) reaches the end, for now: a refresh looks
///   again (not a page a filter emptied: it is loaded again as a short page is); so does a
///   third empty page in a row. When the page after it has values (or had, before a filter),
///   the short page is loaded once more before that page is added (it may have grown since
///   its reload: what it gained comes before that page's values); when it gained values, they
///   are added instead, and the next append loads that page again. A short page that names its
///   next page itself (``Page/namesItsNextKey``, ``Page/isShortened``) is simply followed.
/// - Empty pages the key chain alone named, after a full page or from the first page on (a few
///   at most), are added and passed. When a page after them, or the last of them loaded again,
///   has values, they are loaded again first, in order: the first that has values now (the data
///   grew into it) takes the place of those after it, which are loaded again by the next appends.
/// - With ``Configuration/maxSize``, the pages farthest from the side being loaded are dropped
///   once the list holds more values than that; they are loaded again when paging goes back.
/// - With ``Configuration/prefetchDistance``, ``itemVisible(at:of:)`` loads the next page when the
///   item on screen is that close to an end.
/// - A refresh cancels the prepends and appends in flight; their pages are dropped.
/// - When the source says its data changed (``PagingSource/invalidation``), the manager
///   refreshes around its reader (``refreshAroundReader()``): at the key the source names for
///   the item last reported by ``itemVisible(at:of:)``, so that the item stays in view.
/// - A failed load becomes that direction's ``LoadState/failed(_:)`` state; the values stay,
///   and ``retry()`` loads again.
/// - A prepend or append whose key names a page the list holds already fails with
///   ``PagingError/repeatedKey(source:kind:key:)``, unfetched; so does an append whose key names
///   one of the last 4,096 pages ``Configuration/maxSize`` dropped at the start since paging last
///   went back (a prepend, at the end): with `maxSize`, keys that go round would otherwise repeat
///   the same pages forever.
/// - Values are not compared across pages: when the data shifts between loads of a source keyed
///   by page numbers or offsets (an item inserted before the pages loaded), an append shows a
///   value the page before it holds (or one is skipped, after a deletion). Keys that name where
///   the next page starts (a cursor) do not shift. (A prepend whose page names a next key other
///   than the first page's, and repeats its values, fails with
///   ``PagingError/overlappingPrepend(source:pageKey:nextKey:firstKey:repeated:)``.)
///
/// Adding a page costs O(log pages) (see ``PagedValues``), whatever the list's length.
///
/// # Thread safety
/// Every method may be called from any task, concurrently. One load per direction runs at a
/// time: asking for an append while one is loading starts none, and returns a task that waits for
/// the one loading (awaiting it waits for its page; cancelling it cancels nothing: the load is
/// its starter's, whose task cancels it).
///
/// # Lifetime
/// A load in flight keeps its manager: let go while a page loads, the manager lives until the
/// page is applied, so that awaiting a task it returned never finds the load cancelled because
/// the caller used the manager for the last time. To stop the loads of a list no one shows any
/// more, cancel the tasks ``refresh(userInfo:)``, ``prepend()`` and ``append()`` return.
public final class PaginationManager<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    public struct Configuration: Sendable {
        /// Values a page asks for.
        public var pageSize: Int
        /// The most values kept; `nil` keeps everything.
        public var maxSize: Int?
        /// How close (in items) to an end ``itemVisible(at:of:)`` starts loading the next page;
        /// with ``maxSize``, at most (kept - pageSize - 2) / 2, where kept is maxSize rounded down
        /// to whole pages (what the list holds once a load dropped the far end's pages): the loads
        /// at one end then bring a still reader's item farther than this from both ends, and
        /// stop (a larger distance had them load at both ends in turn, for ever, each dropping
        /// what the other had loaded; a larger one still lost the item on screen). When kept is
        /// under pageSize + 2 (one page; or two of one value), no distance does that, and
        /// itemVisible loads nothing: call ``append()`` and ``prepend()``.
        public var prefetchDistance: Int
        /// The retry policy of every request.
        public var retryPolicy: RetryPolicy
        /// User info sent with every request.
        public var userInfo: [String: String]
        /// Whether an invalidation of the source (``PagingSource/invalidation``) refreshes
        /// around the reader (``refreshAroundReader()``): the default. A consumer that cannot
        /// take back what it has handed out (an export streaming pages) turns it off and hears
        /// the source's invalidations itself.
        public var refreshesOnInvalidation = true

        public init(pageSize: Int, maxSize: Int? = nil, prefetchDistance: Int = 0,
                    retryPolicy: RetryPolicy = .none, userInfo: [String: String] = [:]) {
            precondition(pageSize > 0, "pageSize must be positive, got \(pageSize)")
            self.pageSize = pageSize
            self.maxSize = maxSize
            self.prefetchDistance = max(0, prefetchDistance)
            self.retryPolicy = retryPolicy
            self.userInfo = userInfo
        }
    }

    public let pager: Pager<Key, Value>
    public let configuration: Configuration

    // load, plan and apply are @inlinable so that an append runs specialized for the caller's
    // Key and Value (with the Pager's and PagedValues' inlinable code); what they touch is
    // @usableFromInline.
    @usableFromInline let state = Locked(State())
    @usableFromInline let broadcast = Broadcast<PaginationManagerOutput<Key, Value>>()

    public init(pager: Pager<Key, Value>, configuration: Configuration) {
        self.pager = pager
        self.configuration = configuration
        // Its own description when it has one (a loaded plugin names itself), else its type: a
        // struct's default description would print all it holds.
        let source = (pager.source as? CustomStringConvertible)?.description ?? "\(type(of: pager.source))"
        let keys = pager.interceptors.isEmpty ? source : "\(source), or an interceptor that set page keys"
        state.withLock {
            $0.sourceDescription = source
            $0.keysDescription = keys
        }
        // Subscribed here, so that no invalidation after init is missed.
        if configuration.refreshesOnInvalidation, let signals = pager.source.invalidation?.signals() {
            let listener = Task { [weak self] in
                for await _ in signals {
                    guard let self else { return }
                    await refreshAroundReader().value
                }
            }
            state.withLock { $0.invalidationListener = listener }
        }
    }

    deinit {
        state.withLock { $0.invalidationListener }?.cancel()
    }

    /// A manager over a new ``Pager`` of `source` and `interceptors`.
    public convenience init(
        source: some PagingSource<Key, Value>,
        pageSize: Int,
        interceptors: [any PagingInterceptor<Key, Value>] = [],
        maxSize: Int? = nil,
        prefetchDistance: Int = 0,
        retryPolicy: RetryPolicy = .none
    ) {
        self.init(pager: Pager(source: source, interceptors: interceptors),
                  configuration: Configuration(pageSize: pageSize, maxSize: maxSize,
                                               prefetchDistance: prefetchDistance, retryPolicy: retryPolicy))
    }

    /// The current output.
    public var output: PaginationManagerOutput<Key, Value> { state.withLock { $0.output } }

    /// A stream that starts with the current output and then gets its changes. Any number of
    /// consumers can iterate their own streams at once.
    ///
    /// Each output is the whole state, so by default a consumer that falls behind gets the
    /// newest one, not every one it missed (`.bufferingNewest(1)`): what it holds stays one
    /// output, whatever `maxSize` dropped since. (Every change, buffered without bound: a lagging
    /// consumer held each output's pages, 250 MB over 20,000 appends with `maxSize` 1,000.) Pass
    /// `.unbounded` to see every change.
    public func outputs(
        buffering: AsyncStream<PaginationManagerOutput<Key, Value>>.Continuation.BufferingPolicy = .bufferingNewest(1)
    ) -> AsyncStream<PaginationManagerOutput<Key, Value>> {
        state.withLock { broadcast.subscribe(initial: $0.output, buffering: buffering) }
    }

    /// Loads the first page, replacing every value once it arrives. `userInfo` is added to the
    /// configured user info of this refresh (e.g. ``PagingUserInfoKey/hardRefresh``).
    @discardableResult
    public func refresh(userInfo: [String: String] = [:]) -> Task<Void, Never> {
        start(.refresh, userInfo: userInfo)
    }

    /// Loads the page before the first one.
    @discardableResult
    public func prepend() -> Task<Void, Never> { start(.prepend, userInfo: [:]) }

    /// Loads the page after the last one (or the last one again when it was incomplete, did not
    /// name its next page, and the end is not reached).
    @discardableResult
    public func append() -> Task<Void, Never> { start(.append, userInfo: [:]) }

    /// Loads again in every direction whose last load failed (a refresh first: while it runs,
    /// there is nothing to prepend or append to). The prepends and appends are cancelled by a
    /// refresh, as those ``prepend()`` and ``append()`` start are.
    @discardableResult
    public func retry() -> Task<Void, Never> {
        let failed = state.withLock { state in
            PagingRequestKind.allCases.filter { state.output[$0].error != nil }
        }
        let loads = failed.map { kind in start(kind, userInfo: kind == .refresh ? nil : [:]) }
        // Cancelling the task cancels the loads, as cancelling those of append() and refresh()
        // does (it let them run, and applied their pages).
        return Task {
            await withTaskCancellationHandler {
                for load in loads { await load.value }
            } onCancel: {
                for load in loads { load.cancel() }
            }
        }
    }

    /// Refreshes so that the reader stays where it is: at the page the source names for the
    /// item last reported by ``itemVisible(at:of:)`` (``PagingSource/refreshKey(around:)``), or at
    /// the source's refresh key when it names none or nothing was shown yet. What a
    /// ``PagingSource/invalidation`` of the source starts. A hard refresh
    /// (``PagingUserInfoKey/hardRefresh``): what caches and stores hold is from before the change.
    @discardableResult
    public func refreshAroundReader() -> Task<Void, Never> {
        let anchor = state.withLock { state -> PagingAnchor<Key, Value>? in
            let values = state.output.values
            guard let visible = state.lastVisible, visible.generation == state.output.generation, !values.isEmpty else { return nil }
            var offset = min(max(0, visible.position - state.output.origin), values.count - 1)
            for page in values.pages {
                if offset < page.values.count {
                    return PagingAnchor(pageKey: page.key, indexInPage: offset, value: page.values[offset],
                                        pageSize: configuration.pageSize)
                }
                offset -= page.values.count
            }
            return nil
        }
        // Asked outside the lock: the answer may come from a plugin.
        let key = anchor.flatMap { pager.source.refreshKey(around: $0) }
        // A hard refresh: what caches and stores hold from before the change is stale.
        return start(.refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"], refreshKey: key)
    }

    /// Tells the manager which item is on screen: its index in `drawn`, the output the screen
    /// was drawn from (the current output when `nil`). Within ``Configuration/prefetchDistance``
    /// of an end that can load more, it starts loading the next page there.
    ///
    /// Pass the output drawn: pages may have been added or dropped at the start since, and an
    /// index into an older list names another item (with ``Configuration/maxSize``, appends
    /// followed one another, each dropping the page on screen). A report about the values of an
    /// earlier refresh is ignored.
    ///
    /// With no values there is no item to report: a first page an interceptor emptied (a filter
    /// that kept none of it) loads nothing more by itself. Show such a list as "loading more"
    /// and call ``append()`` while its append state is idle (not end reached).
    public func itemVisible(at index: Int, of drawn: PaginationManagerOutput<Key, Value>? = nil) {
        // nil: no load is started, when a list too short to keep the item on screen and a page
        // more (kept under pageSize + 2 values) would drop that item with the load, or load at
        // both ends in turn for ever.
        let distance: Int? = configuration.maxSize.map { maxSize in
            let kept = maxSize - maxSize % configuration.pageSize
            let room = kept - configuration.pageSize - 2
            return room < 0 ? nil : min(configuration.prefetchDistance, room / 2)
        } ?? configuration.prefetchDistance
        let (appendNow, prependNow) = state.withLock { state -> (Bool, Bool) in
            let output = state.output
            var index = index
            if let drawn {
                guard drawn.generation == output.generation else { return (false, false) }
                index += drawn.origin - output.origin
            }
            state.lastVisible = (output.generation, output.origin + index)
            guard let distance, !output.isRefreshing, output.values.pageCount > 0 else { return (false, false) }
            return (output.appendState.isIdle && index >= output.values.count - 1 - distance,
                    output.prependState.isIdle && index <= distance)
        }
        if appendNow { append() }
        if prependNow { prepend() }
    }

    /// Runs one load in the caller's task and returns when its page is applied (or dropped).
    /// A prepend or append with no page loaded yet refreshes instead. Does nothing while a load
    /// in the same direction is in flight, or when that direction's end is reached.
    ///
    /// - Parameters:
    ///   - userInfo: added to the configured user info; for a refresh, `nil` reuses that of the
    ///     last refresh, and its key (a retry).
    ///   - refreshKey: for a refresh, the key to load instead of the source's refresh key.
    @inlinable
    public func load(_ kind: PagingRequestKind, userInfo: [String: String]? = [:], refreshKey: Key? = nil) async {
        // In flight as a task of start() is: append() meanwhile hands out a task that waits for it.
        guard let plan = plan(kind, userInfo: userInfo, refreshKey: refreshKey, inCallersTask: true) else { return }
        await run(plan)
    }

    /// Loads the page `plan` asks for and applies it.
    @inlinable
    func run(_ plan: Plan) async {
        var result = await fetch(plan)
        // Refreshes may reach the pager in another order than they were planned here: the pager
        // then supersedes the newer one, and this manager drops the older one's page (the list
        // stayed empty, every state idle). The newest refresh planned loads again once for each
        // older one that reached the pager late. (A refresh of another manager sharing the pager
        // supersedes it for good: two managers each loading again would supersede each other for
        // ever.)
        while plan.kind == .refresh, case .failure(let error) = result, error as? PagingError == .supersededByRefresh,
              state.withLock({ state in
                  guard state.generation == plan.generation, state.lateRefreshes > 0 else { return false }
                  state.lateRefreshes -= 1
                  return true
              }) {
            result = await fetch(plan)
        }
        // An append or prepend superseded by a refresh not planned after it (an older one of this
        // manager's that reached the pager late, or another manager's sharing the pager): the
        // list was not refreshed, so its page is asked for again, once; superseded again, it
        // fails (its page was dropped without a word, the direction idle).
        var appendSupersededAgain = false
        if plan.kind != .refresh, case .failure(let error) = result, error as? PagingError == .supersededByRefresh,
           state.withLock({ $0.generation == plan.generation }) {
            result = await fetch(plan)
            if case .failure(let error) = result, error as? PagingError == .supersededByRefresh { appendSupersededAgain = true }
        }
        // An empty page an interceptor answered with (a store's), where it would end the data, is
        // asked of the source: kept while the data ended there, it ended every later walk there
        // (behind a filter, after a page it made short), whatever the data gained since.
        if case .success(let page) = result, page.isKept, plan.kind == .append,
           state.withLock({ state in state.output.values.lastPage.map { $0.key == plan.anchorKey && state.endsTheData(page, after: $0) } ?? false }) {
            result = await fetch(plan.reloading(plan.key))
        }
        // A page with values (or that had some, before a filter) after empty pages the key chain
        // alone named, or the last of them loaded again with values: each of them is loaded
        // again first, and the first that has values now is where paging goes on, those after it
        // dropped (they are loaded again). The data grew into them after paging passed them, and
        // what it put there was skipped for good.
        var plan = plan
        let hadValues = (try? result.get())?.hadValuesAtTheSource ?? false
        let (emptyRun, stalled) = hadValues ? state.withLock { ($0.emptyRun(before: plan), $0.stalledPage(before: plan)) } : ([], nil)
        if !emptyRun.isEmpty {
            for held in emptyRun {
                var recheck = plan.reloading(held.key)
                recheck.rewinds = true
                let reloaded = await fetch(recheck)
                if case .success(let again) = reloaded, !again.hadValuesAtTheSource { continue }
                // Grown, or failed: this page is not added without it (a retry loads both again).
                (plan, result) = (recheck, reloaded)
                break
            }
        } else if let stalled {
            // So after a stalled short last page: it is loaded again first. What it gained since
            // its reload (items added at the end of the data before this page was loaded) falls
            // before this page's values: it was skipped for good.
            let recheck = plan.reloading(stalled.key)
            let reloaded = await fetch(recheck)
            switch reloaded {
            case .success(let again) where again.values.count > stalled.values.count:
                // It grew: applied as the reload it is; the next append loads this page again.
                (plan, result) = (recheck, reloaded)
            case .success:
                break
            case .failure:
                // Failed: this page is not added without it (a retry loads both again).
                result = reloaded
            }
        }
        let cancelled = Task.isCancelled
        let ended = state.withLock { state -> LoadEnd? in
            if plan.kind == .refresh, plan.generation == state.generation { state.lateRefreshes = 0 }
            // Still this manager's newest refresh, superseded for good: by a refresh of another
            // manager sharing the pager. Said as a failure (retry() loads it again): taken as
            // superseded by a newer one of its own, it left the list empty without a word.
            let forGood = (plan.kind == .refresh && plan.generation == state.generation) || appendSupersededAgain
            state.apply(result, of: plan, maxSize: configuration.maxSize, cancelled: cancelled, supersededForGood: forGood)
            broadcast.yield(state.output)
            // A load run in its caller's task is no longer in flight: those that wait for it go on.
            return plan.callerID.flatMap { state.endCallersLoad($0, of: plan.kind) }
        }
        ended?.signal()
    }

    @inlinable
    func fetch(_ plan: Plan) async -> Result<Page<Key, Value>, any Error> {
        do {
            // Built outside the lock: the key chain may come from a plugin (and take its time).
            let request = pager.request(plan.kind, key: plan.key, params: plan.params)
            if plan.kind == .refresh {
                state.withLock { state in if state.generation != plan.generation { state.lateRefreshes += 1 } }
            }
            return .success(try await pager.load(request))
        } catch {
            return .failure(error)
        }
    }

    // MARK: - Internals

    /// Plans the load now and runs it in a task. Planned before the task starts, the direction
    /// is loading when this returns: calls in a row (``itemVisible(at:of:)`` on every event) start
    /// one load, where tasks that planned later each loaded one more page once the one before
    /// them had ended. With nothing to start, a task that waits for the load of `kind` in flight,
    /// if any: awaiting it waits for the page (an ended task returned then, and a caller took
    /// "loaded" for "ignored"). Not the load's own task: cancelling a prefetch's append, asked for
    /// while a refresh loaded, cancelled the refresh, and left the list empty and idle.
    private func start(_ kind: PagingRequestKind, userInfo: [String: String]?, refreshKey: Key? = nil) -> Task<Void, Never> {
        guard let plan = plan(kind, userInfo: userInfo, refreshKey: refreshKey) else {
            // An append or prepend asked for while a refresh loads gets the refresh's task.
            return state.withLock { state in
                for asked in [kind, .refresh] {
                    guard let (id, load) = state.inFlight[asked] else { continue }
                    switch load {
                    case .task(let task):
                        return Task { await task.value }
                    case .caller(let end):
                        // Made when first waited for: the loads of load(_:) nobody waits for
                        // (most) make none (each cost a page ~8% of row 4's time).
                        let end = end ?? LoadEnd()
                        state.inFlight[asked] = (id, .caller(end))
                        return Task { await end.wait() }
                    }
                }
                return nil
            } ?? Task {}
        }
        return state.withLock { state in
            let id = state.nextTaskID
            state.nextTaskID += 1
            // Removed under the lock it is added under: never before it is added.
            let task = Task {
                await self.run(plan)
                self.state.withLock { state in
                    state.tasks.removeValue(forKey: id)
                    if state.inFlight[plan.kind]?.id == id { state.inFlight[plan.kind] = nil }
                }
            }
            // A refresh cancels the prepends and appends (`tasks`), not an older refresh.
            if kind != .refresh { state.tasks[id] = task }
            state.setInFlight(plan.kind, (id, .task(task)))
            return task
        }
    }

    /// Decides the request of a load and marks its direction loading, or returns `nil` when
    /// there is nothing to load.
    @inlinable
    func plan(_ kind: PagingRequestKind, userInfo: [String: String]?, refreshKey: Key? = nil, inCallersTask: Bool = false) -> Plan? {
        var cancelled: [Task<Void, Never>] = []
        // The source's refresh key for a refresh, and for an append or prepend with no page
        // loaded (which refreshes): asked outside the lock (a source that read the output there
        // deadlocked, and a plugin's took its time).
        let refreshes = kind.isRefresh || state.withLock { $0.output.values.pageCount == 0 }
        let sourceKey = refreshKey == nil && refreshes ? pager.source.refreshKey : nil
        let plan = state.withLock { state -> Plan? in
            var kind = kind, userInfo = userInfo
            // A prepend or append with no page loaded refreshes, as a retry does: what the last
            // refresh asked for, at its key (it loaded the source's refresh key without the
            // refresh's user info). It cancels no task: with no page there is no prepend or
            // append in flight, and the caller may be one of them. (A page without items is a
            // page: its keys say where the others are.)
            let asked = kind
            if !kind.isRefresh && state.output.values.pageCount == 0 {
                guard !state.output.isRefreshing else { return nil }
                kind = .refresh
                userInfo = nil
            }
            var params = PagingRequestParams(pageSize: configuration.pageSize,
                                             retryPolicy: configuration.retryPolicy,
                                             userInfo: configuration.userInfo)
            let anchor: Page<Key, Value>?
            let key: Key
            switch kind {
            case .refresh:
                // A retry (nil user info) loads what the last refresh asked for, at its key.
                if let userInfo {
                    state.refreshUserInfo = userInfo
                    state.refreshKey = refreshKey
                }
                params.userInfo.merge(state.refreshUserInfo) { $1 }
                state.generation &+= 1
                state.stalledKey = nil
                if asked.isRefresh {
                    cancelled = Array(state.tasks.values)
                    state.tasks = [:]
                    // Superseded first (the interceptors hear that, not the cancellation it
                    // brings), and under the lock the generation changed under: after the lock,
                    // a refresh planned later could reach the pager first, and be superseded by
                    // this one without a late refresh counted to load it again.
                    if !cancelled.isEmpty { pager.supersedeLoadsInFlight() }
                }
                state.output.prependState = .idle
                state.output.appendState = .idle
                anchor = nil
                // (Asked under the lock only if the state changed since.)
                key = refreshKey ?? state.refreshKey ?? sourceKey ?? pager.source.refreshKey
            case .append:
                guard !state.output.isRefreshing, !state.output.isAppending, !state.output.appendState.isEndReached,
                      let last = state.output.values.lastPage else { return nil }
                guard let next = last.nextKey else {
                    state.output.appendState = .endReached
                    broadcast.yield(state.output)
                    return nil
                }
                // An incomplete last page is loaded again (it may have grown), until a reload
                // brings nothing new: then paging moves on. Unless the page said where the next
                // one is: then it is short because the server caps its page size.
                let reload = !(last.isComplete || last.namesItsNextKey || last.key == state.stalledKey)
                key = reload ? last.key : next
                if !reload, state.refusesRepeated(key, kind: .append) {
                    broadcast.yield(state.output)
                    return nil
                }
                // From the source: a cache answered with the short page it held, and the items
                // the page had gained were never loaded.
                if reload { params.userInfo[PagingUserInfoKey.reload] = "true" }
                anchor = last
            case .prepend:
                guard !state.output.isRefreshing, !state.output.isPrepending,
                      let first = state.output.values.firstPage else { return nil }
                guard let previous = first.prevKey else {
                    // Published: the outputs() an app renders from kept showing "idle".
                    state.output.prependState = state.unreachableBefore(first) ?? .endReached
                    broadcast.yield(state.output)
                    return nil
                }
                key = previous
                if state.refusesRepeated(key, kind: .prepend) {
                    broadcast.yield(state.output)
                    return nil
                }
                anchor = first
            }
            if let userInfo, !userInfo.isEmpty { params.userInfo.merge(userInfo) { $1 } }
            state.output[kind] = .loading
            broadcast.yield(state.output)
            var plan = Plan(kind: kind, key: key, params: params, generation: state.generation, anchorKey: anchor?.key)
            if inCallersTask {
                plan.callerID = state.nextTaskID
                state.nextTaskID += 1
                state.setInFlight(kind, (plan.callerID!, .caller(nil)))
            }
            return plan
        }
        cancel(cancelled)
        return plan
    }

    @usableFromInline
    func cancel(_ tasks: [Task<Void, Never>]) {
        for task in tasks { task.cancel() }
    }

    @usableFromInline
    struct Plan: Sendable {
        @usableFromInline var kind: PagingRequestKind
        @usableFromInline var key: Key
        @usableFromInline var params: PagingRequestParams
        @usableFromInline var generation: UInt64
        /// The key of the page the load extends (the last page for an append, the first for a
        /// prepend); the page is applied only if it is still there.
        @usableFromInline var anchorKey: Key?
        /// For a load run in its caller's task (``load(_:userInfo:refreshKey:)``): its id in
        /// `inFlight` until it is applied.
        @usableFromInline var callerID: UInt64?
        /// An append that loads again a page the list holds, one of the empty pages at its end:
        /// when it has values now, the pages after it are dropped and it is the last page.
        @usableFromInline var rewinds = false

        /// The page at `key` loaded again from the source, as part of this load.
        @inlinable
        func reloading(_ key: Key) -> Plan {
            var reload = self
            reload.key = key
            reload.params.userInfo[PagingUserInfoKey.reload] = "true"
            return reload
        }

        @inlinable
        init(kind: PagingRequestKind, key: Key, params: PagingRequestParams, generation: UInt64, anchorKey: Key?) {
            self.kind = kind
            self.key = key
            self.params = params
            self.generation = generation
            self.anchorKey = anchorKey
        }
    }

    @usableFromInline
    struct State: Sendable {
        @usableFromInline var output = PaginationManagerOutput<Key, Value>()
        /// Bumped by every refresh; a load planned in an older generation is dropped.
        @usableFromInline var generation: UInt64 = 0
        /// Refreshes of this manager that reached the pager after a newer one was planned (each
        /// may supersede the newest there), not yet answered by the newest loading again.
        @usableFromInline var lateRefreshes = 0
        @usableFromInline var refreshUserInfo: [String: String] = [:]
        /// The key the last refresh asked for instead of the source's refresh key, if any.
        @usableFromInline var refreshKey: Key?
        /// The key of an incomplete last page whose reload brought no new values.
        @usableFromInline var stalledKey: Key?
        /// How many pages at the end are empty, each named by the key chain alone.
        @usableFromInline var emptyPagesAtEnd = 0
        /// The tasks of the prepends and appends running, by id.
        @usableFromInline var tasks: [UInt64: Task<Void, Never>] = [:]
        @usableFromInline var nextTaskID: UInt64 = 0
        /// The load of each kind started last, while it runs.
        @usableFromInline var inFlight: [PagingRequestKind: (id: UInt64, load: InFlightLoad)] = [:]
        /// The ends of loads run in their callers' tasks that a newer load of their kind took the
        /// place of in `inFlight` (a refresh after a refresh) while callers waited for them.
        @usableFromInline var replacedEnds: [UInt64: LoadEnd] = [:]
        /// The pager's source as it describes itself, for errors about its pages.
        @usableFromInline var sourceDescription = ""
        /// Who gave the keys that go round, for ``PagingError/repeatedKey(source:kind:key:)``:
        /// the source, or an interceptor's transform (a cycle a transform made was blamed on
        /// the source).
        @usableFromInline var keysDescription = ""
        /// The item ``itemVisible(at:of:)`` was last told of: its refresh and its place among
        /// that refresh's values (``PaginationManagerOutput/origin`` plus its index).
        @usableFromInline var lastVisible: (generation: UInt64, position: Int)?
        /// Refreshes around the reader on each of the source's invalidations.
        @usableFromInline var invalidationListener: Task<Void, Never>?
        /// The keys of the pages the list holds.
        @usableFromInline var heldKeys: Set<Key> = []
        /// The keys of the last pages dropped at the start (by appends) and at the end (by
        /// prepends) since paging last turned round: paging on may not load them again. Paging
        /// back forgets them: a page may be named by another key from the other side (a cursor
        /// API's before and after cursors), and the keys it was dropped under would then be
        /// refused for good when paging went on again.
        @usableFromInline var droppedAtStart = DroppedKeys<Key>(), droppedAtEnd = DroppedKeys<Key>()

        @usableFromInline
        init() {}

        /// Makes `entry` the load of `kind` in flight, keeping the end of the one it replaces if
        /// callers wait for it.
        @usableFromInline
        mutating func setInFlight(_ kind: PagingRequestKind, _ entry: (id: UInt64, load: InFlightLoad)) {
            if let old = inFlight[kind], case .caller(let end?) = old.load { replacedEnds[old.id] = end }
            inFlight[kind] = entry
        }

        /// The load `id` of `kind`, run in its caller's task, was applied: no longer in flight.
        /// Returns its end, to signal, if callers wait for it.
        @usableFromInline
        mutating func endCallersLoad(_ id: UInt64, of kind: PagingRequestKind) -> LoadEnd? {
            guard let entry = inFlight[kind], entry.id == id else { return replacedEnds.isEmpty ? nil : replacedEnds.removeValue(forKey: id) }
            inFlight[kind] = nil
            if case .caller(let end) = entry.load { return end }
            return nil
        }

        /// The last page, when `plan` appends the page after it and it is short, names no next
        /// page of its own, and its reload brought nothing new (`stalledKey`): loaded again
        /// before the page after it is added.
        @inlinable
        func stalledPage(before plan: Plan) -> Page<Key, Value>? {
            guard plan.kind == .append, plan.generation == generation, let last = output.values.lastPage,
                  last.key == plan.anchorKey, last.key == stalledKey, last.key != plan.key, last.nextKey == plan.key,
                  !last.isComplete, !last.namesItsNextKey else { return nil }
            return last
        }

        /// The empty pages at the end of the list that the key chain alone named, first to last,
        /// when `plan` appends the page after them or loads the last of them again (that one
        /// left out); else none. As many as appends follow at most (a list of empty pages
        /// prepended had each loaded again by one append).
        @inlinable
        func emptyRun(before plan: Plan) -> [Page<Key, Value>] {
            guard plan.kind == .append, plan.generation == generation, let last = output.values.lastPage, last.key == plan.anchorKey,
                  plan.key == last.key || plan.key == last.nextKey else { return [] }
            var run: [Page<Key, Value>] = [], values = output.values, walked = 0
            while walked <= Self.emptyPagesFollowed, let page = values.lastPage, page.isEmptyByTheKeyChainAlone {
                if page.key != plan.key { run.append(page) }
                values = values.droppingLast()
                walked += 1
            }
            return run.reversed()
        }

        /// Whether `page`, after `last`, ends the data for now: empty, where the key chain alone
        /// named a page, after a short page with values (or one a filter emptied), or after as
        /// many such empty pages as appends follow.
        @inlinable
        func endsTheData(_ page: Page<Key, Value>, after last: Page<Key, Value>) -> Bool {
            page.key != last.key && page.isEmptyByTheKeyChainAlone && !last.isComplete
                && (!last.values.isEmpty || last.isEmptiedByTransform || emptyPagesAtEnd >= Self.emptyPagesFollowed)
        }

        /// Empty pages in a row at the end, each named by the key chain alone, that appends follow;
        /// one more reaches the end.
        @usableFromInline static var emptyPagesFollowed: Int { 2 }

        /// Whether loading `key` as `kind` would load a page the list holds already, or one
        /// dropped at the other end; then that direction fails saying so (a store whose next key
        /// was an earlier page's repeated the same pages, exit 0; with maxSize, as `pager run`
        /// streams, a source whose keys went round did so still).
        @inlinable
        mutating func refusesRepeated(_ key: Key, kind: PagingRequestKind) -> Bool {
            let dropped = kind == .append ? droppedAtStart.contains(key) : droppedAtEnd.contains(key)
            guard heldKeys.contains(key) || dropped else { return false }
            let error = PagingError.repeatedKey(source: keysDescription, kind: kind, key: "\(key)")
            output[kind] = .failed(error)
            output.lastError = error
            return true
        }

        /// Applies the outcome of `plan`'s load; `cancelled` when the task that ran it was
        /// cancelled (a CancellationError a source throws of its own accord is a failure).
        @inlinable
        mutating func apply(_ result: Result<Page<Key, Value>, any Error>, of plan: Plan, maxSize: Int?, cancelled: Bool,
                            supersededForGood: Bool = false) {
            guard plan.generation == generation else { return }
            let kind = plan.kind
            let page: Page<Key, Value>
            switch result {
            case .failure(let error):
                // A prepend or append next to a page no longer at that end (dropped as the other
                // end grew): its failure is dropped, as its page would have been, and the
                // direction is idle again (shown failed, it loaded nothing more by itself).
                if kind != .refresh, (kind == .append ? output.values.lastPage : output.values.firstPage)?.key != plan.anchorKey {
                    output[kind] = kind == .prepend ? prependStateAtTheFirstPage : .idle
                    return
                }
                if (cancelled && error is CancellationError) || (error as? PagingError == .supersededByRefresh && !supersededForGood) {
                    output[kind] = .idle
                } else {
                    output[kind] = .failed(error)
                    output.lastError = error
                }
                // The list shown stays, and with it what its ends say.
                if kind == .refresh, let first = output.values.firstPage, let last = output.values.lastPage {
                    output.prependState = unreachableBefore(first) ?? (first.prevKey == nil ? .endReached : .idle)
                    output.appendState = last.nextKey == nil ? .endReached : .idle
                }
                return
            case .success(let loaded):
                page = loaded
            }
            switch kind {
            case .refresh:
                output.values = PagedValues().appending(page)
                heldKeys = [page.key]
                emptyPagesAtEnd = 0
                droppedAtStart = DroppedKeys()
                droppedAtEnd = DroppedKeys()
                output.generation = plan.generation
                output.origin = 0
                output.refreshState = .idle
                output.prependState = page.prevKey == nil ? .endReached : .idle
                output.appendState = page.nextKey == nil ? .endReached : .idle
            case .append:
                guard let last = output.values.lastPage, last.key == plan.anchorKey else {
                    output.appendState = .idle
                    return
                }
                if plan.rewinds, page.key != last.key {
                    // One of the empty pages at the end has values now: the ones after it go.
                    guard heldKeys.contains(page.key) else {
                        output.appendState = .idle
                        return
                    }
                    while let dropped = output.values.lastPage, dropped.key != page.key {
                        heldKeys.remove(dropped.key)
                        output.values = output.values.droppingLast()
                    }
                    stalledKey = nil
                    emptyPagesAtEnd = 0
                    output.values = output.values.replacingLast(with: page)
                } else if last.key == page.key {
                    stalledKey = page.values.count <= last.values.count ? page.key : nil
                    output.values = output.values.replacingLast(with: page)
                    if !page.values.isEmpty { emptyPagesAtEnd = 0 }
                } else if endsTheData(page, after: last) {
                    // Nothing after a short last page with values, where only the key chain said
                    // a page would be: the data ends there for now (a refresh looks again). Added,
                    // the empty page was the short page paging went on from, and what the page
                    // before gained later was skipped for good (a probe). Empty pages after an
                    // empty one are followed (a source may have none to show in a page), a few:
                    // after a full last page, such a source added empty pages without end.
                    output.appendState = .endReached
                    return
                } else if refusesRepeated(page.key, kind: .append) {
                    // A prepend that landed first holds it (both named one page).
                    return
                } else {
                    stalledKey = nil
                    output.values = output.values.appending(page)
                    heldKeys.insert(page.key)
                    droppedAtEnd.removeAll()
                    emptyPagesAtEnd = page.isEmptyByTheKeyChainAlone ? emptyPagesAtEnd + 1 : 0
                }
                output.appendState = page.nextKey == nil ? .endReached : .idle
                // Pages dropped at the start: there is more to prepend again, unless the new
                // first page names no key before it (it said "idle", then "end reached" while
                // earlier items existed). A prepend in flight stays loading (its page, no longer
                // next to the first, is dropped), and a failure stays to be retried.
                if trim(maxSize, dropping: .prepend), !output.prependState.isLoading {
                    if let unreachable = output.values.firstPage.flatMap({ unreachableBefore($0) }) {
                        output.prependState = unreachable
                    } else if output.prependState.isEndReached || output.prependState.error != nil {
                        // The end or the failure was that of a page no longer first.
                        output.prependState = .idle
                    }
                }
            case .prepend:
                guard let first = output.values.firstPage, first.key == plan.anchorKey else {
                    // Dropped with its page; before the first page now, maybe nothing can load.
                    output.prependState = prependStateAtTheFirstPage
                    return
                }
                if let nextKey = page.nextKey, nextKey != first.key, case let repeated = Self.repeatedValues(page, before: first), repeated > 0 {
                    let error = PagingError.overlappingPrepend(source: sourceDescription, pageKey: "\(page.key)", nextKey: "\(nextKey)",
                                                               firstKey: "\(first.key)", repeated: repeated)
                    output.prependState = .failed(error)
                    output.lastError = error
                    return
                }
                guard !refusesRepeated(page.key, kind: .prepend) else { return }
                output.values = output.values.prepending(page)
                heldKeys.insert(page.key)
                droppedAtStart.removeAll()
                output.origin -= page.values.count
                output.prependState = page.prevKey == nil ? .endReached : .idle
                // The end or the failure was that of a page no longer last: paging there again
                // (itemVisible only loads in an idle direction) loads the pages dropped.
                if trim(maxSize, dropping: .append), output.appendState.isEndReached || output.appendState.error != nil {
                    output.appendState = .idle
                }
            }
        }

        /// How many of `page`'s last values are `first`'s first ones (when values are Hashable;
        /// 0 otherwise): the longest such overlap. Equal values are taken for the same item only
        /// when each page's values are distinct: in data where values repeat (ratings, states),
        /// equal values at the seam say nothing (0).
        @inlinable
        static func repeatedValues(_ page: Page<Key, Value>, before first: Page<Key, Value>) -> Int {
            let values = page.values.map { $0 as? AnyHashable }, head = first.values.map { $0 as? AnyHashable }
            guard let firstValue = head.first, firstValue != nil, let start = values.firstIndex(of: firstValue) else { return 0 }
            // Distinct values have one place where the seam can be: a later one would repeat the
            // first value, and say nothing (trying each cost a page of repeated values
            // quadratic time, under the lock: 38 s for 20,000).
            guard values.count - start <= head.count, values[start...].elementsEqual(head[..<(values.count - start)]) else { return 0 }
            // Looked at only when the seam repeats: most prepends have no overlap to weigh.
            guard Set(values).count == values.count, Set(head).count == head.count else { return 0 }
            return values.count - start
        }

        /// Idle, unless nothing can load before the first page held (``unreachableBefore(_:)``):
        /// prepending's state once a prepend next to a page since dropped ended.
        @inlinable
        var prependStateAtTheFirstPage: LoadState { output.values.firstPage.flatMap { unreachableBefore($0) } ?? .idle }

        /// The state of prepending before `first` when it names no key before it although pages
        /// before it were dropped (values start past the refresh's first one), else nil.
        @inlinable
        func unreachableBefore(_ first: Page<Key, Value>) -> LoadState? {
            guard first.prevKey == nil, output.origin > 0 else { return nil }
            return .failed(PagingError.droppedPagesUnreachable(source: sourceDescription, firstKey: "\(first.key)"))
        }

        /// Drops pages at one end while more than `maxSize` values are held, keeping at least
        /// one page; `true` when any page was dropped.
        @inlinable
        mutating func trim(_ maxSize: Int?, dropping end: PagingRequestKind) -> Bool {
            guard let maxSize else { return false }
            var dropped = false
            while output.values.count > maxSize, output.values.pageCount > 1 {
                let page = end == .prepend ? output.values.firstPage! : output.values.lastPage!
                heldKeys.remove(page.key)
                if end == .prepend {
                    output.origin += page.values.count
                    output.values = output.values.droppingFirst()
                    droppedAtStart.insert(page.key)
                } else {
                    output.values = output.values.droppingLast()
                    droppedAtEnd.insert(page.key)
                    emptyPagesAtEnd = 0
                }
                dropped = true
            }
            return dropped
        }
    }
}

/// A load in flight, for the callers that ask for one of its kind meanwhile: a task of
/// ``PaginationManager/start(_:userInfo:refreshKey:)``, or a load run in its caller's task
/// (``PaginationManager/load(_:userInfo:refreshKey:)``), which a task waits for on demand.
@usableFromInline
enum InFlightLoad: Sendable {
    case task(Task<Void, Never>)
    /// Its end, made when a caller first waits for it.
    case caller(LoadEnd?)
}

/// The end of a load run in its caller's task.
@usableFromInline
final class LoadEnd: Sendable {
    private let state = Locked<(ended: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    @usableFromInline
    init() {}

    @usableFromInline
    func signal() {
        let waiters = state.withLock { state in
            state.ended = true
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    func wait() async {
        await withCheckedContinuation { continuation in
            let ended = state.withLock { state in
                if !state.ended { state.waiters.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() }
        }
    }
}

/// The keys of the last ``capacity`` pages dropped at one end of a list, the oldest forgotten
/// first: bounded, so that a list paged through for ever with `maxSize` stays as small.
@usableFromInline
struct DroppedKeys<Key: Hashable & Sendable>: Sendable {
    @usableFromInline static var capacity: Int { 4_096 }
    @usableFromInline var keys: Set<Key> = []
    /// The keys in the order they were dropped, from `start` (those before it are forgotten).
    @usableFromInline var order: [Key] = []
    @usableFromInline var start = 0

    @inlinable init() {}

    @inlinable func contains(_ key: Key) -> Bool { keys.contains(key) }

    @inlinable mutating func removeAll() { self = DroppedKeys() }

    @inlinable mutating func insert(_ key: Key) {
        guard keys.insert(key).inserted else { return }
        order.append(key)
        if keys.count > Self.capacity {
            keys.remove(order[start])
            start += 1
        }
        // What was forgotten goes once it is as long as what is kept.
        if start >= Self.capacity {
            order.removeFirst(start)
            start = 0
        }
    }
}
