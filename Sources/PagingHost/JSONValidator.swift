// Checks that a byte string is exactly one JSON value (RFC 8259) in valid UTF-8, without
// building anything: what the host asks of every item a plugin hands it.
import CJSONCheck

/// Checks items: one JSON value (RFC 8259), optionally surrounded by whitespace (space, tab,
/// CR, LF), in well-formed UTF-8.
///
/// - Strings: every escape of the grammar, `\uXXXX` included. Escaped surrogates need not pair
///   up (`"\uD800"` is accepted, as the grammar allows); raw bytes must be well-formed UTF-8
///   (no overlong forms, no encoded surrogates U+D800–U+DFFF, nothing above U+10FFFF), and bytes
///   below 0x20 must be escaped.
/// - Numbers: `-? (0 | [1-9][0-9]*) (.[0-9]+)? ([eE][+-]?[0-9]+)?`, of any magnitude.
/// - Literals `true`, `false`, `null`; no byte order mark, no comments, no NaN or Infinity.
/// - Arrays and objects nest at most `maxDepth` deep (duplicate keys are accepted).
///
/// One pass over the bytes, linear in their number; no tree, no recursion, no allocation (the
/// open containers are a bit stack of `maxDepth` bits on the thread's stack), so a megabyte of
/// `[[[[…` costs a refusal at byte `maxDepth`, not a crash.
///
/// Items pass through `paging_json_check` (CJSONCheck), the same grammar in C that skips runs
/// of plain ASCII 16 bytes at a time and says only yes or no; this pass, which says what and
/// where, reads the items it refuses.
package enum JSONValidator {
    /// How deep arrays and objects may nest: `[[1]]` is 2 deep.
    package static let maxDepth = 512

    /// Why `bytes` is not one JSON value in valid UTF-8, or `nil` when it is.
    package static func validate(_ bytes: UnsafeRawBufferPointer) -> JSONValidationError? {
        passesFastCheck(bytes) ? nil : explain(bytes)
    }

    /// Whether the C check takes `bytes` (what ``validate(_:)`` asks first).
    package static func passesFastCheck(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return false }
        return paging_json_check(base, bytes.count, maxDepth) == 1
    }

    /// Why `bytes` is not one JSON value in valid UTF-8, or `nil` when it is, by this file's
    /// pass alone.
    package static func explain(_ bytes: UnsafeRawBufferPointer) -> JSONValidationError? {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return JSONValidationError(.empty, at: 0) }
        return withUnsafeTemporaryAllocation(of: UInt64.self, capacity: stackWords) { stack in
            stack.initialize(repeating: 0)
            return check(base, bytes.count, stack.baseAddress!)
        }
    }

    /// Why `bytes` is not one JSON value in valid UTF-8, or `nil` when it is.
    package static func validate(_ bytes: [UInt8]) -> JSONValidationError? {
        bytes.withUnsafeBytes { validate($0) }
    }

    /// The 64-bit words of the bit stack: bit k is set when the container at depth k+1 is an object.
    private static let stackWords = 8
}

// MARK: - The pass

