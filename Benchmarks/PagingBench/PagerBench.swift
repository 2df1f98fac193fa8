// Rows 1-3: a request through a Pager (in-process and loaded interceptors, a loaded source),
// cache hits, and the logging interceptor with its level off.
import Foundation
import Paging
import PagingHost

let itemsPerPage = 20
/// Distinct pages the request loops cycle through.
let distinctPages = 1_024

// MARK: - In-memory sources (synchronous, pages built once so that a fetch allocates nothing)

struct IntSource: PagingSource {
    let refreshKey = 0
    let pages: [[Int]]

    init(pageCount: Int = distinctPages) {
        pages = (0..<pageCount).map { page in (0..<itemsPerPage).map { page * itemsPerPage + $0 } }
    }

    func keyChain(for key: Int) -> PagingKeyChain<Int> {
        PagingKeyChain(key: key, prevKey: key > 0 ? key - 1 : nil, nextKey: key + 1)
    }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
        Page(request: request, values: pages[request.key % pages.count])
    }
}

/// The same pages as bytes, for the pipelines with loaded plugins (PluginKey / PluginItem).
struct BytesSource: PagingSource {
    let refreshKey = PluginKey("0")
    let pages: [[PluginItem]]

    init(pageCount: Int = distinctPages) {
        pages = (0..<pageCount).map { page in (0..<itemsPerPage).map { PluginItem(json: "\(page * itemsPerPage + $0)") } }
    }

    func keyChain(for key: PluginKey) -> PagingKeyChain<PluginKey> {
        let n = Int(key.text ?? "") ?? 0
        return PagingKeyChain(key: key, prevKey: n > 0 ? PluginKey("\(n - 1)") : nil, nextKey: PluginKey("\(n + 1)"))
    }

    func fetch(request: PluginRequest) async throws -> PluginPage {
        let n = Int(request.key.text ?? "") ?? 0
        return Page(request: request, values: pages[n % pages.count])
    }
}

/// An in-process interceptor that lets every request through.
struct PassThrough<Key: Hashable & Sendable, Value: Sendable>: PagingInterceptor {
    func intercept(request: PagingRequest<Key>) async throws -> PagingInterceptResult<Key, Value> {
        .proceed(request, handleAfterwards: false)
    }
}

// MARK: - The request loop

/// `pager.load` over `requests` (cycled) `count` times; ns a request.
func loadLoop<Key: Hashable & Sendable, Value: Sendable>(_ pager: Pager<Key, Value>, _ requests: [PagingRequest<Key>], count: Int) async throws -> Double {
    var values = 0
    let start = nowNs()
    var index = 0
    for _ in 0..<count {
        let page = try await pager.load(requests[index])
        values &+= page.values.count
        index += 1
        if index == requests.count { index = 0 }
    }
    let elapsed = nowNs() - start
    precondition(values == count * itemsPerPage, "a page came back with \(values / max(count, 1)) values")
    return Double(elapsed) / Double(count)
}

/// A measured variant: `run(count)` returns ns an operation.
struct Variant {
    let name: String
    let run: (Int) async throws -> Double
    var count = 0
    var samples: [Double] = []

    init(_ name: String, _ run: @escaping (Int) async throws -> Double) {
        self.name = name
        self.run = run
    }

    var median: Double { medianOf(samples) }
}

/// Runs each variant `rounds` times, interleaved (round 1 of every variant, then round 2...), so
/// that drift (frequency, a neighbour's load) touches every variant alike. The count of each is
/// set once, by a warm-up, to take about `budget` seconds a run.
func measureInterleaved(_ variants: inout [Variant], rounds: Int = 5, budget: Double = 0.12,
                        minCount: Int = 2_000, maxCount: Int = 200_000) async throws {
    for index in variants.indices {
        let warm = try await variants[index].run(2_000)
        variants[index].count = max(minCount, min(maxCount, Int(budget * 1e9 / max(warm, 1))))
    }
    for _ in 0..<rounds {
        for index in variants.indices {
            variants[index].samples.append(try await variants[index].run(variants[index].count))
        }
    }
}

func intRequests<Value: Sendable>(_ pager: Pager<Int, Value>, _ count: Int = distinctPages) -> [PagingRequest<Int>] {
    (0..<count).map { pager.request(.append, key: $0, params: PagingRequestParams(pageSize: itemsPerPage)) }
}

func bytesRequests(_ pager: PluginPager, _ count: Int = distinctPages) -> [PluginRequest] {
    (0..<count).map { pager.request(.append, key: PluginKey("\($0)"), params: PagingRequestParams(pageSize: itemsPerPage)) }
}

// MARK: - Row 1

