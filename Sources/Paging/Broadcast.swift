import Synchronization

/// Fans values out to any number of `AsyncStream` subscribers.
///
/// Yields happen under the lock so every subscriber sees values in the same order. A
/// subscriber's buffer is what it subscribed with (unbounded unless it said otherwise): a
/// consumer that stops iterating should cancel its task, which ends its stream and
/// unsubscribes it.
@usableFromInline
final class Broadcast<Element: Sendable>: Sendable {
    private struct Subscribers {
        var nextID = 0
        var continuations: [Int: AsyncStream<Element>.Continuation] = [:]
    }

    private let subscribers = Locked(Subscribers())
    /// Read without the lock so that publishing costs nothing while nobody listens.
    @usableFromInline let subscriberCount = Atomic<Int>(0)

    @usableFromInline
    init() {}

    /// A new stream that receives every value yielded from now on, starting with `initial`.
    func subscribe(initial: Element? = nil,
                   buffering: AsyncStream<Element>.Continuation.BufferingPolicy = .unbounded) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream.makeStream(of: Element.self, bufferingPolicy: buffering)
        let id = subscribers.withLock { state -> Int in
            let id = state.nextID
            state.nextID += 1
            state.continuations[id] = continuation
            if let initial { continuation.yield(initial) }
            subscriberCount.add(1, ordering: .relaxed)
            return id
        }
        continuation.onTermination = { [weak self] _ in self?.unsubscribe(id) }
        return stream
    }

    @inlinable
    var hasSubscribers: Bool { subscriberCount.load(ordering: .relaxed) > 0 }

    /// Inlinable, so that with nobody listening the value is never built (the check is one
    /// atomic load in the caller's specialized code).
    @inlinable
    func yield(_ value: @autoclosure () -> Element) {
        guard hasSubscribers else { return }
        send(value())
    }

    @usableFromInline
    func send(_ value: Element) {
        subscribers.withLock { state in
            guard !state.continuations.isEmpty else { return }
            for continuation in state.continuations.values { continuation.yield(value) }
        }
    }

    private func unsubscribe(_ id: Int) {
        subscribers.withLock { state in
            if state.continuations.removeValue(forKey: id) != nil {
                subscriberCount.subtract(1, ordering: .relaxed)
            }
        }
    }

    deinit {
        // Ends every stream, so consumers' loops finish with the owner.
        for continuation in subscribers.withLock({ Array($0.continuations.values) }) {
            continuation.finish()
        }
    }
}
