// The http source's configuration: parsing and validating the plugin's `config` object, the
// URL template, and the headers (${NAME} from the environment, ${file:PATH} from a file).
//
// The reference of every key is in the README ("Shipped plugins"); HTTPSourceOptions.swift
// holds the options beyond URL, items and pagination.
import FoundationEssentials
import Glibc
import CPaging
import PagingPluginKit

/// How keys work: what the key of a page is, and how its neighbours are found.
enum Pagination: Sendable, Equatable {
    /// Keys are page numbers (decimal text) from `first`.
    case page(first: Int)
    /// Keys are item offsets (decimal text) from `first`.
    case offset(first: Int)
    /// Keys are cursors read from the body at the `next` (and optionally `prev`) pointers.
    case cursor(next: JSONPointer, prev: JSONPointer?, first: String)
    /// Keys are URLs from the Link header; "" stands for the `url` template.
    case link
    /// Keys are URLs read from the body at the `next` pointer; "" stands for the `url` template.
    case nextURL(next: JSONPointer)
    /// Keys are read from the response header `next` (GitLab's X-Next-Page); "" is none.
    case header(next: String, first: String)

    var typeName: String {
        switch self {
        case .page: "page"
        case .offset: "offset"
        case .cursor: "cursor"
        case .link: "link"
        case .nextURL: "next_url"
        case .header: "header"
        }
    }

    /// What a page lacks when it has no next key, for a message.
    var nextKeyMissing: String {
        switch self {
        case .page, .offset: "the page has no next key"
        case .cursor(let next, _, _): "there is no cursor at \(next) (missing, null or \"\")"
        case .link: "there is no Link rel=\"next\""
        case .nextURL(let next): "there is no next URL at \(next) (missing, null or \"\")"
        case .header(let name, _): "there is no \(name) header (or it is empty)"
        }
    }

    /// Keys are URLs (fetched as they are), not values for the template.
    var keysAreURLs: Bool {
        switch self {
        case .link, .nextURL: true
        default: false
        }
    }
}

/// The `url` template, split once at create time into literal text and placeholders.
struct URLTemplate: Sendable {
    enum Part: Sendable, Equatable {
        case literal(String)
        case key
        case pageSize
        case offset
        case param(String)
    }

    let text: String
    let parts: [Part]

    /// Parses `text`; throws a config error naming `url` for an unknown or unterminated
    /// placeholder, or a `${NAME}` whose variable is unset. A secret's value is inserted as
    /// written (it may hold any part of the URL) and added to `secrets`.
    init(_ text: String, environment: [String: String] = [:], secrets: inout [NamedSecret]) throws(PluginFailure) {
        self.text = text
        var parts: [Part] = []
        var literal = ""
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "{") {
            literal += rest[..<open]
            if literal.hasSuffix("$"), let close = rest[open...].firstIndex(of: "}") {
                literal.removeLast()
                let reference = "$" + rest[open...close]
                switch try expandEnvironment(reference, key: "url", environment: environment, secrets: &secrets) {
                case .value(let value):
                    literal += value
                case .missing(let variable):
                    throw .invalidConfig("url: environment variable \(variable) is not set (or empty); the url needs it")
                }
                rest = rest[rest.index(after: close)...]
                continue
            }
            guard let close = rest[open...].firstIndex(of: "}") else {
                throw .invalidConfig("url: unterminated placeholder at \"\(rest[open...])\"; expected {key}, {pageSize}, {offset}, {param.NAME} or {state.NAME}")
            }
            let name = rest[rest.index(after: open)..<close]
            let part: Part
            switch name {
            case "key": part = .key
            case "pageSize": part = .pageSize
            case "offset": part = .offset
            default:
                if name.hasPrefix("state."), name.count > 6 {
                    // The value incremental loading keeps, sent as the user-info value state.NAME.
                    part = .param(String(name))
                    break
                }
                guard name.hasPrefix("param."), name.count > 6 else {
                    throw .invalidConfig("url: unknown placeholder {\(name)}; expected {key}, {pageSize}, {offset}, {param.NAME} or {state.NAME}")
                }
                part = .param(String(name.dropFirst(6)))
            }
            if !literal.isEmpty { parts.append(.literal(literal)) }
            literal = ""
            parts.append(part)
            rest = rest[rest.index(after: close)...]
        }
        literal += rest
        if !literal.isEmpty { parts.append(.literal(literal)) }
        self.parts = parts
    }

    var usesOffset: Bool { parts.contains(.offset) }

    /// The first placeholder in the path whose value is "." or "..": percent-encoding leaves
    /// dots as they are, and such a segment would take the request, and its credentials, to
    /// another path of the host ({param.NAME} may come from any client of `pager serve`).
    func dotSegment(key: String, params: [String: String]) -> (placeholder: String, value: String)? {
        func isDots(_ value: String?) -> Bool { value == "." || value == ".." }
        for part in parts {
            switch part {
            case .literal(let text) where text.hasUTF8("?") || text.hasUTF8("#"):
                return nil
            case .key where isDots(key):
                return ("{key}", key)
            case .param(let name) where isDots(params[name]):
                return (name.hasPrefix("state.") ? "{\(name)}" : "{param.\(name)}", params[name]!)
            default:
                continue
            }
        }
        return nil
    }

    /// The {param.NAME} and {state.NAME} placeholders (as written) whose value `params` lacks:
    /// ``expand(key:pageSize:offset:params:)`` leaves them empty.
    func unsetParams(_ params: [String: String]) -> [String] {
        parts.compactMap { part in
            guard case .param(let name) = part, params[name] == nil else { return nil }
            return name.hasPrefix("state.") ? "{\(name)}" : "{param.\(name)}"
        }
    }

    /// The template with its placeholders filled in; `key` and params are percent-encoded.
    func expand(key: String, pageSize: Int, offset: Int?, params: [String: String]) -> String {
        var out = ""
        for part in parts {
            switch part {
            case .literal(let text): out += text
            case .key: out += percentEncode(key)
            case .pageSize: out += String(pageSize)
            case .offset: out += offset.map(String.init) ?? ""
            case .param(let name): out += percentEncode(params[name] ?? "")
            }
        }
        return out
    }
}

