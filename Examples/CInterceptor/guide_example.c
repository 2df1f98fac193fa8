/* guide_example.c - docs/PLUGIN-GUIDE.md's interceptor: tags each request, logs each page. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paging/paging.h"
typedef struct tagger { paging_interceptor_t base; const paging_host_t *host; char tag[64]; } tagger;
static uint32_t tag_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    tagger *t = (tagger *)self;
    paging_bytes_t name = { (const uint8_t *)"tag", 3 }, value = { (const uint8_t *)t->tag, strlen(t->tag) };
    (void)request; /* borrowed for this call only: copy what you keep */
    return t->host->out_set_param(out, name, value) == PAGING_OK /* proceed; call handle() with the page */
        ? PAGING_INTERCEPT_PROCEED_AND_OBSERVE : PAGING_INTERCEPT_FAIL;
}
static void tag_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    tagger *t = (tagger *)self; char msg[96];
    snprintf(msg, sizeof msg, "%s: page of %lu items", t->tag, (unsigned long)page->item_count);
    t->host->log(t->host, PAGING_LOG_DEBUG, msg); /* the host copies msg */
}
static void tag_destroy(paging_interceptor_t *self) { free(self); }
static paging_interceptor_t *tag_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    const char *tag = host->config_string(config, "tag"); /* NULL when absent or not a string */
    tagger *t; (void)id;
    if (tag == NULL && host->config_type(config, "tag") != PAGING_CONFIG_ABSENT) { /* there, but not a string */
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "tag: expected a string"); return NULL; }
    if ((t = (tagger *)calloc(1, sizeof *t)) == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    snprintf(t->tag, sizeof t->tag, "%s", tag ? tag : "guide"); /* copy: config dies with create */
    t->host = host; /* valid until destroy() returns */
    t->base.struct_size = (uint32_t)sizeof t->base; /* the ABI this table was built with */
    t->base.intercept = tag_intercept; t->base.handle = tag_handle; t->base.destroy = tag_destroy;
    return &t->base;
}
static const paging_plugin_descriptor_t tagger_descriptor = { PAGING_DESCRIPTOR_HEAD, "tagger", "Tagger",
    "1.0.0", "Adds the param tag to every request.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL };
static uint32_t count(void) { return 1; } static const paging_plugin_descriptor_t *describe(uint32_t i) { return i == 0 ? &tagger_descriptor : NULL; }
static const paging_plugin_entry_t entry = { PAGING_ENTRY_HEAD, count, describe, NULL, tag_create, NULL, NULL };
PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
