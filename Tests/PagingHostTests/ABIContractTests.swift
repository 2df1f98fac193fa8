import CPaging
import Foundation
import Paging
import PagingHost
import Testing

/// ABI 1.0's promises to plugin authors, each tried with a real library built by cc: growth in
/// both directions, version refusals, call handles, library init/deinit and the extensions.
@Suite("ABI 1.0: the contract")
struct ABIContractTests {
    /// Each line a plugin logs costs what the first did: the sink, kept in a tuple a generic
    /// lock lent `inout`, gained two reabstraction thunks a line, and the 65,000th line of a
    /// plugin overflowed the stack (a probe: 80,000 debug lines from one intercept() crashed
    /// pager after 52 s). So did the libraries' sink, read for each of their lines.
    @Test func manyLogLines_eachCostTheSame_andNoneOverflowsTheStack() {
        let count = Locked(0)
        let instance = PluginInstance(label: "many-lines", sink: { _, _, _ in count.withLock { $0 += 1 } }, limits: PluginLimits())
        let table = instance.table!
        for _ in 0..<200_000 { table.pointee.log(table, PAGING_LOG_DEBUG, "x") }
        #expect(count.withLock { $0 } == 200_000)
        for _ in 0..<200_000 { _ = PluginLibrary.librarySink }
    }

    let log = LogRecorder()

    /// The headers as they were before ABI 1.0 was final, frozen.
    static let draftHeaders = "\(repositoryRoot)/Tests/Fixtures/abi-1.0-draft"

    // MARK: - Growth

    @Test func aPluginBuiltAgainstTheDraftHeaders_loadsAndRunsUnchanged() async throws {
        let path = try await compileCPlugin("\(Self.draftHeaders)/draft_plugin.c", headers: Self.draftHeaders)
        let library = try PluginLibrary.open(path: path)
        #expect(library.descriptors.map(\.id) == ["draft-numbers", "draft-tagger"])
        #expect(library.descriptors.allSatisfy { $0.isDraft })
        let source = try library.makeSource(config: .object([("count", .int(25))]), sink: log.sink)
        let tagger = try library.makeInterceptor(config: .object([("tag", .string("old"))]), sink: log.sink)
        #expect(source.health() == .notOffered)

        let manager = PaginationManager(pager: Pager(source: source, interceptors: [tagger]),
                                        configuration: .init(pageSize: 10))
        await manager.refresh().value
        while !manager.output.appendState.isEndReached {
            await manager.append().value
            #expect(manager.output.appendState.error == nil)
        }
        #expect(manager.output.values.map(\.text) == (0..<25).map(String.init))
        #expect(log.count(containing: "draft-tagger: page of") == 3)

        let answered = try await Pager(source: source, interceptors: [tagger])
            .load(PagingRequest(kind: .refresh, keyChain: PagingKeyChain(key: "answer"), params: params(pageSize: 10)))
        #expect(answered.values.texts == ["\"answered\"", "7"])
        #expect(!log.contains("refused"))
    }

    /// paging_request_t.identity, as types.h defines it: page size, key, then the params but
    /// hard_refresh in name order, each <length>:<bytes>.
    @Test func requestIdentity_isEncodedAsTheHeaderSays() {
        func identity(_ key: String, _ pageSize: Int, _ userInfo: [String: String]) -> String {
            let request = PluginRequest(kind: .append, keyChain: PagingKeyChain(key: PluginKey(key)),
                                        params: PagingRequestParams(pageSize: pageSize, userInfo: userInfo))
            return CView.withRequest(request) { view in
                String(decoding: UnsafeRawBufferPointer(start: view.pointee.identity.data, count: view.pointee.identity.len), as: UTF8.self)
            }
        }
        #expect(identity("3", 20, ["q": "swift"]) == "20 1:3 1:q=5:swift")
        #expect(identity("3", 20, ["q": "swift", "hard_refresh": "true"]) == "20 1:3 1:q=5:swift")
        #expect(identity("", 7, [:]) == "7 0:")
        #expect(identity("next page", 100, ["b": "2", "a": "ü"]) == "100 9:next page 1:a=2:ü 1:b=1:2")
        let long = String(repeating: "k", count: 300)
        #expect(identity(long, 1, [:]) == "1 300:" + long, "beyond the stack buffer")
    }