/// `text` with `reference` replaced by `value`, and its percent-encoded forms (a key that the
/// url's {key} encoded, a secret a server echoed encoded once or more: see
/// ``EncodedSecret/deepestEncoding``) by `value` encoded as many times.
func fillingIn(_ text: String, reference: String, with value: String) -> String {
    var out = text
    if out.hasUTF8("${") { out = out.replacing(reference, with: value) }
    // Encoded n times, a reference starts with "%", n - 1 times "25", then "24" (its "$").
    guard out.hasUTF8("%24") || out.hasUTF8("%25") else { return out }
    var (encodedReference, encodedValue, percents) = (reference, value, "%")
    for _ in 0..<EncodedSecret.deepestEncoding where out.contains(percents) {
        (encodedReference, encodedValue) = (percentEncode(encodedReference), percentEncode(encodedValue))
        if out.contains(percents + "24") { out = out.replacing(encodedReference, with: encodedValue) }
        percents += "25"
    }
    return out
}

/// Percent-encodes everything but RFC 3986's unreserved characters (a space becomes %20).
func percentEncode(_ text: String) -> String {
    var out = ""
    out.reserveCapacity(text.utf8.count)
    for byte in text.utf8 {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."),
             UInt8(ascii: "_"), UInt8(ascii: "~"):
            out.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            let hex = Array("0123456789ABCDEF".utf8)
            out.unicodeScalars.append("%")
            out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
            out.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0xF)]))
        }
    }
    return out
}

/// The validated configuration of one instance.
struct HTTPSourceConfig: Sendable {
    static let keys = ["url", "items", "pagination", "headers", "timeout_ms", "max_page_bytes", "max_header_bytes", "allowed_hosts"] + optionKeys

