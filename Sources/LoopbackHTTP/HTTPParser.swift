// Request-head parsing and percent-decoding for the loopback server.

/// Why a request head could not be parsed; maps to a status code.
enum HTTPParseError: Error, Equatable {
    case badRequest(String)
    case notImplemented(String)
    case tooLarge

    var status: Int {
        switch self {
        case .badRequest: 400
        case .notImplemented: 501
        case .tooLarge: 413
        }
    }

    var message: String {
        switch self {
        case .badRequest(let why): "Bad Request: \(why)"
        case .notImplemented(let why): "Not Implemented: \(why)"
        case .tooLarge: "Content Too Large"
        }
    }
}

/// The parsed head of a request plus the framing it asks for.
struct ParsedHead {
    var request: HTTPRequest
    var contentLength: Int
    var keepAlive: Bool
    var expectsContinue: Bool
}

enum HTTPParser {
    static let maxBodySize = 16 * 1024 * 1024

    /// Index of the first byte after `\r\n\r\n`, searching from `start`.
    static func headEnd(in buffer: [UInt8], from start: Int) -> Int? {
        var i = max(0, start)
        let n = buffer.count
        while i + 3 < n {
            if buffer[i + 3] != 10 { // "\n"
                i += 1
                continue
            }
            if buffer[i] == 13, buffer[i + 1] == 10, buffer[i + 2] == 13 {
                return i + 4
            }
            i += 1
        }
        return nil
    }

    private static func isTokenChar(_ c: UInt8) -> Bool {
        switch c {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(c)
        }
    }

    /// Parses the bytes of a request head (request line + header lines, without the final CRLF CRLF).
    static func parseHead(_ head: ArraySlice<UInt8>) throws(HTTPParseError) -> ParsedHead {
        var lines: [ArraySlice<UInt8>] = []
        var lineStart = head.startIndex
        var i = head.startIndex
        while i < head.endIndex {
            if head[i] == 10 {
                var end = i
                if end > lineStart, head[end - 1] == 13 { end -= 1 } else {
                    throw .badRequest("bare LF")
                }
                lines.append(head[lineStart..<end])
                lineStart = i + 1
            }
            i += 1
        }
        if lineStart < head.endIndex { lines.append(head[lineStart..<head.endIndex]) }
        // Tolerate leading empty lines before the request line (RFC 9112 §2.2).
        while let first = lines.first, first.isEmpty { lines.removeFirst() }
        guard let requestLine = lines.first else { throw .badRequest("empty request") }

        let parts = requestLine.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .badRequest("malformed request line") }
        let methodBytes = parts[0], targetBytes = parts[1], versionBytes = parts[2]
        guard !methodBytes.isEmpty, methodBytes.allSatisfy(isTokenChar) else { throw .badRequest("malformed method") }
        guard !targetBytes.isEmpty, targetBytes.allSatisfy({ $0 > 32 && $0 < 127 }) else {
            throw .badRequest("malformed request target")
        }
        let method = String(decoding: methodBytes, as: UTF8.self)
        let version = String(decoding: versionBytes, as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            if version.hasPrefix("HTTP/") { throw .notImplemented("unsupported version \(version)") }
            throw .badRequest("malformed HTTP version")
        }

        var headers: [String: String] = [:]
        var contentLengthValue: String?
        for line in lines.dropFirst() {
            guard let first = line.first else { throw .badRequest("empty header line") }
            if first == UInt8(ascii: " ") || first == UInt8(ascii: "\t") { throw .badRequest("obsolete line folding") }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { throw .badRequest("header without colon") }
            let nameBytes = line[line.startIndex..<colon]
            guard !nameBytes.isEmpty, nameBytes.allSatisfy(isTokenChar) else { throw .badRequest("malformed header name") }
            guard line[(colon + 1)...].allSatisfy({ $0 == 9 || ($0 >= 32 && $0 != 127) }) else {
                throw .badRequest("control character in header value")
            }
            let name = String(decoding: nameBytes, as: UTF8.self).lowercased()
            let value = String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingOWS()
            if name == "content-length" {
                if let previous = contentLengthValue, previous != value { throw .badRequest("conflicting Content-Length") }
                contentLengthValue = value
            }
            if let existing = headers[name] {
                if name != "content-length" { headers[name] = existing + ", " + value }
            } else {
                headers[name] = value
            }
        }