extension JSONValidator {
    /// The whole grammar as one loop: `value` reads a value (or opens a container and reads its
    /// first member), then the inner loop reads what may follow a value: whitespace, a comma and
    /// the next member, or the closing brackets.
    private static func check(_ p: UnsafeRawPointer, _ n: Int, _ stack: UnsafeMutablePointer<UInt64>) -> JSONValidationError? {
        assert(maxDepth <= stackWords * 64)
        var i = 0
        var depth = 0
        var inObject = false // whether the innermost open container is an object

        value: while true {
            skipWhitespace(p, n, &i)
            guard i < n else {
                return depth == 0 ? JSONValidationError(.empty, at: i) : JSONValidationError(.unexpectedEnd(expected: .value), at: i)
            }
            switch byte(p, i) {
            case UInt8(ascii: "\""):
                i += 1
                if let error = scanString(p, n, &i) { return error }
            case UInt8(ascii: "{"):
                guard depth < maxDepth else { return JSONValidationError(.tooDeep, at: i) }
                stack[depth >> 6] |= 1 << UInt64(depth & 63)
                depth += 1
                inObject = true
                i += 1
                skipWhitespace(p, n, &i)
                if i < n, byte(p, i) == UInt8(ascii: "}") {
                    i += 1
                    pop(stack, &depth, &inObject)
                } else {
                    if let error = scanKey(p, n, &i, expected: .keyOrObjectEnd) { return error }
                    continue value
                }
            case UInt8(ascii: "["):
                guard depth < maxDepth else { return JSONValidationError(.tooDeep, at: i) }
                stack[depth >> 6] &= ~(1 << UInt64(depth & 63))
                depth += 1
                inObject = false
                i += 1
                skipWhitespace(p, n, &i)
                if i < n, byte(p, i) == UInt8(ascii: "]") {
                    i += 1
                    pop(stack, &depth, &inObject)
                } else {
                    continue value
                }
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                if let error = scanNumber(p, n, &i) { return error }
            case UInt8(ascii: "t"):
                if let error = scanLiteral(p, n, &i, "true", .true) { return error }
            case UInt8(ascii: "f"):
                if let error = scanLiteral(p, n, &i, "false", .false) { return error }
            case UInt8(ascii: "n"):
                if let error = scanLiteral(p, n, &i, "null", .null) { return error }
            default:
                return unexpected(p, n, i, expected: .value)
            }

            // After a value.
            while true {
                skipWhitespace(p, n, &i)
                if depth == 0 { return i == n ? nil : JSONValidationError(.trailingData, at: i) }
                let expected: JSONValidationError.Expectation = inObject ? .commaOrObjectEnd : .commaOrArrayEnd
                guard i < n else { return JSONValidationError(.unexpectedEnd(expected: expected), at: i) }
                let c = byte(p, i)
                if c == UInt8(ascii: ",") {
                    i += 1
                    if inObject {
                        skipWhitespace(p, n, &i)
                        if let error = scanKey(p, n, &i, expected: .key) { return error }
                    }
                    continue value
                }
                guard c == (inObject ? UInt8(ascii: "}") : UInt8(ascii: "]")) else { return unexpected(p, n, i, expected: expected) }
                i += 1
                pop(stack, &depth, &inObject)
            }
        }
    }

    @inline(__always)
    private static func byte(_ p: UnsafeRawPointer, _ i: Int) -> UInt8 {
        p.load(fromByteOffset: i, as: UInt8.self)
    }

    @inline(__always)
    private static func pop(_ stack: UnsafeMutablePointer<UInt64>, _ depth: inout Int, _ inObject: inout Bool) {
        depth -= 1
        if depth > 0 {
            let top = depth - 1
            inObject = (stack[top >> 6] >> UInt64(top & 63)) & 1 != 0
        }
    }

    @inline(__always)
    private static func skipWhitespace(_ p: UnsafeRawPointer, _ n: Int, _ i: inout Int) {
        while i < n {
            let c = byte(p, i)
            guard c <= 0x20, c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 else { return }
            i += 1
        }
    }

    /// An object member's key and its colon, from the key's opening quote; `i` ends after the colon.
    @inline(__always)
    private static func scanKey(_ p: UnsafeRawPointer, _ n: Int, _ i: inout Int, expected: JSONValidationError.Expectation) -> JSONValidationError? {
        guard i < n else { return JSONValidationError(.unexpectedEnd(expected: expected), at: i) }
        guard byte(p, i) == UInt8(ascii: "\"") else { return unexpected(p, n, i, expected: expected) }
        i += 1
        if let error = scanString(p, n, &i) { return error }
        skipWhitespace(p, n, &i)
        guard i < n else { return JSONValidationError(.unexpectedEnd(expected: .colon), at: i) }
        guard byte(p, i) == UInt8(ascii: ":") else { return unexpected(p, n, i, expected: .colon) }
        i += 1
        return nil
    }

