/*
 * What the child process of an isolated plugin (`pager __isolate`) does before it loads the
 * plugin. Part of the host, not of the plugin ABI.
 */
#ifndef PAGING_ISOLATION_H
#define PAGING_ISOLATION_H

#include <spawn.h>
#include <sys/types.h>

/* Splits this process, a child of `parent` that has no other thread yet, in two: this process
 * stays as the reaper of what its descendants orphan (PR_SET_CHILD_SUBREAPER), and its child,
 * the server, returns (0) to do the work (load and serve a plugin, run a check). A process the
 * plugin forks and detaches (a daemon: fork, setsid, fork again) stays among the reaper's
 * descendants, where the host finds it (paging_isolation_kill_descendants); it is reaped the
 * moment it ends (not left a zombie), and the plugin's own children stay the server's, for the
 * plugin to wait for. When the server ends, the reaper ends what is left (and writes how many
 * processes that was, in decimal and a line break, to `report_fd`, unless it is -1), then ends
 * as the server did (its exit status or signal). When `parent` ends first, the reaper ends the
 * whole tree, the server too. `server_fd` (or -1) is closed in the reaper, `report_fd` in the
 * server. Returns -1 when `parent` is gone. With another thread running, or no fork, the
 * process does not split and adopts its descendants' orphans itself. */
int paging_isolation_start_reaper(pid_t parent, int server_fd, int report_fd);

/* SIGKILLs every descendant of `root` (not `root` itself), found through /proc, whatever its
 * process group or session; looks again, up to `rounds` times, while one is found (a process
 * may fork while the others are killed). Returns how many were killed. */
int paging_isolation_kill_descendants(pid_t root, int rounds);

/* Adds to `actions` the closing of every descriptor from `from` on (glibc's
 * posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module does not show).
 * Returns 0 or an error number. */
int paging_isolation_close_from(posix_spawn_file_actions_t *actions, int from);

/* A descriptor that becomes readable when process `pid` (a child of this one) ends
 * (pidfd_open, Linux 5.3), close-on-exec; -1 when the kernel has none. The host watches it
 * besides the child's socket, which a process the plugin forked may hold open after the child
 * ended (its crash then went unseen). */
int paging_isolation_pidfd(pid_t pid);

/* SIGCHLD back to a disposition under which a child's end can be waited for: when it is
 * ignored (SIG_IGN), or its handler has SA_NOCLDWAIT, the kernel reaps children at once and the
 * host never learns how an isolated plugin's process ended. Returns 1 when it had to (a plugin
 * in this process set it so), else 0. */
int paging_isolation_restore_sigchld(void);

#endif
