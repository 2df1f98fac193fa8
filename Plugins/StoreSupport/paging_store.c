/*
 * paging_store.c - the parts redis-cache and postgres-store share (see paging_store.h).
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */

#include "paging_store.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- freshness ------------------------------------------------------------------------ */

int pstore_read_freshness(const paging_host_t *host, const paging_config_t *config, const char *plugin,
                          pstore_freshness *out)
{
    const char *policy = host->config_string(config, "policy");
    uint32_t age_type = host->config_type(config, "max_age_seconds");
    const char *problem = NULL;
    int64_t age = -1;
    char msg[400];

    if (policy == NULL && host->config_type(config, "policy") != PAGING_CONFIG_ABSENT)
        problem = "config `policy` must be a string: \"cache-first\", \"network-first\" or \"stale-while-revalidate\"";
    else if (policy == NULL || strcmp(policy, "cache-first") == 0) out->policy = PSTORE_CACHE_FIRST;
    else if (strcmp(policy, "network-first") == 0) out->policy = PSTORE_NETWORK_FIRST;
    else if (strcmp(policy, "stale-while-revalidate") == 0) out->policy = PSTORE_STALE_WHILE_REVALIDATE;
    else problem = "config `policy` must be \"cache-first\", \"network-first\" or \"stale-while-revalidate\"";

    if (problem == NULL && age_type != PAGING_CONFIG_ABSENT) {
        age = host->config_int(config, "max_age_seconds", -1);
        if (age_type != PAGING_CONFIG_INT || age < 0 || age > INT64_MAX / 1000)
            problem = "config `max_age_seconds` must be a whole number of seconds in 0...9223372036854775 (INT64_MAX milliseconds)";
    }
    if (problem != NULL) {
        snprintf(msg, sizeof msg, "%s: %s", plugin, problem);
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
        return 0;
    }
    if (age < 0 && out->policy == PSTORE_STALE_WHILE_REVALIDATE) age = 0;
    out->max_age_ms = age < 0 ? -1 : age * 1000;
    return 1;
}

/* ---- pages held ------------------------------------------------------------------------ */

int pstore_page_is_whole(const pstore_page *page, uint32_t page_size)
{
    return page->count >= page_size || (page->flags & PAGING_PAGE_NEXT_END) != 0 || page->has_next;
}

int pstore_page_is_fresh(const pstore_freshness *freshness, const pstore_page *page)
{
    /* Fresh while younger than max_age; with 0, never: a page read in the millisecond it was
     * stored, or stored by a host whose clock is ahead, was. A page stored more than a second
     * in the future (by a clock since set back, or by hand) is stale: it stayed fresh for the
     * whole skew besides max_age. */
    int64_t age = pstore_now_ms() - page->stored_at_ms;
    return freshness->max_age_ms < 0
        || (freshness->max_age_ms > 0 && age > -1000 && age < freshness->max_age_ms);
}

int pstore_put_page(const paging_host_t *host, const char *plugin, const pstore_page *page,
                    paging_intercept_out_t *out)
{
    size_t i;
    char msg[300];
    for (i = 0; i < page->count; i++) {
        if (host->out_add_item(out, page->items[i]) != PAGING_OK) {
            snprintf(msg, sizeof msg, "%s: item %zu of the page held was refused by the host (not valid JSON, or past "
                     "max_page_bytes or max_items_per_page); loading from the source", plugin, i);
            host->log(host, PAGING_LOG_WARNING, msg);
            return 0;
        }
    }
    if (page->has_prev) host->out_set_prev_key(out, &page->prev);
    if (page->has_next) host->out_set_next_key(out, &page->next);
    host->out_set_flags(out, page->flags);
    return 1;
}

/* ---- requests ------------------------------------------------------------------------- */

int pstore_param_is(const paging_request_t *request, const char *name, const char *value)
{
    size_t i, nlen = strlen(name), vlen = strlen(value);
    for (i = 0; i < request->param_count; i++) {
        const paging_param_t *p = &request->params[i];
        if (p->name.len == nlen && (nlen == 0 || memcmp(p->name.data, name, nlen) == 0))
            return p->value.len == vlen && (vlen == 0 || memcmp(p->value.data, value, vlen) == 0);
    }
    return 0;
}

