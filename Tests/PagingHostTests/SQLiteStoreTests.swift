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

    /// Pages are stored under the request's identity: the same key with other user info (another
    /// query) is not served the stored page, and a hard-refresh flag does not change what is
    /// asked for.
    @Test func sameKey_otherUserInfo_goesToTheSource_butTheHardRefreshFlagChangesNothing() async throws {
        let folder = scratchFolder()
        _ = try await run(pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh"])
        let pager = try storeOnly(folder: folder)
        let plain = try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 10)))
        #expect(plain.values.count == 10)
        await #expect(throws: PluginError.self, "another query's page is not the stored one") {
            try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 10, userInfo: ["q": "other"])))
        }
        // (The store clears its namespace only on a hard REFRESH; this is an append.)
        let flagged = try await pager.load(pager.request(.append, key: "0", params: params(
            pageSize: 10, userInfo: [PagingUserInfoKey.hardRefresh: "true"])))
        #expect(flagged.values == plain.values)
    }

    /// A file written by the version of the store that keyed pages by key and page size only:
    /// upgraded in place, its pages dropped (their params are unknown) with a warning.
    @Test func schemaVersion1File_isUpgraded_droppingItsPages_withAWarning() async throws {
        let folder = scratchFolder()
        let version1 = """
        CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
        INSERT INTO meta VALUES ('schema_version', 1);
        CREATE TABLE pages (namespace TEXT NOT NULL, key BLOB NOT NULL, page_size INTEGER NOT NULL,
          prev_key BLOB, next_key BLOB, flags INTEGER NOT NULL, item_count INTEGER NOT NULL,
          stored_at INTEGER NOT NULL, PRIMARY KEY (namespace, key, page_size)) WITHOUT ROWID;
        CREATE TABLE items (namespace TEXT NOT NULL, key BLOB NOT NULL, page_size INTEGER NOT NULL,
          position INTEGER NOT NULL, item BLOB NOT NULL,
          PRIMARY KEY (namespace, key, page_size, position)) WITHOUT ROWID;
        INSERT INTO pages VALUES ('test', X'30', 1, NULL, NULL, 3, 1, 0);
        INSERT INTO items VALUES ('test', X'30', 1, 0, X'2273746f72656422');
        """
        let created = try await run("/usr/bin/env", [
            "python3", "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.executescript(sys.stdin.read()); db.commit()",
            folder + "/store.db"], input: version1)
        #expect(created.code == 0, "\(created.stderr)")
        let pager = try storeOnly(folder: folder)
        #expect(log.contains("upgraded from schema version 1 to 2: its 1 stored pages were dropped"))
        await #expect(throws: PluginError.self, "the version 1 page is gone") {
            try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 1)))
        }
        // The upgraded file works: a run stores pages, a new pipeline is served them.
        let stored = try await run(self.pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh"])
        #expect(stored.code == 0, "\(stored.stderr)")
        let served = try storeOnly(folder: folder)
        #expect(try await served.load(served.request(.refresh, key: "0", params: params(pageSize: 10))).values.count == 10)
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
