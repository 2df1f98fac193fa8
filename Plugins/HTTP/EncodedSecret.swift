// Finding a secret in text however a server wrote it back: servers echo credentials in URLs
// (Link headers, redirects) and error bodies, percent-encoded in either case, partly encoded,
// or escaped as in a JSON string.

/// A secret to find in text, each of its characters written as it is, byte by byte
/// percent-encoded in either case ("%2F", "%2f", "%C3%B6") or more than once ("%252F"),
/// escaped as in a JSON string ("\/", "\"", "\\", "\u002F", "\u00f6", a surrogate pair), or,
/// for a space, as "+" (a form-encoded query).
struct EncodedSecret: Sendable {
    let bytes: [UInt8]
    private let scalars: [Unicode.Scalar]

    init(_ secret: String) {
        bytes = Array(secret.utf8)
        scalars = Array(secret.unicodeScalars)
    }

    /// The most times a byte may be percent-encoded over ("%252F" is "/" encoded twice).
    static let deepestEncoding = 8

    /// The longest a byte of the secret may be written: percent-encoded ``deepestEncoding``
    /// times ("%", "25" seven times, two digits; "\u00XX" is 6, and a character of two bytes
    /// and more is written in at most as many: "\u00F6", a surrogate pair for four).
    static let longestEncoding = 2 * deepestEncoding + 1

    /// `text` with the places each secret of `replacements` is written replaced by its
    /// replacement; with `encodingAsWritten`, a replacement is percent-encoded as many times as
    /// the secret was where it is written so ("+" for a space counts as once; JSON-escaped is as
    /// it is). Each secret takes, in the order listed (longest first, so that a secret holding
    /// or overlapping a shorter one is replaced whole), the places no secret before it took; the
    /// text is searched as it came, so what a replacement wrote is never searched (a secret
    /// "credentials" is not found inside the reference `${basic:credentials}` another was
    /// replaced by).
    static func replacing(_ replacements: [(secret: EncodedSecret, replacement: String)], in text: String,
                          encodingAsWritten: Bool = false) -> String {
        let t = Array(text.utf8)
        var taken: [(range: Range<Int>, written: String)] = []
        for (secret, replacement) in replacements {
            // Every place, overlapping ones too: one that overlaps a place taken may be followed
            // by another, free, that begins inside it ("s3cr3ts3cr3ts").
            for (range, depth) in secret.places(in: t, overlapping: true) where !taken.contains(where: { $0.range.overlaps(range) }) {
                var written = replacement
                if encodingAsWritten { for _ in 0..<depth { written = percentEncode(written) } }
                taken.append((range, written))
            }
        }
        return taken.isEmpty ? text : Self.text(t, writing: taken.sorted { $0.range.lowerBound < $1.range.lowerBound })
    }

    /// `text` with every place any of `secrets` is written replaced by `replacement`, places
    /// that overlap as one (so no part of either is left).
    static func redacting(_ secrets: [EncodedSecret], in text: String, with replacement: String = "***") -> String {
        let t = Array(text.utf8)
        var spans = secrets.flatMap { $0.places(in: t, overlapping: true).map(\.range) }.sorted { $0.lowerBound < $1.lowerBound }
        guard !spans.isEmpty else { return text }
        var merged = [spans.removeFirst()]
        for span in spans {
            if span.lowerBound < merged[merged.count - 1].upperBound {
                merged[merged.count - 1] = merged[merged.count - 1].lowerBound..<max(span.upperBound, merged[merged.count - 1].upperBound)
            } else {
                merged.append(span)
            }
        }
        return Self.text(t, writing: merged.map { ($0, replacement) })
    }

    /// `t` with each of `spans` (in order, none overlapping) written as its text.
    private static func text(_ t: [UInt8], writing spans: [(range: Range<Int>, written: String)]) -> String {
        var out: [UInt8] = []
        var copied = 0
        for (range, written) in spans {
            out += t[copied..<range.lowerBound]
            out += written.utf8
            copied = range.upperBound
        }
        out += t[copied...]
        return String(decoding: out, as: UTF8.self)
    }

