import CPaging
import FoundationEssentials
import Glibc
import Synchronization

/// Builds a library's `paging_plugin_entry` from Swift plugin types. A Swift plugin library is
/// its types plus one export line:
///
/// ```swift
/// @c(paging_plugin_entry)
/// public func pagingPluginEntry() -> UnsafeRawPointer { PluginExport.entry(LoggingPlugin.self) }
/// ```
///
/// The first call builds the entry and the descriptors; later calls return the same pointer.
public enum PluginExport {
    private static let built = Mutex<UnsafeRawPointer?>(nil)

    public static func entry(_ types: any SwiftPlugin.Type...) -> UnsafeRawPointer {
        built.withLock { built in
            if let built { return built }
            registry = Registry(types: types)
            let entry = UnsafeMutablePointer<paging_plugin_entry_t>.allocate(capacity: 1)
            entry.initialize(to: paging_plugin_entry_t(
                abi_version: abiVersion, struct_size: UInt32(MemoryLayout<paging_plugin_entry_t>.size),
                plugin_count: { UInt32(PluginExport.registry.types.count) },
                descriptor: { index in
                    let descriptors = PluginExport.registry.descriptors
                    return index < descriptors.count ? UnsafePointer(descriptors[Int(index)]) : nil
                },
                create_source: { id, host, config in PluginExport.createSource(id, host, config) },
                create_interceptor: { id, host, config in PluginExport.createInterceptor(id, host, config) },
                init: nil, deinit: nil))
            built = UnsafeRawPointer(entry)
            return built!
        }
    }

    private static let abiVersion = paging_version_t(
        major: PAGING_ABI_VERSION_MAJOR, minor: PAGING_ABI_VERSION_MINOR, patch: PAGING_ABI_VERSION_PATCH)

    /// The library's plugin types and their C descriptors; set once, by the first `entry` call,
    /// before the host can reach anything that reads it.
    nonisolated(unsafe) static var registry = Registry(types: [])

    struct Registry {
        let types: [any SwiftPlugin.Type]
        let descriptors: [UnsafeMutablePointer<paging_plugin_descriptor_t>]

        init(types: [any SwiftPlugin.Type]) {
            self.types = types
            descriptors = types.map { type in
                let info = type.info
                let descriptor = UnsafeMutablePointer<paging_plugin_descriptor_t>.allocate(capacity: 1)
                descriptor.initialize(to: paging_plugin_descriptor_t(
                    abi_version: PluginExport.abiVersion, struct_size: UInt32(MemoryLayout<paging_plugin_descriptor_t>.size),
                    id: UnsafePointer(strdup(info.id)), name: UnsafePointer(strdup(info.name)),
                    version: UnsafePointer(strdup(info.version)), description: UnsafePointer(strdup(info.description)),
                    kind: type is any SourcePlugin.Type ? PAGING_PLUGIN_SOURCE : PAGING_PLUGIN_INTERCEPTOR,
                    flags: info.isThreadSafe ? PAGING_PLUGIN_THREAD_SAFE : 0,
                    required_extensions: Self.cList(info.requiredExtensions ?? Self.requiredExtensions(of: type))))
                return descriptor
            }
        }

        /// The extensions `type`'s protocols cannot work without.
        static func requiredExtensions(of type: any SwiftPlugin.Type) -> [String] {
            (type is any TransformingPlugin.Type ? [PAGING_EXT_PAGE_TRANSFORM] : [])
                + (type is any DeferringInterceptorPlugin.Type ? [PAGING_EXT_ASYNC_INTERCEPT] : [])
        }

        /// `strings` as a NULL-terminated array of C strings that live as long as the process
        /// (as the descriptor's), or NULL when there are none.
        static func cList(_ strings: [String]) -> UnsafePointer<UnsafePointer<CChar>?>? {
            guard !strings.isEmpty else { return nil }
            let list = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: strings.count + 1)
            list.initialize(from: strings.map { UnsafePointer(strdup($0)) } + [nil], count: strings.count + 1)
            return UnsafePointer(list)
        }

