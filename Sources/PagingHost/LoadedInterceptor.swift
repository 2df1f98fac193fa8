import CPaging
import FoundationEssentials
import Glibc
import Dispatch
import Paging
import Synchronization

/// An interceptor plugin from a loaded library, as a ``PagingInterceptor`` of the engine: it
/// runs in the same ``Pager`` as in-process Swift interceptors.
///
/// Calls into the plugin are serialized unless its descriptor says it is thread-safe. What the
/// plugin hands back through the host table is checked: NULL data with a length, or an unknown
/// result code, fails the load with a ``PluginError`` instead of being read.
public final class LoadedInterceptor: PagingInterceptor, @unchecked Sendable {
    public typealias Key = PluginKey
    public typealias Value = PluginItem

    public let descriptor: PluginDescriptor
    public let library: PluginLibrary
    let instance: PluginInstance
    private let plugin: UnsafeMutablePointer<paging_interceptor_t>
    private let calls: SerializedCalls
    /// The thread calls run on when ``PluginLimits/callTimeout`` is set.
    private let worker: PluginCallWorker?
    /// Whether ``destroy()`` was called: the plugin's destroy() is called once, and waited for once.
    private let destroyStarted = Atomic(false)
    private let extensions: InstanceExtensions
    /// Times out deferred intercepts (`paging.async-intercept/1`) after the fetch timeout.
    private let watchdog: CallWatchdog
    private let revalidationWarning = RevalidationWarning()
    /// Whether the instance can see pages: it has handle() or offers paging.page-transform/1.
    private let observes: Bool
    /// Ends a deferred intercept on the host's side and tells the plugin (its `cancel`).
    private let endDeferred: @Sendable (UInt64, PluginStatus, String) -> Void
    /// Settles a deferred intercept no load waits for (its call timed out, misused the host, or
    /// returned another code than PENDING), telling the plugin (its `cancel`) when it should
    /// hear it: returns the answer `resume` gave it meanwhile, when taking it.
    private let settleDeferred: @Sendable (UInt64, PluginStatus, _ takingAnswer: Bool) -> (UInt32, InterceptOut)?

    init(library: PluginLibrary, descriptor: PluginDescriptor, instance: PluginInstance,
         plugin: UnsafeMutablePointer<paging_interceptor_t>, extensions: InstanceExtensions) {
        self.library = library
        self.descriptor = descriptor
        self.instance = instance
        self.plugin = plugin
        self.extensions = extensions
        let calls = SerializedCalls(serialized: !descriptor.isThreadSafe, library: library)
        self.calls = calls
        let observes = plugin.pointee.handle != nil || extensions.pageTransform?.pointee.transform != nil
        self.observes = observes
        instance.answering.withLock { $0 = AnswerContext(calls: calls, observes: observes) }
        worker = instance.limits.callTimeout.map {
            PluginCallWorker(label: instance.label, timeout: $0, concurrent: descriptor.isThreadSafe)
        }
        let table = UnsafeSendable(plugin), cancel = UnsafeSendable(extensions.asyncIntercept?.pointee.cancel)
        let tellPlugin: @Sendable (UInt64) -> Void = { id in
            guard let cancel = cancel.value else { return }
            calls.runUnserialized { cancel(UnsafeMutableRawPointer(table.value), id) }
        }
        endDeferred = { [instance] id, status, message in
            if instance.endIntercept(id, status, message) == .ended { tellPlugin(id) }
        }
        settleDeferred = { [instance] id, status, takingAnswer in
            let (answer, tell) = instance.settleIntercept(id, status, takingAnswer: takingAnswer)
            if tell { tellPlugin(id) }
            return answer
        }
        watchdog = CallWatchdog(timeout: instance.limits.fetchTimeout) { [endDeferred] id, timeout in
            // Not on the watchdog's task: the plugin's cancel() may block.
            detachThread(named: "paging-cancel") { endDeferred(id, .timeout, "the deferred intercept was not answered within \(timeout)") }
        }
    }

