import Synchronization

/// Runs requests through a chain of interceptors to a source and publishes what happens.
///
/// A request passes the interceptors in order; the first that completes it answers it,
/// otherwise the source fetches the page (retried per the request's ``RetryPolicy``). The page
/// then goes back to each interceptor that asked for it, in reverse order, and is published on
/// ``states()``.
///
/// - A failed load is a ``PagingState/failed(_:_:)`` state; the pager goes on serving.
/// - Identical requests (kind, key chain, page size) in flight share one fetch (see
///   ``Deduplication``).
/// - A refresh supersedes the prepends and appends in flight: their pages are dropped, never
///   published, and their callers get ``PagingError/supersededByRefresh``. Those started with
///   ``send(_:)`` are cancelled outright.
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

    private let registry = Mutex(Registry())
    private let broadcast = Broadcast<PagingState<Key, Value>>()

    public init(
        source: some PagingSource<Key, Value>,
        interceptors: [any PagingInterceptor<Key, Value>] = [],
        deduplication: Deduplication = .inFlight
    ) {
        self.source = source
        self.interceptors = interceptors
        self.deduplication = deduplication
    }

    /// A stream of every state from now on. Any number of consumers can iterate their own
    /// streams at once; a stream ends when its task is cancelled or the pager is gone.
    public func states() -> AsyncStream<PagingState<Key, Value>> {
        broadcast.subscribe()
    }

    /// A request for `key` whose key chain comes from the source.
    public func request(_ kind: PagingRequestKind, key: Key, params: PagingRequestParams) -> PagingRequest<Key> {
        PagingRequest(kind: kind, keyChain: source.keyChain(for: key), params: params)
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
    public func load(_ request: PagingRequest<Key>) async throws -> Page<Key, Value> {
        while true {
            switch register(request) {
            case .reuse(let page):
                return page
            case .owner(let load):
                return try await run(request, as: load)
            case .joined(let load, let waiter):
                switch await wait(for: load, as: waiter) {
                case .page(let page): return page
                case .failure(let error): throw error
                case .ownerCancelled:
                    // The caller running the shared fetch was cancelled; unless this one
                    // is too, it runs the request itself.
                    try Task.checkCancellation()
                }
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
            if request.kind != .refresh { registry.sentTasks[id] = task }
            return task
        }
    }

    // MARK: - Registration

    private enum Ticket {
        case owner(InFlightLoad)
        case joined(InFlightLoad, waiter: Int)
        case reuse(Page<Key, Value>)
    }

    private func register(_ request: PagingRequest<Key>) -> Ticket {
        let (ticket, toCancel) = registry.withLock { registry -> (Ticket, [Task<Page<Key, Value>, any Error>]) in
            var toCancel: [Task<Page<Key, Value>, any Error>] = []
            if request.kind == .refresh {
                registry.generation &+= 1
                toCancel = registry.takeSentTasks()
            }
            guard deduplication.sharesInFlight || deduplication.reuseWindow != nil else {
                return (.owner(InFlightLoad(generation: registry.generation)), toCancel)
            }
            let identity = request.identity
            if let window = deduplication.reuseWindow,
               let recent = registry.recent[identity] {
                if deduplication.clock.now() - recent.finishedAt <= window {
                    return (.reuse(recent.page), toCancel)
                }
                registry.recent[identity] = nil
            }
            if let load = registry.shared[identity], load.generation == registry.generation {
                return (.joined(load, waiter: load.addWaiter()), toCancel)
            }
            let load = InFlightLoad(generation: registry.generation)
            if deduplication.sharesInFlight { registry.shared[identity] = load }
            return (.owner(load), toCancel)
        }
        for task in toCancel { task.cancel() }
        return ticket
    }

    private func wait(for load: InFlightLoad, as waiter: Int) async -> Outcome {
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                registry.withLock { _ in
                    if let outcome = load.outcome {
                        continuation.resume(returning: outcome)
                    } else if Task.isCancelled {
                        continuation.resume(returning: .failure(CancellationError()))
                    } else {
                        load.waiters[waiter] = continuation
                    }
                }
            }
        } onCancel: {
            let continuation = registry.withLock { _ in load.removeWaiter(waiter) }
            continuation?.resume(returning: .failure(CancellationError()))
        }
    }

    // MARK: - Running the chain

    private func run(_ request: PagingRequest<Key>, as load: InFlightLoad) async throws -> Page<Key, Value> {
        broadcast.yield(.loading(request))
        var observers = Observers()
        let outcome: Outcome
        do {
            var page = try await passInterceptors(request, observers: &observers)
            if observers.any && !isSuperseded(request, load) {
                page = await handBack(page, to: observers)
            }
            outcome = .page(page)
        } catch is CancellationError where Task.isCancelled {
            outcome = .ownerCancelled
        } catch {
            outcome = .failure(error)
        }
        return try finish(request, load, with: outcome)
    }

    private func passInterceptors(
        _ request: PagingRequest<Key>, observers: inout Observers
    ) async throws -> Page<Key, Value> {
        var request = request
        for index in interceptors.indices {
            switch try await interceptors[index].intercept(request: request) {
            case .proceed(let next, let handleAfterwards):
                request = next
                if handleAfterwards { observers.insert(index) }
            case .complete(let page):
                return page
            }
        }
        return try await fetch(request)
    }

    private func handBack(_ page: Page<Key, Value>, to observers: Observers) async -> Page<Key, Value> {
        var remaining = observers
        while let index = remaining.popLast() {
            await interceptors[index].handle(page: page)
        }
        return page
    }

    private func fetch(_ request: PagingRequest<Key>) async throws -> Page<Key, Value> {
        let policy = request.params.retryPolicy
        var attempt = 0
        while true {
            do {
                return try await source.fetch(request: request)
            } catch {
                guard attempt < policy.maxRetries, !Task.isCancelled, policy.condition(error) else {
                    throw error
                }
                attempt += 1
                broadcast.yield(.retrying(request, attempt: attempt, error: error))
                let delay = policy.backoff.delay(forAttempt: attempt)
                if delay > .zero { try await Task.sleep(for: delay) }
            }
        }
    }

    private func isSuperseded(_ request: PagingRequest<Key>, _ load: InFlightLoad) -> Bool {
        request.kind != .refresh && registry.withLock { load.generation != $0.generation }
    }

    /// Ends the load: decides, atomically with publishing, whether a refresh superseded it,
    /// hands the outcome to the callers sharing it and returns it to the one running it.
    private func finish(
        _ request: PagingRequest<Key>, _ load: InFlightLoad, with outcome: Outcome
    ) throws -> Page<Key, Value> {
        let identity = request.identity
        let (final, waiters) = registry.withLock { registry -> (Outcome, [CheckedContinuation<Outcome, Never>]) in
            var final = outcome
            if request.kind != .refresh && load.generation != registry.generation {
                final = .failure(PagingError.supersededByRefresh)
                broadcast.yield(.cancelled(request))
            } else {
                switch outcome {
                case .page(let page):
                    broadcast.yield(.loaded(page))
                    if let window = deduplication.reuseWindow {
                        registry.remember(page, for: identity, at: deduplication.clock.now(), window: window)
                    }
                case .failure(let error):
                    broadcast.yield(.failed(request, error))
                case .ownerCancelled:
                    broadcast.yield(.cancelled(request))
                }
            }
            if registry.shared[identity] === load { registry.shared[identity] = nil }
            load.outcome = final
            defer { load.waiters = [:] }
            return (final, Array(load.waiters.values))
        }
        for waiter in waiters { waiter.resume(returning: final) }
        switch final {
        case .page(let page): return page
        case .failure(let error): throw error
        case .ownerCancelled: throw CancellationError()
        }
    }

    // MARK: - State

    private enum Outcome: Sendable {
        case page(Page<Key, Value>)
        case failure(any Error)
        case ownerCancelled
    }

    /// One load in flight, shared by the callers of identical requests.
    /// Its mutable state is touched only under the registry's lock.
    private final class InFlightLoad: @unchecked Sendable {
        let generation: UInt64
        var waiters: [Int: CheckedContinuation<Outcome, Never>] = [:]
        var nextWaiter = 0
        var outcome: Outcome?

        init(generation: UInt64) {
            self.generation = generation
        }

        func addWaiter() -> Int {
            defer { nextWaiter += 1 }
            return nextWaiter
        }

        func removeWaiter(_ id: Int) -> CheckedContinuation<Outcome, Never>? {
            waiters.removeValue(forKey: id)
        }
    }

    private struct Registry {
        struct Recent {
            var page: Page<Key, Value>
            var finishedAt: Duration
        }

        /// Bumped by every refresh; a prepend or append from an older generation is superseded.
        var generation: UInt64 = 0
        var shared: [PagingRequest<Key>.Identity: InFlightLoad] = [:]
        var recent: [PagingRequest<Key>.Identity: Recent] = [:]
        /// Prepends and appends started with `send`, which a refresh cancels.
        var sentTasks: [UInt64: Task<Page<Key, Value>, any Error>] = [:]
        var nextTaskID: UInt64 = 0

        mutating func remember(_ page: Page<Key, Value>, for identity: PagingRequest<Key>.Identity,
                               at now: Duration, window: Duration) {
            if recent.count >= 1024 { recent = recent.filter { now - $0.value.finishedAt <= window } }
            recent[identity] = Recent(page: page, finishedAt: now)
        }

        mutating func takeSentTasks() -> [Task<Page<Key, Value>, any Error>] {
            defer { sentTasks = [:] }
            return Array(sentTasks.values)
        }
    }
}

/// The interceptors that asked to see the page, by index: a bit set for the first 64 and an
/// array beyond, so that the common chain allocates nothing.
private struct Observers {
    private var bits: UInt64 = 0
    private var overflow: [Int] = []

    var any: Bool { bits != 0 || !overflow.isEmpty }

    mutating func insert(_ index: Int) {
        if index < 64 { bits |= 1 << UInt64(index) } else { overflow.append(index) }
    }

    /// Removes and returns the highest index.
    mutating func popLast() -> Int? {
        if let index = overflow.popLast() { return index }
        guard bits != 0 else { return nil }
        let highest = 63 - bits.leadingZeroBitCount
        bits &= ~(1 << UInt64(highest))
        return highest
    }
}
