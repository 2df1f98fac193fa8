import Foundation
import Paging
import PagingHost
import Testing

/// The ABI 1.1 extensions from plugins written in Swift (PagingPluginKit), through real dlopen
/// of Examples/SwiftPlugins (libexample-plugins.so) and the logging plugin.
@Suite("PagingPluginKit: transforms, deferred intercepts, load outcomes, metrics")
struct SwiftPluginKitTests {
    let log = LogRecorder()

    func library() throws -> PluginLibrary { try PluginLibrary.open(path: shippedPlugin("example-plugins")) }

    func people(_ count: Int) throws -> LoadedSource {
        let file = scratchFolder() + "/people.jsonl"
        let lines = (0..<count).map { #"{"email":"p\#($0)@example.com","n":\#($0)}"# }
        try (lines.joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        return try PluginLibrary.open(path: shippedPlugin("jsonlines")).makeSource(config: .object([("path", .string(file))]), sink: log.sink)
    }

    @Test func transform_fromSwift_replacesItems_withMetadata_andCounts() async throws {
        let redact = try library().makeInterceptor(id: "redact", config: .object([("fields", .array([.string("email")]))]),
                                                  sink: log.sink)
        let pager = Pager(source: try people(5), interceptors: [redact])
        let page = try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 5)))
        #expect(page.values.texts == (0..<5).map { #"{"n":\#($0)}"# })
        #expect(page.metadata == ["redact.removed": "5"])
        #expect(redact.stats.counters == ["fields_removed": 5])
    }

    @Test func transform_withNothingToRemove_keepsThePageAsItIs() async throws {
        let redact = try library().makeInterceptor(id: "redact", config: .object([("fields", .array([.string("phone")]))]),
                                                  sink: log.sink)
        let pager = Pager(source: try people(3), interceptors: [redact])
        let page = try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 3)))
        #expect(page.values.texts == (0..<3).map { #"{"email":"p\#($0)@example.com","n":\#($0)}"# })
        #expect(page.metadata.isEmpty)
    }

    @Test func failedLoad_isHeardBySwiftInterceptors() async throws {
        let redact = try library().makeInterceptor(id: "redact", config: .object([("fields", .array([]))]), sink: log.sink)
        let logging = try PluginLibrary.open(path: shippedPlugin("logging")).makeInterceptor(sink: log.sink)
        let failing = try PluginLibrary.open(path: try await fixturePlugin("interceptor_work"))
            .makeSource(id: "offsets", config: .object([("fail_times", .int(1))]), sink: log.sink)
        let pager = Pager(source: failing, interceptors: [logging, redact])
        await #expect(throws: PluginError.self) {
            try await pager.load(pager.request(.refresh, key: "0", params: params(pageSize: 3)))
        }
        #expect(log.contains("the load of key 0 failed: offsets ("), "\(log.messages)")
        #expect(log.entries.contains { $0.level == .warning && $0.message.hasPrefix("refresh key 0 failed: offsets (") && $0.message.hasSuffix("transient: busy (retry after 100 ms)") },
                "\(log.messages)")
        #expect(redact.stats.counters == ["loads_failed": 1])
    }

    @Test func deferredIntercept_fromSwift_waitsWithoutAThread_thenProceeds() async throws {
        let delay = try library().makeInterceptor(id: "delay", config: .object([("delay_ms", .int(100))]), sink: log.sink)
        let pager = Pager(source: try people(1_000), interceptors: [delay], deduplication: .disabled)
        let clock = ContinuousClock()
        let started = clock.now
        let counts = try await withThrowingTaskGroup(of: Int.self) { group in
            for index in 0..<100 {
                group.addTask {
                    try await pager.load(pager.request(.append, key: PluginKey("\(index * 10)"), params: params(pageSize: 10))).values.count
                }
            }
            return try await group.reduce(0, +)
        }
        #expect(counts == 1_000)
        #expect(clock.now - started >= .milliseconds(100))
    }

    @Test func badConfig_isRefused_namingTheKey() throws {
        #expect(throws: PluginLoadError.self) {
            try library().makeInterceptor(id: "delay", config: .object([("delay_ms", .int(-1))]), sink: log.sink)
        }
        do {
            _ = try library().makeInterceptor(id: "redact", config: .object([("fields", .string("email"))]), sink: log.sink)
            Issue.record("a string for fields was accepted")
        } catch {
            #expect("\(error)".contains("fields: expected an array of field names"), "\(error)")
        }
    }

    /// A whole number past Int64 was said to be "no integer" ("expected an integer, got a
    /// number"): it is one, out of range, and the range is said.
    @Test(arguments: ["9223372036854775808", "-9223372036854775809", "123456789012345678901234567890"])
    func anIntegerPastInt64_isRefused_asOutOfRange(_ text: String) throws {
        let config = try JSONValue.parse(Array(#"{"delay_ms": \#(text)}"#.utf8))
        let library = try library()
        #expect(throws: PluginLoadError.createFailed(path: library.path, id: "delay", status: .invalidConfig,
                                                     message: "delay_ms: out of range; expected an integer from -9223372036854775808 to 9223372036854775807")) {
            try library.makeInterceptor(id: "delay", config: config, sink: log.sink)
        }
        // A number with a fraction or an exponent is still no integer.
        #expect(throws: PluginLoadError.createFailed(path: library.path, id: "delay", status: .invalidConfig,
                                                     message: "delay_ms: expected an integer, got a number")) {
            try library.makeInterceptor(id: "delay", config: .object([("delay_ms", .double(1.5))]), sink: log.sink)
        }
    }
}
