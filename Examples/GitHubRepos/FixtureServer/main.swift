// github-fixture-server: serves a GitHub-shaped /search/repositories from a fixture file on 127.0.0.1.
//
// Usage: github-fixture-server [FIXTURE.json] [--port N] [--exit-on-stdin-eof] [--quiet]
// Prints exactly one line "listening on http://127.0.0.1:PORT" to stdout once ready, logs one line per
// request to stderr, and serves until SIGTERM/SIGINT (or until stdin closes with --exit-on-stdin-eof).

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import Foundation
import GitHubFixtureServer
import LoopbackHTTP

func writeStderr(_ line: String) {
    FileHandle.standardError.write(Data((line + "\n").utf8))
}

func fail(_ message: String) -> Never {
    writeStderr("github-fixture-server: \(message)")
    exit(2)
}

var fixturePath = "Examples/GitHubRepos/fixture/repositories.json"
var port: UInt16 = 0
var exitOnStdinEOF = false
var quiet = false
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--port", "-p":
        guard let value = arguments.popFirst(), let parsed = UInt16(value) else { fail("--port needs a number 0-65535") }
        port = parsed
    case _ where argument.hasPrefix("--port="):
        guard let parsed = UInt16(argument.dropFirst("--port=".count)) else { fail("--port needs a number 0-65535") }
        port = parsed
    case "--exit-on-stdin-eof":
        exitOnStdinEOF = true
    case "--quiet", "-q":
        quiet = true
    case "--help", "-h":
        writeStderr("usage: github-fixture-server [FIXTURE.json] [--port N] [--exit-on-stdin-eof] [--quiet]")
        exit(0)
    case _ where argument.hasPrefix("-"):
        fail("unknown option \(argument)")
    default:
        fixturePath = argument
    }
}

let fixture: GitHubFixture
do {
    fixture = try GitHubFixture(contentsOfFile: fixturePath)
} catch {
    fail("cannot load fixture \(fixturePath): \(error)")
}

let search = gitHubSearchHandler(fixture: fixture)
let logRequests = !quiet
let server: LoopbackHTTPServer
do {
    server = try LoopbackHTTPServer(port: port) { request in
        let started = DispatchTime.now().uptimeNanoseconds
        let response = search(request)
        if logRequests {
            let micros = (DispatchTime.now().uptimeNanoseconds - started) / 1000
            writeStderr("\(request.method) \(request.target) -> \(response.status) \(response.body.count)B \(micros)us")
        }
        return response
    }
} catch {
    fail("\(error)")
}

/// Blocks until SIGTERM/SIGINT arrives, or stdin reaches EOF when `watchStdin` is set.
/// Nonisolated on purpose: top-level code is main-actor isolated, and a handler closure written there
/// would inherit that isolation and trap when Dispatch runs it on its own queue.
nonisolated func waitForShutdown(watchStdin: Bool) {
    let done = DispatchSemaphore(value: 0)
    let queue = DispatchQueue(label: "github-fixture-server.signals")
    var sources: [DispatchSourceSignal] = []
    for signalNumber in [SIGTERM, SIGINT] {
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: queue)
        source.setEventHandler { done.signal() }
        source.resume()
        sources.append(source)
    }
    if watchStdin {
        let reader = Thread {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let n = read(STDIN_FILENO, &buffer, buffer.count)
                if n == 0 || (n < 0 && errno != EINTR) { break }
            }
            done.signal()
        }
        reader.start()
    }
    done.wait()
    for source in sources { source.cancel() }
}

server.start()
writeStderr("github-fixture-server: \(fixture.repositories.count) repositories from \(fixturePath)")
FileHandle.standardOutput.write(Data("listening on http://127.0.0.1:\(server.port)\n".utf8))

waitForShutdown(watchStdin: exitOnStdinEOF)
server.stop()
writeStderr("github-fixture-server: stopped after \(server.requestCount) requests")
exit(0)
