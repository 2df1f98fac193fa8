/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/blocking_intercept.c -o libblocking_intercept.so */
/*
 * Misbehaving fixture: interceptor "blocking-intercept" sleeps inside intercept() for
 * `sleep_ms` milliseconds (config, default 5000), then returns PAGING_INTERCEPT_PROCEED. With
 * `until_path` (config, a file path) it wakes as soon as that file exists, instead (sleep_ms
 * still bounds the wait), so a test decides when the call ends. It logs
 * "blocking-intercept: woke after <ms> ms" (the time it slept) when it returns, so a test can
 * tell when the call really ended. A host with an intercept timeout fails the load with PAGING_ERR_TIMEOUT
 * long before the plugin wakes up; a host without one waits, holding the calling thread.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paging/paging.h"

typedef struct fixture { paging_interceptor_t base; const paging_host_t *host; int64_t sleep_ms; char *until_path; } fixture;

static uint32_t fx_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    fixture *f = (fixture *)self;
    struct timespec step;
    int64_t slept = 0;
    char msg[96];
    (void)request;
    (void)out;
    step.tv_sec = 0;
    step.tv_nsec = 5 * 1000000L;
    while (slept < f->sleep_ms && (f->until_path == NULL || access(f->until_path, F_OK) != 0)) {
        nanosleep(&step, NULL);
        slept += 5;
    }
    snprintf(msg, sizeof msg, "blocking-intercept: woke after %lld ms", (long long)slept);
    f->host->log(f->host, PAGING_LOG_INFO, msg);
    return PAGING_INTERCEPT_PROCEED;
}

static void fx_destroy(paging_interceptor_t *self)
{
    fixture *f = (fixture *)self;
    free(f->until_path);
    free(f);
}

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->sleep_ms = host->config_int(config, "sleep_ms", 5000);
    if (f->sleep_ms < 0) f->sleep_ms = 0;
    if (host->config_string(config, "until_path") != NULL) {
        const char *path = host->config_string(config, "until_path");
        f->until_path = (char *)malloc(strlen(path) + 1);
        if (f->until_path == NULL) { free(f); host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
        memcpy(f->until_path, path, strlen(path) + 1);
    }
    f->base.plugin_data = f;
    f->base.intercept = fx_intercept;
    f->base.handle = NULL;
    f->base.destroy = fx_destroy;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "blocking-intercept", "Blocking intercept (fixture)", "1.0.0",
    "Sleeps sleep_ms inside intercept().", PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
