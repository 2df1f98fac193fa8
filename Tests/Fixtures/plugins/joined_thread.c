/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -I Sources/CPaging/include Tests/Fixtures/plugins/joined_thread.c -o libjoined_thread.so */
/*
 * Misbehaving fixture: plugins that use their call's handle from a thread of their own, which
 * the call joins before it returns. The handle is valid on the calling thread only, so the
 * host refuses each such use; what it would have set is missing, and the call must fail
 * rather than be answered without it.
 *   source "joined-keys":   refresh_key sets CURRENT "0" on the calling thread. key_chain sets
 *                           NEXT key+1 (pages 0 to 4) from a joined thread; fetch completes
 *                           with one item, the key as a JSON string ("\"0\""), at once.
 *   interceptor "joined-out": intercept adds one item ("1") through `out` from a joined
 *                           thread and returns PAGING_INTERCEPT_COMPLETE.
 *   interceptor "wrong-kind": intercept passes its `out` to keys_set, on its own thread (a
 *                           handle of another kind: refused, which fails the call), and proceeds.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct fx_src { paging_source_t base; const paging_host_t *host; } fx_src;
typedef struct fx_icp { paging_interceptor_t base; const paging_host_t *host; } fx_icp;

/* One use of a call's handle, made on another thread. */
typedef struct handle_use {
    const paging_host_t *host;
    void *out;
    char key[24];
    paging_status_t status;
} handle_use;

static void *set_next_key(void *arg)
{
    handle_use *use = (handle_use *)arg;
    paging_bytes_t key;
    key.data = (const uint8_t *)use->key;
    key.len = strlen(use->key);
    use->status = use->host->keys_set((paging_keys_out_t *)use->out, PAGING_KEY_NEXT, &key);
    return NULL;
}

static void *add_item(void *arg)
{
    handle_use *use = (handle_use *)arg;
    paging_bytes_t item;
    item.data = (const uint8_t *)"1";
    item.len = 1;
    use->status = use->host->out_add_item((paging_intercept_out_t *)use->out, item);
    return NULL;
}

/* Runs `body` on a new thread and waits for it. */
static paging_status_t on_joined_thread(void *(*body)(void *), handle_use *use)
{
    pthread_t thread;
    if (pthread_create(&thread, NULL, body, use) != 0) return PAGING_ERR_INTERNAL;
    pthread_join(thread, NULL);
    return PAGING_OK;
}

static paging_status_t src_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fx_src *f = (fx_src *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t src_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    fx_src *f = (fx_src *)self;
    handle_use use;
    char text[24];
    long number;
    if (key.len == 0 || key.len >= sizeof text) return PAGING_ERR_INVALID_ARGUMENT;
    memcpy(text, key.data, key.len);
    text[key.len] = '\0';
    number = strtol(text, NULL, 10);
    if (number >= 4) return PAGING_OK;
    memset(&use, 0, sizeof use);
    use.host = f->host;
    use.out = out;
    snprintf(use.key, sizeof use.key, "%ld", number + 1);
    return on_joined_thread(set_next_key, &use); /* deliberate: the handle on another thread */
}

static paging_status_t src_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fx_src *f = (fx_src *)self;
    const paging_host_t *h = f->host;
    char item[40];
    paging_bytes_t bytes;
    int n = snprintf(item, sizeof item, "\"%.*s\"", (int)(request->key.len < 16 ? request->key.len : 16), (const char *)request->key.data);
    bytes.data = (const uint8_t *)item;
    bytes.len = (size_t)n;
    h->fetch_add_item(h, id, bytes);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void src_destroy(paging_source_t *self) { free(self); }

static uint32_t icp_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    fx_icp *f = (fx_icp *)self;
    handle_use use;
    (void)request;
    memset(&use, 0, sizeof use);
    use.host = f->host;
    use.out = out;
    if (on_joined_thread(add_item, &use) != PAGING_OK) return PAGING_INTERCEPT_FAIL; /* deliberate */
    return PAGING_INTERCEPT_COMPLETE;
}

static uint32_t wrong_kind_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    fx_icp *f = (fx_icp *)self;
    paging_bytes_t key;
    (void)request;
    key.data = (const uint8_t *)"9";
    key.len = 1;
    f->host->keys_set((paging_keys_out_t *)(void *)out, PAGING_KEY_NEXT, &key); /* deliberate: the wrong kind */
    return PAGING_INTERCEPT_PROCEED;
}

static void icp_destroy(paging_interceptor_t *self) { free(self); }

static paging_source_t *create_source(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fx_src *f;
    (void)plugin_id;
    f = (fx_src *)calloc(1, sizeof *f);
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->base.plugin_data = f;
    f->base.refresh_key = src_refresh_key;
    f->base.key_chain = src_key_chain;
    f->base.fetch = src_fetch;
    f->base.destroy = src_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static paging_interceptor_t *create_interceptor(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fx_icp *f;
    (void)plugin_id;
    f = (fx_icp *)calloc(1, sizeof *f);
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->base.plugin_data = f;
    f->base.intercept = strcmp(plugin_id, "wrong-kind") == 0 ? wrong_kind_intercept : icp_intercept;
    f->base.destroy = icp_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t descriptors[3] = {
    { PAGING_DESCRIPTOR_HEAD, "joined-keys", "Key chain from a joined thread (fixture)", "1.0.0",
      "Sets its key chain's next key from a thread it joins.", PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "joined-out", "Intercept answer from a joined thread (fixture)", "1.0.0",
      "Adds its answer's item from a thread it joins.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "wrong-kind", "A handle of the wrong kind (fixture)", "1.0.0",
      "Passes its intercept out to keys_set.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL }
};
static uint32_t fx_count(void) { return 3; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 3 ? &descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = {
    PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, create_source, create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
