#if canImport(Glibc)
import Glibc
#endif
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import GitHubFixtureServer
import LoopbackHTTP
import Testing

// MARK: - Helpers

/// Echoes the request back as JSON.
@Sendable func echoHandler(_ request: HTTPRequest) -> HTTPResponse {
    if request.path == "/drop" { return .dropConnection }
    if request.path == "/missing" { return .json(#"{"message":"Not Found"}"#, status: 404) }
    let object: [String: Any] = [
        "method": request.method, "path": request.path, "query": request.query,
        "headers": request.headers, "body": request.bodyText,
    ]
    let data = try! JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])
    return .json(String(decoding: data, as: UTF8.self), headers: [("X-Echo", "1")])
}

func startServer(_ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse = echoHandler) throws -> LoopbackHTTPServer {
    let server = try LoopbackHTTPServer(handler: handler)
    server.start()
    return server
}

func makeSession() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.timeoutIntervalForRequest = 10
    return URLSession(configuration: configuration)
}

func get(_ session: URLSession, _ url: String) async throws -> (Data, HTTPURLResponse) {
    let (data, response) = try await session.data(for: URLRequest(url: URL(string: url)!))
    return (data, response as! HTTPURLResponse)
}

func json(_ data: Data) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
}

/// Opens a TCP connection to 127.0.0.1:port with a 5 s receive timeout.
func connectRaw(_ port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    try #require(fd >= 0)
    var timeout = timeval(tv_sec: 5, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    let result = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    try #require(result == 0)
    return fd
}

/// Whether a TCP connection to 127.0.0.1:port succeeds.
func tryConnect(_ port: UInt16) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
}

func sendRaw(_ fd: Int32, _ text: String) {
    let bytes = Array(text.utf8)
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
}

/// Reads until EOF (or the receive timeout); returns the bytes and whether EOF was seen.
func readToEOF(_ fd: Int32) -> (text: String, eof: Bool) {
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = recv(fd, &chunk, chunk.count, 0)
        if n > 0 { data += chunk[0..<n]; continue }
        return (String(decoding: data, as: UTF8.self), n == 0)
    }
}

/// Reads until `text` contains `count` complete responses (Content-Length framed).
func readResponses(_ fd: Int32, count: Int) -> [String] {
    var buffer = ""
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        var responses: [String] = []
        var rest = Substring(buffer)
        while let headEnd = rest.range(of: "\r\n\r\n") {
            let head = rest[..<headEnd.upperBound]
            let length = head.split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) } ?? 0
            let bodyStart = headEnd.upperBound
            guard rest.utf8.distance(from: bodyStart, to: rest.endIndex) >= length else { break }
            let end = rest.utf8.index(bodyStart, offsetBy: length)
            responses.append(String(rest[..<end]))
            rest = rest[end...]
        }
        if responses.count >= count { return responses }
        let n = recv(fd, &chunk, chunk.count, 0)
        if n <= 0 { return responses }
        buffer += String(decoding: chunk[0..<n], as: UTF8.self)
    }
}

/// Parses a `Link` header into rel → URL.
func parseLinks(_ header: String?) -> [String: String] {
    guard let header else { return [:] }
    var links: [String: String] = [:]
    for part in header.split(separator: ",") {
        let pieces = part.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
        guard pieces.count == 2, pieces[0].hasPrefix("<"), pieces[0].hasSuffix(">") else { continue }
        let rel = pieces[1].replacingOccurrences(of: "rel=", with: "").replacingOccurrences(of: "\"", with: "")
        links[rel] = String(pieces[0].dropFirst().dropLast())
    }
    return links
}

let fixturePath = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    .appendingPathComponent("Examples/GitHubRepos/fixture/repositories.json").path

// MARK: - Server

@Suite struct LoopbackHTTPServerTests {
    @Test func keepAliveRequestsThroughURLSession() async throws {
        // Idle connections kept for 10 minutes: the test's task may wait longer than the
        // default 30 s for a thread while the rest of the suite runs (one run in the full suite
        // did), and the server then closed the idle connection, which is not what this asserts.
        let server = try LoopbackHTTPServer(idleTimeout: 600, handler: echoHandler)
        server.start()
        defer { server.stop() }
        let session = makeSession()
        defer { session.invalidateAndCancel() }
        for i in 0..<20 {
            let (data, response) = try await get(session, "\(server.baseURL)/items?i=\(i)")
            #expect(response.statusCode == 200)
            #expect(response.value(forHTTPHeaderField: "X-Echo") == "1")
            let object = try json(data)
            #expect((object["query"] as? [String: String])?["i"] == "\(i)")
        }
        #expect(server.requestCount == 20)
        #expect(server.connectionCount == 1, "URLSession should reuse one keep-alive connection")
    }

