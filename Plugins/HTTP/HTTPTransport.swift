// The Swift face of the libcurl transport (HTTPCore/transport.c): one client per source
// instance, its connections reused across pages; a response is seen inside its callback only,
// so a body is scanned where libcurl left it, never copied first.
import CHTTPCore
import Glibc
import PagingPluginKit

/// One HTTP request as the transport sends it.
struct TransportRequest: Sendable {
    var url: String
    var method: String = "GET"
    /// "Name: value" lines.
    var headers: [String]
    var body: [UInt8]? = nil
    var timeoutMilliseconds: Int
    var maxBodyBytes: Int
    var maxHeaderBytes: Int
    /// A PEM file of the certificates to verify an https server with (nil: the system's).
    var caFile: String?
}

/// A finished transfer, valid during the callback only (its buffers belong to the transport).
struct TransportResponse {
    enum Outcome {
        case response
        case cancelled
        /// A transfer error: libcurl's code and message.
        case failed(code: Int32, message: String)
        case bodyTooLarge
        case headersTooLarge
        /// One header line passed libcurl's limit (100 KiB).
        case headerLineTooLarge
        /// The reply did not start with an HTTP status line; the first bytes of it.
        case notHTTP(prefix: UnsafeBufferPointer<UInt8>)
    }

    var outcome: Outcome
    /// The transfer ended without a whole response, and not by a cancel (a timeout, a body
    /// too large, a reply that is not HTTP).
    var failedInTransfer: Bool {
        switch outcome {
        case .response, .cancelled: false
        default: true
        }
    }
    var status: Int
    var body: UnsafeBufferPointer<UInt8>
    /// The header lines of the final response, names lower-cased.
    var headers: [(name: String, value: String)]
    /// The names of the headers whose value is not UTF-8 (in `headers` with U+FFFD where the
    /// bytes were not; a Link's are percent-encoded instead).
    var headersNotUTF8: Set<String> = []
    /// For a 3xx with Location: the absolute URL it points at.
    var redirectURL: String?
    /// The body's scan, when it was made ahead (StoredResponse).
    var scanned: Result<BodyScan, ScanError>?
    /// The page's keys, when they were found ahead (StoredResponse).
    var keysAhead: KeysAhead?

    /// A 2xx kept past its callback (StoredResponse): `body` is borrowed from it.
    init(status: Int, headers: [(name: String, value: String)], headersNotUTF8: Set<String>, body: UnsafeBufferPointer<UInt8>) {
        outcome = .response
        self.status = status
        self.headers = headers
        self.headersNotUTF8 = headersNotUTF8
        self.body = body
    }

    func header(_ name: String) -> String? {
        headers.first { $0.name == name }?.value
    }

    /// Every value of header `name` (lower case), joined as one list (RFC 9110: a list-valued
    /// field may come in several lines).
    func headerList(_ name: String) -> String? {
        let values = headers.filter { $0.name == name }.map(\.value)
        return values.isEmpty ? nil : values.joined(separator: ", ")
    }

    init(_ r: UnsafePointer<ht_response>) {
        let view = r.pointee
        status = Int(view.status)
        body = UnsafeBufferPointer(start: view.body, count: view.body_len)
        redirectURL = view.redirect_url.map { String(cString: $0) }
        (headers, headersNotUTF8) = TransportResponse.parseHeaders(view.headers, count: view.headers_len)
        if view.cancelled != 0 {
            outcome = .cancelled
        } else if view.limit == Int32(HT_LIMIT_BODY) || view.curl_code == 63 /* CURLE_FILESIZE_EXCEEDED */ {
            outcome = .bodyTooLarge
        } else if view.limit == Int32(HT_LIMIT_HEADERS) {
            outcome = .headersTooLarge
        } else if view.limit == Int32(HT_LIMIT_HEADER_LINE) {
            outcome = .headerLineTooLarge
        } else if view.not_http != 0 {
            outcome = .notHTTP(prefix: body)
        } else if view.curl_code != 0 {
            outcome = .failed(code: view.curl_code, message: view.error.map { String(cString: $0) } ?? "")
        } else {
            outcome = .response
        }
    }

