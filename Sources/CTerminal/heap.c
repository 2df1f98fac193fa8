/*
 * The pager host's heap settings, made before main and before any thread starts.
 * (Part of the pager host, not of the plugin ABI.)
 */
#include <malloc.h>

/* The items of a run are many small allocations, most made on the plugins' own threads. glibc
 * grows a thread's heap by exactly what an allocation needs: one mprotect call per 4 KiB page,
 * about 1,100 calls in a 200-page run (5 MB of items). With a 4 MiB pad a heap grows in
 * 4 MiB steps; the pages are still only touched when used. */
__attribute__((constructor)) static void paging_pad_heap_growth(void) {
    mallopt(M_TOP_PAD, 4 << 20);
}
