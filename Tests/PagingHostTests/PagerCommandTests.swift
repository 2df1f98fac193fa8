import Foundation
import LoopbackHTTP
import Paging
import PagingHost
import PagingTestSupport
import Testing

@Suite("The pager command")
struct PagerCommandTests {
    let pager = pagerCommand

    func manifest(items: Int, pageSize: Int = 10,
                  interceptors: String = #"[{"plugin": "logging"}, {"plugin": "cache"}]"#) throws -> String {
        let folder = scratchFolder()
        writeJSONLines(count: items, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": \(interceptors), "page_size": \(pageSize)}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return folder + "/m.json"
    }

    /// A source that says its data changed while `pager run` loads (paging.invalidation/1): what
    /// was printed cannot be taken back, so the run stops there and fails, saying why. (The list
    /// was refreshed under the steps, as browse's is: appends said "+0 items", and the run ended
    /// 0 with pages missing, or printed pages twice.)
    @Test(arguments: [false, true]) func run_aSourceThatInvalidates_stopsTheRun_andFails(_ isolated: Bool) async throws {
        let folder = scratchFolder()
        let trigger = folder + "/invalidate"
        try #"{"source": {"plugin": "\#(try await fixturePlugin("interceptor_work"))", "id": "offsets", "config": {"count": 100000000, "invalidate_file": "\#(trigger)"}}, "page_size": 10}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let run = try PagerProcess(["run", folder + "/m.json", "--refresh", "--append", "1000000"] + (isolated ? ["--isolate-all"] : []))
        #expect(await run.waitFor("append: +10 items, 20 in all"), "\(run.stderr)")
        #expect(FileManager.default.createFile(atPath: trigger, contents: nil))
        #expect(await run.ended() == 1, "\(run.stderr)")
        #expect(run.stderr.contains("run: the source said its data changed (it called invalidate()) while the run loaded: the items printed may be stale"), "\(run.stderr)")
        #expect(!run.stderr.contains("+0 items"), "\(run.stderr)")
        // Each item once, in order: no page twice, none left out.
        let printed = run.stdout.split(separator: "\n")
        #expect(printed.count >= 20 && printed.elementsEqual((0..<printed.count).map { #"{"n":\#($0)}"# }) { $0 == $1 }, "\(printed.prefix(30))")
    }

    /// A call with a NULL host table or handle names no plugin: it is refused as ever, and now
    /// said, once (a NULL got PAGING_ERR_INVALID_ARGUMENT and nothing else).
    @Test func callsWithANullHostTableOrHandle_areSaid_once() async throws {
        let folder = scratchFolder()
        try #"{"source": {"plugin": "\#(try await fixturePlugin("null_message"))", "config": {"null_calls": true}}, "page_size": 10}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["run", folder + "/m.json", "--refresh", "--retry", "--retry"])
        #expect(result.code == 1, "\(result.stderr)")
        let said = result.stderr.split(separator: "\n").filter { $0.contains("[error] a plugin: ") }
        #expect(said == ["[error] a plugin: fetch_complete: a NULL host table; refused (which plugin made the call, its arguments do not tell)",
                         "[error] a plugin: keys_set: a NULL keys out (refresh_key/key_chain) handle; refused (which plugin made the call, its arguments do not tell)"],
                "\(result.stderr)")
    }

    /// A plugin that crashes in pager's process ends it, as any library would: pager first says
    /// in which plugin library, and how to survive it (the backtrace after it named libc alone
    /// for an abort(), and nothing at all said which plugin it was).
    /// (A raise()d SIGSEGV, which the Swift runtime's backtracer returns from, let the run go
    /// on, exit 0; an abort() in refresh_key at create was not named.)
    @Test(arguments: [(#"{"crash_every": 1}"#, SIGSEGV, "SIGSEGV in a call into the plugin library"),
                      (#"{"abort_every": 1}"#, SIGABRT, "SIGABRT in a call into the plugin library"),
                      (#"{"raise_segv": true}"#, SIGSEGV, "SIGSEGV in a call into the plugin library"),
                      (#"{"refresh_key_aborts": true}"#, SIGABRT, "SIGABRT in a call into the plugin library"),
                      (#"{"crash_on_thread": true}"#, SIGSEGV, "SIGSEGV in the plugin library")])
    func aPluginThatCrashesInPagersProcess_isNamed(_ config: String, _ signal: Int32, _ said: String) async throws {
        let library = try await fixturePlugin("crashy_source")
        let folder = scratchFolder()
        try #"{"source": {"plugin": "\#(library)", "config": \#(config)}, "page_size": 10}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        // Without the Swift runtime's backtracer, as the host runs its children: symbolicating a
        // fresh debug build took both cores for tens of seconds (its cache cold), and tests all
        // over the suite passed their time limits (one CI run in three).
        let result = try await run(pager, ["run", folder + "/m.json", "--refresh"], environment: ["SWIFT_BACKTRACE": "enable=no"])
        #expect(result.signaled && result.code == signal, "\(result.code) \(result.stderr)")
        let line = try #require(result.stderr.split(separator: "\n").first { $0.hasPrefix("pager: SIG") }, "\(result.stderr)")
        let thread = said.hasSuffix("in the plugin library") ? " (on a thread of its own)" : ""
        #expect(line == "pager: \(said) \(library)\(thread): a plugin that crashes ends the process that loaded it; to survive its crashes, "
                + #"run it in a child process of its own ("isolation": "process" in the manifest, or --isolate-all)"#)
    }

    /// The source invalidates inside a fetch() (before completing it): that load's page is not
    /// printed, no later step runs, and the run exits 1 every time, its incremental state left
    /// as it was. (Heard by a task, the invalidation came late: in the first refresh, every
    /// append still ran; in the last load, the run ended 0 one time in two, its state kept.)
    @Test(arguments: [(1, 0), (3, 20)])
    func run_aSourceThatInvalidatesInAFetch_stopsThereEveryTime(_ fetch: Int, _ printed: Int) async throws {
        let folder = scratchFolder()
        try #"""
            {"source": {"plugin": "\#(try await fixturePlugin("interceptor_work"))", "id": "offsets", "config": {"count": 100, "invalidate_at": \#(fetch)}},
             "page_size": 10, "incremental": {"cursor": "/n", "state_file": "state.json"}}
            """#.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        for _ in 0..<4 {
            let result = try await run(pager, ["run", folder + "/m.json", "--refresh", "--append", "2"])
            #expect(result.code == 1, "\(result.stderr)")
            #expect(result.stdout.split(separator: "\n").count == printed, "\(result.stdout)")
            #expect(result.stderr.contains("run: the source said its data changed (it called invalidate()) while the run loaded")
                    && result.stderr.contains("(the incremental state is left as it was)"), "\(result.stderr)")
            #expect(!result.stderr.contains("append: +") || fetch == 3, "\(result.stderr)")
            #expect(!FileManager.default.fileExists(atPath: folder + "/state.json"))
        }
    }

    @Test func run_printsItemsAsJSONLines_andProgressOnStderr() async throws {
        let result = try await run(pager, ["run", try manifest(items: 25), "--refresh", "--append", "5"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").map(String.init) == (0..<25).map { #"{"n":\#($0)}"# })
        #expect(result.stderr.contains("append: end of data reached"))
        #expect(result.stderr.contains("25 items in 3 pages"))
    }

    /// Found by a probe: a manifest path, or a working folder, whose bytes are not UTF-8 (a
    /// Latin-1 "café") became U+FFFD in pager's strings: "No such file" of a file that exists,
    /// or data paths naming other files. Either is said, naming the bytes. (The shell makes the
    /// bytes: a Swift string cannot hold them.)
    @Test func pathsThatAreNotUTF8_areSaidSo() async throws {
        let folder = URL(fileURLWithPath: try manifest(items: 5)).deletingLastPathComponent().path
        let named = try await run("/bin/sh", ["-c", #"cd "$1" && cp m.json "$(printf 'caf\351.json')" && "$0" run "$(printf 'caf\351.json')""#,
                                              pager, folder])
        #expect(named.code == 2 && named.stderr.contains(#"pager: argument 2 is not valid UTF-8 (caf\xE9.json)"#), "\(named.code) \(named.stderr)")
        let inside = try await run("/bin/sh", ["-c", #"cd "$1" && mkdir "$(printf 'caf\351')" && cp m.json data.jsonl "$(printf 'caf\351')" && cd "$(printf 'caf\351')" && "$0" run m.json"#,
                                               pager, folder])
        #expect(inside.code == 2 && inside.stderr.contains(#"pager: the working folder's path is not valid UTF-8 (\#(folder)/caf\xE9)"#),
                "\(inside.code) \(inside.stderr)")
        #expect(inside.stdout.isEmpty)
    }

    /// A run that only appends prints each page as it comes and keeps only the last one; one
    /// with a prepend prints at the end. Either way every item loaded is printed, whatever the
    /// manifest's max_size (a run printed only the pages max_size left), and an incomplete last
    /// page loaded again prints only the items it gained.
    @Test(arguments: [["--append", "6"], ["--refresh", "--append", "1", "--retry", "--append", "4"], ["--append", "6", "--prepend", "1"]])
    func run_printsEveryItemLoaded_once_whateverMaxSize(_ steps: [String]) async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 45, to: folder + "/data.jsonl")
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 10, "max_size": 20}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["run", folder + "/m.json"] + steps)
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").map(String.init) == (0..<45).map { #"{"n":\#($0)}"# })
        #expect(result.stderr.contains("45 items in 5 pages"), "\(result.stderr)")
    }

    /// Found by a probe: an incomplete last page loaded again was printed from where its
    /// printing stopped, as if it only gained items; when the data had changed, the item that
    /// moved there was never printed, nor the new version of one edited. A page loaded again
    /// that changed is printed again whole (said on stderr); one that only grew, its new items.
    @Test func anIncompleteLastPage_loadedAgainChanged_isPrintedAgainWhole() async throws {
        // Offsets 0, 1, 2 then 3, 4 (short: its next key, 6, is the key chain's); from the third
        // fetch on, the first item is gone and the others edited: the reload of offset 3 holds
        // 4, 5, 6 (as "v": "b"), then offset 6 holds 7, 8, and its reload the same.
        let folder = scratchFolder()
        try """
        {"source": {"plugin": "\(try await fixturePlugin("interceptor_work"))", "id": "offsets", "config": {"count": 5, "change_at": 3, "count_after": 8}},
         "page_size": 3}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["run", folder + "/m.json", "--refresh", "--append", "4"])
        #expect(result.code == 0, "\(result.stderr)")
        let edited = (4...8).map { #"{"n":\#($0),"v":"b"}"# }
        #expect(result.stdout.split(separator: "\n").map(String.init) == (0...4).map { #"{"n":\#($0)}"# } + edited, "\(result.stdout)")
        #expect(result.stderr.contains(#"run: the last page (key "3"), loaded again, changed items printed already: it is printed again whole"#),
                "\(result.stderr)")
    }

    /// pager links FoundationEssentials only; a Swift plugin that links Foundation (the example
    /// delay, answering from a Dispatch timer) once left the run waiting for ever after its
    /// summary, to resume on a main queue no one served any more.
    /// A plugin's log line that names the plugin itself is not prefixed with its name again
    /// ("[error] jsonlines: jsonlines: the host refused ...").
    @Test func aPluginsLogLine_namesItOnce() async throws {
        let folder = scratchFolder()
        try "{\"n\":1}\nnot json\n".write(toFile: folder + "/data.jsonl", atomically: true, encoding: .utf8)
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 10}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["run", folder + "/m.json"])
        #expect(result.code == 1)
        #expect(result.stderr.contains("] jsonlines: the host refused the page"), "\(result.stderr)")
        #expect(!result.stderr.contains("jsonlines: jsonlines:"), "\(result.stderr)")
    }

    @Test func aPluginThatBringsFoundationIn_doesNotStallTheRun() async throws {
        let delay = #"[{"plugin": "example-plugins", "id": "delay", "config": {"delay_ms": 5}}]"#
        let result = try await run(pager, ["run", try manifest(items: 5, pageSize: 5, interceptors: delay)], deadline: .seconds(60))
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 5)
    }

    @Test func validate_loadsEverything_andFetchesNothing() async throws {
        let result = try await run(pager, ["validate", try manifest(items: 5)])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.contains("source: jsonlines"))
        #expect(result.stdout.contains("interceptor: cache"))
        #expect(!result.stderr.contains("page refresh"))
    }

    /// A health check that does not answer within call_timeout_ms (else timeout_ms) is
    /// unhealthy, said so, exit 1: in process, it held validate for as long as it took.
    @Test(.timeLimit(.minutes(3)))
    func validate_boundsAHealthCheckThatDoesNotAnswer() async throws {
        let lifecycle = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c")
        let folder = scratchFolder()
        writeJSONLines(count: 5, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "\(lifecycle)", "config": {"health_sleep_ms": 600000}}], "timeout_ms": 500}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["validate", folder + "/m.json"], deadline: .seconds(30))
        #expect(result.code == 1, "\(result.stdout) \(result.stderr)")
        #expect(result.stdout.contains("1 plugin cannot serve now"), "\(result.stdout)")
        #expect(result.stdout.contains(": unhealthy (no answer within 500 ms)"), "\(result.stdout)")
    }

    /// An extension table whose function is NULL is not offered, and validate says so (it was
    /// taken without a word: the health check went unasked, and validate said ok).
    @Test func anExtensionTableWithoutItsFunction_isSaidToBeNotOffered() async throws {
        let path = try manifest(items: 5, interceptors: #"[{"plugin": "\#(try await fixturePlugin("null_extension"))"}]"#)
        let result = try await run(pager, ["validate", path])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stderr.contains(#"null-extension: get_extension("paging.health/1") answered a table whose function is NULL: "#
                                       + "the extension is taken as not offered"), "\(result.stderr)")
    }

    @Test func badInput_exitsWith2_andOneClearLine() async throws {
        let bad = try manifest(items: 5, pageSize: 0)
        let result = try await run(pager, ["validate", bad])
        #expect(result.code == 2)
        #expect(result.stderr == "pager: \(bad): $.page_size: 0 is out of range; expected 1 to 100000\n")
        let unknown = try await run(pager, ["frobnicate"])
        #expect(unknown.code == 2)
        let missing = try await run(pager, ["run"])
        #expect(missing.code == 2)
        #expect(missing.stderr.contains("a manifest is required"))
    }

    /// `--version` names the plugin ABI and the host's extensions; `--` ends the options, so a
    /// manifest whose name starts with `-` can be named.
    @Test func version_andTheEndOfOptions() async throws {
        let version = try await run(pager, ["--version"])
        #expect(version.code == 0)
        #expect(version.stdout.hasPrefix("pager: plugin ABI 1."), "\(version.stdout)")
        #expect(version.stdout.contains("paging.log-level/1"))
        #expect(try await run(pager, ["version", "extra"]).code == 2)

        let path = try manifest(items: 5)
        let folder = (path as NSString).deletingLastPathComponent
        try FileManager.default.moveItem(atPath: path, toPath: folder + "/-m.json")
        let unnamed = try await run("/usr/bin/env", ["-C", folder, pager, "run", "--refresh", "-m.json"])
        #expect(unnamed.code == 2 && unnamed.stderr.contains("run: unknown option '-m.json'"), "\(unnamed.stderr)")
        let named = try await run("/usr/bin/env", ["-C", folder, pager, "run", "--refresh", "--", "-m.json"])
        #expect(named.code == 0, "\(named.stderr)")
        #expect(named.stdout.split(separator: "\n").count == 5)
        let twice = try await run("/usr/bin/env", ["-C", folder, pager, "validate", "--", "-m.json", "--quiet"])
        #expect(twice.code == 2 && twice.stderr.contains("one operand only; got '-m.json' and '--quiet'"), "\(twice.stderr)")

        // Found by a probe: "--append=3" was an unknown option where "--stats=json" was one.
        let attached = try await run("/usr/bin/env", ["-C", folder, pager, "run", "--refresh", "--append=1", "--", "-m.json"])
        #expect(attached.code == 0 && attached.stdout.split(separator: "\n").count == 5, "\(attached.stderr)")
        let valueless = try await run("/usr/bin/env", ["-C", folder, pager, "run", "--refresh=3", "--", "-m.json"])
        #expect(valueless.code == 2 && valueless.stderr.contains("run: --refresh takes no value; got '--refresh=3'"), "\(valueless.stderr)")
    }

    /// A flag given twice, or with one it excludes, was taken last-one-wins without a word
    /// (`-v -q` ran quiet, `--config` with `--config-file` used the file): each is bad input,
    /// named before any value is read. Steps repeat, as before.
    @Test func aRepeatedFlag_orTwoThatExcludeEachOther_isBadInput_namingBoth() async throws {
        let path = try manifest(items: 5)
        let cases: [([String], String)] = [
            (["validate", "-v", "-q", path], "validate: -v and -q cannot be given together; give one of them"),
            (["run", path, "--quiet", "--verbose"], "run: --quiet and --verbose cannot be given together; give one of them"),
            (["serve", "-v", "--verbose", path], "serve: -v and --verbose are the same option; give it once"),
            (["serve", "--port", "8080", "--port=9090", path], "serve: --port given twice; give it once"),
            (["run", path, "--stats", "--stats=json"], "run: --stats given twice; give it once"),
            (["run", path, "--full", "--full"], "run: --full given twice; give it once"),
            (["check", "--config", "{}", "--config-file", path, "lib.so"],
             "check: --config and --config-file cannot be given together; give one of them"),
            (["check", "--timeout-ms", "5", "--timeout-ms", "6", "lib.so"], "check: --timeout-ms given twice; give it once"),
            (["browse", "--isolate-all", "--isolate-all", path], "browse: --isolate-all given twice; give it once"),
        ]
        for (arguments, message) in cases {
            let result = try await run(pager, arguments)
            #expect(result.code == 2 && result.stderr == "pager: \(message)\n", "\(arguments): \(result.code) \(result.stderr)")
            #expect(result.stdout.isEmpty, "\(arguments)")
        }
        let steps = try await run(pager, ["run", path, "--refresh", "--append", "1", "--append=1"])
        #expect(steps.code == 0 && steps.stdout.split(separator: "\n").count == 5, "\(steps.stderr)")
    }

    /// A streaming run holds one page: the pages it dropped cannot be prepended again when the
    /// source gives no previous keys, which fails nothing (the run stopped, exit 1, when that
    /// state was first said).
    @Test func aStreamingRun_ofASourceWithoutPreviousKeys_loadsEveryPage() async throws {
        let folder = scratchFolder()
        try """
        {"source": {"plugin": "\(try await fixturePlugin("numbered_source"))", "config": {"count": 50, "refresh_key": 0, "prev_keys": false}},
         "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["run", folder + "/m.json", "--refresh", "--append", "3"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 40, "\(result.stderr)")
        #expect(!result.stderr.contains("failed"), "\(result.stderr)")
    }

    /// Found by a probe: --full with a manifest that keeps no incremental value was taken
    /// without a word.
    @Test func full_withoutIncrementalSettings_isBadInput() async throws {
        let path = try manifest(items: 5)
        let result = try await run(pager, ["run", path, "--full"])
        #expect(result.code == 2 && result.stderr.contains("run: --full: \(path) has no \"incremental\" settings, so every run is full already"),
                "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    @Test func runtimeFailure_exitsWith1_andKeepsWhatWasLoaded() async throws {
        let folder = scratchFolder()
        let never = try await fixturePlugin("never_complete")
        try """
        {"source": {"plugin": "\(never)"}, "timeout_ms": 100}
        """.write(toFile: folder + "/never.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["run", folder + "/never.json"])
        #expect(result.code == 1)
        #expect(result.stderr.contains("refresh failed"))
        #expect(result.stderr.contains("timeout"))
    }

    @Test func aFailedLoad_exitsWith1_evenWhenAnAppendRanAsTheFirstRefresh() async throws {
        let folder = scratchFolder()
        try """
        {"source": {"plugin": "\(try await fixturePlugin("never_complete"))"}, "timeout_ms": 100}
        """.write(toFile: folder + "/never.json", atomically: true, encoding: .utf8)
        for step in ["--append", "--prepend"] {
            let result = try await run(pager, ["run", folder + "/never.json", step, "2"])
            #expect(result.code == 1, "\(step): \(result.stderr)")
            #expect(result.stderr.contains("refresh failed"))
        }
    }

    @Test func retry_loadsAgainAfterAFailure_andSucceeds() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 25, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "\(try await fixturePlugin("flaky"))", "config": {"fail_first": 1}}], "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pager, ["run", folder + "/m.json", "--refresh", "--append", "1", "--retry", "--append", "1"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stderr.contains("refresh failed"))
        #expect(result.stdout.split(separator: "\n").count == 20, "the refresh retried, then one append")
        // The retry says what it loaded, as every load does (it said nothing).
        #expect(result.stderr.contains("refresh (retry): +10 items, 10 in all"), "\(result.stderr)")
        #expect(result.stderr.contains("append: +10 items, 20 in all"), "\(result.stderr)")
    }

    /// A failure that says when to try again (a rate limit's refusal) was retried at once by
    /// --retry, and refused again (found by a probe): the retry waits as it said, or, past a
    /// minute, is not made.
    @Test func retry_waitsForTheRetryHint_thenSucceeds() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 25, to: folder + "/data.jsonl")
        func manifest(perSecond: Double) throws -> String {
            let path = folder + "/m\(perSecond).json"
            try """
            {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
             "interceptors": [{"plugin": "rate-limit", "config": {"per_second": \(perSecond), "max_wait_ms": 0}}], "page_size": 10}
            """.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
        let clock = ContinuousClock()
        let start = clock.now
        let waited = try await run(pager, ["run", try manifest(perSecond: 1), "--refresh", "--append", "1", "--retry"])
        #expect(waited.code == 0, "\(waited.stderr)")
        #expect(waited.stderr.contains("append failed") && waited.stderr.contains("retry: waiting "), "\(waited.stderr)")
        #expect(waited.stderr.contains("append (retry): +10 items, 20 in all"), "\(waited.stderr)")
        #expect(clock.now - start >= .milliseconds(500))
        let tooLong = try await run(pager, ["run", try manifest(perSecond: 0.001), "--refresh", "--append", "1", "--retry"])
        #expect(tooLong.code == 1, "\(tooLong.stderr)")
        #expect(tooLong.stderr.contains("retry: the failure says to retry after 17 min, more than 60 s; not retried"), "\(tooLong.stderr)")
    }

    @Test func plugins_listsEveryPluginWithItsDescriptor() async throws {
        let result = try await run(pager, ["plugins", productsFolder])
        #expect(result.code == 0)
        for id in ["jsonlines", "logging", "cache", "sqlite-store"] {
            #expect(result.stdout.contains("\(id)\t"), "\(id) missing from \(result.stdout)")
        }
        // A file is not a folder (it said "no such folder").
        let file = try await run(pager, ["plugins", productsFolder + "/libjsonlines.so"])
        #expect(file.code == 2 && file.stderr.contains("libjsonlines.so: not a folder"), "\(file.stderr)")
    }

    /// Two descriptors sharing an id are refused for one reason, said once (it was said once a
    /// descriptor); the library's other plugin is listed.
    @Test func plugins_saysADuplicateIdOnce() async throws {
        let folder = scratchFolder()
        try FileManager.default.copyItem(atPath: try await fixturePlugin("duplicate_ids"), toPath: folder + "/libduplicate_ids.so")
        let result = try await run(pager, ["plugins", folder])
        #expect(result.code == 0)
        #expect(result.stdout.hasPrefix("solo\t"), "\(result.stdout)")
        let said = result.stderr.split(separator: "\n").filter { $0.contains("have the id 'twin'") }
        #expect(said.count == 1, "\(result.stderr)")
    }

    @Test func everyCommand_hasHelp() async throws {
        for command in ["run", "validate", "plugins"] {
            let result = try await run(pager, [command, "--help"])
            #expect(result.code == 0)
            #expect(result.stdout.hasPrefix("usage: pager \(command)"))
        }
        #expect(try await run(pager, ["--help"]).stdout.contains("commands:"))
    }
}
