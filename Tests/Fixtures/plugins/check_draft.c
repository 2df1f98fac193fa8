/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Tests/Fixtures/abi-1.0-draft Tests/Fixtures/plugins/check_draft.c -o libcheck_draft.so */
/*
 * Fixture for `pager check`, built against the 1.0 draft headers (Tests/Fixtures/abi-1.0-draft,
 * before struct_size existed): source "draft-built", three pages of two JSON numbers, keys "0"
 * to "2" (refresh key "0"), each page naming its neighbours itself and completed inside fetch().
 * Expected: every check passes; abi-growth notes that it was built against the draft headers.
 */
#include <stdlib.h>

#include "paging/paging.h"

typedef struct fixture { paging_source_t base; const paging_host_t *host; } fixture;

static const char digits[] = "0123456789";

static paging_bytes_t digit(int n)
{
    paging_bytes_t b;
    b.data = (const uint8_t *)&digits[n];
    b.len = 1;
    return b;
}

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    paging_bytes_t k = digit(0);
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fixture *f = (fixture *)self;
    const paging_host_t *h = f->host;
    paging_bytes_t k;
    int n;
    if (request->key.len != 1 || request->key.data[0] < '0' || request->key.data[0] > '2') {
        h->fetch_fail(h, id, PAGING_ERR_INVALID_REQUEST, "not a page key");
        return PAGING_OK;
    }
    n = request->key.data[0] - '0';
    h->fetch_add_item(h, id, digit(2 * n));
    h->fetch_add_item(h, id, digit(2 * n + 1));
    if (n > 0) {
        k = digit(n - 1);
        h->fetch_set_prev_key(h, id, &k);
    }
    if (n < 2) {
        k = digit(n + 1);
        h->fetch_set_next_key(h, id, &k);
    }
    h->fetch_set_flags(h, id, (n == 0 ? PAGING_PAGE_PREV_END : 0u) | (n == 2 ? PAGING_PAGE_NEXT_END : 0u));
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
    f->base.fetch = fx_fetch;
    f->base.destroy = fx_destroy;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_ABI_VERSION_INIT, "draft-built", "Built against the draft (fixture)", "1.0.0",
    "Three pages of two numbers, built against the 1.0 draft headers.", PAGING_PLUGIN_SOURCE, 0
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ABI_VERSION_INIT, fx_count, fx_descriptor_at, fx_create, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
