import CPaging
import FoundationEssentials
import Glibc
import Paging
import PagingHost
import Synchronization

/// The plugin conformance suite behind `pager check`.
///
/// ``list(path:)`` reads a library's descriptors; ``run(_:path:plugin:options:)`` runs one
/// check of one plugin in the calling process. ``ConformanceRunner`` runs each of them in a
/// child process, so that a crash or a hang is a failed check.
public enum Conformance {
    /// The host's log lines when a plugin completes a fetch it already finished.
    static let refusedCompletion = "for unknown or finished fetch id"
    static let pageSize = 20

    /// Runs `check` against the plugin `id` of the library at `path`, in this process.
    public static func run(_ check: ConformanceCheck, path: String, plugin id: String, options: ConformanceOptions) async -> ConformanceResult {
        let start = ContinuousClock.now
        var result: ConformanceResult
        do {
            let library = try PluginLibrary.open(path: path)
            guard let descriptor = library.descriptors.first(where: { $0.id == id }) else {
                throw PluginLoadError.unknownPlugin(path: library.path, id: id, available: library.descriptors.map(\.id))
            }
            let context = Context(library: library, descriptor: descriptor, options: options)
            result = try await context.run(check)
        } catch {
            // abi-growth reports the loader's refusal of a library built wrong; other checks
            // never get here for such a library.
            let reason = check == .abiGrowth ? "the host refuses it: \(error)" : "\(error)"
            result = ConformanceResult(plugin: id, check: check.rawValue, status: .fail, reason: reason)
        }
        result.plugin = id
        result.check = check.rawValue
        result.durationMs = milliseconds(since: start)
        return result
    }
}

/// A check's verdict before the plugin and check names are filled in.
func pass(_ reason: String = "", notes: [String] = []) -> ConformanceResult {
    ConformanceResult(plugin: "", check: "", status: .pass, reason: reason, notes: notes)
}

func fail(_ reason: String, notes: [String] = []) -> ConformanceResult {
    ConformanceResult(plugin: "", check: "", status: .fail, reason: reason, notes: notes)
}

func skip(_ reason: String) -> ConformanceResult {
    ConformanceResult(plugin: "", check: "", status: .skip, reason: reason)
}

/// Collects the log lines of plugin instances (and the host's lines about them).
final class ConformanceLog: Sendable {
    private let lines = Mutex<[String]>([])

    var sink: PluginLogSink {
        { [self] _, _, message in
            lines.withLock { if $0.count < 10_000 { $0.append(message) } }
        }
    }

    /// The first line from line `start` on that contains `text`.
    func first(containing text: String, from start: Int = 0) -> String? {
        lines.withLock { $0.dropFirst(start).first { $0.contains(text) } }
    }

    var count: Int { lines.withLock { $0.count } }

    /// The lines from line `start` on.
    func lines(from start: Int = 0) -> [String] {
        lines.withLock { Array($0.dropFirst(start)) }
    }

    /// A sink that keeps nothing, for the create/destroy cycles.
    static let discard: PluginLogSink = { _, _, _ in }
}

/// A plugin instance made for a check.
enum Instance {
    case source(LoadedSource)
    case interceptor(LoadedInterceptor)

    func destroy() {
        switch self {
        case .source(let source): source.destroy()
        case .interceptor(let interceptor): interceptor.destroy()
        }
    }
}

struct Context: Sendable {
    let library: PluginLibrary
    let descriptor: PluginDescriptor
    let options: ConformanceOptions

    /// fetch() and the other calls that must return at once are bounded by --timeout-ms too,
    /// so a call that never returns fails its check, named, in that time (it held each check
    /// until the check was killed, saying only "timed out").
    var limits: PluginLimits {
        var limits = PluginLimits(fetchTimeout: options.fetchTimeout, callTimeout: options.fetchTimeout, withheldExtensions: options.withheldExtensions)
        limits.callTimeoutOrigin = "--timeout-ms"
        limits.callTimeoutBoundsLifecycle = false
        return limits
    }
    var timeoutText: String { "\(options.fetchTimeout.milliseconds) ms" }
    var params: PagingRequestParams { PagingRequestParams(pageSize: Conformance.pageSize) }

    func run(_ check: ConformanceCheck) async throws -> ConformanceResult {
        switch check {
        case .descriptor:
            guard let listed = Conformance.scan(library.entry, runnable: true).first(where: { $0.id == descriptor.id }) else {
                return fail("not listed by the library")
            }
            return listed.problems.isEmpty ? pass() : fail(listed.problems.joined(separator: "; "))
        case .createEmptyConfig: return createAccepting(.object([]))
        case .createValidConfig: return createValid()
        case .createInvalidConfig: return createInvalid()
        case .createDestroyCycles: return cycles()
        case .refreshKey: return refreshKey()
        case .fetchCompletesOnce: return try await requireSource { try await fetchOnce($0, $1) }
        case .keysChain: return try await requireSource { try await keysChain($0, $1) }
        case .cancelSafe: return try await requireSource { try await cancelSafe($0, $1) }
        case .destroyInFlight: return try await requireSource { try await destroyInFlight($0, $1) }
        case .proceedIntact: return try await requireInterceptor { await proceedIntact($0, $1) }
        case .handleAnyPage: return try await requireInterceptor { await handleAnyPage($0, $1) }
        case .abiGrowth: return abiGrowth()
        case .itemsValid:
            switch descriptor.kind {
            case .source: return try await requireSource { await itemsValid($0, $1) }
            case .interceptor: return try await requireInterceptor { await itemsValid($0, $1) }
            }
        case .keptPages: return try await requireInterceptor { await keptPages($0, $1) }
        case .callHandles: return try await callHandles()
        case .extensions: return await extensions()
        case .threadSafe:
            guard descriptor.isThreadSafe else { return skip("not flagged PAGING_PLUGIN_THREAD_SAFE: the host serializes its calls") }
            switch descriptor.kind {
            case .source: return try await requireSource { await concurrentFetches($0, $1) }
            case .interceptor: return try await requireInterceptor { await concurrentIntercepts($0, $1) }
            }
        }
    }

