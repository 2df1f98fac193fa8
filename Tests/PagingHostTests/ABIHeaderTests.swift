import Testing

@Suite("The ABI headers")
struct ABIHeaderTests {
    @Test func compileCleanAsC99AndCxx_withWarningsAsErrors() async throws {
        let result = try await run("/bin/bash", ["\(repositoryRoot)/Tests/Fixtures/check_headers.sh", "\(repositoryRoot)/Sources/CPaging/include"])
        #expect(result.code == 0, "\(result.stdout)\(result.stderr)")
    }

    @Test func aPluginBuildsWithPlainCcAndTheHeadersAlone() async throws {
        let path = try await compileCPlugin("\(repositoryRoot)/Examples/CInterceptor/counter.c")
        let symbols = try await run("/usr/bin/env", ["nm", "-D", "--defined-only", path])
        #expect(symbols.stdout.contains("paging_plugin_entry"))
        let needed = try await run("/usr/bin/env", ["readelf", "-d", path])
        #expect(!needed.stdout.contains("swift"), "a C plugin must not need the Swift runtime")
    }
}
