import Foundation
import PagingHost
import Testing

/// One row of Tests/Fixtures/bad-manifests/README.md.
struct BadManifestCase: Sendable, CustomStringConvertible {
    /// `cases/<name>.json` (used as is) or `runtime/<name>` (built by the test).
    let name: String
    /// What the line must name besides the file: a JSON path, `(plugin)` or `-`.
    let names: String
    let fragment: String
    let what: String

    var description: String { name }
    var isRuntime: Bool { name.hasPrefix("runtime/") }
    var baseName: String { URL(fileURLWithPath: name).deletingPathExtension().lastPathComponent }

    static let corpusFolder = "\(repositoryRoot)/Tests/Fixtures/bad-manifests"

    /// The rows of the corpus README's table.
    static let all: [BadManifestCase] = {
        let readme = (try? String(contentsOfFile: corpusFolder + "/README.md", encoding: .utf8)) ?? ""
        return readme.split(separator: "\n").compactMap { line -> BadManifestCase? in
            guard line.hasPrefix("| `") else { return nil }
            // Split on '|' not preceded by '\'.
            var cells: [String] = []
            var cell = ""
            var previous: Character = " "
            for character in line.dropFirst() {
                if character == "|" && previous != "\\" {
                    cells.append(cell)
                    cell = ""
                } else {
                    if character == "|" { cell.removeLast() }
                    cell.append(character)
                }
                previous = character
            }
            guard cells.count >= 4 else { return nil }
            func code(_ text: String) -> String {
                var text = text.trimmingCharacters(in: .whitespaces)
                if text.hasPrefix("`") && text.hasSuffix("`") && text.count >= 2 { text = String(text.dropFirst().dropLast()) }
                return text
            }
            return BadManifestCase(name: code(cells[0]), names: code(cells[1]), fragment: code(cells[2]),
                                   what: cells[3].trimmingCharacters(in: .whitespaces))
        }
    }()
}

@Suite("Bad manifests through `pager validate`")
struct BadManifestTests {
    @Test func theCorpusHasAtLeast30Cases() {
        let cases = BadManifestCase.all
        report("bad-manifest corpus: \(cases.count) cases (\(cases.filter { !$0.isRuntime }.count) files, \(cases.filter(\.isRuntime).count) built at run time)")
        #expect(cases.count >= 30)
        #expect(Set(cases.map(\.name)).count == cases.count, "case names must be unique")
        for item in cases where !item.isRuntime {
            #expect(FileManager.default.fileExists(atPath: "\(BadManifestCase.corpusFolder)/\(item.name)"), "\(item.name) is missing")
        }
    }

