import CIsolation
import FoundationEssentials
import Dispatch
import CPaging
import Paging

extension PluginLibrary {
    /// Creates the source plugin `id` (or the library's only source) with `config`.
    ///
    /// - Parameters:
    ///   - config: the plugin's `config` object.
    ///   - sink: where the instance's log lines go.
    ///   - limits: bounds on what its fetches may return, and their timeout.
    public func makeSource(
        id: String? = nil, config: JSONValue = .object([]),
        sink: @escaping PluginLogSink, limits: PluginLimits = PluginLimits()
    ) throws(PluginLoadError) -> LoadedSource {
        let descriptor = try descriptor(id: id, kind: .source)
        guard let create = entry.pointee.create_source else {
            throw .invalidEntry(path: path, reason: "plugin '\(descriptor.id)' is a source but create_source is NULL")
        }
        let instance = PluginInstance(label: "\(descriptor.id) (\(path))", sink: sink, limits: limits)
        let plugin = try self.create(descriptor, config, instance) { create($0, instance.table, $1) }
        guard plugin.pointee.fetch != nil, plugin.pointee.refresh_key != nil, plugin.pointee.destroy != nil else {
            destroyRefused(plugin)
            throw .invalidEntry(path: path, reason: "source '\(descriptor.id)' lacks refresh_key, fetch or destroy")
        }
        try checkStructSize(of: plugin, "source", descriptor, instance)
        // Its get_extension is a call into the library.
        let extensions = PluginCrash.calling(crashLabel) { instanceExtensions(extensionLookup(plugin, isDraft: descriptor.isDraft), instance) }
        let source = try LoadedSource(library: self, descriptor: descriptor, instance: instance, plugin: plugin, extensions: extensions)
        liveInstances.add(1, ordering: .relaxed)
        return source
    }

    /// Creates the interceptor plugin `id` (or the library's only interceptor) with `config`;
    /// `position`, where a manifest names it, goes in its name (in errors and log lines) when
    /// the manifest names the same plugin more than once.
    public func makeInterceptor(
        id: String? = nil, config: JSONValue = .object([]),
        sink: @escaping PluginLogSink, limits: PluginLimits = PluginLimits(), position: String? = nil
    ) throws(PluginLoadError) -> LoadedInterceptor {
        let descriptor = try descriptor(id: id, kind: .interceptor)
        guard let create = entry.pointee.create_interceptor else {
            throw .invalidEntry(path: path, reason: "plugin '\(descriptor.id)' is an interceptor but create_interceptor is NULL")
        }
        let label = "\(descriptor.id) (\(path))"
        let instance = PluginInstance(label: position.map { Pipeline.label(label, library: path, at: $0) } ?? label, sink: sink, limits: limits)
        let plugin = try self.create(descriptor, config, instance) { create($0, instance.table, $1) }
        guard plugin.pointee.intercept != nil, plugin.pointee.destroy != nil else {
            destroyRefused(plugin)
            throw .invalidEntry(path: path, reason: "interceptor '\(descriptor.id)' lacks intercept or destroy")
        }
        try checkStructSize(of: plugin, "interceptor", descriptor, instance)
        // Its get_extension is a call into the library.
        let extensions = PluginCrash.calling(crashLabel) { instanceExtensions(extensionLookup(plugin, isDraft: descriptor.isDraft), instance) }
        liveInstances.add(1, ordering: .relaxed)
        return LoadedInterceptor(library: self, descriptor: descriptor, instance: instance, plugin: plugin, extensions: extensions)
    }

    /// The extensions the instance offers; a table it answered with a NULL function is not
    /// offered, and said (it was taken without a word: a health check went unasked, validate
    /// said ok).
    private func instanceExtensions(
        _ lookup: ((UnsafePointer<CChar>) -> UnsafeRawPointer?)?, _ instance: PluginInstance
    ) -> InstanceExtensions {
        let extensions = InstanceExtensions(lookup)
        for id in extensions.withoutFunction {
            instance.log(.warning, "get_extension(\"\(id)\") answered a table whose function is NULL: the extension is taken as not offered")
        }
        return extensions
    }

