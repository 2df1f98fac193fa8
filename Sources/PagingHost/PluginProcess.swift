import FoundationEssentials
import Glibc
import Paging

/// Where isolated plugins run: the `pager` executable, started as `pager __isolate PID`.
public enum PluginIsolation {
    private static let path = Locked<String?>(nil)

    /// The executable started for every isolated plugin; by default `pager` in the folder of the
    /// running executable (the built products folder, for `pager` and for tests).
    public static var executable: String {
        get { path.withLock { $0 } ?? ((PluginSearchPath.executableFolder() ?? ".") + "/pager") }
        set { path.withLock { $0 = newValue } }
    }

    /// Deaths in a row, without a load answered between them, after which a plugin is not
    /// restarted again.
    public static let restartLimit = 5

    /// How long a caller watches for its answer itself before it waits to be woken: most
    /// isolated calls are answered within it, and a wake-up costs more than the wait.
    static let quickAnswer = Duration.microseconds(50)

    /// How long a child may take to answer a call after the call timed out and was cancelled
    /// before it is killed as hung: the timeout again, at least 500 ms and at most 5 s.
    static func hangGrace(after timeout: Duration) -> Duration {
        min(max(timeout, .milliseconds(500)), .seconds(5))
    }
}

/// One isolated plugin's child process, restarted after it dies: the calls in flight when it
/// dies fail with a retryable ``PluginError`` naming the plugin, its library and the signal or
/// exit status; the next call starts a new child, after a backoff (10 ms doubling to 2 s) while
/// children die without answering a load (a fetch, intercept, transform or handle; key chains
/// do not count); after ``PluginIsolation/restartLimit`` such deaths in a row the plugin is
/// dead, and its calls fail at once with a non-retryable error.
///
/// # Thread safety
/// Any thread; calls overlap (each has an id on the wire).
final class PluginProcess: Sendable {
    struct Spec: Sendable {
        var library: String
        var sha256: String?
        var id: String?
        var isSource: Bool
        var config: JSONValue
        var limits: PluginLimits
        /// Where the manifest names the plugin, when it names the same one more than once: its
        /// label says it ("logging at $.interceptors[2] (/lib/liblogging.so)").
        var position: String? = nil

        /// `label` ("id (library)") with the position, if any.
        func positioned(_ label: String) -> String {
            position.map { Pipeline.label(label, library: library, at: $0) } ?? label
        }
    }

    /// The plugin as errors name it: "id (library)", the id the child reported once it started.
    var label: String { state.withLock { $0.label } }
    /// The plugin's id, version and ABI version, as the latest child reported them.
    var identity: IsolatedPluginIdentity { state.withLock { $0.identity } }
    let spec: Spec
    /// Signalled when the child's source says its data changed (`paging.invalidation/1`).
    let invalidation = PagingInvalidation()
    /// The host's figures of this plugin's calls, round trips included (``PluginLimits/recordsStats``).
    let stats = PluginStats()
    private let sink: PluginLogSink
    private let state: Locked<State>
    private let startLock = Condition()
    private let nextCall = Locked<UInt64>(1)
    private let watchdog: CallWatchdog

    private struct State {
        var label: String
        var child: ChildProcess?
        var deathsInARow = 0
        var lastDeath: ContinuousClock.Instant?
        var deadBecause: String?
        var closed = false
        /// The refresh key the latest child's source reported.
        var refreshKey = PluginKey(bytes: [])
        var identity = IsolatedPluginIdentity(id: "?", version: "?", abiVersion: "?")
        /// Whether the latest child's interceptor transforms pages (`paging.page-transform/1`).
        var transforms = false
    }

