import FoundationEssentials
import Glibc
import Paging
import Synchronization

/// Incremental loading: the highest value of one field of the items loaded, kept between runs,
/// so that the next run asks only for what is new.
///
/// ```json
/// "incremental": { "cursor": "/updated_at", "state": "since", "initial": "2024-01-01T00:00:00Z" }
/// ```
///
/// Before a run, the value kept (or `initial`) is sent with every request as the user-info value
/// `state.NAME` (the http source reads it as `{state.NAME}` in its `url` and POST body) and
/// replaces `{state.NAME}` in the manifest's `user_info` values. During the run
/// ``IncrementalCursor`` keeps the highest value of `cursor` among the items loaded; after a run
/// in which every load succeeded, ``IncrementalStateFile`` writes it, if it is higher.
public struct IncrementalSettings: Sendable, Equatable {
    /// The JSON pointer into each item whose highest value is kept (`"/updated_at"`).
    public var cursor: String
    /// The name of the value: `{state.NAME}`, user-info key `state.NAME`.
    public var state: String
    /// The value before the first run (`""` by default).
    public var initial: IncrementalValue
    /// Values of different namespaces are kept apart in one state file (`"default"` by default).
    public var namespace: String
    /// The state file; by default the manifest's path followed by `.state`.
    public var stateFile: String

    public init(cursor: String, state: String, initial: IncrementalValue, namespace: String, stateFile: String) {
        self.cursor = cursor
        self.state = state
        self.initial = initial
        self.namespace = namespace
        self.stateFile = stateFile
    }

    /// The user-info key the value is sent under.
    public var userInfoKey: String { "state.\(state)" }
}

/// A value kept by incremental loading: a JSON string (compared byte by byte, as ISO 8601
/// timestamps of one format sort) or a JSON number (compared as numbers).
public enum IncrementalValue: Sendable, Equatable, CustomStringConvertible {
    case string(String)
    /// The number's JSON text, as the item had it, and its value.
    case number(String, Double)

    /// The text sent with requests: the string itself, or the number's JSON text.
    public var description: String {
        switch self {
        case .string(let text): text
        case .number(let text, _): text
        }
    }

    /// The value as JSON text: a string quoted and escaped (no control character shows), a
    /// number as it was written. How pager shows it.
    public var jsonText: String { json.jsonText }

    var json: JSONValue {
        switch self {
        case .string(let text): .string(text)
        // As it was written: as a Double, ids above 2^53 would be rounded.
        case .number(let text, _): JSONValue(number: text) ?? .string(text)
        }
    }

    /// A string or a number; nil for any other JSON value.
    package init?(_ value: JSONValue) {
        switch value {
        case .string(let text): self = .string(text)
        case .int(let number): self = .number(String(number), Double(number))
        // A whole number written with an exponent (1e2) is sent as an integer, as APIs that
        // expect one take it (it was sent as 100.0).
        case .double(let number) where number.rounded() == number && abs(number) < 0x1p53:
            self = .number(String(Int64(number)), number)
        case .double(let number): self = .number(JSONValue.double(number).jsonText, number)
        case .number(let text): self = .number(text, Double(text) ?? 0)
        default: return nil
        }
    }

    var kind: String {
        switch self {
        case .string: "a string"
        case .number: "a number"
        }
    }

    /// An integer's sign and digits (without leading zeros, as JSON writes them); nil for a
    /// fraction or an exponent.
    private static func integerDigits(_ text: String) -> (negative: Bool, digits: Substring)? {
        let negative = text.hasPrefix("-")
        let digits = text.dropFirst(negative ? 1 : 0)
        guard !digits.isEmpty, digits.utf8.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return (negative && digits != "0", digits)
    }

    /// `a > b` for integers of any length.
    private static func isHigher(_ a: (negative: Bool, digits: Substring), than b: (negative: Bool, digits: Substring)) -> Bool {
        guard a.negative == b.negative else { return b.negative }
        guard a.digits != b.digits else { return false }
        let larger = a.digits.count == b.digits.count ? a.digits > b.digits : a.digits.count > b.digits.count
        return a.negative ? !larger : larger
    }

    /// Whether `self` is higher than `other` of the same kind; nil when their kinds differ.
    package func isHigher(than other: IncrementalValue) -> Bool? {
        switch (self, other) {
        case let (.string(a), .string(b)): b.utf8.lexicographicallyPrecedes(a.utf8)
        case let (.number(a, x), .number(b, y)):
            // Integers exactly (ids above 2^53 differ where their Doubles do not).
            if let a = Self.integerDigits(a), let b = Self.integerDigits(b) { Self.isHigher(a, than: b) } else { x > y }
        default: nil
        }
    }
}

