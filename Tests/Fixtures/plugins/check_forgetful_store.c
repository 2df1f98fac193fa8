/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_forgetful_store.c -o libcheck_forgetful_store.so */
/*
 * Fixture for `pager check`'s kept-pages: interceptor "forgetful-store", an in-memory store of
 * the last page handle() saw, which answers the next request of that page's identity with it
 * (COMPLETE: its items, keys and flags) and lets a hard refresh and a reload proceed. Config
 * "forget" (string) breaks it:
 *   "flags"         it answers without the page's flags (PAGING_PAGE_SHORTENED lost);
 *   "empty_flags"   so, for an empty page only;
 *   "emptied"       it answers without PAGING_PAGE_EMPTIED (as a store that keeps only the
 *                   flags ABI 1.3 knows);
 *   "hard_refresh"  it answers a hard refresh and a reload from the page too.
 * Expected: kept-pages passes without "forget" and fails with either, naming the flag or the
 * param; every other check passes or skips.
 */
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct held_bytes { uint8_t *data; size_t len; int set; } held_bytes;

typedef struct store {
    paging_interceptor_t base;
    const paging_host_t *host;
    int forget_flags, forget_empty_flags, forget_emptied, answer_all;
    int held;
    held_bytes identity, prev, next;
    held_bytes *items;
    size_t count;
    uint32_t flags;
} store;

static void release(held_bytes *b) { free(b->data); b->data = NULL; b->len = 0; b->set = 0; }

static void forget(store *s)
{
    size_t i;
    for (i = 0; i < s->count; i++) release(&s->items[i]);
    free(s->items);
    s->items = NULL;
    s->count = 0;
    release(&s->identity); release(&s->prev); release(&s->next);
    s->held = 0;
}

static int keep(held_bytes *into, const paging_bytes_t *from)
{
    if (from == NULL) return 1;
    into->data = (uint8_t *)malloc(from->len > 0 ? from->len : 1);
    if (into->data == NULL) return 0;
    if (from->len > 0) memcpy(into->data, from->data, from->len);
    into->len = from->len;
    into->set = 1;
    return 1;
}

static paging_bytes_t view(const held_bytes *b)
{
    paging_bytes_t v;
    v.data = b->data;
    v.len = b->len;
    return v;
}

static int param_is_true(const paging_request_t *request, const char *name)
{
    size_t i, n = strlen(name);
    for (i = 0; i < request->param_count; i++) {
        const paging_param_t *p = &request->params[i];
        if (p->name.len == n && memcmp(p->name.data, name, n) == 0) return p->value.len == 4 && memcmp(p->value.data, "true", 4) == 0;
    }
    return 0;
}

static uint32_t fs_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    store *s = (store *)self;
    const paging_host_t *h = s->host;
    size_t i;
    uint32_t flags;
    paging_bytes_t key;
    int same = s->held && s->identity.len == request->identity.len
        && (s->identity.len == 0 || memcmp(s->identity.data, request->identity.data, s->identity.len) == 0);
    if (!same) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    if (!s->answer_all && (param_is_true(request, "hard_refresh") || param_is_true(request, "reload"))) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    for (i = 0; i < s->count; i++) h->out_add_item(out, view(&s->items[i]));
    if (s->prev.set) { key = view(&s->prev); h->out_set_prev_key(out, &key); }
    if (s->next.set) { key = view(&s->next); h->out_set_next_key(out, &key); }
    flags = s->flags;
    if (s->forget_flags || (s->forget_empty_flags && s->count == 0)) flags &= ~(uint32_t)PAGING_PAGE_SHORTENED;
    if (s->forget_emptied) flags &= ~(uint32_t)PAGING_PAGE_EMPTIED;
    h->out_set_flags(out, flags);
    return PAGING_INTERCEPT_COMPLETE;
}

static void fs_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    store *s = (store *)self;
    size_t i;
    forget(s);
    if (!keep(&s->identity, &page->request->identity) || !keep(&s->prev, page->prev_key) || !keep(&s->next, page->next_key)) { forget(s); return; }
    s->items = (held_bytes *)calloc(page->item_count > 0 ? page->item_count : 1, sizeof *s->items);
    if (s->items == NULL) { forget(s); return; }
    for (i = 0; i < page->item_count; i++) {
        if (!keep(&s->items[i], &page->items[i])) { s->count = i; forget(s); return; }
    }
    s->count = page->item_count;
    s->flags = page->flags;
    s->held = 1;
}

static void fs_destroy(paging_interceptor_t *self)
{
    forget((store *)self);
    free(self);
}

static paging_interceptor_t *fs_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    const char *mode = host->config_string(config, "forget");
    store *s = (store *)calloc(1, sizeof *s);
    (void)plugin_id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    s->forget_flags = mode != NULL && strcmp(mode, "flags") == 0;
    s->forget_empty_flags = mode != NULL && strcmp(mode, "empty_flags") == 0;
    s->forget_emptied = mode != NULL && strcmp(mode, "emptied") == 0;
    s->answer_all = mode != NULL && strcmp(mode, "hard_refresh") == 0;
    s->base.plugin_data = s;
    s->base.intercept = fs_intercept;
    s->base.handle = fs_handle;
    s->base.destroy = fs_destroy;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

static const paging_plugin_descriptor_t fs_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "forgetful-store", "Forgetful store (fixture)", "1.0.0",
    "Answers from the last page it saw; config forget: flags or hard_refresh breaks it.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL };
static uint32_t fs_count(void) { return 1; }
static const paging_plugin_descriptor_t *fs_descriptor_at(uint32_t i) { return i == 0 ? &fs_descriptor : NULL; }
static const paging_plugin_entry_t fs_entry = { PAGING_ENTRY_HEAD, fs_count, fs_descriptor_at, NULL, fs_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fs_entry; }