    var url: URLTemplate
    var items: JSONPointer
    var pagination: Pagination
    /// Final header values (environment expanded, defaults added), in a stable order.
    var headers: [(name: String, value: String)]
    var timeoutMilliseconds: Int
    /// The most body bytes (after decompression) read from one response.
    var maxPageBytes: Int
    /// The most header bytes read from one response.
    var maxHeaderBytes: Int
    /// The scheme, host and port of `url`: configured headers go there (and to an https
    /// upgrade of an http `url` on the default ports), not to another port of the same host.
    var origin: URLParts
    /// `allowed_hosts`: hosts (any port) and "host:port" pairs configured headers go to too.
    var allowedHosts: Set<String>
    /// Lines to log once the instance exists (e.g. a header omitted for a missing variable).
    var warnings: [String] = []
    /// Values that came from the environment or a file (and basic auth's encoded credentials),
    /// longest first: redacted from every message (those of at least ``shortestRedacted``
    /// bytes); a default header holding one goes to trusted hosts only.
    var secrets: [String] = []
    /// The values that came from the environment or a file, each with the `${...}` naming it,
    /// and basic auth's encoded credentials (`${basic:credentials}`, and its other base64 forms).
    var namedSecrets: [NamedSecret] = []
    /// Those that keys hide: long enough to redact (hiding "1" would rewrite every 1 of a
    /// link), one a value, longest first.
    private(set) var keySecrets: [NamedSecret] = []
    /// The secrets redacted from messages (those of at least ``shortestRedacted`` bytes),
    /// longest first, found however a server wrote them back (``EncodedSecret``).
    private(set) var redactable: [EncodedSecret] = []
    /// Shorter secrets are not redacted: replacing every "a" or "42" would garble every message
    /// (a warning says so).
    static let shortestRedacted = 4
    /// "Name: value" lines for trusted hosts (the configured headers and defaults) and for
    /// any other host (the defaults only).
    private(set) var trustedHeaderLines: [String] = []
    private(set) var publicHeaderLines: [String] = []

    /// When a page is the last besides its keys: a has_more flag, a total count.
    var stop = StopRules()
    /// GET, or POST with a JSON body template.
    var method = "GET"
    var bodyTemplate: BodyTemplate?
    var auth: Auth?
    var maxRequestsPerSecond: Double?
    /// Top-level members each item keeps (nil: the whole item).
    var fields: [String]?
    /// How many pages to fetch ahead while a page is handed out, when their keys are known (GET
    /// only; 0: none).
    var prefetchPages = 0
    /// How long a page fetched ahead may wait for the fetch that asks for it: an older one is
    /// dropped, and that fetch sends its own request (it was handed out, and stored as fresh, a
    /// page as old as the wait).
    var prefetchMaxAge: Duration = .seconds(10)
    /// The certificates https servers are verified with, instead of the system's (`ca_file`).
    var caFile: String?

    /// The pointers every body is scanned for: the items first, then the cursors and stop
    /// rules; `slots` says where each is.
    var scanPointers: (pointers: [JSONPointer], slots: ScanSlots) {
        var pointers = [items]
        var slots = ScanSlots()
        func add(_ pointer: JSONPointer?) -> Int? {
            guard let pointer else { return nil }
            pointers.append(pointer)
            return pointers.count - 1
        }
        switch pagination {
        case .cursor(let next, let prev, _):
            slots.next = add(next)
            slots.prev = add(prev)
        case .nextURL(let next):
            slots.next = add(next)
        default:
            break
        }
        slots.hasMore = add(stop.hasMore)
        slots.total = add(stop.total)
        return (pointers, slots)
    }

    /// Whether `url` may get the configured headers and credentials: the `url`'s origin (or
    /// its upgrade to https), or an allowed host, over the configured scheme or https.
    func isTrusted(_ url: String) -> Bool {
        guard let parts = URLParts(url), parts.scheme == origin.scheme || parts.scheme == "https",
              let port = parts.effectivePort else { return false }
        if parts.host == origin.host, let own = origin.effectivePort {
            if port == own { return true }
            // http://host/ upgraded to https://host/: the default port of each.
            if origin.scheme == "http", own == 80, parts.scheme == "https", port == 443 { return true }
        }
        return allowedHosts.contains(parts.host) || allowedHosts.contains("\(parts.host):\(port)")
    }

    /// A key from a response (a Link, a next URL, a cursor): the config's secrets in it are
    /// written as their `${...}` references (percent-encoded as many times as the secret was
    /// where it is written so, so that it is filled in as it was: a token echoed as "a%2Bb"
    /// went back as "a+b", another value in a query), and the query parameter of an
    /// `api_key` in the query, which some APIs echo in their links, is dropped
    /// (``withoutQueryKey(_:)``): keys (logged, stored, handed to `pager serve`'s clients)
    /// hold no secret. `more` are secrets of the instance (OAuth2 tokens) hidden in the same
    /// pass.
    func hidingSecrets(_ key: String?, also more: [(secret: EncodedSecret, reference: String)] = []) -> String? {
        guard let key else { return nil }
        // Longest first, the instance's with the config's: a token that begins with a config
        // value is hidden whole.
        let secrets = keySecrets.map { (secret: $0.encoded, replacement: $0.reference) } + more.map { (secret: $0.secret, replacement: $0.reference) }
        return EncodedSecret.replacing(secrets.sorted { $0.secret.bytes.count > $1.secret.bytes.count }, in: withoutQueryKey(key), encodingAsWritten: true)
    }

