/*
 * rate_limit.c - a SwiftPaging interceptor plugin letting requests through at a steady rate: a
 * token bucket in front of the source. A request that finds no token waits for its turn without
 * holding a thread (paging.async-intercept/1): one timer thread per instance answers every
 * waiting request at its departure time, however many wait.
 *
 * Plugin id: "rate-limit" (kind INTERCEPTOR, THREAD_SAFE: one lock inside). Requires the host
 * extension paging.async-intercept/1; uses paging.retry-hint/1 and paging.metrics/1 (counters
 * "passed", "waited" and "refused": pager run --stats) when the host offers them.
 *
 * Config keys (any other key fails create with PAGING_ERR_INVALID_CONFIG naming it):
 *   per_second   number > 0 (at least 0.000001), required. Requests let through a second, on
 *                average.
 *   burst        integer in 1...1000000, optional (default 1). How many requests may go at once
 *                after a quiet spell: the bucket holds this many tokens.
 *   max_wait_ms  integer in 0...2147483647, optional (default 30000). The longest a request
 *                waits for its turn; one that would wait longer is refused at once.
 *
 * Behaviour:
 *   The bucket refills at per_second tokens a second, up to burst. intercept(): a request that
 *   finds a token takes it and proceeds (PAGING_INTERCEPT_PROCEED). Otherwise it reserves the next
 *   free slot - the bucket goes into debt, so requests leave in the order they came, one every
 *   1/per_second seconds - and, when that slot is at most max_wait_ms away, the answer is
 *   deferred (PAGING_INTERCEPT_PENDING) and the timer thread resumes it with PROCEED at the slot.
 *   When the slot is further away the request takes no slot and fails with PAGING_ERR_TRANSIENT
 *   ("rate limit: next slot in N ms, beyond max_wait_ms M"), with a retry hint of N ms when the
 *   host offers paging.retry-hint/1.
 *   cancel() (the host stopped waiting: the load was cancelled or timed out) removes the waiter
 *   and gives its slot back: every waiter behind it leaves one slot earlier, and the next new
 *   request gets the last slot. destroy() stops and joins the timer thread; the waiters still
 *   queued are dropped (the host ends them). The timer thread starts with the first wait, so an
 *   instance that never waits starts no thread.
 *
 * build (third-party path): cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread \
 *     -I Sources/CPaging/include Plugins/RateLimit/rate_limit.c -o librate-limit.so
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, pthread_condattr_setclock */

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paging/paging.h"

#define RL_MIN_PER_SECOND 0.000001
#define RL_MAX_BURST 1000000
#define RL_MAX_WAIT_MS 2147483647

/* One deferred request: it proceeds at `departure` (CLOCK_MONOTONIC, ns). Its slot is reserved
 * (and the waiter listed) before the host is asked to defer it: until then `id` is 0 and the
 * waiter is known by its `ticket`. */
typedef struct rl_waiter {
    int64_t departure;
    uint64_t id;
    uint64_t ticket;
} rl_waiter;

typedef struct rl_state {
    paging_interceptor_t interceptor; /* first member: `self` points here */
    const paging_host_t *host;
    const paging_ext_async_intercept_host_t *async;
    const paging_ext_retry_hint_host_t *retry_hint; /* NULL: the host offers no hints */
    const paging_ext_log_level_t *log_level;        /* NULL: the host keeps every line */
    const paging_ext_metrics_host_t *metrics;       /* NULL: the host takes no counters */
    int64_t interval;     /* ns between two departures: ceil(1e9 / per_second) */
    int64_t burst_span;   /* (burst - 1) * interval: how far ahead of now the bucket may run */
    int64_t max_wait;     /* ns */
    int64_t max_wait_ms;

    pthread_mutex_t lock; /* guards everything below */
    pthread_cond_t wake;  /* the timer thread: a new first waiter, or stop */
    int64_t next_free;    /* the bucket as the next departure time (GCRA): a request arriving at
                           * `now` leaves at max(next_free, now - burst_span) */
    rl_waiter *waiters;   /* sorted by departure (the order requests came in) */
    size_t waiter_count, waiter_cap;
    uint64_t last_ticket;
    pthread_t timer;
    int timer_started;
    int stopping;
} rl_state;

