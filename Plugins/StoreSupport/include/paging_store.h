/*
 * paging_store.h - what the shared-state interceptors (redis-cache, postgres-store) have in
 * common: the freshness policy read from the config, answering a request with a page held, a
 * queue of deferred lookups run on the plugin's own thread (paging.async-intercept/1), warnings
 * limited to one a minute, and ${VAR} in config strings.
 *
 * Plain C99 on the ABI headers and pthreads; linked into each plugin's library (third-party
 * path: compile paging_store.c beside the plugin's file).
 */
#ifndef PAGING_STORE_H
#define PAGING_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "paging/paging.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- freshness ------------------------------------------------------------------------ */

#define PSTORE_CACHE_FIRST 0
#define PSTORE_NETWORK_FIRST 1
#define PSTORE_STALE_WHILE_REVALIDATE 2

typedef struct pstore_freshness {
    int policy;          /* PSTORE_* */
    int64_t max_age_ms;  /* -1: a page never goes stale */
} pstore_freshness;

/* Reads `policy` and `max_age_seconds` (as sqlite-store). Returns 1, or 0 after config_fail
 * with a message starting with `plugin`. */
int pstore_read_freshness(const paging_host_t *host, const paging_config_t *config, const char *plugin,
                          pstore_freshness *out);

/* ---- pages held ------------------------------------------------------------------------ */

/* A page read whole from a store: views into the reader's buffer. */
typedef struct pstore_page {
    uint32_t flags;
    int64_t stored_at_ms;
    int has_prev, has_next;
    paging_bytes_t prev, next;
    size_t count;
    paging_bytes_t *items; /* count views */
} pstore_page;

/* Whether a page held for a request of `page_size` is whole: it holds page_size items, or it is
 * the last page (a short last page is whole), or it names its next page (a filter after the
 * source made it short, or the server caps its page size). A short page that names none may
 * be a last page that grows: it is not whole. */
int pstore_page_is_whole(const pstore_page *page, uint32_t page_size);

/* Whether the page is fresh by `freshness` now. */
int pstore_page_is_fresh(const pstore_freshness *freshness, const pstore_page *page);

/* Sets `page` on `out` (items, keys, flags). Returns 1, or 0 when the host refused an item (the
 * page is then not usable; logged at WARNING naming `plugin`). */
int pstore_put_page(const paging_host_t *host, const char *plugin, const pstore_page *page,
                    paging_intercept_out_t *out);

/* ---- requests ------------------------------------------------------------------------- */

/* Whether the request's param `name` has exactly `value`. */
int pstore_param_is(const paging_request_t *request, const char *name, const char *value);

/* Whether the request is a hard refresh (REFRESH with hard_refresh = "true"). */
int pstore_is_hard_refresh(const paging_request_t *request);

/* Says (ERROR, naming `plugin`) that the page of a hard refresh did not replace the pages stored
 * before (`why`): they stay, and later loads may be answered with them. The load itself
 * succeeded, so this line is all that tells a run that the store still holds the old pages. */
void pstore_say_not_replaced(const paging_host_t *host, const char *plugin, const char *why);

/* Whether the request must not be answered from the store: a hard refresh, or a reload (param
 * reload = "true": a short page loaded again, which may have grown). */
int pstore_goes_to_source(const paging_request_t *request);

/* Unix time in milliseconds. */
int64_t pstore_now_ms(void);

/* Adds 1 to the host's counter `name` when it takes counters (pager run --stats). */
void pstore_count(const paging_host_t *host, const paging_ext_metrics_host_t *metrics, const char *name);

/* ---- deferred lookups ------------------------------------------------------------------ */

/* A deferred intercept waiting for the plugin's thread: what it needs of the request, copied. */
typedef struct pstore_job {
    struct pstore_job *next;
    uint64_t id;              /* the deferred intercept to answer */
    uint32_t page_size;
    uint32_t to_source;       /* 1: proceed (a hard refresh or a reload: pstore_goes_to_source) */
    int64_t waiting_since_ms; /* when the job began to wait (redis-cache's lease) */
    int64_t mark_ms;          /* the plugin's: redis-cache keeps the stored_at of a stale page here */
    size_t identity_len;
    uint8_t identity[];       /* identity_len bytes */
} pstore_job;

