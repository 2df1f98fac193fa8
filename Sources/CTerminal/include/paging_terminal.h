/*
 * Terminal control for `pager browse`: raw mode that is restored on exit and on signals.
 * (Part of the pager host, not of the plugin ABI.)
 */
#ifndef PAGING_TERMINAL_H
#define PAGING_TERMINAL_H

/* Puts the terminal on fd 0 in raw mode and the screen (fd 1) in the alternate buffer with the
 * cursor hidden. Installs handlers so that SIGINT, SIGTERM, SIGHUP and SIGQUIT restore the
 * terminal before the process ends. Returns 0, or -1 when fd 0 is not a terminal. */
int paging_terminal_enter(void);

/* Restores what paging_terminal_enter changed. Safe to call more than once. */
void paging_terminal_restore(void);

/* The size of the terminal on fd 1; returns 0, or -1 when it cannot be read. */
int paging_terminal_size(int *rows, int *columns);

/* Waits up to timeout_ms for input on fd 0 and reads at most `capacity` bytes into buffer.
 * Returns the byte count, 0 on timeout, -1 at end of input or on error. */
int paging_terminal_read(unsigned char *buffer, int capacity, int timeout_ms);

#endif
