/*
 * paging/version.h - the ABI version of the SwiftPaging plugin interface.
 *
 * Versioning policy (ABI 1.0):
 *   - MAJOR changes break the layout or meaning of existing structs/functions. A host refuses
 *     a library whose entry states a different major.
 *   - MINOR changes only ADD: new constants, and new members at the END of a struct/table.
 *     A host loads plugins of any minor of its own major. Because tables only grow at the
 *     end, each side checks the other's version before touching a member added later:
 *       * a plugin built against a newer minor than the host must check
 *         host->abi_version.minor before calling a host function added after that minor
 *         (the member is not present in an older host's table);
 *       * the host checks the plugin entry's / descriptor's abi_version.minor before reading
 *         plugin table members added after that minor.
 *   - PATCH changes are documentation/clarification only and never affect compatibility.
 */
#ifndef PAGING_VERSION_H
#define PAGING_VERSION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI 1.0 */
#define PAGING_ABI_VERSION_MAJOR 1u
#define PAGING_ABI_VERSION_MINOR 0u
#define PAGING_ABI_VERSION_PATCH 0u

/* A version triple. Plain value type: copied, never borrowed. */
typedef struct paging_version {
    uint32_t major; /* breaking changes. [any-thread] Value member. */
    uint32_t minor; /* additive changes (members appended at the end). [any-thread] Value member. */
    uint32_t patch; /* no ABI effect. [any-thread] Value member. */
} paging_version_t;

/* Initializer for a paging_version_t holding the version these headers describe:
 *   static const paging_version_t v = PAGING_ABI_VERSION_INIT; */
#define PAGING_ABI_VERSION_INIT \
    { PAGING_ABI_VERSION_MAJOR, PAGING_ABI_VERSION_MINOR, PAGING_ABI_VERSION_PATCH }

/* Returns non-zero when a host of version `host` may load a plugin built against `plugin`:
 * the majors are equal. Minor and patch may differ in either direction (see the policy at the
 * top of this file for who checks what before using later members).
 * Header-only so that plugins built with a plain C compiler need no library of ours.
 * [any-thread] Pure function; no pointers. */
static inline int paging_version_is_compatible(paging_version_t host, paging_version_t plugin)
{
    return host.major == plugin.major;
}

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_VERSION_H */
