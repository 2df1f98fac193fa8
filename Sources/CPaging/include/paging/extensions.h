/*
 * paging/extensions.h - capabilities beyond the core, each found by a versioned string id.
 *
 * A plugin asks the host:          host->get_extension(host, PAGING_EXT_LOG_LEVEL)
 * The host asks a plugin instance: source->get_extension(source, PAGING_EXT_HEALTH)
 *                                  (or interceptor->get_extension)
 * Either answers with a pointer to the extension's table, or NULL when it does not offer it.
 * Ids are "paging.<name>/<version>"; a table never changes once its id is published, so a
 * changed extension is a new id ("paging.health/2"), and a side may offer both.
 *
 * An id may name a table on each side: the host's (what the plugin calls) and the instance's
 * (what the host calls), declared below as paging_ext_<name>_host_t and paging_ext_<name>_t.
 * The `void *self` of every function of an instance's table is the instance pointer create_*
 * returned (the paging_source_t * or paging_interceptor_t *, not its plugin_data).
 *
 * Which side offers what (every 1.x host offers the host tables below from the version named;
 * a plugin still checks for NULL, as for any extension, or lists the id in its descriptor's
 * required_extensions):
 *
 *   id                          since  offered by         what for
 *   paging.log-level/1          1.0    the host           the lowest level the host keeps: skip building lines it drops
 *   paging.health/1             1.0    an instance        "can you serve now?" without loading a page (pager validate)
 *   paging.page-transform/1     1.1    host + instance    change the page on its way back: drop, replace, add, reorder items; metadata
 *   paging.async-intercept/1    1.1    host + instance    answer an intercept later, from any thread, by id (waits hold no thread)
 *   paging.load-outcome/1       1.1    an instance        hear that a load this instance let proceed failed
 *   paging.retry-hint/1         1.1    the host           say how long to wait before a failure is retried
 *   paging.metrics/1            1.1    the host           publish named counters and gauges (pager run --stats)
 *   paging.sized-key-chain/1    1.1    an instance        key_chain() told the page size (offset keys)
 *   paging.invalidation/1       1.1    host + instance    say the data changed; refresh around the reader's item
 *   paging.fetch-items/1        1.2    the host           add a page's items to a fetch in one call
 *
 * A plugin that cannot work without a host extension lists it in its descriptor's
 * required_extensions (entry.h); otherwise it asks in create_* and copes with NULL.
 */
#ifndef PAGING_EXTENSIONS_H
#define PAGING_EXTENSIONS_H

#include <stdint.h>

#include "host.h"
#include "types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- paging.log-level/1 (the host) ------------------------------------------------------ */

#define PAGING_EXT_LOG_LEVEL "paging.log-level/1"

typedef struct paging_ext_log_level {
    /* The lowest PAGING_LOG_* level the host keeps for this instance: a line below it is
     * dropped, so a plugin may skip formatting it. May change while the instance lives (ask
     * each time; it is cheap). [any-thread] */
    uint32_t (*min_level)(const paging_host_t *host);
} paging_ext_log_level_t;

/* ---- paging.health/1 (a plugin instance) ------------------------------------------------ */

#define PAGING_EXT_HEALTH "paging.health/1"

typedef struct paging_ext_health {
    /* Says whether the instance can serve loads now - its file is readable, its database
     * writable, its server reachable - without loading a page. `self` is the instance pointer
     * create_* returned (a paging_source_t * or paging_interceptor_t *). Returns PAGING_OK, or a
     * PAGING_ERR_* code after logging why through host->log. May block briefly: keep it well
     * under a second (pager validate waits for it, call_timeout_ms or timeout_ms at most).
     * [serialized] */
    paging_status_t (*check)(void *self);
} paging_ext_health_t;

/* ---- paging.page-transform/1 (host + instance), since 1.1 ------------------------------------
 *
 * An interceptor that offers it is called transform() where it would be called handle(): with
 * the page of a request it answered PROCEED_AND_OBSERVE or PROCEED_OR_FALL_BACK (and the fresh
 * page of COMPLETE_THEN_REVALIDATE), whether the source or a later interceptor produced it. What
 * transform() returns goes on towards the caller and to the interceptors before this one, in
 * place of `page`: a filter drops items, a projection replaces them, an enrichment adds fields.
 *
 * The result is built through the host's table on `out`, a call handle of this transform() call
 * (host.h: valid on this thread until transform() returns). A new page starts empty: append the
 * original items to keep (keep_item, which copies nothing) and new ones (add_item), in the order
 * wanted. Keys and flags stay the original page's unless set; so does its metadata, to which
 * set_metadata adds entries (replacing one of the same name). */

