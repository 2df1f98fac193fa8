/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/blocking_fetch.c -o libblocking_fetch.so */
/*
 * Misbehaving fixture: source "blocking-fetch" sleeps inside fetch() for `sleep_ms`
 * milliseconds (config, default 5000), or until the file `until_path` (config) exists (logging
 * "blocking-fetch: asleep" as it starts to), then
 * completes the fetch inside fetch() with one item {"woke":true} and no page before it. The first
 * `pass_first` fetches (config, default 0) do not sleep. Its key_chain names key + 1 after every
 * key (decimal keys from "0"), so loads also call it. With `exit_on` N (config), its Nth
 * fetch calls exit(`exit_status`) instead (a plugin ending the host's process). It logs
 * "blocking-fetch: woke after <ms> ms" as fetch() returns, and "blocking-fetch: cancel <id>"
 * when the host cancels a fetch, so a test can tell when each happened. With `block_key_chain`
 * (config, default 0), key_chain sleeps as fetch does instead, logging "blocking-fetch:
 * key_chain woke after <ms> ms". Serialized (not thread-safe). A host with a call timeout fails the load long before the plugin wakes up; a
 * host without one waits, holding the calling thread.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paging/paging.h"

typedef struct fixture {
    paging_source_t base;
    const paging_host_t *host;
    int64_t sleep_ms, pass_first, fetches, exit_on, exit_status, block_key_chain;
    char *until_path;
} fixture;

static paging_status_t fx_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    paging_bytes_t k;
    k.data = (const uint8_t *)"0";
    k.len = 1;
    return f->host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

/* Sleeps up to sleep_ms, or until until_path exists; returns the milliseconds slept. */
static int64_t fx_sleep(const fixture *f)
{
    struct timespec step;
    int64_t slept = 0;
    step.tv_sec = 0;
    step.tv_nsec = 5 * 1000000L;
    while (slept < f->sleep_ms && (f->until_path == NULL || access(f->until_path, F_OK) != 0)) {
        nanosleep(&step, NULL);
        slept += 5;
    }
    return slept;
}

static paging_status_t fx_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    fixture *f = (fixture *)self;
    char digits[32];
    long long n = 0;
    paging_bytes_t next;
    if (f->block_key_chain) {
        char msg[96];
        snprintf(msg, sizeof msg, "blocking-fetch: key_chain woke after %lld ms", (long long)fx_sleep(f));
        f->host->log(f->host, PAGING_LOG_INFO, msg);
    }
    for (size_t i = 0; i < key.len && i < 18; i++) n = n * 10 + (key.data[i] - '0');
    next.len = (size_t)snprintf(digits, sizeof digits, "%lld", n + 1);
    next.data = (const uint8_t *)digits;
    return f->host->keys_set(out, PAGING_KEY_NEXT, &next);
}

static paging_status_t fx_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fixture *f = (fixture *)self;
    int64_t slept = 0;
    char msg[96];
    paging_bytes_t item;
    (void)request;
    int sleeps = f->fetches++ >= f->pass_first; /* serialized: no lock needed */
    if (f->exit_on > 0 && f->fetches == f->exit_on) exit((int)f->exit_status);
    if (sleeps) {
        f->host->log(f->host, PAGING_LOG_INFO, "blocking-fetch: asleep");
        slept = fx_sleep(f);
    }
    snprintf(msg, sizeof msg, "blocking-fetch: woke after %lld ms", (long long)slept);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
    item.data = (const uint8_t *)"{\"woke\":true}";
    item.len = strlen("{\"woke\":true}");
    if (f->host->fetch_add_item(f->host, id, item) == PAGING_OK) {
        f->host->fetch_set_flags(f->host, id, PAGING_PAGE_PREV_END);
        f->host->fetch_complete(f->host, id);
    }
    return PAGING_OK;
}

static void fx_cancel(paging_source_t *self, uint64_t id)
{
    fixture *f = (fixture *)self;
    char msg[64];
    snprintf(msg, sizeof msg, "blocking-fetch: cancel %llu", (unsigned long long)id);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
}

static void fx_destroy(paging_source_t *self)
{
    fixture *f = (fixture *)self;
    free(f->until_path);
    free(f);
}

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    const char *path = host->config_string(config, "until_path");
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->sleep_ms = host->config_int(config, "sleep_ms", 5000);
    f->pass_first = host->config_int(config, "pass_first", 0);
    f->exit_on = host->config_int(config, "exit_on", 0);
    f->exit_status = host->config_int(config, "exit_status", 0);
    f->block_key_chain = host->config_int(config, "block_key_chain", 0);
    if (f->sleep_ms < 0) f->sleep_ms = 0;
    if (path != NULL) {
        f->until_path = (char *)malloc(strlen(path) + 1);
        if (f->until_path == NULL) { free(f); host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
        memcpy(f->until_path, path, strlen(path) + 1);
    }
    f->base.plugin_data = f;
    f->base.refresh_key = fx_refresh_key;
    f->base.key_chain = fx_key_chain;
    f->base.fetch = fx_fetch;
    f->base.cancel = fx_cancel;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "blocking-fetch", "Blocking fetch (fixture)", "1.0.0",
    "Sleeps sleep_ms inside fetch().", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
