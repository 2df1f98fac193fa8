import CTerminal
import FoundationEssentials
import Glibc
import Paging
import PagingHost

/// `pager serve MANIFEST`: the manifest's pipeline as a paged HTTP API.
struct ServeCommand {
    static let help = """
    usage: pager serve MANIFEST [options]

    Serves the manifest's pipeline over HTTP (GNU libmicrohttpd):
      GET /pages                  the first page; the manifest's "serve_params" may be given as
                                  query parameters (user info of the requests)
      GET /pages?cursor=C         the page a cursor of an earlier answer names
        each answers {"items": [...], "next": cursor or null, "prev": cursor or null}
      GET /healthz                200 {"status": "ok"} when every plugin can serve, else 503
                                  (also when a check is not answered within the timeout)
      GET /metrics                Prometheus text: requests and latency by route, and per
                                  plugin calls, failures, latency, counters and gauges
    Cursors are signed (HMAC-SHA256) with the secret in $PAGER_SERVE_SECRET or --secret-file
    (at least 16 bytes; the same on every host behind one address), else a random one: cursors
    then work on this process only. SIGTERM, SIGINT or SIGHUP stops accepting connections, lets the
    requests in flight finish, then the stale pages' revalidations running in the background (each
    up to the request timeout), and exits 0; another signal meanwhile cancels what still runs (a
    request is answered 503) and exits 0 at once.

    options:
      --port N                  the port (default 8080; 0: any free port)
      --bind ADDR               the address to listen on (default 127.0.0.1)
      --max-requests N          requests served at once (default 64); more get 503, and so
                                do all while N loads given up on (client gone, timed out)
                                still run
      --max-unsent-mib N        MiB of answers clients have not read yet, at most (default 256):
                                each keeps a copy of its page until it is read; more get 503
                                (answers of at most 64 KiB are not counted)
      --request-timeout-ms N    a request not answered by then gets 504 (default: the manifest's
                                timeout_ms times its retries + 1, the backoff between them, and
                                1 s for a stored page answering a failed load)
      --header-timeout-ms N     a request's line and headers must arrive within this, however
                                steadily they trickle in (default 10000), or the connection closes
      --max-connections-per-address N
                                open connections from one client address at most (default 256
                                of the 1024 in all; 0: no limit, as behind a load balancer)
      --secret-file PATH        the cursors' secret
      --isolate-all             run every plugin in a child process of its own
    \(LogOptions.help(column: 28))
      --help                    this text

    exit codes: 0 stopped by a signal; 2 bad arguments, manifest or plugin, or the port is taken
    """

    struct Options {
        var port: UInt16 = 8_080
        var address = "127.0.0.1"
        var maxRequests = 64
        var requestTimeout: Duration?
        var limits = HTTPService.Limits()
        var secretFile: String?
        var isolateAll = false
        var log = LogOptions()
    }

    var manifestPath: String?
    var options: Options

    init(_ arguments: [String]) throws {
        var options = Options()
        manifestPath = try Arguments.parse(arguments, command: "serve", help: Self.help, exclusive: [LogOptions.exclusive]) { argument, arguments in
            if options.log.parse(argument) { return true }
            switch argument {
            case "--port": options.port = UInt16(try arguments.count(for: argument, in: 0...65_535))
            case "--bind": options.address = try arguments.value(for: argument)
            case "--max-requests": options.maxRequests = try arguments.count(for: argument, in: 1...100_000)
            case "--max-unsent-mib": options.limits.unsentAnswerBytes = try arguments.count(for: argument, in: 1...1_048_576) << 20
            case "--request-timeout-ms": options.requestTimeout = .milliseconds(try arguments.count(for: argument, in: 1...86_400_000))
            case "--header-timeout-ms": options.limits.headerTimeoutMilliseconds = UInt32(try arguments.count(for: argument, in: 1...86_400_000))
            case "--max-connections-per-address": options.limits.connectionsPerAddress = UInt32(try arguments.count(for: argument, in: 0...1_024))
            case "--secret-file": options.secretFile = try arguments.value(for: argument)
            case "--isolate-all": options.isolateAll = true
            default: return false
            }
            return true
        }
        self.options = options
    }

    /// The default `--request-timeout-ms`: each attempt's `timeout_ms`, the backoff before each
    /// retry, and a second for what answers a load that failed (`network-first`'s stored page,
    /// which came after a 504 when the last attempt timed out).
    static func requestTimeout(for manifest: Manifest) -> Duration {
        let policy = manifest.retryPolicy
        let waits = (0..<policy.maxRetries).reduce(Duration.zero) { $0 + policy.backoff.delay(forAttempt: $1 + 1, random: 0) }
        return manifest.fetchTimeout * (policy.maxRetries + 1) + waits + .seconds(1)
    }

