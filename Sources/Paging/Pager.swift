import Synchronization

/// Runs requests through a chain of interceptors to a source and publishes what happens.
///
/// A request passes the interceptors in order; the first that completes it answers it,
/// otherwise the source fetches the page (each step retried per the request's ``RetryPolicy``).
/// The page then goes back to each interceptor that asked for it, in reverse order, each of
/// which may transform it, and is published on ``states()``. When a load fails, the
/// interceptors that let it proceed hear of it.
///
/// - A failed load is a ``PagingState/failed(_:_:)`` state; the pager goes on serving.
/// - Identical requests (kind, key chain, page size) in flight share one fetch (see
///   ``Deduplication``).
/// - A refresh supersedes the loads in flight, an older refresh's too: their pages are dropped,
///   never published nor handed back to the interceptors (a cache keeps the newer refresh's),
///   and their callers get ``PagingError/supersededByRefresh``. Those started with ``send(_:)``
///   are cancelled outright. A stale page's revalidation started before the refresh is dropped
///   too. (Unless ``refreshSupersedes`` is false: a pager that serves many independent
///   readers, each paging on its own.)
///
/// # Thread safety
/// Every method may be called from any task, concurrently.
///
/// # Cancellation
/// ``load(_:)`` runs the chain in the caller's task: cancelling that task cancels its fetch.
/// When callers share a fetch and the one running it is cancelled, another caller takes over.
public final class Pager<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    public let source: any PagingSource<Key, Value>
    public let interceptors: [any PagingInterceptor<Key, Value>]
    public let deduplication: Deduplication
    /// Whether a refresh supersedes the prepends and appends in flight (the default: one list,
    /// which a refresh starts again). False for a pager whose requests come from independent
    /// readers (`pager serve`'s clients, each with its own cursor): a refresh is then a load of
    /// the first page like any other, shared with an identical one in flight, and cancels none.
    public let refreshSupersedes: Bool

    // The hot path (load → register → run → passInterceptors → fetch → finish) is @inlinable so
    // that it is specialized for the caller's Key and Value: unspecialized, about half of a
    // request went to runtime generic metadata lookups. What it touches is @usableFromInline.
    @usableFromInline let registry = Locked(Registry())
    @usableFromInline let broadcast = Broadcast<PagingState<Key, Value>>()
    /// Bumped by every refresh; a load from an older generation is superseded.
    /// Written only under `registry`'s lock (so that a refresh is atomic with what finish
    /// decides and publishes); an atomic so that the early check before handing a page back
    /// to the interceptors, and the registration without deduplication, need no lock.
    @usableFromInline let generation = Atomic<UInt64>(0)

    public init(
        source: some PagingSource<Key, Value>,
        interceptors: [any PagingInterceptor<Key, Value>] = [],
        deduplication: Deduplication = .inFlight,
        refreshSupersedes: Bool = true
    ) {
        self.source = source
        self.interceptors = interceptors
        self.deduplication = deduplication
        self.refreshSupersedes = refreshSupersedes
    }

    /// A stream of every state from now on. Any number of consumers can iterate their own
    /// streams at once; a stream ends when its task is cancelled or the pager is gone.
    ///
    /// A consumer that falls behind keeps the newest 1,024 states by default, and loses the
    /// older ones (a `loaded` state holds its page: a stream kept and not read, buffering
    /// without bound, grew by 6 MB every 5,000 appends). Pass `.unbounded` to keep every one.
    public func states(
        buffering: AsyncStream<PagingState<Key, Value>>.Continuation.BufferingPolicy = .bufferingNewest(1_024)
    ) -> AsyncStream<PagingState<Key, Value>> {
        broadcast.subscribe(buffering: buffering)
    }

    /// A request for `key` whose key chain comes from the source.
    @inlinable
    public func request(_ kind: PagingRequestKind, key: Key, params: PagingRequestParams) -> PagingRequest<Key> {
        PagingRequest(kind: kind, keyChain: source.keyChain(for: key, pageSize: params.pageSize), params: params)
    }

    /// A refresh request for the source's refresh key.
    public func refreshRequest(params: PagingRequestParams) -> PagingRequest<Key> {
        request(.refresh, key: source.refreshKey, params: params)
    }

    /// Loads the page for `request` in the caller's task.
    ///
    /// - Throws: the error of the interceptor or source that failed (after retries),
    ///   `CancellationError` when the caller's task is cancelled, or
    ///   ``PagingError/supersededByRefresh`` when a refresh started meanwhile.
    @inlinable
    public func load(_ request: PagingRequest<Key>) async throws -> Page<Key, Value> {
        // Computed once: it is hashed on registration and again when the load finishes. A hard
        // refresh or a reload shares nothing: it must reach the source.
        let identity = (deduplication.sharesInFlight || deduplication.reuseWindow != nil) && !request.params.goesToSource
            ? request.sharingKey : nil
        while true {
            switch register(request, identity) {
            case .reuse(let page):
                return page
            case .owner(let load, let generation):
                return try await run(request, identity, load, generation)
            case .joined(let load, let waiter):
                // The caller running the shared fetch was cancelled when this returns nil;
                // unless this one is too, it runs the request itself.
                if let page = try await join(load, as: waiter) { return page }
            }
        }
    }

    /// Starts loading `request` in a new task and returns it at once. A refresh cancels the
    /// prepends and appends started this way.
    @discardableResult
    public func send(_ request: PagingRequest<Key>) -> Task<Page<Key, Value>, any Error> {
        // Created under the lock, so the task cannot end (and unregister) before it is registered.
        registry.withLock { registry in
            let id = registry.nextTaskID
            registry.nextTaskID += 1
            let task = Task {
                defer { self.registry.withLock { _ = $0.sentTasks.removeValue(forKey: id) } }
                return try await self.load(request)
            }
            if !request.kind.isRefresh { registry.sentTasks[id] = task }
            return task
        }
    }

    // MARK: - Registration

    @usableFromInline
    enum Ticket {
        /// Runs the chain. `load` is the shared load others may join (`nil` without sharing).
        case owner(InFlightLoad?, generation: UInt64)
        case joined(Joiners, waiter: Int)
        case reuse(Page<Key, Value>)
    }

    @inlinable
    func register(_ request: PagingRequest<Key>, _ identity: PagingRequest<Key>.SharingKey?) -> Ticket {
        let isRefresh = request.kind.isRefresh && refreshSupersedes
        // Nothing to share or reuse: an append or prepend only needs the generation.
        guard let identity else {
            return isRefresh ? registerRefresh() : .owner(nil, generation: generation.load(ordering: .acquiring))
        }
        var toCancel: [Task<Page<Key, Value>, any Error>] = []
        let ticket = registry.withLock { registry -> Ticket in
            // A page loaded before the latest refresh (before this one, for a refresh) is not
            // the data since: not reused.
            let since = registry.refreshedAt
            let current: UInt64
            if isRefresh {
                current = generation.load(ordering: .relaxed) &+ 1
                generation.store(current, ordering: .releasing)
                registry.refreshedAt = current
                toCancel = registry.takeSentTasks()
            } else {
                current = generation.load(ordering: .relaxed)
            }
            if let window = deduplication.reuseWindow, let recent = registry.recent[identity] {
                if recent.generation >= since, deduplication.clock.now() - recent.finishedAt <= window {
                    // A refresh answered with the data before it starts no new data: the loads
                    // after it may be answered from that data too (they went to the source, and
                    // the list mixed the page kept with pages of data changed since).
                    if isRefresh { registry.refreshedAt = since }
                    return .reuse(recent.page)
                }
                registry.recent[identity] = nil
            }
            guard deduplication.sharesInFlight else { return .owner(nil, generation: current) }
            if let load = registry.shared[identity], load.generation == current {
                return join(load)
            }
            let load = InFlightLoad(generation: current)
            registry.shared[identity] = load
            return .owner(load, generation: current)
        }
        if !toCancel.isEmpty { cancel(toCancel) }
        return ticket
    }

    /// Supersedes the loads in flight, as a refresh does when it starts (a ``PaginationManager``
    /// about to cancel them for its refresh: they then fail as superseded, not as cancelled).
    /// Not a refresh itself: the pages loaded since the latest one may still be reused (by the
    /// refresh that comes next, too).
    @usableFromInline
    func supersedeLoadsInFlight() {
        guard refreshSupersedes else { return }
        registry.withLock { _ in generation.store(generation.load(ordering: .relaxed) &+ 1, ordering: .releasing) }
    }

    /// A refresh without deduplication: bumps the generation and cancels the sent tasks.
    @usableFromInline
    func registerRefresh() -> Ticket {
        let (current, toCancel) = registry.withLock { registry -> (UInt64, [Task<Page<Key, Value>, any Error>]) in
            let current = generation.load(ordering: .relaxed) &+ 1
            generation.store(current, ordering: .releasing)
            registry.refreshedAt = current
            return (current, registry.takeSentTasks())
        }
        cancel(toCancel)
        return .owner(nil, generation: current)
    }

    /// Joins a load in flight (under the registry's lock). Off the hot path: not inlinable.
    @usableFromInline
    func join(_ load: InFlightLoad) -> Ticket {
        let joiners: Joiners
        if let existing = load.joiners {
            joiners = unsafeDowncast(existing, to: Joiners.self)
        } else {
            joiners = Joiners()
            load.joiners = joiners
        }
        return .joined(joiners, waiter: joiners.addWaiter())
    }

    @usableFromInline
    func cancel(_ tasks: [Task<Page<Key, Value>, any Error>]) {
        for task in tasks { task.cancel() }
    }

    /// Waits for the shared load; `nil` when the caller running it was cancelled and this
    /// caller is not (it then runs the request itself). Rarely run, so not inlinable.
    @usableFromInline
    func join(_ load: Joiners, as waiter: Int) async throws -> Page<Key, Value>? {
        switch await wait(for: load, as: waiter) {
        case .page(let page): return page
        case .failure(let error): throw error
        case .ownerCancelled:
            try Task.checkCancellation()
            return nil
        }
    }

    @usableFromInline
    func wait(for load: Joiners, as waiter: Int) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                registry.withLock { _ in
                    if let outcome = load.outcome {
                        continuation.resume(returning: outcome)
                    } else if Task.isCancelled {
                        load.departed += 1
                        continuation.resume(returning: .failure(CancellationError()))
                    } else {
                        load.waiters[waiter] = continuation
                    }
                }
            }
        } onCancel: {
            let continuation = registry.withLock { _ in
                let continuation = load.removeWaiter(waiter)
                if continuation != nil { load.departed += 1 }
                return continuation
            }
            continuation?.resume(returning: .failure(CancellationError()))
        }
    }

    // MARK: - Running the chain

    // @inline(__always) here and on passInterceptors and fetch: one call site each, and every
    // async function not inlined costs a frame on the task allocator and copies of the page.
    @inlinable @inline(__always)
    func run(
        _ request: PagingRequest<Key>, _ identity: PagingRequest<Key>.SharingKey?,
        _ load: InFlightLoad?, _ generation: UInt64
    ) async throws -> Page<Key, Value> {
        broadcast.yield(.loading(request))
        var observers = Observers<Key>()
        let outcome: Outcome
        do {
            var page = try await passInterceptors(request, observers: &observers, generation: generation)
            if observers.any { page = try await handBack(page, to: observers, generation: generation) }
            outcome = .page(page)
        } catch is CancellationError where Task.isCancelled {
            outcome = .ownerCancelled
        } catch {
            outcome = .failure(error)
        }
        return try finish(request, identity, load, generation, with: outcome)
    }

    /// Runs `request` through the interceptors from `start` on and the source. When a step
    /// fails (after its retries), the interceptors before it that let the request proceed hear
    /// of it before the error goes on (of a refresh superseding it, once `generation` is past).
    @inlinable @inline(__always)
    func passInterceptors(
        _ request: PagingRequest<Key>, from start: Int = 0, observers: inout Observers<Key>, generation: UInt64
    ) async throws -> Page<Key, Value> {
        var request = request
        // The step running: an interceptor's index, or `interceptors.count` for the source.
        var step = start
        do {
            while step < interceptors.count {
                switch try await intercept(request, at: step) {
                case .proceed(let next, let handleAfterwards):
                    if handleAfterwards { observers.insert(step) }
                    observers.passed(next, for: request, at: step)
                    request = chained(next, after: request)
                case .complete(var page):
                    page.isKept = true
                    return page
                case .completeThenRevalidate(var page):
                    revalidate(request, after: step)
                    page.isKept = true
                    return page
                case .proceedOrFallBack(let next, let fallback, let whenUsed):
                    observers.insert(step)
                    observers.passed(next, for: request, at: step)
                    // This interceptor let the request proceed: it hears a failure too.
                    step += 1
                    return try await passOrFallBack(chained(next, after: request), after: step - 1, fallback: fallback, whenUsed: whenUsed,
                                                    observers: &observers, generation: generation)
                }
                step += 1
            }
            return try await fetch(request)
        } catch {
            if step > start { await tellFailure(error, of: request, to: start..<step, generation: generation) }
            throw error
        }
    }

    /// `next`, as an interceptor passed `request` on: when it asks for another key or page size
    /// and names no neighbours, with the source's key chain for it (without neighbours, its page
    /// would end paging there; the ones of the key it replaced are not its own).
    @inlinable @inline(__always)
    func chained(_ next: PagingRequest<Key>, after request: PagingRequest<Key>) -> PagingRequest<Key> {
        guard next.key != request.key || next.params.pageSize != request.params.pageSize,
              next.keyChain.prevKey == nil, next.keyChain.nextKey == nil else { return next }
        var chained = next
        chained.keyChain = source.keyChain(for: next.key, pageSize: next.params.pageSize)
        return chained
    }

    /// Interceptor `index`'s answer, retried per the request's policy when it throws.
    @inlinable @inline(__always)
    func intercept(_ request: PagingRequest<Key>, at index: Int) async throws -> PagingInterceptResult<Key, Value> {
        do {
            return try await interceptors[index].intercept(request: request)
        } catch {
            return try await retry(request, after: error) { try await self.interceptors[index].intercept(request: request) }
        }
    }

    /// Tells the interceptors in `range` that the load of `request` failed with `error`; a load
    /// a refresh superseded (`generation` is past) failed because of it, whatever its error (the
    /// manager cancels it: they heard a CancellationError), but for `asker`, the interceptor
    /// whose stale page the load revalidates. Off the hot path.
    @usableFromInline
    func tellFailure(
        _ error: any Error, of request: PagingRequest<Key>, to range: Range<Int>, generation: UInt64, revalidatedFor asker: Int? = nil
    ) async {
        let superseded = isSuperseded(generation)
        for index in range.reversed() {
            // A revalidation's own failure stays what it was, but for a cancellation: a refresh
            // does not cancel it, and its server's error said as a supersession was said nowhere.
            let keepsError = index == asker && !(error is CancellationError)
            await tellFailure(superseded && !keepsError ? PagingError.supersededByRefresh : error,
                              of: request, to: index, revalidatedFor: asker)
        }
    }

    /// Tells interceptor `index` that the load of `request` failed: as a failed revalidation
    /// when it is the one that asked for the load (`asker`).
    @usableFromInline
    func tellFailure(_ error: any Error, of request: PagingRequest<Key>, to index: Int, revalidatedFor asker: Int?) async {
        if index == asker {
            await interceptors[index].revalidationFailed(request, error: error)
        } else {
            await interceptors[index].loadFailed(request, error: error)
        }
    }

    /// The rest of the chain after interceptor `index`, or `fallback` when it fails. Off the hot path.
    @usableFromInline
    func passOrFallBack(
        _ request: PagingRequest<Key>, after index: Int, fallback: Page<Key, Value>,
        whenUsed: @Sendable (any Error) -> Void, observers: inout Observers<Key>, generation: UInt64
    ) async throws -> Page<Key, Value> {
        var rest = Observers<Key>(observedBefore: true)
        do {
            let page = try await passInterceptors(request, from: index + 1, observers: &rest, generation: generation)
            observers.formUnion(rest)
            return page
        } catch is CancellationError where Task.isCancelled {
            throw CancellationError()
        } catch {
            whenUsed(error)
            // The stored page is not handed back to the interceptors that would store it again.
            observers.remove(index)
            var kept = fallback
            kept.isKept = true
            return kept
        }
    }

    /// Loads `request` through the interceptors after `index` and the source in a task of its
    /// own, and hands the page to interceptor `index` and to those of the rest that observe.
    @usableFromInline
    func revalidate(_ request: PagingRequest<Key>, after index: Int) {
        // A refresh from now on supersedes it: its page, loaded before, is not handed back.
        let generation = generation.load(ordering: .acquiring)
        // One at a time for a request and the interceptor that asked: each hit of a stale page
        // started one more.
        let revalidation = Registry.Revalidation(request: request.sharingKey, interceptor: index)
        // Registered under the lock, so the task cannot end (and unregister) before it is registered.
        registry.withLock { registry in
            guard registry.revalidating.insert(revalidation).inserted else { return }
            let id = registry.nextTaskID
            registry.nextTaskID += 1
            registry.backgroundLoads[id] = Task {
                defer {
                    self.registry.withLock { registry in
                        _ = registry.backgroundLoads.removeValue(forKey: id)
                        _ = registry.revalidating.remove(revalidation)
                    }
                }
                // Published as any load is, start and end: its failure or cancellation was
                // published alone, and an app counting loads in flight from the states went
                // below zero.
                broadcast.yield(.loading(request))
                var observers = Observers<Key>()
                observers.insert(index)
                let page: Page<Key, Value>
                do {
                    page = try await passInterceptors(request, from: index + 1, observers: &observers, generation: generation)
                } catch {
                    // Interceptor `index` asked for this load: it hears how it failed too.
                    await tellFailure(error, of: request, to: index..<index + 1, generation: generation, revalidatedFor: index)
                    broadcast.yield(.failed(request, error))
                    return
                }
                do {
                    let handed = try await handBack(page, to: observers, from: index, generation: generation, revalidatedFor: index)
                    broadcast.yield(.loaded(handed))
                } catch PagingError.supersededByRefresh {
                    broadcast.yield(.cancelled(request))
                } catch {
                    broadcast.yield(.failed(request, error))
                }
            }
        }
    }

    /// How many callers wait for a load another caller runs (deduplication): those who joined
    /// and have not left (cancelled). For tests, yours too, that must know a caller joined
    /// before they go on rather than sleep.
    public var joinedCallerCount: Int {
        registry.withLock { registry in
            registry.shared.values.reduce(0) { count, load in
                count + (load.joiners.map { joiners in
                    let joiners = unsafeDowncast(joiners, to: Joiners.self)
                    return joiners.nextWaiter - joiners.departed
                } ?? 0)
            }
        }
    }

    /// How many loads run in the background (a stale page's revalidation) now.
    public var backgroundLoadCount: Int { registry.withLock { $0.backgroundLoads.count } }

    /// Waits for the loads running in the background (a stale page's revalidation) to end, also
    /// those they start; call it before the process exits so that their pages are stored.
    /// Cancelling the caller cancels them (their pages are not stored); it returns once they end.
    public func backgroundLoadsFinished() async {
        await withTaskCancellationHandler {
            while let task = registry.withLock({ $0.backgroundLoads.values.first }) {
                // One started after the cancellation.
                if Task.isCancelled { task.cancel() }
                await task.value
            }
        } onCancel: {
            registry.withLock { $0.backgroundLoads.values.forEach { $0.cancel() } }
        }
    }

    /// Hands the page back to the interceptors that observe, from the last to the first, each
    /// transforming what the one after it returned, under the request as it reached that one
    /// (a cache stores it under the request it looks it up by, whatever the interceptors after
    /// it asked for). When one throws, those before it from `lowest` on (the interceptors the
    /// load passed) hear of the failure; `asker`, the interceptor whose stale page this load
    /// revalidates, hears it as a failed revalidation, its own transform's too. Once a refresh
    /// supersedes the load (its `generation` is past), the page goes no further: an interceptor
    /// that stores pages would keep it over the refresh's. Those not yet handed it hear
    /// `PagingError.supersededByRefresh` instead.
    @inlinable
    func handBack(
        _ page: Page<Key, Value>, to observers: Observers<Key>, from lowest: Int = 0, generation: UInt64,
        revalidatedFor asker: Int? = nil
    ) async throws -> Page<Key, Value> {
        var page = page
        var remaining = observers
        let asked = page.request
        // A full page a transform made short (a filter) is not loaded again as a short last
        // page would be (it cannot have grown; each was fetched twice): it is marked, for the
        // manager, and for the caches before the transform that keep it. A short page with
        // values a transform emptied is not the end of the data (an empty page after a short
        // one is: a source that caps its page size below the request's, unmarked, lost every
        // page after the first one a filter emptied), but may have grown: marked apart.
        let filled = page.values.count >= asked.params.pageSize, hadValues = !page.values.isEmpty
        // A page a store answered with keeps the mark it was stored with.
        var madeShort = page.isShortened
        let kept = page.isKept
        while let index = remaining.popLast() {
            if let request = observers.request(reaching: index) { page.request = request }
            if isSuperseded(generation) {
                remaining.insert(index)
                await tellSuperseded(remaining, of: asked, observers: observers, revalidatedFor: asker)
                throw PagingError.supersededByRefresh
            }
            do {
                page = try await interceptors[index].transform(page: page)
            } catch {
                // Those before it hear; so does the asker of a revalidation whose own transform
                // failed: no caller waits for that load.
                let heard = lowest..<(index == asker ? index + 1 : index)
                await tellFailure(error, of: page.request, to: heard, generation: generation, revalidatedFor: asker)
                throw error
            }
            // A transform may build a new page: the mark is set again after each.
            madeShort = madeShort || (filled && page.values.count < asked.params.pageSize)
            page.isShortened = page.isShortened || madeShort
            if !madeShort, hadValues, page.values.isEmpty { page.isEmptiedByTransform = true }
            page.isKept = kept
        }
        // The caller gets the page under the request the source answered, as without observers.
        if !observers.rewrites.isEmpty { page.request = asked }
        return page
    }

    /// Tells the observers not yet handed the page that the load they let proceed was
    /// superseded by a refresh, each under the request as it reached it. Off the hot path.
    @usableFromInline
    func tellSuperseded(
        _ remaining: Observers<Key>, of asked: PagingRequest<Key>, observers: Observers<Key>, revalidatedFor asker: Int? = nil
    ) async {
        var remaining = remaining
        while let index = remaining.popLast() {
            let request = observers.request(reaching: index) ?? asked
            await tellFailure(PagingError.supersededByRefresh, of: request, to: index, revalidatedFor: asker)
        }
    }

    @inlinable @inline(__always)
    func fetch(_ request: PagingRequest<Key>) async throws -> Page<Key, Value> {
        var page: Page<Key, Value>
        do {
            page = try await source.fetch(request: request)
        } catch {
            page = try await retry(request, after: error) { try await self.source.fetch(request: request) }
        }
        // An empty page is not a short one that goes on: a source that marked its empty pages
        // was followed without end (the empty pages that end the data were never counted). Nor
        // is a page from the source one a transform emptied.
        if page.isShortened, page.values.isEmpty { page.isShortened = false }
        page.isEmptiedByTransform = false
        page.isKept = false
        return page
    }

    /// The retries of a failed step (`attempt` runs it again), per the request's policy. Not
    /// inlinable: off the hot path.
    @usableFromInline
    func retry<Result>(
        _ request: PagingRequest<Key>, after firstError: any Error, _ attempt: () async throws -> Result
    ) async throws -> Result {
        let policy = request.params.retryPolicy
        var retries = 0
        var error = firstError
        while true {
            guard retries < policy.maxRetries, !Task.isCancelled, policy.condition(error) else {
                throw error
            }
            retries += 1
            let delay = try policy.backoff.delay(forAttempt: retries, after: error)
            broadcast.yield(.retrying(request, attempt: retries, error: error))
            if delay > .zero { try await Task.sleep(for: delay) }
            do {
                return try await attempt()
            } catch let next {
                error = next
            }
        }
    }

    /// An early look, before handing the page to each interceptor; `finish` decides.
    @inlinable
    func isSuperseded(_ generation: UInt64) -> Bool {
        generation != self.generation.load(ordering: .acquiring)
    }

    /// Ends the load: decides, atomically with publishing, whether a refresh superseded it,
    /// hands the outcome to the callers sharing it and returns it to the one running it.
    @inlinable
    func finish(
        _ request: PagingRequest<Key>, _ identity: PagingRequest<Key>.SharingKey?,
        _ load: InFlightLoad?, _ generation: UInt64, with outcome: Outcome
    ) throws -> Page<Key, Value> {
        var waiters: [CheckedContinuation<Outcome, Never>] = []
        let final = registry.withLock { registry -> Outcome in
            var final = outcome
            if generation != self.generation.load(ordering: .relaxed) {
                final = .failure(PagingError.supersededByRefresh)
                broadcast.yield(.cancelled(request))
            } else {
                switch outcome {
                case .page(let page):
                    broadcast.yield(.loaded(page))
                    if let window = deduplication.reuseWindow, let identity {
                        registry.remember(page, for: identity, generation: generation, at: deduplication.clock.now(), window: window)
                    }
                case .failure(let error):
                    broadcast.yield(.failed(request, error))
                case .ownerCancelled:
                    broadcast.yield(.cancelled(request))
                }
            }
            if let load {
                // One removal; put back what a newer generation registered meanwhile.
                if let identity, let removed = registry.shared.removeValue(forKey: identity), removed !== load {
                    registry.shared[identity] = removed
                }
                // Only callers that joined need the outcome (and have a Joiners object).
                if let joiners = load.joiners {
                    let joiners = unsafeDowncast(joiners, to: Joiners.self)
                    joiners.outcome = final
                    if !joiners.waiters.isEmpty { waiters = joiners.takeWaiters() }
                }
            }
            return final
        }
        if !waiters.isEmpty { resume(waiters, with: final) }
        switch final {
        case .page(let page): return page
        case .failure(let error): throw error
        case .ownerCancelled: throw CancellationError()
        }
    }

    @usableFromInline
    func resume(_ waiters: [CheckedContinuation<Outcome, Never>], with outcome: Outcome) {
        for waiter in waiters { waiter.resume(returning: outcome) }
    }

    // MARK: - State

    @usableFromInline
    enum Outcome: Sendable {
        case page(Page<Key, Value>)
        case failure(any Error)
        case ownerCancelled
    }

    @usableFromInline
    typealias InFlightLoad = PagerInFlightLoad

    /// The callers that joined a load in flight: created by the first of them, so that a load
    /// nobody joins allocates nothing generic (a generic class's deinit runs unspecialized).
    /// Its mutable state is touched only under the registry's lock.
    @usableFromInline
    final class Joiners: @unchecked Sendable {
        @usableFromInline var waiters: [Int: CheckedContinuation<Outcome, Never>] = [:]
        @usableFromInline var nextWaiter = 0
        /// Those who joined and left before the load ended (cancelled).
        @usableFromInline var departed = 0
        @usableFromInline var outcome: Outcome?

        @usableFromInline
        init() {}

        @usableFromInline
        func addWaiter() -> Int {
            defer { nextWaiter += 1 }
            return nextWaiter
        }

        @usableFromInline
        func removeWaiter(_ id: Int) -> CheckedContinuation<Outcome, Never>? {
            waiters.removeValue(forKey: id)
        }

        @usableFromInline
        func takeWaiters() -> [CheckedContinuation<Outcome, Never>] {
            defer { waiters = [:] }
            return Array(waiters.values)
        }
    }

    @usableFromInline
    struct Registry: Sendable {
        @usableFromInline
        struct Recent: Sendable {
            @usableFromInline var page: Page<Key, Value>
            /// The generation the page was loaded in: a refresh since makes it unusable.
            @usableFromInline var generation: UInt64
            @usableFromInline var finishedAt: Duration

            @inlinable
            init(page: Page<Key, Value>, generation: UInt64, finishedAt: Duration) {
                self.page = page
                self.generation = generation
                self.finishedAt = finishedAt
            }
        }

        @usableFromInline var shared: [PagingRequest<Key>.SharingKey: InFlightLoad] = [:]
        @usableFromInline var recent: [PagingRequest<Key>.SharingKey: Recent] = [:]
        /// The identities in `recent` as they were remembered, oldest first from
        /// `recentOrderStart` (an identity remembered again is there twice: its older place is
        /// skipped when it comes first).
        @usableFromInline var recentOrder: [(identity: PagingRequest<Key>.SharingKey, finishedAt: Duration)] = []
        @usableFromInline var recentOrderStart = 0
        /// The generation the latest refresh started: pages loaded in it or since are the data
        /// since that refresh (a ``PaginationManager``'s refresh bumps the generation twice).
        @usableFromInline var refreshedAt: UInt64 = 0
        /// Prepends and appends started with `send`, which a refresh cancels.
        @usableFromInline var sentTasks: [UInt64: Task<Page<Key, Value>, any Error>] = [:]
        @usableFromInline var nextTaskID: UInt64 = 0
        /// Revalidations running in the background (``PagingInterceptResult/completeThenRevalidate(_:)``).
        @usableFromInline var backgroundLoads: [UInt64: Task<Void, Never>] = [:]
        /// What those revalidate: a request, and the interceptor that asked.
        @usableFromInline var revalidating: Set<Revalidation> = []

        @usableFromInline
        struct Revalidation: Hashable, Sendable {
            @usableFromInline let request: PagingRequest<Key>.SharingKey
            @usableFromInline let interceptor: Int

            @usableFromInline
            init(request: PagingRequest<Key>.SharingKey, interceptor: Int) {
                self.request = request
                self.interceptor = interceptor
            }
        }

        @usableFromInline
        init() {}

        /// The most pages kept for the reuse window.
        @usableFromInline static var maxRecent: Int { 1_024 }

        /// Keeps `page` for the reuse window. What the window has passed goes, and past
        /// ``maxRecent`` pages the oldest: oldest first, so each load costs what goes (the whole
        /// set was filtered on every load past 1,024 pages, and kept everything the window held).
        @usableFromInline
        mutating func remember(_ page: Page<Key, Value>, for identity: PagingRequest<Key>.SharingKey,
                               generation: UInt64, at now: Duration, window: Duration) {
            while recentOrderStart < recentOrder.count {
                let oldest = recentOrder[recentOrderStart]
                let current = recent[oldest.identity]?.finishedAt == oldest.finishedAt
                guard !current || now - oldest.finishedAt > window || recent.count >= Self.maxRecent else { break }
                if current { recent[oldest.identity] = nil }
                recentOrderStart += 1
            }
            recent[identity] = Recent(page: page, generation: generation, finishedAt: now)
            recentOrder.append((identity, now))
            // The places skipped, once they are most of the order, or the order grown well past
            // what it orders (identities remembered again behind an older one), are dropped.
            if recentOrderStart > Self.maxRecent, recentOrderStart * 2 > recentOrder.count {
                recentOrder.removeFirst(recentOrderStart)
                recentOrderStart = 0
            } else if recentOrder.count - recentOrderStart > 4 * Self.maxRecent {
                recentOrder = recent.map { ($0.key, $0.value.finishedAt) }.sorted { $0.finishedAt < $1.finishedAt }
                recentOrderStart = 0
            }
        }

        @usableFromInline
        mutating func takeSentTasks() -> [Task<Page<Key, Value>, any Error>] {
            if sentTasks.isEmpty { return [] }
            defer { sentTasks = [:] }
            return Array(sentTasks.values)
        }
    }
}

