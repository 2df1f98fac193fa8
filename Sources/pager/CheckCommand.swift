import FoundationEssentials
import Glibc
import PagingConformance
import PagingHost
import Synchronization

/// `pager check LIB.so`: the conformance suite, every check in a child process.
struct CheckCommand {
    static let help = """
    usage: pager check LIB.so [options]

    LIB.so is a file, or a name looked up as a manifest's "plugin" is (jsonlines, or
    libjsonlines.so: in the working directory, PAGING_PLUGIN_PATH's folders, then pager's).

    Runs the conformance suite against every plugin of a plugin library (or one, with --plugin)
    and prints a line per check: plugin, check, PASS/FAIL/SKIP, time, reason. Every check runs
    in a process of its own, so a plugin that crashes or hangs fails that check ("crashed
    (SIGSEGV)", "timed out after 70 s (killed; …)") and the run goes on.

    checks:
      descriptor              ids (non-empty, unique, no spaces), name, version, kind, ABI major
      abi-growth              entry, descriptor and instance table say struct_size (at least
                              ABI 1.0's; 0 = built against the 1.0 draft headers: a note);
                              get_extension answers NULL for unknown ids; the host's refusal
                              (struct too small, a required extension it lacks) fails it
      create-empty-config     create/destroy with {}: created, or refused with a code and a message
      create-valid-config     create/destroy with a valid config (--config, or the sample for a
                              shipped plugin, or {}): must be created
      create-invalid-config   unknown keys, known keys of the wrong type: created or refused
                              cleanly, never a crash
      create-destroy-cycles   create/destroy cycles (--cycles) without resident memory growing
                              by 2 MB or more past what the host keeps of each instance, and
                              no call to the host after a destroy() returned
      refresh-key             (source) refresh_key and the key chain of the refresh key work
      fetch-completes-once    (source) a fetch completes or fails exactly once, within --timeout-ms
      keys-chain              (source) 10 appended pages: each page's previous key is the page
                              before's key, no key repeats, stops at the end
      items-valid             (source) 5 pages, (interceptor) the pages it answers itself: every
                              item one JSON value in valid UTF-8
      kept-pages              (interceptor) a page it was handed, answered later, keeps its
                              PAGING_PAGE_SHORTENED or PAGING_PAGE_EMPTIED flag; a hard refresh
                              and a reload proceed
      cancel-safe             (source) 50 fetches cancelled after 0-5 ms all finish; cancel of
                              unknown and finished ids is ignored
      destroy-in-flight       (source) destroyed with 5 fetches in its hands: no call to the host
                              within --timeout-ms (300 ms at least) after destroy() returned
      proceed-intact          (interceptor) a proceeding request reaches the source intact; a
                              rewrite (key, page size, params) is reported as a note
      handle-any-page         (interceptor) handle() of an empty page, 1,000 items, odd bytes, no keys
      call-handles            creates, intercepts/handles or refresh_key/key_chain/fetches: no
                              config, out or keys-out handle used after its call or off its thread
      extensions              each instance extension offered works: paging.health/1 answers
                              within --timeout-ms with PAGING_OK or a PAGING_ERR_* code
      thread-safe             (flagged thread-safe) 4 tasks x 500 concurrent calls, consistent results

    options:
      --plugin ID           check only this plugin of the library
      --config JSON         a valid config for the plugin(s) checked
      --config-file FILE    the same, read from a file
      --timeout-ms N        how long a fetch may take (default 5000), and a call to fetch(),
                            intercept or key_chain (which must return at once; create and
                            refresh_key have 30 s at least); a check process is killed after
                            60 s + 2 x N (create-destroy-cycles: 10 ms more a cycle)
      --cycles N            create/destroy cycles (default 1000)
      --without-extension ID
                            do not offer the plugin host extension ID (repeatable), as a host
                            older than it would not: checks that the plugin copes (get_extension
                            answers NULL; a plugin that requires ID is refused at creation)
      --json                print one JSON document instead of the table
      --help                this text

    exit codes: 0 every check passed (or was skipped); 1 a check failed; 2 bad input (no such
    file, not a plugin library, unknown plugin, bad arguments); 130, 143, 129 or 141 stopped by
    SIGINT, SIGTERM, SIGHUP or SIGPIPE (the reader of the output went away, as with | head; the
    check running is killed and the scratch folder removed)
    """

