import FoundationEssentials
import Paging

/// A manifest's plugins, loaded and composed into a ``Pager``: the source, and the
/// interceptors in manifest order.
///
/// Config values under the key `path`, or a key ending in `_path`, that are relative paths are
/// resolved against the manifest's folder before the plugin sees them.
///
/// A plugin whose reference says `"isolation": "process"` (or every plugin, with
/// `isolateAll`) runs in a child process of its own: it appears in ``isolatedSource`` or
/// ``isolatedInterceptors`` instead of ``source`` or ``interceptors``, and its child process
/// ends (SIGTERM, then SIGKILL to its process group) when the pipeline goes away.
public final class Pipeline: Sendable {
    public let manifest: Manifest
    /// The source, when it runs in this process; `nil` when it is isolated.
    public let source: LoadedSource?
    /// The interceptors that run in this process, in manifest order.
    public let interceptors: [LoadedInterceptor]
    /// The source, when it runs in a child process.
    public let isolatedSource: IsolatedSource?
    /// The interceptors that run in child processes, in manifest order.
    public let isolatedInterceptors: [IsolatedInterceptor]
    public let pager: PluginPager
    /// The manifest's interceptors, in its order: each one's index in ``interceptors`` or in
    /// ``isolatedInterceptors``.
    private let interceptorOrder: [(reference: Manifest.PluginReference, index: Int, isIsolated: Bool)]

    /// Loads every plugin of `manifest`. Each failure is a ``ManifestError`` naming the
    /// manifest, the JSON path of the plugin and the loader's reason.
    ///
    /// - Parameters:
    ///   - searchPath: where plugin names are found; the standard one by default.
    ///   - sink: where the plugins' log lines go, and the loader's warnings (a library file that
    ///     changed since this process first loaded it), at level `.warning`.
    ///   - logLevel: the lowest level `sink` keeps (plugins may skip building lower lines).
    ///   - extraInterceptors: in-process interceptors placed before the manifest's.
    ///   - recordsStats: time every plugin call and count outcomes (``stats``).
    ///   - isolateAll: run every plugin in a child process, as if each said `"isolation": "process"`.
    ///   - refreshSupersedes: the pager's ``Pager/refreshSupersedes`` (false when independent
    ///     readers share the pipeline).
    public init(
        manifest: Manifest,
        searchPath: PluginSearchPath? = nil,
        sink: @escaping PluginLogSink,
        logLevel: PluginLogLevel = .trace,
        extraInterceptors: [any PagingInterceptor<PluginKey, PluginItem>] = [],
        recordsStats: Bool = false,
        isolateAll: Bool = false,
        refreshSupersedes: Bool = true
    ) throws(ManifestError) {
        let searchPath = searchPath ?? .standard(manifestFolder: manifest.folder)
        var limits = PluginLimits(maxItemsPerPage: manifest.maxItemsPerPage, maxPageBytes: manifest.maxPageBytes,
                                  fetchTimeout: manifest.fetchTimeout, callTimeout: manifest.callTimeout, logLevel: logLevel,
                                  recordsStats: recordsStats)
        limits.callTimeoutOrigin = manifest.callTimeoutOrigin
        func library(_ reference: Manifest.PluginReference) throws(ManifestError) -> PluginLibrary {
            do {
                let path = try searchPath.resolve(reference.plugin, relativeTo: manifest.folder)
                return try PluginLibrary.open(path: path, sha256: reference.sha256, within: limits.lifecycleTimeout) { note in
                    sink(.warning, "\(reference.plugin) (\(path))", note.description)
                }
            } catch {
                throw manifest.error(at: reference, error)
            }
        }
        func config(_ reference: Manifest.PluginReference) -> JSONValue {
            guard case .object(let members) = reference.config else { return reference.config }
            return .object(members.map { member in
                guard member.key == "path" || member.key.hasSuffix("_path"),
                      case .string(let path) = member.value, !path.isEmpty, !path.hasPrefix("/") else { return member }
                return (member.key, .string(URL(fileURLWithPath: manifest.folder).appendingPathComponent(path).standardizedFileURL.path))
            })
        }

        func isolated(_ reference: Manifest.PluginReference) -> Bool { isolateAll || reference.isolation == .process }
        func spec(_ reference: Manifest.PluginReference, isSource: Bool) throws(ManifestError) -> PluginProcess.Spec {
            do {
                let path = try searchPath.resolve(reference.plugin, relativeTo: manifest.folder)
                return PluginProcess.Spec(library: URL(fileURLWithPath: path).standardizedFileURL.path, sha256: reference.sha256,
                                          id: reference.id, isSource: isSource, config: config(reference), limits: limits)
            } catch {
                throw manifest.error(at: reference, error)
            }
        }

        let pagingSource: any PagingSource<PluginKey, PluginItem>
        if isolated(manifest.source) {
            let sourceSpec = try spec(manifest.source, isSource: true)
            do {
                let isolatedSource = try IsolatedSource(sourceSpec, sink: sink)
                self.isolatedSource = isolatedSource
                pagingSource = isolatedSource
            } catch {
                throw manifest.error(at: manifest.source, message: error.message)
            }
            source = nil
        } else {
            let sourceLibrary = try library(manifest.source)
            do {
                let source = try sourceLibrary.makeSource(id: manifest.source.id, config: config(manifest.source), sink: sink, limits: limits)
                self.source = source
                pagingSource = source
            } catch {
                throw manifest.error(at: manifest.source, error)
            }
            isolatedSource = nil
        }
        // Two instances of one plugin in the chain (a logging before a cache and one after it)
        // logged and failed under one name: their names say where they stand in the manifest.
        let repeated = Dictionary(grouping: manifest.interceptors, by: { "\($0.plugin)\u{0}\($0.id ?? "")" }).filter { $0.value.count > 1 }
        func position(_ reference: Manifest.PluginReference) -> String? {
            repeated["\(reference.plugin)\u{0}\(reference.id ?? "")"] != nil ? reference.jsonPath : nil
        }
        func interceptorSink(_ reference: Manifest.PluginReference, library: String) -> PluginLogSink {
            guard let position = position(reference) else { return sink }
            return { [sink] level, plugin, message in sink(level, Self.label(plugin, library: library, at: position), message) }
        }
        var loaded: [LoadedInterceptor] = []
        var isolatedOnes: [IsolatedInterceptor] = []
        var order: [(reference: Manifest.PluginReference, index: Int, isIsolated: Bool)] = []
        var chain: [any PagingInterceptor<PluginKey, PluginItem>] = extraInterceptors
        for reference in manifest.interceptors {
            if isolated(reference) {
                var interceptorSpec = try spec(reference, isSource: false)
                interceptorSpec.position = position(reference)
                do {
                    let interceptor = try IsolatedInterceptor(interceptorSpec, sink: interceptorSink(reference, library: interceptorSpec.library))
                    order.append((reference, isolatedOnes.count, true))
                    isolatedOnes.append(interceptor)
                    chain.append(interceptor)
                } catch {
                    throw manifest.error(at: reference, message: error.message)
                }
                continue
            }
            let interceptorLibrary = try library(reference)
            do {
                let interceptor = try interceptorLibrary.makeInterceptor(id: reference.id, config: config(reference),
                                                                         sink: interceptorSink(reference, library: interceptorLibrary.path), limits: limits,
                                                                         position: position(reference))
                order.append((reference, loaded.count, false))
                loaded.append(interceptor)
                chain.append(interceptor)
            } catch {
                throw manifest.error(at: reference, error)
            }
        }
        interceptors = loaded
        isolatedInterceptors = isolatedOnes
        interceptorOrder = order
        self.manifest = manifest
        pager = Pager(source: pagingSource, interceptors: chain, refreshSupersedes: refreshSupersedes)
    }

