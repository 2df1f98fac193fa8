import CTerminal
import FoundationEssentials
import Glibc
import Dispatch
import Paging
import PagingHost
import Synchronization

/// `pager browse MANIFEST`: an infinite scroll in the terminal.
struct BrowseCommand {
    static let help = """
    usage: pager browse MANIFEST [--isolate-all]

    An infinite scroll of the manifest's items in the terminal: the next page loads as you
    reach the end of the list.

    keys:
      j, down       next item          k, up        previous item
      space, pgdn   next screen        b, pgup      previous screen
      g             first item         G            last item
      r             refresh            R            retry the load that failed
      ctrl-z        suspend (fg to come back)
      q, ctrl-c     quit

    The status line shows what is loading, the last error, the end of the data, and why the
    list cannot scroll back when its first pages were dropped (max_size) by a source that gives
    no previous keys.
    The terminal is restored on exit, on ctrl-c, on SIGTERM/SIGHUP, and while suspended.
    --isolate-all runs every plugin in a child process of its own, as if each said
    "isolation": "process": a plugin's crash fails its loads, not pager.

    exit codes: 0 quit; 2 bad manifest or plugin, or no terminal
    """

    var manifestPath: String?
    var isolateAll = false

    init(_ arguments: [String]) throws {
        var isolateAll = false
        manifestPath = try Arguments.parse(arguments, command: "browse", help: Self.help) { argument, _ in
            guard argument == "--isolate-all" else { return false }
            isolateAll = true
            return true
        }
        self.isolateAll = isolateAll
    }

    func run() async throws -> Int32 {
        guard let manifestPath else { throw UsageError("browse: a manifest is required\n\n\(Self.help)") }
        let lastProblem = Mutex<String?>(nil)
        // The value incremental loading keeps is sent (or `initial`); only `run` keeps one.
        let manifest = try Manifest.load(path: manifestPath).sendingKeptValue().boundingPluginCalls()
        // What plugins write to fds 1 and 2, and isolated plugins' processes (started with the
        // pipeline), is kept off the screen from now on, and shown once it is left.
        let onATerminal = isatty(1) != 0
        let captured = onATerminal ? CapturedOutput.start() : nil
        defer { captured?.finish() }
        let pipeline = try Pipeline(manifest: manifest, sink: { level, plugin, message in
            if level >= .warning { lastProblem.withLock { $0 = "\(pluginID(plugin)): \(message)" } }
        }, isolateAll: isolateAll)
        // It draws on standard output: drawn into a file or a pipe, it left the terminal raw (and a
        // reader that went away ended it by SIGPIPE before it restored it).
        guard onATerminal else { throw UsageError("browse: standard output is not a terminal (`pager run` prints the items)") }
        switch paging_terminal_enter() {
        case 0: break
        case -2: throw UsageError("browse: in the background of a terminal whose shell is gone: nothing can bring it to the foreground")
        default: throw UsageError("browse: standard input is not a terminal")
        }
        defer { paging_terminal_restore() }

        var screen = Screen()
        let manager = PaginationManager(pager: pipeline.pager, configuration: .init(
            pageSize: manifest.pageSize, maxSize: manifest.maxSize,
            // A screenful ahead, or the manifest's distance if larger (with max_size, the manager
            // keeps it small enough that loading at one end never drops the page on screen).
            prefetchDistance: max(manifest.prefetchDistance, screen.listHeight),
            retryPolicy: manifest.retryPolicy, userInfo: manifest.userInfo))
        let (events, input) = AsyncStream.makeStream(of: Event.self)
        let outputs = manager.outputs()
        let watcher = Task {
            for await _ in outputs { input.yield(.output) }
        }
        let reader = KeyReader(input)
        reader.start()
        defer {
            reader.stop()
            watcher.cancel()
        }
        manager.refresh()

        var output = manager.output
        for await event in events {
            // Always the manager's current output: outputs queue behind a burst of keys, and a
            // key must move on the list the manager has now. Pages added or dropped before the
            // cursor (prepend, max_size) move the items: the cursor follows its item.
            let drawn = output
            output = manager.output
            screen.follow(from: drawn, to: output)
            if case .key(let key) = event {
                // A key that moves past an end loads there, when that direction is idle: with
                // fewer than a page and two values kept (max_size rounded down to whole pages),
                // itemVisible loads nothing (each of its loads would drop the item on screen). A
                // failed direction waits for R, as ever.
                let atFirst = screen.cursor == 0 && output.prependState.isIdle && !output.values.isEmpty
                let atLast = screen.cursor >= output.values.count - 1 && output.appendState.isIdle && !output.values.isEmpty
                switch key {
                case .quit: return ExitCode.success
                case .suspend: paging_terminal_suspend()
                case .refresh: manager.refresh()
                case .retry: manager.retry()
                case .move(let delta):
                    if delta > 0 && atLast { manager.append() } else if delta < 0 && atFirst { manager.prepend() }
                    screen.move(by: delta == .max ? screen.listHeight : delta == .min ? -screen.listHeight : delta, count: output.values.count)
                case .top:
                    if atFirst { manager.prepend() }
                    screen.move(by: -output.values.count, count: output.values.count)
                case .bottom:
                    if atLast { manager.append() }
                    screen.move(by: output.values.count, count: output.values.count)
                }
            }
            // After a key and after each page: loads on while the cursor is near an end, so
            // pages without items (a filter dropped them all) do not stop the list.
            manager.itemVisible(at: screen.cursor, of: output)
            screen.render(output, problem: lastProblem.withLock { $0 })
        }
        return ExitCode.success
    }

