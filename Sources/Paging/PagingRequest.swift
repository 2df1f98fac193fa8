/// What a request asks for: the first page, a page before the loaded ones, or a page after them.
public enum PagingRequestKind: String, Hashable, Sendable, CaseIterable {
    /// Load from the source's refresh key, replacing everything loaded so far.
    case refresh
    /// Load the page before the first loaded page.
    case prepend
    /// Load the page after the last loaded page.
    case append
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

    public init(pageSize: Int, retryPolicy: RetryPolicy = .none, userInfo: [String: String] = [:]) {
        self.pageSize = pageSize
        self.retryPolicy = retryPolicy
        self.userInfo = userInfo
    }

    /// Whether ``userInfo`` asks for a hard refresh (see ``PagingUserInfoKey/hardRefresh``).
    public var isHardRefresh: Bool { userInfo[PagingUserInfoKey.hardRefresh] == "true" }
}

/// A request for one page: its kind, its key chain and its parameters.
public struct PagingRequest<Key: Hashable & Sendable>: Sendable {
    public var kind: PagingRequestKind
    public var keyChain: PagingKeyChain<Key>
    public var params: PagingRequestParams

    public init(kind: PagingRequestKind, keyChain: PagingKeyChain<Key>, params: PagingRequestParams) {
        self.kind = kind
        self.keyChain = keyChain
        self.params = params
    }

    /// The key of the requested page.
    public var key: Key { keyChain.key }

    /// What makes two requests the same for deduplication and caching: kind, key chain and page size.
    var identity: Identity { Identity(kind: kind, keyChain: keyChain, pageSize: params.pageSize) }

    struct Identity: Hashable, Sendable {
        var kind: PagingRequestKind
        var keyChain: PagingKeyChain<Key>
        var pageSize: Int
    }
}

extension PagingRequest: CustomStringConvertible {
    public var description: String {
        "\(kind)(key: \(key), prev: \(keyChain.prevKey.map { "\($0)" } ?? "nil"), "
            + "next: \(keyChain.nextKey.map { "\($0)" } ?? "nil"), pageSize: \(params.pageSize))"
    }
}
