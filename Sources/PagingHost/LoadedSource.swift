import CPaging
import Dispatch
import FoundationEssentials
import Paging
import Synchronization

/// A source plugin from a loaded library, as a ``PagingSource`` of the engine.
///
/// A fetch gets a fresh integer id and waits for the plugin to complete it through the host
/// table, from any thread. A fetch completed twice, or after it was finished, cancelled or
/// timed out, is refused and logged; a fetch not completed within ``PluginLimits/fetchTimeout``
/// fails with a retryable timeout; that and cancelling the caller's task call the plugin's `cancel`.
/// With ``PluginLimits/callTimeout``, fetch() itself runs on a thread of its own, and a call
/// that has not returned in time fails its load with a timeout too.
public final class LoadedSource: PagingSource, CustomStringConvertible, @unchecked Sendable {
    public typealias Key = PluginKey
    public typealias Value = PluginItem

    public let descriptor: PluginDescriptor
    public let library: PluginLibrary
    public let refreshKey: PluginKey
    let instance: PluginInstance
    private let plugin: UnsafeMutablePointer<paging_source_t>
    private let calls: SerializedCalls
    /// Whether ``destroy()`` was called: the plugin's destroy() is called once, and waited for once.
    private let destroyStarted = Atomic(false)
    private let watchdog: CallWatchdog
    private let extensions: InstanceExtensions
    /// The thread fetch() runs on when ``PluginLimits/callTimeout`` is set.
    private let worker: PluginCallWorker?
    /// The fetch() calls of a serialized instance that did not return within the call timeout
    /// and have not returned since: its other calls would wait for them, so they fail at once.
    private let stuckFetches = Atomic<Int>(0)
    /// The thread key calls (`key_chain`, `refresh_key_at`) run on when
    /// ``PluginLimits/callTimeout`` is set: one at a time, as the ABI has them.
    private let keyWorker: PluginCallWorker?
    /// The key calls that did not return within the call timeout and have not returned since:
    /// they hold the turn of every key call (and of every call of a serialized instance).
    private let stuckKeyCalls = Atomic<Int>(0)
    /// Where the plugin's cancel() is called, one after another: never on the thread that
    /// cancels (see ``waitForCompletion(of:)``), and never a thread each (cancels come as often
    /// as `pager serve`'s clients go away, and a cancel() that blocks held its thread for good).
    private let cancels: DispatchQueue

    init(library: PluginLibrary, descriptor: PluginDescriptor, instance: PluginInstance,
         plugin: UnsafeMutablePointer<paging_source_t>, extensions: InstanceExtensions) throws(PluginLoadError) {
        self.library = library
        self.descriptor = descriptor
        self.instance = instance
        self.plugin = plugin
        self.extensions = extensions
        calls = SerializedCalls(serialized: !descriptor.isThreadSafe, library: library)
        worker = instance.limits.callTimeout.map {
            PluginCallWorker(label: instance.label, timeout: $0, concurrent: descriptor.isThreadSafe)
        }
        keyWorker = instance.limits.callTimeout.map { PluginCallWorker(label: instance.label + " keys", timeout: $0, concurrent: false) }
        let table = UnsafeSendable(plugin)
        let cancels = DispatchQueue(label: "paging.cancel \(instance.label)")
        self.cancels = cancels
        watchdog = CallWatchdog(timeout: instance.limits.fetchTimeout) { [instance, calls] id, timeout in
            Self.timeOut(id, "the fetch did not complete within \(timeout) (the fetch timeout: the manifest's timeout_ms)", instance, calls, table, cancels)
        }
        // Bounded as create is: a refresh_key that never returned hung validate and run, and
        // the child process of an isolated plugin (found by a probe).
        let token = CallHandle.token(for: instance), label = library.crashLabel
        let call = UnsafeSendable { () -> UnsafeSendable<(UInt32?, KeysOut)> in
            var out = KeysOut()
            let status = PluginCrash.calling(label) { out.withHandle(token) { plugin.pointee.refresh_key?(plugin, $0) } }
            return UnsafeSendable((status, out))
        }
        let timeout = instance.limits.lifecycleTimeout
        guard let (status, out) = ExitGuard.during("plugin '\(descriptor.id)' of \(library.path)", {
            boundedCall(named: "paging-create", within: timeout, call.value)
        })?.value else {
            // Not destroyed: the plugin's thread is still in the call.
            throw .createFailed(path: library.path, id: descriptor.id, status: .timeout,
                                message: "refresh_key did not return within \(timeout) (\(instance.limits.lifecycleTimeoutOrigin))")
        }
        guard status == PAGING_OK, out.misuse == nil else {
            library.destroyRefused(plugin)
            // A refused keys_set is the failure, whatever refresh_key returned after it.
            throw .createFailed(path: library.path, id: descriptor.id,
                                status: out.misuse != nil ? .invalidArgument : PluginStatus(rawValue: status ?? PAGING_ERR_INTERNAL),
                                message: out.misuse.map { "refresh_key: \($0)" } ?? "refresh_key failed")
        }
        refreshKey = out.key(PAGING_KEY_CURRENT) ?? PluginKey(bytes: [])
    }

