/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_stale_out.c -o libcheck_stale_out.so */
/*
 * Broken fixture for `pager check`: interceptor "stale-out" keeps call handles past their call.
 * It keeps `config` from create_interceptor() and reads it in every intercept(), and keeps
 * `out` from one intercept() and sets the page size through it in the next. Both handles
 * belong to calls that have returned: the host refuses each use (the getter answers NULL, the
 * setter PAGING_ERR_INVALID_ARGUMENT) and logs it, so requests still proceed unchanged.
 * Expected: call-handles fails (the host refused handle uses); every other check passes.
 */
#include <stdlib.h>

#include "paging/paging.h"

typedef struct fixture {
    paging_interceptor_t base;
    const paging_host_t *host;
    const paging_config_t *config;    /* deliberate: kept past create_interceptor() */
    paging_intercept_out_t *last_out; /* deliberate: kept past intercept() */
} fixture;

static uint32_t fx_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    fixture *f = (fixture *)self;
    const paging_host_t *h = f->host;
    (void)request;
    (void)h->config_string(f->config, "label"); /* deliberate: the config of a finished call */
    if (f->last_out != NULL) h->out_set_page_size(f->last_out, 7); /* deliberate: the out of the last call */
    f->last_out = out;
    return PAGING_INTERCEPT_PROCEED;
}

static void fx_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fixture *f = (fixture *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    f->host = host;
    f->config = config;
    f->base.plugin_data = f;
    f->base.intercept = fx_intercept;
    f->base.destroy = fx_destroy;
    f->base.struct_size = (uint32_t)sizeof f->base;
    return &f->base;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "stale-out", "Stale call handles (fixture)", "1.0.0",
    "Keeps config and out past their calls.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
