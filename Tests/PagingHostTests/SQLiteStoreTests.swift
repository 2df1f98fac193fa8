import Foundation
import Paging
import PagingHost
import Testing

/// The sqlite-store plugin: pages stored by one process are served to the next.
@Suite("The SQLite store")
struct SQLiteStoreTests {
    let pager = pagerCommand
    let log = LogRecorder()

    /// A manifest of a JSON Lines source (`count` lines) behind the store.
    func storeManifest(folder: String, count: Int, namespace: String = "test", pageSize: Int = 10) throws -> String {
        writeJSONLines(count: count, to: folder + "/data.jsonl")
        let path = folder + "/\(namespace).json"
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "sqlite-store", "config": {"path": "store.db", "namespace": "\(namespace)"}}],
         "page_size": \(pageSize)}
        """.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// A pipeline whose source never answers (its fetches time out at once): whatever it
    /// loads came from the store.
    func storeOnly(folder: String, namespace: String = "test") throws -> PluginPager {
        let store = try PluginLibrary.open(path: shippedPlugin("sqlite-store")).makeInterceptor(
            config: .object([("path", .string(folder + "/store.db")), ("namespace", .string(namespace))]), sink: log.sink)
        let source = try PluginLibrary.open(path: try fixturePlugin("never_complete"))
            .makeSource(sink: log.sink, limits: PluginLimits(fetchTimeout: .milliseconds(50)))
        return Pager(source: source, interceptors: [store])
    }

    @Test func pagesStoredByOneProcess_areServedToTheNext_withTheirKeys() async throws {
        let folder = scratchFolder()
        let stored = try await run(pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh", "--append", "2"])
        #expect(stored.code == 0, "\(stored.stderr)")

        let pager = try storeOnly(folder: folder)
        let first = try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 10)))
        #expect(first.values.texts == (0..<10).map { #"{"n":\#($0)}"# })
        #expect(first.nextKey == "10")
        #expect(first.prevKey == nil)
        // The short last page is whole (it is the end of the data), so it is served too.
        let last = try await pager.load(pager.request(.append, key: "20", params: params(pageSize: 10)))
        #expect(last.values.count == 5)
        #expect(last.nextKey == nil)
    }

    @Test func missingPages_andOtherPageSizes_goToTheSource() async throws {
        let folder = scratchFolder()
        _ = try await run(pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh"])
        let pager = try storeOnly(folder: folder)
        await #expect(throws: PluginError.self) {
            try await pager.load(pager.request(.append, key: "10", params: params(pageSize: 10)))
        }
        await #expect(throws: PluginError.self) {
            try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 20)))
        }
    }

    @Test func namespaces_areApart_andAHardRefreshClearsOnlyItsOwn() async throws {
        let folder = scratchFolder()
        _ = try await run(pager, ["run", try storeManifest(folder: folder, count: 25, namespace: "a"), "--refresh"])
        _ = try await run(pager, ["run", try storeManifest(folder: folder, count: 25, namespace: "b"), "--refresh"])
        let cleared = try await run(pager, ["run", try storeManifest(folder: folder, count: 25, namespace: "a"), "--hard-refresh"])
        #expect(cleared.code == 0)

        let b = try storeOnly(folder: folder, namespace: "b")
        #expect(try await b.load(b.request(.refresh, key: "0", params: params(pageSize: 10))).values.count == 10)
        // The hard refresh stored its fresh page again; nothing else of "a" is left.
        let a = try storeOnly(folder: folder, namespace: "a")
        #expect(try await a.load(a.request(.refresh, key: "0", params: params(pageSize: 10))).values.count == 10)
        let hard = a.request(.refresh, key: "0", params: params(pageSize: 10, userInfo: [PagingUserInfoKey.hardRefresh: "true"]))
        await #expect(throws: PluginError.self) { try await a.load(hard) }
        await #expect(throws: PluginError.self) { try await a.load(a.request(.refresh, key: "0", params: params(pageSize: 10))) }
    }

    @Test func badConfig_namesTheKeyAndThePath() async throws {
        let library = try PluginLibrary.open(path: shippedPlugin("sqlite-store"))
        do {
            _ = try library.makeInterceptor(config: .object([("path", .string("/nonexistent/dir/store.db"))]), sink: log.sink)
            Issue.record("a database in a missing folder opened")
        } catch {
            #expect(error.description.contains("/nonexistent/dir/store.db"))
        }
        #expect(throws: PluginLoadError.self) { try library.makeInterceptor(sink: log.sink) }
    }
}
