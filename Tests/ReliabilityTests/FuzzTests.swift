import Foundation
import Paging
import PagingHost
import Synchronization
import Testing

/// Mutates valid manifests (byte flips, truncations, insertions of JSON tokens, deletions,
/// duplications, deep nesting, splices) with a fixed seed and parses each: `Manifest.parse`
/// must return or throw a `ManifestError` naming the file, and never crash or hang.
///
/// Iterations: PAGING_FUZZ_ITERATIONS (default 20,000); seed: PAGING_FUZZ_SEED (default 6).
@Suite("Fuzzing")
struct FuzzTests {
    static let seeds: [String] = [
        #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}}"#,
        """
        {
          "source": {"plugin": "jsonlines", "config": {"path": "data.jsonl", "default_page_size": 10}},
          "interceptors": [
            {"plugin": "logging", "config": {"level": "debug"}},
            {"plugin": "./plugins/libcounter.so", "id": "c-counter", "sha256": "\(String(repeating: "a", count: 64))"},
            {"plugin": "sqlite-store", "config": {"path": "pages.db", "namespace": "n\\u00e9", "busy_timeout_ms": 100}}
          ],
          "page_size": 15,
          "retry": {"max_retries": 2, "initial_backoff_ms": 10, "max_backoff_ms": 20, "multiplier": 1.5, "jitter": 0},
          "timeout_ms": 500,
          "max_size": 300,
          "prefetch_distance": 5,
          "max_items_per_page": 1000,
          "user_info": {"q": "swift \\"paging\\"", "sort": "stars"}
        }
        """,
        #"{"source":{"plugin":"http","config":{"base_url":"http://127.0.0.1:1/x","headers":{"a":"b"},"list":[1,2.5e3,-0,true,false,null]}},"page_size":1}"#,
    ]

    static let tokens: [String] = [
        "{", "}", "[", "]", "\"", ":", ",", "null", "true", "false", "-0", "0", "1e999", "-1", "9223372036854775808",
        "1.5", "\"\\u0000\"", "\"\\ud800\"", "\"\\udc00\"", "\"\\uZZZZ\"", "\\", "\u{FEFF}", "\"source\"", "\"plugin\"",
        "\"config\":{}", "{\"plugin\":\"x\"}", "\"page_size\":", " ", "\n", "\t", "\u{00}", "\u{7F}", "é", "💥",
        "[[[[[[[[", "]]]]]]]]", "{\"a\":{\"a\":{\"a\":", "\"interceptors\":[", "/*", "//", "'", "NaN", "Infinity",
    ]

