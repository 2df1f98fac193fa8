import CPaging
import FoundationEssentials
import Glibc
import Synchronization

/// What a plugin says about itself (its descriptor).
public struct PluginInfo: Sendable {
    public var id: String
    public var name: String
    public var version: String
    public var description: String
    /// The plugin accepts overlapping calls; otherwise the host serializes them.
    public var isThreadSafe: Bool
    /// The host extensions the plugin cannot work without: a host that lacks one refuses it at
    /// load, naming the extension. `nil` (the default): those its protocols need, a
    /// ``TransformingPlugin`` `paging.page-transform/1` (without it, its transform was never
    /// called and pages passed through unchanged) and a ``DeferringInterceptorPlugin``
    /// `paging.async-intercept/1` (without it, every load failed). `[]` requires none: a
    /// transform the plugin can do without.
    public var requiredExtensions: [String]?

    public init(id: String, name: String, version: String, description: String, isThreadSafe: Bool = false,
                requiredExtensions: [String]? = nil) {
        self.id = id
        self.name = name
        self.version = version
        self.description = description
        self.isThreadSafe = isThreadSafe
        self.requiredExtensions = requiredExtensions
    }
}

/// A failure a plugin reports: a status class (which decides retries), a message, and how long
/// to wait before a retry can succeed (extension `paging.retry-hint/1`).
public struct PluginFailure: Error, Sendable, CustomStringConvertible {
    public var status: paging_status_t
    public var message: String
    /// The least wait before a retry (an API's `Retry-After`); `nil` when the failure does not say.
    public var retryAfter: Duration?

    public init(_ status: paging_status_t, _ message: String, retryAfter: Duration? = nil) {
        self.status = status
        self.message = message
        self.retryAfter = retryAfter
    }

    public static func invalidConfig(_ message: String) -> PluginFailure { PluginFailure(PAGING_ERR_INVALID_CONFIG, message) }
    public static func transient(_ message: String, retryAfter: Duration? = nil) -> PluginFailure {
        PluginFailure(PAGING_ERR_TRANSIENT, message, retryAfter: retryAfter)
    }
    public static func invalidRequest(_ message: String) -> PluginFailure { PluginFailure(PAGING_ERR_INVALID_REQUEST, message) }
    public static func `internal`(_ message: String) -> PluginFailure { PluginFailure(PAGING_ERR_INTERNAL, message) }
    public static func notFound(_ message: String) -> PluginFailure { PluginFailure(PAGING_ERR_NOT_FOUND, message) }
    public static func timeout(_ message: String, retryAfter: Duration? = nil) -> PluginFailure {
        PluginFailure(PAGING_ERR_TIMEOUT, message, retryAfter: retryAfter)
    }
    public static func cancelled(_ message: String) -> PluginFailure { PluginFailure(PAGING_ERR_CANCELLED, message) }
    public static func unsupported(_ message: String) -> PluginFailure { PluginFailure(PAGING_ERR_UNSUPPORTED, message) }

    public var description: String { message }
}

/// The request a plugin sees, copied out of the host's borrowed view.
public struct PagingPluginRequest: Sendable {
    public enum Kind: Sendable { case refresh, prepend, append }

    public var kind: Kind
    public var pageSize: Int
    /// Keys are bytes, by convention UTF-8 text.
    public var key: [UInt8]
    public var prevKey: [UInt8]?
    public var nextKey: [UInt8]?
    /// The request's user info.
    public var params: [String: String]

    /// The key as text.
    public var keyText: String { String(decoding: key, as: UTF8.self) }

    init(_ view: UnsafePointer<paging_request_t>) {
        let request = view.pointee
        switch request.kind {
        case PAGING_REQUEST_PREPEND: kind = .prepend
        case PAGING_REQUEST_APPEND: kind = .append
        default: kind = .refresh
        }
        pageSize = Int(request.page_size)
        key = bytes(request.key)
        prevKey = request.prev_key.map { bytes($0.pointee) }
        nextKey = request.next_key.map { bytes($0.pointee) }
        var params: [String: String] = [:]
        // Most requests carry no params: no dictionary work then.
        if request.param_count > 0, let list = request.params {
            for param in UnsafeBufferPointer(start: list, count: request.param_count) {
                params[String(decoding: bytes(param.name), as: UTF8.self)] = String(decoding: bytes(param.value), as: UTF8.self)
            }
        }
        self.params = params
    }
}