    /// The `struct_size` of an ABI 1.0 library's instance: one smaller than the draft's table
    /// is refused (no build ever wrote it: a corrupt table), and 0 (never set) is said once,
    /// since none of its extensions is asked for then. (Both were taken without a word: a
    /// plugin's paging.health/1 went unasked, and pager validate said ok.)
    private func checkStructSize<Plugin: PluginTable>(
        of plugin: UnsafeMutablePointer<Plugin>, _ kind: String, _ descriptor: PluginDescriptor, _ instance: PluginInstance
    ) throws(PluginLoadError) {
        guard !descriptor.isDraft else { return }
        let size = plugin.pointee.struct_size, draft = Plugin.draftSize
        // A transform is offered through get_extension: one left unread runs the plugin without
        // it (items it would drop went out, exit 0).
        if size < Plugin.firstSize, size >= draft || size == 0, descriptor.requiredExtensions.contains(PAGING_EXT_PAGE_TRANSFORM) {
            destroyRefused(plugin)
            throw .invalidEntry(path: path, reason: "\(kind) '\(descriptor.id)' requires \(PAGING_EXT_PAGE_TRANSFORM), but its table's struct_size "
                                + "(\(size)) leaves its get_extension unread, so its transform would never be called: set it to "
                                + "sizeof(paging_\(kind)_t), \(MemoryLayout<Plugin>.size) with these headers")
        }
        if size == 0 {
            instance.log(.warning, "struct_size is 0: its table is read as ABI 1.0's draft, without get_extension "
                         + "(set it to sizeof(paging_\(kind)_t), \(MemoryLayout<Plugin>.size) with these headers)")
        } else if size < Plugin.firstSize, size >= draft {
            instance.log(.warning, "struct_size is \(size), between the 1.0 draft's \(draft) bytes and ABI 1.0's \(Plugin.firstSize): its "
                         + "get_extension is not read, and none of its extensions is used (set it to sizeof(paging_\(kind)_t), "
                         + "\(MemoryLayout<Plugin>.size) with these headers)")
        } else if size < draft {
            destroyRefused(plugin)
            throw .invalidEntry(path: path, reason: "\(kind) '\(descriptor.id)' says its table is \(size) bytes (struct_size), less than the "
                                + "smallest ABI 1.0 paging_\(kind)_t (the 1.0 draft's, \(draft) bytes): set it to sizeof(paging_\(kind)_t)")
        }
    }

    /// Destroys an instance the host refuses, as a call into the library (``PluginCrash``).
    func destroyRefused<Plugin: PluginTable>(_ plugin: UnsafeMutablePointer<Plugin>) {
        PluginCrash.calling(crashLabel) { Plugin.destroy(plugin) }
    }

    /// Calls `create` with a config handle live for the call; a NULL result is the failure the
    /// plugin reported through `config_fail`, and so is an instance returned after it (which is
    /// destroyed: the plugin refused its config), or after a use of a config handle the host
    /// refused (``PluginConfig/misuse``). A plugin that requires an extension the
    /// instance's limits withhold is refused first.
    ///
    /// The call runs on a thread of its own and is waited for at most the instance's call
    /// timeout (or, without one, its fetch timeout but at least 30 s): a `create_*` that never
    /// returns fails with a timeout instead of hanging the host (the thread, and whatever it
    /// creates, are left to the plugin). A plugin that ends the process meanwhile is reported (``ExitGuard``).
    package func create<Plugin: PluginTable>(
        _ descriptor: PluginDescriptor, _ config: JSONValue, _ instance: PluginInstance,
        _ call: @escaping (UnsafePointer<CChar>, OpaquePointer) -> UnsafeMutablePointer<Plugin>?
    ) throws(PluginLoadError) -> UnsafeMutablePointer<Plugin> {
        _ = try usable(descriptor, withholding: instance.limits.withheldExtensions)
        let pluginConfig = PluginConfig(config)
        let timeout = instance.limits.lifecycleTimeout
        let id = descriptor.id
        let label = crashLabel
        let body = UnsafeSendable { UnsafeSendable(PluginCrash.calling(label) { id.withCString { id in pluginConfig.withHandle(instance) { call(id, $0) } } }) }
        let finished = ExitGuard.during("plugin '\(id)' of \(path)") { boundedCall(named: "paging-create", within: timeout, body.value) }
        guard let finished else {
            throw .createFailed(path: path, id: id, status: .timeout,
                                message: "create did not return within \(timeout) (\(instance.limits.lifecycleTimeoutOrigin))")
        }
        let misuse = pluginConfig.misuse.map { (PluginStatus.invalidArgument, $0) }
        guard let created = finished.value else {
            let (status, message) = pluginConfig.failure ?? misuse ?? (.internal, "create returned NULL without saying why")
            throw .createFailed(path: path, id: id, status: status, message: message)
        }
        if let (status, message) = pluginConfig.failure {
            destroyRefused(created)
            throw .createFailed(path: path, id: id, status: status, message: message + " (create called config_fail, then returned an instance)")
        }
        if let (status, message) = misuse {
            destroyRefused(created)
            throw .createFailed(path: path, id: id, status: status, message: message)
        }
        restoringSIGCHLD(after: "its create") { instance.log(.warning, $0) }
        return created
    }
}

/// Sets SIGCHLD back when the plugin code that just ran (`who`) set it to be ignored, saying so
/// through `warn`: isolated plugins' processes are waited for, and with SIGCHLD ignored a crash
/// read as a timeout, then as "exited with status 0" (a probe).
func restoringSIGCHLD(after who: String, _ warn: (String) -> Void) {
    guard paging_isolation_restore_sigchld() != 0 else { return }
    warn("\(who) set SIGCHLD to be ignored (or SA_NOCLDWAIT), which keeps pager from learning how isolated plugins' processes end; set back")
}

