/// Text from outside the host (a plugin's id or message, a manifest's key) made safe to print as
/// part of one line of a log: control characters become escapes, so that the text can neither
/// start a line of its own nor steer a terminal, and a text too long is cut with a note.
package enum OneLine {
    /// `text` with its control characters escaped: `\n`, `\r`, `\t`, and `\u00XX` for the other
    /// C0 controls, DEL and the C1 controls (U+0080–U+009F). When `text` is longer than `limit`
    /// UTF-8 bytes, only its first `limit` bytes (cut between characters) are kept, followed by
    /// ` … (N more bytes)`.
    ///
    /// One pass over the bytes that are kept, so linear in their number whatever the text holds;
    /// the result is at most six bytes for each byte kept, plus the note.
    package static func escape(_ text: some StringProtocol, limit: Int = .max) -> String {
        let whole = Substring(text)
        let text = whole[..<keptEnd(whole.utf8, limit: limit)]
        let rest = whole.utf8.count - text.utf8.count
        let note = rest > 0 ? " … (\(rest) more bytes)" : ""
        guard text.utf8.contains(where: needsScan) else { return String(text) + note }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(text.utf8.count + 16)
        var previous: UInt8 = 0
        for byte in text.utf8 {
            defer { previous = byte }
            switch byte {
            case 0x0A: appendEscape(UInt8(ascii: "n"), to: &bytes)
            case 0x0D: appendEscape(UInt8(ascii: "r"), to: &bytes)
            case 0x09: appendEscape(UInt8(ascii: "t"), to: &bytes)
            case 0x00..<0x20, 0x7F: appendCodeEscape(byte, to: &bytes)
            case 0x80...0x9F where previous == 0xC2:
                // A C1 control is 0xC2 then this byte: the lead byte already went out.
                bytes.removeLast()
                appendCodeEscape(byte, to: &bytes)
            default: bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self) + note
    }

    /// Whether a byte may start or be part of a control character (C1 controls start with 0xC2).
    private static func needsScan(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F || byte == 0xC2 }

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

    /// `\u00XX`.
    private static func appendCodeEscape(_ value: UInt8, to bytes: inout [UInt8]) {
        appendEscape(UInt8(ascii: "u"), to: &bytes)
        bytes.append(UInt8(ascii: "0"))
        bytes.append(UInt8(ascii: "0"))
        bytes.append(hexDigits[Int(value >> 4)])
        bytes.append(hexDigits[Int(value & 0xF)])
    }
}