/// A page a plugin hands back (or sees in `handle`): items (one JSON value each), keys, ends.
public struct PageContent: Sendable {
    public var items: [[UInt8]]
    /// `nil`: the key chain applies (unless `isFirst`).
    public var prevKey: [UInt8]?
    /// `nil`: the key chain applies (unless `isLast`).
    public var nextKey: [UInt8]?
    /// There is no page before this one.
    public var isFirst: Bool
    /// There is no page after this one.
    public var isLast: Bool
    /// The page is short but not the last (`PAGING_PAGE_SHORTENED`): a transform (a filter)
    /// made it short, or the source's server cut it (a cap on the page size; not on an empty
    /// page). A plugin that keeps pages keeps this with each and answers with it, or a filtered
    /// page it answers with reads as the end of the data.
    public var isShortened = false
    /// The page is empty because a transform (a filter) dropped every item of a short page
    /// (`PAGING_PAGE_EMPTIED`): not the end of the data, but loaded again as a short last page
    /// is. Kept and answered with as ``isShortened`` is; ignored on a page with items.
    public var isEmptiedByTransform = false

    public init(items: [[UInt8]], prevKey: [UInt8]? = nil, nextKey: [UInt8]? = nil, isFirst: Bool = false, isLast: Bool = false,
                isShortened: Bool = false, isEmptiedByTransform: Bool = false) {
        self.items = items
        self.prevKey = prevKey
        self.nextKey = nextKey
        self.isFirst = isFirst
        self.isLast = isLast
        self.isShortened = isShortened
        self.isEmptiedByTransform = isEmptiedByTransform
    }

    /// A page of JSON texts with text keys.
    public init(jsonItems: [String], prevKey: String? = nil, nextKey: String? = nil, isFirst: Bool = false, isLast: Bool = false) {
        self.init(items: jsonItems.map { Array($0.utf8) }, prevKey: prevKey.map { Array($0.utf8) },
                  nextKey: nextKey.map { Array($0.utf8) }, isFirst: isFirst, isLast: isLast)
    }

    var flags: UInt32 {
        (isFirst ? PAGING_PAGE_PREV_END : 0) | (isLast ? PAGING_PAGE_NEXT_END : 0) | (isShortened ? PAGING_PAGE_SHORTENED : 0)
            | (isEmptiedByTransform ? PAGING_PAGE_EMPTIED : 0)
    }

    init(_ view: UnsafePointer<paging_page_t>) {
        let page = view.pointee
        items = page.items.map { UnsafeBufferPointer(start: $0, count: page.item_count).map(bytes) } ?? []
        prevKey = page.prev_key.map { bytes($0.pointee) }
        nextKey = page.next_key.map { bytes($0.pointee) }
        isFirst = page.flags & PAGING_PAGE_PREV_END != 0
        isLast = page.flags & PAGING_PAGE_NEXT_END != 0
        isShortened = page.flags & PAGING_PAGE_SHORTENED != 0
        isEmptiedByTransform = page.flags & PAGING_PAGE_EMPTIED != 0
    }
}

/// A page an interceptor's `handle` sees: the request it answers and its content.
public struct PagingPluginPage: Sendable {
    public var request: PagingPluginRequest
    public var content: PageContent
    /// The metadata the interceptors before this one attached (`paging.page-transform/1`), by
    /// name; empty from a host older than ABI 1.1.
    public var metadata: [String: String]

    init(_ view: UnsafePointer<paging_page_t>) {
        let page = view.pointee
        request = PagingPluginRequest(page.request)
        content = PageContent(view)
        metadata = [:]
        let end = MemoryLayout<paging_page_t>.offset(of: \.metadata_count)! + MemoryLayout<Int>.size
        if Int(page.struct_size) >= end, let entries = page.metadata {
            for entry in UnsafeBufferPointer(start: entries, count: page.metadata_count) {
                metadata[String(decoding: bytes(entry.name), as: UTF8.self)] = String(decoding: bytes(entry.value), as: UTF8.self)
            }
        }
    }
}

