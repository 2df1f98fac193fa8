import Foundation
import Paging
import PagingHost
import Testing

@Suite("Manifests")
struct ManifestTests {
    func parse(_ text: String) throws(ManifestError) -> Manifest {
        try Manifest.parse(Array(text.utf8), file: "/srv/app/m.json")
    }

    func error(_ text: String) -> String {
        do {
            _ = try parse(text)
            return "no error"
        } catch {
            return error.description
        }
    }

    @Test func fullManifest_parses() async throws {
        let manifest = try parse("""
        {
          "source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
          "interceptors": [
            {"plugin": "logging", "config": {"level": "debug"}},
            {"plugin": "./plugins/libcounter.so", "id": "c-counter", "sha256": "\(String(repeating: "A", count: 64))"}
          ],
          "page_size": 15,
          "retry": {"max_retries": 2, "initial_backoff_ms": 10, "jitter": 0},
          "timeout_ms": 500,
          "max_size": 300,
          "prefetch_distance": 5,
          "user_info": {"q": "swift"},
          "max_page_bytes": 1048576,
          "call_timeout_ms": 250
        }
        """)
        #expect(manifest.source.plugin == "jsonlines")
        #expect(manifest.interceptors.map(\.plugin) == ["logging", "./plugins/libcounter.so"])
        #expect(manifest.interceptors[1].id == "c-counter")
        #expect(manifest.interceptors[1].sha256 == String(repeating: "a", count: 64))
        #expect(manifest.interceptors[1].jsonPath == "$.interceptors[1]")
        #expect(manifest.pageSize == 15)
        #expect(manifest.retryPolicy.maxRetries == 2)
        #expect(manifest.retryPolicy.backoff.initial == .milliseconds(10))
        #expect(manifest.fetchTimeout == .milliseconds(500))
        #expect(manifest.maxSize == 300)
        #expect(manifest.prefetchDistance == 5)
        #expect(manifest.userInfo == ["q": "swift"])
        #expect(manifest.maxPageBytes == 1 << 20)
        #expect(manifest.callTimeout == .milliseconds(250))
        #expect(manifest.folder == "/srv/app")
    }