    // MARK: - Creating

    func create(_ config: JSONValue, sink: @escaping PluginLogSink) -> Result<Instance, PluginLoadError> {
        do {
            switch descriptor.kind {
            case .source:
                return .success(.source(try library.makeSource(id: descriptor.id, config: config, sink: sink, limits: limits)))
            case .interceptor:
                return .success(.interceptor(try library.makeInterceptor(id: descriptor.id, config: config, sink: sink, limits: limits)))
            }
        } catch {
            return .failure(error)
        }
    }

    /// `nil` when the failure is clean: a code other than OK, and a message.
    func uncleanFailure(_ error: PluginLoadError) -> String? {
        guard case .createFailed(_, _, let status, let message) = error else { return "\(error)" }
        if status == .ok { return "create returned NULL after config_fail with PAGING_OK" }
        if message == "create returned NULL without saying why" { return "create returned NULL without calling config_fail" }
        if message.trimmingWhitespace.isEmpty { return "create failed with an empty message" }
        return nil
    }

    func createAccepting(_ config: JSONValue) -> ConformanceResult {
        switch create(config, sink: ConformanceLog.discard) {
        case .success(let instance):
            instance.destroy()
            return pass("created with \(config.jsonText)")
        case .failure(let error):
            if let problem = uncleanFailure(error) { return fail("\(config.jsonText): \(problem)") }
            guard case .createFailed(_, _, let status, let message) = error else { return fail("\(error)") }
            return pass("refused cleanly: \(status): \(message)")
        }
    }

    func createValid() -> ConformanceResult {
        let config = Conformance.validConfig(for: descriptor.id, options)
        switch create(config, sink: ConformanceLog.discard) {
        case .success(let instance):
            instance.destroy()
            return pass("created with \(clip(config.jsonText))")
        case .failure(let error):
            let hint = options.config == nil ? " (pass a valid one with --config)" : ""
            return fail("could not be created with \(clip(config.jsonText))\(hint): \(error)")
        }
    }

    func createInvalid() -> ConformanceResult {
        let configs = Conformance.invalidConfigs(valid: Conformance.validConfig(for: descriptor.id, options))
        var created = 0, refused = 0
        for config in configs {
            switch create(config, sink: ConformanceLog.discard) {
            case .success(let instance):
                instance.destroy()
                created += 1
            case .failure(let error):
                if let problem = uncleanFailure(error) { return fail("\(clip(config.jsonText)): \(problem)") }
                refused += 1
            }
        }
        return pass("\(configs.count) invalid configs: \(refused) refused cleanly, \(created) accepted")
    }

    /// A source or interceptor made with the valid config, or the reason it cannot be.
    enum Made {
        case made(Instance)
        case refused(ConformanceResult)
    }

    func makeValid(sink: @escaping PluginLogSink) -> Made {
        switch create(Conformance.validConfig(for: descriptor.id, options), sink: sink) {
        case .success(let instance): return .made(instance)
        case .failure(let error): return .refused(skip("cannot be created with a valid config (see create-valid-config): \(error)"))
        }
    }

    func requireSource(_ body: (LoadedSource, ConformanceLog) async throws -> ConformanceResult) async throws -> ConformanceResult {
        guard descriptor.kind == .source else { return skip("not a source") }
        let log = ConformanceLog()
        switch makeValid(sink: log.sink) {
        case .refused(let result): return result
        case .made(let instance):
            guard case .source(let source) = instance else { return skip("not a source") }
            defer { source.destroy() }
            return try await body(source, log)
        }
    }

    func requireInterceptor(_ body: (LoadedInterceptor, ConformanceLog) async throws -> ConformanceResult) async throws -> ConformanceResult {
        guard descriptor.kind == .interceptor else { return skip("not an interceptor") }
        let log = ConformanceLog()
        switch makeValid(sink: log.sink) {
        case .refused(let result): return result
        case .made(let instance):
            guard case .interceptor(let interceptor) = instance else { return skip("not an interceptor") }
            defer { interceptor.destroy() }
            return try await body(interceptor, log)
        }
    }

    // MARK: - Cycles