static const char *const rl_required_extensions[] = { PAGING_EXT_ASYNC_INTERCEPT, NULL };

static const paging_plugin_descriptor_t rl_descriptor = {
    PAGING_DESCRIPTOR_HEAD,
    "rate-limit",
    "Rate limiter",
    "1.0.0",
    "Lets requests through at per_second (token bucket of burst); waiting requests hold no thread.",
    PAGING_PLUGIN_INTERCEPTOR,
    PAGING_PLUGIN_THREAD_SAFE, rl_required_extensions
};

/* ---- helpers --------------------------------------------------------------------------- */

static int64_t rl_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + (int64_t)ts.tv_nsec;
}

static int64_t rl_ceil_ms(int64_t ns) { return (ns + 999999) / 1000000; }

/* Logs at DEBUG "request <id> <what>", unless the host drops DEBUG lines. */
static void rl_debug(rl_state *st, uint64_t id, const char *what, int64_t ms)
{
    char msg[160];
    if (st->log_level != NULL && st->log_level->min_level(st->host) > PAGING_LOG_DEBUG) return;
    snprintf(msg, sizeof msg, "request %llu %s", (unsigned long long)id, what);
    if (ms >= 0) snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " %lld ms", (long long)ms);
    st->host->log(st->host, PAGING_LOG_DEBUG, msg);
}

/* Lists a waiter in departure order; returns 0 when out of memory. [under lock] */
static int rl_insert(rl_state *st, int64_t departure, uint64_t ticket)
{
    size_t at = st->waiter_count;
    if (st->waiter_count == st->waiter_cap) {
        size_t ncap = st->waiter_cap ? st->waiter_cap * 2 : 64;
        rl_waiter *nw = (rl_waiter *)realloc(st->waiters, ncap * sizeof *nw);
        if (nw == NULL) return 0;
        st->waiters = nw;
        st->waiter_cap = ncap;
    }
    /* Slots are reserved in departure order, so this is the end but after a give-back. */
    while (at > 0 && st->waiters[at - 1].departure > departure) at--;
    memmove(st->waiters + at + 1, st->waiters + at, (st->waiter_count - at) * sizeof *st->waiters);
    st->waiters[at].departure = departure;
    st->waiters[at].id = 0;
    st->waiters[at].ticket = ticket;
    st->waiter_count++;
    return 1;
}

static void rl_remove(rl_state *st, size_t index)
{
    st->waiter_count--;
    memmove(st->waiters + index, st->waiters + index + 1, (st->waiter_count - index) * sizeof *st->waiters);
}

/* Gives back the slot at `departure`, which no request will use: every waiter behind it moves
 * one slot earlier, and so does the next free slot. [under lock] */
static void rl_give_back(rl_state *st, int64_t departure)
{
    size_t i;
    for (i = 0; i < st->waiter_count; i++)
        if (st->waiters[i].departure > departure) st->waiters[i].departure -= st->interval;
    st->next_free -= st->interval;
}

/* ---- the timer thread ------------------------------------------------------------------ */

