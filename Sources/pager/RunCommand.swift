import CTerminal
import FoundationEssentials
import Glibc
import Paging
import PagingHost

/// `pager run MANIFEST [steps]`: loads pages through a pipeline and prints the items.
struct RunCommand {
    static let help = """
    usage: pager run MANIFEST [steps] [options]

    Loads pages through the manifest's pipeline, step by step, and prints every item loaded, in
    order, as JSON Lines on stdout: each page's items as it comes when the steps only append
    (after a first refresh), else all of them once the steps are done. Progress and state go
    to stderr.

    steps (in the order given; default: --refresh; after a step fails, those up to the next
    --retry are skipped):
      --refresh         load the first page, replacing everything
      --hard-refresh    the same, from the source: its page replaces what stores and caches
                        hold (should it fail, they keep it)
      --append N        load N pages after the last one (stops early at the end of the data;
                        on an empty list, the first of them is the first page; a short last
                        page loaded again, as it may have grown, is one of the N)
      --prepend N       load N pages before the first one
      --retry           load again where the last load failed (after the wait the failure
                        asked for, if it did, up to a minute; past that, not at all)

    options:
    \(LogOptions.help(column: 20))
    \(StatsReport.help)
      --full            with an "incremental" manifest: ignore the value kept by earlier runs
                        and load from the manifest's incremental.initial (the highest value
                        seen is still kept afterwards)
      --isolate-all     run every plugin in a child process of its own, as if each said
                        "isolation": "process": a plugin's crash fails its loads, not pager
      --help            this text

    incremental loading: when the manifest has "incremental", its requests carry the value kept
    by the last successful run as {state.NAME}, and after a run in which every load succeeded
    the highest value of its cursor field among the items loaded is kept in the state file.

    interrupted (SIGINT, SIGTERM, SIGHUP): the load in flight is cancelled and the items loaded
    are printed (or, once they are, the loads of stale pages in the background are cancelled);
    a second signal ends pager at once, and so does a run still going 10 s after the first (a
    plugin call that does not return). Each page is written out as it is printed.

    a source that says its data changed (it calls invalidate()) stops the run as a signal does,
    and the run exits 1: the items printed may be stale, and cannot be taken back.

    exit codes: 0 every step succeeded; 1 a load failed or the source invalidated (the items
    loaded are still printed);
    2 bad arguments, manifest or plugin; 130, 143 or 129 (128 + the signal's number) interrupted
    """

    enum Step: Equatable {
        case refresh(hard: Bool)
        case append(Int)
        case prepend(Int)
        case retry
    }

    /// The flags of the steps, which run in the order given, each as often as it is given.
    static let stepFlags: Set<String> = ["--refresh", "--hard-refresh", "--append", "--prepend", "--retry"]

    var manifestPath: String?
    var steps: [Step]
    var log: LogOptions
    var stats: StatsReport.Format?
    var isolateAll = false
    var full = false

