// The http source's C JSON scanner (Plugins/HTTPCore/json_scan.c) on its own: it must refuse
// every body that is not one JSON text, and find exactly the values at its pointers.
import CHTTPCore
import Foundation
import Testing

/// What one scan of `json` for `pointers` (RFC 6901 text, "*" for every element) found: the
/// items (the first pointer's array elements) and each pointer's matches, as text, or the
/// scanner's error.
private func scan(_ json: String, _ pointers: [String] = [""], checkingItems: Bool = true) -> (items: [String], matches: [[String]], notArray: Bool)? {
    scanResult(json, pointers, checkingItems: checkingItems).0.map { ($0.items, $0.matches, $0.notArray) }
}

private func scanError(_ json: String, _ pointers: [String] = [""], checkingItems: Bool = true) -> String? {
    scanResult(json, pointers, checkingItems: checkingItems).1
}

private typealias Found = (items: [String], hasSpace: [Bool], matches: [[String]], notArray: Bool, path: (problem: Int32, depth: Int, at: Int),
                            notInLastElement: UInt64)

private func scanResult(_ json: String, _ pointers: [String], checkingItems: Bool = true) -> (Found?, String?) {
    let body = Array(json.utf8)
    // Each pointer's tokens, unescaped (~1 is "/", ~0 is "~"), as C strings that outlive the scan.
    let tokens: [[String]] = pointers.map { pointer in
        pointer.isEmpty ? [] : pointer.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
            .map { $0.replacingOccurrences(of: "~1", with: "/").replacingOccurrences(of: "~0", with: "~") }
    }
    let cTokens = tokens.map { list in list.map { strdup($0)! } }
    defer { cTokens.forEach { $0.forEach { free($0) } } }
    let tokenArrays = cTokens.map { list in list.map { UnsafePointer<CChar>($0) as UnsafePointer<CChar>? } }
    let lengths = tokens.map { list in list.map { $0.utf8.count } }
    var result = hj_result()
    var error = [CChar](repeating: 0, count: 256)
    let rc: Int32 = withPointers(tokenArrays, lengths) { cPointers in
        hj_scan(body, body.count, cPointers, cPointers.count, checkingItems ? 1 : 0, &result, &error, error.count)
    }
    defer { hj_result_free(&result) }
    guard rc == 0 else { return (nil, String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)) }
    func text(_ range: hj_range) -> String { String(decoding: body[range.start..<range.end], as: UTF8.self) }
    let items = (0..<result.item_count).map { text(result.items[$0]) }
    let hasSpace = (0..<result.item_count).map { result.item_has_space[$0] != 0 }
    let matches = (0..<pointers.count).map { index in (0..<result.match_counts[index]).map { text(result.matches[index]![$0]) } }
    return ((items, hasSpace, matches, result.items_not_array != 0,
             (result.items_path_problem, result.items_path_depth, result.items_path_at), result.not_in_last_element), nil)
}

/// Where the items pointer stops resolving in `json`: the problem, how many of its tokens
/// resolved, and the byte offset of the value there; nil when it resolves.
private func pathProblem(_ json: String, _ pointer: String) -> (Int32, Int, Int)? {
    guard let path = scanResult(json, [pointer]).0?.path, path.problem != Int32(HJ_PATH_OK) else { return nil }
    return (path.problem, path.depth, path.at)
}

private func withPointers<R>(_ tokens: [[UnsafePointer<CChar>?]], _ lengths: [[Int]], _ body: ([hj_pointer]) -> R) -> R {
    var pointers: [hj_pointer] = []
    var keep: [(UnsafeMutablePointer<UnsafePointer<CChar>?>, UnsafeMutablePointer<Int>)] = []
    for (list, lens) in zip(tokens, lengths) {
        let t = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: max(1, list.count))
        let l = UnsafeMutablePointer<Int>.allocate(capacity: max(1, lens.count))
        for index in list.indices {
            t[index] = list[index]
            l[index] = lens[index]
        }
        keep.append((t, l))
        pointers.append(hj_pointer(tokens: t, token_lens: l, token_count: list.count))
    }
    defer { keep.forEach { $0.0.deallocate(); $0.1.deallocate() } }
    return body(pointers)
}

@Suite("JSON scanner (C)")
struct JSONScannerTests {
    @Test func validTexts_areAccepted_andTheirItemsFound() throws {
        let found = try #require(scan(#" [1, "two", {"three": [3]}, null, true, -0.5e+3, []] "#))
        #expect(found.items == ["1", #""two""#, #"{"three": [3]}"#, "null", "true", "-0.5e+3", "[]"])
        #expect(found.notArray == false)
        #expect(try #require(scan("[]")).items.isEmpty)
        #expect(scan(#""just a string""#)?.notArray == true)
        #expect(scan("0")?.notArray == true)
        // Escapes and UTF-8 are valid inside strings, and a member name may hold "/" and "~".
        let escaped = try #require(scan(#"{"a/b": {"~x": ["\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00", "é😀"]}}"#, ["/a~1b/~0x"]))
        #expect(escaped.items == [#""\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00""#, #""é😀""#])
    }

