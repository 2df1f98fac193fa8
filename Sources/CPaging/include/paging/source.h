/*
 * paging/source.h - the table a source plugin instance gives the host.
 *
 * A source names the first key (refresh_key), optionally computes neighbouring keys
 * (key_chain), and loads pages asynchronously (fetch -> host->fetch_* completions).
 *
 * Thread rule: the host never overlaps calls on one instance ([serialized]) unless the
 * instance's descriptor has PAGING_PLUGIN_THREAD_SAFE, in which case fetch() may be called
 * concurrently from any threads (and alongside key_chain(), whose calls still never overlap
 * one another). cancel() may come from any thread at any time before
 * destroy(). destroy() is never concurrent with anything.
 */
#ifndef PAGING_SOURCE_H
#define PAGING_SOURCE_H

#include <stdint.h>

#include "host.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct paging_source paging_source_t;

/* Allocated and owned by the plugin (returned by create_source); the host only calls through
 * it and hands it back to destroy(). Zero it before filling it in (calloc), so that members
 * you do not set are NULL. */
struct paging_source {
    /* ---- ABI 1.0 draft members ---- */

    /* The plugin's private data; the host never reads or writes it. Owned by the plugin.
     * [any-thread] */
    void *plugin_data;

    /* Names the key to load first and on refresh: sets PAGING_KEY_CURRENT on `out` through
     * host->keys_set (no key set = load with an empty key). `out` is owned by the host and
     * valid for this call only, on this thread. Returns PAGING_OK or a PAGING_ERR_* code. [serialized] */
    paging_status_t (*refresh_key)(paging_source_t *self, paging_keys_out_t *out);

    /* Computes the keys around `key`: sets PAGING_KEY_PREV / PAGING_KEY_NEXT on `out` through
     * host->keys_set (NULL or unset = no page in that direction). May be NULL: keys then come
     * with each page (host->fetch_set_prev_key/next_key/flags). `key` and `out` are owned by
     * the host and valid for this call only (`out` on this thread only). A call that fails
     * (or sets a key the host refuses) fails the load of `key` with its status: the page's
     * neighbours would be unknown. [serialized] */
    paging_status_t (*key_chain)(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out);

    /* Starts loading the page for `request` and returns at once. PAGING_OK = accepted: the
     * plugin completes it exactly once via host->fetch_complete or host->fetch_fail, from any
     * thread (inside fetch() is fine), after setting items/keys/flags with host->fetch_*.
     * Non-OK = failed synchronously with that code; the host then ignores any later completion
     * for `fetch_id` (a fetch already completed or failed inside fetch() keeps that ending, and
     * the contradiction is logged). `request` is owned by the host and borrowed for this call only: copy what
     * you need. `fetch_id` is an opaque integer valid until the fetch is completed or failed.
     * [serialized unless the descriptor has PAGING_PLUGIN_THREAD_SAFE] */
    paging_status_t (*fetch)(paging_source_t *self, const paging_request_t *request, uint64_t fetch_id);

    /* Asks the plugin to stop the fetch `fetch_id`. May be NULL. The plugin should complete
     * it soon (host->fetch_fail with PAGING_ERR_CANCELLED); the host stops waiting anyway and
     * ignores later completions. An unknown or finished id must be ignored. No pointers
     * borrowed. [any-thread] */
    void (*cancel)(paging_source_t *self, uint64_t fetch_id);

    /* Releases the instance, including `self` (the plugin owns the struct). Called exactly
     * once, with no other call on this instance in flight. Its `host` is valid until destroy()
     * returns: finish or stop the threads that call it first. (A call made afterwards is a bug
     * the host survives: a completion, a log line or a counter is dropped, and said once.)
     * [serialized] */
    void (*destroy)(paging_source_t *self);

    /* ---- ABI 1.0 ---- */

    /* sizeof(paging_source_t) in the plugin's headers (version.h, rule 2). Set it.
     * [any-thread] Value member. */
    uint32_t struct_size;
    uint32_t reserved; /* 0. */

    /* This instance's table for the extension `id` (NUL-terminated; extensions.h), or NULL
     * when it has none. May be NULL (no extensions). The table must stay valid until
     * destroy() returns. The host asks right after create_source returns. [serialized] */
    const void *(*get_extension)(paging_source_t *self, const char *id);

    /* Members added in later 1.x versions go here, at the end. */
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_SOURCE_H */