    deinit {
        destroy(waiting: false)
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

    /// What the host measured of this instance's intercepts, and what it published.
    public var stats: PluginStats.Snapshot { instance.stats.snapshot }

    public func intercept(request: PluginRequest) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        // The common call: on this thread, unmeasured, answered at once. The result is returned
        // as it is built (wrapping it, as an answer-or-id enum did, cost each call copies of it).
        guard worker == nil, !instance.limits.recordsStats else { return try await interceptOtherwise(request) }
        var deferred: UInt64 = 0
        let result = try callIntercept(request, deferred: &deferred)
        if deferred == 0 { return result }
        return try await deferredAnswer(deferred, for: request)
    }

    /// An intercept measured for ``stats``, or on the worker thread of a call timeout.
    private func interceptOtherwise(_ request: PluginRequest) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        let start = instance.limits.recordsStats ? ContinuousClock.now : nil
        do {
            var deferred: UInt64 = 0
            var result: PagingInterceptResult<PluginKey, PluginItem>
            if let worker {
                // A call that returns after its timeout, having deferred, is dropped by whichever
                // of it and the caller comes second: no one would wait for its answer.
                let handoff = Locked((gaveUp: false, deferred: UInt64(0), started: false))
                let call = await worker.run { [self] in
                    handoff.withLock { $0.started = true }
                    return Result { () throws(PluginError) in
                        var deferred: UInt64 = 0
                        let result = try callIntercept(request, deferred: &deferred)
                        let kept = handoff.withLock { state in
                            if !state.gaveUp { state.deferred = deferred }
                            return !state.gaveUp
                        }
                        if deferred != 0 && !kept { _ = settleDeferred(deferred, .timeout, false) }
                        return (result, deferred)
                    }
                }
                guard let call else {
                    let (id, started) = handoff.withLock { state in
                        state.gaveUp = true
                        return (state.deferred, state.started)
                    }
                    if id != 0 { _ = settleDeferred(id, .timeout, false) }
                    // Queued behind a call that hangs, it is that call's doing (a handle() that
                    // never returned was said to be this intercept's).
                    throw failure(.timeout, started ? "intercept did not return within \(instance.limits.callTimeoutDescription)"
                                  : "intercept could not be called within \(instance.limits.callTimeoutDescription): an earlier call to the plugin "
                                    + "(intercept, handle or transform) has not returned, and its calls do not overlap")
                }
                (result, deferred) = try call.get()
            } else {
                result = try callIntercept(request, deferred: &deferred)
            }
            if deferred != 0 { result = try await deferredAnswer(deferred, for: request) }
            if let start {
                switch result {
                case .complete, .completeThenRevalidate: instance.stats.record(since: start, completed: true)
                case .proceed, .proceedOrFallBack: instance.stats.record(since: start)
                }
            }
            return result
        } catch {
            if let start { instance.stats.record(since: start, error: error) }
            throw error
        }
    }

    /// The plugin's intercept, with its result builder on this thread's stack, and what it
    /// answered; when it deferred its answer (`paging.async-intercept/1`), `deferred` is set to
    /// the id and the result is to be ignored. Synchronous, so that the builder never lives in
    /// an async frame.
    private func callIntercept(_ request: PluginRequest, deferred: inout UInt64) throws(PluginError) -> PagingInterceptResult<PluginKey, PluginItem> {
        var out = InterceptOut(instance: instance)
        let token = CallHandle.token(for: instance)
        let code: UInt32? = calls.run { [plugin] () -> UInt32? in
            guard let intercept = plugin.pointee.intercept else { return nil }
            return CView.withRequest(request) { view in
                out.withHandle(token) { intercept(plugin, view, $0) }
            }
        }
        guard let code else { throw failure(.internal, "the plugin was destroyed") }
        if let id = out.deferred {
            if code == PAGING_INTERCEPT_PENDING, out.misuse == nil {
                deferred = id
                return .proceed(request, handleAfterwards: false)
            }
            // Deferred, then answered (or failed, or misused the host) in the call after all: no
            // one waits for the id. But an answer resume() gave meanwhile (it said PAGING_OK:
            // taken) stands, as a completed fetch does.
            if let (given, givenOut) = settleDeferred(id, out.misuse == nil ? .cancelled : .invalidArgument, out.misuse == nil) {
                instance.log(.warning, "intercept returned \(code), not PAGING_INTERCEPT_PENDING, after resume() had answered its deferred intercept: the answer stands")
                return try result(given, givenOut, for: request)
            }
        } else if code == PAGING_INTERCEPT_PENDING {
            throw failure(.internal, "intercept returned PAGING_INTERCEPT_PENDING without calling defer() (paging.async-intercept/1)")
        }
        return try result(code, out, for: request)
    }

    /// Waits, holding no thread, for the answer of a deferred intercept: the plugin's, or the
    /// host's when the load is cancelled or the fetch timeout passes.
    private func deferredAnswer(_ id: UInt64, for request: PluginRequest) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        watchdog.watch(id)
        defer { watchdog.unwatch(id) }
        let answer = await withTaskCancellationHandler {
            await instance.answer(of: id)
        } onCancel: { [endDeferred] in
            // On a thread of its own, as a source's cancel (LoadedSource): the plugin's cancel()
            // may block, and the handler runs under the task's status lock.
            detachThread(named: "paging-cancel") { endDeferred(id, .cancelled, "the load was cancelled") }
        }
        switch answer {
        case .answered(let code, let out):
            return try result(code, out, for: request)
        case .ended(let status, let message):
            if status == .cancelled, Task.isCancelled { throw CancellationError() }
            throw failure(status, message)
        }
    }

    /// The engine's answer for what the plugin returned and set on `out`. Inlined into the
    /// synchronous call: out of line, `out` was copied to reach it.
    @inline(__always)
    private func result(_ code: UInt32, _ out: InterceptOut, for request: PluginRequest) throws(PluginError) -> PagingInterceptResult<PluginKey, PluginItem> {
        // A page built with a refused call is no answer; proceeding without it is.
        if let refusal = out.refusal(answering: code, observes: observes) { throw failure(.invalidArgument, refusal) }
        switch code {
        case PAGING_INTERCEPT_PROCEED, PAGING_INTERCEPT_PROCEED_AND_OBSERVE:
            let observe = code == PAGING_INTERCEPT_PROCEED_AND_OBSERVE && observes
            guard out.rewrites else { return .proceed(request, handleAfterwards: observe) }
            return .proceed(out.rewritten(request), handleAfterwards: observe)
        case PAGING_INTERCEPT_COMPLETE:
            return .complete(out.page.page(for: request))
        case PAGING_INTERCEPT_COMPLETE_THEN_REVALIDATE:
            let page = out.page.page(for: request)
            return observes ? .completeThenRevalidate(page) : .complete(page)
        case PAGING_INTERCEPT_PROCEED_OR_FALL_BACK:
            let next = out.rewritten(request)
            guard observes else { return .proceed(next, handleAfterwards: false) }
            return .proceedOrFallBack(next, fallback: out.page.page(for: request)) { [instance] error in
                instance.log(.warning, "the load failed (\(error)); answered with the page this plugin holds")
            }
        case PAGING_INTERCEPT_FAIL:
            if let (status, message) = out.failure { throw failure(status, message, retryAfter: out.retryAfter) }
            // As for a transform: a refused call building the page failed the load already.
            if let misuse = out.pageMisuse { throw failure(.invalidArgument, misuse) }
            throw failure(.internal, "intercept returned FAIL without out_fail")
        default:
            throw failure(.internal, "intercept returned unknown code \(code)")
        }
    }

    /// How the plugin sees the pages of the loads it observes: "transform", "handle", or nil
    /// when it has neither.
    public var seesPagesThrough: String? {
        extensions.pageTransform?.pointee.transform != nil ? "transform" : plugin.pointee.handle != nil ? "handle" : nil
    }

    public func handle(page: PluginPage) async {
        guard let worker else { return callHandle(page) }
        if await worker.run({ [self] in callHandle(page) }) == nil {
            instance.log(.error, "handle did not return within \(instance.limits.callTimeoutDescription); the load goes on")
        }
    }

    private func callHandle(_ page: PluginPage) {
        calls.run { [plugin] in
            guard let handle = plugin.pointee.handle else { return }
            CView.withPage(page) { handle(plugin, $0) }
        }
    }

    /// The page as the plugin's `transform` (`paging.page-transform/1`) leaves it; without it,
    /// the page after ``handle(page:)``.
    public func transform(page: PluginPage) async throws -> PluginPage {
        guard extensions.pageTransform?.pointee.transform != nil else {
            await handle(page: page)
            return page
        }
        do {
            guard let worker else { return try callTransform(page) }
            guard let finished = await worker.run({ [self] in Result { () throws(PluginError) in try callTransform(page) } }) else {
                throw failure(.timeout, "transform did not return within \(instance.limits.callTimeoutDescription)")
            }
            return try finished.get()
        } catch {
            // A load this interceptor failed: counted with its failures (--stats said none).
            if instance.limits.recordsStats { instance.stats.recordFailure(error) }
            throw error
        }
    }

    private func callTransform(_ page: PluginPage) throws(PluginError) -> PluginPage {
        var out = TransformOut(limits: instance.limits, original: page)
        let token = CallHandle.token(for: instance)
        let code: UInt32? = calls.run { [plugin, extensions] () -> UInt32? in
            guard let transform = extensions.pageTransform?.pointee.transform else { return nil }
            return CView.withPage(page) { view in
                out.withHandle(token) { transform(UnsafeMutableRawPointer(plugin), view, $0) }
            }
        }
        guard let code else { throw failure(.internal, "the plugin was destroyed") }
        if let misuse = out.misuse { throw failure(.invalidArgument, misuse) }
        switch code {
        case PAGING_TRANSFORM_KEEP:
            return page
        case PAGING_TRANSFORM_REPLACE:
            // A page built with a refused call could not be what the plugin meant.
            if let misuse = out.pageMisuse { throw failure(.invalidArgument, misuse) }
            return out.replacement
        case PAGING_TRANSFORM_FAIL:
            if let (status, message) = out.failure { throw failure(status, message) }
            // A refused builder call failed the load already, as the guide says: its reason
            // stands (it was lost to "FAIL without fail()", an internal error).
            if let misuse = out.pageMisuse { throw failure(.invalidArgument, misuse) }
            throw failure(.internal, "transform returned FAIL without fail()")
        default:
            throw failure(.internal, "transform returned unknown code \(code)")
        }
    }

    /// Says so (at most once a minute), then tells the plugin as ``loadFailed(_:error:)`` does.
    public func revalidationFailed(_ request: PluginRequest, error: any Error) async {
        if let line = revalidationWarning.line(for: error) { instance.log(.warning, line) }
        await loadFailed(request, error: error)
    }

    /// Tells the plugin (`paging.load-outcome/1`) that a load it let proceed failed.
    public func loadFailed(_ request: PluginRequest, error: any Error) async {
        guard extensions.loadOutcome?.pointee.failed != nil else { return }
        let (status, message) = PluginStatus.of(error)
        let call: @Sendable () -> Void = { [calls, plugin = UnsafeSendable(plugin), extensions] in
            calls.run {
                guard let failed = extensions.loadOutcome?.pointee.failed else { return }
                CView.withRequest(request) { view in
                    message.withCString { failed(UnsafeMutableRawPointer(plugin.value), view, status.rawValue, $0) }
                }
            }
        }
        guard let worker else { return call() }
        if await worker.run(call) == nil {
            instance.log(.error, "failed() did not return within \(instance.limits.callTimeoutDescription); the load goes on")
        }
    }

    /// Destroys the plugin instance; later calls fail. Called by deinit if not before. With a
    /// call timeout, destruction waits on the plugin's thread for the calls before it. Waited
    /// for at most ``PluginLimits/lifecycleTimeout``; calling it again does nothing.
    public func destroy() {
        destroy(waiting: true)
    }

    private func destroy(waiting: Bool) {
        guard !destroyStarted.exchange(true, ordering: .acquiringAndReleasing) else { return }
        // Captures no `self`: from deinit, this may run after the object is gone.
        let destroy = destroying(plugin, calls: calls, library: library, instance: instance)
        let close: @Sendable (_ calling: @Sendable () -> Void) -> Void = { [instance] calling in
            destroy(calling)
            instance.endAllIntercepts()
        }
        // From deinit, unbounded, as for a source: on the releasing thread, or on the worker after
        // its calls and not waited for (deinit may run on the worker itself, when a call that
        // returned after its caller gave up held the last reference).
        if !waiting { return worker.map { $0.runDetached { close {} } } ?? close {} }
        // Given up on, the plugin answers no intercept any more: none is left waiting.
        if !boundedDestroy(instance, on: worker, busy: calls.hasCallInFlight, close) { instance.endAllIntercepts() }
    }

    private func failure(_ status: PluginStatus, _ message: String, retryAfter: Duration? = nil) -> PluginError {
        PluginError(status, message, plugin: instance.label, retryAfter: retryAfter)
    }
}