    @Test func aPluginOfANewerMinor_thatNeedsNothingMore_runs_readingOnlyWhatTheHostWrote() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("abi_minor_newer"))
        #expect(library.abiVersion == PluginABIVersion(major: 1, minor: 99, patch: 0))
        let source = try library.makeSource(id: "abi-minor-newer", sink: log.sink)
        let page = try await Pager(source: source).load(source.refreshRequest(pageSize: 5))
        #expect(page.values.texts == ["\"abi-minor-newer\""])
        #expect(log.contains("abi-minor-newer: host \(hostMajorMinor), request of \(MemoryLayout<paging_request_t>.size) bytes, using 1.0 members only"))
    }

    @Test func aPluginOfANewerMinor_needingAnExtensionTheHostLacks_isRefused_inOneLineNamingBothVersions() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("abi_minor_newer"))
        do {
            _ = try library.makeSource(id: "abi-minor-needs", sink: log.sink)
            Issue.record("created a plugin that needs an absent extension")
        } catch {
            #expect(error == .missingExtension(path: library.path, id: "abi-minor-needs", plugin: library.abiVersion,
                                               host: .host, extension: "paging.from-the-future/1"))
            let line = error.description
            #expect(!line.contains("\n") && line.contains("1.99.0") && line.contains("\(PluginABIVersion.host)") && line.contains("paging.from-the-future/1"))
        }
        #expect(!log.contains("abi-minor-needs: created"))
    }

    @Test func aDescriptorOfAnotherMajor_isRefusedAtLoad() async throws {
        let path = try await fixturePlugin("abi_descriptor_major2")
        #expect(throws: PluginLoadError.descriptorABIMismatch(
            path: path, id: "abi-major2", plugin: PluginABIVersion(major: 2, minor: 0, patch: 0), host: .host)) {
            try PluginLibrary.open(path: path)
        }
    }

    @Test(arguments: ["run", "validate", "browse"])
    func aDescriptorOfAnotherMajor_isRefusedByEveryCommand(_ command: String) async throws {
        let folder = scratchFolder()
        let plugin = try await fixturePlugin("abi_descriptor_major2")
        try #"{"source": {"plugin": "\#(plugin)"}}"#.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, [command, folder + "/m.json"])
        #expect(result.code == 2, "\(result.stderr)")
        #expect(result.stderr.contains("plugin 'abi-major2' is built for plugin ABI 2.0.0, this host implements \(PluginABIVersion.host)"))
        #expect(result.stdout.isEmpty)

        let listed = try await run(pagerCommand, ["plugins"], environment: ["PAGING_PLUGIN_PATH": URL(fileURLWithPath: plugin).deletingLastPathComponent().path])
        #expect(listed.stdout.contains("abi_descriptor_major2") || listed.stderr.contains("abi_descriptor_major2"))
        #expect((listed.stdout + listed.stderr).contains("2.0.0"))
    }

    // MARK: - Call handles

    @Test func handlesKeptFromAnEarlierCall_orUsedFromAnotherThread_areRefusedAndLogged_neverApplied() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("stale_handles"))
        let source = try library.makeSource(sink: log.sink)
        let interceptor = try library.makeInterceptor(config: .object([("tag", .string("t"))]), sink: log.sink)
        let pager = Pager(source: source, interceptors: [interceptor])
        func refresh(_ pager: Pager<PluginKey, PluginItem>, _ key: String) async throws -> Page<PluginKey, PluginItem> {
            try await pager.load(PagingRequest(kind: .refresh, keyChain: PagingKeyChain(key: PluginKey(key)), params: params(pageSize: 3)))
        }
        // Its first intercept, which keeps its `out`: the page as the source gave it.
        let page = try await refresh(pager, "0")
        #expect(page.request.key == PluginKey("0"))
        #expect(page.values.texts == ["0", "1", "2"])
        // The kept `out` used in the next intercept: refused, never applied to this one (its key
        // not rewritten, no item added), and this intercept fails. Found by a probe: it went on
        // as if the plugin had set nothing, and a cache's page answered with a kept `out` went
        // out empty, a key chain without its next key ended paging, exit 0.
        await #expect { _ = try await refresh(pager, "5") } throws: { error in
            guard let error = error as? PluginError else { return false }
            return error.status == .invalidArgument
                && error.message.contains("out_set_key: an out (intercept) handle kept from an earlier call, used during a later one; refused")
        }
        // The live `out` used from a thread the call joins: refused, and the intercept fails
        // (answered without the param, it proceeded as if the plugin had not meant to set it).
        // A fresh instance, whose first intercept keeps no `out` of an earlier one.
        let fresh = try library.makeInterceptor(config: .object([("tag", .string("t"))]), sink: log.sink)
        await #expect { _ = try await refresh(Pager(source: source, interceptors: [fresh]), "7") } throws: { error in
            guard let error = error as? PluginError else { return false }
            return error.status == .invalidArgument
                && error.message.contains("the call's out (intercept) handle was used from another thread while the call ran")
        }
        // The source's kept keys `out`, used in fetch() (no call of that kind runs there): refused,
        // and the page is the source's.
        let alone = try await refresh(Pager(source: source, interceptors: []), "5")
        #expect(alone.request.key == PluginKey("5") && alone.values.texts == ["5", "6", "7"])
        #expect(source.refreshKey == PluginKey("0"))
        let refusals = log.messages.filter { $0.hasSuffix("; refused") }
        #expect(refusals.contains { $0.contains("out_set_key: an out (intercept) handle kept from an earlier call, used during a later one") })
        #expect(refusals.contains { $0.contains("out_add_item") } && refusals.contains { $0.contains("out_set_flags") })
        #expect(refusals.contains { $0.contains("config_string: a config (create) handle") })
        #expect(refusals.contains { $0.contains("out_set_param: an out (intercept) handle used after its call returned, or from another thread") })
        #expect(refusals.contains { $0.contains("keys_set: a keys out (refresh_key/key_chain) handle") })
        #expect(log.count(containing: "kept config read: NULL") == 1)
        #expect(log.count(containing: "thread use refused") == 1)
        #expect(log.count(containing: "kept keys refused") == 2)
    }

    /// Found by a probe: a key_chain() that set its next key through the keys `out` it kept from
    /// refresh_key() was refused, yet the call stood: paging ended at that page, exit 0. A
    /// create that read its config from a thread went on without it. Each call now fails.
    @Test func aKeyChainThroughAKeptHandle_andACreateReadingItsConfigFromAThread_fail() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("stale_handles"))
        let source = try library.makeSource(config: .object([("key_chain", .bool(true))]), sink: log.sink)
        let chain = source.keyChain(for: PluginKey("0"))
        #expect(chain.nextKey == nil)
        let refusal = "keys_set: a keys out (refresh_key/key_chain) handle kept from an earlier call, used during a later one; refused"
        #expect(log.contains("key_chain(0) failed: \(refusal)"), "\(log.messages)")
        await #expect {
            _ = try await Pager(source: source).load(PagingRequest(kind: .refresh, keyChain: chain, params: params(pageSize: 3)))
        } throws: { error in
            guard let error = error as? PluginError else { return false }
            return error.message.contains("key_chain(0) failed: \(refusal)")
        }
        #expect {
            _ = try library.makeInterceptor(config: .object([("tag", .string("t")), ("thread_in_create", .bool(true))]), sink: log.sink)
        } throws: { error in
            "\(error)".contains("the call's config (create) handle was used from another thread while the call ran; refused")
        }
    }

    // MARK: - Library init and deinit, host extensions, config types

    @Test func initLearnsTheHostAndThePath_theHostOffersItsLogLevel_andConfigTypesTellAbsentFromWrong() async throws {
        // A library of its own: other tests' processes run `lifecycle` too, and its deinit marks its path.
        let path = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c", name: "lifecycle_init")
        let libraryLog = LogRecorder()
        let previous = PluginLibrary.librarySink
        PluginLibrary.librarySink = libraryLog.sink
        defer { PluginLibrary.librarySink = previous }
        let library = try PluginLibrary.open(path: path)
        let identity = PluginHostIdentity.current
        #expect(libraryLog.contains("init: host \(identity.name) \(identity.version), ABI \(hostMajorMinor), path \(library.path)"))

        let config: JSONValue = .object([("s", .string("x")), ("i", .int(3)), ("d", .double(2.5)), ("b", .bool(true)),
                                         ("n", .null), ("a", .array([])), ("o", .object([]))])
        let interceptor = try library.makeInterceptor(config: config, sink: log.sink,
                                                      limits: PluginLimits(logLevel: .warning))
        #expect(log.contains("log-level 3")) // PAGING_LOG_WARNING
        #expect(log.contains("unknown extension NULL"))
        // PAGING_CONFIG_STRING, _INT, _DOUBLE, _BOOL, _NULL, _ARRAY, _OBJECT, _ABSENT
        let expected = [("s", 5), ("i", 3), ("d", 4), ("b", 2), ("n", 1), ("a", 6), ("o", 7), ("missing", 0)]
        for (key, type) in expected { #expect(log.contains("config \(key) \(type)"), "config \(key)") }

        let marker = library.path + ".deinit"
        PluginLibrary.shutDown()
        #expect(!FileManager.default.fileExists(atPath: marker), "deinit ran with an instance alive")
        interceptor.destroy()
        PluginLibrary.shutDown()
        #expect(FileManager.default.fileExists(atPath: marker))
    }

    @Test func anInitThatFails_refusesTheLibrary_withWhatItLogged() async throws {
        let path = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c", name: "lifecycle_fails",
                                      extraFlags: ["-DFIXTURE_FAIL_INIT"])
        do {
            _ = try PluginLibrary.open(path: path)
            Issue.record("a library whose init() failed was loaded")
        } catch {
            #expect(error == .initFailed(path: path, status: .invalidConfig, message: "init: no licence here"))
        }
    }

    /// config_fail says create is about to return NULL: a plugin that returns an instance
    /// after it has its config refused all the same, with the reason it gave first, and the
    /// instance destroyed (it was taken, and run with a config its plugin refused).
    @Test func anInstanceReturnedAfterConfigFail_isDestroyed_andTheFirstReasonStands() async throws {
        let path = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c", name: "lifecycle_fail_then_return",
                                      extraFlags: ["-DFIXTURE_FAIL_THEN_RETURN"])
        let library = try PluginLibrary.open(path: path)
        let log = LogRecorder()
        do {
            _ = try library.makeInterceptor(sink: log.sink)
            Issue.record("an instance returned after config_fail was taken")
        } catch {
            #expect(error == .createFailed(path: library.path, id: "lifecycle", status: .invalidConfig,
                                           message: "create: no such mode (create called config_fail, then returned an instance)"))
        }
        #expect(log.count(containing: "destroyed") == 1)
    }

    /// An instance's struct_size smaller than any ABI 1.0 table is refused (a corrupt table);
    /// 0, never set, is said, since its extensions go unasked, and so is one that ends before
    /// get_extension (found by a probe). They were taken without a word.
    @Test(arguments: [0, 8, 40])
    func anInstanceTableTooSmall_isRefused_andOneNeverSized_isSaid(size: Int) async throws {
        let path = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c", name: "lifecycle_size_\(size)",
                                      extraFlags: ["-DFIXTURE_STRUCT_SIZE=\(size)"])
        let library = try PluginLibrary.open(path: path)
        let log = LogRecorder()
        if size == 0 {
            let interceptor = try library.makeInterceptor(sink: log.sink)
            defer { interceptor.destroy() }
            #expect(log.contains("struct_size is 0: its table is read as ABI 1.0's draft, without get_extension"), "\(log.messages)")
            #expect(interceptor.offeredExtensions.isEmpty)
            return
        }
        if size == 40 {
            let interceptor = try library.makeInterceptor(sink: log.sink)
            defer { interceptor.destroy() }
            #expect(log.contains("struct_size is 40, between the 1.0 draft's 32 bytes and ABI 1.0's 48: its get_extension is not read, "
                                 + "and none of its extensions is used (set it to sizeof(paging_interceptor_t), "), "\(log.messages)")
            return
        }
        #expect(throws: PluginLoadError.invalidEntry(path: library.path, reason: "interceptor 'lifecycle' says its table is 8 bytes (struct_size), "
                                                     + "less than the smallest ABI 1.0 paging_interceptor_t (the 1.0 draft's, 32 bytes): set it to sizeof(paging_interceptor_t)")) {
            try library.makeInterceptor(sink: log.sink)
        }
    }

    /// A log line with a NULL message, or at a level the ABI lacks, is said so (they were an
    /// empty line, and a line at info).
    @Test func oddLogCalls_areSaid() async throws {
        let path = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c", name: "lifecycle_odd_logs",
                                      extraFlags: ["-DFIXTURE_ODD_LOGS"])
        let log = LogRecorder()
        try PluginLibrary.open(path: path).makeInterceptor(sink: log.sink).destroy()
        #expect(log.contains("log called with a NULL message; ignored"), "\(log.messages)")
        #expect(log.contains("log at an unknown level 99: ninety-nine"), "\(log.messages)")
        #expect(!log.messages.contains(""))
    }

    /// The library info is for init() only: a library that keeps it and logs with it later
    /// (at create, at deinit) has the call refused, said once, and pager runs on (it crashed
    /// on freed memory, exit 139).
    @Test func anInitInfoKeptPastInit_isRefused_neverACrash() async throws {
        let path = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c", name: "lifecycle_keeps_info",
                                      extraFlags: ["-DFIXTURE_KEEP_INIT_INFO"])
        let folder = scratchFolder()
        writeJSONLines(count: 3, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "\(path)"}], "page_size": 10}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", folder + "/m.json"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.split(separator: "\n").count == 3)
        #expect(result.stderr.components(separatedBy: "init()'s log called after init() returned").count == 2, "\(result.stderr)")
        #expect(!result.stderr.contains("with the init info"), "\(result.stderr)")
    }

    // MARK: - Instance extensions

    @Test func health_isAskedOfPluginsThatOfferIt() async throws {
        let file = scratchFolder() + "/data.jsonl"
        writeJSONLines(count: 3, to: file)
        let jsonlines = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
            .makeSource(config: .object([("path", .string(file))]), sink: log.sink)
        #expect(jsonlines.health() == .healthy)
        try FileManager.default.removeItem(atPath: file)
        #expect(jsonlines.health() == .unhealthy(.notFound))
        #expect(log.contains("cannot read '\(file)' any more"))

        let storeFile = scratchFolder() + "/store.db"
        let store = try PluginLibrary.open(path: shippedPlugin("sqlite-store"))
            .makeInterceptor(config: .object([("path", .string(storeFile))]), sink: log.sink)
        #expect(store.health() == .healthy)
        // Found by a probe: a store file removed while open was written on, unseen by other
        // processes, and said to be well; so was one replaced by another file.
        try FileManager.default.removeItem(atPath: storeFile)
        #expect(store.health() == .unhealthy(.internal))
        #expect(log.contains("sqlite-store: the store file '\(storeFile)' was removed or replaced since it was opened"), "\(log.messages)")
        let replaced = try PluginLibrary.open(path: shippedPlugin("sqlite-store"))
            .makeInterceptor(config: .object([("path", .string(storeFile))]), sink: log.sink)
        try FileManager.default.moveItem(atPath: storeFile, toPath: storeFile + ".old")
        try FileManager.default.copyItem(atPath: storeFile + ".old", toPath: storeFile)
        #expect(replaced.health() == .unhealthy(.internal))
        let logging = try PluginLibrary.open(path: shippedPlugin("logging")).makeInterceptor(sink: log.sink)
        #expect(logging.health() == .notOffered)
    }

    @Test func validate_reportsEachPluginsHealth_andExits1WhenOneCannotServe() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 3, to: folder + "/data.jsonl")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "sqlite-store", "config": {"path": "store.db", "busy_timeout_ms": 200}}, {"plugin": "logging"}]}
        """.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let healthy = try await run(pagerCommand, ["validate", folder + "/m.json"])
        #expect(healthy.code == 0, "\(healthy.stderr)")
        #expect(healthy.stdout.contains("source: jsonlines 1.0.0") && healthy.stdout.contains("): healthy"))
        #expect(healthy.stdout.contains("interceptor: sqlite-store") && healthy.stdout.contains("interceptor: logging"))

        let lifecycle = try await compileCPlugin("\(repositoryRoot)/Tests/Fixtures/plugins/lifecycle.c")
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}},
         "interceptors": [{"plugin": "\(lifecycle)", "config": {"health": 2}}]}
        """.write(toFile: folder + "/sick.json", atomically: true, encoding: .utf8)
        let sick = try await run(pagerCommand, ["validate", folder + "/sick.json"])
        #expect(sick.code == 1, "\(sick.stderr)")
        #expect(sick.stdout.contains("1 plugin cannot serve now"))
        #expect(sick.stdout.contains("interceptor: lifecycle 1.0.0") && sick.stdout.contains("): unhealthy (transient)"))
        #expect(sick.stderr.contains("[error] lifecycle: health: 2"))

        // The same plugins in child processes answer the same.
        try """
        {"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}, "isolation": "process"},
         "interceptors": [{"plugin": "\(lifecycle)", "config": {"health": 2}, "isolation": "process"}]}
        """.write(toFile: folder + "/isolated.json", atomically: true, encoding: .utf8)
        let isolated = try await run(pagerCommand, ["validate", folder + "/isolated.json"])
        #expect(isolated.code == 1, "\(isolated.stderr)")
        #expect(isolated.stdout.contains("source: jsonlines 1.0.0 (") && isolated.stdout.contains(", isolated in a child process): healthy"))
        #expect(isolated.stdout.contains("interceptor: lifecycle 1.0.0") && isolated.stdout.contains("): unhealthy (transient)"))
        #expect(isolated.stderr.contains("lifecycle: health: 2"))
    }
}

extension LoadedSource {
    func refreshRequest(pageSize: Int) -> PagingRequest<PluginKey> {
        PagingRequest(kind: .refresh, keyChain: keyChain(for: refreshKey), params: PagingRequestParams(pageSize: pageSize))
    }

}

/// The host's ABI version as plugins print it: "1.1".
private let hostMajorMinor = "\(PluginABIVersion.host.major).\(PluginABIVersion.host.minor)"
