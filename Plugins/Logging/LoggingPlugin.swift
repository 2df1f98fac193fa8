// The logging interceptor as a plugin: logs each request, page and failed load through the
// host's log.
//
// Config:
//   level  "trace" | "debug" | "info" | "warning" | "error" | "off" (default "info"):
//          requests are logged at debug, pages at info, failed loads at warning; below the
//          level nothing is formatted.
//   label  text put before every line (default: none).
import PagingPluginKit

final class LoggingPlugin: FailureObservingPlugin {
    static let info = PluginInfo(
        id: "logging", name: "Logging", version: "1.0.0",
        description: "Logs every request and page through the host's log", isThreadSafe: true)

    private static let levels = ["trace", "debug", "info", "warning", "error", "off"]

    private let host: PluginHost
    private let level: Int
    private let prefix: String

    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        try config.rejectUnknownKeys(["level", "label"])
        let name = try config.string("level") ?? "info"
        guard let level = Self.levels.firstIndex(of: name) else {
            throw .invalidConfig("level: expected one of \(Self.levels.joined(separator: ", ")), got \"\(name)\"")
        }
        self.host = host
        self.level = level
        prefix = try config.string("label").map { "\($0): " } ?? ""
    }

    /// A key as its text; an empty key as `""` (a line read "key : 20 items").
    private static func shown(_ key: [UInt8]) -> String {
        key.isEmpty ? #""""# : String(decoding: key, as: UTF8.self)
    }

    func intercept(_ request: PagingPluginRequest) -> InterceptDecision {
        if level <= 1 {
            host.log(.debug, "\(prefix)request \(request.kind) key \(Self.shown(request.key)) page size \(request.pageSize)")
        }
        return .proceed(observe: level <= 2)
    }

    func handle(_ page: PagingPluginPage) {
        guard level <= 2 else { return }
        let next = page.content.isLast ? "end" : page.content.nextKey.map(Self.shown) ?? "?"
        host.log(.info, "\(prefix)page \(page.request.kind) key \(Self.shown(page.request.key)): \(page.content.items.count) items, next \(next)")
    }

    func loadFailed(_ request: PagingPluginRequest, failure: PluginFailure) {
        guard level <= 3 else { return }
        host.log(.warning, "\(prefix)\(request.kind) key \(Self.shown(request.key)) failed: \(failure.message)")
    }
}

@c(paging_plugin_entry)
public func pagingPluginEntry() -> UnsafeRawPointer { PluginExport.entry(LoggingPlugin.self) }
