// The http source's options beyond URL and pagination: stop rules, a POST body template,
// auth, a request budget and a projection of fields. Parsed once at create time; every error
// names the key and what was expected.
import FoundationEssentials
import Glibc
import PagingPluginKit

/// When a page is the last, besides its keys: a `has_more` flag that is not true, or a total
/// count reached (a pointer into the body or a response header). An empty page is always last.
struct StopRules: Sendable {
    static let keys = ["has_more", "total", "total_header"]

    var hasMore: JSONPointer?
    var total: JSONPointer?
    var totalHeader: String?

    /// Whether a rule says where paging ends (else a short page does).
    var decidesTheEnd: Bool { hasMore != nil || total != nil || totalHeader != nil }

    init() {}

    init(_ pagination: ConfigValue?) throws(PluginFailure) {
        guard let object = pagination?.object else { return }
        if let value = object["has_more"] {
            guard let text = value.string else { throw .invalidConfig("pagination.has_more: expected a JSON pointer string such as \"/has_more\", got \(value)") }
            hasMore = try JSONPointer(text, key: "pagination.has_more")
        }
        if let value = object["total"] {
            guard let text = value.string else { throw .invalidConfig("pagination.total: expected a JSON pointer string such as \"/total_count\", got \(value)") }
            total = try JSONPointer(text, key: "pagination.total")
        }
        if let value = object["total_header"] {
            guard let text = value.string, !text.isEmpty else { throw .invalidConfig("pagination.total_header: expected a header name such as \"X-Total\", got \(value)") }
            totalHeader = text.lowercased()
        }
    }
}

/// Where the scan plan put each pointer besides the items (index 0).
struct ScanSlots: Sendable {
    var next: Int?
    var prev: Int?
    var hasMore: Int?
    var total: Int?
}

/// A JSON body for POST requests: string values "{key}", "{pageSize}" (sent as a number),
/// "{offset}" (a number), "{param.NAME}" and "{state.NAME}" (incremental loading's value) are
/// replaced per request; within a longer string ("updated:>{state.since}") each of them is
/// replaced by its text, and any other braces are left as they are (a GraphQL query's).
struct BodyTemplate: Sendable {
    let object: ConfigValue

    func render(key: String, pageSize: Int, offset: Int?, params: [String: String]) -> [UInt8] {
        /// The text of placeholder `name` (what is between the braces), nil for none.
        func placeholder(_ name: Substring) -> String? {
            switch name {
            case "key": key
            case "pageSize": String(pageSize)
            case "offset": String(offset ?? 0)
            default: name.hasPrefix("param.") ? params[String(name.dropFirst(6))] ?? ""
                : name.hasPrefix("state.") ? params[String(name)] ?? "" : nil
            }
        }
        func fill(_ value: ConfigValue) -> ConfigValue {
            switch value {
            case .string(let text):
                switch text {
                case "{pageSize}": return .integer(Int64(pageSize))
                case "{offset}": return .integer(Int64(offset ?? 0))
                default: return .string(filling(text))
                }
            case .object(let members): return .object(members.mapValues(fill))
            case .array(let list): return .array(list.map(fill))
            default: return value
            }
        }
        /// `text` with each placeholder in it replaced by its text.
        func filling(_ text: String) -> String {
            guard text.contains("{") else { return text }
            var out = "", rest = Substring(text)
            while let open = rest.firstIndex(of: "{"), let close = rest[open...].firstIndex(of: "}") {
                out += rest[..<open]
                if let value = placeholder(rest[rest.index(after: open)..<close]) {
                    out += value
                    rest = rest[rest.index(after: close)...]
                } else {
                    out += "{"
                    rest = rest[rest.index(after: open)...]
                }
            }
            return out + rest
        }
        return fill(object).jsonBytes
    }
}

/// How requests to the configured host authenticate.
enum Auth: Sendable {
    /// Header lines added to every request to a trusted host (bearer, basic, API key header).
    case headers([String])
    /// A query parameter added to every request to a trusted host.
    case query(name: String, value: String)
    /// OAuth2 client credentials: a token fetched from `tokenURL`, cached and fetched again
    /// shortly before it expires.
    case clientCredentials(tokenURL: String, clientID: String, clientSecret: String, scope: String?)
}

extension HTTPSourceConfig {
    static let optionKeys = ["method", "body", "auth", "max_requests_per_second", "fields", "prefetch", "prefetch_max_age_ms", "ca_file"]
    /// Pages fetched ahead by default (`"prefetch": true`), and at most.
    static let prefetchPages = 2, maxPrefetchPages = 4