static uint32_t rl_answer(void *context, paging_intercept_out_t *out)
{
    (void)context;
    (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

/* Resumes each waiter at its departure, until destroy() stops it. */
static void *rl_timer_main(void *arg)
{
    rl_state *st = (rl_state *)arg;
    pthread_mutex_lock(&st->lock);
    while (!st->stopping) {
        if (st->waiter_count == 0 || (st->waiters[0].id == 0 && st->waiters[0].departure <= rl_now())) {
            pthread_cond_wait(&st->wake, &st->lock); /* nothing to do, or the first is due but not yet deferred */
        } else if (st->waiters[0].departure <= rl_now()) {
            uint64_t id = st->waiters[0].id;
            rl_remove(st, 0);
            /* Never call the host under the lock: its cancel() path may hold a lock resume needs. */
            pthread_mutex_unlock(&st->lock);
            st->async->resume(st->host, id, rl_answer, NULL);
            pthread_mutex_lock(&st->lock);
        } else {
            struct timespec until;
            until.tv_sec = (time_t)(st->waiters[0].departure / 1000000000);
            until.tv_nsec = (long)(st->waiters[0].departure % 1000000000);
            pthread_cond_timedwait(&st->wake, &st->lock, &until);
        }
    }
    pthread_mutex_unlock(&st->lock);
    return NULL;
}

/* ---- intercept / cancel ---------------------------------------------------------------- */

static uint32_t rl_fail(rl_state *st, paging_intercept_out_t *out, paging_status_t code, const char *message)
{
    st->host->out_fail(out, code, message);
    return PAGING_INTERCEPT_FAIL;
}

/* Reserves the slot at `departure` for a request that will wait: lists its waiter under a new
 * ticket and starts the timer thread. Returns the ticket, or 0 when it cannot. [under lock] */
static uint64_t rl_reserve(rl_state *st, int64_t departure)
{
    if (!st->timer_started) st->timer_started = pthread_create(&st->timer, NULL, rl_timer_main, st) == 0;
    if (!st->timer_started || !rl_insert(st, departure, st->last_ticket + 1)) return 0;
    st->next_free = departure + st->interval;
    return ++st->last_ticket;
}

/* Adds 1 to the counter `name` the host reports (pager run --stats), when it takes counters. */
static void rl_count(const rl_state *st, const char *name)
{
    if (st->metrics != NULL) st->metrics->counter_add(st->host, name, 1);
}

static uint32_t rl_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    rl_state *st = (rl_state *)self;
    int64_t now = rl_now(), departure, wait;
    uint64_t ticket = 0, id;
    size_t i;
    char msg[160];
    (void)request;

    pthread_mutex_lock(&st->lock);
    departure = st->next_free > now - st->burst_span ? st->next_free : now - st->burst_span;
    wait = departure - now;
    if (wait <= 0) st->next_free = departure + st->interval;
    else if (wait <= st->max_wait) ticket = rl_reserve(st, departure);
    pthread_mutex_unlock(&st->lock);

    if (wait <= 0) {
        rl_count(st, "passed");
        return PAGING_INTERCEPT_PROCEED;
    }
    if (wait > st->max_wait) {
        rl_count(st, "refused");
        snprintf(msg, sizeof msg, "rate limit: next slot in %lld ms, beyond max_wait_ms %lld",
                 (long long)rl_ceil_ms(wait), (long long)st->max_wait_ms);
        if (st->retry_hint != NULL) st->retry_hint->out_retry_after(out, (uint64_t)rl_ceil_ms(wait));
        return rl_fail(st, out, PAGING_ERR_TRANSIENT, msg);
    }
    if (ticket == 0) return rl_fail(st, out, PAGING_ERR_INTERNAL, "rate limit: cannot wait: out of memory, or no timer thread");

    /* The host is called outside the lock (see rl_timer_main). Meanwhile the waiter keeps its
     * place (a cancel() of another waiter moves it with the others), and the timer waits for
     * its id. */
    id = st->async->defer(out);
    pthread_mutex_lock(&st->lock);
    for (i = st->waiter_count; i-- > 0;)
        if (st->waiters[i].ticket == ticket) break;
    if (id == 0) {
        int64_t reserved = st->waiters[i].departure;
        rl_remove(st, i);
        rl_give_back(st, reserved);
    } else {
        st->waiters[i].id = id;
    }
    if (i == 0) pthread_cond_signal(&st->wake);
    pthread_mutex_unlock(&st->lock);
    if (id == 0) return rl_fail(st, out, PAGING_ERR_INTERNAL, "rate limit: the host refused to defer the request");
    rl_debug(st, id, "waits for its slot:", rl_ceil_ms(wait));
    rl_count(st, "waited");
    return PAGING_INTERCEPT_PENDING;
}

/* paging.async-intercept/1: the host stopped waiting for `id`; its slot goes to those behind. */
static void rl_cancel(void *self, uint64_t id)
{
    rl_state *st = (rl_state *)self;
    size_t i;
    int found = 0;
    pthread_mutex_lock(&st->lock);
    for (i = 0; i < st->waiter_count; i++) {
        int64_t departure;
        if (id == 0 || st->waiters[i].id != id) continue;
        departure = st->waiters[i].departure;
        rl_remove(st, i);
        rl_give_back(st, departure);
        pthread_cond_signal(&st->wake); /* the first departure may be earlier now */
        found = 1;
        break;
    }
    pthread_mutex_unlock(&st->lock);
    if (found) rl_debug(st, id, "stopped waiting; its slot was given back", -1);
}

static const paging_ext_async_intercept_t rl_async_ext = { rl_cancel };

static const void *rl_get_extension(paging_interceptor_t *self, const char *id)
{
    (void)self;
    return strcmp(id, PAGING_EXT_ASYNC_INTERCEPT) == 0 ? &rl_async_ext : NULL;
}

/* ---- create / destroy ------------------------------------------------------------------ */

static void rl_destroy(paging_interceptor_t *self)
{
    rl_state *st = (rl_state *)self;
    pthread_mutex_lock(&st->lock);
    st->stopping = 1;
    pthread_cond_signal(&st->wake);
    pthread_mutex_unlock(&st->lock);
    if (st->timer_started) pthread_join(st->timer, NULL);
    pthread_cond_destroy(&st->wake);
    pthread_mutex_destroy(&st->lock);
    free(st->waiters);
    free(st);
}

/* Finds the first top-level key of the config object (valid JSON text: the host checked it)
 * that is not one of `known` (NULL-ended); copies it, as written, into `unknown`. Returns 1 when
 * there is one. */
static int rl_unknown_key(const char *json, const char *const *known, char *unknown, size_t cap)
{
    const char *p;
    int depth = 0;
    for (p = json; *p != '\0'; p++) {
        if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            depth--;
        } else if (*p == '"') {
            const char *key = ++p, *after;
            size_t i, len;
            int match = 0;
            while (*p != '"' && *p != '\0') p += p[0] == '\\' && p[1] != '\0' ? 2 : 1;
            if (*p == '\0') return 0;
            for (after = p + 1; *after == ' ' || *after == '\t' || *after == '\n' || *after == '\r'; after++) {}
            if (depth != 1 || *after != ':') continue; /* a value, or a key of a nested object */
            len = (size_t)(p - key);
            for (i = 0; known[i] != NULL; i++)
                if (strlen(known[i]) == len && memcmp(known[i], key, len) == 0) match = 1;
            if (!match) {
                snprintf(unknown, cap, "%.*s", (int)(len > 100 ? 100 : len), key);
                return 1;
            }
        }
    }
    return 0;
}

