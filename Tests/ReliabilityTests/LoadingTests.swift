import Foundation
import PagingHost
import Testing

/// Libraries that misbehave while they are loaded or created: a constructor that crashes or
/// calls exit(0), a create_* that never returns.
@Suite("Misbehaving while loading")
struct LoadingTests {
    /// An in-process plugin that sets SIGCHLD to be ignored no longer hides how isolated plugins'
    /// processes end: a crash read as a timeout, then as "exited with status 0" (a probe). It is
    /// set back, with a warning naming the plugin; set by a library's constructor, when the
    /// library is loaded, naming the library (it was checked after create alone).
    @Test(.timeLimit(.minutes(3)), arguments: [
        ("numbered_source", #", "ignore_sigchld": true"#, "[warning] numbered: its create set SIGCHLD to be ignored"),
        ("ctor_sigchld", "", "libctor_sigchld.so: its constructors or init() set SIGCHLD to be ignored"),
    ])
    func aPluginIgnoringSIGCHLD_hidesNoIsolatedCrash(_ fixture: String, _ setting: String, _ warning: String) async throws {
        let folder = scratchFolder()
        try """
        {"source": {"plugin": "\(try await fixturePlugin(fixture))", "config": {"count": 10, "refresh_key": 0\(setting)}},
         "interceptors": [{"plugin": "\(try await fixturePlugin("check_crash_intercept"))", "isolation": "process"}],
         "page_size": 5, "timeout_ms": 20000}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerBinary, ["run", folder + "/m.json"])
        #expect(result.code == 1, "\(result.stderr)")
        #expect(result.stderr.contains("crashed (SIGABRT)") && !result.stderr.contains("did not complete within"), "\(result.stderr)")
        #expect(result.stderr.contains(warning), "\(result.stderr)")
    }

    /// Relative paths resolve against the manifest's folder as it was when the manifest was read:
    /// a source whose create changed the working folder moved where the plugins after it were
    /// looked for ("./libpass_through.so: no such file", blaming that plugin) and where
    /// sqlite-store made its file (a probe).
    @Test func aPluginChangingTheWorkingFolder_movesNoRelativePath() async throws {
        let folder = scratchFolder(), elsewhere = scratchFolder()
        try FileManager.default.copyItem(atPath: try await fixturePlugin("pass_through"), toPath: folder + "/libpass_through.so")
        try """
        {"source": {"plugin": "\(try await fixturePlugin("numbered_source"))", "config": {"count": 10, "refresh_key": 0, "chdir": "\(elsewhere)"}},
         "interceptors": [{"plugin": "./libpass_through.so"}, {"plugin": "sqlite-store", "config": {"path": "store.db"}}],
         "page_size": 5, "incremental": {"cursor": "/n"}}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run("/bin/sh", ["-c", #"cd "$0" && exec "$1" run m.json --refresh --append 1"#, folder, pagerBinary])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 10, "\(result.stdout)")
        for file in ["store.db", "m.json.state"] {
            #expect(FileManager.default.fileExists(atPath: folder + "/" + file), "\(file) beside the manifest")
            #expect(!FileManager.default.fileExists(atPath: elsewhere + "/" + file), "\(file) where the plugin went")
        }
    }

    /// A folder of libraries: a good plugin, one whose constructor crashes, one whose
    /// constructor calls exit(0), one that is no plugin. Each is listed or reported on a line of
    /// its own; none stops the listing.
    @Test func pagerPlugins_listsEachLibraryInAChild_eachFailureALineOfItsOwn() async throws {
        let folder = scratchFolder()
        for (fixture, name) in [("pass_through", "libgood.so"), ("ctor_crash", "libcrashes.so"), ("ctor_exit", "libexits.so"),
                                ("no_entry", "libnotaplugin.so")] {
            try FileManager.default.copyItem(atPath: try await fixturePlugin(fixture), toPath: folder + "/" + name)
        }
        let result = try await run(pagerCommand, ["plugins", folder])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.contains("\tinterceptor\t") && result.stdout.contains("\(folder)/libgood.so"), "\(result.stdout)")
        let errors = result.stderr.split(separator: "\n").map(String.init)
        #expect(errors.contains { $0.contains("/libcrashes.so: loading the library crashed (SIGSEGV)") }, "\(errors)")
        #expect(errors.contains { $0.contains("/libexits.so: loading the library ended the process (exit status 2) before it was listed")
                                  && $0.contains("called exit()") }, "\(errors)")
        #expect(errors.contains { $0.contains("libnotaplugin.so") && $0.contains("not a SwiftPaging plugin") }, "\(errors)")
    }

