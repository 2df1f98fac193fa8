/// Errors the engine itself raises.
public enum PagingError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A refresh started while this prepend or append was loading; its page was dropped.
    case supersededByRefresh

    public var description: String {
        switch self {
        case .supersededByRefresh: "the load was superseded by a refresh and its page dropped"
        }
    }
}

extension PagingError: RetryClassifiedError {
    public var isRetryable: Bool { false }
}
