/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/lifecycle.c -o liblifecycle.so */
/*
 * Fixture: the library-level and extension parts of ABI 1.0.
 *   init() logs "init: host <name> <version>, ABI <major>.<minor>, path <library path>" and keeps
 *     the path; built with -DFIXTURE_FAIL_INIT it logs "init: no licence here" and returns
 *     PAGING_ERR_INVALID_CONFIG instead.
 *   deinit() creates the file "<library path>.deinit".
 *   Built with -DFIXTURE_KEEP_INIT_INFO, init() keeps a copy of the info, and create and deinit
 *   call its log (which the host refuses: it is for the init() call only).
 *   Built with -DFIXTURE_FAIL_THEN_RETURN, create calls config_fail twice (INVALID_CONFIG
 *   "create: no such mode", then INTERNAL "create: a second reason") and returns the instance
 *   all the same; destroy logs "destroyed".
 *   Built with -DFIXTURE_STRUCT_SIZE=N, the interceptor's table says struct_size N.
 *   Built with -DFIXTURE_ODD_LOGS, create logs a NULL message, and "ninety-nine" at level 99.
 * Interceptor "lifecycle": at create, logs "log-level <n>" from the host's paging.log-level/1
 *   (or "log-level absent"), "unknown extension NULL" when the host answers NULL for an id it
 *   cannot know, and "config <key> <type>" for the keys "s", "i", "d", "b", "n", "a", "o" and
 *   "missing" (PAGING_CONFIG_* numbers). It proceeds with every request. It offers
 *   paging.health/1, answering the config's integer "health" (default PAGING_OK) and logging
 *   "health: <n>" when it is not PAGING_OK; with "health_sleep_ms", each check logs "health
 *   check" and sleeps that long first.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paging/paging.h"

static char library_path[4096];
#ifdef FIXTURE_KEEP_INIT_INFO
static paging_library_info_t kept;
#endif

static paging_status_t lc_init(const paging_library_info_t *info)
{
    char message[4300];
#ifdef FIXTURE_FAIL_INIT
    info->log(info, PAGING_LOG_ERROR, "init: no licence here");
    return PAGING_ERR_INVALID_CONFIG;
#endif
    snprintf(library_path, sizeof library_path, "%s", info->library_path);
    snprintf(message, sizeof message, "init: host %s %s, ABI %u.%u, path %s", info->host_name, info->host_version,
             (unsigned)info->host_abi_version.major, (unsigned)info->host_abi_version.minor, info->library_path);
    info->log(info, PAGING_LOG_INFO, message);
#ifdef FIXTURE_KEEP_INIT_INFO
    kept = *info;
#endif
    return PAGING_OK;
}

static void lc_deinit(void)
{
    char marker[4200];
    FILE *file;
#ifdef FIXTURE_KEEP_INIT_INFO
    kept.log(&kept, PAGING_LOG_INFO, "deinit: with the init info");
#endif
    snprintf(marker, sizeof marker, "%s.deinit", library_path);
    file = fopen(marker, "w");
    if (file != NULL) fclose(file);
}

static uint32_t lc_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self; (void)request; (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

typedef struct lifecycle { paging_interceptor_t base; const paging_host_t *host; paging_status_t health; long health_sleep_ms; } lifecycle;

static paging_status_t lc_health(void *self)
{
    lifecycle *l = (lifecycle *)self;
    char message[32];
    if (l->health_sleep_ms > 0) {
        struct timespec pause;
        pause.tv_sec = l->health_sleep_ms / 1000;
        pause.tv_nsec = (l->health_sleep_ms % 1000) * 1000000L;
        l->host->log(l->host, PAGING_LOG_WARNING, "health check");
        nanosleep(&pause, NULL);
    }
    if (l->health != PAGING_OK) {
        snprintf(message, sizeof message, "health: %u", (unsigned)l->health);
        l->host->log(l->host, PAGING_LOG_ERROR, message);
    }
    return l->health;
}

static const paging_ext_health_t lc_health_ext = { lc_health };

static const void *lc_get_extension(paging_interceptor_t *self, const char *id)
{
    (void)self;
    return strcmp(id, PAGING_EXT_HEALTH) == 0 ? &lc_health_ext : NULL;
}

static void lc_destroy(paging_interceptor_t *self)
{
#ifdef FIXTURE_FAIL_THEN_RETURN
    const paging_host_t *host = ((lifecycle *)self)->host;
    host->log(host, PAGING_LOG_WARNING, "destroyed");
#endif
    free(self);
}

static paging_interceptor_t *lc_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    static const char *const keys[] = { "s", "i", "d", "b", "n", "a", "o", "missing" };
    const paging_ext_log_level_t *level = NULL;
    lifecycle *self = (lifecycle *)calloc(1, sizeof *self);
    char message[64];
    size_t i;
    (void)id;
    if (self == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
#ifdef FIXTURE_KEEP_INIT_INFO
    kept.log(&kept, PAGING_LOG_INFO, "create: with the init info");
#endif
    if (PAGING_STRUCT_HAS(host, paging_host_t, get_extension)) {
        level = (const paging_ext_log_level_t *)host->get_extension(host, PAGING_EXT_LOG_LEVEL);
        if (host->get_extension(host, "paging.no-such-extension/1") == NULL) host->log(host, PAGING_LOG_INFO, "unknown extension NULL");
    }
#ifdef FIXTURE_ODD_LOGS
    host->log(host, PAGING_LOG_INFO, NULL);
    host->log(host, 99, "ninety-nine");
#endif
    if (level != NULL) snprintf(message, sizeof message, "log-level %u", (unsigned)level->min_level(host));
    else snprintf(message, sizeof message, "log-level absent");
    host->log(host, PAGING_LOG_WARNING, message);
    for (i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        snprintf(message, sizeof message, "config %s %u", keys[i], (unsigned)host->config_type(config, keys[i]));
        host->log(host, PAGING_LOG_WARNING, message);
    }
    self->host = host;
    self->health = (paging_status_t)host->config_int(config, "health", PAGING_OK);
    self->health_sleep_ms = (long)host->config_int(config, "health_sleep_ms", 0);
    self->base.intercept = lc_intercept;
    self->base.destroy = lc_destroy;
    self->base.get_extension = lc_get_extension;
#ifdef FIXTURE_STRUCT_SIZE
    self->base.struct_size = FIXTURE_STRUCT_SIZE;
#else
    self->base.struct_size = (uint32_t)sizeof self->base;
#endif
#ifdef FIXTURE_FAIL_THEN_RETURN
    host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "create: no such mode");
    host->config_fail(config, PAGING_ERR_INTERNAL, "create: a second reason");
#endif
    return &self->base;
}

static const paging_plugin_descriptor_t lc_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "lifecycle", "Lifecycle (fixture)", "1.0.0", "Library init/deinit and host extensions.",
    PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t lc_count(void) { return 1; }
static const paging_plugin_descriptor_t *lc_describe(uint32_t i) { return i == 0 ? &lc_descriptor : NULL; }
static const paging_plugin_entry_t lc_entry = {
    PAGING_ENTRY_HEAD, lc_count, lc_describe, NULL, lc_create, lc_init, lc_deinit
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &lc_entry; }
