import CCallFrame
import Glibc
import Paging

/// Naming the plugin library a crash came from (plugin_crash.h): each call into a library's
/// code marks its thread with the library's path, which the crash handler a host installs
/// (``PluginLibrary/nameCrashes(program:advice:)``) says before the process ends. (A plugin's
/// abort() ended pager with a backtrace whose every frame was in libc.)
enum PluginCrash {
    /// The paths named so far, as C strings kept for the life of the process (bit patterns).
    private static let labels = Locked<[String: UInt]>([:])

    /// The C string of `path` for ``calling(_:_:)`` (one per path, never freed).
    static func label(_ path: String) -> UInt {
        labels.withLock { labels in
            if let label = labels[path] { return label }
            let label = UInt(bitPattern: strdup(path))
            labels[path] = label
            return label
        }
    }

    /// Waits for good while a crash is being handled (on a plugin's own thread, as the host ends
    /// its work): the crash ends the process with its signal. (Exiting, the host ended it 0 now
    /// and then, the crash said on standard error but not in the status.)
    static func letAnyCrashEndTheProcess() {
        while paging_plugin_crash_in_progress() != 0 { pause() }
    }

    /// Runs `body` as a call into the library of `label`.
    @inline(__always)
    static func calling<R, E: Error>(_ label: UInt, _ body: () throws(E) -> R) throws(E) -> R {
        let previous = paging_plugin_call_enter(UnsafePointer(bitPattern: label))
        defer { paging_plugin_call_leave(previous) }
        return try body()
    }
}

extension PluginLibrary {
    /// Installs the crash handler: a crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, abort()) in a call
    /// into a plugin library, or in its code on a thread of its own, is said on standard error
    /// as "`program`: SIGSEGV in a call into the plugin library PATH: `advice`", before the
    /// handler that was there (the Swift runtime's backtrace) or the default action. Once.
    public static func nameCrashes(program: String, advice: String) {
        paging_plugin_crash_install(program, advice)
    }
}