    func cycles() -> ConformanceResult {
        let config = Conformance.validConfig(for: descriptor.id, options)
        guard case .success(let first) = create(config, sink: ConformanceLog.discard) else {
            return skip("cannot be created with a valid config (see create-valid-config)")
        }
        first.destroy()
        // The first call to the host after a destroy() returned, from a thread the plugin left
        // (an interceptor's was never looked for; only a source's, in destroy-in-flight). Kept
        // alone: lines kept for every cycle would read as a leak.
        let late = Mutex<String?>(nil)
        let sink: PluginLogSink = { _, _, message in
            if message.contains(PluginInstance.afterDestroy) { late.withLock { $0 = $0 ?? message } }
        }
        let total = max(options.cycles, 2)
        let warmUp = max(total / 10, 1)
        var before = 0, threads = 0
        for cycle in 0..<total {
            if cycle == warmUp { (before, threads) = (residentBytes(), threadCount()) }
            switch create(config, sink: sink) {
            case .success(let instance): instance.destroy()
            case .failure(let error): return fail("cycle \(cycle + 1) of \(total): create failed: \(error)")
            }
        }
        // Threads a plugin leaves to end on their own after destroy (late_log's, for 200 ms)
        // are waited for, up to 2 s: ninety of them still running, their stacks resident, read
        // as a leak on a fast machine. A thread that never ends is still counted.
        waitForThreads(atMost: threads, within: .seconds(2))
        // A call a thread makes a little after destroy(), as destroy-in-flight watches.
        usleep(300_000)
        if let late = late.withLock({ $0 }) {
            return fail("called the host after destroy() returned (the host table is only valid until then): \"\(late)\"")
        }
        let growth = residentBytes() - before
        let measured = total - warmUp
        // The host keeps every instance it makes (a plugin thread may call it after destroy):
        // that part, measured the same way without the plugin, is the host's.
        let kept = hostBytesPerInstance() * measured
        let own = growth - kept
        let text = "resident memory grew \(kilobytes(growth)) over \(measured) cycles after \(warmUp) to warm up, "
            + "\(kilobytes(kept)) of it the host's own (\(kept / max(measured, 1)) bytes an instance, kept for calls after destroy): "
            + "\(own / max(measured, 1)) bytes a cycle"
        return own < Self.cyclesSlack ? pass(text) : fail(text + "; the limit is \(kilobytes(Self.cyclesSlack)): a leak per create/destroy")
    }

    /// Waits until the process has at most `count` threads, or `limit` passed.
    private func waitForThreads(atMost count: Int, within limit: Duration) {
        let clock = ContinuousClock(), start = clock.now
        while threadCount() > count, clock.now - start < limit { usleep(5_000) }
    }

    /// What the host keeps of each instance it makes, over 1,000 instances without a plugin.
    private func hostBytesPerInstance() -> Int {
        let count = 1_000, before = residentBytes()
        for _ in 0..<count {
            _ = PluginInstance(label: "\(descriptor.id) (\(library.path))", sink: ConformanceLog.discard, limits: limits)
        }
        return max(0, residentBytes() - before) / count
    }

    static let cyclesSlack = 2 << 20

    private func kilobytes(_ bytes: Int) -> String { "\(bytes / 1024) KB" }

    // MARK: - Sources

    func refreshKey() -> ConformanceResult {
        guard descriptor.kind == .source else { return skip("not a source") }
        let log = ConformanceLog()
        switch create(Conformance.validConfig(for: descriptor.id, options), sink: log.sink) {
        case .failure(let error):
            if case .createFailed(_, _, _, let message) = error, message == "refresh_key failed" || message.hasPrefix("keys_set") {
                return fail("refresh_key failed: \(error)")
            }
            return skip("cannot be created with a valid config (see create-valid-config): \(error)")
        case .success(let instance):
            guard case .source(let source) = instance else { return skip("not a source") }
            defer { source.destroy() }
            let chain = source.keyChain(for: source.refreshKey)
            if let warning = log.first(containing: "key_chain(") { return fail("key_chain of the refresh key failed: \(warning)") }
            return pass("refresh key \(show(source.refreshKey)); neighbours: prev \(chain.prevKey.map(show) ?? "none"), next \(chain.nextKey.map(show) ?? "none")")
        }
    }

    func refreshRequest(_ source: LoadedSource) -> PluginRequest {
        PluginRequest(kind: .refresh, keyChain: source.keyChain(for: source.refreshKey), params: params)
    }

    /// Whether a failure is the plugin's misuse of the ABI, not a clean failure: a refused call,
    /// a failure with PAGING_OK or with a code the ABI does not have, and for an intercept an
    /// unknown result code or PENDING without defer().
    static func isMisuse(_ error: PluginError) -> Bool {
        error.status == .invalidArgument || !error.status.isKnown || error.message.contains(PluginStatus.reportedOK)
            || error.message.hasPrefix("intercept returned unknown code")
            || error.message.hasPrefix("intercept returned PAGING_INTERCEPT_PENDING without calling defer()")
    }

    /// Why a fetch failed when a call to the plugin outlasted the call timeout (--timeout-ms):
    /// fetch(), or key_chain for the request's keys (its failure fails the fetch); else `nil`.
    /// Each fetch more would wait as long, and a check that goes on was killed saying only
    /// "timed out".
    func unreturnedCall(_ error: any Error) -> String? {
        guard let error = error as? PluginError, error.status == .timeout else { return nil }
        if error.message.hasPrefix(LoadedSource.didNotReturn) {
            return "fetch() did not return within \(timeoutText) (--timeout-ms): fetch() must return at once and complete later"
        }
        guard error.message.hasPrefix("key_chain("), error.message.contains(" did not return within ") else { return nil }
        return "\(error.message): key_chain must return at once"
    }

