/*
 * A plugin written against the 1.0 draft headers (this folder's paging/, frozen as they were
 * before struct_size, extensions and library init existed). The tests build it with these
 * headers and load it in the current host, which must run it unchanged.
 *
 * "draft-numbers" (source): keys are decimal offsets; key_chain names the neighbours from the
 *   config's `count` (default 50); each page holds page_size JSON integers from the key.
 * "draft-tagger" (interceptor): adds the param "tag" = config `tag` (default "draft") and observes
 *   the page, logging "draft-tagger: page of N items"; a request whose key is "answer" is
 *   completed with the items "\"answered\"" and "7".
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct numbers { paging_source_t base; const paging_host_t *host; long count; } numbers;
typedef struct tagger { paging_interceptor_t base; const paging_host_t *host; char tag[32]; } tagger;

static long parse(paging_bytes_t key)
{
    char text[24];
    size_t len = key.len < sizeof text - 1 ? key.len : sizeof text - 1;
    if (key.data != NULL) memcpy(text, key.data, len);
    text[len] = '\0';
    return strtol(text, NULL, 10);
}

static paging_status_t set_key(const paging_host_t *h, paging_keys_out_t *out, uint32_t slot, long value)
{
    char text[24];
    paging_bytes_t key;
    key.len = (size_t)snprintf(text, sizeof text, "%ld", value);
    key.data = (const uint8_t *)text;
    return h->keys_set(out, slot, &key);
}

static paging_status_t nb_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    return set_key(((numbers *)self)->host, out, PAGING_KEY_CURRENT, 0);
}

static paging_status_t nb_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    numbers *n = (numbers *)self;
    long at = parse(key);
    if (at >= 10) set_key(n->host, out, PAGING_KEY_PREV, at - 10);
    if (at + 10 < n->count) set_key(n->host, out, PAGING_KEY_NEXT, at + 10);
    return PAGING_OK;
}

static paging_status_t nb_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    numbers *n = (numbers *)self;
    long at = parse(request->key), i;
    for (i = at; i < at + (long)request->page_size && i < n->count; i++) {
        char text[24];
        paging_bytes_t item;
        item.len = (size_t)snprintf(text, sizeof text, "%ld", i);
        item.data = (const uint8_t *)text;
        n->host->fetch_add_item(n->host, id, item);
    }
    return n->host->fetch_complete(n->host, id);
}

static void nb_destroy(paging_source_t *self) { free(self); }

static paging_source_t *nb_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    numbers *n = (numbers *)calloc(1, sizeof *n);
    (void)id;
    if (n == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    n->host = host;
    n->count = (long)host->config_int(config, "count", 50);
    n->base.refresh_key = nb_refresh_key;
    n->base.key_chain = nb_key_chain;
    n->base.fetch = nb_fetch;
    n->base.destroy = nb_destroy;
    return &n->base;
}

static uint32_t tg_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    tagger *t = (tagger *)self;
    paging_bytes_t name, value;
    if (request->key.len == 6 && memcmp(request->key.data, "answer", 6) == 0) {
        paging_bytes_t item;
        item.data = (const uint8_t *)"\"answered\"";
        item.len = 10;
        t->host->out_add_item(out, item);
        item.data = (const uint8_t *)"7";
        item.len = 1;
        t->host->out_add_item(out, item);
        t->host->out_set_flags(out, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
        return PAGING_INTERCEPT_COMPLETE;
    }
    name.data = (const uint8_t *)"tag";
    name.len = 3;
    value.data = (const uint8_t *)t->tag;
    value.len = strlen(t->tag);
    if (t->host->out_set_param(out, name, value) != PAGING_OK) return PAGING_INTERCEPT_FAIL;
    return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
}

static void tg_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    tagger *t = (tagger *)self;
    char message[64];
    snprintf(message, sizeof message, "draft-tagger: page of %lu items", (unsigned long)page->item_count);
    t->host->log(t->host, PAGING_LOG_INFO, message);
}

static void tg_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *tg_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    tagger *t = (tagger *)calloc(1, sizeof *t);
    const char *tag = host->config_string(config, "tag");
    (void)id;
    if (t == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    snprintf(t->tag, sizeof t->tag, "%s", tag != NULL ? tag : "draft");
    t->host = host;
    t->base.intercept = tg_intercept;
    t->base.handle = tg_handle;
    t->base.destroy = tg_destroy;
    return &t->base;
}

static const paging_plugin_descriptor_t descriptors[2] = {
    { PAGING_ABI_VERSION_INIT, "draft-numbers", "Numbers (1.0 draft)", "1.0.0", "Integers by offset.",
      PAGING_PLUGIN_SOURCE, 0 },
    { PAGING_ABI_VERSION_INIT, "draft-tagger", "Tagger (1.0 draft)", "1.0.0", "Tags requests, answers 'answer'.",
      PAGING_PLUGIN_INTERCEPTOR, 0 },
};
static uint32_t count(void) { return 2; }
static const paging_plugin_descriptor_t *describe(uint32_t i) { return i < 2 ? &descriptors[i] : NULL; }
static const paging_plugin_entry_t entry = { PAGING_ABI_VERSION_INIT, count, describe, nb_create, tg_create };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
