#define _GNU_SOURCE
#include "paging_terminal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved;
static volatile sig_atomic_t entered = 0;
/* Where frames go: fd 1, or, while output is captured, the terminal's own descriptor. */
static volatile sig_atomic_t screen = 1;
/* The terminal's standard error while output is captured, else -1. */
static volatile sig_atomic_t saved_error = -1;
static volatile sig_atomic_t resumed = 0;
static volatile sig_atomic_t resized = 0;

static const char enter_sequence[] = "\033[?1049h\033[?25l";
static const char leave_sequence[] = "\033[?25h\033[?1049l";

void paging_terminal_restore(void) {
    if (!entered) return;
    entered = 0;
    tcsetattr(0, TCSAFLUSH, &saved);
    ssize_t ignored = write(screen, leave_sequence, sizeof leave_sequence - 1);
    (void)ignored;
}

int paging_terminal_capture_output(void) {
    if (saved_error >= 0) return -1;
    int ends[2];
    int terminal = fcntl(1, F_DUPFD_CLOEXEC, 3);
    int error = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (terminal < 0 || error < 0 || pipe2(ends, O_CLOEXEC) != 0 || fcntl(ends[0], F_SETFL, O_NONBLOCK) != 0) {
        if (terminal >= 0) close(terminal);
        if (error >= 0) close(error);
        return -1;
    }
    screen = terminal;
    saved_error = error;
    /* dup2 clears close-on-exec: child processes write to the pipe too. */
    dup2(ends[1], 1);
    dup2(ends[1], 2);
    close(ends[1]);
    return ends[0];
}

int paging_terminal_screen(void) { return screen; }

void paging_terminal_release_output(void) {
    if (saved_error < 0) return;
    int terminal = screen, error = saved_error;
    dup2(terminal, 1);
    dup2(error, 2);
    screen = 1;
    saved_error = -1;
    close(terminal);
    close(error);
}

/* Only async-signal-safe calls: tcsetattr, write, dup2, close, signal, raise. */
static void on_signal(int signal_number) {
    paging_terminal_restore();
    paging_terminal_release_output();
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

/* Raw mode and the alternate screen, the terminal's settings saved first. Async-signal-safe
 * (on_stop calls it when the process is continued). */
static int enter_raw(void) {
    if (tcgetattr(0, &saved) != 0) return -1;
    struct termios raw = saved;
    raw.c_iflag &= ~(unsigned)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_oflag &= ~(unsigned)(OPOST);
    raw.c_cflag |= CS8;
    raw.c_lflag &= ~(unsigned)(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(0, TCSANOW, &raw) != 0) return -1;
    entered = 1;
    ssize_t ignored = write(screen, enter_sequence, sizeof enter_sequence - 1);
    (void)ignored;
    return 0;
}

static void install_with_flags(int signal_number, void (*handler)(int), int flags) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = handler;
    action.sa_flags = flags;
    sigemptyset(&action.sa_mask);
    sigaction(signal_number, &action, NULL);
}

static void install(int signal_number, void (*handler)(int)) { install_with_flags(signal_number, handler, 0); }

/* SIGTSTP (ctrl-z, which browse raises, or a kill): the terminal as it was, then stopped as by
 * default; once continued (fg), raw mode and the alternate screen again, and `resumed` set so
 * that the screen is drawn anew. Only async-signal-safe calls. */
static void on_stop(int signal_number) {
    int was_entered = entered;
    paging_terminal_restore();
    signal(signal_number, SIG_DFL);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal_number);
    sigprocmask(SIG_UNBLOCK, &set, NULL); /* blocked while its handler runs */
    raise(signal_number);                 /* stops here until SIGCONT */
    install(signal_number, on_stop);
    if (was_entered && enter_raw() == 0) resumed = 1;
}

/* SIGWINCH: the window changed size; the next frame is drawn to the new size. */
static void on_resize(int signal_number) {
    (void)signal_number;
    resized = 1;
}

/* Started in the background (`pager browse ... &`): stops, as a terminal program stopped by
 * SIGTTOU would, until the shell brings it to the foreground. The calling thread (Dispatch's)
 * blocks SIGTTOU, so tcsetattr would succeed from the background: browse drew over the shell,
 * quit on the first key the shell read (its read failed with EIO), and left the terminal in
 * the mode the shell had at that moment. The signal goes to the process group (a thread that
 * does not block it takes it, and the default action stops every thread). */
static int wait_for_the_foreground(void) {
    pid_t group;
    int tries = 0;
    while ((group = tcgetpgrp(0)) >= 0 && group != getpgrp()) {
        /* Still running 2 s of tries on: an orphaned process group, which SIGTTIN does not stop
         * (its shell is gone); nothing would ever bring it to the foreground. */
        if (++tries > 100) return -2;
        kill(0, SIGTTIN);
        usleep(20000);
    }
    return 0;
}

int paging_terminal_enter(void) {
    if (!isatty(0)) return -1;
    if (wait_for_the_foreground() != 0) return -2;
    if (enter_raw() != 0) return -1;
    install(SIGINT, on_signal);
    install(SIGTERM, on_signal);
    install(SIGHUP, on_signal);
    install(SIGQUIT, on_signal);
    install(SIGTSTP, on_stop);
    /* Restarted: a window dragged sends dozens, and a plugin's read or write that one of them
     * interrupted would fail with EINTR (it was ignored before); the key reader's poll() still
     * returns early. */
    install_with_flags(SIGWINCH, on_resize, SA_RESTART);
    return 0;
}

void paging_terminal_suspend(void) {
    /* To the process, not this thread: Dispatch's threads block signals, and a signal raised on
     * one of them would wait there for ever. */
    kill(getpid(), SIGTSTP);
}

int paging_terminal_take_resumed(void) {
    if (!resumed) return 0;
    resumed = 0;
    return 1;
}

int paging_terminal_take_resized(void) {
    if (!resized) return 0;
    resized = 0;
    return 1;
}

int paging_terminal_size(int *rows, int *columns) {
    struct winsize size;
    if (ioctl(screen, TIOCGWINSZ, &size) != 0 || size.ws_row == 0) return -1;
    *rows = size.ws_row;
    *columns = size.ws_col;
    return 0;
}

int paging_terminal_read(unsigned char *buffer, int capacity, int timeout_ms) {
    struct pollfd descriptor = { 0, POLLIN, 0 };
    int ready = poll(&descriptor, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) return 0; /* a signal (a stop and continue, say): no input */
    if (ready <= 0) return ready == 0 ? 0 : -1;
    ssize_t count = read(0, buffer, (size_t)capacity);
    if (count < 0 && (errno == EINTR || errno == EAGAIN)) return 0;
    return count > 0 ? (int)count : -1;
}
