#define _DEFAULT_SOURCE
#include "paging_terminal.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

static struct termios saved;
static volatile sig_atomic_t entered = 0;

static const char enter_sequence[] = "\033[?1049h\033[?25l";
static const char leave_sequence[] = "\033[?25h\033[?1049l";

void paging_terminal_restore(void) {
    if (!entered) return;
    entered = 0;
    tcsetattr(0, TCSAFLUSH, &saved);
    ssize_t ignored = write(1, leave_sequence, sizeof leave_sequence - 1);
    (void)ignored;
}

/* Only async-signal-safe calls: tcsetattr, write, signal, raise. */
static void on_signal(int signal_number) {
    paging_terminal_restore();
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

int paging_terminal_enter(void) {
    if (!isatty(0) || tcgetattr(0, &saved) != 0) return -1;
    struct termios raw = saved;
    raw.c_iflag &= ~(unsigned)(BRKINT | ICRNL | INPCK | ISTRIP | IXON);
    raw.c_oflag &= ~(unsigned)(OPOST);
    raw.c_cflag |= CS8;
    raw.c_lflag &= ~(unsigned)(ECHO | ICANON | IEXTEN | ISIG);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    if (tcsetattr(0, TCSANOW, &raw) != 0) return -1;
    entered = 1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, NULL);
    sigaction(SIGTERM, &action, NULL);
    sigaction(SIGHUP, &action, NULL);
    sigaction(SIGQUIT, &action, NULL);
    ssize_t ignored = write(1, enter_sequence, sizeof enter_sequence - 1);
    (void)ignored;
    return 0;
}

int paging_terminal_size(int *rows, int *columns) {
    struct winsize size;
    if (ioctl(1, TIOCGWINSZ, &size) != 0 || size.ws_row == 0) return -1;
    *rows = size.ws_row;
    *columns = size.ws_col;
    return 0;
}

int paging_terminal_read(unsigned char *buffer, int capacity, int timeout_ms) {
    struct pollfd descriptor = { 0, POLLIN, 0 };
    int ready = poll(&descriptor, 1, timeout_ms);
    if (ready <= 0) return ready == 0 ? 0 : -1;
    ssize_t count = read(0, buffer, (size_t)capacity);
    return count > 0 ? (int)count : -1;
}
