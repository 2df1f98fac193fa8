import Foundation
import Paging
import PagingHost
import Synchronization
import Testing

/// A library file opened once, pinned libraries loaded from the bytes that were hashed, and
/// files that change after they were loaded.
@Suite("Reloading and pinning plugin libraries")
struct PluginReloadTests {
    let log = LogRecorder()

    /// Two builds of the rewritable fixture with the same layout: ids "rewritable-a" and
    /// "rewritable-b", and their SHA-256.
    static func builds() async throws -> (a: String, b: String, pinA: String, pinB: String) {
        let source = "\(repositoryRoot)/Tests/Fixtures/plugins/rewritable.c"
        let a = try await compileCPlugin(source, name: "rewritable_a")
        let b = try await compileCPlugin(source, name: "rewritable_b", extraFlags: [#"-DFIXTURE_ID="rewritable-b""#])
        return (a, b, try await sha256sum(a), try await sha256sum(b))
    }

    static func sha256sum(_ path: String) async throws -> String {
        String(try await run("/usr/bin/env", ["sha256sum", path]).stdout.prefix(64))
    }

    /// A fresh copy of `library` in a scratch folder, so that this test alone loads that path.
    static func copy(_ library: String, named name: String) throws -> String {
        let path = scratchFolder() + "/" + name
        try FileManager.default.copyItem(atPath: library, toPath: path)
        return path
    }

    /// Rewrites `target` in place with the bytes of `source`, as `cp` over it does: same inode.
    /// A rebuild is later than the build it replaces; the modification time is set one second
    /// on, so that the change shows even when the file system's clock has not ticked since.
    static func overwriteInPlace(_ target: String, with source: String) throws {
        var before = stat()
        #expect(stat(target, &before) == 0)
        let bytes = try Data(contentsOf: URL(fileURLWithPath: source))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: target))
        try handle.write(contentsOf: bytes)
        try handle.truncate(atOffset: UInt64(bytes.count))
        try handle.close()
        let later = timespec(tv_sec: before.st_mtim.tv_sec + 1, tv_nsec: before.st_mtim.tv_nsec)
        var times = [later, later]
        #expect(utimensat(AT_FDCWD, target, &times, 0) == 0)
        var after = stat()
        #expect(stat(target, &after) == 0)
        #expect(after.st_ino == before.st_ino, "the file was replaced, not rewritten in place")
    }

