/// A page of values and the request that produced it.
///
/// A page carries the keys of its neighbours. By default they come from the request's key chain;
/// a source that learns them from the response (a cursor, a `Link` header) passes them to
/// ``init(request:values:prevKey:nextKey:)`` and they override the chain. A `nil` key means there
/// is no page in that direction.
public struct Page<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    public var request: PagingRequest<Key>
    public var values: [Value]
    /// The key of the page before this one, or `nil` at the start of the data.
    public var prevKey: Key?
    /// The key of the page after this one, or `nil` at the end of the data.
    public var nextKey: Key?
    /// Names and values an interceptor attached to the page (``PagingInterceptor/transform(page:)``):
    /// how many values a filter dropped, where a page came from. Empty unless one did.
    public var metadata: [String: String] = [:]
    /// The page is short, but not because the data ends there: it is not loaded again as a
    /// short last page is (``namesItsNextKey``), and paging goes on past it. The ``Pager`` sets it
    /// on a full page a transform made short or empty (a filter); a source sets it on a page its server
    /// cut short (a cap on the page size) when the key chain names the next page (on an empty
    /// page from the source, the ``Pager`` clears it: that page ends the data). An
    /// interceptor that keeps pages and answers with them later (a cache, a store) keeps this
    /// mark with each page and sets it on the page it answers with: without it, a filtered page
    /// read back reads as a short last page, and an empty one after it as the end.
    public var isShortened = false
    /// A short page with values a transform emptied (a filter): unlike an empty page from the
    /// source, it is not the end of the data; it is loaded again as a short last page is (it may
    /// have grown). The ``Pager`` sets it after the transforms, and ignores it on a page from the
    /// source. An interceptor that keeps pages keeps it with each page and sets it on the page it
    /// answers with, as ``isShortened``: without it, such a page read back reads as the end.
    public var isEmptiedByTransform = false
    /// Set by the ``Pager`` on a page an interceptor answered with (a cache's, a store's) rather
    /// than the source: what it says may be older than the source's data. (An empty page kept
    /// while the data ended there read as the end after the data grew.)
    public var isKept = false

    /// A page whose neighbours are those of the request's key chain.
    @inlinable
    public init(request: PagingRequest<Key>, values: [Value]) {
        self.init(request: request, values: values,
                  prevKey: request.keyChain.prevKey, nextKey: request.keyChain.nextKey)
    }

    /// A page whose neighbours the source read from the response.
    @inlinable
    public init(request: PagingRequest<Key>, values: [Value], prevKey: Key?, nextKey: Key?) {
        self.request = request
        self.values = values
        self.prevKey = prevKey
        self.nextKey = nextKey
    }

    /// The key of this page.
    @inlinable
    public var key: Key { request.key }

    /// Whether the page holds as many values as were asked for.
    @inlinable
    public var isComplete: Bool { values.count >= request.params.pageSize }

    /// Whether the source named the next page itself (a cursor, a `Link` header, an offset it
    /// counted) rather than leaving it to the request's key chain, or the page is marked
    /// ``isShortened``. A short page that names its next page is followed, not loaded again: a
    /// server that caps its page size says where the next page is, and a filtered page cannot
    /// have grown.
    @inlinable
    public var namesItsNextKey: Bool { isShortened || nextKey != request.keyChain.nextKey }

    /// Whether the source's page had values: it has some, or a transform dropped them (it is
    /// marked shortened or emptied).
    @inlinable
    var hadValuesAtTheSource: Bool { !values.isEmpty || isShortened || isEmptiedByTransform }

    /// Empty, with only the key chain saying a page follows (not a page a transform emptied):
    /// where the data ends, for now, after a short page.
    @inlinable
    var isEmptyByTheKeyChainAlone: Bool { values.isEmpty && !namesItsNextKey && !isEmptiedByTransform }
}

extension Page: CustomStringConvertible {
    public var description: String {
        "Page(\(request.kind), key: \(key), \(values.count) values, "
            + "prev: \(prevKey.map { "\($0)" } ?? "nil"), next: \(nextKey.map { "\($0)" } ?? "nil"))"
    }
}
