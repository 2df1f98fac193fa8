import Foundation
import Paging
import PagingHost
import Testing

/// Plugins run with `"isolation": "process"`: a crash, exit or hang in the child fails only
/// the loads in flight, with an error naming the plugin, its library and how the child ended;
/// the host goes on, restarts the child, and gives up after the restart limit.
@Suite("Process isolation", .serialized)
struct IsolationTests {
    let log = LogRecorder(limit: 10_000)

    init() {
        PluginIsolation.executable = pagerCommand
    }

    /// A pipeline over the crashy source, isolated, with `config`.
    func pipeline(_ config: String, retries: Int = 0, timeoutMs: Int = 30_000) async throws -> Pipeline {
        let folder = scratchFolder()
        let retry = retries > 0 ? #", "retry": {"max_retries": \#(retries), "initial_backoff_ms": 1, "max_backoff_ms": 5, "jitter": 0}"# : ""
        let text = #"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "isolation": "process", "config": \#(config)}, "#
            + #""page_size": 10, "timeout_ms": \#(timeoutMs)\#(retry)}"#
        let manifest = try Manifest.parse(Array(text.utf8), file: folder + "/m.json")
        return try Pipeline(manifest: manifest, sink: log.sink)
    }

    /// Loads `count` pages in order, from the refresh key on; their items' numbers.
    func pageThrough(_ pipeline: Pipeline, pages count: Int) async throws -> [Int] {
        let pager = pipeline.pager
        var numbers: [Int] = []
        var page = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
        numbers += lineNumbers(page.values)
        for _ in 1..<count {
            guard let next = page.nextKey else { break }
            page = try await pager.load(pager.request(.append, key: next, params: pipeline.requestParams))
            numbers += lineNumbers(page.values)
        }
        return numbers
    }