    /// Why a fetch error is the plugin's fault, or `nil` when it is a clean failure.
    func misbehaviour(_ error: any Error) -> String? {
        guard let error = error as? PluginError else { return "\(error)" }
        if Conformance.invalidItem(error) != nil { return nil } // items-valid's business
        if error.status == .timeout, error.message.hasPrefix("the fetch did not complete within") {
            return "the fetch did not complete within \(timeoutText)"
        }
        if let unreturned = unreturnedCall(error) { return unreturned }
        guard Self.isMisuse(error) else { return nil }
        if error.status == .invalidArgument { return "misused the host: \(error.message)" }
        if !error.status.isKnown { return "failed with \(error.status), which is no PAGING_ERR_* code: \(error.message)" }
        return error.message
    }

    func fetchOnce(_ source: LoadedSource, _ log: ConformanceLog) async throws -> ConformanceResult {
        // Its key_chain is not the fetch's time (one that hung was blamed on fetch()).
        let request = refreshRequest(source)
        let start = ContinuousClock.now
        var outcome: String
        // A fetch the host ended at an item it refused: the plugin's completion after it is
        // refused too, and no second one (the item is items-valid's business).
        var endedAtAnItem = false
        var refusedSynchronously = false
        do {
            let page = try await source.fetch(request: request)
            outcome = "completed with \(page.values.count) items"
        } catch {
            if let problem = misbehaviour(error) { return fail(problem) }
            endedAtAnItem = Conformance.invalidItem(error) != nil
            refusedSynchronously = (error as? PluginError)?.message == LoadedSource.refusedSynchronously
            outcome = "completed with a failure: \(error)"
        }
        let took = Conformance.milliseconds(since: start)
        // The host's fetch timeout counts from fetch()'s return, and fetch() has the call
        // timeout: one that blocked for most of it, then completed, took up to twice as long.
        if took > Double(options.fetchTimeout.milliseconds) {
            return fail("\(outcome) in \(Int(took)) ms from the call of fetch(), more than --timeout-ms \(timeoutText) "
                        + "(fetch() must return at once and complete later)")
        }
        // A second completion may come later, from another thread (one 300 ms after fetch()
        // returned an error passed, to be blamed by destroy-in-flight on a call after destroy).
        try await Task.sleep(for: .milliseconds(600))
        if !endedAtAnItem, let refused = log.first(containing: Conformance.refusedCompletion) {
            if refusedSynchronously {
                return fail("fetch() returned an error, which ends the fetch, and the fetch was then completed: the host refused \"\(refused)\"")
            }
            return fail("completed more than once: the host refused \"\(refused)\"")
        }
        if let contradiction = log.first(containing: LoadedSource.endingStands) {
            return fail("ended the fetch inside fetch(), then returned an error: \"\(contradiction)\"")
        }
        return pass("\(outcome) in \(Int(took)) ms")
    }

    func keysChain(_ source: LoadedSource, _ log: ConformanceLog) async throws -> ConformanceResult {
        var page: PluginPage
        do {
            page = try await source.fetch(request: refreshRequest(source))
        } catch {
            return skip("the refresh fetch failed, so there are no keys to follow (see fetch-completes-once): \(error)")
        }
        var seen: [PluginKey: Int] = [page.key: 1]
        var count = 1
        while count < 10, let next = page.nextKey {
            if let earlier = seen[next] {
                return fail("page \(count) (key \(show(page.key))) names as next key \(show(next)), the key of page \(earlier)")
            }
            let previous = page
            do {
                page = try await source.fetch(request: PluginRequest(kind: .append, keyChain: source.keyChain(for: next), params: params))
            } catch {
                if Conformance.invalidItem(error) != nil {
                    return pass("\(count) pages, then page \(count + 1) (key \(show(next))) failed over its items",
                                notes: ["page \(count + 1) holds an item that is not valid JSON (see items-valid)"])
                }
                return fail("appending page \(count + 1) (key \(show(next))) failed: \(error)")
            }
            count += 1
            if let prev = page.prevKey, prev != previous.key {
                return fail("page \(count) (key \(show(page.key))) says the page before it is \(show(prev)), but it follows \(show(previous.key))")
            }
            seen[page.key] = count
        }
        let keys = seen.sorted { $0.value < $1.value }.map { show($0.key) }.joined(separator: ", ")
        return pass("\(count) pages (\(keys))\(page.nextKey == nil ? ", then the end" : "")")
    }

    func cancelSafe(_ source: LoadedSource, _ log: ConformanceLog) async throws -> ConformanceResult {
        let request = refreshRequest(source)
        var completed = 0, failed = 0
        // Ended each in a fetch() that blocks for most of --timeout-ms, the 50 outlasted the
        // check's process, killed saying only "timed out".
        let start = ContinuousClock.now, budget = Duration.seconds(20)
        for round in 0..<50 {
            if ContinuousClock.now - start > budget {
                return fail("\(round) fetches cancelled after 0-5 ms took more than \(budget) to end, \((ContinuousClock.now - start).wholeMilliseconds / UInt64(round)) ms each "
                            + "(a cancelled fetch should end at once, and fetch() return at once)")
            }
            let task = Task { try await source.fetch(request: request) }
            try await Task.sleep(for: .microseconds(Int.random(in: 0...5_000)))
            task.cancel()
            switch await task.result {
            case .success: completed += 1
            case .failure(let error):
                if let unreturned = unreturnedCall(error) { return fail(unreturned) }
                failed += 1
            }
        }
        let (raw, unreturned) = try await rawCancels(request)
        if let unreturned { return fail(unreturned) }
        return pass("50 fetches cancelled after 0-5 ms all finished (\(completed) completed first, \(failed) cancelled or failed)",
                    notes: raw.map { [$0] } ?? [])
    }

