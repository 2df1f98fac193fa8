import FoundationEssentials
import Glibc
import Paging
import PagingHost

/// Runs the conformance suite with every check in a child process: the `pager` executable
/// re-run as `pager check __one LIB ID CHECK ...` (and `__list LIB` for the descriptors), which
/// prints its result as one marked JSON line on stdout. A child that dies of a signal, exits
/// without a result or outlives its deadline fails that check, and the run goes on.
public struct ConformanceRunner: Sendable {
    /// The program to run, and the arguments that come before the child's own.
    public var executable: String
    public var prefix: [String]
    public var options: ConformanceOptions
    /// How long one child may run before it is killed.
    public var childTimeout: Duration
    /// What a check's process is given besides twice the fetch timeout: on a machine running
    /// many processes, 10 s was outlived by checks that take a tenth of a second alone, and on
    /// one that stalled, 20 s (only a plugin that hangs is waited for this long).
    public static let fixedTimeout = Duration.seconds(60)

    public init(executable: String, prefix: [String] = ["check"], options: ConformanceOptions, childTimeout: Duration? = nil) {
        self.executable = executable
        self.prefix = prefix
        self.options = options
        self.childTimeout = childTimeout ?? Self.fixedTimeout + options.fetchTimeout * 2
    }

    /// What a whole run found.
    public struct Report: Sendable, Codable {
        public var library: String
        public var hostABI: String
        public var results: [ConformanceResult]
        public var passed: Int { results.filter { $0.status == .pass }.count }
        public var failed: Int { results.filter { $0.status == .fail }.count }
        public var skipped: Int { results.filter { $0.status == .skip }.count }

        enum CodingKeys: String, CodingKey { case library, hostABI = "host_abi", results, passed, failed, skipped }

