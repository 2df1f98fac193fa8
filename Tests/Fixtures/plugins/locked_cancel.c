/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -I Sources/CPaging/include Tests/Fixtures/plugins/locked_cancel.c -o liblocked_cancel.so */
/*
 * Fixture: source "locked-cancel", THREAD_SAFE, keeps its fetches behind one mutex, as plugins
 * commonly do (the http source does): cancel() takes the mutex, and each fetch completes at
 * once from a thread of its own WHILE HOLDING it (with a failure, PAGING_ERR_CANCELLED when
 * cancel() came first). A host that calls cancel() while holding a lock that resuming the
 * completed fetch needs (a task's status lock, in a cancellation handler) can deadlock when
 * a completion and a cancellation cross. Refresh key "0".
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "paging/paging.h"

typedef struct lc_source {
    paging_source_t base;
    const paging_host_t *host;
    pthread_mutex_t lock;
    pthread_cond_t threads_ended;
    unsigned live_threads;    /* completing threads not yet ended, under `lock` */
} lc_source;

typedef struct lc_job { lc_source *source; uint64_t id; } lc_job;

static void *lc_complete(void *arg)
{
    lc_job *job = (lc_job *)arg;
    lc_source *s = job->source;
    pthread_mutex_lock(&s->lock);
    s->host->fetch_fail(s->host, job->id, PAGING_ERR_TRANSIENT, "locked-cancel: no data");
    if (--s->live_threads == 0) pthread_cond_signal(&s->threads_ended);
    pthread_mutex_unlock(&s->lock);
    free(job);
    return NULL;
}

static paging_status_t lc_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    lc_source *s = (lc_source *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return s->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t lc_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    lc_source *s = (lc_source *)self;
    lc_job *job = (lc_job *)malloc(sizeof *job);
    pthread_t thread;
    (void)request;
    if (job == NULL) return PAGING_ERR_INTERNAL;
    job->source = s;
    job->id = id;
    pthread_mutex_lock(&s->lock);
    s->live_threads++;
    pthread_mutex_unlock(&s->lock);
    if (pthread_create(&thread, NULL, lc_complete, job) != 0) {
        pthread_mutex_lock(&s->lock);
        s->live_threads--;
        pthread_mutex_unlock(&s->lock);
        free(job);
        return PAGING_ERR_INTERNAL;
    }
    pthread_detach(thread);
    return PAGING_OK;
}

static void lc_cancel(paging_source_t *self, uint64_t id)
{
    lc_source *s = (lc_source *)self;
    (void)id;
    pthread_mutex_lock(&s->lock);
    pthread_mutex_unlock(&s->lock);
}

/* Waits until every completing thread has ended: none may touch the instance afterwards. */
static void lc_destroy(paging_source_t *self)
{
    lc_source *s = (lc_source *)self;
    pthread_mutex_lock(&s->lock);
    while (s->live_threads > 0) pthread_cond_wait(&s->threads_ended, &s->lock);
    pthread_mutex_unlock(&s->lock);
    pthread_cond_destroy(&s->threads_ended);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

static paging_source_t *lc_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    lc_source *s = (lc_source *)calloc(1, sizeof *s);
    (void)plugin_id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->threads_ended, NULL);
    s->base.plugin_data = s;
    s->base.refresh_key = lc_refresh_key;
    s->base.fetch = lc_fetch;
    s->base.cancel = lc_cancel;
    s->base.destroy = lc_destroy;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

static const paging_plugin_descriptor_t lc_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "locked-cancel", "Locked cancel (fixture)", "1.0.0",
    "Completes fetches while holding the lock its cancel() takes.", PAGING_PLUGIN_SOURCE, PAGING_PLUGIN_THREAD_SAFE, NULL
};
static uint32_t lc_count(void) { return 1; }
static const paging_plugin_descriptor_t *lc_descriptor_at(uint32_t i) { return i == 0 ? &lc_descriptor : NULL; }
static const paging_plugin_entry_t lc_entry = { PAGING_ENTRY_HEAD, lc_count, lc_descriptor_at, lc_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &lc_entry; }