func benchPagerRequests(_ report: Report) async throws {
    progress("row 1: Pager requests")
    let intSource = IntSource()
    let bytesSource = BytesSource()
    let int0 = Pager(source: intSource)
    let int0NoDedup = Pager(source: intSource, deduplication: .disabled)
    let int3 = Pager(source: intSource, interceptors: (0..<3).map { _ in PassThrough<Int, Int>() })
    let bytes0 = Pager(source: bytesSource)
    let bytes3 = Pager(source: bytesSource, interceptors: (0..<3).map { _ in PassThrough<PluginKey, PluginItem>() })

    let cPath = try compilePassThroughC()
    let cLibrary = try PluginLibrary.open(path: cPath)
    let c3 = Pager(source: bytesSource, interceptors: try (0..<3).map { _ in
        try cLibrary.makeInterceptor(id: "pass-through", sink: silentSink) })
    let c3Stats = Pager(source: bytesSource, interceptors: try (0..<3).map { _ in
        try cLibrary.makeInterceptor(id: "pass-through", sink: silentSink, limits: PluginLimits(recordsStats: true)) })
    var swift3: PluginPager?
    if let path = shippedPlugin("pass-through") {
        let library = try PluginLibrary.open(path: path)
        swift3 = Pager(source: bytesSource, interceptors: try (0..<3).map { _ in try library.makeInterceptor(sink: silentSink) })
    }
    let counting = try cLibrary.makeSource(id: "counting", sink: silentSink)
    let loadedSource = Pager(source: counting)
    let countingC3 = Pager(source: counting, interceptors: try (0..<3).map { _ in
        try cLibrary.makeInterceptor(id: "pass-through", sink: silentSink) })

    let intReq = intRequests(int0), bytesReq = bytesRequests(bytes0)
    let countingReq = (0..<distinctPages).map {
        loadedSource.request(.append, key: PluginKey("\($0)"), params: PagingRequestParams(pageSize: itemsPerPage))
    }
    var variants = [
        Variant("int0") { try await loadLoop(int0, intReq, count: $0) },
        Variant("int0nodedup") { try await loadLoop(int0NoDedup, intReq, count: $0) },
        Variant("int3") { try await loadLoop(int3, intReq, count: $0) },
        Variant("bytes0") { try await loadLoop(bytes0, bytesReq, count: $0) },
        Variant("bytes3") { try await loadLoop(bytes3, bytesReq, count: $0) },
        Variant("c3") { try await loadLoop(c3, bytesReq, count: $0) },
        Variant("c3stats") { try await loadLoop(c3Stats, bytesReq, count: $0) },
        Variant("source") { try await loadLoop(loadedSource, countingReq, count: $0) },
        Variant("sourceC3") { try await loadLoop(countingC3, countingReq, count: $0) },
    ]
    if let swift3 { variants.append(Variant("swift3") { try await loadLoop(swift3, bytesReq, count: $0) }) }
    try await measureInterleaved(&variants)
    func m(_ name: String) -> Double? { variants.first { $0.name == name }?.median }
    func n(_ name: String) -> Int { variants.first { $0.name == name }?.count ?? 0 }

    let int0m = m("int0")!, int3m = m("int3")!, b0 = m("bytes0")!, b3 = m("bytes3")!, c3m = m("c3")!
    report.add("1a", "Pager.load, in-memory sync source (Int items), 0 interceptors", formatNs(int0m) + "/req",
               notes: "original: 5.1 µs → \(fmt(5_100 / int0m, 2))×; with Deduplication.disabled \(formatNs(m("int0nodedup")!)); \(n("int0")) req/run")
    report.add("1b", "… 3 in-process Swift pass-through interceptors (Int)", formatNs(int3m) + "/req",
               notes: "+\(formatNs((int3m - int0m) / 3)) an interceptor; original, 3 logging: 71 µs")
    report.add("1c", "… 0 interceptors, byte items (PluginKey/PluginItem, the loaded pipelines' types)", formatNs(b0) + "/req",
               notes: "baseline of 1d–1f")
    report.add("1d", "… 3 in-process Swift pass-through (byte items)", formatNs(b3) + "/req",
               notes: "+\(formatNs((b3 - b0) / 3)) an interceptor")
    let cOK = c3m <= 1_000 && c3m / b3 <= 2
    report.add("1e", "… 3 pass-through loaded as C .so (cc -O2)", formatNs(c3m) + "/req",
               target: "≤ 1 µs, ≤ 2× 1d", verdict(cOK),
               "\(fmt(c3m / b3, 2))× in-process (1d); +\(formatNs((c3m - b0) / 3)) an interceptor")
    if !cOK { report.miss("1e (3 C .so interceptors, \(formatNs(c3m))/req): the loaded interceptors add only \(formatNs((c3m - b0) / 3)) each; the Pager itself costs \(formatNs(b0)) (1c), now specialized: async frames and copies of the large Request/Page values (LLVM merges their outlined copies into value-witness calls), and the deduplication registry (two hashes of the identity and a lock; without it 1a drops to \(formatNs(m("int0nodedup")!)))") }
    if let s3 = m("swift3") {
        let ok = s3 <= 1_000 && s3 / b3 <= 2
        report.add("1f", "… 3 pass-through loaded as Swift .so (libpass-through.so)", formatNs(s3) + "/req",
                   target: "≤ 1 µs, ≤ 2× 1d", verdict(ok),
                   "\(fmt(s3 / b3, 2))× in-process (1d), \(fmt(s3 / c3m, 2))× the C .so; +\(formatNs((s3 - b0) / 3)) an interceptor")
        if !ok { report.miss("1f (3 Swift .so interceptors, \(formatNs(s3))/req): as 1e, the Pager's own cost; a Swift plugin adds \(formatNs((s3 - b0) / 3)) each (PagingPluginKit copies the key chain into Swift arrays per call: the plugin may keep the request)") }
    } else {
        report.add("1f", "… 3 pass-through loaded as Swift .so", "—", target: "≤ 1 µs, ≤ 2× 1d", .notMeasured,
                   "libpass-through.so missing: run `swift build -c release` first")
    }
    let src = m("source")!, srcC3 = m("sourceC3")!
    report.add("1g", "… the source loaded as a C .so (\"counting\", 20 items built by fetch), 0 interceptors", formatNs(src) + "/req",
               notes: "\(fmt(src / b0, 1))× the in-memory source (1c): 20 fetch_add_item + fetch_complete calls, each a locked dictionary update")
    report.add("1h", "… loaded source + 3 loaded C pass-through (all-C pipeline)", formatNs(srcC3) + "/req",
               notes: "+\(formatNs((srcC3 - src) / 3)) an interceptor")
    let stats = m("c3stats")!
    report.add("1i", "… 1e with every call timed and counted (pager run --stats)", formatNs(stats) + "/req",
               notes: "+\(formatNs((stats - c3m) / 3)) a call measured (\(fmt(stats / c3m, 2))× 1e); not asked for, 1e is the cost: one branch a call")
}

