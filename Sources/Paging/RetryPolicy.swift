/// How the ``Pager`` retries a failed step of a load - a source's fetch, an interceptor's
/// intercept: how many times, for which errors, and how long it waits in between. Each retry
/// calls the step that failed again.
///
/// An error that says when to retry (``RetryHintedError``, an API's `Retry-After`) is waited
/// for at least that long; a hint longer than ``Backoff/maximum`` is not waited for: the load
/// fails with ``PagingError/retryAfterBeyondBackoff(retryAfter:maximum:error:)``.
public struct RetryPolicy: Sendable {
    /// Retries after the first attempt; `0` means no retry.
    public var maxRetries: Int
    /// The wait before each retry.
    public var backoff: Backoff
    /// Whether an error is worth retrying. The default, ``isRetryable(_:)``, retries
    /// everything but cancellation and errors that say they are permanent.
    public var condition: @Sendable (any Error) -> Bool

    public init(
        maxRetries: Int,
        backoff: Backoff = Backoff(),
        condition: @escaping @Sendable (any Error) -> Bool = RetryPolicy.isRetryable
    ) {
        self.maxRetries = max(0, maxRetries)
        self.backoff = backoff
        self.condition = condition
    }

    /// Never retry.
    public static let none = RetryPolicy(maxRetries: 0)

    /// The default condition: `false` for cancellation, the error's own answer when it is a
    /// ``RetryClassifiedError``, `true` otherwise.
    @Sendable public static func isRetryable(_ error: any Error) -> Bool {
        if error is CancellationError { return false }
        if let classified = error as? any RetryClassifiedError { return classified.isRetryable }
        return true
    }

    /// Exponential backoff with jitter: the n-th retry waits `initial * multiplier^(n-1)`, at
    /// most `maximum`, of which a random fraction up to `jitter` is taken off.
    public struct Backoff: Sendable {
        public var initial: Duration
        public var multiplier: Double
        public var maximum: Duration
        /// From 0 (always the full delay) to 1 (anything from zero to the full delay).
        public var jitter: Double

        public init(initial: Duration = .milliseconds(200), multiplier: Double = 2,
                    maximum: Duration = .seconds(30), jitter: Double = 0.2) {
            self.initial = initial
            self.multiplier = max(1, multiplier)
            self.maximum = maximum
            self.jitter = min(1, max(0, jitter))
        }

        /// No wait between retries.
        public static let immediate = Backoff(initial: .zero, jitter: 0)

        /// The wait before retry number `attempt` (1-based), with `random` in 0..<1.
        public func delay(forAttempt attempt: Int, random: Double = Double.random(in: 0..<1)) -> Duration {
            guard initial > .zero else { return .zero }
            // Weighed in seconds first: a Duration past Int64's seconds traps (a multiplier of
            // 1e10, or infinity, took the app down on the second retry).
            let factor = power(multiplier, max(0, attempt - 1))
            let capped = !(seconds(initial) * factor < seconds(maximum)) ? maximum : initial * factor
            return capped * (1 - jitter * random)
        }

        private func seconds(_ duration: Duration) -> Double {
            Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
        }

        /// The wait before retry number `attempt` after `error`: the backoff's delay, or the
        /// error's retry hint when that is longer.
        ///
        /// - Throws: ``PagingError/retryAfterBeyondBackoff(retryAfter:maximum:error:)`` when the
        ///   hint is longer than ``maximum``.
        public func delay(forAttempt attempt: Int, after error: any Error) throws(PagingError) -> Duration {
            let backoff = delay(forAttempt: attempt)
            guard let hint = (error as? any RetryHintedError)?.retryAfter else { return backoff }
            guard hint <= maximum else {
                throw .retryAfterBeyondBackoff(retryAfter: hint, maximum: maximum, error: String(describing: error))
            }
            return max(backoff, hint)
        }
    }
}

/// An error that knows whether retrying can help (a timeout can; a bad request cannot).
public protocol RetryClassifiedError: Error {
    var isRetryable: Bool { get }
}

/// An error that says how long to wait before trying again (an HTTP `Retry-After`, a rate
/// limiter's next free slot). The retry policy waits at least that long.
public protocol RetryHintedError: Error {
    /// The least wait before a retry can succeed; `nil` when the error does not say.
    var retryAfter: Duration? { get }
}

/// `base` to a whole power, stopping once it is far past any sensible delay.
private func power(_ base: Double, _ exponent: Int) -> Double {
    var result = 1.0
    for _ in 0..<exponent where result < 1e12 { result *= base }
    return result
}
