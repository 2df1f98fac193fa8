/*
 * jsonlines.c - a SwiftPaging source plugin serving the lines of a JSON Lines file as items.
 *
 * Plugin id: "jsonlines" (kind SOURCE, THREAD_SAFE: the instance is read-only after create).
 *
 * Config keys:
 *   path               string, required. The JSON Lines file (one JSON value per line). The host
 *                      resolves relative paths before the config reaches the plugin. A missing or
 *                      unreadable file fails create with PAGING_ERR_INVALID_CONFIG naming the path.
 *                      A path that is not a regular file (a FIFO, a device such as /dev/zero,
 *                      a socket, a folder) fails create the same way, saying what it is; it is
 *                      never read.
 *   default_page_size  integer, optional (default 20). Used when a request's page_size is 0.
 *   max_file_bytes     integer, optional (default 1073741824, 1 GiB; at most 1 TiB). A larger
 *                      file (or one growing past it while read) fails create naming the path.
 *
 * Any other key fails create naming it, as does a key of the wrong type.
 *
 * The whole file is read at create. Trailing spaces, tabs and "\r" and a leading UTF-8 byte-order
 * mark are dropped; lines left empty are skipped. Each remaining line is served as it is as one
 * item (it is not validated as JSON here: the host checks it, and when it refuses a page the
 * plugin logs which lines of the file the page held).
 *
 * Keys are decimal line indexes as UTF-8 text ("0", "20", ...); the refresh key is "0". There is
 * no key_chain: each page carries its neighbours' keys:
 *   next = key + item_count, or the PAGING_PAGE_NEXT_END flag when the last line was served;
 *   prev = key - page_size when key >= page_size; "0-<key>" when 0 < key < page_size (the lines
 *   before the page, fewer than a page: a range key "<first>-<end>" serves at most end - first
 *   lines, so a prepend never repeats lines already loaded); the PAGING_PAGE_PREV_END flag when
 *   key == 0.
 * A key that is not a decimal integer (or a range of two) fails the fetch with
 * PAGING_ERR_INVALID_REQUEST; one past line_count (given out before the file shrank) with
 * PAGING_ERR_NOT_FOUND. fetch completes synchronously, before it returns.
 *
 * Extensions offered: paging.health/1 (the file is still a readable regular file). Used where the
 * host offers it: paging.fetch-items/1 (a page's lines handed over in one call).
 *
 * build (third-party path): cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC \
 *                               -I Sources/CPaging/include Plugins/JSONLines/jsonlines.c -o libjsonlines.so
 */
#define _POSIX_C_SOURCE 200809L /* strdup */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

/* The default of config `max_file_bytes`, and its largest value (1 TiB, or what size_t holds). */
#define JSONL_DEFAULT_MAX_BYTES ((int64_t)1 << 30)
#define JSONL_MAX_MAX_BYTES ((uint64_t)SIZE_MAX - 1 < 1099511627776ULL ? (uint64_t)SIZE_MAX - 1 : 1099511627776ULL)

typedef struct jsonl_line {
    size_t offset; /* byte offset of the line in jsonl_state.data */
    size_t len;    /* length without the line terminator */
} jsonl_line;

typedef struct jsonl_state {
    paging_source_t source; /* first member: `self` points here */
    const paging_host_t *host;
    uint8_t *data;          /* whole file */
    jsonl_line *lines;      /* non-empty lines */
    size_t line_count;
    uint32_t default_page_size;
    char *path;             /* the file, for the health check */
    const paging_ext_fetch_items_host_t *fetch_items; /* a page's items in one call, or NULL (a host before 1.2) */
} jsonl_state;

static const paging_plugin_descriptor_t jsonl_descriptor = {
    PAGING_DESCRIPTOR_HEAD,
    "jsonlines",
    "JSON Lines file",
    "1.0.0",
    "Serves the lines of a JSON Lines file as items; keys are decimal line indexes.",
    PAGING_PLUGIN_SOURCE,
    PAGING_PLUGIN_THREAD_SAFE, NULL
};

/* ---- file loading ---------------------------------------------------------------------- */

/* What a path that is not a regular file is, for the error naming it. */
static const char *jsonl_file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if ((mode & S_IFMT) == S_IFSOCK) return "a socket";
    return "not a regular file";
}

