import CPaging
import FoundationEssentials
import Paging
import Synchronization

/// The level of a plugin's log line (`PAGING_LOG_*`).
public enum PluginLogLevel: UInt32, Sendable, Comparable, CustomStringConvertible {
    case trace = 0, debug, info, warning, error

    public static func < (lhs: PluginLogLevel, rhs: PluginLogLevel) -> Bool { lhs.rawValue < rhs.rawValue }

    public var description: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .warning: "warning"
        case .error: "error"
        }
    }
}

/// Receives the log lines of plugins, and the host's own lines about their misbehaviour:
/// the level, the plugin ("id (path)") and the message. Called from any thread.
public typealias PluginLogSink = @Sendable (PluginLogLevel, String, String) -> Void

/// Limits on what one fetch or intercept may hand back, so that a runaway plugin fails its
/// load instead of exhausting memory.
public struct PluginLimits: Sendable {
    public var maxItemsPerPage: Int
    public var maxPageBytes: Int
    /// How long the host waits for a fetch to complete before failing it with a timeout.
    public var fetchTimeout: Duration
    /// When set, an interceptor's `intercept` and `handle` and a source's `fetch` run on a thread
    /// of their own, and a call that has not returned by then fails its load with a (retryable)
    /// timeout; the thread is left to the plugin. When `nil`, calls run on the caller's thread: the fastest, but a
    /// plugin that blocks holds the load until it returns.
    public var callTimeout: Duration?
    /// The lowest level the log sink keeps. Plugins may ask (extension `paging.log-level/1`)
    /// so as not to build lines that would be dropped.
    public var logLevel: PluginLogLevel
    /// Whether the host times every intercept and fetch and counts their outcomes
    /// (``PluginStats``). Off, it measures nothing.
    public var recordsStats: Bool
    /// Host extensions (extensions.h ids) the instance is not offered, as a host that predates
    /// them would not offer them: `get_extension` answers NULL for each, and a plugin that lists
    /// one in its required_extensions is refused at creation. For checking how a plugin copes
    /// with older hosts (`pager check --without-extension`); empty in normal use.
    public var withheldExtensions: Set<String>

    /// Whether ``callTimeout`` bounds the lifecycle calls too (``lifecycleTimeout``): `pager
    /// check` times fetch() by its --timeout-ms but gives create the usual 30 s.
    public var callTimeoutBoundsLifecycle = true
    /// How long plugin code that must return before anything else happens may take: loading a
    /// library (its constructors, init()), create, and destroy (what comes after waits for
    /// it): the call timeout, without one the fetch timeout but at least 30 s.
    public var lifecycleTimeout: Duration { lifecycleCallTimeout ?? max(fetchTimeout, .seconds(30)) }
    private var lifecycleCallTimeout: Duration? { callTimeoutBoundsLifecycle ? callTimeout : nil }
    /// The call timeout as messages say it: "2.0 seconds (call_timeout_ms)".
    var callTimeoutDescription: String { callTimeout.map { "\($0) (\(callTimeoutOrigin))" } ?? "no call timeout" }
    /// Where ``lifecycleTimeout`` comes from, as messages say it where the limits are not known.
    static let lifecycleTimeoutSetting = "call_timeout_ms; without it, timeout_ms but at least 30 s"
    /// How messages name where ``callTimeout`` comes from: the manifest's call_timeout_ms, or its
    /// timeout_ms where a command bounds every call with it (`pager serve` and `browse`).
    public var callTimeoutOrigin = "call_timeout_ms"
    /// How messages name where ``lifecycleTimeout`` comes from.
    var lifecycleTimeoutOrigin: String { lifecycleCallTimeout != nil ? callTimeoutOrigin : "timeout_ms but at least 30 s, without call_timeout_ms" }

    public init(maxItemsPerPage: Int = 100_000, maxPageBytes: Int = 256 << 20, fetchTimeout: Duration = .seconds(30),
                callTimeout: Duration? = nil, logLevel: PluginLogLevel = .trace, recordsStats: Bool = false,
                withheldExtensions: Set<String> = []) {
        self.maxItemsPerPage = maxItemsPerPage
        self.maxPageBytes = maxPageBytes
        self.fetchTimeout = fetchTimeout
        self.callTimeout = callTimeout
        self.logLevel = logLevel
        self.recordsStats = recordsStats
        self.withheldExtensions = withheldExtensions
    }
}

