import Glibc

/// `bytes` as lowercase hex, two digits a byte.
package func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let digits = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(bytes.underestimatedCount * 2)
    for byte in bytes {
        out.append(digits[Int(byte >> 4)])
        out.append(digits[Int(byte & 0x0F)])
    }
    return String(decoding: out, as: UTF8.self)
}

/// Writes all of `bytes` to `descriptor`, again after a signal; the errno of a failure (EIO
/// for a write that wrote nothing), or `nil`.
package func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer) -> Int32? {
    var offset = 0
    while offset < bytes.count {
        let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
        if written < 0 && errno == EINTR { continue }
        if written < 0 { return errno }
        if written == 0 { return EIO }
        offset += written
    }
    return nil
}

/// Writes `text` whole to standard error, unbuffered (a failure is not reported).
package func writeToStandardError(_ text: String) {
    _ = Array(text.utf8).withUnsafeBytes { writeAll(STDERR_FILENO, $0) }
}

/// `value` with `digits` digits after the point, as `String(format: "%.Nf")` writes it.
package func fixedPoint(_ value: Double, digits: Int) -> String {
    var buffer = [CChar](repeating: 0, count: 64)
    _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, "%.\(digits)f", $0) }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

package extension StringProtocol {
    /// The text without the spaces, tabs and line breaks it starts or ends with.
    var trimmingWhitespace: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0.isNewline }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