    /// Parses method, body, auth, max_requests_per_second, fields, prefetch, prefetch_max_age_ms
    /// and ca_file.
    mutating func parseOptions(_ root: [String: ConfigValue], environment: [String: String]) throws(PluginFailure) {
        if let value = root["method"] {
            guard let text = value.string, ["GET", "POST"].contains(text.uppercased()) else {
                throw .invalidConfig("method: expected \"GET\" or \"POST\", got \(value)")
            }
            method = text.uppercased()
        }
        if let value = root["body"] {
            guard method == "POST" else { throw .invalidConfig("body: only with \"method\": \"POST\"") }
            guard value.object != nil else { throw .invalidConfig("body: expected a JSON object (the request body template), got \(value)") }
            bodyTemplate = BodyTemplate(object: try expandStrings(value, key: "body", environment: environment))
        }
        if let value = root["max_requests_per_second"] {
            // At least one request a day: the wait between requests is then a day at most.
            guard let number = value.number, number >= 1.0 / 86_400, number <= 10_000 else {
                throw .invalidConfig("max_requests_per_second: expected a number from 0.0000116 (one request a day) to 10000, got \(value)")
            }
            maxRequestsPerSecond = number
        }
        if let value = root["fields"] {
            guard let list = value.strings, !list.isEmpty else {
                throw .invalidConfig("fields: expected a non-empty array of member names, such as [\"id\", \"name\"], got \(value)")
            }
            guard !list.contains("") else { throw .invalidConfig("fields: a member name is empty") }
            // The filter's fields are pointers; these are names: "/id" made every item `{}`.
            if let pointer = list.first(where: { $0.hasPrefix("/") }) {
                throw .invalidConfig("fields: \"\(pointer)\" is a JSON pointer; fields are the names of the members each item keeps, such as \"\(pointer.dropFirst().prefix { $0 != "/" })\" (the filter interceptor projects nested ones)")
            }
            // The scanner finds at most 64 members in one pass (more made every item `{}`).
            guard list.count <= 64 else { throw .invalidConfig("fields: at most 64 member names, got \(list.count)") }
            // Each would be written: an item with a member twice.
            if let twice = list.enumerated().first(where: { list[..<$0.offset].contains($0.element) })?.element {
                throw .invalidConfig("fields: \"\(twice)\" is listed twice")
            }
            fields = list
        }
        if let value = root["auth"] {
            auth = try parseAuth(value, environment: environment)
        }
        if let value = root["ca_file"] {
            caFile = try Self.certificateFile(value)
        }
        if let value = root["prefetch"] {
            guard let pages = value.bool.map({ $0 ? Self.prefetchPages : 0 }) ?? value.integer, (0...Self.maxPrefetchPages).contains(pages) else {
                throw .invalidConfig("prefetch: expected true, false or a number of pages from 0 to \(Self.maxPrefetchPages), got \(value)")
            }
            guard pages == 0 || method == "GET" else { throw .invalidConfig("prefetch: only with \"method\": \"GET\" (a POST is not fetched ahead)") }
            prefetchPages = pages
        } else {
            prefetchPages = method == "GET" ? Self.prefetchPages : 0
        }
        if let value = root["prefetch_max_age_ms"] {
            guard let milliseconds = value.integer, (1...3_600_000).contains(milliseconds) else {
                throw .invalidConfig("prefetch_max_age_ms: expected a whole number of milliseconds from 1 to 3600000, got \(value)")
            }
            prefetchMaxAge = .milliseconds(milliseconds)
        }
    }

