import CPaging

/// The extensions this host offers plugins (`host->get_extension`, extensions.h), by id.
package enum HostExtensions {
    /// `paging.log-level/1`: the lowest level the instance's log sink keeps.
    private nonisolated(unsafe) static let logLevel: UnsafeMutablePointer<paging_ext_log_level_t> = {
        let table = UnsafeMutablePointer<paging_ext_log_level_t>.allocate(capacity: 1)
        table.initialize(to: paging_ext_log_level_t(min_level: { host in
            PluginInstance.with(host, "min_level") { $0.limits.logLevel.rawValue } ?? PAGING_LOG_TRACE
        }))
        return table
    }()

    /// `paging.page-transform/1`: the builders of a transformed page.
    private nonisolated(unsafe) static let pageTransform = table(paging_ext_page_transform_host_t(
        keep_item: { out, index in
            TransformOut.update(out, "keep_item", into: \.pageMisuse) { $0.keep(index) }
        },
        add_item: { out, item in
            TransformOut.update(out, "add_item", into: \.pageMisuse) { out in out.page.add(item, limits: out.limits) }
        },
        set_prev_key: { out, key in
            TransformOut.update(out, "set_prev_key", into: \.pageMisuse) { out in
                guard let key = copyKey(key) else { return keyRefusal(key) }
                out.page.prevKey = key
                return nil
            }
        },
        set_next_key: { out, key in
            TransformOut.update(out, "set_next_key", into: \.pageMisuse) { out in
                guard let key = copyKey(key) else { return keyRefusal(key) }
                out.page.nextKey = key
                return nil
            }
        },
        set_flags: { out, flags in
            TransformOut.update(out, "set_flags", into: \.pageMisuse) { out in
                out.page.flags = flags
                return nil
            }
        },
        set_metadata: { out, name, value in
            TransformOut.update(out, "set_metadata", into: \.pageMisuse) { out in
                settingNamedText(name, value, "metadata entry", in: &out.metadata)
            }
        },
        fail: { out, code, message in
            TransformOut.update(out, "fail") { out in
                out.failure = PluginStatus.failure(code, string(message), call: "fail")
                return nil
            }
        }))

    /// `paging.async-intercept/1`: deferring an intercept's answer, and giving it later.
    private nonisolated(unsafe) static let asyncIntercept = table(paging_ext_async_intercept_host_t(
        defer: { out in
            var id: UInt64 = 0
            _ = InterceptOut.update(out, "defer") { out in
                if out.isAnswer { return "within the answer of a deferred intercept, which cannot be deferred again" }
                id = out.deferred ?? out.instance._withUnsafeGuaranteedRef { $0.deferIntercept() }
                out.deferred = id
                return nil
            }
            return id
        },
        resume: { host, id, answer, context in
            PluginInstance.with(host, "resume") { $0.resumeIntercept(id, answer, context) } ?? PAGING_ERR_INVALID_ARGUMENT
        }))

    /// `paging.retry-hint/1`: how long a failure asks to be waited for.
    private nonisolated(unsafe) static let retryHint = table(paging_ext_retry_hint_host_t(
        out_retry_after: { out, milliseconds in
            InterceptOut.update(out, "out_retry_after") { out in
                out.retryAfter = .milliseconds(Int64(clamping: milliseconds))
                return nil
            }
        },
        fetch_retry_after: { host, id, milliseconds in
            PluginInstance.with(host, "fetch_retry_after") { instance in
                instance.updateFetch(id, "fetch_retry_after") { fetch in
                    fetch.retryAfter = .milliseconds(Int64(clamping: milliseconds))
                    return nil
                }
            } ?? PAGING_ERR_INVALID_ARGUMENT
        }))

    /// `paging.metrics/1`: counters and gauges a plugin publishes.
    private nonisolated(unsafe) static let metrics = table(paging_ext_metrics_host_t(
        counter_add: { host, name, delta in
            PluginInstance.with(host, "counter_add") { $0.publish("counter_add", name, counter: delta) } ?? PAGING_ERR_INVALID_ARGUMENT
        },
        gauge_set: { host, name, value in
            PluginInstance.with(host, "gauge_set") { $0.publish("gauge_set", name, gauge: value) } ?? PAGING_ERR_INVALID_ARGUMENT
        }))

    /// `paging.invalidation/1`: a source says its data changed.
    private nonisolated(unsafe) static let invalidation = table(paging_ext_invalidation_host_t(
        invalidate: { host in
            PluginInstance.with(host, "invalidate") { instance in
                guard !instance.isAfterDestroy("invalidate") else { return }
                instance.invalidation.invalidate()
            }
        }))

    /// `paging.fetch-items/1`: a page's items in one call, the fetch looked up once.
    private nonisolated(unsafe) static let fetchItems = table(paging_ext_fetch_items_host_t(
        add_items: { host, id, items, count in
            PluginInstance.with(host, "add_items") { instance in
                instance.updateFetch(id, "add_items") { fetch in
                    guard count != 0 else { return nil }
                    guard let items, count > 0 else { return "\(items == nil ? "NULL items" : "items") with a count of \(UInt(bitPattern: count))" }
                    for item in UnsafeBufferPointer(start: items, count: count) {
                        if let problem = fetch.builder.add(item, limits: instance.limits) { return problem }
                    }
                    return nil
                }
            } ?? PAGING_ERR_INVALID_ARGUMENT
        }))

    /// The ids offered, and their tables.
    private nonisolated(unsafe) static let offered: [String: UnsafeRawPointer] = [
        PAGING_EXT_LOG_LEVEL: UnsafeRawPointer(logLevel),
        PAGING_EXT_PAGE_TRANSFORM: pageTransform,
        PAGING_EXT_ASYNC_INTERCEPT: asyncIntercept,
        PAGING_EXT_RETRY_HINT: retryHint,
        PAGING_EXT_METRICS: metrics,
        PAGING_EXT_INVALIDATION: invalidation,
        PAGING_EXT_FETCH_ITEMS: fetchItems,
    ]

    /// A table that lives as long as the process.
    private static func table<Table>(_ value: Table) -> UnsafeRawPointer {
        let table = UnsafeMutablePointer<Table>.allocate(capacity: 1)
        table.initialize(to: value)
        return UnsafeRawPointer(table)
    }

    /// The ids offered, sorted.
    package static var offeredIDs: [String] { offered.keys.sorted() }

    package static func offers(_ id: String, withholding withheld: Set<String> = []) -> Bool {
        offered[id] != nil && !withheld.contains(id)
    }

    static func table(for id: UnsafePointer<CChar>, withholding withheld: Set<String>) -> UnsafeRawPointer? {
        let id = String(cString: id)
        return withheld.contains(id) ? nil : offered[id]
    }
}

