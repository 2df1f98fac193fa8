/*
 * What the child process of an isolated plugin (`pager __isolate`) does before it loads the
 * plugin. Part of the host, not of the plugin ABI.
 */
#ifndef PAGING_ISOLATION_H
#define PAGING_ISOLATION_H

#include <spawn.h>
#include <sys/types.h>

/* Asks the kernel to SIGKILL this process when the thread that started it ends, and checks
 * that `parent` is still this process's parent (the parent may have ended before the request
 * took effect). Returns 0, or -1 when the parent is already gone. */
int paging_isolation_die_with_parent(pid_t parent);

/* Makes this process the reaper of what its descendants orphan (PR_SET_CHILD_SUBREAPER): a
 * process the plugin forks and detaches (a daemon: fork, setsid, fork again) stays among this
 * process's descendants, where the host finds it (paging_isolation_kill_descendants). Returns 0
 * or -1. */
int paging_isolation_adopt_orphans(void);

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

#endif
