import Foundation
import Paging
import PagingHost
import Testing

/// What the built `pager` writes, against plugins and outputs that work against it: standard
/// output that cannot be written, plugins that print to it, items spread over lines, and log
/// lines or failures that try to forge the host's own lines or flood them.
@Suite("pager's output")
struct PagerOutputTests {
    /// A folder with `m.json`: the source `plugin` with `config`, and `interceptors`.
    func manifest(_ plugin: String, config: String = "{}", interceptors: String = "", more: String = "") throws -> String {
        let folder = scratchFolder()
        writeJSONLines(count: 30, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "\(plugin)", "config": \(config)}, "interceptors": [\(interceptors)], "page_size": 10\(more)}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return folder + "/m.json"
    }

    /// Runs `pager arguments` with standard output redirected by `sh` (`>/dev/full`, `>&-`).
    func runRedirected(_ redirection: String, _ arguments: [String]) async throws -> ProgramResult {
        try await run("/bin/sh", ["-c", #"exec "$0" "$@" "# + redirection, pagerBinary] + arguments)
    }

    // MARK: - Standard output that cannot be written

    @Test(arguments: [(">/dev/full", "No space left on device"), (">&-", "Bad file descriptor")])
    func run_whenStandardOutputCannotBeWritten_exits1_withOneLineSayingWhy(_ redirection: String, _ reason: String) async throws {
        let result = try await runRedirected(redirection, ["run", try manifest("jsonlines", config: #"{"path": "data.jsonl"}"#)])
        #expect(result.code == 1 && !result.signaled, "\(result.code) signaled: \(result.signaled)\n\(result.stderr)")
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix("pager:") } == ["pager: cannot write to standard output: \(reason)"], "\(result.stderr)")
        #expect(!result.stderr.contains("Fatal error"))
    }

    @Test func help_toAFullDevice_exits1() async throws {
        let result = try await runRedirected(">/dev/full", ["--help"])
        #expect(result.code == 1 && !result.signaled)
        #expect(result.stderr == "pager: cannot write to standard output: No space left on device\n")
    }

    /// A reader that went away (EPIPE, SIGPIPE ignored) is no failure: the run ends as it would
    /// have, without a word about it.
    /// On a terminal, an item's C1 controls (U+0080 to U+009F, raw in a JSON string) are
    /// written as \u escapes, the same JSON: some terminals take U+009B for ESC [ (a probe sent
    /// a screen clear and a window title through `pager run`). So are the bidirectional
    /// controls, which reordered what the terminal showed (a probe: U+202E went raw). Elsewhere
    /// the bytes go as they are.
    @Test func run_onATerminal_escapesC1Controls_elsewhereWritesTheBytes() async throws {
        let path = try manifest("jsonlines", config: #"{"path": "c1.jsonl"}"#)
        let item = "{\"name\":\"c1 \u{9B}2J \u{9D}0;x\u{9C} é \u{202E}fdp.exe\u{202C} \u{2066}— \u{61C}\"}"
        try (item + "\n").write(toFile: URL(fileURLWithPath: path).deletingLastPathComponent().path + "/c1.jsonl", atomically: true, encoding: .utf8)
        let terminal = try await run("/usr/bin/script", ["-qec", "\(pagerBinary) run \(path) 2>/dev/null", "/dev/null"])
        #expect(terminal.stdout.contains(#"{"name":"c1 \u009b2J \u009d0;x\u009c é \u202efdp.exe\u202c \u2066— \u061c"}"#), "\(terminal.stdout.debugDescription)")
        let piped = try await run(pagerBinary, ["run", path])
        #expect(piped.stdout == item + "\n", "\(piped.stdout.debugDescription)")
    }

    @Test func run_toAPipeWithoutReader_endsQuietly() async throws {
        let result = try await runWithBrokenPipe(["run", try manifest("jsonlines", config: #"{"path": "data.jsonl"}"#)])
        #expect(result.status == 0 && !result.signaled, "\(result.status) signaled: \(result.signaled)\n\(result.stderr)")
        #expect(!result.stderr.contains("cannot write"), "\(result.stderr)")
        #expect(result.stderr.contains("10 items in 1 page"), "\(result.stderr)")
    }

    /// Items that did not reach standard output were not received: an incremental run keeps
    /// no state for them (the next run would start after them; it kept it, exit 1 or even 0),
    /// and nothing more is loaded once a write failed (every page was).
    @Test(arguments: [">/dev/full", ">&-", "broken pipe"])
    func incrementalRun_whoseItemsDoNotAllReachStandardOutput_keepsNoState_andStopsLoading(_ output: String) async throws {
        let file = try manifest("jsonlines", config: #"{"path": "data.jsonl"}"#, more: #", "incremental": {"cursor": "/n"}"#)
        let arguments = ["run", file, "--refresh", "--append", "2"]
        let (code, stderr): (Int32, String)
        if output == "broken pipe" {
            let result = try await runWithBrokenPipe(arguments)
            #expect(!result.signaled)
            (code, stderr) = (result.status, result.stderr)
        } else {
            let result = try await runRedirected(output, arguments)
            #expect(!result.signaled)
            (code, stderr) = (result.code, result.stderr)
        }
        #expect(code == 1, "\(stderr)")
        #expect(stderr.contains("incremental: the state is left as it was: not every item loaded reached standard output"), "\(stderr)")
        #expect(!FileManager.default.fileExists(atPath: file + ".state"), "\(stderr)")
        #expect(!stderr.contains("append: +"), "loads went on after the output failed:\n\(stderr)")
    }

    /// The incremental value is shown as JSON: a number bare (it was quoted, as if a string),
    /// a string quoted with its control characters escaped (one in the state file went out raw).
    @Test func incrementalValues_areShownAsJSON() async throws {
        let file = try manifest("jsonlines", config: #"{"path": "data.jsonl"}"#, more: #", "incremental": {"cursor": "/n"}"#)
        let first = try await run(pagerBinary, ["run", file, "--refresh", "--append", "2"])
        #expect(first.code == 0 && first.stderr.contains("incremental: kept {state.since} = 29 in \(file).state"), "\(first.stderr)")
        let second = try await run(pagerBinary, ["run", file])
        #expect(second.stderr.contains("incremental: {state.since} = 29\n"), "\(second.stderr)")
        try #"{"default": {"since": "x\u001b[2Jy"}}"#.write(toFile: file + ".state", atomically: true, encoding: .utf8)
        let shown = try await run(pagerBinary, ["validate", file])
        #expect(shown.stdout.contains(#"incremental: {state.since} = "x\u001b[2Jy" (kept in"#), "\(shown.stdout)")
        #expect(!shown.stdout.unicodeScalars.contains("\u{1B}"))
        // C1 and bidirectional controls, which JSON leaves as they are (a probe: validate wrote
        // them raw, a CSI to some terminals).
        try "{\"default\": {\"since\": \"x\u{9B}31my\u{202E}\"}}".write(toFile: file + ".state", atomically: true, encoding: .utf8)
        let controls = try await run(pagerBinary, ["validate", file])
        #expect(controls.stdout.contains(#"incremental: {state.since} = "x\u009b31my\u202e" (kept in"#), "\(controls.stdout)")
    }

    /// A state file that cannot be read names the manifest and its field too (a probe: "pager:
    /// /tmp: is a folder, expected a state file").
    @Test func aStateFileThatCannotBeRead_namesTheManifestAndItsField() async throws {
        let stateFolder = scratchFolder()
        let file = try manifest("jsonlines", config: #"{"path": "data.jsonl"}"#,
                                more: #", "incremental": {"cursor": "/n", "state_file": "\#(stateFolder)"}"#)
        for command in ["run", "validate"] {
            let result = try await run(pagerBinary, [command, file])
            #expect(result.code == 2 && result.stderr.hasPrefix("pager: \(file): $.incremental.state_file: \(stateFolder): "),
                    "\(command): \(result.stderr)")
        }
    }

    /// `check` and `validate` quote a plugin's id and failures escaped, and a usage error the
    /// argument it names (a probe: check's table and validate's lines wrote them raw, so a
    /// plugin retitled the terminal and forged lines; so did an unknown option).
    @Test func checkValidateAndUsageErrors_escapeWhatTheyQuote() async throws {
        let plugin = try await fixturePlugin("hostile_text")
        let hostileID = ["HOSTILE_TEXT_ID_BYTES": "60"]
        let checked = try await run(pagerBinary, ["check", plugin, "--config", #"{"fail": "\u001b]0;pwned\u0007\u001b[2J"}"#],
                                    environment: hostileID)
        let validated = try await run(pagerBinary, ["validate", try manifest(plugin)], environment: hostileID)
        let usage = try await run(pagerBinary, ["run", try manifest(plugin), "--x\u{1B}]0;pwned\u{07}"])
        for result in [checked, validated, usage] {
            let output = result.stdout + result.stderr
            #expect(!output.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" }, "\(output)")
            #expect(!output.split(separator: "\n").contains { $0.hasPrefix("[info] other-plugin") }, "\(output)")
        }
        #expect(checked.stdout.contains(#"internal: \u001b]0;pwned\u0007\u001b[2J"#), "\(checked.stdout)")
        #expect(validated.stdout.contains(#"source: hostile-text\n[info] other-plugin"#), "\(validated.stdout)")
        #expect(usage.code == 2 && usage.stderr.contains(#"unknown option '--x\u001b]0;pwned\u0007'"#), "\(usage.stderr)")
    }

    // MARK: - Plugins that print

    /// A source and an interceptor that printf, puts and write(1, ...) in create and in every
    /// call: standard output holds the items alone, and what they printed is on standard error.
    @Test func pluginsWritingToStandardOutput_leaveTheItemsAlone() async throws {
        let plugin = try await fixturePlugin("stdout_writer")
        let file = try manifest(plugin, config: #"{"count": 25}"#, interceptors: #"{"plugin": "\#(plugin)"}"#)
        let result = try await run(pagerBinary, ["run", file, "--refresh", "--append", "5"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == (0..<25).map { #"{"n":\#($0)}"# + "\n" }.joined(), "\(result.stdout)")
        for junk in ["junk from printf in create_source", "junk from puts", "junk from write(1)",
                     "junk from printf in intercept", "junk from printf in fetch, never flushed"] {
            #expect(result.stderr.contains(junk), "\(junk) is missing from stderr")
        }
        let validated = try await run(pagerBinary, ["validate", file])
        #expect(validated.code == 0, "\(validated.stderr)")
        #expect(validated.stdout.hasPrefix(file + ": ok\n") && !validated.stdout.contains("junk"), "\(validated.stdout)")
    }

    // MARK: - Items

    /// Items with CR and LF between their tokens: each comes out on one line, with those bytes
    /// as spaces and every other byte as the plugin handed it.
    @Test func itemsSpreadOverLines_comeOutOneALine() async throws {
        let result = try await run(pagerBinary, ["run", try manifest(try await fixturePlugin("hostile_text"))])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout == "{   \"n\": 0,    \"s\": \"a b\" }\n[1, 2, 3]\n \"text é \u{2028}\"  \n", "\(result.stdout)")
        for line in result.stdout.split(separator: "\n") {
            #expect(JSONValidator.validate(Array(line.utf8)) == nil, "\(line)")
        }
    }

    /// A raw newline inside a string is not JSON: the host refuses such an item where it crosses
    /// the ABI, so no item reaches the output with one.
    @Test func anItemWithARawNewlineInAString_isRefused() async throws {
        for bad in ["{\"s\":\"a\nb\"}", "[\"a\rb\"]", "\"\n\""] {
            #expect(JSONValidator.validate(Array(bad.utf8)) != nil, "\(bad) was accepted")
        }
        #expect(JSONValidator.validate(Array("{\n\"s\":\r\n\"a b\"\n}".utf8)) == nil)

        let log = LogRecorder()
        let source = try PluginLibrary.open(path: try await fixturePlugin("hostile_text"))
            .makeSource(config: .object([("items", .string("raw_newline"))]), sink: log.sink)
        let pager = Pager(source: source)
        let error = await #expect(throws: PluginError.self) {
            try await pager.load(pager.refreshRequest(params: params(pageSize: 10)))
        }
        #expect(error?.status == .invalidArgument)
        #expect(log.contains("not valid JSON: unescaped control character U+000A in a string"), "\(log.messages)")

        let result = try await run(pagerBinary, ["run", try manifest(try await fixturePlugin("hostile_text"), config: #"{"items": "raw_newline"}"#)])
        #expect(result.code == 1)
        #expect(result.stdout.isEmpty, "\(result.stdout)")
    }

    // MARK: - Plugins' text on standard error

    /// A log line and a failure with newlines, ESC sequences, BEL and a C1 control: each stays
    /// on its own line, escaped; nothing starts a line the plugin made up, nothing reaches the
    /// terminal raw.
    @Test func pluginText_cannotForgeLinesOrSteerTheTerminal() async throws {
        let forged = #"hi\n[info] other-plugin: forged \u001b[31mred \u009b1m end\u0007"#
        let plugin = try await fixturePlugin("hostile_text")
        let logged = try await run(pagerBinary, ["run", try manifest(plugin, config: #"{"log": "\#(forged)"}"#)])
        #expect(logged.code == 0, "\(logged.stderr)")
        #expect(logged.stderr.split(separator: "\n").first == "[info] hostile-text: \(forged)", "\(logged.stderr)")

        let failed = try await run(pagerBinary, ["run", try manifest(plugin, config: #"{"fail": "\#(forged)"}"#)])
        #expect(failed.code == 1)
        #expect(failed.stderr.contains("refresh failed: hostile-text (\(plugin)): internal: \(forged)\n"), "\(failed.stderr)")

        let refused = try await run(pagerBinary, ["run", try manifest(plugin, config: #"{"create_fail": "\#(forged)"}"#)])
        #expect(refused.code == 2)
        #expect(refused.stderr.hasSuffix("could not be created: invalid config: \(forged)\n"), "\(refused.stderr)")

        // An append that fails: its line, and the run's last line, which names the states.
        let appendFailed = try await run(pagerBinary, ["run", try manifest(plugin, config: #"{"fail": "\#(forged)", "fail_appends": true}"#),
                                                       "--refresh", "--append", "1"])
        #expect(appendFailed.code == 1)
        #expect(appendFailed.stderr.contains("append failed: hostile-text (\(plugin)): internal: \(forged)\n"), "\(appendFailed.stderr)")
        #expect(appendFailed.stderr.contains("append: failed(hostile-text (\(plugin)): internal: \(forged))\n"), "\(appendFailed.stderr)")

        for result in [logged, failed, refused, appendFailed] {
            #expect(!result.stderr.split(separator: "\n").contains { $0.hasPrefix("[info] other-plugin") }, "\(result.stderr)")
            #expect(!result.stderr.unicodeScalars.contains { $0 == "\u{1B}" || $0 == "\u{07}" || $0 == "\u{9B}" })
        }
    }

    struct Flood: Sendable, CustomStringConvertible {
        let description: String
        let config: String
        var environment: [String: String] = [:]
        /// Run with `--isolate-all`, pages bounded to 1 MB (so a frame of the child to ~17 MB).
        var isolated = false
        let code: Int32
        /// How the lines that carry the flood start.
        let lines: [String]
        /// The bytes of plugin text in the longest of them.
        let bytes: Int
    }

    static let floods = [
        Flood(description: "a 10 MB log message", config: #"{"log_bytes": 10000000}"#, code: 0,
              lines: ["[info] hostile-text: "], bytes: 10_000_000),
        Flood(description: "a 10 MB fetch failure", config: #"{"fail_bytes": 10000000}"#, code: 1,
              lines: ["refresh failed: hostile-text "], bytes: 10_000_000),
        Flood(description: "a 10 MB create failure", config: #"{"create_fail_bytes": 10000000}"#, code: 2,
              lines: ["pager: "], bytes: 10_000_000),
        // The child sent the whole line: its frame, past the bound pages set, was refused and
        // the child killed ("a frame of 30000059 bytes"), the run failed (a probe's find).
        Flood(description: "a 30 MB log message, isolated", config: #"{"log_bytes": 30000000}"#, isolated: true, code: 0,
              lines: ["[info] hostile-text: "], bytes: 30_000_000),
        Flood(description: "a 1 MB plugin id", config: #"{"log": "hello", "create_fail": "no"}"#,
              environment: ["HOSTILE_TEXT_ID_BYTES": "1000000"], code: 2,
              lines: [#"[info] hostile-text\n[info] other-plugin: forged id xxx"#, "pager: "], bytes: 1_000_000),
    ]

    /// Each line that carries the text is one line, escaped, at most a few KB long, and says how
    /// much was left out.
    @Test(arguments: floods)
    func aFloodOfPluginText_isCutToOneBoundedLine(_ flood: Flood) async throws {
        let file = try manifest(try await fixturePlugin("hostile_text"), config: flood.config,
                                more: flood.isolated ? #", "max_page_bytes": 1000000"# : "")
        let result = try await run(pagerBinary, ["run", file] + (flood.isolated ? ["--isolate-all"] : []), environment: flood.environment)
        report("\(flood): pager run took \(Int(result.elapsed.milliseconds)) ms, stderr \(result.stderr.utf8.count) bytes")
        #expect(result.code == flood.code && !result.signaled, "\(result.code)")
        let lines = result.stderr.split(separator: "\n")
        for start in flood.lines {
            let matching = lines.filter { $0.hasPrefix(start) }
            #expect(matching.count == 1, "\(start): \(matching.count) lines")
            guard let line = matching.first else { continue }
            #expect(line.utf8.count < 6 * 4_096 + 512, "\(start): \(line.utf8.count) bytes")
            // The note counts what was left out: all but at most 4 KB of the text.
            let notes = line.matches(of: /… \((\d+) more bytes\)/)
            #expect(notes.count == 1, "\(start): \(notes.count) notes")
            let left = notes.first.flatMap { Int($0.output.1) } ?? 0
            #expect(left >= flood.bytes - 4_096 && left < flood.bytes, "\(start): \(left) bytes left out")
        }
        #expect(lines.count <= 4, "\(lines.count) lines")
        #expect(!result.stderr.unicodeScalars.contains { $0.value < 0x20 && $0 != "\n" || (0x7F...0x9F).contains($0.value) })
    }

    // MARK: - The escaping

    @Test func oneLine_escapesEveryControl_andCutsBetweenCharacters() {
        #expect(OneLine.escape("a\n\r\t\u{0}\u{1B}\u{7F}\u{80}\u{9B}\u{9F}é\u{A0}\u{2028}z")
            == #"a\n\r\t\u0000\u001b\u007f\u0080\u009b\u009fé"# + "\u{A0}\u{2028}z")
        #expect(OneLine.escape("plain", limit: 5) == "plain")
        #expect(OneLine.escape("aé", limit: 2) == "a … (2 more bytes)")
        #expect(OneLine.escape("\n\n\n", limit: 1) == #"\n … (2 more bytes)"#)
        #expect(OneLine.escape("", limit: 0) == "")
        // A text the host cut already: its note counts what the host left out, not itself.
        #expect(OneLine.escape("abcdef … (100 more bytes)", limit: 2) == "ab … (104 more bytes)")
        #expect(OneLine.escape("abcdef … (100 more bytes)") == "abcdef … (100 more bytes)")
        #expect(OneLine.escape("abcdef … (x more bytes)", limit: 2) == "ab … (23 more bytes)")
        // The bidirectional controls (found by a probe: a plugin's U+202E reordered its log line
        // on the terminal; browse had replaced them), and their neighbours, which are left.
        #expect(OneLine.escape("a\u{202E}b\u{2066}c\u{200F}d\u{061C}e\u{2026}f\u{2028}g\u{0627}h\u{2069}")
            == #"a\u202eb\u2066c\u200fd\u061ce"# + "\u{2026}f\u{2028}g\u{0627}h" + #"\u2069"#)
    }

    /// A plugin's message is taken up to a bound, cut between characters, the rest counted.
    @Test func pluginMessage_isCutWhereTheHostTakesIt() {
        let message = "é" + String(repeating: "x", count: 99) + "é" + String(repeating: "y", count: 1_000)
        let cut = message.withCString { OneLine.cut($0, limit: 101) }
        #expect(cut == "é" + String(repeating: "x", count: 99) + " … (1002 more bytes)")
        #expect(message.withCString { OneLine.cut($0, limit: 5_000) } == message)
        #expect(OneLine.escape(cut, limit: 10) == "é" + String(repeating: "x", count: 8) + " … (1093 more bytes)")
    }

    /// A manifest error's description escapes the whole message, in one pass (it took 8.8 s for
    /// a 300 KB message when each escape copied what came before).
    @Test func manifestError_withA10MBMessage_isOneLine() {
        let message = String(repeating: "line\n\u{1B}[2J.", count: 1_000_000)
        let clock = ContinuousClock()
        let start = clock.now
        let description = ManifestError(file: "m.json", path: "$.source", message: message).description
        report("ManifestError.description of a 10 MB message: \(Int((clock.now - start).milliseconds)) ms")
        #expect(description.utf8.count == "m.json: $.source: ".utf8.count + 1_000_000 * #"line\n\u001b[2J."#.utf8.count)
        #expect(!description.contains("\n") && !description.contains("\u{1B}"))
    }
}

/// Runs `pager arguments` with SIGPIPE at its default action and standard output a pipe whose
/// read end is closed, so that every write to it raises SIGPIPE (pager ignores it) and fails
/// with EPIPE. Standard error goes to a file.
func runWithBrokenPipe(_ arguments: [String]) async throws -> (status: Int32, signaled: Bool, stderr: String) {
    let errorPath = scratchFolder() + "/stderr"
    _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
    return try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result {
                let process = Process()
                // SIGPIPE at its default action, as a shell starts a command: the test process
                // ignores it, which its children inherit (with it ignored, `| head -1` killed
                // pager by SIGPIPE everywhere but here, found by a probe).
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = ["python3", "-c", "import os, signal, sys; signal.signal(signal.SIGPIPE, signal.SIG_DFL); os.execv(sys.argv[1], sys.argv[1:])",
                                     pagerBinary] + arguments
                let ended = DispatchSemaphore(value: 0)
                process.terminationHandler = { _ in ended.signal() }
                let (pipe, errors) = try spawning {
                    let pipe = ExecSafePipe()
                    try pipe.read.close()
                    let errors = try FileHandle(forWritingTo: URL(fileURLWithPath: errorPath))
                    process.standardInput = FileHandle.nullDevice
                    process.standardOutput = pipe.write
                    process.standardError = errors
                    try process.run()
                    return (pipe, errors)
                }
                try? pipe.write.close()
                try? errors.close()
                ended.wait()
                return (process.terminationStatus, process.terminationReason == .uncaughtSignal,
                        try String(contentsOfFile: errorPath, encoding: .utf8))
            })
        }
    }
}
