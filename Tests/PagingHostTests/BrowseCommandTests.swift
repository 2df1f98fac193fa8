import Foundation
import Testing

/// `pager browse` in a real pseudo-terminal, through script(1).
@Suite("pager browse")
struct BrowseCommandTests {
    let pager = pagerCommand

    func manifest(items: Int, maxSize: Int? = nil) throws -> String {
        let folder = scratchFolder()
        writeJSONLines(count: items, to: folder + "/data.jsonl")
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 10\#(maxSize.map { #", "max_size": \#($0)"# } ?? "")}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return folder + "/m.json"
    }

    /// Runs `command` in a pseudo-terminal of 12 rows, typing `keys` after it starts.
    func inTerminal(_ command: String, keys: [String]) async throws -> (code: Int32, screen: String) {
        let typing = keys.map { "sleep 0.6; printf '\($0)'" }.joined(separator: "; ")
        let result = try await run("/bin/sh", ["-c", "(\(typing); sleep 2) | script -qfec \"stty rows 12 cols 80; \(command)\" /dev/null"])
        return (result.code, result.stdout)
    }

    @Test func scrollsLoadsMoreAtTheEnd_andQuitsCleanly() async throws {
        let (code, screen) = try await inTerminal("\(pager) browse \(try manifest(items: 35))", keys: ["j", "G", "G", "G", "G", "q"])
        #expect(code == 0)
        #expect(screen.contains("1. {\"n\":0}"))
        #expect(screen.contains("35/35"), "the end of the list loaded as the cursor reached it")
        #expect(screen.contains("end of data"))
        let enter = screen.range(of: "\u{1B}[?1049h")
        let leave = screen.range(of: "\u{1B}[?1049l", options: .backwards)
        #expect(enter != nil && leave != nil && enter!.lowerBound < leave!.lowerBound, "the terminal is restored on exit")
    }

    @Test func withMaxSize_theCursorStaysOnItsItem_asPagesAreDropped() async throws {
        let tens = Array(repeating: String(repeating: "j", count: 10), count: 4)
        // The first, empty, "key" gives the first page time to arrive.
        let (code, screen) = try await inTerminal("\(pager) browse \(try manifest(items: 200, maxSize: 40))", keys: [""] + tens + ["q"])
        #expect(code == 0)
        // The last frame's highlighted line (before its status line, also in reverse video) is
        // the item 40 rows down from the first, whatever its index after the drops.
        let parts = screen.components(separatedBy: "\u{1B}[7m")
        let highlighted = parts.count >= 2 ? parts[parts.count - 2] : ""
        #expect(highlighted.contains(#"{"n":40}"#), "\(highlighted.prefix(80))")
    }

    @Test func ctrlC_quitsAndRestoresTheTerminal() async throws {
        let (code, screen) = try await inTerminal("\(pager) browse \(try manifest(items: 5))", keys: ["\\003"])
        #expect(code == 0)
        #expect(screen.contains("\u{1B}[?1049l"))
        #expect(screen.contains("\u{1B}[?25h"), "the cursor is shown again")
    }

    @Test func sigterm_restoresTheTerminal() async throws {
        let command = "sh -c '(sleep 1; kill -TERM $$) & exec \(pager) browse \(try manifest(items: 5))'"
        let result = try await run("/bin/sh", ["-c", "sleep 3 | script -qfec \"stty rows 12 cols 80; \(command)\" /dev/null"])
        #expect(result.stdout.contains("\u{1B}[?1049h"))
        #expect(result.stdout.contains("\u{1B}[?1049l"))
    }

    @Test func withoutATerminal_itExitsWith2() async throws {
        let result = try await run(pager, ["browse", try manifest(items: 5)], input: "q")
        #expect(result.code == 2)
        #expect(result.stderr.contains("not a terminal"))
    }
}
