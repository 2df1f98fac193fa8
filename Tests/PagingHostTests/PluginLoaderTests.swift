import Foundation
import Paging
import PagingHost
import Testing

@Suite("Loading plugin libraries")
struct PluginLoaderTests {
    let log = LogRecorder()

    @Test func shippedLibraries_describeTheirPlugins() async throws {
        let jsonlines = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
        #expect(jsonlines.descriptors.map(\.id) == ["jsonlines"])
        #expect(jsonlines.descriptors[0].kind == .source)
        let logging = try PluginLibrary.open(path: shippedPlugin("logging"))
        #expect(logging.descriptors.map(\.id) == ["logging"])
        #expect(logging.descriptors[0].kind == .interceptor)
        #expect(logging.abiVersion == .host)
    }

    @Test func missingFile_isNamed() {
        #expect(throws: PluginLoadError.fileNotFound(path: "/nonexistent/libx.so")) {
            try PluginLibrary.open(path: "/nonexistent/libx.so")
        }
    }

    @Test func folder_isNotALibrary() {
        let folder = scratchFolder()
        #expect(throws: PluginLoadError.notAFile(path: folder)) { try PluginLibrary.open(path: folder) }
    }

    @Test func textFile_isNotASharedObject() async throws {
        let path = scratchFolder() + "/libtext.so"
        try "not a library".write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: PluginLoadError.notASharedObject(path: path, reason: "no ELF header")) {
            try PluginLibrary.open(path: path)
        }
    }

    /// A library built for another processor is named as such (dlopen said "No such file or
    /// directory" of a file that is there).
    @Test func aLibraryForAnotherProcessor_saysWhichItIsFor() async throws {
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: try await fixturePlugin("pass_through"))))
        let host = UInt16(bytes[18]) | UInt16(bytes[19]) << 8
        let other: UInt16 = host == 183 ? 62 : 183
        bytes[18] = UInt8(other & 0xFF)
        bytes[19] = UInt8(other >> 8)
        let path = scratchFolder() + "/libforeign.so"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let names: [UInt16: String] = [62: "x86-64", 183: "AArch64 (ARM 64-bit)"]
        #expect(throws: PluginLoadError.notASharedObject(path: path, reason: "built for \(names[other]!), this host is \(names[host]!)")) {
            try PluginLibrary.open(path: path)
        }
    }

    /// Found by a probe: a library cut short (half copied) made the dynamic loader crash
    /// `pager run` and `pager validate` (SIGBUS); its headers are checked against the file
    /// first. Run in a child: a regression would crash the process that loads it.
    @Test func aLibraryCutShort_isRefused_notACrash() async throws {
        let bytes = try Data(contentsOf: URL(fileURLWithPath: try await fixturePlugin("pass_through")))
        let folder = scratchFolder()
        try #"{"source": {"plugin": "./libcut.so"}}"#.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        for length in [1_000, 4_096, bytes.count / 2] {
            #expect(FileManager.default.createFile(atPath: folder + "/libcut.so", contents: bytes.prefix(length)))
            let result = try await run(pagerCommand, ["validate", folder + "/m.json"])
            #expect(result.code == 2 && !result.signaled, "\(length): \(result.code) \(result.stderr)")
            #expect(result.stderr.contains("\(folder)/libcut.so: not a shared object (the file is cut short or damaged (\(length) bytes)"),
                    "\(length): \(result.stderr)")
        }
        // One whose symbol table is damaged: a name far past the string table.
        var damaged = [UInt8](bytes)
        func u64(_ at: Int) -> Int { (0..<8).reduce(0) { $0 | Int(damaged[at + $1]) << (8 * $1) } }
        func u16(_ at: Int) -> Int { Int(damaged[at]) | Int(damaged[at + 1]) << 8 }
        let sections = u64(40), sectionSize = u16(58)
        let dynamicSymbols = try #require((0..<u16(60)).map { sections + $0 * sectionSize }.first { damaged[$0 + 4] == 11 }) // SHT_DYNSYM
        let firstName = u64(dynamicSymbols + 24) + 24 // symbol 1's st_name
        damaged.replaceSubrange(firstName..<firstName + 4, with: [0xF0, 0xFF, 0xFF, 0x7F])
        #expect(FileManager.default.createFile(atPath: folder + "/libcut.so", contents: Data(damaged)))
        let result = try await run(pagerCommand, ["validate", folder + "/m.json"])
        #expect(result.code == 2 && result.stderr.contains("symbol 1's name lies outside its string table"), "\(result.stderr)")
        // One that is no shared object (an executable) is said to be one.
        var executable = [UInt8](bytes)
        executable[16] = 2
        #expect(FileManager.default.createFile(atPath: folder + "/libcut.so", contents: Data(executable)))
        #expect(throws: PluginLoadError.notASharedObject(path: folder + "/libcut.so", reason: "its ELF type is 2, not a shared object's (3)")) {
            try PluginLibrary.open(path: folder + "/libcut.so")
        }
    }

    /// The check reads headers a hostile file wrote: 1,500 libraries with random bytes of
    /// their first 8 KiB changed are each checked (not loaded) without a crash or a trap, and
    /// the undamaged one passes.
    @Test func theELFCheck_survivesDamagedHeaders() async throws {
        let original = [UInt8](try Data(contentsOf: URL(fileURLWithPath: shippedPlugin("logging"))))
        let path = scratchFolder() + "/libdamaged.so"
        var generator = SystemRandomNumberGenerator()
        var refused = 0
        for round in 0..<1_500 {
            var bytes = original
            if round > 0 {
                for _ in 0..<Int.random(in: 1...8, using: &generator) {
                    bytes[Int.random(in: 0..<min(8_192, bytes.count), using: &generator)] = UInt8.random(in: 0...255, using: &generator)
                }
            }
            #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
            let fd = open(path, O_RDONLY)
            defer { close(fd) }
            let problem = ELFLayout.problem(fd: fd)
            if round == 0 { #expect(problem == nil, "\(problem ?? "")") }
            if problem != nil { refused += 1 }
        }
        #expect(refused > 100)
        // A loadable segment at the top of the address space, whose end overflows 64 bits.
        var bytes = original
        let headers = (0..<8).reduce(0) { $0 | Int(bytes[32 + $1]) << (8 * $1) }
        let load = try #require((0..<16).map { headers + $0 * 56 }.first { bytes[$0] == 1 && bytes[$0 + 1...$0 + 3] == [0, 0, 0] })
        bytes.replaceSubrange(load + 16..<load + 24, with: [0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]) // p_vaddr
        bytes.replaceSubrange(load + 40..<load + 48, with: [0, 0, 1, 0, 0, 0, 0, 0]) // p_memsz
        #expect(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        let fd = open(path, O_RDONLY)
        defer { close(fd) }
        #expect(ELFLayout.problem(fd: fd)?.contains("a segment's sizes or addresses are impossible") == true)
    }

    @Test func libraryWithoutTheEntrySymbol_isRefused() async throws {
        let path = try await fixturePlugin("no_entry")
        #expect(throws: PluginLoadError.noEntrySymbol(path: path)) { try PluginLibrary.open(path: path) }
        #expect(PluginLoadError.noEntrySymbol(path: path).description.contains("paging_plugin_entry"))
    }

    @Test func abiMajorMismatch_isRefused_namingBothVersions() async throws {
        let path = try await fixturePlugin("abi_major2")
        do {
            _ = try PluginLibrary.open(path: path)
            Issue.record("a library of ABI major 2 loaded")
        } catch {
            guard case .abiMajorMismatch(path, let library, .host) = error else {
                Issue.record("unexpected error \(error)"); return
            }
            #expect(library.major == 2)
            #expect(error.description.contains("2.0.0") && error.description.contains("\(PluginABIVersion.host)"))
        }
    }

    @Test func unknownPluginID_listsTheAvailableOnes() async throws {
        let library = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
        #expect(throws: PluginLoadError.unknownPlugin(path: library.path, id: "nope", available: ["jsonlines"])) {
            try library.makeSource(id: "nope", sink: log.sink)
        }
    }

    @Test func idSharedByTwoDescriptors_isRefusedNamingBoth() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("duplicate_ids"))
        #expect(throws: PluginLoadError.invalidEntry(path: library.path, reason: "2 descriptors (#0, #2) have the id 'twin' (a library's plugin ids must be unique)")) {
            try library.makeInterceptor(id: "twin", sink: log.sink)
        }
        // The library's other plugin is not in doubt.
        let solo = try library.makeInterceptor(id: "solo", sink: log.sink)
        #expect(solo.descriptor.id == "solo")
    }

    @Test func sourceNamedAsInterceptor_isTheWrongKind() async throws {
        let library = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
        #expect(throws: PluginLoadError.wrongKind(path: library.path, id: "jsonlines", expected: .interceptor, actual: .source)) {
            try library.makeInterceptor(sink: log.sink)
        }
    }

    @Test func failedCreate_carriesThePluginsMessage() async throws {
        let library = try PluginLibrary.open(path: try await fixturePlugin("create_fails"))
        do {
            _ = try library.makeSource(sink: log.sink)
            Issue.record("create should fail")
        } catch {
            guard case .createFailed(_, "create-fails", .invalidConfig, let message) = error else {
                Issue.record("unexpected error \(error)"); return
            }
            #expect(message == "api_key is required")
        }
    }

    @Test func badConfig_ofAShippedPlugin_isACreateFailure() async throws {
        let library = try PluginLibrary.open(path: shippedPlugin("logging"))
        #expect(throws: PluginLoadError.self) {
            try library.makeInterceptor(config: .object([("level", .string("loud"))]), sink: log.sink)
        }
        let jsonlines = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
        do {
            _ = try jsonlines.makeSource(config: .object([("path", .string("/nonexistent/data.jsonl"))]), sink: log.sink)
            Issue.record("a missing file should refuse the config")
        } catch {
            #expect(error.description.contains("/nonexistent/data.jsonl"))
        }
    }

    /// Found by a hostile probe: jsonlines ran with a misspelled key and a page size of the
    /// wrong type as if neither were there, a line of spaces failed its page (and every line
    /// after it was out of reach), and a refused page did not say where in the file it was.
    @Test func jsonlines_refusesUnknownKeysAndWrongTypes_skipsBlankLines_andNamesRefusedLines() async throws {
        let jsonlines = try PluginLibrary.open(path: shippedPlugin("jsonlines"))
        let file = scratchFolder() + "/d.jsonl"
        try "{\"n\":1}\n   \t \n{\"n\":2}  \r\n\n{\"n\":3}\n{\"n\":\n{\"n\":5}\n".write(toFile: file, atomically: true, encoding: .utf8)
        let cases: [(JSONValue, String)] = [
            (.object([("path", .string(file)), ("max_file_byte", .int(10))]),
             "jsonlines: config `max_file_byte`: unknown key; expected path, default_page_size or max_file_bytes"),
            (.object([("path", .string(file)), ("default_page_size", .string("5"))]),
             "jsonlines: config `default_page_size` must be an integer in 1...1000000"),
        ]
        for (config, message) in cases {
            #expect(throws: PluginLoadError.createFailed(path: jsonlines.path, id: "jsonlines", status: .invalidConfig, message: message)) {
                try jsonlines.makeSource(config: config, sink: log.sink)
            }
        }
        let source = try jsonlines.makeSource(config: .object([("path", .string(file))]), sink: log.sink)
        let pager = Pager(source: source)
        let first = try await pager.load(pager.request(.refresh, key: "0", params: PagingRequestParams(pageSize: 3)))
        #expect(first.values.map(\.text) == [#"{"n":1}"#, #"{"n":2}"#, #"{"n":3}"#])
        await #expect(throws: PluginError.self) {
            try await pager.load(pager.request(.refresh, key: "3", params: PagingRequestParams(pageSize: 2)))
        }
        // Logged once the host's call returns, which may be after the load failed.
        #expect(await eventually { log.contains("jsonlines: the host refused the page of lines 6-7 of '\(file)' (counted from 1, blank lines too)") },
                "\(log.messages)")
    }

    @Test func swiftPlugins_refuseWrongTypesAndUnknownKeys_namingTheKey() async throws {
        let cache = try PluginLibrary.open(path: shippedPlugin("cache"))
        let cases: [(JSONValue, String)] = [
            (.object([("ttl_seconds", .string("soon"))]), "ttl_seconds: expected an integer, got a string"),
            (.object([("ttl_seconds", .bool(true))]), "ttl_seconds: expected an integer, got a boolean"),
            (.object([("max_entries", .double(1.5))]), "max_entries: expected an integer, got a number"),
            // Found by a probe: a Swift plugin read 10.0 as 10 where C's config_int refuses it.
            (.object([("max_entries", .double(10))]), "max_entries: expected an integer, got a number"),
            (.object([("ttl", .int(5))]), "ttl: unknown key; expected one of max_entries, policy, ttl_seconds"),
            (.object([("ttl_seconds", .int(0))]), "ttl_seconds: expected a positive number of seconds, got 0"),
            (.object([("max_entries", .int(-3))]), "max_entries: expected a positive number of entries, got -3"),
            // It said "out of range; expected an integer from -9223372036854775808 to ...".
            (.object([("ttl_seconds", .double(1e30))]), "ttl_seconds: expected a positive number of seconds up to 9223372036854775807, got 1e+30"),
            (.object([("ttl_seconds", .double(-1e30))]), "ttl_seconds: expected a positive number of seconds, got -1e+30"),
        ]
        for (config, message) in cases {
            #expect(throws: PluginLoadError.createFailed(path: cache.path, id: "cache", status: .invalidConfig, message: message)) {
                try cache.makeInterceptor(config: config, sink: log.sink)
            }
        }
        _ = try cache.makeInterceptor(config: .object([("ttl_seconds", .int(5)), ("max_entries", .int(10))]), sink: log.sink)
        // Found by a probe: a plugin that takes no config took any key without a word.
        let passThrough = try PluginLibrary.open(path: shippedPlugin("pass-through"))
        #expect(throws: PluginLoadError.createFailed(path: passThrough.path, id: "pass-through", status: .invalidConfig,
                                                     message: "x: unknown key; this plugin takes no config")) {
            try passThrough.makeInterceptor(config: .object([("x", .int(1))]), sink: log.sink)
        }
        _ = try passThrough.makeInterceptor(config: .object([]), sink: log.sink)
        let logging = try PluginLibrary.open(path: shippedPlugin("logging"))
        #expect(throws: PluginLoadError.createFailed(path: logging.path, id: "logging", status: .invalidConfig,
                                                     message: "level: expected a string, got an integer")) {
            try logging.makeInterceptor(config: .object([("level", .int(3))]), sink: log.sink)
        }
    }

    @Test func pluginNames_resolveOnTheSearchPath() async throws {
        let searchPath = PluginSearchPath(folders: ["/nonexistent", productsFolder])
        #expect(try searchPath.resolve("jsonlines", relativeTo: "/tmp") == "\(productsFolder)/libjsonlines.so")
        #expect(try searchPath.resolve("./plugins/libx.so", relativeTo: "/srv/app") == "/srv/app/plugins/libx.so")
        #expect(throws: PluginLoadError.pluginNotFound(name: "absent", searched: ["/nonexistent", productsFolder])) {
            try searchPath.resolve("absent", relativeTo: "/tmp")
        }
        // The file searched for, as named ("liblibx.so.so not found" said a name ending in .so).
        #expect(PluginLoadError.pluginNotFound(name: "absent", searched: ["/a"]).description
                == #"plugin 'absent': libabsent.so not found in /a (a plugin of a library that holds several is named "plugin": the library's name, "#
                + #""id": the plugin's; `pager plugins` lists them)"#)
        #expect(PluginLoadError.pluginNotFound(name: "libx.so", searched: ["/a"]).description == "plugin 'libx.so': libx.so not found in /a")
    }
}