/// The host side of one plugin instance: what `paging_host_t.host_data` points to.
///
/// Instances, and their `paging_host_t`, are never freed: a misbehaving plugin that calls the
/// host after `destroy()` (from a thread it forgot) then meets a finished instance that
/// refuses the call, instead of freed memory. Each costs about 2.6 KB (`pager check`'s
/// create-destroy-cycles measures it and counts it as the host's); the caller's log sink, which
/// may hold anything, is let go once the plugin is destroyed and its owner is gone.
package final class PluginInstance: Sendable {
    let label: String
    /// The caller's sink, nil once the plugin is destroyed and the object that owns the
    /// instance is gone (a line after that goes to ``PluginLibrary/librarySink``).
    private let sink: Locked<SinkState>
    let limits: PluginLimits
    package let fetches = Locked<[UInt64: PendingFetch]>([:])
    /// Intercepts whose answer the plugin deferred (`paging.async-intercept/1`), by id.
    let intercepts = Locked<[UInt64: PendingIntercept]>([:])
    /// What `resume` needs of the interceptor this instance is, set once it is created.
    let answering = Locked<AnswerContext?>(nil)
    /// The host's measures of its calls, and what it published (`paging.metrics/1`).
    let stats = PluginStats()
    /// What the instance's `invalidate` (`paging.invalidation/1`) signals.
    let invalidation = PagingInvalidation()
    /// Fetches the host ended itself (cancelled, timed out) that the plugin may still complete,
    /// as it should after a cancel: their completion is expected, not misuse. Bounded.
    let abandoned = Locked<[UInt64: PluginStatus]>([:])
    package let destroyed = Atomic<Bool>(false)
    private let saidAfterDestroy = Atomic<Bool>(false)
    nonisolated(unsafe) package private(set) var table: UnsafeMutablePointer<paging_host_t>!
    /// This instance's number in its call handles (``CallHandle``), and the count of its calls.
    nonisolated(unsafe) private(set) var serial: UInt32 = 0
    let calls = Atomic<UInt64>(0)

    package init(label: String, sink: @escaping PluginLogSink, limits: PluginLimits) {
        self.label = label
        self.sink = Locked(SinkState(sink: sink))
        self.limits = limits
        serial = Self.register(self)
        let table = UnsafeMutablePointer<paging_host_t>.allocate(capacity: 1)
        table.initialize(to: hostTableTemplate)
        table.pointee.host_data = Unmanaged.passRetained(self).toOpaque()
        self.table = table
    }

    /// A struct, not a tuple: a closure in a tuple that a generic ``Locked`` lends `inout` is
    /// wrapped in two more reabstraction thunks at each access, so each line cost more than the
    /// one before, and a plugin's 65,000th crashed pager (stack overflow).
    private struct SinkState {
        var sink: PluginLogSink?
        var ownerGone = false
    }

    func log(_ level: PluginLogLevel, _ message: String) {
        (sink.withLock { $0.sink } ?? PluginLibrary.librarySink)(level, label, message)
    }

    /// Once the plugin's destroy() has returned: later calls are refused.
    package func markDestroyed() {
        destroyed.store(true, ordering: .releasing)
        sink.withLock { if $0.ownerGone { $0.sink = nil } }
    }

    /// The object that owns the instance is gone: once the plugin is destroyed too, the caller's
    /// sink is let go (a sink holding a view model, or a log buffer, leaked with every pipeline).
    package func ownerGone() {
        sink.withLock { state in
            state.ownerGone = true
            if destroyed.load(ordering: .acquiring) { state.sink = nil }
        }
    }

    /// Whether `function` is called once destroy() has returned: the call is then dropped, and
    /// said once (the host table is the plugin's until destroy returns).
    func isAfterDestroy(_ function: String) -> Bool {
        guard destroyed.load(ordering: .acquiring) else { return false }
        if !saidAfterDestroy.exchange(true, ordering: .relaxed) {
            log(.error, "\(function) \(Self.afterDestroy): ignored (the host table is the plugin's until destroy returns)")
        }
        return true
    }

    /// How a call after destroy() is said (``isAfterDestroy(_:)``).
    package static let afterDestroy = "called after destroy() returned"

    /// Runs `body` with the instance of `host`, or returns `nil` for a NULL table (the refusal
    /// of `function` logged, ``CallHandle/refuseUnowned(_:)``).
    ///
    /// Borrowed without retain and release (`_withUnsafeGuaranteedRef`; a retained
    /// `takeUnretainedValue()` cost ~22 ns a host call, 20 a page for `fetch_add_item`): safe
    /// because instances are never freed (see above), so the reference stays valid whatever the
    /// plugin does.
    @inline(__always)
    static func with<R>(_ host: UnsafePointer<paging_host_t>?, _ function: StaticString, _ body: (PluginInstance) -> R) -> R? {
        guard let data = host?.pointee.host_data else {
            CallHandle.refuseUnowned("\(function): \(host == nil ? "a NULL host table" : "a host table whose host_data is NULL"); refused")
            return nil
        }
        return Unmanaged<PluginInstance>.fromOpaque(data)._withUnsafeGuaranteedRef(body)
    }
}

