/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/duplicate_ids.c -o libduplicate_ids.so */
/*
 * Broken fixture: three interceptors, two of them with the id "twin" (ids must be unique in a
 * library) and one "solo". Each proceeds. Expected: a manifest naming "twin" is refused, naming
 * both descriptors; "solo" loads.
 */
#include <stdlib.h>

#include "paging/paging.h"

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

static const paging_plugin_descriptor_t fx_descriptors[3] = {
    { PAGING_DESCRIPTOR_HEAD, "twin", "Twin A (fixture)", "1.0.0", "The first of two plugins with one id.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "solo", "Solo (fixture)", "1.0.0", "The only plugin with its id.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "twin", "Twin B (fixture)", "1.0.0", "The second of two plugins with one id.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};
static uint32_t fx_count(void) { return 3; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 3 ? &fx_descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