    static func mutate(_ input: [UInt8], _ rng: inout SeededGenerator) -> [UInt8] {
        var bytes = input
        let rounds = Int.random(in: 1...4, using: &rng)
        for _ in 0..<rounds {
            let position = bytes.isEmpty ? 0 : Int.random(in: 0...bytes.count, using: &rng)
            switch Int.random(in: 0..<9, using: &rng) {
            case 0: // flip bits
                if !bytes.isEmpty {
                    let at = min(position, bytes.count - 1)
                    bytes[at] ^= UInt8(1 << Int.random(in: 0..<8, using: &rng))
                }
            case 1: // random byte
                if !bytes.isEmpty { bytes[min(position, bytes.count - 1)] = UInt8.random(in: 0...255, using: &rng) }
            case 2: // truncate
                bytes = Array(bytes.prefix(position))
            case 3, 4: // insert a JSON token
                bytes.insert(contentsOf: Array(tokens.randomElement(using: &rng)!.utf8), at: position)
            case 5: // delete a range
                let end = min(bytes.count, position + Int.random(in: 1...16, using: &rng))
                if position < end { bytes.removeSubrange(position..<end) }
            case 6: // duplicate a range
                let end = min(bytes.count, position + Int.random(in: 1...64, using: &rng))
                if position < end { bytes.insert(contentsOf: bytes[position..<end], at: end) }
            case 7: // random nesting, sometimes beyond the parser's limit
                let depth = Int.random(in: 1...(Bool.random(using: &rng) ? 20 : 1_200), using: &rng)
                let open: [UInt8] = Bool.random(using: &rng) ? [UInt8(ascii: "[")] : Array("{\"k\":".utf8)
                let close: UInt8 = open.count == 1 ? UInt8(ascii: "]") : UInt8(ascii: "}")
                let inner = Array(#"{"plugin":"x"}"#.utf8)
                var nested: [UInt8] = []
                for _ in 0..<depth { nested += open }
                nested += inner
                nested += [UInt8](repeating: close, count: Bool.random(using: &rng) ? depth : depth / 2)
                bytes.insert(contentsOf: nested, at: position)
            default: // splice with another seed
                let other = Array(seeds.randomElement(using: &rng)!.utf8)
                let cut = Int.random(in: 0...other.count, using: &rng)
                bytes = Array(bytes.prefix(position)) + other[cut...]
            }
        }
        return bytes
    }

    @Test(.timeLimit(.minutes(30)))
    func manifestParser_neverCrashesOrHangs() async throws {
        let iterations = environmentCount("PAGING_FUZZ_ITERATIONS", default: 20_000)
        let seed = UInt64(environmentCount("PAGING_FUZZ_SEED", default: 6))
        let file = "/fuzz/manifest-\(seed).json"
        let clock = ContinuousClock()
        let start = clock.now
        // Parsing is CPU-bound: on a thread of its own, not holding one that runs other tests' tasks.
        let (accepted, rejected, multiLine, slowest, badPrefix) = try await onAThreadOfItsOwn { () -> (Int, Int, Int, Duration, [String]) in
            var rng = SeededGenerator(seed: seed)
            var accepted = 0, rejected = 0, multiLine = 0
            var slowest: Duration = .zero
            var badPrefix: [String] = []
            for iteration in 0..<iterations {
                let input = Self.mutate(Array(Self.seeds[iteration % Self.seeds.count].utf8), &rng)
                let before = clock.now
                do {
                    _ = try Manifest.parse(input, file: file)
                    accepted += 1
                } catch let error as ManifestError {
                    rejected += 1
                    if !error.description.hasPrefix(file + ": ") { badPrefix.append(error.description) }
                    if error.description.contains("\n") { multiLine += 1 }
                } catch {
                    badPrefix.append("not a ManifestError: \(error)")
                }
                slowest = max(slowest, clock.now - before)
            }
            return (accepted, rejected, multiLine, slowest, badPrefix)
        }
        let elapsed = clock.now - start
        report("manifest fuzz: \(iterations) mutations (seed \(seed)) in \(elapsed): \(accepted) accepted, \(rejected) rejected, "
               + "\(multiLine) errors spanning several lines, slowest parse \(slowest)")
        #expect(badPrefix.isEmpty, "errors not starting with the file name: \(badPrefix.prefix(5))")
        #expect(slowest < .seconds(2), "a single parse took \(slowest)")
        #expect(accepted + rejected == iterations)
        #expect(multiLine == 0, "a ManifestError must be one line")
    }

    /// Drives the fuzzing plugins (Tests/Fixtures/plugins/fuzz_source.c) through a Pager: random
    /// requests with random keys go through a random interceptor to a random source. Every load
    /// must end (a page or a PluginError), every page must be within the limits.
    ///
    /// Fetches: PAGING_BRIDGE_FUZZ_ITERATIONS (default 5,000); seed: PAGING_FUZZ_SEED.
    @Test(.timeLimit(.minutes(30)))
    func abiBridges_surviveARandomPlugin() async throws {
        let iterations = environmentCount("PAGING_BRIDGE_FUZZ_ITERATIONS", default: 5_000)
        let seed = environmentCount("PAGING_FUZZ_SEED", default: 6)
        let limits = PluginLimits(maxItemsPerPage: 50, maxPageBytes: 64 << 10, fetchTimeout: .milliseconds(20))
        let log = LogRecorder(limit: 2_000)
        let library = try PluginLibrary.open(path: try await fixturePlugin("fuzz_source"))
        let source = try library.makeSource(id: "fuzz-source", config: .object([("seed", .int(Int64(seed))), ("huge_len", .int(200_000))]),
                                            sink: log.sink, limits: limits)
        let interceptor = try library.makeInterceptor(id: "fuzz-interceptor", config: .object([("seed", .int(Int64(seed) + 1))]),
                                                      sink: log.sink, limits: limits)
        let pager = Pager(source: source, interceptors: [interceptor])
        let workers = 4
        let outcome = Outcome()
        let clock = ContinuousClock()
        let start = clock.now
        await withTaskGroup(of: Void.self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var rng = SeededGenerator(seed: UInt64(seed) &* 31 &+ UInt64(worker))
                    for _ in 0..<(iterations / workers) {
                        let kind = PagingRequestKind.allCases.randomElement(using: &rng)!
                        let key = PluginKey(bytes: (0..<Int.random(in: 0...16, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
                        let pageSize = Int.random(in: 1...100, using: &rng)
                        let request = kind == .refresh && Bool.random(using: &rng)
                            ? pager.refreshRequest(params: params(pageSize: pageSize))
                            : pager.request(kind, key: key, params: params(pageSize: pageSize))
                        do {
                            let page = try await pager.load(request)
                            let bytes = page.values.reduce(0) { $0 + $1.bytes.count }
                            outcome.record(page: page.values.count, bytes: bytes, limits: limits)
                        } catch let error as PluginError {
                            outcome.record(error: error.status.description)
                        } catch PagingError.supersededByRefresh {
                            // A refresh started meanwhile (another worker): the engine drops the page.
                            outcome.record(error: "superseded by a refresh")
                        } catch {
                            outcome.record(error: "other: \(type(of: error))")
                        }
                    }
                }
            }
        }
        let elapsed = clock.now - start
        source.destroy()
        interceptor.destroy()
        try await Task.sleep(for: .milliseconds(100)) // let the plugin's late threads finish
        let result = outcome.snapshot
        report("bridge fuzz: \(result.pages + result.errors.values.reduce(0, +)) loads (seed \(seed), \(workers) workers) in \(elapsed): "
               + "\(result.pages) pages, errors \(result.errors.sorted { $0.key < $1.key }), "
               + "\(log.total) host/plugin log lines, \(result.overLimit) over the limits")
        #expect(result.pages + result.errors.values.reduce(0, +) == (iterations / workers) * workers, "every load ends")
        #expect(result.overLimit == 0, "pages beyond PluginLimits")
        #expect(result.errors.keys.allSatisfy { !$0.hasPrefix("other") }, "errors other than PluginError: \(result.errors)")
        #expect(result.pages > 0)
        // A failure reported with PAGING_OK (out_fail, config_fail, fetch_fail) is internal.
        #expect(result.errors["ok"] == nil, "a failure reported with status ok: \(result.errors["ok"] ?? 0) times")
    }
}

private final class Outcome: Sendable {
    struct Snapshot {
        var pages = 0
        var overLimit = 0
        var errors: [String: Int] = [:]
    }

    private let state = Mutex(Snapshot())

    func record(page count: Int, bytes: Int, limits: PluginLimits) {
        state.withLock {
            $0.pages += 1
            if count > limits.maxItemsPerPage || bytes > limits.maxPageBytes { $0.overLimit += 1 }
        }
    }

    func record(error: String) {
        state.withLock { $0.errors[error, default: 0] += 1 }
    }

    var snapshot: Snapshot { state.withLock { $0 } }
}
