// What a failed revalidation of a stale page says: no caller waits for that load.
import Paging

/// Says that the load in the background after a stale page answered (stale-while-revalidate)
/// failed, at most once a minute for a plugin: no caller waits for that load, and its failure
/// was said nowhere but in `--stats`, while the plugin went on answering stale.
final class RevalidationWarning: Sendable {
    static let interval: Duration = .seconds(60)
    private let lastSaid = Locked<ContinuousClock.Instant?>(nil)

    /// The line to log for `error`, or `nil` when one was said within the interval or the load
    /// was cancelled (a refresh superseded it, or the run ended).
    func line(for error: any Error) -> String? {
        if PluginStatus.of(error).0 == .cancelled { return nil }
        let now = ContinuousClock.now
        let due = lastSaid.withLock { lastSaid in
            if let said = lastSaid, now - said < Self.interval { return false }
            lastSaid = now
            return true
        }
        guard due else { return nil }
        return "the stale page it answered could not be loaded again (\(error)); it answers stale until a load succeeds (said at most once a minute)"
    }
}