/// A key a plugin set, cleared, or left alone.
enum KeyOverride: Sendable {
    case unset
    case key(PluginKey)
    case cleared
}

/// What a plugin builds for a page: items, keys and flags.
package struct PageBuilder: Sendable {
    var items: [PluginItem] = []
    var bytes = 0
    var prevKey = KeyOverride.unset
    var nextKey = KeyOverride.unset
    var flags: UInt32 = 0

    /// Adds an item within the limits; returns the problem otherwise.
    mutating func add(_ item: paging_bytes_t, limits: PluginLimits) -> String? {
        // The limits are checked before the copy: one huge item must not be copied to be refused.
        if let full = room(for: item.len, limits: limits) { return full }
        guard let bytes = copyBytes(item) else { return "an item with NULL data and length \(item.len)" }
        return append(PluginItem(bytes: bytes), limits: limits, checking: true)
    }

    /// Appends an item that needs no copy: one the host already holds, or, `checking` it is one
    /// JSON value, one built elsewhere (an isolated plugin's process).
    mutating func append(_ item: PluginItem, limits: PluginLimits, checking: Bool = false) -> String? {
        if let full = room(for: item.bytes.count, limits: limits) { return full }
        // Every item that crosses the ABI is one JSON value.
        if checking, let problem = JSONValidator.validate(item.bytes) { return "item \(items.count) is not valid JSON: \(problem)" }
        bytes += item.bytes.count
        items.append(item)
        return nil
    }

    /// Why an item of `length` bytes does not fit within the limits, or `nil` when it does.
    private func room(for length: Int, limits: PluginLimits) -> String? {
        guard items.count < limits.maxItemsPerPage else { return "more than \(limits.maxItemsPerPage) items in one page (max_items_per_page)" }
        // A length of 2^63 or more reads as negative (a size_t of (size_t)-1, say).
        guard length >= 0, length <= limits.maxPageBytes - bytes else { return "more than \(limits.maxPageBytes) byte\(limits.maxPageBytes == 1 ? "" : "s") in one page (max_page_bytes)" }
        return nil
    }

    /// The page's keys: none in a direction its flags end, else the key set, else `otherwise`
    /// (the request's key chain for a fetch or intercept, the original page's for a transform).
    func keys(otherwise prev: PluginKey?, _ next: PluginKey?) -> (prev: PluginKey?, next: PluginKey?) {
        func resolve(_ override: KeyOverride, end: UInt32, _ fallback: PluginKey?) -> PluginKey? {
            if flags & end != 0 { return nil }
            switch override {
            case .unset: return fallback
            case .key(let key): return key
            case .cleared: return nil
            }
        }
        return (resolve(prevKey, end: PAGING_PAGE_PREV_END, prev), resolve(nextKey, end: PAGING_PAGE_NEXT_END, next))
    }

    func page(for request: PluginRequest) -> PluginPage {
        let keys = keys(otherwise: request.keyChain.prevKey, request.keyChain.nextKey)
        var page = PluginPage(request: request, values: items, prevKey: keys.prev, nextKey: keys.next)
        // A store answering with a page a filter made short or emptied, a source whose server
        // caps its page size.
        page.takeMarks(flags)
        return page
    }

    /// Whether the flags say the page is short but not the last.
    var isShortened: Bool { flags & PAGING_PAGE_SHORTENED != 0 }
}

/// A fetch between `fetch()` and its completion.
///
/// A class, changed in place under the instance's `fetches` lock only: a struct in the
/// dictionary was copied out to be read on every item the plugin added.
package final class PendingFetch: @unchecked Sendable {
    var builder = PageBuilder()
    /// The retry hint of the failure to come (`paging.retry-hint/1`).
    var retryAfter: Duration?
    package var result: FetchResult?
    var waiter: CheckedContinuation<FetchResult, Never>?

    package init() {}
}

