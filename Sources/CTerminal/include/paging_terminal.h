/*
 * Terminal control for `pager browse`: raw mode that is restored on exit and on signals; and
 * SIGINT/SIGTERM/SIGHUP as bytes on a pipe, for a command that cleans up before it ends (signals.c).
 * (Part of the pager host, not of the plugin ABI.)
 */
#ifndef PAGING_TERMINAL_H
#define PAGING_TERMINAL_H

/* Puts the terminal on fd 0 in raw mode and the screen (paging_terminal_screen) in the
 * alternate buffer with the cursor hidden. Installs handlers so that SIGINT, SIGTERM, SIGHUP and
 * SIGQUIT restore the terminal (and release captured output) before the process ends, and
 * SIGTSTP before it stops (raw mode and the alternate screen come back when it is continued),
 * and notes SIGWINCH (paging_terminal_take_resized). In the background of a shell with job
 * control, stops (SIGTTIN) until brought to the foreground. Returns 0, -1 when fd 0 is not a
 * terminal, or -2 when the process is in the background and cannot be stopped (an orphaned
 * process group: its shell is gone). */
int paging_terminal_enter(void);

/* Stops the process as ctrl-z would with the terminal's own signal keys (raw mode reads ctrl-z
 * as a byte): the terminal restored first; returns once the process is continued. */
void paging_terminal_suspend(void);

/* 1 once after the process was stopped and continued (the screen was cleared: draw it anew),
 * else 0. */
int paging_terminal_take_resumed(void);

/* 1 once after the terminal's window changed size (SIGWINCH, handled from
 * paging_terminal_enter on), else 0. */
int paging_terminal_take_resized(void);

/* Restores what paging_terminal_enter changed. Safe to call more than once. */
void paging_terminal_restore(void);

/* Keeps the screen for frames: fd 1 moves to a descriptor of its own (paging_terminal_screen),
 * and fds 1 and 2 point at a new pipe, whose read end is returned (close-on-exec), so that what
 * plugins and the child processes started from now on write there never reaches the screen.
 * The read end is close-on-exec and non-blocking.
 * Returns -1 (nothing changed) when it cannot, or when output is captured already. */
int paging_terminal_capture_output(void);

/* The descriptor frames are written to: fd 1, or the screen's own while output is captured. */
int paging_terminal_screen(void);

/* Points fds 1 and 2 back at what they were before paging_terminal_capture_output (the pipe
 * ends for this process; children keep it). Async-signal-safe; safe to call more than once. */
void paging_terminal_release_output(void);

/* The size of the terminal on the screen's descriptor; returns 0, or -1 when it cannot be read. */
int paging_terminal_size(int *rows, int *columns);

/* Waits up to timeout_ms for input on fd 0 and reads at most `capacity` bytes into buffer.
 * Returns the byte count, 0 on timeout, -1 at end of input or on error. */
int paging_terminal_read(unsigned char *buffer, int capacity, int timeout_ms);

/* ---- signals.c ----
 * Not a Dispatch signal source: on Linux that reads the signal through a signalfd, which only
 * sees a signal blocked in every thread, and the threads of the process already run by then; a
 * thread that does not block it takes the signal first, and it is lost (or ends the process). A
 * sigaction handler runs on whichever thread takes the signal. */

/* From now on SIGINT, SIGTERM and SIGHUP (the terminal went away) no longer end the process: each writes its number, one byte,
 * to a pipe, whose read end is returned (close-on-exec, so child processes do not hold it).
 * The handler only calls write(). Returns -1 (errno set) when the pipe or a handler cannot be
 * made. Call it once; a second call returns the same read end. */
int paging_signals_to_pipe(void);

/* SIGPIPE (the reader of standard output went away, as `| head` does) goes to the pipe too,
 * after paging_signals_to_pipe; returns -1 when its handler cannot be set. For a command whose
 * clean-up matters more than its output (a scratch folder to remove). */
int paging_signals_include_sigpipe(void);

/* Gives SIGINT, SIGTERM, SIGHUP and SIGPIPE their default action back. The pipe stays open. */
void paging_signals_restore(void);

#endif
