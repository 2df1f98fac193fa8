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
    func storeOnly(folder: String, namespace: String = "test", config: [(String, JSONValue)] = [],
                   deduplication: Deduplication = .inFlight) async throws -> PluginPager {
        let store = try PluginLibrary.open(path: shippedPlugin("sqlite-store")).makeInterceptor(
            config: .object([("path", .string(folder + "/store.db")), ("namespace", .string(namespace))] + config), sink: log.sink)
        let source = try PluginLibrary.open(path: try await fixturePlugin("never_complete"))
            .makeSource(sink: log.sink, limits: PluginLimits(fetchTimeout: .milliseconds(50)))
        return Pager(source: source, interceptors: [store], deduplication: deduplication)
    }

    /// Stores the 20 pages of 5 lines of a 100-line file (keys "0", "5", ... "95").
    func storeTwentyPages(folder: String) async throws {
        let stored = try await run(pager, ["run", try storeManifest(folder: folder, count: 100, pageSize: 5), "--refresh", "--append", "19"])
        #expect(stored.code == 0, "\(stored.stderr)")
    }

    /// Loads the page at line `first` from `pager` and says whether it holds lines first..<first+5.
    func loadsItsOwnPage(_ pager: PluginPager, _ first: Int) async throws -> Bool {
        let page = try await pager.load(pager.request(.append, key: PluginKey("\(first)"), params: params(pageSize: 5)))
        return page.values.texts == (first..<first + 5).map { #"{"n":\#($0)}"# }
    }

    @Test func pagesStoredByOneProcess_areServedToTheNext_withTheirKeys() async throws {
        let folder = scratchFolder()
        let stored = try await run(pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh", "--append", "2"])
        #expect(stored.code == 0, "\(stored.stderr)")

        let pager = try await storeOnly(folder: folder)
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
        let pager = try await storeOnly(folder: folder)
        await #expect(throws: PluginError.self) {
            try await pager.load(pager.request(.append, key: "10", params: params(pageSize: 10)))
        }
        await #expect(throws: PluginError.self) {
            try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 20)))
        }
    }

    @Test func namespaces_areApart_andAHardRefreshReplacesOnlyItsOwn() async throws {
        let folder = scratchFolder()
        _ = try await run(pager, ["run", try storeManifest(folder: folder, count: 25, namespace: "a"), "--refresh", "--append", "2"])
        _ = try await run(pager, ["run", try storeManifest(folder: folder, count: 25, namespace: "b"), "--refresh"])
        let replaced = try await run(pager, ["run", try storeManifest(folder: folder, count: 25, namespace: "a"), "--hard-refresh"])
        #expect(replaced.code == 0)

        let b = try await storeOnly(folder: folder, namespace: "b")
        #expect(try await b.load(b.request(.refresh, key: "0", params: params(pageSize: 10))).values.count == 10)
        // The hard refresh stored its fresh page; nothing else of "a" is left.
        let a = try await storeOnly(folder: folder, namespace: "a")
        #expect(try await a.load(a.request(.refresh, key: "0", params: params(pageSize: 10))).values.count == 10)
        await #expect(throws: PluginError.self) { try await a.load(a.request(.append, key: "10", params: params(pageSize: 10))) }
    }

    /// A hard refresh whose load fails loses nothing: the pages stored still answer (before, the
    /// namespace was emptied before the load, and an offline hard refresh lost it all).
    @Test func aHardRefreshThatFails_leavesTheStoreAsItWas() async throws {
        let folder = scratchFolder()
        let manifest = try storeManifest(folder: folder, count: 25)
        _ = try await run(pager, ["run", manifest, "--refresh", "--append", "2"])
        // The source's lines are no longer JSON: a load from it fails.
        try String(repeating: "not JSON\n", count: 25).write(toFile: folder + "/data.jsonl", atomically: true, encoding: .utf8)
        let failed = try await run(pager, ["run", manifest, "--hard-refresh"])
        #expect(failed.code == 1, "\(failed.stderr)")
        #expect(failed.stderr.contains("is not valid JSON"), "\(failed.stderr)")
        let served = try await run(pager, ["run", manifest, "--refresh", "--append", "2"])
        #expect(served.code == 0, "\(served.stderr)")
        #expect(served.stdout.split(separator: "\n") == (0..<25).map { #"{"n":\#($0)}"#[...] })
    }

    /// Pages are stored under the request's identity: the same key with other user info (another
    /// query) is not served the stored page, and a hard-refresh flag does not change what is
    /// asked for.
    @Test func sameKey_otherUserInfo_goesToTheSource_butTheHardRefreshFlagChangesNothing() async throws {
        let folder = scratchFolder()
        _ = try await run(pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh"])
        let pager = try await storeOnly(folder: folder)
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
        let pager = try await storeOnly(folder: folder)
        #expect(log.contains("upgraded from schema version 1 to 3: its 1 stored pages were dropped"))
        await #expect(throws: PluginError.self, "the version 1 page is gone") {
            try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 1)))
        }
        // The upgraded file works: a run stores pages, a new pipeline is served them.
        let stored = try await run(self.pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh"])
        #expect(stored.code == 0, "\(stored.stderr)")
        let served = try await storeOnly(folder: folder)
        #expect(try await served.load(served.request(.refresh, key: "0", params: params(pageSize: 10))).values.count == 10)
    }

    /// A version 2 file (each item keyed by its page's namespace and identity) is upgraded in
    /// place, its pages kept and served.
    @Test func schemaVersion2File_isUpgraded_keepingItsPages() async throws {
        let folder = scratchFolder()
        try await storeTwentyPages(folder: folder)
        // Made version 2's tables again, as a file written before looks.
        _ = try await sqlite(folder + "/store.db", """
            CREATE TABLE pages2 (namespace TEXT NOT NULL, identity BLOB NOT NULL, prev_key BLOB, next_key BLOB,
              flags INTEGER NOT NULL, item_count INTEGER NOT NULL, stored_at INTEGER NOT NULL,
              PRIMARY KEY (namespace, identity)) WITHOUT ROWID;
            CREATE TABLE items2 (namespace TEXT NOT NULL, identity BLOB NOT NULL, position INTEGER NOT NULL, item BLOB NOT NULL,
              PRIMARY KEY (namespace, identity, position)) WITHOUT ROWID;
            INSERT INTO pages2 SELECT namespace, identity, prev_key, next_key, flags, item_count, stored_at FROM pages;
            INSERT INTO items2 SELECT p.namespace, p.identity, i.position, i.item FROM items i JOIN pages p ON p.id = i.page;
            DROP TABLE items; DROP TABLE pages;
            ALTER TABLE pages2 RENAME TO pages; ALTER TABLE items2 RENAME TO items;
            UPDATE meta SET value = 2 WHERE name = 'schema_version';
            """)
        let pager = try await storeOnly(folder: folder)
        #expect(log.contains("upgraded from schema version 2 to 3: its 20 stored pages were kept"), "\(log.messages)")
        for first in stride(from: 0, to: 100, by: 5) {
            #expect(try await loadsItsOwnPage(pager, first), "the page at \(first)")
        }
        let schema = try await sqlite(folder + "/store.db")
        #expect(schema.contains("page INTEGER NOT NULL") && !schema.contains("pages2"), "\(schema)")
    }

    /// A page's identity is stored once, not once an item: a page of 100 items with 3 KB of
    /// user info took half a megabyte (a client of `pager serve` filled the disk that way).
    @Test func aPagesIdentity_isStoredOnce() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 100, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "sqlite-store", "config": {"path": "store.db"}}],
         "page_size": 100, "user_info": {"q": "\(String(repeating: "x", count: 3_000))"}}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let stored = try await run(pager, ["run", folder + "/m.json", "--refresh"])
        #expect(stored.code == 0, "\(stored.stderr)")
        let bytes = try ["store.db", "store.db-wal"].reduce(0) { total, name in
            let path = folder + "/" + name
            guard FileManager.default.fileExists(atPath: path) else { return total }
            return total + (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int ?? 0)
        }
        #expect(bytes < 100_000, "\(bytes) bytes for one page of 100 small items")
    }

    /// `max_pages` bounds the pages a namespace keeps: a write past it drops the oldest (the
    /// store grew without bound, with a page for each value clients of `pager serve` sent).
    @Test func maxPages_keepsTheNewestPages_droppingTheOldest() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 100, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "sqlite-store", "config": {"path": "store.db", "namespace": "test", "max_pages": 5}}],
         "page_size": 5}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let stored = try await run(pager, ["run", folder + "/m.json", "--refresh", "--append", "19", "--stats"])
        #expect(stored.code == 0, "\(stored.stderr)")
        #expect(stored.stderr.contains("counter evicted = 15"), "\(stored.stderr)")
        let pager = try await storeOnly(folder: folder)
        for first in stride(from: 75, to: 100, by: 5) {
            #expect(try await loadsItsOwnPage(pager, first), "the page at \(first) is kept")
        }
        await #expect(throws: PluginError.self, "the oldest page was dropped") { _ = try await loadsItsOwnPage(pager, 0) }
        let bad = try await run(self.pager, ["validate", try storeManifestWith(folder: folder, store: #"{"path": "store.db", "max_pages": 0}"#)])
        #expect(bad.code == 2 && bad.stderr.contains("config `max_pages` must be an integer in 1...2147483647"), "\(bad.stderr)")
    }

    func storeManifestWith(folder: String, store: String) throws -> String {
        let path = folder + "/bad.json"
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "interceptors": [{"plugin": "sqlite-store", "config": \#(store)}]}"#
            .write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    /// Lookups run on the store's reader thread, one after another, and each answers its own load.
    @Test func manyConcurrentLoads_servedFromTheStore_eachGetItsOwnPage() async throws {
        let folder = scratchFolder()
        try await storeTwentyPages(folder: folder)
        let pager = try await storeOnly(folder: folder, deduplication: .disabled)
        let served = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<400 {
                group.addTask { try await loadsItsOwnPage(pager, index % 20 * 5) }
            }
            return try await group.reduce(into: 0) { $0 += $1 ? 1 : 0 }
        }
        #expect(served == 400)
    }

    /// While the file is locked by another process, the store's lookups wait on its reader
    /// thread, not on the loads' threads: with more loads waiting than the cooperative pool has
    /// threads, a task still runs; once the lock goes, every load is served its page.
    @Test func lookupsWaitingForALockedFile_leaveTheLoadsThreadsFree() async throws {
        let folder = scratchFolder()
        try await storeTwentyPages(folder: folder)
        let pager = try await storeOnly(folder: folder, config: [("busy_timeout_ms", .int(600_000))], deduplication: .disabled)
        let lock = try FileLock(folder + "/store.db")
        let loads = (0..<4 * ProcessInfo.processInfo.activeProcessorCount + 8).map { index in
            Task { try await loadsItsOwnPage(pager, index % 20 * 5) }
        }
        #expect(await lock.aTaskRunsWhileLocked(), "no task ran while the store's lookups waited")
        lock.release()
        for load in loads { #expect(try await load.value) }
    }

    /// Another process holding the write lock past busy_timeout_ms held every page's write that
    /// long (5 s a page by default; found by a probe): the first write waits and fails, saying so
    /// once, and the next ones only try the lock, until one is stored.
    @Test func aWriteLockHeldByAnotherProcess_isWaitedForOnce_untilAPageIsStored() async throws {
        let folder = scratchFolder()
        try await storeTwentyPages(folder: folder)
        let store = try PluginLibrary.open(path: shippedPlugin("sqlite-store")).makeInterceptor(
            config: .object([("path", .string(folder + "/store.db")), ("namespace", .string("other")), ("busy_timeout_ms", .int(300))]),
            sink: log.sink)
        let source = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
            .makeSource(config: .object([("path", .string(folder + "/data.jsonl"))]), sink: log.sink)
        let pager = Pager(source: source, interceptors: [store])
        let lock = try FileLock.writer(folder + "/store.db")
        for first in stride(from: 0, to: 50, by: 5) { #expect(try await loadsItsOwnPage(pager, first)) }
        let locked = log.entries.filter { $0.message.contains("write: cannot begin: database is locked") }
        #expect(locked.count == 10 && locked.filter { $0.level == .error }.count == 1, "\(log.messages)")
        #expect(locked.first?.message.contains("another process held the write lock past busy_timeout_ms: pages are not stored while it holds it, and no longer wait for it") == true,
                "\(log.messages)")
        lock.release()
        #expect(try await loadsItsOwnPage(pager, 50))
        #expect(log.contains("sqlite-store: the write lock is free again: pages are stored again"), "\(log.messages)")
        let stored = try await run("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM pages WHERE namespace = 'other'").fetchone()[0])
            """, folder + "/store.db"])
        #expect(stored.stdout == "1\n", "\(stored.stderr)")
    }

    /// A file size limit (EFBIG, which SQLite says as "disk I/O error") failed every page's write
    /// with a line of its own (196 in a probe's run): said once, as a full disk is; every item
    /// is printed all the same.
    @Test func aFileSizeLimit_isSaidOnce_andEveryItemIsPrinted() async throws {
        let folder = scratchFolder()
        let manifest = try storeManifest(folder: folder, count: 2_010)
        // SIGXFSZ ignored, as pager's parent may leave it: a write past the limit then fails.
        let result = try await run("/bin/bash", ["-c", #"trap '' XFSZ; ulimit -f 100; exec "$0" run "$1" --refresh --append 200"#, pager, manifest])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 2_010)
        let said = result.stderr.split(separator: "\n").filter { $0.contains("write: page not stored: disk I/O error") }
        #expect(said.count == 1 && said.first?.contains("said once until a page is stored again") == true, "\(result.stderr)")
    }

    /// A file of a newer schema, or whose schema_version is not a number, is refused naming it,
    /// and left as it was ('three' was said as "schema version 0").
    @Test(arguments: [("4", "the file has schema version 4, this plugin supports version 3 (written by a newer plugin)"),
                      ("'three'", "the file's schema_version is 'three', not a version number; this plugin supports version 3")])
    func aFileOfAnotherSchemaVersion_isRefused_sayingWhich(_ value: String, _ said: String) async throws {
        let folder = scratchFolder()
        let manifest = try storeManifest(folder: folder, count: 10)
        #expect(try await run(pager, ["run", manifest, "--refresh"]).code == 0)
        _ = try await sqlite(folder + "/store.db", "UPDATE meta SET value = \(value) WHERE name = 'schema_version';")
        let refused = try await run(pager, ["run", manifest, "--refresh"])
        #expect(refused.code == 2 && refused.stderr.contains("sqlite-store: config `path` '\(folder)/store.db': \(said)"), "\(refused.stderr)")
        let kept = try await run("/usr/bin/env", ["python3", "-c", """
            import sqlite3, sys
            print(sqlite3.connect(sys.argv[1]).execute("SELECT quote(value) FROM meta WHERE name = 'schema_version'").fetchone()[0])
            """, folder + "/store.db"])
        #expect(kept.stdout == value + "\n", "\(kept.stderr)")
    }

    /// A disk that cannot take the new store (here a file size limit of 20 KiB) fails create as
    /// TRANSIENT (exit 1): the manifest is sound (it was "invalid config", exit 2).
    @Test func aDiskThatCannotTakeTheStoreAtCreate_isATransientFailure_notBadInput() async throws {
        let folder = scratchFolder()
        let manifest = try storeManifest(folder: folder, count: 10)
        let result = try await run("/bin/bash", ["-c", #"trap '' XFSZ; ulimit -f 20; exec "$0" run "$1" --refresh"#, pager, manifest])
        #expect(result.code == 1, "\(result.stderr)")
        #expect(result.stderr.contains("could not be created: transient: sqlite-store: config `path` '\(folder)/store.db': "), "\(result.stderr)")
    }

    /// A file another process holds locked past busy_timeout_ms when pager starts is a failure
    /// at run time (exit 1, TRANSIENT), not bad input (exit 2): the manifest is sound, and a
    /// later run may succeed. Held by an open exclusive transaction, or by a connection in
    /// exclusive locking mode after a write (which kept even the tables from being read: it
    /// was exit 2, "invalid config").
    @Test(arguments: [
        ("BEGIN EXCLUSIVE", "cannot lock the database: database is locked"),
        ("PRAGMA locking_mode=EXCLUSIVE; BEGIN EXCLUSIVE; INSERT INTO meta VALUES ('held', 1); COMMIT",
         "cannot read the database's tables: database is locked"),
    ])
    func aFileLockedAtStart_isATransientFailure_notBadInput(_ lock: String, _ reason: String) async throws {
        let folder = scratchFolder()
        try await storeTwentyPages(folder: folder)
        let manifest = folder + "/busy.json"
        try String(contentsOfFile: folder + "/test.json", encoding: .utf8)
            .replacingOccurrences(of: #""namespace": "test""#, with: #""namespace": "test", "busy_timeout_ms": 100"#)
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        // python3 holds the file locked while pager runs.
        let locked = try await run("/usr/bin/env", ["python3", "-c", """
            import sqlite3, subprocess, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            for statement in sys.argv[2].split("; "): db.execute(statement)
            sys.exit(subprocess.run(sys.argv[3:]).returncode)
            """, folder + "/store.db", lock, pager, "run", manifest])
        #expect(locked.code == 1, "\(locked.stderr)")
        #expect(locked.stderr.contains("could not be created: transient: sqlite-store: config `path` '\(folder)/store.db': \(reason)"), "\(locked.stderr)")
        #expect(try await run(pager, ["run", manifest]).code == 0)
    }

    /// A store file damaged underneath (a database page overwritten) fails every read and
    /// write: the pages load from the source, and one warning names the file and what to do
    /// (two lines a page said "database disk image is malformed" without the file).
    @Test func aDamagedFile_isNamedOnce_andThePagesLoadFromTheSource() async throws {
        let folder = scratchFolder()
        try await storeTwentyPages(folder: folder)
        let damage = "import sys\nwith open(sys.argv[1], 'r+b') as f:\n    f.seek(2 * 4096)\n    f.write(b'\\xa5' * 4096 * 8)\n"
        #expect(try await run("/usr/bin/env", ["python3", "-c", damage, folder + "/store.db"]).code == 0)
        let result = try await run(pager, ["run", folder + "/test.json", "--refresh", "--append", "3"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 20, "\(result.stdout)")
        let said = result.stderr.components(separatedBy: "(the file is damaged: pages load from the source meanwhile; remove the file to start a new store)")
        #expect(said.count == 2, "\(result.stderr)")
        #expect(result.stderr.contains("sqlite-store: '\(folder)/store.db': "), "\(result.stderr)")
    }

    /// A page held whose item is no longer JSON (the file changed underneath) is loaded from
    /// the source, as the warning says, and stored again: it failed the load, on every run.
    @Test func aHeldItemThatIsNotJSON_isLoadedFromTheSource_andStoredAgain() async throws {
        let folder = scratchFolder()
        try await storeTwentyPages(folder: folder)
        _ = try await sqlite(folder + "/store.db", "UPDATE items SET item = CAST('not json' AS BLOB) WHERE position = 0;")
        let manifest = folder + "/test.json"
        for round in 1...2 {
            let result = try await run(pager, ["run", manifest, "--refresh", "--append", "1", "--stats"])
            #expect(result.code == 0, "run \(round): \(result.stderr)")
            #expect(result.stdout.split(separator: "\n").map(String.init) == (0..<10).map { #"{"n":\#($0)}"# }, "run \(round): \(result.stdout)")
            let warned = result.stderr.contains("sqlite-store: item 0 of the page held was refused by the host (not valid JSON, or past max_page_bytes or max_items_per_page); loading from the source")
            #expect(warned == (round == 1), "run \(round): \(result.stderr)")
            // The page refused is a miss, not a hit (it was counted as one: found by a probe).
            #expect(round == 1 ? result.stderr.contains("counter misses") && !result.stderr.contains("counter hits")
                               : result.stderr.contains("counter hits = 2") && !result.stderr.contains("counter misses"),
                    "run \(round): \(result.stderr)")
        }
    }

    /// Runs python3's sqlite3 on the database at `path`: `script` (SQL) first, then prints its
    /// schema objects, user_version and journal mode, a line each.
    func sqlite(_ path: String, _ script: String = "") async throws -> String {
        let result = try await run("/usr/bin/env", [
            "python3", "-c", """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1]); db.executescript(sys.stdin.read()); db.commit()
            for row in db.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name"): print(row)
            print("user_version", db.execute("PRAGMA user_version").fetchone()[0])
            print("journal_mode", db.execute("PRAGMA journal_mode").fetchone()[0])
            """, path], input: script)
        #expect(result.code == 0, "\(result.stderr)")
        return result.stdout
    }

    @Test(arguments: [
        ("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); CREATE INDEX users_name ON users (name);",
         "it holds 2 schema objects (table 'users', index 'users_name') and no `meta` table"),
        ("CREATE TABLE meta (key TEXT, value TEXT); INSERT INTO meta VALUES ('owner', 'app');",
         "it holds 1 schema object (table 'meta') and a `meta` table without a schema_version row"),
        // Found by a probe: a schema_version row of another application's own made its tables
        // the store's: version 1 dropped its `pages` and `items`, version 2 added the store's.
        ("CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER); INSERT INTO meta VALUES ('schema_version', 1);"
         + " CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); CREATE TABLE pages (id INTEGER PRIMARY KEY, title TEXT);"
         + " CREATE TABLE items (id, name); INSERT INTO pages VALUES (1, 'Home');",
         "it holds 4 schema objects (table 'items', table 'meta', table 'pages', table 'users') and objects a store does not hold"),
        ("CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER); INSERT INTO meta VALUES ('schema_version', 2);"
         + " CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);",
         "it holds 2 schema objects (table 'meta', table 'users') and objects a store does not hold"),
        ("CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER); INSERT INTO meta VALUES ('schema_version', 2);"
         + " CREATE TABLE pages (id INTEGER PRIMARY KEY, title TEXT);",
         "it holds 2 schema objects (table 'meta', table 'pages') and `pages` or `items` tables whose columns are not the store's"),
        ("CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER); INSERT INTO meta VALUES ('schema_version', 3);"
         + " CREATE TABLE pages (id INTEGER PRIMARY KEY, title TEXT);",
         "it holds 2 schema objects (table 'meta', table 'pages') and `pages` or `items` tables whose columns are not the store's"),
    ])
    func anotherApplicationsDatabase_isRefused_andLeftUnchanged(_ schema: (sql: String, found: String)) async throws {
        let folder = scratchFolder(), path = folder + "/app.db"
        let before = try await sqlite(path, schema.sql + " PRAGMA user_version = 7;")
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        do {
            _ = try PluginLibrary.open(path: shippedPlugin("sqlite-store")).makeInterceptor(
                config: .object([("path", .string(path))]), sink: log.sink)
            Issue.record("the store opened another application's database")
        } catch {
            #expect(error.description.contains("config `path` '\(path)' is not a sqlite-store database: \(schema.found); it was left unchanged"),
                    "\(error)")
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == bytes, "the file's bytes changed")
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder) == ["app.db"], "no -wal or -journal file")
        let after = try await sqlite(path)
        #expect(after == before)
        #expect(after.contains("user_version 7") && after.contains("journal_mode delete"), "\(after)")
    }

    /// Found by a probe: a store whose meta row was lost (its file damaged) was said to be
    /// another application's database; its three tables say it may be the store's own.
    @Test func aStoreThatLostItsMetaRow_isRefused_sayingItMayBeTheStoresOwn() async throws {
        let folder = scratchFolder(), path = folder + "/store.db"
        _ = try await sqlite(path, "CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER); CREATE TABLE pages (id); CREATE TABLE items (id);")
        do {
            _ = try PluginLibrary.open(path: shippedPlugin("sqlite-store")).makeInterceptor(config: .object([("path", .string(path))]), sink: log.sink)
            Issue.record("the store opened a damaged database")
        } catch {
            #expect(error.description.contains("a `meta` table without a schema_version row; it was left unchanged (the store's own table names: "
                                               + "if this is the store's own file, damaged, remove it"), "\(error)")
        }
        // Another application's lone `meta` table gets no such hint.
        let other = folder + "/app.db"
        _ = try await sqlite(other, "CREATE TABLE meta (key TEXT, value TEXT);")
        do {
            _ = try PluginLibrary.open(path: shippedPlugin("sqlite-store")).makeInterceptor(config: .object([("path", .string(other))]), sink: log.sink)
            Issue.record("the store opened another application's database")
        } catch {
            #expect(!error.description.contains("damaged"), "\(error)")
        }
    }

    @Test func anEmptyDatabaseFile_becomesAStore() async throws {
        let folder = scratchFolder()
        #expect(FileManager.default.createFile(atPath: folder + "/store.db", contents: nil))
        let stored = try await run(pager, ["run", try storeManifest(folder: folder, count: 25), "--refresh"])
        #expect(stored.code == 0, "\(stored.stderr)")
        let served = try await storeOnly(folder: folder)
        #expect(try await served.load(served.request(.refresh, key: "0", params: params(pageSize: 10))).values.count == 10)
    }

    @Test func badConfig_namesTheKeyAndThePath() async throws {
        let library = try PluginLibrary.open(path: shippedPlugin("sqlite-store"))
        // A missing folder is said so (it was said not to be writable: a user looked at permissions).
        let file = scratchFolder() + "/file"
        FileManager.default.createFile(atPath: file, contents: Data())
        for (path, reason) in [("/nonexistent/dir/store.db", "its folder does not exist"), (file + "/store.db", "its folder's path names a file that is not a folder")] {
            do {
                _ = try library.makeInterceptor(config: .object([("path", .string(path))]), sink: log.sink)
                Issue.record("a database in a missing folder opened")
            } catch {
                #expect(error.description.contains("config `path` '\(path)': ") && error.description.contains(reason), "\(error)")
            }
        }
        #expect(throws: PluginLoadError.self) { try library.makeInterceptor(sink: log.sink) }
        // Found by a hostile probe: a misspelled key or a namespace of the wrong type ran as if
        // absent (pages went to "default"), /dev/zero got a journal beside it, and a file that
        // is not a database was reported as "not an error".
        let folder = scratchFolder()
        let junk = folder + "/junk.db"
        try Data((0..<5_000).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ 3) }).write(to: URL(fileURLWithPath: junk))
        let cases: [(JSONValue, String)] = [
            (.object([("path", .string(folder + "/s.db")), ("polcy", .string("network-first"))]),
             "sqlite-store: config `polcy`: unknown key; expected path, namespace, policy, max_age_seconds, busy_timeout_ms or max_pages"),
            (.object([("path", .string(folder + "/s.db")), ("namespace", .int(5))]), "sqlite-store: config `namespace` must be a string"),
            (.object([("path", .string(folder + "/s.db")), ("busy_timeout_ms", .string("abc"))]),
             "sqlite-store: config `busy_timeout_ms` must be an integer in 0...2147483647"),
            (.object([("path", .string("/dev/zero"))]), "sqlite-store: config `path` '/dev/zero' is a device, not a database file"),
            // Found by review: an empty namespace was taken (redis-cache and the incremental state
            // refuse one), and an empty path was said to be missing.
            (.object([("path", .string(folder + "/s.db")), ("namespace", .string(""))]), "sqlite-store: config `namespace` must be 1-128 bytes"),
            (.object([("path", .string(folder + "/s.db")), ("namespace", .string(String(repeating: "n", count: 129)))]),
             "sqlite-store: config `namespace` must be 1-128 bytes"),
            (.object([("path", .string(""))]), "sqlite-store: config `path` must not be empty: the database file"),
            // With what to do: a damaged store is a cache to remove (a probe found a truncated
            // one failed every run, saying only "database disk image is malformed").
            (.object([("path", .string(junk))]), "sqlite-store: config `path` '\(junk)': cannot read the database's tables: file is not a database"
             + " (if this is the store's own file, damaged, remove it: the pages are loaded from the source again)"),
        ]
        for (config, message) in cases {
            #expect(throws: PluginLoadError.createFailed(path: library.path, id: "sqlite-store", status: .invalidConfig, message: message)) {
                try library.makeInterceptor(config: config, sink: log.sink)
            }
        }
        #expect(!FileManager.default.fileExists(atPath: "/dev/zero-journal"))
    }

    /// SQLite opens a file it cannot write read-only without a word: `pager validate` called the
    /// store healthy, and `run` then failed to store every page. Run as a user who cannot write
    /// the file (nobody, when the tests run as root). A file it may write in a folder it may not
    /// (where SQLite keeps its journal) says so: it said "attempt to write a readonly database".
    @Test(arguments: [(0o444, "cannot write to it: the file is read-only to this process"),
                      (0o666, "its folder is not writable by this process (SQLite keeps its journal files beside the database)")])
    func aDatabaseItCannotWrite_isRefusedAtCreate(mode: Int, reason: String) async throws {
        let folder = scratchFolder()
        #expect(chmod(folder, 0o755) == 0)
        let db = folder + "/ro.db"
        try PluginLibrary.open(path: shippedPlugin("sqlite-store")).makeInterceptor(config: .object([("path", .string(db))]), sink: log.sink).destroy()
        #expect(chmod(db, mode_t(mode)) == 0)
        // Its journal files, left by the store just made, would be writable where the folder is not.
        for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: db + suffix) }
        writeJSONLines(count: 5, to: folder + "/data.jsonl")
        let manifest = folder + "/m.json"
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "interceptors": [{"plugin": "sqlite-store", "config": {"path": "ro.db"}}], "page_size": 5}"#
            .write(toFile: manifest, atomically: true, encoding: .utf8)
        #expect(chmod(manifest, 0o644) == 0 && chmod(folder + "/data.jsonl", 0o644) == 0)
        let pager = productsFolder + "/pager"
        let result = getuid() == 0
            ? try await run("/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", pager, "validate", manifest])
            : try await run(pager, ["validate", manifest])
        #expect(result.code == 2, "\(result.stdout) \(result.stderr)")
        #expect(result.stderr.contains("sqlite-store: config `path` '\(db)': ") && result.stderr.contains(reason), "\(result.stderr)")
    }
}

/// Another process making a SQLite file in WAL mode look as if it were recovering its WAL index,
/// until ``release()``: it holds the index's write and recovery locks, with the index header
/// marked as being rewritten. A reader of the file then waits in its busy handler (up to its
/// busy timeout) and reads as usual once the lock goes. The file must be open in WAL mode (its
/// -shm file exists) before.
final class FileLock: @unchecked Sendable {
    private let process: Process
    private let input: ExecSafePipe
    private let released = DispatchSemaphore(value: 0)

    /// Holds the write lock of the database at `path` as another writer does: an open
    /// `BEGIN IMMEDIATE` transaction. Readers go on; writers wait, up to their busy timeout.
    static func writer(_ path: String) throws -> FileLock {
        try FileLock(path, script: """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            db.execute("BEGIN IMMEDIATE")
            print("locked", flush=True)
            sys.stdin.read()
            db.execute("ROLLBACK")
            """)
    }

    convenience init(_ path: String) throws {
        // The WAL index (-shm): two copies of the header (48 bytes each; iChange at offset 8),
        // then the lock bytes from offset 120: WAL_WRITE_LOCK (120), WAL_RECOVER_LOCK (122).
        try self.init(path, script: """
        import fcntl, mmap, os, struct, sys
        shm = os.open(sys.argv[1] + "-shm", os.O_RDWR)
        for byte in (120, 122):
            fcntl.lockf(shm, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, byte)
        index = mmap.mmap(shm, 136)
        saved = index[8:12]
        index[8:12] = struct.pack("<I", struct.unpack("<I", saved)[0] ^ 1)
        print("locked", flush=True)
        sys.stdin.read()
        index[8:12] = saved
        """)
    }

    /// Runs the python3 `script` on `path`; returns once it printed "locked".
    private init(_ path: String, script: String) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-c", script, path]
        let (input, output) = try runWithPipes(process)
        self.process = process
        self.input = input
        let said = String(decoding: output.read.readData(ofLength: 7), as: UTF8.self)
        guard said == "locked\n" else { throw LockFailed(said: said) }
    }

    /// Whether a new task gets a thread while the file is locked. Should none (every thread of
    /// the pool blocked), the lock is released after 2 minutes, so that the blocked calls end,
    /// and the answer is false. (Other tests share the pool: under the full suite's load, a
    /// task waited more than 30 s for a thread.)
    func aTaskRunsWhileLocked() async -> Bool {
        let answered = Locked(false)
        return await withCheckedContinuation { continuation in
            let answer: @Sendable (Bool) -> Void = { value in
                if answered.withLock({ first in defer { first = true }; return !first }) {
                    continuation.resume(returning: value)
                }
            }
            Thread.detachNewThread { [self] in
                if released.wait(timeout: .now() + 120) == .timedOut {
                    answer(false) // before the release frees the threads for the task
                    release()
                }
            }
            Task.detached { answer(true) }
        }
    }

    struct LockFailed: Error {
        /// What the locking process said instead of "locked".
        let said: String
    }

    /// Ends the locking process (its lock goes with it); waits for it to exit.
    func release() {
        try? input.write.close()
        process.waitUntilExit()
        released.signal()
    }
}
