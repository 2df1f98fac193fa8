/*
 * paging/entry.h - what a plugin library exports: one function, paging_plugin_entry, returning
 * a static table that lists the library's plugins and creates instances of them. Nothing else
 * is looked up with dlsym.
 *
 *   static const paging_plugin_entry_t entry = {
 *       PAGING_ENTRY_HEAD, count, descriptor, create_source, NULL, NULL, NULL };
 *   PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &entry; }
 *
 * On load the host, in this order: checks entry->abi_version's major against its own (another
 * major is refused with a line naming the library and both versions); calls init() once;
 * reads the descriptors, refusing the library when any states another major (init() was
 * called: deinit() then follows at once). It refuses a plugin whose required_extensions it
 * lacks when that plugin is chosen. It never unloads a library: deinit() is called once when
 * the host shuts down cleanly.
 *
 * Core forever (version.h, rule 1): every member below; the structs grow at their end only.
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
    /* ---- ABI 1.0 draft members ---- */
    paging_version_t abi_version; /* the ABI this plugin was built against (PAGING_ABI_VERSION_INIT). [any-thread] Value member. */
    uint32_t struct_size;         /* sizeof(paging_plugin_descriptor_t) (version.h, rule 2). [any-thread] Value member. */
    const char *id;               /* unique id, e.g. "jsonlines" (NUL-terminated, static). [any-thread] */
    const char *name;             /* human-readable name (NUL-terminated, static). [any-thread] */
    const char *version;          /* the plugin's own version, e.g. "1.0.0" (NUL-terminated, static). [any-thread] */
    const char *description;      /* one line (NUL-terminated, static). [any-thread] */
    uint32_t kind;                /* PAGING_PLUGIN_SOURCE or PAGING_PLUGIN_INTERCEPTOR. [any-thread] Value member. */
    uint32_t flags;               /* PAGING_PLUGIN_THREAD_SAFE or 0. [any-thread] Value member. */
    /* ---- ABI 1.0 ---- */
    /* Ids of the host extensions this plugin cannot work without (extensions.h), ending with
     * NULL; NULL for none. A host that lacks one refuses the plugin (version.h, rule 4). Static.
     * [any-thread] */
    const char *const *required_extensions;
    /* Members added in later 1.x versions go here, at the end. */
} paging_plugin_descriptor_t;

typedef struct paging_library_info paging_library_info_t;

/* What init() learns about the host and the library. Owned by the host; the struct and its
 * strings are borrowed for the init() call only, and used on its thread. */
struct paging_library_info {
    /* ---- ABI 1.0 ---- */
    uint32_t struct_size;              /* sizeof(paging_library_info_t) in the host's headers (version.h, rule 2). Value member. */
    paging_version_t host_abi_version; /* the ABI the host implements. Value member. */
    const char *library_path;          /* the library's file as the host opened it (NUL-terminated). Borrowed for the call only. */
    const char *host_name;             /* the host program, e.g. "pager" (NUL-terminated). Borrowed for the call only. */
    const char *host_version;          /* its version, e.g. "1.0.0" (NUL-terminated). Borrowed for the call only. */
    void *host_data;                   /* the host's private data; plugins never read or write it. */
    /* Writes `message` (NUL-terminated, borrowed; the host copies it, up to 64 KiB) at `level`
     * (PAGING_LOG_*) to the host's log, tagged with the library. Say here why init() fails.
     * During init() only, on its thread. */
    void (*log)(const paging_library_info_t *info, uint32_t level, const char *message);
    /* Members added in later 1.x versions go here, at the end. */
};

/* The library's table. Static, owned by the plugin library, valid while it is loaded. */
typedef struct paging_plugin_entry {
    /* ---- ABI 1.0 draft members ---- */

    /* The ABI the library was built against (PAGING_ABI_VERSION_INIT). [any-thread] Value member. */
    paging_version_t abi_version;

    /* sizeof(paging_plugin_entry_t) (version.h, rule 2). [any-thread] Value member. */
    uint32_t struct_size;

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

    /* ---- ABI 1.0 ---- */

    /* Prepares the library, once, before any other function of this table is called. May be
     * NULL. Returns PAGING_OK, or a
     * PAGING_ERR_* code to refuse loading (log why through info->log first). `info` is borrowed
     * for the call. [called once, on the loading thread] */
    paging_status_t (*init)(const paging_library_info_t *info);

    /* Releases what init() prepared, once: when the host shuts down cleanly, after every
     * instance of the library was destroyed, or at once when the host refuses the library after
     * init() succeeded. May be NULL. Not called when init() failed, nor when the host is
     * killed. [called once, no other call in flight] */
    void (*deinit)(void);

    /* Members added in later 1.x versions go here, at the end. */
} paging_plugin_entry_t;

/* The first two members of a descriptor's or an entry's initializer: the ABI version these
 * headers describe, and the struct's size.
 *   static const paging_plugin_descriptor_t d = { PAGING_DESCRIPTOR_HEAD, "id", ... }; */
#define PAGING_DESCRIPTOR_HEAD PAGING_ABI_VERSION_INIT, (uint32_t)sizeof(paging_plugin_descriptor_t)
#define PAGING_ENTRY_HEAD      PAGING_ABI_VERSION_INIT, (uint32_t)sizeof(paging_plugin_entry_t)

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
