import CStackObjects
import FoundationEssentials
import Glibc
import Paging

/// Tells the user which plugin ended the process: while it was being loaded or created, or
/// later, in one of its calls.
///
/// A library whose constructor, `init()`, `create_*` or `fetch()` calls `exit()` would otherwise
/// end the host quietly, with the plugin's status (often 0, as if all went well, with part of
/// the output). Once a host program turns the guard on (``PluginLibrary/reportExits(status:)``),
/// an exit the host did not make (``PluginLibrary/exitHost(_:)``) writes one line on stderr,
/// naming the library or plugin, and ends the process with the host's status instead. Off by
/// default: an embedding program decides.
enum ExitGuard {
    private struct State {
        var enabledStatus: Int32?
        /// What is being loaded or created now, by the threads doing it.
        var loading: [UInt64: String] = [:]
        var nextTicket: UInt64 = 0
        /// The host itself ends the process.
        var hostExits = false
    }

    private static let state = Locked(State())

    static func enable(status: Int32) {
        let first = state.withLock { state -> Bool in
            defer { state.enabledStatus = status }
            return state.enabledStatus == nil
        }
        if first { atexit { ExitGuard.processIsExiting() } }
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

    static func hostExits() {
        state.withLock { $0.hostExits = true }
    }

    private static func processIsExiting() {
        guard let (status, loading) = state.withLock({ state -> (Int32, String?)? in
            guard let status = state.enabledStatus, !state.hostExits || !state.loading.isEmpty else { return nil }
            return (status, state.loading.values.first)
        }) else { return }
        let line = if let loading {
            "pager: \(OneLine.escape(loading, limit: 4_096)) ended the process while it was being loaded (it called exit()); exit status \(status)\n"
        } else {
            "pager: \(OneLine.escape(callerLibrary() ?? "a plugin", limit: 4_096)) ended the process (it called exit()) before pager was done: "
                + "what was printed may be incomplete; exit status \(status)\n"
        }
        _ = line.withCString { write(2, $0, strlen($0)) }
        _exit(status)
    }

    /// The plugin library on the stack of this exit (the one that called exit()), as "the
    /// library PATH", or `nil` when none is.
    private static func callerLibrary() -> String? {
        let libraries = PluginLibrary.loadedPaths
        var files = [UnsafePointer<CChar>?](repeating: nil, count: 64)
        let count = Int(paging_stack_objects(&files, Int32(files.count)))
        for file in files[..<count] {
            guard let file, let path = libraries[String(cString: file)] else { continue }
            return "the library \(path)"
        }
        return nil
    }
}

extension PluginLibrary {
    /// Makes a plugin that ends the process end it with `status` instead, after one line on
    /// stderr naming it: while it is loaded or created (its constructor, `init()` or `create_*`
    /// calls `exit()`), or in a later call (its `fetch()` does). The host ends the process with
    /// ``exitHost(_:)``. For host programs: `pager` passes 2 (bad input).
    public static func reportExits(status: Int32) {
        ExitGuard.enable(status: status)
    }

    /// Ends the process with `status`, as the host means to: not reported as a plugin's exit.
    public static func exitHost(_ status: Int32) -> Never {
        PluginCrash.letAnyCrashEndTheProcess()
        ExitGuard.hostExits()
        exit(status)
    }
}
