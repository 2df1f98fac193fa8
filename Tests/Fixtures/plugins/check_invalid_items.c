/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_invalid_items.c -o libcheck_invalid_items.so */
/*
 * Broken fixture for `pager check`: plugins whose pages hold items that are not valid JSON.
 *
 * Source "invalid-items": four pages, keys "0" to "3" (refresh key "0"; key_chain names the neighbours, none
 * before "0" nor after "3"), five items each, {"page":P,"item":I}, completed inside fetch(), except:
 *   page "1", item 2: not json          (not a JSON value)
 *   page "2", item 1: "caf\xE9"         (a JSON string, but not valid UTF-8)
 * The host fails such a page ("item N is not valid JSON: ..."); page "0" is valid, so the checks
 * that load the refresh page see nothing wrong.
 * Expected: items-valid fails on page 2 (key '1'), item 2; every other check passes. With the
 * config boolean "first_page_invalid", page "0" item 0 is not JSON either, and the page is
 * completed after the host refused it (which refuses the completion too).
 *
 * Interceptor "invalid-answers": answers every request for key "20" itself (COMPLETE) with the
 * items 1 and {oops} (not JSON); lets every other request proceed unchanged.
 * Expected: items-valid fails on the answer to key '20', item 1; every other check passes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

#define PAGES 4u
#define ITEMS 5u

typedef struct fixture { paging_source_t base; const paging_host_t *host; int first_page_invalid; } fixture;

static paging_bytes_t text_bytes(const char *text, size_t len)
{
    paging_bytes_t b;
    b.data = (const uint8_t *)text;
    b.len = len;
    return b;
}

/* The page number of a one-digit key below PAGES, or -1. */
static int page_of(paging_bytes_t key)
{
    if (key.data == NULL || key.len != 1 || key.data[0] < '0' || key.data[0] >= (int)('0' + PAGES)) return -1;
    return key.data[0] - '0';
}

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    paging_bytes_t k = text_bytes("0", 1);
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t fx_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    static const char digits[] = "0123456789";
    paging_bytes_t k;
    int n = page_of(key);
    if (n < 0) return PAGING_ERR_INVALID_REQUEST;
    if (n > 0) {
        k = text_bytes(&digits[n - 1], 1);
        f->host->keys_set(out, PAGING_KEY_PREV, &k);
    }
    if ((unsigned)n + 1 < PAGES) {
        k = text_bytes(&digits[n + 1], 1);
        f->host->keys_set(out, PAGING_KEY_NEXT, &k);
    }
    return PAGING_OK;
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fixture *f = (fixture *)self;
    const paging_host_t *h = f->host;
    static const char not_json[] = "not json";
    static const char bad_utf8[] = "\"caf\xE9\"";
    char buf[48];
    unsigned i;
    int n = page_of(request->key);
    if (n < 0) {
        h->fetch_fail(h, id, PAGING_ERR_INVALID_REQUEST, "not a page key");
        return PAGING_OK;
    }
    for (i = 0; i < ITEMS; i++) {
        if ((n == 1 && i == 2) || (n == 0 && i == 0 && f->first_page_invalid)) {
            h->fetch_add_item(h, id, text_bytes(not_json, strlen(not_json))); /* deliberate */
        } else if (n == 2 && i == 1) {
            h->fetch_add_item(h, id, text_bytes(bad_utf8, strlen(bad_utf8))); /* deliberate */
        } else {
            int len = snprintf(buf, sizeof buf, "{\"page\":%d,\"item\":%u}", n, i);
            h->fetch_add_item(h, id, text_bytes(buf, len > 0 ? (size_t)len : 0));
        }
    }
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void fx_destroy(paging_source_t *self) { free(self); }

static uint32_t answers_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    const paging_host_t *h = (const paging_host_t *)self->plugin_data;
    static const char oops[] = "{oops}";
    if (request->key.len != 2 || memcmp(request->key.data, "20", 2) != 0) return PAGING_INTERCEPT_PROCEED;
    h->out_add_item(out, text_bytes("1", 1));
    h->out_add_item(out, text_bytes(oops, strlen(oops))); /* deliberate */
    h->out_set_flags(out, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    return PAGING_INTERCEPT_COMPLETE;
}

static void answers_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *answers_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    paging_interceptor_t *i = (paging_interceptor_t *)calloc(1, sizeof *i);
    (void)plugin_id;
    if (i == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    i->plugin_data = (void *)host;
    i->intercept = answers_intercept;
    i->destroy = answers_destroy;
    i->struct_size = (uint32_t)sizeof *i;
    return i;
}

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->first_page_invalid = host->config_bool(config, "first_page_invalid", 0) != 0;
    f->base.plugin_data = f;
    f->base.refresh_key = fx_refresh_key;
    f->base.key_chain = fx_key_chain;
    f->base.fetch = fx_fetch;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "invalid-items", "Invalid items (fixture)", "1.0.0",
      "Pages holding an item that is not JSON and one that is not UTF-8.", PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "invalid-answers", "Invalid answers (fixture)", "1.0.0",
      "Answers key 20 with an item that is not JSON.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};
static uint32_t fx_count(void) { return 2; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 2 ? &fx_descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, answers_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
