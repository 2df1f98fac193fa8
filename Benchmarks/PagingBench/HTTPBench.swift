// Row 7: the http source plugin through a Pager over loopback, against a raw URLSession loop on
// the same LoopbackHTTPServer.
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import LoopbackHTTP
import Paging
import PagingHost

func benchHTTP(_ report: Report) async throws {
    progress("row 7: http source over loopback")
    guard let path = shippedPlugin("http") else {
        report.add("7", "HTTP source over loopback", "—", target: "≥ 0.8× raw URLSession", .notMeasured,
                   "not measured: http plugin missing (libhttp.so; run `swift build -c release`)")
        return
    }
    // Bodies built once, so that the server (which shares the 2 cores) costs little and the same
    // for both loops.
    let bodies: [[UInt8]] = (0..<1_000).map { page in
        let items = (0..<itemsPerPage).map { i -> String in
            let id = page * itemsPerPage + i
            return #"{"id":\#(id),"name":"item-\#(id)","score":\#(id % 97)}"#
        }
        return Array(("{\"data\":[" + items.joined(separator: ",") + "]}").utf8)
    }
    let server = try LoopbackHTTPServer { request in
        let page = Int(request.query["page"] ?? "") ?? 1
        return .json(bytes: bodies[page % bodies.count])
    }
    server.start()
    defer { server.stop() }

    let library = try PluginLibrary.open(path: path)
    let url = "\(server.baseURL)/items?page={key}&per_page={pageSize}"
    let source = try library.makeSource(config: try JSONValue.parse(#"{"url": "\#(url)", "items": "/data"}"#), sink: silentSink)
    let pager = Pager(source: source)
    let params = PagingRequestParams(pageSize: itemsPerPage)

    let configuration = URLSessionConfiguration.ephemeral // as the plugin configures its session
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.urlCache = nil
    let session = URLSession(configuration: configuration)
    defer { session.invalidateAndCancel() }

    /// Pages 1...count through the pipeline; pages a second.
    func pipelineRun(_ count: Int) async throws -> Double {
        let requests = (1...count).map { pager.request(.append, key: PluginKey("\($0)"), params: params) }
        var items = 0
        let start = nowNs()
        for request in requests { items += try await pager.load(request).values.count }
        let elapsed = nowNs() - start
        guard items == count * itemsPerPage else { throw BenchError("the http pipeline returned \(items) items") }
        return Double(count) * 1e9 / Double(elapsed)
    }
    /// The URLs and headers the plugin sends, for pages 1...count.
    func rawRequests(_ count: Int) -> [URLRequest] {
        (1...count).map { page in
            var request = URLRequest(url: URL(string: "\(server.baseURL)/items?page=\(page)&per_page=\(itemsPerPage)")!)
            request.setValue("SwiftPaging", forHTTPHeaderField: "User-Agent")
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            return request
        }
    }

    /// The same URLs and headers with URLSession's async data(for:); pages a second.
    func rawRun(_ count: Int) async throws -> Double {
        let requests = rawRequests(count)
        var bytes = 0
        let start = nowNs()
        for request in requests { bytes += try await session.data(for: request).0.count }
        let elapsed = nowNs() - start
        guard bytes > 0 else { throw BenchError("raw URLSession got nothing") }
        return Double(count) * 1e9 / Double(elapsed)
    }

    /// The same with dataTask and a completion handler, as the plugin fetches; pages a second.
    func callbackRun(_ count: Int) async throws -> Double {
        let requests = rawRequests(count)
        var bytes = 0
        let start = nowNs()
        for request in requests {
            bytes += try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Int, any Error>) in
                session.dataTask(with: request) { data, _, error in
                    if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: data?.count ?? 0) }
                }.resume()
            }
        }
        let elapsed = nowNs() - start
        guard bytes > 0 else { throw BenchError("raw URLSession got nothing") }
        return Double(count) * 1e9 / Double(elapsed)
    }

    // Warm up both (connections, URLSession's threads), then size the runs to the time budget.
    _ = try await pipelineRun(50)
    let warmRate = min(try await rawRun(200), try await pipelineRun(200))
    let pagesPerRun = warmRate >= 1_000 ? 5_000 : max(200, Int(warmRate * 5) / 100 * 100)
    var pipeline: [Double] = [], raw: [Double] = [], callback: [Double] = []
    let connectionsBefore = server.connectionCount
    for _ in 0..<5 {
        pipeline.append(try await pipelineRun(pagesPerRun))
        raw.append(try await rawRun(pagesPerRun))
        callback.append(try await callbackRun(pagesPerRun))
    }
    let connections = server.connectionCount - connectionsBefore
    let p = median(pipeline), r = median(raw), c = median(callback)
    let ok = p / r >= 0.8
    report.add("7", "HTTP source plugin (`http`, page pagination, 20 JSON objects a page) through Pager.load, loopback",
               "\(formatRate(p)) pages (\(formatNs(1e9 / p))/page)",
               target: "≥ 0.8× raw URLSession", verdict(ok),
               "raw URLSession data(for:) loop: \(formatRate(r)) → \(fmt(p / r, 2))×; raw dataTask + completion handler (what the plugin did before libcurl): \(formatRate(c)) (\(fmt(p / c, 2))× of it); \(pagesPerRun) pages a run × 5 runs each\(pagesPerRun < 5_000 ? " (fewer than 5,000 to keep the bench short)" : ""); \(connections) new connections")
    if !ok { report.miss("7 (http, \(fmt(p / r, 2))× raw): latency, not CPU: the plugin completes from URLSession's callback thread and the waiting task resumes on the pool, one more thread hop than data(for:); the per-fetch timeout task is gone (one watchdog per source)") }
}