        func type(_ id: UnsafePointer<CChar>?) -> (any SwiftPlugin.Type)? {
            guard let id else { return nil }
            let name = String(cString: id)
            return types.first { $0.info.id == name }
        }
    }

    private static func make<Plugin>(
        _ type: (any SwiftPlugin.Type)?, _ id: UnsafePointer<CChar>?,
        _ host: PluginHost, _ config: OpaquePointer?
    ) -> Plugin? {
        let table = host.table
        guard let type else {
            let name = id.map { String(cString: $0) } ?? "(null)"
            table.pointee.config_fail?(config, PAGING_ERR_NOT_FOUND, "this library has no plugin '\(name)' of that kind")
            return nil
        }
        do {
            return try type.init(host: host, config: PluginConfig(host: table, config: config)) as? Plugin
        } catch {
            error.message.withMessageCString { table.pointee.config_fail?(config, error.status, $0) }
            return nil
        }
    }

    static func createInterceptor(
        _ id: UnsafePointer<CChar>?, _ host: UnsafePointer<paging_host_t>?, _ config: OpaquePointer?
    ) -> UnsafeMutablePointer<paging_interceptor_t>? {
        let type = registry.type(id).flatMap { $0 is any InterceptorPlugin.Type ? $0 : nil }
        guard let host else { return nil }
        let pluginHost = PluginHost(table: host)
        guard let plugin: any InterceptorPlugin = make(type, id, pluginHost, config) else { return nil }
        let table = UnsafeMutablePointer<paging_interceptor_t>.allocate(capacity: 1)
        table.initialize(to: paging_interceptor_t(
            plugin_data: Unmanaged.passRetained(InterceptorBox(plugin, host: pluginHost)).toOpaque(),
            intercept: { table, request, out in
                guard let table, let request else { return PAGING_INTERCEPT_FAIL }
                return InterceptorBox.from(table).intercept(request, out)
            },
            handle: { table, page in
                guard let table, let page else { return }
                let box = InterceptorBox.from(table)
                box.plugin.handle(PagingPluginPage(page))
            },
            destroy: { table in
                guard let table else { return }
                // The plugin's own threads may still be calling the host: no call after this returns.
                let box = InterceptorBox.from(table)
                box.plugin.willDestroy()
                box.lifetime.close()
                Unmanaged<InterceptorBox>.fromOpaque(table.pointee.plugin_data).release()
                table.deinitialize(count: 1)
                table.deallocate()
            },
            struct_size: UInt32(MemoryLayout<paging_interceptor_t>.size), reserved: 0,
            get_extension: { table, id in
                guard let table, let id else { return nil }
                return InterceptorBox.from(table).extensionTable(String(cString: id))
            }))
        return table
    }

    static func createSource(
        _ id: UnsafePointer<CChar>?, _ host: UnsafePointer<paging_host_t>?, _ config: OpaquePointer?
    ) -> UnsafeMutablePointer<paging_source_t>? {
        let type = registry.type(id).flatMap { $0 is any SourcePlugin.Type ? $0 : nil }
        guard let host else { return nil }
        let pluginHost = PluginHost(table: host)
        guard let plugin: any SourcePlugin = make(type, id, pluginHost, config) else { return nil }
        let table = UnsafeMutablePointer<paging_source_t>.allocate(capacity: 1)
        table.initialize(to: paging_source_t(
            plugin_data: Unmanaged.passRetained(SourceBox(plugin, host: pluginHost)).toOpaque(),
            refresh_key: { table, out in
                guard let table else { return PAGING_ERR_INVALID_ARGUMENT }
                let box = SourceBox.from(table)
                return withKey(box.plugin.refreshKey) { box.host.table.pointee.keys_set?(out, PAGING_KEY_CURRENT, $0) ?? PAGING_ERR_INTERNAL }
            },
            key_chain: { table, key, out in
                guard let table else { return PAGING_ERR_INVALID_ARGUMENT }
                let box = SourceBox.from(table)
                return box.setKeys(box.plugin.keyChain(for: bytes(key)), out)
            },
            fetch: { table, request, id in
                guard let table, let request else { return PAGING_ERR_INVALID_ARGUMENT }
                let box = SourceBox.from(table)
                box.plugin.fetch(PagingPluginRequest(request), completion: FetchCompletion(host: box.host, id: id))
                return PAGING_OK
            },
            cancel: { table, id in
                guard let table else { return }
                SourceBox.from(table).plugin.cancel(fetch: id)
            },
            destroy: { table in
                guard let table else { return }
                // The fetches the plugin's threads complete late (and its log lines): none after this returns.
                let box = SourceBox.from(table)
                box.plugin.willDestroy()
                box.host.lifetime.close()
                Unmanaged<SourceBox>.fromOpaque(table.pointee.plugin_data).release()
                table.deinitialize(count: 1)
                table.deallocate()
            },
            struct_size: UInt32(MemoryLayout<paging_source_t>.size), reserved: 0,
            get_extension: { table, id in
                guard let table, let id else { return nil }
                switch String(cString: id) {
                case PAGING_EXT_SIZED_KEY_CHAIN: return sizedKeyChainTable
                case PAGING_EXT_INVALIDATION: return invalidationTable
                case let id: return healthExtension(id, SourceBox.from(table).plugin)
                }
            }))
        return table
    }
}