/// `paging-bench --child profile int0|int3|bytes3|c3|swift3|cache1000`: 1,000,000 requests of one
/// variant, for `perf record` or `valgrind --tool=callgrind`.
func profileVariant(_ name: String) async throws {
    let count = Int(ProcessInfo.processInfo.environment["PROFILE_COUNT"] ?? "") ?? 1_000_000
    let bytesSource = BytesSource()
    let pager: Any
    switch name {
    case "int0", "int0nodedup":
        let p = Pager(source: IntSource(), deduplication: name == "int0" ? .inFlight : .disabled)
        print(try await loadLoop(p, intRequests(p), count: count))
        return
    case "int3":
        let p = Pager(source: IntSource(), interceptors: (0..<3).map { _ in PassThrough<Int, Int>() })
        print(try await loadLoop(p, intRequests(p), count: count))
        return
    case "manager":
        let manager = PaginationManager(source: FreshIntSource(), pageSize: itemsPerPage)
        await manager.load(.refresh)
        let start = nowNs()
        for _ in 0..<count / 20 { await manager.load(.append) }
        print(Double(nowNs() - start) / Double(count / 20))
        return
    case "cache1000":
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(3_600), maxEntries: 1_000)
        let p = Pager(source: IntSource(), interceptors: [cache])
        let requests = intRequests(p, 1_000)
        for request in requests { _ = try await p.load(request) }
        print(try await loadLoop(p, requests, count: count))
        return
    case "bytes3": pager = Pager(source: bytesSource, interceptors: (0..<3).map { _ in PassThrough<PluginKey, PluginItem>() })
    case "c3":
        let library = try PluginLibrary.open(path: try compilePassThroughC())
        pager = Pager(source: bytesSource, interceptors: try (0..<3).map { _ in try library.makeInterceptor(id: "pass-through", sink: silentSink) })
    case "swift3":
        let library = try PluginLibrary.open(path: shippedPlugin("pass-through")!)
        pager = Pager(source: bytesSource, interceptors: try (0..<3).map { _ in try library.makeInterceptor(sink: silentSink) })
    default: throw BenchError("unknown variant \(name)")
    }
    let p = pager as! PluginPager
    print(try await loadLoop(p, bytesRequests(p), count: count))
}

// MARK: - Row 2