    /// Strings are scanned 8 bytes at a time: an escape, a multi-byte character, a control
    /// character or the closing quote is found at every position of a word.
    @Test func longStrings_findEverySpecialByte_atEveryPositionOfAWord() throws {
        let tail = String(repeating: "b", count: 17)
        for offset in 0..<17 {
            let pad = String(repeating: "a", count: offset)
            for inner in [#"\""#, #"\\"#, #"\u00e9"#, "é", "😀", "\u{7F}"] {
                let string = "\"\(pad)\(inner)\(tail)\""
                #expect(try #require(scan("[\(string)]")).items == [string])
            }
            #expect(try #require(scan("[\"\(pad)\"]")).items == ["\"\(pad)\""])
            #expect(scanError("[\"\(pad)\t\(tail)\"]") != nil, "a raw tab after \(offset) bytes")
            #expect(scanError("[\"\(pad)\"\(tail)\"]") != nil, "a quote after \(offset) bytes ends the string")
        }
    }

    @Test func invalidTexts_areRefused_withWhereTheyStopBeingJSON() {
        for bad in ["", " ", "[1,]", "[1 2]", "{\"a\" 1}", "{\"a\":1,}", "{1:2}", "[01]", "[1.]", "[.5]", "[-]", "[1e]",
                    "[\"a]", "[\"\\x\"]", "[\"\\u12\"]", "[\"tab\there\"]", "[tru]", "[nul]", "[1] [2]", "[1]x", "{\"a\":1",
                    "[\"\u{7F}\"]x", "\"\\ud800\"x"] {
            #expect(scanError(bad) != nil, "accepted: \(bad)")
        }
        #expect(scanError("[1,]")?.hasPrefix("unexpected ']' at byte 3") == true, "the error names where: \(scanError("[1,]") ?? "")")
        #expect(scanError("{\"a\":1")?.contains("truncated JSON") == true)
        // Bytes that are not UTF-8.
        let invalid = String(decoding: [0x5B, 0x22, 0xFF, 0x22, 0x5D], as: UTF8.self)
        #expect(scanError(invalid) == nil, "U+FFFD from decoding is valid UTF-8; raw bytes are checked below")
        var raw: [UInt8] = [0x5B, 0x22, 0xC3, 0x22, 0x5D]  // ["<truncated 2-byte sequence>"]
        var result = hj_result()
        var error = [CChar](repeating: 0, count: 256)
        #expect(hj_scan(&raw, raw.count, nil, 0, 1, &result, &error, error.count) == -1)
        hj_result_free(&result)
        // Nesting deeper than 512 is refused, not a stack overflow.
        #expect(scanError(String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)) != nil)
        #expect(scanError(String(repeating: "[", count: 100) + String(repeating: "]", count: 100)) == nil)
    }

    @Test func pointers_findMembers_elements_andEveryElementWithAStar() throws {
        let body = #"{"data": [{"id": 1, "n": {"k": "a"}}, {"id": 2}, {"id": 3, "n": {"k": "c"}}], "meta": {"next": "x", "total": 3}, "has_more": false}"#
        let found = try #require(scan(body, ["/data", "/data/*/id", "/meta/next", "/data/1/id", "/data/*/n/k", "/missing", "/data/9"]))
        #expect(found.items.count == 3)
        #expect(found.matches[1] == ["1", "2", "3"], "in document order")
        #expect(found.matches[2] == [#""x""#])
        #expect(found.matches[3] == ["2"])
        #expect(found.matches[4] == [#""a""#, #""c""#])
        #expect(found.matches[5].isEmpty)
        #expect(found.matches[6].isEmpty)
        // A star over nested arrays: every element of every matched array is an item.
        let nested = try #require(scan(#"{"groups": [{"repos": [1, 2]}, {"repos": []}, {"repos": [3]}]}"#, ["/groups/*/repos"]))
        #expect(nested.items == ["1", "2", "3"])
        // A duplicate member: both are matched (the caller takes the last).
        #expect(try #require(scan(#"{"a": 1, "a": 2}"#, ["", "/a"])).matches[1] == ["1", "2"])
        // An items pointer at something that is not an array says so.
        #expect(try #require(scan(body, ["/meta"])).notArray)
    }

    // MARK: Items found by their brackets (no check_items)