/* Reads the config into `st`. Returns NULL, or what is wrong (a static or `buf`). */
static const char *rl_configure(rl_state *st, const paging_host_t *host, const paging_config_t *config,
                                char *buf, size_t cap)
{
    static const char *const known[] = { "per_second", "burst", "max_wait_ms", NULL };
    char key[110];
    uint32_t type;
    double per_second, interval;
    int64_t burst = 1, max_wait_ms = 30000;

    if (rl_unknown_key(host->config_json(config), known, key, sizeof key)) {
        snprintf(buf, cap, "rate-limit: unknown config key `%s` (the keys are per_second, burst and max_wait_ms)", key);
        return buf;
    }
    type = host->config_type(config, "per_second");
    if (type == PAGING_CONFIG_ABSENT)
        return "rate-limit: config `per_second` (number > 0) is required: the requests let through a second";
    per_second = host->config_double(config, "per_second", 0);
    if ((type != PAGING_CONFIG_INT && type != PAGING_CONFIG_DOUBLE) || !(per_second >= RL_MIN_PER_SECOND)
        || per_second - per_second != 0) /* infinite */
        return "rate-limit: config `per_second` must be a number > 0 (at least 0.000001): the requests let through a second";
    type = host->config_type(config, "burst");
    if (type != PAGING_CONFIG_ABSENT) {
        burst = host->config_int(config, "burst", 0);
        if (type != PAGING_CONFIG_INT || burst < 1 || burst > RL_MAX_BURST)
            return "rate-limit: config `burst` must be an integer in 1...1000000: the requests that may go at once";
    }
    type = host->config_type(config, "max_wait_ms");
    if (type != PAGING_CONFIG_ABSENT) {
        max_wait_ms = host->config_int(config, "max_wait_ms", -1);
        if (type != PAGING_CONFIG_INT || max_wait_ms < 0 || max_wait_ms > RL_MAX_WAIT_MS)
            return "rate-limit: config `max_wait_ms` must be an integer in 0...2147483647: the longest a request waits";
    }
    interval = 1e9 / per_second; /* <= 1e15 */
    st->interval = (int64_t)interval;
    if ((double)st->interval < interval || st->interval < 1) st->interval++; /* rounded up: never faster than asked */
    /* Up to 1e6 * 1e15 ns: capped at 1e18 ns (31 years), a full bucket all the same. */
    st->burst_span = (double)(burst - 1) * (double)st->interval > 1e18 ? INT64_C(1000000000000000000) : (burst - 1) * st->interval;
    st->max_wait_ms = max_wait_ms;
    st->max_wait = max_wait_ms * 1000000;
    return NULL;
}