    deinit {
        destroy(returned: {}, waiting: false)
        instance.ownerGone()
    }

    /// The ids of the instance extensions this instance offers and the host uses.
    package var offeredExtensions: [String] { extensions.offered }
    /// The extensions it answered with a table whose function is NULL (not offered).
    package var extensionsWithoutFunction: [String] { extensions.withoutFunction }

    /// Asks the instance whether it can serve loads now (`paging.health/1`).
    public func health() -> PluginHealth {
        instance.health(extensions, plugin, calls)
    }

    /// Whether the plugin has a `key_chain` (its pages carry their keys otherwise).
    public var hasKeyChain: Bool { plugin.pointee.key_chain != nil }

    /// The plugin's key chain, or no neighbours when it has no `key_chain` (its pages carry
    /// their keys) or the call fails (logged, and the fetch of that key then fails saying so:
    /// a page without its neighbours' keys ended paging without a word).
    public func keyChain(for key: PluginKey) -> PagingKeyChain<PluginKey> {
        guard let keyChain = plugin.pointee.key_chain else { return PagingKeyChain(key: key) }
        let table = UnsafeSendable(plugin)
        return chain(around: key) { bytes, out in keyChain(table.value, bytes, out) }
    }

    /// The plugin's key chain for pages of `pageSize` items when it offers
    /// `paging.sized-key-chain/1`; its plain ``keyChain(for:)`` otherwise.
    public func keyChain(for key: PluginKey, pageSize: Int) -> PagingKeyChain<PluginKey> {
        guard let sized = extensions.sizedKeyChain?.pointee.key_chain else { return keyChain(for: key) }
        let size = UInt32(clamping: pageSize), table = UnsafeSendable(plugin)
        return chain(around: key) { bytes, out in sized(UnsafeMutableRawPointer(table.value), bytes, size, out) }
    }

    private func chain(around key: PluginKey, _ call: @escaping @Sendable (paging_bytes_t, OpaquePointer) -> paging_status_t) -> PagingKeyChain<PluginKey> {
        var failure: PluginError?
        let keys = callForKeys("key_chain(\(key))", failure: &failure) { out in CView.withBytes(key.bytes) { call($0, out) } }
        if let failure {
            failedChains.withLock { failed in
                if failed.count >= 64 { failed.removeAll() }
                failed[key] = failure
            }
            hasFailedChains.store(true, ordering: .releasing)
        } else if hasFailedChains.load(ordering: .acquiring) {
            failedChains.withLock { _ = $0.removeValue(forKey: key) }
        }
        return PagingKeyChain(key: key, prevKey: keys?.key(PAGING_KEY_PREV), nextKey: keys?.key(PAGING_KEY_NEXT))
    }

    /// Keys whose key_chain failed (until it succeeds for them), with why: their fetch fails too.
    private let failedChains = Locked<[PluginKey: PluginError]>([:])
    private let hasFailedChains = Atomic<Bool>(false)

    /// Signalled when the plugin says its data changed (`paging.invalidation/1`).
    public var invalidation: PagingInvalidation? { instance.invalidation }