    deinit {
        isolatedSource?.destroy()
        for interceptor in isolatedInterceptors { interceptor.destroy() }
    }

    /// Destroys every plugin now, the interceptors in manifest order, then the source (each
    /// in-process one waited for at most ``PluginLimits/lifecycleTimeout``), rather than when the
    /// last reference to each goes: a thread that made a call may hold one a little longer, and
    /// the plugin was then destroyed there, as the process ended. Call it once nothing loads any
    /// more; loads after it fail. Destroying again does nothing.
    public func destroyPlugins() {
        for (_, index, isIsolated) in interceptorOrder {
            if isIsolated { isolatedInterceptors[index].destroy() } else { interceptors[index].destroy() }
        }
        source?.destroy()
        isolatedSource?.destroy()
    }

    /// One plugin of the pipeline, in process or isolated, as commands describe and ask it.
    public struct Member: Sendable {
        public let kind: PluginKind
        public let id: String
        /// Where the manifest names it: `$.source`, `$.interceptors[1]` (a plugin may be named
        /// twice, with the same id).
        public let at: String
        public let version: String
        /// The library's path.
        public let library: String
        public let abiVersion: String
        public let isIsolated: Bool
        /// The plugin's health check (`paging.health/1`), in its child when isolated.
        public let health: @Sendable () -> PluginHealth
        /// What the host measured of its calls and what it published.
        public let stats: @Sendable () -> PluginStats.Snapshot

