/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_bad_extensions.c -o libcheck_bad_extensions.so */
/*
 * Fixture for `pager check`: five interceptors (each lets every request proceed) that offer
 * paging.health/1, some wrongly:
 *   "greedy-extensions" answers its health table for every id get_extension is asked for, also
 *     ids it cannot offer. Expected: abi-growth fails (get_extension must answer NULL for them).
 *   "bad-health"  health check() answers 42, which is no status code. Expected: extensions fails.
 *   "slow-health" health check() logs "health check started" and takes 3 s (config "health_ms"
 *     sets it; with "until_path", it ends sooner once that file exists). Expected: extensions
 *     fails (the check's timeout).
 *   "null-health" answers a health table whose check is NULL. Expected: extensions fails (the
 *     host takes it as not offered, and never asks).
 *   "unhealthy"   health check() logs why and answers PAGING_ERR_TRANSIENT: a valid answer,
 *     named in extensions' reason, which passes.
 * Every other check passes.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paging/paging.h"

enum { GREEDY, BAD, SLOW, UNHEALTHY, NULL_HEALTH, PLUGINS };

typedef struct fixture { paging_interceptor_t base; const paging_host_t *host; int which; long health_ms; char *until_path; } fixture;

static paging_status_t fx_check(void *self)
{
    fixture *f = (fixture *)self;
    switch (f->which) {
    case BAD:
        return 42u; /* deliberate: not a status code */
    case SLOW: {
        struct timespec pause = { 0, 10 * 1000000L };
        long waited;
        f->host->log(f->host, PAGING_LOG_INFO, "health check started");
        /* deliberate: longer than the check's timeout */
        for (waited = 0; waited < f->health_ms; waited += 10) {
            if (f->until_path != NULL && access(f->until_path, F_OK) == 0) break;
            nanosleep(&pause, NULL);
        }
        return PAGING_OK;
    }
    case UNHEALTHY:
        f->host->log(f->host, PAGING_LOG_WARNING, "the upstream is unreachable");
        return PAGING_ERR_TRANSIENT;
    default:
        return PAGING_OK;
    }
}

static const paging_ext_health_t fx_health = { fx_check };
static const paging_ext_health_t fx_null_health = { NULL }; /* deliberate */

static const void *fx_get_extension(paging_interceptor_t *self, const char *id)
{
    fixture *f = (fixture *)self;
    if (f->which == GREEDY) return &fx_health; /* deliberate: whatever the id */
    if (strcmp(id, PAGING_EXT_HEALTH) != 0) return NULL;
    return f->which == NULL_HEALTH ? &fx_null_health : &fx_health;
}

static uint32_t fx_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self;
    (void)request;
    (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

static void fx_destroy(paging_interceptor_t *self)
{
    fixture *f = (fixture *)self;
    free(f->until_path);
    free(f);
}

static const paging_plugin_descriptor_t fx_descriptors[PLUGINS] = {
    { PAGING_DESCRIPTOR_HEAD, "greedy-extensions", "Greedy get_extension (fixture)", "1.0.0",
      "Answers a table for any extension id.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "bad-health", "Health answering 42 (fixture)", "1.0.0",
      "Its health check answers no status code.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "slow-health", "Slow health (fixture)", "1.0.0",
      "Its health check takes 3 s.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "unhealthy", "Unhealthy (fixture)", "1.0.0",
      "Its health check says the upstream is unreachable.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "null-health", "NULL health check (fixture)", "1.0.0",
      "Its health table's check is NULL.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f;
    int which;
    for (which = 0; which < PLUGINS; which++) {
        if (strcmp(plugin_id, fx_descriptors[which].id) == 0) break;
    }
    if (which == PLUGINS) { host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "unknown plugin id"); return NULL; }
    f = (fixture *)calloc(1, sizeof *f);
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->which = which;
    f->health_ms = (long)host->config_int(config, "health_ms", 3000);
    if (host->config_string(config, "until_path") != NULL) f->until_path = strdup(host->config_string(config, "until_path"));
    f->base.plugin_data = f;
    f->base.intercept = fx_intercept;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    f->base.get_extension = fx_get_extension;
    return &f->base;
}

static uint32_t fx_count(void) { return PLUGINS; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < PLUGINS ? &fx_descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
