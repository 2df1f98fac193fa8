import CTerminal
import FoundationEssentials
import Glibc
import Paging
import PagingHost

/// Removes a scratch folder when the process is interrupted (SIGINT), asked to end (SIGTERM),
/// loses its terminal (SIGHUP) or the reader of its output (SIGPIPE), then exits with 128 + the
/// signal's number (130, 143, 129, 141), as a shell reports a process that signal ended. A
/// `defer` alone never runs then: by default each signal ends the process where it stands, and
/// the folder stays in the temporary directory.
///
/// While this object is live (until ``cancel()``) the signals arrive as bytes on a pipe
/// (`paging_terminal.h` says why not a Dispatch signal source); a thread of its own reads them
/// and cleans up, so the clean-up may lock, allocate and touch files.
final class InterruptCleanup: Sendable {
    /// Set as a signal's clean-up starts: the command may no longer end by itself.
    private let cleaning = Locked(false)

    /// - Parameters:
    ///   - folder: removed, with everything in it, when a signal comes.
    ///   - command: names the command in the line said on standard error.
    ///   - before: runs first (stopping child processes that write into `folder`).
    init(removing folder: String, command: String, before: @escaping @Sendable () -> Void) {
        // SIGPIPE too: `pager check … | head` left the folder.
        let signals = paging_signals_to_pipe()
        guard signals >= 0, paging_signals_include_sigpipe() == 0 else {
            Output.error("pager: \(command): cannot handle SIGINT, SIGTERM, SIGHUP and SIGPIPE (\(String(cString: strerror(errno)))); "
                         + "an interrupted run leaves \(folder)")
            return
        }
        detachThread(named: "pager-signals") { [cleaning] in
            var number: UInt8 = 0
            while read(signals, &number, 1) != 1 {
                guard errno == EINTR else { return }
            }
            cleaning.withLock { $0 = true }
            before()
            // Renamed first: the command's own threads may still delete files in it as they
            // end, and a file gone under removeItem stops it, leaving the folder.
            let doomed = folder + ".stopped"
            try? FileManager.default.removeItem(atPath: rename(folder, doomed) == 0 ? doomed : folder)
            Output.error("pager: \(command): stopped by \(Signals.name(Int32(number)))")
            PluginLibrary.exitHost(128 + Int32(number))
        }
    }

    /// Gives the signals back their default action; once a signal's clean-up has started, waits
    /// for it to end the process instead, so that the command does not end first with its own
    /// status (the checks its clean-up stopped fail at once, and the run finishes).
    func cancel() {
        if cleaning.withLock({ $0 }) {
            while true { pause() }
        }
        paging_signals_restore()
    }
}

/// SIGINT, SIGTERM and SIGHUP as they come on `paging_signals_to_pipe()`'s pipe.
enum Signals {
    /// Waits, on a thread of its own, for the next signal on the pipe `fd`.
    static func next(on fd: Int32) async -> Int32 {
        await withCheckedContinuation { continuation in
            detachThread(named: "pager-signals") {
                var number: UInt8 = 0
                while read(fd, &number, 1) != 1 {
                    if errno != EINTR { break }
                }
                continuation.resume(returning: Int32(number))
            }
        }
    }

    static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        case SIGPIPE: "SIGPIPE"
        default: "SIGTERM"
        }
    }
}