    @Test func everyError_namesTheFileThePathAndWhatWasExpected() {
        #expect(error("{") == "/srv/app/m.json: $: malformed JSON: line 1, column 2: expected a string key in double quotes")
        #expect(error("[]") == "/srv/app/m.json: $: expected an object, got an array")
        #expect(error("{}") == "/srv/app/m.json: $.source: missing; expected the source plugin, an object with \"plugin\"")
        #expect(error(#"{"source": {"plugin": 3}}"#) == "/srv/app/m.json: $.source.plugin: expected a string, got an integer")
        #expect(error(#"{"source": {"plugin": "x", "confg": {}}}"#)
                == "/srv/app/m.json: $.source.confg: unknown key; expected one of config, id, isolation, plugin, sha256")
        #expect(error(#"{"source": {"plugin": "x"}, "page_size": -1}"#)
                == "/srv/app/m.json: $.page_size: -1 is out of range; expected 1 to 100000")
        // Found by a probe: 300,000 interceptors were loaded one by one for minutes.
        let chain = Array(repeating: #"{"plugin": "logging"}"#, count: 257).joined(separator: ", ")
        #expect(error(#"{"source": {"plugin": "x"}, "interceptors": [\#(chain)]}"#)
                == "/srv/app/m.json: $.interceptors: 257 interceptors; at most 256 make a chain")
        let longest = Array(repeating: #"{"plugin": "logging"}"#, count: 256).joined(separator: ", ")
        #expect((try? parse(#"{"source": {"plugin": "x"}, "interceptors": [\#(longest)]}"#))?.interceptors.count == 256)
        #expect(error(#"{"source": {"plugin": "x"}, "page_size": 1e9}"#)
                == "/srv/app/m.json: $.page_size: expected an integer, got a number")
        #expect(error(#"{"source": {"plugin": "x"}, "interceptors": [{"plugin": "y", "sha256": "abc"}]}"#)
                == "/srv/app/m.json: $.interceptors[0].sha256: expected 64 hex digits, got \"abc\"")
        #expect(error(#"{"source": {"plugin": "x"}, "interceptors": {}}"#)
                == "/srv/app/m.json: $.interceptors: expected an array of plugin objects, got an object")
        #expect(error(#"{"source": {"plugin": "x"}, "retry": {"max_retries": 3, "backoff": 1}}"#).hasPrefix(
            "/srv/app/m.json: $.retry.backoff: unknown key"))
        #expect(error(#"{"source": {"plugin": "x", "config": []}}"#) == "/srv/app/m.json: $.source.config: expected an object, got an array")
        #expect(error(#"{"source": {"plugin": "x"}, "source": {"plugin": "y"}}"#) == "/srv/app/m.json: $.source: the key appears twice")
        #expect(error(#"{"source": {"plugin": "x"}, "user_info": {"q": 1}}"#) == "/srv/app/m.json: $.user_info.q: expected a string, got an integer")
        #expect(error(#"{"source": {"plugin": "x"}, "serve_params": ["q", "tag", "q"]}"#)
                == "/srv/app/m.json: $.serve_params[2]: 'q' is listed already, at $.serve_params[0]")
        // Names no query could send, or that forge what a client is shown; incremental's value.
        for name in [#"x\u0000y"#, #"\u001b[31m"#, "a=b", "a b", "é"] {
            #expect(error(#"{"source": {"plugin": "x"}, "serve_params": ["\#(name)"]}"#).hasPrefix(
                "/srv/app/m.json: $.serve_params[0]: expected a parameter name of letters, digits and . _ ~ -"), "\(name)")
        }
        // The name refused is quoted (a probe: "got a string" did not say which).
        #expect(error(#"{"source": {"plugin": "x"}, "serve_params": ["a b"]}"#)
                == #"/srv/app/m.json: $.serve_params[0]: expected a parameter name of letters, digits and . _ ~ -, got "a b""#)
        #expect(error(#"{"source": {"plugin": "x"}, "serve_params": ["state.since"]}"#)
                == "/srv/app/m.json: $.serve_params[0]: 'state.since' cannot be set by a client")
        // Found by a probe: replaced by each run of an incremental manifest, without a word.
        // Another state.* key, or one without `incremental`, is the user's.
        let incremental = #""incremental": {"cursor": "/updated_at"}"#
        #expect(error(#"{"source": {"plugin": "x"}, "user_info": {"state.since": "x"}, \#(incremental)}"#)
                == "/srv/app/m.json: $.user_info.state.since: 'state.since' is incremental loading's value, which each run sets")
        // Found by a probe: taken, as a parameter no placeholder can name.
        #expect(error(#"{"source": {"plugin": "x"}, "user_info": {"": "x"}}"#)
                == "/srv/app/m.json: $.user_info: a parameter with an empty name; each needs one")
        for userInfo in [#""user_info": {"state.region": "eu"}, \#(incremental)"#, #""user_info": {"state.since": "x"}"#] {
            #expect(throws: Never.self) { try Manifest.parse(Array(#"{"source": {"plugin": "x"}, \#(userInfo)}"#.utf8), file: "/srv/app/m.json") }
        }
    }

    @Test func invalidUTF8_isAnError_withItsPlace() {
        do {
            _ = try Manifest.parse([0x7B, 0x0A, 0x22, 0xC3, 0x28, 0x22, 0x7D], file: "m.json")
            Issue.record("invalid UTF-8 parsed")
        } catch {
            #expect(error.description == "m.json: $: malformed JSON: line 2, column 2: the text is not valid UTF-8")
        }
    }

    @Test func unreadableFiles_areNamed() async throws {
        #expect(throws: ManifestError(file: "/nonexistent/m.json", path: nil, message: "No such file or directory")) {
            try Manifest.load(path: "/nonexistent/m.json")
        }
        // It was ": No such file or directory".
        #expect(throws: ManifestError(file: "(empty path)", path: nil, message: "expected the path of a manifest file")) {
            try Manifest.load(path: "")
        }
        let folder = scratchFolder()
        #expect(throws: ManifestError(file: folder, path: nil, message: "is a folder, expected a manifest file")) {
            try Manifest.load(path: folder)
        }
        let loop = folder + "/loop.json"
        try FileManager.default.createSymbolicLink(atPath: loop, withDestinationPath: loop)
        #expect(throws: ManifestError(file: loop, path: nil, message: "Too many levels of symbolic links")) {
            try Manifest.load(path: loop)
        }
        // A device is no manifest (/dev/zero was read up to 16 MiB); a FIFO without a writer
        // reads as empty instead of waiting for one (it hung).
        #expect(throws: ManifestError(file: "/dev/zero", path: nil, message: "is a device, expected a regular manifest file")) {
            try Manifest.load(path: "/dev/zero")
        }
        let fifo = folder + "/m.fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        do {
            _ = try Manifest.load(path: fifo)
            Issue.record("a FIFO without a writer loaded")
        } catch {
            #expect(error.description == "\(fifo): is a FIFO that nothing wrote to (a writer must be there first)", "\(error)")
        }
    }

    @Test func pipeline_resolvesRelativePaths_andLoadsEveryPlugin() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 30, to: folder + "/data.jsonl")
        let counter = try await compileCPlugin("\(repositoryRoot)/Examples/CInterceptor/counter.c")
        try FileManager.default.createDirectory(atPath: folder + "/plugins", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: counter, toPath: folder + "/plugins/libcounter.so")
        let pin = try await run("/usr/bin/env", ["sha256sum", counter]).stdout.prefix(64)
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "plugins/libcounter.so", "sha256": "\(pin)"}, {"plugin": "cache"}],
         "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let log = LogRecorder()
        let pipeline = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"),
                                    searchPath: PluginSearchPath(folders: [productsFolder]), sink: log.sink)
        #expect(pipeline.interceptors.map(\.descriptor.id) == ["c-counter", "cache"])
        let manager = pipeline.makeManager()
        await manager.refresh().value
        await manager.append().value
        #expect(manager.output.values.count == 20)
    }

    /// Two instances of one plugin in the chain (a logging before the cache, one after it)
    /// logged under one name; their lines say where each stands. A plugin used once keeps its name.
    @Test func twoInstancesOfOnePlugin_logUnderTheirPlaceInTheManifest() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 30, to: folder + "/data.jsonl")
        // In a folder whose name holds " (": the place goes before the library's path.
        try FileManager.default.createDirectory(atPath: folder + "/libs (v2)", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: shippedPlugin("logging"), toPath: folder + "/libs (v2)/liblogging.so")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "libs (v2)/liblogging.so"}, {"plugin": "cache"}, {"plugin": "libs (v2)/liblogging.so"}],
         "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let log = LogRecorder()
        let pipeline = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"),
                                    searchPath: PluginSearchPath(folders: [productsFolder]), sink: log.sink)
        _ = try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
        let logging = "\(folder)/libs (v2)/liblogging.so"
        let names = Set(log.entries.filter { $0.message.contains("page refresh") }.map(\.plugin))
        #expect(names == ["logging at $.interceptors[0] (\(logging))", "logging at $.interceptors[2] (\(logging))"], "\(names)")
        #expect(log.entries.contains { $0.plugin.hasPrefix("jsonlines (") }, "\(log.entries.map(\.plugin))")
    }

    /// Found by a probe: a load failed by one of two instances of a plugin named only the
    /// plugin and its library, not which one; it says where it stands, in process or isolated.
    @Test(arguments: ["", #", "isolation": "process""#])
    func twoInstancesOfOnePlugin_failUnderTheirPlaceInTheManifest(_ isolation: String) async throws {
        PluginIsolation.executable = pagerCommand
        let folder = scratchFolder()
        let library = try await fixturePlugin("interceptor_work")
        try """
        {"source": {"plugin": "\(library)", "id": "offsets", "config": {"count": 30}},
         "interceptors": [{"plugin": "\(library)", "id": "hinting", "config": {"fail_times": 0}\(isolation)},
                          {"plugin": "\(library)", "id": "hinting", "config": {"fail_times": 1000000, "retry_after_ms": 1}\(isolation)}],
         "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let pipeline = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"), sink: LogRecorder().sink)
        defer { pipeline.destroyPlugins() }
        let error = await #expect(throws: PluginError.self) {
            try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
        }
        #expect(error?.plugin == "hinting at $.interceptors[1] (\(library))", "\(String(describing: error))")
    }

    /// Found by a probe: plugin instances outlive their pipeline by design (a late call from a
    /// plugin's thread meets a finished instance), and each kept the caller's log sink, and
    /// whatever it held, for ever: 1 MB a pipeline for a sink holding a buffer. The sink is let
    /// go once the pipeline is.
    @Test func droppingAPipeline_letsItsLogSinkGo() async throws {
        final class Holder: Sendable { let lines = Locked(0) }
        let folder = scratchFolder()
        writeJSONLines(count: 30, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "logging"}, {"plugin": "cache"}, {"plugin": "sqlite-store", "config": {"path": "pages.db"}}],
         "page_size": 10, "call_timeout_ms": 5000}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        weak var held: Holder?
        do {
            let holder = Holder()
            held = holder
            let pipeline = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"), searchPath: PluginSearchPath(folders: [productsFolder]),
                                        sink: { _, _, _ in holder.lines.withLock { $0 += 1 } })
            _ = try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
            #expect(holder.lines.withLock { $0 } > 0)
        }
        // Destroyed on the plugins' call threads (call_timeout_ms): let go when they are done.
        #expect(await eventually { held == nil }, "the pipeline's log sink outlived it")
    }

    @Test func pageLimits_fromTheManifest_failOversizedPages() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 30, to: folder + "/data.jsonl")
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "page_size": 10, "max_page_bytes": 50}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let pipeline = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"),
                                    searchPath: PluginSearchPath(folders: [productsFolder]), sink: LogRecorder().sink)
        do {
            _ = try await pipeline.pager.load(pipeline.pager.refreshRequest(params: pipeline.requestParams))
            Issue.record("a page over max_page_bytes loaded")
        } catch let error as PluginError {
            #expect(error.status == .invalidArgument)
            #expect(error.message.contains("more than 50 bytes"))
        }
    }

    @Test func pipelineErrors_nameTheManifestThePluginAndTheReason() async throws {
        let folder = scratchFolder()
        let wrongPin = String(repeating: "0", count: 64)
        let cases: [(String, String)] = [
            (#"{"source": {"plugin": "absent"}}"#, "$.source (plugin \"absent\"): plugin 'absent': libabsent.so not found in"),
            (#"{"source": {"plugin": "logging"}}"#, "$.source (plugin \"logging\"): \(shippedPlugin("logging")): plugin 'logging' is an interceptor, expected a source"),
            (#"{"source": {"plugin": "jsonlines", "sha256": "\#(wrongPin)"}}"#, "sha256 is "),
            (#"{"source": {"plugin": "./missing.so", "sha256": "\#(wrongPin)"}}"#, "missing.so: no such file"),
            (#"{"source": {"plugin": "jsonlines", "config": {"path": "missing.jsonl"}}}"#, "$.source (plugin \"jsonlines\"): "),
        ]
        for (text, expected) in cases {
            try text.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
            do {
                _ = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"),
                                 searchPath: PluginSearchPath(folders: [productsFolder]), sink: LogRecorder().sink)
                Issue.record("\(text) loaded")
            } catch {
                #expect(error.description.hasPrefix(folder + "/m.json: $."))
                #expect(error.description.contains(expected), "\(error.description)")
            }
        }
    }
}