/// `paging.health/1` for a plugin that adopts ``HealthCheckingPlugin``: the table's `check`
/// receives the instance table, whose `plugin_data` leads to the plugin.
private func healthExtension(_ id: String, _ plugin: any SwiftPlugin) -> UnsafeRawPointer? {
    guard plugin is any HealthCheckingPlugin, id == PAGING_EXT_HEALTH else { return nil }
    return UnsafeRawPointer(healthTable)
}

/// A table that lives as long as the process.
private func table<Table>(_ value: Table) -> UnsafeRawPointer {
    let table = UnsafeMutablePointer<Table>.allocate(capacity: 1)
    table.initialize(to: value)
    return UnsafeRawPointer(table)
}

/// `paging.page-transform/1` of a ``TransformingPlugin``.
private nonisolated(unsafe) let transformTable = table(paging_ext_page_transform_t(transform: { instance, page, out in
    guard let instance, let page else { return PAGING_TRANSFORM_FAIL }
    let box = InterceptorBox.from(instance.assumingMemoryBound(to: paging_interceptor_t.self))
    return box.transform(page, out)
}))

/// `paging.async-intercept/1` of a ``DeferringInterceptorPlugin``: its cancel.
private nonisolated(unsafe) let asyncInterceptTable = table(paging_ext_async_intercept_t(cancel: { instance, id in
    guard let instance else { return }
    InterceptorBox.from(instance.assumingMemoryBound(to: paging_interceptor_t.self)).deferring?.cancel(intercept: id)
}))

/// `paging.load-outcome/1` of a ``FailureObservingPlugin``.
private nonisolated(unsafe) let loadOutcomeTable = table(paging_ext_load_outcome_t(failed: { instance, request, code, message in
    guard let instance, let request else { return }
    let box = InterceptorBox.from(instance.assumingMemoryBound(to: paging_interceptor_t.self))
    (box.plugin as? any FailureObservingPlugin)?.loadFailed(PagingPluginRequest(request),
                                                          failure: PluginFailure(code, message.map { String(cString: $0) } ?? ""))
}))

/// `paging.sized-key-chain/1` of every Swift source (``SourcePlugin/keyChain(for:pageSize:)``).
private nonisolated(unsafe) let sizedKeyChainTable = table(paging_ext_sized_key_chain_t(key_chain: { instance, key, pageSize, out in
    guard let instance else { return PAGING_ERR_INVALID_ARGUMENT }
    let box = SourceBox.from(instance.assumingMemoryBound(to: paging_source_t.self))
    return box.setKeys(box.plugin.keyChain(for: bytes(key), pageSize: Int(pageSize)), out)
}))

/// `paging.invalidation/1` of every Swift source (``SourcePlugin/refreshKey(around:)``).
private nonisolated(unsafe) let invalidationTable = table(paging_ext_invalidation_t(
    refresh_key_at: { instance, pageKey, index, item, pageSize, out in
        guard let instance else { return PAGING_ERR_INVALID_ARGUMENT }
        let box = SourceBox.from(instance.assumingMemoryBound(to: paging_source_t.self))
        let anchor = PluginAnchor(pageKey: bytes(pageKey), indexInPage: Int(index), item: bytes(item), pageSize: Int(pageSize))
        guard let key = box.plugin.refreshKey(around: anchor) else { return PAGING_OK }
        return withKey(key) { box.host.table.pointee.keys_set?(out, PAGING_KEY_CURRENT, $0) } ?? PAGING_ERR_INTERNAL
    }))

/// The instance tables start with `plugin_data` (a retained box) in both kinds.
private nonisolated(unsafe) let healthTable: UnsafeMutablePointer<paging_ext_health_t> = {
    let table = UnsafeMutablePointer<paging_ext_health_t>.allocate(capacity: 1)
    table.initialize(to: paging_ext_health_t(check: { instance in
        guard let data = instance?.assumingMemoryBound(to: UnsafeMutableRawPointer?.self).pointee else { return PAGING_ERR_INVALID_ARGUMENT }
        let plugin = Unmanaged<AnyObject>.fromOpaque(data).takeUnretainedValue()
        let checked = ((plugin as? InterceptorBox)?.plugin ?? (plugin as? SourceBox)?.plugin) as? any HealthCheckingPlugin
        guard let checked else { return PAGING_ERR_UNSUPPORTED }
        if let failure = checked.checkHealth() {
            checked.host.log(.error, failure.message)
            return failure.status
        }
        return PAGING_OK
    }))
    return table
}()