    @Test(arguments: BadManifestCase.all)
    func everyBadManifest_exits2_withOneLineNamingTheFileAndWhere(_ item: BadManifestCase) async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 10, to: folder + "/data.jsonl")
        let manifest: String
        var plugin: String?
        var unreadable = false
        if item.isRuntime {
            (manifest, plugin, unreadable) = try await Self.build(item, in: folder)
        } else {
            manifest = "\(folder)/\(item.baseName).json"
            try FileManager.default.copyItem(atPath: "\(BadManifestCase.corpusFolder)/\(item.name)", toPath: manifest)
        }
        var result = try await run(pagerBinary, ["validate", manifest])
        var checkFragment = true
        if unreadable && geteuid() == 0 {
            // Root reads a chmod-000 file. Run the case as `nobody` instead, when possible.
            if let asNobody = try? await Self.runAsNobody(["validate", manifest]), asNobody.stderr.contains("Permission denied") {
                result = asNobody
            } else {
                checkFragment = false
                report("\(item.name): running as root and `setpriv` could not drop privileges: "
                       + "the 'Permission denied' fragment is NOT checked, only exit code, one line, no hang")
                if item.name == "runtime/plugin-unreadable" {
                    // As root the plugin loads: only "does not crash or hang" holds.
                    #expect(!result.timedOut && !result.signaled)
                    return
                }
            }
        }
        Self.check(result, item, manifest: manifest, plugin: plugin, checkFragment: checkFragment)
    }

    @Test func aManifestWithAByteOrderMark_isAccepted() async throws {
        let folder = scratchFolder()
        writeJSONLines(count: 10, to: folder + "/data.jsonl")
        let manifest = folder + "/bom.json"
        try Data([0xEF, 0xBB, 0xBF] + Array(#"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}}"#.utf8))
            .write(to: URL(fileURLWithPath: manifest))
        let result = try await run(pagerBinary, ["validate", manifest])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stdout.contains("\(manifest): ok"))
    }

    /// The checks every case must pass.
    static func check(_ result: ProgramResult, _ item: BadManifestCase, manifest: String, plugin: String?, checkFragment: Bool = true) {
        // Ends, however long a loaded machine takes (89 cases start at once: one took 15 s while
        // the load was 20, and a bound on the time failed it).
        #expect(!result.timedOut, "\(item.name): pager validate did not end (killed)")
        #expect(!result.signaled, "\(item.name): pager crashed with signal \(result.code): \(result.stderr)")
        #expect(result.code == 2, "\(item.name): exit code \(result.code), stderr: \(result.stderr)")
        let newlines = result.stderr.filter { $0 == "\n" }.count
        #expect(newlines == 1 && result.stderr.hasSuffix("\n"),
                "\(item.name): expected exactly one line on stderr, got \(newlines): \(result.stderr.debugDescription)")
        let line = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(line.contains(manifest), "\(item.name): the line does not name the manifest: \(line)")
        switch item.names {
        case "-": break
        case "(plugin)":
            #expect(line.contains("$.source (plugin \"\(plugin ?? "")\")"), "\(item.name): the line does not name the plugin: \(line)")
        default:
            #expect(line.contains(item.names), "\(item.name): the line does not name \(item.names): \(line)")
        }
        if checkFragment {
            #expect(line.contains(item.fragment), "\(item.name): expected “\(item.fragment)” in: \(line)")
        }
    }

    /// Builds a runtime case in `folder`: the manifest's path, the plugin it names, and whether
    /// the case is about an unreadable file.
    static func build(_ item: BadManifestCase, in folder: String) async throws -> (String, String?, Bool) {
        let manager = FileManager.default
        let manifest = "\(folder)/\(item.baseName).json"
        let template = (try? String(contentsOfFile: "\(BadManifestCase.corpusFolder)/\(item.name).json", encoding: .utf8)) ?? ""
        func write(plugin: String, sha256: String = "") async throws {
            try template.replacingOccurrences(of: "@PLUGIN@", with: plugin).replacingOccurrences(of: "@SHA256@", with: sha256)
                .write(toFile: manifest, atomically: true, encoding: .utf8)
        }
        switch item.baseName {
        case "manifest-is-folder":
            try manager.createDirectory(atPath: manifest, withIntermediateDirectories: true)
        case "manifest-missing":
            break
        case "manifest-symlink-loop":
            try manager.createSymbolicLink(atPath: manifest, withDestinationPath: folder + "/other.json")
            try manager.createSymbolicLink(atPath: folder + "/other.json", withDestinationPath: manifest)
        case "manifest-unreadable":
            try template.write(toFile: manifest, atomically: true, encoding: .utf8)
            chmod(manifest, 0)
            return (manifest, nil, true)
        case "manifest-too-large":
            var bytes = Array(#"{"source": {"plugin": "jsonlines", "config": {"path": "data.jsonl"}}"#.utf8)
            bytes += [UInt8](repeating: 0x20, count: 20_000_000) + [UInt8(ascii: "}")]
            try Data(bytes).write(to: URL(fileURLWithPath: manifest))
        case "plugin-text-named-so":
            let plugin = folder + "/libfake.so"
            try "this is not a library\n".write(toFile: plugin, atomically: true, encoding: .utf8)
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-empty-file":
            let plugin = folder + "/libempty.so"
            try Data().write(to: URL(fileURLWithPath: plugin))
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-elf-object":
            let source = folder + "/object.c", plugin = folder + "/libobject.so"
            try "int paging_plugin_entry(void) { return 0; }\n".write(toFile: source, atomically: true, encoding: .utf8)
            let cc = try await run("/usr/bin/env", ["cc", "-c", "-fPIC", source, "-o", plugin], deadline: .seconds(60))
            #expect(cc.code == 0, "\(cc.stderr)")
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-truncated-elf":
            let plugin = folder + "/libtruncated.so"
            let whole = try Data(contentsOf: URL(fileURLWithPath: shippedPlugin("jsonlines")))
            try whole.prefix(64).write(to: URL(fileURLWithPath: plugin))
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-is-folder":
            let plugin = folder + "/libdir.so"
            try manager.createDirectory(atPath: plugin, withIntermediateDirectories: true)
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-symlink-loop":
            let plugin = folder + "/libloop.so"
            try manager.createSymbolicLink(atPath: plugin, withDestinationPath: folder + "/libloop2.so")
            try manager.createSymbolicLink(atPath: folder + "/libloop2.so", withDestinationPath: plugin)
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-unreadable":
            let plugin = folder + "/libunreadable.so"
            try manager.copyItem(atPath: try await fixturePlugin("create_fails"), toPath: plugin)
            chmod(plugin, 0)
            try await write(plugin: plugin)
            return (manifest, plugin, true)
        case "plugin-no-entry":
            let plugin = try await fixturePlugin("no_entry")
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-abi-major":
            let plugin = try await fixturePlugin("abi_major2")
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-create-fails":
            let plugin = try await fixturePlugin("create_fails")
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "plugin-sha256-mismatch":
            let plugin = try await fixturePlugin("no_entry")
            let sum = try await run("/usr/bin/env", ["sha256sum", try await fixturePlugin("create_fails")])
            let other = String(sum.stdout.prefix(64))
            try await write(plugin: plugin, sha256: other)
            return (manifest, plugin, false)
        case "plugin-sha256-unreadable":
            let plugin = folder + "/libmissing.so"
            try await write(plugin: plugin, sha256: String(repeating: "1", count: 64))
            return (manifest, plugin, false)
        case "plugin-fifo":
            let plugin = folder + "/libfifo.so"
            #expect(mkfifo(plugin, 0o600) == 0)
            try await write(plugin: plugin)
            return (manifest, plugin, false)
        case "data-fifo":
            #expect(mkfifo(folder + "/data.fifo", 0o600) == 0)
            try await write(plugin: "")
        case "data-socket":
            try bindUnixSocket(at: folder + "/data.sock")
            try await write(plugin: "")
        case "store-foreign-database":
            let created = try await run("/usr/bin/env", [
                "python3", "-c", "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.executescript("
                    + "'CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); CREATE INDEX users_name ON users (name);'); db.commit()",
                folder + "/app.db"])
            #expect(created.code == 0, "\(created.stderr)")
            try await write(plugin: "")
        default:
            Issue.record("no builder for runtime case \(item.name)")
        }
        return (manifest, nil, false)
    }

    /// Leaves a UNIX socket file at `path` (bound, then closed: the file stays).
    static func bindUnixSocket(at path: String) throws {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        try #require(bytes.count < MemoryLayout.size(ofValue: address.sun_path), "socket path too long: \(path)")
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0, "bind \(path): \(String(cString: strerror(errno)))")
    }

    /// Runs `pager` as the user nobody (uid 65534) through setpriv.
    static func runAsNobody(_ arguments: [String]) async throws -> ProgramResult? {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else { return nil }
        return try await run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", pagerBinary] + arguments)
    }
}
