import Foundation
import Paging
import PagingHost
import Testing

/// Inputs a hostile manifest or file system can give, past the bad-manifest corpus: special
/// files as data, NUL characters where the host hands out C strings.
@Suite("Hostile inputs")
struct HostileInputTests {
    /// `pager run` on a data path that is not a regular file ends at once (no read of it starts:
    /// a FIFO without a writer blocks a read for ever, /dev/zero never ends) with one line
    /// naming the path and what it is.
    @Test(arguments: [("fifo", "a FIFO (named pipe)"), ("/dev/zero", "a character device")])
    func pagerRun_onASpecialFileAsData_exits2_atOnce_namingIt(_ special: (path: String, kind: String)) async throws {
        let folder = scratchFolder()
        var data = special.path
        if data == "fifo" {
            data = folder + "/data.fifo"
            #expect(mkfifo(data, 0o600) == 0)
        }
        let manifest = folder + "/special.json"
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "\#(data)"}}}"#.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerBinary, ["run", manifest, "--refresh"], deadline: .seconds(20))
        #expect(!result.timedOut, "pager run did not end")
        #expect(result.code == 2, "\(result.stderr)")
        #expect(result.elapsed < .seconds(10))
        #expect(result.stdout.isEmpty)
        #expect(result.stderr.filter { $0 == "\n" }.count == 1, "\(result.stderr)")
        #expect(result.stderr.contains("config `path` '\(data)' is \(special.kind), not a regular file"), "\(result.stderr)")
    }

    /// A config string with U+0000 reaching config_string (past the manifest's check, as
    /// `pager check --config` or the API can send it) gives the plugin NULL, never the string cut
    /// at the NUL, and the host logs why against the plugin.
    @Test func configString_withANUL_isNULL_andTheHostSaysWhy() throws {
        let log = LogRecorder()
        let library = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
        #expect {
            try library.makeSource(config: .object([("path", .string("/etc/passwd\u{0}.jsonl"))]), sink: log.sink)
        } throws: { error in
            "\(error)".contains("config `path` (string) is required")
        }
        #expect(log.contains(#"config_string("path"): the value holds a NUL character (U+0000)"#), "\(log.messages)")
    }

    /// Only strings a plugin reads as C strings are refused: a nested one reaches it as JSON text,
    /// where the NUL is an escape (\u0000) and nothing is cut.
    @Test func aNULInANestedConfigValue_isAccepted_asJSONText() throws {
        let manifest = try Manifest.parse(Array(#"""
            {"source": {"plugin": "http", "config": {"url": "http://127.0.0.1/{key}", "headers": {"X-Note": "a\u0000b"}}}}
            """#.utf8), file: "nested.json")
        guard case .object(let config) = manifest.source.config else { Issue.record("no config"); return }
        #expect(JSONValue.object(config).jsonText.contains(#""a\u0000b""#))
    }
}
