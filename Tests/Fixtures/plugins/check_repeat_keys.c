/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_repeat_keys.c -o libcheck_repeat_keys.so */
/*
 * Broken fixture for `pager check`: source "repeat-keys" whose keys go round in a circle:
 * refresh key "a"; the page at "a" says its next page is "b", the page at "b" says "a" again.
 * Each page holds one item and completes inside fetch(). Appending would never end.
 * Expected: keys-chain fails (a key repeats); every other check passes.
 */
#include <stdlib.h>

#include "paging/paging.h"

typedef struct fixture { paging_source_t base; const paging_host_t *host; } fixture;

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"a";
    k.len = 1;
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fixture *f = (fixture *)self;
    const paging_host_t *h = f->host;
    paging_bytes_t item, next;
    int at_a = request->key.len == 1 && request->key.data[0] == 'a';
    item.data = (const uint8_t *)"1";
    item.len = 1;
    next.data = (const uint8_t *)(at_a ? "b" : "a"); /* deliberate: round in a circle */
    next.len = 1;
    h->fetch_add_item(h, id, item);
    h->fetch_set_next_key(h, id, &next);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void fx_destroy(paging_source_t *self) { free(self); }

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
    f->base.cancel = NULL;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "repeat-keys", "Repeating keys (fixture)", "1.0.0",
    "Keys go a, b, a, b...", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
