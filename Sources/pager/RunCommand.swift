import Foundation
import Paging
import PagingHost

/// `pager run MANIFEST [steps]`: loads pages through a pipeline and prints the items.
struct RunCommand {
    static let help = """
    usage: pager run MANIFEST [steps] [options]

    Loads pages through the manifest's pipeline, step by step, then prints every item loaded,
    in order, as JSON Lines on stdout. Progress and state go to stderr.

    steps (in the order given; default: --refresh):
      --refresh         load the first page, replacing everything
      --hard-refresh    the same, asking stores and caches to drop what they hold first
      --append N        load N pages after the last one (stops early at the end of the data)
      --prepend N       load N pages before the first one
      --retry           load again where the last load failed

    options:
    \(LogOptions.help)
    \(StatsReport.help)
      --isolate-all     run every plugin in a child process of its own, as if each said
                        "isolation": "process": a plugin's crash fails its loads, not pager
      --help            this text

    exit codes: 0 every step succeeded; 1 a load failed (the items loaded are still printed);
    2 bad arguments, manifest or plugin
    """

    enum Step: Equatable {
        case refresh(hard: Bool)
        case append(Int)
        case prepend(Int)
        case retry
    }

    var manifestPath: String?
    var steps: [Step]
    var log: LogOptions
    var stats: StatsReport.Format?
    var isolateAll = false

    init(_ arguments: [String]) throws {
        var steps: [Step] = []
        var log = LogOptions()
        var stats: StatsReport.Format?
        var isolateAll = false
        manifestPath = try Arguments.parse(arguments, command: "run", help: Self.help) { argument, arguments in
            if log.parse(argument) { return true }
            if let format = try StatsReport.parse(argument) {
                stats = format
                return true
            }
            switch argument {
            case "--refresh": steps.append(.refresh(hard: false))
            case "--hard-refresh": steps.append(.refresh(hard: true))
            case "--append": steps.append(.append(try arguments.count(for: argument, in: 0...1_000_000)))
            case "--prepend": steps.append(.prepend(try arguments.count(for: argument, in: 0...1_000_000)))
            case "--retry": steps.append(.retry)
            case "--isolate-all": isolateAll = true
            default: return false
            }
            return true
        }
        self.steps = steps.isEmpty ? [.refresh(hard: false)] : steps
        self.log = log
        self.stats = stats
        self.isolateAll = isolateAll
    }

    func run() async throws -> Int32 {
        guard let manifestPath else { throw UsageError("run: a manifest is required\n\n\(Self.help)") }
        let manifest = try Manifest.load(path: manifestPath)
        let pipeline = try Pipeline(manifest: manifest, sink: Output.pluginLog(minimum: log.level), logLevel: log.level,
                                    recordsStats: stats != nil, isolateAll: isolateAll)
        let manager = pipeline.makeManager()
        // After a failure, the steps up to the next --retry are skipped; a retry that
        // succeeds clears the failure.
        var failed = false
        for step in steps {
            switch step {
            case .retry:
                guard failed else { continue }
                await manager.retry().value
                failed = report(manager.output)
            case _ where failed:
                continue
            case .refresh(let hard):
                failed = await load(.refresh, manager, userInfo: hard ? [PagingUserInfoKey.hardRefresh: "true"] : [:])
            case .append(let count), .prepend(let count):
                let kind: PagingRequestKind = step == .append(count) ? .append : .prepend
                for _ in 0..<count where !failed {
                    if manager.output[kind].isEndReached {
                        Output.error("\(kind): end of data reached")
                        break
                    }
                    failed = await load(kind, manager)
                }
            }
        }
        let output = manager.output
        var items = Output.ItemWriter()
        for item in output.values { items.write(item) }
        items.flush()
        Output.error("\(output.values.count) items in \(output.values.pageCount) pages; "
                     + "prepend: \(output.prependState), append: \(output.appendState)")
        // Stale pages served by a store are being loaded again in the background: let them be stored.
        await pipeline.pager.backgroundLoadsFinished()
        if let stats { Output.error(StatsReport.render(pipeline.stats, as: stats)) }
        return failed ? ExitCode.failure : ExitCode.success
    }

    /// Runs one load and reports it on stderr; `true` when it failed.
    private func load(
        _ kind: PagingRequestKind, _ manager: PaginationManager<PluginKey, PluginItem>, userInfo: [String: String] = [:]
    ) async -> Bool {
        let before = manager.output.values.count
        await manager.load(kind, userInfo: userInfo)
        let output = manager.output
        if report(output) { return true }
        Output.error("\(kind): \(output.values.count - before >= 0 ? "+" : "")\(output.values.count - before) items, \(output.values.count) in all")
        return false
    }

    /// Reports every direction whose last load failed (a prepend or append with nothing loaded
    /// runs as a refresh); `true` when any did.
    private func report(_ output: PaginationManagerOutput<PluginKey, PluginItem>) -> Bool {
        var failed = false
        for kind in PagingRequestKind.allCases {
            guard let error = output[kind].error else { continue }
            Output.problem("\(kind) failed: \(error)")
            failed = true
        }
        return failed
    }
}

/// Thrown after a command printed its help, to end with success.
struct HelpShown: Error {}
