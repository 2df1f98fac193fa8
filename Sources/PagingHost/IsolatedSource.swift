import FoundationEssentials
import Paging

/// A source plugin run in a child process of its own (`"isolation": "process"` in a
/// manifest): a crash, exit, abort or hang there fails only the fetches in flight, with a
/// ``PluginError`` naming the plugin, its library and the signal or exit status, and the host
/// goes on. See ``PluginProcess`` for restarts and the restart limit.
///
/// What crosses to the child: `fetch`, `keyChain(for:pageSize:)`, `refreshKey(around:)`, the
/// health check and the counters the plugin publishes; the child's invalidations come back
/// (``invalidation``). Key chains and refresh keys are asked synchronously, as the engine asks
/// them, so a hung child holds the caller's thread until it is killed (``PluginProcess``).
///
/// # Thread safety
/// Any thread; fetches overlap in the child as they would in process.
public final class IsolatedSource: PagingSource, CustomStringConvertible, Sendable {
    public typealias Key = PluginKey
    public typealias Value = PluginItem

    let process: PluginProcess

    /// Starts the child and has it create the source; throws the child's reason when it cannot.
    init(_ spec: PluginProcess.Spec, sink: @escaping PluginLogSink) throws(IsolationStartError) {
        process = try PluginProcess(spec, sink: sink)
    }

    /// Ends the child process (SIGTERM, then SIGKILL to its process group) and reaps it.
    public func destroy() { process.shutDown() }

    /// The plugin as errors name it: "id (library path)".
    public var description: String { process.label }

    /// The library the child loads.
    public var library: String { process.spec.library }

    /// The process id of the running child, if one runs.
    public var childPID: Int32? { process.childPID }

    public var refreshKey: PluginKey { process.refreshKey }

    /// The plugin's id, version and ABI version, as its child loaded it.
    public var identity: IsolatedPluginIdentity { process.identity }

    /// Whether the plugin can serve now (`paging.health/1`), asked in its child.
    public func health() -> PluginHealth { process.health() }

    /// The host's figures of the fetches (round trips included), with the counters and gauges
    /// the running child's plugin published.
    public var stats: PluginStats.Snapshot { process.figures }

    /// Signalled when the plugin, in its child, says its data changed.
    public var invalidation: PagingInvalidation? { process.invalidation }

    public func refreshKey(around anchor: PagingAnchor<PluginKey, PluginItem>) -> PluginKey? {
        do {
            var reader = try process.callBlocking(.refreshKeyAt) { frame in
                frame.data(anchor.pageKey.bytes)
                frame.u32(UInt32(clamping: anchor.indexInPage))
                frame.data(anchor.value.bytes)
                frame.u32(UInt32(clamping: anchor.pageSize))
            }
            let key = try reader.optionalKey()
            try process.checked(keys: [key])
            return key
        } catch {
            process.log(.warning, "refresh_key_at(\(anchor.pageKey)) failed: \(error)")
            return nil
        }
    }

    public func keyChain(for key: PluginKey, pageSize: Int) -> PagingKeyChain<PluginKey> {
        do {
            var reader = try process.callBlocking(.keyChain) { frame in
                frame.data(key.bytes)
                frame.u32(UInt32(clamping: pageSize))
            }
            let chain = PagingKeyChain(key: key, prevKey: try reader.optionalKey(), nextKey: try reader.optionalKey())
            try process.checked(keys: [chain.prevKey, chain.nextKey])
            return chain
        } catch {
            process.log(.warning, "key_chain(\(key)) failed: \(error)")
            return PagingKeyChain(key: key)
        }
    }

    public func fetch(request: PluginRequest) async throws -> PluginPage {
        try await process.measured({
            var reader = try await process.call(.fetch) { $0.request(request) }
            var page = try process.checked { try reader.page(base: request.params) }
            page.request = request
            return page
        }, completed: { _ in true })
    }
}
