import Foundation
import Paging
import PagingHost
import Testing

/// The postgres-store plugin, loaded from its built .so, against a PostgreSQL server of the
/// test's own: pages shared between hosts, concurrent writers, lost connections, secrets.
@Suite("The PostgreSQL store")
struct PostgresStoreTests {
    let log = LogRecorder()

    /// A store whose statements and connections get a minute unless `extra` says otherwise: with
    /// the 5 s defaults, a machine busy with the other tests took the server for unavailable and
    /// loaded upstream (a connection, once, at a load average of 9).
    func store(_ conninfo: String, namespace: String = "test", _ extra: [(String, JSONValue)] = [],
               limits: PluginLimits = PluginLimits()) throws -> LoadedInterceptor {
        let patient: [(String, JSONValue)] = [("statement_timeout_ms", .int(60_000)), ("connect_timeout_ms", .int(60_000))]
            .filter { setting in !extra.contains { $0.0 == setting.0 } }
        return try PluginLibrary.open(path: shippedPlugin("postgres-store")).makeInterceptor(
            config: .object([("conninfo", .string(conninfo)), ("namespace", .string(namespace))] + patient + extra), sink: log.sink, limits: limits)
    }

    func pipeline(_ postgres: PostgresServer, _ source: CountingPluginSource, namespace: String = "test",
                  _ extra: [(String, JSONValue)] = []) throws -> (PluginPager, LoadedInterceptor) {
        let store = try store(postgres.conninfo, namespace: namespace, extra)
        return (Pager(source: source, interceptors: [store]), store)
    }

    func load(_ pager: PluginPager, _ key: String, kind: PagingRequestKind = .append, userInfo: [String: String] = [:]) async throws -> [String] {
        try await pager.load(pager.request(kind, key: PluginKey(key), params: params(pageSize: 10, userInfo: userInfo))).values.texts
    }

