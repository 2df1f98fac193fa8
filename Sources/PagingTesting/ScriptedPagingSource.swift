import Paging
import Synchronization

/// An in-memory ``PagingSource`` for tests: pages held in an array, keys are page numbers, and
/// each fetch can be scripted to fail, wait, hang until released, or answer differently.
///
/// Keys run from `firstKey` to `firstKey + pages.count - 1`; the key chain links neighbours
/// and ends at both ends. Every fetch is recorded, so tests can count them.
///
/// ```swift
/// let source = ScriptedPagingSource(pages: [[1, 2], [3, 4]])
/// source.script(key: 1, .fail(ScriptedError("offline")))   // the first fetch of page 1 fails
/// ```
///
/// # Thread safety
/// Every method may be called from any task.
public final class ScriptedPagingSource<Value: Sendable>: PagingSource {
    public typealias Key = Int

    /// What one fetch of a key does.
    public enum Step: Sendable {
        /// Throw this error.
        case fail(any Error)
        /// Wait, then answer with the page.
        case delay(Duration)
        /// Wait until ``ScriptedPagingSource/release(key:)`` (or the task's cancellation), then
        /// answer with the page.
        case suspend
        /// Wait like ``suspend``, then throw this error.
        case suspendThenFail(any Error)
        /// Answer with these values instead of the page.
        case values([Value])
    }

    /// The error of a fetch for a key that has no page.
    public struct MissingPage: Error, Equatable {
        public let key: Int
    }

    public let refreshKey: Int
    private let state: Locked<State>

    private struct State {
        var firstKey: Int
        var pages: [[Value]]
        var scripts: [Int: [Step]] = [:]
        var fetchedKeys: [Int] = []
        var suspended: [Int: [Int: CheckedContinuation<Void, Never>]] = [:]
        var nextSuspension = 0
        /// Callers of ``waitUntilSuspended(count:)``: how many suspended fetches each waits for.
        var waiters: [Int: (count: Int, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0

        var suspendedCount: Int { suspended.values.reduce(0) { $0 + $1.count } }

        /// The waiters whose count is reached, taken out (to resume outside the lock).
        mutating func reachedWaiters() -> [CheckedContinuation<Void, Never>] {
            let count = suspendedCount
            let reached = waiters.filter { $0.value.count <= count }
            for id in reached.keys { waiters[id] = nil }
            return reached.values.map(\.continuation)
        }
    }

    /// - Parameters:
    ///   - pages: the values of each page, in order.
    ///   - firstKey: the key of `pages[0]`.
    ///   - refreshKey: where a refresh starts; `firstKey` by default.
    public init(pages: [[Value]], firstKey: Int = 0, refreshKey: Int? = nil) {
        self.refreshKey = refreshKey ?? firstKey
        state = Locked(State(firstKey: firstKey, pages: pages))
    }

    /// Replaces the pages (data that changed on the server).
    public func setPages(_ pages: [[Value]]) {
        state.withLock { $0.pages = pages }
    }

    /// Queues steps for the next fetches of `key`, one step a fetch; after them the page is
    /// served as usual.
    public func script(key: Int, _ steps: Step...) {
        state.withLock { $0.scripts[key, default: []].append(contentsOf: steps) }
    }

    /// The keys fetched so far, in the order the fetches started.
    public var fetchedKeys: [Int] { state.withLock { $0.fetchedKeys } }

    /// How many fetches started.
    public var fetchCount: Int { state.withLock { $0.fetchedKeys.count } }

    /// How many fetches started for `key`.
    public func fetchCount(forKey key: Int) -> Int {
        state.withLock { $0.fetchedKeys.lazy.filter { $0 == key }.count }
    }

    /// How many fetches are suspended at a ``Step/suspend`` step.
    public var suspendedCount: Int { state.withLock { $0.suspendedCount } }

    /// Waits until at least `count` fetches are suspended, or the task is cancelled (it
    /// returns then). It waited by yielding in a loop: a fetch that never came kept a core
    /// busy, and a cancelled test hung.
    public func waitUntilSuspended(count: Int = 1) async {
        let id = state.withLock { state in
            defer { state.nextWaiter += 1 }
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready = state.withLock { state in
                    if Task.isCancelled || state.suspendedCount >= count { return true }
                    state.waiters[id] = (count, continuation)
                    return false
                }
                if ready { continuation.resume() }
            }
        } onCancel: {
            state.withLock { $0.waiters.removeValue(forKey: id) }?.continuation.resume()
        }
    }

    /// Lets every suspended fetch of `key` go on.
    public func release(key: Int) {
        let waiting = state.withLock { $0.suspended.removeValue(forKey: key) ?? [:] }
        for continuation in waiting.values { continuation.resume() }
    }

    public func keyChain(for key: Int) -> PagingKeyChain<Int> {
        let (firstKey, count) = state.withLock { ($0.firstKey, $0.pages.count) }
        return PagingKeyChain(key: key,
                              prevKey: key > firstKey ? key - 1 : nil,
                              nextKey: key < firstKey + count - 1 ? key + 1 : nil)
    }

    public func fetch(request: PagingRequest<Int>) async throws -> Page<Int, Value> {
        let key = request.key
        let step = state.withLock { state -> Step? in
            state.fetchedKeys.append(key)
            guard var steps = state.scripts[key], !steps.isEmpty else { return nil }
            let step = steps.removeFirst()
            state.scripts[key] = steps
            return step
        }
        switch step {
        case .fail(let error):
            throw error
        case .delay(let duration):
            try await Task.sleep(for: duration)
        case .suspend:
            try await suspend(key: key)
        case .suspendThenFail(let error):
            try await suspend(key: key)
            throw error
        case .values(let values):
            return Page(request: request, values: values)
        case nil:
            break
        }
        let values = try state.withLock { state -> [Value] in
            let index = key - state.firstKey
            guard state.pages.indices.contains(index) else { throw MissingPage(key: key) }
            return state.pages[index]
        }
        return Page(request: request, values: values)
    }

    private func suspend(key: Int) async throws {
        let id = state.withLock { state in
            defer { state.nextSuspension += 1 }
            return state.nextSuspension
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let reached = state.withLock { state -> [CheckedContinuation<Void, Never>]? in
                    if Task.isCancelled { return nil }
                    state.suspended[key, default: [:]][id] = continuation
                    return state.reachedWaiters()
                }
                guard let reached else { return continuation.resume() }
                for waiter in reached { waiter.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { $0.suspended[key]?.removeValue(forKey: id) }
            continuation?.resume()
        }
        try Task.checkCancellation()
    }
}

/// A simple error for scripted failures, retryable unless told otherwise.
public struct ScriptedError: Error, Equatable, RetryClassifiedError, CustomStringConvertible {
    public let message: String
    public let isRetryable: Bool

    public init(_ message: String, isRetryable: Bool = true) {
        self.message = message
        self.isRetryable = isRetryable
    }

    public var description: String { message }
}