    var libraryPath: String?
    var plugin: String?
    var config: JSONValue?
    var timeoutMs: Int
    var cycles: Int
    var json: Bool
    var withheldExtensions: Set<String> = []

    init(_ arguments: [String]) throws {
        var plugin: String?, config: JSONValue?, timeoutMs = 5_000, cycles = 1_000, json = false
        var withheld: Set<String> = []
        libraryPath = try Arguments.parse(arguments, command: "check", help: Self.help, repeatable: ["--without-extension"],
                                           exclusive: [["--config", "--config-file"]]) { argument, arguments in
            switch argument {
            case "--plugin": plugin = try arguments.value(for: argument)
            case "--config": config = try Self.parseConfig(try arguments.value(for: argument), origin: "--config")
            case "--config-file":
                let path = try arguments.value(for: argument)
                // Read as a manifest is: each way it cannot be says why (it said only "cannot be read").
                let bytes: [UInt8]
                do throws(ManifestError) { bytes = try Manifest.readFile(path, kind: "config file", regularOnly: true) } catch {
                    throw UsageError("check: --config-file \(shown(error.text))")
                }
                config = try Self.parseConfig(String(decoding: bytes, as: UTF8.self), origin: path)
            case "--timeout-ms": timeoutMs = try arguments.count(for: argument, in: 1...3_600_000)
            case "--cycles": cycles = try arguments.count(for: argument, in: 2...1_000_000)
            case "--json": json = true
            case "--without-extension":
                let id = try arguments.value(for: argument)
                guard HostExtensions.offers(id) else {
                    throw UsageError("check: --without-extension: '\(shown(id))' is not an extension this host offers (\(HostExtensions.offeredIDs.joined(separator: ", ")))")
                }
                withheld.insert(id)
            default: return false
            }
            return true
        }
        (self.plugin, self.config, self.timeoutMs, self.cycles, self.json) = (plugin, config, timeoutMs, cycles, json)
        withheldExtensions = withheld
    }

    /// The entry point: `pager check ...`, or a hidden child command.
    static func main(_ arguments: [String]) async throws -> Int32 {
        if let first = arguments.first, first.hasPrefix("__") { await child(arguments) }
        return try await CheckCommand(arguments).run()
    }

    static func parseConfig(_ text: String, origin: String) throws -> JSONValue {
        do {
            let value = try JSONValue.parse(text)
            guard case .object = value else { throw UsageError("check: \(shown(origin)): the config must be a JSON object") }
            return value
        } catch let error as JSONParseError {
            throw UsageError("check: \(shown(origin)): \(shown("\(error)"))")
        }
    }