    /// Starts the first child; a plugin that cannot be loaded there throws, with the child's reason.
    init(_ spec: Spec, sink: @escaping PluginLogSink) throws(IsolationStartError) {
        self.spec = spec
        self.sink = sink
        let state = Locked(State(label: spec.positioned("\(spec.id ?? "?") (\(spec.library))")))
        self.state = state
        let timeout = spec.limits.fetchTimeout, grace = PluginIsolation.hangGrace(after: timeout)
        // A call the child still has not answered `grace` after it timed out (and was
        // cancelled) holds a thread in a plugin that hangs: the child is killed, and restarted.
        let hangWatch = CallWatchdog(timeout: grace) { id, _ in
            guard let child = state.withLock({ $0.child }), child.isOverdue(id) else { return }
            child.killHung(because: "was killed: a call was still running \(grace.wholeMilliseconds) ms after its timeout "
                + "(\(timeout.wholeMilliseconds) ms); the plugin hangs")
        }
        watchdog = CallWatchdog(timeout: timeout) { id, timeout in
            guard let child = state.withLock({ $0.child }) else { return }
            let error = PluginError(.timeout, "the isolated call did not complete within \(timeout)", plugin: state.withLock { $0.label })
            guard child.timeOut(id, error) else { return }
            hangWatch.watch(id)
            // Off the watchdog's queue: a child that reads nothing may block the send, and its
            // other calls' timeouts would wait behind it.
            detachThread(named: "paging-cancel") { child.cancel(id) }
        }
        let child = try launch()
        state.withLock { $0.child = child }
    }

    deinit { shutDown() }

    var refreshKey: PluginKey { state.withLock { $0.refreshKey } }

    /// Whether the interceptor transforms pages; one that does not only handles them.
    var transforms: Bool { state.withLock { $0.transforms } }

    /// Sends one call and waits for its answer: a reader over the reply's payload.
    func call(_ op: IsolationOp, _ payload: (inout WireWriter) -> Void) async throws -> WireReader {
        let child = try await running()
        let (id, bytes) = frame(op, payload)
        watchdog.watch(id)
        defer { watchdog.unwatch(id) }
        child.register(id, frame: bytes)
        let answer: CallAnswer
        if let quick = child.answer(to: id, within: PluginIsolation.quickAnswer) {
            answer = quick
        } else {
            answer = await withTaskCancellationHandler {
                await withCheckedContinuation { continuation in
                    child.wait(for: id) { continuation.resume(returning: $0) }
                }
            } onCancel: {
                child.finish(id, .failure(CancellationError()))
                child.cancel(id)
            }
        }
        let reader = try reader(of: answer)
        // A load answered: the child works, whatever its predecessors did.
        if op != .loadFailed { state.withLock { $0.deathsInARow = 0 } }
        return reader
    }

    /// `page`, from the child, as the host takes a plugin's: the child's host checked it, but the
    /// plugin shares that process and may write frames itself (forged pages of items that were
    /// not JSON went through, into `pager serve`'s answers). A child that sends a page the host
    /// refuses is stopped; the next call restarts it. So is one whose page cannot be read (its
    /// metadata not UTF-8, which a lossy reading would have changed).
    func checked(_ decode: () throws -> PluginPage) throws -> PluginPage {
        let page = try decoded("a page", decode)
        guard let problem = page.refusal(within: spec.limits) else { return page }
        throw stopped(sending: "a page", problem)
    }

    /// A request the child's interceptor rewrote from `original`, checked as a page from it is.
    func checked(_ decode: () throws -> PluginRequest, rewriting original: PluginRequest) throws -> PluginRequest {
        let request = try decoded("a request", decode)
        guard let problem = request.refusal(rewriting: original, within: spec.limits) else { return request }
        throw stopped(sending: "a request", problem)
    }

    private func decoded<Value>(_ what: String, _ decode: () throws -> Value) throws -> Value {
        do { return try decode() } catch let error as WireError { throw stopped(sending: what, error.description) }
    }

    /// Keys from the child (a key chain, a refresh key), checked as a page from it is.
    func checked(keys: [PluginKey?]) throws(PluginError) {
        if let problem = keysRefusal(keys) { throw stopped(sending: "a key", problem) }
    }

    /// Stops the child for sending `what`, which the host refuses for `problem`: the error of
    /// the call that got it.
    private func stopped(sending what: String, _ problem: String) -> PluginError {
        state.withLock { $0.child }?.stopMalformed("\(what) the host refuses: \(problem)")
        return PluginError(.internal, "the isolated plugin process sent \(what) the host refuses (\(problem)); it is stopped, and the next call restarts it",
                           plugin: label)
    }