    /// The places the secret is written whole in `t`, left to right, each with the most times
    /// one of its bytes is percent-encoded there; `overlapping`, also those that begin inside
    /// another (else the search goes on after each).
    private func places(in t: [UInt8], overlapping: Bool = false) -> [(range: Range<Int>, depth: Int)] {
        guard let first = bytes.first else { return [] }
        var found: [(range: Range<Int>, depth: Int)] = []
        var i = 0
        // No way of writing the secret is shorter than its bytes.
        while t.count - i >= bytes.count {
            // Only a byte that may begin the secret is tried (its own, or the start of an escape).
            if t[i] == first || t[i] == UInt8(ascii: "%") || t[i] == UInt8(ascii: "\\") || (first == 0x20 && t[i] == UInt8(ascii: "+")),
               let (end, depth) = match(t, from: i, wholeSecret: true) {
                found.append((i..<end, depth))
                i = overlapping ? i + 1 : end
            } else {
                i += 1
            }
        }
        return found
    }

    /// Whether `text` is the secret, whole.
    func isWritten(as text: Substring) -> Bool {
        let t = Array(text.utf8)
        return match(t, from: 0, wholeSecret: true)?.end == t.count
    }

    /// How many bytes at the end of `text` are the beginning of the secret (0 when none):
    /// what is left of a secret that a cut went through.
    func cutPrefixLength(atEndOf text: String) -> Int {
        let t = Array(text.utf8)
        let earliest = max(0, t.count - bytes.count * Self.longestEncoding)
        for start in earliest..<t.count where match(t, from: start, wholeSecret: false)?.end == t.count {
            return t.count - start
        }
        return 0
    }

    /// A place the secret is written: where it ends, and the most times one of its bytes is
    /// percent-encoded there.
    private typealias Written = (end: Int, depth: Int)

    /// Where the secret written from `start` ends in `t`; nil when it is not written there.
    /// Without `wholeSecret`, reaching the end of `t` partway through the secret counts too.
    private func match(_ t: [UInt8], from start: Int, wholeSecret: Bool) -> Written? {
        match(t, character: 0, at: start, depth: 0, wholeSecret: wholeSecret)
    }

    /// The secret's characters from number `k` on, written from `j`, tried each way the
    /// character may be written ("\\" is a backslash, or one escaped).
    private func match(_ t: [UInt8], character k: Int, at j: Int, depth: Int, wholeSecret: Bool) -> Written? {
        guard k < scalars.count else { return wholeSecret ? (j, depth) : nil }
        for (end, written) in Self.ends(of: scalars[k], in: t, at: j, partial: !wholeSecret) {
            if end == t.count, !wholeSecret { return (end, max(depth, written)) }
            if let matched = match(t, character: k + 1, at: end, depth: max(depth, written), wholeSecret: wholeSecret) { return matched }
        }
        return nil
    }