    /// `url` without the query parameter of an `api_key` in the query, however encoded: each
    /// request to a trusted host adds it, and no other host may get it (a Link or a redirect
    /// that echoes it).
    func withoutQueryKey(_ url: String) -> String {
        guard case .query(let name, let value) = auth, let question = url.firstIndex(of: "?") else { return url }
        let end = url[question...].firstIndex(of: "#") ?? url.endIndex
        let items = url[url.index(after: question)..<end].split(separator: "&", omittingEmptySubsequences: false)
        let (keyName, keyValue) = (EncodedSecret(name), EncodedSecret(value))
        let kept = items.filter { item in
            guard let equals = item.firstIndex(of: "=") else { return true }
            return !(keyName.isWritten(as: item[..<equals]) && keyValue.isWritten(as: item[item.index(after: equals)...]))
        }
        guard kept.count < items.count else { return url }
        return url[..<question] + (kept.isEmpty ? "" : "?" + kept.joined(separator: "&")) + url[end...]
    }

    /// A URL with the `${...}` references of the config's secrets filled in again, when it
    /// then names a trusted host (a URL naming another host keeps them: the secret never goes
    /// there).
    func revealingSecrets(_ url: String) -> String {
        let out = revealed(url)
        return out == url || isTrusted(out) ? out : url
    }

    /// `text` with the `${...}` references of the config's secrets filled in.
    func revealed(_ text: String) -> String {
        var out = text
        for secret in keySecrets { out = fillingIn(out, reference: secret.reference, with: secret.value) }
        return out
    }

    /// `text` with every secret replaced by "***", however it is written there: the config's,
    /// and `more` (the instance's OAuth2 tokens).
    func redact(_ text: String, also more: [EncodedSecret] = []) -> String {
        EncodedSecret.redacting(redactable + more, in: text)
    }

    /// ``snippet(_:limit:also:)`` of text (a header's value).
    func snippet(_ text: String, limit: Int = 200, also more: [EncodedSecret] = []) -> String {
        Array(text.utf8).withUnsafeBufferPointer { snippet($0, limit: limit, also: more) }
    }

    /// The first `limit` bytes of a body as text for a message, its secrets (the config's, and
    /// `more`) redacted before it is cut: a secret across the cut leaves no part of itself
    /// behind.
    func snippet(_ body: UnsafeBufferPointer<UInt8>, limit: Int = 200, also more: [EncodedSecret] = []) -> String {
        guard !body.isEmpty else { return "(empty body)" }
        let secrets = redactable + more
        // Every secret that starts within the limit ends within the window, however written.
        let window = limit + (secrets.map(\.bytes.count).max() ?? 0) * EncodedSecret.longestEncoding
        var text = redact(String(decoding: UnsafeBufferPointer(rebasing: body.prefix(window)), as: UTF8.self), also: more)
        if body.count > window {
            // A secret cut by the window's end, which redaction moved closer to the limit.
            for secret in secrets {
                let cut = secret.cutPrefixLength(atEndOf: text)
                if cut > 0 { text = String(decoding: Array(text.utf8.dropLast(cut)), as: UTF8.self) }
            }
        }
        let head = String(decoding: Array(text.utf8.prefix(limit)), as: UTF8.self)
        return body.count > window || text.utf8.count > limit ? head + "…" : head
    }

