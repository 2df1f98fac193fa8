/* build: cc -std=c99 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/ctor_hang.c -o libctor_hang.so */
/* Fixture: a library whose constructor never returns (it waits for a signal that never comes). */
#define _POSIX_C_SOURCE 200809L
#include <unistd.h>

#include "paging/paging.h"

__attribute__((constructor)) static void ch_hang(void)
{
    for (;;) pause();
}

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return 0; }