func benchCacheHits(_ report: Report) async throws {
    progress("row 2: cache hits")
    let source = IntSource(pageCount: 10_000)
    var variants: [Variant] = []
    let sizes = [2, 100, 1_000, 10_000]
    for size in sizes {
        let cache = CacheInterceptor<Int, Int>(timeToLive: .seconds(3_600), maxEntries: max(size, 16))
        let pager = Pager(source: source, interceptors: [cache])
        let requests = intRequests(pager, size)
        for request in requests { _ = try await pager.load(request) } // fill: every key once
        precondition(cache.count == size)
        variants.append(Variant("pager\(size)") { try await loadLoop(pager, requests, count: $0) })
        variants.append(Variant("direct\(size)") { count in
            var values = 0
            var index = 0
            let start = nowNs()
            for _ in 0..<count {
                values &+= cache.cachedPage(for: requests[index])!.values.count
                index += 1
                if index == requests.count { index = 0 }
            }
            let elapsed = nowNs() - start
            precondition(values == count * itemsPerPage)
            return Double(elapsed) / Double(count)
        })
    }
    try await measureInterleaved(&variants)
    func m(_ name: String) -> Double { variants.first { $0.name == name }!.median }
    let base = m("pager2"), baseDirect = m("direct2")
    let worst = sizes.map { m("pager\($0)") }.max()!
    let flat = sizes.map { m("pager\($0)") / base }.max()!
    let originals = [2: "4.0 µs", 100: "13 µs", 1_000: "92 µs", 10_000: "—"]
    for size in sizes {
        let p = m("pager\(size)"), d = m("direct\(size)")
        let last = size == sizes.last!
        report.add(size == 2 ? "2" : "", "CacheInterceptor hit through Pager.load, \(size) entries (hits cycle all keys)", formatNs(p) + "/req",
                   target: size == 2 ? "≤ 1 µs, flat" : "", last ? verdict(worst <= 1_000 && flat <= 1.5) : .info,
                   "\(fmt(p / base, 2))× 2 entries; cachedPage(for:) alone \(formatNs(d)) (\(fmt(d / baseDirect, 2))×); original \(originals[size]!)"
                    + (last ? "; flat = max ≤ 1.5× the 2-entry figure" : ""))
    }
    if !(worst <= 1_000 && flat <= 1.5) {
        report.miss("2 (cache hit, \(formatNs(worst)) worst, flat at \(fmt(flat, 2))×): the Pager's own cost (1a) plus cachedPage(for:) at \(formatNs(baseDirect)), specialized: the lock, a clock read, the LRU's copies of its Optional entries, and the Page rebuilt for the request")
    }
}

// MARK: - Row 3

func benchLogging(_ report: Report) async throws {
    progress("row 3: logging off vs pass-through")
    let source = IntSource()
    let loggers: [any PagingInterceptor<Int, Int>] = (0..<3).map { _ in
        LoggingInterceptor<Int, Int>(minimumLevel: .off, sink: { _, _ in fatalError("logged with level off") }) }
    let passes: [any PagingInterceptor<Int, Int>] = (0..<3).map { _ in PassThrough<Int, Int>() }
    let logging = Pager(source: source, interceptors: loggers)
    let passing = Pager(source: source, interceptors: passes)
    let requests = intRequests(passing)
    /// `intercept(request:)` called directly through the existential, as the Pager calls it.
    func direct(_ interceptors: [any PagingInterceptor<Int, Int>], _ count: Int) async throws -> Double {
        var proceeded = 0
        var index = 0
        let start = nowNs()
        for i in 0..<count {
            if case .proceed = try await interceptors[i % 3].intercept(request: requests[index]) { proceeded += 1 }
            index += 1
            if index == requests.count { index = 0 }
        }
        let elapsed = nowNs() - start
        precondition(proceeded == count)
        return Double(elapsed) / Double(count)
    }
    var variants = [
        Variant("pass") { try await loadLoop(passing, requests, count: $0) },
        Variant("log") { try await loadLoop(logging, requests, count: $0) },
        Variant("passDirect") { try await direct(passes, $0) },
        Variant("logDirect") { try await direct(loggers, $0) },
    ]
    try await measureInterleaved(&variants, rounds: 7, maxCount: 2_000_000)
    func m(_ name: String) -> Double { variants.first { $0.name == name }!.median }
    let over = m("logDirect") - m("passDirect")
    let chainOver = (m("log") - m("pass")) / 3
    report.add("3", "LoggingInterceptor(.off) vs an in-process pass-through: `intercept(request:)` through `any PagingInterceptor`",
               "\(over >= 0 ? "+" : "")\(fmt(over, 1)) ns a call (\(fmt(m("logDirect"), 1)) vs \(fmt(m("passDirect"), 1)) ns)",
               target: "≤ 50 ns over", verdict(over <= 50),
               "in a Pager, 3 of each: \(formatNs(m("log"))) vs \(formatNs(m("pass"))) a request, \(fmt(chainOver, 1)) ns an interceptor (within the noise of a \(formatNs(m("pass"))) request)")
    if over > 50 { report.miss("3 (logging off): \(fmt(over)) ns over a pass-through") }
}
