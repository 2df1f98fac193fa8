/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/crashy_source.c -o libcrashy_source.so -pthread */
/*
 * Fixture: a source that fails the way only process isolation survives. It serves `count`
 * items {"n":0}, {"n":1}... in pages; keys are decimal indexes. Counting its fetches in this
 * process (from 1), it:
 *   crash_every N: dereferences NULL (SIGSEGV) on every Nth fetch (0: never);
 *   abort_every N: calls abort() on every Nth fetch (0: never);
 *   raise_segv:    each fetch raise()s SIGSEGV (true/false);
 *   refresh_key_aborts: refresh_key() calls abort() (true/false);
 *   crash_on_thread: each fetch starts a thread of the plugin's own that dereferences NULL, and
 *                  never completes (true/false);
 *   exit_every N:  calls exit(3) on every Nth fetch (0: never);
 *   hang:          never completes a fetch, and never returns from it, having logged "crashy:
 *                  this fetch never returns" (warning) (true/false);
 *   hang_every N:  never returns from every Nth fetch (0: never);
 *   block_ms N:    sleeps N ms inside fetch() before it completes the fetch there (0: never);
 *   fork_sleeper:  in create, forks a process that sleeps forever (true/false);
 *   daemon_pid_file: in create, starts a daemon that sleeps forever (fork, setsid, fork: in a
 *                  session and process group of its own, its parent gone) and writes its pid
 *                  to this file (a path), which it holds locked (flock) while it lives;
 *   daemon_hops:   the daemon, rather than sleep, forks and exits every millisecond, its child
 *                  going on the same (true/false);
 *   log_on_create: logs "created" (info) in create, before it returns (true/false);
 *   frame_bomb:    in fetch, writes to fd 3 (an isolated child's socket to the host) the header
 *                  of a frame of 1 GiB - 1 byte, sends nothing more and never completes (true/false);
 *   frame_garbage: in fetch, writes to fd 3 what is not a frame of the protocol, and never
 *                  completes: 1, a whole frame of an operation it does not have (238); 2, a
 *                  frame length of 3 bytes; 3, well-formed replies to calls 1 to 63 holding a
 *                  page of one item, "NOT JSON", which the child's host would never take; 4,
 *                  the same with an item of 1 and one metadata entry whose value, 0xFF, is not
 *                  UTF-8 (0: none);
 *   garbage_on_create: in create, writes "JUNK\n" to fd 3 (true/false);
 *   orphan_per_fetch: in fetch, forks a process that forks one more and exits (the plugin
 *                  waits for it); the one more, orphaned, exits at once (true/false);
 *   wait_child_ms N: in fetch, forks a process that exits with status 7 at once, waits N ms,
 *                  then waits for it, and fails the fetch unless it is found, with status 7
 *                  (-1: not done);
 *   clear_subreaper: in create, first clears PR_SET_CHILD_SUBREAPER for its process (true/false);
 *   kill_parent: at the end of create, SIGKILLs its parent process, and never returns (true/false);
 *   destroy_mark:  in destroy, creates this file (a path);
 *   destroy_hangs: in destroy, never returns (true/false).
 * Config: count (default 1000), crash_every, abort_every, raise_segv, refresh_key_aborts, crash_on_thread, exit_every, hang, hang_every, block_ms, fork_sleeper,
 * daemon_pid_file, daemon_hops, log_on_create, frame_bomb, frame_garbage, garbage_on_create,
 * orphan_per_fetch, wait_child_ms, clear_subreaper, kill_parent, destroy_mark, destroy_hangs.
 */
#define _DEFAULT_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "paging/paging.h"

typedef struct cs_source {
    paging_source_t base;
    const paging_host_t *host;
    unsigned long count;
    long crash_every;
    long abort_every;
    int raise_segv;
    int refresh_key_aborts;
    int crash_on_thread;
    long exit_every;
    int hang;
    long hang_every;
    long block_ms;
    int frame_bomb;
    long frame_garbage;
    int orphan_per_fetch;
    long wait_child_ms;
    char destroy_mark[4096];
    int destroy_hangs;
    unsigned long fetches;
} cs_source;

static paging_bytes_t cs_number(char *buf, size_t cap, unsigned long value, const char *format)
{
    paging_bytes_t b;
    int n = snprintf(buf, cap, format, value);
    b.data = (const uint8_t *)buf;
    b.len = n > 0 ? (size_t)n : 0;
    return b;
}

static void cs_sleep_ms(long ms)
{
    struct timespec pause_for = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&pause_for, NULL);
}

static paging_status_t cs_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    cs_source *s = (cs_source *)self;
    paging_bytes_t key = { (const uint8_t *)"0", 1 };
    if (s->refresh_key_aborts) abort();
    return s->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static void *cs_crash(void *unused)
{
    volatile int *nowhere = NULL;
    (void)unused;
    *nowhere = 1;
    return NULL;
}

