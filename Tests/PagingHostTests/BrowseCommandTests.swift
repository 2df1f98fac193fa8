import Foundation
import Synchronization
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

    @Test func scrollsLoadsMoreAtTheEnd_andQuitsCleanly() async throws {
        let terminal = try Terminal("\(pager) browse \(try manifest(items: 35))")
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"1. {"n":0}"#) == true })
        // G moves to the last item loaded, which loads more; pressing it again once more has
        // come reaches the end.
        let reachedTheEnd = await terminal.waitFor { frame in
            guard let status = frame.status else { return false }
            if status.hasPrefix("35/35") && status.contains("end of data") { return true }
            if frame.cursorIsAboveTheLastItem { terminal.type("G") }
            return false
        }
        #expect(reachedTheEnd, "the end of the list loaded as the cursor reached it: \(terminal.lastFrame?.status ?? "no frame")")
        terminal.type("q")
        let (code, screen) = await terminal.exit()
        #expect(code == 0)
        let enter = screen.range(of: "\u{1B}[?1049h")
        let leave = screen.range(of: "\u{1B}[?1049l", options: .backwards)
        #expect(enter != nil && leave != nil && enter!.lowerBound < leave!.lowerBound, "the terminal is restored on exit")
    }

    /// An item's control characters never reach the terminal, escaped in its JSON (a name
    /// shown decoded) or raw (C1's U+009B is CSI to some terminals): each is drawn as U+FFFD.
    @Test func controlCharactersOfItems_neverReachTheTerminal() async throws {
        let folder = scratchFolder()
        try #"{"name": "A\u001b[2JB"}"# .appending("\n{\"s\": \"C\u{9B}2JD\"}\n")
            .write(toFile: folder + "/data.jsonl", atomically: true, encoding: .utf8)
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 10}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let terminal = try Terminal("\(pager) browse \(folder)/m.json")
        #expect(await terminal.waitForScreen { $0.contains("A\u{FFFD}[2JB") && $0.contains("C\u{FFFD}2JD") }, "\(terminal.screen)")
        terminal.type("q")
        let (code, screen) = await terminal.exit()
        #expect(code == 0)
        #expect(!screen.contains("\u{1B}[2J") && !screen.contains("\u{9B}"), "\(screen)")
    }

    /// Lines are cut by the columns the terminal gives them: a Chinese character takes two (a
    /// line of them, cut by characters, ran past the edge of the screen and wrapped), and the
    /// bidirectional controls are drawn as U+FFFD (they reordered what the terminal showed).
    @Test func wideCharactersAreCutByColumns_andBidiControlsNeverReachTheTerminal() async throws {
        let folder = scratchFolder()
        try "{\"name\": \"\(String(repeating: "中", count: 100))\"}\n{\"name\": \"abc\\u202Edef\"}\n{\"name\": \"e\u{301}\u{301}\"}\n"
            .write(toFile: folder + "/data.jsonl", atomically: true, encoding: .utf8)
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 10}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let terminal = try Terminal("\(pager) browse \(folder)/m.json")
        // 80 columns: "1. " and 38 characters of two columns, then the ellipsis.
        #expect(await terminal.waitFor { $0.cursorLine == "1. " + String(repeating: "中", count: 38) + "…" },
                "\(terminal.lastFrame?.cursorLine ?? "no frame")")
        #expect(await terminal.waitForScreen { $0.contains("2. abc\u{FFFD}def") && $0.contains("3. e\u{301}\u{301}") }, "\(terminal.screen)")
        terminal.type("q")
        let (code, screen) = await terminal.exit()
        #expect(code == 0)
        #expect(!screen.contains("\u{202E}"), "\(screen)")
    }

    /// A resized window is drawn again at once, to its new width (the frame kept the old size
    /// until a key or a page came).
    @Test func aResizedWindow_isDrawnAgainToItsNewSize() async throws {
        let folder = scratchFolder()
        try "{\"name\": \"\(String(repeating: "a", count: 200))\"}\n".write(toFile: folder + "/data.jsonl", atomically: true, encoding: .utf8)
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 10}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let terminal = try Terminal("\(pager) browse \(folder)/m.json")
        #expect(await terminal.waitFor { $0.cursorLine == "1. " + String(repeating: "a", count: 76) + "…" && $0.status?.contains("end of data") == true },
                "\(terminal.lastFrame?.cursorLine ?? "no frame")")
        try terminal.resize(rows: 12, columns: 40)
        #expect(await terminal.waitFor { $0.cursorLine == "1. " + String(repeating: "a", count: 36) + "…" },
                "\(terminal.lastFrame?.cursorLine ?? "no frame")")
        terminal.type("q")
        #expect(await terminal.exit().code == 0)
    }

    @Test func withMaxSize_theCursorStaysOnItsItem_asPagesAreDropped() async throws {
        let terminal = try Terminal("\(pager) browse \(try manifest(items: 200, maxSize: 40))")
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"{"n":0}"#) == true })
        // One line down at a time, each once the item below is loaded (a key on the last item
        // loaded stays there): pages dropped at the top must never move the cursor off its item.
        for n in 1...40 {
            #expect(await terminal.waitFor { $0.cursorIsAboveTheLastItem }, "\(terminal.lastFrame?.status ?? "no frame")")
            terminal.type("j")
            let moved = await terminal.waitFor { $0.cursorLine?.hasSuffix(#"{"n":\#(n)}"#) == true }
            #expect(moved, "line \(n): the cursor is on \(terminal.lastFrame?.cursorLine ?? "nothing")")
            if !moved { break }
        }
        terminal.type("q")
        #expect(await terminal.exit().code == 0)
    }

    /// With max_size a page, the cursor moving past the last item loads the next page (moving
    /// there after each page would drop the item on screen, so moving does it).
    @Test func withMaxSizeOfOnePage_movingPastTheEnd_loadsTheNextPage() async throws {
        let terminal = try Terminal("\(pager) browse \(try manifest(items: 35, maxSize: 10))")
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"{"n":0}"#) == true })
        // Down until the cursor is on an item of a page after the first (n of 10 and more).
        let reached = await terminal.waitFor { frame in
            if let n = frame.cursorLine?.split(separator: ":").last.flatMap({ Int($0.dropLast()) }), n >= 10 { return true }
            terminal.type("j")
            return false
        }
        #expect(reached, "the cursor is on \(terminal.lastFrame?.cursorLine ?? "nothing"), \(terminal.lastFrame?.status ?? "no status")")
        terminal.type("q")
        #expect(await terminal.exit().code == 0)
    }

    /// A manifest of `source` (a manifest object's text) with page size 10.
    func manifest(source: String, interceptors: String = "[]", maxSize: Int? = nil) throws -> String {
        let path = scratchFolder() + "/m.json"
        try #"{"source": \#(source), "interceptors": \#(interceptors), "page_size": 10\#(maxSize.map { #", "max_size": \#($0)"# } ?? "")}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// What plugins print (printf, puts, write(1, ...) in every fetch) never reaches the screen
    /// while browse draws, in its process or in an isolated plugin's: it garbled the list (found
    /// by a probe). It is written to standard error once the screen is left.
    @Test(arguments: [false, true]) func whatPluginsPrint_staysOffTheScreen_andIsShownAfterwards(_ isolated: Bool) async throws {
        let source = #"{"plugin": "\#(try await fixturePlugin("stdout_writer"))", "config": {"count": 30}}"#
        let terminal = try Terminal("\(pager) browse \(try manifest(source: source))\(isolated ? " --isolate-all" : "")")
        // The first page, and the next one the list loads ahead: two fetches that print.
        #expect(await terminal.waitFor { $0.status?.hasPrefix("1/20") == true }, "\(terminal.lastFrame?.status ?? "no frame")")
        terminal.type("q")
        let (code, screen) = await terminal.exit()
        #expect(code == 0)
        guard let enter = screen.range(of: "\u{1B}[?1049h"), let leave = screen.range(of: "\u{1B}[?1049l", options: .backwards) else {
            Issue.record("the screen was not entered and left: \(screen)")
            return
        }
        #expect(!screen[enter.upperBound..<leave.lowerBound].contains("junk"), "\(screen)")
        let after = screen[leave.upperBound...]
        #expect(after.contains("pager browse: written to standard output or standard error while browsing"), "\(after)")
        #expect(after.contains("junk from write(1)") && after.contains("junk from puts"), "\(after)")
    }

    @Test func aFailedPrepend_isShown() async throws {
        let source = #"{"plugin": "\#(try await fixturePlugin("numbered_source"))"}"#
        let terminal = try Terminal("\(pager) browse \(try manifest(source: source))", columns: 400)
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"{"n":5}"#) == true })
        terminal.type("k") // at the top: loads the page before, which overlaps
        let shown = await terminal.waitFor { $0.status?.contains("repeats the first 5 values") == true }
        #expect(shown, "\(terminal.lastFrame?.status ?? "no frame")")
        #expect(terminal.lastFrame?.status?.contains("(R to retry)") == true)
        terminal.type("q")
        #expect(await terminal.exit().code == 0)
    }

    @Test func capitalR_retriesTheLoadThatFailed() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 30, to: folder + "/data.jsonl")
        let source = #"{"plugin": "jsonlines", "config": {"path": "\#(folder)/data.jsonl"}}"#
        let flaky = #"[{"plugin": "\#(try await fixturePlugin("flaky"))", "config": {"fail_first": 1, "status": 6}}]"#
        let terminal = try Terminal("\(pager) browse \(try manifest(source: source, interceptors: flaky))", columns: 400)
        let failed = await terminal.waitFor { $0.status?.contains("injected failure of call 0") == true }
        #expect(failed, "\(terminal.lastFrame?.status ?? "no frame")")
        #expect(terminal.lastFrame?.status?.contains("(R to retry)") == true)
        // The plugin by its id, without its library's path (which cut the reason off).
        #expect(terminal.lastFrame?.status?.contains("error: flaky: ") == true && terminal.lastFrame?.status?.contains(".so") == false,
                "\(terminal.lastFrame?.status ?? "no frame")")
        // Found by a review: a key that moves past an end loaded there, and so retried a failed
        // load at every key. Only R does (a second later, still the failure).
        let frames = terminal.screen.components(separatedBy: "\u{1B}[H").count
        terminal.type("j")
        #expect(await terminal.waitForScreen { $0.components(separatedBy: "\u{1B}[H").count > frames })
        try await Task.sleep(for: .seconds(1))
        #expect(terminal.lastFrame?.status?.contains("injected failure of call 0") == true, "\(terminal.lastFrame?.status ?? "no frame")")
        terminal.type("R")
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"1. {"n":0}"#) == true && $0.status?.contains("error") == false },
                "\(terminal.lastFrame?.status ?? "no frame")")
        terminal.type("q")
        #expect(await terminal.exit().code == 0)
    }

    /// With max_size, the first pages are dropped as the cursor goes down; a source that gives
    /// no previous keys cannot load them again, and the status line says so at the top.
    @Test func withoutPreviousKeys_theTopSaysWhyItCannotScrollBack() async throws {
        let source = #"{"plugin": "\#(try await fixturePlugin("numbered_source"))", "config": {"count": 200, "refresh_key": 0, "prev_keys": false}}"#
        let terminal = try Terminal("\(pager) browse \(try manifest(source: source, maxSize: 30))", columns: 200)
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"{"n":0}"#) == true })
        for n in 1...40 {
            #expect(await terminal.waitFor { $0.cursorIsAboveTheLastItem })
            terminal.type("j")
            guard await terminal.waitFor({ $0.cursorLine?.hasSuffix(#"{"n":\#(n)}"#) == true }) else {
                Issue.record("line \(n): the cursor is on \(terminal.lastFrame?.cursorLine ?? "nothing")")
                break
            }
        }
        terminal.type("g")
        let said = await terminal.waitFor { $0.status?.contains("cannot scroll back: earlier pages were dropped") == true }
        #expect(said, "\(terminal.lastFrame?.status ?? "no frame")")
        #expect(terminal.lastFrame?.cursorLine?.hasSuffix(#"{"n":0}"#) == false, "the first page was dropped")
        terminal.type("q")
        #expect(await terminal.exit().code == 0)
    }

    /// A source that says its data changed (paging.invalidation/1) is refreshed around the
    /// highlighted item, which stays highlighted: the list now starts at the page the source
    /// names for it, so its line number changes.
    @Test func anInvalidatedSource_isRefreshedAroundTheHighlightedItem_whichStaysHighlighted() async throws {
        let trigger = scratchFolder() + "/invalidate"
        let source = #"{"plugin": "\#(try await fixturePlugin("interceptor_work"))", "id": "offsets", "config": {"count": 200, "invalidate_file": "\#(trigger)"}}"#
        let terminal = try Terminal("\(pager) browse \(try manifest(source: source))", columns: 200)
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"1. {"n":0}"#) == true })
        for n in 1...25 {
            #expect(await terminal.waitFor { $0.cursorIsAboveTheLastItem })
            terminal.type("j")
            guard await terminal.waitFor({ $0.cursorLine?.hasSuffix(#"{"n":\#(n)}"#) == true }) else {
                Issue.record("line \(n): the cursor is on \(terminal.lastFrame?.cursorLine ?? "nothing")")
                break
            }
        }
        #expect(terminal.lastFrame?.cursorLine?.hasSuffix(#"26. {"n":25}"#) == true)
        #expect(FileManager.default.createFile(atPath: trigger, contents: nil))
        let kept = await terminal.waitFor { frame in
            guard let line = frame.cursorLine else { return false }
            return line.hasSuffix(#"{"n":25}"#) && !line.hasSuffix(#"26. {"n":25}"#)
        }
        #expect(kept, "the cursor is on \(terminal.lastFrame?.cursorLine ?? "nothing")")
        terminal.type("q")
        #expect(await terminal.exit().code == 0)
    }

    @Test func ctrlC_quitsAndRestoresTheTerminal() async throws {
        let terminal = try Terminal("\(pager) browse \(try manifest(items: 5))")
        #expect(await terminal.waitFor { $0.cursorLine != nil })
        terminal.type("\u{03}")
        let (code, screen) = await terminal.exit()
        #expect(code == 0)
        #expect(screen.contains("\u{1B}[?1049l"))
        #expect(screen.contains("\u{1B}[?25h"), "the cursor is shown again")
    }

    @Test func sigterm_restoresTheTerminal() async throws {
        let terminal = try Terminal("\(pager) browse \(try manifest(items: 5))")
        #expect(await terminal.waitFor { $0.cursorLine != nil })
        terminal.signalCommand(SIGTERM)
        let (_, screen) = await terminal.exit()
        #expect(screen.contains("\u{1B}[?1049h"))
        #expect(screen.contains("\u{1B}[?1049l"))
    }

    /// Ctrl-z stops browse with the terminal restored, as the shell's job control expects; `fg`
    /// brings it back in raw mode, the screen drawn anew, the keys working. (Run under a shell
    /// with job control: a process group without one is never stopped.)
    @Test func ctrlZ_suspendsWithTheTerminalRestored_andFgBringsItBack() async throws {
        let shell = "bash --norc --noprofile -c 'set -m; \(pager) browse \(try manifest(items: 35)); echo stopped-$?; fg; echo exited-$?'"
        let terminal = try Terminal(shell)
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"1. {"n":0}"#) == true })
        terminal.type("j\u{1A}")
        #expect(await terminal.waitForScreen { $0.contains("stopped-148") }, "\(terminal.screen.suffix(300))")
        let stopped = terminal.screen
        let left = stopped.range(of: "\u{1B}[?1049l", options: .backwards)
        #expect(left != nil && left!.lowerBound < stopped.range(of: "stopped-148")!.lowerBound, "the terminal is restored before the stop")
        // Continued: the alternate screen again and a frame with the cursor where it was.
        #expect(await terminal.waitForScreen { screen in
            guard let resumed = screen.range(of: "stopped-148") else { return false }
            let after = String(screen[resumed.upperBound...])
            return after.contains("\u{1B}[?1049h") && Terminal.Frame.last(in: after)?.cursorLine?.hasSuffix(#"2. {"n":1}"#) == true
        }, "\(terminal.screen.suffix(300))")
        terminal.type("j")
        #expect(await terminal.waitFor { $0.cursorLine?.hasSuffix(#"3. {"n":2}"#) == true })
        terminal.type("q")
        #expect(await terminal.waitForScreen { $0.contains("exited-0") }, "\(terminal.screen.suffix(300))")
        #expect(await terminal.exit().code == 0)
    }

    /// Started in the background of a shell with job control (`pager browse ... &`), it stops
    /// as a terminal program does until `fg` (a probe: it drew over the shell, quit on the first
    /// key the shell read, and left the terminal in the shell's mode of that moment).
    @Test(.timeLimit(.minutes(3))) func startedInTheBackground_itStopsUntilTheForeground() async throws {
        let script = """
            set -m
            \(pager) browse \(try manifest(items: 5)) &
            for i in $(seq 200); do jobs -l | grep -q Stopped && break; sleep 0.05; done
            jobs -l
            kill -KILL %1
            wait
            """
        let result = try await run("/usr/bin/script", ["-qec", "bash --norc --noprofile -c '\(script)'", "/dev/null"], input: "")
        #expect(result.stdout.contains("Stopped"), "\(result.stdout)")
        #expect(!result.stdout.contains("\u{1B}[?1049h"), "it drew nothing: \(result.stdout)")
    }

    @Test func withoutATerminal_itExitsWith2() async throws {
        let result = try await run(pager, ["browse", try manifest(items: 5)], input: "q")
        #expect(result.code == 2)
        #expect(result.stderr.contains("not a terminal"))
        // Standard input a terminal, standard output a file: it drew into the file and left the
        // terminal raw (found by a probe).
        let out = scratchFolder() + "/out.txt"
        let drawn = try await run("/usr/bin/script", ["-qec", "\(pager) browse \(try manifest(items: 5)) > \(out); echo exited-$?", "/dev/null"],
                                  input: "q")
        #expect(drawn.stdout.contains("browse: standard output is not a terminal") && drawn.stdout.contains("exited-2"), "\(drawn.stdout)")
        #expect((try? String(contentsOfFile: out, encoding: .utf8)) == "")
    }
}

/// A command in a pseudo-terminal of 12 rows and 80 columns, or `columns` (through script(1)),
/// typed into and watched by a test: the test waits for what the screen shows, never for a
/// fixed time.
private final class Terminal: @unchecked Sendable {
    private let process: Process
    private let input: ExecSafePipe
    /// Kept: its read end, watched by a readability handler, closes when it is freed.
    private let outputPipe: ExecSafePipe
    private let output = Mutex(Data())
    private let pidFile = scratchFolder() + "/pid"

    init(_ command: String, columns: Int = 80) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qfec", "stty rows 12 cols \(columns); echo $$ > \(pidFile); exec \(command)", "/dev/null"]
        let (input, out) = try runWithPipes(process, standardError: FileHandle.nullDevice)
        self.process = process
        self.input = input
        outputPipe = out
        out.read.readabilityHandler = { [weak self] handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil }
            self?.output.withLock { $0.append(data) }
        }
    }

    deinit {
        if process.isRunning { stop() }
    }

    /// Kills the command and script(1) (which does not pass SIGTERM on).
    private func stop() {
        signalCommand(SIGKILL)
        process.terminate()
    }

    var screen: String { output.withLock { String(decoding: $0, as: UTF8.self) } }

    /// The last whole frame `pager browse` drew.
    var lastFrame: Frame? { Frame.last(in: screen) }

    func type(_ keys: String) {
        try? input.write.write(contentsOf: Data(keys.utf8))
    }

    /// Sets the size of the command's terminal, as a window resized does (the kernel signals
    /// SIGWINCH to it).
    func resize(rows: Int, columns: Int) throws {
        let text = try String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let stty = Process()
        stty.executableURL = URL(fileURLWithPath: "/usr/bin/stty")
        stty.arguments = ["-F", "/proc/\(text)/fd/0", "rows", "\(rows)", "cols", "\(columns)"]
        try stty.run()
        stty.waitUntilExit()
        #expect(stty.terminationStatus == 0, "stty could not resize the terminal")
    }

    /// Sends `signal` to the command (not to script(1)).
    func signalCommand(_ signal: Int32) {
        guard let text = try? String(contentsOfFile: pidFile, encoding: .utf8), let pid = Int32(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return }
        kill(pid, signal)
    }

    /// Waits until `condition` holds for the last frame drawn, for up to a minute; it is looked
    /// at once more at the end (a test whose task waited that long for a thread of the pool
    /// the tests share gave up without looking).
    func waitFor(_ condition: (Frame) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let frame = lastFrame, condition(frame) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return lastFrame.map(condition) ?? false
    }

    /// Waits until `condition` holds for all the command wrote so far, for up to a minute (and
    /// looks once more at the end).
    func waitForScreen(_ condition: (String) -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if condition(screen) { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition(screen)
    }

    /// Waits for the command to end (killing it after a minute): its exit status and all it drew.
    func exit() async -> (code: Int32, screen: String) {
        let deadline = ContinuousClock.now + .seconds(60)
        while process.isRunning && ContinuousClock.now < deadline {
            try? await Task.sleep(for: .milliseconds(20))
        }
        if process.isRunning { stop() }
        process.waitUntilExit()
        try? input.write.close()
        return (process.terminationStatus, screen)
    }

    /// One frame of `pager browse`: list lines, then a status line, both highlighted lines in
    /// reverse video.
    struct Frame {
        let text: String

        /// The frame after the last cursor-home, when it was drawn whole (ends with its status line).
        static func last(in screen: String) -> Frame? {
            let frames = screen.components(separatedBy: "\u{1B}[H").dropFirst()
            return frames.reversed().first { $0.contains(Self.statusEnd) }.map { Frame(text: $0) }
        }

        private static let statusEnd = "\u{1B}[0m\u{1B}[K"

        private var highlighted: [String] {
            text.components(separatedBy: "\u{1B}[7m").dropFirst().map { $0.components(separatedBy: "\u{1B}[0m")[0] }
        }

        /// The list line under the cursor.
        var cursorLine: String? { highlighted.count == 2 ? highlighted[0] : nil }
        var status: String? { highlighted.last }

        /// Whether the status line's "cursor/count" has an item loaded below the cursor.
        var cursorIsAboveTheLastItem: Bool {
            let numbers = (status?.split(separator: " ").first ?? "").split(separator: "/").compactMap { Int($0) }
            return numbers.count == 2 && numbers[0] < numbers[1]
        }
    }
}