    /// Parses the plugin's `config` object (JSON text). Every error names the key and what was
    /// expected. `environment` resolves ${VARIABLE} in header values.
    init(json: String, environment: [String: String]) throws(PluginFailure) {
        let root: [String: ConfigValue]
        do {
            guard let object = try ConfigValue(json: json).object else {
                throw PluginFailure.invalidConfig("config: expected an object")
            }
            root = object
        } catch let failure as PluginFailure {
            throw failure
        } catch {
            throw .invalidConfig("config: not valid JSON")
        }
        for key in root.keys.sorted() where !Self.keys.contains(key) {
            throw .invalidConfig("\(key): unknown key; expected one of \(Self.keys.joined(separator: ", "))")
        }

        // url
        guard let urlValue = root["url"] else {
            throw .invalidConfig("url: required; expected a URL template such as \"https://api.example.com/items?page={key}&per_page={pageSize}\"")
        }
        guard let urlText = urlValue.string, !urlText.isEmpty else {
            throw .invalidConfig("url: expected a non-empty string (a URL template), got \(urlValue)")
        }
        var named: [NamedSecret] = []
        url = try URLTemplate(urlText, environment: environment, secrets: &named)
        let sample = url.expand(key: "1", pageSize: 1, offset: 0, params: [:])
        guard let parsed = URL(string: sample), let scheme = parsed.scheme?.lowercased(),
              scheme == "http" || scheme == "https", parsed.host != nil, let parts = URLParts(sample) else {
            throw .invalidConfig("url: expected an absolute http(s) URL template, got \"\(urlText)\"")
        }
        guard parts.effectivePort != nil else {
            throw .invalidConfig("url: the port of \"\(urlText)\" is not a number from 1 to 65535")
        }
        // libcurl would send them as basic auth with the first request only (a next link does
        // not repeat them), and their encoded form is no secret a message redacts. The URL is
        // not quoted: it holds a password.
        guard !parts.hasUserInfo else {
            throw .invalidConfig("url: credentials before the host (user:password@) are refused: they would go with the first request only, "
                                 + "and unredacted; use \"auth\": {\"type\": \"basic\", \"username\": ..., \"password\": \"${NAME}\"}")
        }
        origin = parts
        allowedHosts = []
        if let value = root["allowed_hosts"] {
            guard let list = value.strings else {
                throw .invalidConfig("allowed_hosts: expected an array of host names (\"api.example.com\", or \"api.example.com:8443\" for one port), got \(value)")
            }
            for entry in list {
                // Read as the authority of a URL: "host", "host:port", "[::1]", "[::1]:8443".
                guard !entry.isEmpty, !entry.contains(where: { "/?#@ ".contains($0) }), let parts = URLParts("http://" + entry),
                      parts.port?.isEmpty != true, let port = parts.effectivePort, Self.isHostName(parts.host) else {
                    throw .invalidConfig("allowed_hosts: \"\(entry)\" is not a host name or host:port (no scheme or path)")
                }
                let allowed = parts.port == nil ? parts.host : "\(parts.host):\(port)"
                // Read back as written, or it names no host a URL could have ("*", "::1", "h:1:2").
                guard allowed == entry.lowercased() else {
                    throw .invalidConfig("allowed_hosts: \"\(entry)\" is not a host name or host:port (an IPv6 address goes in brackets: \"[::1]\"; no wildcards)")
                }
                allowedHosts.insert(allowed)
            }
        }

        // items
        if let itemsValue = root["items"] {
            guard let text = itemsValue.string else {
                throw .invalidConfig("items: expected a JSON pointer string such as \"/items\" (\"\" = the body), got \(itemsValue)")
            }
            items = try JSONPointer(text, key: "items")
        } else {
            items = JSONPointer.root
        }

        // pagination
        pagination = try Self.pagination(root["pagination"])
        stop = try StopRules(root["pagination"])
        if stop.total != nil || stop.totalHeader != nil, pagination.typeName != "page", pagination.typeName != "offset" {
            throw .invalidConfig("pagination.\(stop.total != nil ? "total" : "total_header"): a total count ends page and offset pagination only; \(pagination.typeName) pagination ends where its next key does (has_more may end it too)")
        }
        if url.usesOffset, case .cursor = pagination {
            throw .invalidConfig("url: {offset} is not available with pagination type \"cursor\"; use {key}")
        }
        if url.usesOffset, pagination.typeName != "page", pagination.typeName != "offset" {
            throw .invalidConfig("url: {offset} is not available with pagination type \"\(pagination.typeName)\"")
        }

        // timeout_ms
        if let value = root["timeout_ms"] {
            guard let number = value.integer, number > 0 else {
                throw .invalidConfig("timeout_ms: expected a positive integer number of milliseconds, got \(value)")
            }
            timeoutMilliseconds = number
        } else {
            timeoutMilliseconds = 30_000
        }
        maxPageBytes = try Self.byteLimit(root["max_page_bytes"], key: "max_page_bytes", default: 32 << 20)
        // libcurl itself refuses more than 300 KB of headers, with a message of its own.
        maxHeaderBytes = try Self.byteLimit(root["max_header_bytes"], key: "max_header_bytes", default: 64 << 10, max: 256 << 10)

        // headers
        var headers: [(name: String, value: String)] = []
        var warnings: [String] = []
        if let value = root["headers"] {
            guard let object = value.object else {
                throw .invalidConfig("headers: expected an object of header name to string value, got \(value)")
            }
            for name in object.keys.sorted() {
                guard isToken(name) else {
                    throw .invalidConfig("headers: \"\(name)\" is not a valid header name")
                }
                guard let raw = object[name]?.string else {
                    throw .invalidConfig("headers.\(name): expected a string, got \(object[name]!)")
                }
                // Filled in the url and the body only: sent as written, it reached the server as text.
                if let placeholder = ["{state.", "{param."].first(where: { raw.contains($0) }) {
                    throw .invalidConfig("headers.\(name): \(placeholder)NAME} is not filled in headers (only in the url and the body)")
                }
                switch try expandEnvironment(raw, key: "headers.\(name)", environment: environment, secrets: &named) {
                case .value(let expanded):
                    guard !expanded.utf8.contains(where: { $0 == 10 || $0 == 13 }) else {
                        throw .invalidConfig("headers.\(name): the value may not contain a line break")
                    }
                    headers.append((name, expanded))
                case .missing(let variable):
                    warnings.append("headers.\(name): environment variable \(variable) is not set (or empty); the header is omitted")
                }
            }
        }
        func has(_ name: String) -> Bool { headers.contains { $0.name.lowercased() == name.lowercased() } }
        if !has("User-Agent") { headers.append(("User-Agent", "SwiftPaging")) }
        if !has("Accept") { headers.append(("Accept", "application/json")) }
        self.headers = headers
        self.warnings = warnings
        namedSecrets = named
        try parseOptions(root, environment: environment)
        self.secrets = (self.secrets + namedSecrets.map(\.value)).filter { !$0.isEmpty }.sorted { $0.utf8.count > $1.utf8.count }
        var hidden = Set<String>()
        keySecrets = namedSecrets.filter { $0.value.utf8.count >= Self.shortestRedacted && hidden.insert($0.value).inserted }
            .sorted { $0.value.utf8.count > $1.value.utf8.count }
        redactable = self.secrets.filter { $0.utf8.count >= Self.shortestRedacted }.map(EncodedSecret.init)
        if self.secrets.contains(where: { $0.utf8.count < Self.shortestRedacted }) {
            self.warnings.append("a value from the environment or a file is shorter than \(Self.shortestRedacted) characters: too short to redact from messages")
        }
        trustedHeaderLines = headers.map { "\($0.name): \($0.value)" }
        if case .headers(let lines) = auth { trustedHeaderLines += lines }
        let secretList = self.secrets
        publicHeaderLines = headers.filter { header in
            ["user-agent", "accept"].contains(header.name.lowercased()) && !secretList.contains { header.value.contains($0) }
        }
            .map { "\($0.name): \($0.value)" }
    }

