import Foundation
import GitHubFixtureServer
import LoopbackHTTP
import Testing

/// The GitHub repositories example end to end: the example's offline manifest against the
/// bundled fixture on a loopback server, with the http, logging and sqlite-store plugins, each
/// run a separate `pager` process.
@Suite("The GitHub repositories example")
struct GitHubExampleTests {
    let pager = pagerCommand

    /// The example's offline manifest, pointed at `server` and at a database in a scratch folder.
    func manifest(for server: LoopbackHTTPServer) throws -> (manifest: String, database: String) {
        let folder = scratchFolder()
        var text = try String(contentsOfFile: "\(repositoryRoot)/Examples/GitHubRepos/offline.json", encoding: .utf8)
        #expect(text.contains("127.0.0.1:18765"))
        text = text.replacingOccurrences(of: "127.0.0.1:18765", with: "127.0.0.1:\(server.port)")
        try text.write(toFile: folder + "/offline.json", atomically: true, encoding: .utf8)
        return (folder + "/offline.json", folder + "/offline.db")
    }

    func server() throws -> LoopbackHTTPServer {
        let fixture = try GitHubFixture(contentsOfFile: "\(repositoryRoot)/Examples/GitHubRepos/fixture/repositories.json")
        let server = try LoopbackHTTPServer(handler: gitHubSearchHandler(fixture: fixture))
        server.start()
        return server
    }

    @Test func firstRunFetchesOverHTTP_secondIsServedFromSQLite_hardRefreshFetchesAgain() async throws {
        let server = try server()
        defer { server.stop() }
        let (manifest, database) = try manifest(for: server)

        let first = try await run(pager, ["run", manifest, "--refresh", "--append", "2"])
        #expect(first.code == 0, "\(first.stderr)")
        let items = first.stdout.split(separator: "\n")
        #expect(items.count == 45)
        #expect(items.allSatisfy { $0.contains("\"full_name\"") })
        #expect(Set(items).count == 45, "no repository twice")
        #expect(server.requestCount == 3)
        #expect(FileManager.default.fileExists(atPath: database))

        let second = try await run(pager, ["run", manifest, "--refresh", "--append", "2"])
        #expect(second.code == 0, "\(second.stderr)")
        #expect(second.stdout == first.stdout)
        #expect(server.requestCount == 3, "the second process was served from the database")

        let hard = try await run(pager, ["run", manifest, "--hard-refresh", "--append", "1"])
        #expect(hard.code == 0, "\(hard.stderr)")
        #expect(hard.stdout.split(separator: "\n").count == 30)
        #expect(server.requestCount == 5, "a hard refresh clears the store and fetches again")
    }

    /// The fleet variant: Redis and PostgreSQL from the environment. Validated with both servers
    /// running; the first host fetches, the next is served from Redis, and a host finding Redis
    /// empty is served from PostgreSQL.
    @Test func fleetVariant_sharesPagesThroughRedisAndPostgres() async throws {
        let server = try server()
        defer { server.stop() }
        let redis = try await RedisServer.start()
        defer { redis.stop() }
        let postgres = try await PostgresServer.start()
        defer { postgres.stop() }
        let folder = scratchFolder()
        var text = try String(contentsOfFile: "\(repositoryRoot)/Examples/GitHubRepos/fleet.json", encoding: .utf8)
        text = text.replacingOccurrences(of: "127.0.0.1:18765", with: "127.0.0.1:\(server.port)")
        try text.write(toFile: folder + "/fleet.json", atomically: true, encoding: .utf8)
        let environment = ["PAGING_REDIS_ADDRESS": redis.address, "PAGING_POSTGRES_CONNINFO": postgres.conninfo]

        let validated = try await run(pager, ["validate", folder + "/fleet.json"], environment: environment)
        #expect(validated.code == 0, "\(validated.stderr)")
        let first = try await run(pager, ["run", folder + "/fleet.json", "--refresh", "--append", "2"], environment: environment)
        #expect(first.code == 0, "\(first.stderr)")
        #expect(first.stdout.split(separator: "\n").count == 45)
        #expect(server.requestCount == 3)
        let second = try await run(pager, ["run", folder + "/fleet.json", "--refresh", "--append", "2"], environment: environment)
        #expect(second.stdout == first.stdout)
        redis.command("FLUSHALL")
        let third = try await run(pager, ["run", folder + "/fleet.json", "--refresh", "--append", "2"], environment: environment)
        #expect(third.stdout == first.stdout)
        #expect(server.requestCount == 3, "served from Redis, then from PostgreSQL")
    }

    /// The store keys pages by the request's identity, user info included: the same manifest
    /// with another query fetches that query's repositories instead of being served the first
    /// query's from the database.
    @Test func anotherQuery_isFetched_notServedTheFirstQuerysPages() async throws {
        let server = try server()
        defer { server.stop() }
        let (manifest, _) = try manifest(for: server)
        let swift = try await run(pager, ["run", manifest])
        #expect(swift.code == 0, "\(swift.stderr)")
        #expect(server.requestCount == 1)

        let logManifest = (manifest as NSString).deletingLastPathComponent + "/log.json"
        try String(contentsOfFile: manifest, encoding: .utf8)
            .replacingOccurrences(of: #""q": "swift in:name,description""#, with: #""q": "log""#)
            .write(toFile: logManifest, atomically: true, encoding: .utf8)
        let log = try await run(pager, ["run", logManifest])
        #expect(log.code == 0, "\(log.stderr)")
        #expect(server.requestCount == 2, "the other query reached the server")
        #expect(!log.stdout.isEmpty && log.stdout != swift.stdout)

        // Each query is now served its own pages from the database.
        #expect(try await run(pager, ["run", manifest]).stdout == swift.stdout)
        #expect(try await run(pager, ["run", logManifest]).stdout == log.stdout)
        #expect(server.requestCount == 2)
    }

    @Test func pagingToTheEnd_reachesTheLastPage_fromTheLinkHeader() async throws {
        let server = try server()
        defer { server.stop() }
        let (manifest, _) = try manifest(for: server)
        let result = try await run(pager, ["run", manifest, "--refresh", "--append", "100"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stderr.contains("append: end of data reached"))
        let count = result.stdout.split(separator: "\n").count
        #expect(count > 45 && count < 120)
    }

    @Test func serverDown_isARunTimeFailure() async throws {
        let server = try server()
        let (manifest, _) = try manifest(for: server)
        server.stop()
        let result = try await run(pager, ["run", manifest])
        #expect(result.code == 1)
        #expect(result.stderr.contains("refresh failed"))
        #expect(result.stderr.contains("127.0.0.1"))
    }
}