    func run() async throws -> Int32 {
        guard let libraryPath else { throw UsageError("check: a plugin library is required\n\n\(Self.help)") }
        guard let executable = PluginSearchPath.executableFolder().map({ $0 + "/" + Self.executableName() }) else {
            throw UsageError("check: cannot find the pager executable (/proc/self/exe)")
        }
        let scratch = FileManager.default.temporaryDirectory.path + "/pager-check-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        // Handled before the folder exists, so that no signal can leave it behind.
        let interrupt = InterruptCleanup(removing: scratch, command: "check") { ConformanceRunner.stopChildren() }
        defer {
            try? FileManager.default.removeItem(atPath: scratch)
            interrupt.cancel()
        }
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        let options = ConformanceOptions(config: config, fetchTimeout: .milliseconds(timeoutMs), cycles: cycles, scratchFolder: scratch,
                                         withheldExtensions: withheldExtensions)
        let runner = ConformanceRunner(executable: executable, options: options)
        // A file that is there, else a name, as a manifest in the working directory names it
        // (the guide's `pager check libjsonlines.so` found no such file).
        let folder = FileManager.default.currentDirectoryPath
        let absolute: String
        do {
            absolute = FileManager.default.fileExists(atPath: libraryPath) ? URL(fileURLWithPath: libraryPath).standardizedFileURL.path
                : try PluginSearchPath.standard(manifestFolder: folder).resolve(libraryPath, relativeTo: folder)
        } catch {
            throw UsageError("check: \(error)")
        }
        let table = TablePrinter()
        let report: ConformanceRunner.Report
        do {
            report = try await runner.run(library: absolute, plugin: plugin) { result in
                // A check killed by a signal's clean-up failed for that, not for the plugin.
                if !json && !ConformanceRunner.isStopped { table.row(result) }
            }
        } catch {
            Output.problem("pager: check: \(error)")
            return ExitCode.badInput
        }
        // Stopped by a signal: its clean-up ends the process (`interrupt.cancel()` waits for it).
        guard !ConformanceRunner.isStopped else { return ExitCode.failure }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
            Output.line(String(decoding: try encoder.encode(report), as: UTF8.self))
        } else {
            Output.line("\(report.passed) passed, \(report.failed) failed, \(report.skipped) skipped: \(shown(absolute))")
        }
        return report.failed > 0 ? ExitCode.failure : ExitCode.success
    }

    /// The name this process was started as (normally "pager").
    static func executableName() -> String {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        guard length > 0 else { return "pager" }
        let path = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return URL(fileURLWithPath: path).lastPathComponent
    }

    // MARK: - Child processes (hidden)

    /// Splits a check's child process, first thing: its reaper adopts what the plugin's
    /// processes orphan (a daemon), and when the check ends, ends them and writes how many it
    /// found running to fd 3 (the runner's file).
    static func startReaper() {
        guard ProcessTree.startReaper(parent: getppid(), reportFD: 3) else { childExit("the check's runner is gone") }
    }

    /// `pager check __list LIB [--without-extension ID]...` and `pager check __one LIB ID CHECK [options]`: run by
    /// ``ConformanceRunner`` in a child; print one marked JSON line, then end at once (no
    /// exit-time destructors racing the plugin's threads).
    static func child(_ arguments: [String]) async -> Never {
        var rest = Arguments(Array(arguments.dropFirst()))
        switch arguments.first {
        case "__list":
            guard let path = rest.next() else { childExit("__list needs a library") }
            var withheld: Set<String> = []
            while let flag = rest.next() {
                guard flag == "--without-extension", let id = rest.next() else { childExit("__list: unknown option \(flag)") }
                withheld.insert(id)
            }
            Output.line(ConformanceWire.line(Conformance.list(path: path, withholding: withheld)))
        case "__one":
            guard let path = rest.next(), let id = rest.next(), let name = rest.next(),
                  let check = ConformanceCheck(rawValue: name) else { childExit("__one needs LIB ID CHECK") }
            var options = ConformanceOptions(scratchFolder: FileManager.default.temporaryDirectory.path)
            while let flag = rest.next() {
                guard let value = rest.next() else { childExit("\(flag) needs a value") }
                switch flag {
                case "--timeout-ms": options.fetchTimeout = .milliseconds(Int(value) ?? 5_000)
                case "--cycles": options.cycles = Int(value) ?? 1_000
                case "--scratch": options.scratchFolder = value
                case "--config": options.config = try? JSONValue.parse(value)
                case "--without-extension": options.withheldExtensions.insert(value)
                default: childExit("unknown option \(flag)")
                }
            }
            let result = await Conformance.run(check, path: path, plugin: id, options: options)
            Output.line(ConformanceWire.line(result))
        default:
            childExit("unknown child command")
        }
        _exit(0)
    }

    private static func childExit(_ message: String) -> Never {
        Output.error("pager check: \(message)")
        _exit(2)
    }
}

/// The pass/fail table, a line per check as results come in, under a header printed with the
/// first (a library that could not be listed printed a header without rows before its error).
private final class TablePrinter: Sendable {
    private let headed = Atomic<Bool>(false)

    func row(_ result: ConformanceResult) {
        if !headed.exchange(true, ordering: .relaxed) {
            Output.line(pad("PLUGIN", 16) + pad("CHECK", 23) + pad("RESULT", 7) + pad("TIME", 9) + "REASON")
        }
        let time = result.durationMs < 10_000 ? fixedPoint(result.durationMs, digits: 0) + " ms" : fixedPoint(result.durationMs / 1_000, digits: 1) + " s"
        // The plugin's id and the reasons hold the plugin's own text.
        var line = pad(OneLine.escape(result.plugin, limit: Output.nameLimit), 16) + pad(result.check, 23) + pad(result.status.rawValue, 7)
            + pad(time, 9) + shown(result.reason)
        for note in result.notes { line += "\n" + String(repeating: " ", count: 55) + "note: " + shown(note) }
        Output.line(line)
    }

    private func pad(_ text: String, _ width: Int) -> String {
        text.count >= width ? text + " " : text + String(repeating: " ", count: width - text.count)
    }
}
