// Reading responses: RFC 6901 JSON pointers into a JSONSerialization tree, the Link header
// (RFC 8288), Retry-After, and re-serializing items as compact JSON.
import Foundation
import CPaging
import PagingPluginKit

/// An RFC 6901 JSON pointer: "" is the whole document, "/a/0/b~1c" walks object members and
/// array indices (~1 is "/", ~0 is "~").
struct JSONPointer: Sendable, Equatable, CustomStringConvertible {
    let text: String
    let tokens: [String]

    static let root = JSONPointer(text: "", tokens: [])

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

    /// The value at this pointer, or nil when a step does not exist.
    func resolve(_ document: Any) -> Any? {
        var current = document
        for token in tokens {
            if let object = current as? [String: Any] {
                guard let next = object[token] else { return nil }
                current = next
            } else if let array = current as? [Any] {
                guard let index = Int(token), token == String(index), index >= 0, index < array.count else { return nil }
                current = array[index]
            } else {
                return nil
            }
        }
        return current
    }

    var description: String { text.isEmpty ? "\"\" (the whole body)" : "\"\(text)\"" }
}

enum ResponseParsing {
    /// One item as compact JSON with sorted keys.
    static func serialize(_ item: Any) throws -> [UInt8] {
        Array(try JSONSerialization.data(withJSONObject: item, options: [.fragmentsAllowed, .sortedKeys, .withoutEscapingSlashes]))
    }

    /// A cursor value as key text: strings as they are, numbers in decimal; nil for null,
    /// missing, empty, or anything else.
    static func cursor(_ value: Any?) -> String? {
        guard let value, !(value is NSNull), !isJSONBool(value) else { return nil }
        if let text = value as? String { return text.isEmpty ? nil : text }
        if let number = value as? NSNumber { return number.stringValue }
        return nil
    }

    /// The URLs of a Link header by rel (`rel="next"`, `rel=prev`, `rel="prev first"` ...),
    /// resolved against `base`. The first link of each rel wins.
    static func links(_ header: String, base: URL?) -> [String: String] {
        var result: [String: String] = [:]
        var rest = Substring(header)
        while let open = rest.firstIndex(of: "<") {
            guard let close = rest[open...].firstIndex(of: ">") else { break }
            let target = String(rest[rest.index(after: open)..<close])
            rest = rest[rest.index(after: close)...]
            // Parameters run up to the next link (a "<" after a comma) or the end.
            let paramsEnd = rest.firstIndex(of: "<") ?? rest.endIndex
            let params = rest[..<paramsEnd]
            rest = rest[paramsEnd...]
            for param in params.split(separator: ";") {
                let pair = param.split(separator: "=", maxSplits: 1)
                guard pair.count == 2,
                      pair[0].trimmingCharacters(in: .whitespaces).lowercased() == "rel" else { continue }
                var value = pair[1].trimmingCharacters(in: .whitespaces)
                if value.hasSuffix(",") { value.removeLast() }
                value = value.trimmingCharacters(in: CharacterSet(charactersIn: "\" \t"))
                let resolved = URL(string: target, relativeTo: base)?.absoluteString ?? target
                for rel in value.lowercased().split(separator: " ") where result[String(rel)] == nil {
                    result[String(rel)] = resolved
                }
            }
        }
        return result
    }

    /// Retry-After as whole seconds from now: delta-seconds or an HTTP-date; nil when absent
    /// or unreadable.
    static func retryAfterSeconds(_ value: String?, now: Date = Date()) -> Int? {
        guard let value = value?.trimmingCharacters(in: .whitespaces), !value.isEmpty else { return nil }
        if let seconds = Int(value) { return max(0, seconds) }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: value) else { return nil }
        return max(0, Int((date.timeIntervalSince(now)).rounded(.up)))
    }

    /// The first `limit` bytes of a body as text, for error messages.
    static func snippet(_ data: Data?, limit: Int = 200) -> String {
        guard let data, !data.isEmpty else { return "(empty body)" }
        let head = String(decoding: data.prefix(limit), as: UTF8.self)
        return data.count > limit ? head + "…" : head
    }
}

/// Finds the items of a body that JSONSerialization has already validated, as byte ranges of
/// the body itself, so that each item is handed back without being re-serialized (which costs
/// ~25 µs an item with swift-corelibs-foundation, more than the whole parse of the page).
/// Items keep their member order and number spelling; whitespace outside strings is removed.
/// Any surprise returns nil, and the caller falls back to re-serializing.
struct RawJSONScanner {
    let bytes: [UInt8]

    init(_ data: Data) {
        bytes = Array(data)
    }