static paging_status_t cs_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    cs_source *s = (cs_source *)self;
    const paging_host_t *h = s->host;
    char buf[32];
    unsigned long key = 0, i, end, n;
    uint32_t flags = PAGING_PAGE_PREV_END;
    paging_bytes_t b;
    n = __atomic_add_fetch(&s->fetches, 1, __ATOMIC_SEQ_CST);
    if (s->crash_every > 0 && n % (unsigned long)s->crash_every == 0) {
        volatile int *nowhere = NULL;
        *nowhere = 1;
    }
    if (s->abort_every > 0 && n % (unsigned long)s->abort_every == 0) abort();
    if (s->raise_segv) raise(SIGSEGV);
    if (s->crash_on_thread) {
        pthread_t thread;
        if (pthread_create(&thread, NULL, cs_crash, NULL) == 0) pthread_detach(thread);
        return PAGING_OK;
    }
    if (s->exit_every > 0 && n % (unsigned long)s->exit_every == 0) exit(3);
    if (s->frame_bomb) {
        static const unsigned char header[4] = { 0xff, 0xff, 0xff, 0x3f };
        if (write(3, header, sizeof header) != (ssize_t)sizeof header) exit(4);
        return PAGING_OK;
    }
    if (s->frame_garbage == 3 || s->frame_garbage == 4) {
        /* op 100 (a reply), the call id, then a page: a refresh request of key "0", page size 10,
         * no keys or user info; one item; no keys; no flags; no metadata, or one entry ("m": 0xFF). */
        const char *item = s->frame_garbage == 3 ? "NOT JSON" : "1";
        unsigned char frame[64];
        uint64_t call;
        for (call = 1; call < 64; call++) {
            size_t n = 4, k;
            frame[n++] = 100;
            for (k = 0; k < 8; k++) frame[n++] = (unsigned char)(call >> (8 * k));
            frame[n++] = 0;                                              /* kind: refresh */
            frame[n++] = 1; frame[n++] = 0; frame[n++] = 0; frame[n++] = 0; frame[n++] = '0'; /* key */
            frame[n++] = 0; frame[n++] = 0;                              /* no prev, next */
            frame[n++] = 10; frame[n++] = 0; frame[n++] = 0; frame[n++] = 0; /* page size */
            frame[n++] = 0; frame[n++] = 0; frame[n++] = 0; frame[n++] = 0;  /* user info */
            frame[n++] = 1; frame[n++] = 0; frame[n++] = 0; frame[n++] = 0;  /* one item */
            frame[n++] = (unsigned char)strlen(item); frame[n++] = 0; frame[n++] = 0; frame[n++] = 0;
            for (k = 0; item[k] != '\0'; k++) frame[n++] = (unsigned char)item[k];
            frame[n++] = 0; frame[n++] = 0;                              /* no keys */
            frame[n++] = 0; frame[n++] = 0; frame[n++] = 0; frame[n++] = 0;  /* no flags */
            if (s->frame_garbage == 3) {
                frame[n++] = 0; frame[n++] = 0; frame[n++] = 0; frame[n++] = 0;  /* no metadata */
            } else {
                static const unsigned char entry[] = { 1, 0, 0, 0, 1, 0, 0, 0, 'm', 1, 0, 0, 0, 0xFF };
                memcpy(frame + n, entry, sizeof entry);
                n += sizeof entry;
            }
            frame[0] = (unsigned char)(n - 4); frame[1] = frame[2] = frame[3] = 0;
            if (write(3, frame, n) != (ssize_t)n) exit(4);
        }
        return PAGING_OK;
    }
    if (s->frame_garbage) {
        /* Length 9 (little-endian), then operation 238 and call id 0; or a length of 3. */
        static const unsigned char frame[13] = { 9, 0, 0, 0, 238, 0, 0, 0, 0, 0, 0, 0, 0 };
        static const unsigned char short_frame[7] = { 3, 0, 0, 0, 1, 2, 3 };
        const unsigned char *bytes = s->frame_garbage == 1 ? frame : short_frame;
        size_t length = s->frame_garbage == 1 ? sizeof frame : sizeof short_frame;
        if (write(3, bytes, length) != (ssize_t)length) exit(4);
        return PAGING_OK;
    }
    if (s->hang) h->log(h, PAGING_LOG_WARNING, "crashy: this fetch never returns");
    while (s->hang || (s->hang_every > 0 && n % (unsigned long)s->hang_every == 0)) pause();
    if (s->block_ms > 0) cs_sleep_ms(s->block_ms);
    if (s->orphan_per_fetch) {
        pid_t first = fork();
        if (first == 0) {
            if (fork() == 0) _exit(0);
            _exit(0);
        }
        if (first > 0) waitpid(first, NULL, 0);
    }
    if (s->wait_child_ms >= 0) {
        int status = 0;
        pid_t child = fork();
        if (child == 0) _exit(7);
        cs_sleep_ms(s->wait_child_ms);
        if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 7)
            return h->fetch_fail(h, id, PAGING_ERR_INTERNAL, "crashy: its child's exit status was lost");
    }
    for (i = 0; i < request->key.len; i++) key = key * 10 + (unsigned long)(request->key.data[i] - '0');
    end = key + request->page_size < s->count ? key + request->page_size : s->count;
    for (i = key; i < end; i++) {
        b = cs_number(buf, sizeof buf, i, "{\"n\":%lu}");
        h->fetch_add_item(h, id, b);
    }
    if (end >= s->count) flags |= PAGING_PAGE_NEXT_END;
    else { b = cs_number(buf, sizeof buf, end, "%lu"); h->fetch_set_next_key(h, id, &b); }
    h->fetch_set_flags(h, id, flags);
    return h->fetch_complete(h, id);
}

