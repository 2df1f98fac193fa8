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
    /// The `kind` (a prepend or an append) would load the page at `key`, which the list holds
    /// already, or held and dropped at its other end (``PaginationManager``'s `maxSize`): the keys of `source` (the source, or with interceptors, "... or an interceptor
    /// that set page keys") go round (a page whose next key is an earlier page's, as a
    /// damaged store may hold). Nothing is loaded; paging would repeat the same pages forever.
    case repeatedKey(source: String, kind: PagingRequestKind, key: String)
    /// A step failed with `error` (its description), saying to retry after `retryAfter`, which
    /// is longer than the retry policy's longest wait (`maximum`): the load fails instead of waiting.
    case retryAfterBeyondBackoff(retryAfter: Duration, maximum: Duration, error: String)
    /// The pages before the first one held (at `firstKey`) were dropped (``PaginationManager``'s
    /// `maxSize`), and `source` gives no key before it (a cursor API without previous keys):
    /// they cannot be loaded again. A refresh goes back to the start.
    case droppedPagesUnreachable(source: String, firstKey: String)

    public var description: String {
        switch self {
        case .supersededByRefresh:
            "the load was superseded by a refresh and its page dropped"
        case let .overlappingPrepend(source, pageKey, nextKey, firstKey, repeated):
            "\(source): the page prepended at key \(pageKey) repeats the first \(repeated) values of the page at key "
                + "\(firstKey) (its next key is \(nextKey), not \(firstKey)); the page was dropped"
        case let .repeatedKey(source, kind, key):
            "\(source): the \(kind) would load the page at key \(key), which the list loaded already (the keys go round); nothing was loaded"
        case let .retryAfterBeyondBackoff(retryAfter, maximum, error):
            "\(error) (it says to retry after \(retryAfter.readable), longer than the retry policy's longest wait, \(maximum.readable))"
        case let .droppedPagesUnreachable(source, firstKey):
            "\(source): the pages before key \(firstKey) were dropped (maxSize) and the source gives no key before it "
                + "to load them again; a refresh goes back to the start"
        }
    }
}

extension PagingError: RetryClassifiedError {
    public var isRetryable: Bool { false }
}

extension Duration {
    /// A wait as people read it: "250 ms", "1.5 s", "25 min", "3 h", "12 days"; "more than a
    /// year" past that (a hint of `UINT64_MAX` ms read "9.223372036854776e+15 seconds").
    package var readable: String {
        let seconds = max(0, Double(components.seconds) + Double(components.attoseconds) * 1e-18)
        switch seconds {
        case ..<1: return "\(Int((seconds * 1_000).rounded())) ms"
        case ..<120:
            let tenths = Int((seconds * 10).rounded())
            return tenths % 10 == 0 ? "\(tenths / 10) s" : "\(tenths / 10).\(tenths % 10) s"
        case ..<7_200: return "\(Int((seconds / 60).rounded())) min"
        case ..<172_800: return "\(Int((seconds / 3_600).rounded())) h"
        case ..<31_536_000: return "\(Int((seconds / 86_400).rounded())) days"
        default: return "more than a year"
        }
    }
}
