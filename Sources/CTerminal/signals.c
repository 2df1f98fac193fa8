#define _GNU_SOURCE /* pipe2 */
#include "paging_terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static int pipe_ends[2] = { -1, -1 };

/* Only async-signal-safe calls: write. errno is kept for the thread it interrupted. */
static void on_signal(int signal_number) {
    int saved = errno;
    unsigned char byte = (unsigned char)signal_number;
    ssize_t ignored = write(pipe_ends[1], &byte, 1);
    (void)ignored;
    errno = saved;
}

int paging_signals_to_pipe(void) {
    if (pipe_ends[0] >= 0) return pipe_ends[0];
    if (pipe2(pipe_ends, O_CLOEXEC) != 0) return -1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGINT, &action, NULL) != 0 || sigaction(SIGTERM, &action, NULL) != 0 || sigaction(SIGHUP, &action, NULL) != 0) {
        int saved = errno;
        paging_signals_restore();
        errno = saved;
        return -1;
    }
    return pipe_ends[0];
}

int paging_signals_include_sigpipe(void) {
    if (pipe_ends[0] < 0) return -1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGPIPE, &action, NULL);
}

void paging_signals_restore(void) {
    signal(SIGPIPE, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
}
