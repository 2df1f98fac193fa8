// Finding a secret in text however a server wrote it back: servers echo credentials in URLs
// (Link headers, redirects) and error bodies, percent-encoded in either case, partly encoded,
// or escaped as in a JSON string.

/// A secret to find in text, each of its bytes written as it is, percent-encoded in either case
/// ("%2F", "%2f"), escaped as in a JSON string ("\/", "\"", "\\", "\u002F"), or, for a space,
/// as "+" (a form-encoded query).
struct EncodedSecret: Sendable {
    let bytes: [UInt8]

    init(_ secret: String) {
        bytes = Array(secret.utf8)
    }

    /// The longest a byte of the secret may be written: "\u00XX".
    static let longestEncoding = 6

    /// `text` with every occurrence of the secret replaced by `replacement`.
    func replacing(in text: String, with replacement: String) -> String {
        let t = Array(text.utf8)
        guard let first = bytes.first, t.count >= bytes.count else { return text }
        var out: [UInt8] = []
        var i = 0, copied = 0
        while i < t.count {
            // Only a byte that may begin the secret is tried (its own, or the start of an escape).
            if t[i] == first || t[i] == UInt8(ascii: "%") || t[i] == UInt8(ascii: "\\") || (first == 0x20 && t[i] == UInt8(ascii: "+")),
               let end = match(t, from: i, wholeSecret: true) {
                out += t[copied..<i]
                out += replacement.utf8
                i = end
                copied = end
            } else {
                i += 1
            }
        }
        guard copied > 0 else { return text }
        out += t[copied...]
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `text` is the secret, whole.
    func isWritten(as text: Substring) -> Bool {
        let t = Array(text.utf8)
        return match(t, from: 0, wholeSecret: true) == t.count
    }

    /// How many bytes at the end of `text` are the beginning of the secret (0 when none):
    /// what is left of a secret that a cut went through.
    func cutPrefixLength(atEndOf text: String) -> Int {
        let t = Array(text.utf8)
        let earliest = max(0, t.count - bytes.count * Self.longestEncoding)
        for start in earliest..<t.count where match(t, from: start, wholeSecret: false) == t.count {
            return t.count - start
        }
        return 0
    }

    /// Where the secret written from `start` ends in `t`; nil when it is not written there.
    /// Without `wholeSecret`, reaching the end of `t` partway through the secret counts too.
    private func match(_ t: [UInt8], from start: Int, wholeSecret: Bool) -> Int? {
        var j = start
        for byte in bytes {
            guard j < t.count else { return wholeSecret || j == start ? nil : j }
            guard let next = Self.written(byte, in: t, at: j) else { return nil }
            j = next
        }
        return wholeSecret ? j : nil
    }

    /// Where `byte`, written at `j` in `t` in one of the accepted ways, ends.
    private static func written(_ byte: UInt8, in t: [UInt8], at j: Int) -> Int? {
        let c = t[j]
        if c == byte { return j + 1 }
        if c == UInt8(ascii: "%"), j + 2 < t.count, let value = hex(t[(j + 1)...(j + 2)]), value == byte { return j + 3 }
        if c == UInt8(ascii: "+"), byte == 0x20 { return j + 1 }
        guard c == UInt8(ascii: "\\"), j + 1 < t.count else { return nil }
        let escaped = t[j + 1]
        if escaped == byte, byte == UInt8(ascii: "/") || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") { return j + 2 }
        if escaped == UInt8(ascii: "u"), j + 5 < t.count, let value = hex(t[(j + 2)...(j + 5)]), value == byte { return j + 6 }
        return nil
    }

    /// The value of hex digits (either case), when it fits in a byte.
    private static func hex(_ digits: ArraySlice<UInt8>) -> UInt8? {
        var value = 0
        for digit in digits {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | Int(digit - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = value << 4 | Int(digit - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = value << 4 | Int(digit - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }
        return value <= 0xFF ? UInt8(value) : nil
    }
}
