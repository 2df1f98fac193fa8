import Glibc

/// Text from outside the host (a plugin's id or message, a manifest's key) made safe to print as
/// part of one line of a log: control characters become escapes, so that the text can neither
/// start a line of its own nor steer a terminal, and a text too long is cut with a note.
package enum OneLine {
    /// `text` with its control characters escaped: `\n`, `\r`, `\t`, and `\u00XX` for the other
    /// C0 controls, DEL and the C1 controls (U+0080–U+009F); the bidirectional controls
    /// (``isBidiControl(_:)``) as `\uXXXX` too: a line could otherwise reorder what a terminal
    /// shows of it and of the lines around. When `text` is longer than `limit` UTF-8 bytes, only
    /// its first `limit` bytes (cut between characters) are kept, followed by ` … (N more bytes)`.
    ///
    /// One pass over the bytes that are kept, so linear in their number whatever the text holds;
    /// the result is at most six bytes for each byte kept, plus the note.
    package static func escape(_ text: some StringProtocol, limit: Int = .max) -> String {
        let whole = Substring(text)
        let text = whole[..<keptEnd(whole.utf8, limit: limit)]
        var rest = whole.utf8.count - text.utf8.count
        // A text the host cut already (``cut(_:limit:)``): its note's bytes count too, not the note.
        if rest > 0, let (noteLength, count) = trailingNote(whole.utf8), rest >= noteLength { rest += count - noteLength }
        let note = rest > 0 ? Self.note(rest) : ""
        guard text.utf8.contains(where: needsScan) else { return String(text) + note }
        let utf8 = Array(text.utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count + 16)
        var index = 0
        while index < utf8.count {
            let byte = utf8[index]
            index += 1
            switch byte {
            case 0x0A: appendEscape(UInt8(ascii: "n"), to: &bytes)
            case 0x0D: appendEscape(UInt8(ascii: "r"), to: &bytes)
            case 0x09: appendEscape(UInt8(ascii: "t"), to: &bytes)
            case 0x00..<0x20, 0x7F: appendCodeEscape(UInt32(byte), to: &bytes)
            case 0xC2, 0xD8, 0xE2:
                guard let (value, length) = terminalControl(in: utf8, at: index - 1) else { fallthrough }
                appendCodeEscape(value, to: &bytes)
                index += length - 1
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self) + note
    }

    /// The first `limit` bytes of the UTF-8 text at `text` (cut between characters; invalid
    /// bytes replaced), then the note of how many more there were, when it holds more: only
    /// the bytes kept are copied. For a plugin's message, which may be hundreds of MB long.
    package static func cut(_ text: UnsafePointer<CChar>, limit: Int) -> String {
        let kept = strnlen(text, limit + 1)
        guard kept > limit else { return String(cString: text) }
        let bytes = UnsafeRawPointer(text).assumingMemoryBound(to: UInt8.self)
        var end = limit
        // Continuation bytes (10xxxxxx) belong to the scalar before them.
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        let total = kept + strlen(text + kept)
        return String(decoding: UnsafeBufferPointer(start: bytes, count: end), as: UTF8.self) + note(total - end)
    }

    /// The note that says `count` bytes were left out.
    private static func note(_ count: Int) -> String { " … (\(count) more bytes)" }

    /// The length of the note at the end of `utf8`, and the bytes it counts; nil without one.
    private static func trailingNote(_ utf8: Substring.UTF8View) -> (length: Int, count: Int)? {
        let close = Array(" more bytes)".utf8), open = Array(" … (".utf8)
        guard utf8.count > close.count + open.count, utf8.suffix(close.count).elementsEqual(close) else { return nil }
        let beforeClose = utf8.dropLast(close.count)
        let digits = beforeClose.reversed().prefix { (0x30...0x39).contains($0) }.reversed()
        guard !digits.isEmpty, digits.count <= 18, beforeClose.dropLast(digits.count).suffix(open.count).elementsEqual(open),
              let count = Int(String(decoding: digits, as: UTF8.self)) else { return nil }
        return (open.count + digits.count + close.count, count)
    }

    /// The C1 control (U+0080–U+009F) or bidirectional control (``isBidiControl(_:)``) whose
    /// UTF-8 starts at `index` of `bytes` (valid UTF-8), and its length in bytes; nil for any
    /// other character. Their lead bytes: 0xC2 for a C1 control, 0xD8 for U+061C, 0xE2 for the
    /// other bidirectional controls.
    package static func terminalControl(in bytes: [UInt8], at index: Int) -> (value: UInt32, length: Int)? {
        let byte = bytes[index]
        guard byte == 0xC2 || byte == 0xD8 || byte == 0xE2 else { return nil }
        let length = byte == 0xE2 ? 3 : 2
        guard index + length <= bytes.count else { return nil }
        let value = bytes[(index + 1)..<(index + length)].reduce(UInt32(byte) & (length == 3 ? 0x0F : 0x1F)) { $0 << 6 | UInt32($1 & 0x3F) }
        guard (0x80...0x9F).contains(value) || Unicode.Scalar(value).map(isBidiControl) == true else { return nil }
        return (value, length)
    }

    /// The bidirectional formatting characters (ALM, LRM, RLM, the embeddings, overrides and
    /// isolates).
    package static func isBidiControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }

    /// Whether a byte may start or be part of a character escaped (C1 controls start with 0xC2,
    /// the bidirectional controls with 0xD8 or 0xE2).
    private static func needsScan(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F || byte == 0xC2 || byte == 0xD8 || byte == 0xE2 }

    /// Where the kept part of `utf8` ends: its end when it holds at most `limit` bytes, else
    /// at most `limit` bytes in, between two scalars.
    private static func keptEnd(_ utf8: Substring.UTF8View, limit: Int) -> Substring.Index {
        guard utf8.count > max(0, limit) else { return utf8.endIndex }
        var end = utf8.index(utf8.startIndex, offsetBy: max(0, limit))
        // Continuation bytes (10xxxxxx) belong to the scalar before them.
        while end > utf8.startIndex, utf8[end] & 0xC0 == 0x80 { end = utf8.index(before: end) }
        return end
    }

    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// A backslash and `letter`.
    private static func appendEscape(_ letter: UInt8, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\\"))
        bytes.append(letter)
    }

    /// `\uXXXX` of a value below 0x10000.
    private static func appendCodeEscape(_ value: UInt32, to bytes: inout [UInt8]) {
        appendEscape(UInt8(ascii: "u"), to: &bytes)
        for shift in stride(from: 12, through: 0, by: -4) { bytes.append(hexDigits[Int(value >> UInt32(shift) & 0xF)]) }
    }
}
