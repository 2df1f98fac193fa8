/*
 * counter.c - an example third-party SwiftPaging interceptor in plain C. Copy it to start yours.
 *
 * Plugin id: "c-counter" (kind INTERCEPTOR, not THREAD_SAFE: the host serializes calls, so the
 * counters need no locks). It counts requests per kind, logs each one at INFO through host->log,
 * lets the request proceed unchanged (PROCEED_AND_OBSERVE) and logs the page's item count in
 * handle().
 *
 * Config keys:
 *   label  string, optional (default "counter"). Prefix of every log line.
 *
 * Build: make   (plain cc, needs only libc and the headers in Sources/CPaging/include)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

typedef struct counter {
    paging_interceptor_t base;  /* first member, so `self` casts to counter * */
    const paging_host_t *host;  /* valid until destroy() returns */
    char label[64];             /* copied: config strings die when create returns */
    unsigned long counts[3];    /* per PAGING_REQUEST_* kind */
} counter;

static uint32_t counter_intercept(paging_interceptor_t *self, const paging_request_t *request,
                                  paging_intercept_out_t *out)
{
    static const char *const names[3] = { "refresh", "prepend", "append" };
    counter *c = (counter *)self;
    char msg[160];
    uint32_t kind = request->kind < 3 ? request->kind : 0;
    (void)out;                  /* nothing to rewrite: proceed as is */
    c->counts[kind]++;
    snprintf(msg, sizeof msg, "%s: %s #%lu (key '%.*s', page size %u)", c->label, names[kind],
             c->counts[kind], (int)(request->key.len > 32 ? 32 : request->key.len),
             request->key.len ? (const char *)request->key.data : "", (unsigned)request->page_size);
    c->host->log(c->host, PAGING_LOG_INFO, msg); /* the host copies msg */
    return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
}

static void counter_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    counter *c = (counter *)self;
    char msg[128];
    snprintf(msg, sizeof msg, "%s: page with %lu items", c->label, (unsigned long)page->item_count);
    c->host->log(c->host, PAGING_LOG_INFO, msg);
}

static void counter_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *counter_create(const char *plugin_id, const paging_host_t *host,
                                            const paging_config_t *config)
{
    const char *label = host->config_string(config, "label");
    counter *c;
    (void)plugin_id;            /* this library has one interceptor */
    /* Absent is the default; present but not a string is a mistake to refuse, saying why. */
    if (label == NULL && host->config_type(config, "label") != PAGING_CONFIG_ABSENT) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "label: expected a string");
        return NULL;
    }
    c = (counter *)calloc(1, sizeof *c);
    if (c == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    snprintf(c->label, sizeof c->label, "%s", label ? label : "counter");
    c->host = host;
    c->base.plugin_data = c;
    c->base.intercept = counter_intercept;
    c->base.handle = counter_handle;
    c->base.destroy = counter_destroy;
    c->base.struct_size = (uint32_t)sizeof c->base;
    return &c->base;
}

static const paging_plugin_descriptor_t descriptor = {
    PAGING_DESCRIPTOR_HEAD, "c-counter", "Request counter (C example)", "1.0.0",
    "Counts and logs requests per kind; logs each page's item count.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t plugin_count(void) { return 1; }
static const paging_plugin_descriptor_t *descriptor_at(uint32_t i) { return i == 0 ? &descriptor : NULL; }
static const paging_plugin_entry_t entry = {
    PAGING_ENTRY_HEAD, plugin_count, descriptor_at, NULL, counter_create, NULL, NULL
};

/* The one exported symbol; everything above is static. */
PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
