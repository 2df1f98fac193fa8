import Foundation
import PagingHost
import Testing

/// An item for the tables: its text, where «C3 A9» stands for raw bytes given in hex.
struct JSONItem: Sendable, CustomTestStringConvertible {
    let bytes: [UInt8]

    init(_ text: String) {
        var bytes: [UInt8] = []
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "«") {
            bytes += Array(rest[..<open].utf8)
            let close = rest[open...].firstIndex(of: "»")!
            bytes += rest[rest.index(after: open)..<close].split(separator: " ").map { UInt8($0, radix: 16)! }
            rest = rest[rest.index(after: close)...]
        }
        self.bytes = bytes + Array(rest.utf8)
    }

    init(bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Printable ASCII as is, other bytes as «XX».
    var testDescription: String {
        bytes.prefix(80).map { (0x20...0x7E).contains($0) ? String(UnicodeScalar($0)) : "«\($0 < 0x10 ? "0" : "")\(String($0, radix: 16, uppercase: true))»" }.joined()
            + (bytes.count > 80 ? "… (\(bytes.count) bytes)" : "")
    }
}

private func validate(_ item: JSONItem) -> JSONValidationError? { JSONValidator.validate(item.bytes) }

private func validate(_ text: String) -> JSONValidationError? { JSONValidator.validate(Array(text.utf8)) }

@Suite("JSONValidator")
struct JSONValidatorTests {
    // MARK: - Tables

    /// One JSON value each (JSONTestSuite's y_ files and the escaped surrogates of its i_ files).
    static let accepted: [JSONItem] = acceptedTexts.map(JSONItem.init)