package enum FetchResult: Sendable {
    case completed(PageBuilder)
    case failed(PluginStatus, String, retryAfter: Duration? = nil)
}

/// Copies borrowed bytes; `nil` for NULL data with a non-zero length, and for a length of 2^63
/// or more, which Swift reads as negative (a `(size_t)-1` was taken for an empty key).
func copyBytes(_ bytes: paging_bytes_t) -> [UInt8]? {
    guard bytes.len >= 0 else { return nil }
    guard bytes.len > 0 else { return [] }
    guard let data = bytes.data else { return nil }
    return Array(UnsafeBufferPointer(start: data, count: bytes.len))
}

/// The longest key the host takes: a cursor or a URL, not a page (a plugin's 200 MB key cost
/// the host a gigabyte as it was copied along).
let maxKeyBytes = 1 << 20

/// Copies an optional borrowed key: `.cleared` for NULL, `nil` for invalid bytes or a key
/// longer than ``maxKeyBytes`` (``keyRefusal(_:)`` says which).
func copyKey(_ key: UnsafePointer<paging_bytes_t>?) -> KeyOverride? {
    guard let key else { return .cleared }
    guard keyLengthRefusal(key.pointee.len) == nil else { return nil }
    return copyBytes(key.pointee).map { .key(PluginKey(bytes: $0)) }
}

/// Why ``copyKey(_:)`` refused `key`.
func keyRefusal(_ key: UnsafePointer<paging_bytes_t>?) -> String {
    key.flatMap { keyLengthRefusal($0.pointee.len) } ?? "a key with NULL data"
}

/// Why a key of `length` bytes is refused (longer than ``maxKeyBytes``; a negative `length` is a
/// size_t of 2^63 or more), or nil.
func keyLengthRefusal(_ length: Int) -> String? {
    (0...maxKeyBytes).contains(length) ? nil : "a key of \(UInt(bitPattern: length)) bytes (at most \(maxKeyBytes))"
}

/// The line a plugin's log call shows: a NULL message or a level the ABI lacks is said as a
/// warning (not an empty line, or a line taken for info).
func logLine(_ level: UInt32, _ message: UnsafePointer<CChar>?) -> (PluginLogLevel, String) {
    guard let message else { return (.warning, "log called with a NULL message; ignored") }
    guard let known = PluginLogLevel(rawValue: level) else { return (.warning, "log at an unknown level \(level): \(string(message))") }
    return (known, string(message))
}

/// The most entries, and bytes of names and values in all, of the params a plugin sets on a
/// request or of a page's metadata: a transform that set 300 entries of a megabyte grew a page
/// of at most 1 MiB to 300 MiB (and, isolated, a frame too large to take).
let maxNamedEntries = 1_024
let maxNamedBytes = 1 << 20

/// Sets a name and a value a plugin set (a param, a metadata entry: `what`) as text in
/// `entries`; or returns why not: either has NULL data or is not UTF-8 (taken as another name,
/// U+FFFD in it), the name is empty, or `entries` would pass ``maxNamedEntries`` or
/// ``maxNamedBytes``.
func settingNamedText(_ name: paging_bytes_t, _ value: paging_bytes_t, _ what: String, in entries: inout [String: String]) -> String? {
    guard (0...maxNamedBytes).contains(name.len), (0...maxNamedBytes).contains(value.len) else { return "a \(what) of more than \(maxNamedBytes) bytes" }
    guard let name = copyBytes(name), let value = copyBytes(value) else { return "a \(what) with NULL data" }
    guard let name = String(validating: name, as: UTF8.self), let value = String(validating: value, as: UTF8.self) else {
        return "a \(what) name or value that is not valid UTF-8"
    }
    guard !name.isEmpty else { return "a \(what) with an empty name" }
    let replaced = entries[name].map { name.utf8.count + $0.utf8.count } ?? 0
    guard replaced > 0 || entries.count < maxNamedEntries else { return "a \(what) past the most there may be, \(maxNamedEntries)" }
    let bytes = entries.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count } - replaced + name.utf8.count + value.utf8.count
    guard bytes <= maxNamedBytes else { return "a \(what) past the most bytes of names and values there may be, \(maxNamedBytes)" }
    entries[name] = value
    return nil
}

