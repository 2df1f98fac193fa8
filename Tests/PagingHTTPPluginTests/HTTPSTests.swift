// The http source over https (Tests/Fixtures/http/hostile_server.py with --tls, a certificate
// made for the run): `ca_file` trusts a private authority, an untrusted certificate fails the
// load before any request is sent, and configured credentials never go over http when the
// `url` is https, even to a host `allowed_hosts` names.
import Foundation
import Paging
import PagingHost
import PagingTestSupport
import Testing

/// A self-signed certificate for 127.0.0.1 and its key, made with the openssl command.
struct TestCertificate {
    let folder = scratchFolder()
    var certificate: String { folder + "/cert.pem" }
    var key: String { folder + "/key.pem" }

    init() async throws {
        let made = try await run("/usr/bin/env", [
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", folder + "/key.pem", "-out", folder + "/cert.pem", "-days", "2",
            "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
        ])
        try #require(made.code == 0, "openssl could not make a certificate: \(made.stderr)")
    }
}

/// A hostile_server.py speaking https with `certificate`, recording requests in a file.
private struct TLSServer {
    let server: FixtureServer
    let seenFile: String
    var baseURL: String { "https://127.0.0.1:\(server.port)" }

    init(_ certificate: TestCertificate) throws {
        seenFile = certificate.folder + "/seen-\(UUID().uuidString.prefix(8)).jsonl"
        server = try FixtureServer("http/hostile_server.py",
                                   arguments: ["--tls", certificate.certificate, certificate.key, "--seen-file", seenFile])
    }

    /// The requests it answered, one dictionary each.
    func seen() throws -> [[String: Any]] {
        guard let text = try? String(contentsOfFile: seenFile, encoding: .utf8) else { return [] }
        return try text.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }
}

@Suite("http source over https", .serialized)
struct HTTPSTests {
    let certificate: TestCertificate
    /// A plain http server: where a downgrade would send the credentials.
    let plain: FixtureServer

    init() async throws {
        certificate = try await TestCertificate()
        plain = try FixtureServer("http/hostile_server.py")
    }

    private func config(_ url: String, caFile: Bool = true) -> String {
        """
        {"url": "\(url)", "items": "/items", "pagination": {"type": "link"}, "allowed_hosts": ["127.0.0.1"],
         "headers": {"Authorization": "Bearer ${HTTPS_TEST_TOKEN}"}\(caFile ? #", "ca_file": "\#(certificate.certificate)""# : "")}
        """
    }

    /// Runs `body` with an https server and the token `HTTPS_TEST_TOKEN` set; stops both servers.
    private func withTLSServer(token: String, _ body: (TLSServer) async throws -> Void) async throws {
        defer { plain.stop() }
        let tls = try TLSServer(certificate)
        defer { tls.server.stop() }
        setTestEnvironment("HTTPS_TEST_TOKEN", token)
        try await body(tls)
    }

    @Test func aLinkFromHTTPSToHTTP_goesWithoutCredentials_evenToAnAllowedHost() async throws {
        try await withTLSServer(token: "tok-tls-101") { tls in
            let source = try makeSource(config("\(tls.baseURL)/link-port?page=1&to=\(plain.port)"))
            #expect(try await pageToEnd(source, pageSize: 2).output.values.count == 4)
            // Over TLS, with the ca_file's authority: the credentials went.
            let first = try #require(try tls.seen().first)
            #expect(first["authorization"] as? String == "Bearer tok-tls-101", "\(first)")
            let downgraded = try #require(try await plain.seen().last)
            #expect(downgraded["path"] as? String == "/items" && downgraded["authorization"] is NSNull, "\(downgraded)")
            // The same link from an http url: allowed_hosts lets them follow (the scheme made the difference).
            let fromHTTP = try makeSource(config("\(plain.baseURL)/link-port?page=1&to=\(plain.port)", caFile: false))
            #expect(try await pageToEnd(fromHTTP, pageSize: 2).output.values.count == 4)
            #expect(try await plain.seen().last?["authorization"] as? String == "Bearer tok-tls-101")
        }
    }

