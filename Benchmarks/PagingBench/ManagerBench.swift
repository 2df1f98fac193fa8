// Row 4 (PaginationManager appends) and row 8 (peak RSS with maxSize, in child processes).
import Foundation
import Paging

/// A source whose key chain never ends and whose every fetch builds its page (so memory that
/// is not released shows up in RSS).
struct FreshIntSource: PagingSource {
    let refreshKey = 0

    func keyChain(for key: Int) -> PagingKeyChain<Int> {
        PagingKeyChain(key: key, prevKey: key > 0 ? key - 1 : nil, nextKey: key + 1)
    }

    func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Int> {
        let base = request.key * itemsPerPage
        return Page(request: request, values: (0..<request.params.pageSize).map { base + $0 })
    }
}

// MARK: - Row 4

func benchManagerAppends(_ report: Report) async throws {
    progress("row 4: PaginationManager appends")
    let appends = 10_000, window = 1_000
    var firsts: [Double] = [], lasts: [Double] = [], alls: [Double] = []
    var times = [UInt64](repeating: 0, count: appends)
    for _ in 0..<6 { // the first run warms up and is dropped
        let manager = PaginationManager(source: FreshIntSource(), pageSize: itemsPerPage)
        await manager.load(.refresh)
        let start = nowNs()
        for index in 0..<appends {
            let t0 = nowNs()
            await manager.load(.append)
            times[index] = nowNs() - t0
        }
        let total = nowNs() - start
        let values = manager.output.values.count
        precondition(values == (appends + 1) * itemsPerPage, "the manager holds \(values) values")
        firsts.append(Double(times[..<window].reduce(0, +)) / Double(window))
        lasts.append(Double(times[(appends - window)...].reduce(0, +)) / Double(window))
        alls.append(Double(total) / Double(appends))
    }
    firsts.removeFirst(); lasts.removeFirst(); alls.removeFirst()
    let first = median(firsts), last = median(lasts), all = median(alls)
    let ok = first <= 2_000 && last <= 2_000 && last / first <= 1.5
    report.add("4", "PaginationManager: 10,000 × `await manager.load(.append)` of 20 items, no maxSize",
               "first 1,000: \(formatNs(first))/page; last 1,000: \(formatNs(last))/page",
               target: "≤ 2 µs, last/first ≤ 1.5", verdict(ok),
               "last/first \(fmt(last / first, 2)); mean of all \(formatNs(all)); original 45 µs growing to 120 µs")
    if !ok { report.miss("4 (manager append, \(formatNs(first)) → \(formatNs(last)) a page): Pager.load (~1 µs, as 1a), the manager's two locked steps (plan, apply) with the request's params and user info built each time, and PagedValues: each append path-copies O(log pages) nodes, each holding a Page; growth is O(log n) as designed (\(fmt(last / first, 2))×)") }
}

// MARK: - Row 8

/// In a child process: pages through `totalItems` with a manager (maxSize `maxSize`, 0 = none)
/// and prints "VmHWM at 100k, VmHWM at the end, VmRSS at 100k, VmRSS at the end" in KiB.
func rssChild(maxSize: Int, totalItems: Int) async {
    let manager = PaginationManager(source: FreshIntSource(), pageSize: itemsPerPage, maxSize: maxSize > 0 ? maxSize : nil)
    await manager.load(.refresh)
    var loaded = itemsPerPage
    var hwm100k = 0, rss100k = 0
    while loaded < totalItems {
        await manager.load(.append)
        loaded += itemsPerPage
        if loaded == 100_000 {
            hwm100k = procStatusKiB("VmHWM")
            rss100k = procStatusKiB("VmRSS")
        }
    }
    let held = manager.output.values.count
    print(hwm100k, procStatusKiB("VmHWM"), rss100k, procStatusKiB("VmRSS"), held)
}

func benchPeakRSS(_ report: Report) async throws {
    progress("row 8: peak RSS (child processes)")
    let exe = "/proc/self/exe"
    func child(_ maxSize: Int) throws -> [Int] {
        let result = try runProcess(exe, ["--child", "rss", "\(maxSize)", "1000000"])
        let numbers = result.stdout.split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
        guard result.code == 0, numbers.count == 5 else { throw BenchError("rss child failed: \(result.stdout)") }
        return numbers
    }
    var at100k: [Double] = [], at1m: [Double] = []
    var held = 0
    for _ in 0..<5 {
        let n = try child(2_000)
        at100k.append(Double(n[0]))
        at1m.append(Double(n[1]))
        held = n[4]
    }
    let unbounded = try child(0)
    let a = median(at100k), b = median(at1m)
    let ok = b - a <= max(1_024, a * 0.05)
    report.add("8", "Peak RSS (VmHWM), manager with maxSize 2,000 paging through 1,000,000 Int items (fresh process)",
               "\(formatKiB(Int(a))) at 100k; \(formatKiB(Int(b))) at 1M",
               target: "flat", verdict(ok),
               "+\(Int(b - a)) KiB from 100k to 1M (flat = ≤ 1 MiB or 5%); holds \(held) values at the end; without maxSize: \(formatKiB(unbounded[0])) → \(formatKiB(unbounded[1]))")
    if !ok { report.miss("8 (peak RSS): grows \(Int(b - a)) KiB from 100k to 1M items") }
}