/// The tokens of an RFC 6901 JSON pointer (`""` has none), unescaped.
private func pointerTokens(_ pointer: String) -> [String] {
    pointer.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map { String($0.replacing("~1", with: "/").replacing("~0", with: "~")) }
}

/// A pointer token as an array index: decimal digits only.
private func arrayIndex(_ token: String) -> Int? {
    token.first == "+" || token.first == "-" ? nil : Int(token)
}

extension JSONValue {
    /// The value at an RFC 6901 JSON pointer (`""` is the value itself); nil when a member or
    /// index is missing.
    func at(pointer: String) -> JSONValue? {
        var value = self
        for token in pointerTokens(pointer) {
            switch value {
            case .object(let members):
                guard let member = members.last(where: { $0.key == token }) else { return nil }
                value = member.value
            case .array(let values):
                guard let index = arrayIndex(token), values.indices.contains(index) else { return nil }
                value = values[index]
            default:
                return nil
            }
        }
        return value
    }
}

/// Valid JSON as bytes, walked without building it: for the value at a pointer in a document
/// JSONValue does not read whole.
package struct JSONBytes {
    let bytes: [UInt8]

    package init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// The bytes of the value at an RFC 6901 pointer (the last of duplicate members, as
    /// ``JSONValue/at(pointer:)``); nil when a member or index is missing.
    package func value(at pointer: String) -> ArraySlice<UInt8>? {
        var start = space(from: 0)
        for token in pointerTokens(pointer) {
            guard start < bytes.count, let next = child(of: start, named: token) else { return nil }
            start = next
        }
        guard start < bytes.count else { return nil }
        return bytes[start..<end(of: start)]
    }

    /// Where the member `token` of the object at `start` (or its element, of an array) begins.
    private func child(of start: Int, named token: String) -> Int? {
        let object = bytes[start] == UInt8(ascii: "{")
        guard object || bytes[start] == UInt8(ascii: "[") else { return nil }
        let index = object ? nil : arrayIndex(token)
        if !object, index == nil { return nil }
        var i = space(from: start + 1), position = 0, found: Int?
        while i < bytes.count, bytes[i] != UInt8(ascii: object ? "}" : "]") {
            var name: String?
            if object {
                let nameEnd = end(of: i)
                if case .string(let text)? = try? JSONValue.parse(bytes[i..<nameEnd]) { name = text }
                i = space(from: space(from: nameEnd) + 1) // past the colon
            }
            if object ? name == token : position == index { found = i }
            i = space(from: end(of: i))
            if i < bytes.count, bytes[i] == UInt8(ascii: ",") { i = space(from: i + 1) }
            position += 1
        }
        return found
    }

    /// The index after the value that begins at `start`.
    private func end(of start: Int) -> Int {
        var i = start, depth = 0
        repeat {
            switch bytes[i] {
            case UInt8(ascii: "\""):
                i += 1
                while i < bytes.count, bytes[i] != UInt8(ascii: "\"") { i += bytes[i] == UInt8(ascii: "\\") ? 2 : 1 }
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            default:
                if depth == 0 {
                    while i < bytes.count, !Self.ends.contains(bytes[i]) { i += 1 }
                    return i
                }
            }
            i += 1
        } while depth > 0 && i < bytes.count
        return min(i, bytes.count)
    }

    private static let ends: Set<UInt8> = [UInt8(ascii: ","), UInt8(ascii: "}"), UInt8(ascii: "]"), 0x20, 0x09, 0x0A, 0x0D]

    private func space(from start: Int) -> Int {
        var i = start
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D { i += 1 }
        return i
    }
}

/// An in-process interceptor, placed first, that keeps the highest value of the cursor field
/// among the items of every page loaded. Items without the field (or with null there) are
/// passed over; a value that is not a string or a number, or whose kind differs from the
/// others', fails its page's load with an error naming the pointer.
///
/// # Thread safety
/// Pages may come back on any thread; the highest value is kept under a lock.
public final class IncrementalCursor: PagingInterceptor, Sendable {
    public typealias Key = PluginKey
    public typealias Value = PluginItem

