/*
 * csv_source.c - an example SwiftPaging SOURCE in plain C: serves the rows of a CSV file.
 *
 * Plugin id "csv" (kind SOURCE, THREAD_SAFE: the instance is read-only after create). Config:
 *   path       string, required: the CSV file (relative paths are resolved against the manifest).
 *   page_size  integer in 1...100000, optional (default 10): rows per page. A request's page_size
 *              is only a hint; this source keeps its own so that key_chain() can work.
 * The first row names the columns; every other row is served as one JSON object of strings,
 * {"name":"value",...}. Fields follow RFC 4180 (a quoted field may hold commas, line breaks and
 * doubled quotes ""); names and values are JSON-escaped. Empty lines are skipped.
 * Keys are decimal row offsets ("0", "10", ...): key_chain() names a page's neighbours, fetch()
 * completes before it returns. Offers paging.health/1: "can the file still be opened?".
 *
 * Build: make   (plain cc; needs only libc and the headers in Sources/CPaging/include)
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "paging/paging.h"

/* A growable byte buffer; `failed` remembers an allocation failure, checked once at the end. */
typedef struct buf { char *s; size_t len, cap; int failed; } buf;
static void put(buf *b, const void *data, size_t n) {
    char *s;
    if (b->failed || n == 0) return;
    if (b->len + n > b->cap) {
        if ((s = (char *)realloc(b->s, (b->len + n) * 2)) == NULL) { b->failed = 1; return; }
        b->s = s; b->cap = (b->len + n) * 2;
    }
    memcpy(b->s + b->len, data, n); b->len += n;
}
/* Appends byte c as it must appear inside a JSON string. UTF-8 passes through as is: the host
 * checks every item and fails a page holding invalid UTF-8, naming the plugin and the item. */
static void put_escaped(buf *b, unsigned char c) {
    char e[8];
    if (c == '"' || c == '\\') { e[0] = '\\'; e[1] = (char)c; put(b, e, 2); }
    else if (c == '\n') put(b, "\\n", 2);
    else if (c == '\t') put(b, "\\t", 2);
    else if (c < 0x20) { snprintf(e, sizeof e, "\\u%04x", c); put(b, e, 6); }
    else put(b, &c, 1);
}
/* Appends the CSV field at *p, JSON-escaped, to b and moves *p past it and its separator.
 * Returns 1 when the field ends its row. */
static int field(const char **p, const char *end, buf *b) {
    const char *s = *p;
    int quoted = s < end && *s == '"';
    for (s += quoted; s < end; s++) {
        if (quoted && *s == '"') {
            if (s + 1 < end && s[1] == '"') s++;          /* "" is one quote: appended below */
            else { quoted = 0; continue; }                /* the closing quote */
        } else if (!quoted && (*s == ',' || *s == '\n')) break;
        else if (!quoted && *s == '\r') continue;         /* CRLF line ends */
        put_escaped(b, (unsigned char)*s);
    }
    *p = s < end ? s + 1 : end;
    return s >= end || *s == '\n';
}

typedef struct csv {
    paging_source_t base;       /* first member: `self` points here */
    const paging_host_t *host;  /* valid until destroy() returns */
    char *path;                 /* copied: config strings die when create returns */
    buf items, ends;            /* every row's JSON object, back to back; each one's end (size_t) */
    size_t rows, page_size;
} csv;

