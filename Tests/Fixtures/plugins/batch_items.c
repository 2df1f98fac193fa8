/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/batch_items.c -o libbatch_items.so */
/*
 * Fixture: a source that hands out its items through paging.fetch-items/1 (add_items). The page
 * at key k:
 *   "page"    add_items of 1, "two", {"three":3}, then fetch_add_item of 4: four items in order.
 *   "bad"     add_items of 1, {oops}, 3: the host refuses the second.
 *   "null"    add_items with NULL items and a count of 2.
 *   "none"    add_items with NULL items and a count of 0, then an empty page.
 *   "unknown" add_items for a fetch id that is not one, then the page "page".
 * Every add_items status is logged ("add_items: N"), and a refused one ends the fetch there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct fixture {
    paging_source_t base;
    const paging_host_t *host;
    const paging_ext_fetch_items_host_t *items;
} fixture;

static paging_bytes_t text(const char *value)
{
    paging_bytes_t bytes;
    bytes.data = (const uint8_t *)value;
    bytes.len = strlen(value);
    return bytes;
}

static int is(paging_bytes_t key, const char *name)
{
    return key.len == strlen(name) && memcmp(key.data, name, key.len) == 0;
}

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    paging_bytes_t key = text("page");
    return ((fixture *)self)->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

/* add_items, its status logged. */
static paging_status_t add(const fixture *f, uint64_t id, const paging_bytes_t *items, size_t count)
{
    char line[64];
    paging_status_t status = f->items->add_items(f->host, id, items, count);
    snprintf(line, sizeof line, "add_items: %d", (int)status);
    f->host->log(f->host, PAGING_LOG_INFO, line);
    return status;
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    const fixture *f = (const fixture *)self;
    const paging_host_t *h = f->host;
    paging_bytes_t items[3];
    size_t count = 0;
    if (is(request->key, "bad")) {
        items[0] = text("1"), items[1] = text("{oops}"), items[2] = text("3"), count = 3;
    } else if (is(request->key, "null")) {
        if (add(f, id, NULL, 2) != PAGING_OK) return PAGING_OK;
    } else if (is(request->key, "none")) {
        if (add(f, id, NULL, 0) != PAGING_OK) return PAGING_OK;
    } else {
        items[0] = text("1"), items[1] = text("\"two\""), items[2] = text("{\"three\":3}"), count = 3;
        if (is(request->key, "unknown")) (void)add(f, id + 1000, items, count);
    }
    if (count > 0 && add(f, id, items, count) != PAGING_OK) return PAGING_OK;
    if (count > 0 && h->fetch_add_item(h, id, text("4")) != PAGING_OK) return PAGING_OK;
    h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void fx_destroy(paging_source_t *self) { free(self); }

static paging_source_t *fx_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f;
    const void *items = host->get_extension(host, PAGING_EXT_FETCH_ITEMS);
    (void)id;
    if (items == NULL) { host->config_fail(config, PAGING_ERR_UNSUPPORTED, "the host does not offer " PAGING_EXT_FETCH_ITEMS); return NULL; }
    f = (fixture *)calloc(1, sizeof *f);
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->items = (const paging_ext_fetch_items_host_t *)items;
    f->base.refresh_key = fx_refresh_key;
    f->base.fetch = fx_fetch;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const char *const required[] = { PAGING_EXT_FETCH_ITEMS, NULL };
static const paging_plugin_descriptor_t descriptor = {
    PAGING_DESCRIPTOR_HEAD, "batch-items", "Batch items (fixture)", "1.2.0", "Items through paging.fetch-items/1.",
    PAGING_PLUGIN_SOURCE, 0, required,
};
static uint32_t count_descriptors(void) { return 1; }
static const paging_plugin_descriptor_t *describe(uint32_t i) { return i == 0 ? &descriptor : NULL; }
static const paging_plugin_entry_t entry = { PAGING_ENTRY_HEAD, count_descriptors, describe, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
