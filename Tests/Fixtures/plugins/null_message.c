/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/null_message.c -o libnull_message.so */
/* Fixture: source "null-message" fails every fetch with PAGING_ERR_NOT_FOUND and a NULL message.
 * Refresh key "0". With the config's "null_calls" true, each fetch() first calls fetch_complete
 * with a NULL host table, twice, and keys_set with a NULL out: calls that name no plugin. */
#include <stdlib.h>

#include "paging/paging.h"

typedef struct fx_src { paging_source_t base; const paging_host_t *host; int null_calls; } fx_src;

static paging_status_t nm_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return ((fx_src *)self)->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t nm_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fx_src *f = (fx_src *)self;
    (void)request;
    if (f->null_calls) {
        paging_bytes_t k;
        k.data = (const uint8_t *)"0";
        k.len = 1;
        f->host->fetch_complete(NULL, id);
        f->host->fetch_complete(NULL, id);
        f->host->keys_set(NULL, PAGING_KEY_CURRENT, &k);
    }
    return f->host->fetch_fail(f->host, id, PAGING_ERR_NOT_FOUND, NULL);
}

static void nm_destroy(paging_source_t *self) { free(self); }

static paging_source_t *nm_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fx_src *f = (fx_src *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->null_calls = host->config_bool(config, "null_calls", 0) != 0;
    f->base.plugin_data = f;
    f->base.refresh_key = nm_refresh_key;
    f->base.fetch = nm_fetch;
    f->base.destroy = nm_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t nm_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "null-message", "NULL failure message (fixture)", "1.0.0",
    "Fails every fetch with NOT_FOUND and a NULL message.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t nm_count(void) { return 1; }
static const paging_plugin_descriptor_t *nm_descriptor_at(uint32_t i) { return i == 0 ? &nm_descriptor : NULL; }
static const paging_plugin_entry_t nm_entry = { PAGING_ENTRY_HEAD, nm_count, nm_descriptor_at, nm_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &nm_entry; }
