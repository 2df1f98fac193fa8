/* build: cc -std=c99 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/ctor_crash.c -o libctor_crash.so */
/* Fixture: a library whose constructor crashes (SIGSEGV) whoever loads it. */
#include <signal.h>

#include "paging/paging.h"

__attribute__((constructor)) static void cc_crash(void)
{
    raise(SIGSEGV);
}

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return 0; }