extension PluginPage {
    /// Why the host would refuse this page from a plugin, or nil: more items or bytes than
    /// `limits` allow, an item that is not one JSON value in UTF-8, a key too long, metadata past
    /// its bounds. For a page built elsewhere (an isolated plugin's process), checked again.
    func refusal(within limits: PluginLimits) -> String? {
        var builder = PageBuilder()
        for item in values {
            if let problem = builder.append(item, limits: limits, checking: true) { return problem }
        }
        return keysRefusal([prevKey, nextKey]) ?? namedRefusal(metadata, "metadata")
    }
}

extension PluginRequest {
    /// Why the host would refuse this request as a plugin's rewrite of `original`, or nil: a new
    /// page size of 0 or past `limits`' max_items_per_page, a key too long, params past their
    /// bounds. For one rewritten elsewhere (an isolated plugin's process), checked again.
    func refusal(rewriting original: PluginRequest, within limits: PluginLimits) -> String? {
        guard params.pageSize == original.params.pageSize || (1...limits.maxItemsPerPage).contains(params.pageSize) else {
            return "a page size of \(params.pageSize), not 1 to max_items_per_page (\(limits.maxItemsPerPage))"
        }
        return keysRefusal([key, keyChain.prevKey, keyChain.nextKey]) ?? namedRefusal(params.userInfo, "params")
    }
}

/// Why the host refuses one of `keys` (longer than ``maxKeyBytes``), or nil.
func keysRefusal(_ keys: [PluginKey?]) -> String? {
    keys.lazy.compactMap { $0.flatMap { keyLengthRefusal($0.bytes.count) } }.first
}

/// Why the host refuses `entries` (`what`: params, metadata) set by a plugin: past
/// ``maxNamedEntries`` or ``maxNamedBytes``, or an empty name; or nil.
func namedRefusal(_ entries: [String: String], _ what: String) -> String? {
    let bytes = entries.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
    guard entries.count <= maxNamedEntries, bytes <= maxNamedBytes, entries[""] == nil else {
        return "\(what) past their bounds (\(maxNamedEntries) entries, \(maxNamedBytes) bytes, no empty name)"
    }
    return nil
}

/// The most bytes of a plugin's message (a log line, a failure) the host takes: the rest is
/// counted, not copied. A plugin logged a line of hundreds of MB, which pager copied, and an
/// isolated plugin's process sent whole (until its frame was refused and the process killed).
let maxMessageBytes = 64 << 10

/// A plugin's message, cut after ``maxMessageBytes`` with a note (``OneLine/cut(_:limit:)``).
func string(_ message: UnsafePointer<CChar>?) -> String {
    message.map { OneLine.cut($0, limit: maxMessageBytes) } ?? ""
}

// MARK: - Fetch completion

extension PluginInstance {
    /// What one call did to a pending fetch. Small on purpose: it is returned for every item a
    /// plugin adds, and a tuple holding the `FetchResult` was copied out on each (~5% of a
    /// run's CPU).
    private enum FetchUpdate {
        /// Applied; the fetch goes on.
        case applied
        /// The id is unknown or its fetch finished already.
        case unknown
        /// The fetch finished with this call: `problem` is why the call was refused, if it was,
        /// and `waiter`, if the host is waiting, gets `result`.
        case finished(problem: String?, waiter: CheckedContinuation<FetchResult, Never>?, result: FetchResult)
    }

    /// Applies `change` to a pending fetch; an unknown or finished id, or a change that reports
    /// a problem, is refused and logged. `ends` marks the calls that finish a fetch.
    func updateFetch(
        _ id: UInt64, _ function: String, ends: Bool = false, _ change: (PendingFetch) -> String?
    ) -> paging_status_t {
        let update = fetches.withLock { fetches -> FetchUpdate in
            guard let fetch = fetches[id], fetch.result == nil else { return .unknown }
            let problem = change(fetch).map { "\(function): \($0)" }
            // A bad argument fails the fetch: its page could not be what the plugin meant.
            if let problem { fetch.result = .failed(.invalidArgument, problem) }
            guard let result = fetch.result else { return .applied }
            // Finished: the waiter, if there is one, is resumed and the fetch removed.
            guard let waiter = fetch.waiter else { return .finished(problem: problem, waiter: nil, result: result) }
            fetches[id] = nil
            return .finished(problem: problem, waiter: waiter, result: result)
        }
        switch update {
        case .applied:
            return PAGING_OK
        case .unknown:
            if let status = abandoned.withLock({ ends ? $0.removeValue(forKey: id) : $0[id] }) {
                log(.debug, "\(function) for fetch id \(id), which the host already ended (\(status))")
                return status.rawValue
            }
            log(.error, "\(function) for unknown or finished fetch id \(id)")
            return PAGING_ERR_INVALID_ARGUMENT
        case .finished(let problem, let waiter, let result):
            if let problem {
                log(.error, problem)
                // The plugin goes on adding items and completes: expected, not misuse again
                // (each call was logged as a fetch id "unknown or finished").
                if !ends { rememberEnded(id, .invalidArgument) }
            }
            waiter?.resume(returning: result)
            return problem == nil ? PAGING_OK : PAGING_ERR_INVALID_ARGUMENT
        }
    }
}

