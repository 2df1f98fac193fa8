/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_crash_intercept.c -o libcheck_crash_intercept.so */
/*
 * Broken fixture for `pager check`: interceptor "crash-intercept" calls abort() in intercept().
 * Everything else (create, destroy, handle) is correct. Expected: the checks that intercept
 * requests (proceed-intact, items-valid, kept-pages, call-handles) fail with "crashed (SIGABRT)"; every other
 * check passes (thread-safe is skipped: not flagged).
 */
#include <stdlib.h>

#include "paging/paging.h"

static uint32_t fx_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self;
    (void)request;
    (void)out;
    abort(); /* deliberate */
}

static void fx_handle(paging_interceptor_t *self, const paging_page_t *page) { (void)self; (void)page; }

static void fx_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    paging_interceptor_t *i = (paging_interceptor_t *)calloc(1, sizeof *i);
    (void)plugin_id;
    if (i == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    i->plugin_data = NULL;
    i->intercept = fx_intercept;
    i->handle = fx_handle;
    i->destroy = fx_destroy;
    i->struct_size = (uint32_t)sizeof *i;
    return i;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "crash-intercept", "Crash in intercept (fixture)", "1.0.0",
    "Aborts in every intercept().", PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
