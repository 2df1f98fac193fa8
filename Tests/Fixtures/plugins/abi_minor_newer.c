/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/abi_minor_newer.c -o libabi_minor_newer.so */
/*
 * Fixture: a library whose entry (and descriptor) claim ABI 1.99.0. Its one source "abi-minor-newer"
 * otherwise behaves: refresh key "0", each fetch serves one item ("\"abi-minor-newer\"") with both END flags.
 * A 1.x host must load it: minors are additive. Following version.h's policy, create checks
 * host->abi_version and logs "abi-minor-newer: host 1.<minor>, using 1.0 members only" when the
 * host is older than 1.99 (it uses no member added after 1.0 anyway).
 */
#include <stdio.h>
#include <stdlib.h>

#include "paging/paging.h"

#define FIXTURE_ABI { 1u, 99u, 0u }

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
    static const char text[] = "\"abi-minor-newer\"";
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
    if (host->abi_version.major == 1u && host->abi_version.minor < 99u) {
        char msg[96];
        snprintf(msg, sizeof msg, "abi-minor-newer: host 1.%u, using 1.0 members only",
                 (unsigned)host->abi_version.minor);
        host->log(host, PAGING_LOG_INFO, msg);
    }
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
    FIXTURE_ABI, "abi-minor-newer", "ABI 1.99 (fixture)", "1.0.0",
    "Claims ABI 1.99.0.", PAGING_PLUGIN_SOURCE, 0
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { FIXTURE_ABI, fx_count, fx_descriptor_at, fx_create, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
