/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -I Sources/CPaging/include Tests/Fixtures/plugins/overlap_probe.c -o liboverlap_probe.so */
/*
 * Fixture: source "overlap-probe", flagged THREAD_SAFE, that counts key_chain() calls running at
 * the same time as another key_chain() call (the ABI serializes them even for thread-safe
 * sources). Each call stays inside for 200 µs. fetch() completes at once with one item. Logs
 * "overlap-probe: <n> overlapping key_chain calls of <total>" at destroy.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "paging/paging.h"

typedef struct probe {
    paging_source_t base;
    const paging_host_t *host;
    int inside, overlaps, total;
} probe;

static paging_status_t probe_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    probe *p = (probe *)self;
    paging_bytes_t key = { (const uint8_t *)"0", 1 };
    return p->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static paging_status_t probe_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    probe *p = (probe *)self;
    struct timespec pause = { 0, 200000L };
    (void)key;
    (void)out;
    if (__atomic_add_fetch(&p->inside, 1, __ATOMIC_SEQ_CST) > 1) __atomic_add_fetch(&p->overlaps, 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&p->total, 1, __ATOMIC_SEQ_CST);
    nanosleep(&pause, NULL);
    __atomic_sub_fetch(&p->inside, 1, __ATOMIC_SEQ_CST);
    return PAGING_OK;
}

static paging_status_t probe_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    probe *p = (probe *)self;
    paging_bytes_t item = { (const uint8_t *)"1", 1 };
    (void)request;
    p->host->fetch_add_item(p->host, id, item);
    return p->host->fetch_complete(p->host, id);
}

static void probe_destroy(paging_source_t *self)
{
    probe *p = (probe *)self;
    char message[96];
    snprintf(message, sizeof message, "overlap-probe: %d overlapping key_chain calls of %d", p->overlaps, p->total);
    p->host->log(p->host, PAGING_LOG_INFO, message);
    free(p);
}

static paging_source_t *probe_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    probe *p = (probe *)calloc(1, sizeof *p);
    (void)id;
    (void)config;
    if (p == NULL) return NULL;
    p->host = host;
    p->base.plugin_data = p;
    p->base.refresh_key = probe_refresh_key;
    p->base.key_chain = probe_key_chain;
    p->base.fetch = probe_fetch;
    p->base.destroy = probe_destroy;
    return &p->base;
}

static const paging_plugin_descriptor_t descriptor = {
    PAGING_DESCRIPTOR_HEAD, "overlap-probe", "Overlap probe (fixture)", "1.0.0",
    "Counts overlapping key_chain calls", PAGING_PLUGIN_SOURCE, PAGING_PLUGIN_THREAD_SAFE, NULL
};
static uint32_t plugin_count(void) { return 1; }
static const paging_plugin_descriptor_t *descriptor_at(uint32_t i) { return i == 0 ? &descriptor : NULL; }
static const paging_plugin_entry_t entry = { PAGING_ENTRY_HEAD, plugin_count, descriptor_at, probe_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
