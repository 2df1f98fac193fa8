/*
 * paging/interceptor.h - the table an interceptor plugin instance gives the host.
 *
 * An interceptor sees every request before it reaches the source. It can let it proceed
 * (optionally rewritten through host->out_set_key/out_set_page_size/out_set_param), answer it
 * itself (COMPLETE, with a page built through host->out_add_item/out_set_*), or fail it.
 *
 * Thread rule: the host never overlaps calls on one instance ([serialized]) unless the
 * instance's descriptor has PAGING_PLUGIN_THREAD_SAFE, in which case intercept() and handle()
 * may be called concurrently from any threads. destroy() is never concurrent with anything.
 *
 * Blocking: intercept() and handle() run on the thread of the load that made the request (one
 * of the host's worker threads). They may block - on a lock, a disk read - but the load, and
 * that thread, wait meanwhile; a manifest's call_timeout_ms fails a load whose call has not
 * returned in time (the call itself cannot be stopped, and later calls queue behind it). An
 * intercept that must wait should defer its answer instead (paging.async-intercept/1,
 * extensions.h): the load then waits without holding a thread.
 *
 * Failures: a FAIL of class PAGING_ERR_TRANSIENT or PAGING_ERR_TIMEOUT is retried by the
 * request's retry policy (intercept() is called again), like a failed fetch; other classes are
 * not retried. paging.retry-hint/1 says how long to wait first.
 *
 * Core forever (version.h, rule 1): every member below. Extensions the host may ask this
 * instance for: get_extension (extensions.h).
 */
#ifndef PAGING_INTERCEPTOR_H
#define PAGING_INTERCEPTOR_H

#include <stdint.h>

#include "host.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ABI 1.0: intercept() return values ----------------------------------------------- */
#define PAGING_INTERCEPT_PROCEED             0u /* pass the (possibly rewritten) request on. */
#define PAGING_INTERCEPT_PROCEED_AND_OBSERVE 1u /* pass it on, then call handle() with the resulting page. */
#define PAGING_INTERCEPT_COMPLETE            2u /* the items/keys/flags set on `out` form the page; the source is not called. */
#define PAGING_INTERCEPT_FAIL                3u /* fail the request with out_fail's code+message (PAGING_ERR_INTERNAL without it). */
/* A cache or store with a page for the request (set on `out`, as for COMPLETE), to answer it by
 * its freshness policy (requires handle(); without it they act as COMPLETE and PROCEED_AND_OBSERVE): */
#define PAGING_INTERCEPT_COMPLETE_THEN_REVALIDATE 4u /* answer with the page on `out` now; then the host
                                                      * loads the request in the background through the
                                                      * rest of the chain and calls handle() with the fresh
                                                      * page (stale-while-revalidate). */
#define PAGING_INTERCEPT_PROCEED_OR_FALL_BACK     5u /* pass the (possibly rewritten) request on and call
                                                      * handle() with the page; should the rest of the chain
                                                      * fail, answer with the page on `out` instead (the host
                                                      * logs a warning naming this plugin and the failure;
                                                      * handle() is not called). Network-first. */

typedef struct paging_interceptor paging_interceptor_t;

/* Allocated and owned by the plugin (returned by create_interceptor); the host only calls
 * through it and hands it back to destroy(). Zero it before filling it in (calloc), so that
 * members you do not set are NULL. */
struct paging_interceptor {
    /* ---- ABI 1.0 draft members ---- */

    /* The plugin's private data; the host never reads or writes it. Owned by the plugin.
     * [any-thread] */
    void *plugin_data;

    /* Inspects `request` and returns a PAGING_INTERCEPT_* value, having set results on `out`
     * through the host's out_* functions. `request` and `out` are owned by the host and valid
     * for this call only; `out` only on this thread. Any other return value is treated as FAIL with PAGING_ERR_INTERNAL.
     * [serialized unless the descriptor has PAGING_PLUGIN_THREAD_SAFE] */
    uint32_t (*intercept)(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out);

    /* Observes the page produced for a request this instance answered with
     * PROCEED_AND_OBSERVE, PROCEED_OR_FALL_BACK or COMPLETE_THEN_REVALIDATE. May be NULL. `page` is owned by the host and borrowed for this call
     * only. [serialized unless the descriptor has PAGING_PLUGIN_THREAD_SAFE] */
    void (*handle)(paging_interceptor_t *self, const paging_page_t *page);

    /* Releases the instance, including `self` (the plugin owns the struct). Called exactly
     * once, with no other call on this instance in flight; nothing is called on it afterwards.
     * [serialized] */
    void (*destroy)(paging_interceptor_t *self);

    /* ---- ABI 1.0 ---- */

    /* sizeof(paging_interceptor_t) in the plugin's headers (version.h, rule 2). Set it.
     * [any-thread] Value member. */
    uint32_t struct_size;
    uint32_t reserved; /* 0. */

    /* This instance's table for the extension `id` (NUL-terminated; extensions.h), or NULL
     * when it has none. May be NULL (no extensions). The table must stay valid until
     * destroy() returns. The host asks right after create_interceptor returns. [serialized] */
    const void *(*get_extension)(paging_interceptor_t *self, const char *id);

    /* Members added in later 1.x versions go here, at the end. */
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_INTERCEPTOR_H */