/// One load in flight, shared by the callers of identical requests (a Pager's registry maps
/// their identity to it). Not generic, so that allocating and freeing it per load involves no
/// generic metadata; the state of the callers who joined lives in `joiners`, a
/// `Pager.Joiners`. Its mutable state is touched only under the registry's lock.
@usableFromInline
final class PagerInFlightLoad: @unchecked Sendable {
    @usableFromInline let generation: UInt64
    @usableFromInline var joiners: AnyObject?

    @inlinable
    init(generation: UInt64) {
        self.generation = generation
    }
}

/// The interceptors that asked to see the page, by index: a bit set for the first 64 and an
/// array beyond, so that the common chain allocates nothing; and the requests as they reached
/// them, where an interceptor after one of them asked for another page.
@usableFromInline
struct Observers<Key: Hashable & Sendable> {
    @usableFromInline var bits: UInt64 = 0
    @usableFromInline var overflow: [Int] = []
    /// Each step, after an observer, that asked for another page (another key, page size or
    /// user info), and the request before it: in step order.
    @usableFromInline var rewrites: [(step: Int, before: PagingRequest<Key>)] = []
    /// An interceptor before these steps observes (the one a fallback is for): their rewrites
    /// are recorded for it.
    @usableFromInline var observedBefore = false

