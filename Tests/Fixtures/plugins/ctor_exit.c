/* build: cc -std=c99 -shared -fPIC -I Sources/CPaging/include Tests/Fixtures/plugins/ctor_exit.c -o libctor_exit.so */
/* Fixture: a library whose constructor ends the process with exit(0), as if all went well. */
#include <stdlib.h>

#include "paging/paging.h"

__attribute__((constructor)) static void ce_exit(void)
{
    exit(0);
}

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return 0; }