/// The extensions a plugin instance offers the host (`get_extension` of its table).
struct InstanceExtensions: @unchecked Sendable {
    /// `paging.health/1`.
    var health: UnsafePointer<paging_ext_health_t>?
    /// `paging.page-transform/1`.
    var pageTransform: UnsafePointer<paging_ext_page_transform_t>?
    /// `paging.async-intercept/1`.
    var asyncIntercept: UnsafePointer<paging_ext_async_intercept_t>?
    /// `paging.load-outcome/1`.
    var loadOutcome: UnsafePointer<paging_ext_load_outcome_t>?
    /// `paging.sized-key-chain/1`.
    var sizedKeyChain: UnsafePointer<paging_ext_sized_key_chain_t>?
    /// `paging.invalidation/1`.
    var invalidation: UnsafePointer<paging_ext_invalidation_t>?
    /// The extensions the instance answered with a table whose function is NULL: not offered.
    private(set) var withoutFunction: [String] = []

    static let none = InstanceExtensions(nil)

    /// The ids of the extensions offered, in the order of extensions.h.
    var offered: [String] {
        [(PAGING_EXT_HEALTH, health != nil), (PAGING_EXT_PAGE_TRANSFORM, pageTransform != nil),
         (PAGING_EXT_ASYNC_INTERCEPT, asyncIntercept != nil), (PAGING_EXT_LOAD_OUTCOME, loadOutcome != nil),
         (PAGING_EXT_SIZED_KEY_CHAIN, sizedKeyChain != nil), (PAGING_EXT_INVALIDATION, invalidation != nil)]
            .filter(\.1).map(\.0)
    }