    /// A string's contents and closing quote, from just after its opening quote.
    @inline(__always)
    private static func scanString(_ p: UnsafeRawPointer, _ n: Int, _ i: inout Int) -> JSONValidationError? {
        while true {
            // 8 bytes at a time while none is a quote, a backslash, a control character or
            // non-ASCII. Each test below flags the lowest matching byte exactly (borrows only
            // run upwards, from a matching byte), so the lowest flag is the first such byte.
            while n - i >= 8 {
                let word = UInt64(littleEndian: p.loadUnaligned(fromByteOffset: i, as: UInt64.self))
                let high: UInt64 = 0x8080_8080_8080_8080, ones: UInt64 = 0x0101_0101_0101_0101
                let quote = word ^ (ones &* 0x22), backslash = word ^ (ones &* 0x5C)
                let special = ((word &- ones &* 0x20) & ~word)  // bytes below 0x20
                    | ((quote &- ones) & ~quote)                // '"'
                    | ((backslash &- ones) & ~backslash)        // '\'
                    | word                                      // non-ASCII
                let flags = special & high
                if flags != 0 {
                    i += flags.trailingZeroBitCount >> 3
                    break
                }
                i += 8
            }
            guard i < n else { return JSONValidationError(.unexpectedEnd(expected: .stringEnd), at: i) }
            let c = byte(p, i)
            if c == UInt8(ascii: "\"") {
                i += 1
                return nil
            } else if c == UInt8(ascii: "\\") {
                if let error = scanEscape(p, n, &i) { return error }
            } else if c < 0x20 {
                return JSONValidationError(.controlCharacter(c), at: i)
            } else if c >= 0x80 {
                let length = utf8Length(p, n, i)
                guard length > 0 else { return JSONValidationError(.invalidUTF8, at: i) }
                i += length
            } else {
                i += 1
            }
        }
    }

    /// An escape, from its backslash.
    private static func scanEscape(_ p: UnsafeRawPointer, _ n: Int, _ i: inout Int) -> JSONValidationError? {
        guard i + 1 < n else { return JSONValidationError(.unexpectedEnd(expected: .escape), at: i + 1) }
        switch byte(p, i + 1) {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
             UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
            i += 2
            return nil
        case UInt8(ascii: "u"):
            for k in i + 2 ..< i + 6 {
                guard k < n else { return JSONValidationError(.unexpectedEnd(expected: .hexDigit), at: k) }
                let c = byte(p, k)
                guard c &- UInt8(ascii: "0") < 10 || (c | 0x20) &- UInt8(ascii: "a") < 6 else {
                    return unexpected(p, n, k, expected: .hexDigit)
                }
            }
            i += 6
            return nil
        case let c:
            return JSONValidationError(.invalidEscape(c), at: i)
        }
    }

    /// A number, from its first byte ('-' or a digit).
    @inline(__always)
    private static func scanNumber(_ p: UnsafeRawPointer, _ n: Int, _ i: inout Int) -> JSONValidationError? {
        @inline(__always) func isDigit(_ k: Int) -> Bool { byte(p, k) &- UInt8(ascii: "0") < 10 }
        /// One digit or more.
        @inline(__always) func digits(_ i: inout Int) -> JSONValidationError? {
            guard i < n else { return JSONValidationError(.unexpectedEnd(expected: .digit), at: i) }
            guard isDigit(i) else { return unexpected(p, n, i, expected: .digit) }
            i += 1
            while i < n, isDigit(i) { i += 1 }
            return nil
        }

        if byte(p, i) == UInt8(ascii: "-") { i += 1 }
        if i < n, byte(p, i) == UInt8(ascii: "0") {
            i += 1
            if i < n, isDigit(i) { return JSONValidationError(.leadingZero, at: i - 1) }
        } else if let error = digits(&i) {
            return error
        }
        if i < n, byte(p, i) == UInt8(ascii: ".") {
            i += 1
            if let error = digits(&i) { return error }
        }
        if i < n, byte(p, i) | 0x20 == UInt8(ascii: "e") {
            i += 1
            if i < n, byte(p, i) == UInt8(ascii: "+") || byte(p, i) == UInt8(ascii: "-") { i += 1 }
            if let error = digits(&i) { return error }
        }
        return nil
    }

