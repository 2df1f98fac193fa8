/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/invalid_items.c -o libinvalid_items.so */
/*
 * Fixture: items that are not valid UTF-8 JSON. Source "invalid-items": the page at key "k"
 * holds three items, the third of which is chosen by k: "json" {"ok":true}, "utf8" a string
 * with the byte 0xFF, "text" the bare word hello, "two" two values ("1 2"), "empty" nothing.
 * The first two items are always 1 and "two"; a fetch goes on to complete when the host refuses
 * the third (and so fails the fetch). Interceptor "invalid-complete" answers every
 * request itself with the items 1 and {oops}.
 */
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct fixture { paging_source_t base; const paging_host_t *host; } fixture;
typedef struct completer { paging_interceptor_t base; const paging_host_t *host; } completer;

static paging_bytes_t text(const char *value, size_t len)
{
    paging_bytes_t bytes;
    bytes.data = (const uint8_t *)value;
    bytes.len = len;
    return bytes;
}

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    paging_bytes_t key = text("json", 4);
    return ((fixture *)self)->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    const paging_host_t *h = ((fixture *)self)->host;
    const char *key = (const char *)request->key.data;
    size_t len = request->key.len;
    paging_bytes_t third = text("{\"ok\":true}", 11);
    if (len == 4 && memcmp(key, "utf8", 4) == 0) third = text("\"a\xff\"", 4);
    if (len == 4 && memcmp(key, "text", 4) == 0) third = text("hello", 5);
    if (len == 3 && memcmp(key, "two", 3) == 0) third = text("1 2", 3);
    if (len == 5 && memcmp(key, "empty", 5) == 0) third = text("", 0);
    h->fetch_add_item(h, id, text("1", 1));
    h->fetch_add_item(h, id, text("\"two\"", 5));
    /* When the host refuses the third, it has failed the fetch; the plugin goes on, as most do. */
    h->fetch_add_item(h, id, third);
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void fx_destroy(paging_source_t *self) { free(self); }

static paging_source_t *fx_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->base.refresh_key = fx_refresh_key;
    f->base.fetch = fx_fetch;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static uint32_t cp_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    const paging_host_t *h = ((completer *)self)->host;
    (void)request;
    h->out_add_item(out, text("1", 1));
    h->out_add_item(out, text("{oops}", 6));
    return PAGING_INTERCEPT_COMPLETE;
}

static void cp_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *cp_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    completer *c = (completer *)calloc(1, sizeof *c);
    (void)id;
    if (c == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    c->host = host;
    c->base.intercept = cp_intercept;
    c->base.destroy = cp_destroy;
    c->base.struct_size = (uint32_t)sizeof c->base;
    return &c->base;
}

static const paging_plugin_descriptor_t descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "invalid-items", "Invalid items (fixture)", "1.0.0", "Pages with an item that is not JSON.",
      PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "invalid-complete", "Invalid completion (fixture)", "1.0.0", "Answers with an item that is not JSON.",
      PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};
static uint32_t count(void) { return 2; }
static const paging_plugin_descriptor_t *describe(uint32_t i) { return i < 2 ? &descriptors[i] : NULL; }
static const paging_plugin_entry_t entry = { PAGING_ENTRY_HEAD, count, describe, fx_create, cp_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
