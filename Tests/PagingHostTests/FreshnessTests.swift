import Foundation
import LoopbackHTTP
import Paging
import Testing

/// The sqlite-store's freshness policies, each run a separate `pager` process against a loopback
/// server whose data changes between runs and which can be made to fail.
@Suite("Freshness of stored pages")
struct FreshnessTests {
    let pager = pagerCommand

    /// What the server answers: one page of three items tagged with `version`, or a 500; or,
    /// while `holding`, nothing until ``release()``.
    final class Upstream: Sendable {
        let state = Locked((version: 1, failing: false, holding: false))
        let server: LoopbackHTTPServer
        private let held = DispatchSemaphore(value: 0)

        init() throws {
            let (state, held) = (self.state, self.held)
            server = try LoopbackHTTPServer { _ in
                if state.withLock({ $0.holding }) { _ = held.wait(timeout: .now() + 120) }
                let (version, failing) = state.withLock { ($0.version, $0.failing) }
                if failing { return .json(#"{"message":"down"}"#, status: 500) }
                return .json("[" + (0..<3).map { #"{"v":\#(version),"n":\#($0)}"# }.joined(separator: ",") + "]")
            }
            server.start()
        }

        func set(version: Int? = nil, failing: Bool) {
            state.withLock {
                if let version { $0.version = version }
                $0.failing = failing
            }
        }

        /// Requests from now on get no answer until ``release()``.
        func hold() {
            state.withLock { $0.holding = true }
        }

        /// Answers the requests held, and those to come.
        func release() {
            state.withLock { $0.holding = false }
            for _ in 0..<server.requestCount { held.signal() }
        }
    }

    /// A manifest of the http source (one page, the end of the data) behind the store with
    /// `storeConfig` (JSON members after path and namespace); `sourceConfig` is JSON members
    /// after the source's own.
    func manifest(_ upstream: Upstream, _ storeConfig: String, sourceConfig: String = "") throws -> String {
        let folder = scratchFolder()
        let path = folder + "/m.json"
        try """
        {"source": {"plugin": "http", "config": {"url": "\(upstream.server.baseURL)/items?per_page={pageSize}",
                                                  "items": "", "pagination": {"type": "offset"}\(sourceConfig)}},
         "interceptors": [{"plugin": "sqlite-store", "config": {"path": "store.db", "namespace": "n"\(storeConfig)}}],
         "page_size": 10}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func versions(_ output: String) -> Set<String> {
        Set(output.split(separator: "\n").compactMap { $0.split(separator: ",").first.map(String.init) })
    }

    @Test func cacheFirst_servesAFreshPage_andLoadsAStaleOneAgain() async throws {
        let upstream = try Upstream()
        defer { upstream.server.stop() }
        let forever = try manifest(upstream, "")
        #expect(try await run(pager, ["run", forever]).code == 0)
        upstream.set(version: 2, failing: false)
        #expect(versions(try await run(pager, ["run", forever]).stdout) == [#"{"v":1"#], "without max_age, stored pages stay fresh")
        #expect(upstream.server.requestCount == 1)

        let stale = try manifest(upstream, #", "policy": "cache-first", "max_age_seconds": 0"#)
        #expect(try await run(pager, ["run", stale]).code == 0)
        upstream.set(version: 3, failing: false)
        let again = try await run(pager, ["run", stale])
        #expect(versions(again.stdout) == [#"{"v":3"#], "a page older than max_age is loaded again")
        #expect(upstream.server.requestCount == 3)
    }

    @Test func networkFirst_loadsEveryTime_andFallsBackToTheStoredPageSayingSo() async throws {
        let upstream = try Upstream()
        defer { upstream.server.stop() }
        let path = try manifest(upstream, #", "policy": "network-first""#)
        #expect(try await run(pager, ["run", path]).code == 0)
        upstream.set(version: 2, failing: false)
        #expect(versions(try await run(pager, ["run", path]).stdout) == [#"{"v":2"#], "the network answers first")

        upstream.set(failing: true)
        let down = try await run(pager, ["run", path])
        #expect(down.code == 0, "\(down.stderr)")
        #expect(versions(down.stdout) == [#"{"v":2"#], "the stored page answers when the network fails")
        #expect(down.stderr.contains("[warning] sqlite-store: the load failed ("), "\(down.stderr)")
        #expect(down.stderr.contains("answered with the page this plugin holds"))
        #expect(upstream.server.requestCount == 3)
    }

    @Test func staleWhileRevalidate_servesTheStoredPageAtOnce_andStoresTheFreshOne() async throws {
        let (upstream, path) = try await storedPage()
        defer { upstream.server.stop() }
        upstream.set(version: 2, failing: false)
        let stale = try await run(pager, ["run", path])
        #expect(versions(stale.stdout) == [#"{"v":1"#], "the stored page answers at once")
        #expect(upstream.server.requestCount == 2, "and is loaded again in the background")
        upstream.set(failing: true)
        let next = try await run(pager, ["run", path])
        #expect(versions(next.stdout) == [#"{"v":2"#], "the fresh page was stored")
    }

    /// A stale page's load in the background that fails is said once, as a warning naming the
    /// store (no caller waits for that load: it was said nowhere but in --stats), and the run
    /// goes on with the stale page.
    @Test func staleWhileRevalidate_aFailedReload_isSaid() async throws {
        let (upstream, path) = try await storedPage()
        defer { upstream.server.stop() }
        upstream.set(version: 2, failing: true)
        let down = try await run(pager, ["run", path])
        #expect(down.code == 0, "\(down.stderr)")
        #expect(versions(down.stdout) == [#"{"v":1"#], "the stored page answers")
        #expect(down.stderr.contains("[warning] sqlite-store: the stale page it answered could not be loaded again ("), "\(down.stderr)")
        #expect(down.stderr.contains("500"), "the failure is named: \(down.stderr)")
        #expect(upstream.server.requestCount == 2)
    }

    /// A page the store holds under stale-while-revalidate (loads time out after 10 minutes),
    /// and its upstream holding its answers from now on: the page's load in the background
    /// waits until ``Upstream/release()``.
    func storedPageWithTheUpstreamHeld() async throws -> (Upstream, path: String) {
        let (upstream, path) = try await storedPage(sourceConfig: #", "timeout_ms": 600000"#)
        upstream.hold()
        return (upstream, path)
    }

    /// A page the store holds under stale-while-revalidate, stored by a first `pager run`
    /// (`sourceConfig`: JSON members after the source's own).
    func storedPage(sourceConfig: String = "") async throws -> (Upstream, path: String) {
        let upstream = try Upstream()
        let path = try manifest(upstream, #", "policy": "stale-while-revalidate""#, sourceConfig: sourceConfig)
        #expect(try await run(pager, ["run", path]).code == 0)
        return (upstream, path)
    }

    /// Interrupted while it waits for a stale page's load in the background, `pager run` cancels
    /// it and ends with 128 + the signal (it waited for the load's timeout, signals or not).
    /// (With the default load timeout of 30 s, a machine stalled that long ended the run, exit
    /// 0, before the signal came.)
    @Test func staleWhileRevalidate_aSignalWhileTheFreshPageLoads_endsTheRun() async throws {
        let (upstream, path) = try await storedPageWithTheUpstreamHeld()
        defer {
            upstream.release()
            upstream.server.stop()
        }
        let run = try PagerProcess(["run", path])
        #expect(await run.waitFor("3 items in 1 page"), "\(run.stderr)")
        #expect(await eventually { upstream.server.requestCount == 2 }, "the page is loaded again in the background")
        let start = ContinuousClock.now
        #expect(await run.stop(SIGINT) == 128 + SIGINT, "\(run.stderr)")
        #expect(run.stderr.contains("stopped by SIGINT"), "\(run.stderr)")
        #expect(versions(run.stdout) == [#"{"v":1"#], "the stored page answered at once")
        // Done, not waiting for the load's timeout.
        #expect(ContinuousClock.now - start < .seconds(60))
    }

    /// `pager serve` stopped while a stale page it answered is loaded again in the background
    /// says so, and ends once another signal, or its request timeout, cancels the load (after
    /// "finishing 0 requests" it waited without a word for the load's whole timeout, signals
    /// unheard).
    @Test(.timeLimit(.minutes(3)), arguments: [true, false])
    func serve_stoppedWhileAStalePageLoadsAgain_saysSo_andEnds(secondSignal: Bool) async throws {
        let (upstream, path) = try await storedPageWithTheUpstreamHeld()
        defer {
            upstream.release()
            upstream.server.stop()
        }
        let server = try await ServeProcess([path] + (secondSignal ? [] : ["--request-timeout-ms", "1000"]))
        let first = try server.get("/pages")
        #expect(first.status == 200 && first.text.contains(#"{"v":1,"n":0}"#), "the stored page answers at once: \(first.text)")
        #expect(await eventually { upstream.server.requestCount == 2 }, "the page is loaded again in the background")
        let start = ContinuousClock.now
        kill(server.pid, SIGTERM)
        #expect(await server.waitFor("letting 1 background revalidation end"), "\(server.stderr)")
        #expect(await server.stop(secondSignal ? SIGTERM : 0) == 0, "\(server.stderr)")
        #expect(server.stderr.contains("pager serve: stopped"), "\(server.stderr)")
        let why = secondSignal ? "SIGTERM" : "still running after 1.0 seconds"
        #expect(server.stderr.contains("pager serve: \(why): cancelling the background revalidations"), "\(server.stderr)")
        #expect(ContinuousClock.now - start < .seconds(60), "done, not waiting for the load's timeout")
    }

    /// A stale page's load in the background stuck inside a fetch() that does not return:
    /// `pager serve`, stopped, cancels it at its request timeout and exits a second later
    /// without it (it waited for the call, which the cancel does not end, past its bound).
    @Test(.timeLimit(.minutes(3)))
    func serve_stoppedWhileAStalePageLoadIsStuckInFetch_exitsWithoutIt() async throws {
        let folder = scratchFolder(), wake = folder + "/wake", path = folder + "/m.json"
        #expect(FileManager.default.createFile(atPath: wake, contents: nil))
        try """
        {"source": {"plugin": "\(try await fixturePlugin("blocking_fetch"))", "config": {"sleep_ms": 600000, "until_path": "\(wake)"}},
         "interceptors": [{"plugin": "sqlite-store", "config": {"path": "store.db", "namespace": "n", "policy": "stale-while-revalidate"}}],
         "page_size": 10, "timeout_ms": 600000}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(try await run(pager, ["run", path]).code == 0)
        try FileManager.default.removeItem(atPath: wake)
        let server = try await ServeProcess([path, "--request-timeout-ms", "1000"])
        defer { FileManager.default.createFile(atPath: wake, contents: nil) }
        let first = try server.get("/pages")
        #expect(first.status == 200 && first.text.contains(#"{"woke":true}"#), "the stored page answers at once: \(first.text)")
        #expect(await server.waitFor("blocking-fetch: asleep"), "\(server.stderr)")
        let start = ContinuousClock.now
        kill(server.pid, SIGTERM)
        #expect(await server.stop(0) == 0, "\(server.stderr)")
        for said in ["letting 1 background revalidation end", "still running after 1.0 seconds: cancelling the background revalidations",
                     "1 background revalidation still in a plugin call a second after the cancel; exiting without it", "pager serve: stopped"] {
            #expect(server.stderr.contains(said), "\(said): \(server.stderr)")
        }
        #expect(ContinuousClock.now - start < .seconds(60), "done, not waiting for the call")
    }

    /// max_age_seconds 0 means every stored page is stale: one stored by a host whose clock is
    /// an hour ahead (or read in the millisecond it was stored) counted as fresh. With a max age
    /// too, a page stored an hour in the future is stale (it stayed fresh for the hour besides
    /// its max age: found by a probe).
    @Test(arguments: [0, 3600])
    func aPageStoredInTheFuture_isStale(maxAge: Int) async throws {
        let upstream = try Upstream()
        defer { upstream.server.stop() }
        let path = try manifest(upstream, #", "policy": "cache-first", "max_age_seconds": \#(maxAge)"#)
        #expect(try await run(pager, ["run", path]).code == 0)
        let database = URL(fileURLWithPath: path).deletingLastPathComponent().path + "/store.db"
        let script = "import sqlite3, sys\ndb = sqlite3.connect(sys.argv[1])\ndb.execute('UPDATE pages SET stored_at = stored_at + 3600000')\ndb.commit()\n"
        let moved = try await run("/usr/bin/env", ["python3", "-c", script, database])
        #expect(moved.code == 0, "\(moved.stderr)")
        upstream.set(version: 2, failing: false)
        #expect(versions(try await run(pager, ["run", path]).stdout) == [#"{"v":2"#], "the stored page was loaded again")
        #expect(upstream.server.requestCount == 2)
    }

    @Test func badPolicies_areRefusedNamingTheKey() async throws {
        let upstream = try Upstream()
        defer { upstream.server.stop() }
        for (config, expected) in [
            (#", "policy": "fastest""#, "config `policy` must be"),
            (#", "policy": 3"#, "config `policy` must be a string"),
            (#", "max_age_seconds": -1"#, "config `max_age_seconds` must be a whole number of seconds in 0...9223372036854775 (INT64_MAX milliseconds)"),
            // Found by a probe: said ">= 0" of a value that is.
            (#", "max_age_seconds": 9223372036854775806"#, "must be a whole number of seconds in 0...9223372036854775 "),
            (#", "max_age_seconds": "1h""#, "config `max_age_seconds` must be a whole number"),
        ] {
            let result = try await run(pager, ["run", try manifest(upstream, config)])
            #expect(result.code == 2, "\(config): \(result.stderr)")
            #expect(result.stderr.contains(expected), "\(config): \(result.stderr)")
        }
    }
}
