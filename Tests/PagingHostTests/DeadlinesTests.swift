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
    @Test(.timeLimit(.minutes(3))) func expiriesRun_afterTheTimeout_inOrder() async throws {
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
    @Test(.timeLimit(.minutes(3))) func anUnwatchedExpiry_neverRuns_andIsNotHeld() async throws {
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
    @Test(.timeLimit(.minutes(3))) func anIdWatchedAgain_replacesItsFirstExpiry() async throws {
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

    /// A plugin whose log sink blocks on its fetch timeout's line holds no other plugin's
    /// timeouts: on the timeouts' queue all plugins shared, the other's 200 ms call timeout
    /// waited for its call to return. (That call returns only when the test lets it: a fixed
    /// bound raced a starved machine.)
    @Test(.timeLimit(.minutes(3))) func aBlockingLogSinkOfOnePlugin_holdsNoOtherPluginsTimeouts() async throws {
        let entered = DispatchSemaphore(value: 0), release = DispatchSemaphore(value: 0)
        let blockingSink: PluginLogSink = { level, _, message in
            guard level == .error, message.contains("did not complete within") else { return }
            entered.signal()
            _ = release.wait(timeout: .now() + 20)
        }
        let stuck = try PluginLibrary.open(path: try await fixturePlugin("never_complete"))
            .makeSource(sink: blockingSink, limits: PluginLimits(fetchTimeout: .milliseconds(100)))
        let stuckPager = Pager(source: stuck)
        let stuckLoad = Task { try? await stuckPager.load(stuckPager.refreshRequest(params: params(pageSize: 5))) }
        defer { release.signal() }
        #expect(await Task.detached { entered.wait(timeout: .now() + 20) == .success }.value)

        let wake = scratchFolder() + "/wake"
        let other = try PluginLibrary.open(path: try await fixturePlugin("blocking_fetch"))
            .makeSource(config: .object([("sleep_ms", .int(600_000)), ("until_path", .string(wake))]), sink: LogRecorder().sink,
                        limits: PluginLimits(fetchTimeout: .seconds(30), callTimeout: .milliseconds(200)))
        defer { FileManager.default.createFile(atPath: wake, contents: nil) }
        let otherPager = Pager(source: other)
        let failed = Locked<(any Error)?>(nil)
        let otherLoad = Task {
            do { _ = try await otherPager.load(otherPager.refreshRequest(params: params(pageSize: 5))) } catch { failed.withLock { $0 = error } }
        }
        // Failed by its call timeout while its call still blocks.
        #expect(await eventually { failed.withLock { $0 } != nil }, "the other plugin's call timeout waited")
        #expect(failed.withLock { $0 } is PluginError)
        FileManager.default.createFile(atPath: wake, contents: nil)
        release.signal()
        _ = await otherLoad.value
        _ = await stuckLoad.value
    }
}
