import Synchronization

/// When a cache or a store answers a request with the page it holds.
public enum FreshnessPolicy: String, Sendable, CaseIterable {
    /// A fresh page answers; a stale one is loaded again (and replaced).
    case cacheFirst = "cache-first"
    /// Every request is loaded; the page held (of any age) answers only when that load fails.
    case networkFirst = "network-first"
    /// The page held answers at once; a stale one is then loaded again in the background.
    case staleWhileRevalidate = "stale-while-revalidate"
}

/// Answers requests from the pages it has seen, for a time, up to a number of pages.
///
/// A page is cached under its request's ``PagingRequestIdentity``. A cached page is fresh for
/// ``timeToLive``; the ``policy`` says what is served when (``FreshnessPolicy``; with
/// `.cacheFirst`, the default, a stale page is dropped). Beyond ``maxEntries`` the least
/// recently used page is evicted. A request with a hard refresh (``PagingRequestParams/isHardRefresh``) goes on
/// to the source, and its page, once loaded, replaces everything cached (a failed load leaves the cache as it
/// was); a reload (``PagingUserInfoKey/reload``, a short page loaded again) goes on to the source too, and its
/// page replaces the one cached. Every request costs O(1), whatever the cache holds.
///
/// # Thread safety
/// Safe to share between any number of concurrent loads.
public final class CacheInterceptor<Key: Hashable & Sendable, Value: Sendable>: PagingInterceptor {
    public let timeToLive: Duration
    public let maxEntries: Int
    public let policy: FreshnessPolicy
    @usableFromInline let clock: PagingClock
    @usableFromInline let cache: Locked<LRUCache<PagingRequestIdentity<Key>, Page<Key, Value>>>

    // The Pager calls `intercept` and `handle` through `any PagingInterceptor`, that is through
    // this class's generic witnesses, which are never specialized: run unspecialized, a hit
    // spent most of its time in runtime generic metadata lookups. So the (inlinable) init,
    // which runs specialized for the creator's Key and Value, captures specialized versions of
    // the work in these closures, and the witnesses only call them. They take the cache as an
    // argument rather than capturing it, so that there is no reference cycle.
    @usableFromInline let interceptCore: @Sendable (CacheInterceptor, PagingRequest<Key>) -> PagingInterceptResult<Key, Value>
    @usableFromInline let lookupCore: @Sendable (CacheInterceptor, PagingRequest<Key>) -> Page<Key, Value>?
    @usableFromInline let storeCore: @Sendable (CacheInterceptor, Page<Key, Value>) -> Void

    /// - Parameters:
    ///   - timeToLive: how long a page is served; 10 minutes by default.
    ///   - maxEntries: how many pages are kept at most.
    ///   - policy: when a cached page answers (`.cacheFirst` by default).
    ///   - whenFallingBack: with `.networkFirst`, told why a load failed before its cached page
    ///     answers it (to say so).
    ///   - clock: the time expiry is measured on (tests inject their own).
    @inlinable
    public init(timeToLive: Duration = .seconds(600), maxEntries: Int = 1_000, policy: FreshnessPolicy = .cacheFirst,
                whenFallingBack: @escaping @Sendable (any Error) -> Void = { _ in }, clock: PagingClock = .continuous) {
        precondition(maxEntries > 0, "CacheInterceptor needs maxEntries > 0, got \(maxEntries)")
        self.timeToLive = timeToLive
        self.maxEntries = maxEntries
        self.policy = policy
        self.clock = clock
        cache = Locked(LRUCache(capacity: maxEntries, timeToLive: timeToLive))
        interceptCore = { cache, request in
            switch policy {
            case .cacheFirst:
                if let page = cache.lookUp(request) { return .complete(page) }
            case .networkFirst:
                if let (page, _) = cache.lookUpKeepingStale(request) {
                    return .proceedOrFallBack(request, fallback: page, whenUsed: whenFallingBack)
                }
            case .staleWhileRevalidate:
                if let (page, isFresh) = cache.lookUpKeepingStale(request) {
                    return isFresh ? .complete(page) : .completeThenRevalidate(page)
                }
            }
            return .proceed(request, handleAfterwards: true)
        }
        lookupCore = { cache, request in cache.lookUp(request) }
        storeCore = { cache, page in cache.insert(page) }
    }

    /// How many pages are cached (expired ones count until they are looked up or evicted).
    public var count: Int { cache.withLock { $0.count } }

    /// Cached page keys, from the most to the least recently used.
    public var keysByRecency: [Key] { cache.withLock { $0.keysByRecency.map(\.key) } }

    public func intercept(request: PagingRequest<Key>) async throws -> PagingInterceptResult<Key, Value> {
        interceptCore(self, request)
    }

    public func handle(page: Page<Key, Value>) async {
        storeCore(self, page)
    }

    /// What ``intercept(request:)`` answers, synchronously.
    public func answer(for request: PagingRequest<Key>) -> PagingInterceptResult<Key, Value> {
        interceptCore(self, request)
    }

    /// The fresh cached page answering `request`, or `nil` on a miss. A hard refresh or a reload misses.
    public func cachedPage(for request: PagingRequest<Key>) -> Page<Key, Value>? {
        lookupCore(self, request)
    }

    /// Caches `page` under its request. The synchronous core of ``handle(page:)``.
    public func store(_ page: Page<Key, Value>) {
        storeCore(self, page)
    }

    /// Removes every cached page.
    public func removeAll() {
        cache.withLock { $0.removeAll() }
    }

    @inlinable
    func lookUp(_ request: PagingRequest<Key>) -> Page<Key, Value>? {
        if request.params.goesToSource { return nil }
        let key = request.identity
        let now = clock.now()
        guard let cached = cache.withLock({ $0.value(for: key, now: now) }) else { return nil }
        return Self.page(cached, answering: request)
    }

    /// The cached page for `request` whatever its age, and whether it is fresh.
    @inlinable
    func lookUpKeepingStale(_ request: PagingRequest<Key>) -> (Page<Key, Value>, isFresh: Bool)? {
        if request.params.goesToSource { return nil }
        let key = request.identity
        let now = clock.now()
        guard let (cached, isFresh) = cache.withLock({ $0.valueKeepingStale(for: key, now: now) }) else { return nil }
        return (Self.page(cached, answering: request), isFresh)
    }

    /// The page `cached` as the answer to `request`: its values, keys and metadata (a cache hit
    /// lost the metadata an interceptor had set), and whether it named its next key (a page a
    /// filter made short is not loaded again).
    @inlinable
    static func page(_ cached: Page<Key, Value>, answering request: PagingRequest<Key>) -> Page<Key, Value> {
        var page = Page(request: request, values: cached.values, prevKey: cached.prevKey, nextKey: cached.nextKey)
        page.metadata = cached.metadata
        page.isShortened = cached.isShortened
        page.isEmptiedByTransform = cached.isEmptiedByTransform
        return page
    }

    @inlinable
    /// Caches `page`; the page of a hard refresh replaces everything cached.
    func insert(_ page: Page<Key, Value>) {
        let key = page.request.identity, replacesAll = page.request.params.isHardRefresh
        let now = clock.now()
        cache.withLock { cache in
            if replacesAll { cache.removeAll() }
            cache.insert(page, for: key, now: now)
        }
    }
}
