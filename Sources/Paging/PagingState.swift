/// What a ``Pager`` publishes as loads start and end.
///
/// A failure is a state like any other: the stream goes on and the next request is served.
public enum PagingState<Key: Hashable & Sendable, Value: Sendable>: Sendable {
    /// A load started (published once, even when identical requests share it). A stale page's
    /// revalidation in the background is a load too: its start and its end are published.
    case loading(PagingRequest<Key>)
    /// A fetch failed and is retried, per the request's ``RetryPolicy``.
    case retrying(PagingRequest<Key>, attempt: Int, error: any Error)
    /// A load produced a page.
    case loaded(Page<Key, Value>)
    /// A load failed; this request's error, the pager goes on.
    case failed(PagingRequest<Key>, any Error)
    /// A load was cancelled (its caller's task was cancelled, or a refresh superseded it);
    /// its result, if any, is dropped.
    case cancelled(PagingRequest<Key>)

    /// The request the state is about.
    public var request: PagingRequest<Key> {
        switch self {
        case .loading(let request), .retrying(let request, _, _), .failed(let request, _),
             .cancelled(let request):
            request
        case .loaded(let page):
            page.request
        }
    }
}
