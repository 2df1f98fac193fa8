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
    /// ``wait()``, for `seconds` at most (the lock is held again on return either way); false
    /// when the time ran out.
    package func wait(seconds: Double) -> Bool {
        var deadline = timespec()
        clock_gettime(CLOCK_REALTIME, &deadline)
        let nanoseconds = Int(deadline.tv_nsec) + Int((seconds - seconds.rounded(.down)) * 1e9)
        deadline.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        deadline.tv_nsec = nanoseconds % 1_000_000_000
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
    }
    package func signal() { pthread_cond_signal(condition) }
    package func broadcast() { pthread_cond_broadcast(condition) }
}

/// Runs `body` on a new detached thread named `name` (at most 15 bytes: what top, perf and gdb
/// show): for work that may block for long (a plugin's cancel, a child's reader), kept off
/// Swift's shared pools.
package func detachThread(named name: String, _ body: @escaping @Sendable () -> Void) {
    final class Start {
        let name: String
        let body: @Sendable () -> Void
        init(_ name: String, _ body: @escaping @Sendable () -> Void) {
            self.name = name
            self.body = body
        }
    }
    let start = Unmanaged.passRetained(Start(name, body)).toOpaque()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var thread = pthread_t()
    let rc = pthread_create(&thread, &attributes, { raw in
        let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
        nameCurrentThread(start.name)
        start.body()
        return nil
    }, start)
    precondition(rc == 0, "cannot start a thread: error \(rc)")
}

/// Names the calling thread (its first 15 bytes, the most Linux keeps).
private func nameCurrentThread(_ name: String) {
    let short = Array(name.utf8.prefix(15))
#if canImport(Darwin)
    _ = pthread_setname_np(String(decoding: short, as: UTF8.self))
#else
    // Swift's Glibc module lacks pthread_setname_np; Linux keeps a thread's name here.
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    _ = short.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
    close(fd)
#endif
}
