import Foundation
import PagingHost
import Testing

/// An in-process source whose `fetch()` never returns holds the loading thread: no timeout or
/// cancel can reach it. A signal still ends `pager run`.
@Suite("A fetch() that never returns")
struct StuckFetchTests {
    /// The first signal cancels the load, which cannot end; 10 s later the run ends with
    /// 128 + the signal, saying why (it ran for ever, the first SIGTERM or SIGINT unheard).
    @Test(.timeLimit(.minutes(3)))
    func pagerRun_endsTenSecondsAfterASignal_sayingWhy() async throws {
        let folder = scratchFolder()
        try #"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "config": {"hang": true}}, "timeout_ms": 1000}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let run = try PagerProcess(["run", folder + "/m.json"])
        let said = await run.waitFor("this fetch never returns")
        let start = ContinuousClock.now
        let status = await run.stop(SIGTERM)
        let took = ContinuousClock.now - start
        #expect(said, "\(run.stderr)")
        #expect(status == 128 + SIGTERM, "\(run.stderr)")
        #expect(took >= .seconds(9))
        #expect(run.stderr.contains("run: stopped by SIGTERM; the load in flight did not end within 10 s of it (a plugin call that does not return"),
                "\(run.stderr)")
    }
}
