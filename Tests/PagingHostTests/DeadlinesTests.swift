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
        let deadlines = Deadlines<Int>(timeout: .milliseconds(50), queue: Self.queue)
        let ran = Locked<[Int]>([])
        let start = ContinuousClock.now
        for index in [7, 3, 5] { deadlines.watch(index) { ran.withLock { $0.append(index) } } }
        #expect(await eventually { ran.withLock { $0.count } == 3 })
        #expect(ContinuousClock.now - start >= .milliseconds(50))
        #expect(ran.withLock { $0 } == [7, 3, 5])
        deadlines.watch(3) { ran.withLock { $0.append(3) } }
        #expect(await eventually { ran.withLock { $0.count } == 4 })
        #expect(deadlines.pendingCount == 0)
    }

    /// An expiry unwatched never runs, and is not held until its deadline: an asyncAfter a
    /// call held what it captured for the whole timeout (a serve's memory grew with requests
    /// a second times its timeout).
    @Test(.timeLimit(.minutes(1))) func anUnwatchedExpiry_neverRuns_andIsNotHeld() async throws {
        let deadlines = Deadlines<Int>(timeout: .milliseconds(200), queue: Self.queue)
        let ran = Locked(0)
        let held = Locked<[Int]>([])
        for id in 0..<10_000 {
            let payload = [Int](repeating: 1, count: 16)
            deadlines.watch(id) { ran.withLock { $0 += 1 }; held.withLock { $0 = payload } }
            deadlines.unwatch(id)
        }
        #expect(deadlines.pendingCount == 0)
        deadlines.watch(-1) { ran.withLock { $0 += 1 } }
        #expect(await eventually { ran.withLock { $0 } == 1 })
        deadlines.unwatch(-1)
        #expect(held.withLock { $0 }.isEmpty)
    }

    /// An id names one watch: watched again before its deadline, only the last expiry runs.
    @Test(.timeLimit(.minutes(1))) func anIdWatchedAgain_replacesItsFirstExpiry() async throws {
        let deadlines = Deadlines<Int>(timeout: .milliseconds(50), queue: Self.queue)
        let ran = Locked<[String]>([])
        deadlines.watch(1) { ran.withLock { $0.append("first") } }
        deadlines.watch(1) { ran.withLock { $0.append("second") } }
        #expect(deadlines.pendingCount == 1)
        #expect(await eventually { ran.withLock { $0.count } == 1 })
        deadlines.watch(2) { ran.withLock { $0.append("after") } }
        #expect(await eventually { ran.withLock { $0.count } == 2 })
        #expect(ran.withLock { $0 } == ["second", "after"])
    }
}
