/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/abi_minor_newer.c -o libabi_minor_newer.so */
/*
 * Fixture: a library built as if against ABI 1.99 headers, whose structs grew (version.h,
 * rule 2): its entry, descriptors and source table each carry a member 1.0 does not know,
 * and say so in struct_size. Two sources:
 *   "abi-minor-newer" needs nothing a 1.0 host lacks: it must load and run. It checks, as a
 *     1.99 plugin must, whether the host's request holds the member it would like to read
 *     (it does not in 1.0) and logs "abi-minor-newer: host 1.<minor>, request of <n> bytes,
 *     using 1.0 members only". Each fetch serves one item ("\"abi-minor-newer\"") and both END flags.
 *   "abi-minor-needs" requires the host extension "paging.from-the-future/1": a 1.0 host must
 *     refuse it with one line naming both versions and the extension; creating it logs
 *     "abi-minor-needs: created", which must never happen.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

#define FIXTURE_ABI { 1u, 99u, 0u }

/* The 1.99 shapes: the 1.0 structs with a member at the end. */
typedef struct { paging_plugin_descriptor_t v1_0; const char *future_member; } descriptor_1_99;
typedef struct { paging_plugin_entry_t v1_0; void (*future_function)(void); } entry_1_99;
typedef struct { paging_source_t v1_0; void (*future_function)(void); } source_1_99;
typedef struct { paging_request_t v1_0; uint64_t future_member; } request_1_99;

typedef struct fixture { source_1_99 base; const paging_host_t *host; int needs; } fixture;

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
    if (request->struct_size < sizeof(request_1_99)) {
        char msg[128];
        snprintf(msg, sizeof msg, "abi-minor-newer: host 1.%u, request of %u bytes, using 1.0 members only",
                 (unsigned)h->abi_version.minor, (unsigned)request->struct_size);
        h->log(h, PAGING_LOG_INFO, msg);
    }
    item.data = (const uint8_t *)text;
    item.len = sizeof text - 1;
    h->fetch_add_item(h, id, item);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void fx_destroy(paging_source_t *self) { free(self); }

static void fx_future(void) {}

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    if (strcmp(plugin_id, "abi-minor-needs") == 0) host->log(host, PAGING_LOG_ERROR, "abi-minor-needs: created");
    f->host = host;
    f->base.v1_0.plugin_data = f;
    f->base.v1_0.refresh_key = fx_refresh_key;
    f->base.v1_0.fetch = fx_fetch;
    f->base.v1_0.destroy = fx_destroy;
    f->base.v1_0.struct_size = (uint32_t)sizeof(source_1_99);
    f->base.future_function = fx_future;
    return &f->base.v1_0;
}

static const char *const fx_needs[] = { "paging.from-the-future/1", NULL };
static const descriptor_1_99 fx_descriptors[2] = {
    { { FIXTURE_ABI, (uint32_t)sizeof(descriptor_1_99), "abi-minor-newer", "ABI 1.99 (fixture)", "1.0.0",
        "Claims ABI 1.99.0 and needs nothing 1.0 lacks.", PAGING_PLUGIN_SOURCE, 0, NULL }, "future" },
    { { FIXTURE_ABI, (uint32_t)sizeof(descriptor_1_99), "abi-minor-needs", "ABI 1.99 needing more (fixture)", "1.0.0",
        "Claims ABI 1.99.0 and needs paging.from-the-future/1.", PAGING_PLUGIN_SOURCE, 0, fx_needs }, "future" },
};
static uint32_t fx_count(void) { return 2; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 2 ? &fx_descriptors[i].v1_0 : NULL; }
static const entry_1_99 fx_entry = {
    { FIXTURE_ABI, (uint32_t)sizeof(entry_1_99), fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL }, fx_future
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry.v1_0; }