int pstore_is_hard_refresh(const paging_request_t *request)
{
    return request->kind == PAGING_REQUEST_REFRESH && pstore_param_is(request, "hard_refresh", "true");
}

void pstore_say_not_replaced(const paging_host_t *host, const char *plugin, const char *why)
{
    char msg[700];
    snprintf(msg, sizeof msg, "%s: hard refresh: its page did not replace the pages stored before (%.400s): they stay, and "
             "later loads may be answered with them; refresh hard again once the store can be written", plugin, why);
    host->log(host, PAGING_LOG_ERROR, msg);
}

int pstore_goes_to_source(const paging_request_t *request)
{
    return pstore_is_hard_refresh(request) || pstore_param_is(request, "reload", "true");
}

int64_t pstore_now_ms(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) return 0;
    return (int64_t)ts.tv_sec * 1000 + (int64_t)(ts.tv_nsec / 1000000);
}

void pstore_count(const paging_host_t *host, const paging_ext_metrics_host_t *metrics, const char *name)
{
    if (metrics != NULL) metrics->counter_add(host, name, 1);
}

/* ---- deferred lookups ------------------------------------------------------------------ */

static void pstore_free_jobs(pstore_job *job)
{
    while (job != NULL) {
        pstore_job *next = job->next;
        free(job);
        job = next;
    }
}

static void pstore_deadline(struct timespec *ts, int64_t ms)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec += 1;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *pstore_queue_main(void *arg)
{
    pstore_queue *q = (pstore_queue *)arg;
    struct timespec next_poll;
    pstore_deadline(&next_poll, q->poll_ms);
    pthread_mutex_lock(&q->lock);
    for (;;) {
        pstore_job *job;
        while (!q->stopping && q->head == NULL) {
            if (q->waiting == NULL) {
                pthread_cond_wait(&q->wake, &q->lock);
                pstore_deadline(&next_poll, q->poll_ms);
            } else if (pthread_cond_timedwait(&q->wake, &q->lock, &next_poll) == ETIMEDOUT) {
                break;
            }
        }
        if (q->stopping) break;
        if (q->head != NULL) {
            job = q->head;
            q->head = job->next;
            if (q->head == NULL) q->tail = NULL;
            job->next = NULL;
            pthread_mutex_unlock(&q->lock);
            q->run(q->owner, job);
        } else {
            job = q->waiting;
            q->waiting = NULL;
            pthread_mutex_unlock(&q->lock);
            q->poll(q->owner, job);
            pstore_deadline(&next_poll, q->poll_ms);
        }
        pthread_mutex_lock(&q->lock);
    }
    pthread_mutex_unlock(&q->lock);
    return NULL;
}

void pstore_queue_init(pstore_queue *q, void *owner, void (*run)(void *, pstore_job *),
                       void (*poll)(void *, pstore_job *), int64_t poll_ms)
{
    pthread_condattr_t attr;
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&q->wake, &attr);
    pthread_condattr_destroy(&attr);
    q->owner = owner;
    q->run = run;
    q->poll = poll;
    q->poll_ms = poll_ms > 0 ? poll_ms : 20;
}

uint32_t pstore_queue_defer(pstore_queue *q, const paging_ext_async_intercept_host_t *async,
                            const paging_request_t *request, paging_intercept_out_t *out)
{
    pstore_job *job;
    int ready;

    pthread_mutex_lock(&q->lock);
    if (!q->started && !q->stopping) q->started = pthread_create(&q->thread, NULL, pstore_queue_main, q) == 0;
    ready = q->started;
    pthread_mutex_unlock(&q->lock);
    if (!ready) return 0;

    job = (pstore_job *)calloc(1, sizeof *job + request->identity.len);
    if (job == NULL) return 0;
    job->page_size = request->page_size;
    job->to_source = (uint32_t)pstore_goes_to_source(request);
    job->identity_len = request->identity.len;
    if (request->identity.len) memcpy(job->identity, request->identity.data, request->identity.len);
    /* Outside the lock: the host's cancel() path may hold a lock defer needs. */
    job->id = async->defer(out);
    if (job->id == 0) {
        free(job);
        return 0;
    }
    pthread_mutex_lock(&q->lock);
    if (q->tail != NULL) q->tail->next = job;
    else q->head = job;
    q->tail = job;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->lock);
    return PAGING_INTERCEPT_PENDING;
}

