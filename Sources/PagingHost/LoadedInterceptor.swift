import CPaging
import Foundation
import Paging
import Synchronization

/// An interceptor plugin from a loaded library, as a ``PagingInterceptor`` of the engine: it
/// runs in the same ``Pager`` as in-process Swift interceptors.
///
/// Calls into the plugin are serialized unless its descriptor says it is thread-safe. What the
/// plugin hands back through the host table is checked: NULL data with a length, or an unknown
/// result code, fails the load with a ``PluginError`` instead of being read.
public final class LoadedInterceptor: PagingInterceptor, @unchecked Sendable {
    public typealias Key = PluginKey
    public typealias Value = PluginItem

    public let descriptor: PluginDescriptor
    public let library: PluginLibrary
    let instance: PluginInstance
    private let plugin: UnsafeMutablePointer<paging_interceptor_t>
    private let calls: SerializedCalls

    init(library: PluginLibrary, descriptor: PluginDescriptor, instance: PluginInstance,
         plugin: UnsafeMutablePointer<paging_interceptor_t>) {
        self.library = library
        self.descriptor = descriptor
        self.instance = instance
        self.plugin = plugin
        calls = SerializedCalls(serialized: !descriptor.isThreadSafe)
    }

    deinit { destroy() }

    public func intercept(request: PluginRequest) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        var out = InterceptOut(limits: instance.limits)
        let code: UInt32? = calls.run { [plugin] () -> UInt32? in
            guard let intercept = plugin.pointee.intercept else { return nil }
            return CView.withRequest(request) { view in
                withUnsafeMutablePointer(to: &out) { intercept(plugin, view, OpaquePointer($0)) }
            }
        }
        out.magic = 0
        guard let code else { throw failure(.internal, "the plugin was destroyed") }
        if let misuse = out.misuse { throw failure(.invalidArgument, misuse) }
        switch code {
        case PAGING_INTERCEPT_PROCEED, PAGING_INTERCEPT_PROCEED_AND_OBSERVE:
            var next = request
            if let key = out.key { next.keyChain = PagingKeyChain(key: key) }
            if let pageSize = out.pageSize { next.params.pageSize = pageSize }
            next.params.userInfo.merge(out.params) { $1 }
            return .proceed(next, handleAfterwards: code == PAGING_INTERCEPT_PROCEED_AND_OBSERVE && plugin.pointee.handle != nil)
        case PAGING_INTERCEPT_COMPLETE:
            return .complete(out.page.page(for: request))
        case PAGING_INTERCEPT_FAIL:
            let (status, message) = out.failure ?? (.internal, "intercept returned FAIL without out_fail")
            throw failure(status, message)
        default:
            throw failure(.internal, "intercept returned unknown code \(code)")
        }
    }

    public func handle(page: PluginPage) async {
        calls.run { [plugin] in
            guard let handle = plugin.pointee.handle else { return }
            CView.withPage(page) { handle(plugin, $0) }
        }
    }

    /// Destroys the plugin instance; later calls fail. Called by deinit if not before.
    public func destroy() {
        calls.close { [plugin] in plugin.pointee.destroy?(plugin) }
        instance.destroyed.store(true, ordering: .releasing)
    }

    private func failure(_ status: PluginStatus, _ message: String) -> PluginError {
        PluginError(status, message, plugin: instance.label)
    }
}

/// Runs calls into a plugin instance one at a time (unless it is thread-safe), and never
/// after it was destroyed.
final class SerializedCalls: Sendable {
    private let lock = Mutex(false) // destroyed
    private let serialized: Bool
    private let closed = Atomic<Bool>(false)
    /// Calls running outside the lock (thread-safe instances, `cancel`); `close` waits for them.
    private let unlocked = Atomic<Int>(0)

    init(serialized: Bool) {
        self.serialized = serialized
    }

    /// Runs `body` unless the instance is destroyed (then returns `nil`).
    @discardableResult
    func run<R>(_ body: () -> R?) -> R? {
        if serialized {
            return lock.withLock { destroyed in destroyed ? nil : body() }
        }
        return unlessClosed(body)
    }

    /// Runs a call the ABI allows from any thread at any time (`cancel`), unless destroyed.
    func runUnserialized(_ body: () -> Void) {
        _ = unlessClosed { body() }
    }

    /// Counted, so that `close` sees either this call or `closed` set before it (both seq-cst).
    private func unlessClosed<R>(_ body: () -> R?) -> R? {
        unlocked.add(1, ordering: .sequentiallyConsistent)
        defer { unlocked.subtract(1, ordering: .sequentiallyConsistent) }
        guard !closed.load(ordering: .sequentiallyConsistent) else { return nil }
        return body()
    }

    /// Runs `destroy` once, after the calls in flight: destroy() is never concurrent with
    /// anything (the ABI's promise), also for thread-safe instances and cancel().
    func close(_ destroy: () -> Void) {
        let first = lock.withLock { destroyed -> Bool in
            defer { destroyed = true }
            return !destroyed
        }
        guard first, !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
        while unlocked.load(ordering: .sequentiallyConsistent) > 0 { sched_yield() }
        destroy()
    }
}