func bytes(_ view: paging_bytes_t) -> [UInt8] {
    guard let data = view.data, view.len > 0 else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: view.len))
}

/// The plugin's `config` object, readable during `init` only.
///
/// The typed reads refuse a value of the wrong type (`"ttl_seconds": "soon"`) with a
/// ``PluginFailure`` naming the key and what was expected, rather than falling back to the
/// default; ``rejectUnknownKeys(_:)`` refuses keys the plugin does not know.
public struct PluginConfig {
    let host: UnsafePointer<paging_host_t>
    let config: OpaquePointer?

    /// The whole object as JSON text.
    public var json: String { host.pointee.config_json?(config).map { String(cString: $0) } ?? "{}" }

    /// The top-level string `key`, or `nil` when absent.
    public func string(_ key: String) throws(PluginFailure) -> String? {
        switch try value(key) {
        case nil: return nil
        case .string(let text): return text
        case let other?: throw mismatch(key, "a string", other)
        }
    }

    /// The top-level integer `key`, or `fallback` when absent.
    public func int(_ key: String, default fallback: Int) throws(PluginFailure) -> Int {
        switch try value(key) {
        case nil: return fallback
        case .int(let number): return number
        // A whole number past Int64 (9223372036854775808) reaches the plugin as a number: it
        // was said to be no integer.
        case .double(let number) where number.magnitude >= 0x1p63:
            throw .invalidConfig("\(key): out of range; expected an integer from \(Int64.min) to \(Int64.max)")
        case let other?: throw mismatch(key, "an integer", other)
        }
    }

    /// The top-level integer `key`, which must be positive, or `fallback` when absent; `unit`
    /// names what it counts in the error ("seconds"). A number past Int64 is refused for what it
    /// counts, not as outside a range that starts below zero.
    public func positiveInt(_ key: String, default fallback: Int, unit: String) throws(PluginFailure) -> Int {
        if case .double(let number)? = try value(key), number.magnitude >= 0x1p63 {
            let bound = number > 0 ? " up to \(Int64.max)" : ""
            throw .invalidConfig("\(key): expected a positive number of \(unit)\(bound), got \(number)")
        }
        let number = try int(key, default: fallback)
        guard number > 0 else { throw .invalidConfig("\(key): expected a positive number of \(unit), got \(number)") }
        return number
    }

    /// The top-level boolean `key`, or `fallback` when absent.
    public func bool(_ key: String, default fallback: Bool) throws(PluginFailure) -> Bool {
        switch try value(key) {
        case nil: return fallback
        case .bool(let flag): return flag
        case let other?: throw mismatch(key, "true or false", other)
        }
    }

    /// The top-level number `key`, or `fallback` when absent.
    public func double(_ key: String, default fallback: Double) throws(PluginFailure) -> Double {
        switch try value(key) {
        case nil: return fallback
        case .int(let number): return Double(number)
        case .double(let number): return number
        case let other?: throw mismatch(key, "a number", other)
        }
    }

    /// Refuses a config with a key outside `known` (with none, any key: a plugin that takes no
    /// config).
    public func rejectUnknownKeys(_ known: Set<String>) throws(PluginFailure) {
        if let unknown = try values().keys.sorted().first(where: { !known.contains($0) }) {
            let expected = known.isEmpty ? "this plugin takes no config" : "expected one of \(known.sorted().joined(separator: ", "))"
            throw .invalidConfig("\(unknown): unknown key; \(expected)")
        }
    }

