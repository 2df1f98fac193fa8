/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/never_complete.c -o libnever_complete.so */
/*
 * Misbehaving fixture: source "never-complete" accepts every fetch (returns PAGING_OK) and never
 * completes or fails it. It has no cancel function (cancel == NULL), so the host's timeout or
 * cancellation must stop waiting on its own. Refresh key "0". Counts fetches and logs at destroy:
 *   "never-complete: destroyed after <n> fetches"
 * A fetch of the key "complete" completes every fetch held so far (the host ended them: late
 * completions), logs what each call returned,
 *   "never-complete: completed <n> late: TIMEOUT=<a> CANCELLED=<b> INVALID_ARGUMENT=<c> other=<d>",
 * and completes itself with an empty last page.
 * Built with -DFIXTURE_CANCEL_LOGS it has a cancel function, which logs "never-complete: cancel <id>",
 * and logs "never-complete: fetch <id>" as each fetch is accepted.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct fixture {
    paging_source_t base;
    const paging_host_t *host;
    unsigned long fetches;
    uint64_t *held;
    size_t held_count, held_capacity;
} fixture;

/* Completes every fetch held, counting what the host answered, and logs the counts. */
static void fx_complete_held(fixture *f)
{
    unsigned long timeout = 0, cancelled = 0, invalid = 0, other = 0;
    char msg[160];
    size_t i;
    for (i = 0; i < f->held_count; i++) {
        paging_status_t rc = f->host->fetch_complete(f->host, f->held[i]);
        if (rc == PAGING_ERR_TIMEOUT) timeout++;
        else if (rc == PAGING_ERR_CANCELLED) cancelled++;
        else if (rc == PAGING_ERR_INVALID_ARGUMENT) invalid++;
        else other++;
    }
    snprintf(msg, sizeof msg, "never-complete: completed %lu late: TIMEOUT=%lu CANCELLED=%lu INVALID_ARGUMENT=%lu other=%lu",
             (unsigned long)f->held_count, timeout, cancelled, invalid, other);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
    f->held_count = 0;
}

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fixture *f = (fixture *)self;
    f->fetches++; /* serialized: no lock needed */
    if (request->key.len == 8 && memcmp(request->key.data, "complete", 8) == 0) {
        fx_complete_held(f);
        f->host->fetch_set_flags(f->host, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
        return f->host->fetch_complete(f->host, id);
    }
    if (f->held_count == f->held_capacity) {
        size_t capacity = f->held_capacity ? 2 * f->held_capacity : 64;
        uint64_t *grown = (uint64_t *)realloc(f->held, capacity * sizeof *grown);
        if (grown == NULL) return PAGING_OK;
        f->held = grown;
        f->held_capacity = capacity;
    }
    f->held[f->held_count++] = id;
#ifdef FIXTURE_CANCEL_LOGS
    {
        char msg[64];
        snprintf(msg, sizeof msg, "never-complete: fetch %llu", (unsigned long long)id);
        f->host->log(f->host, PAGING_LOG_INFO, msg);
    }
#endif
    return PAGING_OK; /* accepted ... and forgotten (deliberate misuse) */
}

#ifdef FIXTURE_CANCEL_LOGS
static void fx_cancel(paging_source_t *self, uint64_t id)
{
    fixture *f = (fixture *)self;
    char msg[64];
    snprintf(msg, sizeof msg, "never-complete: cancel %llu", (unsigned long long)id);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
}
#endif

static void fx_destroy(paging_source_t *self)
{
    fixture *f = (fixture *)self;
    char msg[96];
    snprintf(msg, sizeof msg, "never-complete: destroyed after %lu fetches", f->fetches);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
    free(f->held);
    free(f);
}

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->base.plugin_data = f;
    f->base.refresh_key = fx_refresh_key;
    f->base.key_chain = NULL;
    f->base.fetch = fx_fetch;
#ifdef FIXTURE_CANCEL_LOGS
    f->base.cancel = fx_cancel;
#else
    f->base.cancel = NULL;
#endif
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "never-complete", "Never complete (fixture)", "1.0.0",
    "Accepts every fetch and never completes it.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
