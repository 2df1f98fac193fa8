/*
 * Naming the plugin library a crash came from. A plugin loaded in the host's process that
 * crashes (SIGSEGV, abort()...) ends the process: the crash handler installed here says first
 * which library it was in, and how to survive it, then passes the signal on (to the handler that
 * was there, such as the Swift runtime's backtracer, or to the default action). Part of the
 * host, not of the plugin ABI.
 */
#ifndef PAGING_PLUGIN_CRASH_H
#define PAGING_PLUGIN_CRASH_H

/* Marks this thread as running a call into the plugin library `library` (a path the caller
 * keeps for the life of the process) until paging_plugin_call_leave(returned value). */
const char *paging_plugin_call_enter(const char *library);
void paging_plugin_call_leave(const char *previous);

/* Records the code of the library `library` (kept for the life of the process), found from
 * `address`, an address within it: a crash on one of the library's own threads, outside any call
 * of the host, is named when the faulting instruction is in that code. At most 256 libraries. */
void paging_plugin_crash_register_library(const void *address, const char *library);

/* Installs the handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT: a line on fd 2 that
 * starts with `program` and ends with `advice` (each copied, up to 255 bytes). Once only;
 * later calls do nothing. */
void paging_plugin_crash_install(const char *program, const char *advice);

/* Whether a crash is being handled: a host about to exit waits for it to end the process
 * (a crash on a plugin's thread while the host ended its work let it exit 0). */
int paging_plugin_crash_in_progress(void);

#endif
