/*
 * The calling thread's innermost call of the host into a plugin (PagingHost's call handles):
 * one thread-local pointer, cheaper to reach from C than through a pthread key. Part of the
 * host, not of the plugin ABI.
 */
#ifndef PAGING_CALL_FRAME_H
#define PAGING_CALL_FRAME_H

/* The frame this thread set last, or NULL. */
void *paging_call_frame_current(void);

/* Makes `frame` (or NULL) this thread's innermost frame. */
void paging_call_frame_set(void *frame);

/* Naming the plugin library a crash came from: plugin_crash.h (included here, so that a build
 * whose module of this folder predates that header sees it). */
#include "plugin_crash.h"

#endif
