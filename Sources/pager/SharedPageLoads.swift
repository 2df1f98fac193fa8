import Paging
import PagingHost

/// The page loads of `pager serve` in flight: requests that ask for the same page at once share
/// one load, which runs in a task of its own and is cancelled once no request waits for it.
/// (Run in the task of the request that came first, it was cancelled when that client went
/// away, and loaded again from the start for each of the others.)
final class SharedPageLoads: Sendable {
    private struct LoadKey: Hashable {
        let kind: PagingRequestKind
        let identity: PagingRequestIdentity<PluginKey>
    }

    private struct Load {
        let id: UInt64
        let task: Task<Void, Never>
        var waiters: [UInt64: CheckedContinuation<PluginPage, any Error>]
    }

    private let shared = Locked<(loads: [LoadKey: Load], nextID: UInt64)>(([:], 0))
    /// Loads no request waits for any more, cancelled, that have not ended yet (a plugin may
    /// go on after a cancel).
    private let abandoned: Locked<Int>

    init(countingAbandonedIn abandoned: Locked<Int>) {
        self.abandoned = abandoned
    }

    /// Requests waiting for a load another request started.
    var joinedCount: Int { shared.withLock { $0.loads.values.reduce(0) { $0 + $1.waiters.count - 1 } } }

    /// The page of `request`, loaded by `pager`, or by the load of the same page in flight. A
    /// request that must reach the source (a hard refresh, a reload) shares nothing.
    func load(_ request: PluginRequest, with pager: PluginPager) async throws -> PluginPage {
        guard !request.params.goesToSource else { return try await pager.load(request) }
        let key = LoadKey(kind: request.kind, identity: request.identity)
        let waiter = shared.withLock { state in
            defer { state.nextID += 1 }
            return state.nextID
        }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                shared.withLock { state in
                    guard !Task.isCancelled else { return continuation.resume(throwing: CancellationError()) }
                    if state.loads[key] != nil {
                        state.loads[key]!.waiters[waiter] = continuation
                        return
                    }
                    let id = state.nextID
                    state.nextID += 1
                    // It takes the lock to hand its page out: it cannot end before it is registered.
                    let task = Task { [self] in
                        let result: Result<PluginPage, any Error>
                        do { result = .success(try await pager.load(request)) } catch { result = .failure(error) }
                        let waiters = shared.withLock { state -> [CheckedContinuation<PluginPage, any Error>]? in
                            guard state.loads[key]?.id == id else { return nil }
                            return state.loads.removeValue(forKey: key).map { Array($0.waiters.values) }
                        }
                        guard let waiters else {
                            // Abandoned (and counted) when its last waiter went.
                            abandoned.withLock { $0 -= 1 }
                            return
                        }
                        for waiter in waiters { waiter.resume(with: result) }
                    }
                    state.loads[key] = Load(id: id, task: task, waiters: [waiter: continuation])
                }
            }
        } onCancel: {
            let (continuation, abandonedTask) = shared.withLock { state -> (CheckedContinuation<PluginPage, any Error>?, Task<Void, Never>?) in
                guard let continuation = state.loads[key]?.waiters.removeValue(forKey: waiter) else { return (nil, nil) }
                guard state.loads[key]!.waiters.isEmpty else { return (continuation, nil) }
                // The last waiter gone: a request for the page from now on starts a load of its
                // own. Counted before the lock is let go, which the load takes as it ends.
                abandoned.withLock { $0 += 1 }
                return (continuation, state.loads.removeValue(forKey: key)?.task)
            }
            abandonedTask?.cancel()
            continuation?.resume(throwing: CancellationError())
        }
    }
}