    /// Decodes the whole object.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try JSONDecoder().decode(type, from: Data(json.utf8))
    }

    private func values() throws(PluginFailure) -> [String: ConfigValue] {
        do {
            return try JSONDecoder().decode([String: ConfigValue].self, from: Data(json.utf8))
        } catch {
            throw .invalidConfig("the config is not a JSON object: \(error)")
        }
    }

    /// The host's reading of `key` where its table has `config_type` (every ABI 1.0 host): a C
    /// plugin's config_int and a Swift plugin's `int` then agree (10.0 and 1e3 are no integers
    /// for either); JSONDecoder's reading otherwise.
    private func value(_ key: String) throws(PluginFailure) -> ConfigValue? {
        let table = host.pointee
        guard let typeOffset = MemoryLayout<paging_host_t>.offset(of: \paging_host_t.config_type),
              Int(table.struct_size) >= typeOffset + MemoryLayout<UnsafeRawPointer>.size, let typeOf = table.config_type,
              let readInt = table.config_int, let readBool = table.config_bool, let readDouble = table.config_double,
              let readString = table.config_string else { return try values()[key] }
        switch typeOf(config, key) {
        case PAGING_CONFIG_ABSENT: return nil
        case PAGING_CONFIG_NULL: return .other("null")
        case PAGING_CONFIG_BOOL: return .bool(readBool(config, key, 0) != 0)
        case PAGING_CONFIG_INT: return .int(Int(readInt(config, key, 0)))
        case PAGING_CONFIG_DOUBLE: return .double(readDouble(config, key, 0))
        case PAGING_CONFIG_STRING: return readString(config, key).map { .string(String(cString: $0)) } ?? .other("a string holding U+0000")
        case PAGING_CONFIG_ARRAY: return .other("an array")
        default: return .other("an object")
        }
    }

    private func mismatch(_ key: String, _ expected: String, _ value: ConfigValue) -> PluginFailure {
        .invalidConfig("\(key): expected \(expected), got \(value.kind)")
    }
}

/// A top-level config value, typed strictly (JSON's `true` is not the number 1).
private enum ConfigValue: Decodable {
    case int(Int), double(Double), bool(Bool), string(String), other(String)

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let flag = try? container.decode(Bool.self) { self = .bool(flag) }
        else if let number = try? container.decode(Int.self) { self = .int(number) }
        else if let number = try? container.decode(Double.self) { self = .double(number) }
        else if let text = try? container.decode(String.self) { self = .string(text) }
        else if container.decodeNil() { self = .other("null") }
        else if (try? container.decode([ConfigValue].self)) != nil { self = .other("an array") }
        else { self = .other("an object") }
    }

    var kind: String {
        switch self {
        case .int: "an integer"
        case .double: "a number"
        case .bool: "a boolean"
        case .string: "a string"
        case .other(let kind): kind
        }
    }
}

/// The host, as a plugin instance sees it: logging, and completing fetches.
///
/// # Thread safety
/// Every method may be called from any thread. Once the host destroyed the instance, calls
/// are dropped (a completion then returns false): a plugin's late threads never reach it.
public struct PluginHost: @unchecked Sendable {
    let table: UnsafePointer<paging_host_t>
    /// The instance's: closed when the host destroys it, after which no call reaches the host.
    let lifetime: HostLifetime

    init(table: UnsafePointer<paging_host_t>) {
        self.table = table
        lifetime = HostLifetime()
    }

    /// Runs `call` (calls into the host) unless the instance was destroyed; nil then. A call
    /// under way on another thread when the host destroys the instance is waited for: the host
    /// table is valid only until destroy() returns, and a completion, a log line or a counter
    /// from a plugin's own thread may come at any moment.
    func calling<Result>(_ call: () -> Result) -> Result? {
        guard lifetime.enter() else { return nil }
        defer { lifetime.leave() }
        return call()
    }

    public enum LogLevel: UInt32, Sendable { case trace = 0, debug, info, warning, error }

    /// The host's ABI version.
    public var abiVersion: paging_version_t { table.pointee.abi_version }

    /// Logs a message at `level`, unless the host drops that level: then `message` is not
    /// even built.
    public func log(_ level: LogLevel, _ message: @autoclosure () -> String) {
        calling {
            guard logs(level) else { return }
            message().withMessageCString { table.pointee.log?(table, level.rawValue, $0) }
        }
    }

