/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/flaky.c -o libflaky.so */
/*
 * Fixture: interceptor "flaky" fails some requests on purpose, deterministically, and lets the
 * others proceed. Intercept calls are numbered from 0; call i fails when
 *   fail_every > 0 and i % fail_every == fail_every - 1, or i < fail_first,
 * with out_fail(status, "flaky: injected failure of call <i>") and PAGING_INTERCEPT_FAIL.
 * Config: fail_every (integer, default 0 = never), fail_first (default 0), status (default
 * PAGING_ERR_TRANSIENT = 2). Not THREAD_SAFE: the host serializes calls, so the counter needs no
 * lock. Logs "flaky: <n> calls, <f> failed" at destroy.
 */
#include <stdio.h>
#include <stdlib.h>

#include "paging/paging.h"

typedef struct fixture {
    paging_interceptor_t base;
    const paging_host_t *host;
    int64_t fail_every, fail_first;
    uint32_t status;
    uint64_t calls, failed;
} fixture;

static uint32_t fx_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    fixture *f = (fixture *)self;
    uint64_t i = f->calls++;
    char msg[96];
    (void)request;
    if ((f->fail_every > 0 && i % (uint64_t)f->fail_every == (uint64_t)f->fail_every - 1) || i < (uint64_t)f->fail_first) {
        f->failed++;
        snprintf(msg, sizeof msg, "flaky: injected failure of call %llu", (unsigned long long)i);
        f->host->out_fail(out, f->status, msg);
        return PAGING_INTERCEPT_FAIL;
    }
    return PAGING_INTERCEPT_PROCEED;
}

static void fx_destroy(paging_interceptor_t *self)
{
    fixture *f = (fixture *)self;
    char msg[96];
    snprintf(msg, sizeof msg, "flaky: %llu calls, %llu failed", (unsigned long long)f->calls, (unsigned long long)f->failed);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
    free(f);
}

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->fail_every = host->config_int(config, "fail_every", 0);
    f->fail_first = host->config_int(config, "fail_first", 0);
    f->status = (uint32_t)host->config_int(config, "status", PAGING_ERR_TRANSIENT);
    f->base.plugin_data = f;
    f->base.intercept = fx_intercept;
    f->base.handle = NULL;
    f->base.destroy = fx_destroy;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "flaky", "Flaky (fixture)", "1.0.0",
    "Fails every fail_every-th request with status.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
