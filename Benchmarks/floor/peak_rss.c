/* The peak RSS of a command, for paging-bench row 13: wait4's ru_maxrss, measured from this small
 * process. A child the bench spawns itself would report the bench's RSS: at exec the kernel keeps
 * the peak of the address space the child had before (the bench's, shared or copied) as its own.
 * Usage: peak_rss COMMAND [ARGS...] (its stdout and stderr go to /dev/null). Prints the peak in
 * KiB; exits with the command's status, or 127 when it cannot be started. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: peak_rss COMMAND [ARGS...]\n"); return 2; }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); return 127; }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) { dup2(null, 1); dup2(null, 2); }
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    int status = 0;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) != pid) { perror("wait4"); return 127; }
    printf("%ld\n", usage.ru_maxrss);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
