/*
 * paging/entry.h - what a plugin library exports: one function, paging_plugin_entry, returning
 * a static table that lists the library's plugins and creates instances of them. Nothing else
 * is looked up with dlsym.
 *
 *   static const paging_plugin_entry_t entry = { PAGING_ABI_VERSION_INIT, count, descriptor,
 *                                                create_source, NULL };
 *   PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
 *
 * The host refuses a library whose entry->abi_version.major differs from its own (see
 * version.h) and reads members added after entry->abi_version.minor only when present.
 */
#ifndef PAGING_ENTRY_H
#define PAGING_ENTRY_H

#include <stdint.h>

#include "host.h"
#include "interceptor.h"
#include "source.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks the entry function as exported from a shared library built with hidden visibility. */
#if defined(__GNUC__) || defined(__clang__)
#define PAGING_EXPORT __attribute__((visibility("default")))
#elif defined(_WIN32)
#define PAGING_EXPORT __declspec(dllexport)
#else
#define PAGING_EXPORT
#endif

/* ---- ABI 1.0: descriptor kinds and flags ---------------------------------------------- */
#define PAGING_PLUGIN_SOURCE      1u /* created with create_source. */
#define PAGING_PLUGIN_INTERCEPTOR 2u /* created with create_interceptor. */

#define PAGING_PLUGIN_THREAD_SAFE 1u /* instances accept overlapping fetch/intercept/handle calls. */

/* Describes one plugin of the library. The struct and its strings are static, owned by the
 * plugin library, and valid while the library is loaded. */
typedef struct paging_plugin_descriptor {
    /* ---- ABI 1.0 ---- */
    paging_version_t abi_version; /* the ABI this plugin was built against. [any-thread] Value member. */
    const char *id;               /* unique id, e.g. "jsonlines" (NUL-terminated, static). [any-thread] */
    const char *name;             /* human-readable name (NUL-terminated, static). [any-thread] */
    const char *version;          /* the plugin's own version, e.g. "1.0.0" (NUL-terminated, static). [any-thread] */
    const char *description;      /* one line (NUL-terminated, static). [any-thread] */
    uint32_t kind;                /* PAGING_PLUGIN_SOURCE or PAGING_PLUGIN_INTERCEPTOR. [any-thread] Value member. */
    uint32_t flags;               /* PAGING_PLUGIN_THREAD_SAFE or 0. [any-thread] Value member. */
    /* Members added in later 1.x versions go here, at the end. */
} paging_plugin_descriptor_t;

/* The library's table. Static, owned by the plugin library, valid while it is loaded. */
typedef struct paging_plugin_entry {
    /* ---- ABI 1.0 ---- */

    /* The ABI the library was built against. [any-thread] Value member. */
    paging_version_t abi_version;

    /* Number of plugins in the library. Returns a value. [any-thread] */
    uint32_t (*plugin_count)(void);

    /* The descriptor of plugin `index` (0 <= index < plugin_count()), or NULL for any other
     * index. The descriptor is static, owned by the library. [any-thread] */
    const paging_plugin_descriptor_t *(*descriptor)(uint32_t index);

    /* Creates an instance of the source `plugin_id`. May be NULL when the library has no
     * source. `plugin_id` and `config` are borrowed for the call; `host` is owned by the host
     * and valid until the instance's destroy() returns (keep the pointer). Returns a
     * plugin-owned instance, freed by its destroy(); or NULL after host->config_fail (unknown
     * id or bad config). [any-thread] */
    paging_source_t *(*create_source)(const char *plugin_id, const paging_host_t *host, const paging_config_t *config);

    /* Creates an instance of the interceptor `plugin_id`; same rules as create_source.
     * May be NULL when the library has no interceptor. [any-thread] */
    paging_interceptor_t *(*create_interceptor)(const char *plugin_id, const paging_host_t *host, const paging_config_t *config);

    /* Members added in later 1.x versions go here, at the end. */
} paging_plugin_entry_t;

/* The name of the one exported symbol, for dlsym. */
#define PAGING_PLUGIN_ENTRY_SYMBOL "paging_plugin_entry"

/* The type of that symbol. */
typedef const paging_plugin_entry_t *(*paging_plugin_entry_fn)(void);

/* Defined by each plugin library: returns its static entry table. Never NULL; cheap; may be
 * called any number of times. [any-thread] */
PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_ENTRY_H */