        if version == "HTTP/1.1", headers["host"] == nil { throw .badRequest("missing Host header") }
        if headers["transfer-encoding"] != nil { throw .notImplemented("Transfer-Encoding is not supported") }
        var contentLength = 0
        if let value = contentLengthValue {
            guard !value.isEmpty, value.utf8.count <= 18, value.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }),
                  let n = Int(value) else { throw .badRequest("malformed Content-Length") }
            guard n <= maxBodySize else { throw .tooLarge }
            contentLength = n
        }

        let connectionTokens = (headers["connection"] ?? "").lowercased()
            .split(separator: ",").map { $0.lhTrimming(" \t") }
        let keepAlive: Bool
        if connectionTokens.contains("close") {
            keepAlive = false
        } else if version == "HTTP/1.0" {
            keepAlive = connectionTokens.contains("keep-alive")
        } else {
            keepAlive = true
        }
        let expectsContinue = (headers["expect"]?.lowercased() == "100-continue") && version == "HTTP/1.1"

        // Split the target into path and query. Absolute-form targets keep only their path.
        var target = String(decoding: targetBytes, as: UTF8.self)
        let fullTarget = target
        if let schemeRange = target.range(of: "://") {
            let afterScheme = target[schemeRange.upperBound...]
            target = afterScheme.firstIndex(of: "/").map { String(afterScheme[$0...]) } ?? "/"
        }
        var rawPath = target
        var rawQuery = ""
        if let q = target.firstIndex(of: "?") {
            rawPath = String(target[..<q])
            rawQuery = String(target[target.index(after: q)...])
        }
        if let hash = rawQuery.firstIndex(of: "#") { rawQuery = String(rawQuery[..<hash]) }
        if let hash = rawPath.firstIndex(of: "#") { rawPath = String(rawPath[..<hash]) }
        let items = parseQuery(rawQuery)
        var query: [String: String] = [:]
        for item in items { query[item.name] = item.value }

        let request = HTTPRequest(
            method: method, path: percentDecode(rawPath, plusAsSpace: false), query: query,
            queryItems: items, rawQuery: rawQuery, target: fullTarget, version: version,
            headers: headers, body: [])
        return ParsedHead(request: request, contentLength: contentLength, keepAlive: keepAlive, expectsContinue: expectsContinue)
    }

    /// Splits `a=1&b=x%20y` into decoded pairs (form-style: `+` is a space).
    static func parseQuery(_ raw: String) -> [(name: String, value: String)] {
        guard !raw.isEmpty else { return [] }
        var result: [(name: String, value: String)] = []
        for pair in raw.split(separator: "&", omittingEmptySubsequences: true) {
            if let eq = pair.firstIndex(of: "=") {
                result.append((percentDecode(pair[..<eq], plusAsSpace: true),
                               percentDecode(pair[pair.index(after: eq)...], plusAsSpace: true)))
            } else {
                result.append((percentDecode(pair, plusAsSpace: true), ""))
            }
        }
        return result
    }

    /// Percent-decodes UTF-8; malformed escapes are kept literally, invalid UTF-8 is replaced.
    static func percentDecode<S: StringProtocol>(_ s: S, plusAsSpace: Bool) -> String {
        let bytes = Array(s.utf8)
        guard bytes.contains(UInt8(ascii: "%")) || (plusAsSpace && bytes.contains(UInt8(ascii: "+"))) else {
            return String(s)
        }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let c = bytes[i]
            if c == UInt8(ascii: "%"), i + 2 < bytes.count, let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) {
                out.append(hi << 4 | lo)
                i += 3
            } else if c == UInt8(ascii: "+"), plusAsSpace {
                out.append(UInt8(ascii: " "))
                i += 1
            } else {
                out.append(c)
                i += 1
            }
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func hexValue(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
        default: nil
        }
    }

    /// Serializes a response head + body into one buffer.
    static func serialize(_ response: HTTPResponse, keepAlive: Bool, http10: Bool, headOnly: Bool) -> [UInt8] {
        var head = "HTTP/1.1 \(response.status) \(HTTPResponse.reasonPhrase(response.status))\r\n"
        for (name, value) in response.headers {
            let lowered = name.lowercased()
            if lowered == "content-length" || lowered == "connection" || lowered == "transfer-encoding" { continue }
            // Never let a handler inject header lines.
            let safeName = name.filter { $0 != "\r" && $0 != "\n" && $0 != ":" }
            let safeValue = value.filter { $0 != "\r" && $0 != "\n" }
            head += "\(safeName): \(safeValue)\r\n"
        }
        let bodyAllowed = !(100..<200).contains(response.status) && response.status != 204 && response.status != 304
        if bodyAllowed { head += "Content-Length: \(response.body.count)\r\n" }
        if !keepAlive {
            head += "Connection: close\r\n"
        } else if http10 {
            head += "Connection: keep-alive\r\n"
        }
        head += "\r\n"
        var bytes = Array(head.utf8)
        if bodyAllowed && !headOnly { bytes += response.body }
        return bytes
    }
}

extension String {
    /// Trims optional whitespace (spaces and tabs) at both ends.
    func trimmingOWS() -> String {
        lhTrimming(" \t")
    }
}

extension StringProtocol {
    func lhTrimming(_ set: String) -> String {
        let chars = Set(set)
        var start = startIndex, end = endIndex
        while start < end, chars.contains(self[start]) { start = index(after: start) }
        while end > start, chars.contains(self[index(before: end)]) { end = index(before: end) }
        return String(self[start..<end])
    }
}
