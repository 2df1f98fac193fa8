// Reading responses: RFC 6901 JSON pointers (parsed from the config; the scanner resolves
// them), the Link header (RFC 8288), Retry-After and rate-limit headers, and body snippets for
// error messages.
import FoundationEssentials
import CPaging
import PagingPluginKit

/// An RFC 6901 JSON pointer: "" is the whole document, "/a/0/b~1c" walks object members and
/// array indices (~1 is "/", ~0 is "~").
struct JSONPointer: Sendable, Equatable, CustomStringConvertible {
    let text: String
    let tokens: [String]

    static let root = JSONPointer(text: "", tokens: [])

    /// The pointer to the top-level member `name`.
    init(member name: String) {
        self.init(text: "/" + name.replacing("~", with: "~0").replacing("/", with: "~1"), tokens: [name])
    }

    private init(text: String, tokens: [String]) {
        self.text = text
        self.tokens = tokens
    }

    /// Parses `text`; a config error naming `key` when it is not a pointer.
    init(_ text: String, key: String) throws(PluginFailure) {
        guard text.isEmpty || text.hasPrefix("/") else {
            throw .invalidConfig("\(key): expected a JSON pointer (\"\" or starting with \"/\", e.g. \"/items\"), got \"\(text)\"")
        }
        var tokens: [String] = []
        if !text.isEmpty {
            for raw in text.dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
                var token = ""
                var chars = raw.makeIterator()
                while let c = chars.next() {
                    guard c == "~" else { token.append(c); continue }
                    switch chars.next() {
                    case "0": token.append("~")
                    case "1": token.append("/")
                    default:
                        throw .invalidConfig("\(key): \"\(text)\" has a \"~\" not followed by 0 or 1 (RFC 6901)")
                    }
                }
                tokens.append(token)
            }
        }
        self.init(text: text, tokens: tokens)
    }

    var description: String { text.isEmpty ? "\"\" (the whole body)" : "\"\(text)\"" }
}

enum ResponseParsing {
    /// The URLs of a Link header by rel (`rel="next"`, `rel=prev`, `rel="prev first"` ...),
    /// resolved against `base`. The first link of each rel wins.
    static func links(_ header: String, base: String) -> [String: String] {
        // Bytes, not Characters: a header is ASCII in practice, and walking it by grapheme
        // cost ~13 µs a page.
        var result: [String: String] = [:]
        var rest = Array(header.utf8)[...]
        while let open = rest.firstIndex(of: UInt8(ascii: "<")) {
            guard let close = rest[open...].firstIndex(of: UInt8(ascii: ">")) else { break }
            let target = rest[(open + 1)..<close]
            rest = rest[(close + 1)...]
            // Parameters run up to the next link (a "<" after a comma) or the end.
            let paramsEnd = rest.firstIndex(of: UInt8(ascii: "<")) ?? rest.endIndex
            let params = rest[..<paramsEnd]
            rest = rest[paramsEnd...]
            var resolved: String?
            for param in params.split(separator: UInt8(ascii: ";")) {
                guard let equals = param.firstIndex(of: UInt8(ascii: "=")),
                      asciiLowercased(trimmed(param[..<equals], of: " \t")) == "rel" else { continue }
                var value = trimmed(param[(equals + 1)...], of: " \t")
                if value.last == UInt8(ascii: ",") { value = value.dropLast() }
                for rel in asciiLowercased(trimmed(value, of: "\" \t")).split(separator: " ") where result[String(rel)] == nil {
                    resolved = resolved ?? resolve(String(decoding: target, as: UTF8.self), base: base)
                    result[String(rel)] = resolved
                }
            }
        }
        return result
    }

    /// `bytes` without the (ASCII) characters of `set` at either end.
    private static func trimmed(_ bytes: ArraySlice<UInt8>, of set: StaticString) -> ArraySlice<UInt8> {
        let set = UnsafeBufferPointer(start: set.utf8Start, count: set.utf8CodeUnitCount)
        var bytes = bytes
        while let first = bytes.first, set.contains(first) { bytes.removeFirst() }
        while let last = bytes.last, set.contains(last) { bytes.removeLast() }
        return bytes
    }

    /// `bytes` as text with ASCII letters in lower case (headers, schemes and host names are
    /// compared as libcurl reads them: byte by byte).
    static func asciiLowercased(_ bytes: ArraySlice<UInt8>) -> String {
        String(decoding: bytes.map(asciiLowercased), as: UTF8.self)
    }