#define PAGING_EXT_PAGE_TRANSFORM "paging.page-transform/1"

/* The result builder of one transform() call: a call handle of that call (host.h). */
typedef struct paging_page_out paging_page_out_t;

/* transform() return values. Any other value fails the load with PAGING_ERR_INTERNAL. */
#define PAGING_TRANSFORM_KEEP    0u /* the page goes on unchanged; whatever was set on `out` is dropped. */
#define PAGING_TRANSFORM_REPLACE 1u /* the page built on `out` goes on: its items, and keys/flags/metadata where set. */
#define PAGING_TRANSFORM_FAIL    2u /* the load fails with fail()'s code and message (PAGING_ERR_INTERNAL without it). */

/* The instance's table. */
typedef struct paging_ext_page_transform {
    /* See above. `page` is owned by the host and borrowed for this call only; `out` only on this
     * thread. [serialized unless the descriptor has PAGING_PLUGIN_THREAD_SAFE] */
    uint32_t (*transform)(void *self, const paging_page_t *page, paging_page_out_t *out);
} paging_ext_page_transform_t;

/* The host's table: builders of the new page, during the transform() that received `out`. Each
 * returns PAGING_OK, or PAGING_ERR_INVALID_ARGUMENT for a bad argument (which fails the load when
 * transform() returns PAGING_TRANSFORM_REPLACE: the page could not be what the plugin meant; KEEP
 * drops what was set, refused or not) or a handle outside its call. [transform-only] */
typedef struct paging_ext_page_transform_host {
    /* Appends the original page's item `index` (0 <= index < page->item_count) without copying
     * it: the cheap way to keep an item. */
    paging_status_t (*keep_item)(paging_page_out_t *out, size_t index);
    /* Appends a new item (one JSON value; borrowed for the call, the host copies and checks it). */
    paging_status_t (*add_item)(paging_page_out_t *out, paging_bytes_t item);
    /* Sets the previous/next-page key of the new page; NULL clears it (borrowed; copied). */
    paging_status_t (*set_prev_key)(paging_page_out_t *out, const paging_bytes_t *key);
    paging_status_t (*set_next_key)(paging_page_out_t *out, const paging_bytes_t *key);
    /* Replaces the PAGING_PAGE_* flags. Value argument. */
    paging_status_t (*set_flags)(paging_page_out_t *out, uint32_t flags);
    /* Adds or replaces the metadata entry `name` (UTF-8 text, borrowed; copied): what the page
     * carries besides its items (paging_page_t.metadata), e.g. how many items a filter dropped.
     * A page's metadata holds at most 1024 entries and 1 MiB of names and values in all. */
    paging_status_t (*set_metadata)(paging_page_out_t *out, paging_bytes_t name, paging_bytes_t value);
    /* Records the failure returned with PAGING_TRANSFORM_FAIL (message borrowed; copied). */
    paging_status_t (*fail)(paging_page_out_t *out, paging_status_t code, const char *message);
} paging_ext_page_transform_host_t;

/* ---- paging.async-intercept/1 (host + instance), since 1.1 -----------------------------------
 *
 * An intercept() that must wait - for a rate limit's next token, a disk read on the plugin's own
 * thread - defers its answer instead of blocking: it calls defer(out), keeps the id, and returns
 * PAGING_INTERCEPT_PENDING. The load then waits without holding a thread. Later, from any thread
 * (or at once, before intercept() returns), the plugin answers exactly once with resume(): the host calls `answer` back at once, on the
 * thread that called resume, with a fresh result builder `out`, on which `answer` sets results
 * through the usual host->out_* functions exactly as intercept() would, and returns a
 * PAGING_INTERCEPT_* value (not PENDING).
 *
 * Like a fetch: the host fails a deferred intercept not answered within the fetch timeout
 * (PAGING_ERR_TIMEOUT), and ends it when its load is cancelled; either way it calls the
 * instance's cancel() (when offered) and a later resume() returns PAGING_ERR_CANCELLED or
 * PAGING_ERR_TIMEOUT without calling `answer` - expected, not misuse. An `answer` still running
 * then is not waited for either: its result is dropped, its resume() returns that status, and
 * cancel() is not called for its id. An unknown or finished id returns
 * PAGING_ERR_INVALID_ARGUMENT and is logged. Ids are opaque integers, never 0. */

