import Foundation
import PagingHost
import Testing

/// Examples/CSource, the guide's C source: built with plain cc, run by the built `pager` from its
/// own manifest, validated, and checked by `pager check`.
@Suite("The C source example")
struct CSourceExampleTests {
    static let example = "\(repositoryRoot)/Examples/CSource"
    let log = LogRecorder()

    /// The example's library, compiled with the flags the guide gives (and -Werror).
    func library() async throws -> String { try await compileCPlugin("\(Self.example)/csv_source.c", name: "csv") }

    /// The example's manifest and data copied into a folder of their own, beside the library,
    /// which the manifest names "csv" (found as libcsv.so in the manifest's folder).
    func exampleFolder() async throws -> String {
        let folder = scratchFolder()
        for file in ["manifest.json", "people.csv"] {
            try FileManager.default.copyItem(atPath: "\(Self.example)/\(file)", toPath: "\(folder)/\(file)")
        }
        try FileManager.default.copyItem(atPath: try await library(), toPath: folder + "/libcsv.so")
        return folder
    }

    /// people.csv, row by row, as the source serves it.
    static let rows = [
        #"{"name":"Ada Lovelace","city":"London","note":"Wrote the first program"}"#,
        #"{"name":"Grace Hopper","city":"Arlington, VA","note":"Said \"it's easier to ask forgiveness\"\nthan permission"}"#,
        #"{"name":"Niklaus Wirth","city":"Zürich","note":""}"#,
        #"{"name":"Brian Kernighan","city":"Princeton, NJ","note":"printf(\"hello, world\\n\")"}"#,
        #"{"name":"Margaret Hamilton","city":"Boston","note":"Led Apollo's flight software"}"#,
        #"{"name":"Ken Thompson","city":"Berkeley, CA","note":"Co-created Unix"}"#,
        #"{"name":"Barbara Liskov","city":"Cambridge","note":"\tTab-led note"}"#,
    ]