final class InterceptorBox: @unchecked Sendable {
    let plugin: any InterceptorPlugin
    /// The host table, which the interceptor needs to build its result.
    let host: UnsafePointer<paging_host_t>
    /// Closed by destroy(): a deferred intercept answered later reaches the host only before.
    let lifetime: HostLifetime
    /// The plugin as a ``DeferringInterceptorPlugin``, cast once.
    let deferring: (any DeferringInterceptorPlugin)?
    private let asyncHost: UnsafePointer<paging_ext_async_intercept_host_t>?
    private let transformHost: UnsafePointer<paging_ext_page_transform_host_t>?
    private let retryHint: UnsafePointer<paging_ext_retry_hint_host_t>?

    init(_ plugin: any InterceptorPlugin, host: PluginHost) {
        self.plugin = plugin
        self.host = host.table
        lifetime = host.lifetime
        deferring = plugin as? any DeferringInterceptorPlugin
        asyncHost = host.extension(PAGING_EXT_ASYNC_INTERCEPT)
        transformHost = host.extension(PAGING_EXT_PAGE_TRANSFORM)
        retryHint = host.extension(PAGING_EXT_RETRY_HINT)
    }

    static func from(_ table: UnsafeMutablePointer<paging_interceptor_t>) -> InterceptorBox {
        Unmanaged<InterceptorBox>.fromOpaque(table.pointee.plugin_data).takeUnretainedValue()
    }

    /// The instance's table of extension `id`, per the protocols the plugin adopts.
    func extensionTable(_ id: String) -> UnsafeRawPointer? {
        switch id {
        case PAGING_EXT_PAGE_TRANSFORM where plugin is any TransformingPlugin && transformHost != nil: transformTable
        case PAGING_EXT_ASYNC_INTERCEPT where deferring != nil: asyncInterceptTable
        case PAGING_EXT_LOAD_OUTCOME where plugin is any FailureObservingPlugin: loadOutcomeTable
        default: healthExtension(id, plugin)
        }
    }

    func intercept(_ request: UnsafePointer<paging_request_t>, _ out: OpaquePointer?) -> UInt32 {
        guard let deferring else { return apply(plugin.intercept(PagingPluginRequest(request)), out) }
        guard let id = asyncHost?.pointee.defer?(out), id != 0 else {
            return apply(.fail(.internal("the host does not offer \(PAGING_EXT_ASYNC_INTERCEPT)")), out)
        }
        deferring.intercept(PagingPluginRequest(request), reply: InterceptReply(box: self, id: id))
        return PAGING_INTERCEPT_PENDING
    }

    /// Answers deferred intercept `id` with `decision`.
    func resume(_ id: UInt64, with decision: InterceptDecision) -> Bool {
        guard let resume = asyncHost?.pointee.resume, lifetime.enter() else { return false }
        defer { lifetime.leave() }
        var context = (box: self, decision: decision)
        return withUnsafeMutablePointer(to: &context) { context in
            resume(host, id, { context, out in
                guard let answer = context?.assumingMemoryBound(to: (box: InterceptorBox, decision: InterceptDecision).self).pointee else {
                    return PAGING_INTERCEPT_FAIL
                }
                return answer.box.apply(answer.decision, out)
            }, context)
        } == PAGING_OK
    }

