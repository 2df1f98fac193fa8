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
