import Foundation
import Paging
import PagingHost
import Testing

/// What ABI 1.0 refuses from a plugin beyond bad pointers and ids: items that are not valid
/// UTF-8 JSON, and call handles used outside their call.
@Suite("ABI misuse: items and handles")
struct ABIMisuseTests {
    let log = LogRecorder(limit: 5_000)

    func load(_ pager: Pager<PluginKey, PluginItem>, _ key: String) async throws -> Page<PluginKey, PluginItem> {
        try await pager.load(PagingRequest(kind: .refresh, keyChain: PagingKeyChain(key: PluginKey(key)), params: PagingRequestParams(pageSize: 3)))
    }

    @Test(arguments: [
        ("utf8", "item 2 is not valid JSON: invalid UTF-8 at byte 2"),
        ("text", "item 2 is not valid JSON: unexpected 'h' at byte 0"),
        ("two", "item 2 is not valid JSON: trailing data after the value at byte 2"),
        ("empty", "item 2 is not valid JSON: empty item"),
    ])
    func aPageWithAnInvalidItem_failsItsLoad_namingThePluginAndTheItem(_ key: String, _ expected: String) async throws {
        let source = try PluginLibrary.open(path: try await fixturePlugin("invalid_items")).makeSource(sink: log.sink)
        let pager = Pager(source: source)
        #expect(try await load(pager, "json").values.map(\.text) == ["1", "\"two\"", #"{"ok":true}"#])
        do {
            let page = try await load(pager, key)
            Issue.record("served \(page.values.map(\.text))")
        } catch let error as PluginError {
            #expect(error.status == .invalidArgument)
            #expect(!error.isRetryable)
            #expect(error.plugin.hasPrefix("invalid-items ("))
            #expect(error.message.contains(expected), "\(error.message)")
        }
        // Completing the fetch the host failed is expected, not misuse (it was logged as an
        // error, "for unknown or finished fetch id", found by a probe).
        #expect(await log.waitFor("fetch_complete for fetch id"), "\(log.messages)")
        #expect(!log.contains("unknown or finished"), "\(log.messages)")
    }

    @Test func anInterceptorsAnswerWithAnInvalidItem_failsTheLoad() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("invalid_items"))
        let pager = Pager(source: try library.makeSource(sink: log.sink), interceptors: [try library.makeInterceptor(sink: log.sink)])
        await #expect(throws: PluginError.self) { _ = try await load(pager, "json") }
        do { _ = try await load(pager, "json") } catch let error as PluginError {
            #expect(error.plugin.hasPrefix("invalid-complete ("))
            #expect(error.message.contains("item 1 is not valid JSON: unexpected 'o' at byte 1"), "\(error.message)")
        }
    }

    /// `pager run` prints nothing of a page it refused, and says why.
    @Test func pagerRun_neverPrintsAnInvalidItem() async throws {
        let folder = scratchFolder()
        let plugin = try await fixturePlugin("invalid_items")
        try #"{"source": {"plugin": "\#(plugin)"}, "page_size": 3}"#.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let good = try await run(pagerCommand, ["run", folder + "/m.json", "--refresh"])
        #expect(good.code == 0, "\(good.stderr)")
        #expect(good.stdout == "1\n\"two\"\n{\"ok\":true}\n")
    }

    /// A plugin that keeps handles: thousands of calls later, nothing it did through them
    /// reached another call, each call it made them in failed, and the host is intact.
    @Test func keptHandles_underLoad_neverReachAnotherCall() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("stale_handles"))
        // Four readers, each loading pages of its own at once: one refresh does not supersede another's.
        let pager = Pager(source: try library.makeSource(sink: log.sink), interceptors: [try library.makeInterceptor(sink: log.sink)],
                          refreshSupersedes: false)
        let refused = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<4 {
                group.addTask {
                    var refused = 0
                    for round in 0..<100 {
                        // (A load may share the fetch of the same key's load in another task.)
                        let key = String((task + round) % 7)
                        do {
                            let page = try await load(pager, key)
                            let first = Int(key)!
                            #expect(page.request.key == PluginKey(key))
                            #expect(page.values.map(\.text) == [first, first + 1, first + 2].map(String.init))
                        } catch let error as PluginError {
                            #expect(error.message.contains("handle kept from an earlier call, used during a later one; refused"), "\(error)")
                            refused += 1
                        }
                    }
                    return refused
                }
            }
            return try await group.reduce(0, +)
        }
        // Every intercept but the first uses the `out` it kept from the first: the loads that
        // succeed are the first and those that shared its fetch (at most one a task).
        #expect((396...399).contains(refused), "\(refused) refused")
        #expect(log.total > 400)
        #expect(!log.messages.contains { $0.contains("HIJACKED") })
    }
}
