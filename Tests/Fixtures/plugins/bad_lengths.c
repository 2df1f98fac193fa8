/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/bad_lengths.c -o libbad_lengths.so */
/*
 * Misbehaving fixture with two plugins that hand the host NULL data with a non-zero length.
 * The host must refuse each call with PAGING_ERR_INVALID_ARGUMENT without reading, and survive.
 *   source "bad-lengths":  fetch calls fetch_add_item(host, id, {NULL, 5}), logs the result
 *                          ("bad-lengths: fetch_add_item returned <code>", expected 8), then
 *                          completes the fetch (an empty page, both END flags). Refresh key "0".
 *                          Config "mode": "huge_next_key" calls fetch_set_next_key with
 *                          {"99", (size_t)-1} instead, "huge_item" fetch_add_item with
 *                          {"1", (size_t)-1} (a length Swift reads as negative); the log line
 *                          names the call.
 *   interceptor "bad-out": intercept calls out_add_item(out, {NULL, 3}), logs the result
 *                          ("bad-out: out_add_item returned <code>", expected 8), and returns
 *                          PAGING_INTERCEPT_COMPLETE (the page then has no items).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct fx_src { paging_source_t base; const paging_host_t *host; int mode; } fx_src;
typedef struct fx_icp { paging_interceptor_t base; const paging_host_t *host; } fx_icp;

static paging_status_t src_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fx_src *f = (fx_src *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t src_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fx_src *f = (fx_src *)self;
    const paging_host_t *h = f->host;
    paging_bytes_t bad;
    paging_status_t rc;
    char msg[96];
    (void)request;
    bad.data = NULL;
    bad.len = 5; /* deliberate misuse */
    if (f->mode == 1) {
        bad.data = (const uint8_t *)"99";
        bad.len = (size_t)-1;
        rc = h->fetch_set_next_key(h, id, &bad);
    } else if (f->mode == 2) {
        bad.data = (const uint8_t *)"1";
        bad.len = (size_t)-1;
        rc = h->fetch_add_item(h, id, bad);
    } else {
        rc = h->fetch_add_item(h, id, bad);
    }
    snprintf(msg, sizeof msg, "bad-lengths: %s returned %u", f->mode == 1 ? "fetch_set_next_key" : "fetch_add_item", (unsigned)rc);
    h->log(h, PAGING_LOG_INFO, msg);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void src_destroy(paging_source_t *self) { free(self); }

static uint32_t icp_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    fx_icp *f = (fx_icp *)self;
    paging_bytes_t bad;
    paging_status_t rc;
    char msg[96];
    (void)request;
    bad.data = NULL;
    bad.len = 3; /* deliberate misuse */
    rc = f->host->out_add_item(out, bad);
    snprintf(msg, sizeof msg, "bad-out: out_add_item returned %u", (unsigned)rc);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
    return PAGING_INTERCEPT_COMPLETE;
}

static void icp_destroy(paging_interceptor_t *self) { free(self); }

static paging_source_t *create_source(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fx_src *f;
    const char *mode;
    (void)plugin_id;
    f = (fx_src *)calloc(1, sizeof *f);
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    mode = host->config_string(config, "mode");
    f->mode = mode == NULL ? 0 : strcmp(mode, "huge_next_key") == 0 ? 1 : strcmp(mode, "huge_item") == 0 ? 2 : 0;
    f->base.plugin_data = f;
    f->base.refresh_key = src_refresh_key;
    f->base.key_chain = NULL;
    f->base.fetch = src_fetch;
    f->base.cancel = NULL;
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
    f->base.intercept = icp_intercept;
    f->base.handle = NULL;
    f->base.destroy = icp_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "bad-lengths", "Bad lengths (fixture)", "1.0.0",
      "Adds an item with NULL data and length 5.", PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "bad-out", "Bad intercept output (fixture)", "1.0.0",
      "Adds an intercept item with NULL data and length 3.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL }
};
static uint32_t fx_count(void) { return 2; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 2 ? &descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = {
    PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, create_source, create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