/// Runs calls into a plugin instance one at a time (unless it is thread-safe), and never
/// after it was destroyed.
final class SerializedCalls: Sendable {
    private let lock = Locked(false) // destroyed
    private let serialized: Bool
    private let closed = Atomic<Bool>(false)
    /// Calls running outside the lock (thread-safe instances, `cancel`); `close` waits for them.
    private let unlocked = Atomic<Int>(0)
    /// The library's ``PluginLibrary/crashLabel``: each call is marked as one into it.
    private let library: UInt

    init(serialized: Bool, library: PluginLibrary) {
        self.serialized = serialized
        self.library = library.crashLabel
    }

    /// Runs `body` unless the instance is destroyed (then returns `nil`).
    @discardableResult
    func run<R>(_ body: () -> R?) -> R? {
        serialized ? runExclusive(body) : unlessClosed(body)
    }

    /// Runs a call the ABI serializes even for thread-safe instances (a source's `key_chain`
    /// and `refresh_key`): never overlapping another such call, unless destroyed.
    @discardableResult
    func runExclusive<R>(_ body: () -> R?) -> R? {
        lock.withLock { destroyed in exclusive(destroyed, body) }
    }

    /// ``runExclusive(_:)``, unless its turn does not come within `timeout` (a call before it
    /// that does not return holds the turn): then `.timedOut`, and `body` is not run.
    func runExclusive<R>(within timeout: Duration, _ body: () -> R?) -> Turn<R> {
        guard let result = lock.withLock(within: timeout, { destroyed in exclusive(destroyed, body) }) else { return .timedOut }
        return .ran(result)
    }