    static let acceptedTexts: [String] = [
        // Structure and whitespace
        "[[]   ]", "[]", "{}", "[\"\"]", "[false]", "[null, 1, \"1\", {}]", "[null]", "[1\n]", " [1]",
        "[1,null,null,null,2]", "[2] ", "\"asd\"", "null", "true", "false", "2", "-0.1", "\"\"", " [] ", "[\"a\"]\n",
        "[true]", " \t\r\n{ \"a\" \t:\r\n[ 1 , 2 ]\n}\r\n", "[[[[[[[[[[[[[[[[[[[\"a\"]]]]]]]]]]]]]]]]]]]",
        "{\"a\":[{\"b\":{\"c\":[[],{}]}}],\"d\":{}}", "[{}]", "[{}, [], {\"\":[]}]", "\t0\t",
        // Numbers
        "[123e65]", "[0e+1]", "[0e1]", "[ 4]", "[-0.000000000000000000000000000000000000000000000000000000000000000000000001]",
        "[20e1]", "[-0]", "[-123]", "[-1]", "[1E22]", "[1E-2]", "[1E+2]", "[123e45]", "[123.456e78]", "[1e-2]",
        "[1e+2]", "[123]", "[123.456789]", "[100000000000000000000]", "-0", "0", "1.0", "-0e-0", "0.0E0", "9",
        "[1.5e+9999]", "[-1e+9999]", "[-123123e100000]", "[123123e-100000]", "[1e00]", "[0.000]", "10", "-10.01e+01",
        "[123456789012345678901234567890]", "1E400",
        // Objects
        "{\"asd\":\"sdf\", \"dfg\":\"fgh\"}", "{\"a\":\"b\",\"a\":\"c\"}", "{\"a\":\"b\",\"a\":\"b\"}", "{\"\":0}",
        "{\"foo\\u0000bar\": 42}", "{ \"min\": -1.0e+28, \"max\": 1.0e+28 }", "{\"x\":[{\"id\": \"xxx\"}], \"id\": \"xxx\"}",
        "{\"a\":[]}", "{\"title\":\"\\u041f\\u043e\\u043b\\u0442\\u043e\\u0440\\u0430 \\u0417\\u0435\\u043c\\u043b\\u0435\\u043a\\u043e\\u043f\\u0430\" }",
        "{\n\"a\": \"b\"\n}", "{\"id\":123,\"name\":\"item-123\",\"tags\":[\"a\",\"b\"],\"score\":0.5,\"ok\":true,\"none\":null}",
        // Strings: escapes
        "[\"\\u0060\\u012a\\u12AB\"]", "[\"\\uD801\\udc37\"]", "[\"\\ud83d\\ude39\\ud83d\\udc8d\"]", "[\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"]",
        "[\"\\\\u0000\"]", "[\"\\\"\"]", "[\"a/*b*/c/*d//e\"]", "[\"\\\\a\"]", "[\"\\\\n\"]", "[\"\\u0012\"]", "[\"\\uFFFF\"]",
        "[\"\\uDBFF\\uDFFF\"]", "[\"new\\u00A0line\"]", "[\"\\u0000\"]", "[\"\\u002c\"]", "[\"\\uD834\\uDd1e\"]", "[\"\\u0821\"]",
        "[\"\\u0123\"]", "[\"\\u0061\\u30af\\u30EA\\u30b9\"]", "[\"new\\u000Aline\"]", "[\"\\u005C\"]", "[\"\\uDBFF\\uDFFE\"]",
        "[\"\\uD83F\\uDFFE\"]", "[\"\\u200B\"]", "[\"\\u2064\"]", "[\"\\uFDD0\"]", "[\"\\uFFFE\"]", "[\"\\u0022\"]", "\"\\/\"",
        "\"\\u00aB\\u00Ab\"", "\"\\\\\\\\\\\\\\\\\"",
        // Escaped surrogates that do not pair up: the grammar allows them
        "[\"\\uDADA\"]", "[\"\\uD888\\u1234\"]", "[\"\\uDFAA\"]", "[\"\\uD800\\uD800\"]", "[\"\\ud800abc\"]", "[\"\\uDd1e\\uD834\"]",
        "[\"\\uD800\\n\"]",
        // Strings: raw characters
        "[\"asd\"]", "[ \"asd\"]", "[\"asd \"]", "\" \"", "[\"π\"]", "[\"𛿿\"]", "[\"⍂㈴⍂\"]", "[\"€𝄞\"]", "[\"aa\"]",
        "[\"a«7F»\"]", "[\"«E2 80 A8»\"]", "[\"«E2 80 A9»\"]", "[\"«EF BF BF»\"]", "[\"«F4 8F BF BF»\"]",
        "[\"«C2 80»\"]", "[\"«DF BF»\"]", "[\"«E0 A0 80»\"]", "[\"«ED 9F BF»\"]", "[\"«EE 80 80»\"]", "[\"«F0 90 80 80»\"]",
        "[\"«EF BB BF»\"]", "\"«F0 9F 98 80»«F0 9F 98 80»é«E2 82 AC»\"", "\"abcdefghijklmnopqrstuvwxyz é 0123456789 ~!#$%&'()*+,-./:;<=>?@[]^_`{|}\"",
        "{\"κλειδί\":\"τιμή\",\"キー\":\"値\"}",
    ]

    /// Not one JSON value in valid UTF-8 (JSONTestSuite's n_ files, and its i_ files on UTF-8).
    static let refused: [JSONItem] = refusedTexts.map(JSONItem.init)

    static let refusedTexts: [String] = [
        // Nothing
        "", " ", "\t\n\r ",
        // Arrays
        "[1 true]", "[a«E5»]", "[\"\": 1]", "[\"\"],", "[,1]", "[1,,2]", "[\"x\",,]", "[\"x\"]]", "[\"\",]", "[\"x\"", "[x",
        "[3[4]]", "[«FF»]", "[1:2]", "[,]", "[-]", "[   , \"\"]", "[\"a\",\n4\n,1,", "[1,]", "[1,,]", "[\"«0B»a\"\\f]",
        "[*]", "[\"\"", "[1,", "[1,\n1\n,1", "[{}", "[\"a\" «0C»]", "[", "]", "[«00»]", "[}", "{]", "[[]", "[]]",
        // Numbers
        "[++1234]", "[+1]", "[+Inf]", "[-01]", "[-1.0.]", "[-2.]", "[-NaN]", "[.-1]", "[.2e-3]", "[0.1.2]", "[0.3e+]",
        "[0.3e]", "[0.e1]", "[0E+]", "[0E]", "[0e+]", "[0e]", "[1.0e+]", "[1.0e-]", "[1.0e]", "[1 000.0]", "[1eE2]",
        "[2.e+3]", "[2.e-3]", "[2.e3]", "[9.e+]", "[Inf]", "[NaN]", "[１]", "[1+2]", "[0x1]", "[0x42]", "[Infinity]",
        "[0e+-1]", "[-123.123foo]", "[123«E5»]", "[1e1«E5»]", "[0«E5»]", "[-Infinity]", "[-foo]", "[- 1]", "[-012]",
        "[-.123]", "[-1x]", "[1ea]", "[1e«E5»]", "[1.]", "[.123]", "[1.2a-3]", "[1.8011670033376514H-308]", "[012]",
        "-", "00", "01", "1.", ".1", "1e", "1e+", "1e-", "-e1", "+0", "0.e", "1.5e", "--1", "1e1.5", "0x", "1_000", "NaN",
        "Infinity", "-Infinity", "[1,2,3,+4]",
        // Objects
        "{[: \"x\"}", "{\"x\", null}", "{\"x\"::\"b\"}", "{🇨🇭}", "{\"a\":\"a\" 123}", "{key: 'value'}", "{\"«B9»\":\"0\",}",
        "{\"a\" b}", "{:\"b\"}", "{\"a\" \"b\"}", "{\"a\":", "{\"a\"", "{1:1}", "{9999E9999:1}", "{null:null,null:null}",
        "{\"id\":0,,,,,}", "{'a':0}", "{\"id\":0,}", "{\"a\":\"b\"}/**/", "{\"a\":\"b\"}/**//", "{\"a\":\"b\"}//",
        "{\"a\":\"b\"}/", "{\"a\":\"b\",,\"c\":\"d\"}", "{a: \"b\"}", "{\"a\":\"a", "{ \"foo\" : \"bar\", \"a\" }",
        "{\"a\":\"b\"}#", "{ \"foo\" : \"bar\" ", "{\"a\" : \"b\",}", "{\"a\":1 \"b\":2}", "{,}", "{\"a\":1,", "{\"a\"}",
        "{\"a\":}", "{\"a\":1}}", "{{}}", "{[]:1}", "{\"a\":/*comment*/\"b\"}", "{\"a\":true} \"x\"",
        // Strings
        "[\"\\uD800\\\"]", "[\"\\uD800\\u\"]", "[\"\\uD800\\u1\"]", "[\"\\uD800\\u1x\"]", "[é]", "[\"\\x00\"]", "[\"\\\\\\\"]",
        "[\"\\\t\"]", "[\"\\🌀\"]", "[\"\\\"]", "[\"\\u00A\"]", "[\"\\ud834\\udd\"]", "[\"\\ud800\\ud800\\x\"]", "[\"\\uqqqq\"]",
        "[\"\\U0041\"]", "[\"\\a\"]", "[\"\\«E5»\"]", "[\"\\u«E5»\"]", "[\"a«00»a\"]", "[\"new\nline\"]", "[\"\t\"]",
        "\"\\UA66D\"", "\"\"x", "[\"\\u 123\"]", "[\"\\u-123\"]", "[\"\\u+123\"]", "[\"\\u0x12\"]", "[\"\\u12_3\"]",
        "\"", "'single quote'", "abc", "[\"a\\", "\"\\u", "\"\\u12", "\"abc", "[\"«1F»\"]", "[\"«0D»\"]", "\"\\", "\"\\'\"",
        // Invalid UTF-8 (strict: no overlong forms, no encoded surrogates, nothing above U+10FFFF)
        "[\"«FF»\"]", "[\"«E0 FF»\"]", "[\"«C0 AF»\"]", "[\"«C1 BF»\"]", "[\"«E0 80 AF»\"]", "[\"«E0 9F BF»\"]",
        "[\"«F0 80 80 AF»\"]", "[\"«F0 8F BF BF»\"]", "[\"«ED A0 80»\"]", "[\"«ED BF BF»\"]", "[\"«ED A0 BD ED B8 80»\"]",
        "[\"«F4 90 80 80»\"]", "[\"«F5 80 80 80»\"]", "[\"«F8 88 80 80 80»\"]", "[\"«FC 84 80 80 80 80»\"]", "[\"«C2»\"]",
        "[\"«E2 82»\"]", "[\"«F0 9F 98»\"]", "[\"«80»\"]", "[\"«BF»\"]", "[\"«FE»\"]", "[\"«E6 97»", "\"«C3 28»\"",
        "[\"«E2 28 A1»\"]", "[\"«F0 28 8C BC»\"]", "[\"«F0 90 28 BC»\"]", "[\"«F0 90 8C 28»\"]", "[\"«C3»", "\"«F0»",
        "[\"a«C3»\"]", "[\"«E9»\"]", "\"«E9»\"", "«FF»", "[«C3 A9»]", "«C3»",
        // Structure
        "<.>", "[<null>]", "[1]x", "[1]]", "[\"asd]", "aå", "[True]", "1]", "{\"x\": true,", "[][]", "«EF BB BF»{}",
        "«EF BB BF»", "«00»", "2@", "{}}", "{\"\":", "['", "[,", "[{", "[\"a", "{\"a", "{'a'", "[\"\\{[\"\\{[\"\\{[\"\\{",
        "é", "*", "{\"a\":\"b\"}#{}", "[\\u000A\"\"]", "[1", "[ false, nul", "[ true, fals", "[ false, tru", "{\"asd\":\"asd\"",
        "å", "[«E2 81 A0»]", "[«0C»]", "<!DOCTYPE html>", "nul", "tru", "fals", "truth", "nulls", "[null", "{\"a\":true}?",
        "[1 2]", "[\"a\" \"b\"]", "[]  x", "1 2", "[«7F»]", "«7F»", "[«0B»]", "[«C2 A0»]", "[«E3 80 80»]", "{}«00»", "tRue",
        "nULL", "FALSE", "[tru]", "[fals]", "[nul]", "[truee]", "[null,]", "t", "n", "f", "[t", "[fa", "[nu", "falsee",
    ]

    @Test(arguments: accepted)
    func accepts(_ item: JSONItem) {
        #expect(validate(item) == nil)
    }

    @Test(arguments: refused)
    func refuses(_ item: JSONItem) {
        #expect(validate(item) != nil)
    }

    // MARK: - What and where

    struct Expected: Sendable, CustomTestStringConvertible {
        let item: JSONItem
        let message: String

        init(_ text: String, _ message: String) {
            item = JSONItem(text)
            self.message = message
        }

        var testDescription: String { item.testDescription }
    }

    static let messages: [Expected] = [
        Expected("", "empty item"),
        Expected("  \n", "empty item (only whitespace)"),
        Expected("[1,2,]", "unexpected ']' at byte 5 (expected a value)"),
        Expected("[1,2", "unexpected end of the item at byte 4 (expected ',' or ']')"),
        Expected("[1 2]", "unexpected '2' at byte 3 (expected ',' or ']')"),
        Expected("1 2", "trailing data after the value at byte 2"),
        Expected("[1]  ]", "trailing data after the value at byte 5"),
        Expected("{\"a\":1]", "unexpected ']' at byte 6 (expected ',' or '}')"),
        Expected("{\"a\":1", "unexpected end of the item at byte 6 (expected ',' or '}')"),
        Expected("{\"a\" 1}", "unexpected '1' at byte 5 (expected ':')"),
        Expected("{\"a\"", "unexpected end of the item at byte 4 (expected ':')"),
        Expected("{1:2}", "unexpected '1' at byte 1 (expected a string key or '}')"),
        Expected("{", "unexpected end of the item at byte 1 (expected a string key or '}')"),
        Expected("{\"a\":1,}", "unexpected '}' at byte 7 (expected a string key)"),
        Expected("{\"a\":1,", "unexpected end of the item at byte 7 (expected a string key)"),
        Expected("{\"a\":", "unexpected end of the item at byte 5 (expected a value)"),
        Expected("[\"ab«FF»\"]", "invalid UTF-8 at byte 4"),
        Expected("[\"«ED A0 80»\"]", "invalid UTF-8 at byte 2"),
        Expected("[\"«F4 90 80 80»\"]", "invalid UTF-8 at byte 2"),
        Expected("[\"«C0 AF»\"]", "invalid UTF-8 at byte 2"),
        Expected("[\"é«E2 82»", "invalid UTF-8 at byte 4"),
        Expected("[«FF»]", "invalid UTF-8 at byte 1"),
        Expected("\"a\nb\"", "unescaped control character U+000A in a string at byte 2"),
        Expected("\"«00»\"", "unescaped control character U+0000 in a string at byte 1"),
        Expected("\"\\x\"", "invalid escape '\\x' at byte 1"),
        Expected("[\"\\«C3 A9»\"]", "invalid escape at byte 2"),
        Expected("\"\\u12G4\"", "unexpected 'G' at byte 5 (expected a hex digit)"),
        Expected("\"\\u12", "unexpected end of the item at byte 5 (expected a hex digit)"),
        Expected("\"abc", "unexpected end of the item at byte 4 (expected the closing '\"' of a string)"),
        Expected("\"ab\\", "unexpected end of the item at byte 4 (expected an escape after '\\')"),
        Expected("012", "leading zero in a number at byte 0"),
        Expected("[-00]", "leading zero in a number at byte 2"),
        Expected("-", "unexpected end of the item at byte 1 (expected a digit)"),
        Expected("[-x]", "unexpected 'x' at byte 2 (expected a digit)"),
        Expected("1.e3", "unexpected 'e' at byte 2 (expected a digit)"),
        Expected("1e+", "unexpected end of the item at byte 3 (expected a digit)"),
        Expected("[.5]", "unexpected '.' at byte 1 (expected a value)"),
        Expected("[tru]", "unexpected ']' at byte 4 (expected the literal true)"),
        Expected("nul", "unexpected end of the item at byte 3 (expected the literal null)"),
        Expected("[nan]", "unexpected 'a' at byte 2 (expected the literal null)"),
        Expected("falsy", "unexpected 'y' at byte 4 (expected the literal false)"),
        Expected("truex", "trailing data after the value at byte 4"),
        Expected("[NaN]", "unexpected 'N' at byte 1 (expected a value)"),
        Expected("[é]", "unexpected U+00E9 at byte 1 (expected a value)"),
        Expected("[😀]", "unexpected U+1F600 at byte 1 (expected a value)"),
        Expected("«EF BB BF»{}", "unexpected U+FEFF at byte 0 (expected a value)"),
        Expected("[«01»]", "unexpected U+0001 at byte 1 (expected a value)"),
        Expected("[\"a\" «0C»]", "unexpected U+000C at byte 5 (expected ',' or ']')"),
        Expected(String(repeating: "[", count: 513), "nesting deeper than 512 at byte 512"),
        Expected(String(repeating: "{\"a\":", count: 600), "nesting deeper than 512 at byte 2560"),
    ]

    @Test(arguments: messages)
    func saysWhatAndWhere(_ expected: Expected) {
        #expect(validate(expected.item)?.description == expected.message)
    }

    @Test func errorsCarryTheirProblemAndOffset() {
        #expect(validate("[1,]") == JSONValidationError(.unexpected("]", expected: .value), at: 3))
        #expect(validate("\"\u{1F}\"") == JSONValidationError(.controlCharacter(0x1F), at: 1))
        #expect(validate("[1") == JSONValidationError(.unexpectedEnd(expected: .commaOrArrayEnd), at: 2))
        #expect(validate("0 1") == JSONValidationError(.trailingData, at: 2))
        #expect(validate("-01") == JSONValidationError(.leadingZero, at: 1))
        #expect(validate("\"\\q\"") == JSONValidationError(.invalidEscape(UInt8(ascii: "q")), at: 1))
    }

    /// An item is exactly the bytes of its buffer: what lies around it is not read.
    @Test func readsOnlyTheItemsBytes() {
        let bytes = Array("[1]]]".utf8)
        bytes.withUnsafeBytes { all in
            #expect(JSONValidator.validate(UnsafeRawBufferPointer(rebasing: all[0..<3])) == nil)
            #expect(JSONValidator.validate(UnsafeRawBufferPointer(rebasing: all[0..<2]))
                == JSONValidationError(.unexpectedEnd(expected: .commaOrArrayEnd), at: 2))
            #expect(JSONValidator.validate(UnsafeRawBufferPointer(rebasing: all[1..<2])) == nil)
            #expect(JSONValidator.validate(UnsafeRawBufferPointer(rebasing: all[1..<1]))?.problem == .empty)
        }
        #expect(JSONValidator.validate(UnsafeRawBufferPointer(start: nil, count: 0)) == JSONValidationError(.empty, at: 0))
    }

    /// Every table item placed against an unreadable page, after it and before it: reading one
    /// byte outside the item would crash.
    @Test func neverReadsPastEitherEnd() throws {
        let page = Int(sysconf(Int32(_SC_PAGESIZE)))
        let mapped = try #require(mmap(nil, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0))
        try #require(mapped != UnsafeMutableRawPointer(bitPattern: -1))
        defer { munmap(mapped, 3 * page) }
        #expect(mprotect(mapped, page, PROT_NONE) == 0)
        #expect(mprotect(mapped + 2 * page, page, PROT_NONE) == 0)
        let middle = mapped + page
        for item in Self.accepted + Self.refused + Self.messages.map(\.item) where item.bytes.count <= page {
            let expected = validate(item)
            for start in [middle, middle + (page - item.bytes.count)] {
                item.bytes.withUnsafeBytes { start.copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(start), byteCount: $0.count) }
                #expect(JSONValidator.validate(UnsafeRawBufferPointer(start: start, count: item.bytes.count)) == expected,
                        "\(item.testDescription)")
            }
        }
    }

    /// Strings are scanned 16 bytes at a time, and a string whose first special byte is its
    /// closing quote ends there: whatever the position of the byte that ends a run of ASCII, it
    /// is found exactly, and an escaped quote or a bad byte before the closing quote is seen.
    @Test func findsTheEndOfAnASCIIRunAtAnyPosition() {
        func passesBothPasses(_ bytes: [UInt8]) -> Bool {
            bytes.withUnsafeBytes { JSONValidator.passesFastCheck($0) && JSONValidator.explain($0) == nil }
        }
        let plain: [UInt8] = Array(" !#[]~a\u{7F}0/".utf8)
        let quote = UInt8(ascii: "\"")
        for length in 0..<40 {
            let run = (0..<length).map { plain[($0 * 7 + length) % plain.count] }
            #expect(passesBothPasses([quote] + run + [quote]))
            #expect(passesBothPasses([quote] + run + Array("é\\n€\\u00e9😀".utf8) + run + [quote]))
            #expect(passesBothPasses([quote] + run + Array("\\\"".utf8) + run + [quote]))
            #expect(JSONValidator.validate([quote] + run + [0x01] + run + [quote]) == JSONValidationError(.controlCharacter(1), at: 1 + length))
            #expect(JSONValidator.validate([quote] + run + [0x1F] + run + [quote]) == JSONValidationError(.controlCharacter(0x1F), at: 1 + length))
            #expect(JSONValidator.validate([quote] + run + [0xFF] + run + [quote]) == JSONValidationError(.invalidUTF8, at: 1 + length))
            #expect(JSONValidator.validate([quote] + run + [0xC3] + run + [quote]) == JSONValidationError(.invalidUTF8, at: 1 + length))
            #expect(JSONValidator.validate([quote] + run + Array("\\q".utf8) + run + [quote])
                == JSONValidationError(.invalidEscape(UInt8(ascii: "q")), at: 1 + length))
            #expect(JSONValidator.validate([quote] + run + [quote, UInt8(ascii: "x")] + run) == JSONValidationError(.trailingData, at: 2 + length))
            #expect(JSONValidator.validate([quote] + run) == JSONValidationError(.unexpectedEnd(expected: .stringEnd), at: 1 + length))
        }
    }

    // MARK: - Nesting

    @Test func nestsUpTo512Deep() {
        let deepest = String(repeating: "[", count: 512) + String(repeating: "]", count: 512)
        #expect(validate(deepest) == nil)
        let deepestObjects = String(repeating: "{\"a\":", count: 511) + "[1]" + String(repeating: "}", count: 511)
        #expect(validate(deepestObjects) == nil)
        let tooDeep = String(repeating: "[", count: 513) + String(repeating: "]", count: 513)
        #expect(validate(tooDeep) == JSONValidationError(.tooDeep, at: 512))
        #expect(validate(String(repeating: "[", count: 512) + "{}" + String(repeating: "]", count: 512))
            == JSONValidationError(.tooDeep, at: 512))
    }

    /// 100,000 levels, and a megabyte of "[", are refused at level 513 without recursion.
    @Test func refusesVeryDeepNestingWithoutCrashing() {
        #expect(validate(String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000))
            == JSONValidationError(.tooDeep, at: 512))
        #expect(validate(String(repeating: "{\"a\":", count: 100_000) + "1" + String(repeating: "}", count: 100_000))
            == JSONValidationError(.tooDeep, at: 512 * 5))
        #expect(validate(String(repeating: "[", count: 1 << 20)) == JSONValidationError(.tooDeep, at: 512))
        #expect(validate(String(repeating: "[{\"\":", count: 50_000)) == JSONValidationError(.tooDeep, at: 256 * 5))
    }

    /// Random mixes of arrays and objects across the bit stack's 64-bit words; closing any level
    /// with the other bracket is refused at that bracket.
    @Test func matchesBracketsAtEveryDepth() {
        var random = SeededGenerator(seed: 8259)
        for depth in [1, 2, 63, 64, 65, 127, 128, 129, 300, 511, 512] {
            let objects = (0..<depth).map { _ in Bool.random(using: &random) }
            func item(wrongAt wrong: Int?) -> (bytes: [UInt8], offset: Int) {
                var bytes: [UInt8] = []
                for isObject in objects { bytes += Array((isObject ? "{\"k\": " : "[0,").utf8) }
                bytes += Array("1".utf8)
                var offset = -1
                for (level, isObject) in objects.enumerated().reversed() {
                    if level == wrong { offset = bytes.count }
                    bytes.append(UInt8(ascii: isObject != (level == wrong) ? "}" : "]"))
                }
                return (bytes, offset)
            }
            #expect(JSONValidator.validate(item(wrongAt: nil).bytes) == nil, "depth \(depth)")
            for _ in 0..<5 {
                let level = Int.random(in: 0..<depth, using: &random)
                let (bytes, offset) = item(wrongAt: level)
                let error = JSONValidator.validate(bytes)
                #expect(error?.offset == offset, "depth \(depth), level \(level): \(String(describing: error))")
                if case .unexpected = error?.problem {} else { Issue.record("depth \(depth), level \(level): \(String(describing: error))") }
            }
        }
    }

    // MARK: - Real items

    @Test func acceptsTheGitHubFixture() throws {
        let data = try Data(contentsOf: URL(fileURLWithPath: "\(repositoryRoot)/Examples/GitHubRepos/fixture/repositories.json"))
        #expect(JSONValidator.validate(Array(data)) == nil)
        let lines = data.split(separator: UInt8(ascii: "\n")).filter { $0.first == UInt8(ascii: "{") }
        #expect(lines.count > 100)
        for line in lines {
            var item = Array(line)
            if item.last == UInt8(ascii: ",") { item.removeLast() }
            #expect(JSONValidator.validate(item) == nil)
        }
    }

    // MARK: - Python's json agrees

    /// The C check that items pass first takes exactly the documents the Swift pass (which
    /// explains refusals) takes: the tables, and generated documents, most of them mutated.
    @Test func fastCheckAgreesWithTheExplainingPass() async throws {
        let (disagreements, valid, count) = try await onAThreadOfItsOwn {
            var generator = DocumentGenerator(seed: 5_309)
            var documents = (Self.accepted + Self.refused + Self.messages.map(\.item)).map(\.bytes)
            for index in 0..<20_000 {
                let bytes = generator.document()
                documents.append(index % 10 >= 3 ? generator.mutate(bytes) : bytes)
            }
            var disagreements: [String] = []
            var valid = 0
            for bytes in documents {
                bytes.withUnsafeBytes { raw in
                    let explained = JSONValidator.explain(raw)
                    if explained == nil { valid += 1 }
                    if JSONValidator.passesFastCheck(raw) != (explained == nil) {
                        disagreements.append("\(JSONItem(bytes: bytes).testDescription): the Swift pass says \(explained.map { "\($0)" } ?? "valid")")
                    }
                }
            }
            return (disagreements, valid, documents.count)
        }
        #expect(disagreements.isEmpty, "\(disagreements.count) disagreements:\n\(disagreements.prefix(20).joined(separator: "\n"))")
        #expect(valid >= 5_000 && count - valid >= 5_000, "\(valid) valid of \(count)")
    }

    /// Valid documents, most of them mutated (bytes inserted, replaced, deleted, duplicated,
    /// swapped, truncated), and the tables above: `json.loads` of Python 3 on the strictly
    /// decoded UTF-8, NaN and Infinity refused, must take exactly the documents the validator takes.
    ///
    /// Documents: PAGING_JSON_DOCUMENTS (default 600); seed: PAGING_JSON_SEED (default 20171217).
    @Test func agreesWithPython() async throws {
        var generator = DocumentGenerator(seed: UInt64(environmentCount("PAGING_JSON_SEED", default: 20_171_217)))
        var documents: [(name: String, bytes: [UInt8])] = []
        for index in 0..<environmentCount("PAGING_JSON_DOCUMENTS", default: 600) {
            var bytes = generator.document()
            if index % 10 >= 3 { bytes = generator.mutate(bytes) }
            documents.append((String(format: "g%06d.json", index), bytes))
        }
        for (index, item) in (Self.accepted + Self.refused + Self.messages.map(\.item)).enumerated() where item.bytes.count < 4_000 {
            documents.append((String(format: "t%04d.json", index), item.bytes))
        }

        let folder = scratchFolder()
        defer { try? FileManager.default.removeItem(atPath: folder) }
        for document in documents {
            try Data(document.bytes).write(to: URL(fileURLWithPath: "\(folder)/\(document.name)"))
        }
        let script = """
        import json, os, sys
        def refuse(name):
            raise ValueError("not a JSON number: " + name)
        folder = sys.argv[1]
        for name in sorted(os.listdir(folder)):
            if not name.endswith(".json"):
                continue
            with open(os.path.join(folder, name), "rb") as f:
                data = f.read()
            try:
                json.loads(data.decode("utf-8", errors="strict"), parse_constant=refuse)
                print(name, 1)
            except (ValueError, RecursionError):  # UnicodeDecodeError and JSONDecodeError are ValueErrors
                print(name, 0)
        """
        try script.write(toFile: "\(folder)/check.py", atomically: true, encoding: .utf8)
        let result = try await run("/usr/bin/env", ["python3", "\(folder)/check.py", folder], deadline: .seconds(120))
        try #require(result.code == 0 && !result.signaled, "python3 failed: \(result.stderr)")
        var python: [String: Bool] = [:]
        for line in result.stdout.split(separator: "\n") {
            let fields = line.split(separator: " ")
            python[String(fields[0])] = fields[1] == "1"
        }
        try #require(python.count == documents.count, "python3 answered for \(python.count) of \(documents.count) documents")

        var disagreements: [String] = []
        var valid = 0
        for document in documents {
            let error = JSONValidator.validate(document.bytes)
            if python[document.name]! { valid += 1 }
            if python[document.name]! != (error == nil) {
                disagreements.append("\(document.name) \(JSONItem(bytes: document.bytes).testDescription): python \(python[document.name]! ? "accepts" : "refuses"), validator \(error.map { "refuses: \($0)" } ?? "accepts")")
            }
        }
        #expect(disagreements.isEmpty, "\(disagreements.count) disagreements:\n\(disagreements.prefix(20).joined(separator: "\n"))")
        // Both answers are well represented.
        #expect(valid >= 250 && documents.count - valid >= 250, "\(valid) valid of \(documents.count)")
    }
}

