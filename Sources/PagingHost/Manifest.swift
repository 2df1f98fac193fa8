import FoundationEssentials
import Glibc
import Paging

/// A pipeline described in JSON: one source, an ordered list of interceptors, and the settings
/// of the requests that run through them.
///
/// ```json
/// {
///   "source": { "plugin": "jsonlines", "config": { "path": "repos.jsonl" } },
///   "interceptors": [
///     { "plugin": "logging", "config": { "level": "info" } },
///     { "plugin": "./plugins/libcounter.so", "sha256": "9f2c…" }
///   ],
///   "page_size": 20,
///   "retry": { "max_retries": 3, "initial_backoff_ms": 200 },
///   "timeout_ms": 10000
/// }
/// ```
///
/// Unknown keys are errors, and every error names the file, the JSON path and what was expected.
public struct Manifest: Sendable {
    /// One plugin of the pipeline.
    public struct PluginReference: Sendable {
        /// A name (`lib<name>.so` on the search path) or a path to a `.so` (relative to the manifest).
        public var plugin: String
        /// Which plugin of the library; needed only when it holds several of this kind.
        public var id: String?
        /// The library's expected SHA-256, in hex; a mismatch refuses it.
        public var sha256: String?
        /// The plugin's `config` object.
        public var config: JSONValue
        /// Where the reference stands in the manifest, e.g. `$.interceptors[1]`.
        public var jsonPath: String
        /// Where the plugin runs (`"isolation"`: `"none"`, the default, or `"process"`).
        public var isolation: PluginIsolationMode = .none
    }

    /// The manifest's file, as given.
    public var file: String
    public var source: PluginReference
    public var interceptors: [PluginReference]
    /// The most interceptors a manifest's chain may hold.
    public static let maxInterceptors = 256
    public var pageSize: Int
    public var retryPolicy: RetryPolicy
    public var fetchTimeout: Duration
    /// How long an interceptor's call or the source's fetch() may take (see
    /// ``PluginLimits/callTimeout``); `nil` runs
    /// calls on the caller's thread.
    public var callTimeout: Duration?
    /// How messages name where ``callTimeout`` comes from (``PluginLimits/callTimeoutOrigin``).
    public var callTimeoutOrigin = "call_timeout_ms"
    public var maxSize: Int?
    public var prefetchDistance: Int
    public var maxItemsPerPage: Int
    /// A page of more bytes (its items together) fails its load.
    public var maxPageBytes: Int
    /// Sent with every request (a query, for instance).
    public var userInfo: [String: String]
    /// The user info a client of `pager serve` may set with query parameters of these names.
    public var serveParams: [String] = []
    /// Incremental loading (`"incremental"`): the field whose highest value is kept between
    /// runs and sent with the next run's requests; nil when the manifest has none.
    public var incremental: IncrementalSettings?

    /// The folder relative paths resolve against: the manifest's, made absolute when it was
    /// read (resolved later, a relative manifest path followed a plugin's chdir() in its create:
    /// the plugins after it were looked for, and their files made, elsewhere).
    public private(set) var folder = ""

    /// Reads and checks the manifest at `path`.
    public static func load(path: String) throws(ManifestError) -> Manifest {
        let bytes = try readFile(path)
        return try parse(bytes, file: path)
    }

    /// The bytes of a serve_params name.
    private static let serveParamBytes = Set(Array("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-".utf8))