    /// Without check_items, array and object items are measured 64 bytes at a time: every
    /// bracket, quote and backslash that could end an item early or late is put at every
    /// position of a block, and the items found (and whether they hold whitespace) must be
    /// those the validating scan finds.
    /// A member named twice: the last is the items, as the last is any other pointer's value
    /// (the items of both were handed out); through a "*", every array's elements are items.
    @Test func itemsNamedTwice_areTheLastOnes() throws {
        #expect(try #require(scan(#"{"items": [1], "items": [2, 3]}"#, ["/items"])).items == ["2", "3"])
        let notArray = try #require(scanResult(#"{"items": 1, "items": [2]}"#, ["/items"]).0)
        #expect(notArray.items == ["2"] && !notArray.notArray && notArray.path.problem == Int32(HJ_PATH_OK))
        #expect(try #require(scan(#"{"items": [1], "items": {}}"#, ["/items"])).notArray)
        #expect(try #require(scan(#"{"g": [{"r": [1]}, {"r": [2, 3]}]}"#, ["/g/*/r"])).items == ["1", "2", "3"])
    }

    /// Through a "*", the scan says when the last element holds no match ("/data/*/id" is the
    /// last item's id: an earlier item's, taken for it, repeated pages).
    @Test func aStarPointer_saysWhetherTheLastElementHoldsItsMatch() throws {
        let pointers = ["/data", "/data/*/id", "/groups/*/repos/*/id", "/has_more"]
        func notInLast(_ json: String) throws -> [Int] {
            let found = try #require(scanResult(json, pointers).0)
            return (0..<pointers.count).filter { found.notInLastElement >> UInt64($0) & 1 != 0 }
        }
        #expect(try notInLast(#"{"data": [{"id": 1}, {"id": 2}], "has_more": true}"#) == [])
        #expect(try notInLast(#"{"data": [{"id": 1}, {"uid": 2}], "has_more": true}"#) == [1])
        #expect(try notInLast(#"{"data": [{"id": 1}, 7]}"#) == [1])
        #expect(try notInLast(#"{"data": []}"#) == [])
        #expect(try notInLast(#"{"groups": [{"repos": [{"id": 1}]}, {"repos": [{"id": 2}, {}]}]}"#) == [2])
        #expect(try notInLast(#"{"groups": [{"repos": [{}]}, {"repos": [{"id": 2}]}]}"#) == [])
    }

