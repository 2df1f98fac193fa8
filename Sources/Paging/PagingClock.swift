/// A monotonic clock as a function, so that time-based behaviour (cache expiry, reuse windows)
/// can be driven by tests.
public struct PagingClock: Sendable {
    /// The time elapsed since an arbitrary fixed point; it never goes backwards.
    public var now: @Sendable () -> Duration

    public init(now: @escaping @Sendable () -> Duration) {
        self.now = now
    }

    /// The system's monotonic clock.
    public static let continuous: PagingClock = {
        let clock = ContinuousClock()
        let origin = clock.now
        return PagingClock { origin.duration(to: clock.now) }
    }()
}