    func run() async throws -> Int32 {
        guard let manifestPath else { throw UsageError("serve: a manifest is required\n\n\(Self.help)") }
        // The value incremental loading keeps is sent (or `initial`); only `run` keeps one.
        let declared = try Manifest.load(path: manifestPath)
        let manifest = try declared.sendingKeptValue().boundingPluginCalls()
        let secret = try Self.secret(file: options.secretFile)
        let pipeline = try Pipeline(manifest: manifest, sink: Output.pluginLog(minimum: options.log.level), logLevel: options.log.level,
                                    recordsStats: true, isolateAll: options.isolateAll,
                                    // Each client pages on its own: one's first page cancels no other's load.
                                    refreshSupersedes: false)
        let timeout = options.requestTimeout ?? Self.requestTimeout(for: manifest)
        let pages = PageService(pipeline: pipeline, secret: secret.scoped(to: declared), maxRequests: options.maxRequests, timeout: timeout)
        let stop = paging_signals_to_pipe()
        guard stop >= 0 else { throw UsageError("serve: cannot handle SIGINT, SIGTERM and SIGHUP (\(String(cString: strerror(errno))))") }
        let service = try HTTPService(address: options.address, port: options.port, limits: options.limits,
                                      handler: { request in await pages.answer(request) },
                                      answered: { path, status, duration in pages.record(path, status: status, duration: duration) },
                                      refused: { path, status in pages.record(path, status: status) })
        let shown = options.address.contains(":") ? "[\(options.address)]" : options.address
        Output.error("pager serve: listening on http://\(shown):\(service.port)")
        if secret.isRandom {
            Output.error("pager serve: no PAGER_SERVE_SECRET or --secret-file: cursors are signed with a random secret and work on this process only")
        }
        let signal = await Signals.next(on: stop)
        service.stopAccepting()
        Output.error("pager serve: \(Signals.name(signal)): not accepting connections; finishing \(Output.counted(service.inFlight, "request"))")
        // One thread waits for another signal through the whole stop, the drain and then the
        // revalidations: with one each, the drain's, left waiting, could read the signal meant
        // to cancel the revalidations.
        let another = Task { await Signals.next(on: stop) }
        let (drained, stoppingNow) = await Self.drain(service, of: pipeline.pager, within: timeout + .seconds(1), another: another)
        if drained {
            if !service.stop() {
                Output.problem("pager serve: answers still unsent after 5 s (their clients do not read them); exiting without them")
            }
        } else {
            // A plugin holds a request's thread (a health check that never returns): the server,
            // which may not end with a request unanswered, ends with the process.
            Output.problem("pager serve: \(Output.counted(service.inFlight, "request")) still unanswered; exiting without them")
        }
        await Self.settleBackgroundLoads(of: pipeline.pager, within: timeout, another: another, cancellingAtOnce: stoppingNow)
        // A request left running holds its plugin: destroying it would wait for the request. So
        // may a load cancelled to stop now (what the second signal stopped for, a hung upstream).
        if drained, !stoppingNow { pipeline.destroyPlugins() }
        Output.error("pager serve: stopped")
        return ExitCode.success
    }

    /// Lets the requests in flight end, for `bound` at most (`drained` when they all did).
    /// `another` signal stops the server now (`stoppingNow`), saying so: the requests are
    /// cancelled, each answered 503 at once, and waited for a second at most; the background
    /// revalidations are cancelled after. (That signal went unheard until the requests ended,
    /// behind a slow upstream up to the request timeout, or minutes with retries.)
    static func drain(_ service: HTTPService, of pager: PluginPager, within bound: Duration,
                      another: Task<Int32, Never>) async -> (drained: Bool, stoppingNow: Bool) {
        enum Event { case drained(Bool), signal(Int32) }
        let (events, post) = AsyncStream.makeStream(of: Event.self)
        Task { post.yield(.drained(await service.drained(within: bound))) }
        // Left waiting when no signal comes (the revalidations after the drain hear that one).
        Task { post.yield(.signal(await another.value)) }
        var outcome = (drained: false, stoppingNow: false)
        waiting: for await event in events {
            switch event {
            case .drained(let drained):
                outcome.drained = drained
            case .signal(let signal):
                let revalidations = pager.backgroundLoadCount
                Output.error("pager serve: \(Signals.name(signal)): stopping now: cancelling \(Output.counted(service.inFlight, "request")) in flight"
                             + (revalidations > 0 ? " and \(Output.counted(revalidations, "background revalidation"))" : ""))
                service.cancelRequests()
                outcome = (await service.drained(within: .seconds(1)), true)
            }
            break waiting
        }
        post.finish()
        return outcome
    }

