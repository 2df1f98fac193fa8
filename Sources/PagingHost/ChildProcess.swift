import CIsolation
import FoundationEssentials
import Glibc
import Paging

/// What an isolated call came back with.
enum CallAnswer: Sendable {
    case reply(WireReader)
    case failure(any Error)
}

/// One child process of an isolated plugin: its own process group, a socket on its fd 3, the
/// calls waiting for an answer, and a thread that reads answers until the socket closes, then
/// reaps the child and fails the calls left.
final class ChildProcess: Sendable {
    let pid: pid_t
    let socket: WireSocket
    private let calls = Locked(Calls())
    private let sending = Locked(false)
    private let stopping = Locked(false)
    private let ended = Latch()
    private let howItEnded = Locked<String?>(nil)
    /// Why this process killed the child, when it did (a hang): how the child ended.
    private let killedBecause = Locked<String?>(nil)

    /// Held while a frame is read from the socket: by the reader thread, or by a caller that
    /// reads its own answer (``answer(to:within:)``).
    private let reading = Condition()
    /// What frames other than answers go to, once ``serve(sink:invalidated:died:)`` is called.
    private let handlers = Locked<Handlers?>(nil)

    private struct Handlers {
        var sink: PluginLogSink
        var invalidated: @Sendable () -> Void
    }

    /// Who waits for a call's answer.
    private enum Waiter {
        /// The caller, reading or watching for it (``answer(to:within:)``); the answer is kept in
        /// ``Calls/answered`` when another thread reads it.
        case caller
        case resume(@Sendable (CallAnswer) -> Void)
    }

    private struct Calls {
        var pending: [UInt64: Waiter] = [:]
        var answered: [UInt64: CallAnswer] = [:]
        /// Calls the host timed out whose answer the child still owes.
        var overdue: Set<UInt64> = []
        /// A call timed out, here or in the child (whose answer then says so): its plugin's
        /// call may still run there, keeping destroy() from being called.
        var timedOut = false
        var ended: (any Error)?
    }

    private init(pid: pid_t, fd: Int32, maxFrame: Int) {
        self.pid = pid
        socket = WireSocket(fd: fd, maxFrame: maxFrame)
    }