// MARK: - The table

/// The functions every instance's table holds; `host_data` is set per instance.
nonisolated(unsafe) let hostTableTemplate: paging_host_t = {
    var table = paging_host_t()
    table.abi_version = PluginABIVersion.host.cValue
    table.struct_size = UInt32(MemoryLayout<paging_host_t>.size)

    table.log = { host, level, message in
        PluginInstance.with(host, "log") { instance in
            guard !instance.isAfterDestroy("log") else { return }
            let (level, text) = logLine(level, message)
            instance.log(level, text)
        }
    }

    table.config_json = { config in PluginConfig.from(config, "config_json")?.jsonCString }
    table.config_string = { config, key in PluginConfig.lookup(config, key, "config_string").flatMap { $0.string(for: $1) } }
    table.config_int = { config, key, fallback in PluginConfig.lookup(config, key, "config_int").flatMap { $0.int(for: $1) } ?? fallback }
    table.config_bool = { config, key, fallback in
        PluginConfig.lookup(config, key, "config_bool").flatMap { $0.bool(for: $1) }.map { $0 ? 1 : 0 } ?? fallback
    }
    table.config_double = { config, key, fallback in
        PluginConfig.lookup(config, key, "config_double").flatMap { $0.double(for: $1) } ?? fallback
    }
    table.config_fail = { config, code, message in
        // At most once: a second call does not replace the reason given first.
        guard let config = PluginConfig.from(config, "config_fail"), config.failure == nil else { return }
        config.failure = PluginStatus.failure(code, string(message), call: "config_fail")
    }
    table.config_type = { config, key in
        PluginConfig.lookup(config, key, "config_type").map { $0.type(for: $1) } ?? PAGING_CONFIG_ABSENT
    }
    table.get_extension = { host, id in
        guard let id else { return nil }
        return PluginInstance.with(host, "get_extension") { instance in HostExtensions.table(for: id, withholding: instance.limits.withheldExtensions) } ?? nil
    }

    table.out_set_key = { out, key in
        InterceptOut.update(out, "out_set_key") { out in
            if let refusal = keyLengthRefusal(key.len) { return refusal }
            guard let bytes = copyBytes(key) else { return "a key with NULL data and length \(key.len)" }
            out.key = PluginKey(bytes: bytes)
            return nil
        }
    }
    table.out_set_page_size = { out, size in
        InterceptOut.update(out, "out_set_page_size") { out in
            guard size > 0 else { return "a page size of 0" }
            // The source would be asked for a page the host cannot take.
            guard Int(size) <= out.limits.maxItemsPerPage else {
                return "a page size of \(size), more than max_items_per_page (\(out.limits.maxItemsPerPage))"
            }
            out.pageSize = Int(size)
            return nil
        }
    }
    table.out_set_param = { out, name, value in
        InterceptOut.update(out, "out_set_param") { out in
            settingNamedText(name, value, "param", in: &out.params)
        }
    }
    table.out_add_item = { out, item in
        InterceptOut.update(out, "out_add_item", into: \.pageMisuse) { out in out.page.add(item, limits: out.limits) }
    }
    table.out_set_prev_key = { out, key in
        InterceptOut.update(out, "out_set_prev_key", into: \.pageMisuse) { out in
            guard let key = copyKey(key) else { return keyRefusal(key) }
            out.page.prevKey = key
            return nil
        }
    }
    table.out_set_next_key = { out, key in
        InterceptOut.update(out, "out_set_next_key", into: \.pageMisuse) { out in
            guard let key = copyKey(key) else { return keyRefusal(key) }
            out.page.nextKey = key
            return nil
        }
    }
    table.out_set_flags = { out, flags in
        InterceptOut.update(out, "out_set_flags", into: \.pageMisuse) { out in
            out.page.flags = flags
            return nil
        }
    }
    table.out_fail = { out, code, message in
        InterceptOut.update(out, "out_fail") { out in
            out.failure = PluginStatus.failure(code, string(message), call: "out_fail")
            return nil
        }
    }

    table.keys_set = { out, slot, key in
        KeysOut.update(out, "keys_set") { out in
            guard slot <= PAGING_KEY_NEXT else { return "unknown slot \(slot)" }
            guard let key = copyKey(key) else { return keyRefusal(key) }
            out.keys[Int(slot)] = key
            return nil
        }
    }

    table.fetch_add_item = { host, id, item in
        PluginInstance.with(host, "fetch_add_item") { instance in
            instance.updateFetch(id, "fetch_add_item") { $0.builder.add(item, limits: instance.limits) }
        } ?? PAGING_ERR_INVALID_ARGUMENT
    }
    table.fetch_set_prev_key = { host, id, key in
        PluginInstance.with(host, "fetch_set_prev_key") { instance in
            instance.updateFetch(id, "fetch_set_prev_key") { fetch in
                guard let key = copyKey(key) else { return keyRefusal(key) }
                fetch.builder.prevKey = key
                return nil
            }
        } ?? PAGING_ERR_INVALID_ARGUMENT
    }
    table.fetch_set_next_key = { host, id, key in
        PluginInstance.with(host, "fetch_set_next_key") { instance in
            instance.updateFetch(id, "fetch_set_next_key") { fetch in
                guard let key = copyKey(key) else { return keyRefusal(key) }
                fetch.builder.nextKey = key
                return nil
            }
        } ?? PAGING_ERR_INVALID_ARGUMENT
    }
    table.fetch_set_flags = { host, id, flags in
        PluginInstance.with(host, "fetch_set_flags") { instance in
            instance.updateFetch(id, "fetch_set_flags") { fetch in
                fetch.builder.flags = flags
                return nil
            }
        } ?? PAGING_ERR_INVALID_ARGUMENT
    }
    table.fetch_complete = { host, id in
        PluginInstance.with(host, "fetch_complete") { instance in
            instance.updateFetch(id, "fetch_complete", ends: true) { fetch in
                fetch.result = .completed(fetch.builder)
                return nil
            }
        } ?? PAGING_ERR_INVALID_ARGUMENT
    }
    table.fetch_fail = { host, id, code, message in
        PluginInstance.with(host, "fetch_fail") { instance in
            let message = string(message)
            return instance.updateFetch(id, "fetch_fail", ends: true) { fetch in
                let (status, message) = PluginStatus.failure(code, message, call: "fetch_fail")
                fetch.result = .failed(status, message, retryAfter: fetch.retryAfter)
                return nil
            }
        } ?? PAGING_ERR_INVALID_ARGUMENT
    }
    return table
}()

