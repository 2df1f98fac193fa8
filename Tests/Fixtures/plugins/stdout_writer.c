/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/stdout_writer.c -o libstdout_writer.so */
/*
 * Fixture: plugins that write to standard output, as careless plugins do: printf, puts (with
 * and without a flush) and write(1, ...), each in create and in every fetch or intercept. The
 * host's data stream must not hold any of it.
 *   source "stdout-source": serves `count` items {"n":0}, {"n":1}... in pages; keys are
 *                           decimal indexes. Config: count, integer, default 30.
 *   interceptor "stdout-interceptor": passes every request on.
 * Every line written starts with "junk".
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paging/paging.h"

typedef struct sw_source {
    paging_source_t base;
    const paging_host_t *host;
    unsigned long count;
} sw_source;

/* Writes junk to fd 1 every way a plugin may: buffered by stdio, flushed, and unbuffered. */
static void sw_junk(const char *where)
{
    static const char raw[] = "junk from write(1)\n";
    ssize_t ignored;
    printf("junk from printf in %s\n", where);
    puts("junk from puts");
    fflush(stdout);
    printf("junk from printf in %s, never flushed\n", where);
    ignored = write(1, raw, sizeof raw - 1);
    (void)ignored;
}

static paging_bytes_t sw_number(char *buf, size_t cap, unsigned long value, const char *format)
{
    paging_bytes_t b;
    int n = snprintf(buf, cap, format, value);
    b.data = (const uint8_t *)buf;
    b.len = n > 0 ? (size_t)n : 0;
    return b;
}

static paging_status_t sw_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    sw_source *s = (sw_source *)self;
    paging_bytes_t key = { (const uint8_t *)"0", 1 };
    return s->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static paging_status_t sw_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    sw_source *s = (sw_source *)self;
    const paging_host_t *h = s->host;
    char buf[32];
    unsigned long key = 0, i, end;
    uint32_t flags = PAGING_PAGE_PREV_END;
    paging_bytes_t b;
    sw_junk("fetch");
    for (i = 0; i < request->key.len; i++) key = key * 10 + (unsigned long)(request->key.data[i] - '0');
    end = key + request->page_size < s->count ? key + request->page_size : s->count;
    for (i = key; i < end; i++) {
        b = sw_number(buf, sizeof buf, i, "{\"n\":%lu}");
        h->fetch_add_item(h, id, b);
    }
    if (end >= s->count) flags |= PAGING_PAGE_NEXT_END;
    else { b = sw_number(buf, sizeof buf, end, "%lu"); h->fetch_set_next_key(h, id, &b); }
    h->fetch_set_flags(h, id, flags);
    return h->fetch_complete(h, id);
}

static void sw_destroy_source(paging_source_t *self) { free(self); }

static paging_source_t *sw_create_source(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    sw_source *s = (sw_source *)calloc(1, sizeof *s);
    (void)plugin_id;
    sw_junk("create_source");
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    s->count = (unsigned long)host->config_int(config, "count", 30);
    s->base.plugin_data = s;
    s->base.refresh_key = sw_refresh_key;
    s->base.fetch = sw_fetch;
    s->base.destroy = sw_destroy_source;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

static uint32_t sw_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self;
    (void)request;
    (void)out;
    sw_junk("intercept");
    return PAGING_INTERCEPT_PROCEED;
}

static void sw_destroy_interceptor(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *sw_create_interceptor(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    paging_interceptor_t *p = (paging_interceptor_t *)calloc(1, sizeof *p);
    (void)plugin_id;
    sw_junk("create_interceptor");
    if (p == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    p->intercept = sw_intercept;
    p->destroy = sw_destroy_interceptor;
    p->struct_size = (uint32_t)sizeof *p;
    return p;
}

static const paging_plugin_descriptor_t sw_descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "stdout-source", "Stdout writer source (fixture)", "1.0.0",
      "Numbered items; writes junk to standard output.", PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "stdout-interceptor", "Stdout writer interceptor (fixture)", "1.0.0",
      "Passes requests on; writes junk to standard output.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};
static uint32_t sw_count(void) { return 2; }
static const paging_plugin_descriptor_t *sw_descriptor_at(uint32_t i) { return i < 2 ? &sw_descriptors[i] : NULL; }
static const paging_plugin_entry_t sw_entry = {
    PAGING_ENTRY_HEAD, sw_count, sw_descriptor_at, sw_create_source, sw_create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &sw_entry; }