/// Random JSON documents and mutations of them, from a seed.
struct DocumentGenerator {
    var random: SeededGenerator

    init(seed: UInt64) {
        random = SeededGenerator(seed: seed)
    }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &random) }

    mutating func pick<T>(_ choices: [T]) -> T { choices.randomElement(using: &random)! }

    mutating func document() -> [UInt8] { whitespace() + value(depth: 0) + whitespace() }

    mutating func whitespace() -> [UInt8] {
        int(0...3) == 0 ? (0..<int(1...3)).map { _ in pick([0x20, 0x09, 0x0A, 0x0D]) } : []
    }

    mutating func value(depth: Int) -> [UInt8] {
        switch int(depth < 4 ? 0...9 : 2...9) {
        case 0:
            let members = (0..<int(0...4)).map { _ in
                whitespace() + string() + whitespace() + Array(":".utf8) + whitespace() + value(depth: depth + 1) + whitespace()
            }
            return Array("{".utf8) + whitespace() + Array(members.joined(separator: Array(",".utf8))) + Array("}".utf8)
        case 1:
            let elements = (0..<int(0...4)).map { _ in whitespace() + value(depth: depth + 1) + whitespace() }
            return Array("[".utf8) + whitespace() + Array(elements.joined(separator: Array(",".utf8))) + Array("]".utf8)
        case 2, 3, 4: return string()
        case 5, 6, 7: return number()
        default: return Array(pick(["true", "false", "null"]).utf8)
        }
    }

    mutating func string() -> [UInt8] {
        var bytes = Array("\"".utf8)
        for _ in 0..<int(0...8) {
            switch int(0...5) {
            case 0: bytes += Array(pick(["\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t", "\\u00e9", "\\u00AB",
                                         "\\uD83D\\uDE00", "\\ud800", "\\uDC00", "\\u0000", "\\uFFFF", "\\u001f"]).utf8)
            case 1: bytes += Array(pick(["é", "€", "😀", "\u{10FFFF}", "\u{FFFF}", "\u{7F}", "π", "日本", "\u{80}", "\u{800}"]).utf8)
            case 2: bytes += (0..<int(8...40)).map { _ in UInt8(int(0x20...0x7E)) }.filter { $0 != 0x22 && $0 != 0x5C }
            default: bytes += (0..<int(1...6)).map { _ in UInt8(pick(Array("abcdefghijklmnopqrstuvwxyz0123456789 -_".utf8))) }
            }
        }
        return bytes + Array("\"".utf8)
    }

    mutating func number() -> [UInt8] {
        var text = int(0...3) == 0 ? "-" : ""
        text += int(0...3) == 0 ? "0" : String(int(1...9)) + (0..<int(0...6)).map { _ in String(int(0...9)) }.joined()
        if int(0...2) == 0 { text += "." + (0..<int(1...4)).map { _ in String(int(0...9)) }.joined() }
        if int(0...3) == 0 { text += pick(["e", "E"]) + pick(["", "+", "-"]) + (0..<int(1...3)).map { _ in String(int(0...9)) }.joined() }
        return Array(text.utf8)
    }

    static let bytes: [UInt8] = Array("{}[],:\"\\ 019-+.eEtfnuax\t\n\r".utf8)
        + [0x00, 0x0B, 0x0C, 0x1F, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF]

    static let snippets: [[UInt8]] = [
        "NaN", "Infinity", "-Infinity", "\\ud800", "\\uDC00", "\\u12", "\\x", "1e999", "00", "-0", ".5", "true", "null",
        "//", "/*", "'", "é", "€", "😀", "[", "]", "{", "}", "\"\"", "\"a\":", ",,", "«ED A0 80»", "«C0 AF»", "«E0 80 AF»",
        "«F0 80 80 AF»", "«F4 90 80 80»", "«EF BB BF»", "«C3»", "«E2 82»", "«F0 9F 98»",
    ].map { JSONItem($0).bytes }

    mutating func mutate(_ document: [UInt8]) -> [UInt8] {
        var bytes = document
        for _ in 0..<int(1...3) {
            let at = int(0...bytes.count)
            switch int(0...7) {
            case 0: bytes.insert(pick(Self.bytes), at: at)
            case 1: if at < bytes.count { bytes[at] = pick(Self.bytes) }
            case 2: if at < bytes.count { bytes.remove(at: at) }
            case 3, 4: bytes.insert(contentsOf: pick(Self.snippets), at: at)
            case 5: bytes.insert(contentsOf: bytes[at..<min(bytes.count, at + int(1...10))], at: at)
            case 6: if at + 1 < bytes.count { bytes.swapAt(at, at + 1) }
            default: bytes = Array(bytes.prefix(int(0...bytes.count)))
            }
        }
        return bytes
    }
}
