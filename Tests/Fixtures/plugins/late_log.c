/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -Wl,-z,nodelete -I Sources/CPaging/include Tests/Fixtures/plugins/late_log.c -o liblate_log.so */
/*
 * Misbehaving fixture: source "late-log" answers each fetch at once (one item, the key as a JSON
 * string, both END flags; refresh key "0"), and is otherwise well behaved, but a thread it
 * starts at create waits for destroy() to begin, then calls host->log every 5 ms, 40 times:
 * once destroy() has returned, those are calls outside the lifetime host.h gives the host
 * table, and nothing else. Interceptor "late-log-interceptor" lets every request proceed, and
 * its thread does the same.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "paging/paging.h"

/* Shared by the instance and its thread; the thread frees it. */
typedef struct shared {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int destroyed;
    const paging_host_t *host;
} shared;

typedef struct late { paging_source_t base; shared *shared; } late;

static void *ll_watch(void *arg)
{
    shared *s = (shared *)arg;
    pthread_mutex_lock(&s->lock);
    while (!s->destroyed) pthread_cond_wait(&s->changed, &s->lock);
    pthread_mutex_unlock(&s->lock);
    for (int i = 0; i < 40; i++) {
        struct timespec pause = { 0, 5000000 };
        s->host->log(s->host, PAGING_LOG_INFO, "late-log: after destroy");
        nanosleep(&pause, NULL);
    }
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->lock);
    free(s);
    return NULL;
}

/* The state the watching thread shares, with the thread started; NULL (the config failed) when not. */
static shared *ll_watch_destroy(const paging_host_t *host, const paging_config_t *config)
{
    shared *s = (shared *)calloc(1, sizeof *s);
    pthread_t thread;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->changed, NULL);
    s->host = host;
    if (pthread_create(&thread, NULL, ll_watch, s) != 0) { free(s); host->config_fail(config, PAGING_ERR_INTERNAL, "no thread"); return NULL; }
    pthread_detach(thread);
    return s;
}

/* Tells the thread destroy() began (it frees `s`). */
static void ll_destroyed(shared *s)
{
    pthread_mutex_lock(&s->lock);
    s->destroyed = 1;
    pthread_cond_signal(&s->changed);
    pthread_mutex_unlock(&s->lock);
}

static paging_status_t ll_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    late *l = (late *)self;
    paging_bytes_t key = { (const uint8_t *)"0", 1 };
    return l->shared->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static paging_status_t ll_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    (void)self; (void)key; (void)out;
    return PAGING_OK;
}

static paging_status_t ll_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    const paging_host_t *h = ((late *)self)->shared->host;
    paging_bytes_t item = { (const uint8_t *)"\"0\"", 3 };
    (void)request;
    h->fetch_add_item(h, id, item);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    return h->fetch_complete(h, id);
}

static void ll_cancel(paging_source_t *self, uint64_t id) { (void)self; (void)id; }

static void ll_destroy(paging_source_t *self)
{
    late *l = (late *)self;
    ll_destroyed(l->shared);
    free(l);
}

static paging_source_t *ll_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    late *l = (late *)calloc(1, sizeof *l);
    shared *s;
    (void)id;
    if (l == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    if ((s = ll_watch_destroy(host, config)) == NULL) { free(l); return NULL; }
    l->shared = s;
    l->base.struct_size = sizeof l->base;
    l->base.refresh_key = ll_refresh_key;
    l->base.key_chain = ll_key_chain;
    l->base.fetch = ll_fetch;
    l->base.cancel = ll_cancel;
    l->base.destroy = ll_destroy;
    return &l->base;
}

typedef struct late_interceptor { paging_interceptor_t base; shared *shared; } late_interceptor;

static uint32_t lli_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self; (void)request; (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

static void lli_destroy(paging_interceptor_t *self)
{
    late_interceptor *l = (late_interceptor *)self;
    ll_destroyed(l->shared);
    free(l);
}

static paging_interceptor_t *lli_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    late_interceptor *l = (late_interceptor *)calloc(1, sizeof *l);
    (void)id;
    if (l == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    if ((l->shared = ll_watch_destroy(host, config)) == NULL) { free(l); return NULL; }
    l->base.struct_size = sizeof l->base;
    l->base.intercept = lli_intercept;
    l->base.destroy = lli_destroy;
    return &l->base;
}

static const paging_plugin_descriptor_t ll_descriptors[] = {
    { PAGING_DESCRIPTOR_HEAD, "late-log", "Late log (fixture)", "1.0.0", "Logs after destroy.", PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "late-log-interceptor", "Late log (fixture)", "1.0.0", "Logs after destroy.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};

static uint32_t ll_count(void) { return 2; }
static const paging_plugin_descriptor_t *ll_describe(uint32_t index) { return index < 2 ? &ll_descriptors[index] : NULL; }

static const paging_plugin_entry_t ll_entry = { PAGING_ENTRY_HEAD, ll_count, ll_describe, ll_create, lli_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &ll_entry; }
