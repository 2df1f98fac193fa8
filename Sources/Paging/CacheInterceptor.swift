import Synchronization

/// Answers requests from the pages it has seen, for a time, up to a number of pages.
///
/// A page is cached under its key, page size and user info (less the hard-refresh flag). A
/// cached page expires after ``timeToLive``; beyond ``maxEntries`` the least recently used page
/// is evicted. A request with a hard refresh (``PagingRequestParams/isHardRefresh``) empties
/// the cache and goes on to the source. Every request costs O(1), whatever the cache holds.
///
/// # Thread safety
/// Safe to share between any number of concurrent loads.
public final class CacheInterceptor<Key: Hashable & Sendable, Value: Sendable>: PagingInterceptor {
    public let timeToLive: Duration
    public let maxEntries: Int
    private let clock: PagingClock
    private let cache: Mutex<LRUCache<CacheKey, Page<Key, Value>>>

    /// - Parameters:
    ///   - timeToLive: how long a page is served; 10 minutes by default.
    ///   - maxEntries: how many pages are kept at most.
    ///   - clock: the time expiry is measured on (tests inject their own).
    public init(timeToLive: Duration = .seconds(600), maxEntries: Int = 1_000, clock: PagingClock = .continuous) {
        precondition(maxEntries > 0, "CacheInterceptor needs maxEntries > 0, got \(maxEntries)")
        self.timeToLive = timeToLive
        self.maxEntries = maxEntries
        self.clock = clock
        cache = Mutex(LRUCache(capacity: maxEntries, timeToLive: timeToLive))
    }

    /// How many pages are cached (expired ones count until they are looked up or evicted).
    public var count: Int { cache.withLock { $0.count } }

    /// Cached page keys, from the most to the least recently used.
    public var keysByRecency: [Key] { cache.withLock { $0.keysByRecency.map(\.key) } }

    public func intercept(request: PagingRequest<Key>) async throws -> PagingInterceptResult<Key, Value> {
        if let page = cachedPage(for: request) { return .complete(page) }
        return .proceed(request, handleAfterwards: true)
    }

    public func handle(page: Page<Key, Value>) async {
        store(page)
    }

    /// The cached page answering `request`, or `nil` on a miss. A hard refresh empties the
    /// cache and misses. The synchronous core of ``intercept(request:)``.
    public func cachedPage(for request: PagingRequest<Key>) -> Page<Key, Value>? {
        if request.params.isHardRefresh {
            cache.withLock { $0.removeAll() }
            return nil
        }
        let key = CacheKey(request)
        let now = clock.now()
        guard let cached = cache.withLock({ $0.value(for: key, now: now) }) else { return nil }
        return Page(request: request, values: cached.values, prevKey: cached.prevKey, nextKey: cached.nextKey)
    }

    /// Caches `page` under its request. The synchronous core of ``handle(page:)``.
    public func store(_ page: Page<Key, Value>) {
        let key = CacheKey(page.request)
        let now = clock.now()
        cache.withLock { $0.insert(page, for: key, now: now) }
    }

    /// Removes every cached page.
    public func removeAll() {
        cache.withLock { $0.removeAll() }
    }

    private struct CacheKey: Hashable {
        var key: Key
        var pageSize: Int
        var userInfo: [String: String]

        init(_ request: PagingRequest<Key>) {
            key = request.key
            pageSize = request.params.pageSize
            userInfo = request.params.userInfo
            if userInfo[PagingUserInfoKey.hardRefresh] != nil {
                userInfo[PagingUserInfoKey.hardRefresh] = nil
            }
        }
    }
}