    @inlinable
    init(observedBefore: Bool = false) {
        self.observedBefore = observedBefore
    }

    @inlinable
    var any: Bool { bits != 0 || !overflow.isEmpty }

    @inlinable
    mutating func insert(_ index: Int) {
        if index < 64 { bits |= 1 << UInt64(index) } else { overflow.append(index) }
    }

    @inlinable
    mutating func remove(_ index: Int) {
        if index < 64 { bits &= ~(1 << UInt64(index)) } else { overflow.removeAll { $0 == index } }
    }

    /// Adds `other`'s indexes, all higher than this set's (the interceptors after one).
    @inlinable
    mutating func formUnion(_ other: Observers) {
        bits |= other.bits
        overflow.append(contentsOf: other.overflow)
        rewrites.append(contentsOf: other.rewrites)
    }

    /// Records that step `step` passed on `next` for `request`, when it asks for another page
    /// and an observer (this step included) saw `request`.
    @inlinable
    mutating func passed(_ next: PagingRequest<Key>, for request: PagingRequest<Key>, at step: Int) {
        guard any || observedBefore, next.key != request.key || next.params.pageSize != request.params.pageSize
            || next.params.userInfo != request.params.userInfo else { return }
        rewrites.append((step, request))
    }

    /// The request as it reached interceptor `index`, when a step from it on asked for another
    /// page (`nil`: the page's own).
    @inlinable
    func request(reaching index: Int) -> PagingRequest<Key>? {
        rewrites.first { $0.step >= index }?.before
    }

    /// Removes and returns the highest index.
    @inlinable
    mutating func popLast() -> Int? {
        if let index = overflow.popLast() { return index }
        guard bits != 0 else { return nil }
        let highest = 63 - bits.leadingZeroBitCount
        bits &= ~(1 << UInt64(highest))
        return highest
    }
}
