/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/global_host.c -o libglobal_host.so */
/*
 * Misbehaving fixture: source "global-host" keeps the paging_host_t of its last create_source
 * in a global, and completes every fetch (inside fetch(), with one item {"n":<key>}) through
 * it: with more than one instance, fetches of the earlier ones are completed on the last
 * one's table, which does not know their ids. Keys are decimal; the chain's next key is key + 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

static const paging_host_t *g_host; /* the deliberate mistake */

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    paging_bytes_t k;
    (void)self;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return g_host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t fx_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    char digits[32];
    long long n = 0;
    paging_bytes_t next;
    (void)self;
    for (size_t i = 0; i < key.len && i < 18; i++) n = n * 10 + (key.data[i] - '0');
    next.len = (size_t)snprintf(digits, sizeof digits, "%lld", n + 1);
    next.data = (const uint8_t *)digits;
    return g_host->keys_set(out, PAGING_KEY_NEXT, &next);
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    char text[48];
    paging_bytes_t item;
    (void)self;
    item.len = (size_t)snprintf(text, sizeof text, "{\"n\":%.*s}", (int)request->key.len, (const char *)request->key.data);
    item.data = (const uint8_t *)text;
    if (g_host->fetch_add_item(g_host, id, item) == PAGING_OK) g_host->fetch_complete(g_host, id);
    return PAGING_OK;
}

static void fx_destroy(paging_source_t *self)
{
    free(self);
}

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    paging_source_t *s = (paging_source_t *)calloc(1, sizeof *s);
    (void)plugin_id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    g_host = host;
    s->refresh_key = fx_refresh_key;
    s->key_chain = fx_key_chain;
    s->fetch = fx_fetch;
    s->destroy = fx_destroy;
    s->struct_size = (uint32_t)sizeof *s;
    return s;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "global-host", "Global host (fixture)", "1.0.0",
    "Completes fetches through the host table of its last instance.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
