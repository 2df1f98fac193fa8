// A JSON value of the source's config, read with FoundationEssentials' JSONDecoder and typed
// strictly (true is not 1, 1.5 is not an integer), so that every key's error can say what it
// expected and what it got. Whole numbers that fit 64 bits stay exact (a POST body template
// sends 9007199254740993 as written, not as the nearest Double).
import FoundationEssentials

enum ConfigValue: Codable, Sendable, CustomStringConvertible {
    case null
    case bool(Bool)
    /// A whole number within Int64.
    case integer(Int64)
    /// Any other number.
    case number(Double)
    case string(String)
    case array([ConfigValue])
    case object([String: ConfigValue])

    /// Parses JSON text.
    init(json: String) throws {
        self = try JSONDecoder().decode(ConfigValue.self, from: Data(json.utf8))
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let flag = try? container.decode(Bool.self) { self = .bool(flag) }
        else if let whole = try? container.decode(Int64.self) { self = .integer(whole) }
        else if let number = try? container.decode(Double.self) { self = .number(number) }
        else if let text = try? container.decode(String.self) { self = .string(text) }
        else if let list = try? container.decode([ConfigValue].self) { self = .array(list) }
        else { self = .object(try container.decode([String: ConfigValue].self)) }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let flag): try container.encode(flag)
        case .integer(let whole): try container.encode(whole)
        case .number(let number):
            if let whole = Int64(exactly: number) { try container.encode(whole) } else { try container.encode(number) }
        case .string(let text): try container.encode(text)
        case .array(let list): try container.encode(list)
        case .object(let members): try container.encode(members)
        }
    }

    /// The value as JSON text, object members sorted by name.
    var jsonBytes: [UInt8] {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(self)) ?? Data("null".utf8))
    }

    var string: String? { if case .string(let text) = self { text } else { nil } }
    var object: [String: ConfigValue]? { if case .object(let members) = self { members } else { nil } }
    var array: [ConfigValue]? { if case .array(let list) = self { list } else { nil } }
    var bool: Bool? { if case .bool(let flag) = self { flag } else { nil } }
    var number: Double? {
        switch self {
        case .integer(let whole): Double(whole)
        case .number(let number): number
        default: nil
        }
    }
    /// An array of strings only.
    var strings: [String]? {
        guard case .array(let list) = self else { return nil }
        let texts = list.compactMap(\.string)
        return texts.count == list.count ? texts : nil
    }

    /// A whole number (not a fraction, not a boolean) of at most 15 digits.
    var integer: Int? {
        switch self {
        case .integer(let whole) where whole.magnitude < 1_000_000_000_000_000: Int(whole)
        case .number(let number) where number == number.rounded() && abs(number) < 1e15: Int(number)
        default: nil
        }
    }

    /// A short description for error messages: "the string \"x\"", "an array", "null".
    var description: String {
        switch self {
        case .null: "null"
        case .bool(let flag): flag ? "true" : "false"
        case .integer(let whole): "the number \(whole)"
        case .number(let number): "the number " + (integer.map(String.init) ?? String(number))
        case .string(let text): "the string \"\(text.count > 40 ? String(text.prefix(40)) + "…" : text)\""
        case .array: "an array"
        case .object: "an object"
        }
    }
}
