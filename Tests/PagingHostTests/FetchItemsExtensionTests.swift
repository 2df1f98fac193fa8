import Paging
import PagingHost
import Testing

/// `paging.fetch-items/1` through real dlopen of Tests/Fixtures/plugins/batch_items.c: a page's
/// items in one call, each checked as `fetch_add_item` checks it.
@Suite("ABI 1.2: a page's items in one call")
struct FetchItemsExtensionTests {
    let log = LogRecorder()

    func load(_ key: String) async throws -> Page<PluginKey, PluginItem> {
        let source = try PluginLibrary.open(path: try await fixturePlugin("batch_items")).makeSource(sink: log.sink)
        return try await Pager(source: source).load(
            PagingRequest(kind: .refresh, keyChain: PagingKeyChain(key: PluginKey(key)), params: PagingRequestParams(pageSize: 4)))
    }

    /// The error a load fails with.
    func failure(_ key: String) async throws -> PluginError? {
        do {
            let page = try await load(key)
            Issue.record("served \(page.values.map(\.text))")
            return nil
        } catch let error as PluginError {
            return error
        }
    }

    @Test func theItems_joinThePageInOrder_withThoseAddedOneByOne() async throws {
        #expect(try await load("page").values.map(\.text) == ["1", "\"two\"", #"{"three":3}"#, "4"])
        #expect(log.messages.filter { $0.hasPrefix("add_items") } == ["add_items: 0"])
    }

    @Test func anItemThatIsNotJSON_failsTheFetch_namingItsIndex() async throws {
        let error = try #require(try await failure("bad"))
        #expect(error.status == .invalidArgument)
        #expect(error.plugin.hasPrefix("batch-items ("))
        #expect(error.message.contains("add_items: item 1 is not valid JSON: unexpected 'o' at byte 1"), "\(error.message)")
        #expect(log.contains("add_items: 8")) // PAGING_ERR_INVALID_ARGUMENT
    }

    @Test func nullItemsWithACount_failTheFetch() async throws {
        let error = try #require(try await failure("null"))
        #expect(error.status == .invalidArgument)
        #expect(error.message.contains("add_items: NULL items with a count of 2"), "\(error.message)")
    }

    @Test func nullItemsWithNoCount_addNothing() async throws {
        #expect(try await load("none").values.isEmpty)
        #expect(log.contains("add_items: 0"))
    }

    @Test func anUnknownFetchId_isRefusedAndLogged_andTheFetchGoesOn() async throws {
        #expect(try await load("unknown").values.count == 4)
        #expect(log.contains("add_items: 8")) // PAGING_ERR_INVALID_ARGUMENT
        #expect(log.entries.contains { $0.level == .error && $0.message.contains("add_items for unknown or finished fetch id") }, "\(log.messages)")
    }
}