    /// Starts `executable __isolate PID` in a process group of its own, a socket on its fd 3,
    /// whose frames are refused past `maxFrame` bytes.
    static func spawn(_ executable: String, maxFrame: Int) throws(IsolationStartError) -> ChildProcess {
        let result = SpawnThread.shared.run { () -> Result<ChildProcess, IsolationStartError> in
            var fds: [Int32] = [0, 0]
            guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &fds) == 0 else {
                return .failure(IsolationStartError(message: "socketpair failed: \(String(cString: strerror(errno)))"))
            }
            var childEnd = fds[1]
            if childEnd == 3 {
                // dup2 onto itself would keep close-on-exec.
                childEnd = fcntl(3, F_DUPFD_CLOEXEC, 4)
                close(3)
            }
            defer { close(childEnd) }
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_adddup2(&actions, childEnd, 3)
            // Not the terminal: a plugin reading it from a process group of its own would be
            // stopped (SIGTTIN), and `browse` reads its keys there.
            posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
            // Descriptors another thread made without close-on-exec (a pipe between pipe() and
            // fcntl()) stay out of the child, which would otherwise hold them open.
            paging_isolation_close_from(&actions, 4)
            var attributes = posix_spawnattr_t()
            posix_spawnattr_init(&attributes)
            defer { posix_spawnattr_destroy(&attributes) }
            posix_spawnattr_setpgroup(&attributes, 0)
            var defaults = sigset_t()
            sigemptyset(&defaults)
            sigaddset(&defaults, SIGPIPE)
            sigaddset(&defaults, SIGTERM)
            posix_spawnattr_setsigdefault(&attributes, &defaults)
            var mask = sigset_t()
            sigemptyset(&mask)
            posix_spawnattr_setsigmask(&attributes, &mask)
            posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK))
            let words: [String] = [executable, "__isolate", String(getpid())]
            let argv = words.map { strdup($0) } + [nil]
            defer { for pointer in argv { free(pointer) } }
            var environment = ProcessInfo.processInfo.environment
            // No Swift backtrace on a crash: it is slow, and the signal is what the host reports.
            environment["SWIFT_BACKTRACE"] = "enable=no"
            let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { for pointer in envp { free(pointer) } }
            var pid: pid_t = 0
            let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
            guard spawned == 0 else {
                close(fds[0])
                return .failure(IsolationStartError(message: "\(executable) could not be started: \(String(cString: strerror(spawned)))"))
            }
            return .success(ChildProcess(pid: pid, fd: fds[0], maxFrame: maxFrame))
        }
        return try result.get()
    }

    /// What comes next on the socket, if something does within `timeout`. The child's end
    /// counts as the socket's: a process the plugin forked may hold the socket open after the
    /// child ended (a crash while loading went unseen until the start timed out).
    func next(within timeout: Duration) -> WireSocket.Incoming? {
        let exited = paging_isolation_pidfd(pid)
        defer { if exited >= 0 { close(exited) } }
        var pollers = [pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: exited, events: Int16(POLLIN), revents: 0)]
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = Int32(clamping: (deadline - .now).wholeMilliseconds)
            let ready = poll(&pollers, exited >= 0 ? 2 : 1, left)
            if ready < 0 && errno == EINTR { continue }
            guard ready > 0 else { return nil }
            // What it sent before it ended is read first.
            return pollers[0].revents != 0 ? socket.next() : .ended
        }
    }

    /// Sends a frame unless the socket is closed; false when it could not be sent.
    @discardableResult
    func send(_ frame: [UInt8]) -> Bool {
        sending.withLock { closed in closed ? false : socket.send(frame) }
    }

    /// Sends `frame`, call `id`, whose answer the caller then takes with
    /// ``answer(to:within:)`` or ``wait(for:_:)``.
    func register(_ id: UInt64, frame: [UInt8]) {
        let ended = calls.withLock { calls -> (any Error)? in
            if let ended = calls.ended {
                calls.answered[id] = .failure(ended)
                return ended
            }
            calls.pending[id] = .caller
            return nil
        }
        // A frame that cannot be sent means the child is gone: the reader fails the call.
        if ended == nil { send(frame) }
    }

    /// Hands call `id`'s answer to `resume`, now if it came already, otherwise when it comes.
    func wait(for id: UInt64, _ resume: @escaping @Sendable (CallAnswer) -> Void) {
        let answer = calls.withLock { calls -> CallAnswer? in
            if let answer = calls.answered.removeValue(forKey: id) { return answer }
            if calls.pending[id] != nil { calls.pending[id] = .resume(resume) }
            return nil
        }
        if let answer { resume(answer) }
    }

    /// Call `id`'s answer if it comes within `budget`: while no other thread reads, the caller
    /// reads the socket itself, so that a quick answer needs no thread woken on this side (a
    /// wake-up costs tens of µs on a small virtual machine); frames for other calls are handed
    /// on as the reader thread would. `nil` after the budget: ``wait(for:_:)`` then.
    func answer(to id: UInt64, within budget: Duration) -> CallAnswer? {
        let deadline = ContinuousClock.now + budget
        repeat {
            if let answer = calls.withLock({ $0.answered.removeValue(forKey: id) }) { return answer }
            // A closed socket is the reader thread's to handle: it sees the end too.
            if reading.tryLock() {
                _ = readAndDispatch()
                reading.unlock()
            }
        } while ContinuousClock.now < deadline
        return calls.withLock { $0.answered.removeValue(forKey: id) }
    }

    private enum Incoming {
        case frame([UInt8])
        case nothing
        case closed
    }

    /// Reads the next frame if one has begun to arrive and hands it on (in the order frames
    /// came); a malformed one shuts the socket down. Under ``reading``.
    private func readAndDispatch() -> Incoming {
        let incoming = readIfReady()
        if case .frame(let body) = incoming, let problem = dispatch(body) {
            stopMalformed(problem)
            return .closed
        }
        return incoming
    }

    /// The next frame if one has begun to arrive; under ``reading``.
    private func readIfReady() -> Incoming {
        // Closed (under `reading` too): its number may be another file's by now.
        if sending.withLock({ $0 }) { return .closed }
        var poller = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 0) > 0 else { return .nothing }
        switch socket.next() {
        case .frame(let body):
            return .frame(body)
        case .ended:
            return .closed
        case .malformed(let problem):
            stopMalformed(problem)
            return .closed
        }
    }

    /// Ends a child that sent what is not a frame of the protocol: it is of no more use, and
    /// its calls fail saying so (not as a crash by the SIGKILL that ends it).
    func stopMalformed(_ problem: String) {
        killedBecause.withLock { $0 = $0 ?? "sent a malformed frame (\(problem)) and was stopped" }
        shutdown(socket.fd, Int32(SHUT_RDWR))
    }

    /// Ends call `id` with `answer`, unless it ended already.
    func finish(_ id: UInt64, _ answer: CallAnswer) {
        let waiter = calls.withLock { calls -> Waiter? in
            if !calls.overdue.isEmpty { calls.overdue.remove(id) }
            if case .failure(let error) = answer, (error as? PluginError)?.status == .timeout { calls.timedOut = true }
            let waiter = calls.pending.removeValue(forKey: id)
            if case .caller = waiter { calls.answered[id] = answer }
            return waiter
        }
        if case .resume(let resume) = waiter { resume(answer) }
    }

    /// Ends call `id` with `error` as timed out, unless it ended already; true when it had not,
    /// and the child then owes its answer (``isOverdue(_:)``) until it sends one.
    func timeOut(_ id: UInt64, _ error: PluginError) -> Bool {
        let pending = calls.withLock { calls in calls.pending[id] != nil }
        guard pending else { return false }
        finish(id, .failure(error))
        calls.withLock { _ = $0.overdue.insert(id) }
        return true
    }

    /// Whether the child still owes the answer of call `id`, which timed out.
    func isOverdue(_ id: UInt64) -> Bool { calls.withLock { $0.overdue.contains(id) } }

    /// Kills the child and its process group (it hangs); `reason` is how it ended, for the
    /// calls it fails.
    func killHung(because reason: String) {
        killedBecause.withLock { $0 = $0 ?? reason }
        signalEverything(SIGKILL)
    }

    /// SIGKILLs every descendant of the child, in its process group or not (a daemon the plugin
    /// detached is still one: the child's reaper adopts what its descendants orphan), then sends `signal`
    /// to the child's group. Nothing once the child is reaped: its pid may be another's then.
    private func signalEverything(_ signal: Int32) {
        reaped.withLock { reaped in
            guard !reaped else { return }
            ProcessTree.killDescendants(of: pid)
            kill(-pid, signal)
        }
    }

    /// Set when the child is reaped.
    private let reaped = Locked(false)

    /// Reaps the child if it has ended, or once it has with `blocking`: its wait status.
    private func reapChild(blocking: Bool) -> Int32? {
        if blocking {
            var info = siginfo_t()
            while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) < 0 && errno == EINTR {}
        }
        return reaped.withLock { reaped in
            var status: Int32 = 0
            guard waitpid(pid, &status, WNOHANG) == pid else { return nil }
            reaped = true
            return status
        }
    }

    /// Tells the child to cancel call `id` (best effort).
    func cancel(_ id: UInt64) {
        send(WireWriter(.cancel, call: id).finishedCopy())
    }

    /// Reads answers on a thread of its own until the socket closes (calling `invalidated`
    /// when the child's source says its data changed); then `died` says what the calls left
    /// fail with, given how the child ended.
    func serve(sink: @escaping PluginLogSink, invalidated: @escaping @Sendable () -> Void,
               died: @escaping @Sendable (ChildProcess, String) -> PluginError) {
        handlers.withLock { $0 = Handlers(sink: sink, invalidated: invalidated) }
        detachThread(named: "paging-child") { [self] in
            // The child's end is watched as well as its socket: a process the plugin forked
            // holds the socket open after the child ended, and the end (a crash) went unseen
            // until a call timed out, or for ever. Once it ended, the socket is shut down on
            // this side: what the child sent before is still read, then its end.
            let exited = paging_isolation_pidfd(pid)
            defer { if exited >= 0 { close(exited) } }
            var pollers = [pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: exited, events: Int16(POLLIN), revents: 0)]
            frames: while true {
                // Wait for a frame without reading it: a caller may read it first.
                pollers[0].revents = 0
                pollers[1].revents = 0
                if poll(&pollers, exited >= 0 ? 2 : 1, -1) < 0 {
                    if errno == EINTR { continue }
                    break
                }
                if pollers[1].revents != 0 {
                    pollers[1].fd = -1 // (poll skips a negative descriptor)
                    shutdown(socket.fd, Int32(SHUT_RDWR))
                }
                reading.lock()
                let incoming = readAndDispatch()
                reading.unlock()
                if case .closed = incoming { break frames }
            }
            let how = reap()
            let error = died(self, how)
            let waiters = calls.withLock { calls in
                calls.ended = error
                defer { calls.pending = [:] }
                for (id, waiter) in calls.pending {
                    if case .caller = waiter { calls.answered[id] = .failure(error) }
                }
                return calls.pending.values.compactMap { waiter in
                    if case .resume(let resume) = waiter { resume } else { nil }
                }
            }
            for resume in waiters { resume(.failure(error)) }
            ended.open()
        }
        servedFlag.withLock { $0 = true }
    }

    /// Hands one frame from the child on: an answer to its call, a log line to the sink, an
    /// invalidation; what is wrong with it when it is malformed (the child is then of no more use).
    private func dispatch(_ body: [UInt8]) -> String? {
        guard var reader = try? WireReader(body) else { return "a frame too short for its header" }
        switch IsolationOp(rawValue: reader.op) {
        case .reply:
            finish(reader.call, .reply(reader))
        case .failure:
            guard let status = try? reader.u32(), let message = try? reader.string(), let after = try? reader.u64() else { return "a failure frame cut short" }
            let retryAfter = after == UInt64.max ? nil : Duration.milliseconds(Int64(clamping: after))
            finish(reader.call, .failure(PluginError(PluginStatus(rawValue: status), message, plugin: "", retryAfter: retryAfter)))
        case .invalidated:
            handlers.withLock { $0 }?.invalidated()
        case .log:
            guard let level = try? reader.u32(), let plugin = try? reader.string(), let message = try? reader.string() else { return "a log frame cut short" }
            handlers.withLock { $0 }?.sink(PluginLogLevel(rawValue: level) ?? .info, plugin, message)
        default:
            return "operation \(reader.op), which the child does not send"
        }
        return nil
    }

    /// How long a child asked to end may take (its plugin's destroy()) before it is killed.
    static let endingGrace = Duration.seconds(2)
    /// How a child killed after ``endingGrace`` ended begins.
    static let killedWhileEnding = "was killed: it had not ended "

    /// Ends the child, and waits until it is reaped; how it ended. Idempotent. A child serving
    /// its plugin is asked to end (its side of the socket closed: it destroys the plugin and
    /// exits), and killed with its descendants after ``endingGrace``; one that never finished
    /// loading is killed at once (SIGKILL to its descendants, SIGTERM to its group, SIGKILL to
    /// all after 2 s).
    @discardableResult
    func stop() -> String {
        let first = stopping.withLock { stopping in
            defer { stopping = true }
            return !stopping
        }
        if first, servedFlag.withLock({ $0 }) {
            // A call still under way there (one the host gave up on) keeps the plugin from being
            // destroyed: the ABI has no destroy() during a call.
            let busy = calls.withLock { !$0.pending.isEmpty || !$0.overdue.isEmpty || $0.timedOut }
            shutdown(socket.fd, Int32(SHUT_WR))
            if !ended.wait(within: Self.endingGrace) {
                let why = busy ? "a call to its plugin was still running (it hangs there), so destroy() could not be called"
                    : "its plugin's destroy() did not return"
                killedBecause.withLock { $0 = $0 ?? Self.killedWhileEnding + "within \(Self.endingGrace) of being asked to (\(why))" }
                signalEverything(SIGKILL)
            }
        } else if first {
            // Without a reader (a child that never finished loading), reap here.
            signalEverything(SIGTERM)
            shutdown(socket.fd, Int32(SHUT_RDWR))
            _ = reap()
        }
        ended.wait()
        return howItEnded.withLock { $0 } ?? "ended"
    }

    /// Whether a reader thread runs (and reaps).
    private let servedFlag = Locked(false)

    /// Waits for the child, kills what is left of its group, closes the socket; how it ended.
    private func reap() -> String {
        if let how = howItEnded.withLock({ $0 }) { return how }
        var waitStatus: Int32?
        // The server has ended (a crash, or killed with the child's descendants by stop()), or
        // soon will (SIGTERM), and the reaper is ending what the plugin left before it ends as
        // the server did: a kill now would hide how.
        let deadline = ContinuousClock.now + .seconds(2)
        while waitStatus == nil, ContinuousClock.now < deadline {
            waitStatus = reapChild(blocking: false)
            if waitStatus == nil { usleep(1_000) }
        }
        if waitStatus == nil {
            // Not ended after SIGTERM; or the socket closed and the child did not end: it
            // closed fd 3 itself and is of no more use.
            signalEverything(SIGKILL)
            waitStatus = reapChild(blocking: true)
        }
        let status = waitStatus ?? 0
        // Whatever the plugin forked ends with its group.
        kill(-pid, SIGKILL)
        let signal = status & 0x7F
        let how = killedBecause.withLock({ $0 })
            ?? (signal != 0 ? "crashed (\(signalName(signal)))" : "exited with status \((status >> 8) & 0xFF)")
        reading.withLock {
            sending.withLock { closed in
                closed = true
                close(socket.fd)
            }
        }
        howItEnded.withLock { $0 = how }
        if !servedFlag.withLock({ $0 }) { ended.open() }
        return how
    }
}