    @Test func run_printsEveryRow_asOneJSONObject_threeAPage() async throws {
        let folder = try await exampleFolder()
        let result = try await run(pagerCommand, ["run", folder + "/manifest.json", "--refresh", "--append", "2", "--verbose"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == Self.rows.joined(separator: "\n") + "\n")
        #expect(result.stderr.contains("[debug] csv: 7 rows from \(folder)/people.csv\n"), "\(result.stderr)")
        #expect(result.stderr.contains("refresh: +3 items") && result.stderr.contains("append: +1 item, 7 in all"))
        #expect(result.stderr.contains("7 items in 3 pages; prepend: end reached, append: end reached"))
    }

    @Test func quotesCommasAndLineBreaksInAField_areEscaped_andDecodeToTheField() async throws {
        let result = try await run(pagerCommand, ["run", try await exampleFolder() + "/manifest.json"])
        let objects = try result.stdout.split(separator: "\n").map {
            try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String])
        }
        #expect(objects.count == 3)
        #expect(objects[1] == ["name": "Grace Hopper", "city": "Arlington, VA",
                               "note": "Said \"it's easier to ask forgiveness\"\nthan permission"])
        #expect(objects[2]["city"] == "Zürich")
    }

    @Test func crlfLineEnds_aByteOrderMark_andEmptyLines_areRead_likeTheSample() async throws {
        let folder = try await exampleFolder()
        let sample = try String(contentsOfFile: folder + "/people.csv", encoding: .utf8)
        let windows = "\u{FEFF}" + sample.replacingOccurrences(of: "\n", with: "\r\n") + "\r\n"
        try windows.write(toFile: folder + "/people.csv", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", folder + "/manifest.json", "--refresh", "--append", "5"])
        #expect(result.code == 0, "\(result.stderr)")
        // A line break inside a quoted field is kept as the file has it: CR LF.
        #expect(result.stdout == Self.rows.joined(separator: "\n").replacingOccurrences(of: #"\nthan"#, with: #"\u000d\nthan"#) + "\n")
    }

    /// Pages cut at the source's own page size, shorter than the manifest's, are marked
    /// PAGING_PAGE_SHORTENED: each is fetched once (unmarked, each short page was loaded again,
    /// and once more before the page after it: 9 fetches for these 4 pages).
    @Test func pagesCutAtItsOwnPageSize_areMarked_andEachIsFetchedOnce() async throws {
        let folder = try await exampleFolder()
        try #"{"source": {"plugin": "csv", "config": {"path": "people.csv", "page_size": 2}}, "page_size": 5}"#
            .write(toFile: folder + "/capped.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", folder + "/capped.json", "--refresh", "--append", "6", "--stats"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == Self.rows.joined(separator: "\n") + "\n")
        #expect(result.stderr.contains("libcsv.so): 4 calls, 4 completed"), "\(result.stderr)")
    }

    @Test func validate_reportsTheHealthCheck() async throws {
        let folder = try await exampleFolder()
        let result = try await run(pagerCommand, ["validate", folder + "/manifest.json"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.contains("source: csv 1.0.0 (\(folder)/libcsv.so, ABI \(PluginABIVersion.host)): healthy"), "\(result.stdout)")
    }

    @Test func health_failsOnceTheFileIsGone_sayingWhy() async throws {
        let file = scratchFolder() + "/people.csv"
        try FileManager.default.copyItem(atPath: "\(Self.example)/people.csv", toPath: file)
        let source = try PluginLibrary.open(path: try await library())
            .makeSource(config: .object([("path", .string(file))]), sink: log.sink)
        #expect(source.health() == .healthy)
        try FileManager.default.removeItem(atPath: file)
        #expect(source.health() == .unhealthy(.notFound))
        #expect(log.contains("cannot read \(file): No such file or directory"))
    }

    @Test(arguments: [
        (#"{}"#, "path is required: the CSV file to serve"),
        (#"{"path": 7}"#, "path: expected a string"),
        (#"{"path": "people.csv", "page_size": "3"}"#, "page_size: expected an integer in 1...100000"),
        (#"{"path": "people.csv", "page_size": 0}"#, "page_size: expected an integer in 1...100000"),
        (#"{"path": "missing.csv"}"#, "cannot read"),
    ])
    func aBadConfig_isRefused_namingTheKey(_ config: String, _ reason: String) async throws {
        let folder = try await exampleFolder()
        try #"{"source": {"plugin": "csv", "config": \#(config)}}"#.write(toFile: folder + "/bad.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["validate", folder + "/bad.json"])
        #expect(result.code == 2)
        #expect(result.stderr.contains("invalid config: \(reason)"), "\(result.stderr)")
    }

    @Test func aRowWithMoreFieldsThanTheHeader_isRefused() async throws {
        let folder = try await exampleFolder()
        try "a,b\n1,2\n1,2,3\n".write(toFile: folder + "/people.csv", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["validate", folder + "/manifest.json"])
        #expect(result.code == 2)
        #expect(result.stderr.contains("a row has more fields than the header"), "\(result.stderr)")
    }

    @Test func theGuide_quotesBothExamplesAsTheyAre() throws {
        let guide = try String(contentsOfFile: "\(repositoryRoot)/docs/PLUGIN-GUIDE.md", encoding: .utf8)
        let interceptor = try String(contentsOfFile: "\(repositoryRoot)/Examples/CInterceptor/guide_example.c", encoding: .utf8)
        let quotesInterceptor = guide.contains("```c\n" + interceptor + "```\n")
        #expect(quotesInterceptor, "the guide's interceptor differs from Examples/CInterceptor/guide_example.c")
        // The source's excerpts: every line of the section's C blocks, "..." aside, is in the file.
        let source = Set(try String(contentsOfFile: "\(Self.example)/csv_source.c", encoding: .utf8)
            .split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) })
        let section = try #require(guide.components(separatedBy: "## A source in C").dropFirst().first?
            .components(separatedBy: "\n## ").first)
        let blocks = section.components(separatedBy: "```c\n").dropFirst().map { $0.components(separatedBy: "```").first ?? "" }
        #expect(blocks.count == 3)
        let missing = blocks.joined().split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { $0 != "..." && !source.contains($0) }
        #expect(missing.isEmpty, "not in csv_source.c: \(missing)")
    }

    @Test func pagerCheck_passesEveryCheck() async throws {
        let config = #"{"path": "\#(Self.example)/people.csv", "page_size": 2}"#
        let result = try await run(pagerCommand, ["check", try await library(), "--config", config, "--cycles", "100", "--timeout-ms", "500"])
        #expect(result.code == 0, "\(result.stdout)\(result.stderr)")
        #expect(!result.stdout.contains(" FAIL "), "\(result.stdout)")
        #expect(result.stdout.contains("keys-chain             PASS") && result.stdout.contains("thread-safe            PASS"), "\(result.stdout)")
        #expect(result.stdout.split(separator: "\n").last?.hasPrefix("15 passed, 0 failed, 0 skipped") == true, "\(result.stdout)")
    }
}
