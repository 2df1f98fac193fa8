/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/numbered_source.c -o libnumbered_source.so */
/*
 * Fixture: source "numbered" serves `count` items {"n":0}, {"n":1}...; keys are decimal indexes,
 * the refresh key is `refresh_key`, and the next key is key + item count. Config:
 *   count        integer, default 30
 *   refresh_key  integer, default 5
 *   prev_keys    boolean, default true. When true, the prev key is max(0, key - page_size)
 *                WITHOUT a clamp (misbehaving): with the defaults and page size 10, the page
 *                before "5" is "0", which holds items 0...9 - repeating items 5...9 of the page
 *                at "5". When false, pages name no page before them, as a cursor API without
 *                a previous cursor.
 *   chdir        string: create changes the working folder to it (as a careless plugin may:
 *                relative paths of the plugins after it must not follow).
 *   ignore_sigchld  boolean, default false: create sets SIGCHLD to be ignored (children are
 *                reaped by the kernel: the host must still learn how its children end).
 *   null_keys    boolean, default false: create reads the config with NULL keys, and fails
 *                unless each is answered as for an absent key (a config may have the key "").
 */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "paging/paging.h"

typedef struct op_source {
    paging_source_t base;
    const paging_host_t *host;
    unsigned long count, refresh_key;
    uint32_t prev_keys;
} op_source;

static paging_bytes_t op_number(char *buf, size_t cap, unsigned long value, const char *format)
{
    paging_bytes_t b;
    int n = snprintf(buf, cap, format, value);
    b.data = (const uint8_t *)buf;
    b.len = n > 0 ? (size_t)n : 0;
    return b;
}

static paging_status_t op_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    op_source *s = (op_source *)self;
    char buf[24];
    paging_bytes_t k = op_number(buf, sizeof buf, s->refresh_key, "%lu");
    return s->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t op_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    op_source *s = (op_source *)self;
    const paging_host_t *h = s->host;
    char buf[32];
    unsigned long key = 0, i, end;
    uint32_t flags = 0;
    paging_bytes_t b;
    for (i = 0; i < request->key.len; i++) key = key * 10 + (unsigned long)(request->key.data[i] - '0');
    end = key + request->page_size < s->count ? key + request->page_size : s->count;
    for (i = key; i < end; i++) {
        b = op_number(buf, sizeof buf, i, "{\"n\":%lu}");
        h->fetch_add_item(h, id, b);
    }
    if (end >= s->count) flags |= PAGING_PAGE_NEXT_END;
    else { b = op_number(buf, sizeof buf, end, "%lu"); h->fetch_set_next_key(h, id, &b); }
    if (key == 0 || !s->prev_keys) flags |= PAGING_PAGE_PREV_END;
    else { b = op_number(buf, sizeof buf, key > request->page_size ? key - request->page_size : 0, "%lu"); h->fetch_set_prev_key(h, id, &b); }
    h->fetch_set_flags(h, id, flags);
    h->fetch_complete(h, id);
    return PAGING_OK;
}

static void op_destroy(paging_source_t *self) { free(self); }

static paging_source_t *op_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    op_source *s = (op_source *)calloc(1, sizeof *s);
    (void)plugin_id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    s->count = (unsigned long)host->config_int(config, "count", 30);
    s->refresh_key = (unsigned long)host->config_int(config, "refresh_key", 5);
    s->prev_keys = host->config_bool(config, "prev_keys", 1);
    if (host->config_string(config, "chdir") != NULL && chdir(host->config_string(config, "chdir")) != 0)
        host->log(host, PAGING_LOG_WARNING, "chdir failed");
    if (host->config_bool(config, "ignore_sigchld", 0)) signal(SIGCHLD, SIG_IGN);
    if (host->config_bool(config, "null_keys", 0)
        && (host->config_int(config, NULL, -1) != -1 || host->config_bool(config, NULL, 2) != 2
            || host->config_double(config, NULL, -1) != -1 || host->config_string(config, NULL) != NULL
            || host->config_type(config, NULL) != PAGING_CONFIG_ABSENT)) {
        host->config_fail(config, PAGING_ERR_INVALID_ARGUMENT, "a NULL key read a value");
        free(s);
        return NULL;
    }
    s->base.plugin_data = s;
    s->base.refresh_key = op_refresh_key;
    s->base.fetch = op_fetch;
    s->base.destroy = op_destroy;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

static const paging_plugin_descriptor_t op_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "numbered", "Numbered items (fixture)", "1.0.0",
    "Numbered items; prev keys that overlap, or none.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t op_count(void) { return 1; }
static const paging_plugin_descriptor_t *op_descriptor_at(uint32_t i) { return i == 0 ? &op_descriptor : NULL; }
static const paging_plugin_entry_t op_entry = { PAGING_ENTRY_HEAD, op_count, op_descriptor_at, op_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &op_entry; }
