// Incremental loading through `pager run`: the highest `updated_at` of the items loaded is kept
// in a state file next to the manifest and sent as {state.since} by the next run, against the
// /events fixture of api_server.py (which answers only the events updated after `since`).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PagingTestSupport
import Testing

@Suite("incremental loading with the http source", .serialized)
struct IncrementalLoadingTests {
    let server: FixtureServer
    let folder = scratchFolder()
    var manifest: String { folder + "/events.json" }
    var stateFile: String { manifest + ".state" }

    init() throws {
        server = try FixtureServer("http/api_server.py")
        try writeManifest()
    }

    private func writeManifest(interceptors: String = "[]") throws {
        try """
            {"source": {"plugin": "\(try httpPluginPath())",
                        "config": {"url": "\(server.baseURL)/events?since={state.since}&page={key}&per_page={pageSize}"}},
             "interceptors": \(interceptors),
             "page_size": 5,
             "incremental": {"cursor": "/updated_at", "state": "since", "namespace": "events"}}
            """.write(toFile: manifest, atomically: true, encoding: .utf8)
    }

    private func cleanUp() {
        server.stop()
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func pagerRun(_ extra: [String] = []) async throws -> ProgramResult {
        try await run(pagerCommand, ["run", manifest, "--refresh", "--append", "10"] + extra)
    }

    private func ids(_ result: ProgramResult) throws -> [Int] {
        try result.stdout.split(separator: "\n").map { line in
            let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return try #require(object["id"] as? Int)
        }
    }

    private func sinceAsked() async throws -> [String] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: server.baseURL + "/events/since")!)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String])
    }

    private func kept() throws -> String? {
        guard let data = FileManager.default.contents(atPath: stateFile) else { return nil }
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: [String: String]])
        return root["events"]?["since"]
    }

    @Test func aSecondRun_fetchesOnlyWhatIsNew_andFullLoadsEverything() async throws {
        defer { cleanUp() }
        let first = try await pagerRun()
        #expect(first.code == 0, "\(first.stderr)")
        #expect(try ids(first) == Array(1...12))
        #expect(try kept() == "2024-01-01T00:00:12Z")
        #expect(try await sinceAsked().allSatisfy(\.isEmpty), "the first run starts from the initial value")

        let nothingNew = try await pagerRun()
        #expect(nothingNew.code == 0, "\(nothingNew.stderr)")
        #expect(try ids(nothingNew).isEmpty)
        #expect(try await sinceAsked().last == "2024-01-01T00:00:12Z")
        #expect(try kept() == "2024-01-01T00:00:12Z")

        try await post(server, "/events/add", #"{"count": 3}"#)
        let new = try await pagerRun()
        #expect(try ids(new) == [13, 14, 15])
        #expect(try kept() == "2024-01-01T00:00:15Z")

        let full = try await pagerRun(["--full"])
        #expect(full.code == 0, "\(full.stderr)")
        #expect(try ids(full) == Array(1...15))
        #expect(try await sinceAsked().last == "")
        #expect(try kept() == "2024-01-01T00:00:15Z")
        // Written whole and renamed: no temporary file is left beside it.
        let names = try FileManager.default.contentsOfDirectory(atPath: folder)
        #expect(!names.contains { $0.contains(".tmp.") }, "\(names)")
    }

    /// With a store in front, every request of an incremental run goes to the source, and the
    /// store keeps the pages: the empty last page a quiet day stored answered every later run
    /// (nothing new arrived again, exit 0), and `--full` was answered from the store.
    @Test func aStoreInFront_answersNoRequestOfAnIncrementalRun_andKeepsThePages() async throws {
        defer { cleanUp() }
        let store = folder + "/store.db"
        try writeManifest(interceptors: #"[{"plugin": "sqlite-store", "config": {"path": "\#(store)"}}]"#)
        #expect(try ids(try await pagerRun()) == Array(1...12))
        let quiet = try await pagerRun()
        #expect(quiet.code == 0, "\(quiet.stderr)")
        #expect(try ids(quiet).isEmpty)
        try await post(server, "/events/add", #"{"count": 3}"#)
        let new = try await pagerRun()
        #expect(new.code == 0, "\(new.stderr)")
        #expect(try ids(new) == [13, 14, 15], "\(new.stderr)")
        #expect(try kept() == "2024-01-01T00:00:15Z")
        try await post(server, "/events/add", #"{"count": 1}"#)
        let full = try await pagerRun(["--full"])
        #expect(try ids(full) == Array(1...16), "\(full.stderr)")
        #expect(try await sinceAsked().last == "")
        let size = try FileManager.default.attributesOfItem(atPath: store)[.size] as? Int ?? 0
        #expect(size > 0, "the store kept the pages")
    }

    @Test func aFailedRun_keepsTheOldValue_soTheNextRunLoadsWhatItMissed() async throws {
        defer { cleanUp() }
        #expect(try await pagerRun().code == 0)
        try await post(server, "/events/add", #"{"count": 8}"#)
        try await post(server, "/events/fail", #"{"page": 2}"#)
        let failed = try await pagerRun()
        #expect(failed.code == 1)
        #expect(try ids(failed) == [13, 14, 15, 16, 17], "the first page loaded before the failure")
        #expect(try kept() == "2024-01-01T00:00:12Z", "a failed run keeps nothing")
        let again = try await pagerRun()
        #expect(again.code == 0, "\(again.stderr)")
        #expect(try ids(again) == Array(13...20))
        #expect(try kept() == "2024-01-01T00:00:20Z")
    }

    @Test func aCorruptStateFile_isAnErrorNamingIt_andIsLeftAsItIs() async throws {
        defer { cleanUp() }
        try #"{"events": {"since": "#.write(toFile: stateFile, atomically: true, encoding: .utf8)
        let result = try await pagerRun()
        #expect(result.code == 2)
        #expect(result.stderr.contains(stateFile), "\(result.stderr)")
        #expect(result.stderr.contains("not valid JSON"), "\(result.stderr)")
        #expect(try await sinceAsked().isEmpty, "nothing is fetched")
        #expect(String(decoding: FileManager.default.contents(atPath: stateFile) ?? Data(), as: UTF8.self) == #"{"events": {"since": "#)

        try #"{"events": {"since": [1]}}"#.write(toFile: stateFile, atomically: true, encoding: .utf8)
        let wrongKind = try await pagerRun()
        #expect(wrongKind.code == 2)
        #expect(wrongKind.stderr.contains("\(stateFile): events.since: expected a string or a number, got an array"), "\(wrongKind.stderr)")
    }

    /// `pager validate` reads the state file as a run would: it shows the value kept, and one
    /// that is not state, or a folder a run could not keep it in, is bad input (it said ok, and
    /// a run then loaded every item before failing with exit 1).
    @Test func validate_showsTheValueKept_andRefusesAStateFileARunCouldNotUse() async throws {
        defer { cleanUp() }
        let fresh = try await run(pagerCommand, ["validate", manifest])
        #expect(fresh.code == 0 && fresh.stdout.contains(#"incremental: {state.since} = "" (initial; nothing kept yet in \#(stateFile))"#), "\(fresh.stdout)")
        // Looked for, not made (one made by `sudo pager validate` kept the user's runs out).
        #expect(!FileManager.default.fileExists(atPath: stateFile + ".lock"))
        #expect(try await pagerRun().code == 0)
        let kept = try await run(pagerCommand, ["validate", manifest])
        #expect(kept.stdout.contains(#"incremental: {state.since} = "2024-01-01T00:00:12Z" (kept in \#(stateFile))"#), "\(kept.stdout)")

        try "[1]".write(toFile: stateFile, atomically: true, encoding: .utf8)
        let corrupt = try await run(pagerCommand, ["validate", manifest])
        #expect(corrupt.code == 2 && corrupt.stderr.contains(stateFile), "\(corrupt.stderr)")

        let elsewhere = folder + "/elsewhere.json"
        try String(contentsOfFile: manifest, encoding: .utf8)
            .replacingOccurrences(of: #""namespace": "events"}"#, with: #""namespace": "events", "state_file": "no/such/folder/s.state"}"#)
            .write(toFile: elsewhere, atomically: true, encoding: .utf8)
        let before = try await sinceAsked().count
        for command in ["validate", "run"] {
            let missing = try await run(pagerCommand, [command, elsewhere])
            #expect(missing.code == 2, "\(command): \(missing.stderr)")
            #expect(missing.stderr.contains("its folder \(folder)/no/such/folder does not exist"), "\(missing.stderr)")
        }
        // A folder in the lock file's place: said before anything is loaded (a run loaded every
        // page, then failed keeping the state).
        try FileManager.default.removeItem(atPath: stateFile + ".lock")
        try FileManager.default.createDirectory(atPath: stateFile + ".lock", withIntermediateDirectories: false)
        for command in ["validate", "run"] {
            let folderLock = try await run(pagerCommand, [command, manifest])
            #expect(folderLock.code == 2, "\(command): \(folderLock.stderr)")
            #expect(folderLock.stderr.contains("its lock file \(stateFile).lock cannot be opened or made by this process"), "\(folderLock.stderr)")
        }
        // Found by a probe: a link to a folder that does not exist passed (the run printed every
        // item, then could not keep the state: the next run printed them again).
        try FileManager.default.removeItem(atPath: stateFile + ".lock")
        try FileManager.default.createSymbolicLink(atPath: stateFile + ".lock", withDestinationPath: "/nonexistent/x")
        for command in ["validate", "run"] {
            let dangling = try await run(pagerCommand, [command, manifest])
            #expect(dangling.code == 2 && dangling.stderr.contains("its lock file \(stateFile).lock cannot be opened or made by this process "
                                                                  + "(a run locks it to keep the state): a link to where no file can be made"),
                    "\(command): \(dangling.stderr)")
        }
        // Found by a probe: a folder whose permissions let root write but where no file can be
        // made (sysfs) passed, as did a state file the folder's sticky bit keeps to another
        // user: the run printed every item, then could not keep the state.
        try FileManager.default.removeItem(atPath: stateFile + ".lock")
        let sysfs = folder + "/sysfs.json"
        try String(contentsOfFile: manifest, encoding: .utf8)
            .replacingOccurrences(of: #""namespace": "events"}"#, with: #""namespace": "events", "state_file": "/sys/kernel/paging-test.state"}"#)
            .write(toFile: sysfs, atomically: true, encoding: .utf8)
        for command in ["validate", "run"] {
            let noFile = try await run(pagerCommand, [command, sysfs])
            #expect(noFile.code == 2 && noFile.stdout.isEmpty, "\(command): \(noFile.stderr)")
            #expect(noFile.stderr.contains("/sys/kernel/paging-test.state"), "\(command): \(noFile.stderr)")
        }
        #expect(try await sinceAsked().count == before, "nothing is fetched")
    }

    /// Found by a probe: a refresh after appends replaced the appended pages before they were
    /// printed, yet the state kept their highest value: the next run started after items no run
    /// printed. The value kept is the highest among the items printed.
    @Test func aRefreshAfterAppends_keepsOnlyWhatWasPrinted() async throws {
        defer { cleanUp() }
        let replaced = try await run(pagerCommand, ["run", manifest, "--append", "2", "--refresh"])
        #expect(replaced.code == 0, "\(replaced.stderr)")
        #expect(try ids(replaced) == Array(1...5))
        #expect(try kept() == "2024-01-01T00:00:05Z", "\(replaced.stderr)")
        let rest = try await pagerRun()
        #expect(try ids(rest) == Array(6...12))
        #expect(try kept() == "2024-01-01T00:00:12Z")
    }

    /// Found by a probe: --full could not start over from a kept value of another kind than
    /// the items now hold (a number, where they hold timestamps): every run failed, saying "the
    /// value the run started from" holds a number, though --full started from the initial value.
    @Test func full_startsOverFromAKeptValueOfAnotherKind() async throws {
        defer { cleanUp() }
        try #"{"events": {"since": 5}}"#.write(toFile: stateFile, atomically: true, encoding: .utf8)
        let full = try await pagerRun(["--full"])
        #expect(full.code == 0, "\(full.stderr)")
        #expect(try ids(full) == Array(1...12))
        #expect(try kept() == "2024-01-01T00:00:12Z")
    }

    @Test func otherNamespaces_inTheStateFile_areKept() async throws {
        defer { cleanUp() }
        try #"{"other": {"since": 42}}"#.write(toFile: stateFile, atomically: true, encoding: .utf8)
        #expect(try await pagerRun().code == 0)
        let data = try #require(FileManager.default.contents(atPath: stateFile))
        let root = try #require(try JSONSerialization.jsonObject(with: data) as? [String: [String: Any]])
        #expect(root["other"]?["since"] as? Int == 42)
        #expect(root["events"]?["since"] as? String == "2024-01-01T00:00:12Z")
    }

    // MARK: Found by a probe of incremental loading

    /// A cursor value of 5 KB: the load fails saying so, and nothing is kept (a 17 MB value
    /// was kept in a state file every later run refused, a 70 KB one made URLs no server took).
    @Test func aCursorValueTooLong_failsItsLoad_andNothingIsKept() async throws {
        defer { cleanUp() }
        let long = "2024-" + String(repeating: "9", count: 5_000)
        try await post(server, "/events/add", #"{"count": 1, "updated_at": "\#(long)"}"#)
        let result = try await pagerRun()
        #expect(result.code == 1, "\(result.stderr)")
        #expect(result.stderr.contains("incremental.cursor /updated_at: an item holds a value of 5005 bytes there; at most 4096 are kept"), "\(result.stderr)")
        #expect(result.stderr.contains("incremental: a load failed: the state is left as it was"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: stateFile))
    }

    /// A run that ends before the end of the data says what the value kept skips when the
    /// source lists the newest first; a pointer no item holds is said, not kept silently.
    @Test func aRunEndingEarly_andACursorNoItemHolds_areSaid() async throws {
        defer { cleanUp() }
        let early = try await run(pagerCommand, ["run", manifest, "--refresh"])
        #expect(early.code == 0, "\(early.stderr)")
        #expect(try kept() == "2024-01-01T00:00:05Z")
        #expect(early.stderr.contains("incremental: the run stopped before the end of the data"), "\(early.stderr)")
        let toTheEnd = try await pagerRun()
        #expect(toTheEnd.code == 0 && !toTheEnd.stderr.contains("stopped before the end"), "\(toTheEnd.stderr)")

        let misspelt = folder + "/misspelt.json"
        try String(contentsOfFile: manifest, encoding: .utf8).replacingOccurrences(of: "/updated_at", with: "/updatedAt")
            .write(toFile: misspelt, atomically: true, encoding: .utf8)
        let result = try await run(pagerCommand, ["run", misspelt, "--refresh", "--append", "10"])
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stderr.contains("incremental: none of the 12 items loaded holds a value at /updatedAt; nothing is kept"), "\(result.stderr)")
    }

    /// A process holding the state file's lock for `seconds` (or until ``release(_:)``), once it
    /// holds it.
    private func holdLock(for seconds: Int) throws -> Process {
        let holder = Process()
        holder.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        holder.arguments = ["python3", "-c", """
            import fcntl, sys, time
            f = open(sys.argv[1], "w")
            fcntl.flock(f, fcntl.LOCK_EX)
            print("locked", flush=True)
            time.sleep(\(seconds))
            """, stateFile + ".lock"]
        let said = Pipe()
        holder.standardOutput = said
        try holder.run()
        #expect(String(decoding: said.fileHandleForReading.availableData, as: UTF8.self).hasPrefix("locked"))
        return holder
    }

    private func release(_ holder: Process) {
        kill(holder.processIdentifier, SIGKILL)
        holder.waitUntilExit()
    }

    /// The lock file held by another process (`flock FILE.lock pager run …`) is waited for,
    /// saying so, and the value is kept once it is free (the run hung for ever, silent).
    @Test func aHeldLock_isWaitedFor_sayingSo_thenTheValueIsKept() async throws {
        defer { cleanUp() }
        let holder = try holdLock(for: 5)
        defer { release(holder) }
        let result = try await pagerRun()
        #expect(result.code == 0, "\(result.stderr)")
        #expect(result.stderr.contains("incremental: waiting for the lock on \(stateFile).lock, which another process holds"), "\(result.stderr)")
        #expect(try kept() == "2024-01-01T00:00:12Z")
    }

    /// Interrupted while it waits for the lock, the run ends as an interrupted run does (it went
    /// on waiting, and after 10 s said a plugin call did not return).
    @Test func aRunInterruptedWhileWaitingForTheLock_endsAtOnce_keepingNothing() async throws {
        defer { cleanUp() }
        let holder = try holdLock(for: 60)
        defer { release(holder) }
        let pager = Process()
        pager.executableURL = URL(fileURLWithPath: pagerCommand)
        pager.arguments = ["run", manifest, "--refresh", "--append", "10"]
        let errors = Pipe()
        pager.standardError = errors
        pager.standardOutput = FileHandle.nullDevice
        try pager.run()
        var said = ""
        while !said.contains("waiting for the lock") {
            let more = errors.fileHandleForReading.availableData
            guard !more.isEmpty else { break }
            said += String(decoding: more, as: UTF8.self)
        }
        kill(pager.processIdentifier, SIGINT)
        let rest = errors.fileHandleForReading.readDataToEndOfFile()
        pager.waitUntilExit()
        said += String(decoding: rest, as: UTF8.self)
        #expect(pager.terminationStatus == 130, "\(said)")
        #expect(said.contains("not kept: the wait for its lock file \(stateFile).lock was interrupted"), "\(said)")
        #expect(!said.contains("did not end within"), "\(said)")
        #expect(!FileManager.default.fileExists(atPath: stateFile))
    }
}
