import Foundation
@testable import PagingHost
@testable import PagingPluginKit
import Testing

/// PagingPluginKit's completion of a fetch, against the host's table.
@Suite("A Swift plugin's fetch completion")
struct FetchCompletionTests {
    /// Found by a probe: four threads completing one fetch at once had their items added to one
    /// page before any of them completed it (20 or 30 items for a page of 10, each printed
    /// twice, exit 0). The first completion is the one; the others are refused and logged.
    @Test func completionsAtOnce_fromManyThreads_giveOnePage() throws {
        let log = LogRecorder()
        for round in 0..<50 {
            let instance = PluginInstance(label: "racer", sink: log.sink, limits: PluginLimits())
            let id = UInt64(round + 1)
            instance.fetches.withLock { $0[id] = PendingFetch() }
            let completion = FetchCompletion(host: PluginHost(table: instance.table), id: id)
            let page = PageContent(items: (0..<10).map { Array(#"{"n":\#($0)}"#.utf8) }, isFirst: true, isLast: true)
            DispatchQueue.concurrentPerform(iterations: 4) { _ in completion.succeed(page) }
            let result = instance.fetches.withLock { $0[id]?.result }
            guard case .completed(let builder)? = result else {
                Issue.record("round \(round): \(String(describing: result))")
                return
            }
            #expect(builder.items.count == 10, "round \(round)")
        }
        #expect(log.contains("succeed for unknown or finished fetch id 1: it was completed already (PagingPluginKit); refused"), "\(log.messages.prefix(5))")
    }
}