    /// Whether the host keeps lines at `level` (extension `paging.log-level/1`; every level
    /// when the host does not say).
    public func logs(_ level: LogLevel) -> Bool {
        guard let extensionTable = logLevel, let minLevel = extensionTable.pointee.min_level else { return true }
        return level.rawValue >= minLevel(table)
    }

    /// The host's `paging.log-level/1` (a lookup by id on each call: only when logging).
    private var logLevel: UnsafePointer<paging_ext_log_level_t>? { self.extension(PAGING_EXT_LOG_LEVEL) }

    /// Adds `delta` to the counter `name` the host reports (`paging.metrics/1`, `pager run
    /// --stats`). Per page, not per item: each call takes a lock.
    public func count(_ name: String, by delta: Int64 = 1) {
        calling {
            guard let metrics: UnsafePointer<paging_ext_metrics_host_t> = self.extension(PAGING_EXT_METRICS) else { return }
            _ = name.withCString { metrics.pointee.counter_add?(table, $0, delta) }
        }
    }

    /// Sets the gauge `name` the host reports (`paging.metrics/1`).
    public func gauge(_ name: String, _ value: Double) {
        calling {
            guard let metrics: UnsafePointer<paging_ext_metrics_host_t> = self.extension(PAGING_EXT_METRICS) else { return }
            _ = name.withCString { metrics.pointee.gauge_set?(table, $0, value) }
        }
    }

    /// Says that the source's data changed (`paging.invalidation/1`): a manager over it
    /// refreshes around its reader (``SourcePlugin/refreshKey(around:)``).
    public func invalidate() {
        calling {
            guard let invalidation: UnsafePointer<paging_ext_invalidation_host_t> = self.extension(PAGING_EXT_INVALIDATION) else { return }
            invalidation.pointee.invalidate?(table)
        }
    }

    /// The host's table of extension `id`, or `nil` when it does not offer it.
    func `extension`<Table>(_ id: String) -> UnsafePointer<Table>? {
        guard let lookup = table.pointee.get_extension else { return nil }
        return lookup(table, id).map { $0.assumingMemoryBound(to: Table.self) }
    }
}

/// The one completion of a source's fetch. Call ``succeed(_:)`` or ``fail(_:)`` exactly once,
/// from any thread; any later call, or one at the same time on another thread, is refused and
/// logged (two at once had the items of both in one page).
public struct FetchCompletion: Sendable {
    public let host: PluginHost
    public let id: UInt64
    /// Taken by the first ``succeed(_:)`` or ``fail(_:)``.
    private let taken = CompletionTaken()

    init(host: PluginHost, id: UInt64) {
        self.host = host
        self.id = id
    }

    /// Whether this call is the completion: the first. A later one is said as the host says a
    /// completion of a finished fetch (`pager check` counts those).
    private func take(_ function: String) -> Bool {
        guard taken.take() else {
            host.log(.error, "\(function) for unknown or finished fetch id \(id): it was completed already (PagingPluginKit); refused")
            return false
        }
        return true
    }

    @discardableResult
    public func succeed(_ page: PageContent) -> Bool {
        // The items end to end in one buffer, lent to the host at once.
        var bytes: [UInt8] = [], ends: [Int] = []
        bytes.reserveCapacity(page.items.reduce(0) { $0 + $1.count })
        ends.reserveCapacity(page.items.count)
        for item in page.items {
            bytes += item
            ends.append(bytes.count)
        }
        return bytes.withUnsafeBufferPointer { all in
            succeed(count: ends.count, item: { UnsafeBufferPointer(rebasing: all[($0 == 0 ? 0 : ends[$0 - 1]) ..< ends[$0]]) }, keys: page)
        }
    }

    /// Completes with `count` items whose bytes `item(i)` lends (the host copies each during
    /// the call: a source hands out items from its own buffer without copying them first), the
    /// keys and ends of `page` (its `items` are not used).
    @discardableResult
    public func succeed(count: Int, item: (Int) -> UnsafeBufferPointer<UInt8>, keys page: PageContent) -> Bool {
        guard take("succeed") else { return false }
        return host.calling {
            guard add(count: count, item: item) else { return false }
            return complete(prevKey: page.prevKey, nextKey: page.nextKey, flags: page.flags)
        } ?? false
    }

