import CIsolation
import Glibc

/// The processes under a child of the host (an isolated plugin's, a check's): the child splits
/// into a reaper and the worker, and whatever the work starts ends with it.
package enum ProcessTree {
    /// Splits this process, a child of `parent` with one thread yet, into a reaper of what the
    /// work's processes orphan, which stays, and the worker, which returns: see
    /// `paging_isolation_start_reaper`. `workerFD` is the worker's alone, `reportFD` the
    /// reaper's (-1: none). False when `parent` is gone.
    package static func startReaper(parent: pid_t, workerFD: Int32 = -1, reportFD: Int32 = -1) -> Bool {
        paging_isolation_start_reaper(parent, workerFD, reportFD) == 0
    }

    /// SIGKILLs every descendant of `root` (not `root`), in its process group or not, looking
    /// again while one is found (up to 4 times); how many were killed.
    @discardableResult
    package static func killDescendants(of root: pid_t) -> Int {
        Int(paging_isolation_kill_descendants(root, 4))
    }
}