void pstore_queue_wait(pstore_queue *q, pstore_job *job)
{
    pthread_mutex_lock(&q->lock);
    job->next = q->waiting;
    q->waiting = job;
    pthread_mutex_unlock(&q->lock);
}

/* Unlinks the job `id` from `*list`; returns it or NULL. [under lock] */
static pstore_job *pstore_unlink(pstore_job **list, pstore_job **tail, uint64_t id)
{
    pstore_job *prev = NULL, *job;
    for (job = *list; job != NULL; prev = job, job = job->next) {
        if (job->id != id) continue;
        if (prev != NULL) prev->next = job->next;
        else *list = job->next;
        if (tail != NULL && *tail == job) *tail = prev;
        return job;
    }
    return NULL;
}

void pstore_queue_cancel(pstore_queue *q, uint64_t id)
{
    pstore_job *job;
    pthread_mutex_lock(&q->lock);
    job = pstore_unlink(&q->head, &q->tail, id);
    if (job == NULL) job = pstore_unlink(&q->waiting, NULL, id);
    pthread_mutex_unlock(&q->lock);
    free(job);
}

void pstore_queue_destroy(pstore_queue *q)
{
    pthread_mutex_lock(&q->lock);
    q->stopping = 1;
    pthread_cond_signal(&q->wake);
    pthread_mutex_unlock(&q->lock);
    if (q->started) pthread_join(q->thread, NULL);
    pstore_free_jobs(q->head);
    pstore_free_jobs(q->waiting);
    q->head = q->tail = q->waiting = NULL;
    pthread_cond_destroy(&q->wake);
    pthread_mutex_destroy(&q->lock);
}

void pstore_resume(const paging_host_t *host, const paging_ext_async_intercept_host_t *async, const pstore_job *job,
                   uint32_t (*answer)(void *context, paging_intercept_out_t *out), void *context)
{
    /* CANCELLED or TIMEOUT: the host stopped waiting (expected); nothing else to do. */
    (void)async->resume(host, job->id, answer, context);
}

/* ---- warnings -------------------------------------------------------------------------- */

void pstore_warner_init(pstore_warner *w)
{
    pthread_mutex_init(&w->lock, NULL);
    w->last_ms = 0;
    w->held_back = 0;
}

void pstore_warner_destroy(pstore_warner *w)
{
    pthread_mutex_destroy(&w->lock);
}

int pstore_warn(const paging_host_t *host, pstore_warner *w, const char *message)
{
    int64_t now = pstore_now_ms();
    uint64_t held;
    char msg[1400];
    pthread_mutex_lock(&w->lock);
    if (w->last_ms != 0 && now - w->last_ms < 60000) {
        w->held_back++;
        pthread_mutex_unlock(&w->lock);
        return 0;
    }
    held = w->held_back;
    w->held_back = 0;
    w->last_ms = now != 0 ? now : 1;
    pthread_mutex_unlock(&w->lock);
    if (held > 0) {
        snprintf(msg, sizeof msg, "%.1200s (%llu more like it in the last minute)", message, (unsigned long long)held);
        host->log(host, PAGING_LOG_WARNING, msg);
    } else {
        host->log(host, PAGING_LOG_WARNING, message);
    }
    return 1;
}

void pstore_warner_reset(pstore_warner *w)
{
    pthread_mutex_lock(&w->lock);
    w->last_ms = 0;
    w->held_back = 0;
    pthread_mutex_unlock(&w->lock);
}

/* ---- config strings -------------------------------------------------------------------- */

/* Appends len bytes to the growing string *out (cap *cap, used *used). Returns 0 when out of memory. */
static int pstore_append(char **out, size_t *used, size_t *cap, const char *text, size_t len)
{
    if (*cap - *used <= len) {
        size_t ncap = *cap * 2 + len + 1;
        char *grown = (char *)realloc(*out, ncap);
        if (grown == NULL) return 0;
        *out = grown;
        *cap = ncap;
    }
    memcpy(*out + *used, text, len);
    *used += len;
    (*out)[*used] = '\0';
    return 1;
}

