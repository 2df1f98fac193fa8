/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/hostile_text.c -o libhostile_text.so */
/*
 * Fixture: source "hostile-text" hands the host text meant to forge or flood its output: log
 * lines and failure messages with newlines, escape sequences and other control characters, as
 * long as asked, and items spread over several lines. Config:
 *   log                string, logged at info by create (may hold any character)
 *   log_bytes          integer, default 0: without `log`, create logs a message of this many bytes
 *   create_fail        string: create fails (INVALID_CONFIG) with this message
 *   create_fail_bytes  integer, default 0: create fails with a message of this many bytes
 *   fail               string: every fetch fails (INTERNAL) with this message
 *   fail_bytes         integer, default 0: every fetch fails with a message of this many bytes
 *   fail_appends       boolean, default false: only appends fail (`fail`, `fail_bytes`); the
 *                      first page then has a next key
 *   items              "pretty" (default): 3 items, one JSON value each, with CR and LF
 *                      between their tokens; "raw_newline": an item with a raw newline inside
 *                      a string (not JSON)
 * Generated messages repeat a 32-byte unit holding a newline, a forged "[info]" line, ESC
 * sequences, BEL, DEL and C1 controls (U+009B CSI, as UTF-8).
 * The environment variable HOSTILE_TEXT_ID_BYTES, read by init(), makes the plugin's id that
 * many bytes long: "hostile-text", a newline and a forged line, then 'x's.
 */
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

static const char unit[] = "\n[info] x: forged\x1b[2J\x1b]0;t\x07\x7f\xc2\x9b" "0m ok ";

static char default_id[] = "hostile-text";
static char *plugin_id_text = default_id;

typedef struct ht_source {
    paging_source_t base;
    const paging_host_t *host;
    char *fail;
    int fail_appends;
    int raw_newline;
} ht_source;

/* A NUL-terminated message of `n` bytes made of `unit`, cut at a unit boundary or padded with
 * '.', so that it stays valid UTF-8. */
static char *ht_message(size_t n)
{
    size_t unit_len = sizeof unit - 1, i = 0;
    char *text = (char *)malloc(n + 1);
    if (text == NULL) return NULL;
    for (; i + unit_len <= n; i += unit_len) memcpy(text + i, unit, unit_len);
    memset(text + i, '.', n - i);
    text[n] = '\0';
    return text;
}

static char *ht_copy(const char *text)
{
    char *copy = (char *)malloc(strlen(text) + 1);
    if (copy != NULL) strcpy(copy, text);
    return copy;
}

static paging_status_t ht_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    ht_source *s = (ht_source *)self;
    paging_bytes_t key = { (const uint8_t *)"0", 1 };
    return s->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static paging_status_t ht_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    static const char *pretty[] = {
        "{\n  \"n\": 0,\r\n  \"s\": \"a b\"\n}",
        "[1,\n2,\r3]",
        "\n\"text \xc3\xa9 \xe2\x80\xa8\"\r\n", /* é, U+2028 */
    };
    ht_source *s = (ht_source *)self;
    const paging_host_t *h = s->host;
    paging_bytes_t item;
    size_t i;
    if (s->fail != NULL && (!s->fail_appends || request->kind == PAGING_REQUEST_APPEND))
        return h->fetch_fail(h, id, PAGING_ERR_INTERNAL, s->fail);
    if (s->raw_newline) {
        item.data = (const uint8_t *)"{\"s\":\"a\nb\"}";
        item.len = strlen((const char *)item.data);
        h->fetch_add_item(h, id, item);
    } else {
        for (i = 0; i < sizeof pretty / sizeof pretty[0]; i++) {
            item.data = (const uint8_t *)pretty[i];
            item.len = strlen(pretty[i]);
            h->fetch_add_item(h, id, item);
        }
    }
    if (s->fail_appends) {
        paging_bytes_t next = { (const uint8_t *)"1", 1 };
        h->fetch_set_next_key(h, id, &next);
        h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END);
    } else {
        h->fetch_set_flags(h, id, PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END);
    }
    return h->fetch_complete(h, id);
}

static void ht_destroy(paging_source_t *self)
{
    ht_source *s = (ht_source *)self;
    free(s->fail);
    free(s);
}

/* The config string `key`, or a generated message of `key_bytes` bytes; NULL for neither. */
static char *ht_text(const paging_host_t *host, const paging_config_t *config, const char *key, const char *key_bytes)
{
    const char *text = host->config_string(config, key);
    long long bytes = host->config_int(config, key_bytes, 0);
    if (text != NULL) return ht_copy(text);
    return bytes > 0 ? ht_message((size_t)bytes) : NULL;
}

static paging_source_t *ht_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    ht_source *s;
    char *text;
    const char *items = host->config_string(config, "items");
    (void)id;
    if ((text = ht_text(host, config, "log", "log_bytes")) != NULL) {
        host->log(host, PAGING_LOG_INFO, text);
        free(text);
    }
    if ((text = ht_text(host, config, "create_fail", "create_fail_bytes")) != NULL) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, text);
        free(text);
        return NULL;
    }
    s = (ht_source *)calloc(1, sizeof *s);
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    s->host = host;
    s->fail = ht_text(host, config, "fail", "fail_bytes");
    s->fail_appends = host->config_bool(config, "fail_appends", 0) != 0;
    s->raw_newline = items != NULL && strcmp(items, "raw_newline") == 0;
    s->base.plugin_data = s;
    s->base.refresh_key = ht_refresh_key;
    s->base.fetch = ht_fetch;
    s->base.destroy = ht_destroy;
    s->base.struct_size = (uint32_t)sizeof s->base;
    return &s->base;
}

static paging_plugin_descriptor_t ht_descriptor = {
    PAGING_DESCRIPTOR_HEAD, NULL, "Hostile text (fixture)", "1.0.0",
    "Logs and fails with text that tries to forge or flood the host's output.", PAGING_PLUGIN_SOURCE, 0, NULL
};

static paging_status_t ht_init(const paging_library_info_t *info)
{
    static const char head[] = "hostile-text\n[info] other-plugin: forged id ";
    const char *bytes = getenv("HOSTILE_TEXT_ID_BYTES");
    size_t n = bytes != NULL ? (size_t)strtoul(bytes, NULL, 10) : 0;
    (void)info;
    if (n > sizeof head) {
        plugin_id_text = (char *)malloc(n + 1);
        if (plugin_id_text == NULL) return PAGING_ERR_INTERNAL;
        memcpy(plugin_id_text, head, sizeof head - 1);
        memset(plugin_id_text + sizeof head - 1, 'x', n - (sizeof head - 1));
        plugin_id_text[n] = '\0';
    }
    ht_descriptor.id = plugin_id_text;
    return PAGING_OK;
}

static uint32_t ht_count(void) { return 1; }
static const paging_plugin_descriptor_t *ht_descriptor_at(uint32_t i) { return i == 0 ? &ht_descriptor : NULL; }
static const paging_plugin_entry_t ht_entry = {
    PAGING_ENTRY_HEAD, ht_count, ht_descriptor_at, ht_create, NULL, ht_init, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &ht_entry; }
