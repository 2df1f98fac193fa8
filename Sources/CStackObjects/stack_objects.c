#define _GNU_SOURCE
#include "stack_objects.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <stddef.h>

int paging_stack_objects(const char **files, int max) {
    void *frames[128];
    if (max > 128) max = 128;
    int count = max > 0 ? backtrace(frames, max) : 0;
    for (int i = 0; i < count; i++) {
        Dl_info info;
        files[i] = dladdr(frames[i], &info) != 0 ? info.dli_fname : NULL;
    }
    return count;
}
