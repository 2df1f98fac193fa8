/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include -DFIXTURE_ID='"rewritable-b"' Tests/Fixtures/plugins/rewritable.c -o librewritable_b.so */
/*
 * Fixture: source FIXTURE_ID ("rewritable-a" unless defined) refuses to be created with the
 * message "built as <FIXTURE_ID>", so a test can tell which build's code ran. Builds whose ids
 * have the same length have the same layout: a test can rewrite one over the other in place
 * while the earlier build stays mapped.
 */
#include <stddef.h>

#include "paging/paging.h"

#ifndef FIXTURE_ID
#define FIXTURE_ID "rewritable-a"
#endif

static paging_source_t *fx_create(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    (void)plugin_id;
    host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "built as " FIXTURE_ID);
    return NULL;
}

static const paging_plugin_descriptor_t fx_descriptor = {
    PAGING_DESCRIPTOR_HEAD, FIXTURE_ID, "Rewritable (fixture)", "1.0.0",
    "Names its build when created.", PAGING_PLUGIN_SOURCE, 0, NULL
};
static uint32_t fx_count(void) { return 1; }
static const paging_plugin_descriptor_t *fx_descriptor_at(uint32_t i) { return i == 0 ? &fx_descriptor : NULL; }
static const paging_plugin_entry_t fx_entry = { PAGING_ENTRY_HEAD, fx_count, fx_descriptor_at, fx_create, NULL, NULL, NULL };

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fx_entry; }
