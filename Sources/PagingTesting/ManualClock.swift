import Paging
import Synchronization

/// A clock that moves only when told to, for testing expiry and time windows.
///
/// ```swift
/// let clock = ManualClock()
/// let cache = CacheInterceptor<Int, String>(timeToLive: .seconds(60), clock: clock.pagingClock)
/// clock.advance(by: .seconds(61))   // everything cached has expired
/// ```
public final class ManualClock: Sendable {
    private let elapsed = Locked(Duration.zero)

    public init() {}

    /// The time elapsed since the clock was made.
    public var now: Duration { elapsed.withLock { $0 } }

    public func advance(by duration: Duration) {
        elapsed.withLock { $0 += duration }
    }

    /// The clock as a ``PagingClock`` to hand to the engine.
    public var pagingClock: PagingClock {
        PagingClock { [self] in now }
    }
}