    /// A DNS name or an IPv4 address (letters, digits, "-" and "."), or an IPv6 address in brackets.
    private static func isHostName(_ host: String) -> Bool {
        if host.hasPrefix("[") {
            return host.count > 2 && host.hasSuffix("]") && host.dropFirst().dropLast().allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
        }
        return !host.isEmpty && host.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == ".") }
    }

    private static func byteLimit(_ value: ConfigValue?, key: String, default fallback: Int, max: Int = .max) throws(PluginFailure) -> Int {
        guard let value else { return fallback }
        guard let number = value.integer, number >= 1024, number <= max else {
            throw .invalidConfig("\(key): expected an integer number of bytes, at least 1024\(max < .max ? " and at most \(max)" : ""), got \(value)")
        }
        return number
    }

    private static func pagination(_ value: ConfigValue?) throws(PluginFailure) -> Pagination {
        guard let value else { return .page(first: 1) }
        guard let object = value.object else {
            throw .invalidConfig("pagination: expected an object with \"type\": \"page\", \"offset\", \"cursor\", \"link\", \"next_url\" or \"header\", got \(value)")
        }
        guard let type = object["type"]?.string else {
            throw .invalidConfig("pagination.type: required; expected \"page\", \"offset\", \"cursor\", \"link\", \"next_url\" or \"header\"")
        }
        var allowed: [String]
        switch type {
        case "page", "offset": allowed = ["type", "first"]
        case "cursor": allowed = ["type", "next", "prev", "first"]
        case "link": allowed = ["type"]
        case "next_url": allowed = ["type", "next"]
        case "header": allowed = ["type", "next", "first"]
        default:
            throw .invalidConfig("pagination.type: expected \"page\", \"offset\", \"cursor\", \"link\", \"next_url\" or \"header\", got \"\(type)\"")
        }
        allowed += StopRules.keys
        for key in object.keys.sorted() where !allowed.contains(key) {
            throw .invalidConfig("pagination.\(key): unknown key for type \"\(type)\"; expected one of \(allowed.joined(separator: ", "))")
        }
        switch type {
        case "page", "offset":
            let fallback = type == "page" ? 1 : 0
            var first = fallback
            if let value = object["first"] {
                guard let number = value.integer, number >= 0 else {
                    throw .invalidConfig("pagination.first: expected a non-negative integer (the first \(type == "page" ? "page number" : "offset")), got \(value)")
                }
                first = number
            }
            return type == "page" ? .page(first: first) : .offset(first: first)
        case "cursor":
            guard let nextValue = object["next"] else {
                throw .invalidConfig("pagination.next: required for type \"cursor\"; expected a JSON pointer to the next cursor, such as \"/next_cursor\"")
            }
            guard let nextText = nextValue.string else {
                throw .invalidConfig("pagination.next: expected a JSON pointer string, got \(nextValue)")
            }
            let next = try JSONPointer(nextText, key: "pagination.next")
            var prev: JSONPointer?
            if let prevValue = object["prev"] {
                guard let prevText = prevValue.string else {
                    throw .invalidConfig("pagination.prev: expected a JSON pointer string, got \(prevValue)")
                }
                prev = try JSONPointer(prevText, key: "pagination.prev")
            }
            var first = ""
            if let value = object["first"] {
                guard let text = value.string else {
                    throw .invalidConfig("pagination.first: expected a string (the first cursor; \"\" = none), got \(value)")
                }
                first = text
            }
            return .cursor(next: next, prev: prev, first: first)
        case "next_url":
            guard let text = object["next"]?.string else {
                throw .invalidConfig("pagination.next: required for type \"next_url\"; expected a JSON pointer to the next page's URL, such as \"/links/next\"")
            }
            return .nextURL(next: try JSONPointer(text, key: "pagination.next"))
        case "header":
            guard let name = object["next"]?.string, !name.isEmpty else {
                throw .invalidConfig("pagination.next: required for type \"header\"; expected the name of the response header holding the next key, such as \"X-Next-Page\"")
            }
            var first = ""
            if let value = object["first"] {
                guard let text = value.string else {
                    throw .invalidConfig("pagination.first: expected a string (the first key; \"\" = none), got \(value)")
                }
                first = text
            }
            return .header(next: name.lowercased(), first: first)
        default:
            return .link
        }
    }
}