    /// `body`, under the lock, unless the instance is destroyed.
    private func exclusive<R>(_ destroyed: Bool, _ body: () -> R?) -> R? {
        destroyed ? nil : (serialized ? PluginCrash.calling(library, body) : unlessClosed(body))
    }

    enum Turn<R> {
        /// `body`'s result, or `nil` when the instance was destroyed.
        case ran(R?)
        case timedOut
    }

    /// Runs a call the ABI allows from any thread at any time (`cancel`), unless destroyed.
    func runUnserialized(_ body: () -> Void) {
        _ = unlessClosed { body() }
    }

    /// Runs a call the plugin makes from a thread of its own (a deferred intercept's `answer`,
    /// inside its `resume`), unless destroyed: never serialized (a plugin may resume inside its
    /// intercept()), but destroy() waits for it, as for any call.
    func runFromPlugin<R>(_ body: () -> R) -> R? {
        unlessClosed(body)
    }

    /// Counted, so that `close` sees either this call or `closed` set before it (both seq-cst).
    private func unlessClosed<R>(_ body: () -> R?) -> R? {
        unlocked.add(1, ordering: .sequentiallyConsistent)
        defer { unlocked.subtract(1, ordering: .sequentiallyConsistent) }
        guard !closed.load(ordering: .sequentiallyConsistent) else { return nil }
        return PluginCrash.calling(library, body)
    }