// MARK: - Result builders handed to one call

/// A result builder a plugin reaches through a call handle (``CallHandle``) during one call.
/// The first misuse is kept and fails the call.
protocol CallResultBuilder {
    static var handleKind: CallHandle.Kind { get }
    var misuse: String? { get set }
}

extension CallResultBuilder {
    /// Runs `change` on the builder `out` resolves to; a problem it returns is the call's
    /// refusal, kept in `slot` (the first one) and answered PAGING_ERR_INVALID_ARGUMENT.
    static func update(_ out: OpaquePointer?, _ function: String, into slot: WritableKeyPath<Self, String?> = \.misuse,
                       _ change: (inout Self) -> String?) -> paging_status_t {
        let record = { (builder: inout Self, refusal: String) in
            if builder[keyPath: slot] == nil { builder[keyPath: slot] = refusal }
        }
        guard let pointer = CallHandle.resolve(out, handleKind, function, as: Self.self, failing: record) else { return PAGING_ERR_INVALID_ARGUMENT }
        if let problem = change(&pointer.pointee) {
            if pointer.pointee[keyPath: slot] == nil { pointer.pointee[keyPath: slot] = "\(function): \(problem)" }
            return PAGING_ERR_INVALID_ARGUMENT
        }
        return PAGING_OK
    }

    /// Runs `body` with the handle `token` (``CallHandle/token(for:)``, taken before the call so
    /// that the call captures no instance) to this builder, live on this thread until `body`
    /// returns. A use of the handle refused meanwhile (from another thread, or as a handle of
    /// another kind) is the call's misuse: what it would have set is missing (a key chain
    /// without its next key ended paging).
    mutating func withHandle<R>(_ token: UInt64, _ body: (OpaquePointer) -> R) -> R {
        let refusals = CallHandle.refusals
        let result = withUnsafeMutablePointer(to: &self) { CallHandle.with(Self.handleKind, token, $0, body) }
        if misuse == nil, let refused = CallHandle.misuse(of: token, Self.handleKind, since: refusals) { misuse = refused }
        return result
    }
}

