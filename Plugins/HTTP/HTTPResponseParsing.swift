// Reading responses: RFC 6901 JSON pointers (parsed from the config; the scanner resolves
// them), the Link header (RFC 8288), Retry-After and rate-limit headers, and what a response
// holds, said for error messages.
import FoundationEssentials
import CHTTPCore
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
        self.init(tokens: [name])
    }

    private init(text: String, tokens: [String]) {
        self.text = text
        self.tokens = tokens
    }

    /// The pointer of `tokens`.
    init(tokens: [String]) {
        self.init(text: tokens.map { "/" + $0.replacing("~", with: "~0").replacing("/", with: "~1") }.joined(), tokens: tokens)
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
    /// resolved against `base`. The first link of each rel wins. Read as RFC 8288 writes it:
    /// comma-separated `<target>` and `;`-separated parameters, whose values may be quoted
    /// strings holding any of `<>;,` (a value is never taken for a link or a parameter).
    static func links(_ header: String, base: String) -> (byRel: [String: String], unreadable: Bool) {
        // Bytes, not Characters: a header is ASCII in practice, and walking it by grapheme
        // cost ~13 µs a page.
        var result: [String: String] = [:]
        var reader = LinkReader(Array(header.utf8))
        while let (target, rels) = reader.next() {
            var resolved: String?
            for rel in rels where result[rel] == nil {
                resolved = resolved ?? resolve(String(decoding: target, as: UTF8.self), base: base)
                result[rel] = resolved
            }
        }
        return (result, reader.skipped)
    }

    /// Reads the link-values of a Link header one by one.
    private struct LinkReader {
        let bytes: [UInt8]
        var i = 0
        /// Whether a malformed link-value was skipped.
        var skipped = false
        /// Where a search for a target's closing ">" found none: none follows from there on.
        /// (Searched again from each "<", a header of "<a," repeated cost the square of its
        /// length: 25 s of the transfer thread for 63 KB.)
        private var noCloseFrom = Int.max

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        /// The next link's target and its rel values (lower case); nil at the end. A malformed
        /// link-value is skipped up to the next comma outside a quoted string.
        mutating func next() -> (target: ArraySlice<UInt8>, rels: [String])? {
            while i < bytes.count {
                skip(" \t,")
                guard i < bytes.count else { return nil }
                guard bytes[i] == UInt8(ascii: "<"), let close = closingBracket() else {
                    skipped = true
                    skipToComma()
                    continue
                }
                let target = bytes[(i + 1)..<close]
                i = close + 1
                var rels: [String] = []
                var wellFormed = true
                while true {
                    skip(" \t")
                    guard i < bytes.count, bytes[i] == UInt8(ascii: ";") else { break }
                    i += 1
                    skip(" \t")
                    let name = ResponseParsing.asciiLowercased(token())
                    skip(" \t")
                    var value: [UInt8] = []
                    if i < bytes.count, bytes[i] == UInt8(ascii: "=") {
                        i += 1
                        skip(" \t")
                        if i < bytes.count, bytes[i] == UInt8(ascii: "\"") {
                            guard let quoted = quotedString() else { wellFormed = false; break }
                            value = quoted
                        } else {
                            value = Array(token())
                        }
                    }
                    if name == "rel", rels.isEmpty {
                        rels = value.split(whereSeparator: { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }).map(ResponseParsing.asciiLowercased)
                    }
                }
                skip(" \t")
                if !wellFormed || (i < bytes.count && bytes[i] != UInt8(ascii: ",")) {
                    skipped = true
                    skipToComma()
                    continue
                }
                return (target, rels)
            }
            return nil
        }

        /// The index of the first ">" from `i`, if any.
        private mutating func closingBracket() -> Int? {
            guard i < noCloseFrom else { return nil }
            if let close = bytes[i...].firstIndex(of: UInt8(ascii: ">")) { return close }
            noCloseFrom = i
            return nil
        }

        private mutating func skip(_ set: StaticString) {
            let set = UnsafeBufferPointer(start: set.utf8Start, count: set.utf8CodeUnitCount)
            while i < bytes.count, set.contains(bytes[i]) { i += 1 }
        }

        /// A parameter name or an unquoted value: up to whitespace or one of `=;,`.
        private mutating func token() -> ArraySlice<UInt8> {
            let start = i
            while i < bytes.count, !" \t=;,\"".utf8.contains(bytes[i]) { i += 1 }
            return bytes[start..<i]
        }

        /// A quoted string from its opening quote, unescaped; nil when it does not end.
        private mutating func quotedString() -> [UInt8]? {
            var out: [UInt8] = []
            i += 1
            while i < bytes.count {
                let byte = bytes[i]
                i += 1
                if byte == UInt8(ascii: "\"") { return out }
                if byte == UInt8(ascii: "\\"), i < bytes.count {
                    out.append(bytes[i])
                    i += 1
                } else {
                    out.append(byte)
                }
            }
            return nil
        }

        /// Past the next comma that is not inside a quoted string (or to the end).
        private mutating func skipToComma() {
            var quoted = false
            while i < bytes.count {
                let byte = bytes[i]
                i += 1
                if quoted {
                    if byte == UInt8(ascii: "\\") { i += 1 } else if byte == UInt8(ascii: "\"") { quoted = false }
                } else if byte == UInt8(ascii: "\"") {
                    quoted = true
                } else if byte == UInt8(ascii: ",") {
                    return
                }
            }
        }
    }

    /// Whether `bytes` hold a control character (below 0x20, or DEL): a NUL among them.
    static func hasControlCharacter(_ bytes: some Sequence<UInt8>) -> Bool {
        bytes.contains { $0 < 0x20 || $0 == 0x7F }
    }

    /// `bytes` as text with ASCII letters in lower case (headers, schemes and host names are
    /// compared as libcurl reads them: byte by byte).
    static func asciiLowercased(_ bytes: some Collection<UInt8>) -> String {
        String(decoding: bytes.map(asciiLowercased), as: UTF8.self)
    }

    /// `bytes` as text, each byte that is not part of valid UTF-8 percent-encoded ("%E9"): a
    /// URL a server wrote in another encoding goes back byte for byte, not as U+FFFD.
    static func percentEncodingInvalidUTF8(_ bytes: Slice<UnsafeBufferPointer<UInt8>>) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var out: [UInt8] = []
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let lead = bytes[i]
            let length = lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2
            if i + length <= bytes.endIndex, String(validating: bytes[i..<(i + length)], as: UTF8.self) != nil {
                out += bytes[i..<(i + length)]
                i += length
            } else {
                out += Array("%\(String(lead, radix: 16, uppercase: true))".utf8)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `byte`, an ASCII capital made small.
    static func asciiLowercased(_ byte: UInt8) -> UInt8 {
        (65...90).contains(byte) ? byte | 0x20 : byte
    }

    /// A URL reference resolved against `base`, without its fragment. Absolute http(s) URLs
    /// and absolute paths, the usual ones, are done here on the bytes; anything else is left to
    /// Foundation's URL (a whole parse).
    static func resolve(_ target: String, base: String) -> String {
        // The fragment never goes to the server: without it, a link that only changes its
        // fragment is the same key (and a cycle found as one).
        var bytes = Array(target.utf8)
        if let hash = bytes.firstIndex(of: UInt8(ascii: "#")) { bytes.removeSubrange(hash...) }
        let target = String(decoding: bytes, as: UTF8.self)
        if startsIgnoringCase(bytes, with: "http://") || startsIgnoringCase(bytes, with: "https://") { return target }
        var baseBytes = Array(base.utf8)
        if let hash = baseBytes.firstIndex(of: UInt8(ascii: "#")) { baseBytes.removeSubrange(hash...) }
        // An empty reference is the base itself (RFC 3986 5.2.2).
        if bytes.isEmpty { return String(decoding: baseBytes, as: UTF8.self) }
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

    /// Whether `bytes` starts with the ASCII `prefix` (lower case), in any case.
    static func startsIgnoringCase(_ bytes: some Collection<UInt8>, with prefix: StaticString) -> Bool {
        let prefix = UnsafeBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount)
        guard bytes.count >= prefix.count else { return false }
        return zip(bytes, prefix).allSatisfy { asciiLowercased($0) == $1 }
    }

    /// Retry-After as whole seconds from now: delta-seconds (digits, RFC 9110 10.2.3; past Int,
    /// capped as X-RateLimit-Reset is) or an HTTP-date; nil when absent or unreadable. (`Int()`
    /// took "-5" for a wait of 0 s and "+5" for 5 s, and dropped 20 digits for no wait said.)
    static func retryAfterSeconds(_ value: String?, now: Date = Date()) -> Int? {
        guard let value = value?.trimmingSpaces, !value.isEmpty else { return nil }
        if value.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) { return Int(value) ?? Int.max }
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
    /// from now when it is small; a fraction is rounded up); nil when neither says.
    static func rateLimitWait(_ response: TransportResponse, now: Date = Date()) -> Int? {
        if let seconds = retryAfterSeconds(response.header("retry-after"), now: now) { return seconds }
        guard let text = response.header("x-ratelimit-reset"), let value = Double(text.trimmingSpaces), value.isFinite, value >= 0 else { return nil }
        let reset = value < 9e18 ? Int(value.rounded(.up)) : Int.max
        if reset < 1_000_000_000 { return reset } // a delta, as some APIs send it
        return max(0, reset - Int(now.timeIntervalSince1970.rounded(.down)))
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
        case UInt8(ascii: "["): return "an array"
        case UInt8(ascii: "\""):
            // Up to its closing quote, 40 bytes at most.
            var end = 1, escaped = false
            while end < min(bytes.count, 40), escaped || bytes[end] != UInt8(ascii: "\"") {
                escaped = !escaped && bytes[end] == UInt8(ascii: "\\")
                end += 1
            }
            let text = String(decoding: UnsafeBufferPointer(rebasing: bytes.prefix(end + 1)), as: UTF8.self)
            return "the string " + text + (end < bytes.count && bytes[end] == UInt8(ascii: "\"") ? "" : "…")
        case UInt8(ascii: "t"): return "true"
        case UInt8(ascii: "f"): return "false"
        case UInt8(ascii: "n"): return "null"
        default:
            let number = bytes.prefix(40).prefix { "-+.eE0123456789".utf8.contains($0) }
            return "the number " + String(decoding: UnsafeBufferPointer(rebasing: number), as: UTF8.self)
        }
    }

    /// What a scan says of an items pointer that does not resolve, after "the items pointer P":
    /// "does not resolve: /groups is null, not an array".
    static func unresolved(_ pointer: JSONPointer, _ problem: (problem: Int32, depth: Int, value: UnsafeBufferPointer<UInt8>)) -> String {
        let tokens = pointer.tokens
        let depth = min(problem.depth, tokens.count)
        let place = depth == 0 ? "the body" : JSONPointer(tokens: Array(tokens.prefix(depth))).text
        switch problem.problem {
        case Int32(HJ_PATH_NOT_ARRAY):
            return "resolves to \(kind(of: problem.value)), not an array"
        case Int32(HJ_PATH_MISSING) where depth < tokens.count:
            let object = problem.value.first == UInt8(ascii: "{")
            let what = object ? "member \"\(tokens[depth])\"" : "element \(tokens[depth])"
            return "does not resolve: \(place)\(place.contains("*") ? " (one of them)" : "") has no \(what)"
        default:
            let at = "\(place)\(place.contains("*") ? " (one of them)" : "")"
            if depth < tokens.count, problem.value.first == UInt8(ascii: "[") {
                // An array, and a token that names no element (RFC 6901: "0", or digits without a leading zero).
                return "does not resolve: \(at) is an array, and \"\(tokens[depth])\" is no index of it (0, 1, 2, ... without leading zeros, or *)"
            }
            let needed = depth < tokens.count && tokens[depth] == "*" ? "an array" : "an object"
            return "does not resolve: \(at) is \(kind(of: problem.value)), not \(needed)"
        }
    }
}

extension StringProtocol {
    /// Whether `needle`'s bytes occur in the text's UTF-8: a byte search, where the standard
    /// library's `contains` walks characters (a cost on every page's URL).
    func hasUTF8(_ needle: StaticString) -> Bool {
        let pattern = UnsafeBufferPointer(start: needle.utf8Start, count: needle.utf8CodeUnitCount)
        func search(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            guard let first = pattern.first else { return true }
            guard bytes.count >= pattern.count else { return false }
            for start in 0...(bytes.count - pattern.count) where bytes[start] == first {
                if pattern.indices.allSatisfy({ bytes[start + $0] == pattern[$0] }) { return true }
            }
            return false
        }
        return utf8.withContiguousStorageIfAvailable(search) ?? Array(utf8).withUnsafeBufferPointer(search)
    }

    /// Without the spaces and tabs around it (HTTP's optional whitespace).
    var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
