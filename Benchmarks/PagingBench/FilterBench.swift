// Row 10: the filter plugin (C, a page transform) in a loaded pipeline, against the same pipeline
// with the C pass-through, per item of the source's pages.
import Foundation
import Paging
import PagingHost

/// Writes a JSON Lines file of `count` repository items cycling through those of
/// Examples/GitHubRepos/fixture/repositories.json, with the language of every other one set to
/// "Swift" and of the others to "Go"; returns its path.
func writeRepositoryLines(count: Int) throws -> String {
    let text = try String(contentsOfFile: "\(repositoryRoot)/Examples/GitHubRepos/fixture/repositories.json", encoding: .utf8)
    let fixture = text.split(separator: "\n").filter { $0.hasPrefix("{") }.map { $0.hasSuffix(",") ? String($0.dropLast()) : String($0) }
    let language = #/"language": (null|"[^"]*")/#
    guard fixture.count > 1, fixture.allSatisfy({ $0.contains(language) }) else {
        throw BenchError("repositories.json: expected items with a language")
    }
    let lines = (0..<count).map { index in
        fixture[index % fixture.count].replacing(language, with: index % 2 == 0 ? #""language": "Swift""# : #""language": "Go""#)
    }
    let path = "\(scratch)/repositories.jsonl"
    try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// `pager.load` over `requests` (cycled) `count` times, each page holding `kept` of the source's
/// `itemsPerPage` items; ns a request.
func filteredLoop(_ pager: PluginPager, _ requests: [PluginRequest], kept: Int, count: Int) async throws -> Double {
    var values = 0
    var index = 0
    let start = nowNs()
    for _ in 0..<count {
        values &+= try await pager.load(requests[index]).values.count
        index += 1
        if index == requests.count { index = 0 }
    }
    let elapsed = nowNs() - start
    precondition(values == count * kept, "pages held \(values / max(count, 1)) values, expected \(kept)")
    return Double(elapsed) / Double(count)
}

func benchFilter(_ report: Report) async throws {
    progress("row 10: filter plugin vs C pass-through")
    guard let jsonlinesPath = shippedPlugin("jsonlines"), let filterPath = shippedPlugin("filter") else {
        report.add("10", "Loaded pipeline with the filter plugin", "—", target: "≤ 2× pass-through", .notMeasured,
                   "libjsonlines.so or libfilter.so missing: run `swift build -c release` first")
        return
    }
    let file = try writeRepositoryLines(count: distinctPages * itemsPerPage)
    let itemBytes = (try Data(contentsOf: URL(fileURLWithPath: file)).count) / (distinctPages * itemsPerPage) - 1
    let source = try PluginLibrary.open(path: jsonlinesPath).makeSource(config: .object([("path", .string(file))]), sink: silentSink)
    let pass = try PluginLibrary.open(path: try compilePassThroughC()).makeInterceptor(id: "pass-through", sink: silentSink)
    let filterLibrary = try PluginLibrary.open(path: filterPath)
    func filter(_ config: String) throws -> PluginPager {
        Pager(source: source, interceptors: [try filterLibrary.makeInterceptor(config: try JSONValue.parse(config), sink: silentSink)])
    }
    let half = #"{"where": [{"pointer": "/language", "equals": "Swift"}]"#
    let projection = #""fields": ["/id", "/full_name", "/stargazers_count", {"owner": "/owner/login"}]"#
    let pipelines: [(name: String, pager: PluginPager, kept: Int)] = [
        ("source", Pager(source: source), itemsPerPage),
        ("pass", Pager(source: source, interceptors: [pass]), itemsPerPage),
        ("all", try filter(#"{"where": [{"pointer": "/owner/login", "not_equals": ""}]}"#), itemsPerPage),
        ("half", try filter(half + "}"), itemsPerPage / 2),
        ("project", try filter(half + ", " + projection + "}"), itemsPerPage / 2),
    ]
    let requests = (0..<distinctPages).map {
        pipelines[0].pager.request(.append, key: PluginKey("\($0 * itemsPerPage)"), params: PagingRequestParams(pageSize: itemsPerPage))
    }
    var variants = pipelines.map { pipeline in
        Variant(pipeline.name) { try await filteredLoop(pipeline.pager, requests, kept: pipeline.kept, count: $0) }
    }
    try await measureInterleaved(&variants, rounds: 11)
    /// ns a source item.
    func m(_ name: String) -> Double { variants.first { $0.name == name }!.median / Double(itemsPerPage) }

    let pass0 = m("pass"), half0 = m("half"), project0 = m("project"), all0 = m("all")
    report.add("10a", "Loaded pipeline per source item: jsonlines (GitHub repository items, \(itemBytes) bytes, pages of \(itemsPerPage)) + the C pass-through",
               formatNs(pass0) + "/item",
               notes: "baseline of 10b–10c; the source alone \(formatNs(m("source")))/item")
    let halfOK = half0 / pass0 <= 2
    report.add("10b", "… + the filter plugin instead, keeping half (`/language` equals \"Swift\", a late key)", formatNs(half0) + "/item",
               target: "≤ 2× 10a", verdict(halfOK),
               "\(fmt(half0 / pass0, 2))× 10a; +\(formatNs(half0 - pass0)) an item; a condition keeping every item (the page goes on unchanged): \(formatNs(all0)) (\(fmt(all0 / pass0, 2))×)")
    let projectOK = project0 / pass0 <= 2
    report.add("10c", "… keeping half and projecting 4 fields (one nested)", formatNs(project0) + "/item",
               target: "≤ 2× 10a", verdict(projectOK),
               "\(fmt(project0 / pass0, 2))× 10a; +\(formatNs(project0 - half0)) an item over 10b")
    if !halfOK { report.miss("10b (filter keeping half, \(formatNs(half0))/item): \(fmt(half0 / pass0, 2))× the pass-through pipeline") }
    if !projectOK { report.miss("10c (filter with projection, \(formatNs(project0))/item): \(fmt(project0 / pass0, 2))× the pass-through pipeline") }
}