/* Reads the regular file at `path` whole into a malloc'ed buffer, at most `max` bytes. Returns
 * 1, or 0 with the reason in msg[0..cap) naming the path. The file is opened with O_NONBLOCK (a
 * FIFO without a writer blocks a plain open for ever) and checked with fstat before any read, so
 * a FIFO, a device (/dev/zero reads without end) or a socket is refused, and what is read is the
 * file that was checked. A file that grows past `max` while it is read is refused too. */
static int jsonl_read_file(const char *path, size_t max, uint8_t **out_data, size_t *out_len,
                           char *msg, size_t cap)
{
    struct stat info;
    uint8_t *buf = NULL;
    size_t len = 0, size = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        /* A socket refuses open() with ENXIO: name what the path is rather than the errno. */
        if (stat(path, &info) == 0 && !S_ISREG(info.st_mode))
            snprintf(msg, cap, "jsonlines: config `path` '%.1000s' is %s, not a regular file", path,
                     jsonl_file_kind(info.st_mode));
        else
            snprintf(msg, cap, "jsonlines: cannot read '%.1000s': %s", path, strerror(e));
        return 0;
    }
    if (fstat(fd, &info) != 0) {
        snprintf(msg, cap, "jsonlines: cannot read '%.1000s': %s", path, strerror(errno));
        close(fd);
        return 0;
    }
    if (!S_ISREG(info.st_mode)) {
        snprintf(msg, cap, "jsonlines: config `path` '%.1000s' is %s, not a regular file", path,
                 jsonl_file_kind(info.st_mode));
        close(fd);
        return 0;
    }
    if (info.st_size < 0 || (uintmax_t)info.st_size > (uintmax_t)max) {
        snprintf(msg, cap, "jsonlines: '%.1000s' is %lld bytes, more than config `max_file_bytes` (%lu)",
                 path, (long long)info.st_size, (unsigned long)max);
        close(fd);
        return 0;
    }
    /* One byte more than the size: reading 0 bytes into it says the end was reached. */
    size = (size_t)info.st_size + 1;
    for (;;) {
        ssize_t n;
        if (len == size) {
            size_t nsize = size > max / 2 ? max + 1 : size * 2;
            uint8_t *nbuf;
            if (len > max) {
                snprintf(msg, cap, "jsonlines: '%.1000s' grew past config `max_file_bytes` (%lu) while it was read",
                         path, (unsigned long)max);
                free(buf);
                close(fd);
                return 0;
            }
            nbuf = (uint8_t *)realloc(buf, nsize);
            if (nbuf == NULL) break;
            buf = nbuf;
            size = nsize;
        } else if (buf == NULL) {
            buf = (uint8_t *)malloc(size);
            if (buf == NULL) break;
        }
        n = read(fd, buf + len, size - len);
        if (n == 0) {
            close(fd);
            *out_data = buf;
            *out_len = len;
            return 1;
        }
        if (n < 0) {
            if (errno == EINTR) continue;
            snprintf(msg, cap, "jsonlines: cannot read '%.1000s': %s", path, strerror(errno));
            free(buf);
            close(fd);
            return 0;
        }
        len += (size_t)n;
    }
    snprintf(msg, cap, "jsonlines: out of memory reading '%.1000s' (%lu bytes)", path, (unsigned long)size);
    free(buf);
    close(fd);
    return 0;
}

/* Splits data[0..len) into non-empty lines; returns 0 on allocation failure. */
static int jsonl_index_lines(jsonl_state *st, size_t len)
{
    size_t cap = 0, pos = 0;
    if (len >= 3 && st->data[0] == 0xEF && st->data[1] == 0xBB && st->data[2] == 0xBF) pos = 3;
    while (pos < len) {
        const uint8_t *nl = (const uint8_t *)memchr(st->data + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - st->data) : len;
        size_t line_len = end - pos;
        while (line_len > 0 && (st->data[pos + line_len - 1] == '\r' || st->data[pos + line_len - 1] == ' '
                                || st->data[pos + line_len - 1] == '\t'))
            line_len--;
        if (line_len > 0) {
            if (st->line_count == cap) {
                size_t ncap = cap ? cap * 2 : 256;
                jsonl_line *nl2 = (jsonl_line *)realloc(st->lines, ncap * sizeof *nl2);
                if (nl2 == NULL) return 0;
                st->lines = nl2;
                cap = ncap;
            }
            st->lines[st->line_count].offset = pos;
            st->lines[st->line_count].len = line_len;
            st->line_count++;
        }
        pos = end + 1;
    }
    return 1;
}