#define PAGING_EXT_ASYNC_INTERCEPT "paging.async-intercept/1"

/* intercept() return value (with this extension): the answer comes later, through resume(). */
#define PAGING_INTERCEPT_PENDING 6u

/* The host's table. */
typedef struct paging_ext_async_intercept_host {
    /* During intercept(), on its thread: makes this call's answer a deferred one and returns its
     * id; intercept() then returns PAGING_INTERCEPT_PENDING. (One that returns another code
     * after all answers with it: the deferral is dropped, cancel() hears its id, and a later
     * resume() for it returns PAGING_ERR_CANCELLED; but once a resume() within the call returned
     * PAGING_OK, its answer stands, and the code returned is logged as a warning.) Returns 0
     * (and logs) for a handle outside its call.
     * [intercept-only] */
    uint64_t (*defer)(paging_intercept_out_t *out);
    /* Answers the deferred intercept `id`: calls answer(context, out) on this thread before
     * returning, and returns PAGING_OK once its result was taken (PAGING_ERR_TIMEOUT or
     * PAGING_ERR_CANCELLED when the host ended the intercept before or while `answer` ran;
     * PAGING_ERR_INVALID_ARGUMENT, logged, when `answer` returned PENDING or a host->out_* call
     * of it was refused: the load fails with the reason). After the instance's destroy() returned
     * (a timer that fired late), it returns PAGING_ERR_CANCELLED without a word and calls nothing:
     * harmless to the host, the one call it takes then; the plugin's own state is another matter
     * (stop such timers in destroy()).
     * [any-thread] */
    paging_status_t (*resume)(const paging_host_t *host, uint64_t id,
                              uint32_t (*answer)(void *context, paging_intercept_out_t *out), void *context);
} paging_ext_async_intercept_host_t;

/* The instance's table (optional: without it the host ends deferred intercepts without a word). */
typedef struct paging_ext_async_intercept {
    /* The host stopped waiting for the deferred intercept `id` (its load was cancelled, or it
     * timed out): drop the wait. resume() for it is no longer needed (and is harmless). An unknown
     * or finished id must be ignored. [any-thread] */
    void (*cancel)(void *self, uint64_t id);
} paging_ext_async_intercept_t;

/* ---- paging.load-outcome/1 (an instance), since 1.1 ------------------------------------------
 *
 * The pages of the loads an interceptor let proceed reach it through handle() (or transform())
 * when it asked to observe; their failures reach it here, whether it observes or not: a store
 * can mark its page stale, a circuit breaker open. */

#define PAGING_EXT_LOAD_OUTCOME "paging.load-outcome/1"

typedef struct paging_ext_load_outcome {
    /* The load of `request`, which this instance let proceed (any PROCEED result), failed after
     * its retries, or was cancelled: `code` is the class (PAGING_ERR_*), `message` says why
     * (NUL-terminated). `request` is the request as it reached the step that failed; it and
     * `message` are borrowed for this call only. [serialized unless the descriptor has
     * PAGING_PLUGIN_THREAD_SAFE] */
    void (*failed)(void *self, const paging_request_t *request, paging_status_t code, const char *message);
} paging_ext_load_outcome_t;

/* ---- paging.retry-hint/1 (the host), since 1.1 ------------------------------------------------
 *
 * A failure may say how long to wait before retrying (an API's Retry-After, a rate limiter's next
 * token). The host's retry policy waits at least that long before retrying - but never longer
 * than its longest backoff: a longer hint fails the load at once, the hint in its message. Set
 * the hint before failing; it belongs to that failure only. */

#define PAGING_EXT_RETRY_HINT "paging.retry-hint/1"

typedef struct paging_ext_retry_hint_host {
    /* The failure returned with PAGING_INTERCEPT_FAIL on `out` may be retried after
     * `milliseconds`. [intercept-only] */
    paging_status_t (*out_retry_after)(paging_intercept_out_t *out, uint64_t milliseconds);
    /* The failure of fetch `fetch_id` (fetch_fail, to come) may be retried after `milliseconds`.
     * [any-thread, like the fetch_* functions] */
    paging_status_t (*fetch_retry_after)(const paging_host_t *host, uint64_t fetch_id, uint64_t milliseconds);
} paging_ext_retry_hint_host_t;