static paging_interceptor_t *rl_create_interceptor(const char *plugin_id, const paging_host_t *host,
                                                   const paging_config_t *config)
{
    char msg[300];
    const char *problem;
    pthread_condattr_t attr;
    rl_state *st;

    if (plugin_id == NULL || strcmp(plugin_id, "rate-limit") != 0) {
        host->config_fail(config, PAGING_ERR_NOT_FOUND, "rate-limit: unknown plugin id");
        return NULL;
    }
    st = (rl_state *)calloc(1, sizeof *st);
    if (st == NULL) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "rate-limit: out of memory");
        return NULL;
    }
    problem = rl_configure(st, host, config, msg, sizeof msg);
    if (problem != NULL) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, problem);
        free(st);
        return NULL;
    }
    st->async = (const paging_ext_async_intercept_host_t *)host->get_extension(host, PAGING_EXT_ASYNC_INTERCEPT);
    if (st->async == NULL) {
        host->config_fail(config, PAGING_ERR_UNSUPPORTED, "rate-limit: the host does not offer " PAGING_EXT_ASYNC_INTERCEPT);
        free(st);
        return NULL;
    }
    st->retry_hint = (const paging_ext_retry_hint_host_t *)host->get_extension(host, PAGING_EXT_RETRY_HINT);
    st->log_level = (const paging_ext_log_level_t *)host->get_extension(host, PAGING_EXT_LOG_LEVEL);
    st->metrics = (const paging_ext_metrics_host_t *)host->get_extension(host, PAGING_EXT_METRICS);
    st->host = host;
    st->next_free = INT64_MIN / 2; /* long ago: the bucket starts full */
    pthread_mutex_init(&st->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* departures are CLOCK_MONOTONIC times */
    pthread_cond_init(&st->wake, &attr);
    pthread_condattr_destroy(&attr);

    st->interceptor.plugin_data = st;
    st->interceptor.intercept = rl_intercept;
    st->interceptor.handle = NULL;
    st->interceptor.destroy = rl_destroy;
    st->interceptor.struct_size = (uint32_t)sizeof st->interceptor;
    st->interceptor.get_extension = rl_get_extension;
    return &st->interceptor;
}

/* ---- entry ----------------------------------------------------------------------------- */

static uint32_t rl_plugin_count(void) { return 1; }

static const paging_plugin_descriptor_t *rl_descriptor_at(uint32_t index)
{
    return index == 0 ? &rl_descriptor : NULL;
}

static const paging_plugin_entry_t rl_entry = {
    PAGING_ENTRY_HEAD,
    rl_plugin_count,
    rl_descriptor_at,
    NULL,
    rl_create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void)
{
    return &rl_entry;
}
