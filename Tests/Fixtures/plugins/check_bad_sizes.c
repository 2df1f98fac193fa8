/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_bad_sizes.c -o libcheck_bad_sizes.so */
/*
 * Broken fixture for `pager check`: a library built against the final headers whose structs
 * understate their size, in ways the host still loads (it reads no member past the size given):
 *   "zero-table-size"  its interceptor table leaves struct_size 0 (calloc), so the host never
 *     reads its get_extension. Expected: abi-growth fails, saying to set struct_size.
 *   "short-descriptor" its descriptor says struct_size 56 (the draft's size, smaller than
 *     1.0's 64), so the host reads no required_extensions. Expected: abi-growth fails.
 * Both let every request proceed; every other check passes.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

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
    if (i == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    i->intercept = fx_intercept;
    i->destroy = fx_destroy;
    if (strcmp(plugin_id, "short-descriptor") == 0) i->struct_size = (uint32_t)sizeof *i;
    /* "zero-table-size": struct_size left 0 (deliberate) */
    return i;
}

static const paging_plugin_descriptor_t fx_descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "zero-table-size", "Table without struct_size (fixture)", "1.0.0",
      "Its interceptor table leaves struct_size 0.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_ABI_VERSION_INIT, (uint32_t)offsetof(paging_plugin_descriptor_t, required_extensions), /* deliberate */
      "short-descriptor", "Short descriptor (fixture)", "1.0.0",
      "Its descriptor says struct_size 56.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};
static uint32_t fx_count(void) { return 2; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 2 ? &fx_descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
