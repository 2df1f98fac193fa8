/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_empty_id.c -o libcheck_empty_id.so */
/*
 * Broken fixture for `pager check`: one interceptor whose descriptor has an empty id "". The
 * host refuses the whole library ("descriptor 0 has no id"). Expected: a failed "load" line for
 * the library and a failed descriptor check for plugin "#0"; nothing else can run.
 * Built with -DFIXTURE_ID='"x\xff"', the id is that instead: bytes that are not UTF-8, refused
 * the same way.
 */
#include <stdlib.h>

#include "paging/paging.h"

#ifndef FIXTURE_ID
#define FIXTURE_ID ""
#endif

static uint32_t fx_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self;
    (void)request;
    (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

static void fx_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    paging_interceptor_t *i = (paging_interceptor_t *)calloc(1, sizeof *i);
    (void)plugin_id;
    if (i == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    i->intercept = fx_intercept;
    i->handle = NULL;
    i->destroy = fx_destroy;
    i->struct_size = (uint32_t)sizeof *i;
    return i;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, FIXTURE_ID, "Empty id (fixture)", "1.0.0", "Its id is empty.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