    /// `byte`, an ASCII capital made small.
    static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        (65...90).contains(byte) ? byte | 0x20 : byte
    }

    /// A URL reference resolved against `base`. Absolute http(s) URLs and absolute paths, the
    /// usual ones, are done here on the bytes; anything else is left to Foundation's URL (a
    /// whole parse).
    static func resolve(_ target: String, base: String) -> String {
        let bytes = Array(target.utf8)
        if startsIgnoringCase(bytes, with: "http://") || startsIgnoringCase(bytes, with: "https://") { return target }
        let baseBytes = Array(base.utf8)
        if bytes.first == UInt8(ascii: "/"), bytes.dropFirst().first != UInt8(ascii: "/"),
           !zip(bytes, bytes.dropFirst()).contains(where: { $0 == UInt8(ascii: "/") && $1 == UInt8(ascii: ".") }),
           !bytes.contains(where: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\\") }),
           let colon = schemeEnd(baseBytes) {
            let authority = baseBytes[(colon + 3)...]
            let authorityEnd = authority.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? baseBytes.endIndex
            return String(decoding: baseBytes[..<authorityEnd], as: UTF8.self) + target
        }
        return URL(string: target, relativeTo: URL(string: base))?.absoluteString ?? target
    }

    /// Where the first "://" of a URL's bytes starts (the end of its scheme), if it has one.
    static func schemeEnd(_ bytes: [UInt8]) -> Int? {
        bytes.indices.first { bytes[$0...].starts(with: "://".utf8) }
    }

    /// Whether `bytes` starts with the ASCII `prefix`, in any case.
    private static func startsIgnoringCase(_ bytes: [UInt8], with prefix: StaticString) -> Bool {
        let prefix = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        guard bytes.count >= prefix.count else { return false }
        return zip(bytes, prefix).allSatisfy { asciiLowercased($0) == $1 }
    }

    /// Retry-After as whole seconds from now: delta-seconds or an HTTP-date; nil when absent
    /// or unreadable.
    static func retryAfterSeconds(_ value: String?, now: Date = Date()) -> Int? {
        guard let value = value?.trimmingSpaces, !value.isEmpty else { return nil }
        if let seconds = Int(value) { return max(0, seconds) }
        guard let date = httpDate(value) else { return nil }
        return max(0, Int((date.timeIntervalSince(now)).rounded(.up)))
    }

    /// An HTTP-date in its preferred form (RFC 9110, IMF-fixdate): "Sun, 06 Nov 1994 08:49:37 GMT".
    static func httpDate(_ text: String) -> Date? {
        let fields = text.split(separator: " ")
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        guard fields.count == 6, fields[0].count == 4, fields[0].hasSuffix(","), fields[5] == "GMT",
              fields[1].count == 2, let day = Int(fields[1]), (1...31).contains(day),
              let month = months.firstIndex(of: String(fields[2])),
              fields[3].count == 4, let year = Int(fields[3]) else { return nil }
        let clock = fields[4].split(separator: ":", omittingEmptySubsequences: false)
        guard clock.count == 3, clock.allSatisfy({ $0.count == 2 }),
              let hour = Int(clock[0]), let minute = Int(clock[1]), let second = Int(clock[2]),
              hour < 24, minute < 60, second < 61 else { return nil }
        // Days since 1970-01-01 in the proleptic Gregorian calendar (March-based years).
        let y = month < 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month < 2 ? month + 10 : month - 2) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146_097 + dayOfEra - 719_468
        return Date(timeIntervalSince1970: Double(days * 86_400 + hour * 3_600 + minute * 60 + second))
    }

    /// How long a rate-limited response asks to wait, in seconds: `Retry-After` (seconds or
    /// an HTTP date), else `X-RateLimit-Reset` (epoch seconds, as GitHub sends it, or seconds
    /// from now when it is small); nil when neither says.
    static func rateLimitWait(_ response: TransportResponse, now: Date = Date()) -> Int? {
        if let seconds = retryAfterSeconds(response.header("retry-after"), now: now) { return seconds }
        guard let text = response.header("x-ratelimit-reset"), let reset = Int(text.trimmingSpaces), reset >= 0 else { return nil }
        if reset < 1_000_000_000 { return reset } // a delta, as some APIs send it
        return max(0, reset - Int(now.timeIntervalSince1970.rounded(.down)))
    }

    /// The first `limit` bytes of a body as text, for error messages.
    static func snippet(_ body: UnsafeBufferPointer<UInt8>, limit: Int = 200) -> String {
        guard !body.isEmpty else { return "(empty body)" }
        let head = String(decoding: UnsafeBufferPointer(rebasing: body.prefix(limit)), as: UTF8.self)
        return body.count > limit ? head + "…" : head
    }

    /// Bytes as a quoted, escaped string for a message (control bytes as \u escapes).
    static func quoted(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        var out = "\""
        for scalar in String(decoding: bytes, as: UTF8.self).unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F:
                out += (scalar.value < 0x10 ? "\\u000" : "\\u00") + String(scalar.value, radix: 16, uppercase: true)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> [UInt8] {
        ConfigValue.string(text).jsonBytes
    }

    /// What a JSON value is, for a message ("an object", "the string \"x\"", "null").
    static func kind(of bytes: UnsafeBufferPointer<UInt8>) -> String {
        switch bytes.first {
        case UInt8(ascii: "{"): return "an object"
        case UInt8(ascii: "\""): return "the string " + String(decoding: UnsafeBufferPointer(rebasing: bytes.prefix(42)), as: UTF8.self)
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return String(decoding: bytes, as: UTF8.self)
        case UInt8(ascii: "n"): return "null"
        default: return "the number " + String(decoding: UnsafeBufferPointer(rebasing: bytes.prefix(40)), as: UTF8.self)
        }
    }
}

extension StringProtocol {
    /// Without the spaces and tabs around it (HTTP's optional whitespace).
    var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
