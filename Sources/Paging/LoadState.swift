/// Where loading in one direction (refresh, prepend or append) stands.
public enum LoadState: Sendable {
    /// Nothing is loading; more can be loaded.
    case idle
    /// A load is in flight.
    case loading
    /// The last load failed with this error; ``PaginationManager/retry()`` tries again.
    case failed(any Error)
    /// There is nothing more to load in this direction (the source returned no key for it).
    case endReached

    @inlinable
    public var isLoading: Bool { if case .loading = self { true } else { false } }
    @inlinable
    public var isEndReached: Bool { if case .endReached = self { true } else { false } }
    @inlinable
    public var isIdle: Bool { if case .idle = self { true } else { false } }
    /// The error of a failed load.
    public var error: (any Error)? { if case .failed(let error) = self { error } else { nil } }
}

extension LoadState: CustomStringConvertible {
    public var description: String {
        switch self {
        case .idle: "idle"
        case .loading: "loading"
        case .failed(let error): "failed(\(error))"
        case .endReached: "end reached"
        }
    }
}

/// Everything an app shows of a paged list: the values, what is loading, what failed.
public struct PaginationManagerOutput<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// The values loaded so far, in order.
    public var values: PagedValues<Key, Value>
    public var refreshState: LoadState
    public var prependState: LoadState
    public var appendState: LoadState
    /// The error of the most recent failed load in any direction, kept after later successes.
    public var lastError: (any Error)?
    /// The refresh the values come from (the manager's generation when it was planned).
    @usableFromInline var generation: UInt64 = 0
    /// Where `values[0]` stands among the values loaded since that refresh: pages dropped at the
    /// start add their counts, pages prepended subtract theirs.
    @usableFromInline var origin = 0

    @inlinable
    public init(values: PagedValues<Key, Value> = PagedValues(), refreshState: LoadState = .idle,
                prependState: LoadState = .idle, appendState: LoadState = .idle, lastError: (any Error)? = nil) {
        self.values = values
        self.refreshState = refreshState
        self.prependState = prependState
        self.appendState = appendState
        self.lastError = lastError
    }

    /// Where the value at `index` of an `earlier` output of the same manager is in this one:
    /// `nil` when a refresh came in between or the value is no longer held. Pages prepended or
    /// dropped at the start (``PaginationManager/Configuration/maxSize``) move every value, so
    /// a row on screen is only an index into the output it was drawn from.
    @inlinable
    public func index(_ index: Int, from earlier: Self) -> Int? {
        guard earlier.generation == generation else { return nil }
        let moved = index + earlier.origin - origin
        return values.indices.contains(moved) ? moved : nil
    }

    @inlinable
    public var isRefreshing: Bool { refreshState.isLoading }
    @inlinable
    public var isPrepending: Bool { prependState.isLoading }
    @inlinable
    public var isAppending: Bool { appendState.isLoading }

    /// The load state of one direction.
    @inlinable
    public subscript(kind: PagingRequestKind) -> LoadState {
        get {
            switch kind {
            case .refresh: refreshState
            case .prepend: prependState
            case .append: appendState
            }
        }
        set {
            switch kind {
            case .refresh: refreshState = newValue
            case .prepend: prependState = newValue
            case .append: appendState = newValue
            }
        }
    }
}