    /// A call that holds the calling thread until it is answered (key chains, which the engine
    /// asks synchronously); with the same timeout, restarts and failures as ``call(_:_:)``.
    func callBlocking(_ op: IsolationOp, restarting: Bool = true, _ payload: (inout WireWriter) -> Void) throws -> WireReader {
        guard restarting || state.withLock({ $0.child }) != nil else {
            throw PluginError(.cancelled, "the isolated plugin process is not running", plugin: label)
        }
        let child = try runningNow()
        let (id, bytes) = frame(op, payload)
        let answer = Locked<CallAnswer?>(nil)
        let done = Latch()
        watchdog.watch(id)
        defer { watchdog.unwatch(id) }
        child.register(id, frame: bytes)
        if let quick = child.answer(to: id, within: PluginIsolation.quickAnswer) { return try reader(of: quick) }
        child.wait(for: id) { result in
            answer.withLock { $0 = result }
            done.open()
        }
        done.wait()
        return try reader(of: answer.withLock { $0 }!)
    }

    private func frame(_ op: IsolationOp, _ payload: (inout WireWriter) -> Void) -> (UInt64, [UInt8]) {
        let id = nextCall.withLock { id in
            defer { id += 1 }
            return id
        }
        var frame = WireWriter(op, call: id)
        payload(&frame)
        return (id, frame.finish())
    }

    private func reader(of answer: CallAnswer) throws -> WireReader {
        switch answer {
        case .reply(let reader):
            return reader
        case .failure(let error):
            guard let error = error as? PluginError else { throw error }
            if error.status == .cancelled, Task.isCancelled { throw CancellationError() }
            // The child's failures name no plugin: this process knows it.
            throw error.plugin.isEmpty ? PluginError(error.status, error.message, plugin: label, retryAfter: error.retryAfter) : error
        }
    }

    /// The running child, started (after the backoff) when the last one died.
    private func running() async throws -> ChildProcess {
        let (child, wait) = try due()
        if let child { return child }
        if wait > .zero { try await Task.sleep(for: wait) }
        return try restart()
    }

    private func runningNow() throws -> ChildProcess {
        let (child, wait) = try due()
        if let child { return child }
        if wait > .zero { usleep(UInt32(clamping: wait.wholeMilliseconds * 1_000)) }
        return try restart()
    }

    /// The running child, or how long to wait before starting the next.
    private func due() throws -> (ChildProcess?, Duration) {
        try state.withLock { state throws -> (ChildProcess?, Duration) in
            if let reason = state.deadBecause { throw PluginError(.internal, reason, plugin: state.label) }
            if state.closed { throw PluginError(.cancelled, "the isolated plugin was shut down", plugin: state.label) }
            if let child = state.child { return (child, .zero) }
            let backoff = Duration.milliseconds(min(2_000, 10 << min(max(state.deathsInARow - 1, 0), 8)))
            let since = state.lastDeath.map { ContinuousClock.now - $0 } ?? backoff
            return (nil, since < backoff ? backoff - since : .zero)
        }
    }

    private func restart() throws -> ChildProcess {
        startLock.lock()
        defer { startLock.unlock() }
        if let child = state.withLock({ $0.child }) { return child }
        let child: ChildProcess
        do {
            child = try launch()
        } catch {
            let message = died("could not be restarted: \(error.message)")
            throw PluginError(.transient, message, plugin: label)
        }
        let refused = state.withLock { state -> Bool in
            if state.closed { return true }
            state.child = child
            return false
        }
        if refused {
            child.stop()
            throw PluginError(.cancelled, "the isolated plugin was shut down", plugin: label)
        }
        return child
    }

    /// Records a child's death; the message for the calls it fails.
    private func died(_ what: String) -> String {
        state.withLock { state in
            state.child = nil
            state.lastDeath = .now
            state.deathsInARow += 1
            guard state.deathsInARow >= PluginIsolation.restartLimit else {
                return "the isolated plugin process \(what); the next call restarts it"
            }
            let reason = "the isolated plugin process \(what), \(state.deathsInARow) times in a row without answering a load: "
                + "the plugin is dead and is not restarted"
            state.deadBecause = reason
            return reason
        }
    }