    /// Hands the host the items: in one call where it offers `paging.fetch-items/1`, else one
    /// call each.
    private func add(count: Int, item: (Int) -> UnsafeBufferPointer<UInt8>) -> Bool {
        let table = host.table
        func borrowed(_ index: Int) -> paging_bytes_t {
            let bytes = item(index)
            return paging_bytes_t(data: bytes.baseAddress, len: bytes.count)
        }
        guard let fetchItems: UnsafePointer<paging_ext_fetch_items_host_t> = host.extension(PAGING_EXT_FETCH_ITEMS),
              let addItems = fetchItems.pointee.add_items else {
            return (0..<count).allSatisfy { table.pointee.fetch_add_item?(table, id, borrowed($0)) == PAGING_OK }
        }
        return withUnsafeTemporaryAllocation(of: paging_bytes_t.self, capacity: count) { items in
            for index in 0..<count { items[index] = borrowed(index) }
            return addItems(table, id, items.baseAddress, count) == PAGING_OK
        }
    }

    private func complete(prevKey: [UInt8]?, nextKey: [UInt8]?, flags: UInt32) -> Bool {
        let table = host.table
        if let prev = prevKey { _ = withKey(prev) { table.pointee.fetch_set_prev_key?(table, id, $0) } }
        if let next = nextKey { _ = withKey(next) { table.pointee.fetch_set_next_key?(table, id, $0) } }
        if flags != 0 { _ = table.pointee.fetch_set_flags?(table, id, flags) }
        return table.pointee.fetch_complete?(table, id) == PAGING_OK
    }

    @discardableResult
    public func fail(_ failure: PluginFailure) -> Bool {
        guard take("fail") else { return false }
        return host.calling {
            let table = host.table
            if let retryAfter = failure.retryAfter, let hint: UnsafePointer<paging_ext_retry_hint_host_t> = host.extension(PAGING_EXT_RETRY_HINT) {
                _ = hint.pointee.fetch_retry_after?(table, id, milliseconds(retryAfter))
            }
            return failure.message.withMessageCString { table.pointee.fetch_fail?(table, id, failure.status, $0) } == PAGING_OK
        } ?? false
    }
}

/// Whether a fetch's completion was taken (``FetchCompletion``).
final class CompletionTaken: Sendable {
    private let taken = Atomic<Bool>(false)

    /// True the first time only.
    func take() -> Bool { !taken.exchange(true, ordering: .acquiringAndReleasing) }
}

/// Whether an instance may still call its host: open from create to destroy. The calls under
/// way are counted by thread, so that destroy() waits for those on other threads but not for
/// one on its own (a host that destroys the instance from inside a call it answers). It waits
/// asleep: a host call that takes long (a log line to a full pipe) costs destroy() time, not a
/// processor.
final class HostLifetime: @unchecked Sendable {
    // Guarded by `mutex`.
    private var closed = false
    private var calling: [pthread_t] = []
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)

    init() {
        pthread_mutex_init(mutex, nil)
        pthread_cond_init(changed, nil)
    }

    deinit {
        pthread_cond_destroy(changed)
        pthread_mutex_destroy(mutex)
        changed.deallocate()
        mutex.deallocate()
    }

    private func locked<Result>(_ body: () -> Result) -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return body()
    }

    /// Marks a call starting on this thread; false once closed.
    func enter() -> Bool {
        let me = pthread_self()
        return locked {
            guard !closed else { return false }
            calling.append(me)
            return true
        }
    }

    func leave() {
        let me = pthread_self()
        locked {
            if let index = calling.lastIndex(of: me) { calling.remove(at: index) }
            pthread_cond_broadcast(changed)
        }
    }

    /// No call starts from now on; returns once the calls under way on other threads ended.
    func close() {
        let me = pthread_self()
        locked {
            closed = true
            while calling.contains(where: { $0 != me }) { pthread_cond_wait(changed, mutex) }
        }
    }
}