    /// Checks a manifest's text; `file` names it in errors and anchors relative paths.
    public static func parse(_ bytes: [UInt8], file: String) throws(ManifestError) -> Manifest {
        let root: JSONValue
        do {
            root = try JSONValue.parse(bytes)
        } catch {
            throw ManifestError(file: file, path: "$", message: "malformed JSON: \(error)")
        }
        let reader = Reader(file: file)
        let top = JSONValue.object(try reader.object(root, at: "$", allowed: [
            "source", "interceptors", "page_size", "retry", "timeout_ms", "max_size",
            "prefetch_distance", "max_items_per_page", "max_page_bytes", "call_timeout_ms", "user_info", "serve_params",
            "incremental",
        ]))
        guard let sourceValue = top["source"] else {
            throw ManifestError(file: file, path: "$.source", message: "missing; expected the source plugin, an object with \"plugin\"")
        }
        let source = try reader.plugin(sourceValue, at: "$.source")
        var interceptors: [PluginReference] = []
        if let list = top["interceptors"] {
            guard case .array(let values) = list else { throw reader.expected("an array of plugin objects", list, at: "$.interceptors") }
            // Each is a library to load and a plugin to create: 300,000 of them took minutes
            // without a word.
            guard values.count <= Self.maxInterceptors else {
                throw ManifestError(file: file, path: "$.interceptors",
                                    message: "\(values.count) interceptors; at most \(Self.maxInterceptors) make a chain")
            }
            for (index, value) in values.enumerated() {
                interceptors.append(try reader.plugin(value, at: "$.interceptors[\(index)]"))
            }
        }
        let pageSize = try reader.int(top["page_size"], at: "$.page_size", in: 1...100_000) ?? 20
        let timeoutMs = try reader.int(top["timeout_ms"], at: "$.timeout_ms", in: 1...86_400_000) ?? 30_000
        let maxSize = try reader.int(top["max_size"], at: "$.max_size", in: pageSize...Int(Int32.max))
        let prefetch = try reader.int(top["prefetch_distance"], at: "$.prefetch_distance", in: 0...100_000) ?? 0
        // Fewer than a page: every full page would fail (found by a probe).
        let maxItems = try reader.int(top["max_items_per_page"], at: "$.max_items_per_page", in: pageSize...10_000_000) ?? 100_000
        let callTimeoutMs = try reader.int(top["call_timeout_ms"], at: "$.call_timeout_ms", in: 1...86_400_000)
        let maxBytes = try reader.int(top["max_page_bytes"], at: "$.max_page_bytes", in: 1...(4 << 30)) ?? (256 << 20)
        var userInfo: [String: String] = [:]
        if let info = top["user_info"] {
            for (key, value) in try reader.object(info, at: "$.user_info", allowed: nil) {
                // No placeholder can name it ({param.}), and a plugin reads it as no parameter.
                guard !key.isEmpty else {
                    throw ManifestError(file: file, path: "$.user_info", message: "a parameter with an empty name; each needs one")
                }
                guard key != PagingUserInfoKey.hardRefresh else {
                    throw ManifestError(file: file, path: "$.user_info.\(key)", message: "a hard refresh replaces what every store and cache holds "
                                        + "on each refresh, so it is asked for on the command line only: use `pager run --hard-refresh`")
                }
                guard key != PagingUserInfoKey.reload else {
                    throw ManifestError(file: file, path: "$.user_info.\(key)", message: "'reload' marks a short page loaded again, "
                                        + "which the pager sets itself: every request would pass the caches and stores")
                }
                guard case .string(let text) = value else { throw reader.expected("a string", value, at: "$.user_info.\(key)") }
                userInfo[key] = text
            }
        }
        var serveParams: [String] = []
        if let params = top["serve_params"] {
            guard case .array(let values) = params else { throw reader.expected("an array of parameter names", params, at: "$.serve_params") }
            for (index, value) in values.enumerated() {
                let path = "$.serve_params[\(index)]"
                guard case .string(let name) = value, !name.isEmpty, name.utf8.count <= 64 else {
                    throw reader.expected("a parameter name of 1 to 64 bytes", value, at: path)
                }
                // Letters, digits and "._~-" (what a query carries as it is): a name no request
                // could send, or one with a control character, would be listed to clients.
                guard name.utf8.allSatisfy({ Self.serveParamBytes.contains($0) }) else {
                    throw ManifestError(file: file, path: path, message: "expected a parameter name of letters, digits and . _ ~ -, got \(value.jsonText)")
                }
                // state.NAME is incremental loading's value: not a client's to set.
                guard name != "cursor", name != PagingUserInfoKey.hardRefresh, name != PagingUserInfoKey.reload, !name.hasPrefix("state.") else {
                    throw ManifestError(file: file, path: path, message: "'\(name)' cannot be set by a client")
                }
                if let first = serveParams.firstIndex(of: name) {
                    throw ManifestError(file: file, path: path, message: "'\(name)' is listed already, at $.serve_params[\(first)]")
                }
                serveParams.append(name)
            }
        }
        var manifest = Manifest(
            file: file, source: source, interceptors: interceptors, pageSize: pageSize,
            retryPolicy: try top["retry"].map { value throws(ManifestError) in try reader.retry(value, at: "$.retry") } ?? .none,
            fetchTimeout: .milliseconds(timeoutMs), callTimeout: callTimeoutMs.map { .milliseconds($0) }, maxSize: maxSize, prefetchDistance: prefetch,
            maxItemsPerPage: maxItems, maxPageBytes: maxBytes, userInfo: userInfo)
        manifest.folder = reader.folder
        manifest.serveParams = serveParams
        manifest.incremental = try top["incremental"].map { value throws(ManifestError) in try reader.incremental(value, at: "$.incremental") }
        try reader.checkStateNames(source.config, declared: manifest.incremental?.state, at: "\(source.jsonPath).config")
        try reader.checkStateNames(top["user_info"] ?? .null, declared: manifest.incremental?.state, at: "$.user_info")
        // Replaced by each run without a word (a probe).
        if let key = manifest.incremental?.userInfoKey, userInfo[key] != nil {
            throw ManifestError(file: file, path: "$.user_info.\(key)", message: "'\(key)' is incremental loading's value, which each run sets")
        }
        return manifest
    }