    enum Event: Sendable {
        /// The manager's output changed.
        case output
        case key(Key)
        /// The process was stopped and continued, or the window resized: the screen is drawn anew.
        case redraw
    }

    enum Key: Sendable {
        case quit, suspend, refresh, retry, top, bottom
        /// Lines to move; `.max`/`.min` for a screen down/up.
        case move(Int)

        /// The keys in a chunk of terminal input.
        static func parse(_ bytes: [UInt8]) -> [Key] {
            var keys: [Key] = []
            var index = 0
            while index < bytes.count {
                let rest = bytes[index...]
                if rest.starts(with: [0x1B, 0x5B]) && rest.count >= 3 {
                    switch rest.dropFirst(2).first {
                    case UInt8(ascii: "A"): keys.append(.move(-1))
                    case UInt8(ascii: "B"): keys.append(.move(1))
                    case UInt8(ascii: "5"): keys.append(.move(.min)); index += 1
                    case UInt8(ascii: "6"): keys.append(.move(.max)); index += 1
                    default: break
                    }
                    index += 3
                    continue
                }
                switch bytes[index] {
                case UInt8(ascii: "q"), 0x03, 0x04: keys.append(.quit)
                case 0x1A: keys.append(.suspend)
                case UInt8(ascii: "r"): keys.append(.refresh)
                case UInt8(ascii: "R"): keys.append(.retry)
                case UInt8(ascii: "j"): keys.append(.move(1))
                case UInt8(ascii: "k"): keys.append(.move(-1))
                case UInt8(ascii: " "): keys.append(.move(.max))
                case UInt8(ascii: "b"): keys.append(.move(.min))
                case UInt8(ascii: "g"): keys.append(.top)
                case UInt8(ascii: "G"): keys.append(.bottom)
                default: break
                }
                index += 1
            }
            return keys
        }
    }
}

/// A plugin's id, from its label "id (library path)": the path took the status line.
private func pluginID(_ label: String) -> Substring {
    label.split(separator: " ").first ?? ""
}

/// What is written to fds 1 and 2 while browse draws (by plugins, which may print, and by the
/// processes of isolated ones): read from a pipe on a thread of its own, the last
/// ``keptBytes`` kept, and written to standard error, escaped, once the screen is left.
private final class CapturedOutput: Sendable {
    static let keptBytes = 64 << 10
    /// The read end of the pipe fds 1 and 2 point at (non-blocking).
    private let readEnd: Int32
    /// Written once `finish` has given fds 1 and 2 back: the reader takes what is in the pipe
    /// then, and stops.
    private let stop: (read: Int32, write: Int32)
    private let text = Mutex<(bytes: [UInt8], total: Int)>(([], 0))
    private let stopped = DispatchSemaphore(value: 0)

    private init(readEnd: Int32, stop: (Int32, Int32)) {
        self.readEnd = readEnd
        self.stop = stop
    }

    /// Starts capturing; nil (fds 1 and 2 left as they are) when it cannot.
    static func start() -> CapturedOutput? {
        var ends: [Int32] = [0, 0]
        guard pipe(&ends) == 0 else { return nil }
        let read = paging_terminal_capture_output()
        guard read >= 0, ends.allSatisfy({ fcntl($0, F_SETFD, FD_CLOEXEC) == 0 }) else {
            if read >= 0 { paging_terminal_release_output(); close(read) }
            close(ends[0])
            close(ends[1])
            return nil
        }
        let captured = CapturedOutput(readEnd: read, stop: (ends[0], ends[1]))
        detachThread(named: "pager-captured") { captured.readUntilStopped() }
        return captured
    }