    func items(_ range: Range<Int>) -> [String] { range.map { #"{"n":\#($0)}"# } }

    /// A statement the server cancels for its statement_timeout (a table a migration locked)
    /// counts PostgreSQL as down, as one it never answers does: the loads after it go to the
    /// source at once (a probe: each load waited the timeout for its read and again for its
    /// write, 5 pages in 40 s, and said so once).
    @Test(.timeLimit(.minutes(3))) func aStatementTheServerCancelsForItsTimeout_countsPostgresAsDown() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        // 2 s: the first page's write must make it while the suite starts (at 500 ms it timed
        // out there once, PostgreSQL was down for good, and the page was never stored).
        let (pager, store) = try pipeline(postgres, upstream, [("statement_timeout_ms", .int(2_000)), ("retry_interval_ms", .int(600_000))])
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(await eventually { (try? await postgres.psql("SELECT count(*) FROM paging_pages")) == "1" })
        let locker = Task.detached {
            try? await postgres.psql("BEGIN; LOCK TABLE paging_pages IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(60); COMMIT")
        }
        #expect(await eventually {
            (try? await postgres.psql("SELECT count(*) FROM pg_locks WHERE relation = 'paging_pages'::regclass AND mode = 'AccessExclusiveLock' AND granted")) == "1"
        })
        for key in ["10", "20", "30"] { #expect(try await load(pager, key).count == 10) }
        #expect(await log.waitFor("is unavailable"), "\(log.messages)")
        // The server's cancel (statement_timeout), or, on a machine so loaded that it comes more
        // than a second later, the plugin's own bound (statement_timeout_ms + 1 s): either counts
        // PostgreSQL as down (the suite's start once took the second).
        #expect(log.messages.contains { $0.contains("is unavailable") && ($0.contains("statement timeout") || $0.contains("no answer within 3000 ms")) },
                "\(log.messages)")
        #expect(store.stats.counters["unavailable"] == 3 && upstream.fetches == 4, "\(store.stats.counters)")
        _ = try await postgres.psql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(60)%' AND pid <> pg_backend_pid()")
        await locker.value
    }

    /// A page whose request identity is longer than a PostgreSQL index row may be (a long query
    /// or cursor) is stored under the identity's SHA-256, and answers the next load (it was
    /// never stored: "index row size 3536 exceeds btree version 4 maximum 2704"); a hard refresh
    /// of it keeps it.
    @Test func aPageOfALongIdentity_isStoredAndServed() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(postgres, upstream)
        // Random: PostgreSQL compresses a key that repeats itself below the limit.
        var generator = SystemRandomNumberGenerator()
        let long = String((0..<3_500).map { _ in "abcdefghijklmnopqrstuvwxyz0123456789".randomElement(using: &generator)! })
        for _ in 0..<2 { #expect(try await load(pager, "0", userInfo: ["q": long]) == items(0..<10)) }
        #expect(upstream.fetches == 1, "\(log.messages)")
        _ = try await load(pager, "0", kind: .refresh, userInfo: ["q": long, PagingUserInfoKey.hardRefresh: "true"])
        _ = try await load(pager, "0", userInfo: ["q": long])
        #expect(upstream.fetches == 2, "\(log.messages)")
        #expect(!log.messages.contains { $0.contains("not stored") }, "\(log.messages)")
    }

    @Test func pagesStoredByOneHost_areServedToAnother_andAHardRefreshReplacesItsNamespaceOnly() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource(count: 95)
        let (first, _) = try pipeline(postgres, upstream)
        let (other, _) = try pipeline(postgres, upstream, namespace: "other")
        for key in ["0", "10", "90"] {
            _ = try await load(first, key)
            _ = try await load(other, key)
        }
        #expect(upstream.fetches == 6)
        let (second, store) = try pipeline(postgres, upstream)
        #expect(try await load(second, "10") == items(10..<20))
        #expect(try await load(second, "90") == items(90..<95), "the short last page is whole")
        #expect(upstream.fetches == 6)
        #expect(store.stats.counters["hits"] == 2)

        _ = try await load(second, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"])
        #expect(try await postgres.psql("SELECT namespace, count(*) FROM paging_pages GROUP BY 1 ORDER BY 1") == "other|3\ntest|1")
        // A hard refresh whose load fails loses nothing (before, the namespace was emptied first).
        upstream.fail(true)
        await #expect(throws: (any Error).self) {
            try await load(other, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"])
        }
        #expect(try await postgres.psql("SELECT namespace, count(*) FROM paging_pages GROUP BY 1 ORDER BY 1") == "other|3\ntest|1")
        #expect(try await load(other, "90") == items(90..<95))
    }

    /// Four `pager run` processes store the same 20 pages into one namespace at once: every page
    /// is there, whole (its item count matches its items, each item its own).
    @Test func concurrentWriters_fromSeveralProcesses_loseNothing_andNeverStoreHalfAPage() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let folder = scratchFolder()
        writeJSONLines(count: 100, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "\(shippedPlugin("postgres-store"))",
                           "config": {"conninfo": "\(postgres.conninfo)", "namespace": "shared", "policy": "network-first"}}],
         "page_size": 5}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let runs = try await withThrowingTaskGroup(of: ProgramResult.self) { group in
            for _ in 0..<4 { group.addTask { try await run(pagerCommand, ["run", folder + "/m.json", "--refresh", "--append", "19"]) } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(runs.allSatisfy { $0.code == 0 }, "\(runs.map(\.stderr))")
        #expect(runs.allSatisfy { !$0.stderr.contains("not stored") }, "\(runs.map(\.stderr))")
        #expect(try await postgres.psql("""
            SELECT count(*), sum(item_count), bool_and(item_count = 5 AND cardinality(items) = item_count)
            FROM paging_pages WHERE namespace = 'shared'
            """) == "20|100|t")
        // Each page holds its own five lines.
        let firsts = try await postgres.psql("SELECT convert_from(items[1], 'UTF8') FROM paging_pages WHERE namespace = 'shared' ORDER BY 1")
        #expect(Set(firsts.split(separator: "\n").map(String.init)) == Set(stride(from: 0, to: 100, by: 5).map { #"{"n":\#($0)}"# }))
    }

    /// The server's timeouts are a minute: under the full suite's load, six connections at once
    /// waited more than the default 5 s (a warning, which the test counts).
    @Test func concurrentWriters_ofTheSamePages_fromManyConnections_leaveWholePages() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        let patient: [(String, JSONValue)] = [("policy", .string("network-first")), ("connect_timeout_ms", .int(60_000)),
                                              ("statement_timeout_ms", .int(60_000))]
        let pipelines = try (0..<6).map { _ in try pipeline(postgres, upstream, patient) }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for (index, (pager, _)) in pipelines.enumerated() {
                group.addTask {
                    for round in 0..<5 {
                        for key in stride(from: 0, to: 100, by: 10).shuffled() where (key / 10 + index + round) % 2 == 0 {
                            _ = try await self.load(pager, "\(key)")
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        #expect(try await postgres.psql("""
            SELECT count(*), bool_and(item_count = 10 AND cardinality(items) = 10
                                      AND convert_from(items[1], 'UTF8') = '{"n":' || convert_from(substring(identity from 6), 'UTF8') || '}')
            FROM paging_pages
            """) == "10|t")
        #expect(log.entries.allSatisfy { $0.level < .warning }, "\(log.messages)")
    }

    @Test func aTerminatedBackend_isReconnected_andTheStoreServesOn() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        let (pager, store) = try pipeline(postgres, upstream)
        _ = try await load(pager, "0")
        let ended = try await postgres.psql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE pid <> pg_backend_pid() AND datname = 'postgres'")
        #expect(ended != "0", "the store's connection was ended")
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(upstream.fetches == 1, "served from the store over a new connection")
        #expect(store.stats.counters["hits"] == 1)
        #expect(!log.contains("is unavailable"), "\(log.messages)")
    }

    @Test func aServerRestart_isSurvived_loadsGoOnWhileItIsDown_withOneWarning() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(postgres, upstream, [("retry_interval_ms", .int(0))])
        _ = try await load(pager, "0")
        postgres.stop()
        for key in stride(from: 10, to: 60, by: 10) {
            #expect(try await load(pager, "\(key)") == items(key..<key + 10))
        }
        #expect(log.count(containing: "is unavailable") == 1, "\(log.messages)")
        try await postgres.restart()
        _ = try await load(pager, "60")
        #expect(log.contains("connected again to PostgreSQL at 127.0.0.1:\(postgres.port)/postgres"), "\(log.messages)")
        let fetched = upstream.fetches
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(try await load(pager, "60") == items(60..<70))
        #expect(upstream.fetches == fetched, "what was stored before and after the restart is served")
    }

    /// Found by a probe: a hard refresh while PostgreSQL was down succeeded without a word of
    /// what it left, and every later run served the pages from before it. The load still
    /// succeeds (the page came from the source), and an error says the old pages stay.
    @Test func aHardRefreshWhilePostgresIsDown_saysThePagesStoredBeforeStay() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let (pager, _) = try pipeline(postgres, CountingPluginSource(), [("retry_interval_ms", .int(0))])
        _ = try await load(pager, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"])
        #expect(!log.contains("did not replace"), "\(log.messages)")
        postgres.stop()
        #expect(try await load(pager, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"]) == items(0..<10))
        #expect(log.entries.contains { $0.level == .error && $0.message.hasPrefix(
            "postgres-store: hard refresh: its page did not replace the pages stored before (PostgreSQL at 127.0.0.1:\(postgres.port)/postgres did not take the write") },
                "\(log.messages)")
    }

    @Test func thePassword_neverReachesTheLog_orAnError() async throws {
        let secret = "hunter2-\(UInt32.random(in: 0...UInt32.max))"
        // Nothing listens there: the connection fails, with a warning.
        let port = freeLoopbackPort()
        _ = try store("host=127.0.0.1 port=\(port) user=test password=\(secret) dbname=x connect_timeout=2")
        #expect(log.contains("PostgreSQL at 127.0.0.1:\(port)/x is unavailable"), "\(log.messages)")
        // A malformed string that holds the password: libpq's message (which quotes it) is withheld.
        var errors: [String] = []
        // The third spells "password" percent-encoded, which libpq decodes (it was quoted).
        for conninfo in ["host=127.0.0.1 password=\(secret) bogus", "postgresql://test:\(secret)@127.0.0.1:\(port)/x?nope=1",
                         "postgresql://127.0.0.1:\(port)/x?user=test&%70assword=\(secret)%zz"] {
            do { _ = try store(conninfo) } catch { errors.append("\(error)") }
        }
        #expect(errors.count == 3)
        #expect(errors.allSatisfy { $0.contains("config `conninfo` is not a valid connection string") }, "\(errors)")
        #expect(!(log.messages + errors).contains { $0.contains(secret) }, "\(log.messages) \(errors)")
    }

    /// A URI whose password holds an '@' or a '/' not percent-encoded: libpq read part of it as
    /// the host, port or database, and the warnings showed it ("PostgreSQL at paging:pa/ss…"; found
    /// by a probe). Refused at create, without quoting the string; encoded, it is read as meant.
    @Test(arguments: ["pa/ss", "pa@ss", "p/a@s@s"])
    func aURIPasswordWithAnUnencodedAtOrSlash_isRefused_withoutShowingIt(_ password: String) throws {
        let tail = "XYZ\(UInt32.random(in: 0...UInt32.max))"
        let port = freeLoopbackPort()
        let error = try #require(throws: (any Error).self) { _ = try store("postgresql://paging:\(password)\(tail)@127.0.0.1:\(port)/paging") }
        #expect("\(error)".contains("config `conninfo`: an '@' or '/' in the URI's user name or password must be percent-encoded"), "\(error)")
        let encoded = password.replacingOccurrences(of: "@", with: "%40").replacingOccurrences(of: "/", with: "%2F")
        _ = try store("postgresql://paging:\(encoded)\(tail)@127.0.0.1:\(port)/paging?connect_timeout=2&application_name=me@host")
        #expect(log.contains("PostgreSQL at 127.0.0.1:\(port)/paging is unavailable"), "\(log.messages)")
        #expect(!(log.messages + ["\(error)"]).contains { $0.contains(tail) }, "\(log.messages) \(error)")
    }

    /// What libpq reads as meant is not refused for an '@' (the check took an '@' in a database
    /// name, and a keyword string whose value holds "://", for a password not encoded).
    @Test(arguments: ["postgresql://127.0.0.1:PORT/db@prod", "postgres://paging@127.0.0.1:PORT/my@db?connect_timeout=2",
                      "host=127.0.0.1 port=PORT dbname=x application_name=https://ci.example/job@42",
                      "postgresql://[::1]:PORT/x?user=admin@server"])
    func aConninfoWithAnAtWhereLibpqReadsItAsMeant_isTaken(_ conninfo: String) throws {
        let port = freeLoopbackPort()
        _ = try store(conninfo.replacingOccurrences(of: "PORT", with: "\(port)"))
        #expect(log.contains(":\(port)/"), "\(log.messages)")
    }

    @Test func anotherApplicationsTable_isRefused_andLeftUnchanged() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        try await postgres.psql("CREATE DATABASE other")
        try await postgres.psql("CREATE TABLE paging_pages (id int); INSERT INTO paging_pages VALUES (7)", database: "other")
        #expect { _ = try store(postgres.conninfo(database: "other")) } throws: { "\($0)".contains("the database's tables are not a postgres-store's") }
        #expect(try await postgres.psql("SELECT id FROM paging_pages", database: "other") == "7")
        #expect(try await postgres.psql("SELECT to_regclass('paging_meta') IS NULL", database: "other") == "t")
        // Another application's paging_meta, without a schema_version row: refused, left as it
        // was (the row was inserted before it was looked for, and paging_pages created).
        try await postgres.psql("CREATE DATABASE meta")
        try await postgres.psql("CREATE TABLE paging_meta (name text PRIMARY KEY, value bigint NOT NULL); INSERT INTO paging_meta VALUES ('app', 3)",
                                database: "meta")
        #expect { _ = try store(postgres.conninfo(database: "meta")) } throws: { "\($0)".contains("the database's tables are not a postgres-store's") }
        #expect(try await postgres.psql("SELECT count(*) FROM paging_meta", database: "meta") == "1")
        #expect(try await postgres.psql("SELECT to_regclass('paging_pages') IS NULL", database: "meta") == "t")
        // Found by a probe: a paging_pages of other columns beside a paging_meta like the
        // store's was used (every read and write failed on it, and `pager validate` said healthy).
        try await postgres.psql("CREATE DATABASE columns")
        try await postgres.psql("""
            CREATE TABLE paging_meta (name text PRIMARY KEY, value bigint NOT NULL); INSERT INTO paging_meta VALUES ('schema_version', 1);
            CREATE TABLE paging_pages (namespace text, identity bytea, x int); INSERT INTO paging_pages VALUES ('n', 'i', 7)
            """, database: "columns")
        #expect { _ = try store(postgres.conninfo(database: "columns")) } throws: {
            "\($0)".contains("the table paging_pages has the columns (namespace text, identity bytea, x integer), not the store's")
        }
        #expect(try await postgres.psql("SELECT x FROM paging_pages", database: "columns") == "7")
        // The error line says it whole (it was cut at 180 bytes: "…not the ; the store is not used").
        #expect(log.contains("item_count integer, stored_at bigint, items bytea[]): another application's (left unchanged); the store is not used"),
                "\(log.messages)")
    }

    /// A server that stops answering (here: stopped with SIGSTOP) fails no load and holds no
    /// thread: each statement's answer is waited for statement_timeout_ms and a second more,
    /// then the store counts as down and loads go on from the source. It made every load fail
    /// and destroy() wait for ever (the process never exited).
    @Test(.timeLimit(.minutes(3)))
    func aServerThatStopsAnswering_failsNoLoad_andLetsGo() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        let (pager, store) = try pipeline(postgres, upstream, [("statement_timeout_ms", .int(500)), ("retry_interval_ms", .int(60_000))])
        _ = try await load(pager, "0")
        try postgres.pause()
        defer { try? postgres.resume() }
        let clock = ContinuousClock()
        let start = clock.now
        #expect(try await load(pager, "10") == items(10..<20))
        #expect(try await load(pager, "20") == items(20..<30))
        // The first waits 1.5 s, the second not at all (26 s, both, under the full suite's load,
        // when a reconnection followed); before, the loads failed at the fetch timeout, 30 s each.
        #expect(clock.now - start < .seconds(50))
        // The statement got no answer within 1.5 s: the server is down at once, without a new
        // connection, which waited connect_timeout_ms more (found by a probe: 4 s, not 2).
        #expect(log.contains("postgres-store: PostgreSQL at 127.0.0.1:\(postgres.port)/postgres is unavailable (no answer within 1500 ms)"),
                "\(log.messages)")
        store.destroy()
    }

    /// A page held that the host refuses (here: more items than max_items_per_page) is loaded
    /// from the source and counted as a miss (it was counted as a hit: found by a probe).
    @Test func aHeldPageTheHostRefuses_isAMiss() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(postgres, upstream)
        #expect(try await load(pager, "0") == items(0..<10))
        let narrow = try store(postgres.conninfo, limits: PluginLimits(maxItemsPerPage: 5))
        let refusing = Pager(source: upstream, interceptors: [narrow])
        #expect(try await load(refusing, "0") == items(0..<10))
        #expect(upstream.fetches == 2, "loaded from the source")
        #expect(narrow.stats.counters["hits"] == nil && narrow.stats.counters["misses"] == 1, "\(narrow.stats.counters)")
        narrow.destroy()
    }

    @Test func cacheFirst_withMaxAge0_loadsAgain_andBadConfigsAreRefused() async throws {
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let upstream = CountingPluginSource()
        let (pager, store) = try pipeline(postgres, upstream, [("max_age_seconds", .int(0))])
        _ = try await load(pager, "0")
        try await Task.sleep(for: .milliseconds(5)) // a page of age 0 is stale a millisecond later
        _ = try await load(pager, "0")
        #expect(upstream.fetches == 2)
        #expect(store.stats.counters["stale_hits"] == 1)
        for (config, expected) in [
            (#"{}"#, "config `conninfo` (string) is required"),
            (#"{"conninfo": "${PAGING_TEST_UNSET_VARIABLE}"}"#, "the environment variable PAGING_TEST_UNSET_VARIABLE is not set"),
            (#"{"conninfo": "host=x", "statement_timeout_ms": 0}"#, "config `statement_timeout_ms` must be a whole number"),
            (#"{"conninfo": "host=x", "policy": "fastest"}"#, "config `policy` must be"),
            (#"{"conninfo": "host=x", "max_age_second": 60}"#, "config `max_age_second`: unknown key; expected conninfo, namespace"),
            // Part of the primary key: a long one never let a page be stored.
            (#"{"conninfo": "host=x", "namespace": ""}"#, "config `namespace` must be 1-128 bytes"),
            (#"{"conninfo": "host=x", "namespace": "\#(String(repeating: "n", count: 129))"}"#, "config `namespace` must be 1-128 bytes"),
            // libpq checks these only as it connects, and its refusal read as a server down.
            (#"{"conninfo": "host=x sslmode=requir"}"#,
             #"config `conninfo`: sslmode "requir" is not one of disable, allow, prefer, require, verify-ca, verify-full"#),
            (#"{"conninfo": "postgresql://x/db?target_session_attrs=master"}"#, #"target_session_attrs "master" is not one of any, "#),
            (#"{"conninfo": "host=x port=54x2"}"#, #"config `conninfo`: port "54x2" is not a port number"#),
            (#"{"conninfo": "host=x port=0"}"#, #"config `conninfo`: port "0" is not a port number from 1 to 65535"#),
            (#"{"conninfo": "host=x,y port=5432,99999"}"#, #"config `conninfo`: port "5432,99999" is not a port number from 1 to 65535"#),
            (#"{"conninfo": "host=x port=5432,"}"#, #"config `conninfo`: port "5432," lists 2 ports for 1 host: one port, or one for each host"#),
        ] {
            #expect(throws: (any Error).self) {
                _ = try PluginLibrary.open(path: shippedPlugin("postgres-store")).makeInterceptor(config: try JSONValue.parse(config), sink: log.sink)
            }
            do {
                _ = try PluginLibrary.open(path: shippedPlugin("postgres-store")).makeInterceptor(config: try JSONValue.parse(config), sink: log.sink)
            } catch {
                #expect("\(error)".contains(expected), "\(config): \(error)")
            }
        }
    }
}
