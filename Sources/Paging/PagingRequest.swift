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
    /// `"true"` asks stores and caches to load the request from the source instead of serving
    /// it from what they hold, and to replace all they hold with its page (a hard refresh): a
    /// load that fails leaves them as they were.
    public static let hardRefresh = "hard_refresh"
    /// `"true"` marks a request that loads again a page already loaded because it may have
    /// grown (a short last page; ``PaginationManager`` sets it): caches and stores let it go to
    /// the source, and replace the page they hold under its identity with its page.
    public static let reload = "reload"
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

    /// Whether the page must come from the source, not from a cache or a store: a hard refresh,
    /// or a reload (``PagingUserInfoKey/reload``).
    @inlinable
    public var goesToSource: Bool {
        !userInfo.isEmpty && (userInfo[PagingUserInfoKey.hardRefresh] == "true" || userInfo[PagingUserInfoKey.reload] == "true")
    }
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

    /// What identifies the page this request asks for (see ``PagingRequestIdentity``).
    @inlinable
    public var identity: PagingRequestIdentity<Key> { PagingRequestIdentity(self) }

    /// What the ``Pager`` shares in-flight loads and reuses recent pages by: the identity, per
    /// kind (a refresh starts a new generation and never joins a load of another kind).
    @inlinable
    var sharingKey: SharingKey { SharingKey(kind: kind.ordinal, identity: identity) }

    @usableFromInline
    struct SharingKey: Hashable, Sendable {
        @usableFromInline var kind: UInt8
        @usableFromInline var identity: PagingRequestIdentity<Key>

        @inlinable
        init(kind: UInt8, identity: PagingRequestIdentity<Key>) {
            self.kind = kind
            self.identity = identity
        }
    }
}

/// What identifies the page a request asks for, the one definition every cache, store and
/// deduplication uses (in-process, and in plugins through the C request's `identity`): the
/// page's key, the page size and the user info, except ``PagingUserInfoKey/hardRefresh`` and
/// ``PagingUserInfoKey/reload`` (how to load, not what). Two requests with equal identities
/// ask for the same page; any parameter that changes the answer (a query, a filter) belongs in
/// the user info so that it is part of the identity. The kind and the keys around the page are
/// not: an append and a prepend of the same key ask for the same page.
public struct PagingRequestIdentity<Key: Hashable & Sendable>: Hashable, Sendable {
    public let key: Key
    public let pageSize: Int
    /// The request's user info without ``PagingUserInfoKey/hardRefresh`` and
    /// ``PagingUserInfoKey/reload``.
    public let userInfo: [String: String]

    @inlinable
    public init(_ request: PagingRequest<Key>) {
        key = request.key
        pageSize = request.params.pageSize
        var userInfo = request.params.userInfo
        if !userInfo.isEmpty, userInfo[PagingUserInfoKey.hardRefresh] != nil || userInfo[PagingUserInfoKey.reload] != nil {
            userInfo[PagingUserInfoKey.hardRefresh] = nil
            userInfo[PagingUserInfoKey.reload] = nil
        }
        self.userInfo = userInfo
    }

    /// Whether the user-info entry `name` is part of a request's identity: every one but
    /// ``PagingUserInfoKey/hardRefresh`` and ``PagingUserInfoKey/reload``, the entries `init`
    /// drops. (Encoders of the identity ask this.)
    @inlinable
    public static func identifies(_ name: String) -> Bool { name != PagingUserInfoKey.hardRefresh && name != PagingUserInfoKey.reload }

    // Written out and @inlinable (the derived ones are not), so that they are specialized;
    // an empty user info (the common case) is not hashed or compared element by element.
    // The user info is compared and hashed by its UTF-8 bytes, not as Swift strings, which are
    // equal when canonically equivalent: a query "café" written with "é" and one with "e" and
    // a combining accent are two requests to a server, and shared one page.
    @inlinable
    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.pageSize == rhs.pageSize && lhs.key == rhs.key
            && (lhs.userInfo.isEmpty ? rhs.userInfo.isEmpty : Self.sameBytes(lhs.userInfo, rhs.userInfo))
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(pageSize)
        guard !userInfo.isEmpty else { return }
        // Order-independent, as a dictionary's own hash is: a sum of each entry's.
        var entries = 0
        for (name, value) in userInfo {
            var entry = Hasher()
            Self.combineBytes(of: name, into: &entry)
            Self.combineBytes(of: value, into: &entry)
            entries &+= entry.finalize()
        }
        hasher.combine(userInfo.count)
        hasher.combine(entries)
    }

    /// Whether the two user infos hold the same names and values, byte for byte.
    @usableFromInline
    static func sameBytes(_ lhs: [String: String], _ rhs: [String: String]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        for (name, value) in lhs {
            // At most one name of `rhs` is canonically equivalent to `name`: it must be its bytes too.
            guard let index = rhs.index(forKey: name), rhs[index].key.utf8.elementsEqual(name.utf8),
                  rhs[index].value.utf8.elementsEqual(value.utf8) else { return false }
        }
        return true
    }

    @usableFromInline
    static func combineBytes(of text: String, into hasher: inout Hasher) {
        var text = text
        text.makeContiguousUTF8() // (native strings are already)
        hasher.combine(text.utf8.count)
        _ = text.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
    }
}

extension PagingRequest: CustomStringConvertible {
    public var description: String {
        "\(kind)(key: \(key), prev: \(keyChain.prevKey.map { "\($0)" } ?? "nil"), "
            + "next: \(keyChain.nextKey.map { "\($0)" } ?? "nil"), pageSize: \(params.pageSize))"
    }
}