/* A key is a decimal row offset: "0", or a row that exists. */
static int parse_key(const csv *c, paging_bytes_t key, size_t *row) {
    size_t i;
    if (key.len == 0 || key.len > 18) return 0;
    for (*row = 0, i = 0; i < key.len; i++) {
        if (key.data[i] < '0' || key.data[i] > '9') return 0;
        *row = *row * 10 + (size_t)(key.data[i] - '0');
    }
    return *row == 0 || *row < c->rows;
}
static paging_status_t set_key(const csv *c, paging_keys_out_t *out, uint32_t slot, size_t row) {
    char text[24];
    paging_bytes_t key = { (const uint8_t *)text, 0 };
    key.len = (size_t)snprintf(text, sizeof text, "%lu", (unsigned long)row);
    return c->host->keys_set(out, slot, &key); /* `out` belongs to this call: use it now, here */
}
static paging_status_t csv_refresh_key(paging_source_t *self, paging_keys_out_t *out) {
    return set_key((csv *)self, out, PAGING_KEY_CURRENT, 0);
}
static paging_status_t csv_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out) {
    csv *c = (csv *)self;
    size_t row, size = c->page_size;
    paging_status_t status = PAGING_OK;
    if (!parse_key(c, key, &row)) return PAGING_ERR_INVALID_REQUEST;
    if (row > 0) status = set_key(c, out, PAGING_KEY_PREV, row > size ? row - size : 0);
    if (status == PAGING_OK && row + size < c->rows) status = set_key(c, out, PAGING_KEY_NEXT, row + size);
    return status; /* a slot left unset: no page in that direction */
}
static paging_status_t csv_fetch(paging_source_t *self, const paging_request_t *request, uint64_t fetch_id) {
    csv *c = (csv *)self;
    const paging_host_t *h = c->host;
    const size_t *ends = (const size_t *)(const void *)c->ends.s;
    size_t row, last, count;
    if (!parse_key(c, request->key, &row)) return PAGING_ERR_INVALID_REQUEST; /* failed now */
    last = row + c->page_size < c->rows ? row + c->page_size : c->rows;
    for (count = last > row ? last - row : 0; row < last; row++) {
        size_t start = row > 0 ? ends[row - 1] : 0;
        paging_bytes_t item = { (const uint8_t *)c->items.s + start, ends[row] - start };
        if (h->fetch_add_item(h, fetch_id, item) != PAGING_OK) return PAGING_OK; /* the host ended it */
    }
    /* Cut at this source's page size, shorter than asked: not the end of the data, and not to be
     * loaded again in case it grew (ABI 1.3; an older host ignores the flag). */
    if (count == c->page_size && c->page_size < request->page_size) h->fetch_set_flags(h, fetch_id, PAGING_PAGE_SHORTENED);
    h->fetch_complete(h, fetch_id); /* the keys come from key_chain(): none to set here */
    return PAGING_OK;
}
static void csv_destroy(paging_source_t *self) {
    csv *c = (csv *)self;
    free(c->items.s); free(c->ends.s); free(c->path); free(c);
}
/* paging.health/1: can the file still be read? Says why not through host->log. */
static paging_status_t csv_health(void *self) {
    csv *c = (csv *)self;
    char msg[300];
    FILE *f = fopen(c->path, "rb");
    if (f != NULL) { fclose(f); return PAGING_OK; }
    snprintf(msg, sizeof msg, "cannot read %.200s: %s", c->path, strerror(errno));
    c->host->log(c->host, PAGING_LOG_ERROR, msg); /* the host prefixes "[error] csv: " */
    return PAGING_ERR_NOT_FOUND;
}
static const paging_ext_health_t csv_health_ext = { csv_health };
static const void *csv_get_extension(paging_source_t *self, const char *id) {
    (void)self;
    return strcmp(id, PAGING_EXT_HEALTH) == 0 ? &csv_health_ext : NULL;
}

