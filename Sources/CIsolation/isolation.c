#define _GNU_SOURCE
#include "paging_isolation.h"

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <unistd.h>

int paging_isolation_die_with_parent(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
    return getppid() == parent ? 0 : -1;
}

int paging_isolation_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}
