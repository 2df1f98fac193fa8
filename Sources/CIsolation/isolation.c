#define _GNU_SOURCE
#include "paging_isolation.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Asks the kernel to SIGKILL this process when the thread that started it ends, and checks that
 * `parent` is still this process's parent (it may have ended before the request took effect).
 * Returns 0, or -1 when the parent is already gone. */
static int die_with_parent(pid_t parent) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) return -1;
    return getppid() == parent ? 0 : -1;
}

/* How many threads this process has (/proc/self/task), or -1. */
static int thread_count(void) {
    DIR *tasks = opendir("/proc/self/task");
    if (tasks == NULL) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(tasks)) != NULL) {
        if (entry->d_name[0] != '.') count++;
    }
    closedir(tasks);
    return count;
}

/* Ends as `status` says the server ended: the same exit status, or the same signal (without a
 * second core dump: not dumpable). */
static void end_as(int status) {
    if (WIFEXITED(status)) _exit(WEXITSTATUS(status));
    int signal = WIFSIGNALED(status) ? WTERMSIG(status) : SIGKILL;
    (void)prctl(PR_SET_DUMPABLE, 0);
    struct sigaction fatal = { 0 };
    fatal.sa_handler = SIG_DFL;
    sigaction(signal, &fatal, NULL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, signal);
    sigprocmask(SIG_UNBLOCK, &only, NULL);
    kill(getpid(), signal);
    _exit(128 + signal);
}

/* Ends every descendant of this process and reaps them (a process forking meanwhile is found
 * again, for a second at most); how many were running when it was called. */
static int end_descendants(void) {
    int running = paging_isolation_kill_descendants(getpid(), 1);
    for (int round = 0; round < 1000; round++) {
        pid_t child;
        while ((child = waitpid(-1, NULL, WNOHANG)) > 0) {}
        if (child < 0 && errno == ECHILD) break;
        paging_isolation_kill_descendants(getpid(), 4);
        usleep(1000);
    }
    return running;
}

/* The reaper's life: reaps every child as it ends (the orphans the plugin's processes leave,
 * adopted here) until `server` ends; then ends what is left of the tree (writing how many
 * processes that was to `report_fd`, when not -1) and ends as the server did. When `parent`
 * ends first, ends the whole tree, the server too, and exits. Single-threaded: it runs after
 * fork() in the process that forked. */
static void serve_as_reaper(pid_t parent, pid_t server, int report_fd) {
    /* The host's SIGTERM to the group is for the server to end on; the reaper outlives it. */
    struct sigaction ignore = { 0 };
    ignore.sa_handler = SIG_IGN;
    const int endings[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE, SIGUSR2, SIGALRM };
    for (size_t i = 0; i < sizeof endings / sizeof endings[0]; i++) sigaction(endings[i], &ignore, NULL);
    /* Waited for, not handled: a child's end, and the parent's (SIGUSR1, not SIGKILL, so that
     * the tree is ended first). */
    sigset_t waited;
    sigemptyset(&waited);
    sigaddset(&waited, SIGCHLD);
    sigaddset(&waited, SIGUSR1);
    sigprocmask(SIG_BLOCK, &waited, NULL);
    if (prctl(PR_SET_PDEATHSIG, SIGUSR1) != 0 || getppid() != parent) {
        end_descendants();
        _exit(70);
    }
    for (;;) {
        int status;
        pid_t child;
        while ((child = waitpid(-1, &status, WNOHANG)) > 0) {
            if (child != server) continue;
            int left = end_descendants();
            if (report_fd >= 0) {
                char count[16];
                int length = snprintf(count, sizeof count, "%d\n", left);
                if (write(report_fd, count, (size_t)length) != length) { /* the reader learns nothing more */ }
            }
            end_as(status);
        }
        if (child < 0 && errno == ECHILD) _exit(70); /* the server is no child: cannot be */
        siginfo_t info;
        if (sigwaitinfo(&waited, &info) == SIGUSR1 && getppid() != parent) {
            end_descendants();
            _exit(70);
        }
    }
}

int paging_isolation_start_reaper(pid_t parent, int server_fd, int report_fd) {
    if (die_with_parent(parent) != 0) return -1;
    (void)prctl(PR_SET_CHILD_SUBREAPER, 1); /* not inherited by a fork's child */
    /* fork() copies one thread only: with another running, the server could wait for ever on
     * a lock that thread held. This process then serves, and adopts the orphans itself. */
    if (thread_count() != 1) return 0;
    pid_t reaper = getpid();
    pid_t server = fork();
    if (server == 0) {
        if (report_fd >= 0) close(report_fd);
        return die_with_parent(reaper);
    }
    if (server < 0) return 0;
    /* The server's: when it ends, its reader must see the end. */
    if (server_fd >= 0) close(server_fd);
    serve_as_reaper(parent, server, report_fd);
    return -1; /* not reached */
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

int paging_isolation_restore_sigchld(void)
{
    struct sigaction current;
    if (sigaction(SIGCHLD, NULL, &current) != 0) return 0;
    if (current.sa_handler == SIG_IGN && !(current.sa_flags & SA_SIGINFO)) {
        signal(SIGCHLD, SIG_DFL);
        return 1;
    }
    if (current.sa_flags & SA_NOCLDWAIT) {
        current.sa_flags &= ~SA_NOCLDWAIT;
        sigaction(SIGCHLD, &current, NULL);
        return 1;
    }
    return 0;
}
