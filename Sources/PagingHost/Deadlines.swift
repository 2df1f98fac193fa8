// Timeouts of calls and requests that end long before them, as most do.
import Dispatch
import Paging

/// Where timeouts fire unless a ``Deadlines`` is given a queue: a serial queue of its own, never
/// behind plugin calls that block the shared pool (a global queue has as many threads as cores).
/// For expiries that cannot block: one that does holds every other on it.
package let timeoutQueue = DispatchQueue(label: "paging.timeouts")

/// Deadlines `timeout` after each is watched, by the caller's id (a fetch's, a call's), all
/// served by one dispatch timer on `queue`, which is set to the earliest: an expiry unwatched is
/// forgotten at once. (A timer a call, `asyncAfter` or a sleeping task, held what it captured
/// until its deadline however soon the call returned: a `pager serve` answering 3,000 requests a
/// second grew by 100 MB over the 30 s of the default timeout.)
///
/// Every deadline is "now + the same timeout", so one watched later never needs an earlier
/// firing than the one the timer is set to.
///
/// # Thread safety
/// Any method from any thread: the state is under a lock, and the timer (a dispatch source,
/// whose methods are thread-safe) is set under it.
package final class Deadlines<ID: Hashable & Sendable>: @unchecked Sendable {
    private struct Entry {
        /// The order watched, in which expiries due together run.
        var order: UInt64
        var deadline: DispatchTime
        var expire: @Sendable () -> Void
    }

    private struct State {
        var watched: UInt64 = 0
        var pending: [ID: Entry] = [:]
        /// When the timer fires next; nil when it is not set.
        var armed: DispatchTime?
    }

    package let timeout: Duration
    private let state = Locked(State())
    private let timer: any DispatchSourceTimer

    package init(timeout: Duration, queue: DispatchQueue = timeoutQueue) {
        self.timeout = timeout
        timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [weak self] in self?.fire() }
        timer.activate()
    }

    deinit {
        timer.cancel()
    }

    /// Runs `expire` on the timer's queue once the timeout is up, unless ``unwatch(_:)`` of `id`
    /// comes first. `id` names one watch at a time: watched again, it replaces the first.
    package func watch(_ id: ID, _ expire: @escaping @Sendable () -> Void) {
        let deadline = DispatchTime.now() + .nanoseconds(timeout.nanoseconds)
        state.withLock { state in
            state.watched += 1
            state.pending[id] = Entry(order: state.watched, deadline: deadline, expire: expire)
            if state.armed == nil {
                state.armed = deadline
                timer.schedule(deadline: deadline)
            }
        }
    }

    package func unwatch(_ id: ID) {
        state.withLock { _ = $0.pending.removeValue(forKey: id) }
    }

    /// The expiries watched and not yet run or unwatched.
    package var pendingCount: Int { state.withLock { $0.pending.count } }

    private func fire() {
        let now = DispatchTime.now()
        let expired = state.withLock { state -> [Entry] in
            var expired: [Entry] = []
            var next: DispatchTime?
            for (id, entry) in state.pending {
                if entry.deadline <= now {
                    expired.append(entry)
                    state.pending[id] = nil
                } else if next.map({ entry.deadline < $0 }) ?? true {
                    next = entry.deadline
                }
            }
            state.armed = next
            if let next { timer.schedule(deadline: next) }
            return expired
        }
        for entry in expired.sorted(by: { $0.order < $1.order }) { entry.expire() }
    }
}
