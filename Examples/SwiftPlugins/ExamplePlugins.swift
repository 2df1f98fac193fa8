// Plugins written in Swift with PagingPluginKit, in one library (libexample-plugins.so):
//
//   redact  removes fields from every item on its way back (a page transform), counts what it
//           removed (metrics), and logs the loads that failed behind it (load outcomes).
//           Config: "fields": ["email", "token"] - top-level names of the fields to remove
//           (default: none).
//   delay   holds every request for "delay_ms" (default 100) before letting it proceed,
//           without holding a thread while it waits (a deferred intercept).
//   numbers a source of "count" (default 100) items {"n":0}, {"n":1}..., keyed by index, that
//           answers each fetch "delay_ms" (default 10) later from another thread, as a source
//           over a network does: PagingPluginKit drops a completion that comes after the host
//           destroyed the instance, as the ABI asks.
//
// Manifest:
//   "interceptors": [{ "plugin": "example-plugins", "id": "redact", "config": { "fields": ["email"] } }]
import Dispatch
import Foundation
import PagingPluginKit

final class RedactPlugin: TransformingPlugin, FailureObservingPlugin {
    static let info = PluginInfo(
        id: "redact", name: "Redact", version: "1.0.0",
        description: "Removes the named fields from every item", isThreadSafe: true)

    private let host: PluginHost
    private let fields: Set<String>

    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        try config.rejectUnknownKeys(["fields"])
        struct Config: Decodable { var fields: [String]? }
        do {
            fields = Set(try config.decode(Config.self).fields ?? [])
        } catch {
            throw .invalidConfig("fields: expected an array of field names")
        }
        self.host = host
    }

    func intercept(_ request: PagingPluginRequest) -> InterceptDecision {
        .proceed(observe: true)
    }

    func transform(_ page: PagingPluginPage) -> PageTransform {
        var removed = 0
        var items: [[UInt8]] = []
        for item in page.content.items {
            guard var object = (try? JSONSerialization.jsonObject(with: Data(item))) as? [String: Any] else {
                items.append(item)
                continue
            }
            for field in fields where object.removeValue(forKey: field) != nil { removed += 1 }
            guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]) else {
                return .fail(.internal("an item could not be written back as JSON"))
            }
            items.append(Array(data))
        }
        guard removed > 0 else { return .keep }
        host.count("fields_removed", by: Int64(removed))
        return .replace(PageContent(items: items), metadata: ["redact.removed": "\(removed)"])
    }

    func loadFailed(_ request: PagingPluginRequest, failure: PluginFailure) {
        host.count("loads_failed")
        host.log(.info, "the load of key \(request.keyText) failed: \(failure.message)")
    }
}

final class DelayPlugin: DeferringInterceptorPlugin {
    static let info = PluginInfo(
        id: "delay", name: "Delay", version: "1.0.0",
        description: "Holds every request for a while, without holding a thread", isThreadSafe: true)

    private let delay: DispatchTimeInterval

    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        try config.rejectUnknownKeys(["delay_ms"])
        let milliseconds = try config.int("delay_ms", default: 100)
        guard (0...600_000).contains(milliseconds) else { throw .invalidConfig("delay_ms: expected 0 to 600000, got \(milliseconds)") }
        delay = .milliseconds(milliseconds)
    }

    func intercept(_ request: PagingPluginRequest, reply: InterceptReply) {
        // A timer, not a sleeping thread: a thousand requests waiting hold no thread.
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { reply.answer(.proceed(observe: false)) }
    }
}

final class NumbersPlugin: SourcePlugin {
    static let info = PluginInfo(
        id: "numbers", name: "Numbers", version: "1.0.0",
        description: "Numbered items, each page answered later from another thread", isThreadSafe: true)

    private let count: Int
    private let delay: DispatchTimeInterval

    init(host: PluginHost, config: PluginConfig) throws(PluginFailure) {
        try config.rejectUnknownKeys(["count", "delay_ms"])
        count = try config.int("count", default: 100)
        let milliseconds = try config.int("delay_ms", default: 10)
        guard (0...1_000_000).contains(count) else { throw .invalidConfig("count: expected 0 to 1000000, got \(count)") }
        guard (0...600_000).contains(milliseconds) else { throw .invalidConfig("delay_ms: expected 0 to 600000, got \(milliseconds)") }
        delay = .milliseconds(milliseconds)
    }

    var refreshKey: [UInt8] { Array("0".utf8) }

    func fetch(_ request: PagingPluginRequest, completion: FetchCompletion) {
        guard let start = Int(request.keyText), start >= 0, start <= count else {
            completion.fail(.invalidRequest("key \"\(request.keyText)\" is not an index from 0 to \(count)"))
            return
        }
        let end = min(count, start + request.pageSize)
        let page = PageContent(jsonItems: (start..<end).map { #"{"n":\#($0)}"# },
                               prevKey: start > 0 ? String(max(0, start - request.pageSize)) : nil,
                               nextKey: end < count ? String(end) : nil, isFirst: start == 0, isLast: end >= count)
        DispatchQueue.global().asyncAfter(deadline: .now() + delay) { completion.succeed(page) }
    }
}

@c(paging_plugin_entry)
public func pagingPluginEntry() -> UnsafeRawPointer { PluginExport.entry(RedactPlugin.self, DelayPlugin.self, NumbersPlugin.self) }