enum Expansion {
    case value(String)
    case missing(String)
}

/// A value from the environment or a file, and the `${...}` naming it in the config.
struct NamedSecret: Sendable {
    let value: String
    let reference: String
    /// The value however a server may write it back.
    let encoded: EncodedSecret

    init(_ value: String, reference: String) {
        self.value = value
        self.reference = reference
        encoded = EncodedSecret(value)
    }
}

/// Expands each ${NAME} in `text` from `environment`, adding the values to `secrets`; `.missing`
/// names the first variable that is unset or empty.
func expandEnvironment(_ text: String, key: String, environment: [String: String], secrets: inout [NamedSecret]) throws(PluginFailure) -> Expansion {
    var out = ""
    var rest = Substring(text)
    while let start = rest.firstRange(of: "${") {
        out += rest[..<start.lowerBound]
        guard let end = rest[start.upperBound...].firstIndex(of: "}") else {
            throw .invalidConfig("\(key): unterminated ${ in \"\(text)\"; expected ${VARIABLE}")
        }
        let name = String(rest[start.upperBound..<end])
        if name.hasPrefix("file:") {
            let path = String(name.dropFirst(5))
            // A secret is short: a big file (or /dev/zero behind a link) is no secret file.
            var info = stat()
            let problem: String?
            if stat(path, &info) != 0 {
                problem = String(cString: strerror(errno))
                    + (path.hasPrefix("/") ? "" : " (a relative path is read from the working directory, \(FileManager.default.currentDirectoryPath))")
            } else if info.st_mode & S_IFMT != S_IFREG {
                problem = "not a regular file"
            } else if info.st_size > 64 << 10 {
                problem = "\(info.st_size) bytes, over 64 KiB"
            } else if access(path, R_OK) != 0 {
                problem = String(cString: strerror(errno))
            } else {
                problem = nil
            }
            if let problem {
                throw .invalidConfig("\(key): cannot read the secret file \"\(path)\": \(problem) (${file:PATH} reads a regular UTF-8 file of at most 64 KiB)")
            }
            guard let data = FileManager.default.contents(atPath: path) else {
                throw .invalidConfig("\(key): cannot read the secret file \"\(path)\"")
            }
            guard var value = String(data: data, encoding: .utf8) else {
                throw .invalidConfig("\(key): the secret file \"\(path)\" is not UTF-8")
            }
            while let last = value.last, last == "\n" || last == "\r" || last == "\r\n" { value.removeLast() }
            guard !value.isEmpty else { throw .invalidConfig("\(key): the secret file \"\(path)\" is empty") }
            guard !holdsControlCharacter(value) else {
                throw .invalidConfig("\(key): the secret file \"\(path)\" holds a control character (only a final line break is dropped)")
            }
            secrets.append(NamedSecret(value, reference: "${\(name)}"))
            out += value
            rest = rest[rest.index(after: end)...]
            continue
        }
        guard !name.isEmpty, name.allSatisfy({ $0 == "_" || ($0.isASCII && ($0.isLetter || $0.isNumber)) }) else {
            throw .invalidConfig("\(key): \"${\(name)}\" is not an environment variable name; expected ${VARIABLE}")
        }
        guard let value = environment[name], !value.isEmpty else { return .missing(name) }
        // As a secret file's: a variable set to "abc\u{1B}[2J" went into the header as it was.
        guard !holdsControlCharacter(value) else {
            throw .invalidConfig("\(key): the environment variable \(name) holds a control character")
        }
        secrets.append(NamedSecret(value, reference: "${\(name)}"))
        out += value
        rest = rest[rest.index(after: end)...]
    }
    out += rest
    return .value(out)
}

