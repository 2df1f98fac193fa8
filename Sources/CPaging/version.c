/*
 * version.c - SwiftPM needs one C source in a C target. The ABI itself is header-only:
 * third-party plugins built with plain cc never link against this file, and nothing here is
 * exported (so plugin libraries built by SwiftPM export only paging_plugin_entry).
 */
#include "paging/paging.h"

#if defined(__GNUC__) || defined(__clang__)
#define PAGING_INTERNAL __attribute__((visibility("hidden")))
#else
#define PAGING_INTERNAL
#endif

/* The ABI version these headers describe, for debuggers and `nm`. Not part of the ABI. */
PAGING_INTERNAL extern const paging_version_t paging_host_abi_version;
PAGING_INTERNAL const paging_version_t paging_host_abi_version = PAGING_ABI_VERSION_INIT;