/* Reads the file into c->items, one JSON object per row; returns an error message, or NULL. */
static const char *load(csv *c, FILE *f) {
    buf file = { NULL, 0, 0, 0 }, names = { NULL, 0, 0, 0 }; /* names: escaped, a NUL after each */
    char chunk[4096];
    const char *p, *end, *name, *error = NULL;
    size_t n, columns = 0, column; int ended;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) put(&file, chunk, n);
    p = file.s; end = p != NULL ? p + file.len : p; /* NULL: an empty file */
    if (file.len >= 3 && memcmp(p, "\xEF\xBB\xBF", 3) == 0) p += 3; /* a UTF-8 byte-order mark */
    do { ended = field(&p, end, &names); put(&names, "", 1); columns++; } while (!ended);
    while (p < end && !names.failed && error == NULL) {
        if (*p == '\n' || *p == '\r') { p++; continue; } /* an empty line */
        put(&c->items, "{", 1);
        for (name = names.s, column = 0, ended = 0; !ended; name += strlen(name) + 1) {
            if (column++ == columns) { error = "a row has more fields than the header"; break; }
            put(&c->items, column == 1 ? "\"" : ",\"", column == 1 ? 1 : 2);
            put(&c->items, name, strlen(name)); put(&c->items, "\":\"", 3);
            ended = field(&p, end, &c->items);
            put(&c->items, "\"", 1);
        }
        put(&c->items, "}", 1);
        put(&c->ends, &c->items.len, sizeof c->items.len);
        c->rows++;
    }
    if (file.failed || names.failed || c->items.failed || c->ends.failed) error = "out of memory";
    free(file.s); free(names.s);
    return error;
}
static paging_source_t *csv_create(const char *id, const paging_host_t *host, const paging_config_t *config) {
    const char *path = host->config_string(config, "path"), *error = "out of memory";
    uint32_t size_type = host->config_type(config, "page_size");
    int64_t size = host->config_int(config, "page_size", 10);
    char msg[300]; FILE *f; csv *c;
    (void)id; /* this library has one plugin */
    if (path == NULL) /* absent, or not a string: config_type tells which */
        error = host->config_type(config, "path") == PAGING_CONFIG_ABSENT
                ? "path is required: the CSV file to serve" : "path: expected a string";
    else if (size_type != PAGING_CONFIG_ABSENT && (size_type != PAGING_CONFIG_INT || size < 1 || size > 100000))
        error = "page_size: expected an integer in 1...100000";
    else if ((f = fopen(path, "rb")) == NULL) {
        snprintf(msg, sizeof msg, "cannot read %.200s: %s", path, strerror(errno));
        error = msg;
    } else {
        if ((c = (csv *)calloc(1, sizeof *c)) != NULL && (c->path = strdup(path)) != NULL) error = load(c, f);
        fclose(f);
        if (error == NULL) {
            c->host = host; c->page_size = (size_t)size; c->base.plugin_data = c;
            c->base.refresh_key = csv_refresh_key; c->base.key_chain = csv_key_chain;
            c->base.fetch = csv_fetch; c->base.destroy = csv_destroy; /* no cancel: fetch() never waits */
            c->base.get_extension = csv_get_extension;
            c->base.struct_size = (uint32_t)sizeof c->base; /* the table's size in these headers */
            snprintf(msg, sizeof msg, "%lu rows from %.200s", (unsigned long)c->rows, path);
            host->log(host, PAGING_LOG_DEBUG, msg); /* the host prefixes "[debug] csv: " */
            return &c->base;
        }
        if (c != NULL) csv_destroy(&c->base);
    }
    host->config_fail(config, strcmp(error, "out of memory") == 0 ? PAGING_ERR_INTERNAL : PAGING_ERR_INVALID_CONFIG,
                      error); /* the host copies the message */
    return NULL;
}

static const paging_plugin_descriptor_t descriptor = { PAGING_DESCRIPTOR_HEAD, "csv", "CSV file (C example)",
    "1.0.0", "Serves the rows of a CSV file as JSON objects; keys are row offsets.",
    PAGING_PLUGIN_SOURCE, PAGING_PLUGIN_THREAD_SAFE, NULL /* required_extensions: none */ };
static uint32_t plugin_count(void) { return 1; }
static const paging_plugin_descriptor_t *descriptor_at(uint32_t i) { return i == 0 ? &descriptor : NULL; }
static const paging_plugin_entry_t entry = { PAGING_ENTRY_HEAD, plugin_count, descriptor_at,
    csv_create, NULL /* create_interceptor */, NULL, NULL /* init, deinit */ };
/* The one exported symbol; everything above is static. */
PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
