/* build: cc -std=c99 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/create_hangs.c -o libcreate_hangs.so */
/* Fixture: interceptor "hangs", whose create_interceptor never returns. */
#define _POSIX_C_SOURCE 200809L
#include <time.h>

#include "paging/paging.h"

static paging_interceptor_t *ch_create(const char *id, const paging_host_t *host, const paging_config_t *config)
{
    struct timespec pause = { 3600, 0 };
    (void)id; (void)host; (void)config;
    for (;;) nanosleep(&pause, NULL);
    return 0;
}

static const paging_plugin_descriptor_t ch_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "hangs", "Hangs (fixture)", "1.0.0", "create_interceptor never returns.",
    PAGING_PLUGIN_INTERCEPTOR, 0, 0
};
static uint32_t ch_count(void) { return 1; }
static const paging_plugin_descriptor_t *ch_describe(uint32_t i) { return i == 0 ? &ch_descriptor : 0; }
static const paging_plugin_entry_t ch_entry = { PAGING_ENTRY_HEAD, ch_count, ch_describe, 0, ch_create, 0, 0 };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &ch_entry; }