    init(_ arguments: [String]) throws {
        var steps: [Step] = []
        var log = LogOptions()
        var stats: StatsReport.Format?
        var isolateAll = false
        var full = false
        manifestPath = try Arguments.parse(arguments, command: "run", help: Self.help, repeatable: Self.stepFlags,
                                           exclusive: [LogOptions.exclusive]) { argument, arguments in
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
            case "--full": full = true
            default: return false
            }
            return true
        }
        self.steps = steps.isEmpty ? [.refresh(hard: false)] : steps
        self.log = log
        self.stats = stats
        self.isolateAll = isolateAll
        self.full = full
    }

    func run() async throws -> Int32 {
        guard let manifestPath else { throw UsageError("run: a manifest is required\n\n\(Self.help)") }
        var manifest = try Manifest.load(path: manifestPath)
        // Taken without a word, it let a user believe a full run had happened.
        if full, manifest.incremental == nil {
            throw UsageError("run: --full: \(shown(manifestPath)) has no \"incremental\" settings, so every run is full already")
        }
        let kept = try manifest.keptIncrementalValue()
        let incremental = manifest.incremental.map { settings in IncrementalRun(settings, kept: kept, full: full) }
        if let incremental { manifest = manifest.sending(incremental.start) }
        let pipeline = try Pipeline(manifest: manifest, sink: Output.pluginLog(minimum: log.level), logLevel: log.level,
                                    extraInterceptors: incremental.map { [$0.cursor] } ?? [],
                                    recordsStats: stats != nil, isolateAll: isolateAll)
        // Every page loaded is printed, whatever the manifest's max_size (meant for browse and
        // serve). Printed as they come, the pages need not be kept: the manager keeps the last
        // one, which the next append starts from.
        var configuration = pipeline.managerConfiguration
        configuration.maxSize = streams ? 1 : nil
        // Every request of an incremental run goes to the source, as a reload: a store or cache
        // in front that answered one with a page kept earlier (an empty last page, a page of a
        // failed run) hid what was new for good. They still keep the pages loaded.
        if incremental != nil { configuration.userInfo[PagingUserInfoKey.reload] = "true" }
        // A source that says its data changed (paging.invalidation/1) stops the run: what was
        // printed cannot be taken back (refreshed around the reader, as browse is, the list was
        // replaced under the steps). Each load is checked against the source's count of
        // invalidations as it returns, before its page is printed (a task hearing of them came
        // late: a later step ran, or the run ended 0); a load in flight is also cancelled.
        configuration.refreshesOnInvalidation = false
        let invalidation = pipeline.pager.source.invalidation
        let counted = invalidation?.count ?? 0
        let invalidated: @Sendable () -> Bool = { (invalidation?.count ?? 0) != counted }
        let invalidations = invalidation?.signals()
        let manager = PaginationManager(pager: pipeline.pager, configuration: configuration)
        let interrupt = Interrupt()
        let delivered = incremental?.cursor
        let loading = Task {
            await runSteps(manager, printer: streams ? ItemPrinter(noting: delivered) : nil, invalidated: invalidated)
        }
        interrupt.stops(loading)
        let watching = invalidations.map { signals in
            Task {
                for await _ in signals {
                    loading.cancel()
                    return
                }
            }
        }
        let (failed, streamed) = await loading.value
        let invalidatedWhileLoading = invalidated()
        watching?.cancel()
        let output = manager.output
        var printer = streamed ?? ItemPrinter(noting: delivered)
        if streamed == nil { printer.print(output.values) }
        printer.finish()
        // The states hold the failures' text, which comes from plugins and servers: escaped.
        Output.problem("\(Output.counted(printer.items, "item")) in \(Output.counted(printer.pages, "page")); "
                     + "prepend: \(printer.firstPrependState ?? output.prependState), append: \(output.appendState)")
        // Stale pages served by a store are being loaded again in the background: let them be
        // stored, unless the run is told to stop (then they are cancelled).
        let settling = Task { await pipeline.pager.backgroundLoadsFinished() }
        interrupt.stops(settling)
        await settling.value
        let signal = interrupt.signal
        if let stats { Output.error(StatsReport.render(pipeline.stats, as: stats)) }
        // Interrupted, a call may still hang in a plugin (what the signal ended the run for):
        // destroying would wait for it, past the 10 s after which the run ends anyway.
        if signal == nil { pipeline.destroyPlugins() }
        if let signal {
            // Nothing kept: what was loaded is not all the run was asked to load.
            Output.problem("run: stopped by \(Signals.name(signal)); the items loaded are printed"
                           + (incremental == nil ? "" : ", the incremental state is left as it was"))
            return 128 + signal
        }
        if invalidatedWhileLoading {
            Output.problem("run: the source said its data changed (it called invalidate()) while the run loaded: the items printed "
                           + "may be stale and the steps left were not run; run it again"
                           + (incremental == nil ? "" : " (the incremental state is left as it was)"))
            return ExitCode.failure
        }
        if incremental != nil, failed {
            Output.problem("incremental: a load failed: the state is left as it was")
        }
        if let incremental, !failed {
            // The items were loaded but not all of them reached standard output: keeping the
            // state would have the next run start after items no one received.
            guard !Output.dataFailed else {
                Output.error("incremental: the state is left as it was: not every item loaded reached standard output")
                return ExitCode.failure
            }
            do {
                try incremental.keep(endReached: output.appendState.isEndReached) { interrupt.signal != nil }
            } catch {
                Output.problem("\(error)")
                // A signal while it waited for the state file's lock: ended as a signal ends a run.
                return interrupt.signal.map { 128 + $0 } ?? ExitCode.failure
            }
        }
        return failed ? ExitCode.failure : ExitCode.success
    }

    /// Whether the items may be printed as their pages come: the steps only add pages at the
    /// end, after a first refresh (a prepend adds before what was printed, a later refresh
    /// replaces it).
    private var streams: Bool {
        steps.indices.allSatisfy { index in
            switch steps[index] {
            case .append, .retry: true
            case .refresh: index == 0
            case .prepend: false
            }
        }
    }

    /// The longest a --retry step waits for the retry hint of the failure it retries.
    static let longestRetryWait = Duration.seconds(60)

    /// Runs the steps, printing each page as it comes with `printer` when given; whether a load
    /// failed, and the printer. After a failure, the steps up to the next --retry are skipped; a
    /// retry that succeeds clears the failure. Cancelled (a signal), it stops after the load in
    /// flight.
    private func runSteps(
        _ manager: PaginationManager<PluginKey, PluginItem>, printer: ItemPrinter?, invalidated: @escaping @Sendable () -> Bool
    ) async -> (failed: Bool, printer: ItemPrinter?) {
        var printer = printer
        var failed = false
        // A load that saw the source invalidated (its page not printed) ends the steps as a
        // failure does, and as a signal does.
        func load(_ label: String, _ kind: PagingRequestKind, _ start: () async -> Void) async -> Bool {
            await self.load(label, kind, manager, printer: &printer, invalidated: invalidated, start)
        }
        // Once standard output fails, nothing more is loaded: it would not reach the reader.
        func goesOn() -> Bool { !Task.isCancelled && !Output.dataFailed && !invalidated() }
        for step in steps where goesOn() {
            switch step {
            case .retry:
                guard failed else { continue }
                // Named by the direction that failed; its progress line was missing.
                let retried = PagingRequestKind.allCases.first { manager.output[$0].error != nil }
                // A failure that said when to try again is retried then (at once, it failed
                // again: a rate limit's refusal could never pass), up to a minute.
                if let error = retried.flatMap({ manager.output[$0].error }), let wait = retryHint(of: error) {
                    guard wait <= Self.longestRetryWait else {
                        Output.error("retry: the failure says to retry after \(wait.readable), more than \(Self.longestRetryWait.readable); not retried")
                        continue
                    }
                    Output.error("retry: waiting \(wait.readable), as the failure said")
                    guard (try? await Task.sleep(for: wait)) != nil else { continue }
                }
                failed = await load("\(retried?.rawValue ?? "load") (retry)", retried ?? .refresh) { await manager.retry().value }
            case _ where failed:
                continue
            case .refresh(let hard):
                let userInfo = hard ? [PagingUserInfoKey.hardRefresh: "true"] : [:]
                failed = await load("refresh", .refresh) { await manager.load(.refresh, userInfo: userInfo) }
            case .append(let count), .prepend(let count):
                let kind: PagingRequestKind = step == .append(count) ? .append : .prepend
                for _ in 0..<count where !failed && goesOn() {
                    if manager.output[kind].isEndReached {
                        Output.error("\(kind): end of data reached")
                        break
                    }
                    failed = await load(kind.rawValue, kind) { await manager.load(kind) }
                }
            }
        }
        return (failed, printer)
    }

    /// Runs one load of `kind` (`start` runs it to its end), prints its page with `printer` when
    /// given, and reports it on stderr under `label` (with `--verbose`, the page's metadata
    /// too); `true` when it failed.
    private func load(
        _ label: String, _ kind: PagingRequestKind, _ manager: PaginationManager<PluginKey, PluginItem>, printer: inout ItemPrinter?,
        invalidated: () -> Bool, _ start: () async -> Void
    ) async -> Bool {
        // The items in all: those printed, or while nothing is printed before the end, those held.
        func count() -> Int { printer?.items ?? manager.output.values.count }
        let before = count()
        await start()
        // Cancelled by a signal, or the source invalidated: the run says so once it has printed
        // the items (not this load's: it may be of the changed data).
        if Task.isCancelled || invalidated() { return true }
        printer?.printLastPage(of: manager.output)
        if report(manager.output) { return true }
        let after = count()
        Output.error("\(label): \(after >= before ? "+" : "")\(Output.counted(after - before, "item")), \(after) in all")
        // What interceptors attached to the page (a filter's count of items it dropped, say).
        guard log.level == .debug else { return false }
        let values = manager.output.values
        if let metadata = (kind == .append ? values.lastPage : values.firstPage)?.metadata, !metadata.isEmpty {
            let entries = metadata.sorted { $0.key < $1.key }.map { "\(OneLine.escape($0.key, limit: Output.nameLimit))=\(OneLine.escape($0.value, limit: Output.nameLimit))" }
            Output.error("  page metadata: " + entries.joined(separator: ", "))
        }
        return false
    }

    /// Reports every direction whose last load failed (a prepend or append with nothing loaded
    /// runs as a refresh); `true` when any did.
    private func report(_ output: PaginationManagerOutput<PluginKey, PluginItem>) -> Bool {
        var failed = false
        for kind in PagingRequestKind.allCases {
            guard let error = output[kind].error else { continue }
            // Not a load that failed: the pages a streaming run dropped (it holds one) cannot be
            // prepended again when the source gives no previous keys; nothing asked for them.
            if case PagingError.droppedPagesUnreachable = error { continue }
            Output.problem("\(kind) failed: \(error)")
            failed = true
        }
        return failed
    }
}