    private func readUntilStopped() {
        var descriptors = [pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0), pollfd(fd: stop.read, events: Int16(POLLIN), revents: 0)]
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            guard poll(&descriptors, 2, -1) >= 0 || errno == EINTR else { break }
            let stopping = descriptors[1].revents != 0
            // Once stopping, what is in the pipe only: a child may write on for ever.
            var budget = stopping ? 1 << 20 : Int.max
            while budget > 0 {
                let count = read(readEnd, &buffer, buffer.count)
                guard count > 0 else { break }
                budget -= count
                text.withLock { text in
                    text.total += count
                    text.bytes += buffer[..<count]
                    if text.bytes.count > 2 * Self.keptBytes { text.bytes.removeFirst(text.bytes.count - Self.keptBytes) }
                }
            }
            if stopping || descriptors[0].revents & Int16(POLLHUP) != 0 { break }
        }
        stopped.signal()
    }

    /// Gives fds 1 and 2 back, and writes what was captured to standard error.
    func finish() {
        paging_terminal_release_output()
        _ = write(stop.write, "x", 1)
        stopped.wait()
        [readEnd, stop.read, stop.write].forEach { close($0) }
        let (bytes, total) = text.withLock { ($0.bytes.suffix(Self.keptBytes), $0.total) }
        guard total > 0 else { return }
        let part = bytes.count < total ? "; the last \(bytes.count) bytes" : ""
        Output.error("pager browse: written to standard output or standard error while browsing, \(total) bytes\(part):")
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false).dropLast(bytes.last == 0x0A ? 1 : 0) {
            Output.problem(String(line))
        }
    }
}

/// Reads keys on a thread of its own (reading blocks) and hands them to the event stream.
private final class KeyReader: Sendable {
    private let input: AsyncStream<BrowseCommand.Event>.Continuation
    private let stopped = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)

    init(_ input: AsyncStream<BrowseCommand.Event>.Continuation) {
        self.input = input
    }

    func start() {
        detachThread(named: "pager-keys") { [self] in
            var buffer = [UInt8](repeating: 0, count: 64)
            while !stopped.load(ordering: .relaxed) {
                let count = paging_terminal_read(&buffer, Int32(buffer.count), 100)
                if count < 0 {
                    input.yield(.key(.quit))
                    break
                }
                for key in BrowseCommand.Key.parse(Array(buffer[..<Int(count)])) { input.yield(.key(key)) }
                // Both checked: a resize while stopped is one redraw.
                if paging_terminal_take_resumed() | paging_terminal_take_resized() != 0 { input.yield(.redraw) }
            }
            finished.signal()
        }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
        finished.wait()
        input.finish()
    }
}

/// The list and its status line, drawn in one write per frame.
private struct Screen {
    var cursor = 0
    var top = 0
    var rows = 24
    var columns = 80

    init() {
        measure()
    }

    var listHeight: Int { max(1, rows - 1) }

    mutating func measure() {
        var rows: Int32 = 0, columns: Int32 = 0
        if paging_terminal_size(&rows, &columns) == 0 {
            self.rows = Int(rows)
            self.columns = Int(columns)
        }
    }

    /// Moves the cursor (and the scroll by as much) to where its item of `drawn` is in `now`:
    /// by its place when pages were added or dropped before it, by its value after a refresh.
    mutating func follow(from drawn: PaginationManagerOutput<PluginKey, PluginItem>, to now: PaginationManagerOutput<PluginKey, PluginItem>) {
        guard !drawn.values.isEmpty else { return }
        let cursor = min(self.cursor, drawn.values.count - 1)
        guard let index = now.index(cursor, from: drawn) ?? now.values.firstIndex(of: drawn.values[cursor]) else { return }
        top = max(0, top + index - cursor)
        self.cursor = index
    }

    mutating func move(by delta: Int, count: Int) {
        guard count > 0 else { cursor = 0; top = 0; return }
        cursor = min(max(0, cursor + delta), count - 1)
    }

