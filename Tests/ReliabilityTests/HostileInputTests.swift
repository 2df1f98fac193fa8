import Foundation
import Paging
import PagingHost
import Testing

/// Inputs a hostile manifest or file system can give, past the bad-manifest corpus.
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
}