    /// `ca_file`: a readable PEM file of certificates (a regular file of at most 16 MiB), as an
    /// absolute path (a relative one is read from the working directory, as `${file:PATH}` is).
    private static func certificateFile(_ value: ConfigValue) throws(PluginFailure) -> String {
        guard let path = value.string, !path.isEmpty else {
            throw .invalidConfig("ca_file: expected the path of a PEM file of CA certificates, got \(value)")
        }
        let absolute = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        var info = stat()
        guard stat(absolute, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_size <= 16 << 20,
              let data = FileManager.default.contents(atPath: absolute) else {
            throw .invalidConfig("ca_file: cannot read \"\(path)\" (expected a regular PEM file of CA certificates, at most 16 MiB)")
        }
        guard String(decoding: data, as: UTF8.self).contains("-----BEGIN CERTIFICATE-----") else {
            throw .invalidConfig("ca_file: \"\(path)\" holds no PEM certificate (no \"-----BEGIN CERTIFICATE-----\" line)")
        }
        return absolute
    }

    /// A string of the config with ${NAME} (environment) and ${file:PATH} expanded; its secrets
    /// are remembered for redaction. A missing variable is a warning and yields nil.
    mutating func secret(_ value: ConfigValue?, key: String, environment: [String: String], required: Bool = true) throws(PluginFailure) -> String? {
        guard let value else {
            if required { throw .invalidConfig("\(key): required") }
            return nil
        }
        guard let text = value.string else { throw .invalidConfig("\(key): expected a string, got \(value)") }
        switch try expandEnvironment(text, key: key, environment: environment, secrets: &namedSecrets) {
        case .value(let expanded):
            guard !expanded.utf8.contains(where: { $0 == 10 || $0 == 13 }) else { throw .invalidConfig("\(key): the value may not contain a line break") }
            return expanded
        case .missing(let variable):
            warnings.append("\(key): environment variable \(variable) is not set (or empty); requests go without it")
            return nil
        }
    }

    private mutating func expandStrings(_ value: ConfigValue, key: String, environment: [String: String]) throws(PluginFailure) -> ConfigValue {
        switch value {
        case .string:
            return .string(try secret(value, key: key, environment: environment) ?? "")
        case .object(let members):
            var out: [String: ConfigValue] = [:]
            for (name, member) in members { out[name] = try expandStrings(member, key: "\(key).\(name)", environment: environment) }
            return .object(out)
        case .array(let list):
            var out: [ConfigValue] = []
            for (index, element) in list.enumerated() { out.append(try expandStrings(element, key: "\(key)[\(index)]", environment: environment)) }
            return .array(out)
        default:
            return value
        }
    }

    private mutating func parseAuth(_ value: ConfigValue, environment: [String: String]) throws(PluginFailure) -> Auth? {
        guard let object = value.object, let type = object["type"]?.string else {
            throw .invalidConfig("auth: expected an object with \"type\": \"bearer\", \"api_key\", \"basic\" or \"oauth2_client_credentials\", got \(value)")
        }
        let allowed: [String]
        switch type {
        case "bearer": allowed = ["type", "token"]
        case "api_key": allowed = ["type", "in", "name", "value"]
        case "basic": allowed = ["type", "username", "password"]
        case "oauth2_client_credentials": allowed = ["type", "token_url", "client_id", "client_secret", "scope"]
        default: throw .invalidConfig("auth.type: expected \"bearer\", \"api_key\", \"basic\" or \"oauth2_client_credentials\", got \"\(type)\"")
        }
        for key in object.keys.sorted() where !allowed.contains(key) {
            throw .invalidConfig("auth.\(key): unknown key for type \"\(type)\"; expected one of \(allowed.joined(separator: ", "))")
        }
        switch type {
        case "bearer":
            guard let token = try secret(object["token"], key: "auth.token", environment: environment) else { return nil }
            return .headers(["Authorization: Bearer \(token)"])
        case "api_key":
            let place = object["in"].map { $0.string ?? "" } ?? "header"
            guard place == "header" || place == "query" else { throw .invalidConfig("auth.in: expected \"header\" or \"query\", got \(object["in"]!)") }
            guard let name = object["name"]?.string, !name.isEmpty else { throw .invalidConfig("auth.name: required; the header or query parameter name, such as \"X-Api-Key\"") }
            guard place == "query" || isToken(name) else { throw .invalidConfig("auth.name: \"\(name)\" is not a valid header name") }
            guard let key = try secret(object["value"], key: "auth.value", environment: environment) else { return nil }
            return place == "header" ? .headers(["\(name): \(key)"]) : .query(name: name, value: key)
        case "basic":
            guard let user = try secret(object["username"], key: "auth.username", environment: environment),
                  let password = try secret(object["password"], key: "auth.password", environment: environment) else { return nil }
            let encoded = Data("\(user):\(password)".utf8).base64EncodedString()
            // Named, as the values it encodes are: a server that echoed it in a next key had the
            // credentials kept in clear there (log lines, stores, `pager serve`'s cursors). So
            // are its other base64 forms (URL-safe, without padding), each with a reference of
            // its own, filled in as the form it stands for (forms that are the same text are one:
            // keys hide each value once, under its first reference).
            let unpadded = String(encoded.prefix { $0 != "=" })
            func urlSafe(_ text: String) -> String { String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }) }
            for (form, name) in [(encoded, ""), (unpadded, "-unpadded"), (urlSafe(encoded), "-url-padded"), (urlSafe(unpadded), "-url")] {
                namedSecrets.append(NamedSecret(form, reference: "${basic:credentials\(name)}"))
            }
            return .headers(["Authorization: Basic \(encoded)"])
        default:
            guard let tokenURL = object["token_url"]?.string, let parts = URLParts(tokenURL), parts.isHTTP else {
                throw .invalidConfig("auth.token_url: required; expected the http(s) URL of the token endpoint")
            }
            // As in `url`: sent unredacted; the client's credentials go in client_id and client_secret.
            guard !parts.hasUserInfo else {
                throw .invalidConfig("auth.token_url: credentials before the host (user:password@) are refused; the client's go in client_id and client_secret")
            }
            guard let id = try secret(object["client_id"], key: "auth.client_id", environment: environment),
                  let clientSecret = try secret(object["client_secret"], key: "auth.client_secret", environment: environment) else { return nil }
            let scope = try secret(object["scope"], key: "auth.scope", environment: environment, required: false)
            return .clientCredentials(tokenURL: tokenURL, clientID: id, clientSecret: clientSecret, scope: scope)
        }
    }
}
