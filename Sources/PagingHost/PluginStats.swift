import CPaging
import FoundationEssentials
import Glibc
import Paging

/// What the host measured of one plugin instance's calls (when ``PluginLimits/recordsStats`` is
/// set), and the counters and gauges the plugin published (`paging.metrics/1`, always kept).
///
/// A call is an `intercept` (until its answer, deferred or not) or a `fetch` (until it
/// completes). Latencies go into a histogram of quarter-octave buckets (each about 19% wide),
/// so that percentiles cost a fixed amount of memory however many calls there were.
public final class PluginStats: Sendable {
    /// A copy of the figures at one moment.
    public struct Snapshot: Sendable, Equatable {
        public var calls = 0
        /// Calls that ended with a page: a fetch completed, an intercept that answered itself.
        public var completions = 0
        /// Failed calls by status (``PluginStatus/description``: "transient", "timeout", ...).
        public var failures: [String: Int] = [:]
        /// The median and 99th percentile call latency (the upper bound of their bucket); `nil`
        /// before the first call.
        public var p50: Duration?
        public var p99: Duration?
        public var counters: [String: Int64] = [:]
        public var gauges: [String: Double] = [:]
        /// Calls that took at most each of ``PluginStats/histogramBounds`` (cumulative, as
        /// Prometheus' histograms count), to the precision of the buckets.
        public var histogram: [Int] = []
        /// The time of every call, added up, in seconds (Prometheus' `_sum`).
        public var seconds = 0.0
    }

    /// The latency bounds of ``Snapshot/histogram``: 1 ms to 10 s.
    public static let histogramBounds: [Duration] = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000]
        .map { Duration.microseconds(Int64($0 * 1_000)) }

    /// How many names a plugin may publish, and how long each may be.
    static let maxNames = 64
    static let maxNameBytes = 64

    private struct Calls {
        var calls = 0
        var completions = 0
        var failures: [String: Int] = [:]
        var buckets = [Int](repeating: 0, count: PluginStats.bucketCount)
        var seconds = 0.0
    }

    private struct Published {
        var counters: [String: Int64] = [:]
        var gauges: [String: Double] = [:]
        var refused = false
    }

    private let calls = Locked(Calls())
    private let published = Locked(Published())

    init() {}

    /// Records a call that began at `start`: `failure` is its status when it failed.
    func record(since start: ContinuousClock.Instant, completed: Bool = false, failure: PluginStatus? = nil) {
        let took = ContinuousClock.now - start
        let bucket = Self.bucket(for: took)
        calls.withLock { calls in
            calls.calls += 1
            calls.seconds += took.seconds
            if completed { calls.completions += 1 }
            if let failure { calls.failures[failure.description, default: 0] += 1 }
            calls.buckets[bucket] += 1
        }
    }

    /// Records a call that failed with `error`.
    func record(since start: ContinuousClock.Instant, error: any Error) {
        record(since: start, failure: PluginStatus.of(error).0)
    }

    /// Counts a failure of a call that is not counted as a call of its own (a transform, which
    /// hands back the page of a call counted already).
    func recordFailure(_ error: any Error) {
        let failure = PluginStatus.of(error).0
        calls.withLock { $0.failures[failure.description, default: 0] += 1 }
    }

    /// Adds to a counter or sets a gauge the plugin names; `nil` when accepted, otherwise why not.
    func publish(_ name: String, counter delta: Int64? = nil, gauge value: Double? = nil) -> String? {
        guard !name.isEmpty, name.utf8.count <= Self.maxNameBytes else {
            return "a name of \(name.utf8.count) bytes (1 to \(Self.maxNameBytes) expected)"
        }
        if let value, !value.isFinite { return "'\(name)': the value is not a finite number" }
        // A counter only goes up (Prometheus reads a fall as a restart).
        if let delta, delta < 0 { return "'\(name)': a counter only goes up; the delta \(delta) is refused" }
        return published.withLock { published -> String? in
            let known = published.counters[name] != nil || published.gauges[name] != nil
            if !known && published.counters.count + published.gauges.count >= Self.maxNames {
                // Said once: a plugin that publishes a name per item would fill the log.
                defer { published.refused = true }
                return published.refused ? "" : "more than \(Self.maxNames) names; '\(name)' and later ones are ignored"
            }
            if let delta {
                let (sum, overflow) = published.counters[name, default: 0].addingReportingOverflow(delta)
                published.counters[name] = overflow ? Int64.max : sum
            }
            if let value { published.gauges[name] = value }
            return nil
        }
    }

    public var snapshot: Snapshot {
        var snapshot = Snapshot()
        calls.withLock { calls in
            snapshot.calls = calls.calls
            snapshot.completions = calls.completions
            snapshot.failures = calls.failures
            snapshot.seconds = calls.seconds
            snapshot.p50 = Self.percentile(0.50, of: calls.buckets, total: calls.calls)
            snapshot.p99 = Self.percentile(0.99, of: calls.buckets, total: calls.calls)
            snapshot.histogram = Self.histogramBounds.map { bound in
                calls.buckets.indices.reduce(0) { $0 + (Self.upperBound(of: $1) <= bound ? calls.buckets[$1] : 0) }
            }
        }
        published.withLock { published in
            snapshot.counters = published.counters
            snapshot.gauges = published.gauges
        }
        return snapshot
    }

    // MARK: Histogram

    /// Buckets of a quarter octave of nanoseconds, from 1 ns to about 2^40 ns (18 minutes).
    private static let bucketCount = 4 * 40 + 1

    static func bucket(for duration: Duration) -> Int {
        let nanoseconds = max(1, Double(duration.components.seconds) * 1e9 + Double(duration.components.attoseconds) / 1e9)
        return min(bucketCount - 1, max(0, Int((log2(nanoseconds) * 4).rounded(.up))))
    }

    /// The upper bound of bucket `index`.
    static func upperBound(of index: Int) -> Duration {
        .nanoseconds(Int64(pow(2, Double(index) / 4).rounded(.up)))
    }

    private static func percentile(_ fraction: Double, of buckets: [Int], total: Int) -> Duration? {
        guard total > 0 else { return nil }
        let rank = max(1, Int((Double(total) * fraction).rounded(.up)))
        var seen = 0
        for (index, count) in buckets.enumerated() {
            seen += count
            if seen >= rank { return upperBound(of: index) }
        }
        return upperBound(of: buckets.count - 1)
    }
}