    private let settings: IncrementalSettings
    private let highest: Mutex<IncrementalValue?>
    private let highestDelivered: Mutex<IncrementalValue?>
    private let counts = Mutex((items: 0, withValue: 0))

    /// The longest value kept, in bytes: a cursor is a timestamp, an id or a token; a longer
    /// one made a state file the next run refused, or URLs no server takes.
    public static let maxValueBytes = 4096

    /// Starts from `start` (the value the run's requests were sent with), so that the value
    /// kept never goes down.
    public init(_ settings: IncrementalSettings, start: IncrementalValue?) {
        self.settings = settings
        highest = Mutex(start)
        highestDelivered = Mutex(start)
    }

    /// The value at the cursor of `item`, nil when it has none. Items are valid JSON (the host
    /// checked them), but one may hold what JSONValue does not read, a number out of range or a
    /// lone surrogate: then only the value at the cursor is read, and fails the load when it is
    /// such a thing (passed over, it was lost in silence; elsewhere in the item, it is no matter).
    private func value(of item: PluginItem) throws(IncrementalError) -> JSONValue? {
        if let json = try? JSONValue.parse(item.bytes) { return json.at(pointer: settings.cursor) }
        guard let bytes = JSONBytes(item.bytes).value(at: settings.cursor) else { return nil }
        do {
            return try JSONValue.parse(bytes)
        } catch {
            throw IncrementalError("incremental.cursor \(settings.cursor): an item holds a value there that cannot be kept: \(error)")
        }
    }

    /// The highest value seen, or the start value.
    public var value: IncrementalValue? { highest.withLock { $0 } }

    /// The highest value among the items ``noteDelivered(_:)`` was told of, or the start value:
    /// the one to keep. A page loaded may never reach its reader (a refresh after appends
    /// replaces the pages appended before they are printed): keeping the highest value seen
    /// had the next run start after items no one received.
    public var deliveredValue: IncrementalValue? { highestDelivered.withLock { $0 } }

    /// Notes items that reached their reader.
    public func noteDelivered(_ items: some Sequence<PluginItem>) {
        // Their values were read, and refused if they could not be kept, when they loaded.
        guard let best = try? highest(of: items).value else { return }
        highestDelivered.withLock { kept in
            if let current = kept, best.isHigher(than: current) != true { return }
            kept = best
        }
    }

    /// The highest value at the cursor among `items`, and how many hold one.
    private func highest(of items: some Sequence<PluginItem>) throws(IncrementalError) -> (value: IncrementalValue?, withValue: Int) {
        var best: IncrementalValue?
        var withValue = 0
        for item in items {
            guard let found = try value(of: item), found != .null else { continue }
            guard let value = IncrementalValue(found) else {
                throw IncrementalError("incremental.cursor \(settings.cursor): an item holds \(found.kindDescription) there; expected a string or a number")
            }
            let length = value.description.utf8.count
            guard length <= Self.maxValueBytes else {
                throw IncrementalError("incremental.cursor \(settings.cursor): an item holds a value of \(length) bytes there; at most \(Self.maxValueBytes) are kept")
            }
            withValue += 1
            if let current = best {
                guard let higher = value.isHigher(than: current) else {
                    throw IncrementalError("incremental.cursor \(settings.cursor): items hold both strings and numbers there; expected one kind")
                }
                if higher { best = value }
            } else {
                best = value
            }
        }
        return (best, withValue)
    }

    /// The items of the pages seen, and how many of them held a value at `cursor`.
    public var seen: (items: Int, withValue: Int) { counts.withLock { $0 } }

    public func intercept(request: PagingRequest<PluginKey>) async throws -> PagingInterceptResult<PluginKey, PluginItem> {
        .proceed(request, handleAfterwards: true)
    }

    public func transform(page: Page<PluginKey, PluginItem>) async throws -> Page<PluginKey, PluginItem> {
        let (found, withValue) = try highest(of: page.values)
        counts.withLock { $0.items += page.values.count; $0.withValue += withValue }
        guard let best = found else { return page }
        try highest.withLock { (kept: inout IncrementalValue?) throws(IncrementalError) in
            guard let current = kept else {
                kept = best
                return
            }
            guard let higher = best.isHigher(than: current) else {
                throw IncrementalError("incremental.cursor \(settings.cursor): items hold \(best.kind) there, but earlier ones (or the value the run started from) "
                                       + "hold \(current.kind) (\(current)); expected one kind")
            }
            if higher { kept = best }
        }
        return page
    }
}