char *pstore_expand_env(const char *text, char *error, size_t error_len)
{
    size_t used = 0, cap = strlen(text) + 16;
    char *out = (char *)malloc(cap);
    const char *p = text;
    if (out == NULL) {
        snprintf(error, error_len, "out of memory");
        return NULL;
    }
    out[0] = '\0';
    while (*p != '\0') {
        const char *end, *fallback = NULL, *value;
        char name[256];
        size_t name_len;
        int ok = 1;
        if (p[0] == '$' && p[1] == '$') {
            ok = pstore_append(&out, &used, &cap, "$", 1);
            p += 2;
        } else if (p[0] == '$' && p[1] == '{') {
            end = strchr(p + 2, '}');
            if (end == NULL) {
                snprintf(error, error_len, "an unterminated ${ (write $$ for a $)");
                free(out);
                return NULL;
            }
            name_len = (size_t)(end - (p + 2));
            if (name_len >= sizeof name) name_len = sizeof name - 1;
            memcpy(name, p + 2, name_len);
            name[name_len] = '\0';
            if (strstr(name, ":-") != NULL) {
                char *sep = strstr(name, ":-");
                *sep = '\0';
                fallback = p + 2 + (size_t)(sep - name) + 2;
            }
            value = getenv(name);
            if (value != NULL && value[0] != '\0') {
                ok = pstore_append(&out, &used, &cap, value, strlen(value));
            } else if (fallback != NULL) {
                ok = pstore_append(&out, &used, &cap, fallback, (size_t)(end - fallback));
            } else {
                snprintf(error, error_len, "the environment variable %.100s is not set (write ${%.100s:-default} for a default)",
                         name, name);
                free(out);
                return NULL;
            }
            p = end + 1;
        } else {
            ok = pstore_append(&out, &used, &cap, p, 1);
            p++;
        }
        if (!ok) {
            snprintf(error, error_len, "out of memory");
            free(out);
            return NULL;
        }
    }
    return out;
}

int pstore_config_int(const paging_host_t *host, const paging_config_t *config, const char *key, int64_t fallback,
                      int64_t min, int64_t max, int64_t *out, char *problem, size_t problem_len)
{
    uint32_t type = host->config_type(config, key);
    *out = type == PAGING_CONFIG_ABSENT ? fallback : host->config_int(config, key, fallback);
    if (type != PAGING_CONFIG_ABSENT && (type != PAGING_CONFIG_INT || *out < min || *out > max)) {
        snprintf(problem, problem_len, "config `%s` must be a whole number in %lld...%lld", key, (long long)min, (long long)max);
        return 0;
    }
    return 1;
}

int pstore_is_plain_name(const char *text, size_t max_len)
{
    size_t i, n = strlen(text);
    if (n == 0 || n > max_len) return 0;
    for (i = 0; i < n; i++) {
        char c = text[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-'))
            return 0;
    }
    return 1;
}

/* The end of the JSON string whose opening quote is at p (the host's config is valid JSON):
 * the byte after its closing quote. */
static const char *pstore_string_end(const char *p)
{
    for (p++; *p != '"'; p++)
        if (*p == '\\') p++;
    return p + 1;
}

int pstore_only_known_keys(const paging_host_t *host, const paging_config_t *config, const char *const *known,
                           char *unknown, size_t unknown_len)
{
    const char *p = host->config_json(config);
    int depth = 0, expect_key = 0, in_object = 0; /* the config is an object (an array's strings are no keys) */
    if (p == NULL) return 1;
    while (*p != '\0') {
        if (*p == '"') {
            const char *end = pstore_string_end(p);
            if (depth == 1 && expect_key) {
                size_t len = (size_t)(end - p - 2), i;
                int found = 0;
                for (i = 0; known[i] != NULL && !found; i++)
                    found = strlen(known[i]) == len && memcmp(known[i], p + 1, len) == 0;
                if (!found) {
                    snprintf(unknown, unknown_len, "%.*s", (int)(len < 200 ? len : 200), p + 1);
                    return 0;
                }
                expect_key = 0;
            }
            p = end;
            continue;
        }
        if (*p == '{' || *p == '[') {
            depth++;
            if (depth == 1) in_object = *p == '{';
            expect_key = depth == 1 && in_object;
        } else if (*p == '}' || *p == ']') {
            depth--;
        } else if (*p == ',' && depth == 1 && in_object) {
            expect_key = 1;
        }
        p++;
    }
    return 1;
}