    /// The key the plugin names for the reader's item (`paging.invalidation/1`'s
    /// `refresh_key_at`), or `nil` (the refresh key) when it names none or the call fails (logged).
    public func refreshKey(around anchor: PagingAnchor<PluginKey, PluginItem>) -> PluginKey? {
        guard let refreshKeyAt = extensions.invalidation?.pointee.refresh_key_at else { return nil }
        let index = UInt32(clamping: anchor.indexInPage), size = UInt32(clamping: anchor.pageSize)
        let table = UnsafeSendable(plugin), pageKey = anchor.pageKey, item = anchor.value
        let keys = callForKeys("refresh_key_at(\(anchor.pageKey))") { out in
            CView.withBytes(pageKey.bytes) { pageKey in
                CView.withBytes(item.bytes) { item in
                    refreshKeyAt(UnsafeMutableRawPointer(table.value), pageKey, index, item, size, out)
                }
            }
        }
        return keys?.key(PAGING_KEY_CURRENT)
    }

    /// Runs a call that answers keys, with a keys handle, serialized with the others; `nil` when
    /// it failed (logged, naming `what`).
    private func callForKeys(_ what: String, _ call: @escaping @Sendable (OpaquePointer) -> paging_status_t) -> KeysOut? {
        var failure: PluginError?
        return callForKeys(what, failure: &failure, call)
    }

    /// ``callForKeys(_:_:)``, saying in `failure` why it failed.
    private func callForKeys(_ what: String, failure: inout PluginError?, _ call: @escaping @Sendable (OpaquePointer) -> paging_status_t) -> KeysOut? {
        if let stuck = stuckFailure(ofKeyCall: true) {
            failure = stuck
            return nil
        }
        let status: UInt32?, out: KeysOut
        if let keyWorker, let timeout = instance.limits.callTimeout {
            switch boundedKeyCall(on: keyWorker, within: timeout, call) {
            case .ran(let ran):
                (status, out) = ran.value
            case .timedOut(let started):
                let timeout = instance.limits.callTimeoutDescription
                let reason = started ? "\(what) did not return within \(timeout)"
                    : stuckFailure(ofKeyCall: true)?.message ?? "\(what) did not get its turn within \(timeout): an earlier call of the plugin has not returned"
                // Logged as every failed key call is (a hung one was said nowhere but in the fetch it failed).
                instance.log(.warning, reason)
                failure = PluginError(.timeout, reason, plugin: instance.label)
                return nil
            }
        } else {
            var keys = KeysOut()
            let token = CallHandle.token(for: instance)
            status = calls.runExclusive { keys.withHandle(token, call) }
            out = keys
        }
        guard status == PAGING_OK, out.misuse == nil else {
            let code = out.misuse == nil ? PluginStatus(rawValue: status ?? PAGING_ERR_INTERNAL) : .invalidArgument
            let reason = out.misuse ?? code.description
            instance.log(.warning, "\(what) failed: \(reason)")
            failure = PluginError(code, "\(what) failed: \(reason); the page's neighbours are unknown", plugin: instance.label)
            return nil
        }
        return out
    }

    /// A key call on the key worker, waited for at most `timeout`: a call that does not return
    /// holds the plugin's turn, and the caller's thread (an engine's) would wait for it for good.
    /// One that has not returned in time is counted as stuck until it does.
    private func boundedKeyCall(on worker: PluginCallWorker, within timeout: Duration,
                                _ call: @escaping @Sendable (OpaquePointer) -> paging_status_t) -> KeyCall {
        let timed = WorkerCall()
        let token = CallHandle.token(for: instance)
        let ran = worker.runBlocking { [self] () -> SerializedCalls.Turn<UnsafeSendable<(UInt32?, KeysOut)>> in
            calls.runExclusive(within: timeout) { () -> UnsafeSendable<(UInt32?, KeysOut)>? in
                guard timed.start() else { return nil }
                var out = KeysOut()
                let status = out.withHandle(token, call)
                if timed.returned() { stuckKeyCalls.subtract(1, ordering: .releasing) }
                return UnsafeSendable((status, out))
            }
        }
        if case .ran(let result)? = ran {
            // nil: destroyed meanwhile.
            return .ran(result ?? UnsafeSendable((nil, KeysOut())))
        }
        switch timed.abandon() {
        case .beforeStart: return .timedOut(started: false)
        case .whileRunning:
            stuckKeyCalls.add(1, ordering: .releasing)
            return .timedOut(started: true)
        case .afterReturn: return .timedOut(started: true)
        }
    }

    private enum KeyCall {
        case ran(UnsafeSendable<(UInt32?, KeysOut)>)
        case timedOut(started: Bool)
    }

    /// What the host measured of this instance's fetches, and what it published.
    public var stats: PluginStats.Snapshot { instance.stats.snapshot }