    @Test func aRedirectFromHTTPSToHTTP_goesWithoutCredentials() async throws {
        try await withTLSServer(token: "tok-tls-202") { tls in
            let source = try makeSource(config("\(tls.baseURL)/redirect-port?to=\(plain.port)"))
            #expect(try await pageToEnd(source, pageSize: 2).output.values.count == 2)
            #expect(try tls.seen().first?["authorization"] as? String == "Bearer tok-tls-202")
            let redirected = try #require(try await plain.seen().last)
            #expect(redirected["path"] as? String == "/items" && redirected["authorization"] is NSNull, "\(redirected)")
        }
    }

    @Test func aLinkFromHTTPToHTTPSOnAnAllowedHost_keepsTheCredentials() async throws {
        try await withTLSServer(token: "tok-tls-303") { tls in
            let source = try makeSource(config("\(plain.baseURL)/link-port?page=1&to=\(tls.server.port)&scheme=https"))
            #expect(try await pageToEnd(source, pageSize: 2).output.values.count == 4)
            let upgraded = try #require(try tls.seen().last)
            #expect(upgraded["path"] as? String == "/items" && upgraded["authorization"] as? String == "Bearer tok-tls-303", "\(upgraded)")
        }
    }

    @Test func anUntrustedCertificate_failsTheLoad_beforeAnyRequest() async throws {
        try await withTLSServer(token: "tok-tls-404") { tls in
            let url = "\(tls.baseURL)/items?page=1"
            let error = try #require(await loadError(try makeSource(config(url, caFile: false))) as? PluginError)
            #expect(error.status == .invalidConfig, "\(error)")
            #expect(error.message.contains("certificate is not trusted fetching \(url)") && error.message.contains("(a private certificate authority needs ca_file)"),
                    "\(error.message)")
            // With a ca_file that does not vouch for it (another certificate), the message does not ask for one.
            let another = try await TestCertificate()
            let other = try #require(await loadError(try makeSource(
                #"{"url": "\#(url)", "items": "/items", "ca_file": "\#(another.certificate)"}"#)) as? PluginError)
            #expect(other.message.contains("(ca_file's authorities do not vouch for it)"), "\(other.message)")
            #expect(try tls.seen().isEmpty, "the token must not reach a server that was not verified")
        }
    }

    /// An https url to a plain http server failed as a "transient: network error … wrong
    /// version number", retried: it says the server does not speak TLS, and is not retried.
    @Test func anHTTPSURLToAPlainServer_saysItDoesNotSpeakTLS() async throws {
        plain.stop()
        let server = try FixtureServer("http/answers_400.py")
        defer { server.stop() }
        let url = "https://127.0.0.1:\(server.port)/items"
        let error = try #require(await loadError(try makeSource(#"{"url": "\#(url)", "items": "/items", "timeout_ms": 5000}"#)) as? PluginError)
        #expect(error.status == .invalidConfig && error.message.contains("the server at \(url) does not speak TLS (is the url http://?)"), "\(error)")
    }

    @Test func caFile_refusesWhatIsNotAReadablePEMFile() throws {
        defer { plain.stop() }
        let folder = scratchFolder()
        try "not a certificate\n".write(toFile: folder + "/notes.txt", atomically: true, encoding: .utf8)
        let cases = [
            (folder + "/missing.pem", "cannot read"), (folder, "cannot read"), ("/dev/zero", "cannot read"),
            (folder + "/notes.txt", "holds no PEM certificate"),
        ]
        for (path, expected) in cases {
            let error = #expect(throws: (any Error).self, "\(path)") {
                try makeSource(#"{"url": "https://127.0.0.1:1/x?page={key}", "ca_file": "\#(path)"}"#)
            }
            let message = "\(error.map { "\($0)" } ?? "")"
            #expect(message.contains("ca_file: ") && message.contains(expected) && message.contains(path), "\(message)")
        }
        #expect(throws: (any Error).self) { try makeSource(#"{"url": "https://127.0.0.1:1/x?page={key}", "ca_file": 7}"#) }
        _ = try makeSource(#"{"url": "https://127.0.0.1:1/x?page={key}", "ca_file": "\#(certificate.certificate)"}"#)
    }
}