    /// A constructor that calls exit(0) made validate and run end with 0, silently.
    @Test(arguments: ["validate", "run"])
    func aLibraryThatExitsWhileLoading_isReported_withStatus2(_ command: String) async throws {
        let library = try await fixturePlugin("ctor_exit")
        let manifest = scratchFolder() + "/m.json"
        try #"{"source": {"plugin": "\#(library)"}}"#.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, [command, manifest])
        #expect(result.code == 2)
        #expect(result.stderr.contains("pager: the library \(library) ended the process while it was being loaded (it called exit()); exit status 2"),
                "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    /// A fetch() that calls exit() ended pager run quietly, with the plugin's status (0) and
    /// part of the items printed: it is reported, naming the library, with status 2.
    @Test(arguments: [0, 3])
    func aPluginThatExitsInAFetch_isReported_withStatus2(_ status: Int) async throws {
        let library = try await fixturePlugin("blocking_fetch")
        let manifest = scratchFolder() + "/m.json"
        try #"{"source": {"plugin": "\#(library)", "config": {"sleep_ms": 0, "exit_on": 2, "exit_status": \#(status)}}}"#
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", manifest, "--refresh", "--append", "1"])
        #expect(result.code == 2)
        #expect(result.stdout == #"{"woke":true}"# + "\n")
        #expect(result.stderr.contains("pager: the library \(library) ended the process (it called exit()) before pager was done: "
                                       + "what was printed may be incomplete; exit status 2"), "\(result.stderr)")
        // pager's own ends stay quiet.
        let whole = try await run(pagerCommand, ["run", manifest, "--refresh"])
        #expect(whole.code == 0 && !whole.stderr.contains("ended the process"), "\(whole.stderr)")
    }

    /// Plugins are bound lazily; an import nothing defines is still a load error that names
    /// the symbol, for a function as for a variable. A weak import may be missing.
    @Test(arguments: [("IMPORT_FUNCTION", "paging_fixture_absent_function"), ("IMPORT_DATA", "paging_fixture_absent_variable"),
                      ("IMPORT_WEAK_FUNCTION", nil)])
    func anImportNothingDefines_failsTheLoad_namingIt(_ kind: String, _ symbol: String?) async throws {
        let library = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/pass_through.c", name: "unbound_\(kind)",
                                         extraFlags: ["-D\(kind)", "\(repositoryRoot)/Tests/Fixtures/plugins/unbound_imports.c"])
        let manifest = scratchFolder() + "/m.json"
        try #"{"source": {"plugin": "\#(library)"}}"#.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["validate", manifest])
        if let symbol {
            #expect(result.code == 2, "\(result.stderr)")
            #expect(result.stderr.contains("\(library): dlopen failed: \(library): undefined symbol: \(symbol)"), "\(result.stderr)")
        } else {
            #expect(result.code == 0, "\(result.stderr)")
        }
    }

    /// A create_* that never returns hung validate: it gets the call timeout (without one, the
    /// fetch timeout but at least 30 s).
    @Test(.timeLimit(.minutes(3)))
    func aCreateThatNeverReturns_failsAfterTheTimeout() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 3, to: folder + "/data.jsonl")
        let manifest = folder + "/m.json"
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "\(try await fixturePlugin("create_hangs"))", "id": "hangs"}], "call_timeout_ms": 300}
        """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["validate", manifest])
        #expect(result.code == 2)
        #expect(result.stderr.contains("plugin 'hangs' could not be created: timeout: create did not return within 0.3 seconds"), "\(result.stderr)")
    }

    /// Found by a probe: a source's refresh_key (called when it is created) that never returned
    /// hung validate and run, in the process or in an isolated child, whatever the timeouts.
    @Test(.timeLimit(.minutes(3)), arguments: [("validate", ""), ("run", ""), ("run", #", "isolation": "process""#)])
    func aRefreshKeyThatNeverReturns_failsTheCreateAfterTheTimeout(_ command: String, _ isolation: String) async throws {
        let manifest = scratchFolder() + "/m.json"
        try """
        {"source": {"plugin": "\(try await fixturePlugin("create_hangs"))", "id": "refresh-key-hangs"\(isolation)}, "call_timeout_ms": 300}
        """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, [command, manifest])
        #expect(result.code == 2, "\(result.stderr)")
        #expect(result.stderr.contains("plugin 'refresh-key-hangs' could not be created: timeout: refresh_key did not return within 0.3 seconds"),
                "\(result.stderr)")
    }

    /// Found by a probe: an interceptor's handle() that never returns failed the load when the
    /// plugin was isolated (its child timed out), and not in process (logged; the load goes on).
    /// Both go on now: handle() only observes the page.
    @Test(.timeLimit(.minutes(3)), arguments: [#", "call_timeout_ms": 300"#, #", "timeout_ms": 1000, "isolate": true"#])
    func aHandleThatNeverReturns_failsNoLoad(_ settings: String) async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 3, to: folder + "/data.jsonl")
        let isolated = settings.contains("isolate")
        let manifest = folder + "/m.json"
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 3,
         "interceptors": [{"plugin": "\(try await fixturePlugin("create_hangs"))", "id": "handle-hangs"\(isolated ? #", "isolation": "process""# : "")}]\(settings.replacingOccurrences(of: #", "isolate": true"#, with: ""))}
        """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", manifest])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 3, "\(result.stdout)")
        #expect(result.stderr.contains(isolated ? "handle failed: " : "handle did not return within 0.3 seconds (call_timeout_ms); the load goes on"), "\(result.stderr)")
        // In process, the hanging handle() keeps destroy() from being called, which pager waits
        // for (1 s at most: a call still running then hangs, as a rule), then says why it was not
        // called.
        if !isolated {
            #expect(result.stderr.contains("[warning] handle-hangs: destroy() could not be called within 0.3 seconds: a call to the plugin has not returned"),
                    "\(result.stderr)")
        }
    }

    /// `pager run` of `lines` JSON lines, pages of 3, through an interceptor whose handle() never
    /// returns, with `arguments`.
    func runBehindAHungHandle(lines: Int, callTimeoutMs: Int, _ arguments: [String]) async throws -> ProgramResult {
        let folder = scratchFolder()
        writeJSONLines(count: lines, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 3, "call_timeout_ms": \(callTimeoutMs),
         "interceptors": [{"plugin": "\(try await fixturePlugin("create_hangs"))", "id": "handle-hangs"}]}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return try await run(pagerCommand, ["run", folder + "/m.json"] + arguments)
    }

    /// Found by a probe: the intercept after a handle() that never returned, queued behind it,
    /// failed saying the intercept did not return; it was never called, and says so.
    @Test(.timeLimit(.minutes(3)))
    func anInterceptQueuedBehindAHungHandle_saysItCouldNotBeCalled() async throws {
        let result = try await runBehindAHungHandle(lines: 6, callTimeoutMs: 300, ["--refresh", "--append", "1"])
        #expect(result.code == 1, "\(result.stderr)")
        #expect(result.stderr.contains("timeout: intercept could not be called within 0.3 seconds (call_timeout_ms): an earlier call to the plugin "
                                       + "(intercept, handle or transform) has not returned"), "\(result.stderr)")
    }

    /// Found by review: a call that hung kept pager waiting the whole bound again at its end, for
    /// a destroy() that could not be called (a run 30 s longer with call_timeout_ms at 30000).
    @Test(.timeLimit(.minutes(3)))
    func aCallStillRunningAtTheEnd_isWaitedFor1sAtMost() async throws {
        let result = try await runBehindAHungHandle(lines: 3, callTimeoutMs: 2000, [])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stderr.contains("[warning] handle-hangs: destroy() could not be called within 1.0 seconds: a call to the plugin has not returned"),
                "\(result.stderr)")
    }

    /// Found by a probe: an in-process plugin's destroy() that never returned hung `run` and
    /// `validate` at their end (and `serve` after SIGTERM), whatever the timeouts. It is waited
    /// for as create is, then left, with a warning naming the plugin; the run's output stands.
    /// The interceptor's destroy runs on its call thread (call_timeout_ms), the source's on a
    /// thread of its own.
    @Test(.timeLimit(.minutes(3)), arguments: [("validate", "source"), ("run", "source"), ("run", "interceptor")])
    func aDestroyThatNeverReturns_isLeftAfterTheTimeout_withAWarning(_ command: String, _ hanging: String) async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 3, to: folder + "/data.jsonl")
        let (source, interceptors) = hanging == "source"
            ? (#"{"plugin": "\#(try await fixturePlugin("crashy_source"))", "config": {"destroy_hangs": true}}"#, "")
            : (#"{"plugin": "jsonlines", "config": {"path": "data.jsonl"}}"#,
               #", "interceptors": [{"plugin": "\#(try await fixturePlugin("create_hangs"))", "id": "destroy-hangs"}]"#)
        try #"{"source": \#(source)\#(interceptors), "page_size": 3, "call_timeout_ms": 300}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, [command, folder + "/m.json"])
        #expect(result.code == 0, "\(result.stderr)")
        if command == "run" { #expect(result.stdout.split(separator: "\n").count == 3, "\(result.stdout)") }
        let plugin = hanging == "source" ? "crashy-source" : "destroy-hangs"
        #expect(result.stderr.contains("[warning] \(plugin): destroy() did not return within 0.3 seconds"), "\(result.stderr)")
        // Once (found by review: the instance's deinit waited again, and said it again).
        #expect(result.stderr.components(separatedBy: "destroy()").count == 2, "\(result.stderr)")
    }

    /// A constructor that never returns hung validate and run for ever: the load gets the same
    /// timeout as create, in the process or in an isolated child (which said it "crashed
    /// (SIGTERM)" when the host stopped it).
    @Test(.timeLimit(.minutes(3)), arguments: [("validate", ""), ("run", ""), ("validate", #", "isolation": "process""#)])
    func aConstructorThatNeverReturns_failsTheLoadAfterTheTimeout(_ command: String, _ isolation: String) async throws {
        let manifest = scratchFolder() + "/m.json"
        try #"{"source": {"plugin": "\#(try await fixturePlugin("ctor_hang"))"\#(isolation)}, "call_timeout_ms": 300}"#
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, [command, manifest])
        #expect(result.code == 2, "\(result.stderr)")
        #expect(result.stderr.contains("libctor_hang.so: loading the library did not finish within 0.3 seconds"), "\(result.stderr)")
    }
}

/// `pager check` contains what a plugin forks: each check runs in a process group of its own,
/// under a reaper that adopts what the plugin's processes orphan (a daemon), all ended with the
/// check; a check after which forked processes still ran fails, saying so.
@Suite("pager check contains forked processes")
struct CheckContainmentTests {
    @Test func processesAPluginForks_endWithTheirCheck_whichFailsSaying() async throws {
        let folder = scratchFolder()
        let result = try await run(pagerCommand, ["check", try await fixturePlugin("forks_in_create"), "--cycles", "20",
                                                  "--timeout-ms", "500", "--config", #"{"pid_folder": "\#(folder)"}"#])
        #expect(result.code == 1, "\(result.stdout)")
        #expect(result.stdout.contains("forked processes running after the check (killed)"), "\(result.stdout)")
        let forked = try FileManager.default.contentsOfDirectory(atPath: folder).compactMap { pid_t($0) }
        #expect(forked.count >= 20, "the fixture forked in each create")
        // Killed: gone, or a zombie waiting for a parent that reaps (pid 1 here may not).
        let running = forked.filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return false }
            return !stat[stat.index(after: close)...].trimmingCharacters(in: .whitespaces).hasPrefix("Z")
        }
        #expect(running.isEmpty, "still running: \(running)")
    }

    /// A daemon a plugin starts in create (a session of its own) fails the checks after which
    /// it ran, and ends with them (a check passed, leaving one daemon a create, 1,015 a run).
    @Test func aDaemonAPluginStarts_endsWithItsCheck_whichFailsSaying() async throws {
        let pidFile = scratchFolder() + "/daemon.pid"
        let result = try await run(pagerCommand, ["check", try await fixturePlugin("crashy_source"), "--plugin", "crashy-source", "--cycles", "20",
                                                  "--timeout-ms", "500", "--config", #"{"daemon_pid_file": "\#(pidFile)"}"#])
        #expect(result.code == 1, "\(result.stdout)")
        #expect(result.stdout.contains("create-valid-config") && result.stdout.contains("left 1 forked process running after the check (killed)"),
                "\(result.stdout)")
        // The last daemon started holds the file's lock while it lives.
        let daemon = try await DaemonLock(pidFile)
        #expect(await waitUntil { !daemon.isHeld }, "the daemon outlived its check")
    }
}