    /// Calls the plugin's cancel directly: for unknown ids, during fetches, and for finished
    /// ids (the host itself only cancels fetches it is waiting for).
    /// A note, or why the check fails: a fetch() that did not return within --timeout-ms.
    func rawCancels(_ request: PluginRequest) async throws -> (note: String?, unreturned: String?) {
        guard let create = library.entry.pointee.create_source else { return (nil, nil) }
        let instance = PluginInstance(label: "\(descriptor.id) (\(library.path))", sink: ConformanceLog.discard, limits: limits)
        guard let plugin = try? library.create(descriptor, Conformance.validConfig(for: descriptor.id, options), instance, {
            create($0, instance.table, $1)
        }) else { return (nil, nil) }
        // Not while a fetch() has not returned: destroy() is never called during another call.
        var inCall = false
        defer {
            if !inCall { plugin.pointee.destroy?(plugin) }
            instance.destroyed.store(true, ordering: .releasing)
        }
        guard let cancel = plugin.pointee.cancel, let fetch = plugin.pointee.fetch else { return ("no cancel function: only the host's cancellation applies", nil) }
        let call = UnsafeSendable((plugin, fetch))
        for id: UInt64 in [0, 1, .max, 0xDEAD_BEEF] { cancel(plugin, id) }
        // Ten fetches, each cancelled soon after it started; then one wait for all of them
        // (one after another, a cancel that does nothing cost ten fetch timeouts, and the check
        // was killed with no word of why).
        var cancelled: [UInt64] = [], pendingAtCancel: Set<UInt64> = []
        for round in 0..<10 {
            let id = (UInt64(1) << 62) + UInt64(round)
            instance.fetches.withLock { $0[id] = PendingFetch() }
            // On a thread of its own: one that never returned held the check until it was killed.
            guard let status = await Conformance.bounded(options.fetchTimeout, { CView.withRequest(request) { call.value.1(call.value.0, $0, id) } }) else {
                inCall = true
                return (nil, "fetch() called directly did not return within \(timeoutText) (--timeout-ms): fetch() must return at once and complete later")
            }
            guard status == PAGING_OK else {
                instance.fetches.withLock { _ = $0.removeValue(forKey: id) }
                continue
            }
            try await Task.sleep(for: .microseconds(Int.random(in: 0...2_000)))
            if instance.fetches.withLock({ $0[id]?.result == nil }) { pendingAtCancel.insert(id) }
            cancel(plugin, id)
            cancelled.append(id)
        }
        func unfinished() -> Int { instance.fetches.withLock { fetches in cancelled.filter { fetches[$0]?.result == nil }.count } }
        let deadline = ContinuousClock.now + options.fetchTimeout
        while unfinished() > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(1)) }
        let late = unfinished()
        // Completed with a page after their cancel: allowed (the page may have been ready),
        // but all of them is a cancel() that stops nothing (it passed as a working one).
        let completedAnyway = instance.fetches.withLock { fetches in
            pendingAtCancel.filter { if case .completed? = fetches[$0]?.result { true } else { false } }.count
        }
        for id in cancelled {
            instance.finishFetch(id, .failed(.cancelled, "conformance check"))
            instance.fetches.withLock { _ = $0.removeValue(forKey: id) }
            cancel(plugin, id) // finished: must be ignored
        }
        if late > 0 { return ("\(late) of \(cancelled.count) fetches did not complete within \(timeoutText) of their cancel (the ABI asks for a prompt CANCELLED)", nil) }
        guard pendingAtCancel.count >= 3, completedAnyway == pendingAtCancel.count else { return (nil, nil) }
        return ("all \(completedAnyway) fetches cancelled while pending were completed with a page later, none failed with CANCELLED: cancel() may stop nothing", nil)
    }

    func destroyInFlight(_ source: LoadedSource, _ log: ConformanceLog) async throws -> ConformanceResult {
        let request = refreshRequest(source)
        let ended = Locked(0)
        let tasks = (0..<5).map { _ in
            Task {
                defer { ended.withLock { $0 += 1 } }
                return try await source.fetch(request: request)
            }
        }
        // Destroyed while the fetches are in the plugin's hands: once fetch() was called for
        // each (or they all ended).
        let deadline = ContinuousClock.now + options.fetchTimeout
        while source.fetchesCalled < 5, ended.withLock({ $0 }) < 5, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(1))
        }
        // Lines before: refused calls during fetch() and during destroy() (fetch-completes-once's
        // business: a worker that destroy() joins completing a fetch twice was taken for a call
        // after destroy), also of a fetch() still running now, which destroy() waits for.
        // Counted as the plugin's destroy() returns; a call after that is also said as one
        // after destroy (PluginInstance.afterDestroy) once the host marked it destroyed.
        let destroyedAt = Locked<Int?>(nil)
        source.destroy(returned: { destroyedAt.withLock { $0 = log.count } })
        // Left running, its calls to the host are still its own to make: not ones after destroy.
        guard let destroyed = destroyedAt.withLock({ $0 }) else {
            // destroy() is never called during another call: a fetch() that never returns keeps
            // it from being called at all (this said "destroy() did not return").
            for task in tasks {
                if case .failure(let error) = await task.result, let unreturned = unreturnedCall(error) {
                    return fail("\(unreturned), so destroy() could not be called")
                }
            }
            // As the host said it (with calls in flight, it waits 1 s, not the lifecycle's bound).
            return fail("\(log.first(containing: "destroy() ") ?? "destroy() did not return"), with 5 fetches started")
        }
        for task in tasks { _ = await task.result }
        // A thread the plugin forgot would call the host within a fetch's time (it watched
        // 300 ms: a completion 1.5 s later passed).
        try await Task.sleep(for: max(.milliseconds(300), options.fetchTimeout))
        if let late = log.first(containing: Conformance.refusedCompletion, from: destroyed)
            ?? log.first(containing: PluginInstance.afterDestroy) {
            return fail("called the host after destroy() returned (the host table is only valid until then): \"\(late)\"")
        }
        return pass("destroyed with 5 fetches started; no call to the host afterwards")
    }

    func concurrentFetches(_ source: LoadedSource, _ log: ConformanceLog) async -> ConformanceResult {
        let request = refreshRequest(source)
        let first = ContinuousClock.now
        let reference = await Outcome(source, request)
        let alone = ContinuousClock.now - first
        // Each of the calls would wait as long.
        if reference.failure == .timeout { return skip("the first fetch timed out: each of the calls would wait as long") }
        // 500 calls a task, fewer for a source whose fetch takes long to complete (one over a
        // network: 500 of 60 ms each outlasted the budget, and a correct source failed): as many
        // as take 10 s, at least 2 (each at most --timeout-ms, within the budget twice over).
        let calls = max(2, min(500, Int(Duration.seconds(10) / max(alone, .milliseconds(1)))))
        // A fetch() that blocks for a good part of --timeout-ms outlasted the check's process.
        let start = ContinuousClock.now, budget = Duration.seconds(20)
        let findings = await withTaskGroup(of: Result<Void, ConcurrentFinding>.self) { group in
            for task in 0..<4 {
                group.addTask {
                    for call in 0..<calls {
                        let spent = ContinuousClock.now - start
                        if spent > budget {
                            let each = spent.wholeMilliseconds / UInt64(max(call, 1))
                            return .failure(.slow("task \(task) made \(call) of its \(calls) calls in \(budget), \(each) ms each, against "
                                                  + "\(alone.wholeMilliseconds) ms for the first fetch alone (fetch() must return at once; "
                                                  + "concurrent fetches must not wait for each other)"))
                        }
                        let outcome = await Outcome(source, request)
                        if outcome != reference { return .failure(.mismatch("task \(task), call \(call): \(outcome) instead of \(reference)")) }
                    }
                    return .success(())
                }
            }
            return await group.reduce(into: [ConcurrentFinding]()) { if case .failure(let finding) = $1 { $0.append(finding) } }
        }
        for case .slow(let slow) in findings { return fail("4 x \(calls) concurrent fetches: \(slow)") }
        for case .mismatch(let first) in findings { return fail("inconsistent results under 4 x \(calls) concurrent fetches: \(first)") }
        if let refused = log.first(containing: Conformance.refusedCompletion) {
            return fail("a fetch completed more than once: the host refused \"\(refused)\"")
        }
        return pass("4 tasks x \(calls) concurrent fetches, every one \(reference)")
    }

    // MARK: - Interceptors

    func proceedIntact(_ interceptor: LoadedInterceptor, _ log: ConformanceLog) async -> ConformanceResult {
        let recorder = RecordingSource()
        let pager = PluginPager(source: recorder, interceptors: [interceptor], deduplication: .disabled)
        var answered = 0, proceeded = 0, failed = 0
        var notes: [String] = []
        for request in Self.sampleRequests + Self.sampleRequests {
            let before = recorder.count
            do {
                _ = try await pager.load(request)
            } catch {
                if Conformance.invalidItem(error) != nil {
                    answered += 1
                    note(&notes, "answers some requests with items that are not valid JSON (see items-valid)")
                    continue
                }
                if let error = error as? PluginError, Self.isMisuse(error) {
                    return fail("intercept of \(describe(request)): \(error.message)")
                }
                // Not answered in time: each request more would wait as long.
                if let error = error as? PluginError, error.status == .timeout {
                    return fail("intercept of \(describe(request)) was not answered within \(timeoutText): \(error.message)")
                }
                failed += 1
                note(&notes, "fails some requests: \(error)")
                continue
            }
            guard let seen = recorder.last, recorder.count > before else {
                answered += 1
                continue
            }
            proceeded += 1
            if seen.kind != request.kind { return fail("the request's kind changed from \(request.kind) to \(seen.kind)") }
            if seen.params.pageSize <= 0 { return fail("the page size became \(seen.params.pageSize)") }
            let changes = differences(request, seen)
            if !changes.isEmpty { note(&notes, "rewrites requests: " + changes.joined(separator: ", ")) }
        }
        return pass("\(proceeded) requests proceeded\(notes.isEmpty ? " intact" : ""), \(answered) answered by the interceptor"
                    + (failed > 0 ? ", \(failed) failed by it" : ""), notes: notes)
    }

    func handleAnyPage(_ interceptor: LoadedInterceptor, _ log: ConformanceLog) async -> ConformanceResult {
        let odd: [[UInt8]] = [[], [0xFF, 0xFE, 0x00, 0x01], Array("not json".utf8), [0x00], Array(repeating: 0x7B, count: 70_000)]
        let pages: [PluginPage] = [
            PluginPage(request: Self.sampleRequests[0], values: [], prevKey: nil, nextKey: nil),
            PluginPage(request: Self.sampleRequests[2], values: (0..<1_000).map { PluginItem(json: #"{"n":\#($0)}"#) },
                       prevKey: "0", nextKey: "40"),
            // At a key no other check asks for: an interceptor that keeps pages (a store) may
            // answer it later with these items, which no host hands it, only this check.
            PluginPage(request: PluginRequest(kind: .append, keyChain: PagingKeyChain(key: PluginKey(bytes: [0xFF, 0x00, 0x42])),
                                              params: Self.sampleRequests[5].params),
                       values: odd.map { PluginItem(bytes: $0) }, prevKey: PluginKey(bytes: [0x00, 0xFF]), nextKey: PluginKey(bytes: [])),
            PluginPage(request: Self.sampleRequests[4], values: [PluginItem(json: "1")], prevKey: nil, nextKey: nil),
        ]
        // transform() for an instance that offers paging.page-transform/1, handle() otherwise.
        let logged = log.count
        var refused = 0, passedOn = false
        for page in pages {
            do {
                _ = try await interceptor.transform(page: page)
            } catch let error as PluginError where Conformance.invalidItem(error) != nil
                        && page.values.contains(where: { JSONValidator.validate($0.bytes) != nil }) {
                // A transform that wraps or keeps the items it is given passes on those that
                // are not JSON: the odd page's doing, which the host refuses, not the plugin's.
                passedOn = true
            } catch let error as PluginError where error.status == .invalidArgument || error.status == .timeout || error.message.contains("unknown code") {
                return fail("the page of \(page.values.count) items: \(error.message)")
            } catch {
                refused += 1
            }
        }
        // A handle() that does not return fails no load (the host gives up on it, and says so):
        // it passed, and the intercept queued behind it took the blame.
        if let stuck = log.first(containing: "handle did not return within", from: logged) {
            return fail("handle() did not return: the host said \"\(clip(stuck))\"")
        }
        var notes = refused > 0 ? ["transform() failed \(refused) of them"] : []
        if passedOn { notes.append("the odd page's items that are not JSON, passed on by transform(), were refused by the host") }
        let verb = interceptor.offeredExtensions.contains(PAGING_EXT_PAGE_TRANSFORM) ? "transform()ed" : "handle()d"
        return pass("\(verb) \(pages.count) pages: empty, 1,000 items, odd bytes and keys, no keys", notes: notes)
    }

    func concurrentIntercepts(_ interceptor: LoadedInterceptor, _ log: ConformanceLog) async -> ConformanceResult {
        // A mismatch, or an intercept not answered in time (each would cost the timeout).
        let problems = await withTaskGroup(of: (message: String, unanswered: Bool)?.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var firstAnswer: [Int: [PluginItem]] = [:]
                    for call in 0..<500 {
                        let slot = call % 50
                        let key = PluginKey("t\(task)-\(slot)")
                        let request = PluginRequest(kind: .append, keyChain: PagingKeyChain(key: key), params: params)
                        let values = (0..<3).map { PluginItem(json: #""\#(task)-\#(slot)-\#($0)""#) }
                        if call % 2 == 1 {
                            await interceptor.handle(page: PluginPage(request: request, values: values, prevKey: nil, nextKey: nil))
                            continue
                        }
                        do {
                            switch try await interceptor.intercept(request: request) {
                            case .proceed(let next, _), .proceedOrFallBack(let next, _, _):
                                if next.kind != request.kind { return ("task \(task), call \(call): the kind changed to \(next.kind)", false) }
                            case .complete(let page), .completeThenRevalidate(let page):
                                if let first = firstAnswer[slot], first != page.values {
                                    return ("task \(task), call \(call): answered \(show(key)) with \(page.values.count) items, earlier with \(first.count) different ones", false)
                                }
                                firstAnswer[slot] = page.values
                            }
                        } catch let error as PluginError where error.status == .invalidArgument && Conformance.invalidItem(error) == nil {
                            return ("task \(task), call \(call): \(error.message)", false)
                        } catch let error as PluginError where error.status == .timeout {
                            return (error.message, true)
                        } catch {}
                    }
                    return nil
                }
            }
            return await group.compactMap { $0 }.reduce(into: []) { $0.append($1) }
        }
        if let unanswered = problems.first(where: \.unanswered) {
            return skip("an intercept was not answered (see proceed-intact): \(unanswered.message)")
        }
        if let first = problems.first { return fail("under 4 x 500 concurrent intercept/handle calls: \(first.message)") }
        return pass("4 tasks x 500 concurrent intercept/handle calls, consistent answers")
    }

    static let sampleRequests: [PluginRequest] = [
        PluginRequest(kind: .refresh, keyChain: PagingKeyChain(key: "0"), params: PagingRequestParams(pageSize: 20)),
        PluginRequest(kind: .refresh, keyChain: PagingKeyChain(key: "0", nextKey: "20"),
                      params: PagingRequestParams(pageSize: 20, userInfo: ["q": "swift paging", "x-check": "1"])),
        PluginRequest(kind: .append, keyChain: PagingKeyChain(key: "20", prevKey: "0", nextKey: "40"),
                      params: PagingRequestParams(pageSize: 20, userInfo: ["q": "swift paging"])),
        PluginRequest(kind: .prepend, keyChain: PagingKeyChain(key: "10", nextKey: "20"), params: PagingRequestParams(pageSize: 10)),
        PluginRequest(kind: .append, keyChain: PagingKeyChain(key: ""), params: PagingRequestParams(pageSize: 1)),
        PluginRequest(kind: .append, keyChain: PagingKeyChain(key: PluginKey(bytes: [0xFF, 0x00, 0x41])),
                      params: PagingRequestParams(pageSize: 7, userInfo: ["ünïcode": "välue", "": ""])),
        PluginRequest(kind: .refresh, keyChain: PagingKeyChain(key: "0"),
                      params: PagingRequestParams(pageSize: 20, userInfo: [PagingUserInfoKey.hardRefresh: "true"])),
    ]

    func differences(_ sent: PluginRequest, _ seen: PluginRequest) -> [String] {
        var changes: [String] = []
        if sent.key != seen.key { changes.append("key \(show(sent.key)) -> \(show(seen.key))") }
        if sent.keyChain.prevKey != seen.keyChain.prevKey || sent.keyChain.nextKey != seen.keyChain.nextKey, sent.key == seen.key {
            changes.append("neighbour keys of \(show(sent.key))")
        }
        if sent.params.pageSize != seen.params.pageSize { changes.append("page size \(sent.params.pageSize) -> \(seen.params.pageSize)") }
        if sent.params.userInfo != seen.params.userInfo {
            let names = Set(sent.params.userInfo.keys).union(seen.params.userInfo.keys).filter { sent.params.userInfo[$0] != seen.params.userInfo[$0] }
            changes.append("params \(names.sorted().joined(separator: ", "))")
        }
        return changes
    }

    func note(_ notes: inout [String], _ text: String) {
        if !notes.contains(text) { notes.append(text) }
    }

    func describe(_ request: PluginRequest) -> String { "\(request.kind) \(show(request.key))" }
}

/// A fetch's outcome, compared across concurrent calls.
/// What stopped one task of thread-safe's concurrent fetches.
private enum ConcurrentFinding: Error {
    /// A result other than the first fetch's.
    case mismatch(String)
    /// Out of time: the calls take too long for 500 of them.
    case slow(String)
}

private struct Outcome: Equatable, Sendable, CustomStringConvertible {
    var values: [PluginItem]?
    var prevKey: PluginKey?
    var nextKey: PluginKey?
    var failure: PluginStatus?

    init(_ source: LoadedSource, _ request: PluginRequest) async {
        do {
            let page = try await source.fetch(request: request)
            values = page.values
            prevKey = page.prevKey
            nextKey = page.nextKey
        } catch let error as PluginError {
            failure = error.status
        } catch {
            failure = .internal
        }
    }

    var description: String {
        if let failure { return "failed (\(failure))" }
        return "\(values?.count ?? 0) items, prev \(prevKey.map(show) ?? "none"), next \(nextKey.map(show) ?? "none")"
    }
}

/// The source behind an interceptor under check: records what reaches it, answers anything.
final class RecordingSource: PagingSource, Sendable {
    private let seen = Mutex<[PluginRequest]>([])
    let refreshKey = PluginKey("0")

    var count: Int { seen.withLock { $0.count } }
    var last: PluginRequest? { seen.withLock { $0.last } }

    func fetch(request: PluginRequest) async throws -> PluginPage {
        seen.withLock { $0.append(request) }
        return PluginPage(request: request, values: [PluginItem(json: #"{"from":"source"}"#), PluginItem(json: "2")],
                          prevKey: nil, nextKey: PluginKey(bytes: request.key.bytes + Array("+".utf8)))
    }
}

func show(_ key: PluginKey) -> String {
    guard let text = key.text, !text.contains(where: { $0.isNewline || $0 == "\0" }) else { return key.description }
    return "'\(text)'"
}

func clip(_ text: String, _ limit: Int = 160) -> String {
    text.count <= limit ? text : String(text.prefix(limit)) + "..."
}

/// The process's resident set size, from /proc/self/status (read with stdio: Foundation's
/// file reading stops short on /proc files, whose size is reported as 0).
func residentBytes() -> Int {
    statusNumber("VmRSS:") * 1024
}

/// The threads of this process.
func threadCount() -> Int {
    statusNumber("Threads:")
}

/// The number on the line of /proc/self/status that starts with `field`; 0 without one.
private func statusNumber(_ field: String) -> Int {
    guard let file = fopen("/proc/self/status", "r") else { return 0 }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 256)
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        guard text.hasPrefix(field) else { continue }
        return Int(text.dropFirst(field.count).filter(\.isNumber)) ?? 0
    }
    return 0
}

extension Duration {
    var milliseconds: Int64 { components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000 }
}
