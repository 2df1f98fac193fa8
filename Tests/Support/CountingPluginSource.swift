// An upstream for shared-cache tests: a source over the loaded pipelines' types that counts
// every fetch and can hold its fetches until the test opens a gate.
import Foundation
import Paging
import PagingHost
import Synchronization

/// Serves `count` items {"n": i} in pages whose keys are item offsets ("0", "10", ...), counts
/// its fetches, and while ``hold()`` is in force keeps every fetch waiting until ``open()``.
/// One instance can stand behind several pipelines: it is the upstream they share.
public final class CountingPluginSource: PagingSource, Sendable {
    public let refreshKey: PluginKey = "0"
    public let count: Int
    private let state = Mutex<(fetches: Int, held: Bool, waiting: [CheckedContinuation<Void, Never>], failing: Bool)>((0, false, [], false))

    public init(count: Int = 100) {
        self.count = count
    }

    /// How many fetches reached the source.
    public var fetches: Int { state.withLock { $0.fetches } }

    /// Fetches from now on wait until ``open()``.
    public func hold() { state.withLock { $0.held = true } }

    /// Lets every waiting fetch go on, and those to come.
    public func open() {
        let waiting = state.withLock { state in
            state.held = false
            defer { state.waiting = [] }
            return state.waiting
        }
        for continuation in waiting { continuation.resume() }
    }

    /// Fetches from now on fail (transient), until called with false.
    public func fail(_ failing: Bool) { state.withLock { $0.failing = failing } }

    public func keyChain(for key: PluginKey, pageSize: Int) -> PagingKeyChain<PluginKey> {
        let offset = Int(key.text ?? "") ?? 0
        return PagingKeyChain(key: key, prevKey: offset > 0 ? PluginKey("\(max(0, offset - pageSize))") : nil,
                              nextKey: offset + pageSize < count ? PluginKey("\(offset + pageSize)") : nil)
    }

    public func keyChain(for key: PluginKey) -> PagingKeyChain<PluginKey> { keyChain(for: key, pageSize: 10) }

    public func fetch(request: PagingRequest<PluginKey>) async throws -> Page<PluginKey, PluginItem> {
        let (held, failing) = state.withLock { state in
            state.fetches += 1
            return (state.held, state.failing)
        }
        if held {
            await withCheckedContinuation { continuation in
                let stillHeld = state.withLock { state in
                    if state.held { state.waiting.append(continuation) }
                    return state.held
                }
                if !stillHeld { continuation.resume() }
            }
        }
        if failing { throw CountingSourceError() }
        let offset = Int(request.key.text ?? "") ?? 0
        let items = (offset..<min(count, offset + request.params.pageSize)).map { PluginItem(json: #"{"n":\#($0)}"#) }
        return Page(request: request, values: items)
    }
}

/// The failure of a ``CountingPluginSource`` told to fail (retryable).
public struct CountingSourceError: Error, RetryClassifiedError {
    public var isRetryable: Bool { true }
}

/// Waits (up to 60 s, looking every 10 ms) until `condition` holds; returns whether it did.
public func eventually(_ condition: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .seconds(60)
    while ContinuousClock.now < deadline {
        if try await condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try await condition()
}
