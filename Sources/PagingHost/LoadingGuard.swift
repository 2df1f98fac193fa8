import FoundationEssentials
import Glibc
import Paging

/// Tells the user which plugin ended the process while it was being loaded or created.
///
/// A library whose constructor, `init()` or `create_*` calls `exit()` would otherwise end the
/// host quietly, with the plugin's status (often 0, as if all went well). Once a host program
/// turns the guard on (``PluginLibrary/reportExitsWhileLoading(status:)``), an exit during a load
/// or a create writes one line naming the library or plugin on stderr and ends the process with
/// the host's status instead. Off by default: an embedding program decides.
enum LoadingGuard {
    private struct State {
        var enabledStatus: Int32?
        /// What is being loaded or created now, by the threads doing it.
        var loading: [UInt64: String] = [:]
        var nextTicket: UInt64 = 0
    }

    private static let state = Locked(State())

    static func enable(status: Int32) {
        let first = state.withLock { state -> Bool in
            defer { state.enabledStatus = status }
            return state.enabledStatus == nil
        }
        if first { atexit { LoadingGuard.processIsExiting() } }
    }

    /// Runs `body`, naming `what` as being loaded should the process exit meanwhile.
    static func during<R, Failure: Error>(_ what: @autoclosure () -> String, _ body: () throws(Failure) -> R) throws(Failure) -> R {
        let ticket = state.withLock { state -> UInt64? in
            guard state.enabledStatus != nil else { return nil }
            state.nextTicket += 1
            state.loading[state.nextTicket] = what()
            return state.nextTicket
        }
        defer { if let ticket { state.withLock { _ = $0.loading.removeValue(forKey: ticket) } } }
        return try body()
    }

    private static func processIsExiting() {
        guard let (status, what) = state.withLock({ state in
            state.enabledStatus.flatMap { status in state.loading.values.first.map { (status, $0) } }
        }) else { return }
        let line = "pager: \(OneLine.escape(what, limit: 4_096)) ended the process while it was being loaded (it called exit()); exit status \(status)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
        _exit(status)
    }
}

extension PluginLibrary {
    /// Makes a plugin that ends the process while it is loaded or created (its constructor,
    /// `init()` or `create_*` calls `exit()`) end it with `status` instead, after one line on
    /// stderr naming it. For host programs: `pager` passes 2 (bad input).
    public static func reportExitsWhileLoading(status: Int32) {
        LoadingGuard.enable(status: status)
    }
}
