#define _GNU_SOURCE
#include "paging_isolation.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int paging_isolation_die_with_parent(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
    return getppid() == parent ? 0 : -1;
}

int paging_isolation_adopt_orphans(void) {
    return prctl(PR_SET_CHILD_SUBREAPER, 1) == 0 ? 0 : -1;
}

typedef struct { pid_t pid, parent; } process_link;

/* Every live process's parent, from /proc/N/stat ("N (comm) S PPID ...": comm may hold spaces and
 * parentheses, so the fields after it start after the last ')'). NULL when /proc cannot be read. */
static process_link *process_links(size_t *count) {
    DIR *proc = opendir("/proc");
    if (proc == NULL) return NULL;
    size_t used = 0, capacity = 256;
    process_link *links = malloc(capacity * sizeof *links);
    struct dirent *entry;
    while (links != NULL && (entry = readdir(proc)) != NULL) {
        char *end;
        long pid = strtol(entry->d_name, &end, 10);
        if (*end != '\0' || pid <= 0) continue;
        char path[64], stat[512];
        snprintf(path, sizeof path, "/proc/%ld/stat", pid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue; /* ended meanwhile */
        ssize_t length = read(fd, stat, sizeof stat - 1);
        close(fd);
        if (length <= 0) continue;
        stat[length] = '\0';
        char *close_paren = strrchr(stat, ')');
        long parent;
        char state;
        if (close_paren == NULL || sscanf(close_paren + 1, " %c %ld", &state, &parent) != 2) continue;
        if (state == 'Z' || state == 'X') continue; /* ended: nothing to kill */
        if (used == capacity) {
            process_link *grown = realloc(links, 2 * capacity * sizeof *links);
            if (grown == NULL) break;
            links = grown;
            capacity *= 2;
        }
        links[used++] = (process_link){ (pid_t)pid, (pid_t)parent };
    }
    closedir(proc);
    *count = used;
    return links;
}

int paging_isolation_kill_descendants(pid_t root, int rounds) {
    int killed = 0;
    for (int round = 0; round < rounds; round++) {
        size_t count = 0;
        process_link *links = process_links(&count);
        if (links == NULL) break;
        /* Breadth first from root: found[] holds root's descendants as they are found. */
        pid_t *found = malloc((count + 1) * sizeof *found);
        size_t found_count = 0, next = 0;
        if (found == NULL) { free(links); break; }
        pid_t parent = root;
        for (;;) {
            for (size_t i = 0; i < count; i++) {
                if (links[i].parent == parent && links[i].pid != root) found[found_count++] = links[i].pid;
            }
            if (next == found_count) break;
            parent = found[next++];
        }
        for (size_t i = 0; i < found_count; i++) {
            if (kill(found[i], SIGKILL) == 0) killed++;
        }
        free(found);
        free(links);
        if (found_count == 0) break;
    }
    return killed;
}

int paging_isolation_close_from(posix_spawn_file_actions_t *actions, int from) {
    return posix_spawn_file_actions_addclosefrom_np(actions, from);
}

int paging_isolation_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    /* pidfd_open's descriptors are close-on-exec. */
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}
