/// What an interceptor decides about a request.
public enum PagingInterceptResult<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// Pass the request (the same, or rewritten) on to the next interceptor or the source.
    /// With `handleAfterwards`, the interceptor's ``PagingInterceptor/handle(page:)`` sees the page.
    ///
    /// The caller gets the page under the request the source answered: a rewritten key (and its
    /// key chain) is what paging goes on from. An interceptor that translates keys into another
    /// key space (`k` to `k + 100`) sees its own translation come back as the next request's
    /// key, and translates it again: it must answer in the caller's key space itself (with
    /// ``complete(_:)`` of a page whose keys it translated back), or pages are skipped.
    case proceed(PagingRequest<Key>, handleAfterwards: Bool)
    /// Answer the request with this page; the interceptors after this one and the source are skipped.
    case complete(Page<Key, Value>)
    /// Answer the request with this (stored, possibly stale) page at once; then load the request
    /// in the background through the interceptors after this one and the source, and hand the
    /// fresh page to this interceptor's ``PagingInterceptor/handle(page:)`` (and to the later
    /// ones that observe it). A failure of that load is published as a ``PagingState/failed(_:_:)``
    /// state. Stale-while-revalidate. One such load runs at a time for a request and this
    /// interceptor: answers given while it runs start no other.
    case completeThenRevalidate(Page<Key, Value>)
    /// Pass the request on and see the page afterwards, as `.proceed(request, handleAfterwards:
    /// true)`; but should the rest of the chain fail (with anything but a cancellation), answer
    /// with `fallback` instead, after telling `whenUsed` why. Network-first with a stored page.
    case proceedOrFallBack(PagingRequest<Key>, fallback: Page<Key, Value>, whenUsed: @Sendable (any Error) -> Void)
}

/// A step between the caller and the source that can inspect, rewrite or answer requests
/// (logging, caching, a database).
///
/// Interceptors run in order on the way in; the page comes back to those that asked for it,
/// in reverse order, each of which may change it (``transform(page:)``) before it goes on to
/// the one before. Every requirement has a default, so a pass-through interceptor that only
/// watches pages is a few lines:
///
/// ```swift
/// struct PageCounter: PagingInterceptor {
///     let counter: Counter
///     func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Repo> {
///         .proceed(request, handleAfterwards: true)
///     }
///     func handle(page: Page<Int, Repo>) async { counter.add(page.values.count) }
/// }
/// ```
///
/// A filter drops values on their way back:
///
/// ```swift
/// struct StarredOnly: PagingInterceptor {
///     func intercept(request: PagingRequest<Int>) async throws -> PagingInterceptResult<Int, Repo> {
///         .proceed(request, handleAfterwards: true)
///     }
///     func transform(page: Page<Int, Repo>) async throws -> Page<Int, Repo> {
///         var page = page
///         page.values.removeAll { $0.stars == 0 }
///         return page
///     }
/// }
/// ```
///
/// # Failures and retries
/// An error thrown by ``intercept(request:)`` is retried like a failed fetch, per the
/// request's ``RetryPolicy`` (an error conforming to ``RetryHintedError`` says how long to wait
/// at least). Every interceptor that let a load proceed hears how it failed
/// (``loadFailed(_:error:)``), so that a store can mark its page stale or a circuit breaker open.
///
/// # Thread safety
/// The ``Pager`` calls an interceptor from many tasks at once: keep shared state behind a lock
/// or in an actor.
public protocol PagingInterceptor<Key, Value>: Sendable {
    associatedtype Key: Hashable & Sendable
    associatedtype Value: Sendable

    /// Decides what happens to the request. Throwing fails this attempt with that error: the
    /// source is not called, and the ``Pager`` calls `intercept` again when the request's
    /// ``RetryPolicy`` retries the error. The default proceeds unchanged.
    func intercept(request: PagingRequest<Key>) async throws -> PagingInterceptResult<Key, Value>

    /// Sees the page of a request this interceptor proceeded with `handleAfterwards: true`.
    /// The default does nothing.
    func handle(page: Page<Key, Value>) async

    /// The page of a request this interceptor proceeded with `handleAfterwards: true`, as it
    /// goes on towards the caller: the same, or with values dropped, replaced, added or
    /// reordered, other keys, or ``Page/metadata``. Throwing fails the load. The default calls
    /// ``handle(page:)`` and returns the page unchanged.
    func transform(page: Page<Key, Value>) async throws -> Page<Key, Value>

    /// Hears that a load this interceptor let proceed failed (or was cancelled): `request` is
    /// the request as it reached the step that failed, `error` what failed it (after retries).
    /// The default does nothing.
    func loadFailed(_ request: PagingRequest<Key>, error: any Error) async

    /// Hears that the load in the background this interceptor asked for with
    /// ``PagingInterceptResult/completeThenRevalidate(_:)`` failed: its stale page answered, and
    /// no caller waits for the fresh one, so no caller hears of it. `error` is what failed it,
    /// also when a refresh came meanwhile (a refresh does not cancel it; a cancellation of it is
    /// `PagingError.supersededByRefresh` then). The default calls ``loadFailed(_:error:)``.
    func revalidationFailed(_ request: PagingRequest<Key>, error: any Error) async
}

extension PagingInterceptor {
    public func intercept(request: PagingRequest<Key>) async throws -> PagingInterceptResult<Key, Value> {
        .proceed(request, handleAfterwards: false)
    }

    public func handle(page: Page<Key, Value>) async {}

    public func transform(page: Page<Key, Value>) async throws -> Page<Key, Value> {
        await handle(page: page)
        return page
    }

    public func loadFailed(_ request: PagingRequest<Key>, error: any Error) async {}

    public func revalidationFailed(_ request: PagingRequest<Key>, error: any Error) async {
        await loadFailed(request, error: error)
    }
}
