/// How a ``Pager`` treats identical requests: the same kind and the same
/// ``PagingRequestIdentity`` (key, page size, user info but the hard-refresh flag). A hard
/// refresh is never shared nor answered from a recent page.
public struct Deduplication: Sendable {
    /// Identical requests in flight share one fetch, and every caller gets the page.
    public var sharesInFlight: Bool
    /// When set, an identical request that finished within this window is answered with its
    /// page without fetching again (the original SwiftPaging dropped repeats within 0.25 s);
    /// the latest 1,024 pages are kept for it.
    public var reuseWindow: Duration?
    /// The clock the reuse window is measured on.
    public var clock: PagingClock

    public init(sharesInFlight: Bool, reuseWindow: Duration? = nil, clock: PagingClock = .continuous) {
        self.sharesInFlight = sharesInFlight
        self.reuseWindow = reuseWindow
        self.clock = clock
    }

    /// Identical requests in flight share one fetch (the default).
    public static let inFlight = Deduplication(sharesInFlight: true)

    /// Every request is fetched on its own.
    public static let disabled = Deduplication(sharesInFlight: false)

    /// Identical requests in flight share one fetch, and one that finished within `window`
    /// is answered with its page.
    public static func inFlight(reusingResultsFor window: Duration) -> Deduplication {
        Deduplication(sharesInFlight: true, reuseWindow: window)
    }
}
