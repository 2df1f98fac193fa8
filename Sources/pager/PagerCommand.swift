import FoundationEssentials
import Glibc
import Paging
import PagingHost

/// The wait a failed load's error asked for (a transient failure with a retry hint, past the
/// retry policy's longest wait or without one), capped at a day; nil when it asked none.
func retryHint(of error: any Error) -> Duration? {
    let hint: Duration?
    switch error {
    case let error as PluginError where error.status == .transient: hint = error.retryAfter
    case let PagingError.retryAfterBeyondBackoff(retryAfter, _, _): hint = retryAfter
    default: hint = nil
    }
    return hint.map { min($0, .seconds(86_400)) }
}

/// The `pager` command line: subcommands, help, and exit codes (0 success, 1 a failure at
/// run time, 2 bad input).
enum PagerCommand {
    static let usage = """
    usage: pager <command> [options]

    commands:
      run MANIFEST [steps]    load pages through the manifest's pipeline; items as JSON Lines on stdout
      validate MANIFEST       load and check every plugin of a manifest, fetch nothing
      plugins [DIR...]        list the plugins found in folders (default: the plugin search path)
      check LIB.so            run the conformance suite against a plugin library (each check in a child process)
      browse MANIFEST         an infinite scroll of the manifest's items in the terminal
      serve MANIFEST          the manifest's pipeline as a paged HTTP API (GET /pages)

    Run `pager <command> --help` for a command's options; `pager --version` for the plugin ABI
    this pager speaks. `--` ends a command's options (for a file whose name starts with -).
    exit codes: 0 success, 1 a failure at run time, 2 bad input (manifest, plugin, arguments)
    """

    /// What `pager --version` prints: what a plugin library is checked against.
    static var version: String {
        "pager: plugin ABI \(PluginABIVersion.host)\nhost extensions: \(HostExtensions.offeredIDs.joined(separator: ", "))"
    }

    static func main(_ arguments: [String]) async -> Int32 {
        guard let command = arguments.first else {
            Output.error(usage)
            return ExitCode.badInput
        }
        // A reader of standard output that goes away (`| head -1`) is an EPIPE on the next write,
        // which ends the command quietly (an incremental run keeping no state): SIGPIPE killed
        // it mid-run (status 141, nothing said). `check` handles it to clean up (InterruptCleanup).
        signal(SIGPIPE, SIG_IGN)
        // `browse` draws on fd 1, the terminal; every other command keeps it for its data.
        if command != "browse" { Output.claimStandardOutput() }
        if let problem = notUTF8() {
            Output.problem("pager: \(problem)")
            return Output.finish(ExitCode.badInput)
        }
        return Output.finish(await run(command, Array(arguments.dropFirst())))
    }

