/// A parsed JSON document that keeps what Foundation's parser blurs: integers apart from other
/// numbers, booleans apart from numbers, and object keys in their order. Parse errors say where
/// (line and column) and what was expected.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    /// A number neither `int` nor `double` holds as written, kept as its JSON text: an integer
    /// outside Int64 (an id above 2^63), or a fraction or exponent with more than 15 significant
    /// digits (a Double may print another value back).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([(key: String, value: JSONValue)])

    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): true
        case let (.bool(a), .bool(b)): a == b
        case let (.int(a), .int(b)): a == b
        case let (.double(a), .double(b)): a == b
        case let (.number(a), .number(b)): a == b
        case let (.string(a), .string(b)): a == b
        case let (.array(a), .array(b)): a == b
        case let (.object(a), .object(b)): a.map(\.key) == b.map(\.key) && a.map(\.value) == b.map(\.value)
        default: false
        }
    }

    /// The JSON number `text` (already checked to be one) as `int`, `double` or, when neither
    /// holds it as written, `number`; nil when it is beyond Double's range.
    init?(number text: String) {
        if let value = Int64(text) {
            self = .int(value)
            return
        }
        guard let value = Double(text), value.isFinite else { return nil }
        let mantissa = text.utf8.prefix { $0 != UInt8(ascii: "e") && $0 != UInt8(ascii: "E") }
        let isInteger = mantissa.count == text.utf8.count && !mantissa.contains(UInt8(ascii: "."))
        let significantDigits = mantissa.filter { (0x30...0x39).contains($0) }.drop { $0 == 0x30 }.count
        // Below the normal doubles (1e-400 is 0, 1e-310 keeps a few digits): its text is its value.
        let underflows = significantDigits > 0 && value.magnitude < Double.leastNormalMagnitude
        self = isInteger || significantDigits > 15 || underflows ? .number(text) : .double(value)
    }

    /// A number's value as a Double (rounded for `number`); nil for anything else.
    public var doubleValue: Double? {
        switch self {
        case .int(let number): Double(number)
        case .double(let number): number
        case .number(let text): Double(text)
        default: nil
        }
    }

    /// The value of `key` in an object (the last one, if repeated), or `nil`.
    public subscript(key: String) -> JSONValue? {
        guard case .object(let members) = self else { return nil }
        return members.last { $0.key == key }?.value
    }

    /// What kind of value this is, for error messages: "a string", "an object", ...
    public var kindDescription: String {
        switch self {
        case .null: "null"
        case .bool: "a boolean"
        case .int: "an integer"
        case .double, .number: "a number"
        case .string: "a string"
        case .array: "an array"
        case .object: "an object"
        }
    }

    /// The path of the first key that an object, anywhere in the value, holds twice (the parser
    /// keeps both, and a lookup takes the last): `path` followed by `.KEY` and `[INDEX]` steps;
    /// nil when no key repeats.
    package func repeatedKey(at path: String) -> String? {
        switch self {
        case .object(let members):
            var seen: Set<String> = []
            for member in members {
                let memberPath = path.isEmpty ? member.key : "\(path).\(member.key)"
                guard seen.insert(member.key).inserted else { return memberPath }
                if let repeated = member.value.repeatedKey(at: memberPath) { return repeated }
            }
        case .array(let values):
            for (index, element) in values.enumerated() {
                if let repeated = element.repeatedKey(at: "\(path)[\(index)]") { return repeated }
            }
        default:
            break
        }
        return nil
    }

    /// Compact JSON text of the value.
    public var jsonText: String {
        var out = ""
        write(to: &out)
        return out
    }

    private func write(to out: inout String) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .int(let value): out += String(value)
        case .double(let value): out += value.isFinite ? "\(value)" : "null"
        case .number(let text): out += text
        case .string(let value): Self.writeString(value, to: &out)
        case .array(let values):
            out += "["
            for (index, value) in values.enumerated() {
                if index > 0 { out += "," }
                value.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { out += "," }
                Self.writeString(member.key, to: &out)
                out += ":"
                member.value.write(to: &out)
            }
            out += "}"
        }
    }

    private static func writeString(_ value: String, to out: inout String) {
        out += "\""
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}

/// Why a JSON text could not be parsed, and where.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public let line: Int
    public let column: Int
    public let message: String

    public var description: String { "line \(line), column \(column): \(message)" }
}

extension JSONValue {
    /// Parses a complete JSON document (RFC 8259). Invalid UTF-8, trailing text and nesting
    /// deeper than 512 levels are errors.
    public static func parse(_ bytes: some Collection<UInt8>) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes: Array(bytes))
        return try parser.parseDocument()
    }

    public static func parse(_ text: String) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8))
    }
}

private struct JSONParser {
    let bytes: [UInt8]
    var index = 0
    var depth = 0

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    mutating func parseDocument() throws(JSONParseError) -> JSONValue {
        if String(validating: bytes, as: UTF8.self) == nil {
            throw error("the text is not valid UTF-8", at: firstInvalidUTF8Offset())
        }
        if bytes.starts(with: [0xEF, 0xBB, 0xBF]) { index = 3 }
        skipWhitespace()
        let value = try parseValue()
        skipWhitespace()
        guard index == bytes.count else { throw error("unexpected text after the JSON value") }
        return value
    }