/// A duration in whole milliseconds, rounded up (a hint is a least wait), at least 0 and at
/// most `UInt64.max` (a server's `Retry-After` may say anything).
func milliseconds(_ duration: Duration) -> UInt64 {
    let (seconds, attoseconds) = duration.components
    guard seconds >= 0 else { return 0 }
    let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000)
    let (total, carry) = whole.addingReportingOverflow(UInt64((attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000))
    return overflow || carry ? .max : total
}

extension String {
    /// The string as a message in C text, where a NUL would end it: each is written `\0`.
    func withMessageCString<R>(_ body: (UnsafePointer<CChar>) -> R) -> R {
        guard utf8.contains(0) else { return withCString(body) }
        return split(separator: "\0", omittingEmptySubsequences: false).joined(separator: "\\0").withCString(body)
    }
}

func withKey<R>(_ key: [UInt8], _ body: (UnsafePointer<paging_bytes_t>) -> R) -> R {
    key.withUnsafeBufferPointer { buffer in
        var view = paging_bytes_t(data: buffer.baseAddress, len: buffer.count)
        return withUnsafePointer(to: &view, body)
    }
}

/// What an interceptor decides about a request.
public enum InterceptDecision: Sendable {
    /// Go on, optionally rewriting the key, page size (1 or more, else the load fails) or params;
    /// with `observe`, `handle` sees the page.
    case proceed(observe: Bool, key: [UInt8]? = nil, pageSize: Int? = nil, params: [String: String] = [:])
    /// Answer with this page.
    case complete(PageContent)
    /// Answer with this (stale) page at once; the host then loads the request in the background
    /// and calls `handle` with the fresh page (stale-while-revalidate).
    case completeThenRevalidate(PageContent)
    /// Go on and observe the page, as `.proceed(observe: true)`; should the load fail, answer
    /// with this page instead (the host logs a warning naming the plugin). Network-first.
    case proceedOrFallBack(PageContent)
    /// Fail the load.
    case fail(PluginFailure)
}

/// A plugin written in Swift: the descriptor and creation. Adopt ``InterceptorPlugin`` or
/// ``SourcePlugin``, then export the library's types with ``PluginExport/entry(_:)``.
public protocol SwiftPlugin: AnyObject, Sendable {
    static var info: PluginInfo { get }
    /// Creates an instance; throwing refuses the config (the message reaches the user).
    init(host: PluginHost, config: PluginConfig) throws(PluginFailure)
    /// The host is destroying the instance: finish, or give up, what its own threads are
    /// doing with the host. Once this returns, their completions and log lines are dropped;
    /// the instance itself may live on until their last reference goes. Default: nothing.
    func willDestroy()
}

extension SwiftPlugin {
    public func willDestroy() {}
}

/// A plugin that can say whether it can serve loads now, without loading a page (extension
/// `paging.health/1`; `pager validate` asks): its file is readable, its database writable.
public protocol HealthCheckingPlugin: SwiftPlugin {
    /// The host this instance was created with (its log names the plugin).
    var host: PluginHost { get }
    /// `nil` when healthy; otherwise the failure (its message is logged).
    func checkHealth() -> PluginFailure?
}

/// An interceptor written in Swift. Calls are serialized unless ``PluginInfo/isThreadSafe``.
public protocol InterceptorPlugin: SwiftPlugin {
    func intercept(_ request: PagingPluginRequest) -> InterceptDecision
    /// Sees the page of a request this plugin proceeded with `observe: true`. Default: nothing.
    func handle(_ page: PagingPluginPage)
}

extension InterceptorPlugin {
    public func handle(_ page: PagingPluginPage) {}
}

/// What a transform does with a page (``TransformingPlugin``).
public enum PageTransform: Sendable {
    /// The page goes on unchanged.
    case keep
    /// The page goes on with these items and keys (the content's keys and ends replace the
    /// page's), and metadata added to the page's.
    case replace(PageContent, metadata: [String: String] = [:])
    /// The load fails.
    case fail(PluginFailure)
}

