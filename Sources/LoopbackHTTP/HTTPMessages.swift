// HTTP request and response values used by `LoopbackHTTPServer`.

/// A parsed HTTP/1.x request.
public struct HTTPRequest: Sendable {
    /// Request method as sent, e.g. `GET`.
    public var method: String
    /// Percent-decoded path without the query string, e.g. `/search/repositories`.
    public var path: String
    /// Query parameters, percent-decoded (`+` decodes to a space). When a name repeats, the last value wins.
    public var query: [String: String]
    /// Query parameters in the order sent, percent-decoded.
    public var queryItems: [(name: String, value: String)]
    /// The raw (still encoded) query string after `?`, or "" when there is none.
    public var rawQuery: String
    /// The request target exactly as sent on the request line.
    public var target: String
    /// `HTTP/1.1` or `HTTP/1.0`.
    public var version: String
    /// Header fields with lowercased names; repeated fields are joined with ", ".
    public var headers: [String: String]
    /// Body bytes (Content-Length framed).
    public var body: [UInt8]

    public init(
        method: String, path: String, query: [String: String] = [:],
        queryItems: [(name: String, value: String)] = [], rawQuery: String = "",
        target: String? = nil, version: String = "HTTP/1.1",
        headers: [String: String] = [:], body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.queryItems = queryItems
        self.rawQuery = rawQuery
        self.target = target ?? (rawQuery.isEmpty ? path : path + "?" + rawQuery)
        self.version = version
        self.headers = headers
        self.body = body
    }

    /// Case-insensitive header lookup.
    public func header(_ name: String) -> String? {
        headers[name.lowercased()]
    }

    /// The body decoded as UTF-8 (invalid sequences replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A response produced by a handler.
public struct HTTPResponse: Sendable {
    public var status: Int
    /// Header fields in order. `Content-Length` and `Connection` are always set by the server.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]
    /// When true the server closes the connection without writing anything.
    public internal(set) var dropsConnection: Bool = false

    public init(status: Int = 200, headers: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response (`Content-Type: application/json; charset=utf-8`).
    public static func json(_ text: String, status: Int = 200, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers, body: Array(text.utf8))
    }

    /// A JSON response from already-encoded bytes.
    public static func json(bytes: [UInt8], status: Int = 200, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json; charset=utf-8")] + headers, body: bytes)
    }

    /// A plain-text response (`Content-Type: text/plain; charset=utf-8`).
    public static func text(_ text: String, status: Int = 200, headers: [(name: String, value: String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "text/plain; charset=utf-8")] + headers, body: Array(text.utf8))
    }

    /// Close the connection without a response (simulates a network failure).
    public static var dropConnection: HTTPResponse {
        var response = HTTPResponse(status: 0)
        response.dropsConnection = true
        return response
    }

    /// The first value of a header, case-insensitively.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name.lowercased() == lowered }?.value
    }

    /// Standard reason phrase for a status code.
    public static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 100: "Continue"
        case 200: "OK"
        case 201: "Created"
        case 202: "Accepted"
        case 204: "No Content"
        case 301: "Moved Permanently"
        case 302: "Found"
        case 304: "Not Modified"
        case 400: "Bad Request"
        case 401: "Unauthorized"
        case 403: "Forbidden"
        case 404: "Not Found"
        case 405: "Method Not Allowed"
        case 408: "Request Timeout"
        case 413: "Content Too Large"
        case 422: "Unprocessable Entity"
        case 429: "Too Many Requests"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 502: "Bad Gateway"
        case 503: "Service Unavailable"
        case 504: "Gateway Timeout"
        default: "Status \(status)"
        }
    }
}