/// Why incremental loading failed a load, or could not read or write its state.
public struct IncrementalError: Error, Sendable, CustomStringConvertible {
    /// The state file, when the problem is with it.
    public let file: String?
    public let message: String

    public init(_ message: String, file: String? = nil) {
        self.message = message
        self.file = file
    }

    public var description: String { file.map { "incremental state file \($0): \(message)" } ?? message }
}

extension IncrementalSettings {
    /// The value the state file keeps for this namespace (nil before the first run). A state
    /// file that cannot be read or understood is bad input, named in the error.
    /// With `checkingWritable` (a run, which keeps a value), its folder must be one the run can
    /// write the file in: found out before the run loads anything, not after (it ended with
    /// every item loaded and exit 1).
    public func keptValue(checkingWritable: Bool = true, makingLock: Bool = true) throws(ManifestError) -> IncrementalValue? {
        do {
            let file = IncrementalStateFile(path: stateFile)
            if checkingWritable { try file.checkWritable(makingLock: makingLock) }
            return try file.values(namespace: namespace)[state]
        } catch {
            throw ManifestError(file: stateFile, path: nil, message: error.message)
        }
    }
}

/// The file that keeps the values of incremental loading: a JSON object of namespace to an
/// object of state name to value, `{"default": {"since": "2024-05-01T00:00:00Z"}}`.
///
/// It is written whole to a temporary file in the same folder, flushed and renamed over the old
/// one, so a crash leaves either the old or the new file; a writer holds a lock on
/// `FILE.lock` while it reads, merges its namespace and renames, so runs of other namespaces
/// keep theirs. A symbolic link is followed: the file it names is written (and locked), and the
/// link stays. A file that is not such an object is an error naming it, never ignored.
public struct IncrementalStateFile: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    /// The values kept for `namespace` (none when the file does not exist yet).
    public func values(namespace: String) throws(IncrementalError) -> [String: IncrementalValue] {
        try read()[namespace] ?? [:]
    }

    /// Sets `name` to `value` in `namespace`, keeping every other value of the file, unless
    /// the file holds a higher value there (another run of the namespace kept it meanwhile: the
    /// value never goes down). Returns the value the file then holds.
    ///
    /// Another process may hold the lock file (a run of another namespace, or `flock FILE.lock
    /// pager run …`, which would wait for itself): `waiting` is told once, and after
    /// `lockTimeout`, or once `givesUp` says so (the run was interrupted), the value is not kept.
    @discardableResult
    public func store(_ value: IncrementalValue, name: String, namespace: String, lockTimeout: Duration = .seconds(30),
                      waiting: (String) -> Void = { _ in }, givesUp: () -> Bool = { false }) throws(IncrementalError) -> IncrementalValue {
        let target = try target()
        let lockPath = target + ".lock"
        let lock = open(lockPath, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard lock >= 0 else { throw failure("cannot open its lock file \(lockPath): \(String(cString: strerror(errno)))") }
        defer { close(lock) }
        let deadline = ContinuousClock.now + lockTimeout
        var told = false
        while flock(lock, LOCK_EX | LOCK_NB) != 0 {
            guard errno == EWOULDBLOCK || errno == EINTR else { throw failure("cannot lock \(lockPath): \(String(cString: strerror(errno)))") }
            guard ContinuousClock.now < deadline else {
                throw failure("another process has held its lock file \(lockPath) for \(lockTimeout); the state is left as it was")
            }
            guard !givesUp() else { throw failure("not kept: the wait for its lock file \(lockPath) was interrupted") }
            if !told {
                waiting("waiting for the lock on \(lockPath), which another process holds")
                told = true
            }
            usleep(20_000)
        }
        var all = try read()
        if let kept = all[namespace]?[name], kept.isHigher(than: value) == true { return kept }
        all[namespace, default: [:]][name] = value
        let json = JSONValue.object(all.sorted { $0.key < $1.key }.map { namespace, values in
            (namespace, JSONValue.object(values.sorted { $0.key < $1.key }.map { ($0.key, $0.value.json) }))
        })
        try write(Array((json.jsonText + "\n").utf8), to: target)
        return value
    }

    /// Whether the file can be written (and its lock file made): its folder must exist and be
    /// writable by this process, and the file, and a temporary one a killed run left, ones it
    /// may replace. With `makingLock` (a run, which makes it anyway), the lock file is made now
    /// when it is not there; else (`validate`, perhaps as another user) only looked at.
    public func checkWritable(makingLock: Bool = true) throws(IncrementalError) {
        try checkWritable(makingLock: makingLock, user: geteuid())
    }

    /// ``checkWritable(makingLock:)`` for a process of `user`.
    package func checkWritable(makingLock: Bool, user: uid_t) throws(IncrementalError) {
        let file = try target()
        if let problem = Self.folderProblem(of: file) { throw failure(problem) }
        // Opened, or made, as a run does: a folder in its place, a link to where no file can be
        // made, or a folder no file can be made in whatever its permissions say (/sys), was
        // found only once the run had loaded every page.
        let lockPath = file + ".lock"
        var lock = open(lockPath, O_RDWR | O_CLOEXEC | (makingLock ? O_CREAT : 0), 0o644), openError = errno
        if lock < 0, !makingLock, openError == ENOENT {
            // Not there: a file of another name is made and removed where it would be, which
            // finds a folder no file can be made in (/sys) without leaving one (a lock file
            // made by `sudo pager validate` kept the user's runs out).
            let probe = try target(of: lockPath) + ".probe.\(getpid())"
            lock = open(probe, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
            openError = errno
            if lock >= 0 { unlink(probe) }
        }
        guard lock >= 0 else {
            let reason = openError == ENOENT ? "a link to where no file can be made" : String(cString: strerror(openError))
            throw failure("its lock file \(lockPath) cannot be opened or made by this process (a run locks it to keep the state): \(reason)")
        }
        close(lock)
        var folderInfo = stat(), fileInfo = stat()
        guard stat(Self.folder(of: file), &folderInfo) == 0 else { return }
        // The file renamed over, and a temporary one a stopped run left, which a run removes
        // (itself, when it is a link: lstat).
        for (path, what) in [(file, "it"), (file + ".tmp", "\(file).tmp, left by a run that was stopped,")]
        where lstat(path, &fileInfo) == 0 {
            if let problem = Self.replaceProblem(folder: folderInfo, file: fileInfo, user: user) { throw failure("\(what) \(problem)") }
        }
    }

    /// Why a process of `user` cannot rename a file over `file` in `folder`, or remove it: the
    /// folder's sticky bit (`/tmp`, a shared drop folder) keeps a file of another user to that
    /// user, the folder's owner and root. (The run found out once every item was printed.)
    package static func replaceProblem(folder: stat, file: stat, user: uid_t) -> String? {
        guard folder.st_mode & S_ISVTX != 0, user != 0, file.st_uid != user, folder.st_uid != user else { return nil }
        return "belongs to user \(file.st_uid), and the folder's sticky bit lets no other user replace it, as a run does to keep the state"
    }

    private static func folder(of file: String) -> String {
        file.lastIndex(of: "/").map { file[..<$0].isEmpty ? "/" : String(file[..<$0]) } ?? "."
    }

    /// Why no file can be made at `file`: its folder does not exist or cannot be written.
    private static func folderProblem(of file: String) -> String? {
        let folder = folder(of: file)
        var info = stat()
        guard stat(folder, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
            return "its folder \(folder) does not exist (a run keeps the state there)"
        }
        guard access(folder, W_OK) == 0 else {
            return "its folder \(folder) cannot be written by this process (a run keeps the state there)"
        }
        return nil
    }

    /// The file to write: `file` (the state file by default), or the file its symbolic links
    /// name (renamed over, a link would be replaced by a file of its own). A link to nowhere
    /// names the file to create.
    private func target(of file: String? = nil) throws(IncrementalError) -> String {
        var current = file ?? path
        for _ in 0..<40 {
            var info = stat()
            guard lstat(current, &info) == 0, info.st_mode & S_IFMT == S_IFLNK else { return current }
            var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
            let length = readlink(current, &buffer, buffer.count - 1)
            guard length > 0 else { throw failure("cannot read the symbolic link \(current): \(String(cString: strerror(errno)))") }
            let link = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let folder = current.lastIndex(of: "/").map { String(current[...$0]) } ?? ""
            current = link.hasPrefix("/") ? link : folder + link
        }
        throw failure("its symbolic links do not end (more than 40)")
    }

    private func failure(_ message: String) -> IncrementalError {
        IncrementalError(message, file: path)
    }

    private func read() throws(IncrementalError) -> [String: [String: IncrementalValue]] {
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        let bytes: [UInt8]
        do {
            bytes = try Manifest.readFile(path, kind: "state file", regularOnly: true)
        } catch {
            throw failure(error.message)
        }
        // An empty file (made by hand, say) holds no value yet.
        guard bytes.contains(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) else { return [:] }
        /// A file that is not state: it is never replaced, so that what it holds can be mended.
        func notState(_ problem: String) -> IncrementalError {
            failure("\(problem). Fix it, or remove it to start again from each state's initial value (`--full` ignores the value kept, not the file)")
        }
        let root: JSONValue
        do {
            root = try JSONValue.parse(bytes)
        } catch {
            throw notState("not valid JSON (\(error)); expected {\"NAMESPACE\": {\"NAME\": value}}")
        }
        guard case .object(let namespaces) = root else {
            throw notState("expected an object of namespaces, got \(root.kindDescription)")
        }
        // Which of the two values was meant cannot be known: the last one was taken, unsaid.
        if let repeated = root.repeatedKey(at: "") { throw notState("\(repeated): the key appears twice") }
        var all: [String: [String: IncrementalValue]] = [:]
        for (namespace, entry) in namespaces {
            guard case .object(let members) = entry else {
                throw notState("\(namespace): expected an object of state names to values, got \(entry.kindDescription)")
            }
            for (name, value) in members {
                guard let kept = IncrementalValue(value) else {
                    throw notState("\(namespace).\(name): expected a string or a number, got \(value.kindDescription)")
                }
                all[namespace, default: [:]][name] = kept
            }
        }
        return all
    }

    private func write(_ bytes: [UInt8], to path: String) throws(IncrementalError) {
        // One name, written under the lock: a run killed while it wrote left one file a pid
        // (FILE.tmp.PID) for good; the next run removes what such a run left.
        let temporary = "\(path).tmp"
        // A new file, never one that is there (a link planted in a shared folder would have
        // the state written through it); one left by a killed run is removed.
        func create() -> Int32 { open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o644) }
        var fd = create()
        if fd < 0, errno == EEXIST, unlink(temporary) == 0 { fd = create() }
        guard fd >= 0 else { throw failure("cannot create \(temporary): \(String(cString: strerror(errno)))") }
        // The file it replaces keeps its owner (when this process may give it: root) and its
        // permissions (a state file made private stays private).
        var old = stat()
        if stat(path, &old) == 0 {
            _ = fchown(fd, old.st_uid, old.st_gid)
            fchmod(fd, old.st_mode & 0o7777)
        }
        var error = bytes.withUnsafeBytes { writeAll(fd, $0) } ?? 0
        if error == 0, fsync(fd) != 0 { error = errno }
        close(fd)
        if error == 0, rename(temporary, path) != 0 { error = errno }
        if error != 0 {
            unlink(temporary)
            throw failure("cannot write it: \(String(cString: strerror(error)))")
        }
    }
}