    private static func parseHeaders(_ text: UnsafePointer<CChar>?, count: Int) -> ([(name: String, value: String)], notUTF8: Set<String>) {
        guard let text, count > 0 else { return ([], []) }
        let bytes = UnsafeRawBufferPointer(start: text, count: count).bindMemory(to: UInt8.self)
        // Bytes, not Strings, until each name and value is cut out (names lower-cased as ASCII:
        // header names are tokens).
        let isSpace: (UInt8) -> Bool = { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") || $0 == UInt8(ascii: "\r") }
        var notUTF8: Set<String> = []
        func trimmed(_ value: Slice<UnsafeBufferPointer<UInt8>>, of name: String) -> String {
            var value = value
            while let last = value.last, isSpace(last) { value.removeLast() }
            while let first = value.first, isSpace(first) { value.removeFirst() }
            if name == "link" { return ResponseParsing.percentEncodingInvalidUTF8(value) }
            if let text = String(validating: value, as: UTF8.self) { return text }
            notUTF8.insert(name)
            return String(decoding: value, as: UTF8.self)
        }
        var out: [(name: String, value: String)] = []
        for line in bytes.split(separator: UInt8(ascii: "\n")) {
            // A line folded onto the one before (obsolete, RFC 9112 5.2): one value, the fold a space.
            if let first = line.first, first == UInt8(ascii: " ") || first == UInt8(ascii: "\t"), !out.isEmpty {
                let more = trimmed(line, of: out[out.count - 1].name)
                if !more.isEmpty { out[out.count - 1].value += (out[out.count - 1].value.isEmpty ? "" : " ") + more }
                continue
            }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            // "Link : <...>": RFC 9112 has no space there, but libcurl takes the line, and so does this.
            var name = line[..<colon]
            while let last = name.last, last == UInt8(ascii: " ") || last == UInt8(ascii: "\t") { name.removeLast() }
            let lowercased = ResponseParsing.asciiLowercased(name)
            out.append((lowercased, trimmed(line[(colon + 1)...], of: lowercased)))
        }
        return (out, notUTF8)
    }
}

/// The keys of a page fetched ahead, and the key and page size they were found for.
struct KeysAhead {
    var key: String
    var pageSize: Int
    var keys: PageContent
}

/// A libcurl multi handle and its thread (see transport.c).
///
/// # Thread safety
/// `start` and `cancel` may be called from any thread, callbacks included; callbacks run on
/// the client's thread, one at a time.
final class TransportClient: @unchecked Sendable {
    private let client: OpaquePointer

    init() throws(PluginFailure) {
        guard let client = ht_client_new() else { throw .internal("libcurl could not be set up (curl_global_init, curl_multi_init or a thread)") }
        self.client = client
    }

    deinit { ht_client_free(client) }

    private final class Callback {
        let body: (TransportResponse) -> Void
        init(_ body: @escaping (TransportResponse) -> Void) { self.body = body }
    }

    /// Starts `request`; `completion` runs once on the client's thread (not when the client is
    /// freed first). Returns the transfer's id, or nil when libcurl refused the request.
    func start(_ request: TransportRequest, completion: @escaping @Sendable (TransportResponse) -> Void) -> UInt64? {
        let context = Unmanaged.passRetained(Callback(completion)).toOpaque()
        var cStrings = request.headers.map { strdup($0) }
        let caFile = request.caFile.flatMap { strdup($0) }
        defer {
            cStrings.forEach { free($0) }
            free(caFile)
        }
        let id: UInt64 = request.url.withCString { url in
            request.method.withCString { method in
                cStrings.withUnsafeMutableBufferPointer { lines in
                    lines.withMemoryRebound(to: UnsafePointer<CChar>?.self) { headers in
                        (request.body ?? []).withUnsafeBufferPointer { body in
                            var view = ht_request(url: url, method: method, headers: headers.baseAddress, header_count: headers.count,
                                                  body: body.baseAddress, body_len: body.count,
                                                  timeout_ms: request.timeoutMilliseconds, max_body_bytes: request.maxBodyBytes,
                                                  max_header_bytes: request.maxHeaderBytes, ca_file: caFile)
                            return ht_client_start(client, &view, { context, response in
                                guard let context, let response else { return }
                                let callback = Unmanaged<Callback>.fromOpaque(context).takeRetainedValue()
                                callback.body(TransportResponse(response))
                            }, context)
                        }
                    }
                }
            }
        }
        guard id != 0 else {
            Unmanaged<Callback>.fromOpaque(context).release()
            return nil
        }
        return id
    }

    func cancel(_ id: UInt64) { ht_client_cancel(client, id) }
}
