// Python fixture servers (Tests/Fixtures/<folder>/*.py) started by a test: each prints
// "PORT <n>" once it listens, and exits when its standard input closes (at stop, or when the
// test process dies).
import Foundation

public final class FixtureServer: @unchecked Sendable {
    public let port: Int
    private let process: Process
    private let input: ExecSafePipe

    public var baseURL: String { "http://127.0.0.1:\(port)" }

    /// Starts `Tests/Fixtures/<script>` ("http/api_server.py") and waits for its port line.
    public init(_ script: String, arguments: [String] = []) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-u", repositoryRoot + "/Tests/Fixtures/" + script] + arguments
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

    public func stop() {
        try? input.write.close()
        process.waitUntilExit()
    }
}

public struct FixtureError: Error, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}
