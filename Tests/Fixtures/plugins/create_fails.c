/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/create_fails.c -o libcreate_fails.so */
/*
 * Fixture: source "create-fails" always refuses to be created: create_source calls
 * host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "api_key is required") and returns NULL.
 * The host must report that code and message (naming the plugin), not crash.
 */
#include <stddef.h>

#include "paging/paging.h"

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    (void)plugin_id;
    host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "api_key is required");
    return NULL;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, "create-fails", "Create fails (fixture)", "1.0.0",
    "Fails every create with INVALID_CONFIG.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
