import Foundation
import Paging
import PagingHost
import Testing

/// A failed load never drops the values already loaded, and retrying after failures gives the
/// same final list as a run without failures — through a pipeline of loaded plugins: the
/// `flaky` C fixture (Tests/Fixtures/plugins/flaky.c) fails every third request, in front of
/// or behind the cache and sqlite-store plugins, over the jsonlines source.
@Suite("Nothing lost")
struct NothingLostTests {
    enum Arrangement: String, CaseIterable, Sendable {
        /// flaky, cache, sqlite-store: failures before the stores.
        case failuresFirst
        /// cache, sqlite-store, flaky: failures behind the stores (a failed page must not be stored).
        case failuresLast
    }

    static let steps: [PagingRequestKind] = [.refresh] + Array(repeating: .append, count: 12) + Array(repeating: .prepend, count: 12)

    func pipeline(_ arrangement: Arrangement, failEvery: Int, folder: String, log: LogRecorder) async throws -> Pipeline {
        let flaky = #"{"plugin": "\#(try await fixturePlugin("flaky"))", "config": {"fail_every": \#(failEvery)}}"#
        let stores = #"{"plugin": "cache"}, {"plugin": "sqlite-store", "config": {"path": "pages.db"}}"#
        let interceptors = arrangement == .failuresLast ? "\(stores), \(flaky)" : "\(flaky), \(stores)"
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [\(interceptors)], "page_size": 20, "max_size": 100}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        return try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"), sink: log.sink)
    }

    /// Runs the steps; after a failed load checks that the values did not change, then retries
    /// until it succeeds. Returns the final values and the number of failed loads seen.
    func run(_ arrangement: Arrangement, failEvery: Int) async throws -> (values: [String], failures: Int, log: LogRecorder) {
        let folder = scratchFolder()
        writeJSONLines(count: 200, to: folder + "/data.jsonl")
        let log = LogRecorder()
        let manager = try await pipeline(arrangement, failEvery: failEvery, folder: folder, log: log).makeManager()
        var failures = 0
        for kind in Self.steps {
            let before = manager.output.values.map(\.text)
            await manager.load(kind)
            var attempts = 0
            while let error = manager.output[kind].error {
                failures += 1
                attempts += 1
                #expect(error is PluginError, "\(error)")
                #expect(manager.output.values.map(\.text) == before, "a failed \(kind) changed the values")
                #expect(attempts < 10, "\(kind) keeps failing: \(error)")
                if attempts >= 10 { break }
                await manager.retry().value
            }
            #expect(contiguityProblem(manager.output.values, lineCount: 200) == nil)
        }
        return (manager.output.values.map(\.text), failures, log)
    }

    @Test(arguments: Arrangement.allCases)
    func failedLoads_dropNothing_andRetriesGiveTheSameList(_ arrangement: Arrangement) async throws {
        let clean = try await run(arrangement, failEvery: 0)
        let flaky = try await run(arrangement, failEvery: 3)
        #expect(clean.failures == 0)
        #expect(clean.values == (0..<100).map { #"{"n":\#($0)}"# }, "after paging to the end and back, the first 100 lines")
        #expect(flaky.values == clean.values)
        // Behind the stores, pages already stored are served without reaching the flaky plugin.
        #expect(flaky.failures >= 3, "failures were injected: \(flaky.failures)")
        report("nothing lost (\(arrangement)): \(flaky.failures) failed loads seen, final lists equal: \(flaky.values == clean.values)")
    }

    /// The same at the engine level, with ScriptedPagingSource failing and hanging pages, so that
    /// the plugin pipeline and the engine agree.
    @Test func scriptedSource_failuresDropNothing() async throws {
        let pages = (0..<10).map { page in (0..<20).map { page * 20 + $0 } }
        func run(failing: Bool) async -> [Int] {
            let source = ScriptedPagingSourceShim.make(pages: pages, failing: failing)
            let manager = PaginationManager(source: source, pageSize: 20, maxSize: 100)
            for kind in Self.steps {
                let before = Array(manager.output.values)
                await manager.load(kind)
                var attempts = 0
                while manager.output[kind].error != nil && attempts < 10 {
                    attempts += 1
                    #expect(Array(manager.output.values) == before)
                    await manager.retry().value
                }
            }
            return Array(manager.output.values)
        }
        let clean = await run(failing: false)
        let flaky = await run(failing: true)
        #expect(clean == Array(0..<100))
        #expect(flaky == clean)
    }
}

import PagingTesting

enum ScriptedPagingSourceShim {
    struct Offline: Error {}

    static func make(pages: [[Int]], failing: Bool) -> ScriptedPagingSource<Int> {
        let source = ScriptedPagingSource(pages: pages)
        if failing {
            for key in 0..<pages.count where key % 2 == 0 || key == 9 {
                source.script(key: key, .fail(Offline()), .fail(Offline()))
            }
        }
        return source
    }
}
