/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -O2 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/pass_through.c -o libpass_through.so */
/*
 * Fixture for tests and benchmarks; two well-behaved THREAD_SAFE plugins:
 *   interceptor "pass-through": intercept returns PAGING_INTERCEPT_PROCEED and does nothing else.
 *   source "counting": page n (key = decimal page number as text, "0", "1", ...) holds the 20
 *     JSON integers 20n ... 20n+19, served synchronously inside fetch (page_size is ignored).
 *     refresh key "0"; key_chain: prev = n-1 (none at 0), next = n+1 (none past the last page).
 *     fetch sets no keys or flags: the key chain applies. A key that is not a decimal page number
 *     (or is past the last page) fails with PAGING_ERR_INVALID_REQUEST.
 *     Config: pages (integer, optional, default 0 = unbounded) - the number of pages.
 * Both are read-only after create, hence THREAD_SAFE.
 */
#include <stdio.h>
#include <stdlib.h>

#include "paging/paging.h"

#define ITEMS_PER_PAGE 20u

typedef struct counting { paging_source_t base; const paging_host_t *host; uint64_t pages; } counting;

static paging_bytes_t make_key(char *buf, size_t cap, uint64_t n)
{
    paging_bytes_t b;
    int len = snprintf(buf, cap, "%llu", (unsigned long long)n);
    b.data = (const uint8_t *)buf;
    b.len = len > 0 ? (size_t)len : 0;
    return b;
}

/* Decimal page number, 1...19 digits; 0 when malformed or past the last page. */
static int parse_key(const counting *c, paging_bytes_t key, uint64_t *out)
{
    uint64_t v = 0;
    size_t i;
    if (key.data == NULL || key.len == 0 || key.len > 19) return 0;
    for (i = 0; i < key.len; i++) {
        if (key.data[i] < '0' || key.data[i] > '9') return 0;
        v = v * 10u + (uint64_t)(key.data[i] - '0');
    }
    if (c->pages != 0 && v >= c->pages) return 0;
    *out = v;
    return 1;
}

static paging_status_t counting_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    counting *c = (counting *)self;
    char buf[24];
    paging_bytes_t k = make_key(buf, sizeof buf, 0);
    return c->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t counting_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    counting *c = (counting *)self;
    char buf[24];
    paging_bytes_t k;
    uint64_t n;
    if (!parse_key(c, key, &n)) return PAGING_ERR_INVALID_REQUEST;
    if (n > 0) {
        k = make_key(buf, sizeof buf, n - 1);
        c->host->keys_set(out, PAGING_KEY_PREV, &k);
    } else {
        c->host->keys_set(out, PAGING_KEY_PREV, NULL);
    }
    if (c->pages == 0 || n + 1 < c->pages) {
        k = make_key(buf, sizeof buf, n + 1);
        c->host->keys_set(out, PAGING_KEY_NEXT, &k);
    } else {
        c->host->keys_set(out, PAGING_KEY_NEXT, NULL);
    }
    return PAGING_OK;
}

static paging_status_t counting_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    counting *c = (counting *)self;
    const paging_host_t *h = c->host;
    char buf[24];
    uint64_t n;
    unsigned i;
    if (!parse_key(c, request->key, &n)) {
        h->fetch_fail(h, id, PAGING_ERR_INVALID_REQUEST, "counting: key is not a page number");
        return PAGING_OK;
    }
    for (i = 0; i < ITEMS_PER_PAGE; i++) {
        paging_bytes_t item = make_key(buf, sizeof buf, n * ITEMS_PER_PAGE + i);
        if (h->fetch_add_item(h, id, item) != PAGING_OK) return PAGING_OK;
    }
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void counting_destroy(paging_source_t *self) { free(self); }

static uint32_t pass_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self;
    (void)request;
    (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

static void pass_destroy(paging_interceptor_t *self) { free(self); }

static paging_source_t *create_source(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    counting *c;
    int64_t pages = host->config_int(config, "pages", 0);
    (void)plugin_id;
    if (pages < 0) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "counting: `pages` must be >= 0");
        return NULL;
    }
    c = (counting *)calloc(1, sizeof *c);
    if (c == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    c->host = host;
    c->pages = (uint64_t)pages;
    c->base.plugin_data = c;
    c->base.refresh_key = counting_refresh_key;
    c->base.key_chain = counting_key_chain;
    c->base.fetch = counting_fetch;
    c->base.cancel = NULL;
    c->base.destroy = counting_destroy;
    c->base.struct_size = (uint32_t)sizeof c->base;
    return &c->base;
}

static paging_interceptor_t *create_interceptor(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    paging_interceptor_t *p = (paging_interceptor_t *)calloc(1, sizeof *p);
    (void)plugin_id;
    if (p == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    p->plugin_data = NULL;
    p->intercept = pass_intercept;
    p->handle = NULL;
    p->destroy = pass_destroy;
    p->struct_size = (uint32_t)sizeof *p;
    return p;
}

static const paging_plugin_descriptor_t descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "pass-through", "Pass-through (fixture)", "1.0.0",
      "Lets every request proceed unchanged.", PAGING_PLUGIN_INTERCEPTOR, PAGING_PLUGIN_THREAD_SAFE, NULL },
    { PAGING_DESCRIPTOR_HEAD, "counting", "Counting (fixture)", "1.0.0",
      "Pages of 20 JSON integers; keys are page numbers.", PAGING_PLUGIN_SOURCE, PAGING_PLUGIN_THREAD_SAFE, NULL }
};
static uint32_t fx_count(void) { return 2; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 2 ? &descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = {
    PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, create_source, create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