        /// "id version (library, ABI x.y)", with ", isolated in a child process" when it is.
        public var summary: String {
            "\(id) \(version) (\(library), ABI \(abiVersion)\(isIsolated ? ", isolated in a child process" : ""))"
        }
    }

    /// Every plugin: the source first, then the interceptors in manifest order.
    public var members: [Member] {
        func loaded(_ kind: PluginKind, _ reference: Manifest.PluginReference, _ descriptor: PluginDescriptor, _ library: PluginLibrary,
                    health: @escaping @Sendable () -> PluginHealth, stats: @escaping @Sendable () -> PluginStats.Snapshot) -> Member {
            Member(kind: kind, id: descriptor.id, at: reference.jsonPath, version: descriptor.version, library: library.path,
                   abiVersion: library.abiVersion.description, isIsolated: false, health: health, stats: stats)
        }
        func isolated(_ kind: PluginKind, _ reference: Manifest.PluginReference, _ identity: IsolatedPluginIdentity, _ library: String,
                      health: @escaping @Sendable () -> PluginHealth, stats: @escaping @Sendable () -> PluginStats.Snapshot) -> Member {
            Member(kind: kind, id: identity.id, at: reference.jsonPath, version: identity.version, library: library,
                   abiVersion: identity.abiVersion, isIsolated: true, health: health, stats: stats)
        }
        let source = source.map { source in
            loaded(.source, manifest.source, source.descriptor, source.library, health: source.health, stats: { source.stats })
        } ?? isolatedSource.map { source in
            isolated(.source, manifest.source, source.identity, source.library, health: source.health, stats: { source.stats })
        }
        let interceptors = interceptorOrder.map { reference, index, isIsolated in
            if isIsolated {
                let plugin = isolatedInterceptors[index]
                return isolated(.interceptor, reference, plugin.identity, plugin.library, health: plugin.health, stats: { plugin.stats })
            }
            let plugin = self.interceptors[index]
            return loaded(.interceptor, reference, plugin.descriptor, plugin.library, health: plugin.health, stats: { plugin.stats })
        }
        return (source.map { [$0] } ?? []) + interceptors
    }

    /// One plugin's figures: the host's measures of its calls (when asked for) and what it
    /// published.
    public struct PluginFigures: Sendable {
        public let id: String
        public let kind: PluginKind
        /// Where the manifest names it (``Member/at``).
        public let at: String
        public let library: String
        public let stats: PluginStats.Snapshot
    }

    /// Every plugin's figures, in the order of ``members``. An isolated plugin's calls are timed
    /// in this process, round trips included; its counters and gauges are its running child's.
    public var stats: [PluginFigures] {
        members.map { PluginFigures(id: $0.id, kind: $0.kind, at: $0.at, library: $0.library, stats: $0.stats()) }
    }

    /// The parameters of the manifest's requests.
    public var requestParams: PagingRequestParams {
        PagingRequestParams(pageSize: manifest.pageSize, retryPolicy: manifest.retryPolicy, userInfo: manifest.userInfo)
    }

    /// A ``PaginationManager`` over the pipeline, with the manifest's settings.
    public func makeManager() -> PaginationManager<PluginKey, PluginItem> {
        PaginationManager(pager: pager, configuration: managerConfiguration)
    }

    /// The manifest's settings for a manager.
    public var managerConfiguration: PaginationManager<PluginKey, PluginItem>.Configuration {
        .init(pageSize: manifest.pageSize, maxSize: manifest.maxSize, prefetchDistance: manifest.prefetchDistance,
              retryPolicy: manifest.retryPolicy, userInfo: manifest.userInfo)
    }

    /// A sink's plugin name ("id (library path)") with where the plugin stands in the manifest:
    /// "logging at $.interceptors[2] (/lib/liblogging.so)".
    static func label(_ plugin: String, library: String, at jsonPath: String) -> String {
        // Said once: an instance's own name may hold it already.
        guard !plugin.contains(" at \(jsonPath) (") else { return plugin }
        let suffix = " (\(library))"
        guard plugin.hasSuffix(suffix) else { return "\(plugin) at \(jsonPath)" }
        return "\(plugin.dropLast(suffix.count)) at \(jsonPath)\(suffix)"
    }
}

extension Manifest {
    func error(at reference: PluginReference, _ error: PluginLoadError) -> ManifestError {
        var isTransient = false
        if case .createFailed(_, _, let status, _) = error { isTransient = status == .transient }
        return self.error(at: reference, message: error.description, isTransient: isTransient)
    }

    func error(at reference: PluginReference, message: String, isTransient: Bool = false) -> ManifestError {
        ManifestError(file: file, path: "\(reference.jsonPath) (plugin \"\(reference.plugin)\")", message: message, isTransient: isTransient)
    }
}