    /// Asks the instance for every extension the host uses. `lookup` is the instance's
    /// `get_extension`, or `nil` when its table has none (a draft library, or NULL).
    init(_ lookup: ((UnsafePointer<CChar>) -> UnsafeRawPointer?)?) {
        guard let lookup else { return }
        // Each table holds one function: one that is NULL offers nothing.
        var withoutFunction: [String] = []
        func table<Table, Function>(_ id: String, _ type: Table.Type, function: (Table) -> Function?) -> UnsafePointer<Table>? {
            guard let table = lookup(id).map({ $0.assumingMemoryBound(to: Table.self) }) else { return nil }
            guard function(table.pointee) != nil else {
                withoutFunction.append(id)
                return nil
            }
            return table
        }
        health = table(PAGING_EXT_HEALTH, paging_ext_health_t.self) { $0.check }
        pageTransform = table(PAGING_EXT_PAGE_TRANSFORM, paging_ext_page_transform_t.self) { $0.transform }
        asyncIntercept = table(PAGING_EXT_ASYNC_INTERCEPT, paging_ext_async_intercept_t.self) { $0.cancel }
        loadOutcome = table(PAGING_EXT_LOAD_OUTCOME, paging_ext_load_outcome_t.self) { $0.failed }
        sizedKeyChain = table(PAGING_EXT_SIZED_KEY_CHAIN, paging_ext_sized_key_chain_t.self) { $0.key_chain }
        invalidation = table(PAGING_EXT_INVALIDATION, paging_ext_invalidation_t.self) { $0.refresh_key_at }
        self.withoutFunction = withoutFunction
    }
}

/// What an instance says about its health (`paging.health/1`).
public enum PluginHealth: Sendable, Equatable {
    /// The instance does not offer the check.
    case notOffered
    case healthy
    case unhealthy(PluginStatus)
}

extension PluginInstance {
    /// A plugin's `counter_add` or `gauge_set`; a refusal is logged (once when over the limit).
    func publish(_ function: String, _ name: UnsafePointer<CChar>?, counter delta: Int64? = nil, gauge value: Double? = nil) -> paging_status_t {
        guard !isAfterDestroy(function) else { return PAGING_ERR_INVALID_ARGUMENT }
        guard let name, let text = String(validatingCString: name) else {
            log(.error, "\(function): a NULL name or one that is not UTF-8; refused")
            return PAGING_ERR_INVALID_ARGUMENT
        }
        guard let problem = stats.publish(text, counter: delta, gauge: value) else { return PAGING_OK }
        if !problem.isEmpty { log(.error, "\(function): \(problem)") }
        return PAGING_ERR_INVALID_ARGUMENT
    }

    /// Runs the instance's health check, serialized with its other calls.
    func health<Table>(_ extensions: InstanceExtensions, _ plugin: UnsafeMutablePointer<Table>, _ calls: SerializedCalls) -> PluginHealth {
        guard let check = extensions.health?.pointee.check else { return .notOffered }
        guard let status = calls.run({ check(UnsafeMutableRawPointer(plugin)) }) else { return .unhealthy(.cancelled) }
        return status == PAGING_OK ? .healthy : .unhealthy(PluginStatus(rawValue: status))
    }
}