    /// Spawns a child and has it load the plugin.
    private func launch() throws(IsolationStartError) -> ChildProcess {
        var start = WireWriter(.start, call: 0)
        start.string(spec.library)
        start.bool(spec.sha256 != nil)
        if let sha256 = spec.sha256 { start.string(sha256) }
        start.bool(spec.id != nil)
        if let id = spec.id { start.string(id) }
        start.u8(spec.isSource ? 0 : 1)
        start.string(spec.config.jsonText)
        start.u64(UInt64(spec.limits.maxItemsPerPage))
        start.u64(UInt64(spec.limits.maxPageBytes))
        start.u64(spec.limits.fetchTimeout.wholeMilliseconds)
        start.bool(spec.limits.callTimeout != nil)
        if let callTimeout = spec.limits.callTimeout {
            start.u64(callTimeout.wholeMilliseconds)
            start.string(spec.limits.callTimeoutOrigin)
        }
        start.u32(spec.limits.logLevel.rawValue)
        start.bool(spec.limits.recordsStats)
        let child = try ChildProcess.spawn(PluginIsolation.executable, maxFrame: isolationFrameLimit(spec.limits))
        guard child.socket.send(start.finish()) else {
            throw IsolationStartError(message: "the isolated plugin process \(child.stop()) while loading the plugin")
        }
        var reader: WireReader
        switch startAnswer(of: child) {
        case .answer(let answer):
            reader = answer
        case .ended:
            throw IsolationStartError(message: "the isolated plugin process \(child.stop()) while loading the plugin")
        case .silent(let wait):
            child.stop()
            throw IsolationStartError(message: "the isolated plugin process did not load the plugin within \(wait) and was stopped")
        case .malformed(let problem):
            child.stop()
            throw IsolationStartError(message: "the isolated plugin process sent a malformed frame while loading the plugin (\(problem)) and was stopped")
        }
        do {
            guard reader.op == IsolationOp.reply.rawValue || reader.op == IsolationOp.failure.rawValue else {
                throw WireError(description: "operation \(reader.op) instead of the answer to start")
            }
            if reader.op == IsolationOp.failure.rawValue {
                _ = try reader.u32()
                let message = try reader.string()
                child.stop()
                throw IsolationStartError(message: message)
            }
            let label = try reader.string()
            let identity = IsolatedPluginIdentity(id: try reader.string(), version: try reader.string(), abiVersion: try reader.string())
            let refreshKey = spec.isSource ? PluginKey(bytes: try reader.data()) : PluginKey(bytes: [])
            let transforms = spec.isSource ? false : try reader.bool()
            state.withLock { state in
                state.label = spec.positioned(label)
                state.identity = identity
                state.refreshKey = refreshKey
                state.transforms = transforms
            }
        } catch let error as IsolationStartError {
            throw error
        } catch {
            child.stop()
            throw IsolationStartError(message: "the isolated plugin process sent a malformed answer: \(error)")
        }
        child.serve(sink: sink, invalidated: { [invalidation] in invalidation.invalidate() }) { [weak self] child, how in
            guard let self else { return PluginError(.cancelled, "the isolated plugin was shut down", plugin: "?") }
            if state.withLock({ $0.closed }) { return PluginError(.cancelled, "the isolated plugin was shut down", plugin: label) }
            let isCurrent = state.withLock { $0.child === child }
            guard isCurrent else { return PluginError(.transient, "the isolated plugin process \(how)", plugin: label) }
            let message = died(how)
            sink(.error, label, message)
            let dead = state.withLock { $0.deadBecause != nil }
            return PluginError(dead ? .internal : .transient, message, plugin: label)
        }
        return child
    }

    /// What the child said to the start frame.
    private enum StartAnswer {
        case answer(WireReader)
        /// It ended (or closed its socket).
        case ended
        /// Nothing within this long.
        case silent(Duration)
        case malformed(String)
    }