    /// Where `scalar` written at `j` in `t` ends, for each way it is written there; with
    /// `partial`, `t.count` when `t` ends partway through it.
    private static func ends(of scalar: Unicode.Scalar, in t: [UInt8], at j: Int, partial: Bool) -> [Written] {
        guard j < t.count else { return [] }
        let cut: [Written] = partial ? [(t.count, 0)] : []
        var ends: [Written] = []
        if let written = bytewise(scalar, in: t, at: j, partial: partial) { ends.append(written) }
        // A "%" of the secret is itself (bytewise), or "%25", "%2525"...: each a way it may end.
        if scalar == "%" { ends += percentEncodings(of: 0x25, in: t, at: j, partial: partial) }
        guard t[j] == UInt8(ascii: "\\") else { return ends }
        guard j + 1 < t.count else { return ends + cut }
        let escaped = t[j + 1]
        if scalar == "/" || scalar == "\"" || scalar == "\\", escaped == UInt8(scalar.value) { ends.append((j + 2, 0)) }
        guard escaped == UInt8(ascii: "u") else { return ends }
        guard let (value, end) = unicodeEscape(in: t, at: j) else { return ends + (j + 6 > t.count ? cut : []) }
        if value == scalar.value { return ends + [(end, 0)] }
        // A character beyond U+FFFF: a high surrogate, then a low one.
        guard scalar.value > 0xFFFF, (0xD800..<0xDC00).contains(value), 0xD800 + (scalar.value - 0x10000) >> 10 == value else { return ends }
        guard end < t.count else { return ends + cut }
        guard let (low, after) = unicodeEscape(in: t, at: end) else { return ends + (end + 6 > t.count ? cut : []) }
        if 0xDC00 + (scalar.value - 0x10000) & 0x3FF == low { ends.append((after, 0)) }
        return ends
    }

    /// Where `scalar`'s bytes written from `j` end, each as it is or percent-encoded once or
    /// more ("%2F", "%252F": the "%" encoded as "%25" again; a space also as "+"), and the
    /// most times one is encoded; with `partial`, `t.count` when `t` ends partway through them.
    private static func bytewise(_ scalar: Unicode.Scalar, in t: [UInt8], at j: Int, partial: Bool) -> Written? {
        var i = j, depth = 0
        for byte in String(scalar).utf8 {
            guard i < t.count else { return partial ? (t.count, depth) : nil }
            if t[i] == byte {
                i += 1
            } else if byte == 0x20 && t[i] == UInt8(ascii: "+") {
                i += 1
                depth = max(depth, 1)
            } else if t[i] == UInt8(ascii: "%") {
                guard let (end, times) = percentEncodings(of: byte, in: t, at: i, partial: partial).first else { return nil }
                if end == t.count, partial { return (end, max(depth, times)) }
                i = end
                depth = max(depth, times)
            } else {
                return nil
            }
        }
        return (i, depth)
    }

    /// Where `byte` percent-encoded once or more from `i` ends ("%", then "25" for each encoding
    /// over the first, then the byte's two digits), with how many times: one way at most, but
    /// for "%" itself, whose digits "25" are also the mark of one encoding more ("%25",
    /// "%2525"...); with `partial`, `t.count` when `t` ends partway through one.
    private static func percentEncodings(of byte: UInt8, in t: [UInt8], at i: Int, partial: Bool) -> [Written] {
        guard i < t.count, t[i] == UInt8(ascii: "%") else { return [] }
        var ends: [Written] = []
        var k = i + 1, times = 1
        while times <= deepestEncoding {
            guard k + 1 < t.count else { return ends + (partial && hex(t[k...]) != nil ? [(t.count, times)] : []) }
            guard let value = hex(t[k...(k + 1)]) else { break }
            if value == UInt32(byte) {
                ends.append((k + 2, times))
                if byte != 0x25 { break }
            } else if value != 0x25 {
                break
            }
            k += 2
            times += 1
        }
        return ends
    }

    /// The value of the escape "\uXXXX" at `j`, and where it ends.
    private static func unicodeEscape(in t: [UInt8], at j: Int) -> (UInt32, Int)? {
        guard j + 5 < t.count, t[j] == UInt8(ascii: "\\"), t[j + 1] == UInt8(ascii: "u"), let value = hex(t[(j + 2)...(j + 5)]) else { return nil }
        return (value, j + 6)
    }

    /// The value of hex digits (either case).
    private static func hex(_ digits: ArraySlice<UInt8>) -> UInt32? {
        var value: UInt32 = 0
        for digit in digits {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt32(digit - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = value << 4 | UInt32(digit - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): value = value << 4 | UInt32(digit - UInt8(ascii: "A") + 10)
            default: return nil
            }
        }
        return value
    }
}
