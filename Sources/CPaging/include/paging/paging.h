/*
 * paging/paging.h - the SwiftPaging plugin ABI (umbrella header). Plain C99; also valid C++.
 *
 * The contract (ABI 1.0):
 *   - A plugin library exports one symbol, paging_plugin_entry (entry.h), returning a static
 *     table; the host refuses a different ABI major, in the entry or in any descriptor.
 *   - It grows without breaking anyone (version.h): core structs are core forever and grow at
 *     their end only, each saying its size (struct_size, PAGING_STRUCT_HAS); new capabilities
 *     are extensions found by versioned id, on both sides (extensions.h).
 *   - No allocation crosses the boundary: whoever allocates frees. Every pointer the host hands
 *     a plugin is borrowed for the duration of that call. Every byte a plugin hands back goes
 *     through a host function (host.h) that copies it, so plugins in any language need no
 *     allocator agreement with the host. Items must be valid UTF-8 JSON, one value each.
 *   - Handles held across calls (an in-flight fetch) are opaque integer ids, never pointers:
 *     misuse (unknown/finished ids, double completion, NULL with a length) is detected,
 *     logged and refused with PAGING_ERR_INVALID_ARGUMENT - it cannot crash the host.
 *     Handles of one call (config, out, keys out) are checked on every use: outside their call
 *     or thread they are refused and logged, never applied to another call.
 *   - Fixed-width integers only in structs and parameters (uint32_t with #define constants
 *     instead of enum/bool), no bit-fields, no implicit padding.
 *   - Every member documents its thread rule and the lifetime of its pointers:
 *       [any-thread]      any thread, any time while the object lives;
 *       [serialized]      never overlapping another call on the instance (unless THREAD_SAFE);
 *       [create-only]     during the create_* call that received the config, on its thread;
 *       [intercept-only]  during the intercept() that received `out`, on its thread;
 *       [keys-only]       during the refresh_key()/key_chain() that received `out`, on its thread.
 */
#ifndef PAGING_PAGING_H
#define PAGING_PAGING_H

#include "version.h"
#include "types.h"
#include "host.h"
#include "interceptor.h"
#include "source.h"
#include "entry.h"
#include "extensions.h"

#endif /* PAGING_PAGING_H */
