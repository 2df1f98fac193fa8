/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/abi_major2.c -o libabi_major2.so */
/*
 * Fixture: a library whose entry (and descriptor) claim ABI 2.0.0. Its one source "abi-major2"
 * otherwise behaves: refresh key "0", each fetch serves one item ("\"abi-major2\"") with both END flags.
 * A 1.x host must refuse to load the library, naming it and both versions (1.x vs 2.0.0), and
 * must not call anything but paging_plugin_entry (create would log "abi-major2: created").
 */
#include <stdlib.h>

#include "paging/paging.h"

#define FIXTURE_ABI { 2u, 0u, 0u }

typedef struct fixture { paging_source_t base; const paging_host_t *host; } fixture;

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
    const paging_host_t *h = f->host;
    static const char text[] = "\"abi-major2\"";
    paging_bytes_t item;
    (void)request;
    item.data = (const uint8_t *)text;
    item.len = sizeof text - 1;
    h->fetch_add_item(h, id, item);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void fx_destroy(paging_source_t *self) { free(self); }

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    host->log(host, PAGING_LOG_ERROR, "abi-major2: created");
    f->host = host;
    f->base.plugin_data = f;
    f->base.refresh_key = fx_refresh_key;
    f->base.key_chain = NULL;
    f->base.fetch = fx_fetch;
    f->base.cancel = NULL;
    f->base.destroy = fx_destroy;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    FIXTURE_ABI, (uint32_t)sizeof(paging_plugin_descriptor_t), "abi-major2", "ABI 2.0 (fixture)", "1.0.0",
    "Claims ABI 2.0.0.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
#ifdef FIXTURE_DESCRIPTOR_ONLY
/* The entry claims 1.0; only the descriptor claims 2.0. */
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };
#else
static const paging_plugin_entry_t fx_entry = { FIXTURE_ABI, (uint32_t)sizeof(paging_plugin_entry_t), fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };
#endif

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