    /// Reads a whole file, with an error for each way it can fail.
    /// The bytes of a manifest (or, as `kind`, another file: "state file"), at most 16 MiB. A
    /// FIFO is read as it is written (`pager run <(...)`) and one without a writer reads as
    /// empty, never waited on; `regularOnly` refuses anything but a regular file.
    public static func readFile(_ path: String, kind: String = "manifest", regularOnly: Bool = false) throws(ManifestError) -> [UInt8] {
        func failure(_ message: String) -> ManifestError { ManifestError(file: path, path: nil, message: message) }
        let file = kind == "manifest" ? "manifest file" : kind
        // The error would begin ": " (no name to give): say what is missing.
        guard !path.isEmpty else { throw ManifestError(file: "(empty path)", path: nil, message: "expected the path of a \(file)") }
        // Opened without blocking: opening a FIFO waits for a writer otherwise.
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw failure(String(cString: strerror(errno))) }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(String(cString: strerror(errno))) }
        let type = info.st_mode & S_IFMT
        if type == S_IFDIR { throw failure("is a folder, expected a \(file)") }
        if type != S_IFREG, regularOnly || type != S_IFIFO {
            throw failure("is \(type == S_IFIFO ? "a FIFO" : type == S_IFSOCK ? "a socket" : "a device"), expected a regular \(file)")
        }
        guard info.st_size <= 16 << 20 else { throw failure("is \(info.st_size) bytes; a \(kind) is at most 16 MiB") }
        // A FIFO's reads then wait for its writer (one with no writer left reads as its end;
        // so does one no writer has opened yet, which is said: it is never waited for).
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let count = read(fd, &buffer, buffer.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw failure(String(cString: strerror(errno)))
            }
            if count == 0 {
                if bytes.isEmpty, type == S_IFIFO { throw failure("is a FIFO that nothing wrote to (a writer must be there first)") }
                return bytes
            }
            bytes.append(contentsOf: buffer[..<count])
            if bytes.count > 16 << 20 { throw failure("is larger than 16 MiB; a \(kind) is at most 16 MiB") }
        }
    }
}