/// The result of one `intercept()` call, on the caller's stack; the call's
/// `paging_intercept_out_t *` handle resolves to it for the duration of the call.
struct InterceptOut: CallResultBuilder, Sendable {
    static let handleKind = CallHandle.Kind.intercept

    /// Unretained: instances are never freed (``PluginInstance``), and a retain would cost the
    /// hot path.
    let instance: Unmanaged<PluginInstance>
    var key: PluginKey?
    var pageSize: Int?
    var params: [String: String] = [:]
    var page = PageBuilder()
    var failure: (PluginStatus, String)?
    /// The failure's retry hint (`paging.retry-hint/1`).
    var retryAfter: Duration?
    /// The id `defer` gave this call's answer (`paging.async-intercept/1`).
    var deferred: UInt64?
    /// The builder of a deferred intercept's answer (`resume`), which cannot be deferred again.
    var isAnswer = false
    var misuse: String?
    /// The first refused call building the page (an item that is not JSON, a key too long):
    /// it fails an answer with that page, not one that proceeds to the source (a store's copy
    /// found broken then loads it again; it failed the load).
    var pageMisuse: String?

    init(instance: PluginInstance) {
        self.instance = Unmanaged.passUnretained(instance)
    }


    var limits: PluginLimits { instance._withUnsafeGuaranteedRef { $0.limits } }

    /// Why an answer of `code` built on this is refused: a refused call, or a refused call
    /// building the page when the answer is that page (`observes`: the interceptor sees pages,
    /// and a PROCEED_OR_FALL_BACK's page is its fallback). Nil when it stands.
    func refusal(answering code: UInt32, observes: Bool) -> String? {
        if let misuse { return misuse }
        let answersWithThePage = code == PAGING_INTERCEPT_COMPLETE || code == PAGING_INTERCEPT_COMPLETE_THEN_REVALIDATE
            || (code == PAGING_INTERCEPT_PROCEED_OR_FALL_BACK && observes)
        return answersWithThePage ? pageMisuse : nil
    }

    /// Whether the plugin set a key, a page size or params for the request.
    var rewrites: Bool { key != nil || pageSize != nil || !params.isEmpty }

    /// `request` with the key, page size and params the plugin set (itself when none).
    func rewritten(_ request: PluginRequest) -> PluginRequest {
        guard rewrites else { return request }
        var next = request
        if let key { next.keyChain = PagingKeyChain(key: key) }
        if let pageSize { next.params.pageSize = pageSize }
        next.params.userInfo.merge(params) { $1 }
        return next
    }
}

/// The result of one `transform()` call (`paging.page-transform/1`): a new page, built from the
/// original's items (kept without a copy) and new ones.
struct TransformOut: CallResultBuilder {
    static let handleKind = CallHandle.Kind.transform

    let limits: PluginLimits
    let original: PluginPage
    var page = PageBuilder()
    var metadata: [String: String]
    var failure: (PluginStatus, String)?
    var misuse: String?
    /// The first refused call building the new page: it fails a REPLACE, not a KEEP (which
    /// drops what was set).
    var pageMisuse: String?

    init(limits: PluginLimits, original: PluginPage) {
        self.limits = limits
        self.original = original
        metadata = original.metadata
    }

    /// Appends the original page's item `index`.
    mutating func keep(_ index: Int) -> String? {
        guard index >= 0, index < original.values.count else {
            return "item index \(UInt(bitPattern: index)), the page has \(original.values.count) items"
        }
        return page.append(original.values[index], limits: limits)
    }

    /// The new page: its items, and the original's keys where not set.
    var replacement: PluginPage {
        var result = original
        result.values = page.items
        (result.prevKey, result.nextKey) = page.keys(otherwise: original.prevKey, original.nextKey)
        if page.isShortened { result.isShortened = true }
        result.metadata = metadata
        return result
    }
}

/// The result of one `refresh_key()` or `key_chain()` call, by slot.
struct KeysOut: CallResultBuilder {
    static let handleKind = CallHandle.Kind.keys

    var keys: [KeyOverride] = [.unset, .unset, .unset]
    var misuse: String?

    func key(_ slot: UInt32) -> PluginKey? {
        if case .key(let key) = keys[Int(slot)] { return key }
        return nil
    }
}