    @Test(.timeLimit(.minutes(3)))
    func segfaultEveryThirdFetch_everyPageArrives_withRetries() async throws {
        // 300 pages of 10 items; a crash on every third fetch (a child started again each
        // time, ~0.1 s on a quiet machine), each load retried.
        let pipeline = try await pipeline(#"{"crash_every": 3, "count": 3000}"#, retries: 5)
        let numbers = try await pageThrough(pipeline, pages: 300)
        #expect(numbers == Array(0..<3_000))
        let crashes = log.messages.filter { $0.contains("crashed (SIGSEGV)") }
        #expect(crashes.count >= 100, "\(crashes.count) crashes reported")
    }

    /// A child that crashes while a process it forked (a plain one, or a daemon in a session of
    /// its own) holds its socket open is seen to crash at once, and the next load restarts it:
    /// the crash waited for the call's timeout and was said to be a hang, and after a daemon's,
    /// the child was never restarted (every load timed out). The daemon of the child that
    /// crashed ends with it (it was left to init).
    @Test(.timeLimit(.minutes(3)), arguments: [false, true])
    func aCrashWhileAForkedProcessHoldsTheSocket_isSeenAtOnce_andTheChildRestarts(daemon: Bool) async throws {
        let pidFile = scratchFolder() + "/daemon.pid"
        // Each child starts a daemon; the crashed one's is killed here (it held this process's
        // output open, and `swift test` waited for it).
        let daemons = Locked<[Int32]>([])
        func noteDaemon() {
            if let pid = (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) {
                daemons.withLock { $0.append(pid) }
            }
        }
        defer {
            noteDaemon()
            for pid in daemons.withLock({ $0 }) { kill(pid, SIGKILL) }
        }
        let pipeline = try await pipeline(daemon ? #"{"daemon_pid_file": "\#(pidFile)", "crash_every": 2}"# : #"{"fork_sleeper": true, "crash_every": 2}"#,
                                    timeoutMs: 30_000)
        let pager = pipeline.pager
        let start = ContinuousClock.now
        let first = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
        if daemon { #expect(await waitUntil { FileManager.default.fileExists(atPath: pidFile) }) }
        noteDaemon()
        do {
            _ = try await pager.load(pager.request(.append, key: try #require(first.nextKey), params: pipeline.requestParams))
            Issue.record("the second fetch did not crash")
        } catch let error as PluginError {
            #expect(error.description.contains("crashed (SIGSEGV)"), "\(error)")
        }
        if daemon, let crashedChilds = daemons.withLock({ $0.first }) {
            #expect(await waitUntil { !isLive(crashedChilds) }, "the daemon \(crashedChilds) outlived the child that crashed")
        }
        #expect(try await pager.load(pager.request(.append, key: try #require(first.nextKey), params: pipeline.requestParams)).values.count == 10)
        #expect(ContinuousClock.now - start < .seconds(20), "waited for a timeout")
    }

    /// The host's threads for a child are named, so that top, perf and gdb tell them apart.
    @Test(.timeLimit(.minutes(3)))
    func anIsolatedPlugin_isServedByThreadsNamedForWhatTheyDo() async throws {
        let pipeline = try await pipeline(#"{"count": 10}"#)
        _ = try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
        // Each thread names itself as it starts: the child's reader may not have run yet (the
        // caller may read the answer itself), on a busy machine.
        #expect(await eventually { Set(threadNames()).isSuperset(of: ["paging-child", "paging-spawn"]) }, "\(threadNames())")
    }

    @Test(.timeLimit(.minutes(3)))
    func segfault_failsTheLoad_withAnErrorNamingPluginLibraryAndSignal() async throws {
        let pipeline = try await pipeline(#"{"crash_every": 2}"#)
        let pager = pipeline.pager
        let first = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
        #expect(first.values.count == 10)
        do {
            _ = try await pager.load(pager.request(.append, key: first.nextKey!, params: pipeline.requestParams))
            Issue.record("a load through a crashing child succeeded")
        } catch let error as PluginError {
            #expect(error.isRetryable)
            #expect(error.description.contains("crashy-source"), "\(error)")
            #expect(error.description.contains(try await fixturePlugin("crashy_source")), "\(error)")
            #expect(error.description.contains("crashed (SIGSEGV)"), "\(error)")
        }
        // The next load restarts the child.
        let again = try await pager.load(pager.request(.append, key: first.nextKey!, params: pipeline.requestParams))
        #expect(lineNumbers(again.values) == Array(10..<20))
    }

    @Test(.timeLimit(.minutes(3)))
    func exit_failsTheLoad_withTheExitStatus() async throws {
        let pipeline = try await pipeline(#"{"exit_every": 2}"#)
        let pager = pipeline.pager
        let first = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
        await #expect {
            _ = try await pager.load(pager.request(.append, key: first.nextKey!, params: pipeline.requestParams))
        } throws: { error in
            "\(error)".contains("exited with status 3") && "\(error)".contains("crashy-source") && (error as? PluginError)?.isRetryable == true
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func hang_failsTheLoad_withTheFetchTimeout() async throws {
        let pipeline = try await pipeline(#"{"hang": true}"#, timeoutMs: 300)
        let pager = pipeline.pager
        await #expect {
            _ = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
        } throws: { error in
            (error as? PluginError)?.status == .timeout && "\(error)".contains("crashy-source")
        }
    }

    @Test(.timeLimit(.minutes(3)))
    func hungChild_isKilledAndRestarted() async throws {
        // The second fetch never returns: it times out, the child does not answer the
        // cancel, and is killed; the next load is served by a new child.
        let pipeline = try await pipeline(#"{"hang_every": 2}"#, timeoutMs: 300)
        let pager = pipeline.pager
        let source = try #require(pipeline.isolatedSource)
        _ = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
        let first = try #require(source.childPID)
        await #expect(throws: PluginError.self) {
            _ = try await pager.load(pager.request(.append, key: PluginKey("10"), params: pipeline.requestParams))
        }
        #expect(await log.waitFor("was killed: a call was still running 500 ms after its timeout (300 ms); the plugin hangs"))
        #expect(kill(first, 0) == -1 && errno == ESRCH)
        let page = try await pager.load(pager.request(.append, key: PluginKey("10"), params: pipeline.requestParams))
        #expect(lineNumbers(page.values) == Array(10..<20))
        #expect(source.childPID != nil && source.childPID != first)
    }

    @Test(.timeLimit(.minutes(3)))
    func hangEveryThirdFetch_everyPageArrives_withRetries() async throws {
        let pipeline = try await pipeline(#"{"hang_every": 3, "count": 300}"#, retries: 5, timeoutMs: 300)
        #expect(try await pageThrough(pipeline, pages: 30) == Array(0..<300))
        #expect(log.contains("the plugin hangs"))
    }

    /// The source's invalidations cross from its child, and the refresh key around the
    /// reader's item is asked there.
    @Test(.timeLimit(.minutes(3)))
    func isolatedSource_invalidates_andNamesTheRefreshKeyAroundAnItem() async throws {
        let folder = scratchFolder()
        let trigger = folder + "/invalidate"
        let text = #"{"source": {"plugin": "\#(try await fixturePlugin("interceptor_work"))", "id": "offsets", "isolation": "process", "#
            + #""config": {"invalidate_file": "\#(trigger)"}}, "page_size": 10}"#
        let pipeline = try Pipeline(manifest: try Manifest.parse(Array(text.utf8), file: folder + "/m.json"), sink: log.sink)
        let source = try #require(pipeline.isolatedSource)
        let signals = try #require(source.invalidation).signals()
        #expect(FileManager.default.createFile(atPath: trigger, contents: Data()))
        var iterator = signals.makeAsyncIterator()
        #expect(await iterator.next() != nil)
        let anchor = PagingAnchor(pageKey: PluginKey("20"), indexInPage: 5, value: PluginItem(json: #"{"n":25}"#), pageSize: 10)
        #expect(source.refreshKey(around: anchor) == PluginKey("25"))
    }

    @Test(.timeLimit(.minutes(3)))
    func restartLimit_marksThePluginDead_andLoadsFailFast() async throws {
        let pipeline = try await pipeline(#"{"crash_every": 1}"#)
        let pager = pipeline.pager
        var errors: [PluginError] = []
        for _ in 0..<(PluginIsolation.restartLimit + 1) {
            do {
                _ = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
            } catch let error as PluginError {
                errors.append(error)
            }
        }
        #expect(errors.count == PluginIsolation.restartLimit + 1)
        #expect(errors.prefix(PluginIsolation.restartLimit - 1).allSatisfy { $0.isRetryable && $0.message.contains("crashed (SIGSEGV)") })
        #expect(errors.suffix(2).allSatisfy { !$0.isRetryable && $0.message.contains("not restarted") }, "\(errors)")
    }

    @Test(.timeLimit(.minutes(3)))
    func destroyingThePipeline_endsTheChildAndWhatItForked() async throws {
        var pipeline: Pipeline? = try await pipeline(#"{"fork_sleeper": true}"#)
        let group = try #require(pipeline?.isolatedSource?.childPID)
        #expect(liveMembers(ofGroup: group) >= 2, "the child and the process it forked")
        pipeline = nil
        #expect(await waitUntil { liveMembers(ofGroup: group) == 0 }, "processes of group \(group) outlived the pipeline")
    }

    /// A daemon the plugin starts (fork, setsid, fork: a session and process group of its own,
    /// its parent gone) ends with the child too: the child adopts what its descendants orphan,
    /// and the host ends all of its descendants (before, the daemon outlived the host).
    @Test(.timeLimit(.minutes(3)))
    func destroyingThePipeline_endsADaemonThePluginStarted() async throws {
        let pidFile = scratchFolder() + "/daemon.pid"
        var pipeline: Pipeline? = try await pipeline(#"{"daemon_pid_file": "\#(pidFile)"}"#)
        _ = try #require(pipeline?.isolatedSource?.childPID)
        var daemon: Int32?
        #expect(await waitUntil {
            daemon = (try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            return daemon != nil
        })
        let pid = try #require(daemon)
        #expect(isLive(pid))
        pipeline = nil
        #expect(await waitUntil { !isLive(pid) }, "the daemon \(pid) outlived the pipeline")
    }

    /// An isolated plugin is destroyed when its pipeline goes away, as in the host's process
    /// (its destroy() never ran: the child was killed).
    @Test(.timeLimit(.minutes(3)))
    func destroyingThePipeline_destroysTheIsolatedPlugin() async throws {
        let mark = scratchFolder() + "/destroyed"
        var pipeline: Pipeline? = try await pipeline(#"{"destroy_mark": "\#(mark)"}"#)
        #expect(try await pageThrough(try #require(pipeline), pages: 1) == Array(0..<10))
        pipeline = nil
        #expect(await waitUntil { FileManager.default.fileExists(atPath: mark) }, "destroy() did not run")
        #expect(!log.contains("was killed"), "\(log.messages)")
    }

    /// A destroy() that never returns holds up no one for long: the child is killed after the
    /// grace period, and a warning says so.
    @Test(.timeLimit(.minutes(3)))
    func anIsolatedPluginWhoseDestroyHangs_isKilled_withAWarning() async throws {
        var pipeline: Pipeline? = try await pipeline(#"{"destroy_hangs": true}"#)
        let child = try #require(pipeline?.isolatedSource?.childPID)
        #expect(try await pageThrough(try #require(pipeline), pages: 1) == Array(0..<10))
        pipeline = nil
        #expect(await log.waitFor("was killed: it had not ended within 2.0 seconds of being asked to (its plugin's destroy() did not return)"), "\(log.messages)")
        #expect(await waitUntil { !isLive(child) })
    }

    /// Found by a probe: a child whose plugin hangs in a call the host gave up on was said
    /// to be killed because "its plugin's destroy() did not return": destroy() was never
    /// called (the ABI has none during a call). The warning names the hanging call: the
    /// child's own, as it ends after waiting 1 s for the call (a call still running when the
    /// plugin is to be destroyed hangs, as a rule).
    @Test(.timeLimit(.minutes(3)))
    func anIsolatedPluginHangingInACall_endsNamingTheCall() async throws {
        var pipeline: Pipeline? = try await pipeline(#"{"hang": true}"#, timeoutMs: 300)
        let child = try #require(pipeline?.isolatedSource?.childPID)
        do {
            _ = try await pageThrough(try #require(pipeline), pages: 1)
            Issue.record("a fetch that never returns loaded a page")
        } catch {}
        pipeline = nil
        #expect(await log.waitFor("destroy() could not be called within 1.0 seconds: a call to the plugin has not returned (it hangs there)"),
                "\(log.messages)")
        #expect(!log.contains("destroy() did not return"), "\(log.messages)")
        #expect(await waitUntil { !isLive(child) })
    }

    /// A host killed with SIGKILL (by the OOM killer, say) takes what its isolated plugin
    /// started with it: the child's reaper hears it and ends the whole tree (before, the
    /// reaper was killed by the kernel at once, and the plugin's processes lived on).
    @Test(.timeLimit(.minutes(3)))
    func aHostKilledWithSIGKILL_takesTheDaemonWithIt() async throws {
        let folder = scratchFolder()
        let pidFile = folder + "/daemon.pid", manifest = folder + "/m.json"
        try (#"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "isolation": "process", "#
             + #""config": {"daemon_pid_file": "\#(pidFile)", "hang": true}}, "page_size": 10}"#)
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let host = Process()
        host.executableURL = URL(fileURLWithPath: pagerCommand)
        host.arguments = ["run", manifest]
        host.standardOutput = FileHandle.nullDevice
        host.standardError = FileHandle.nullDevice
        try host.run()
        defer { if host.isRunning { kill(host.processIdentifier, SIGKILL) } }
        let daemon = try await DaemonLock(pidFile)
        #expect(daemon.isHeld, "the daemon does not run")
        kill(host.processIdentifier, SIGKILL)
        host.waitUntilExit()
        #expect(await waitUntil { !daemon.isHeld }, "the daemon outlived the host")
    }

    /// A plugin that kills its child's reaper while it loads, a process it forked holding the
    /// socket open, fails the start at once (it waited for the start's timeout: 95 s).
    @Test(.timeLimit(.minutes(3)))
    func aPluginKillingItsReaperWhileLoading_failsTheStartAtOnce() async throws {
        let start = ContinuousClock.now
        await #expect {
            _ = try await pipeline(#"{"fork_sleeper": true, "kill_parent": true}"#)
        } throws: { error in
            "\(error)".contains("crashed (SIGKILL) while loading the plugin")
        }
        #expect(ContinuousClock.now - start < .seconds(10))
    }

    /// A daemon that forks and exits every millisecond, each time another pid, ends with the
    /// child too: the reaper adopts each hop, and looks again until none is left.
    @Test(.timeLimit(.minutes(3)))
    func aDaemonThatKeepsForking_endsWithThePipeline() async throws {
        let pidFile = scratchFolder() + "/daemon.pid"
        var pipeline: Pipeline? = try await pipeline(#"{"daemon_pid_file": "\#(pidFile)", "daemon_hops": true}"#)
        _ = try #require(pipeline?.isolatedSource?.childPID)
        // Each hop holds the file's lock: it is free when none lives.
        let daemon = try await DaemonLock(pidFile)
        #expect(daemon.isHeld, "the daemon does not run")
        pipeline = nil
        #expect(await waitUntil { !daemon.isHeld }, "the daemon outlived the pipeline")
    }

    /// A daemon started by a plugin that first stops its process adopting orphans ends with the
    /// child too: the orphans go to the child's reaper, a process of its own (before, the daemon
    /// went to init, out of the host's reach).
    @Test(.timeLimit(.minutes(3)))
    func aPluginClearingTheSubreaperFlag_stillLosesItsDaemon() async throws {
        let pidFile = scratchFolder() + "/daemon.pid"
        var pipeline: Pipeline? = try await pipeline(#"{"daemon_pid_file": "\#(pidFile)", "clear_subreaper": true}"#)
        _ = try #require(pipeline?.isolatedSource?.childPID)
        #expect(await waitUntil { FileManager.default.fileExists(atPath: pidFile) })
        let pid = try #require((try? String(contentsOfFile: pidFile, encoding: .utf8)).flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) })
        defer { kill(pid, SIGKILL) }
        #expect(isLive(pid))
        pipeline = nil
        #expect(await waitUntil { !isLive(pid) }, "the daemon \(pid) outlived the pipeline")
    }

    /// What the plugin's processes orphan is reaped as it ends: a plugin forking a short-lived
    /// process on every fetch leaves no zombies (before, each stayed one until the child ended,
    /// and a fast forker filled the process table). The plugin's own children stay its own: it
    /// finds the status of one it waits for long after it ended.
    @Test(.timeLimit(.minutes(3)))
    func orphansAreReaped_andThePluginsOwnChildrenStayItsOwn() async throws {
        let pipeline = try await pipeline(#"{"orphan_per_fetch": true, "wait_child_ms": 50, "count": 300}"#)
        let child = try #require(pipeline.isolatedSource?.childPID)
        #expect(try await pageThrough(pipeline, pages: 30) == Array(0..<300))
        #expect(await waitUntil { zombies(under: child) == 0 }, "\(zombies(under: child)) zombies under the child")
    }

    @Test(.timeLimit(.minutes(3)))
    func isolatedInterceptor_passesLoadsThrough() async throws {
        let folder = scratchFolder()
        let text = #"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))"}, "#
            + #""interceptors": [{"plugin": "\#(try await fixturePlugin("pass_through"))", "id": "pass-through", "isolation": "process"}], "page_size": 10}"#
        let pipeline = try Pipeline(manifest: try Manifest.parse(Array(text.utf8), file: folder + "/m.json"), sink: log.sink)
        #expect(pipeline.isolatedInterceptors.count == 1)
        #expect(try await pageThrough(pipeline, pages: 5) == Array(0..<50))
    }

    /// Found by a probe: a load cancelled (a client of pager serve gone) through an isolated
    /// interceptor that hears of failures logged "loadFailed failed: CancellationError()" each
    /// time. A cancelled load says nothing; the plugin hears of it as in process.
    @Test(.timeLimit(.minutes(3)))
    func aCancelledLoad_throughAnIsolatedListener_logsNothing() async throws {
        let folder = scratchFolder()
        let text = #"{"source": {"plugin": "\#(try await fixturePlugin("never_complete"))"}, "#
            + #""interceptors": [{"plugin": "\#(try await fixturePlugin("interceptor_work"))", "id": "listener", "isolation": "process"}], "page_size": 10}"#
        let pipeline = try Pipeline(manifest: try Manifest.parse(Array(text.utf8), file: folder + "/m.json"), sink: log.sink)
        let pager = pipeline.pager
        let load = Task { try await pager.load(pager.request(.append, key: PluginKey("0"), params: pipeline.requestParams)) }
        #expect(await waitUntil { pipeline.source?.fetchesInFlight == 1 })
        load.cancel()
        _ = await load.result
        #expect(await waitUntil { log.entries.contains { $0.plugin.hasPrefix("listener") && $0.message.hasPrefix("failed ") } },
                "the listener heard of the cancelled load: \(log.entries)")
        #expect(!log.messages.contains { $0.contains("CancellationError") || $0.contains("did not work") }, "\(log.messages)")
    }

    /// Loads in flight together (8 at a time) when the child dies all fail, and their retries
    /// all succeed. (A child that dies before it answers any of them counts towards the
    /// restart limit: with every load in flight at once and a crash every few fetches, the
    /// plugin would rightly be declared dead.)
    @Test(.timeLimit(.minutes(3)))
    func concurrentLoads_acrossCrashes_allArrive() async throws {
        let pipeline = try await pipeline(#"{"crash_every": 20, "count": 1000}"#, retries: 10)
        let pager = pipeline.pager
        let pages = try await withThrowingTaskGroup(of: [Int].self) { group in
            func load(_ index: Int) {
                group.addTask {
                    lineNumbers(try await pager.load(pager.request(.append, key: PluginKey("\(index * 10)"), params: pipeline.requestParams)).values)
                }
            }
            for index in 0..<8 { load(index) }
            var pages: [[Int]] = []
            var next = 8
            while let page = try await group.next() {
                pages.append(page)
                if next < 100 { load(next) }
                next += 1
            }
            return pages
        }
        #expect(pages.flatMap { $0 }.sorted() == Array(0..<1000))
        #expect(log.count(containing: "crashed (SIGSEGV)") >= 4)
    }

    /// An isolated interceptor that aborts in intercept(): the load fails naming SIGABRT; the
    /// host goes on.
    @Test(.timeLimit(.minutes(3)))
    func abortingInterceptor_failsTheLoad_withSIGABRT() async throws {
        let text = #"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))"}, "#
            + #""interceptors": [{"plugin": "\#(try await fixturePlugin("check_crash_intercept"))", "isolation": "process"}], "page_size": 10}"#
        let pipeline = try Pipeline(manifest: try Manifest.parse(Array(text.utf8), file: scratchFolder() + "/m.json"), sink: log.sink)
        let pager = pipeline.pager
        await #expect {
            _ = try await pager.load(pager.refreshRequest(params: pipeline.requestParams))
        } throws: { error in
            "\(error)".contains("crash-intercept") && "\(error)".contains("crashed (SIGABRT)") && (error as? PluginError)?.isRetryable == true
        }
    }

    /// `pager run --isolate-all` over a source that crashes on every other fetch: with retries
    /// every item is printed and pager exits 0, the crashes reported on stderr.
    @Test(.timeLimit(.minutes(3)))
    func pagerRun_isolateAll_survivesACrashingSource() async throws {
        let folder = scratchFolder()
        let manifest = folder + "/m.json"
        let text = #"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "config": {"crash_every": 2, "count": 100}}, "#
            + #""page_size": 10, "retry": {"max_retries": 3, "initial_backoff_ms": 1, "jitter": 0}}"#
        #expect(FileManager.default.createFile(atPath: manifest, contents: Data(text.utf8)))
        let result = try await run(pagerCommand, ["run", manifest, "--refresh", "--append", "9", "--isolate-all"])
        #expect(result.code == 0 && !result.signaled, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 100)
        #expect(result.stderr.contains("crashed (SIGSEGV)"), "\(result.stderr)")
    }

    /// Log lines a plugin writes while it is created reach the host's sink, before the child's
    /// answer that it is ready.
    @Test(.timeLimit(.minutes(3)))
    func logLinesWhileCreating_reachTheSink() async throws {
        let pipeline = try await pipeline(#"{"log_on_create": true}"#)
        #expect(log.contains("created"))
        let page = try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
        #expect(page.values.count == 10)
    }

    @Test
    func unknownIsolation_isAManifestError() throws {
        let text = #"{"source": {"plugin": "x", "isolation": "thread"}}"#
        #expect(throws: ManifestError(file: "m.json", path: "$.source.isolation", message: #"expected "process" or "none", got "thread""#)) {
            try Manifest.parse(Array(text.utf8), file: "m.json")
        }
    }

    @Test
    func unloadableIsolatedPlugin_isAManifestError_withTheChildsReason() async throws {
        let text = #"{"source": {"plugin": "\#(try await fixturePlugin("pass_through"))", "id": "absent", "isolation": "process"}}"#
        #expect {
            _ = try Pipeline(manifest: try Manifest.parse(Array(text.utf8), file: scratchFolder() + "/m.json"), sink: log.sink)
        } throws: { error in
            "\(error)".contains("$.source (plugin") && "\(error)".contains("absent")
        }
    }

    /// `pager run` of an isolated `crashy_source` that writes `frame_garbage` of that kind to
    /// its socket.
    private func runWithFrameGarbage(_ garbage: Int) async throws -> ProgramResult {
        let manifest = scratchFolder() + "/m.json"
        try (#"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "isolation": "process", "config": {"frame_garbage": \#(garbage)}}, "#
             + #""page_size": 10}"#).write(toFile: manifest, atomically: true, encoding: .utf8)
        return try await run(pagerCommand, ["run", manifest])
    }

    /// A child that sends a frame the protocol does not have is stopped, and the load fails
    /// saying so (it said the child crashed, by the SIGKILL that stopped it).
    @Test(.timeLimit(.minutes(3)), arguments: [
        (1, "operation 238, which the child does not send"),
        (2, "a frame of 3 bytes, where frames have 9 to 289806976 (a page of max_page_bytes, its keys and the rest)"),
    ])
    func aChildSendingAMalformedFrame_isStopped_andTheLoadSaysWhy(_ garbage: Int, _ problem: String) async throws {
        let result = try await runWithFrameGarbage(garbage)
        #expect(result.code == 1, "\(result.stderr)")
        #expect(result.stderr.contains("the isolated plugin process sent a malformed frame (\(problem)) and was stopped"), "\(result.stderr)")
        #expect(!result.stderr.contains("crashed"), "\(result.stderr)")
    }

    /// Found by a probe: a plugin writing frames to the child's socket itself handed the host
    /// pages of items that were not JSON, which it passed on as they came (into `pager serve`'s
    /// JSON answers, whose structure they could change). Pages from the child are checked as
    /// the plugin's own would be; a child that sends one the host refuses is stopped.
    /// Page metadata that were not UTF-8 went through too, read lossily: the host got U+FFFD,
    /// which the plugin never sent.
    @Test(.timeLimit(.minutes(3)), arguments: [(3, "item 0 is not valid JSON: "), (4, "page metadata that is not UTF-8")])
    func aChildForgingAPageTheHostRefuses_isStopped_andNothingIsPrinted(_ garbage: Int, _ problem: String) async throws {
        let result = try await runWithFrameGarbage(garbage)
        #expect(result.code == 1, "\(result.stderr)")
        #expect(result.stdout.isEmpty, "\(result.stdout)")
        #expect(result.stderr.contains("the isolated plugin process sent a page the host refuses (\(problem)"), "\(result.stderr)")
        #expect(result.stderr.contains("it is stopped, and the next call restarts it"), "\(result.stderr)")
    }

    /// A child that sends what is not a frame while it loads the plugin is stopped, and the load
    /// says so (it said the child "crashed (SIGTERM)", the host's own signal).
    @Test(.timeLimit(.minutes(3)))
    func aChildSendingAMalformedFrameWhileLoading_isStopped_andTheLoadSaysWhy() async throws {
        let manifest = scratchFolder() + "/m.json"
        try #"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "isolation": "process", "config": {"garbage_on_create": true}}}"#
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["validate", manifest])
        #expect(result.code == 2, "\(result.stderr)")
        #expect(result.stderr.contains("the isolated plugin process sent a malformed frame while loading the plugin (a frame of "), "\(result.stderr)")
        #expect(!result.stderr.contains("crashed"), "\(result.stderr)")
    }

    /// A child that announces a frame of 1 GiB, which pages of 1 GiB allow, and sends nothing
    /// more: the host reads it as the bytes come, so `pager run` stays small (it allocated the
    /// whole gigabyte at once: a peak of 1,064,712 KB) and the load fails at its timeout.
    @Test(.timeLimit(.minutes(3)))
    func aChildAnnouncingAHugeFrame_costsTheHostNothing() async throws {
        let folder = scratchFolder()
        let manifest = folder + "/m.json"
        try (#"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "isolation": "process", "config": {"frame_bomb": true}}, "#
             + #""page_size": 10, "timeout_ms": 1000, "max_page_bytes": 1073741824}"#).write(toFile: manifest, atomically: true, encoding: .utf8)
        // The peak resident size of `pager run`, as its parent's rusage of its children says.
        let script = """
            import resource, subprocess, sys
            code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
            print(code, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
            """
        let result = try await run("/usr/bin/env", ["python3", "-c", script, pagerCommand, "run", manifest])
        let fields = result.stdout.split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        try #require(fields.count == 2, "\(result.stdout) \(result.stderr)")
        #expect(fields[0] == 1, "pager run should fail its load (exit 1), not \(fields[0])")
        #expect(fields[1] < 300 * 1024, "peak RSS \(fields[1]) KB")
    }

    /// An isolated interceptor hears of a failed load as it would in the process: the source's
    /// failure as the host has it (it heard it wrapped in its own name, "listener (…): transient:
    /// offsets (…): …", as if it had failed itself).
    @Test(.timeLimit(.minutes(3)))
    func anIsolatedInterceptor_hearsAFailedLoad_asInTheProcess() async throws {
        let library = try await fixturePlugin("interceptor_work")
        let manifest = scratchFolder() + "/m.json"
        try (#"{"source": {"plugin": "\#(library)", "id": "offsets", "config": {"fail_times": 1}}, "#
             + #""interceptors": [{"plugin": "\#(library)", "id": "listener"}]}"#).write(toFile: manifest, atomically: true, encoding: .utf8)
        let heard = "listener: failed 2 offsets (\(library)): transient: busy"
        for arguments in [["run", manifest], ["run", manifest, "--isolate-all"]] {
            let result = try await run(pagerCommand, arguments)
            #expect(result.code == 1, "\(result.stderr)")
            #expect(result.stderr.contains(heard), "\(arguments): \(result.stderr)")
        }
    }

    /// A frame longer than a page of the manifest's `max_page_bytes` (and its keys) is refused
    /// as its length comes: the host took up to 1 GiB from any child whatever the limit, so a
    /// child announcing 1 GiB held the load until its timeout, reading.
    @Test(.timeLimit(.minutes(3)))
    func aFrameLongerThanAPage_isRefusedAtItsLength() async throws {
        let manifest = scratchFolder() + "/m.json"
        try (#"{"source": {"plugin": "\#(try await fixturePlugin("crashy_source"))", "isolation": "process", "config": {"frame_bomb": true}}, "#
             + #""page_size": 10, "max_page_bytes": 1048576, "max_items_per_page": 1000, "timeout_ms": 50000}"#)
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", manifest])
        #expect(result.code == 1, "\(result.stderr)")
        // 1 MiB, 4 bytes an item's length, 4 keys of 1 MiB and 16 MiB for the rest.
        #expect(result.stderr.contains("sent a malformed frame (a frame of 1073741823 bytes, where frames have 9 to 22024096 (a page of max_page_bytes, its keys and the rest))"), "\(result.stderr)")
    }
}

/// The processes of `group` that are not zombies.
func liveMembers(ofGroup group: Int32) -> Int {
    let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
    return entries.filter { entry in
        guard Int32(entry) != nil, let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return false }
        // After "(comm)": state, ppid, pgrp.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        return fields.count > 2 && fields[0] != "Z" && Int32(fields[2]) == group
    }.count
}

/// The lock a crashy_source daemon (and every hop of it) holds on its pid file while it lives.
final class DaemonLock {
    private let fd: Int32

    /// Opens `pidFile` once it appears (10 s at most).
    init(_ pidFile: String) async throws {
        #expect(await waitUntil { FileManager.default.fileExists(atPath: pidFile) }, "no \(pidFile)")
        fd = open(pidFile, O_RDONLY)
        try #require(fd >= 0)
    }

    deinit { close(fd) }

    /// Whether a daemon holds the lock (once it is free, this takes it: free from then on).
    var isHeld: Bool { flock(fd, LOCK_EX | LOCK_NB) != 0 }
}

/// How many zombies are among the descendants of `root`.
func zombies(under root: Int32) -> Int {
    var children: [Int32: [(pid: Int32, zombie: Bool)]] = [:]
    for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let pid = Int32(entry), let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { continue }
        // After "(comm)": state, ppid.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        if fields.count > 1, let parent = Int32(fields[1]) { children[parent, default: []].append((pid, fields[0] == "Z")) }
    }
    var count = 0
    var queue = [root]
    while let parent = queue.popLast() {
        for child in children[parent] ?? [] {
            if child.zombie { count += 1 } else { queue.append(child.pid) }
        }
    }
    return count
}

/// Whether process `pid` runs (exists and is not a zombie).
func isLive(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else { return false }
    return stat[stat.index(after: close)...].split(separator: " ").first != "Z"
}

/// Polls `condition` (every few milliseconds, for up to 10 s) until it holds.
func waitUntil(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(5))
    }
    return condition()
}
