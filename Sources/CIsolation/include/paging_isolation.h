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

/* Adds to `actions` the closing of every descriptor from `from` on (glibc's
 * posix_spawn_file_actions_addclosefrom_np, which Swift's Glibc module does not show).
 * Returns 0 or an error number. */
int paging_isolation_close_from(posix_spawn_file_actions_t *actions, int from);

#endif