/// A call into a plugin's code on a thread of its own, waited for at most `timeout`: its
/// result, or nil when it has not returned by then (the thread is left to the plugin).
package func boundedCall<Result>(named name: String, within timeout: Duration, _ body: @escaping () -> Result) -> Result? {
    waiting(atMost: timeout, start: { detachThread(named: name, $0) }, body)
}

/// What destroys a plugin instance, as ``boundedDestroy(_:on:busy:_:)`` runs it: after the calls
/// in flight, the plugin's destroy(), with `calling` just before it and `returned` just after;
/// then the instance is marked destroyed (not before: the host table stays the plugin's while its
/// destroy() runs). It holds no object that owns the instance: from deinit, it may run after that
/// is gone.
func destroying<Plugin: PluginTable>(
    _ plugin: UnsafeMutablePointer<Plugin>, calls: SerializedCalls, library: PluginLibrary, instance: PluginInstance,
    returned: @escaping @Sendable () -> Void = {}
) -> @Sendable (_ calling: @Sendable () -> Void) -> Void {
    let table = UnsafeSendable(plugin)
    return { calling in
        calls.close {
            calling()
            Plugin.destroy(table.value)
            returned()
            library.liveInstances.subtract(1, ordering: .releasing)
        }
        instance.markDestroyed()
    }
}

/// Calls a plugin instance's destroy() (`close`, which calls `calling` just before it calls it)
/// on a thread of its own, or on `worker` after the calls before it, waited for at most the
/// instance's ``PluginLimits/lifecycleTimeout``: whether it returned. One that has not is left
/// to run there, and said: a destroy() that never returned hung `pager run`, `validate` and
/// `serve` at their end, whatever the timeouts. With a call in flight (`busy`), which destroy()
/// waits for, it is waited for 1 s at most: a call still running when the host is done with the
/// plugin is, as a rule, one that hangs (a run waited the whole bound for it at its end).
@discardableResult
func boundedDestroy(
    _ instance: PluginInstance, on worker: PluginCallWorker? = nil, busy: Bool = false,
    _ close: @escaping @Sendable (_ calling: @Sendable () -> Void) -> Void
) -> Bool {
    let timeout = busy ? min(instance.limits.lifecycleTimeout, .seconds(1)) : instance.limits.lifecycleTimeout
    let called = Locked(false)
    let start: (@escaping @Sendable () -> Void) -> Void = { call in
        if let worker { worker.runDetached(call) } else { detachThread(named: "paging-destroy", call) }
    }
    guard waiting(atMost: timeout, start: start, { close { called.withLock { $0 = true } } }) != nil else {
        PluginLibrary.destroyLeftRunning.store(true, ordering: .releasing)
        let bound = busy ? "within \(timeout)" : "within \(timeout) (\(instance.limits.lifecycleTimeoutOrigin))"
        instance.log(.warning, called.withLock { $0 }
            ? "destroy() did not return \(bound): not waited for any longer, what it had left to do may not be done"
            // The ABI has no destroy() during another call: one that hangs keeps it from being called.
            : "destroy() could not be called \(bound): a call to the plugin has not returned (it hangs there); not waited for any longer")
        return false
    }
    return true
}

/// `body`, which `start` runs elsewhere (a thread, a queue), waited for at most `timeout` by
/// the calling thread: its result, or nil when it has not returned by then.
func waiting<Result>(atMost timeout: Duration, start: (@escaping @Sendable () -> Void) -> Void, _ body: @escaping () -> Result) -> Result? {
    let done = DispatchSemaphore(value: 0)
    let result = Locked<Result?>(nil)
    let work = UnsafeSendable(body)
    start {
        let value = work.value()
        result.withLock { $0 = value }
        done.signal()
    }
    guard done.wait(timeout: .now() + .nanoseconds(timeout.nanoseconds)) == .success else { return nil }
    return result.withLock { $0 }
}

/// A plugin's function table, which its destroy() frees.
package protocol PluginTable {
    /// The size of the table in the plugin's headers (ABI 1.0 on; 0 when never set).
    var struct_size: UInt32 { get }
    static func destroy(_ table: UnsafeMutablePointer<Self>)
    /// The size of ABI 1.0's draft of the table: the offset of its first 1.0 member.
    static var draftSize: Int { get }
    /// The smallest ABI 1.0 table's size: the end of its get_extension.
    static var firstSize: Int { get }
}

extension paging_source_t: PluginTable {
    package static func destroy(_ table: UnsafeMutablePointer<Self>) { table.pointee.destroy?(table) }
    package static var draftSize: Int { MemoryLayout<Self>.offset(of: \.struct_size)! }
    package static var firstSize: Int { MemoryLayout<Self>.offset(of: \.get_extension)! + MemoryLayout<UnsafeRawPointer>.size }
}

extension paging_interceptor_t: PluginTable {
    package static func destroy(_ table: UnsafeMutablePointer<Self>) { table.pointee.destroy?(table) }
    package static var draftSize: Int { MemoryLayout<Self>.offset(of: \.struct_size)! }
    package static var firstSize: Int { MemoryLayout<Self>.offset(of: \.get_extension)! + MemoryLayout<UnsafeRawPointer>.size }
}
