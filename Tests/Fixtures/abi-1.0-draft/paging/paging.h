/*
 * paging/paging.h - the SwiftPaging plugin ABI (umbrella header). Plain C99; also valid C++.
 *
 * The contract:
 *   - A plugin library exports one symbol, paging_plugin_entry (entry.h), returning a static
 *     table; the host refuses a different ABI major (version.h). Tables grow only at the end.
 *   - No allocation crosses the boundary: whoever allocates frees. Every pointer the host hands
 *     a plugin is borrowed for the duration of that call. Every byte a plugin hands back goes
 *     through a host function (host.h) that copies it, so plugins in any language need no
 *     allocator agreement with the host.
 *   - Handles held across calls (an in-flight fetch) are opaque integer ids, never pointers:
 *     misuse (unknown/finished ids, double completion, NULL with a length) is detected,
 *     logged and refused with PAGING_ERR_INVALID_ARGUMENT - it cannot crash the host.
 *   - Fixed-width integers only in structs and parameters (uint32_t with #define constants
 *     instead of enum/bool), no bit-fields.
 *   - Every member documents its thread rule ([any-thread], [serialized], [create-only],
 *     [intercept-only]) and the lifetime of its pointers.
 */
#ifndef PAGING_PAGING_H
#define PAGING_PAGING_H

#include "version.h"
#include "types.h"
#include "host.h"
#include "interceptor.h"
#include "source.h"
#include "entry.h"

#endif /* PAGING_PAGING_H */
