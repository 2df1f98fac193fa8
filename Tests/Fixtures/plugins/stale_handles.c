/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -I Sources/CPaging/include Tests/Fixtures/plugins/stale_handles.c -o libstale_handles.so */
/*
 * Fixture: a plugin that keeps the handles of one call and uses them in another, or from
 * another thread. The host must refuse every such use, log it, and never apply it.
 *
 * Interceptor "stale-out": keeps the `config` of create and the `out` of its first intercept().
 *   From the second intercept() on, before its own work, it uses the kept `out`
 *   (out_set_key "HIJACKED", out_add_item "666", out_set_flags) and reads the kept config
 *   (config_string "tag"), logging "kept config read: NULL" when refused. During an intercept()
 *   of key "7", a thread of its own calls out_set_param("thread", "yes") on the live `out` and is
 *   joined (refused: that intercept then fails). Then it proceeds unchanged. With config
 *   "thread_in_create": true, its create reads "tag" from a thread it joins (refused: the
 *   create then fails).
 * Source "stale-keys": keeps the keys `out` of refresh_key() and uses it in every fetch()
 *   (keys_set PAGING_KEY_CURRENT "HIJACKED"); pages hold 3 JSON integers from the key and
 *   end there. With config "key_chain": true, it has a key_chain() that sets the next key
 *   (the key + 3) through the kept `out` (refused: the key chain then fails).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct stale_out {
    paging_interceptor_t base;
    const paging_host_t *host;
    const paging_config_t *kept_config;
    paging_intercept_out_t *kept_out;
} stale_out;

typedef struct thread_call {
    const paging_host_t *host;
    paging_intercept_out_t *out;
    const paging_config_t *config;
    paging_status_t status;
} thread_call;

static void *set_param_from_thread(void *arg)
{
    thread_call *call = (thread_call *)arg;
    paging_bytes_t name, value;
    name.data = (const uint8_t *)"thread"; name.len = 6;
    value.data = (const uint8_t *)"yes"; value.len = 3;
    call->status = call->host->out_set_param(call->out, name, value);
    return NULL;
}

static uint32_t so_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    stale_out *s = (stale_out *)self;
    const paging_host_t *h = s->host;
    thread_call call;
    pthread_t thread;
    if (s->kept_out == NULL) {
        s->kept_out = out;
    } else {
        paging_bytes_t key, item;
        key.data = (const uint8_t *)"HIJACKED"; key.len = 8;
        item.data = (const uint8_t *)"666"; item.len = 3;
        h->out_set_key(s->kept_out, key);
        h->out_add_item(s->kept_out, item);
        h->out_set_flags(s->kept_out, PAGING_PAGE_NEXT_END);
        if (h->config_string(s->kept_config, "tag") == NULL) h->log(h, PAGING_LOG_INFO, "kept config read: NULL");
    }
    if (request->key.len == 1 && request->key.data[0] == '7') {
        call.host = h; call.out = out; call.config = NULL; call.status = PAGING_OK;
        if (pthread_create(&thread, NULL, set_param_from_thread, &call) == 0) pthread_join(thread, NULL);
        if (call.status == PAGING_ERR_INVALID_ARGUMENT) h->log(h, PAGING_LOG_INFO, "thread use refused");
    }
    return PAGING_INTERCEPT_PROCEED;
}

static void *read_config_from_thread(void *arg)
{
    thread_call *call = (thread_call *)arg;
    call->status = call->host->config_string(call->config, "tag") == NULL ? PAGING_ERR_INVALID_ARGUMENT : PAGING_OK;
    return NULL;
}
static void so_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *so_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    stale_out *s = (stale_out *)calloc(1, sizeof *s);
    (void)id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    s->kept_config = config;
    if (host->config_bool(config, "thread_in_create", 0)) {
        thread_call call;
        pthread_t thread;
        call.host = host; call.out = NULL; call.config = config; call.status = PAGING_OK;
        if (pthread_create(&thread, NULL, read_config_from_thread, &call) == 0) pthread_join(thread, NULL);
    }
    s->base.intercept = so_intercept;
    s->base.destroy = so_destroy;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

typedef struct stale_keys { paging_source_t base; const paging_host_t *host; paging_keys_out_t *kept; } stale_keys;

static paging_status_t sk_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    stale_keys *s = (stale_keys *)self;
    paging_bytes_t key;
    key.data = (const uint8_t *)"0"; key.len = 1;
    s->kept = out;
    return s->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static paging_status_t sk_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    stale_keys *s = (stale_keys *)self;
    const paging_host_t *h = s->host;
    paging_bytes_t hijack;
    int i;
    hijack.data = (const uint8_t *)"HIJACKED"; hijack.len = 8;
    if (h->keys_set(s->kept, PAGING_KEY_CURRENT, &hijack) == PAGING_ERR_INVALID_ARGUMENT) h->log(h, PAGING_LOG_INFO, "kept keys refused");
    for (i = 0; i < 3; i++) {
        char text[32];
        paging_bytes_t item;
        item.len = (size_t)snprintf(text, sizeof text, "%d", (request->key.len > 0 ? request->key.data[0] - '0' : 0) + i);
        item.data = (const uint8_t *)text;
        h->fetch_add_item(h, id, item);
    }
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    return h->fetch_complete(h, id);
}

static paging_status_t sk_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    stale_keys *s = (stale_keys *)self;
    char text[32];
    paging_bytes_t next;
    (void)out;
    next.len = (size_t)snprintf(text, sizeof text, "%d", (key.len > 0 ? key.data[0] - '0' : 0) + 3);
    next.data = (const uint8_t *)text;
    (void)s->host->keys_set(s->kept, PAGING_KEY_NEXT, &next); /* refused; the call says OK all the same */
    return PAGING_OK;
}
static void sk_destroy(paging_source_t *self) { free(self); }

static paging_source_t *sk_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    stale_keys *s = (stale_keys *)calloc(1, sizeof *s);
    (void)id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    if (host->config_bool(config, "key_chain", 0)) s->base.key_chain = sk_key_chain;
    s->base.refresh_key = sk_refresh_key;
    s->base.fetch = sk_fetch;
    s->base.destroy = sk_destroy;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

static const paging_plugin_descriptor_t descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "stale-out", "Stale out (fixture)", "1.0.0", "Keeps out and config.",
      PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "stale-keys", "Stale keys (fixture)", "1.0.0", "Keeps the keys out.",
      PAGING_PLUGIN_SOURCE, 0, NULL },
};
static uint32_t count(void) { return 2; }
static const paging_plugin_descriptor_t *describe(uint32_t i) { return i < 2 ? &descriptors[i] : NULL; }
static const paging_plugin_entry_t entry = { PAGING_ENTRY_HEAD, count, describe, sk_create, so_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
