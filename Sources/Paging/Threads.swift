#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A pthread mutex with its condition variable, for threads that wait for one another outside
/// Swift concurrency (a plugin's call may block its thread). Foundation's `NSCondition` does the
/// same; the host and `pager` use this one so that they need only FoundationEssentials, which
/// starts several milliseconds faster.
package final class Condition: @unchecked Sendable {
    /// The mutex (a `Locked` with no state owns it).
    private let lockHolder = Locked(())
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var mutex: UnsafeMutablePointer<pthread_mutex_t> { lockHolder.mutex }

    package init() {
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        pthread_cond_init(condition, nil)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
    }

    package func lock() { pthread_mutex_lock(mutex) }
    package func unlock() { pthread_mutex_unlock(mutex) }
    /// Takes the lock if it is free; whether it did.
    package func tryLock() -> Bool { pthread_mutex_trylock(mutex) == 0 }

    package func withLock<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        lock()
        defer { unlock() }
        return try body()
    }

    /// Waits for a signal; the lock must be held, and is held again on return.
    package func wait() { pthread_cond_wait(condition, mutex) }
    package func signal() { pthread_cond_signal(condition) }
    package func broadcast() { pthread_cond_broadcast(condition) }
}

/// Runs `body` on a new detached thread: for work that may block for long (a plugin's cancel,
/// a child's reader), kept off Swift's shared pools.
package func detachThread(_ body: @escaping @Sendable () -> Void) {
    final class Start {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let start = Unmanaged.passRetained(Start(body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { raw in
        Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue().body()
        return nil
    }, start)
    precondition(rc == 0, "cannot start a thread: error \(rc)")
}
