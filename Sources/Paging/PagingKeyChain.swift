/// A page's key together with the keys of its neighbours.
///
/// The key chain is how pages are linked: a `nil` ``prevKey`` or ``nextKey`` means there is no
/// page in that direction (the end of pagination). A ``PagingSource`` computes key chains in
/// ``PagingSource/keyChain(for:)``; sources whose next key is known only after a response
/// (cursor APIs) return the keys with each ``Page`` instead.
public struct PagingKeyChain<Key: Hashable & Sendable>: Hashable, Sendable {
    /// The key of the page itself.
    public var key: Key
    /// The key of the page before this one, or `nil` when this is the first page.
    public var prevKey: Key?
    /// The key of the page after this one, or `nil` when this is the last page.
    public var nextKey: Key?

    @inlinable
    public init(key: Key, prevKey: Key? = nil, nextKey: Key? = nil) {
        self.key = key
        self.prevKey = prevKey
        self.nextKey = nextKey
    }

    // Written out (as the derived ones would be) and @inlinable, so that callers hash and
    // compare key chains specialized for their key type.
    @inlinable
    public static func == (lhs: PagingKeyChain, rhs: PagingKeyChain) -> Bool {
        lhs.key == rhs.key && lhs.prevKey == rhs.prevKey && lhs.nextKey == rhs.nextKey
    }

    @inlinable
    public func hash(into hasher: inout Hasher) {
        hasher.combine(key)
        hasher.combine(prevKey)
        hasher.combine(nextKey)
    }
}

extension PagingKeyChain: CustomStringConvertible {
    public var description: String {
        "\(prevKey.map { "\($0)" } ?? "nil") <- \(key) -> \(nextKey.map { "\($0)" } ?? "nil")"
    }
}
