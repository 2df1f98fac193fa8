// Python fixture servers (Tests/Fixtures/http/*.py) started by a test: each prints
// "PORT <n>" once it listens, and exits when its standard input closes (at stop, or when the
// test process dies).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import PagingTestSupport
import Testing

final class FixtureServer: @unchecked Sendable {
    let port: Int
    private let process: Process
    private let input: ExecSafePipe

    var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts `Tests/Fixtures/http/<script>` and waits for its port line.
    init(_ script: String, arguments: [String] = []) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", repositoryRoot + "/Tests/Fixtures/http/" + script] + arguments
        let (input, out) = try runWithPipes(process, standardError: FileHandle.nullDevice)
        var line = Data()
        while true {
            let byte = out.read.readData(ofLength: 1)
            guard let first = byte.first else { break }
            if first == UInt8(ascii: "\n") { break }
            line.append(first)
        }
        let text = String(decoding: line, as: UTF8.self)
        guard text.hasPrefix("PORT "), let port = Int(text.dropFirst(5)) else {
            process.terminate()
            throw FixtureError(message: "\(script) did not start: \"\(text)\"")
        }
        self.port = port
        self.process = process
        self.input = input
    }

    func stop() {
        try? input.write.close()
        process.waitUntilExit()
    }

    /// The requests the server recorded (GET /seen), one dictionary each.
    func seen() async throws -> [[String: Any]] {
        let (data, _) = try await URLSession.shared.data(from: URL(string: baseURL + "/seen")!)
        return try String(decoding: data, as: UTF8.self).split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
    }
}

struct FixtureError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
