import CTerminal
import Glibc
import PagingHost
import Synchronization

/// Standard output carries data only (items, listings); everything else goes to standard error.
///
/// After ``claimStandardOutput()`` the data go through a descriptor of their own, and fd 1 is
/// standard error: what plugins print (`printf`, `write(1, …)`) lands among the log lines, not
/// in the data. A data write that fails is not retried: the later ones are dropped, and
/// ``finish(_:)`` reports the failure once the command has ended.
///
/// # Thread safety
/// Any thread; each line is written whole, under a lock of its stream.
enum Output {
    /// `count` and `noun`, plural but for one: "1 page", "3 pages".
    static func counted(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }

    /// How many bytes of a plugin's message, or of a line about a failure, are printed; the
    /// line says how many more there were.
    static let messageLimit = 4_096
    /// How many bytes of a plugin's id are printed in its log lines.
    static let nameLimit = 256

    private struct DataStream {
        var descriptor = STDOUT_FILENO
        /// The errno of the first data write that failed.
        var failure: Int32?
    }

    private static let data = Mutex(DataStream())
    private static let errors = Mutex(())

    /// Keeps standard output for the data: moves it to a descriptor of its own (closed on exec)
    /// and points fd 1 at standard error. Call once, before any plugin is loaded. When standard
    /// output was closed at start, data writes fail with EBADF.
    static func claimStandardOutput() {
        data.withLock { stream in
            stream.descriptor = paging_standard_output_was_closed() != 0 ? -1 : fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3)
            // Fds 0 to 2 are open (/dev/null for one closed at start): this cannot fail.
            _ = dup2(STDERR_FILENO, STDOUT_FILENO)
        }
    }

    /// Writes `text` and a newline to standard output.
    static func line(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.append(0x0A)
        write(bytes)
    }

    /// Writes `bytes` to standard output, unless an earlier write failed.
    static func write(_ bytes: [UInt8]) {
        data.withLock { stream in
            guard stream.failure == nil else { return }
            stream.failure = bytes.withUnsafeBytes { writeAll(stream.descriptor, $0) }
        }
    }

    /// Whether a data write failed (a reader that went away included): not everything written
    /// since reached standard output.
    static var dataFailed: Bool { data.withLock { $0.failure != nil } }

    /// Whether standard output (the data's) is a terminal.
    static var dataIsTerminal: Bool { data.withLock { isatty($0.descriptor) != 0 } }

    /// `code`, or the failure of a command whose data could not all be written: then one line
    /// on standard error says why, and the code is 1. A reader that went away (EPIPE, as with
    /// `| head -1`) is no failure: the command ends quietly with its own code.
    static func finish(_ code: Int32) -> Int32 {
        guard let failure = data.withLock({ $0.failure }), failure != EPIPE else { return code }
        error("pager: cannot write to standard output: \(String(cString: strerror(failure)))")
        return ExitCode.failure
    }

    /// Writes `text` and a newline to standard error, as it is: the pager's own text (usage,
    /// tables), which may span lines. Failures are ignored: there is nowhere left to report them.
    static func error(_ text: String) {
        var bytes = Array(text.utf8)
        bytes.append(0x0A)
        errors.withLock { _ in _ = bytes.withUnsafeBytes { writeAll(STDERR_FILENO, $0) } }
    }

    /// Writes one line to standard error that holds text from outside (a plugin's message, an
    /// error's description): its control characters escaped, cut after ``messageLimit`` bytes.
    static func problem(_ text: String) {
        error(OneLine.escape(text, limit: messageLimit))
    }

    /// A log sink that writes plugins' lines at or above `minimum` to standard error, one line
    /// each: the plugin's id and its message escaped and cut (``nameLimit``, ``messageLimit``).
    static func pluginLog(minimum: PluginLogLevel) -> PluginLogSink {
        { level, plugin, message in
            guard level >= minimum else { return }
            let name = id(plugin)
            // A message that names its plugin itself (as a create error must) is not named twice.
            let text = message.hasPrefix(name + ": ") ? message.dropFirst(name.count + 2) : message[...]
            error("[\(level)] \(OneLine.escape(name, limit: nameLimit)): \(OneLine.escape(String(text), limit: messageLimit))")
        }
    }

    /// The plugin's id in a sink's "id (library path)", or the whole text when it is no such
    /// pair (a library's lines name only its path). The path is in `pager validate`.
    private static func id(_ plugin: String) -> Substring {
        guard plugin.hasSuffix(")"), let open = plugin.ranges(of: " (").last else { return plugin[...] }
        return plugin[..<open.lowerBound]
    }
}

extension Output {
    /// Writes items as JSON Lines, a buffer at a time: each item's bytes as they are, on one
    /// line. Items reach the host checked (one JSON value each, and inside strings no raw control
    /// characters), so any CR or LF in them is whitespace between tokens: each is written as a
    /// space, and no item can end its line early or add one.
    struct ItemWriter {
        private var buffer: [UInt8] = []
        private let capacity = 1 << 16
        /// Items printed on a terminal have their C1 controls (U+0080 to U+009F, which JSON
        /// lets strings hold as they are) written as \u escapes, the same JSON: some terminals
        /// take U+009B for ESC [, so an item from a server could drive the terminal. So are the
        /// bidirectional controls (``OneLine/isBidiControl(_:)``), which reordered what the
        /// terminal showed of an item (a value shown as another).
        private let escapesControls = Output.dataIsTerminal

        init() {
            buffer.reserveCapacity(capacity)
        }

        mutating func write(_ item: PluginItem) {
            let start = buffer.count
            if escapesControls, item.bytes.contains(where: { $0 == 0xC2 || $0 == 0xD8 || $0 == 0xE2 }) {
                appendEscapingControls(item.bytes)
            } else {
                buffer.append(contentsOf: item.bytes)
            }
            // memchr: a byte-by-byte search cost a 200-page run ~3% of its time.
            let breaksLine = item.bytes.withUnsafeBytes { bytes in
                guard let base = bytes.baseAddress else { return false }
                return memchr(base, 0x0A, bytes.count) != nil || memchr(base, 0x0D, bytes.count) != nil
            }
            if breaksLine {
                for index in start..<buffer.count where buffer[index] == 0x0A || buffer[index] == 0x0D { buffer[index] = 0x20 }
            }
            buffer.append(0x0A)
            if buffer.count >= capacity { flush() }
        }

        /// `bytes` (valid UTF-8) with each C1 control (C2 80 to C2 9F) and bidirectional control
        /// (lead byte D8 or E2) as `\uXXXX`.
        private mutating func appendEscapingControls(_ bytes: [UInt8]) {
            let hex = Array("0123456789abcdef".utf8)
            var index = 0
            while index < bytes.count {
                if let (value, length) = OneLine.terminalControl(in: bytes, at: index) {
                    buffer.append(contentsOf: Array(#"\u"#.utf8) + [12, 8, 4, 0].map { hex[Int(value >> $0 & 0xF)] })
                    index += length
                } else {
                    buffer.append(bytes[index])
                    index += 1
                }
            }
        }

        /// Writes what is buffered.
        mutating func flush() {
            guard !buffer.isEmpty else { return }
            Output.write(buffer)
            buffer.removeAll(keepingCapacity: true)
        }
    }
}