    /// Sets what `decision` says on `out` and returns its result code. Inlined into the
    /// intercept call: out of line, the decision was copied to reach it.
    @inline(__always)
    func apply(_ decision: InterceptDecision, _ out: OpaquePointer?) -> UInt32 {
        switch decision {
        case .proceed(let observe, let key, let pageSize, let params):
            if let key { _ = key.withUnsafeBufferPointer { host.pointee.out_set_key?(out, paging_bytes_t(data: $0.baseAddress, len: $0.count)) } }
            if let pageSize {
                // Clamped, -5 would have been refused as "a page size of 0".
                guard let size = UInt32(exactly: pageSize), size > 0 else {
                    _ = host.pointee.out_fail?(out, PAGING_ERR_INTERNAL, "the interceptor's decision .proceed(pageSize: \(pageSize)): a page size is 1 or more")
                    return PAGING_INTERCEPT_FAIL
                }
                _ = host.pointee.out_set_page_size?(out, size)
            }
            for (name, value) in params {
                _ = withKey(Array(name.utf8)) { name in
                    withKey(Array(value.utf8)) { value in host.pointee.out_set_param?(out, name.pointee, value.pointee) }
                }
            }
            return observe ? PAGING_INTERCEPT_PROCEED_AND_OBSERVE : PAGING_INTERCEPT_PROCEED
        case .complete(let page):
            put(page, out)
            return PAGING_INTERCEPT_COMPLETE
        case .completeThenRevalidate(let page):
            put(page, out)
            return PAGING_INTERCEPT_COMPLETE_THEN_REVALIDATE
        case .proceedOrFallBack(let page):
            put(page, out)
            return PAGING_INTERCEPT_PROCEED_OR_FALL_BACK
        case .fail(let failure):
            if let retryAfter = failure.retryAfter { _ = retryHint?.pointee.out_retry_after?(out, milliseconds(retryAfter)) }
            _ = failure.message.withMessageCString { host.pointee.out_fail?(out, failure.status, $0) }
            return PAGING_INTERCEPT_FAIL
        }
    }

    /// The plugin's transform of `page`, built on `out` (`paging.page-transform/1`).
    func transform(_ page: UnsafePointer<paging_page_t>, _ out: OpaquePointer?) -> UInt32 {
        guard let transformer = plugin as? any TransformingPlugin, let builder = transformHost?.pointee else { return PAGING_TRANSFORM_KEEP }
        switch transformer.transform(PagingPluginPage(page)) {
        case .keep:
            return PAGING_TRANSFORM_KEEP
        case .replace(let content, let metadata):
            for item in content.items {
                _ = item.withUnsafeBufferPointer { builder.add_item?(out, paging_bytes_t(data: $0.baseAddress, len: $0.count)) }
            }
            if let prev = content.prevKey { _ = withKey(prev) { builder.set_prev_key?(out, $0) } }
            if let next = content.nextKey { _ = withKey(next) { builder.set_next_key?(out, $0) } }
            if content.flags != 0 { _ = builder.set_flags?(out, content.flags) }
            for (name, value) in metadata {
                _ = withKey(Array(name.utf8)) { name in withKey(Array(value.utf8)) { value in builder.set_metadata?(out, name.pointee, value.pointee) } }
            }
            return PAGING_TRANSFORM_REPLACE
        case .fail(let failure):
            _ = failure.message.withMessageCString { builder.fail?(out, failure.status, $0) }
            return PAGING_TRANSFORM_FAIL
        }
    }
}

extension InterceptorBox {
    /// Sets `page` on `out`, as the answer (or the fallback) of an intercept call.
    private func put(_ page: PageContent, _ out: OpaquePointer?) {
        for item in page.items {
            _ = item.withUnsafeBufferPointer { host.pointee.out_add_item?(out, paging_bytes_t(data: $0.baseAddress, len: $0.count)) }
        }
        if let prev = page.prevKey { _ = withKey(prev) { host.pointee.out_set_prev_key?(out, $0) } }
        if let next = page.nextKey { _ = withKey(next) { host.pointee.out_set_next_key?(out, $0) } }
        _ = host.pointee.out_set_flags?(out, page.flags)
    }
}

final class SourceBox {
    let plugin: any SourcePlugin
    let host: PluginHost

    init(_ plugin: any SourcePlugin, host: PluginHost) {
        self.plugin = plugin
        self.host = host
    }

    static func from(_ table: UnsafeMutablePointer<paging_source_t>) -> SourceBox {
        Unmanaged<SourceBox>.fromOpaque(table.pointee.plugin_data).takeUnretainedValue()
    }

    /// Sets a key chain's keys on `out`; none for `nil` (pages carry their keys).
    func setKeys(_ chain: (prev: [UInt8]?, next: [UInt8]?)?, _ out: OpaquePointer?) -> paging_status_t {
        guard let chain else { return PAGING_OK }
        let keysSet = host.table.pointee.keys_set
        if let prev = chain.prev { _ = withKey(prev) { keysSet?(out, PAGING_KEY_PREV, $0) } }
        if let next = chain.next { _ = withKey(next) { keysSet?(out, PAGING_KEY_NEXT, $0) } }
        return PAGING_OK
    }
}