/// Where a manifest's plugin runs.
public enum PluginIsolationMode: String, Sendable {
    /// In the host's process: fastest, but a crash there ends the host.
    case none
    /// In a child process of its own (see ``IsolatedSource``, ``IsolatedInterceptor``).
    case process
}

/// What is wrong with a manifest: the file, the JSON path (when the problem is inside it) and
/// what was expected.
public struct ManifestError: Error, Sendable, Equatable, CustomStringConvertible {
    public let file: String
    public let path: String?
    public let message: String
    /// The manifest is sound, but a plugin could not start for now: its create failed as
    /// TRANSIENT (a database another process holds locked, say). Trying again later may
    /// succeed. (A create the host timed out is the plugin's fault: bad input.)
    public let isTransient: Bool

    public init(file: String, path: String?, message: String, isTransient: Bool = false) {
        self.file = file
        self.path = path
        self.message = message
        self.isTransient = isTransient
    }

    /// One line, whatever the manifest holds: control characters (a key or a plugin name with an
    /// escaped newline, a plugin's multi-line message, ESC) are written as escapes (`\n`,
    /// `\u001b`), in time linear in the text's length.
    public var description: String { OneLine.escape(text) }

    /// The description as it is, before its control characters are escaped.
    package var text: String { path.map { "\(file): \($0): \(message)" } ?? "\(file): \(message)" }
}

/// Checks values against what the manifest expects, naming the path in every error.
private struct Reader {
    let file: String
    /// The manifest's folder, absolute (resolved against the working folder once, here).
    let folder: String

    init(file: String) {
        self.file = file
        folder = URL(fileURLWithPath: file).deletingLastPathComponent().standardizedFileURL.path
    }

    func expected(_ what: String, _ value: JSONValue, at path: String) -> ManifestError {
        ManifestError(file: file, path: path, message: "expected \(what), got \(value.kindDescription)")
    }

    func object(_ value: JSONValue, at path: String, allowed: Set<String>?) throws(ManifestError) -> [(key: String, value: JSONValue)] {
        guard case .object(let members) = value else { throw expected("an object", value, at: path) }
        var seen: Set<String> = []
        for member in members {
            if let allowed, !allowed.contains(member.key) {
                throw ManifestError(file: file, path: "\(path).\(member.key)",
                                    message: "unknown key; expected one of \(allowed.sorted().joined(separator: ", "))")
            }
            guard seen.insert(member.key).inserted else {
                throw ManifestError(file: file, path: "\(path).\(member.key)", message: "the key appears twice")
            }
        }
        return members
    }

    /// Refuses an object, anywhere in `value`, with a key twice.
    func noRepeatedKeys(_ value: JSONValue, at path: String) throws(ManifestError) {
        if let repeated = value.repeatedKey(at: path) { throw ManifestError(file: file, path: repeated, message: "the key appears twice") }
    }

    func int(_ value: JSONValue?, at path: String, in range: ClosedRange<Int>) throws(ManifestError) -> Int? {
        guard let value else { return nil }
        if case .number(let text) = value, !text.contains(where: { ".eE".contains($0) }) {
            throw ManifestError(file: file, path: path, message: "\(text) is out of range; expected \(range.lowerBound) to \(range.upperBound)")
        }
        guard case .int(let number) = value else { throw expected("an integer", value, at: path) }
        guard let result = Int(exactly: number), range.contains(result) else {
            throw ManifestError(file: file, path: path, message: "\(number) is out of range; expected \(range.lowerBound) to \(range.upperBound)")
        }
        return result
    }

