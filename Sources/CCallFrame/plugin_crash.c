#define _GNU_SOURCE
#include "plugin_crash.h"

#include <link.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

/* ---- what the thread runs ------------------------------------------------------------------- */

static _Thread_local const char *running;

const char *paging_plugin_call_enter(const char *library)
{
    const char *previous = running;
    running = library;
    return previous;
}

void paging_plugin_call_leave(const char *previous) { running = previous; }

/* ---- where the libraries' code is ----------------------------------------------------------- */

enum { MAX_LIBRARIES = 256 };
static struct { uintptr_t start, end; const char *name; } libraries[MAX_LIBRARIES];
static unsigned library_count; /* entries below it are complete (release / acquire) */
static pthread_mutex_t registering = PTHREAD_MUTEX_INITIALIZER;

struct extent { uintptr_t address, start, end; };

/* The extent of the PT_LOAD segments of the object holding `address`, if this is it. */
static int find_extent(struct dl_phdr_info *info, size_t size, void *data)
{
    struct extent *found = data;
    uintptr_t start = UINTPTR_MAX, end = 0;
    int holds = 0;
    (void)size;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *segment = &info->dlpi_phdr[i];
        if (segment->p_type != PT_LOAD) continue;
        uintptr_t low = info->dlpi_addr + segment->p_vaddr, high = low + segment->p_memsz;
        if (low < start) start = low;
        if (high > end) end = high;
        if (found->address >= low && found->address < high) holds = 1;
    }
    if (!holds) return 0;
    found->start = start;
    found->end = end;
    return 1;
}

void paging_plugin_crash_register_library(const void *address, const char *library)
{
    struct extent found = { (uintptr_t)address, 0, 0 };
    if (address == NULL || library == NULL || dl_iterate_phdr(find_extent, &found) == 0) return;
    pthread_mutex_lock(&registering);
    unsigned count = __atomic_load_n(&library_count, __ATOMIC_RELAXED);
    int known = 0;
    for (unsigned i = 0; i < count; i++) known |= libraries[i].start == found.start;
    if (!known && count < MAX_LIBRARIES) {
        libraries[count].start = found.start;
        libraries[count].end = found.end;
        libraries[count].name = library;
        __atomic_store_n(&library_count, count + 1, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&registering);
}

/* ---- the handler (async-signal-safe: write, sigaction, raise) ------------------------------- */

static const int signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT };
static const char *const signal_names[] = { "SIGSEGV", "SIGBUS", "SIGILL", "SIGFPE", "SIGABRT" };
static struct sigaction before[sizeof signals / sizeof signals[0]];
static char program_name[256], advice_text[256];
static int installed, crashing;

static uintptr_t faulting_instruction(void *context)
{
#if defined(__x86_64__)
    return context != NULL ? (uintptr_t)((ucontext_t *)context)->uc_mcontext.gregs[REG_RIP] : 0;
#elif defined(__aarch64__)
    return context != NULL ? (uintptr_t)((ucontext_t *)context)->uc_mcontext.pc : 0;
#else
    (void)context;
    return 0;
#endif
}

static const char *library_at(uintptr_t address)
{
    unsigned count = __atomic_load_n(&library_count, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; i < count; i++)
        if (address >= libraries[i].start && address < libraries[i].end) return libraries[i].name;
    return NULL;
}

static size_t append(char *line, size_t at, size_t size, const char *text)
{
    size_t length = strlen(text);
    if (length > size - 1 - at) length = size - 1 - at;
    memcpy(line + at, text, length);
    return at + length;
}

static void on_crash(int signal, siginfo_t *info, void *context)
{
    size_t index = 0;
    while (signals[index] != signal) index++;
    __atomic_store_n(&crashing, 1, __ATOMIC_SEQ_CST);
    const char *library = running, *where = " in a call into the plugin library ";
    if (library == NULL) {
        library = library_at(faulting_instruction(context));
        where = " in the plugin library ";
    }
    if (library != NULL) {
        char line[1536];
        size_t at = 0;
        at = append(line, at, sizeof line, program_name);
        at = append(line, at, sizeof line, ": ");
        at = append(line, at, sizeof line, signal_names[index]);
        at = append(line, at, sizeof line, where);
        at = append(line, at, sizeof line, library);
        if (running == NULL) at = append(line, at, sizeof line, " (on a thread of its own)");
        at = append(line, at, sizeof line, ": ");
        at = append(line, at, sizeof line, advice_text);
        line[at++] = '\n';
        ssize_t written = write(STDERR_FILENO, line, at);
        (void)written;
    }
    /* A fault goes on to what was there (the Swift runtime's backtracer, or the default
     * action), delivered as the kernel delivers it: it happens again once this returns. (Called
     * from here as a function, the backtracer's helper process was left waiting for good, and
     * the crashed process's standard error open with it.) A signal that was sent (abort(),
     * raise(), kill) ends the process at its default action, as said: the backtracer returns
     * from one, and the process went on. */
    if (info == NULL || info->si_code <= 0) {
        struct sigaction fallback;
        memset(&fallback, 0, sizeof fallback);
        fallback.sa_handler = SIG_DFL;
        sigaction(signal, &fallback, NULL);
        raise(signal);
        return;
    }
    sigaction(signal, &before[index], NULL);
}

int paging_plugin_crash_in_progress(void) { return __atomic_load_n(&crashing, __ATOMIC_SEQ_CST); }

void paging_plugin_crash_install(const char *program, const char *advice)
{
    if (__atomic_exchange_n(&installed, 1, __ATOMIC_ACQ_REL)) return;
    size_t length = strlen(program);
    memcpy(program_name, program, length < sizeof program_name - 1 ? length : sizeof program_name - 1);
    length = strlen(advice);
    memcpy(advice_text, advice, length < sizeof advice_text - 1 ? length : sizeof advice_text - 1);
    for (size_t i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        struct sigaction action;
        memset(&action, 0, sizeof action);
        action.sa_sigaction = on_crash;
        action.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&action.sa_mask);
        sigaction(signals[i], &action, &before[i]);
    }
}
