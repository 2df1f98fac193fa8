/// The origin of pages: usually a remote API, but any paged data will do.
///
/// A source knows where paging starts (``refreshKey``), how keys link (``keyChain(for:)``),
/// and fetches a page for a request.
///
/// # Thread safety
/// A source is `Sendable`: the ``Pager`` may call ``fetch(request:)`` from several tasks at once
/// (for different requests; identical requests in flight share one fetch).
///
/// # Cancellation
/// ``fetch(request:)`` runs in the task of the caller who asked for the page. It should honour
/// task cancellation (throw `CancellationError`) so that a refresh or a cancelled caller stops it.
public protocol PagingSource<Key, Value>: Sendable {
    associatedtype Key: Hashable & Sendable
    associatedtype Value: Sendable

    /// The key of the first page a refresh loads.
    var refreshKey: Key { get }

    /// The key chain of `key`. The default has no neighbours, for sources that return the
    /// neighbours' keys with each page instead.
    func keyChain(for key: Key) -> PagingKeyChain<Key>

    /// The key chain of `key` for pages of `pageSize` values, for keys that depend on it (an
    /// offset: the next page starts `pageSize` further). The ``Pager`` asks this one; the
    /// default answers ``keyChain(for:)``.
    func keyChain(for key: Key, pageSize: Int) -> PagingKeyChain<Key>

    /// Signals that the source's data changed (see ``PagingInvalidation``); `nil`, the default,
    /// for a source that cannot tell.
    var invalidation: PagingInvalidation? { get }

    /// The key of the page to load so that `anchor` stays in view, for the refresh after an
    /// invalidation (Paging 3's `getRefreshKey`); `nil`, the default, loads ``refreshKey``.
    func refreshKey(around anchor: PagingAnchor<Key, Value>) -> Key?

    /// Fetches the page the request asks for. Throwing fails this load only: the ``Pager``
    /// publishes the error as a state and goes on.
    func fetch(request: PagingRequest<Key>) async throws -> Page<Key, Value>
}

extension PagingSource {
    public func keyChain(for key: Key) -> PagingKeyChain<Key> {
        PagingKeyChain(key: key)
    }

    public func keyChain(for key: Key, pageSize: Int) -> PagingKeyChain<Key> {
        keyChain(for: key)
    }

    public var invalidation: PagingInvalidation? { nil }

    public func refreshKey(around anchor: PagingAnchor<Key, Value>) -> Key? { nil }
}
