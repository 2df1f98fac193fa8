// Row 10: loads waiting in the rate-limit plugin hold no thread: the process's thread count
// while 10, then 1,000 loads wait for their slots.
import Foundation
import Paging
import PagingHost
import Synchronization

/// The process's thread count ("Threads:" of /proc/self/status).
func processThreads() -> Int {
    for line in readLines("/proc/self/status") where line.hasPrefix("Threads:") {
        return Int(line.dropFirst(8).filter(\.isNumber)) ?? -1
    }
    return -1
}

/// Starts `count` loads through a new rate limiter that makes them all wait (after the one
/// token of its bucket), waits until the plugin has deferred every one, reads the thread
/// count, then destroys the limiter (which ends the loads). Returns the count.
func threadsWhileWaiting(_ count: Int, limiterPath: String) async throws -> Int {
    let deferred = Atomic<Int>(0)
    let sink: PluginLogSink = { _, _, message in
        if message.contains("waits for its slot") { deferred.add(1, ordering: .relaxed) }
    }
    // One slot a second, so that the last of 1,000 would leave after 1,000 s; neither the
    // plugin's max_wait_ms nor the host's fetch timeout ends a wait before the limiter goes.
    let limiter = try PluginLibrary.open(path: limiterPath).makeInterceptor(
        config: .object([("per_second", .int(1)), ("max_wait_ms", .int(2_000_000))]), sink: sink,
        limits: PluginLimits(fetchTimeout: .seconds(3_600)))
    let pager = Pager(source: BytesSource(), interceptors: [limiter], deduplication: .disabled)
    _ = try await pager.load(pager.request(.append, key: PluginKey("0"), params: PagingRequestParams(pageSize: itemsPerPage)))
    let loads = (1...count).map { index in
        Task { try await pager.load(pager.request(.append, key: PluginKey("\(index)"), params: PagingRequestParams(pageSize: itemsPerPage))) }
    }
    while deferred.load(ordering: .relaxed) < count { try await Task.sleep(for: .milliseconds(5)) }
    let threads = processThreads()
    limiter.destroy()
    for load in loads { _ = try? await load.value }
    return threads
}

func benchRateLimitThreads(_ report: Report) async throws {
    progress("row 11: threads held by loads waiting in the rate-limit plugin")
    guard let limiterPath = shippedPlugin("rate-limit") else {
        report.add("11", "Rate limiter: threads while loads wait", "—", target: "equal", .notMeasured,
                   "librate-limit.so missing: run `swift build -c release` first")
        return
    }
    let idle = processThreads()
    _ = try await threadsWhileWaiting(10, limiterPath: limiterPath) // warms the thread pool up
    var tens: [Double] = [], thousands: [Double] = []
    for _ in 0..<5 {
        tens.append(Double(try await threadsWhileWaiting(10, limiterPath: limiterPath)))
        thousands.append(Double(try await threadsWhileWaiting(1_000, limiterPath: limiterPath)))
    }
    let ten = Int(median(tens)), thousand = Int(median(thousands))
    let ok = thousand <= ten + 1
    report.add("11", "Rate limiter (C plugin, deferred intercepts): process threads while 10, then 1,000 loads wait for their slots",
               "10 waiting: \(ten) threads; 1,000 waiting: \(thousand) threads",
               target: "equal (±1)", verdict(ok),
               "before any wait: \(idle); the waits hold no thread: the plugin's one timer thread answers them all")
    if !ok { report.miss("10 (rate limiter threads): \(thousand) threads with 1,000 loads waiting, \(ten) with 10") }
}