    public func fetch(request: PluginRequest) async throws -> PluginPage {
        guard instance.limits.recordsStats else { return try await load(request) }
        let start = ContinuousClock.now
        do {
            let page = try await load(request)
            instance.stats.record(since: start, completed: true)
            return page
        } catch {
            instance.stats.record(since: start, error: error)
            throw error
        }
    }

    @inline(__always)
    private func load(_ request: PluginRequest) async throws -> PluginPage {
        if hasFailedChains.load(ordering: .acquiring), let failure = failedChains.withLock({ $0[request.key] }) { throw failure }
        if let stuck = stuckFailure() { throw stuck }
        let id = PluginInstance.nextCallID.add(1, ordering: .relaxed).oldValue
        instance.fetches.withLock { $0[id] = PendingFetch() }
        let status = if let worker { try await callFetch(on: worker, request, id) } else { callFetch(request, id) }
        // A plugin that completed inside fetch() needs no waiting.
        let result = instance.fetches.withLock { fetches -> FetchResult? in
            guard status != PAGING_OK else {
                guard let result = fetches[id]?.result else { return nil }
                fetches[id] = nil
                return result
            }
            return fetches.removeValue(forKey: id)?.result
        }
        if let status, status != PAGING_OK {
            guard let result else {
                throw PluginError(PluginStatus(rawValue: status), Self.refusedSynchronously, plugin: instance.label)
            }
            // Ended inside fetch() (and answered PAGING_OK), then refused by its return: the
            // ending the host took stands.
            let ending = if case .completed = result { "completed" } else { "failed" }
            instance.log(.warning, "fetch returned \(PluginStatus(rawValue: status)) after it \(ending) the fetch; the \(ending) \(Self.endingStands)")
        } else if status == nil {
            throw PluginError(.internal, "the plugin was destroyed", plugin: instance.label)
        }
        let finished: FetchResult
        if let result { finished = result } else { finished = await waitForCompletion(of: id) }
        switch finished {
        case .completed(let builder):
            return builder.page(for: request)
        case .failed(let status, let message, let retryAfter):
            if status == .cancelled, Task.isCancelled { throw CancellationError() }
            throw PluginError(status, message, plugin: instance.label, retryAfter: retryAfter)
        }
    }

    /// The plugin's fetch(), on this thread; `nil` when the instance was destroyed or has no fetch.
    private func callFetch(_ request: PluginRequest, _ id: UInt64) -> UInt32? {
        calls.run { () -> UInt32? in
            guard let fetch = plugin.pointee.fetch else { return nil }
            fetchCalls.add(1, ordering: .relaxed)
            return CView.withRequest(request) { fetch(plugin, $0, id) }
        }
    }

    /// How many times fetch() was called (with a call timeout, a fetch waits for its thread
    /// first: `pager check`'s destroy-in-flight destroyed a plugin none of whose fetch() had
    /// been called yet, and passed a plugin that calls the host after destroy()).
    package var fetchesCalled: Int { fetchCalls.load(ordering: .relaxed) }
    private let fetchCalls = Atomic<Int>(0)

    /// ``callFetch(_:_:)`` on the worker thread of a call timeout. A call that has not returned
    /// in time fails the load with a timeout and is cancelled for the plugin; until it returns,
    /// a serialized instance fails its loads and key chains at once (``stuckFailure(ofKeyCall:)``).
    private func callFetch(on worker: PluginCallWorker, _ request: PluginRequest, _ id: UInt64) async throws(PluginError) -> UInt32? {
        let timed = WorkerCall()
        let serialized = !descriptor.isThreadSafe
        let returned = await worker.run { [self] () -> UInt32? in
            guard timed.start() else { return nil }
            let status = callFetch(request, id)
            if timed.returned(), serialized { stuckFetches.subtract(1, ordering: .releasing) }
            return status
        }
        if let returned { return returned }
        let timeout = instance.limits.callTimeout!, ran: Duration?
        switch timed.abandon() {
        case .whileRunning(let time):
            if serialized { stuckFetches.add(1, ordering: .releasing) }
            ran = time
        case .beforeStart: ran = nil
        case .afterReturn: ran = timeout
        }
        let message = Self.fetchTimedOut(ran: ran, within: timeout, instance.limits.callTimeoutDescription)
        Self.timeOut(id, message, instance, calls, UnsafeSendable(plugin), cancels)
        instance.fetches.withLock { _ = $0.removeValue(forKey: id) }
        throw PluginError(.timeout, message, plugin: instance.label)
    }