extension WireWriter {
    /// The frame, finished, from a writer that is not kept.
    func finishedCopy() -> [UInt8] {
        var copy = self
        return copy.finish()
    }
}

/// "SIGSEGV" for 11, and so on.
package func signalName(_ signal: Int32) -> String {
    let names: [Int32: String] = [
        SIGHUP: "SIGHUP", SIGINT: "SIGINT", SIGQUIT: "SIGQUIT", SIGILL: "SIGILL", SIGTRAP: "SIGTRAP", SIGABRT: "SIGABRT",
        SIGBUS: "SIGBUS", SIGFPE: "SIGFPE", SIGKILL: "SIGKILL", SIGUSR1: "SIGUSR1", SIGSEGV: "SIGSEGV", SIGUSR2: "SIGUSR2",
        SIGPIPE: "SIGPIPE", SIGALRM: "SIGALRM", SIGTERM: "SIGTERM", SIGSYS: "SIGSYS",
    ]
    return names[signal] ?? "signal \(signal)"
}

/// A gate that opens once; waiters block until it does.
final class Latch: @unchecked Sendable {
    private let condition = Condition()
    private var isOpen = false

    func open() {
        condition.lock()
        isOpen = true
        condition.broadcast()
        condition.unlock()
    }

    func wait() {
        condition.lock()
        while !isOpen { condition.wait() }
        condition.unlock()
    }

    /// ``wait()`` for `timeout` at most; whether the gate opened.
    func wait(within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        condition.lock()
        defer { condition.unlock() }
        while !isOpen {
            let left = deadline - .now
            guard left > .zero else { return false }
            _ = condition.wait(seconds: Double(left.components.seconds) + Double(left.components.attoseconds) * 1e-18)
        }
        return true
    }
}

/// The one thread that starts isolated plugins' children: the kernel kills a child whose
/// starting thread ends (PR_SET_PDEATHSIG), so children are started by a thread that lives as
/// long as the process.
final class SpawnThread: @unchecked Sendable {
    static let shared = SpawnThread()
    private let condition = Condition()
    private var jobs: [() -> Void] = []

    private init() {
        detachThread(named: "paging-spawn") { [self] in
            while true {
                condition.lock()
                while jobs.isEmpty { condition.wait() }
                let job = jobs.removeFirst()
                condition.unlock()
                job()
            }
        }
    }

    func run<T>(_ body: @escaping () -> T) -> T {
        let done = Latch()
        var result: T?
        condition.lock()
        jobs.append {
            result = body()
            done.open()
        }
        condition.signal()
        condition.unlock()
        done.wait()
        return result!
    }
}