    /// The compact bytes of each element of the array at `pointer`.
    func items(at pointer: JSONPointer) -> [[UInt8]]? {
        guard var start = skipSpace(0) else { return nil }
        for token in pointer.tokens {
            guard let next = child(of: start, token) else { return nil }
            start = next
        }
        guard start < bytes.count, bytes[start] == UInt8(ascii: "[") else { return nil }
        var items: [[UInt8]] = []
        guard var i = skipSpace(start + 1) else { return nil }
        if bytes[i] == UInt8(ascii: "]") { return items }
        while true {
            guard let end = skipValue(i) else { return nil }
            items.append(compact(i..<end))
            guard let after = skipSpace(end) else { return nil }
            if bytes[after] == UInt8(ascii: "]") { return items }
            guard bytes[after] == UInt8(ascii: ","), let next = skipSpace(after + 1) else { return nil }
            i = next
        }
    }

    /// The start of the value reached by one pointer token from the value at `start`.
    private func child(of start: Int, _ token: String) -> Int? {
        switch bytes[start] {
        case UInt8(ascii: "{"):
            guard var i = skipSpace(start + 1) else { return nil }
            if bytes[i] == UInt8(ascii: "}") { return nil }
            var found: Int?
            while true {
                guard bytes[i] == UInt8(ascii: "\""), let keyEnd = skipString(i) else { return nil }
                let key = decodeString(i..<keyEnd)
                guard let colon = skipSpace(keyEnd), bytes[colon] == UInt8(ascii: ":"),
                      let value = skipSpace(colon + 1), let valueEnd = skipValue(value) else { return nil }
                if key == token { found = value } // the last duplicate wins, as in JSONSerialization
                guard let after = skipSpace(valueEnd) else { return nil }
                if bytes[after] == UInt8(ascii: "}") { return found }
                guard bytes[after] == UInt8(ascii: ","), let next = skipSpace(after + 1) else { return nil }
                i = next
            }
        case UInt8(ascii: "["):
            guard let index = Int(token), token == String(index), index >= 0,
                  var i = skipSpace(start + 1), bytes[i] != UInt8(ascii: "]") else { return nil }
            var current = 0
            while true {
                if current == index { return i }
                guard let end = skipValue(i), let after = skipSpace(end),
                      bytes[after] == UInt8(ascii: ","), let next = skipSpace(after + 1) else { return nil }
                i = next
                current += 1
            }
        default:
            return nil
        }
    }

    private func skipSpace(_ from: Int) -> Int? {
        var i = from
        while i < bytes.count {
            switch bytes[i] {
            case 0x20, 0x09, 0x0A, 0x0D: i += 1
            default: return i
            }
        }
        return nil
    }

    /// The index after the string starting at `start` (a quote).
    private func skipString(_ start: Int) -> Int? {
        var i = start + 1
        while i < bytes.count {
            switch bytes[i] {
            case UInt8(ascii: "\\"): i += 2
            case UInt8(ascii: "\""): return i + 1
            default: i += 1
            }
        }
        return nil
    }

    /// The index after the value starting at `start`.
    private func skipValue(_ start: Int) -> Int? {
        guard start < bytes.count else { return nil }
        switch bytes[start] {
        case UInt8(ascii: "\""):
            return skipString(start)
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            var i = start
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: "\""):
                    guard let end = skipString(i) else { return nil }
                    i = end
                    continue
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 { return i + 1 }
                default:
                    break
                }
                i += 1
            }
            return nil
        default: // number, true, false, null
            var i = start
            while i < bytes.count {
                switch bytes[i] {
                case UInt8(ascii: ","), UInt8(ascii: "]"), UInt8(ascii: "}"), 0x20, 0x09, 0x0A, 0x0D:
                    return i > start ? i : nil
                default:
                    i += 1
                }
            }
            return i > start ? i : nil
        }
    }

    private func decodeString(_ range: Range<Int>) -> String? {
        let inner = bytes[(range.lowerBound + 1)..<(range.upperBound - 1)]
        guard inner.contains(UInt8(ascii: "\\")) else { return String(decoding: inner, as: UTF8.self) }
        return (try? JSONSerialization.jsonObject(with: Data(bytes[range]), options: [.fragmentsAllowed])) as? String
    }

    /// The bytes of `range` without whitespace outside strings.
    private func compact(_ range: Range<Int>) -> [UInt8] {
        let slice = bytes[range]
        guard slice.contains(where: { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A || $0 == 0x0D }) else { return Array(slice) }
        var out: [UInt8] = []
        out.reserveCapacity(slice.count)
        var inString = false
        var escaped = false
        for byte in slice {
            if inString {
                out.append(byte)
                if escaped { escaped = false } else if byte == UInt8(ascii: "\\") { escaped = true } else if byte == UInt8(ascii: "\"") { inString = false }
                continue
            }
            switch byte {
            case 0x20, 0x09, 0x0A, 0x0D: continue
            case UInt8(ascii: "\""): inString = true
            default: break
            }
            out.append(byte)
        }
        return out
    }
}