    /// `true`, `false` or `null`, from its first letter.
    @inline(__always)
    private static func scanLiteral(_ p: UnsafeRawPointer, _ n: Int, _ i: inout Int, _ literal: StaticString, _ name: JSONValidationError.Literal) -> JSONValidationError? {
        let length = literal.utf8CodeUnitCount
        let expected = UnsafeRawPointer(literal.utf8Start)
        // The last 4 bytes as one word (the first is known to match).
        if n - i >= length,
           p.loadUnaligned(fromByteOffset: i + length - 4, as: UInt32.self) == expected.loadUnaligned(fromByteOffset: length - 4, as: UInt32.self) {
            i += length
            return nil
        }
        for k in 1 ..< length {
            guard i + k < n else { return JSONValidationError(.unexpectedEnd(expected: .literal(name)), at: i + k) }
            if byte(p, i + k) != byte(expected, k) { return unexpected(p, n, i + k, expected: .literal(name)) }
        }
        preconditionFailure("unreachable: the literal matched byte by byte but not as a word")
    }

    /// The length of the well-formed UTF-8 sequence of 2 to 4 bytes at `i`, or 0.
    @inline(__always)
    private static func utf8Length(_ p: UnsafeRawPointer, _ n: Int, _ i: Int) -> Int {
        @inline(__always) func continuation(_ k: Int) -> Bool { k < n && byte(p, k) & 0xC0 == 0x80 }
        let lead = byte(p, i)
        if lead < 0xE0 {
            // C0 and C1 would be overlong; 80–BF are continuation bytes.
            return lead >= 0xC2 && continuation(i + 1) ? 2 : 0
        }
        guard i + 1 < n else { return 0 }
        let second = byte(p, i + 1)
        if lead < 0xF0 {
            // E0 80–9F would be overlong; ED A0–BF would encode surrogates.
            let low: UInt8 = lead == 0xE0 ? 0xA0 : 0x80, high: UInt8 = lead == 0xED ? 0x9F : 0xBF
            return second >= low && second <= high && continuation(i + 2) ? 3 : 0
        }
        // F0 80–8F would be overlong; F4 90–BF and F5–FF lie above U+10FFFF.
        guard lead <= 0xF4 else { return 0 }
        let low: UInt8 = lead == 0xF0 ? 0x90 : 0x80, high: UInt8 = lead == 0xF4 ? 0x8F : 0xBF
        return second >= low && second <= high && continuation(i + 2) && continuation(i + 3) ? 4 : 0
    }

    /// The error for the character at `i` where `expected` should be (or for its invalid UTF-8).
    private static func unexpected(_ p: UnsafeRawPointer, _ n: Int, _ i: Int, expected: JSONValidationError.Expectation) -> JSONValidationError {
        let lead = byte(p, i)
        guard lead >= 0x80 else { return JSONValidationError(.unexpected(Unicode.Scalar(lead), expected: expected), at: i) }
        let length = utf8Length(p, n, i)
        guard length > 0 else { return JSONValidationError(.invalidUTF8, at: i) }
        var value = UInt32(lead) & (0xFF >> UInt32(length + 1))
        for k in 1 ..< length { value = value << 6 | UInt32(byte(p, i + k) & 0x3F) }
        return JSONValidationError(.unexpected(Unicode.Scalar(value)!, expected: expected), at: i)
    }
}

// MARK: - Errors

