/*
 * The floor under process isolation (row 12 of paging-bench): a 200-byte message to a forked
 * child over a Unix socketpair and back, both sides blocking in read(), as an isolated call
 * crosses. Prints the median µs a round trip of 5 runs of 2,000.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void)
{
    enum { COUNT = 2000, RUNS = 5, SIZE = 200 };
    char buffer[SIZE] = { 0 };
    double runs[RUNS];
    int fds[2], run, i;
    pid_t child;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return 1;
    child = fork();
    if (child < 0) return 1;
    if (child == 0) {
        ssize_t n;
        close(fds[0]);
        while ((n = read(fds[1], buffer, SIZE)) > 0)
            if (write(fds[1], buffer, (size_t)n) != n) break;
        _exit(0);
    }
    close(fds[1]);
    for (run = 0; run < RUNS; run++) {
        double start = now_us();
        for (i = 0; i < COUNT; i++) {
            size_t got = 0;
            if (write(fds[0], buffer, SIZE) != SIZE) return 1;
            while (got < SIZE) {
                ssize_t n = read(fds[0], buffer + got, SIZE - got);
                if (n <= 0) return 1;
                got += (size_t)n;
            }
        }
        runs[run] = (now_us() - start) / COUNT;
    }
    close(fds[0]);
    waitpid(child, NULL, 0);
    qsort(runs, RUNS, sizeof runs[0], cmp);
    printf("%.1f\n", runs[RUNS / 2]);
    return 0;
}