    /// Lets the loads running in the background (a stale page's revalidation, whose fresh page
    /// the stores keep) end, saying so; `another` signal, or `bound`, cancels them, and a load
    /// still inside a plugin call a second after its cancel is left to the process's end.
    /// `cancellingAtOnce` (a signal during the drain, which said so): they are cancelled now.
    /// (After saying "finishing 0 requests" it waited for them without a word, a hung one for
    /// its whole timeout, and signals went unheard.)
    static func settleBackgroundLoads(of pager: PluginPager, within bound: Duration, another: Task<Int32, Never>,
                                      cancellingAtOnce: Bool) async {
        let running = pager.backgroundLoadCount
        guard running > 0 else { return }
        enum Event { case settled, cancel(why: String?), gaveUp }
        let (events, post) = AsyncStream.makeStream(of: Event.self)
        let settling = Task {
            await pager.backgroundLoadsFinished()
            post.yield(.settled)
        }
        if cancellingAtOnce {
            post.yield(.cancel(why: nil))
        } else {
            Output.error("pager serve: letting \(Output.counted(running, "background revalidation")) end, for \(bound) at most "
                         + "(another SIGTERM, SIGINT or SIGHUP cancels \(running == 1 ? "it" : "them"))")
            // The thread that waits for a signal is left waiting when none comes: the process ends.
            Task { post.yield(.cancel(why: Signals.name(await another.value))) }
        }
        let deadline = Task {
            try await Task.sleep(for: bound)
            post.yield(.cancel(why: "still running after \(bound)"))
        }
        var cancelled = false
        waiting: for await event in events {
            switch event {
            case .settled:
                break waiting
            case .cancel(let why):
                guard !cancelled else { continue }
                cancelled = true
                if let why { Output.error("pager serve: \(why): cancelling the background revalidations") }
                settling.cancel()
                // A cancel ends no plugin call: one that does not return holds its load.
                Task {
                    try await Task.sleep(for: .seconds(1))
                    post.yield(.gaveUp)
                }
            case .gaveUp:
                let left = pager.backgroundLoadCount
                if left > 0 {
                    Output.problem("pager serve: \(Output.counted(left, "background revalidation")) still in a plugin call "
                                   + "a second after the cancel; exiting without \(left == 1 ? "it" : "them")")
                }
                break waiting
            }
        }
        deadline.cancel()
        post.finish()
    }

    /// The secret cursors are signed with: the bytes of the file or of the variable, without the
    /// whitespace around them (read as UTF-8, the bytes that are not became U+FFFD: two
    /// different binary secrets were one, and 6 bytes passed for 18).
    static func secret(file: String?) throws -> ServeSecret {
        var bytes: [UInt8]
        let origin: String
        if let file {
            do {
                bytes = try Manifest.readFile(file, kind: "secret file")
            } catch {
                throw UsageError("serve: --secret-file \(shown(file)): \(error.message)")
            }
            origin = "--secret-file \(file)"
            var info = stat()
            if stat(file, &info) == 0, info.st_mode & 0o007 != 0 {
                Output.error("pager serve: \(shown(origin)) can be read by other users (mode \(String(info.st_mode & 0o777, radix: 8))): "
                             + "anyone who reads it can forge cursors; chmod 600 it")
            }
        } else if let value = getenv("PAGER_SERVE_SECRET") {
            bytes = Array(UnsafeBufferPointer(start: UnsafeRawPointer(value).assumingMemoryBound(to: UInt8.self), count: strlen(value)))
            origin = "PAGER_SERVE_SECRET"
        } else {
            var random = SystemRandomNumberGenerator()
            return ServeSecret(bytes: (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }, isRandom: true)
        }
        // Whitespace around it (a file's line break, an editor's, `echo`'s) is no part of it, from
        // the file and the variable alike: hosts given one secret both ways read one secret.
        let space: Set<UInt8> = [0x20, 0x09, 0x0A, 0x0D]
        while let last = bytes.last, space.contains(last) { bytes.removeLast() }
        bytes.removeFirst(bytes.prefix { space.contains($0) }.count)
        guard bytes.count >= 16 else { throw UsageError("serve: \(shown(origin)): the secret must be at least 16 bytes, got \(bytes.count)") }
        return ServeSecret(bytes: bytes, isRandom: false)
    }
}

struct ServeSecret: Sendable {
    let bytes: [UInt8]
    let isRandom: Bool

    /// The secret the cursors of `manifest` are signed with: a cursor given out for another
    /// source under the same secret (another file, another API) is refused, not read as a key of
    /// this one (a jsonlines cursor was served from another file); so is one of another
    /// `page_size` or `user_info`, whose keys mean other pages (a page number at another page
    /// size: a rolling deploy skipped or repeated items). The `user_info` signed is the one
    /// declared, without the value incremental loading keeps (which each `pager run` moves: the
    /// cursors given out would all have been refused after a restart). Servers of one manifest,
    /// wherever it lies, share it.
    func scoped(to manifest: Manifest) -> ServeSecret {
        let source = manifest.source
        let plugin = source.plugin.split(separator: "/").last.map(String.init) ?? source.plugin
        let userInfo = JSONValue.object(manifest.userInfo.sorted { $0.key < $1.key }.map { ($0.key, JSONValue.string($0.value)) })
        let scope = "pager serve cursors\n\(plugin)\n\(source.id ?? "")\n\(source.config.jsonText)\n\(manifest.pageSize)\n\(userInfo.jsonText)"
        return ServeSecret(bytes: HMACSHA256.mac(key: bytes, message: Array(scope.utf8)), isRandom: isRandom)
    }
}