    mutating func parseValue() throws(JSONParseError) -> JSONValue {
        guard index < bytes.count else { throw error("unexpected end of text, expected a value") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectWord("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character '\(Self.printable(bytes[index]))', expected a value")
        }
    }

    mutating func parseObject() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var members: [(key: String, value: JSONValue)] = []
        skipWhitespace()
        if peek(UInt8(ascii: "}")) { index += 1; return .object(members) }
        while true {
            skipWhitespace()
            guard peek(UInt8(ascii: "\"")) else { throw error("expected a string key in double quotes") }
            let key = try parseString()
            skipWhitespace()
            guard peek(UInt8(ascii: ":")) else { throw error("expected ':' after the key \"\(key)\"") }
            index += 1
            skipWhitespace()
            members.append((key, try parseValue()))
            skipWhitespace()
            if peek(UInt8(ascii: ",")) { index += 1; continue }
            if peek(UInt8(ascii: "}")) { index += 1; return .object(members) }
            throw error("expected ',' or '}' in an object")
        }
    }

    mutating func parseArray() throws(JSONParseError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        index += 1
        var values: [JSONValue] = []
        skipWhitespace()
        if peek(UInt8(ascii: "]")) { index += 1; return .array(values) }
        while true {
            skipWhitespace()
            values.append(try parseValue())
            skipWhitespace()
            if peek(UInt8(ascii: ",")) { index += 1; continue }
            if peek(UInt8(ascii: "]")) { index += 1; return .array(values) }
            throw error("expected ',' or ']' in an array")
        }
    }

    mutating func parseString() throws(JSONParseError) -> String {
        index += 1
        var scalars = String.UnicodeScalarView()
        var runStart = index
        func flush(_ end: Int) {
            if end > runStart { scalars.append(contentsOf: String(decoding: bytes[runStart..<end], as: UTF8.self).unicodeScalars) }
        }
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                flush(index)
                index += 1
                return String(scalars)
            case UInt8(ascii: "\\"):
                flush(index)
                index += 1
                scalars.append(try parseEscape())
                runStart = index
            case 0..<0x20:
                throw error("a control character must be escaped inside a string")
            default:
                index += 1
            }
        }
        throw error("unterminated string")
    }

    mutating func parseEscape() throws(JSONParseError) -> Unicode.Scalar {
        guard index < bytes.count else { throw error("unterminated escape") }
        let byte = bytes[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let high = try parseHex4()
            if (0xD800..<0xDC00).contains(high) {
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u") else {
                    throw error("a high surrogate must be followed by a low surrogate")
                }
                index += 2
                let low = try parseHex4()
                guard (0xDC00..<0xE000).contains(low) else { throw error("invalid low surrogate") }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))!
            }
            guard let scalar = Unicode.Scalar(high) else { throw error("a lone low surrogate is not a character") }
            return scalar
        default:
            throw error("invalid escape '\\\(Self.printable(byte))'")
        }
    }

    mutating func parseHex4() throws(JSONParseError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("expected 4 hex digits after \\u") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error("expected a hex digit after \\u")
            }
            value = value * 16 + UInt32(digit)
            index += 1
        }
        return value
    }

    mutating func parseNumber() throws(JSONParseError) -> JSONValue {
        let start = index
        if peek(UInt8(ascii: "-")) { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw error("a number cannot have leading zeros") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if peek(UInt8(ascii: ".")) {
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit after '.'") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if peek(UInt8(ascii: "e")) || peek(UInt8(ascii: "E")) {
            index += 1
            if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("expected a digit in the exponent") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        guard let value = JSONValue(number: text) else { throw error("the number \(text) is out of range", at: start) }
        return value
    }

    mutating func expectWord(_ word: String) throws(JSONParseError) {
        let utf8 = Array(word.utf8)
        guard bytes[index...].starts(with: utf8) else { throw error("unexpected character, expected \(word)") }
        index += utf8.count
    }

    mutating func enter() throws(JSONParseError) {
        depth += 1
        if depth > 512 { throw error("nesting deeper than 512 levels") }
    }

    mutating func skipWhitespace() {
        while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
    }

    func peek(_ byte: UInt8) -> Bool { index < bytes.count && bytes[index] == byte }
    func isDigit(_ byte: UInt8) -> Bool { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) }

    static func printable(_ byte: UInt8) -> String {
        (0x20..<0x7F).contains(byte) ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
    }

    func firstInvalidUTF8Offset() -> Int {
        var offset = 0
        while offset < bytes.count {
            var end = offset + 1
            while end < bytes.count, end - offset < 4, bytes[end] & 0xC0 == 0x80 { end += 1 }
            if String(validating: bytes[offset..<end], as: UTF8.self) == nil { return offset }
            offset = end
        }
        return bytes.count
    }

    func error(_ message: String, at offset: Int? = nil) -> JSONParseError {
        let offset = min(offset ?? index, bytes.count)
        var line = 1
        var column = 1
        for byte in bytes[..<offset] {
            if byte == UInt8(ascii: "\n") { line += 1; column = 1 } else if byte & 0xC0 != 0x80 { column += 1 }
        }
        return JSONParseError(line: line, column: column, message: message)
    }
}