    /// Whether a call into the plugin is running now (one holds the lock, or runs outside it).
    var hasCallInFlight: Bool {
        unlocked.load(ordering: .sequentiallyConsistent) > 0 || lock.withLock(within: .zero, { _ in }) == nil
    }

    /// Runs `destroy` once, after the calls in flight: destroy() is never concurrent with
    /// anything (the ABI's promise), also for thread-safe instances and cancel().
    func close(_ destroy: () -> Void) {
        let first = lock.withLock { destroyed -> Bool in
            defer { destroyed = true }
            return !destroyed
        }
        guard first, !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        // A call that never returns keeps this waiting for good (its destroy is left running,
        // ``boundedDestroy``): after a moment it waits sleeping, not spinning (threads left so
        // kept cores busy).
        var turns = 0
        while unlocked.load(ordering: .sequentiallyConsistent) > 0 {
            if turns < 1_000 { sched_yield() } else { usleep(1_000) }
            turns += 1
        }
        PluginCrash.calling(library, destroy)
    }
}

extension SerializedCalls.Turn: Sendable where R: Sendable {}

/// Runs calls into a plugin on threads of their own and stops waiting for one after a
/// timeout; the call itself cannot be stopped, so it goes on, and later calls queue behind it.
final class PluginCallWorker: Sendable {
    private let queue: DispatchQueue
    private let timeout: Duration
    /// The calls waited for, each by its ``ResumeOnce``.
    private let deadlines: Deadlines<ObjectIdentifier>

