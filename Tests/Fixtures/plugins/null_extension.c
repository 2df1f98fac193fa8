/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/null_extension.c -o libnull_extension.so */
/*
 * Misbehaving fixture: interceptor "null-extension" lets every request proceed, and answers
 * get_extension("paging.health/1") with a table whose check() is NULL.
 */
#include <stdlib.h>
#include <string.h>

#include "paging/paging.h"

static const paging_ext_health_t fx_health = { NULL };

static uint32_t fx_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self;
    (void)request;
    (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

static const void *fx_get_extension(paging_interceptor_t *self, const char *id)
{
    (void)self;
    return strcmp(id, PAGING_EXT_HEALTH) == 0 ? &fx_health : NULL;
}

static void fx_destroy(paging_interceptor_t *self)
{
    free(self);
}

static paging_interceptor_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    paging_interceptor_t *i = (paging_interceptor_t *)calloc(1, sizeof *i);
    (void)plugin_id;
    if (i == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    i->intercept = fx_intercept;
    i->destroy = fx_destroy;
    i->get_extension = fx_get_extension;
    i->struct_size = (uint32_t)sizeof *i;
    return i;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "null-extension", "NULL extension function (fixture)", "1.0.0",
    "Offers paging.health/1 with a NULL check().", PAGING_PLUGIN_INTERCEPTOR, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, NULL, fx_create, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
