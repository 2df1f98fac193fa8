import FoundationEssentials
import PagingHost

/// `pager validate MANIFEST`: loads and checks every plugin, fetches nothing.
struct ValidateCommand {
    static let help = """
    usage: pager validate MANIFEST [options]

    Reads the manifest, finds, checks (sha256 pins, ABI version, kind, required extensions) and
    creates every plugin with its config, asks each plugin that offers a health check whether it
    can serve now (a check that has not answered within call_timeout_ms, else timeout_ms, is
    unhealthy), reads the incremental state file (if the manifest loads incrementally) as a
    run would, then prints a summary with the value kept. Nothing is fetched.

    options:
    \(LogOptions.help(column: 18))
      --help          this text

    exit codes: 0 the manifest and its plugins are valid; 1 a plugin's health check failed (its
    reason on stderr); 2 they are not valid (one line on stderr naming the file, the JSON path or
    plugin, and the reason)
    """

    var manifestPath: String?
    var log: LogOptions

    init(_ arguments: [String]) throws {
        var log = LogOptions()
        manifestPath = try Arguments.parse(arguments, command: "validate", help: Self.help, exclusive: [LogOptions.exclusive]) { argument, _ in log.parse(argument) }
        self.log = log
    }

    func run() throws -> Int32 {
        guard let manifestPath else { throw UsageError("validate: a manifest is required\n\n\(Self.help)") }
        let manifest = try Manifest.load(path: manifestPath)
        // The state file a run would read and write: one it could not is bad input now too.
        // Looked at, not made: a lock file made by `sudo pager validate` kept the user's runs out.
        let keptValue = try manifest.keptIncrementalValue(makingLock: false)
        let kept = manifest.incremental.map { settings in (settings, keptValue) }
        let pipeline = try Pipeline(manifest: manifest, sink: Output.pluginLog(minimum: log.level), logLevel: log.level)
        // Plugins that offer paging.health/1 say whether they can serve now (in their child
        // processes when isolated), each within the call timeout (else timeout_ms): one that
        // never answered held validate for good.
        let limit = manifest.callTimeout ?? manifest.fetchTimeout
        var stuck = false
        let plugins = pipeline.members.map { member -> (Pipeline.Member, PluginHealth?) in
            let health = boundedCall(named: "paging-health", within: limit) { member.health() }
            if health == nil { stuck = true }
            return (member, health)
        }
        let unhealthy = plugins.filter { _, health in
            switch health {
            case .healthy?, .notOffered?: false
            case .unhealthy?, nil: true
            }
        }
        Output.line("\(shown(manifestPath)): \(unhealthy.isEmpty ? "ok" : "\(Output.counted(unhealthy.count, "plugin")) cannot serve now")")
        for (plugin, health) in plugins {
            Output.line("  \(plugin.kind.rawValue): \(shown(plugin.summary))\(health.map(describe) ?? ": unhealthy (no answer within \(limit.wholeMilliseconds) ms)")")
        }
        Output.line("  page size \(manifest.pageSize), retries \(manifest.retryPolicy.maxRetries), timeout \(manifest.fetchTimeout)")
        if let (settings, value) = kept {
            Output.line("  incremental: {state.\(shown(settings.state))} = \(OneLine.escape((value ?? settings.initial).jsonText)) "
                        + "(\(value == nil ? "initial; nothing kept yet in" : "kept in") \(shown(settings.stateFile)))")
        }
        // A check still running holds its plugin: destroying it would wait for the check.
        if stuck { PluginLibrary.exitHost(ExitCode.failure) }
        pipeline.destroyPlugins()
        return unhealthy.isEmpty ? ExitCode.success : ExitCode.failure
    }

    private func describe(_ health: PluginHealth) -> String {
        switch health {
        case .notOffered: ""
        case .healthy: ": healthy"
        case .unhealthy(let status): ": unhealthy (\(shown("\(status)")))"
        }
    }
}
