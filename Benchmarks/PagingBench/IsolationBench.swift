// Row 12: what process isolation adds to a request: a C pass-through interceptor and a C
// source, each in a child process (`"isolation": "process"`) against the same in process.
import Foundation
import Paging
import PagingHost

/// µs a request through `pipeline`: `count` sequential appends, keys "0", "1"..., the median
/// of 5 runs.
func microsecondsPerRequest(_ pipeline: Pipeline, count: Int) async throws -> Double {
    let pager = pipeline.pager
    let params = PagingRequestParams(pageSize: 20)
    var runs: [Double] = []
    for run in 0..<6 {
        let start = nowNs()
        for index in 0..<count {
            _ = try await pager.load(pager.request(.append, key: PluginKey("\(index)"), params: params))
        }
        // The first run warms up (the child's pages and thread pool).
        if run > 0 { runs.append(Double(nowNs() - start) / Double(count) / 1_000) }
    }
    return median(runs)
}

/// A pipeline over pass_through.c's "counting" source, with its "pass-through" interceptor
/// when `interceptor` is set; each of the two in a child process when its flag says so.
func passThroughPipeline(_ library: String, isolatedSource: Bool, interceptor: Bool, isolatedInterceptor: Bool) throws -> Pipeline {
    func isolation(_ on: Bool) -> String { on ? #", "isolation": "process""# : "" }
    let interceptors = interceptor ? #"[{"plugin": "\#(library)", "id": "pass-through"\#(isolation(isolatedInterceptor))}]"# : "[]"
    let text = #"{"source": {"plugin": "\#(library)", "id": "counting"\#(isolation(isolatedSource))}, "interceptors": \#(interceptors)}"#
    return try Pipeline(manifest: try Manifest.parse(Array(text.utf8), file: scratch + "/isolation.json"), sink: silentSink)
}

func benchIsolation(_ report: Report) async throws {
    progress("row 12: process isolation: µs added a request")
    guard FileManager.default.isExecutableFile(atPath: PluginIsolation.executable) else {
        report.add("12", "Process isolation: µs added a request", "—", target: "≤ 20 µs", .notMeasured,
                   "\(PluginIsolation.executable) missing: run `swift build -c release` first")
        return
    }
    let library = try compilePassThroughC()
    let count = 2_000
    let plain = try await microsecondsPerRequest(
        try passThroughPipeline(library, isolatedSource: false, interceptor: false, isolatedInterceptor: false), count: count)
    let isolatedSource = try await microsecondsPerRequest(
        try passThroughPipeline(library, isolatedSource: true, interceptor: false, isolatedInterceptor: false), count: count)
    let withInterceptor = try await microsecondsPerRequest(
        try passThroughPipeline(library, isolatedSource: false, interceptor: true, isolatedInterceptor: false), count: count)
    let isolatedInterceptor = try await microsecondsPerRequest(
        try passThroughPipeline(library, isolatedSource: false, interceptor: true, isolatedInterceptor: true), count: count)
    let sourceAdded = isolatedSource - plain, interceptorAdded = isolatedInterceptor - withInterceptor
    let floor = try socketRoundTripMicroseconds()
    let ok = interceptorAdded <= 20
    report.add("12", "Process isolation: µs a request adds when the C pass-through interceptor, or the C source, runs in a child process",
               "interceptor +\(fmt(interceptorAdded, 1)) µs (\(fmt(withInterceptor, 1)) → \(fmt(isolatedInterceptor, 1))); "
                   + "source +\(fmt(sourceAdded, 1)) µs (\(fmt(plain, 1)) → \(fmt(isolatedSource, 1))); "
                   + "a bare round trip in C: \(fmt(floor, 1)) µs",
               target: "interceptor ≤ 20 µs", verdict(ok),
               "sequential loads of 20 items; an intercept is one round trip over a Unix socket, a source's request two (key_chain and fetch); "
                   + "the bare round trip (Benchmarks/socket_round_trip.c: 200 bytes to a forked child and back, both blocking) is the floor "
                   + "of a call whose other side sleeps")
    if !ok { report.miss("12 (process isolation): an isolated intercept adds \(fmt(interceptorAdded, 1)) µs") }
}

/// The median µs of a 200-byte round trip to a forked child over a socketpair, in C.
func socketRoundTripMicroseconds() throws -> Double {
    let program = "\(scratch)/socket_round_trip"
    let built = try runProcess("/usr/bin/env", ["cc", "-O2", "\(repositoryRoot)/Benchmarks/socket_round_trip.c", "-o", program])
    guard built.code == 0 else { throw BenchError("cc failed on socket_round_trip.c (exit \(built.code))") }
    let result = try runProcess(program, [])
    guard result.code == 0, let microseconds = Double(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw BenchError("socket_round_trip failed (exit \(result.code))")
    }
    return microseconds
}