    static func expectCreateFails(_ library: PluginLibrary, builtAs id: String, log: LogRecorder) {
        #expect(throws: PluginLoadError.createFailed(path: library.path, id: id, status: .invalidConfig, message: "built as \(id)")) {
            try library.makeSource(sink: log.sink)
        }
    }

    @Test func pinnedLibrary_rewrittenAfterItsCheck_loadsOnlyTheBytesThatMatchThePin() async throws {
        let (a, b, pinA, pinB) = try await Self.builds()
        let path = try Self.copy(a, named: "libpinned.so")
        let first = try PluginLibrary.open(path: path, sha256: pinA)
        #expect(first.descriptors.map(\.id) == ["rewritable-a"])

        try Self.overwriteInPlace(path, with: b)
        var notes: [PluginLibrary.OpenNote] = []
        do {
            _ = try PluginLibrary.open(path: path, sha256: pinA) { notes.append($0) }
            Issue.record("the rewritten file loaded under the earlier pin")
        } catch {
            #expect(error == .checksumMismatch(path: path, expected: pinA, actual: pinB))
        }
        #expect(notes.isEmpty)

        let second = try PluginLibrary.open(path: path, sha256: pinB.uppercased()) { notes.append($0) }
        #expect(second !== first)
        #expect(second.descriptors.map(\.id) == ["rewritable-b"])
        #expect(second.loadedSHA256 == pinB)
        #expect(notes.map(\.kind) == [.fileChanged] && notes.map(\.path) == [path])
        #expect(notes.first?.description.contains("\(path): the file changed since it was first loaded") == true)
        // The new build's code runs; the earlier library still runs its own copy of build a.
        Self.expectCreateFails(second, builtAs: "rewritable-b", log: log)
        Self.expectCreateFails(first, builtAs: "rewritable-a", log: log)
    }

    @Test func unpinnedLibrary_rewrittenInPlace_loadsTheNewCode_andSaysSo() async throws {
        let (a, b, _, pinB) = try await Self.builds()
        let path = try Self.copy(a, named: "librewritten.so")
        let first = try PluginLibrary.open(path: path)
        #expect(first.descriptors.map(\.id) == ["rewritable-a"])
        #expect(first.loadedFrom == path && first.loadedSHA256 == nil)

        try Self.overwriteInPlace(path, with: b)
        var notes: [PluginLibrary.OpenNote] = []
        let second = try PluginLibrary.open(path: path) { notes.append($0) }
        #expect(second !== first)
        #expect(second.descriptors.map(\.id) == ["rewritable-b"])
        #expect(second.loadedFrom != path && second.loadedSHA256 == pinB)
        #expect(notes.map(\.kind) == [.fileChanged] && notes.map(\.path) == [path])
        Self.expectCreateFails(second, builtAs: "rewritable-b", log: log)

        // Unchanged since: the new library, without a word.
        #expect(try PluginLibrary.open(path: path) { notes.append($0) } === second)
        #expect(notes.count == 1)
    }

    @Test func pipeline_reportsAChangedLibrary_throughItsSink() async throws {
        let (a, b, _, _) = try await Self.builds()
        let folder = scratchFolder()
        let path = folder + "/libchanged.so"
        try FileManager.default.copyItem(atPath: a, toPath: path)
        _ = try PluginLibrary.open(path: path)
        try Self.overwriteInPlace(path, with: b)
        try #"{"source": {"plugin": "./libchanged.so"}}"#.write(toFile: folder + "/m.json", atomically: true, encoding: .utf8)
        let lines = Mutex<[(PluginLogLevel, String, String)]>([])
        do {
            _ = try Pipeline(manifest: try Manifest.load(path: folder + "/m.json"), searchPath: PluginSearchPath(folders: []),
                             sink: { level, plugin, message in lines.withLock { $0.append((level, plugin, message)) } })
            Issue.record("the fixture's create should fail")
        } catch {
            #expect(error.description.contains("built as rewritable-b"), "\(error)")
        }
        let warnings = lines.withLock { $0 }.filter { $0.0 == .warning }
        #expect(warnings.count == 1)
        #expect(warnings.first?.1.hasPrefix("./libchanged.so") == true)
        #expect(warnings.first?.2.hasPrefix("\(path): the file changed since it was first loaded") == true)
    }

    @Test func fifo_isRefusedAtOnce() async throws {
        let path = scratchFolder() + "/libfifo.so"
        #expect(mkfifo(path, 0o600) == 0)
        // The open runs on a thread of its own, against a deadline kept by a dispatch timer: a
        // blocked open may also hold up the threads that run tasks, which a task's sleep needs.
        let outcome = await withCheckedContinuation { (continuation: CheckedContinuation<Result<PluginLibrary, PluginLoadError>?, Never>) in
            let answered = Locked(false)
            let answer: @Sendable (Result<PluginLibrary, PluginLoadError>?) -> Void = { outcome in
                if answered.withLock({ answered in defer { answered = true }; return !answered }) {
                    continuation.resume(returning: outcome)
                }
            }
            Thread.detachNewThread {
                answer(Result { () throws(PluginLoadError) in try PluginLibrary.open(path: path) })
            }
            DispatchQueue.global().asyncAfter(deadline: .now() + 30) {
                answer(nil)
                // If still blocked waiting for a writer: give it one, so that its thread ends.
                let writer = open(path, O_WRONLY | O_NONBLOCK)
                if writer >= 0 { close(writer) }
            }
        }
        guard case .failure(let error) = outcome else {
            Issue.record(outcome == nil ? "opening a FIFO blocked" : "a FIFO loaded"); return
        }
        #expect(error == .notARegularFile(path: path, kind: "a FIFO (named pipe)"))
        #expect(error.description == "\(path): is a FIFO (named pipe), expected a shared library file")
    }

    @Test func unchangedFile_openedAgain_isTheSameLibrary() async throws {
        let (a, _, pinA, pinB) = try await Self.builds()
        let path = try Self.copy(a, named: "libunchanged.so")
        var notes: [PluginLibrary.OpenNote] = []
        let first = try PluginLibrary.open(path: path) { notes.append($0) }
        #expect(try PluginLibrary.open(path: path) { notes.append($0) } === first)
        // Loaded without a pin: reused under one once the unchanged file has that checksum.
        #expect(try PluginLibrary.open(path: path, sha256: pinA) { notes.append($0) } === first)
        #expect(try PluginLibrary.open(path: path, sha256: pinA) { notes.append($0) } === first)
        #expect(throws: PluginLoadError.checksumMismatch(path: path, expected: pinB, actual: pinA)) {
            try PluginLibrary.open(path: path, sha256: pinB)
        }
        #expect(notes.isEmpty)

        let pinnedPath = try Self.copy(a, named: "libunchanged-pinned.so")
        let pinned = try PluginLibrary.open(path: pinnedPath, sha256: pinA)
        #expect(try PluginLibrary.open(path: pinnedPath, sha256: pinA) === pinned)
        #expect(try PluginLibrary.open(path: pinnedPath) === pinned)
    }

    @Test func pinnedLibrary_isLoadedFromASealedMemfd_holdingThePinnedBytes() async throws {
        let (a, _, pinA, _) = try await Self.builds()
        let path = try Self.copy(a, named: "libpinned-memfd.so")
        let library = try PluginLibrary.open(path: path, sha256: pinA)
        #expect(library.path == path)
        #expect(library.loadedSHA256 == pinA)
        let prefix = "/proc/self/fd/"
        try #require(library.loadedFrom.hasPrefix(prefix))
        let fd = try #require(Int32(library.loadedFrom.dropFirst(prefix.count)))

        // Sealed: F_GET_SEALS (1034) answers F_SEAL_SEAL | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE;
        // even growing it fails.
        #expect(fcntl(fd, 1034) == 0x1 | 0x2 | 0x4 | 0x8)
        var info = stat()
        #expect(fstat(fd, &info) == 0)
        var byte: UInt8 = 0
        #expect(pwrite(fd, &byte, 1, off_t(info.st_size)) == -1 && errno == EPERM)

        // The library's code is mapped from that memfd, not from the file.
        let mappings = Self.readProcFile("/proc/self/maps").split(separator: "\n").map {
            $0.split(separator: " ", omittingEmptySubsequences: true)
        }.filter { $0.count >= 6 && $0[4] == "\(info.st_ino)" && $0[5].hasPrefix("/memfd:") }
        #expect(mappings.contains { $0[1].contains("x") }, "no executable mapping of the memfd in /proc/self/maps")
        #expect(mappings.allSatisfy { $0[5] == "/memfd:libpinned-memfd.so" })

        // Its bytes are the pinned ones.
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        #expect(pread(fd, &bytes, bytes.count, 0) == bytes.count)
        let copyPath = scratchFolder() + "/copy.so"
        try Data(bytes).write(to: URL(fileURLWithPath: copyPath))
        #expect(try await Self.sha256sum(copyPath) == pinA)
    }

    /// A /proc file, read with stdio (Foundation's file reading truncates /proc files).
    static func readProcFile(_ path: String) -> String {
        guard let file = fopen(path, "r") else { return "" }
        defer { fclose(file) }
        var data = [UInt8]()
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = fread(&chunk, 1, chunk.count, file)
            if count == 0 { break }
            data += chunk[..<count]
        }
        return String(decoding: data, as: UTF8.self)
    }
}