        public init(library: String, results: [ConformanceResult]) {
            self.library = library
            hostABI = PluginABIVersion.host.description
            self.results = results
        }

        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            library = try container.decode(String.self, forKey: .library)
            hostABI = try container.decode(String.self, forKey: .hostABI)
            results = try container.decode([ConformanceResult].self, forKey: .results)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(library, forKey: .library)
            try container.encode(hostABI, forKey: .hostABI)
            try container.encode(results, forKey: .results)
            try container.encode(passed, forKey: .passed)
            try container.encode(failed, forKey: .failed)
            try container.encode(skipped, forKey: .skipped)
        }
    }

    public enum RunError: Error, CustomStringConvertible {
        /// The file is not a plugin library (missing, not ELF, no entry symbol...).
        case badInput(String)
        case unknownPlugin(String, available: [String])

        public var description: String {
            switch self {
            case .badInput(let message): message
            case .unknownPlugin(let id, let available): "no plugin '\(id)' in the library (it has: \(available.isEmpty ? "none" : available.joined(separator: ", ")))"
            }
        }
    }

    /// Lists the library's plugins in a child, then runs each check of each plugin (or only of
    /// `plugin`) in a child of its own; `progress` sees each result as it comes.
    public func run(library path: String, plugin: String? = nil,
                    progress: @Sendable (ConformanceResult) -> Void = { _ in }) async throws(RunError) -> Report {
        var results: [ConformanceResult] = []
        func record(_ result: ConformanceResult) {
            results.append(result)
            progress(result)
        }
        let listing: ConformanceListing
        switch await list(library: path) {
        case .success(let listed): listing = listed
        case .failure(let failure):
            record(ConformanceResult(plugin: "-", check: "load", status: .fail, reason: failure.reason, durationMs: failure.durationMs))
            return Report(library: path, results: results)
        }
        if let badInput = listing.badInput { throw .badInput(badInput) }
        if let plugin, !listing.plugins.contains(where: { $0.id == plugin }) {
            if let problem = listing.libraryProblem { throw .badInput(problem) }
            throw .unknownPlugin(plugin, available: listing.plugins.map(\.id))
        }
        if let problem = listing.libraryProblem {
            record(ConformanceResult(plugin: "-", check: "load", status: .fail, reason: "the host refuses the library: \(problem)",
                                     durationMs: listing.durationMs))
        }
        for listed in listing.plugins where plugin == nil || listed.id == plugin {
            record(ConformanceResult(plugin: listed.id, check: ConformanceCheck.descriptor.rawValue,
                                     status: listed.problems.isEmpty ? .pass : .fail,
                                     reason: listed.problems.isEmpty ? "\(listed.kind ?? "?")\(listed.threadSafe ? ", thread-safe" : "")"
                                                                     : listed.problems.joined(separator: "; "),
                                     durationMs: listing.durationMs))
            let kind = listed.kind.flatMap(PluginKind.init(rawValue:))
            if listed.refusal != nil {
                // The host refuses the plugin for how it was built: abi-growth says why, and
                // nothing else can run.
                record(await runCheck(.abiGrowth, path: path, plugin: listed.id))
                guard listed.runnable, let kind else { continue }
                for check in ConformanceCheck.checks(for: kind) where check != .abiGrowth {
                    record(ConformanceResult(plugin: listed.id, check: check.rawValue, status: .skip,
                                             reason: "the host refuses the plugin (see abi-growth)"))
                }
                continue
            }
            guard listed.runnable, let kind else { continue }
            for check in ConformanceCheck.checks(for: kind) {
                record(await runCheck(check, path: path, plugin: listed.id))
            }
        }
        return Report(library: path, results: results)
    }

    /// Why a library could not be listed: it crashed, ended the process or hung while loading.
    public struct ListingFailure: Error, Sendable {
        public let reason: String
        public let durationMs: Double
    }

    /// Opens the library in a child process and lists its plugins (``Conformance/list(path:)``):
    /// a library whose loading crashes, exits or hangs takes only the child down.
    public func list(library path: String) async -> Result<ConformanceListing, ListingFailure> {
        switch await child(["__list", path] + withheldArguments) {
        case .finished(let output, let status):
            guard let listing = ConformanceWire.decode(ConformanceListing.self, from: output.stdout) else {
                return .failure(ListingFailure(reason: "loading the library ended the process (exit status \(status)) before it was listed"
                                                   + output.lastErrorLine, durationMs: output.durationMs))
            }
            return .success(listing)
        case .died(let reason, let output):
            return .failure(ListingFailure(reason: "loading the library \(reason)" + output.lastErrorLine, durationMs: output.durationMs))
        }
    }

    /// `--without-extension ID` for each extension withheld, for a child.
    private var withheldArguments: [String] {
        options.withheldExtensions.sorted().flatMap { ["--without-extension", $0] }
    }

    /// Runs one check in a child process.
    public func runCheck(_ check: ConformanceCheck, path: String, plugin: String) async -> ConformanceResult {
        var arguments = ["__one", path, plugin, check.rawValue,
                         "--timeout-ms", String(options.fetchTimeout.milliseconds), "--cycles", String(options.cycles),
                         "--scratch", options.scratchFolder]
        if let config = options.config { arguments += ["--config", config.jsonText] }
        arguments += withheldArguments
        // Each create-destroy cycle starts a thread for its create: on a loaded machine, 1,000
        // of them outlasted 12 s.
        let cycles = check == .createDestroyCycles ? Duration.milliseconds(10) * options.cycles : .zero
        switch await child(arguments, within: childTimeout + cycles) {
        case .finished(let output, let status):
            guard var result = ConformanceWire.decode(ConformanceResult.self, from: output.stdout) else {
                return ConformanceResult(plugin: plugin, check: check.rawValue, status: .fail,
                                         reason: "the check process exited with status \(status) without a result" + output.lastErrorLine,
                                         durationMs: output.durationMs)
            }
            result.durationMs = output.durationMs
            if output.leftBehind > 0 && result.status != .fail {
                result.status = .fail
                result.reason = "left \(output.leftBehind) forked process\(output.leftBehind == 1 ? "" : "es") running after the check "
                    + "(killed); end what you fork in destroy()"
                    + (result.reason.isEmpty ? "" : "; the check itself: \(result.reason)")
            }
            return result
        case .died(let reason, let output):
            return ConformanceResult(plugin: plugin, check: check.rawValue, status: .fail, reason: reason + output.lastErrorLine,
                                     durationMs: output.durationMs)
        }
    }

    // MARK: - Child processes

    struct ChildOutput: Sendable {
        var stdout: String
        var stderr: String
        var durationMs: Double
        /// Processes the plugin forked (daemons included) still running when the check ended;
        /// they were killed.
        var leftBehind = 0

        /// "; stderr: <last line>" when the child wrote something, for the reason of a failure.
        var lastErrorLine: String {
            let lines = stderr.split(separator: "\n").filter { !$0.trimmingWhitespace.isEmpty }
            guard let last = lines.first(where: { $0.contains("Fatal error") }) ?? lines.last else { return "" }
            return "; stderr: " + String(last.prefix(300))
        }
    }

    enum ChildResult: Sendable {
        case finished(ChildOutput, status: Int32)
        /// Killed by a signal or by the deadline: "crashed (SIGSEGV)", "timed out after 10 s".
        case died(String, ChildOutput)
    }

    /// Runs `pager ARGUMENTS` (a check, a listing), killed after `timeout` (``childTimeout``
    /// when nil).
    func child(_ arguments: [String], within timeout: Duration? = nil) async -> ChildResult {
        let limit = timeout ?? childTimeout
        let start = ContinuousClock.now
        let base = "\(options.scratchFolder)/child-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        let outPath = base + ".out", errPath = base + ".err", leftPath = base + ".left"
        defer {
            unlink(outPath)
            unlink(errPath)
            unlink(leftPath)
        }
        func output() -> ChildOutput {
            ChildOutput(stdout: readFile(outPath), stderr: readFile(errPath), durationMs: Conformance.milliseconds(since: start))
        }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, errPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        // Where the child's reaper says how many processes the plugin left running.
        posix_spawn_file_actions_addopen(&actions, 3, leftPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        let argv = ([executable] + prefix + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        // No Swift backtrace on a crash: it is slow, and the signal is what the check reports.
        var environment = ProcessInfo.processInfo.environment
        environment["SWIFT_BACKTRACE"] = "enable=no"
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in envp { free(pointer) } }
        // Started under the lock ``stopChildren()`` takes: once it returns, no child starts
        // (one would create its files in the scratch folder being removed).
        // A process group of its own: whatever the plugin forks is ended with the check.
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        let spawned: Int32? = Self.running.withLock { state in
            guard !state.stopped else { return nil }
            let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
            if spawned == 0 { state.pids.insert(pid) }
            return spawned
        }
        guard let spawned else { return .died("not started: the run was stopped", output()) }
        guard spawned == 0 else {
            return .died("could not be started: \(String(cString: strerror(spawned)))", output())
        }
        var status: Int32 = 0
        let deadline = ContinuousClock.now + limit
        while true {
            let waited = Self.reap(pid, &status, options: WNOHANG)
            if waited == pid { break }
            if waited < 0 && errno != EINTR {
                let error = errno
                Self.running.withLock { _ = $0.pids.remove(pid) }
                return .died("could not be waited for: \(String(cString: strerror(error)))", output())
            }
            if ContinuousClock.now >= deadline {
                ProcessTree.killDescendants(of: pid)
                kill(-pid, SIGKILL)
                _ = Self.reap(pid, &status, options: 0)
                return .died("timed out after \(formatSeconds(limit)) (killed; a check may take 60 s + 2 × --timeout-ms, create-destroy-cycles 10 ms more a cycle)", output())
            }
            try? await Task.sleep(for: .milliseconds(2))
        }
        var finished = output()
        let reported = Int(readFile(leftPath).trimmingWhitespace) ?? 0
        finished.leftBehind = reported + Self.endGroup(pid)
        let signal = status & 0x7F
        if signal != 0 { return .died("crashed (\(signalName(signal)))", finished) }
        return .finished(finished, status: (status >> 8) & 0xFF)
    }

    /// Kills what is left of the process group `group` (processes the plugin forked and did not
    /// end) and returns how many were still running; zombies, already ended, do not count.
    static func endGroup(_ group: pid_t) -> Int {
        let members = (try? FileManager.default.contentsOfDirectory(atPath: "/proc"))?.compactMap { entry -> pid_t? in
            guard let pid = pid_t(entry),
                  let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                  let close = stat.lastIndex(of: ")") else { return nil }
            // After "pid (comm)": state, ppid, pgrp.
            let fields = stat[stat.index(after: close)...].split(separator: " ")
            guard fields.count > 2, fields[0] != "Z", pid_t(fields[2]) == group else { return nil }
            return pid
        } ?? []
        if !members.isEmpty { kill(-group, SIGKILL) }
        return members.count
    }

    // MARK: - Stopping the children of an interrupted run

    /// The check processes running; once `stopped`, none more may start.
    private static let running = Locked<(pids: Set<pid_t>, stopped: Bool)>(([], false))

    /// Whether ``stopChildren()`` was called: the results that come after are not the plugin's.
    public static var isStopped: Bool { running.withLock { $0.stopped } }

    /// Kills every check process still running (SIGKILL) and waits for it; none starts after
    /// this call: for a `pager check` stopped by a signal, before it removes its scratch folder
    /// (a child left running would write there). Safe from any thread.
    public static func stopChildren() {
        // Killed under the lock: a pid in the set is not yet reaped (``reap(_:_:options:)``
        // removes it as it reaps), so it cannot have been reused by another process.
        let pids = running.withLock { state in
            state.stopped = true
            for pid in state.pids {
                ProcessTree.killDescendants(of: pid)
                kill(-pid, SIGKILL)
            }
            return state.pids
        }
        for pid in pids {
            var status: Int32 = 0
            // ECHILD when the run's own loop reaped it first: it is gone either way.
            _ = waitpid(pid, &status, 0)
        }
    }

    /// `waitpid` for a child in ``running``, removing it as it is reaped.
    private static func reap(_ pid: pid_t, _ status: inout Int32, options: Int32) -> pid_t {
        if options & WNOHANG == 0 {
            let waited = waitpid(pid, &status, options)
            running.withLock { _ = $0.pids.remove(pid) }
            return waited
        }
        return running.withLock { state in
            let waited = waitpid(pid, &status, options)
            if waited == pid { state.pids.remove(pid) }
            return waited
        }
    }

    private func readFile(_ path: String) -> String {
        guard let data = FileManager.default.contents(atPath: path) else { return "" }
        return String(decoding: data, as: UTF8.self)
    }

    private func formatSeconds(_ duration: Duration) -> String {
        let ms = duration.milliseconds
        return ms % 1_000 == 0 ? "\(ms / 1_000) s" : fixedPoint(Double(ms) / 1_000, digits: 1) + " s"
    }
}
