/// Says that a source's data changed, so that what was loaded from it is stale (Paging 3's
/// `invalidate()`): a ``PaginationManager`` over the source then refreshes around its reader's
/// position (``PagingSource/refreshKey(around:)``) instead of jumping to the top.
///
/// A source that can tell offers one (``PagingSource/invalidation``) and calls ``invalidate()``
/// from any thread.
public final class PagingInvalidation: Sendable {
    private let broadcast = Broadcast<Void>()
    private let invalidated = Locked(0)

    public init() {}

    /// Tells every listener that the data changed.
    public func invalidate() {
        invalidated.withLock { $0 += 1 }
        broadcast.yield(())
    }

    /// How many times ``invalidate()`` was called, counted before its listeners hear of it: a
    /// reader that compares it with an earlier count knows, at once and with no task in between,
    /// whether what it loaded since may be stale (a listener's task heard of the change after the
    /// load that made it had been handed out).
    public var count: Int { invalidated.withLock { $0 } }

    /// A stream of the invalidations from now on; it ends when its task is cancelled. Signals
    /// that come while its reader is busy are folded into one: the data changed.
    public func signals() -> AsyncStream<Void> {
        broadcast.subscribe(buffering: .bufferingNewest(1))
    }
}

/// Where a reader is: the item a refresh after an invalidation keeps in view.
public struct PagingAnchor<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// The key of the loaded page that holds the item.
    public var pageKey: Key
    /// The item's index in that page.
    public var indexInPage: Int
    /// The item.
    public var value: Value
    /// The page size of the requests.
    public var pageSize: Int

    public init(pageKey: Key, indexInPage: Int, value: Value, pageSize: Int) {
        self.pageKey = pageKey
        self.indexInPage = indexInPage
        self.value = value
        self.pageSize = pageSize
    }
}