extension Manifest {
    /// The manifest whose requests carry the value its state file keeps (or `initial`), for a
    /// command that loads but keeps nothing (`serve`, `browse`): unchanged without `incremental`.
    public func sendingKeptValue() throws(ManifestError) -> Manifest {
        guard let settings = incremental else { return self }
        return sending(try keptIncrementalValue(checkingWritable: false) ?? settings.initial)
    }

    /// ``IncrementalSettings/keptValue(checkingWritable:makingLock:)``, its error naming the manifest and
    /// `$.incremental.state_file` before the state file (it named only the file: "/tmp: is a
    /// folder, expected a state file").
    public func keptIncrementalValue(checkingWritable: Bool = true, makingLock: Bool = true) throws(ManifestError) -> IncrementalValue? {
        guard let settings = incremental else { return nil }
        do {
            return try settings.keptValue(checkingWritable: checkingWritable, makingLock: makingLock)
        } catch {
            throw ManifestError(file: file, path: "$.incremental.state_file", message: error.text, isTransient: error.isTransient)
        }
    }

    /// The manifest whose requests carry `value` as the user-info value `state.NAME`, with
    /// `{state.NAME}` in its `user_info` values replaced by it (unchanged without `incremental`).
    public func sending(_ value: IncrementalValue) -> Manifest {
        guard let incremental else { return self }
        var copy = self
        let text = value.description
        copy.userInfo = userInfo.mapValues { $0.replacing("{state.\(incremental.state)}", with: text) }
        copy.userInfo[incremental.userInfoKey] = text
        return copy
    }
}
