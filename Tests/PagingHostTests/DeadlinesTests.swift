import Dispatch
import Foundation
import Paging
import PagingHost
import Testing

@Suite("Deadlines")
struct DeadlinesTests {
    static let queue = DispatchQueue(label: "deadlines-tests")

    /// Each expiry runs once its timeout is up, in the order watched, and the timer is set
    /// again for those watched after it fired.
    @Test(.timeLimit(.minutes(1))) func expiriesRun_afterTheTimeout_inOrder() async throws {
        let deadlines = Deadlines(timeout: .milliseconds(50), queue: Self.queue)
        let ran = Locked<[Int]>([])
        let start = ContinuousClock.now
        for index in 0..<3 { _ = deadlines.watch { ran.withLock { $0.append(index) } } }
        #expect(await eventually { ran.withLock { $0.count } == 3 })
        #expect(ContinuousClock.now - start >= .milliseconds(50))
        #expect(ran.withLock { $0 } == [0, 1, 2])
        _ = deadlines.watch { ran.withLock { $0.append(3) } }
        #expect(await eventually { ran.withLock { $0.count } == 4 })
        #expect(deadlines.pendingCount == 0)
    }

    /// An expiry unwatched never runs, and is not held until its deadline: an asyncAfter a
    /// call held what it captured for the whole timeout (a serve's memory grew with requests
    /// a second times its timeout).
    @Test(.timeLimit(.minutes(1))) func anUnwatchedExpiry_neverRuns_andIsNotHeld() async throws {
        let deadlines = Deadlines(timeout: .milliseconds(200), queue: Self.queue)
        let ran = Locked(0)
        let held = Locked<[Int]>([])
        for _ in 0..<10_000 {
            let payload = [Int](repeating: 1, count: 16)
            let id = deadlines.watch { ran.withLock { $0 += 1 }; held.withLock { $0 = payload } }
            deadlines.unwatch(id)
        }
        #expect(deadlines.pendingCount == 0)
        let kept = deadlines.watch { ran.withLock { $0 += 1 } }
        #expect(await eventually { ran.withLock { $0 } == 1 })
        deadlines.unwatch(kept)
        #expect(held.withLock { $0 }.isEmpty)
    }
}
