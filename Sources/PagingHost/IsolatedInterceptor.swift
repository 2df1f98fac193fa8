import FoundationEssentials
import Paging

/// An interceptor plugin run in a child process of its own (`"isolation": "process"` in a
/// manifest): a crash, exit, abort or hang there fails only the intercepts in flight, with a
/// ``PluginError`` naming the plugin, its library and the signal or exit status, and the host
/// goes on. See ``PluginProcess`` for restarts and the restart limit.
///
/// Every call crosses: intercept (all four results), transform, handle and loadFailed. A
/// `proceedOrFallBack` fallback and a failed revalidation are logged in the host, not in the child.
///
/// # Thread safety
/// Any thread; calls overlap in the child as they would in process.
public final class IsolatedInterceptor: PagingInterceptor, CustomStringConvertible, Sendable {
    public typealias Key = PluginKey
    public typealias Value = PluginItem

    let process: PluginProcess
    private let sink: PluginLogSink
    private let revalidationWarning = RevalidationWarning()

    init(_ spec: PluginProcess.Spec, sink: @escaping PluginLogSink) throws(IsolationStartError) {
        process = try PluginProcess(spec, sink: sink)
        self.sink = sink
    }

    /// Ends the child process (SIGTERM, then SIGKILL to its process group) and reaps it.
    public func destroy() { process.shutDown() }

    /// The plugin as errors name it: "id (library path)".
    public var description: String { process.label }

    /// The library the child loads.
    public var library: String { process.spec.library }

    /// The process id of the running child, if one runs.
    public var childPID: Int32? { process.childPID }

    /// The plugin's id, version and ABI version, as its child loaded it.
    public var identity: IsolatedPluginIdentity { process.identity }

    /// Whether the plugin can serve now (`paging.health/1`), asked in its child.
    public func health() -> PluginHealth { process.health() }

    /// The host's figures of the intercepts (round trips included), with the counters and
    /// gauges the running child's plugin published.
    public var stats: PluginStats.Snapshot { process.figures }

    public func intercept(request: PluginRequest) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        try await process.measured({ try await crossIntercept(request) }, completed: { result in
            switch result {
            case .complete, .completeThenRevalidate: true
            case .proceed, .proceedOrFallBack: false
            }
        })
    }

    private func crossIntercept(_ request: PluginRequest) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        var reader = try await process.call(.intercept) { $0.request(request) }
        func page() throws -> PluginPage {
            var page = try process.checked { try reader.page(base: request.params) }
            page.request = request
            return page
        }
        switch try reader.u8() {
        case 0:
            let observe = try reader.bool()
            guard try reader.bool() else { return .proceed(request, handleAfterwards: observe) }
            return .proceed(try process.checked({ try reader.request(base: request.params) }, rewriting: request), handleAfterwards: observe)
        case 1:
            return .complete(try page())
        case 2:
            return .completeThenRevalidate(try page())
        case 3:
            let next = try process.checked({ try reader.request(base: request.params) }, rewriting: request)
            return .proceedOrFallBack(next, fallback: try page()) { [sink, process] error in
                sink(.warning, process.label, "the load failed (\(error)); answered with the page this plugin holds")
            }
        case let tag:
            throw PluginError(.internal, "the isolated plugin answered an unknown intercept result \(tag)", plugin: process.label)
        }
    }

    public func handle(page: PluginPage) async {
        do {
            _ = try await process.call(.handle) { $0.page(page) }
        } catch {
            sink(.warning, process.label, "handle failed: \(error)")
        }
    }

    /// The page as the plugin's `transform` leaves it; without one, the page after
    /// ``handle(page:)``, whose failure (a timeout) fails no load, as in process.
    public func transform(page: PluginPage) async throws -> PluginPage {
        guard process.transforms else {
            await handle(page: page)
            return page
        }
        do {
            var reader = try await process.call(.transform) { $0.page(page) }
            var result = try process.checked { try reader.page(base: page.request.params) }
            result.request = page.request
            return result
        } catch {
            process.countFailure(error)
            throw error
        }
    }

    /// Says so in the host (at most once a minute), then tells the child as ``loadFailed(_:error:)`` does.
    public func revalidationFailed(_ request: PluginRequest, error: any Error) async {
        if let line = revalidationWarning.line(for: error) { sink(.warning, process.label, line) }
        await loadFailed(request, error: error)
    }

    public func loadFailed(_ request: PluginRequest, error: any Error) async {
        let (status, message) = PluginStatus.of(error)
        do {
            _ = try await process.call(.loadFailed) { frame in
                frame.request(request)
                frame.u32(status.rawValue)
                frame.string(message)
            }
        } catch is CancellationError {
            // The load was cancelled (a client of pager serve went away): nothing to say.
        } catch {
            sink(.warning, process.label, "telling the isolated plugin that a load failed did not work: \(error)")
        }
    }
}