    /// The child's answer to the start frame, the plugin's log lines before it passed on to the
    /// sink. The child bounds the library's load, the create and a source's refresh_key itself
    /// (``PluginLimits/lifecycleTimeout`` each, and says why); this waits for the three, and 5 s more
    /// (a process starts slowly on a loaded machine).
    private func startAnswer(of child: ChildProcess) -> StartAnswer {
        let wait = spec.limits.lifecycleTimeout * 3 + .seconds(5)
        let deadline = ContinuousClock.now + wait
        while true {
            let body: [UInt8]
            switch child.next(within: deadline - .now) {
            case nil: return .silent(wait)
            case .ended?: return .ended
            case .malformed(let problem)?: return .malformed(problem)
            case .frame(let frame)?: body = frame
            }
            guard var reader = try? WireReader(body) else { return .malformed("a frame that is not of the protocol") }
            guard reader.op == IsolationOp.log.rawValue else { return .answer(reader) }
            guard let level = try? reader.u32(), let plugin = try? reader.string(), let message = try? reader.string() else {
                return .malformed("a log line cut short")
            }
            sink(PluginLogLevel(rawValue: level) ?? .info, plugin, message)
        }
    }

    /// Ends the child (asked to: the plugin is destroyed there; killed with what it forked if
    /// it has not ended within ``ChildProcess/endingGrace``) and waits until it is reaped;
    /// calls in flight fail as cancelled, later calls fail.
    func shutDown() {
        let child = state.withLock { state -> ChildProcess? in
            state.closed = true
            defer { state.child = nil }
            return state.child
        }
        guard let how = child?.stop(), how.hasPrefix(ChildProcess.killedWhileEnding) else { return }
        sink(.warning, label, "the isolated plugin process \(how)")
    }

    /// The process id of the running child, if one runs.
    var childPID: pid_t? { state.withLock { $0.child?.pid } }
}

/// An isolated plugin's id, version and ABI version, as its child process loaded it.
public struct IsolatedPluginIdentity: Sendable, Equatable {
    public let id: String
    public let version: String
    public let abiVersion: String
}

/// Why an isolated plugin's child could not load it.
struct IsolationStartError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

extension Duration {
    /// Whole milliseconds, at least 0.
    package var wholeMilliseconds: UInt64 {
        let (seconds, attoseconds) = components
        return UInt64(max(0, seconds * 1_000 + attoseconds / 1_000_000_000_000_000))
    }

    /// Whole nanoseconds (for a dispatch deadline).
    var nanoseconds: Int {
        let (seconds, attoseconds) = components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }

    /// The duration in seconds, with its fraction.
    package var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension PluginProcess {
    /// Logs a line about this plugin to the host's sink.
    func log(_ level: PluginLogLevel, _ message: String) { sink(level, label, message) }

    /// Runs `body` (a call), recording it in ``stats`` when the limits ask: `completed` says
    /// whether its result is a page the plugin answered.
    func measured<T>(_ body: () async throws -> T, completed: (T) -> Bool) async throws -> T {
        guard spec.limits.recordsStats else { return try await body() }
        let start = ContinuousClock.now
        do {
            let result = try await body()
            stats.record(since: start, completed: completed(result))
            return result
        } catch {
            stats.record(since: start, error: error)
            throw error
        }
    }

    /// Counts a failure of a call not counted as one (a transform) in ``stats``, when the
    /// limits ask.
    func countFailure(_ error: any Error) {
        if spec.limits.recordsStats { stats.recordFailure(error) }
    }

    /// The host's figures of this plugin's calls, with the counters and gauges the running
    /// child published (a restarted child starts them from zero; none while no child runs).
    var figures: PluginStats.Snapshot {
        var snapshot = stats.snapshot
        if var reader = try? callBlocking(.published, restarting: false, { _ in }) {
            try? reader.published(into: &snapshot)
        }
        return snapshot
    }

    /// The plugin's health check (`paging.health/1`), in the running child (started if none runs).
    func health() -> PluginHealth {
        do {
            var reader = try callBlocking(.health) { _ in }
            return try reader.health()
        } catch {
            log(.warning, "health failed: \(error)")
            return .unhealthy((error as? PluginError)?.status ?? .internal)
        }
    }
}
