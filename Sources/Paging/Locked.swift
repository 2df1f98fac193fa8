#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex: what the engine and the host lock their shared state with.
///
/// Not `Synchronization.Mutex`: on Linux that locks with futex calls ThreadSanitizer does not
/// see, so every access under it is reported as a race, and a real race would hide among them.
/// ThreadSanitizer understands pthread mutexes, which cost about the same uncontended.
@usableFromInline
package final class Locked<State>: @unchecked Sendable {
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var state: State

    @inlinable
    package init(_ state: State) {
        self.state = state
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the state, holding the lock; `body` must not call back into this lock.
    @inlinable
    package func withLock<Result, Failure: Error>(_ body: (inout State) throws(Failure) -> Result) throws(Failure) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&state)
    }

    /// Runs `body` with the state, holding the lock, unless the lock stays taken for `timeout`
    /// (then `nil`): for a wait that must not last for ever.
    package func withLock<Result>(within timeout: Duration, _ body: (inout State) -> Result) -> Result? {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let (seconds, attoseconds) = timeout.components
        let nanoseconds = Int(deadline.tv_nsec) + Int(attoseconds / 1_000_000_000)
        deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        guard pthread_mutex_timedlock(mutex, &deadline) == 0 else { return nil }
        defer { pthread_mutex_unlock(mutex) }
        return body(&state)
    }
}