/// What makes an item other than one JSON value in valid UTF-8, and the byte offset (from 0)
/// where the check stopped: "unexpected ']' at byte 40 (expected a value)".
package struct JSONValidationError: Error, Hashable, Sendable, CustomStringConvertible {
    package enum Problem: Hashable, Sendable {
        /// No value: no bytes, or only whitespace (the offset is then where the value should start).
        case empty
        /// Bytes that are not well-formed UTF-8: a stray continuation byte, a truncated sequence,
        /// an overlong form, an encoded surrogate, a code point above U+10FFFF. The offset is the
        /// sequence's first byte.
        case invalidUTF8
        /// A character where the grammar wants something else.
        case unexpected(Unicode.Scalar, expected: Expectation)
        /// The item ends inside the value (the offset is the item's length).
        case unexpectedEnd(expected: Expectation)
        /// More than whitespace after the value.
        case trailingData
        /// An array or object opened `JSONValidator.maxDepth` deep (the offset is its bracket's).
        case tooDeep
        /// A byte below 0x20 inside a string: it must be escaped.
        case controlCharacter(UInt8)
        /// A backslash followed by something other than `" \ / b f n r t u` (the offset is the backslash's).
        case invalidEscape(UInt8)
        /// A 0 followed by a digit, as in `012` (the offset is the zero's).
        case leadingZero
    }

    /// What the grammar allows where the check stopped.
    package enum Expectation: Hashable, Sendable, CustomStringConvertible {
        case value, key, keyOrObjectEnd, colon, commaOrArrayEnd, commaOrObjectEnd
        case digit, hexDigit, escape, stringEnd
        case literal(Literal)

        package var description: String {
            switch self {
            case .value: "a value"
            case .key: "a string key"
            case .keyOrObjectEnd: "a string key or '}'"
            case .colon: "':'"
            case .commaOrArrayEnd: "',' or ']'"
            case .commaOrObjectEnd: "',' or '}'"
            case .digit: "a digit"
            case .hexDigit: "a hex digit"
            case .escape: "an escape after '\\'"
            case .stringEnd: "the closing '\"' of a string"
            case .literal(let literal): "the literal \(literal.rawValue)"
            }
        }
    }

    /// `true`, `false` or `null`.
    package enum Literal: String, Hashable, Sendable {
        case `true`, `false`, null
    }

    package let problem: Problem
    /// The byte offset from the item's start.
    package let offset: Int

    package init(_ problem: Problem, at offset: Int) {
        self.problem = problem
        self.offset = offset
    }

    package var description: String {
        let at = "at byte \(offset)"
        return switch problem {
        case .empty: offset == 0 ? "empty item" : "empty item (only whitespace)"
        case .invalidUTF8: "invalid UTF-8 \(at)"
        case let .unexpected(scalar, expected): "unexpected \(Self.show(scalar)) \(at) (expected \(expected))"
        case let .unexpectedEnd(expected): "unexpected end of the item \(at) (expected \(expected))"
        case .trailingData: "trailing data after the value \(at)"
        case .tooDeep: "nesting deeper than \(JSONValidator.maxDepth) \(at)"
        case let .controlCharacter(byte): "unescaped control character \(Self.show(Unicode.Scalar(byte))) in a string \(at)"
        case let .invalidEscape(byte):
            byte < 0x80 ? "invalid escape '\\\(Self.printable(Unicode.Scalar(byte)))' \(at)" : "invalid escape \(at)"
        case .leadingZero: "leading zero in a number \(at)"
        }
    }

    /// `'x'` for printable ASCII, `U+XXXX` otherwise.
    private static func show(_ scalar: Unicode.Scalar) -> String {
        (0x20 ... 0x7E).contains(scalar.value) ? "'\(scalar)'" : code(scalar)
    }

    private static func printable(_ scalar: Unicode.Scalar) -> String {
        (0x20 ... 0x7E).contains(scalar.value) ? "\(scalar)" : code(scalar)
    }

    private static func code(_ scalar: Unicode.Scalar) -> String {
        let hex = String(scalar.value, radix: 16, uppercase: true)
        return "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }
}
