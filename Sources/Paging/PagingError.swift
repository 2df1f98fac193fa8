/// Errors the engine itself raises.
public enum PagingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A refresh started while this prepend or append was loading; its page was dropped.
    case supersededByRefresh
    /// The pager was asked for a request kind the caller cannot build, e.g. a prepend
    /// with no page loaded yet.
    case nothingToLoad(PagingRequestKind)

    public var description: String {
        switch self {
        case .supersededByRefresh: "the load was superseded by a refresh and its page dropped"
        case .nothingToLoad(let kind): "nothing to \(kind): no page is loaded yet"
        }
    }
}

extension PagingError: RetryClassifiedError {
    public var isRetryable: Bool { false }
}
