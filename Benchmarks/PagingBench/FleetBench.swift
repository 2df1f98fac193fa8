// Row 14: the fleet: `pager serve` processes sharing one Redis and one PostgreSQL in front of the
// GitHub-like fixture (20 ms a page), 32 clients paging through the same 50 pages at once; then
// with one process killed (SIGKILL) and Redis restarted mid-load.
import Foundation
import PagingHost
import PagingTestSupport

func benchFleet(_ report: Report) async throws {
    progress("row 14: the fleet (pager serve × 4, Redis, PostgreSQL, 32 clients)")
    let redis: RedisServer, postgres: PostgresServer
    do {
        redis = try await RedisServer.start()
        postgres = try await PostgresServer.start()
    } catch {
        report.add("14", "Fleet of pager serve processes", "—", target: "one upstream fetch a page", .notMeasured,
                   "\(error) (scripts/install-deps.sh installs the servers)")
        return
    }
    defer {
        redis.stop()
        postgres.stop()
    }
    var scenario = FleetScenario()
    scenario.clients = 32
    scenario.pages = 50
    scenario.pageSize = 20
    scenario.servers = 1
    let one = try await scenario.run(redis: redis, postgresConninfo: postgres.conninfo, namespace: "one")
    scenario.servers = 4
    let four = try await scenario.run(redis: redis, postgresConninfo: postgres.conninfo, namespace: "four")
    let requests = scenario.clients * scenario.pages
    scenario.killAfter = requests / 3
    scenario.restartRedisAfter = requests * 2 / 3
    let rough = try await scenario.run(redis: redis, postgresConninfo: postgres.conninfo, namespace: "rough")

    func rate(_ figures: FleetScenario.Figures) -> Double { Double(figures.answers) / figures.seconds }
    func latency(_ figures: FleetScenario.Figures) -> String {
        "p50 \(fmt(figures.p50.seconds * 1_000, 1)) ms, p99 \(fmt(figures.p99.seconds * 1_000, 1)) ms"
    }
    func fetches(_ figures: FleetScenario.Figures) -> Int { figures.upstreamFetches.values.reduce(0, +) }
    let onceEach = fetches(four) == scenario.pages && four.upstreamFetches.values.allSatisfy { $0 == 1 }
    let clean = four.failures.isEmpty && four.completeClients == scenario.clients
    report.add("14a", "Fleet: 32 clients paging through the same 50 pages (20 items, 20 ms upstream) — 1 pager serve",
               "\(fmt(rate(one), 0)) requests/s; \(latency(one)); \(fetches(one)) upstream fetches", notes: "the baseline of 14b")
    report.add("14b", "… 4 pager serve processes sharing one Redis (redis-cache) and one PostgreSQL (postgres-store)",
               "\(fmt(rate(four), 0)) requests/s (\(fmt(rate(four) / rate(one), 2))× 1 process); \(latency(four)); "
                   + "\(fetches(four)) upstream fetches for \(scenario.pages) pages",
               target: "each page fetched once, no failure", verdict(onceEach && clean),
               "\(four.completeClients) of \(scenario.clients) clients got every item once, in order; \(four.failures.count) failed requests. "
                   + "The pages are loaded by whichever process a client asks; the others wait on its Redis lease")
    let survived = rough.failures.isEmpty && rough.completeClients == scenario.clients
    let leaseBound = rough.slowest <= .milliseconds(scenario.leaseMs) + .seconds(2)
    report.add("14c", "… one process killed (SIGKILL) after a third of the requests, Redis restarted after two thirds",
               "\(rough.failures.count) failed requests; \(rough.completeClients) of \(scenario.clients) clients got every item once; "
                   + "\(rough.failovers) requests sent again to the next process; slowest request \(fmt(rough.slowest.seconds * 1_000, 0)) ms "
                   + "(lease \(scenario.leaseMs) ms); \(fetches(rough)) upstream fetches",
               target: "no request to a live process fails; none waits past the lease", verdict(survived && leaseBound),
               "a request cut off by the kill is sent again to the next process (as a load balancer would); a page the killed "
                   + "process was fetching is fetched again once its lease expires; while Redis is down the loads go on to "
                   + "PostgreSQL and the upstream")
    if !(onceEach && clean) { report.miss("14b (fleet): \(fetches(four)) upstream fetches, \(four.failures.count) failures") }
    if !(survived && leaseBound) { report.miss("14c (fleet under failure): \(rough.failures.prefix(3))") }
}
