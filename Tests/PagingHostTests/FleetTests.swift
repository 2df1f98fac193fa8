import Foundation
import PagingTestSupport
import Testing

/// The fleet scenario in a short form (paging-bench row 14 runs it in full): `pager serve`
/// processes sharing one Redis and one PostgreSQL in front of the GitHub-like fixture server,
/// many clients paging through the same pages at once.
@Suite("A fleet of pager serve processes", .serialized)
struct FleetTests {
    /// Statements get a minute: a machine busy with the other tests ran some past the 5 s
    /// default, which counts PostgreSQL as down for a second (its pages then not stored).
    func scenario() -> FleetScenario {
        var scenario = FleetScenario()
        scenario.servers = 2
        scenario.clients = 8
        scenario.pages = 10
        scenario.pageSize = 10
        scenario.statementTimeoutMs = 60_000
        return scenario
    }

    @Test(.timeLimit(.minutes(3)))
    func everyPageIsFetchedOnce_andStoredWhole_forEveryClient() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        // No holder dies here: leases long enough that a load slowed by a busy machine keeps its
        // page's (at 2 s, one expired in a full run and its page was fetched twice).
        var scenario = scenario()
        scenario.leaseMs = 15_000
        let figures = try await scenario.run(redis: redis, postgresConninfo: postgres.conninfo, namespace: "calm")
        #expect(figures.failures.isEmpty, "\(figures.failures)")
        #expect(figures.completeClients == 8 && figures.answers == 80)
        #expect(figures.upstreamFetches == Dictionary(uniqueKeysWithValues: (1...10).map { ($0, 1) }),
                "\(figures.upstreamFetches)\n\(figures.serverLogs.joined(separator: "\n---\n"))")
        let stored = try await postgres.psql("SELECT count(*), min(item_count), max(item_count) FROM paging_pages WHERE namespace = 'calm'")
        #expect(stored == "10|10|10", "\(figures.serverLogs.joined(separator: "\n---\n"))")
    }

    /// Server 0 is killed (SIGKILL) mid-load and Redis restarted later: its clients go on with
    /// the other server, no request to a live server fails, every client gets every item once,
    /// and no page is stored twice or in part.
    @Test(.timeLimit(.minutes(3)))
    func aKilledServerAndARedisRestart_loseNothing() async throws {
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        var scenario = scenario()
        scenario.killAfter = 20
        scenario.restartRedisAfter = 45
        let figures = try await scenario.run(redis: redis, postgresConninfo: postgres.conninfo, namespace: "rough")
        #expect(figures.failures.isEmpty, "\(figures.failures)")
        #expect(figures.completeClients == 8)
        #expect(figures.failovers > 0)
        // A page the killed server was fetching may be fetched once more, by the next holder.
        #expect(figures.upstreamFetches.keys.sorted() == Array(1...10) && figures.upstreamFetches.values.allSatisfy { $0 <= 2 },
                "\(figures.upstreamFetches)")
        let stored = try await postgres.psql("SELECT count(*), min(item_count), max(item_count) FROM paging_pages WHERE namespace = 'rough'")
        #expect(stored == "10|10|10")
    }
}