    /// An argument, or the working folder, whose bytes are not UTF-8: Swift's strings hold them
    /// with U+FFFD, which names another file ("caf\u{FFFD}/m.json: No such file or directory"
    /// of a folder that exists), and relative paths resolve against the working folder.
    private static func notUTF8() -> String? {
        func escaped(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
            bytes.map { $0 < 0x80 ? String(UnicodeScalar($0)) : "\\x" + String($0, radix: 16, uppercase: true) }.joined()
        }
        for index in 1..<max(1, Int(CommandLine.argc)) {
            guard let argument = CommandLine.unsafeArgv[index] else { continue }
            let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(argument).assumingMemoryBound(to: UInt8.self), count: strlen(argument))
            if String(validating: bytes, as: UTF8.self) == nil {
                return "argument \(index) is not valid UTF-8 (\(escaped(bytes))): pager takes paths and values as UTF-8; rename the file or folder"
            }
        }
        guard let folder = getcwd(nil, 0) else { return nil }
        defer { free(folder) }
        let bytes = UnsafeBufferPointer(start: UnsafeRawPointer(folder).assumingMemoryBound(to: UInt8.self), count: strlen(folder))
        guard String(validating: bytes, as: UTF8.self) == nil else { return nil }
        return "the working folder's path is not valid UTF-8 (\(escaped(bytes))): relative paths would name other files; run pager from another folder"
    }

    private static func run(_ command: String, _ rest: [String]) async -> Int32 {
        do {
            switch command {
            case "run": return try await RunCommand(rest).run()
            case "validate": return try ValidateCommand(rest).run()
            case "plugins": return try await PluginsCommand(rest).run()
            case "check": return try await CheckCommand.main(rest)
            case "browse": return try await BrowseCommand(rest).run()
            case "serve": return try await ServeCommand(rest).run()
            case "--help", "-h", "help":
                Output.line(usage)
                return ExitCode.success
            case "--version", "version":
                guard rest.isEmpty else { throw UsageError("\(shown(command)) takes no arguments") }
                Output.line(version)
                return ExitCode.success
            default:
                throw UsageError("unknown command '\(shown(command))'\n\n\(usage)")
            }
        } catch is HelpShown {
            return ExitCode.success
        } catch let error as UsageError {
            Output.error("pager: \(error.message)")
            return ExitCode.badInput
        } catch let error as ManifestError {
            // Escaped and cut in one pass: the line's note counts the bytes of the message.
            Output.problem("pager: \(error.text)")
            return error.isTransient ? ExitCode.failure : ExitCode.badInput
        } catch {
            Output.problem("pager: \(error)")
            return ExitCode.failure
        }
    }
}

enum ExitCode {
    static let success: Int32 = 0
    static let failure: Int32 = 1
    static let badInput: Int32 = 2
}

struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Text from outside (an argument, a path, a plugin's id or message) for a line of pager's own:
/// its control characters escaped and cut after 4 KB (``OneLine``, ``Output/messageLimit``), so
/// that it can neither start a line of its own nor steer the terminal.
func shown(_ text: some StringProtocol) -> String {
    OneLine.escape(text, limit: Output.messageLimit)
}

/// Splits arguments into flags with values and positional arguments.
struct Arguments {
    private(set) var positional: [String] = []
    private var items: [String]
    private var index = 0
    /// The value of a `--flag=value`, taken by the flag's `value(for:)`.
    private var attached: String?

    init(_ arguments: [String]) {
        items = arguments
    }

    /// The next argument, or `nil` at the end.
    mutating func next() -> String? {
        if let value = attached {
            attached = nil
            return value
        }
        guard index < items.count else { return nil }
        defer { index += 1 }
        return items[index]
    }

    /// The value after a flag that takes one.
    mutating func value(for flag: String) throws -> String {
        guard let value = next() else { throw UsageError("\(flag) needs a value") }
        return value
    }

    /// A whole number after a flag, within `range`.
    mutating func count(for flag: String, in range: ClosedRange<Int>) throws -> Int {
        let text = try value(for: flag)
        guard let number = Int(text), range.contains(number) else {
            throw UsageError("\(flag) takes a whole number from \(range.lowerBound) to \(range.upperBound), got '\(shown(text))'")
        }
        return number
    }
}

extension Arguments {
    /// The short flags, by the long flag each stands for.
    static let aliases = ["-v": "--verbose", "-q": "--quiet"]

    /// Walks a command's arguments: `--help` prints `help` and ends the command; `option` takes
    /// the flags the command knows (returning `false` for others), any other flag is an error,
    /// and the rest are operands, of which there may be one at most; after `--`, every argument
    /// is an operand.
    ///
    /// A flag is taken once, unless `repeatable` names it (as `--append`, a step each time), and
    /// of the flags of each set of `exclusive` (long names) one only: a flag given again, or with
    /// one that it excludes, is a usage error naming both (the last one given won, unsaid).
    static func parse(
        _ arguments: [String], command: String, help: String,
        repeatable: Set<String> = [], exclusive: [Set<String>] = [],
        option: (String, inout Arguments) throws -> Bool = { _, _ in false }
    ) throws -> String? {
        var arguments = Arguments(arguments)
        var operand: String?
        var optionsEnded = false
        /// The flags taken, as given ("--port" of "--port=80"), by what they set: a flag's long
        /// name, or its set of `exclusive`.
        var taken: [String: String] = [:]
        func setting(of flag: String) -> String? {
            let name = aliases[flag] ?? flag
            guard !repeatable.contains(name) else { return nil }
            return exclusive.first { $0.contains(name) }.map { $0.sorted().joined(separator: " ") } ?? name
        }
        while let argument = arguments.next() {
            if !optionsEnded {
                if argument == "--" {
                    optionsEnded = true
                    continue
                }
                if argument == "--help" || argument == "-h" {
                    Output.line(help)
                    throw HelpShown()
                }
                // Found before the flag is read: its value may be a file to read, or wrong.
                let flag = argument.hasPrefix("--") ? String(argument.prefix { $0 != "=" }) : argument
                if argument.hasPrefix("-"), let setting = setting(of: flag), let earlier = taken[setting] {
                    if earlier == flag { throw UsageError("\(command): \(flag) given twice; give it once") }
                    if aliases[earlier] ?? earlier == aliases[flag] ?? flag {
                        throw UsageError("\(command): \(earlier) and \(flag) are the same option; give it once")
                    }
                    throw UsageError("\(command): \(earlier) and \(flag) cannot be given together; give one of them")
                }
                if try option(argument, &arguments) {
                    if let setting = setting(of: flag) { taken[setting] = flag }
                    continue
                }
                // "--append=3" as "--append 3".
                if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                    arguments.attached = String(argument[argument.index(after: equals)...])
                    if try option(flag, &arguments) {
                        guard arguments.attached == nil else { throw UsageError("\(command): \(flag) takes no value; got '\(shown(argument))'") }
                        if let setting = setting(of: flag) { taken[setting] = flag }
                        continue
                    }
                    arguments.attached = nil
                }
                if argument.hasPrefix("-") { throw UsageError("\(command): unknown option '\(shown(argument))'\n\n\(help)") }
            }
            if let operand { throw UsageError("\(command): one operand only; got '\(shown(operand))' and '\(shown(argument))'") }
            operand = argument
        }
        return operand
    }
}

/// Common options of commands that load a manifest.
struct LogOptions {
    var level: PluginLogLevel = .info

    /// Consumes `--verbose` / `--quiet`; `false` when `argument` is neither.
    mutating func parse(_ argument: String) -> Bool {
        switch argument {
        case "--verbose", "-v": level = .debug
        case "--quiet", "-q": level = .warning
        default: return false
        }
        return true
    }

    /// The flags of which one only may be given.
    static let exclusive: Set<String> = ["--verbose", "--quiet"]

    /// The options' lines, their text starting at `column`, as the command's other options' do.
    static func help(column: Int) -> String {
        [("--verbose, -v", "show the plugins' debug lines"), ("--quiet, -q", "show only the plugins' warnings and errors")]
            .map { flag, text in "  " + flag + String(repeating: " ", count: max(1, column - 2 - flag.count)) + text }
            .joined(separator: "\n")
    }
}

extension Manifest {
    /// The manifest with every plugin call bounded: without `call_timeout_ms`, by `timeout_ms`.
    /// For the commands that serve for long (`serve`, `browse`): they run plugin calls on the
    /// few threads that run tasks, and one call that never returned, with the calls queued
    /// behind it, held them all (no request, /healthz or signal was answered any more).
    func boundingPluginCalls() -> Manifest {
        var bounded = self
        if callTimeout == nil {
            bounded.callTimeout = fetchTimeout
            bounded.callTimeoutOrigin = "timeout_ms, which bounds every plugin call of pager serve and browse without call_timeout_ms"
        }
        return bounded
    }
}