/// Whether a secret holds a control character other than a tab: a NUL would cut it short where
/// it meets C; the others have no place in a header or a URL.
private func holdsControlCharacter(_ value: String) -> Bool {
    value.utf8.contains { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }
}

/// Whether `name` is a token (RFC 9110): what a header name may be.
func isToken(_ name: String) -> Bool {
    !name.isEmpty && name.utf8.allSatisfy { byte in
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

/// The scheme, host and port of an absolute URL, read the way libcurl reads it: the host is
/// what follows the last "@" of the authority (so "http://good@evil/" is evil).
struct URLParts: Equatable {
    var scheme: String
    var host: String
    var port: String?
    /// The authority holds a user (and password) before an "@".
    var hasUserInfo = false

    /// Reads the parts as libcurl does, byte by byte: a "/" is a "/" whatever follows it (read
    /// by Character, "/" and a combining mark after it are one Character, and a host hidden
    /// after an "@" in the path was taken for the URL's).
    init?(_ url: String) {
        let bytes = Array(url.utf8)
        // libcurl gets the URL as a C string (cut at a NUL): a URL with a control character is
        // not one this reading and libcurl's would agree on.
        guard !ResponseParsing.hasControlCharacter(bytes), let colon = ResponseParsing.schemeEnd(bytes) else { return nil }
        scheme = ResponseParsing.asciiLowercased(bytes[..<colon])
        let rest = bytes[(colon + 3)...]
        let authorityEnd = rest.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? rest.endIndex
        var authority = rest[..<authorityEnd]
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
            authority = authority[(at + 1)...]
            hasUserInfo = true
        }
        if authority.first == UInt8(ascii: "["), let close = authority.firstIndex(of: UInt8(ascii: "]")) {
            host = ResponseParsing.asciiLowercased(authority[...close])
            let after = authority[(close + 1)...]
            port = after.first == UInt8(ascii: ":") ? String(decoding: after.dropFirst(), as: UTF8.self) : nil
        } else if let portColon = authority.lastIndex(of: UInt8(ascii: ":")) {
            host = ResponseParsing.asciiLowercased(authority[..<portColon])
            port = String(decoding: authority[(portColon + 1)...], as: UTF8.self)
        } else {
            host = ResponseParsing.asciiLowercased(authority)
            port = nil
        }
        guard !host.isEmpty else { return nil }
    }

    var isHTTP: Bool { scheme == "http" || scheme == "https" }

    /// The port a request goes to: the one written, else the scheme's default (80 for http,
    /// 443 for https); nil when the written one is not a port number.
    var effectivePort: Int? {
        guard let port, !port.isEmpty else { return scheme == "https" ? 443 : scheme == "http" ? 80 : nil }
        guard port.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }), port.utf8.count <= 5,
              let number = Int(port), (1...65535).contains(number) else { return nil }
        return number
    }
}
