/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -Wl,-z,nodelete -I Sources/CPaging/include Tests/Fixtures/plugins/foreign_thread.c -o libforeign_thread.so */
/*
 * Misbehaving fixture: source "foreign-thread" completes each fetch from a new detached pthread
 * after sleeping 10 ms: it adds one item (the request's key as a JSON string, e.g. "\"0\""), sets
 * both END flags, completes, and logs "foreign-thread: late fetch_complete returned <code>".
 * Refresh key "0".
 *
 * DELIBERATE MISUSE: besides, each instance that fetched has a watcher thread that waits for
 * destroy() and, once destroy() has returned, completes the instance's last fetch again (one
 * item, both END flags), then logs "foreign-thread: late fetch_complete returned <code>": calls made outside
 * the lifetime host.h promises for the host table, whatever the timing. This tests the host's
 * promise that completions for a destroyed source's ids are refused (and logged), so the host
 * must keep each paging_host_t (and what host_data points to) readable after destroy(): e.g.
 * never free host tables, or keep them until the process ends. A fetch thread may also
 * complete after destroy() when destroy() comes within its 10 ms. The watcher wakes inside
 * destroy(), and may call before destroy() has returned; with the config string
 * "late_after_file" it waits, after destroy(), until that file exists (up to 10 s), so that a
 * test that creates it once destroy() has returned knows its calls come afterwards.
 * No thread touches the (freed) instance: a fetch thread copies the host pointer, the fetch id
 * and the key into its own allocation before fetch() returns; the watcher shares a separate,
 * reference-counted record with the instance.
 * Build with -Wl,-z,nodelete (line 1) so a dlclose cannot unmap the code a sleeping thread will
 * return to; a host loading with RTLD_NODELETE gets the same effect.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paging/paging.h"

/* What the instance shares with its watcher thread; freed by whichever lets go last. */
typedef struct shared {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int destroyed, refs, watching;
    uint64_t last_fetch_id;
    const paging_host_t *host;
    char *late_after_file; /* NULL, or the file the watcher waits for after destroy() */
} shared;

typedef struct fixture { paging_source_t base; const paging_host_t *host; shared *watch; } fixture;

typedef struct job {
    const paging_host_t *host; /* outlives the instance only by the host's promise (see above) */
    uint64_t fetch_id;
    size_t key_len;
    uint8_t item[1];           /* "\"<key>\"" - over-allocated */
} job;

static void *fx_thread(void *arg)
{
    job *j = (job *)arg;
    const paging_host_t *h = j->host;
    struct timespec ts;
    paging_bytes_t item;
    paging_status_t rc;
    char msg[96];
    ts.tv_sec = 0;
    ts.tv_nsec = 10 * 1000 * 1000;
    nanosleep(&ts, NULL);
    item.data = j->item;
    item.len = j->key_len + 2;
    h->fetch_add_item(h, j->fetch_id, item);
    h->fetch_set_flags(h, j->fetch_id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    rc = h->fetch_complete(h, j->fetch_id);
    snprintf(msg, sizeof msg, "foreign-thread: late fetch_complete returned %u", (unsigned)rc);
    h->log(h, PAGING_LOG_INFO, msg);
    free(j);
    return NULL;
}

static void fx_release(shared *w)
{
    int last;
    pthread_mutex_lock(&w->lock);
    last = --w->refs == 0;
    pthread_mutex_unlock(&w->lock);
    if (last) {
        free(w->late_after_file);
        pthread_mutex_destroy(&w->lock);
        pthread_cond_destroy(&w->changed);
        free(w);
    }
}

static void *fx_watcher(void *arg)
{
    shared *w = (shared *)arg;
    const paging_host_t *h = w->host;
    paging_bytes_t item;
    paging_status_t rc;
    uint64_t id;
    char msg[96];
    pthread_mutex_lock(&w->lock);
    while (!w->destroyed) pthread_cond_wait(&w->changed, &w->lock);
    id = w->last_fetch_id;
    pthread_mutex_unlock(&w->lock);
    if (w->late_after_file != NULL) {
        struct timespec ms = { 0, 1000 * 1000 };
        int waited;
        for (waited = 0; waited < 10000 && access(w->late_after_file, F_OK) != 0; waited++) nanosleep(&ms, NULL);
    }
    item.data = (const uint8_t *)"\"late\"";
    item.len = 6;
    h->fetch_add_item(h, id, item);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    rc = h->fetch_complete(h, id);
    snprintf(msg, sizeof msg, "foreign-thread: late fetch_complete returned %u", (unsigned)rc);
    h->log(h, PAGING_LOG_INFO, msg);
    fx_release(w);
    return NULL;
}

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static void fx_start_watcher(shared *w);

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fixture *f = (fixture *)self;
    size_t klen = request->key.len;
    job *j = (job *)malloc(sizeof *j + klen + 2);
    pthread_t t;
    pthread_attr_t attr;
    int rc;
    if (j == NULL) return PAGING_ERR_INTERNAL;
    pthread_mutex_lock(&f->watch->lock);
    f->watch->last_fetch_id = id;
    if (!f->watch->watching) fx_start_watcher(f->watch);
    pthread_mutex_unlock(&f->watch->lock);
    j->host = f->host;
    j->fetch_id = id;
    j->key_len = klen;
    j->item[0] = '"';
    if (klen) memcpy(j->item + 1, request->key.data, klen); /* request is borrowed: copy */
    j->item[klen + 1] = '"';
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &attr, fx_thread, j);
    pthread_attr_destroy(&attr);
    if (rc != 0) { free(j); return PAGING_ERR_INTERNAL; }
    return PAGING_OK;
}

/* Started with the first fetch (an instance only created and destroyed starts no thread);
 * called under w->lock. Without a thread (pthread_create failed) there is simply no watcher. */
static void fx_start_watcher(shared *w)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, fx_watcher, w) == 0) {
        w->watching = 1;
        w->refs++;
    }
    pthread_attr_destroy(&attr);
}

/* Threads keep running: the watcher wakes now, after this returns. */
static void fx_destroy(paging_source_t *self)
{
    fixture *f = (fixture *)self;
    shared *w = f->watch;
    pthread_mutex_lock(&w->lock);
    w->destroyed = 1;
    pthread_cond_signal(&w->changed);
    pthread_mutex_unlock(&w->lock);
    fx_release(w);
    free(f);
}

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->watch = (shared *)calloc(1, sizeof *f->watch);
    if (f->watch == NULL) {
        free(f);
        host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory");
        return NULL;
    }
    pthread_mutex_init(&f->watch->lock, NULL);
    pthread_cond_init(&f->watch->changed, NULL);
    f->watch->refs = 1;
    f->watch->host = host;
    if (host->config_string(config, "late_after_file") != NULL) f->watch->late_after_file = strdup(host->config_string(config, "late_after_file"));
    f->base.plugin_data = f;
    f->base.refresh_key = fx_refresh_key;
    f->base.key_chain = NULL;
    f->base.fetch = fx_fetch;
    f->base.cancel = NULL;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "foreign-thread", "Foreign thread (fixture)", "1.0.0",
    "Completes each fetch from a new thread after 10 ms, and its last fetch again after destroy.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
