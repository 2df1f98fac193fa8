import CPaging
import Paging

/// A status code of the plugin ABI (`PAGING_OK`, `PAGING_ERR_*`).
public struct PluginStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: UInt32

    public init(rawValue: UInt32) {
        self.rawValue = rawValue
    }

    public static let ok = PluginStatus(rawValue: PAGING_OK)
    public static let cancelled = PluginStatus(rawValue: PAGING_ERR_CANCELLED)
    public static let transient = PluginStatus(rawValue: PAGING_ERR_TRANSIENT)
    public static let timeout = PluginStatus(rawValue: PAGING_ERR_TIMEOUT)
    public static let invalidConfig = PluginStatus(rawValue: PAGING_ERR_INVALID_CONFIG)
    public static let invalidRequest = PluginStatus(rawValue: PAGING_ERR_INVALID_REQUEST)
    public static let notFound = PluginStatus(rawValue: PAGING_ERR_NOT_FOUND)
    public static let `internal` = PluginStatus(rawValue: PAGING_ERR_INTERNAL)
    public static let invalidArgument = PluginStatus(rawValue: PAGING_ERR_INVALID_ARGUMENT)
    public static let unsupported = PluginStatus(rawValue: PAGING_ERR_UNSUPPORTED)

    /// Whether it is `PAGING_OK` or one of the ABI's `PAGING_ERR_*` codes.
    public var isKnown: Bool { rawValue <= PAGING_ERR_UNSUPPORTED }

    /// A failure a plugin reported with `code` and `message` through `call`: one reported as
    /// `PAGING_OK` is internal, and its message says so (what pager check looks for).
    static func failure(_ code: paging_status_t, _ message: String, call: String) -> (PluginStatus, String) {
        // A NULL or empty message read "not found: " (found by a probe).
        let message = message.isEmpty ? "\(call) gave no message" : message
        guard code == PAGING_OK else { return (PluginStatus(rawValue: code), message) }
        return (.internal, "\(call) \(reportedOK): \(message)")
    }

    /// How a failure reported as `PAGING_OK` is said.
    package static let reportedOK = "reported a failure with PAGING_OK"

    /// Transient failures and timeouts are worth retrying; nothing else is.
    public var isRetryable: Bool { self == .transient || self == .timeout }

    public var description: String {
        switch self {
        case .ok: "ok"
        case .cancelled: "cancelled"
        case .transient: "transient"
        case .timeout: "timeout"
        case .invalidConfig: "invalid config"
        case .invalidRequest: "invalid request"
        case .notFound: "not found"
        case .internal: "internal"
        case .invalidArgument: "invalid argument"
        case .unsupported: "unsupported"
        default: "status \(rawValue)"
        }
    }
}

/// A failure reported by a plugin, or by the host about a plugin's behaviour, during a load.
/// Its status decides whether the retry policy retries it; its retry hint, how long it waits.
public struct PluginError: Error, RetryClassifiedError, RetryHintedError, CustomStringConvertible {
    public let status: PluginStatus
    public let message: String
    /// The plugin that failed, as "id (library path)".
    public let plugin: String
    /// How long the plugin said to wait before retrying (extension `paging.retry-hint/1`).
    public let retryAfter: Duration?

    public init(_ status: PluginStatus, _ message: String, plugin: String, retryAfter: Duration? = nil) {
        self.status = status
        self.message = message
        self.plugin = plugin
        self.retryAfter = retryAfter
    }

    public var isRetryable: Bool { status.isRetryable }

    public var description: String {
        "\(plugin): \(status): \(message)" + (retryAfter.map { " (retry after \($0.readable))" } ?? "")
    }
}

/// A failure as the host told an isolated interceptor's child process of it: its class and
/// message, which the plugin hears as they are (not as a failure of the plugin itself).
struct HeardFailure: Error, CustomStringConvertible {
    let status: PluginStatus
    let message: String
    var description: String { message }
}

extension PluginStatus {
    /// The class and message under which a plugin hears of `error` (`paging.load-outcome/1`).
    static func of(_ error: any Error) -> (PluginStatus, String) {
        switch error {
        case let error as PluginError: (error.status, error.description)
        case let error as HeardFailure: (error.status, error.message)
        case is CancellationError: (.cancelled, "the load was cancelled")
        case PagingError.supersededByRefresh: (.cancelled, "\(error)")
        // A failure that said when to try again (later than the retry policy waits): one to
        // retry, not an internal error (a circuit breaker branching on the code took it for one).
        case PagingError.retryAfterBeyondBackoff: (.transient, "\(error)")
        case let error as any RetryClassifiedError: (error.isRetryable ? .transient : .internal, "\(error)")
        default: (.internal, "\(error)")
        }
    }
}