    func number(_ value: JSONValue?, at path: String, in range: ClosedRange<Double>) throws(ManifestError) -> Double? {
        guard let value else { return nil }
        guard let number = value.doubleValue else { throw expected("a number", value, at: path) }
        guard range.contains(number) else {
            throw ManifestError(file: file, path: path, message: "\(number) is out of range; expected \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    func string(_ value: JSONValue?, at path: String) throws(ManifestError) -> String? {
        guard let value else { return nil }
        guard case .string(let text) = value else { throw expected("a string", value, at: path) }
        return text
    }

    func plugin(_ value: JSONValue, at path: String) throws(ManifestError) -> Manifest.PluginReference {
        let members = try object(value, at: path, allowed: ["plugin", "id", "sha256", "config", "isolation"])
        func member(_ key: String) -> JSONValue? { members.first { $0.key == key }?.value }
        guard let plugin = try string(member("plugin"), at: "\(path).plugin") else {
            throw ManifestError(file: file, path: "\(path).plugin", message: "missing; expected a plugin name or a path to a .so")
        }
        guard !plugin.isEmpty else {
            throw ManifestError(file: file, path: "\(path).plugin", message: "empty; expected a plugin name or a path to a .so")
        }
        let sha256 = try string(member("sha256"), at: "\(path).sha256")
        if let sha256, sha256.count != 64 || !sha256.allSatisfy(\.isHexDigit) {
            throw ManifestError(file: file, path: "\(path).sha256", message: "expected 64 hex digits, got \"\(sha256)\"")
        }
        let config = member("config") ?? .object([])
        guard case .object(let settings) = config else { throw expected("an object", config, at: "\(path).config") }
        // A plugin reading its config may take either of two equal keys: neither is meant.
        try noRepeatedKeys(config, at: "\(path).config")
        let id = try string(member("id"), at: "\(path).id")
        try noNUL(plugin, at: "\(path).plugin")
        try noNUL(id, at: "\(path).id")
        // A plugin reads its top-level config strings as C strings (config_string).
        for setting in settings {
            guard case .string(let text) = setting.value else { continue }
            try noNUL(text, at: "\(path).config.\(setting.key)")
        }
        var isolation = PluginIsolationMode.none
        if let mode = try string(member("isolation"), at: "\(path).isolation") {
            guard let known = PluginIsolationMode(rawValue: mode) else {
                throw ManifestError(file: file, path: "\(path).isolation", message: "expected \"process\" or \"none\", got \"\(mode)\"")
            }
            isolation = known
        }
        return Manifest.PluginReference(plugin: plugin, id: id, sha256: sha256?.lowercased(), config: config, jsonPath: path,
                                        isolation: isolation)
    }

    /// Refuses a string that becomes a C string when it holds U+0000: the C string would end
    /// there, and a shorter value (another file's path) would be used.
    func noNUL(_ text: String?, at path: String) throws(ManifestError) {
        guard let text, text.utf8.contains(0) else { return }
        throw ManifestError(file: file, path: path, message: "a string with a NUL character (U+0000) cannot reach a plugin")
    }

    func incremental(_ value: JSONValue, at path: String) throws(ManifestError) -> IncrementalSettings {
        let members = try object(value, at: path, allowed: ["cursor", "state", "initial", "namespace", "state_file"])
        func member(_ key: String) -> JSONValue? { members.first { $0.key == key }?.value }
        guard let cursor = try string(member("cursor"), at: "\(path).cursor") else {
            throw ManifestError(file: file, path: "\(path).cursor", message: "missing; expected a JSON pointer to the field of each item whose highest value is kept, such as \"/updated_at\"")
        }
        guard cursor.isEmpty || cursor.hasPrefix("/") else {
            throw ManifestError(file: file, path: "\(path).cursor", message: "expected a JSON pointer (\"/updated_at\"), got \"\(cursor)\"")
        }
        // RFC 6901: "~0" is "~" and "~1" is "/"; any other "~" names no member (a pointer that
        // matched nothing, run after run, without a word at validate).
        let bytes = Array(cursor.utf8)
        if let tilde = bytes.indices.first(where: { bytes[$0] == UInt8(ascii: "~") && !(bytes.indices.contains($0 + 1) && (bytes[$0 + 1] == UInt8(ascii: "0") || bytes[$0 + 1] == UInt8(ascii: "1"))) }) {
            throw ManifestError(file: file, path: "\(path).cursor",
                                message: "\"\(cursor)\" is not a JSON pointer: the \"~\" at byte \(tilde) must be followed by 0 or 1 (~0 is ~, ~1 is /)")
        }
        let state = try string(member("state"), at: "\(path).state") ?? "since"
        guard !state.isEmpty, state.utf8.count <= 64, state.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }) else {
            throw ManifestError(file: file, path: "\(path).state", message: "expected a name of 1 to 64 letters, digits or _, used as {state.NAME}; got \"\(state)\"")
        }
        var initial = IncrementalValue.string("")
        if let value = member("initial") {
            guard let known = IncrementalValue(value) else { throw expected("a string or a number (the value before the first run)", value, at: "\(path).initial") }
            initial = known
        }
        let namespace = try string(member("namespace"), at: "\(path).namespace") ?? "default"
        guard !namespace.isEmpty, namespace.utf8.count <= 128 else {
            throw ManifestError(file: file, path: "\(path).namespace", message: "expected a name of 1 to 128 bytes")
        }
        var stateFile = URL(fileURLWithPath: folder).appendingPathComponent(URL(fileURLWithPath: file).lastPathComponent).path + ".state"
        if let given = try string(member("state_file"), at: "\(path).state_file") {
            guard !given.isEmpty else { throw ManifestError(file: file, path: "\(path).state_file", message: "empty; expected a file path") }
            try noNUL(given, at: "\(path).state_file")
            stateFile = given.hasPrefix("/") ? given : URL(fileURLWithPath: folder).appendingPathComponent(given).standardizedFileURL.path
        }
        return IncrementalSettings(cursor: cursor, state: state, initial: initial, namespace: namespace, stateFile: stateFile)
    }