    @Test func pipelinedRequestsOnOneRawConnection() throws {
        let server = try startServer()
        defer { server.stop() }
        let fd = try connectRaw(server.port)
        defer { close(fd) }
        sendRaw(fd, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
        let responses = readResponses(fd, count: 2)
        try #require(responses.count == 2)
        #expect(responses[0].hasPrefix("HTTP/1.1 200 OK\r\n"))
        #expect(responses[0].contains(#""path":"\/a""#) || responses[0].contains(#""path":"/a""#))
        #expect(responses[1].contains(#""body":"hello""#))
        #expect(responses[1].contains(#""method":"POST""#))
        sendRaw(fd, "GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(readResponses(fd, count: 1).count == 1)
        #expect(server.connectionCount == 1)
        #expect(server.requestCount == 3)
    }

    @Test func connectionCloseIsHonoured() throws {
        let server = try startServer()
        defer { server.stop() }
        let fd = try connectRaw(server.port)
        defer { close(fd) }
        sendRaw(fd, "GET /x HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let (text, eof) = readToEOF(fd)
        #expect(eof)
        #expect(text.hasPrefix("HTTP/1.1 200 OK"))
        #expect(text.contains("Connection: close\r\n"))
    }

    @Test func queryAndHeadersAreDecoded() async throws {
        let server = try startServer()
        defer { server.stop() }
        let session = makeSession()
        defer { session.invalidateAndCancel() }
        var request = URLRequest(url: URL(string: "\(server.baseURL)/search/x%20y?q=swift+in%3Aname%2Cdescription&check=%E2%9C%93&empty=&flag")!)
        request.setValue("Value", forHTTPHeaderField: "X-Mixed-Case")
        request.httpMethod = "POST"
        request.httpBody = Data("payload".utf8)
        let (data, response) = try await session.data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let object = try json(data)
        let query = try #require(object["query"] as? [String: String])
        #expect(query == ["q": "swift in:name,description", "check": "✓", "empty": "", "flag": ""])
        #expect(object["path"] as? String == "/search/x y")
        #expect(object["method"] as? String == "POST")
        #expect(object["body"] as? String == "payload")
        #expect((object["headers"] as? [String: String])?["x-mixed-case"] == "Value")
    }

    @Test func handlerStatusAndNotFound() async throws {
        let server = try startServer()
        defer { server.stop() }
        let session = makeSession()
        defer { session.invalidateAndCancel() }
        let (data, response) = try await get(session, "\(server.baseURL)/missing")
        #expect(response.statusCode == 404)
        #expect(response.value(forHTTPHeaderField: "Content-Type") == "application/json; charset=utf-8")
        #expect(try json(data)["message"] as? String == "Not Found")
    }

    @Test func dropConnectionFailsTheRequest() async throws {
        let server = try startServer()
        defer { server.stop() }
        let session = makeSession()
        defer { session.invalidateAndCancel() }
        await #expect(throws: (any Error).self) {
            _ = try await get(session, "\(server.baseURL)/drop")
        }
        // The server keeps serving afterwards.
        let (_, response) = try await get(session, "\(server.baseURL)/ok")
        #expect(response.statusCode == 200)
    }

    @Test(arguments: [
        "GARBAGE\r\n\r\n",
        "GET /x\r\n\r\n",
        "GET /x HTTP/1.1\r\n\r\n", // no Host
        "GET /x HTTP/1.1\r\nHost: a\r\nContent-Length: 12abc\r\n\r\n",
        "GET /x HTTP/1.1\r\nHost: a\r\nbad header\r\n\r\n",
        "G\u{1}T /x HTTP/1.1\r\nHost: a\r\n\r\n",
        "GET /x HTTP/1.1\nHost: a\n\n",
    ])
    func malformedRequestGets400AndClose(raw: String) throws {
        let server = try startServer()
        defer { server.stop() }
        let fd = try connectRaw(server.port)
        defer { close(fd) }
        sendRaw(fd, raw)
        if !raw.contains("\r\n\r\n") { shutdown(fd, Int32(SHUT_WR)) }
        let (text, eof) = readToEOF(fd)
        #expect(eof)
        #expect(text.hasPrefix("HTTP/1.1 400 Bad Request\r\n") || (text.isEmpty && !raw.contains("\r\n\r\n")))
        #expect(server.requestCount == 0)
    }

    @Test func stopClosesIdleKeepAliveConnections() throws {
        let server = try startServer()
        let fd = try connectRaw(server.port)
        defer { close(fd) }
        sendRaw(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(readResponses(fd, count: 1).count == 1)
        #expect(server.activeConnections == 1)
        let started = ContinuousClock.now
        server.stop()
        #expect(ContinuousClock.now - started < .seconds(2))
        #expect(readToEOF(fd).eof)
        #expect(server.activeConnections == 0)
    }

    @Test func refusesBeyondMaxConnections() throws {
        let server = try startServer()
        defer { server.stop() }
        var fds: [Int32] = []
        defer { fds.forEach { close($0) } }
        for _ in 0..<LoopbackHTTPServer.maxConnections {
            let fd = try connectRaw(server.port)
            fds.append(fd)
            sendRaw(fd, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(readResponses(fd, count: 1).count == 1)
        }
        let extra = try connectRaw(server.port)
        defer { close(extra) }
        let (text, eof) = readToEOF(extra)
        #expect(eof)
        #expect(text.hasPrefix("HTTP/1.1 503"))
    }

    @Test func ephemeralPortAndDeinit() throws {
        var server: LoopbackHTTPServer? = try startServer()
        let port = try #require(server?.port)
        #expect(port != 0)
        server = nil // deinit stops and closes the listener
        #expect(tryConnect(port) == false)
    }
}

// MARK: - GitHub fixture handler

@Suite struct GitHubFixtureHandlerTests {
    @Test func paginatesTheFixtureLikeGitHub() async throws {
        let handler = try gitHubSearchHandler(repositoriesJSON: Data(contentsOf: URL(fileURLWithPath: fixturePath)))
        let server = try startServer(handler)
        defer { server.stop() }
        let session = makeSession()
        defer { session.invalidateAndCancel() }

        var url: String? = "\(server.baseURL)/search/repositories?q=swift+in:name,description&sort=stars&page=1&per_page=15"
        var pages = 0
        var names: [String] = []
        var stars: [Int] = []
        var totalCount = 0
        while let next = url {
            let (data, response) = try await get(session, next)
            #expect(response.statusCode == 200)
            let object = try json(data)
            totalCount = try #require(object["total_count"] as? Int)
            #expect(object["incomplete_results"] as? Bool == false)
            let items = try #require(object["items"] as? [[String: Any]])
            pages += 1
            let links = parseLinks(response.value(forHTTPHeaderField: "Link"))
            let lastPage = (totalCount + 14) / 15
            #expect(items.count == (pages < lastPage ? 15 : totalCount - 15 * (lastPage - 1)))
            for item in items {
                let name = try #require(item["name"] as? String)
                let description = item["description"] as? String ?? ""
                #expect((name + " " + description).lowercased().contains("swift"))
                #expect((item["owner"] as? [String: Any])?["login"] is String)
                names.append(try #require(item["full_name"] as? String))
                stars.append(try #require(item["stargazers_count"] as? Int))
            }
            if pages > 1 {
                #expect(links["prev"]?.contains("page=\(pages - 1)&per_page=15") == true)
                #expect(links["first"]?.contains("page=1&") == true)
            } else {
                #expect(links["prev"] == nil)
            }
            if pages < lastPage {
                #expect(links["last"]?.contains("page=\(lastPage)&") == true)
            }
            url = links["next"]
            if let url {
                #expect(url == "http://127.0.0.1:\(server.port)/search/repositories?q=swift+in%3Aname%2Cdescription&sort=stars&page=\(pages + 1)&per_page=15")
            }
            if pages > 20 { break }
        }
        #expect(totalCount == 110)
        #expect(pages == 8)
        #expect(names.count == totalCount)
        #expect(Set(names).count == names.count)
        #expect(stars == stars.sorted(by: >))
        #expect(server.requestCount == 8)
    }

    @Test func perPageDefaultsClampAndErrors() async throws {
        let server = try startServer(gitHubSearchHandler(fixture: .synthetic(count: 250)))
        defer { server.stop() }
        let session = makeSession()
        defer { session.invalidateAndCancel() }
        let base = "\(server.baseURL)/search/repositories"

        let (d1, r1) = try await get(session, "\(base)?q=swift")
        #expect(try (json(d1)["items"] as? [Any])?.count == 30)
        #expect(try json(d1)["total_count"] as? Int == 250)
        #expect(parseLinks(r1.value(forHTTPHeaderField: "Link"))["next"]?.hasSuffix("q=swift&page=2") == true)

        let (d2, _) = try await get(session, "\(base)?q=swift&per_page=500")
        #expect(try (json(d2)["items"] as? [Any])?.count == 100)

        let (d3, r3) = try await get(session, "\(base)?q=swift&per_page=100&page=3")
        #expect(try (json(d3)["items"] as? [Any])?.count == 50)
        let links = parseLinks(r3.value(forHTTPHeaderField: "Link"))
        #expect(links["next"] == nil)
        #expect(links["last"] == nil)
        #expect(links["prev"]?.contains("page=2") == true)

        let (d4, _) = try await get(session, "\(base)?q=swift&per_page=100&page=9")
        #expect(try (json(d4)["items"] as? [Any])?.count == 0)

        let (d5, _) = try await get(session, "\(base)?q=nomatchatall")
        #expect(try json(d5)["total_count"] as? Int == 0)

        let (d6, r6) = try await get(session, "\(base)?sort=stars")
        #expect(r6.statusCode == 422)
        #expect(try json(d6)["message"] as? String == "Validation Failed")

        let (d7, r7) = try await get(session, "\(server.baseURL)/search/users?q=swift")
        #expect(r7.statusCode == 404)
        #expect(try json(d7)["message"] as? String == "Not Found")
        #expect(server.requestCount == 7)
    }
}