static void cs_destroy(paging_source_t *self)
{
    cs_source *s = (cs_source *)self;
    if (s->destroy_mark[0] != '\0') {
        int mark = open(s->destroy_mark, O_WRONLY | O_CREAT, 0600);
        if (mark >= 0) close(mark);
    }
    while (s->destroy_hangs) pause();
    free(self);
}

static paging_source_t *cs_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    cs_source *s = (cs_source *)calloc(1, sizeof *s);
    (void)plugin_id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    s->count = (unsigned long)host->config_int(config, "count", 1000);
    s->crash_every = (long)host->config_int(config, "crash_every", 0);
    s->abort_every = (long)host->config_int(config, "abort_every", 0);
    s->raise_segv = host->config_bool(config, "raise_segv", 0);
    s->refresh_key_aborts = host->config_bool(config, "refresh_key_aborts", 0);
    s->crash_on_thread = host->config_bool(config, "crash_on_thread", 0);
    s->exit_every = (long)host->config_int(config, "exit_every", 0);
    s->hang = host->config_bool(config, "hang", 0);
    s->hang_every = (long)host->config_int(config, "hang_every", 0);
    s->block_ms = (long)host->config_int(config, "block_ms", 0);
    s->frame_bomb = host->config_bool(config, "frame_bomb", 0);
    s->frame_garbage = (long)host->config_int(config, "frame_garbage", 0);
    s->orphan_per_fetch = host->config_bool(config, "orphan_per_fetch", 0);
    s->wait_child_ms = (long)host->config_int(config, "wait_child_ms", -1);
    if (host->config_bool(config, "clear_subreaper", 0)) (void)prctl(PR_SET_CHILD_SUBREAPER, 0);
    const char *destroy_mark = host->config_string(config, "destroy_mark");
    if (destroy_mark != NULL) snprintf(s->destroy_mark, sizeof s->destroy_mark, "%s", destroy_mark);
    s->destroy_hangs = host->config_bool(config, "destroy_hangs", 0);
    if (host->config_bool(config, "log_on_create", 0)) host->log(host, PAGING_LOG_INFO, "created");
    if (host->config_bool(config, "garbage_on_create", 0) && write(3, "JUNK\n", 5) != 5) exit(4);
    if (host->config_bool(config, "fork_sleeper", 0) && fork() == 0) {
        for (;;) pause();
    }
    const char *daemon_pid_file = host->config_string(config, "daemon_pid_file");
    int hops = host->config_bool(config, "daemon_hops", 0);
    if (daemon_pid_file != NULL) {
        pid_t first = fork();
        if (first == 0) {
            setsid();
            if (fork() != 0) _exit(0);
            /* Written whole and locked before it appears; the lock, which every hop shares,
             * is held while one lives. */
            char temporary[4096];
            snprintf(temporary, sizeof temporary, "%s.tmp", daemon_pid_file);
            int out = open(temporary, O_WRONLY | O_CREAT | O_TRUNC, 0600);
            if (out >= 0) {
                flock(out, LOCK_EX);
                dprintf(out, "%ld\n", (long)getpid());
                rename(temporary, daemon_pid_file);
            }
            while (hops) {
                cs_sleep_ms(1);
                if (fork() != 0) _exit(0);
            }
            for (;;) pause();
        }
        if (first > 0) waitpid(first, NULL, 0);
    }
    if (host->config_bool(config, "kill_parent", 0)) {
        /* Until it is gone, and for good: this process ends with it (an isolated child's
         * server dies with its reaper), before anything it would answer. */
        pid_t parent = getppid();
        kill(parent, SIGKILL);
        while (getppid() == parent) cs_sleep_ms(1);
        for (;;) pause();
    }
    s->base.plugin_data = s;
    s->base.refresh_key = cs_refresh_key;
    s->base.fetch = cs_fetch;
    s->base.destroy = cs_destroy;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

static const paging_plugin_descriptor_t cs_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "crashy-source", "Crashy source (fixture)", "1.0.0",
    "Numbered items; crashes, exits or hangs on request.", PAGING_PLUGIN_SOURCE, PAGING_PLUGIN_THREAD_SAFE, NULL
};
static uint32_t cs_count(void) { return 1; }
static const paging_plugin_descriptor_t *cs_descriptor_at(uint32_t i) { return i == 0 ? &cs_descriptor : NULL; }
static const paging_plugin_entry_t cs_entry = {
    PAGING_ENTRY_HEAD, cs_count, cs_descriptor_at, cs_create, NULL, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &cs_entry; }
