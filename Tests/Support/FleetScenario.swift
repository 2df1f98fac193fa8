import Foundation
import GitHubFixtureServer
import Paging
import PagingHost
import LoopbackHTTP

/// A fleet of `pager serve` processes sharing one Redis (`redis-cache`) and one PostgreSQL
/// (`postgres-store`) in front of the GitHub-like fixture server, paged through by many clients
/// at once: what `FleetTests` runs in a short form and paging-bench row 14 in full.
public struct FleetScenario: Sendable {
    /// `pager serve` processes.
    public var servers = 4
    /// Clients paging at once, each through every page, starting on server `client % servers`.
    public var clients = 32
    public var pages = 50
    public var pageSize = 20
    /// How long the upstream takes to answer a page.
    public var upstreamDelay: Duration = .milliseconds(20)
    /// After this many answers in all, server 0 is killed (SIGKILL); its clients go on with the next.
    public var killAfter: Int?
    /// After this many answers in all, Redis is stopped, then started again.
    public var restartRedisAfter: Int?
    /// How long a redis-cache lease lasts.
    public var leaseMs = 2_000
    /// postgres-store's statement_timeout_ms (nil: its default, 5 s).
    public var statementTimeoutMs: Int?

    public init() {}

    /// What the clients saw.
    public struct Figures: Sendable {
        /// Answers the clients got (200s), and how long they took in all.
        public var answers = 0
        public var seconds = 0.0
        public var p50: Duration = .zero
        public var p99: Duration = .zero
        public var slowest: Duration = .zero
        /// Requests the upstream got for each page (1-based).
        public var upstreamFetches: [Int: Int] = [:]
        /// Answers other than 200 from a server that was alive, and connections a live server refused.
        public var failures: [String] = []
        /// Requests sent again to the next server after theirs was killed.
        public var failovers = 0
        /// Clients that got every item once, in order.
        public var completeClients = 0
        /// What each server wrote to standard error, for a test's failure message.
        public var serverLogs: [String] = []
    }
}

extension FleetScenario {
    /// Runs the scenario against `redis` and the PostgreSQL at `postgresConninfo`, its pages under
    /// `namespace` (fresh for each run).
    public func run(redis: RedisServer, postgresConninfo: String, namespace: String) async throws -> Figures {
        let fetches = Locked<[Int: Int]>([:])
        let fixture = GitHubFixture.synthetic(count: pages * pageSize)
        let handler = gitHubSearchHandler(fixture: fixture)
        let delay = upstreamDelay
        let upstream = try LoopbackHTTPServer { request in
            let page = request.query["page"].flatMap { Int($0) } ?? 1
            fetches.withLock { $0[page, default: 0] += 1 }
            Thread.sleep(forTimeInterval: delay.seconds)
            return handler(request)
        }
        upstream.start()
        defer { upstream.stop() }
        let folder = scratchFolder()
        let manifest = folder + "/fleet.json"
        try """
        {"source": {"plugin": "http", "config": {
           "url": "\(upstream.baseURL)/search/repositories?q=swift&sort=stars&page=1&per_page={pageSize}",
           "items": "/items", "pagination": {"type": "link"}, "prefetch": false, "timeout_ms": 10000}},
         "interceptors": [
           {"plugin": "redis-cache", "config": {"address": "\(redis.address)", "namespace": "\(namespace)", "lease_ms": \(leaseMs), "poll_ms": 10}},
           {"plugin": "postgres-store", "config": {"conninfo": "\(postgresConninfo)", "namespace": "\(namespace)"\(statementTimeoutMs.map { #", "statement_timeout_ms": \#($0)"# } ?? "")}}],
         "page_size": \(pageSize), "timeout_ms": 30000,
         "retry": {"max_retries": 3, "initial_backoff_ms": 50}}
        """.write(toFile: manifest, atomically: true, encoding: .utf8)
        let environment = ["PAGER_SERVE_SECRET": "the fleet's shared secret, 32 bytes"]
        var started: [ServeProcess] = []
        for _ in 0..<servers { started.append(try await ServeProcess([manifest], environment: environment)) }
        let processes = started
        let ports = processes.map(\.port)
        let killed = Locked<Set<Int>>([])
        let answered = Locked(0)
        let latencies = Locked<[Duration]>([])
        let figures = Locked(Figures())
        let expected = fixture.repositories.map(\.name)

        /// Counts an answer; kills server 0 or restarts Redis when its turn comes.
        let onAnswer: @Sendable () -> Void = { [killAfter, restartRedisAfter] in
            let count = answered.withLock { count in
                count += 1
                return count
            }
            if count == killAfter {
                killed.withLock { _ = $0.insert(0) }
                kill(processes[0].pid, SIGKILL)
            }
            if count == restartRedisAfter {
                redis.stop()
                Task { try? await redis.restart() }
            }
        }
        let start = ContinuousClock.now
        await withTaskGroup(of: Void.self) { group in
            for client in 0..<clients {
                group.addTask {
                    await Self.page(client: client, ports: ports, killed: killed, expected: expected,
                                    latencies: latencies, figures: figures, onAnswer: onAnswer)
                }
            }
        }
        var result = figures.withLock { $0 }
        result.seconds = (ContinuousClock.now - start).seconds
        let sorted = latencies.withLock { $0 }.sorted()
        result.answers = sorted.count
        if !sorted.isEmpty {
            result.p50 = sorted[sorted.count / 2]
            result.p99 = sorted[min(sorted.count - 1, sorted.count * 99 / 100)]
            result.slowest = sorted.last!
        }
        result.upstreamFetches = fetches.withLock { $0 }
        for process in processes { await process.stop() }
        result.serverLogs = processes.map(\.stderr)
        return result
    }

    /// One client: every page from the first on, following `next` cursors; on a killed server it
    /// goes on with the next one.
    private static func page(client: Int, ports: [UInt16], killed: Locked<Set<Int>>, expected: [String],
                             latencies: Locked<[Duration]>, figures: Locked<Figures>, onAnswer: @escaping @Sendable () -> Void) async {
        await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                var server = client % ports.count
                var target = "/pages"
                var names: [String] = []
                var attempts = 0
                while names.count < expected.count, attempts < 20 {
                    let begin = ContinuousClock.now
                    let reply = try? httpGet(port: ports[server], target, timeout: .seconds(60))
                    if killed.withLock({ $0.contains(server) }), reply?.status != 200 {
                        figures.withLock { $0.failovers += 1 }
                        server = (server + 1) % ports.count
                        continue
                    }
                    guard let reply, reply.status == 200, let body = try? reply.json(),
                          let items = body["items"] as? [[String: Any]] else {
                        figures.withLock { $0.failures.append("client \(client) at \(target.prefix(60)): \(reply.map { "\($0.status) \($0.text.prefix(200))" } ?? "no answer")") }
                        attempts += 1
                        continue
                    }
                    latencies.withLock { $0.append(ContinuousClock.now - begin) }
                    onAnswer()
                    names += items.compactMap { $0["name"] as? String }
                    guard let next = body["next"] as? String else { break }
                    target = "/pages?cursor=\(next)"
                }
                if names == expected { figures.withLock { $0.completeClients += 1 } }
                continuation.resume()
            }
        }
    }
}
