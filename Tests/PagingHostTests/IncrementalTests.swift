// The manifest's "incremental" object, its checks, the state file and the cursor interceptor.
import Foundation
import Paging
import PagingHost
import Testing

@Suite("Incremental loading")
struct IncrementalTests {
    /// Parses as /srv/app/m.json.
    let manifests = ManifestTests()
    func parse(_ text: String) throws(ManifestError) -> Manifest { try manifests.parse(text) }
    func error(_ text: String) -> String { manifests.error(text) }

    @Test func settings_parse_withDefaults_andTheValueReachesUserInfo() throws {
        let manifest = try parse("""
            {"source": {"plugin": "http", "config": {"url": "https://api.example.com/issues?since={state.since}"}},
             "user_info": {"q": "updated:>{state.since} repo:a/b"},
             "incremental": {"cursor": "/updated_at"}}
            """)
        let settings = try #require(manifest.incremental)
        #expect(settings == IncrementalSettings(cursor: "/updated_at", state: "since", initial: .string(""),
                                                namespace: "default", stateFile: "/srv/app/m.json.state"))
        let sent = manifest.sending(.string("2024-05-01T00:00:00Z"))
        #expect(sent.userInfo == ["q": "updated:>2024-05-01T00:00:00Z repo:a/b", "state.since": "2024-05-01T00:00:00Z"])
        let other = try parse("""
            {"source": {"plugin": "http"},
             "incremental": {"cursor": "/id", "state": "after", "initial": 0, "namespace": "n", "state_file": "state/m.json"}}
            """)
        #expect(other.incremental?.initial == .number("0", 0))
        #expect(other.incremental?.stateFile == "/srv/app/state/m.json")
    }

    @Test func badSettings_andUndeclaredStateNames_areErrors() {
        let source = #""source": {"plugin": "http", "config": {"url": "https://x/?a={state.since}"}}"#
        #expect(error("{\(source)}") == #"/srv/app/m.json: $.source.config.url: {state.since} needs the manifest's "incremental" object, which keeps that value between runs"#)
        #expect(error(#"{\#(source), "incremental": {"cursor": "/id", "state": "after"}}"#)
                == #"/srv/app/m.json: $.source.config.url: {state.since} is not kept: the manifest's incremental.state is "after""#)
        #expect(error(#"{"source": {"plugin": "http"}, "user_info": {"q": ">{state.x}"}}"#).contains("$.user_info.q: {state.x} needs"))
        #expect(error(#"{"source": {"plugin": "http"}, "incremental": {}}"#).contains("$.incremental.cursor: missing"))
        #expect(error(#"{"source": {"plugin": "http"}, "incremental": {"cursor": "id"}}"#).contains("expected a JSON pointer"))
        // A "~" not followed by 0 or 1 (a probe: "/~2" validated, and matched nothing run after run).
        for cursor in ["/~2", "/a~", "/~~1"] {
            #expect(error(#"{"source": {"plugin": "http"}, "incremental": {"cursor": "\#(cursor)"}}"#)
                .contains(#"$.incremental.cursor: "\#(cursor)" is not a JSON pointer: the "~" at byte"#), "\(cursor)")
        }
        #expect(error(#"{"source": {"plugin": "http"}, "incremental": {"cursor": "/a~0b/c~1d"}}"#) == "no error")
        #expect(error(#"{"source": {"plugin": "http"}, "incremental": {"cursor": "/id", "state": "a b"}}"#).contains("$.incremental.state"))
        #expect(error(#"{"source": {"plugin": "http"}, "incremental": {"cursor": "/id", "initial": true}}"#)
                == "/srv/app/m.json: $.incremental.initial: expected a string or a number (the value before the first run), got a boolean")
        #expect(error(#"{"source": {"plugin": "http"}, "incremental": {"cursor": "/id", "since": "x"}}"#).contains("$.incremental.since: unknown key"))
    }

    private func page(_ items: [String]) -> Page<PluginKey, PluginItem> {
        Page(request: PagingRequest(kind: .refresh, keyChain: PagingKeyChain(key: PluginKey("")), params: PagingRequestParams(pageSize: 10)),
             values: items.map { PluginItem(json: $0) })
    }

    @Test func theCursor_keepsTheHighestValue_neverLowerThanItsStart() async throws {
        let settings = IncrementalSettings(cursor: "/meta/n", state: "since", initial: .string(""), namespace: "d", stateFile: "/dev/null")
        let cursor = IncrementalCursor(settings, start: .number("5", 5))
        _ = try await cursor.transform(page: page([#"{"meta": {"n": 3}}"#, #"{"meta": {}}"#, #"{"meta": {"n": null}}"#, "[1]"]))
        #expect(cursor.value == .number("5", 5))
        _ = try await cursor.transform(page: page([#"{"meta": {"n": 12}}"#, #"{"meta": {"n": 9.5}}"#]))
        #expect(cursor.value == .number("12", 12))
        // A whole number with an exponent is sent as an integer (a probe saw 1e2 sent as 100.0).
        _ = try await cursor.transform(page: page([#"{"meta": {"n": 1e2}}"#]))
        #expect(cursor.value?.description == "100")
        _ = try await cursor.transform(page: page([#"{"meta": {"n": 100.5}}"#]))
        #expect(cursor.value?.description == "100.5")
        await #expect(throws: IncrementalError.self) { try await cursor.transform(page: page([#"{"meta": {"n": "13"}}"#])) }
        await #expect(throws: IncrementalError.self) { try await cursor.transform(page: page([#"{"meta": {"n": [1]}}"#])) }
        // Valid JSON that holds no value a run can keep at the cursor fails its load (it was
        // passed over in silence, the run ending 0 without it); elsewhere in the item, it is no
        // matter (one stray surrogate in a note stopped every run).
        for unreadable in [#"{"meta": {"n": 1e400}}"#, #"{"meta": {"n": "\ud800"}}"#] {
            let error = await #expect(throws: IncrementalError.self) { try await cursor.transform(page: page([unreadable])) }
            #expect(error?.message.contains("incremental.cursor /meta/n: an item holds a value there that cannot be kept") == true, "\(String(describing: error))")
        }
        _ = try await cursor.transform(page: page([#"{"note": "bad \ud800 here", "meta": {"x": [1e400, {"n": 0}], "n": 101}}"#,
                                                   #"{"meta": {"n": 1e400}, "meta": {"n": 102}}"#]))
        #expect(cursor.value?.description == "102", "the last of duplicate members, as JSONValue reads them")
        let strings = IncrementalCursor(settings, start: nil)
        _ = try await strings.transform(page: page([#"{"meta": {"n": "2024-01-02"}}"#, #"{"meta": {"n": "2024-01-10"}}"#, #"{"meta": {"n": "2023-12-31"}}"#]))
        #expect(strings.value == .string("2024-01-10"))
    }

    @Test func theStateFile_isWrittenWhole_andKeepsOtherNamespaces() throws {
        let folder = NSTemporaryDirectory() + "incremental-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = IncrementalStateFile(path: folder + "/m.json.state")
        #expect(try file.values(namespace: "a").isEmpty)
        try file.store(.string("x\"y"), name: "since", namespace: "a")
        try file.store(.number("7", 7), name: "after", namespace: "b")
        #expect(try file.values(namespace: "a") == ["since": .string("x\"y")])
        #expect(try file.values(namespace: "b") == ["after": .number("7", 7)])
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).sorted() == ["m.json.state", "m.json.state.lock"])
        try "[]".write(toFile: file.path, atomically: true, encoding: .utf8)
        #expect(throws: IncrementalError.self) { try file.store(.string("z"), name: "since", namespace: "a") }
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == "[]", "a file it cannot read is not replaced")
        #expect { try file.values(namespace: "a") } throws: { error in
            "\(error)".hasSuffix("expected an object of namespaces, got an array. Fix it, or remove it to start again from each state's initial value (`--full` ignores the value kept, not the file)")
        }
        // An empty file (touched by hand) holds no value yet, and takes one (it failed every
        // run, --full too, as not JSON).
        try " \n".write(toFile: file.path, atomically: true, encoding: .utf8)
        #expect(try file.values(namespace: "a").isEmpty)
        try file.store(.string("z"), name: "since", namespace: "a")
        #expect(try file.values(namespace: "a") == ["since": .string("z")])
    }

    /// Found by a hostile probe: an id above 2^53 was compared and written as a Double (kept
    /// rounded up by 124, skipping the items in between); a run that finished later with a
    /// lower value replaced the higher one; a state file that is a FIFO hung the run.
    @Test func theStateFile_keepsIntegersExactly_neverGoesDown_andIsARegularFile() throws {
        let folder = NSTemporaryDirectory() + "incremental-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = IncrementalStateFile(path: folder + "/m.json.state")
        let big = IncrementalValue(.int(1_234_567_890_123_456_900))!
        #expect(try file.store(big, name: "since", namespace: "a") == big)
        #expect(try String(contentsOfFile: file.path, encoding: .utf8) == #"{"a":{"since":1234567890123456900}}"# + "\n")
        #expect(try file.values(namespace: "a")["since"]?.description == "1234567890123456900")
        // Two ids one Double apart from neither: the higher is higher.
        let (lower, higher) = (IncrementalValue(.int(1_234_567_890_123_456_700))!, IncrementalValue(.int(1_234_567_890_123_456_895))!)
        #expect(higher.isHigher(than: lower) == true && lower.isHigher(than: higher) == false)
        // Beyond 64 bits, as written and compared exactly (they went through a Double).
        let items = try ["123456789012345678901234", "123456789012345678901235", "-123456789012345678901235", "7"].map {
            try #require(IncrementalValue(try JSONValue.parse(Array($0.utf8))))
        }
        #expect(items.map(\.description) == ["123456789012345678901234", "123456789012345678901235", "-123456789012345678901235", "7"])
        #expect(items[1].isHigher(than: items[0]) == true && items[0].isHigher(than: items[1]) == false)
        #expect(items[0].isHigher(than: items[2]) == true && items[2].isHigher(than: items[3]) == false && items[0].isHigher(than: items[3]) == true)
        #expect(try file.store(items[1], name: "id", namespace: "a") == items[1])
        #expect(try file.store(items[0], name: "id", namespace: "a") == items[1])
        #expect(try file.values(namespace: "a")["id"]?.description == "123456789012345678901235")

        try file.store(.string("2024-12-31"), name: "day", namespace: "a")
        #expect(try file.store(.string("2024-06-01"), name: "day", namespace: "a") == .string("2024-12-31"))
        #expect(try file.values(namespace: "a")["day"] == .string("2024-12-31"))

        let fifo = folder + "/fifo.state"
        #expect(mkfifo(fifo, 0o600) == 0)
        let clock = ContinuousClock()
        let start = clock.now
        #expect { _ = try IncrementalStateFile(path: fifo).values(namespace: "a") } throws: { error in
            "\(error)".contains("is a FIFO, expected a regular state file")
        }
        // At once; before, never.
        #expect(clock.now - start < .seconds(20))
    }

    /// A state file with a key twice (mended by hand, say) had its last value taken without a
    /// word: which one was meant cannot be known. It is refused, as a manifest with a key twice
    /// is, naming the file and the key, and left as it is.
    @Test func aStateFileWithAKeyTwice_isRefused_namingTheFileAndTheKey() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 3, to: folder + "/data.jsonl")
        try #"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}, "incremental": {"cursor": "/n", "state_file": "s.state"}}"#
            .write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        for (state, key) in [(#"{"default": {"since": 1, "since": 5}}"#, "default.since"),
                             (#"{"default": {"since": 1}, "other": {}, "default": {"since": 5}}"#, "default")] {
            try state.write(toFile: folder + "/s.state", atomically: true, encoding: .utf8)
            for command in ["validate", "run"] {
                let result = try await run(pagerCommand, [command, folder + "/m.json"])
                #expect(result.code == 2, "\(result.stderr)")
                #expect(result.stderr.hasPrefix("pager: \(folder)/m.json: $.incremental.state_file: \(folder)/s.state: \(key): the key appears twice. "),
                        "\(result.stderr)")
                #expect(result.stdout.isEmpty)
            }
            #expect(try String(contentsOfFile: folder + "/s.state", encoding: .utf8) == state, "a file it cannot read is not replaced")
        }
    }

    /// A state file that is a symbolic link (to a file kept elsewhere) has the file it names
    /// written, and stays a link; the rename replaced the link with a file of its own.
    @Test func aStateFileThatIsASymbolicLink_hasItsTargetWritten() throws {
        let folder = NSTemporaryDirectory() + "incremental-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder + "/shared", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        // Relative, through a second link, to a file not created yet.
        #expect(symlink("shared/state", folder + "/hop") == 0)
        #expect(symlink("hop", folder + "/m.json.state") == 0)
        let file = IncrementalStateFile(path: folder + "/m.json.state")
        try file.store(.string("2024-05-01"), name: "since", namespace: "a")
        try file.store(.string("2024-06-01"), name: "since", namespace: "a")
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: folder + "/m.json.state") == "hop")
        #expect(try String(contentsOfFile: folder + "/shared/state", encoding: .utf8) == #"{"a":{"since":"2024-06-01"}}"# + "\n")
        #expect(try file.values(namespace: "a") == ["since": .string("2024-06-01")])
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder + "/shared").sorted() == ["state", "state.lock"])
    }

    /// The value at a pointer in bytes JSONValue does not read whole: members (escaped names,
    /// the last of duplicates), elements, nesting, strings holding brackets and quotes.
    @Test func jsonBytes_findTheValueAtAPointer() {
        let text = #"{"a\u0062": [10, {"c": "x]}\"y"}, [true]], "d": 1e400, "d": {"e": null}, "f": "\ud800"}"#
        let bytes = JSONBytes(Array(text.utf8))
        func at(_ pointer: String) -> String? { bytes.value(at: pointer).map { String(decoding: $0, as: UTF8.self) } }
        #expect(at("/ab/0") == "10")
        #expect(at("/ab/1/c") == #""x]}\"y""#)
        #expect(at("/ab/2") == "[true]")
        #expect(at("/d") == #"{"e": null}"#)
        #expect(at("/d/e") == "null")
        #expect(at("/f") == #""\ud800""#)
        #expect(at("/ab/3") == nil && at("/ab/-1") == nil && at("/ab/+1") == nil && at("/zz") == nil && at("/d/e/x") == nil)
        #expect(at("") == text)
    }

    /// Found by a probe: a state file made private (0600) was written back 0644.
    @Test func theStateFile_keepsItsPermissions() throws {
        let folder = NSTemporaryDirectory() + "incremental-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let file = IncrementalStateFile(path: folder + "/m.json.state")
        try file.store(.string("a"), name: "since", namespace: "n")
        #expect(chmod(file.path, 0o600) == 0)
        try file.store(.string("b"), name: "since", namespace: "n")
        var info = stat()
        #expect(stat(file.path, &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(try file.values(namespace: "n") == ["since": .string("b")])
        // And its owner, for a process that may give it (root): it became root's.
        if getuid() == 0 {
            #expect(chown(file.path, 65_534, 65_534) == 0)
            try file.store(.string("c"), name: "since", namespace: "n")
            #expect(stat(file.path, &info) == 0)
            #expect(info.st_uid == 65_534 && info.st_gid == 65_534, "owner \(info.st_uid):\(info.st_gid)")
        }
        // A link planted where the temporary file goes is not written through.
        let planted = folder + "/planted"
        #expect(FileManager.default.createFile(atPath: planted, contents: Data("mine".utf8)))
        #expect(symlink(planted, file.path + ".tmp") == 0)
        try file.store(.string("d"), name: "since", namespace: "n")
        #expect(FileManager.default.contents(atPath: planted) == Data("mine".utf8))
        #expect(try file.values(namespace: "n") == ["since": .string("d")])
        // What a run killed while it wrote left (a probe: one file a pid, for good) is replaced,
        // and nothing is left beside the state file.
        #expect(FileManager.default.createFile(atPath: file.path + ".tmp", contents: Data("{\"cut".utf8)))
        try file.store(.string("e"), name: "since", namespace: "n")
        #expect(try file.values(namespace: "n") == ["since": .string("e")])
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder).filter { $0.contains(".tmp") }.isEmpty)
    }

    /// `serve` and `browse` send the value kept (or `initial`) and keep none: they sent
    /// `{state.since}` as written, and an empty value.
    @Test func sendingKeptValue_sendsTheValueKept_orTheInitialOne() throws {
        let folder = NSTemporaryDirectory() + "incremental-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let text = #"{"source": {"plugin": "x"}, "user_info": {"q": "updated:>{state.since}"}, "incremental": {"cursor": "/t", "initial": "2024-01-01"}}"#
        let manifest = try Manifest.parse(Array(text.utf8), file: folder + "/m.json")
        #expect(try manifest.sendingKeptValue().userInfo == ["q": "updated:>2024-01-01", "state.since": "2024-01-01"])
        try IncrementalStateFile(path: folder + "/m.json.state").store(.string("2024-05-01"), name: "since", namespace: "default")
        #expect(try manifest.sendingKeptValue().userInfo == ["q": "updated:>2024-05-01", "state.since": "2024-05-01"])
    }

    /// Found by a probe: a run printed every item, then could not rename the state over a file
    /// of another user in a folder with the sticky bit (the next run printed them again).
    @Test func aStateFileTheStickyBitKeepsToAnotherUser_isRefused() {
        var folder = stat(), file = stat()
        folder.st_mode = S_IFDIR | 0o1777
        folder.st_uid = 0
        file.st_uid = 1000
        let problem = IncrementalStateFile.replaceProblem(folder: folder, file: file, user: 65534)
        #expect(problem == "belongs to user 1000, and the folder's sticky bit lets no other user replace it, as a run does to keep the state")
        // Its owner, the folder's, root, or a folder without the sticky bit: replaced.
        #expect(IncrementalStateFile.replaceProblem(folder: folder, file: file, user: 1000) == nil)
        #expect(IncrementalStateFile.replaceProblem(folder: folder, file: file, user: 0) == nil)
        folder.st_uid = 65534
        #expect(IncrementalStateFile.replaceProblem(folder: folder, file: file, user: 65534) == nil)
        folder.st_uid = 0
        folder.st_mode = S_IFDIR | 0o777
        #expect(IncrementalStateFile.replaceProblem(folder: folder, file: file, user: 65534) == nil)
    }

    /// Found by a probe: a link planted as the temporary file, to a file of the run's own user,
    /// passed the check (it looked at the file linked to), and the run, which removes the link
    /// itself, failed once every item was printed.
    @Test func aTemporaryFileLeftInAStickyFolder_isLookedAtItself_notWhereItLinks() throws {
        let folder = NSTemporaryDirectory() + "incremental-sticky-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o1777])
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let user: uid_t = getuid() == 0 ? 65534 : getuid() + 1
        let own = folder + "/own"
        #expect(FileManager.default.createFile(atPath: own, contents: nil))
        #expect(chown(own, user, gid_t(user)) == 0 || getuid() != 0)
        try FileManager.default.createSymbolicLink(atPath: folder + "/m.json.state.tmp", withDestinationPath: own)
        let file = IncrementalStateFile(path: folder + "/m.json.state")
        #expect(throws: IncrementalError.self) { try file.checkWritable(makingLock: false, user: user) }
        do {
            try file.checkWritable(makingLock: false, user: user)
        } catch {
            #expect(error.message.contains("m.json.state.tmp, left by a run that was stopped, belongs to user \(getuid())"), "\(error.message)")
        }
        // Its owner may remove it.
        try file.checkWritable(makingLock: false, user: getuid())
        #expect(!FileManager.default.fileExists(atPath: folder + "/m.json.state.lock"))
    }
}