/* The plugin's thread and its queue. run() is called for each queued job, in order, on the
 * thread; it owns the job (frees it, or hands it to pstore_queue_wait). poll() is called every
 * poll_ms while jobs wait, with the list of them (detached); it owns them likewise. */
typedef struct pstore_queue {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    pstore_job *head, *tail; /* queued, under lock */
    pstore_job *waiting;     /* waiting (poll), under lock */
    pthread_t thread;
    int started, stopping;
    int64_t poll_ms;
    void *owner;
    void (*run)(void *owner, pstore_job *job);
    void (*poll)(void *owner, pstore_job *jobs);
} pstore_queue;

void pstore_queue_init(pstore_queue *q, void *owner, void (*run)(void *, pstore_job *),
                       void (*poll)(void *, pstore_job *), int64_t poll_ms);

/* Copies what `request` needs into a new job, defers the intercept (async->defer(out)) and
 * queues it. Returns PAGING_INTERCEPT_PENDING; or 0 when the thread could not start or memory
 * ran out (the caller then answers itself). */
uint32_t pstore_queue_defer(pstore_queue *q, const paging_ext_async_intercept_host_t *async,
                            const paging_request_t *request, paging_intercept_out_t *out);

/* From run() or poll(), on the thread: the job waits; poll() sees it within poll_ms. */
void pstore_queue_wait(pstore_queue *q, pstore_job *job);

/* paging.async-intercept/1 cancel(): drops the job `id` if still queued or waiting. */
void pstore_queue_cancel(pstore_queue *q, uint64_t id);

/* Stops and joins the thread and frees the jobs it had not answered (the host ends them). */
void pstore_queue_destroy(pstore_queue *q);

/* Answers the deferred intercept of `job` with `answer(context, out)`. */
void pstore_resume(const paging_host_t *host, const paging_ext_async_intercept_host_t *async, const pstore_job *job,
                   uint32_t (*answer)(void *context, paging_intercept_out_t *out), void *context);

/* ---- warnings, at most one a minute ---------------------------------------------------- */

typedef struct pstore_warner {
    pthread_mutex_t lock;
    int64_t last_ms;     /* when the last warning went out; 0: never */
    uint64_t held_back;  /* warnings not logged since */
} pstore_warner;

void pstore_warner_init(pstore_warner *w);
void pstore_warner_destroy(pstore_warner *w);

/* Logs `message` at WARNING unless a warning went out less than a minute ago (then counts it;
 * the next one says how many were held back). Returns 1 when it logged. [any-thread] */
int pstore_warn(const paging_host_t *host, pstore_warner *w, const char *message);

/* Forgets the last warning: the next one goes out at once (after a recovery). */
void pstore_warner_reset(pstore_warner *w);

/* ---- config strings -------------------------------------------------------------------- */

/* `text` with each ${NAME} replaced by the environment variable NAME, and ${NAME:-fallback} by
 * it or, when unset or empty, by fallback; "$$" is a "$". Returns a malloc'd string, or NULL
 * with `error` saying why (an unset variable without a fallback, an unterminated ${, out of
 * memory). The error never quotes a variable's value. */
char *pstore_expand_env(const char *text, char *error, size_t error_len);

/* The integer config key `key` in min...max, or `fallback` when absent. Returns 1, or 0 with
 * `problem` naming the key and the range. */
int pstore_config_int(const paging_host_t *host, const paging_config_t *config, const char *key, int64_t fallback,
                      int64_t min, int64_t max, int64_t *out, char *problem, size_t problem_len);

/* Whether `text` is 1...max_len bytes of [A-Za-z0-9_.-]. */
int pstore_is_plain_name(const char *text, size_t max_len);

/* Whether the config's top-level keys are all in `known` (NULL-terminated); otherwise writes
 * the first other one (cut to fit) to `unknown` and returns 0. A misspelt key ("max_age_second")
 * was ignored, its setting left at its default without a word. */
int pstore_only_known_keys(const paging_host_t *host, const paging_config_t *config, const char *const *known,
                           char *unknown, size_t unknown_len);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_STORE_H */
