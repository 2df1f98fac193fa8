import CIsolation
import CPaging
import FoundationEssentials
import Glibc
import Paging

/// The child side of an isolated plugin (`pager __isolate`): loads one plugin with the
/// host's own types (``PluginLibrary``, ``LoadedSource``, ``LoadedInterceptor``) and serves
/// the parent's calls over the socket on fd 3, each call in a task of its own, so that
/// calls overlap as they would in the parent.
package enum IsolationServer {
    /// Splits the child into the reaper of what the plugin orphans, which stays, and the
    /// server, which returns (``ProcessTree/startReaper(parent:workerFD:reportFD:)``). Called
    /// first thing, while the process has one thread. `arguments` are those after `__isolate`:
    /// the parent's pid.
    package static func startReaper(_ arguments: [String]) {
        guard let parent = arguments.first.flatMap({ Int32($0) }), ProcessTree.startReaper(parent: parent, workerFD: 3) else {
            writeToStandardError("pager __isolate: the parent process is gone or was not named\n")
            exit(70)
        }
    }

    /// Serves until the parent closes its side of the socket (the plugin is then destroyed and
    /// the process exits) or ends (the reaper then ends this process); after
    /// ``startReaper(_:)``.
    package static func run() async -> Never {
        let socket = WireSocket(fd: 3)
        let writer = Locked(())
        let send: @Sendable ([UInt8]) -> Void = { frame in
            writer.withLock { _ in
                if !socket.send(frame) { exit(0) }
            }
        }
        guard let body = socket.receive(), var start = try? WireReader(body), start.op == IsolationOp.start.rawValue else { exit(0) }
        let served: Served
        do {
            served = try load(&start, send: send)
        } catch {
            var frame = WireWriter(.failure, call: start.call)
            frame.u32(PluginStatus.invalidConfig.rawValue)
            frame.string("\(error)")
            frame.u64(UInt64.max)
            send(frame.finish())
            // A library stuck in its constructors holds the loader's lock, which exit() waits for.
            if PluginLibrary.isLoaderStuck { _exit(0) }
            exit(0)
        }
        var ready = WireWriter(.reply, call: start.call)
        ready.string(served.label)
        let (descriptor, library) = served.origin
        ready.string(descriptor.id)
        ready.string(descriptor.version)
        ready.string(library.abiVersion.description)
        if case .source(let source) = served {
            ready.data(source.refreshKey.bytes)
            // The source's invalidations, for the host's manager.
            let signals = source.invalidation?.signals()
            Task {
                guard let signals else { return }
                for await _ in signals { send(WireWriter(.invalidated, call: 0).finishedCopy()) }
            }
        }
        if case .interceptor(let interceptor) = served {
            ready.bool(interceptor.offeredExtensions.contains(PAGING_EXT_PAGE_TRANSFORM))
        }
        send(ready.finish())

        // Leader and followers: the thread that read a frame hands the reading on to an idle
        // thread (starting one when none is idle), then runs the call itself, at once
        // (`Task.immediate`): a call the plugin answers without suspending is answered on this
        // thread, with no hop to the pool, and a call that blocks holds only this thread.
        let threads = ServerThreads()
        let tasks = Locked<[UInt64: Task<Void, Never>]>([:])
        threads.body = { body in
            guard let reader = try? WireReader(body), let op = IsolationOp(rawValue: reader.op) else { exit(65) }
            let call = reader.call
            if op == .cancel {
                tasks.withLock { $0[call] }?.cancel()
                return
            }
            let finished = CallFlag()
            let task = Task.immediate {
                var reader = reader
                let frame = await answer(op, &reader, served)
                tasks.withLock { running in
                    running[call] = nil
                    finished.isSet = true
                }
                send(frame)
            }
            // Under the lock the task's removal takes: a call that finished is not recorded.
            tasks.withLock { running in
                if !finished.isSet { running[call] = task }
            }
        }
        threads.socket = socket
        threads.closed = {
            // The host closed its side: asked to end, the plugin is destroyed as it would be in
            // the host's own process (calls still running end as they do there), then its
            // library is told (deinit).
            served.destroy()
            PluginLibrary.shutDown()
            // A destroy() left running would run under the libraries' destructors.
            if PluginLibrary.isLoaderStuck || PluginLibrary.isDestroyLeftRunning { _exit(0) }
            exit(0)
        }
        threads.start()
        while true { try? await Task.sleep(for: .seconds(86_400)) }
    }

    private enum Served: Sendable {
        case source(LoadedSource)
        case interceptor(LoadedInterceptor)

        var label: String {
            switch self {
            case .source(let source): source.description
            case .interceptor(let interceptor): interceptor.instance.label
            }
        }

        var origin: (PluginDescriptor, PluginLibrary) {
            switch self {
            case .source(let source): (source.descriptor, source.library)
            case .interceptor(let interceptor): (interceptor.descriptor, interceptor.library)
            }
        }

        var health: PluginHealth {
            switch self {
            case .source(let source): source.health()
            case .interceptor(let interceptor): interceptor.health()
            }
        }

        func destroy() {
            switch self {
            case .source(let source): source.destroy()
            case .interceptor(let interceptor): interceptor.destroy()
            }
        }

        var stats: PluginStats.Snapshot {
            switch self {
            case .source(let source): source.stats
            case .interceptor(let interceptor): interceptor.stats
            }
        }
    }

    private static func load(_ reader: inout WireReader, send: @escaping @Sendable ([UInt8]) -> Void) throws -> Served {
        let path = try reader.string()
        let sha256 = try reader.bool() ? try reader.string() : nil
        let id = try reader.bool() ? try reader.string() : nil
        let isSource = try reader.u8() == 0
        let config = try JSONValue.parse(try reader.string())
        let maxItems = Int(try reader.u64()), maxBytes = Int(try reader.u64())
        let fetchTimeout = Duration.milliseconds(Int64(try reader.u64()))
        let callTimeout = try reader.bool() ? (Duration.milliseconds(Int64(try reader.u64())), origin: try reader.string()) : nil
        let logLevel = PluginLogLevel(rawValue: try reader.u32()) ?? .trace
        let recordsStats = try reader.bool()
        var limits = PluginLimits(maxItemsPerPage: maxItems, maxPageBytes: maxBytes, fetchTimeout: fetchTimeout,
                                  callTimeout: callTimeout?.0, logLevel: logLevel, recordsStats: recordsStats)
        // Its messages name the setting the bound came from, as the host's would.
        if let origin = callTimeout?.origin { limits.callTimeoutOrigin = origin }
        let sink: PluginLogSink = { level, plugin, message in
            var frame = WireWriter(.log, call: 0)
            frame.u32(level.rawValue)
            frame.string(plugin)
            frame.string(message)
            send(frame.finish())
        }
        let library = try PluginLibrary.open(path: path, sha256: sha256, within: limits.lifecycleTimeout) { note in sink(.warning, path, note.description) }
        if isSource { return .source(try library.makeSource(id: id, config: config, sink: sink, limits: limits)) }
        return .interceptor(try library.makeInterceptor(id: id, config: config, sink: sink, limits: limits))
    }

    /// The answer frame of one call.
    private static func answer(_ op: IsolationOp, _ reader: inout WireReader, _ served: Served) async -> [UInt8] {
        let call = reader.call
        let params = PagingRequestParams(pageSize: 1)
        do {
            var frame = WireWriter(.reply, call: call)
            switch (op, served) {
            case (.fetch, .source(let source)):
                frame.page(try await source.fetch(request: try reader.request(base: params)))
            case (.keyChain, .source(let source)):
                let key = PluginKey(bytes: try reader.data())
                let chain = source.keyChain(for: key, pageSize: Int(try reader.u32()))
                frame.optionalKey(chain.prevKey)
                frame.optionalKey(chain.nextKey)
            case (.refreshKeyAt, .source(let source)):
                let pageKey = PluginKey(bytes: try reader.data())
                let index = Int(try reader.u32())
                let item = PluginItem(bytes: try reader.data())
                let anchor = PagingAnchor(pageKey: pageKey, indexInPage: index, value: item, pageSize: Int(try reader.u32()))
                frame.optionalKey(source.refreshKey(around: anchor))
            case (.health, _):
                frame.health(served.health)
            case (.published, _):
                frame.published(served.stats)
            case (.intercept, .interceptor(let interceptor)):
                let request = try reader.request(base: params)
                switch try await interceptor.intercept(request: request) {
                case .proceed(let next, let observe):
                    frame.u8(0)
                    frame.bool(observe)
                    let same = next.kind == request.kind && next.keyChain == request.keyChain
                        && next.params.pageSize == request.params.pageSize && next.params.userInfo == request.params.userInfo
                    frame.bool(!same)
                    if !same { frame.request(next) }
                case .complete(let page):
                    frame.u8(1)
                    frame.page(page)
                case .completeThenRevalidate(let page):
                    frame.u8(2)
                    frame.page(page)
                case .proceedOrFallBack(let next, let fallback, _):
                    frame.u8(3)
                    frame.request(next)
                    frame.page(fallback)
                }
            case (.transform, .interceptor(let interceptor)):
                frame.page(try await interceptor.transform(page: try reader.page(base: params)))
            case (.handle, .interceptor(let interceptor)):
                await interceptor.handle(page: try reader.page(base: params))
            case (.loadFailed, .interceptor(let interceptor)):
                let request = try reader.request(base: params)
                let status = PluginStatus(rawValue: try reader.u32())
                await interceptor.loadFailed(request, error: HeardFailure(status: status, message: try reader.string()))
            default:
                throw PluginError(.internal, "the isolated plugin got an operation it does not serve (\(op))", plugin: served.label)
            }
            return frame.finish()
        } catch {
            var frame = WireWriter(.failure, call: call)
            let (status, message, retryAfter): (PluginStatus, String, Duration?) = switch error {
            case let error as PluginError: (error.status, error.message, error.retryAfter)
            case is CancellationError: (.cancelled, "the load was cancelled", nil)
            default: (.internal, "\(error)", nil)
            }
            frame.u32(status.rawValue)
            frame.string(message)
            frame.u64(retryAfter?.wholeMilliseconds ?? UInt64.max)
            return frame.finish()
        }
    }
}

/// Set under the server's task lock once a call has finished.
private final class CallFlag: @unchecked Sendable {
    var isSet = false
}

/// The isolated plugin server's reading threads: one reads at a time; the others are idle or
/// run the call they read.
private final class ServerThreads: @unchecked Sendable {
    var body: @Sendable ([UInt8]) -> Void = { _ in }
    /// Called, once, when the socket closes: ends the process.
    var closed: @Sendable () -> Never = { exit(0) }
    var socket = WireSocket(fd: -1)
    private let condition = Condition()
    private var reading = false
    private var idle = 0

    func start() { spawn() }

    private func spawn() {
        detachThread(named: "paging-isolate") { [self] in loop() }
    }

    private func loop() {
        while true {
            condition.lock()
            while reading {
                idle += 1
                condition.wait()
                idle -= 1
            }
            reading = true
            condition.unlock()
            // The parent closed the socket or went away: nothing more to serve. (The reading
            // is handed on only after a frame: one thread sees the end.)
            guard let frame = socket.receive() else { closed() }
            condition.lock()
            reading = false
            let none = idle == 0
            if !none { condition.signal() }
            condition.unlock()
            if none { spawn() }
            body(frame)
        }
    }
}