    @Test func itemsFoundByBrackets_areThoseTheValidatingScanFinds() throws {
        let tricky = [#"\""#, #"\\"#, #"\\\""#, "}", "]", "{", "[", #"\\\\"#, " ", "é"]
        for offset in 0..<70 {
            let pad = String(repeating: "a", count: offset)
            for inner in tricky {
                let item = #"{"k": "\#(pad)\#(inner)", "n": [1, {"x": "\#(inner)\#(pad)"}], "e": {}}"#
                let compact = #"{"k":"\#(pad)\#(inner)","n":[[],{"x":"\#(inner)"}]}"#
                let body = #"{"items": [\#(item),\#(compact), 7, "s]", [\#(compact)]]}"#
                let checked = try #require(scanResult(body, ["/items"]).0)
                let measured = try #require(scanResult(body, ["/items"], checkingItems: false).0, "\(body)")
                #expect(measured.items == checked.items, "\(body)")
                #expect(measured.hasSpace == checked.hasSpace && checked.hasSpace == [true, false, false, false, false], "\(body)")
            }
        }
    }

    /// Random item texts (valid JSON, with whitespace in places): both scans agree.
    @Test func randomItems_areFoundAlike_withAndWithoutTheirCheck() throws {
        var generator = SystemRandomNumberGenerator()
        func value(_ depth: Int) -> String {
            let space = Bool.random(using: &generator) ? " " : ""
            switch Int.random(in: 0..<(depth > 4 ? 3 : 6), using: &generator) {
            case 0: return String(Int.random(in: -1000...1000, using: &generator))
            case 1:
                let pieces = ["a", "b", #"\""#, #"\\"#, "{", "}", "[", "]", ",", " ", "é", #"\u00e9"#]
                return "\"" + (0..<Int.random(in: 0..<40, using: &generator)).map { _ in pieces.randomElement(using: &generator)! }.joined() + "\""
            case 2: return ["true", "false", "null"].randomElement(using: &generator)!
            case 3: return "[" + (0..<Int.random(in: 0..<4, using: &generator)).map { _ in space + value(depth + 1) }.joined(separator: ",") + "]"
            default:
                return "{" + (0..<Int.random(in: 0..<4, using: &generator)).map { k in "\"k\(k)\":\(space)" + value(depth + 1) }.joined(separator: ",") + "}"
            }
        }
        for _ in 0..<300 {
            let body = "[" + (0..<Int.random(in: 1..<8, using: &generator)).map { _ in "{\"v\": " + value(1) + "}" }.joined(separator: ", ") + "]"
            let checked = try #require(scanResult(body, [""]).0, "\(body)")
            let measured = try #require(scanResult(body, [""], checkingItems: false).0, "\(body)")
            #expect(measured.items == checked.items, "\(body)")
            #expect(measured.hasSpace == checked.hasSpace, "\(body)")
        }
    }

    /// An item that is not JSON inside is found by its brackets (the host refuses it); what
    /// ends the body early, or nests too deep, is still refused, saying where.
    @Test func itemsFoundByBrackets_leaveTheirCheckToTheHost_notTheBodysEnd() throws {
        let body = #"{"items": [{"id": tru}, {"a" 1}, ["x" "y"]]}"#
        #expect(try #require(scan(body, ["/items"], checkingItems: false)).items == [#"{"id": tru}"#, #"{"a" 1}"#, #"["x" "y"]"#])
        #expect(scanError(body, ["/items"])?.contains("in a literal") == true, "with the check: \(scanError(body, ["/items"]) ?? "")")
        for truncated in [#"{"items":[{"id":1},{"id":"#, #"{"items":[{"id":"ab\"#, #"{"items":[{"id":"ab\""#, #"{"items":[[["#] {
            let error = scanError(truncated, ["/items"], checkingItems: false)
            #expect(error?.hasPrefix("the body ends early at byte \(truncated.utf8.count)") == true, "\(truncated): \(error ?? "accepted")")
        }
        // Nesting is limited as in a validating scan, counted from the body's root.
        for depth in [511, 512, 513, 514, 515, 600] {
            let body = #"{"a": "# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1) + "}"
            let measured = scanError(body, ["/a"], checkingItems: false), checked = scanError(body, ["/a"])
            #expect(measured == checked, "\(depth) deep")
            // 512 arrays and objects nest, as the host's check allows; the 513th is refused.
            #expect((checked == nil) == (depth <= 512), "\(depth) deep: \(checked ?? "accepted")")
        }
        #expect(scanError("[" + String(repeating: "[", count: 600) + String(repeating: "]", count: 600) + "]", [""], checkingItems: false)?.contains("nesting deeper than 512") == true)
        #expect(scanError("[" + String(repeating: "[", count: 500) + String(repeating: "]", count: 500) + "]", [""], checkingItems: false) == nil)
        // An item another pointer enters is validated all the same.
        #expect(scanError(#"{"items": [{"id": tru}]}"#, ["/items", "/items/0/id"], checkingItems: false) != nil)
    }

    @Test func compact_dropsWhitespaceOutsideStrings_only() {
        let text = Array(" { \"a b\" : [ 1 , \"x  y\" ] } ".utf8)
        var out = [UInt8](repeating: 0, count: text.count)
        let written = hj_compact(text, text.count, &out)
        #expect(String(decoding: out[..<written], as: UTF8.self) == #"{"a b":[1,"x  y"]}"#)
    }

    /// The first place, in the text, where the items pointer stops resolving: a value that is not
    /// the container its next token needs, an object or array without the member or index named,
    /// or an end that is not an array. A "*" over an empty array resolves (to no items).
    @Test func theItemsPointer_saysWhereItStopsResolving() {
        let notContainer = Int32(HJ_PATH_NOT_CONTAINER), missing = Int32(HJ_PATH_MISSING), notArray = Int32(HJ_PATH_NOT_ARRAY)
        #expect(pathProblem(#"{"a": [[1], [2]]}"#, "/a/*") == nil)
        #expect(pathProblem(#"{"a": []}"#, "/a/*/b") == nil)
        #expect(pathProblem(#"{"b": 1}"#, "/a") ?? (0, 0, 0) == (missing, 0, 0))
        #expect(pathProblem(#"{"a": {}}"#, "/a/*") ?? (0, 0, 0) == (notContainer, 1, 6))
        #expect(pathProblem(#"{"a": 5}"#, "/a") ?? (0, 0, 0) == (notArray, 1, 6))
        #expect(pathProblem(#"{"a": 5}"#, "") ?? (0, 0, 0) == (notArray, 0, 0))
        #expect(pathProblem(#"{"a": []}"#, "/a/0") ?? (0, 0, 0) == (missing, 1, 6))
        #expect(pathProblem(#"{"a": [[1]]}"#, "/a/0") == nil)
        #expect(pathProblem(#"{"a": [{"b": [1]}, {"c": 2}]}"#, "/a/*/b") ?? (0, 0, 0) == (missing, 2, 19))
        #expect(pathProblem(#"{"a": [1, {"b": []}]}"#, "/a/*/b") ?? (0, 0, 0) == (notContainer, 2, 7))
        #expect(pathProblem(#"{"a": [{"b": "x"}]}"#, "/a/*/b") ?? (0, 0, 0) == (notArray, 3, 13))
        // An object may have a member "0": the token is then a name, not an index.
        #expect(pathProblem(#"{"a": {"0": [1]}}"#, "/a/0") == nil)
    }
}
