/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/enormous_page.c -o libenormous_page.so */
/*
 * Misbehaving fixture: two plugins that try to hand back an enormous page.
 *   source "enormous-source": each fetch adds items of `item_len` bytes (config, default
 *     65536) until `total_bytes` (default 4 GiB) or `item_count` (default 0 = no count bound)
 *     is reached, then completes. All items point into one static buffer, so the plugin itself
 *     uses little memory: whatever memory grows is the host's copies.
 *   interceptor "enormous-interceptor": the same through out_add_item, then COMPLETE.
 * By default each stops adding at the first refusal (the host's limit), then logs
 * "enormous: stopped after <n> items (<bytes> bytes), last status <code>". With ignore_errors
 * (boolean) it keeps calling the host until its totals are reached, as a runaway plugin would.
 * Refresh key "0".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

#define EN_MAX_ITEM (1u << 20)
static uint8_t en_buffer[EN_MAX_ITEM];

typedef struct en_config {
    const paging_host_t *host;
    uint64_t item_len, total_bytes, item_count;
    uint32_t ignore_errors;
} en_config;

typedef struct en_source { paging_source_t base; en_config c; } en_source;
typedef struct en_interceptor { paging_interceptor_t base; en_config c; } en_interceptor;

static int en_configure(en_config *c, const paging_host_t *host, const paging_config_t *config)
{
    int64_t len = host->config_int(config, "item_len", 65536);
    int64_t total = host->config_int(config, "total_bytes", (int64_t)4 << 30);
    int64_t count = host->config_int(config, "item_count", 0);
    if (len < 0 || len > (int64_t)EN_MAX_ITEM || total < 0 || count < 0) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "enormous: item_len must be 0...1048576, totals >= 0");
        return 0;
    }
    c->host = host;
    c->item_len = (uint64_t)len;
    c->total_bytes = (uint64_t)total;
    c->item_count = (uint64_t)count;
    c->ignore_errors = host->config_bool(config, "ignore_errors", 0);
    return 1;
}

static int en_more(const en_config *c, uint64_t items, uint64_t bytes)
{
    if (c->item_count != 0 && items >= c->item_count) return 0;
    return bytes + c->item_len <= c->total_bytes && (c->item_len > 0 || c->item_count != 0);
}

static void en_report(const en_config *c, uint64_t items, uint64_t bytes, paging_status_t last)
{
    char msg[160];
    snprintf(msg, sizeof msg, "enormous: stopped after %llu items (%llu bytes), last status %u",
             (unsigned long long)items, (unsigned long long)bytes, (unsigned)last);
    c->host->log(c->host, PAGING_LOG_INFO, msg);
}

static paging_status_t en_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    en_source *s = (en_source *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return s->c.host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t en_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    en_source *s = (en_source *)self;
    const paging_host_t *h = s->c.host;
    paging_bytes_t item;
    paging_status_t last = PAGING_OK;
    uint64_t items = 0, bytes = 0;
    (void)request;
    item.data = en_buffer;
    item.len = (size_t)s->c.item_len;
    while (en_more(&s->c, items, bytes)) {
        last = h->fetch_add_item(h, id, item);
        if (last != PAGING_OK && !s->c.ignore_errors) break;
        items++;
        bytes += s->c.item_len;
    }
    en_report(&s->c, items, bytes, last);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void en_source_destroy(paging_source_t *self) { free(self); }

static uint32_t en_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    en_interceptor *f = (en_interceptor *)self;
    const paging_host_t *h = f->c.host;
    paging_bytes_t item;
    paging_status_t last = PAGING_OK;
    uint64_t items = 0, bytes = 0;
    (void)request;
    item.data = en_buffer;
    item.len = (size_t)f->c.item_len;
    while (en_more(&f->c, items, bytes)) {
        last = h->out_add_item(out, item);
        if (last != PAGING_OK && !f->c.ignore_errors) break;
        items++;
        bytes += f->c.item_len;
    }
    en_report(&f->c, items, bytes, last);
    return PAGING_INTERCEPT_COMPLETE;
}

static void en_interceptor_destroy(paging_interceptor_t *self) { free(self); }

static paging_source_t *en_create_source(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    en_source *s = (en_source *)calloc(1, sizeof *s);
    (void)plugin_id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    if (!en_configure(&s->c, host, config)) { free(s); return NULL; }
    s->base.plugin_data = s;
    s->base.refresh_key = en_refresh_key;
    s->base.key_chain = NULL;
    s->base.fetch = en_fetch;
    s->base.cancel = NULL;
    s->base.destroy = en_source_destroy;
    return &s->base;
}

static paging_interceptor_t *en_create_interceptor(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    en_interceptor *f = (en_interceptor *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    if (!en_configure(&f->c, host, config)) { free(f); return NULL; }
    f->base.plugin_data = f;
    f->base.intercept = en_intercept;
    f->base.handle = NULL;
    f->base.destroy = en_interceptor_destroy;
    return &f->base;
}

static const paging_plugin_descriptor_t en_descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "enormous-source", "Enormous page source (fixture)", "1.0.0",
      "Tries to return total_bytes in one page.", PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "enormous-interceptor", "Enormous page interceptor (fixture)", "1.0.0",
      "Tries to complete with total_bytes in one page.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL }
};
/* Every item is valid JSON whatever its length: the number 1, then spaces. Filled once, when
 * the library is loaded: instances configured later only read it, so a fetch in flight never
 * sees it rewritten. */
static paging_status_t en_init(const paging_library_info_t *info)
{
    (void)info;
    memset(en_buffer, ' ', sizeof en_buffer);
    en_buffer[0] = '1';
    return PAGING_OK;
}

static uint32_t en_count(void) { return 2; }
static const paging_plugin_descriptor_t *en_descriptor_at(uint32_t i) { return i < 2 ? &en_descriptors[i] : NULL; }
static const paging_plugin_entry_t en_entry = {
    PAGING_ENTRY_HEAD, en_count, en_descriptor_at, en_create_source, en_create_interceptor, en_init, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &en_entry; }