/* ---- source functions ------------------------------------------------------------------ */

/* Parses a decimal key ("0", "20"); returns 0 when it is not a plain non-negative integer. */
/* Parses a decimal number of 1...19 digits. */
static int jsonl_parse_number(const uint8_t *data, size_t len, size_t *out)
{
    size_t i, v = 0;
    if (len == 0 || len > 19 || data == NULL) return 0;
    for (i = 0; i < len; i++) {
        if (data[i] < '0' || data[i] > '9') return 0;
        if (v > ((size_t)-1 - 9) / 10) return 0;
        v = v * 10 + (size_t)(data[i] - '0');
    }
    *out = v;
    return 1;
}

/* Parses a key: "<first>", or "<first>-<end>" with first < end (*end = (size_t)-1 without one). */
static int jsonl_parse_key(paging_bytes_t key, size_t *first, size_t *end)
{
    const uint8_t *dash = key.data ? (const uint8_t *)memchr(key.data, '-', key.len) : NULL;
    if (dash == NULL) {
        *end = (size_t)-1;
        return jsonl_parse_number(key.data, key.len, first);
    }
    return jsonl_parse_number(key.data, (size_t)(dash - key.data), first)
        && jsonl_parse_number(dash + 1, key.len - (size_t)(dash - key.data) - 1, end) && *first < *end;
}

static paging_bytes_t jsonl_key_bytes(char *buf, size_t cap, size_t value)
{
    paging_bytes_t b;
    int n = snprintf(buf, cap, "%lu", (unsigned long)value);
    b.data = (const uint8_t *)buf;
    b.len = n > 0 ? (size_t)n : 0;
    return b;
}

static paging_status_t jsonl_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    jsonl_state *st = (jsonl_state *)self;
    paging_bytes_t zero;
    zero.data = (const uint8_t *)"0";
    zero.len = 1;
    return st->host->keys_set(out, PAGING_KEY_CURRENT, &zero);
}

/* The number in the file (from 1, counting skipped lines) of served line `index`. */
static size_t jsonl_file_line(const jsonl_state *st, size_t index)
{
    const uint8_t *p = st->data, *end = st->data + st->lines[index].offset;
    size_t line = 1;
    while ((p = (const uint8_t *)memchr(p, '\n', (size_t)(end - p))) != NULL) {
        line++;
        p++;
    }
    return line;
}

/* Hands the host lines first...first+count-1: in one call where it offers paging.fetch-items/1
 * (in runs of up to 256, lent from the stack), else one call a line. */
static paging_status_t jsonl_add_items(const jsonl_state *st, uint64_t fetch_id, size_t first, size_t count)
{
    const paging_host_t *h = st->host;
    paging_bytes_t run[256];
    size_t done = 0, i;
    while (done < count) {
        size_t n = st->fetch_items != NULL ? count - done : 1;
        paging_status_t status;
        if (n > sizeof run / sizeof run[0]) n = sizeof run / sizeof run[0];
        for (i = 0; i < n; i++) {
            run[i].data = st->data + st->lines[first + done + i].offset;
            run[i].len = st->lines[first + done + i].len;
        }
        status = st->fetch_items != NULL ? st->fetch_items->add_items(h, fetch_id, run, n) : h->fetch_add_item(h, fetch_id, run[0]);
        if (status != PAGING_OK) return status;
        done += n;
    }
    return PAGING_OK;
}

