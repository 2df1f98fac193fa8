/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -I Sources/CPaging/include Tests/Fixtures/plugins/double_complete.c -o libdouble_complete.so */
/*
 * Misbehaving fixture: source "double-complete" completes every fetch twice. The host must accept
 * the first fetch_complete and reject the second with PAGING_ERR_INVALID_ARGUMENT (and log it),
 * without crashing or delivering a second page. The plugin logs what the second call returned:
 *   "double-complete: second fetch_complete returned <code>"   (expected code 8)
 * Each page holds one item, the JSON string "\"once\"", with both END flags; refresh key "0".
 * With the config integer "then_return" (a PAGING_ERR_* code), fetch() ends the fetch once
 * instead (completes it, or with "fail_first" true fails it with "fail_code", default
 * NOT_FOUND, and "nope") and then returns
 * that code: a contradiction the host must settle. With "bad_refresh_slot" true, refresh_key
 * sets slot 99 (which the host refuses) and returns PAGING_OK. With "from_worker" true, each
 * fetch is completed twice "worker_delay_ms" (default 20) later from a thread of its own, which
 * destroy() joins (so the second completion may come while destroy() runs, never after it), and
 * fetch() returns "then_return" (with it, the worker completes once: after fetch() failed the
 * fetch); with "noop_cancel" true too, it has a cancel() that does nothing (the fetches are
 * completed all the same).
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "paging/paging.h"

typedef struct fixture {
    paging_source_t base;
    const paging_host_t *host;
    paging_status_t then_return;
    int fail_first;
    int bad_refresh_slot;
    paging_status_t fail_code;
    int from_worker;
    long worker_delay_ms;
    pthread_mutex_t lock;
    pthread_t workers[256];
    int worker_count;
} fixture;

typedef struct job { fixture *f; uint64_t id; } job;

/* One item, both ends, completed; then completed again (deliberate misuse), logged. */
static void complete_twice(fixture *f, uint64_t id)
{
    const paging_host_t *h = f->host;
    paging_bytes_t item;
    paging_status_t second;
    char msg[96];
    item.data = (const uint8_t *)"\"once\"";
    item.len = 6;
    h->fetch_add_item(h, id, item);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    h->fetch_complete(h, id);
    if (f->then_return != PAGING_OK) return;
    second = h->fetch_complete(h, id);
    snprintf(msg, sizeof msg, "double-complete: second fetch_complete returned %u", (unsigned)second);
    h->log(h, PAGING_LOG_INFO, msg);
}

static void *fx_worker(void *arg)
{
    job *j = (job *)arg;
    struct timespec pause;
    pause.tv_sec = j->f->worker_delay_ms / 1000;
    pause.tv_nsec = j->f->worker_delay_ms % 1000 * 1000000L;
    nanosleep(&pause, NULL);
    complete_twice(j->f, j->id);
    free(j);
    return NULL;
}

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    if (f->bad_refresh_slot) {
        f->host->keys_set(out, 99, &k);
        return PAGING_OK;
    }
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fixture *f = (fixture *)self;
    const paging_host_t *h = f->host;
    (void)request;
    if (f->fail_first) {
        h->fetch_fail(h, id, f->fail_code, "nope");
        return f->then_return;
    }
    if (f->from_worker) {
        job *j = (job *)malloc(sizeof *j);
        int started = 0;
        if (j != NULL) {
            j->f = f;
            j->id = id;
            pthread_mutex_lock(&f->lock);
            started = f->worker_count < 256 && pthread_create(&f->workers[f->worker_count], NULL, fx_worker, j) == 0;
            if (started) f->worker_count++;
            pthread_mutex_unlock(&f->lock);
        }
        if (!started) {
            free(j);
            h->fetch_fail(h, id, PAGING_ERR_INTERNAL, "no worker");
            return PAGING_OK;
        }
        return f->then_return;
    }
    complete_twice(f, id);
    return f->then_return;
}

static void fx_noop_cancel(paging_source_t *self, uint64_t id)
{
    (void)self;
    (void)id;
}

static void fx_destroy(paging_source_t *self)
{
    fixture *f = (fixture *)self;
    int i;
    for (i = 0; i < f->worker_count; i++) pthread_join(f->workers[i], NULL);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->then_return = (paging_status_t)host->config_int(config, "then_return", PAGING_OK);
    f->fail_first = host->config_bool(config, "fail_first", 0) != 0;
    f->bad_refresh_slot = host->config_bool(config, "bad_refresh_slot", 0) != 0;
    f->fail_code = (paging_status_t)host->config_int(config, "fail_code", PAGING_ERR_NOT_FOUND);
    f->from_worker = host->config_bool(config, "from_worker", 0) != 0;
    f->worker_delay_ms = (long)host->config_int(config, "worker_delay_ms", 20);
    if (f->worker_delay_ms < 0) f->worker_delay_ms = 0;
    pthread_mutex_init(&f->lock, NULL);
    f->base.plugin_data = f;
    f->base.refresh_key = fx_refresh_key;
    f->base.key_chain = NULL;
    f->base.fetch = fx_fetch;
    f->base.cancel = host->config_bool(config, "noop_cancel", 0) ? fx_noop_cancel : NULL;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "double-complete", "Double complete (fixture)", "1.0.0",
    "Completes every fetch twice.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
