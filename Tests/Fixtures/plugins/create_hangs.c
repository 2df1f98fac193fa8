/* build: cc -std=c99 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/create_hangs.c -o libcreate_hangs.so */
/* Fixture: interceptor "hangs", whose create_interceptor never returns; source
 * "refresh-key-hangs", created at once, whose refresh_key never returns; interceptor
 * "handle-hangs", whose intercept proceeds and asks for the page, and whose handle never
 * returns; interceptor "destroy-hangs", whose intercept proceeds and whose destroy never
 * returns. */
#define _POSIX_C_SOURCE 200809L
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paging/paging.h"

static void hang(void)
{
    struct timespec pause = { 3600, 0 };
    for (;;) nanosleep(&pause, NULL);
}

static paging_status_t rk_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    (void)self; (void)out;
    hang();
    return PAGING_OK;
}

static paging_status_t rk_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    (void)self; (void)request; (void)id;
    return PAGING_ERR_INTERNAL;
}

static void rk_destroy(paging_source_t *self) { free(self); }

static uint32_t hh_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self; (void)request; (void)out;
    return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
}

static void hh_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    (void)self; (void)page;
    hang();
}

static void hh_destroy(paging_interceptor_t *self) { free(self); }

static uint32_t dh_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self; (void)request; (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

static void dh_destroy(paging_interceptor_t *self)
{
    (void)self;
    hang();
}

static paging_interceptor_t *ch_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    paging_interceptor_t *interceptor;
    (void)host; (void)config;
    int destroy_hangs = strcmp(id, "destroy-hangs") == 0;
    if (strcmp(id, "handle-hangs") != 0 && !destroy_hangs) hang();
    interceptor = (paging_interceptor_t *)calloc(1, sizeof *interceptor);
    if (interceptor == NULL) return 0;
    interceptor->intercept = destroy_hangs ? dh_intercept : hh_intercept;
    interceptor->handle = destroy_hangs ? 0 : hh_handle;
    interceptor->destroy = destroy_hangs ? dh_destroy : hh_destroy;
    interceptor->struct_size = (uint32_t)sizeof *interceptor;
    return interceptor;
}

static paging_source_t *rk_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    paging_source_t *source = (paging_source_t *)calloc(1, sizeof *source);
    (void)id; (void)host; (void)config;
    if (source == NULL) return 0;
    source->refresh_key = rk_refresh_key;
    source->fetch = rk_fetch;
    source->destroy = rk_destroy;
    source->struct_size = (uint32_t)sizeof *source;
    return source;
}

static const paging_plugin_descriptor_t ch_descriptors[4] = {
    { PAGING_DESCRIPTOR_HEAD, "hangs", "Hangs (fixture)", "1.0.0", "create_interceptor never returns.",
      PAGING_PLUGIN_INTERCEPTOR, 0, 0 },
    { PAGING_DESCRIPTOR_HEAD, "refresh-key-hangs", "refresh_key hangs (fixture)", "1.0.0", "refresh_key never returns.",
      PAGING_PLUGIN_SOURCE, 0, 0 },
    { PAGING_DESCRIPTOR_HEAD, "handle-hangs", "handle hangs (fixture)", "1.0.0", "handle never returns.",
      PAGING_PLUGIN_INTERCEPTOR, 0, 0 },
    { PAGING_DESCRIPTOR_HEAD, "destroy-hangs", "destroy hangs (fixture)", "1.0.0", "destroy never returns.",
      PAGING_PLUGIN_INTERCEPTOR, 0, 0 }
};
static uint32_t ch_count(void) { return 4; }
static const paging_plugin_descriptor_t *ch_describe(uint32_t i) { return i < 4 ? &ch_descriptors[i] : 0; }
static const paging_plugin_entry_t ch_entry = { PAGING_ENTRY_HEAD, ch_count, ch_describe, rk_create, ch_create, 0, 0 };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &ch_entry; }