static paging_status_t jsonl_fetch(paging_source_t *self, const paging_request_t *request, uint64_t fetch_id)
{
    jsonl_state *st = (jsonl_state *)self;
    const paging_host_t *h = st->host;
    size_t key, end, page_size, count;
    uint32_t flags = 0;
    char buf[32];
    paging_bytes_t kb;

    if (!jsonl_parse_key(request->key, &key, &end)) {
        char msg[128];
        snprintf(msg, sizeof msg, "jsonlines: key is not a line index in 0...%lu (nor a range first-end of them)",
                 (unsigned long)st->line_count);
        h->fetch_fail(h, fetch_id, PAGING_ERR_INVALID_REQUEST, msg);
        return PAGING_OK;
    }
    if (key > st->line_count) {
        char msg[1200];
        snprintf(msg, sizeof msg, "jsonlines: no line %lu: '%.1000s' has %lu (it changed since the key was given out?)",
                 (unsigned long)key, st->path, (unsigned long)st->line_count);
        h->fetch_fail(h, fetch_id, PAGING_ERR_NOT_FOUND, msg);
        return PAGING_OK;
    }
    page_size = request->page_size ? request->page_size : st->default_page_size;
    count = page_size;
    if (end != (size_t)-1 && end - key < count) count = end - key;
    if (count > st->line_count - key) count = st->line_count - key;

    if (jsonl_add_items(st, fetch_id, key, count) != PAGING_OK) {
        /* The host ended the fetch, saying which item of the page it refused: say where the page is. */
        char msg[1200];
        snprintf(msg, sizeof msg, "jsonlines: the host refused the page of lines %lu-%lu of '%.1000s' (counted from 1, blank lines too)",
                 (unsigned long)jsonl_file_line(st, key), (unsigned long)jsonl_file_line(st, key + count - 1), st->path);
        h->log(h, PAGING_LOG_ERROR, msg);
        return PAGING_OK;
    }
    if (key + count >= st->line_count) {
        flags |= PAGING_PAGE_NEXT_END;
    } else {
        kb = jsonl_key_bytes(buf, sizeof buf, key + count);
        h->fetch_set_next_key(h, fetch_id, &kb);
    }
    if (key == 0) {
        flags |= PAGING_PAGE_PREV_END;
    } else if (key >= page_size) {
        kb = jsonl_key_bytes(buf, sizeof buf, key - page_size);
        h->fetch_set_prev_key(h, fetch_id, &kb);
    } else {
        int n = snprintf(buf, sizeof buf, "0-%lu", (unsigned long)key);
        kb.data = (const uint8_t *)buf;
        kb.len = n > 0 ? (size_t)n : 0;
        h->fetch_set_prev_key(h, fetch_id, &kb);
    }
    h->fetch_set_flags(h, fetch_id, flags);
    h->fetch_complete(h, fetch_id);
    return PAGING_OK;
}

static void jsonl_destroy(paging_source_t *self)
{
    jsonl_state *st = (jsonl_state *)self;
    free(st->lines);
    free(st->data);
    free(st->path);
    free(st);
}

/* paging.health/1: the items were read at create; say whether the file could be read again. */
static paging_status_t jsonl_health(void *self)
{
    jsonl_state *st = (jsonl_state *)self;
    struct stat info;
    char msg[1200];
    if (stat(st->path, &info) == 0 && S_ISREG(info.st_mode) && access(st->path, R_OK) == 0) return PAGING_OK;
    snprintf(msg, sizeof msg, "cannot read '%.1000s' any more: %s", st->path,
             errno != 0 ? strerror(errno) : "not a regular file");
    st->host->log(st->host, PAGING_LOG_ERROR, msg);
    return PAGING_ERR_NOT_FOUND;
}

static const paging_ext_health_t jsonl_health_ext = { jsonl_health };

static const void *jsonl_get_extension(paging_source_t *self, const char *id)
{
    (void)self;
    return strcmp(id, PAGING_EXT_HEALTH) == 0 ? &jsonl_health_ext : NULL;
}

/* ---- entry ----------------------------------------------------------------------------- */

/* Whether every top-level key of the config (valid JSON: the host parsed it) is one this plugin
 * reads; otherwise `msg` names the first other one. */
static int jsonl_known_keys(const char *json, char *msg, size_t msg_len)
{
    static const char *const known[] = { "path", "default_page_size", "max_file_bytes" };
    const char *p = json;
    int depth = 0, in_string = 0, at_key = 0;
    const char *key = NULL;
    if (p == NULL) return 1;
    for (; *p; p++) {
        if (in_string) {
            if (*p == '\\' && p[1]) { p++; continue; }
            if (*p != '"') continue;
            in_string = 0;
            if (key != NULL) {
                size_t len = (size_t)(p - key), i;
                int ok = 0;
                for (i = 0; i < sizeof known / sizeof known[0]; i++)
                    if (strlen(known[i]) == len && memcmp(known[i], key, len) == 0) ok = 1;
                if (!ok) {
                    snprintf(msg, msg_len, "jsonlines: config `%.*s`: unknown key; expected path, default_page_size or max_file_bytes",
                             (int)(len > 200 ? 200 : len), key);
                    return 0;
                }
                key = NULL;
            }
            continue;
        }
        switch (*p) {
        case '"':
            in_string = 1;
            if (depth == 1 && at_key) key = p + 1;
            at_key = 0;
            break;
        case '{': case '[': depth++; at_key = *p == '{' && depth == 1; break;
        case '}': case ']': depth--; break;
        case ',': if (depth == 1) at_key = 1; break;
        default: break;
        }
    }
    return 1;
}

