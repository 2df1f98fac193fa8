// Row 13: `pager run` with the http source against the floor (a plain C libcurl loop) and a
// plain Python urllib loop, each a fresh process, on one loopback server, interleaved; plus
// pager's peak RSS and its cold start (a one-page run). Row 13b: a long walk on the same server,
// whose later pages must cost the CPU its first ones do (what a page costs must not grow with
// the pages before it).
import Foundation
import LoopbackHTTP

/// A child's wall time (spawn to exit), CPU time (user and system) and exit status, with wait4.
private func measured(_ program: String, _ arguments: [String]) throws -> (ns: UInt64, cpuNs: Double, status: Int32) {
    var pid: pid_t = 0
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
    let argv = ([program] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    let start = nowNs()
    let rc = posix_spawnp(&pid, program, &actions, nil, argv, environ)
    guard rc == 0 else { throw BenchError("cannot start \(program): errno \(rc)") }
    var status: Int32 = 0
    var usage = rusage()
    guard wait4(pid, &status, 0, &usage) == pid else { throw BenchError("wait4 failed for \(program)") }
    func ns(_ time: timeval) -> Double { Double(time.tv_sec) * 1e9 + Double(time.tv_usec) * 1e3 }
    let cpu = ns(usage.ru_utime) + ns(usage.ru_stime)
    return (nowNs() - start, cpu, status)
}

func benchHTTPFloor(_ report: Report) async throws {
    progress("row 13: pager run with the http source vs a libcurl loop and a urllib loop")
    let pages = 200, longWalk = 5000
    // GitHub-style repositories, 100 a page, Link pagination; bodies built once.
    let bodies: [[UInt8]] = (1...pages).map { page in
        let items = (0..<100).map { i -> String in
            let id = (page - 1) * 100 + i
            return #"{"id":\#(id),"name":"repo-\#(id)","full_name":"owner\#(id % 17)/repo-\#(id)","owner":{"login":"owner\#(id % 17)","id":\#(id % 17)},"private":false,"description":"A repository about paging number \#(id)","stargazers_count":\#(100_000 - id),"language":"Swift","topics":["paging","swift"]}"#
        }
        return Array(("{\"total_count\":\(pages * 100),\"items\":[" + items.joined(separator: ",") + "]}").utf8)
    }
    // /repos has the 200 pages; /long the long walk's (row 13b), their bodies again and again.
    let server = try LoopbackHTTPServer { request in
        let page = Int(request.query["page"] ?? "") ?? 1
        let path = request.path.hasPrefix("/long") ? "/long" : "/repos"
        let last = path == "/long" ? longWalk : pages
        guard page >= 1, page <= last else { return .json(#"{"items":[]}"#) }
        let next = page < last ? [("Link", "<\(path)?page=\(page + 1)&per_page=100>; rel=\"next\"")] : []
        return .json(bytes: bodies[(page - 1) % pages], headers: next)
    }
    server.start()
    defer { server.stop() }

    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().path
    let curlLoop = scratch + "/curl_loop"
    let compiled = try runProcess("/usr/bin/env", ["cc", "-O2", "-o", curlLoop, root + "/floor/curl_loop.c", "-lcurl"])
    guard compiled.code == 0 else { throw BenchError("cc failed on curl_loop.c (is libcurl4-openssl-dev installed?)") }
    let peakRSS = scratch + "/peak_rss"
    guard try runProcess("/usr/bin/env", ["cc", "-O2", "-o", peakRSS, root + "/floor/peak_rss.c"]).code == 0 else {
        throw BenchError("cc failed on peak_rss.c")
    }
    let manifest = scratch + "/floor.json"
    try """
        {"source": {"plugin": "\(productsFolder)/libhttp.so",
                    "config": {"url": "\(server.baseURL)/repos?page=1&per_page={pageSize}", "items": "/items",
                               "pagination": {"type": "link"}}},
         "page_size": 100}
        """.write(toFile: manifest, atomically: true, encoding: .utf8)
    let longManifest = scratch + "/floor-long.json"
    try String(contentsOfFile: manifest, encoding: .utf8).replacingOccurrences(of: "/repos?", with: "/long?")
        .write(toFile: longManifest, atomically: true, encoding: .utf8)
    let pager = productsFolder + "/pager"
    let pagerArgs = ["run", manifest, "--refresh", "--append", "\(pages - 1)"]
    let script = root + "/floor/urllib_loop.py"
    // The interpreter itself: `python3` on PATH may be a shim (pyenv's is a shell script that
    // costs ~90 ms a start), which would time the shim, not urllib.
    let resolved = try runProcess("/usr/bin/env", ["python3", "-c", "import sys; print(sys.executable)"])
    let python = resolved.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    guard resolved.code == 0, python.hasPrefix("/") else { throw BenchError("cannot find the python3 interpreter") }

    // Warm up each (page cache, the server's connection threads), then 7 interleaved rounds.
    _ = try measured(pager, pagerArgs)
    _ = try measured(curlLoop, [server.baseURL, "\(pages)"])
    _ = try measured(python, [script, server.baseURL, "\(pages)"])
    var pagerNs: [Double] = [], curlNs: [Double] = [], pythonNs: [Double] = [], coldNs: [Double] = []
    var coldCPU: [Double] = []
    for _ in 0..<7 {
        let run = try measured(pager, pagerArgs)
        guard run.status == 0 else { throw BenchError("pager run failed (status \(run.status))") }
        pagerNs.append(Double(run.ns))
        let curl = try measured(curlLoop, [server.baseURL, "\(pages)"])
        guard curl.status == 0 else { throw BenchError("the curl loop failed") }
        curlNs.append(Double(curl.ns))
        let urllib = try measured(python, [script, server.baseURL, "\(pages)"])
        guard urllib.status == 0 else { throw BenchError("the urllib loop failed") }
        pythonNs.append(Double(urllib.ns))
        let cold = try measured(pager, ["run", manifest, "--refresh"])
        coldNs.append(Double(cold.ns))
        coldCPU.append(cold.cpuNs)
    }
    // The peak RSS of 3 more runs, each measured by peak_rss.c (not from this process: see there).
    let peak = try (0..<3).map { _ in
        let measured = try runProcess(peakRSS, [pager] + pagerArgs)
        guard measured.code == 0, let kib = Int(measured.stdout.trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw BenchError("peak_rss of pager run failed (status \(measured.code))")
        }
        return kib
    }.max() ?? 0
    let p = median(pagerNs), c = median(curlNs), u = median(pythonNs), cold = median(coldNs)
    let ok = p <= 2 * c && u >= 3 * p && peak < 50 * 1024 && cold <= 60e6
    report.add("13", "`pager run` with the http source: 200 pages of 100 GitHub-style repositories, Link pagination, loopback, a fresh process each",
               formatNs(p), target: "≤ 2× libcurl loop, ≥ 3× faster than urllib, peak RSS < 50 MB, cold start ≤ 60 ms", verdict(ok),
               "plain C libcurl loop \(formatNs(c)) → \(fmt(p / c, 2))× of it; Python urllib loop \(formatNs(u)) → \(fmt(u / p, 1))× faster; pager's peak RSS \(formatKiB(peak)); cold start (a one-page run) \(formatNs(cold)); 7 interleaved rounds")
    if !ok { report.miss("13 (http floor): \(fmt(p / c, 2))× libcurl, \(fmt(u / p, 1))× urllib, RSS \(formatKiB(peak)), cold \(formatNs(cold))") }

    // 13b: the CPU a page of pages 1,000 to 5,000 of the long walk against a page of its first
    // 1,000 (runs of each length interleaved; a cost that grows with the pages before it shows
    // as the later pages costing more).
    let shortWalk = 1000
    func cpu(ofPages pages: Int) throws -> Double {
        let run = try measured(pager, ["run", longManifest, "--refresh", "--append", "\(pages - 1)"])
        guard run.status == 0 else { throw BenchError("pager run of \(pages) pages failed (status \(run.status))") }
        return run.cpuNs
    }
    var shortCPU: [Double] = [], longCPU: [Double] = []
    for _ in 0..<5 {
        shortCPU.append(try cpu(ofPages: shortWalk))
        longCPU.append(try cpu(ofPages: longWalk))
    }
    let early = (median(shortCPU) - median(coldCPU)) / Double(shortWalk - 1)
    let late = (median(longCPU) - median(shortCPU)) / Double(longWalk - shortWalk)
    let grows = late / early
    // 1.5: the noise of a CPU figure on a shared machine stays under it; a page's cost that grows
    // with the pages before it does not (the cycle check's copies made 5,000 pages take 1.7× the
    // CPU of a walk without them).
    report.add("13b", "… a long walk on the same server: CPU (user and system) a page of pages \(shortWalk)–\(longWalk)",
               formatNs(late), target: "≤ 1.5× a page of the first \(shortWalk)", verdict(grows <= 1.5),
               "\(fmt(grows, 2))× the \(formatNs(early)) a page of the first \(shortWalk) (past the first page); 5 runs of each, interleaved")
    if grows > 1.5 { report.miss("13b (long walk): a page of pages \(shortWalk)–\(longWalk) costs \(fmt(grows, 2))× one of the first \(shortWalk)") }
}