/* ---- paging.metrics/1 (the host), since 1.1 ----------------------------------------------------
 *
 * Named numbers a plugin publishes about itself - hits, misses, rows written, tokens left - which
 * the host reports beside its own timings of every call (pager run --stats). Names are short
 * words ("hits", "queue_depth"), 1 to 64 bytes of UTF-8, at most 64 names per instance; a call
 * beyond that returns PAGING_ERR_INVALID_ARGUMENT and is ignored (the host logs the first).
 * Cheap (a lock and a lookup), but not free: publish per page, not per item. */

#define PAGING_EXT_METRICS "paging.metrics/1"

typedef struct paging_ext_metrics_host {
    /* Adds `delta` (>= 0: a counter only goes up; a negative one is refused with
     * PAGING_ERR_INVALID_ARGUMENT) to the counter `name` (NUL-terminated; created at 0; it stays
     * at INT64_MAX once there). [any-thread] */
    paging_status_t (*counter_add)(const paging_host_t *host, const char *name, int64_t delta);
    /* Sets the gauge `name` (NUL-terminated) to `value`. [any-thread] */
    paging_status_t (*gauge_set)(const paging_host_t *host, const char *name, double value);
} paging_ext_metrics_host_t;

/* ---- paging.sized-key-chain/1 (an instance), since 1.1 ---------------------------------------
 *
 * A source whose keys depend on the page size (offsets: the next page starts page_size further)
 * offers this; the host then calls it instead of key_chain(). */

#define PAGING_EXT_SIZED_KEY_CHAIN "paging.sized-key-chain/1"

typedef struct paging_ext_sized_key_chain {
    /* As paging_source_t.key_chain, for pages of `page_size` items. [serialized] */
    paging_status_t (*key_chain)(void *self, paging_bytes_t key, uint32_t page_size, paging_keys_out_t *out);
} paging_ext_sized_key_chain_t;

/* ---- paging.invalidation/1 (host + instance), since 1.1 --------------------------------------
 *
 * A source whose data changed (a file rewritten, a server's push) says so with the host's
 * invalidate(): what was loaded from it is stale. A pagination manager over it (pager browse) then
 * refreshes where its reader is instead of at refresh_key(): at the key the instance's
 * refresh_key_at() names for the item the reader was at (Paging 3's getRefreshKey), so that item
 * stays in view. Without refresh_key_at(), the refresh starts at refresh_key(). pager run, which
 * cannot take back the items it printed, stops and fails instead. */

#define PAGING_EXT_INVALIDATION "paging.invalidation/1"

/* The host's table. */
typedef struct paging_ext_invalidation_host {
    /* The source's data changed. Cheap; callable from any thread while the instance lives, any
     * number of times (each starts one refresh). [any-thread] */
    void (*invalidate)(const paging_host_t *host);
} paging_ext_invalidation_host_t;

/* The instance's table (optional). */
typedef struct paging_ext_invalidation {
    /* Names the key of the page to load so that the reader's item stays in view: sets
     * PAGING_KEY_CURRENT on `out` (host->keys_set; unset = refresh_key()). The item is
     * `anchor_item`, at `anchor_index` in the loaded page of key `anchor_page_key`; pages hold
     * `page_size` items. All borrowed for the call; `out` on this thread only. [serialized] */
    paging_status_t (*refresh_key_at)(void *self, paging_bytes_t anchor_page_key, uint32_t anchor_index,
                                      paging_bytes_t anchor_item, uint32_t page_size, paging_keys_out_t *out);
} paging_ext_invalidation_t;

/* ---- paging.fetch-items/1 (the host), since 1.2 --------------------------------------------
 *
 * A page's items in one call: what fetch_add_item does for each of them, with the fetch looked up
 * once instead of once an item. For a source whose pages hold many small items (the elements of a
 * JSON array, the rows of a query). A source that may run in a 1.0 or 1.1 host falls back to
 * fetch_add_item when get_extension answers NULL. */

#define PAGING_EXT_FETCH_ITEMS "paging.fetch-items/1"

typedef struct paging_ext_fetch_items_host {
    /* Appends `count` items to the fetch's page, `items[0]` first, as `count` calls of
     * host->fetch_add_item would: each is one JSON value, borrowed for the call (the host copies
     * and checks it), and the first one refused fails the fetch (PAGING_ERR_INVALID_ARGUMENT,
     * naming the item's index in the page). `items` may be NULL only when `count` is 0.
     * [any-thread] */
    paging_status_t (*add_items)(const paging_host_t *host, uint64_t fetch_id, const paging_bytes_t *items, size_t count);
} paging_ext_fetch_items_host_t;

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_EXTENSIONS_H */
