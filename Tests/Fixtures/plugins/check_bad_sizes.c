/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/check_bad_sizes.c -o libcheck_bad_sizes.so */
/*
 * Broken fixture for `pager check`: a library built against the final headers whose structs
 * understate their size, in ways the host still loads (it reads no member past the size given):
 *   "zero-table-size"  its interceptor table leaves struct_size 0 (calloc), so the host never
 *     reads its get_extension. Expected: abi-growth fails, saying to set struct_size.
 *   "short-descriptor" its descriptor says struct_size 56 (the draft's size, smaller than
 *     1.0's 64), so the host reads no required_extensions. Expected: abi-growth fails.
 *   "wrapper-size"     its table sits in a struct of its own state and says that struct's size
 *     (sizeof *wrapper, an easy mistake): a later 1.x host would read the state as members
 *     added since. Expected: abi-growth fails, saying to set struct_size.
 * All let every request proceed; every other check passes.
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

/* The table first: the instance is the wrapper, freed through its table. */
typedef struct fx_wrapper {
    paging_interceptor_t base;
    long state[8];
} fx_wrapper;

static void fx_destroy(paging_interceptor_t *self) { free(self); }

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    /* Every instance is a wrapper; only "wrapper-size" says so in struct_size. */
    paging_interceptor_t *i = (paging_interceptor_t *)calloc(1, sizeof(fx_wrapper));
    if (i == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    i->intercept = fx_intercept;
    i->destroy = fx_destroy;
    if (strcmp(plugin_id, "short-descriptor") == 0) i->struct_size = (uint32_t)sizeof *i;
    if (strcmp(plugin_id, "wrapper-size") == 0) i->struct_size = (uint32_t)sizeof(fx_wrapper); /* deliberate */
    /* "zero-table-size": struct_size left 0 (deliberate) */
    return i;
}

static const paging_plugin_descriptor_t fx_descriptors[3] = {
    { PAGING_DESCRIPTOR_HEAD, "zero-table-size", "Table without struct_size (fixture)", "1.0.0",
      "Its interceptor table leaves struct_size 0.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_ABI_VERSION_INIT, (uint32_t)offsetof(paging_plugin_descriptor_t, required_extensions), /* deliberate */
      "short-descriptor", "Short descriptor (fixture)", "1.0.0",
      "Its descriptor says struct_size 56.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "wrapper-size", "Table saying its wrapper's size (fixture)", "1.0.0",
      "Its interceptor table says the size of the struct that holds it.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL },
};
static uint32_t fx_count(void) { return 3; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i < 3 ? &fx_descriptors[i] : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
