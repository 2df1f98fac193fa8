/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/no_entry.c -o libno_entry.so */
/*
 * Fixture: a shared library that is not a plugin. It exports `paging_plugin_entry_v0` (a
 * near-miss name) but not `paging_plugin_entry`; the host must refuse it with a message naming
 * the library and the missing symbol.
 */
#include "paging/paging.h"

PAGING_EXPORT int paging_plugin_entry_v0(void);

PAGING_EXPORT int paging_plugin_entry_v0(void) { return 42; }
