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
            plugin.pointee.destroy?(plugin)
            throw .invalidEntry(path: path, reason: "source '\(descriptor.id)' lacks refresh_key, fetch or destroy")
        }
        let extensions = InstanceExtensions(extensionLookup(plugin, isDraft: descriptor.isDraft))
        let source = try LoadedSource(library: self, descriptor: descriptor, instance: instance, plugin: plugin, extensions: extensions)
        liveInstances.add(1, ordering: .relaxed)
        return source
    }

    /// Creates the interceptor plugin `id` (or the library's only interceptor) with `config`.
    public func makeInterceptor(
        id: String? = nil, config: JSONValue = .object([]),
        sink: @escaping PluginLogSink, limits: PluginLimits = PluginLimits()
    ) throws(PluginLoadError) -> LoadedInterceptor {
        let descriptor = try descriptor(id: id, kind: .interceptor)
        guard let create = entry.pointee.create_interceptor else {
            throw .invalidEntry(path: path, reason: "plugin '\(descriptor.id)' is an interceptor but create_interceptor is NULL")
        }
        let instance = PluginInstance(label: "\(descriptor.id) (\(path))", sink: sink, limits: limits)
        let plugin = try self.create(descriptor, config, instance) { create($0, instance.table, $1) }
        guard plugin.pointee.intercept != nil, plugin.pointee.destroy != nil else {
            plugin.pointee.destroy?(plugin)
            throw .invalidEntry(path: path, reason: "interceptor '\(descriptor.id)' lacks intercept or destroy")
        }
        let extensions = InstanceExtensions(extensionLookup(plugin, isDraft: descriptor.isDraft))
        liveInstances.add(1, ordering: .relaxed)
        return LoadedInterceptor(library: self, descriptor: descriptor, instance: instance, plugin: plugin, extensions: extensions)
    }

    /// Calls `create` with a config handle live for the call; a NULL result is the failure the
    /// plugin reported through `config_fail`.
    package func create<Plugin>(
        _ descriptor: PluginDescriptor, _ config: JSONValue, _ instance: PluginInstance,
        _ call: (UnsafePointer<CChar>, OpaquePointer) -> UnsafeMutablePointer<Plugin>?
    ) throws(PluginLoadError) -> UnsafeMutablePointer<Plugin> {
        let pluginConfig = PluginConfig(config)
        let created = descriptor.id.withCString { id in pluginConfig.withHandle(instance) { call(id, $0) } }
        guard let created else {
            let (status, message) = pluginConfig.failure ?? (.internal, "create returned NULL without saying why")
            throw .createFailed(path: path, id: descriptor.id, status: status, message: message)
        }
        return created
    }
}
