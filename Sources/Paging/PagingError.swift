/// Errors the engine itself raises.
public enum PagingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A refresh started while this prepend or append was loading; its page was dropped.
    case supersededByRefresh
    /// A prepended page repeats the first `repeated` values of the first loaded page, and its
    /// next key (`nextKey`) is not that page's key (`firstKey`): the source's keys overlap (a
    /// bug in `source`, described as the ``Pager``'s source describes itself). The page is
    /// dropped. Equal values are taken for the same item only when each page's values are
    /// distinct (in data whose values repeat, equal values at the seam are no evidence).
    case overlappingPrepend(source: String, pageKey: String, nextKey: String, firstKey: String, repeated: Int)
    /// A step failed with `error` (its description), saying to retry after `retryAfter`, which
    /// is longer than the retry policy's longest wait (`maximum`): the load fails instead of waiting.
    case retryAfterBeyondBackoff(retryAfter: Duration, maximum: Duration, error: String)

    public var description: String {
        switch self {
        case .supersededByRefresh:
            "the load was superseded by a refresh and its page dropped"
        case let .overlappingPrepend(source, pageKey, nextKey, firstKey, repeated):
            "\(source): the page prepended at key \(pageKey) repeats the first \(repeated) values of the page at key "
                + "\(firstKey) (its next key is \(nextKey), not \(firstKey)); the page was dropped"
        case let .retryAfterBeyondBackoff(retryAfter, maximum, error):
            "\(error) (it says to retry after \(retryAfter), longer than the retry policy's longest wait, \(maximum))"
        }
    }
}

extension PagingError: RetryClassifiedError {
    public var isRetryable: Bool { false }
}