    mutating func render(_ output: PaginationManagerOutput<PluginKey, PluginItem>, problem: String?) {
        measure()
        let values = output.values
        cursor = min(cursor, max(0, values.count - 1))
        if cursor < top { top = cursor }
        if cursor >= top + listHeight { top = cursor - listHeight + 1 }
        var frame = "\u{1B}[H"
        for row in 0..<listHeight {
            let index = top + row
            if index < values.count {
                let line = fit("\(index + 1). \(Self.summary(of: values[index]))")
                frame += index == cursor ? "\u{1B}[7m\(line)\u{1B}[0m" : line
            }
            frame += "\u{1B}[K\r\n"
        }
        frame += "\u{1B}[7m" + fit(status(output, problem: problem)) + "\u{1B}[0m\u{1B}[K"
        _ = Array(frame.utf8).withUnsafeBytes { writeAll(paging_terminal_screen(), $0) }
    }

    private func status(_ output: PaginationManagerOutput<PluginKey, PluginItem>, problem: String?) -> String {
        var parts = ["\(output.values.isEmpty ? 0 : cursor + 1)/\(output.values.count)"]
        if output.isRefreshing { parts.append("refreshing…") }
        if output.isAppending { parts.append("loading more…") }
        // Pages dropped above a source without previous keys: said at the top only, below.
        let unreachable = output.prependState.error.map { if case PagingError.droppedPagesUnreachable = $0 { true } else { false } } ?? false
        if let error = output.refreshState.error ?? (unreachable ? nil : output.prependState.error) ?? output.appendState.error {
            // A plugin's by its id, without its library's path: the path took the line, and
            // the reason was cut off.
            let text = (error as? PluginError).map { "\(pluginID($0.plugin)): \($0.status): \($0.message)" } ?? "\(error)"
            parts.append("error: \(text) (R to retry)")
        } else if let problem {
            parts.append(problem)
        }
        if cursor == 0, unreachable {
            parts.append("cannot scroll back: earlier pages were dropped and the source gives no previous keys")
        }
        if output.appendState.isEndReached { parts.append("end of data") }
        parts.append("r refresh · q quit")
        return parts.joined(separator: " · ")
    }

    /// Cuts a line to the screen's width in columns: a wide character (Chinese, Japanese,
    /// Korean, an emoji) takes two, a combining mark none. Control characters (C0, DEL, and C1,
    /// which some terminals read as ESC [: U+009B) and the bidirectional controls never reach
    /// the terminal: an item's text could otherwise move the cursor, clear the screen, retitle
    /// the window, or reorder what the terminal shows around it.
    private func fit(_ text: String) -> String {
        var scalars = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "\t" || scalar == "\n" || scalar == "\r" {
                scalars.append(" ")
            } else if scalar.properties.generalCategory == .control || OneLine.isBidiControl(scalar) {
                scalars.append("\u{FFFD}")
            } else {
                scalars.append(scalar)
            }
        }
        let clean = String(scalars)
        guard clean.reduce(0, { $0 + Self.columns(of: $1) }) > columns else { return clean }
        var line = "", width = 0
        for character in clean {
            let needed = Self.columns(of: character)
            if width + needed > columns - 1 { break }
            line.append(character)
            width += needed
        }
        return line + "…"
    }

    /// The columns a terminal gives `character`: its scalars' widths, at most 2.
    static func columns(of character: Character) -> Int {
        min(2, character.unicodeScalars.reduce(0) { $0 + columns(of: $1) })
    }

    /// A scalar's columns: 0 for marks and format characters (a zero-width joiner, a variation
    /// selector), 2 for East Asian wide and fullwidth characters and emoji shown as such, else 1.
    static func columns(of scalar: Unicode.Scalar) -> Int {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format: return 0
        default: break
        }
        if scalar.properties.isEmojiPresentation { return 2 }
        switch scalar.value {
        case 0x1160...0x11FF: return 0 // Hangul vowels and finals, drawn within the syllable
        case 0x1100...0x115F, 0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
             0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F, 0xFF00...0xFF60,
             0xFFE0...0xFFE6, 0x1F300...0x1F64F, 0x1F900...0x1F9FF, 0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return 2
        default: return 1
        }
    }

    /// One line for an item: a repository's name, stars and description when it looks like
    /// one, a name or title when it has one, the JSON otherwise.
    static func summary(of item: PluginItem) -> String {
        guard let value = try? JSONValue.parse(item.bytes), case .object = value else { return item.text }
        func text(_ key: String) -> String? {
            switch value[key] {
            case .string(let string): string
            case .int(let number): String(number)
            default: nil
            }
        }
        guard let name = text("full_name") ?? text("name") ?? text("title") else { return item.text }
        var line = name
        if let stars = text("stargazers_count") { line += "  ★\(stars)" }
        if let description = text("description") { line += "  \(description)" }
        return line
    }
}
