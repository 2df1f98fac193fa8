/*
 * paging/version.h - the ABI version of the SwiftPaging plugin interface, and the rules by
 * which it grows.
 *
 * The contract is ABI 1.0. Every 1.x host loads every 1.0 plugin, and a plugin built against
 * a later 1.x loads in a 1.0 host unless it says it needs something that host lacks. The
 * rules that make this hold in both directions:
 *
 *   1. Core structs never change. The members of paging_plugin_entry_t,
 *      paging_plugin_descriptor_t, paging_library_info_t, paging_host_t, paging_source_t,
 *      paging_interceptor_t, paging_request_t and paging_page_t are core forever: never
 *      removed, moved, retyped or given another meaning.
 *   2. Core structs can grow, at their end only, and each says how big it is: its
 *      `struct_size` member holds sizeof the struct as its writer's headers define it. A
 *      reader reads a member only when PAGING_STRUCT_HAS(ptr, type, member) says the writer's
 *      struct holds it - never by comparing version numbers. A host does this for every
 *      plugin-owned struct; a plugin built against a later 1.x does it for members of the
 *      host-owned structs (request, page, host table, library info) that 1.0 lacks. Code written against
 *      1.0 needs no check for any member these headers declare.
 *   3. New capabilities are extensions, not core members. Each has a versioned string id
 *      ("paging.log-level/1") and a table of its own. The plugin asks the host
 *      (host->get_extension) and the host asks a plugin instance (get_extension in
 *      paging_source_t / paging_interceptor_t); the answer is the table, or NULL when absent.
 *      An extension's table never changes once published: a change is a new id ("/2").
 *   4. A plugin that cannot work without a host extension names it in its descriptor's
 *      required_extensions. A host that lacks one refuses the plugin with one line naming the
 *      plugin, its ABI version, the host's and the missing id.
 *   5. Value types that appear in arrays or by value (paging_bytes_t, paging_param_t,
 *      paging_version_t) are fixed forever: they cannot grow without breaking the arrays that
 *      hold them. New data travels in new members of the structs that hold them.
 *   6. A different MAJOR version breaks all of the above; the host refuses it, naming the
 *      library and both versions. PATCH changes comments only.
 *
 * Libraries built against the 1.0 draft headers (before struct_size existed) keep working
 * unchanged. In the entry and the descriptors, struct_size sits where the draft had padding,
 * which static tables leave zero: the host reads a struct_size of 0 as "built against the
 * draft", reads those tables as the draft defined them, and reads the library's instance
 * tables only up to the draft's destroy member (they have no struct_size of their own).
 */
#ifndef PAGING_VERSION_H
#define PAGING_VERSION_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI 1.4: 1.0 plus the extensions marked "since 1.1" and "since 1.2" in extensions.h,
 * paging_page_t's metadata (1.1) and the page flags PAGING_PAGE_SHORTENED (1.3) and
 * PAGING_PAGE_EMPTIED (1.4, types.h). */
#define PAGING_ABI_VERSION_MAJOR 1u
#define PAGING_ABI_VERSION_MINOR 4u
#define PAGING_ABI_VERSION_PATCH 0u

/* A version triple. Value type, fixed forever: copied, never borrowed. */
typedef struct paging_version {
    uint32_t major; /* breaking changes. [any-thread] Value member. */
    uint32_t minor; /* additive changes (members at the end, new extensions). [any-thread] Value member. */
    uint32_t patch; /* comments only. [any-thread] Value member. */
} paging_version_t;

/* Initializer for a paging_version_t holding the version these headers describe:
 *   static const paging_version_t v = PAGING_ABI_VERSION_INIT; */
#define PAGING_ABI_VERSION_INIT \
    { PAGING_ABI_VERSION_MAJOR, PAGING_ABI_VERSION_MINOR, PAGING_ABI_VERSION_PATCH }

/* Non-zero when a host of version `host` may load a library built against `plugin`: the
 * majors are equal. A later minor is loadable too; whether it runs depends on the extensions
 * it requires (rule 4 above), which the host checks separately.
 * [any-thread] Pure function; no pointers. */
static inline int paging_version_is_compatible(paging_version_t host, paging_version_t plugin)
{
    return host.major == plugin.major;
}

/* Non-zero when the struct at `ptr` (which has a uint32_t struct_size member) was written
 * with room for `member` of `type`: read a member added after 1.0 only when this holds.
 *   if (PAGING_STRUCT_HAS(request, paging_request_t, some_later_member)) ... */
#define PAGING_STRUCT_HAS(ptr, type, member) \
    ((size_t)(ptr)->struct_size >= offsetof(type, member) + sizeof(((type *)0)->member))

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_VERSION_H */