    /// Why a call cannot be made now: an earlier fetch() of this serialized instance, or an
    /// earlier key call, has not returned, and the call would wait for it.
    private func stuckFailure(ofKeyCall keyCall: Bool = false) -> PluginError? {
        let keysStuck = stuckKeyCalls.load(ordering: .acquiring) > 0 && (keyCall || !descriptor.isThreadSafe)
        guard keysStuck || stuckFetches.load(ordering: .acquiring) > 0 else { return nil }
        let earlier = keysStuck ? "key_chain() or refresh_key_at()" : "fetch()"
        return PluginError(.timeout, "an earlier \(earlier) has not returned yet (\(instance.limits.callTimeoutOrigin)), and the plugin's calls do not overlap", plugin: instance.label)
    }

    /// Ends fetch `id` for the host with a timeout. Over for the host, so for the plugin too:
    /// told as a cancelled load is, on `cancels` (a cancel() that blocks holds up no shared
    /// pool); never after destroy().
    private static func timeOut(
        _ id: UInt64, _ message: String, _ instance: PluginInstance, _ calls: SerializedCalls,
        _ table: UnsafeSendable<UnsafeMutablePointer<paging_source_t>>, _ cancels: DispatchQueue
    ) {
        instance.finishFetch(id, .failed(.timeout, message))
        cancels.async { calls.runUnserialized { table.value.pointee.cancel?(table.value, id) } }
    }

    private func waitForCompletion(of id: UInt64) async -> FetchResult {
        // One watchdog for the instance rather than a timer task per fetch: starting and
        // cancelling a task cost every fetch a thread hop (a third of the http plugin's
        // throughput over loopback).
        watchdog.watch(id)
        defer { watchdog.unwatch(id) }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = instance.fetches.withLock { fetches -> FetchResult? in
                    // Gone: destroy() ran after fetch() returned; nothing would ever resume us.
                    guard let fetch = fetches[id] else { return .failed(.cancelled, "the source was destroyed") }
                    guard let result = fetch.result else {
                        fetches[id]?.waiter = continuation
                        return nil
                    }
                    fetches[id] = nil
                    return result
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            // Not here: the handler runs under the task's status lock, which resuming a fetch
            // takes too, and a plugin may complete a fetch (resuming it) while holding the very
            // lock its cancel() waits for: both would hang. The fetch ends for the host at once
            // (a cancel() before that blocks delays no other), the plugin hears it after, on
            // `cancels`: a completion its cancel() makes always finds the fetch ended.
            DispatchQueue.global().async {
                self.instance.finishFetch(id, .failed(.cancelled, "the fetch was cancelled"))
                self.cancels.async { self.calls.runUnserialized { self.plugin.pointee.cancel?(self.plugin, id) } }
            }
        }
    }

    /// How the host says a fetch() contradicted the ending it gave its fetch (what pager check
    /// looks for).
    package static let endingStands = "fetch stands"
    /// How a fetch() that returned an error (without ending the fetch) fails its load.
    package static let refusedSynchronously = "fetch refused the request"
    /// How the failure of a fetch() that outlasted the call timeout begins.
    package static let didNotReturn = "fetch did not return within"

    /// What a fetch that outlasted the call timeout `timeout` (`described` as messages say it)
    /// says, its fetch() having run `ran` (`nil`: never called). The timeout counts from the
    /// request, and a call may wait its turn first (behind a serialized plugin's calls, or for a
    /// thread): it said "did not return" of a fetch() never called, and of one that ran a
    /// fraction of the time.
    package static func fetchTimedOut(ran: Duration?, within timeout: Duration, _ described: String) -> String {
        guard let ran else { return "fetch did not get its turn within \(described): an earlier call of the plugin has not returned" }
        let waited = timeout - ran
        guard waited > ran, waited >= .milliseconds(100) else { return "\(didNotReturn) \(described)" }
        return "fetch did not end within \(described): fetch() was called \(waited.wholeMilliseconds) ms after the request (behind earlier calls), then ran \(ran.wholeMilliseconds) ms"
    }

    /// The plugin and its library, as errors name them.
    public var description: String { instance.label }