    /// Refuses a `{state.NAME}` in any string under `value` whose NAME the manifest's
    /// `incremental` does not declare (it would be sent empty).
    func checkStateNames(_ value: JSONValue, declared: String?, at path: String) throws(ManifestError) {
        switch value {
        case .string(let text):
            var rest = Substring(text)
            while let open = rest.firstRange(of: "{state.") {
                let tail = rest[open.upperBound...]
                let name = tail.prefix { $0 != "}" }
                if declared.map({ name != $0 }) ?? true {
                    throw ManifestError(file: file, path: path, message: declared.map { "{state.\(name)} is not kept: the manifest's incremental.state is \"\($0)\"" }
                                        ?? "{state.\(name)} needs the manifest's \"incremental\" object, which keeps that value between runs")
                }
                rest = tail.dropFirst(name.count)
            }
        case .array(let values):
            for (index, element) in values.enumerated() { try checkStateNames(element, declared: declared, at: "\(path)[\(index)]") }
        case .object(let members):
            for member in members { try checkStateNames(member.value, declared: declared, at: "\(path).\(member.key)") }
        default:
            break
        }
    }

    func retry(_ value: JSONValue, at path: String) throws(ManifestError) -> RetryPolicy {
        let members = try object(value, at: path, allowed: ["max_retries", "initial_backoff_ms", "max_backoff_ms", "multiplier", "jitter"])
        func member(_ key: String) -> JSONValue? { members.first { $0.key == key }?.value }
        let maxRetries = try int(member("max_retries"), at: "\(path).max_retries", in: 0...100) ?? 3
        let initial = try int(member("initial_backoff_ms"), at: "\(path).initial_backoff_ms", in: 0...3_600_000) ?? 200
        let maximum = try int(member("max_backoff_ms"), at: "\(path).max_backoff_ms", in: initial...3_600_000) ?? max(initial, 30_000)
        let multiplier = try number(member("multiplier"), at: "\(path).multiplier", in: 1...100) ?? 2
        let jitter = try number(member("jitter"), at: "\(path).jitter", in: 0...1) ?? 0.2
        return RetryPolicy(maxRetries: maxRetries, backoff: RetryPolicy.Backoff(
            initial: .milliseconds(initial), multiplier: multiplier, maximum: .milliseconds(maximum), jitter: jitter))
    }
}