/// An interceptor that changes the pages it observes on their way back (extension
/// `paging.page-transform/1`): a filter, a projection, an enrichment. `transform` is called
/// instead of `handle` for the requests it proceeded with `observe: true`.
public protocol TransformingPlugin: InterceptorPlugin {
    func transform(_ page: PagingPluginPage) -> PageTransform
}

/// An interceptor that hears of the loads it let proceed that failed (extension
/// `paging.load-outcome/1`): a store marks its page stale, a circuit breaker opens.
public protocol FailureObservingPlugin: InterceptorPlugin {
    /// `request` as it reached the step that failed; `failure` its class and message.
    func loadFailed(_ request: PagingPluginRequest, failure: PluginFailure)
}

/// The answer of a deferred intercept (``DeferringInterceptorPlugin``): give it exactly once,
/// from any thread.
public struct InterceptReply: Sendable {
    /// Weak: a plugin that keeps its replies must not keep itself alive through them.
    weak var box: InterceptorBox?
    /// The id the host gave this intercept (``DeferringInterceptorPlugin/cancel(intercept:)`` names it).
    public let id: UInt64

    /// Answers the intercept; `false` when the host no longer waits (the load was cancelled or
    /// timed out) or the reply was given before.
    @discardableResult
    public func answer(_ decision: InterceptDecision) -> Bool {
        box?.resume(id, with: decision) ?? false
    }
}

/// An interceptor that answers later, without holding a thread while it waits (extension
/// `paging.async-intercept/1`): a rate limiter, a store reading on its own thread. Its
/// synchronous `intercept(_:)` is not called.
public protocol DeferringInterceptorPlugin: InterceptorPlugin {
    /// Starts deciding; answers through `reply` exactly once, from any thread (within the call
    /// is fine).
    func intercept(_ request: PagingPluginRequest, reply: InterceptReply)
    /// The host stopped waiting for intercept `id` (cancelled, timed out). Default: nothing.
    func cancel(intercept id: UInt64)
}

extension DeferringInterceptorPlugin {
    public func intercept(_ request: PagingPluginRequest) -> InterceptDecision {
        .fail(.internal("a deferring interceptor is asked through intercept(_:reply:)"))
    }

    public func cancel(intercept id: UInt64) {}
}

/// The item a reader is at, for ``SourcePlugin/refreshKey(around:)``.
public struct PluginAnchor: Sendable {
    /// The key of the loaded page that holds the item, and the item's index in it.
    public var pageKey: [UInt8]
    public var indexInPage: Int
    public var item: [UInt8]
    public var pageSize: Int
}

/// A source written in Swift.
public protocol SourcePlugin: SwiftPlugin {
    /// The key a refresh starts from.
    var refreshKey: [UInt8] { get }
    /// The neighbours of `key`, or `nil` when pages carry their keys (the default).
    func keyChain(for key: [UInt8]) -> (prev: [UInt8]?, next: [UInt8]?)?
    /// The neighbours of `key` for pages of `pageSize` items (offset keys). Default:
    /// ``keyChain(for:)``.
    func keyChain(for key: [UInt8], pageSize: Int) -> (prev: [UInt8]?, next: [UInt8]?)?
    /// After ``PluginHost/invalidate()``: the key of the page to load so that the reader's item
    /// stays in view, or `nil` (the default) for the refresh key.
    func refreshKey(around anchor: PluginAnchor) -> [UInt8]?
    /// Starts fetching; completes through `completion` exactly once, from any thread.
    func fetch(_ request: PagingPluginRequest, completion: FetchCompletion)
    /// Asks an in-flight fetch to stop; it should still complete (fail with CANCELLED). Default: nothing.
    func cancel(fetch id: UInt64)
}

extension SourcePlugin {
    public func keyChain(for key: [UInt8]) -> (prev: [UInt8]?, next: [UInt8]?)? { nil }
    public func keyChain(for key: [UInt8], pageSize: Int) -> (prev: [UInt8]?, next: [UInt8]?)? { keyChain(for: key) }
    public func refreshKey(around anchor: PluginAnchor) -> [UInt8]? { nil }
    public func cancel(fetch id: UInt64) {}
}
