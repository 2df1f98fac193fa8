// Timeouts of calls and requests that end long before them, as most do.
import Dispatch
import Paging

/// Deadlines `timeout` after each is watched, all served by one dispatch timer on `queue`,
/// which is set to the earliest: an expiry unwatched is forgotten at once. (A timer a call,
/// `asyncAfter` or a sleeping task, held what it captured until its deadline however soon the
/// call returned: a `pager serve` answering 3,000 requests a second grew by 100 MB over the 30 s
/// of the default timeout.)
///
/// Every deadline is "now + the same timeout", so one watched later never needs an earlier
/// firing than the one the timer is set to.
///
/// # Thread safety
/// Any method from any thread: the state is under a lock, and the timer (a dispatch source,
/// whose methods are thread-safe) is set under it.
package final class Deadlines: @unchecked Sendable {
    private struct State {
        var next: UInt64 = 1
        var pending: [UInt64: (deadline: DispatchTime, expire: @Sendable () -> Void)] = [:]
        /// When the timer fires next; nil when it is not set.
        var armed: DispatchTime?
    }

    private let timeout: Duration
    private let state = Locked(State())
    private let timer: any DispatchSourceTimer

    package init(timeout: Duration, queue: DispatchQueue) {
        self.timeout = timeout
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.fire() }
        timer.activate()
    }

    deinit {
        timer.cancel()
    }

    /// Runs `expire` on the timer's queue once the timeout is up, unless ``unwatch(_:)`` comes
    /// first; returns the id to unwatch it with.
    package func watch(_ expire: @escaping @Sendable () -> Void) -> UInt64 {
        let deadline = DispatchTime.now() + .nanoseconds(timeout.nanoseconds)
        return state.withLock { state in
            let id = state.next
            state.next += 1
            state.pending[id] = (deadline, expire)
            if state.armed == nil {
                state.armed = deadline
                timer.schedule(deadline: deadline)
            }
            return id
        }
    }

    package func unwatch(_ id: UInt64) {
        state.withLock { _ = $0.pending.removeValue(forKey: id) }
    }

    /// The expiries watched and not yet run or unwatched.
    package var pendingCount: Int { state.withLock { $0.pending.count } }

    private func fire() {
        let now = DispatchTime.now()
        let expired = state.withLock { state -> [(id: UInt64, expire: @Sendable () -> Void)] in
            var expired: [(id: UInt64, expire: @Sendable () -> Void)] = []
            var next: DispatchTime?
            for (id, entry) in state.pending {
                if entry.deadline <= now {
                    expired.append((id, entry.expire))
                    state.pending[id] = nil
                } else if next.map({ entry.deadline < $0 }) ?? true {
                    next = entry.deadline
                }
            }
            state.armed = next
            if let next { timer.schedule(deadline: next) }
            return expired
        }
        // In the order watched (ids grow with their deadlines).
        for (_, expire) in expired.sorted(by: { $0.id < $1.id }) { expire() }
    }
}
