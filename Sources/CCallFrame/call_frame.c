#include "call_frame.h"

static _Thread_local void *innermost;

void *paging_call_frame_current(void) { return innermost; }

void paging_call_frame_set(void *frame) { innermost = frame; }