    init(label: String, timeout: Duration, concurrent: Bool) {
        queue = DispatchQueue(label: "paging.plugin-calls \(label)", attributes: concurrent ? .concurrent : [])
        self.timeout = timeout
        deadlines = Deadlines(timeout: timeout)
    }

    /// The call's result, or `nil` when it did not return in time.
    func run<Result: Sendable>(_ call: @escaping @Sendable () -> Result) async -> Result? {
        await withCheckedContinuation { continuation in
            let once = ResumeOnce(continuation)
            // Its id lives while it is watched: the expiry holds it, and the call until it unwatches.
            let timer = ObjectIdentifier(once)
            deadlines.watch(timer) { once.resume(nil) }
            queue.async { [deadlines] in
                once.resume(call())
                deadlines.unwatch(timer)
            }
        }
    }

    /// ``run(_:)`` for a caller that cannot suspend: blocks the calling thread until the call
    /// returns or the timeout passes (then `nil`).
    func runBlocking<Result: Sendable>(_ call: @escaping @Sendable () -> Result) -> Result? {
        waiting(atMost: timeout, start: { queue.async(execute: $0) }, call)
    }

    func runDetached(_ call: @escaping @Sendable () -> Void) {
        queue.async(flags: .barrier, execute: call)
    }
}

/// One call handed to a ``PluginCallWorker``, whose caller may stop waiting for it: tells
/// the worker whether to make the call at all, and each side whether the call outlived its
/// caller (counted as stuck from the caller's timeout until it returns).
final class WorkerCall: Sendable {
    private enum State { case queued, running(since: ContinuousClock.Instant), returned, abandoned(running: Bool) }
    private let state = Locked(State.queued)

    /// On the worker, before the call: false when the caller stopped waiting (do not make it).
    func start() -> Bool {
        state.withLock { state in
            guard case .queued = state else { return false }
            state = .running(since: .now)
            return true
        }
    }

    /// On the worker, as the call returns: true when its caller had stopped waiting (it was
    /// counted as stuck, and is no longer).
    func returned() -> Bool {
        state.withLock { state in
            defer { state = .returned }
            if case .abandoned(running: true) = state { return true }
            return false
        }
    }

    /// The caller stops waiting: when the call is running, it is now stuck; when it had not
    /// started, it never will.
    func abandon() -> Abandoned {
        state.withLock { state in
            switch state {
            case .queued:
                state = .abandoned(running: false)
                return .beforeStart
            case .running(let since):
                state = .abandoned(running: true)
                return .whileRunning(for: .now - since)
            case .returned, .abandoned:
                return .afterReturn
            }
        }
    }

    /// `for`: how long the call had run (less than the caller's wait when it waited its turn).
    enum Abandoned { case beforeStart, whileRunning(for: Duration), afterReturn }
}

/// Resumes a continuation with the first value it gets; later ones are dropped.
private final class ResumeOnce<Result: Sendable>: Sendable {
    private let continuation: Locked<CheckedContinuation<Result?, Never>?>

    init(_ continuation: CheckedContinuation<Result?, Never>) {
        self.continuation = Locked(continuation)
    }

    func resume(_ value: Result?) {
        continuation.withLock { continuation in
            defer { continuation = nil }
            return continuation
        }?.resume(returning: value)
    }
}

/// A plugin's table pointer, handed to the thread that destroys it; the ABI's rules (no call
/// in flight during destroy) are kept by ``SerializedCalls``.
package struct UnsafeSendable<Value>: @unchecked Sendable {
    package let value: Value
    package init(_ value: Value) { self.value = value }
}