static paging_source_t *jsonl_create_source(const char *plugin_id, const paging_host_t *host,
                                            const paging_config_t *config)
{
    char msg[1200];
    const char *path;
    jsonl_state *st;
    size_t len = 0;
    int64_t dps, max_bytes;

    if (plugin_id == NULL || strcmp(plugin_id, "jsonlines") != 0) {
        host->config_fail(config, PAGING_ERR_NOT_FOUND, "jsonlines: unknown plugin id");
        return NULL;
    }
    if (!jsonl_known_keys(host->config_json(config), msg, sizeof msg)) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
        return NULL;
    }
    path = host->config_string(config, "path");
    if (path == NULL || path[0] == '\0') {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG,
                          "jsonlines: config `path` (string) is required");
        return NULL;
    }
    dps = host->config_int(config, "default_page_size", 20);
    if ((host->config_type(config, "default_page_size") != PAGING_CONFIG_ABSENT
         && host->config_type(config, "default_page_size") != PAGING_CONFIG_INT)
        || dps < 1 || dps > 1000000) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG,
                          "jsonlines: config `default_page_size` must be an integer in 1...1000000");
        return NULL;
    }
    max_bytes = host->config_int(config, "max_file_bytes", JSONL_DEFAULT_MAX_BYTES);
    if ((host->config_type(config, "max_file_bytes") != PAGING_CONFIG_ABSENT
         && host->config_type(config, "max_file_bytes") != PAGING_CONFIG_INT)
        || max_bytes < 1 || (uint64_t)max_bytes > JSONL_MAX_MAX_BYTES) {
        snprintf(msg, sizeof msg, "jsonlines: config `max_file_bytes` must be an integer in 1...%llu",
                 (unsigned long long)JSONL_MAX_MAX_BYTES);
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
        return NULL;
    }
    st = (jsonl_state *)calloc(1, sizeof *st);
    if (st == NULL) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "jsonlines: out of memory");
        return NULL;
    }
    if (!jsonl_read_file(path, (size_t)max_bytes, &st->data, &len, msg, sizeof msg)) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
        free(st);
        return NULL;
    }
    if (!jsonl_index_lines(st, len)) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "jsonlines: out of memory");
        jsonl_destroy(&st->source);
        return NULL;
    }
    st->path = strdup(path); /* the config string dies when create returns */
    if (st->path == NULL) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "jsonlines: out of memory");
        jsonl_destroy(&st->source);
        return NULL;
    }
    st->host = host;
    st->fetch_items = (const paging_ext_fetch_items_host_t *)host->get_extension(host, PAGING_EXT_FETCH_ITEMS);
    st->default_page_size = (uint32_t)dps;
    st->source.plugin_data = st;
    st->source.refresh_key = jsonl_refresh_key;
    st->source.key_chain = NULL;   /* keys come with each page */
    st->source.fetch = jsonl_fetch;
    st->source.cancel = NULL;      /* fetch completes before it returns */
    st->source.destroy = jsonl_destroy;
    st->source.struct_size = (uint32_t)sizeof st->source;
    st->source.get_extension = jsonl_get_extension;
    snprintf(msg, sizeof msg, "jsonlines: loaded %lu lines from '%.1000s'",
             (unsigned long)st->line_count, path);
    host->log(host, PAGING_LOG_DEBUG, msg);
    return &st->source;
}

static uint32_t jsonl_plugin_count(void) { return 1; }

static const paging_plugin_descriptor_t *jsonl_descriptor_at(uint32_t index)
{
    return index == 0 ? &jsonl_descriptor : NULL;
}

static const paging_plugin_entry_t jsonl_entry = {
    PAGING_ENTRY_HEAD,
    jsonl_plugin_count,
    jsonl_descriptor_at,
    jsonl_create_source,
    NULL, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void)
{
    return &jsonl_entry;
}
