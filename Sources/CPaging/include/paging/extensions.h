/*
 * paging/extensions.h - capabilities beyond the core, each found by a versioned string id.
 *
 * A plugin asks the host:          host->get_extension(host, PAGING_EXT_LOG_LEVEL)
 * The host asks a plugin instance: source->get_extension(source, PAGING_EXT_HEALTH)
 *                                  (or interceptor->get_extension)
 * Either answers with a pointer to the extension's table, or NULL when it does not offer it.
 * Ids are "paging.<name>/<version>"; a table never changes once its id is published, so a
 * changed extension is a new id ("paging.health/2"), and a side may offer both.
 *
 * Which side offers what in ABI 1.0 (every 1.x host offers paging.log-level/1; a plugin
 * still checks for NULL, as for any extension):
 *
 *   id                    offered by   what for
 *   paging.log-level/1    the host     the lowest level the host keeps: skip building lines it drops
 *   paging.health/1       an instance  "can you serve now?" without loading a page (pager validate)
 *
 * A plugin that cannot work without a host extension lists it in its descriptor's
 * required_extensions (entry.h); otherwise it asks in create_* and copes with NULL.
 */
#ifndef PAGING_EXTENSIONS_H
#define PAGING_EXTENSIONS_H

#include <stdint.h>

#include "host.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- paging.log-level/1 (the host) ------------------------------------------------------ */

#define PAGING_EXT_LOG_LEVEL "paging.log-level/1"

typedef struct paging_ext_log_level {
    /* The lowest PAGING_LOG_* level the host keeps for this instance: a line below it is
     * dropped, so a plugin may skip formatting it. May change while the instance lives (ask
     * each time; it is cheap). [any-thread] */
    uint32_t (*min_level)(const paging_host_t *host);
} paging_ext_log_level_t;

/* ---- paging.health/1 (a plugin instance) ------------------------------------------------ */

#define PAGING_EXT_HEALTH "paging.health/1"

typedef struct paging_ext_health {
    /* Says whether the instance can serve loads now - its file is readable, its database
     * writable, its server reachable - without loading a page. `self` is the instance pointer
     * create_* returned (a paging_source_t * or paging_interceptor_t *). Returns PAGING_OK, or a
     * PAGING_ERR_* code after logging why through host->log. May block briefly: keep it well
     * under a second (pager validate waits for it). [serialized] */
    paging_status_t (*check)(void *self);
} paging_ext_health_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_EXTENSIONS_H */
