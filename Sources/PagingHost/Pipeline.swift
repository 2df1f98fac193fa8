import Foundation
import Paging

/// A manifest's plugins, loaded and composed into a ``Pager``: the source, and the
/// interceptors in manifest order.
///
/// Config values under the key `path`, or a key ending in `_path`, that are relative paths are
/// resolved against the manifest's folder before the plugin sees them.
public final class Pipeline: Sendable {
    public let manifest: Manifest
    public let source: LoadedSource
    public let interceptors: [LoadedInterceptor]
    public let pager: PluginPager

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
    public init(
        manifest: Manifest,
        searchPath: PluginSearchPath? = nil,
        sink: @escaping PluginLogSink,
        logLevel: PluginLogLevel = .trace,
        extraInterceptors: [any PagingInterceptor<PluginKey, PluginItem>] = [],
        recordsStats: Bool = false
    ) throws(ManifestError) {
        let searchPath = searchPath ?? .standard(manifestFolder: manifest.folder)
        let limits = PluginLimits(maxItemsPerPage: manifest.maxItemsPerPage, maxPageBytes: manifest.maxPageBytes,
                                  fetchTimeout: manifest.fetchTimeout, callTimeout: manifest.callTimeout, logLevel: logLevel,
                                  recordsStats: recordsStats)
        func library(_ reference: Manifest.PluginReference) throws(ManifestError) -> PluginLibrary {
            do {
                let path = try searchPath.resolve(reference.plugin, relativeTo: manifest.folder)
                return try PluginLibrary.open(path: path, sha256: reference.sha256) { note in
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

        let sourceLibrary = try library(manifest.source)
        do {
            source = try sourceLibrary.makeSource(id: manifest.source.id, config: config(manifest.source), sink: sink, limits: limits)
        } catch {
            throw manifest.error(at: manifest.source, error)
        }
        var loaded: [LoadedInterceptor] = []
        for reference in manifest.interceptors {
            let interceptorLibrary = try library(reference)
            do {
                loaded.append(try interceptorLibrary.makeInterceptor(id: reference.id, config: config(reference), sink: sink, limits: limits))
            } catch {
                throw manifest.error(at: reference, error)
            }
        }
        interceptors = loaded
        self.manifest = manifest
        pager = Pager(source: source, interceptors: extraInterceptors + loaded)
    }

    /// One plugin's figures: the host's measures of its calls (when asked for) and what it
    /// published.
    public struct PluginFigures: Sendable {
        public let id: String
        public let kind: PluginKind
        public let library: String
        public let stats: PluginStats.Snapshot
    }

    /// Every plugin's figures, the source first, then the interceptors in manifest order.
    public var stats: [PluginFigures] {
        [PluginFigures(id: source.descriptor.id, kind: .source, library: source.library.path, stats: source.stats)]
            + interceptors.map { PluginFigures(id: $0.descriptor.id, kind: .interceptor, library: $0.library.path, stats: $0.stats) }
    }

    /// The parameters of the manifest's requests.
    public var requestParams: PagingRequestParams {
        PagingRequestParams(pageSize: manifest.pageSize, retryPolicy: manifest.retryPolicy, userInfo: manifest.userInfo)
    }

    /// A ``PaginationManager`` over the pipeline, with the manifest's settings.
    public func makeManager() -> PaginationManager<PluginKey, PluginItem> {
        PaginationManager(pager: pager, configuration: .init(
            pageSize: manifest.pageSize, maxSize: manifest.maxSize, prefetchDistance: manifest.prefetchDistance,
            retryPolicy: manifest.retryPolicy, userInfo: manifest.userInfo))
    }
}

extension Manifest {
    func error(at reference: PluginReference, _ error: PluginLoadError) -> ManifestError {
        ManifestError(file: file, path: "\(reference.jsonPath) (plugin \"\(reference.plugin)\")", message: error.description)
    }
}
