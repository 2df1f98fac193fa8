/// What a request asks for: the first page, a page before the loaded ones, or a page after them.
public enum PagingRequestKind: String, Hashable, Sendable, CaseIterable {
    /// Load from the source's refresh key, replacing everything loaded so far.
    case refresh
    /// Load the page before the first loaded page.
    case prepend
    /// Load the page after the last loaded page.
    case append
}

extension PagingRequestKind {
    /// The case as a small number, for hashing and comparing without the raw value's text.
    @inlinable
    var ordinal: UInt8 {
        switch self {
        case .refresh: 0
        case .prepend: 1
        case .append: 2
        }
    }

    /// Pattern-matched rather than `== .refresh`, which may compare the raw values' text.
    @inlinable
    var isRefresh: Bool { if case .refresh = self { true } else { false } }
}

/// Well-known keys of ``PagingRequestParams/userInfo``.
public enum PagingUserInfoKey {
    /// `"true"` asks persistent stores and caches to drop what they hold before loading
    /// (a hard refresh) instead of serving the request from what they hold.
    public static let hardRefresh = "hard_refresh"
}

/// The parameters that travel with a request through the interceptors to the source.
public struct PagingRequestParams: Sendable {
    /// How many values the page should hold.
    public var pageSize: Int
    /// How the ``Pager`` retries a failed fetch of this request.
    public var retryPolicy: RetryPolicy
    /// Free-form values for interceptors and sources (a query, a hard-refresh flag, ...).
    public var userInfo: [String: String]

    @inlinable
    public init(pageSize: Int, retryPolicy: RetryPolicy = .none, userInfo: [String: String] = [:]) {
        self.pageSize = pageSize
        self.retryPolicy = retryPolicy
        self.userInfo = userInfo
    }

    /// Whether ``userInfo`` asks for a hard refresh (see ``PagingUserInfoKey/hardRefresh``).
    @inlinable
    public var isHardRefresh: Bool { !userInfo.isEmpty && userInfo[PagingUserInfoKey.hardRefresh] == "true" }
}

/// A request for one page: its kind, its key chain and its parameters.
public struct PagingRequest<Key: Hashable & Sendable>: Sendable {
    public var kind: PagingRequestKind
    public var keyChain: PagingKeyChain<Key>
    public var params: PagingRequestParams

    @inlinable
    public init(kind: PagingRequestKind, keyChain: PagingKeyChain<Key>, params: PagingRequestParams) {
        self.kind = kind
        self.keyChain = keyChain
        self.params = params
    }

    /// The key of the requested page.
    @inlinable
    public var key: Key { keyChain.key }

    /// What makes two requests the same for deduplication and caching: kind, key chain and page size.
    @inlinable
    var identity: Identity { Identity(kind: kind, keyChain: keyChain, pageSize: params.pageSize) }

    /// Hashing and equality are written out and @inlinable (the derived ones are not), so that
    /// the Pager's specialized code hashes it without generic metadata lookups.
    @usableFromInline
    struct Identity: Hashable, Sendable {
        @usableFromInline var kind: PagingRequestKind
        @usableFromInline var keyChain: PagingKeyChain<Key>
        @usableFromInline var pageSize: Int

        @inlinable
        init(kind: PagingRequestKind, keyChain: PagingKeyChain<Key>, pageSize: Int) {
            self.kind = kind
            self.keyChain = keyChain
            self.pageSize = pageSize
        }

        @inlinable
        static func == (lhs: Identity, rhs: Identity) -> Bool {
            lhs.kind.ordinal == rhs.kind.ordinal && lhs.pageSize == rhs.pageSize && lhs.keyChain == rhs.keyChain
        }

        @inlinable
        func hash(into hasher: inout Hasher) {
            // The case's ordinal: a String raw-value enum hashes its raw value's text.
            hasher.combine(kind.ordinal)
            hasher.combine(keyChain)
            hasher.combine(pageSize)
        }
    }
}

extension PagingRequest: CustomStringConvertible {
    public var description: String {
        "\(kind)(key: \(key), prev: \(keyChain.prevKey.map { "\($0)" } ?? "nil"), "
            + "next: \(keyChain.nextKey.map { "\($0)" } ?? "nil"), pageSize: \(params.pageSize))"
    }
}