/// One run's incremental loading: the value its requests carry, and the highest value seen,
/// kept once every load succeeded.
private struct IncrementalRun {
    let settings: IncrementalSettings
    let file: IncrementalStateFile
    let start: IncrementalValue
    let kept: IncrementalValue?
    let cursor: IncrementalCursor

    /// With the value the state file keeps (``Manifest/keptIncrementalValue(checkingWritable:makingLock:)``).
    init(_ settings: IncrementalSettings, kept: IncrementalValue?, full: Bool) {
        self.settings = settings
        file = IncrementalStateFile(path: settings.stateFile)
        self.kept = kept
        start = full ? settings.initial : kept ?? settings.initial
        // From the value kept, so that it never goes down; with --full, from nothing: the value
        // kept may be of another kind than the items now hold (strings become numbers), and
        // --full is the way to start over (the file still keeps the higher of two of one kind).
        cursor = IncrementalCursor(settings, start: full ? nil : kept)
        Output.problem("incremental: {state.\(settings.state)} = \(start.jsonText)\(full ? " (--full)" : kept == nil ? " (initial)" : "")")
    }

    /// Writes the highest value seen when it is higher than the value kept; `endReached`: the
    /// run loaded up to the end of the data.
    func keep(endReached: Bool, givesUp: () -> Bool) throws(IncrementalError) {
        let seen = cursor.seen
        guard seen.items == 0 || seen.withValue > 0 else {
            Output.problem("incremental: none of the \(seen.items) items loaded holds a value at \(settings.cursor); nothing is kept "
                           + "(is the pointer right? a source that keeps chosen fields, such as the http source's `fields`, must keep it)")
            return
        }
        // The highest among the items printed: a page loaded and then replaced before it was
        // printed (a refresh after appends) held items no run printed.
        guard let value = cursor.deliveredValue, value != kept else { return }
        let stored = try file.store(value, name: settings.state, namespace: settings.namespace,
                                    waiting: { Output.problem("incremental: \($0)") }, givesUp: givesUp)
        Output.problem("incremental: kept {state.\(settings.state)} = \(stored.jsonText) in \(settings.stateFile)"
                     + (stored == value ? "" : " (another run kept it; this run's highest was \(value.jsonText))"))
        if !endReached {
            Output.problem("incremental: the run stopped before the end of the data: the next run asks only for what comes after "
                           + "\(stored.jsonText), so the items this run did not load are skipped if the source lists the newest first "
                           + "(page to the end, --append N)")
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP during a run: the first cancels the tasks the run said it
/// ``stops(_:)`` (the loading; then the wait for background loads), and gives the signals their
/// default action back, so that a second one ends the process at once. A run still going
/// ``grace`` after the first ends then: a plugin call that never returns (an in-process
/// source's `fetch()` that blocks) cannot be cancelled, and it held the run for ever.
private final class Interrupt: Sendable {
    private let state = Locked<(signal: Int32?, tasks: [@Sendable () -> Void])>((nil, []))
    static let grace = 10

    init() {
        let pipe = paging_signals_to_pipe()
        // Without the pipe, a signal ends the run as it always did.
        guard pipe >= 0 else { return }
        Task { [state] in
            let signal = await Signals.next(on: pipe)
            let cancels = state.withLock { state in
                state.signal = signal
                return state.tasks
            }
            paging_signals_restore()
            cancels.forEach { $0() }
            detachThread(named: "pager-grace") {
                sleep(UInt32(Self.grace))
                Output.problem("run: stopped by \(Signals.name(signal)); the load in flight did not end within \(Self.grace) s of it "
                               + "(a plugin call that does not return: isolate the plugin, \"isolation\": \"process\"); exiting without it")
                PluginLibrary.exitHost(128 + signal)
            }
        }
    }

    /// Cancels `task` when a signal comes, or now if one came.
    func stops<Result: Sendable>(_ task: Task<Result, Never>) {
        let came = state.withLock { state in
            if state.signal == nil { state.tasks.append { task.cancel() } }
            return state.signal != nil
        }
        if came { task.cancel() }
    }

    /// The signal that came, if one did.
    var signal: Int32? { state.withLock { $0.signal } }
}

/// Prints a run's items as JSON Lines, and counts them.
private struct ItemPrinter {
    private var writer = Output.ItemWriter()
    /// Told of every item printed (the value incremental loading keeps comes from them).
    private let noting: IncrementalCursor?

    init(noting: IncrementalCursor?) {
        self.noting = noting
    }
    private(set) var items = 0
    private(set) var pages = 0
    /// The last page printed and its items printed: an incomplete last page is loaded again,
    /// and when it only gained items, only those are new.
    private var last: (key: PluginKey, printed: ArraySlice<PluginItem>)?
    /// Whether pages come before the first page printed, as it was when that page came (the
    /// manager, keeping only the last page, then says it may prepend again).
    private(set) var firstPrependState: LoadState?

    /// Prints every value.
    mutating func print(_ values: PagedValues<PluginKey, PluginItem>) {
        write(values)
        pages += values.pageCount
    }

    /// Writes `values` and counts them; the cursor of incremental loading is told of them.
    private mutating func write(_ values: some Collection<PluginItem>) {
        for item in values { writer.write(item) }
        noting?.noteDelivered(values)
        items += values.count
    }

    /// Prints what the last page holds that is not printed yet: a new page whole, the last page
    /// loaded again from where its printing stopped when it only gained items, else whole again
    /// (its items changed or went: the lines printed cannot be taken back, and printing from
    /// where it stopped lost the items that moved there, and the new versions of those edited).
    mutating func printLastPage(of output: PaginationManagerOutput<PluginKey, PluginItem>) {
        guard let page = output.values.lastPage else { return }
        let isNew = last?.key != page.key
        let printed = isNew ? [] : last!.printed
        if isNew { pages += 1 }
        if pages == 1 && isNew { firstPrependState = output.prependState }
        var start = printed.count
        if !page.values.starts(with: printed) && !printed.starts(with: page.values) {
            Output.problem("run: the last page (key \"\(page.key)\"), loaded again, changed items printed already: it is printed again whole, after them")
            start = 0
        }
        if page.values.count > start { write(page.values[start...]) }
        // What is printed of it: a page that only lost items at its end leaves them printed.
        let shrank = start == printed.count && page.values.count < printed.count
        last = (page.key, shrank ? printed : page.values[...])
        // Written out now: a run ended by SIGKILL has printed every page it reported.
        writer.flush()
    }

    mutating func finish() { writer.flush() }
}

/// Thrown after a command printed its help, to end with success.
struct HelpShown: Error {}