    /// Fetches handed to the plugin (or about to be) and not yet finished.
    package var fetchesInFlight: Int { instance.fetches.withLock { $0.count } }

    /// Destroys the plugin instance: fetches in flight fail, later completions are refused.
    /// Called by deinit if not before.
    public func destroy() {
        destroy(returned: {})
    }

    /// ``destroy()``, calling `returned` as soon as the plugin's destroy() returns (what the
    /// plugin calls after that, it calls after destroy). Waited for at most
    /// ``PluginLimits/lifecycleTimeout``; calling it again does nothing.
    package func destroy(returned: @escaping @Sendable () -> Void, waiting: Bool = true) {
        guard !destroyStarted.exchange(true, ordering: .acquiringAndReleasing) else { return }
        let close = destroying(plugin, calls: calls, library: library, instance: instance, returned: returned)
        // From deinit, on the releasing thread, unbounded. Waiting there for another thread
        // could hold one of the few threads that run tasks while the plugin's destroy() needs
        // one (a Swift plugin ending its tasks): the tests' process stalled for the bound.
        if waiting { boundedDestroy(instance, busy: calls.hasCallInFlight, close) } else { close {} }
        let pending = instance.fetches.withLock { fetches in
            defer { fetches = [:] }
            return fetches.values.compactMap(\.waiter)
        }
        for waiter in pending { waiter.resume(returning: .failed(.cancelled, "the source was destroyed")) }
    }
}

/// Times out the calls of one plugin instance that are not finished within a timeout (fetches
/// not completed, deferred intercepts not answered, an isolated plugin's calls): ``Deadlines``
/// by the calls' ids, each ended by the same `expire`, on a queue of the instance's own. (On
/// the queue all instances shared, one plugin's log sink that blocked on a timeout's line held
/// every other plugin's timeouts.)
struct CallWatchdog: Sendable {
    private let deadlines: Deadlines<UInt64>
    /// Ends the call `id`, which did not finish within the timeout.
    private let expire: @Sendable (_ id: UInt64, _ timeout: Duration) -> Void

    init(timeout: Duration, expire: @escaping @Sendable (UInt64, Duration) -> Void) {
        deadlines = Deadlines(timeout: timeout, queue: DispatchQueue(label: "paging.call-timeouts"))
        self.expire = expire
    }

    func watch(_ id: UInt64) {
        deadlines.watch(id) { [expire, timeout = deadlines.timeout] in expire(id, timeout) }
    }

    func unwatch(_ id: UInt64) {
        deadlines.unwatch(id)
    }
}

extension PluginInstance {
    /// The most ended fetches (and deferred intercepts) remembered: past it, the older half is
    /// forgotten. It was 1,024: a `pager serve` whose source held 1,300 fetches past their
    /// timeout had each later completion past the 1,024th logged as misuse.
    static let rememberedEnds = 65_536

    /// Remembers a fetch the host ended while the plugin may still complete it (bounded).
    func rememberEnded(_ id: UInt64, _ status: PluginStatus) {
        abandoned.withLock { abandoned in
            if abandoned.count >= Self.rememberedEnds {
                // Ids grow: the lowest are the oldest. Sorted once a half, not searched each time.
                for old in abandoned.keys.sorted().prefix(Self.rememberedEnds / 2) { abandoned[old] = nil }
            }
            abandoned[id] = status
        }
    }

    /// Finishes a fetch on the host's side (timeout, cancellation); a no-op once it finished.
    package func finishFetch(_ id: UInt64, _ result: FetchResult) {
        let (ended, waiter) = fetches.withLock { fetches -> (Bool, CheckedContinuation<FetchResult, Never>?) in
            guard let fetch = fetches[id], fetch.result == nil else { return (false, nil) }
            // Before the fetch ends, so that a completion arriving meanwhile finds why.
            if case .failed(let status, _, _) = result { rememberEnded(id, status) }
            fetch.result = result
            if let waiter = fetch.waiter {
                fetches[id] = nil
                return (true, waiter)
            }
            return (true, nil)
        }
        guard ended else { return }
        // Whether or not the caller waits yet, the plugin's own completion is still to come.
        if case .failed(let status, let message, _) = result, status == .timeout { log(.error, message) }
        guard let waiter else { return }
        waiter.resume(returning: result)
    }
}
