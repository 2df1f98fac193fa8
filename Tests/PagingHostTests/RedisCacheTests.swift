import Foundation
import Paging
import PagingHost
import Testing

/// The redis-cache plugin, loaded from its built .so, against a Redis server of the test's own:
/// pages shared between pipelines, one fetch across them (the lease), Redis going away and
/// coming back, and values in Redis that are not pages.
@Suite("The Redis cache")
struct RedisCacheTests {
    let log = LogRecorder()

    /// A pipeline of a redis-cache instance of its own in front of `source`.
    func pipeline(_ redis: RedisServer, _ source: CountingPluginSource, namespace: String = "test",
                  _ extra: [(String, JSONValue)] = []) throws -> (PluginPager, LoadedInterceptor) {
        let cache = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string(redis.address)), ("namespace", .string(namespace))] + extra), sink: log.sink)
        return (Pager(source: source, interceptors: [cache]), cache)
    }

    func load(_ pager: PluginPager, _ key: String, kind: PagingRequestKind = .append, userInfo: [String: String] = [:]) async throws -> [String] {
        try await pager.load(pager.request(kind, key: PluginKey(key), params: params(pageSize: 10, userInfo: userInfo))).values.texts
    }

    func items(_ range: Range<Int>) -> [String] { range.map { #"{"n":\#($0)}"# } }

    @Test func pipelinesSharingOneRedis_seeEachOthersPages() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (first, _) = try pipeline(redis, upstream)
        for key in ["0", "10", "20"] { _ = try await load(first, key) }
        #expect(upstream.fetches == 3)

        let (second, cache) = try pipeline(redis, upstream)
        #expect(try await load(second, "10") == items(10..<20))
        #expect(try await load(second, "0", kind: .refresh) == items(0..<10))
        #expect(upstream.fetches == 3, "the second pipeline was served from Redis")
        #expect(cache.stats.counters["hits"] == 2)
        // Another query is another page; another namespace sees nothing.
        _ = try await load(second, "0", userInfo: ["q": "swift"])
        let (other, _) = try pipeline(redis, upstream, namespace: "other")
        _ = try await load(other, "0")
        #expect(upstream.fetches == 5)
    }

    /// A page too large to store says its size and the limit, at most once a minute (a probe:
    /// "larger than max_page_bytes (or out of memory)" for every page of every run).
    @Test func pagesLargerThanMaxPageBytes_areSaidOnce_withTheirSize() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource(count: 300)
        let (pager, _) = try pipeline(redis, upstream, [("max_page_bytes", .int(1024))])
        for key in ["0", "100", "200"] {
            let page = try await pager.load(pager.request(.append, key: PluginKey(key), params: params(pageSize: 100)))
            #expect(page.values.count == 100)
        }
        #expect(upstream.fetches == 3)
        #expect(await log.waitFor("more than max_page_bytes (1024); not stored"), "\(log.messages)")
        #expect(log.count(containing: "more than max_page_bytes") == 1, "\(log.messages)")
        #expect(log.messages.contains { $0.contains("redis-cache: a page of ") && $0.contains(" bytes, more than") }, "\(log.messages)")
    }

    @Test func concurrentLoadsOfOnePage_fromSeparatePipelines_fetchItOnce() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        // A lease longer than the default 10 s: under the whole suite, the test process's two
        // pool threads were once busy long enough for the waiters' lease to run out (a second
        // fetch), and once 25 s were outlived too (every waiter fetched).
        let pipelines = try (0..<8).map { _ in try pipeline(redis, upstream, [("lease_ms", .int(300_000))]) }
        upstream.hold()
        let pages = Task {
            try await withThrowingTaskGroup(of: [String].self) { group in
                for (pager, _) in pipelines { group.addTask { try await self.load(pager, "30") } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
        }
        // One holds the lease and fetches (held at the source); the seven others wait for it.
        #expect(await eventually { upstream.fetches == 1 && pipelines.map { $0.1.stats.counters["lease_waits"] ?? 0 }.reduce(0, +) == 7 })
        upstream.open()
        let answers = try await pages.value
        #expect(answers.count == 8 && answers.allSatisfy { $0 == items(30..<40) })
        #expect(upstream.fetches == 1, "the upstream saw the page once")
        #expect(redis.command("EXISTS", "swiftpaging:test:l:10 2:30").hasPrefix(":0"), "the lease was released")
        // A waiter answered with the holder's page counted nothing more (it counted a NULL
        // counter name, which the host refused with an error line each time: found by a review).
        #expect(!log.contains("counter_add"), "\(log.messages)")
        #expect(pipelines.map { $0.1.stats.counters["misses"] ?? 0 }.reduce(0, +) == 8, "\(pipelines.map { $0.1.stats.counters })")
    }

    @Test func aLeaseWithoutAHolder_isWaitedOutThenTheLoadProceeds() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (pager, cache) = try pipeline(redis, upstream, [("lease_ms", .int(800))])
        // Set by hand, as a process killed mid-fetch leaves it: nobody will store the page. It
        // ends 200 ms before this cache's lease_ms would give up on it: with both at 800 ms, a
        // busy machine's poll found it held at the limit ("held it past lease_ms", one CI run).
        #expect(redis.command("SET", "swiftpaging:test:l:10 1:0", "gone", "PX", "600").hasPrefix("+OK"))
        let clock = ContinuousClock(), start = clock.now
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(clock.now - start >= .milliseconds(500), "it waited for the lease")
        #expect(upstream.fetches == 1)
        #expect(cache.stats.counters["lease_waits"] == 1)
        // Said: a run after a killed one stalled for the killed run's lease without a word.
        #expect(log.entries.contains { $0.level == .info && $0.message.contains("for a page another process was loading, whose lease ended without storing it") },
                "\(log.messages)")
    }

    /// Found by a probe: a key without an expiry (or of another type) at a page's lease name,
    /// another application's, made every load of that page wait lease_ms, on every run, for
    /// ever. It is no lease: the load goes on at once, it is said, and the key is left alone.
    @Test func aKeyAtALeaseNameThatIsNoLease_isNotWaitedFor() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (pager, cache) = try pipeline(redis, upstream, [("lease_ms", .int(60_000))])
        let (other, _) = try pipeline(redis, upstream, namespace: "other", [("lease_ms", .int(60_000))])
        #expect(redis.command("SET", "swiftpaging:test:l:10 1:0", "foreign").hasPrefix("+OK"))
        #expect(redis.command("HSET", "swiftpaging:other:l:10 1:0", "field", "value").hasPrefix(":1"))
        let clock = ContinuousClock(), start = clock.now
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(try await load(other, "0") == items(0..<10))
        #expect(clock.now - start < .seconds(30), "waited for a lease")
        #expect(upstream.fetches == 2)
        #expect(cache.stats.counters["lease_waits"] == nil)
        #expect(log.contains("the key swiftpaging:test:l:10 1:0 at a lease's name is no lease of redis-cache"), "\(log.messages)")
        #expect(log.contains("the key swiftpaging:other:l:10 1:0 at a lease's name is no lease of redis-cache"), "\(log.messages)")
        #expect(redis.command("GET", "swiftpaging:test:l:10 1:0").contains("foreign"))
        #expect(redis.command("TYPE", "swiftpaging:other:l:10 1:0").hasPrefix("+hash"))
    }

    /// Found by a probe: a Redis that stopped answering (SIGSTOP: its kernel still accepts
    /// connections) was said to be "connected again" at each connection and unavailable again
    /// at its first command, a warning each time. It is said once, and back once it answers.
    @Test func aRedisThatStopsAnswering_isWarnedOfOnce_andSaidBackWhenItAnswers() async throws {
        let redis = try await RedisServer.start()
        defer {
            redis.resume()
            redis.stop()
        }
        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(redis, upstream, [("command_timeout_ms", .int(300)), ("connect_timeout_ms", .int(300)),
                                                        ("retry_interval_ms", .int(0))])
        _ = try await load(pager, "0")
        redis.pause()
        for key in stride(from: 10, to: 60, by: 10) {
            #expect(try await load(pager, "\(key)") == items(key..<key + 10))
        }
        // Said once, and again only a minute later: a starved machine outlasted the minute
        // with these loads (55 s: the lines are timed as they reach the test, not as said).
        let warnings = log.times(containing: "is unavailable")
        #expect(!warnings.isEmpty, "\(log.messages)")
        #expect(zip(warnings, warnings.dropFirst()).allSatisfy { $1 - $0 > .seconds(55) }, "\(log.messages)")
        // Said as the timeout it is (it was the socket's "Resource temporarily unavailable").
        #expect(log.contains("is unavailable (no answer within command_timeout_ms (300 ms))"), "\(log.messages)")
        #expect(!log.contains("connected again"), "\(log.messages)")
        redis.resume()
        #expect(try await eventually {
            _ = try await load(pager, "0")
            return log.contains("connected again to Redis at \(redis.address)")
        })
        #expect(log.count(containing: "connected again") == 1, "\(log.messages)")
    }

    /// A `pager run` whose source never answers holds the lease; killed with SIGKILL, it never
    /// releases it: a load elsewhere waits no longer than its own lease_ms for the page, then
    /// fetches. (Its Redis timeouts are long: on a loaded machine a slow answer would make it go
    /// on without the lease.)
    @Test func aHolderKilledMidFetch_makesOthersWaitNoLongerThanTheLease() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let folder = scratchFolder()
        let manifest = folder + "/m.json"
        // The holder's lease outlives the test (600 s), so that it is still there however late
        // this test looks; the waiter below waits its own lease_ms (2 s), no longer.
        try """
        {"source": {"plugin": "\(try await fixturePlugin("never_complete"))"},
         "interceptors": [{"plugin": "\(shippedPlugin("redis-cache"))",
                           "config": {"address": "\(redis.address)", "namespace": "test", "lease_ms": 600000,
                                      "connect_timeout_ms": 30000, "command_timeout_ms": 30000}}],
         "page_size": 10, "timeout_ms": 600000}
        """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: pagerCommand)
        holder.arguments = ["run", manifest, "--refresh"]
        holder.standardOutput = FileHandle.nullDevice
        holder.standardError = FileHandle.nullDevice
        try spawning { try holder.run() }
        defer { if holder.isRunning { kill(holder.processIdentifier, SIGKILL) } }
        var took = false
        let deadline = ContinuousClock.now + .seconds(120)
        while !took, holder.isRunning, ContinuousClock.now < deadline {
            took = redis.command("EXISTS", "swiftpaging:test:l:10 1:0").hasPrefix(":1")
            if !took { try await Task.sleep(for: .milliseconds(10)) }
        }
        #expect(took, "the child took the lease")
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()

        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(redis, upstream, [("lease_ms", .int(2000))])
        let clock = ContinuousClock(), start = clock.now
        #expect(try await load(pager, "0", kind: .refresh) == items(0..<10))
        let waited = clock.now - start
        #expect(waited >= .milliseconds(200), "it waited for the dead holder's lease")
        #expect(waited < .seconds(300), "no longer than its own lease_ms, not the holder's 600 s")
        #expect(upstream.fetches == 1)
    }

    @Test func aFailedLoad_releasesItsLease_andTheNextTakesItAtOnce() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(redis, upstream, [("lease_ms", .int(600000))])
        upstream.fail(true)
        await #expect(throws: (any Error).self) { try await load(pager, "0") }
        #expect(redis.command("EXISTS", "swiftpaging:test:l:10 1:0").hasPrefix(":0"), "released")
        upstream.fail(false)
        #expect(try await load(pager, "0") == items(0..<10), "not waiting ten minutes for a lease")
    }

    @Test func redisStoppedMidRun_loadsStillSucceed_withOneWarning_andItsReturnIsNoticed() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (pager, cache) = try pipeline(redis, upstream, [("retry_interval_ms", .int(0))])
        _ = try await load(pager, "0")
        redis.stop()
        for key in stride(from: 0, to: 100, by: 10) {
            #expect(try await load(pager, "\(key)") == items(key..<key + 10))
        }
        #expect(log.count(containing: "is unavailable") == 1, "\(log.messages)")
        #expect(log.entries.allSatisfy { $0.level != .error }, "\(log.messages)")
        #expect((cache.stats.counters["unavailable"] ?? 0) >= 10)

        try await redis.restart()
        _ = try await load(pager, "0")
        #expect(log.contains("connected again to Redis at \(redis.address)"))
        let fetched = upstream.fetches
        let (other, _) = try pipeline(redis, upstream)
        #expect(try await load(other, "0") == items(0..<10))
        #expect(upstream.fetches == fetched, "stored again once Redis was back")
    }

    /// Found by a probe: a hard refresh while Redis was down succeeded without a word of what it
    /// left, and every later run served the pages from before it, until their TTL. The load
    /// still succeeds (the page came from the source), and an error says the old pages stay.
    @Test func aHardRefreshWhileRedisIsDown_saysThePagesStoredBeforeStay() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(redis, upstream, [("retry_interval_ms", .int(0))])
        _ = try await load(pager, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"])
        #expect(!log.contains("did not replace"), "\(log.messages)")
        redis.stop()
        #expect(try await load(pager, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"]) == items(0..<10))
        #expect(log.entries.contains { $0.level == .error && $0.message.hasPrefix(
            "redis-cache: hard refresh: its page did not replace the pages stored before (Redis at \(redis.address) is unavailable: ") }, "\(log.messages)")
    }

    @Test func aRestartBetweenLoads_isReconnectedAtOnce() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (pager, _) = try pipeline(redis, upstream)
        _ = try await load(pager, "0")
        redis.stop()
        try await redis.restart() // an empty Redis: nothing persisted
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(redis.command("EXISTS", "swiftpaging:test:p:10 1:0").hasPrefix(":1"), "stored on the new connection")
        #expect(!log.contains("is unavailable"), "\(log.messages)")
    }

    /// Values no redis-cache wrote: each is a miss with a warning, never a crash, and the page
    /// loaded instead replaces it.
    @Test func valuesThatAreNotPages_areMissesWithAWarning() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let key = Array("swiftpaging:test:p:10 1:0".utf8)
        func be32(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)] }
        /// "SPG1", the FNV-1a checksum of `body`, `body`: what passes the checksum.
        func sealed(_ body: [UInt8]) -> [UInt8] {
            var h: UInt64 = 14_695_981_039_346_656_037
            for byte in body { h = (h ^ UInt64(byte)) &* 1_099_511_628_211 }
            return Array("SPG1".utf8) + be32(UInt32(h >> 32)) + be32(UInt32(h & 0xffff_ffff)) + body
        }
        let identity = Array("10 1:0".utf8)
        let head = [UInt8](repeating: 0, count: 8) + be32(2) + [0] + be32(0) + [0] + be32(0)
        let hostile: [(String, [UInt8])] = [
            ("garbage", Array("hello world".utf8)),
            ("a checksum that does not match", Array("SPG1".utf8) + [UInt8](repeating: 1, count: 8) + head),
            ("cut short", sealed(head)),
            ("a key past the end", sealed([UInt8](repeating: 0, count: 12) + [1] + be32(0x7f7f_7f7f))),
            ("a presence byte of 7", sealed([UInt8](repeating: 0, count: 12) + [7] + be32(0))),
            ("unknown flags", sealed([UInt8](repeating: 0, count: 8) + be32(64) + [0] + be32(0) + [0] + be32(0))),
            ("another identity", sealed(head + be32(3) + Array("abc".utf8) + be32(0))),
            ("a huge item count", sealed(head + be32(UInt32(identity.count)) + identity + be32(0x7fff_ffff))),
            ("an item past the end", sealed(head + be32(UInt32(identity.count)) + identity + be32(1) + be32(1000) + Array("{}".utf8))),
            ("bytes after the items", sealed(head + be32(UInt32(identity.count)) + identity + be32(0) + [0])),
        ]
        var fetches = 0
        for (name, value) in hostile {
            #expect(redis.command([Array("SET".utf8), key, value]).hasPrefix("+OK"))
            let (pager, _) = try pipeline(redis, upstream)
            #expect(try await load(pager, "0") == items(0..<10), "\(name)")
            fetches += 1
            #expect(upstream.fetches == fetches, "\(name): loaded from the source")
        }
        // Another type under the key, and a value over max_page_bytes.
        redis.command("DEL", "swiftpaging:test:p:10 1:0")
        redis.command("LPUSH", "swiftpaging:test:p:10 1:0", "x")
        let (listed, _) = try pipeline(redis, upstream)
        #expect(try await load(listed, "0") == items(0..<10))
        redis.command([Array("SET".utf8), key, sealed(head + [UInt8](repeating: 65, count: 5000))])
        let (bounded, _) = try pipeline(redis, upstream, [("max_page_bytes", .int(1024))])
        #expect(try await load(bounded, "0") == items(0..<10))
        #expect(upstream.fetches == fetches + 2)
        #expect(log.count(containing: "treated as a miss") >= hostile.count, "\(log.messages)") // each a new instance
        // The good page stored last answers.
        let (good, _) = try pipeline(redis, upstream)
        #expect(try await load(good, "0") == items(0..<10))
        #expect(upstream.fetches == fetches + 2)
        // Forged with a matching checksum, an item that is not JSON: the host refuses it, and
        // the page is loaded from the source, with a warning naming the item.
        redis.command([Array("SET".utf8), key, sealed(head + be32(UInt32(identity.count)) + identity + be32(1) + be32(3) + Array("{{{".utf8))])
        let (forged, forgedCache) = try pipeline(redis, upstream)
        #expect(try await load(forged, "0") == items(0..<10))
        #expect(upstream.fetches == fetches + 3)
        // A page the host refuses is a miss, not a hit (it was counted as one: found by a probe).
        #expect(forgedCache.stats.counters["hits"] == nil && forgedCache.stats.counters["misses"] == 1, "\(forgedCache.stats.counters)")
        #expect(log.contains("redis-cache: item 0 of the page held was refused by the host (not valid JSON, or past max_page_bytes or max_items_per_page); loading from the source"), "\(log.messages)")
    }

    @Test func aHardRefresh_replacesItsNamespaceOnly_andOneThatFailsLeavesIt() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (a, _) = try pipeline(redis, upstream, namespace: "a")
        let (b, _) = try pipeline(redis, upstream, namespace: "b")
        for key in ["0", "10", "20"] {
            _ = try await load(a, key)
            _ = try await load(b, key)
        }
        _ = try await load(a, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"])
        #expect(upstream.fetches == 7)
        #expect(redis.command("KEYS", "swiftpaging:a:p:*").hasPrefix("*1"), "only the refreshed page is back")
        #expect(redis.command("KEYS", "swiftpaging:b:p:*").hasPrefix("*3"))
        // A hard refresh whose load fails loses nothing (before, the namespace was emptied first).
        upstream.fail(true)
        await #expect(throws: (any Error).self) {
            try await load(b, "0", kind: .refresh, userInfo: [PagingUserInfoKey.hardRefresh: "true"])
        }
        #expect(redis.command("KEYS", "swiftpaging:b:p:*").hasPrefix("*3"))
        #expect(try await load(b, "20").count == 10)
    }

    @Test func freshness_staleWhileRevalidate_answersAtOnce_andStoresTheFreshPage() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        let (pager, cache) = try pipeline(redis, upstream, [("policy", .string("stale-while-revalidate"))])
        _ = try await load(pager, "0")
        let stored = redis.command("PTTL", "swiftpaging:test:p:10 1:0")
        #expect(stored.hasPrefix(":") && !stored.hasPrefix(":-"), "stored with an expiry: \(stored)")
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(await eventually { upstream.fetches == 2 }, "revalidated in the background")
        #expect(cache.stats.counters["stale_hits"] == 1)

        let (networkFirst, _) = try pipeline(redis, upstream, [("policy", .string("network-first"))])
        upstream.fail(true)
        #expect(try await load(networkFirst, "0") == items(0..<10), "the page held answers when the source fails")
        #expect(log.contains("the load failed"))
    }

    @Test(arguments: [
        (#"{"address": "127.0.0.1:99999"}"#, "config `address` '127.0.0.1:99999': the port must be a number in 1...65535"),
        (#"{"address": "${PAGING_TEST_UNSET_VARIABLE}"}"#, "the environment variable PAGING_TEST_UNSET_VARIABLE is not set"),
        (#"{"namespace": "a b"}"#, "config `namespace` must be 1-128 characters"),
        (#"{"ttl_seconds": 0}"#, "config `ttl_seconds` must be a whole number in 1..."),
        (#"{"lease_ms": "soon"}"#, "config `lease_ms` must be a whole number"),
        (#"{"policy": "fastest"}"#, "config `policy` must be"),
        (#"{"password_env": "PAGING_TEST_UNSET_VARIABLE"}"#, "config `password_env`: the environment variable PAGING_TEST_UNSET_VARIABLE is not set"),
        // A misspelt key left its setting at the default without a word.
        (#"{"max_age_second": 60}"#, "config `max_age_second`: unknown key; expected address, password_env"),
        // A URL is not an address: its password was printed in every warning.
        (#"{"address": "redis://:Secret-pw-1@127.0.0.1:6390"}"#,
         "config `address` '***@127.0.0.1:6390': expected host:port, host, [v6-address]:port or unix:/path, not a URL"),
    ])
    func badConfigs_areRefusedNamingTheKey(_ config: String, _ expected: String) throws {
        let json = try JSONValue.parse(Array(config.utf8))
        #expect {
            _ = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(config: json, sink: log.sink)
        } throws: { error in
            "\(error)".contains(expected) && !"\(error)".contains("Secret-pw-1")
        }
        #expect(!log.messages.contains { $0.contains("Secret-pw-1") })
    }

    /// Found by a probe: an address that holds the password by mistake (from the variable
    /// password_env names) was quoted in full by a refusal of the address and by the health
    /// check `pager validate` runs, while `pager run`'s warning hid it.
    @Test func anAddressHoldingThePassword_isNeverQuotedWithIt() async throws {
        // The password is also a host here, so that the health check fails at once.
        setTestEnvironment("REDIS_TEST_ADDRESS_PASSWORD", "127.0.0.9")
        #expect {
            _ = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
                config: .object([("address", .string("127.0.0.1:6391:${REDIS_TEST_ADDRESS_PASSWORD}")),
                                 ("password_env", .string("REDIS_TEST_ADDRESS_PASSWORD"))]), sink: log.sink)
        } throws: { error in
            "\(error)".contains("config `address` '127.0.0.1:6391:***': ") && !"\(error)".contains("127.0.0.9")
        }
        let cache = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string("${REDIS_TEST_ADDRESS_PASSWORD}:1")), ("password_env", .string("REDIS_TEST_ADDRESS_PASSWORD")),
                             ("retry_interval_ms", .int(0))]), sink: log.sink)
        guard case .unhealthy = cache.health() else { Issue.record("nothing listens there: the health check passed"); return }
        #expect(log.contains("Redis at ***:1 is unavailable"), "\(log.messages)")
        #expect(!log.messages.contains { $0.contains("127.0.0.9") }, "\(log.messages)")
        // Found by a review: a password "***" was replaced by itself for ever (create hung).
        setTestEnvironment("REDIS_TEST_ADDRESS_PASSWORD", "***")
        #expect {
            _ = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
                config: .object([("address", .string("u@127.0.0.1:6399")), ("password_env", .string("REDIS_TEST_ADDRESS_PASSWORD"))]), sink: log.sink)
        } throws: { error in
            "\(error)".contains("config `address` '***@127.0.0.1:6399': expected host:port")
        }
    }

    /// A database the running Redis does not have is the config's mistake, said at create: it
    /// counted as Redis down, for ever, one warning a minute.
    @Test func aDatabaseRedisLacks_isABadConfig() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        #expect {
            _ = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
                config: .object([("address", .string(redis.address)), ("database", .int(99))]), sink: log.sink)
        } throws: { error in
            "\(error)".contains("config `database` 99: Redis at \(redis.address) has no such database (SELECT refused: ERR DB index is out of range)")
        }
        _ = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string(redis.address)), ("database", .int(15))]), sink: log.sink)
    }

    @Test func anAddressFromTheEnvironment_andRedisDownAtCreate_areNotFailures() async throws {
        let redis = try await RedisServer.start()
        let address = redis.address
        redis.stop()
        setTestEnvironment("PAGING_TEST_REDIS_ADDRESS", address)
        let upstream = CountingPluginSource()
        let cache = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string("${PAGING_TEST_REDIS_ADDRESS}")), ("retry_interval_ms", .int(0))]), sink: log.sink)
        let pager = PluginPager(source: upstream, interceptors: [cache])
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(log.contains("Redis at \(address) is unavailable"))
        try await redis.restart()
        defer { redis.stop() }
        _ = try await load(pager, "10")
        #expect(redis.command("EXISTS", "swiftpaging:default:p:10 2:10").hasPrefix(":1"))
    }

    /// A server that answers with more than a process can hold (a 1 GiB string, an array of 100
    /// million values; Tests/Fixtures/redis/hostile_redis.py) is cut off once the reply passes
    /// its bound: the load goes on from the source, the warning says why, and little was read.
    @Test(arguments: [("bulk", "a reply larger than 1114112 bytes (max_page_bytes + 1 MiB)"), ("array", "a reply of more than 1048576 values")])
    func aReplyTooLargeToHold_isCutOff_andTheLoadGoesOn(_ mode: String, _ reason: String) async throws {
        let record = scratchFolder() + "/sent"
        let server = try FixtureServer("redis/hostile_redis.py", arguments: [mode, record])
        defer { server.stop() }
        let upstream = CountingPluginSource()
        let cache = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string("127.0.0.1:\(server.port)")), ("max_page_bytes", .int(65536)),
                             ("command_timeout_ms", .int(5000))]), sink: log.sink)
        let pager = PluginPager(source: upstream, interceptors: [cache])
        #expect(try await load(pager, "0") == items(0..<10))
        #expect(log.contains("is unavailable (\(reason); connection dropped)"), "\(log.messages)")
        // The server writes down what it sent on each connection (the plugin reconnects once)
        // when it sees the connection closed.
        let deadline = ContinuousClock.now + .seconds(30)
        var sent: [Int] = []
        while sent.isEmpty, ContinuousClock.now < deadline {
            let lines = (try? String(contentsOfFile: record, encoding: .utf8))?.split(separator: "\n") ?? []
            sent = lines.compactMap { Int($0.dropFirst("SENT ".count)) }
            if sent.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        }
        let bytes = try #require(sent.max(), "the connection was never closed")
        #expect(bytes < 16 << 20, "the client read on: \(bytes) bytes were sent before it hung up")
    }

    /// Found by a hostile probe (Tests/Fixtures/redis/odd_redis.py): a server that quotes the
    /// password in its AUTH refusal got it into the log; one whose SCAN never ends held a hard
    /// refresh (and the process) until ten million SCANs had gone by.
    @Test func anOddRedis_neverGetsThePasswordIntoALine_norHoldsAHardRefresh() async throws {
        let secret = "Hunter2-\(UInt32.random(in: 0...UInt32.max))"
        setTestEnvironment("REDIS_TEST_ODD_PASSWORD", secret)
        let echo = try FixtureServer("redis/odd_redis.py", arguments: ["auth-echo"])
        defer { echo.stop() }
        let upstream = CountingPluginSource()
        let cache = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string("127.0.0.1:\(echo.port)")), ("password_env", .string("REDIS_TEST_ODD_PASSWORD"))]),
            sink: log.sink)
        #expect(try await load(PluginPager(source: upstream, interceptors: [cache]), "0") == items(0..<10))
        #expect(log.contains("AUTH refused: WRONGPASS invalid password ***"), "\(log.messages)")
        // Its health check says why too (a probe: "does not answer PING", of a server that had).
        guard case .unhealthy = cache.health() else { Issue.record("a refused AUTH passed the health check"); return }
        #expect(log.contains("Redis at 127.0.0.1:\(echo.port) is unavailable: AUTH refused: WRONGPASS invalid password ***"), "\(log.messages)")
        #expect(!log.messages.contains { $0.contains(secret) }, "\(log.messages)")

        let scan = try FixtureServer("redis/odd_redis.py", arguments: ["scan-forever"])
        defer { scan.stop() }
        let walker = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string("127.0.0.1:\(scan.port)")), ("command_timeout_ms", .int(100))]), sink: log.sink)
        let pager = PluginPager(source: upstream, interceptors: [walker])
        let clock = ContinuousClock()
        let start = clock.now
        let hard = pager.request(.refresh, key: "0", params: params(pageSize: 10, userInfo: [PagingUserInfoKey.hardRefresh: "true"]))
        #expect(try await pager.load(hard).values.texts == items(0..<10))
        // Ten command timeouts of 100 ms; the ten million SCANs before took about 15 minutes
        // (the bound allows for a test process whose tasks waited long for a thread).
        #expect(clock.now - start < .seconds(300))
        #expect(log.contains("hard refresh: the namespace's keys were not all found within 1000 ms"), "\(log.messages)")
    }

    /// A miss whose page another process stored, letting its lease go, between the miss's read
    /// and the lease taken (Tests/Fixtures/redis/odd_redis.py's `stored-late` shows a page only
    /// then): the page is read once more and answered, a hit, rather than fetched a second time.
    @Test func aPageStoredJustBeforeTheLeaseIsTaken_isAnsweredNotFetchedAgain() async throws {
        let redis = try FixtureServer("redis/odd_redis.py", arguments: ["stored-late"])
        defer { redis.stop() }
        let upstream = CountingPluginSource()
        func pipeline() throws -> (PluginPager, LoadedInterceptor) {
            let cache = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
                config: .object([("address", .string("127.0.0.1:\(redis.port)"))]), sink: log.sink)
            return (PluginPager(source: upstream, interceptors: [cache]), cache)
        }
        let (holder, holderCache) = try pipeline()
        #expect(try await load(holder, "0") == items(0..<10))
        #expect(upstream.fetches == 1 && holderCache.stats.counters["misses"] == 1)

        let (late, lateCache) = try pipeline()
        #expect(try await load(late, "0") == items(0..<10))
        #expect(upstream.fetches == 1, "the page was fetched again")
        #expect(lateCache.stats.counters["hits"] == 1 && lateCache.stats.counters["misses"] == nil, "\(lateCache.stats.counters)")
    }

    /// A Redis that wants a password, sent none: its refusal is said as that, naming the server
    /// (it was said to be a key holding another type).
    @Test func aRedisThatWantsAPassword_isSaidToWantOne() async throws {
        let redis = try FixtureServer("redis/odd_redis.py", arguments: ["noauth"])
        defer { redis.stop() }
        let cache = try PluginLibrary.open(path: shippedPlugin("redis-cache")).makeInterceptor(
            config: .object([("address", .string("127.0.0.1:\(redis.port)"))]), sink: log.sink)
        #expect(try await load(PluginPager(source: CountingPluginSource(), interceptors: [cache]), "0") == items(0..<10))
        #expect(log.contains("Redis at 127.0.0.1:\(redis.port) refused GETRANGE (reading a page) (it wants a password, or another one: "
                             + "config password_env names the variable holding it): NOAUTH Authentication required."), "\(log.messages)")
        #expect(!log.messages.contains { $0.contains("another type") }, "\(log.messages)")
    }
}
