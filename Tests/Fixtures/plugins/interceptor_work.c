/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -I Sources/CPaging/include Tests/Fixtures/plugins/interceptor_work.c -o libinterceptor_work.so */
/*
 * Fixture: the ABI 1.1 extensions an interceptor or source offers or calls, each driven by the
 * config's "mode". Plugins:
 *
 *   transformer (interceptor, paging.page-transform/1; with "struct_size_zero": true its table's
 *   struct_size is 0) - mode:
 *     "keep-odd"   keeps items 1, 3, 5... (keep_item) and sets metadata kept=<count>
 *     "add"        keeps every item and adds {"added":true}
 *     "wrap"       replaces each item with {"item":<the item>} (add_item), whatever its bytes
 *     "keep"       returns KEEP
 *     "fail"       fails TRANSIENT "transform refused"
 *     "bad-index"  keep_item(999)
 *     "bad-index-fail" keep_item(999), then returns FAIL without fail() (as a builder's refusal
 *                  has failed the load already)
 *     "bad-item-keep" add_item("{bad") (logging "bad item: <status>"), then returns KEEP
 *     "next-key"   keeps every item and sets the next key to "zz"
 *     "meta-flood" keeps every item and sets metadata entries m0, m1, ... of "v" up to 2,000,
 *                  then one "big" of 1 MiB; logs "metadata refused at <index>: <status>" for
 *                  the first entry refused and "big metadata: <status>"
 *     "stale-out"  keeps `out` of each transform and calls keep_item(0) on it in the next one
 *                  (deliberate misuse: a handle of a call that returned), then returns KEEP
 *   deferring (interceptor, paging.async-intercept/1) - mode:
 *     "thread"     defers, then a new thread resumes with PROCEED
 *     "complete"   defers, then a new thread resumes with COMPLETE and one item {"deferred":true}
 *     "null-answer" defers, then a new thread resumes with a NULL answer function (refused), and
 *                  never again
 *     "complete-bad" defers, then a new thread resumes with COMPLETE and the item "{bad" (which
 *                  the host refuses), logging "bad complete resume: <status>"
 *     "fail-bad"   defers, then a new thread resumes: out_add_item("{bad"), refused, then FAIL
 *                  without out_fail (logging "bad fail resume: <status>")
 *     "inline"     defers and resumes within intercept() before returning PENDING
 *     "inline-then-proceed" defers, resumes within intercept() with COMPLETE and one item
 *                  {"deferred":true} (logging "inline resume: <status>"), then returns PROCEED
 *     "never"      defers (logging "deferred <id>") and never resumes; cancel() logs "cancel <id>"
 *     "no-defer"   returns PENDING without defer()
 *     "twice"      defers; a new thread resumes twice and logs "second resume: <status>"
 *     "slow"       waits in intercept() until the file "resume_file" appears, then defers (logging
 *                  "deferred <id>") and never resumes: past a call timeout, no load waits for it
 *     "sync"       defers, then answers PROCEED from intercept() itself
 *     "gate"       lets one load through at a time (PROCEED_AND_OBSERVE); an intercept while one
 *                  is out defers, and is answered (PROCEED_AND_OBSERVE) when the load before it
 *                  ends: from handle() of its page, or failed() (paging.load-outcome/1), on the
 *                  host's thread; cancel() drops its id
 *     "redefer"    defers; a new thread resumes with an answer that calls defer() again, and
 *                  logs "redefer resume: <status>"
 *     "bogus-id"   defers; a new thread resumes an id defer() never gave (logging "bogus
 *                  resume: <status>"), then its own with PROCEED
 *     "slow-answer" defers (logging "deferred <id>"); a new thread resumes with an answer that
 *                  waits until the file "resume_file" appears (10 minutes at most), then PROCEED;
 *                  the thread logs "slow answer resume: <status>"
 *     "joined"     as "slow-answer", but the answer logs "answer returns" as it returns, and
 *                  destroy() logs "destroy" and joins the resuming thread (whose state it frees)
 *     "late"       defers (logging "deferred <id>"); a thread resumes once the file "resume_file"
 *                  appears, writes the resume's status to "<resume_file>.status" and logs "late
 *                  resume: <status>" (the instance may be destroyed by then: the host drops the line)
 *   listener (interceptor, paging.load-outcome/1, paging.metrics/1): proceeds, adding 1 to the
 *     counter "proceeded" and setting the gauge "page_size"; logs "failed <code> <message>". Mode
 *     "spam" also adds to counters "c0"..."c69" and to one of a 65-byte name, INT64_MAX more to
 *     "c0" and -1 to "c1", and sets the gauge "page_size" to NaN. Mode "key-<N>" sets the
 *     request's key to N bytes '1' (out_set_key) and logs "set key: <status>"; "param-not-utf8"
 *     and "param-no-name" set a param named "\xff", or "", and log "set param: <status>"; mode
 *     "size-<N>" sets the request's page size to N (out_set_page_size) and logs "set size: <status>".
 *   hinting (interceptor, paging.retry-hint/1): fails its first "fail_times" intercepts (default
 *     1) TRANSIENT, "slow down", with out_retry_after(retry_after_ms, default 100); then proceeds.
 *   offsets (source, paging.sized-key-chain/1, paging.invalidation/1): keys are decimal offsets;
 *     the page at k holds {"n":k}...{"n":k+page_size-1} of "count" (default 100) items (with
 *     "tag":"<t>" in each when the request's user info has "tag" = t, alphanumeric); the
 *     chain's next key is k + page_size. Its first "fail_times" fetches (default 0) fail
 *     TRANSIENT with fetch_retry_after(retry_after_ms). With "invalidate_file", a thread looks
 *     for that file every 5 ms; when it appears it is removed, the source invalidates (logging
 *     "invalidated"), and refresh_key_at names the page that starts at the reader's item.
 *     With "invalidate_at" N, its Nth fetch() (from 1) invalidates before it completes.
 *     With "change_at" N, from its Nth fetch() on the data has changed: the item at offset k is
 *     {"n":k+1,"v":"b"} (the first one gone, the others edited) of "count_after" (default "count");
 *     the key chain goes on to the larger count.
 *     With "key_padding" N, the chain's keys are the offset, "-" and N letters "k" (long keys),
 *     and fetch sets its page's next key so too. With "chain_fails" true, its key chain fails
 *     (TRANSIENT) and its fetches succeed. With "cap" N, a page holds at most N items, without
 *     saying so, and the chain steps by N (a server that caps its page size, and a chain that
 *     knows its cap).
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paging/paging.h"

typedef struct work_plugin {
    paging_interceptor_t interceptor;
    paging_source_t source;
    const paging_host_t *host;
    const paging_ext_page_transform_host_t *transform_host;
    const paging_ext_async_intercept_host_t *async_host;
    const paging_ext_retry_hint_host_t *hint_host;
    char mode[32];
    long count, fail_times, retry_after_ms, key_padding, invalidate_at, fetches, change_at, count_after, cap;
    int chain_fails;
    pthread_mutex_t lock;
    char invalidate_file[512];
    char resume_file[512];
    int watching, stop;
    pthread_t watcher;
    int resuming; /* "joined": a resuming thread to join in destroy() */
    pthread_t resumer;
    paging_page_out_t *last_out; /* "stale-out": the out of the transform before */
    int gate_busy;               /* "gate": a load is out; the ids deferred behind it, oldest first */
    uint64_t gate_queue[64];
    int gate_count;
} work_plugin;

static paging_bytes_t wk_text(const char *text)
{
    paging_bytes_t b;
    b.data = (const uint8_t *)text;
    b.len = strlen(text);
    return b;
}

static void wk_log(const work_plugin *p, const char *format, unsigned long long a, const char *text)
{
    char line[512];
    snprintf(line, sizeof line, format, a, text);
    p->host->log(p->host, PAGING_LOG_INFO, line);
}

/* Takes one of the plugin's failures; non-zero when one was left. */
static int wk_take_failure(work_plugin *p)
{
    int fail;
    pthread_mutex_lock(&p->lock);
    fail = p->fail_times > 0;
    if (fail) p->fail_times--;
    pthread_mutex_unlock(&p->lock);
    return fail;
}

/* ---- transformer ---- */

static uint32_t wk_proceed_observe(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    (void)self; (void)request; (void)out;
    return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
}

static uint32_t wk_transform(void *self, const paging_page_t *page, paging_page_out_t *out)
{
    work_plugin *p = (work_plugin *)((paging_interceptor_t *)self)->plugin_data;
    const paging_ext_page_transform_host_t *t = p->transform_host;
    size_t i, kept = 0;
    char number[32];
    if (strcmp(p->mode, "keep") == 0) return PAGING_TRANSFORM_KEEP;
    if (strcmp(p->mode, "stale-out") == 0) {
        if (p->last_out != NULL) t->keep_item(p->last_out, 0); /* deliberate */
        p->last_out = out;
        return PAGING_TRANSFORM_KEEP;
    }
    if (strcmp(p->mode, "fail") == 0) {
        t->fail(out, PAGING_ERR_TRANSIENT, "transform refused");
        return PAGING_TRANSFORM_FAIL;
    }
    if (strcmp(p->mode, "bad-index") == 0) {
        t->keep_item(out, 999);
        return PAGING_TRANSFORM_REPLACE;
    }
    if (strcmp(p->mode, "bad-index-fail") == 0) {
        if (t->keep_item(out, 999) != PAGING_OK) return PAGING_TRANSFORM_FAIL;
        return PAGING_TRANSFORM_KEEP;
    }
    if (strcmp(p->mode, "bad-item-keep") == 0) {
        paging_status_t status = t->add_item(out, wk_text("{bad"));
        wk_log(p, "bad item: %llu%s", (unsigned long long)status, "");
        return PAGING_TRANSFORM_KEEP;
    }
    if (strcmp(p->mode, "wrap") == 0) {
        for (i = 0; i < page->item_count; i++) {
            size_t len = page->items[i].len;
            uint8_t *wrapped = (uint8_t *)malloc(len + 10);
            paging_bytes_t bytes;
            if (wrapped == NULL) return PAGING_TRANSFORM_KEEP;
            memcpy(wrapped, "{\"item\":", 8);
            if (len > 0) memcpy(wrapped + 8, page->items[i].data, len);
            wrapped[8 + len] = '}';
            bytes.data = wrapped;
            bytes.len = len + 9;
            t->add_item(out, bytes);
            free(wrapped);
        }
        return PAGING_TRANSFORM_REPLACE;
    }
    for (i = 0; i < page->item_count; i++) {
        if (strcmp(p->mode, "keep-odd") == 0 && i % 2 == 0) continue;
        t->keep_item(out, i);
        kept++;
    }
    if (strcmp(p->mode, "keep-odd") == 0) {
        snprintf(number, sizeof number, "%lu", (unsigned long)kept);
        t->set_metadata(out, wk_text("kept"), wk_text(number));
    }
    if (strcmp(p->mode, "add") == 0) t->add_item(out, wk_text("{\"added\":true}"));
    if (strcmp(p->mode, "next-key") == 0) {
        paging_bytes_t next = wk_text("zz");
        t->set_next_key(out, &next);
    }
    if (strcmp(p->mode, "meta-flood") == 0) {
        paging_status_t status = PAGING_OK;
        paging_bytes_t big;
        for (i = 0; i < 2000 && status == PAGING_OK; i++) {
            snprintf(number, sizeof number, "m%lu", (unsigned long)i);
            status = t->set_metadata(out, wk_text(number), wk_text("v"));
        }
        if (status != PAGING_OK) {
            char line[96];
            snprintf(line, sizeof line, "metadata refused at %lu: %u", (unsigned long)(i - 1), (unsigned)status);
            p->host->log(p->host, PAGING_LOG_INFO, line);
        }
        big.len = 1 << 20;
        big.data = (const uint8_t *)calloc(1, big.len);
        if (big.data != NULL) memset((void *)big.data, 'x', big.len);
        status = t->set_metadata(out, wk_text("big"), big);
        free((void *)big.data);
        wk_log(p, "big metadata: %llu%s", (unsigned long long)status, "");
    }
    return PAGING_TRANSFORM_REPLACE;
}

static const paging_ext_page_transform_t wk_transform_table = { wk_transform };

/* ---- deferring ---- */

static uint32_t wk_answer_observe(void *context, paging_intercept_out_t *out)
{
    (void)context; (void)out;
    return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
}

static uint32_t wk_answer_proceed(void *context, paging_intercept_out_t *out)
{
    (void)context; (void)out;
    return PAGING_INTERCEPT_PROCEED;
}

typedef struct wk_resumption {
    work_plugin *plugin;
    uint64_t id;
    /* For "late": copied, as the instance may be destroyed before the resume. */
    const paging_host_t *host;
    const paging_ext_async_intercept_host_t *async_host;
    char resume_file[512];
} wk_resumption;

static void wk_sleep_ms(long milliseconds)
{
    struct timespec pause;
    pause.tv_sec = milliseconds / 1000;
    pause.tv_nsec = (milliseconds % 1000) * 1000000L;
    nanosleep(&pause, NULL);
}

static void *wk_resume_late(void *argument)
{
    wk_resumption *r = (wk_resumption *)argument;
    char line[600];
    FILE *out;
    paging_status_t status;
    while (remove(r->resume_file) != 0) wk_sleep_ms(5);
    status = r->async_host->resume(r->host, r->id, wk_answer_proceed, NULL);
    snprintf(line, sizeof line, "%s.status", r->resume_file);
    out = fopen(line, "w");
    if (out != NULL) {
        fprintf(out, "%u", (unsigned)status);
        fclose(out);
    }
    snprintf(line, sizeof line, "late resume: %u", (unsigned)status);
    r->host->log(r->host, PAGING_LOG_INFO, line);
    free(r);
    return NULL;
}

static uint32_t wk_answer_slowly(void *context, paging_intercept_out_t *out)
{
    const char *resume_file = (const char *)context;
    int waited;
    (void)out;
    for (waited = 0; waited < 600000 && remove(resume_file) != 0; waited += 5) wk_sleep_ms(5);
    return PAGING_INTERCEPT_PROCEED;
}

static uint32_t wk_answer_joined(void *context, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)context;
    uint32_t code = wk_answer_slowly(p->resume_file, out);
    wk_log(p, "answer returns%.0llu%s", 0, "");
    return code;
}

static uint32_t wk_answer_complete_bad(void *context, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)context;
    p->host->out_add_item(out, wk_text("{bad"));
    return PAGING_INTERCEPT_COMPLETE;
}

static uint32_t wk_answer_redefer(void *context, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)context;
    p->async_host->defer(out);
    return PAGING_INTERCEPT_PENDING;
}

static uint32_t wk_answer_fail_bad(void *context, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)context;
    if (p->host->out_add_item(out, wk_text("{bad")) != PAGING_OK) return PAGING_INTERCEPT_FAIL;
    return PAGING_INTERCEPT_PROCEED;
}

static uint32_t wk_answer_complete(void *context, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)context;
    p->host->out_add_item(out, wk_text("{\"deferred\":true}"));
    p->host->out_set_flags(out, PAGING_PAGE_NEXT_END | PAGING_PAGE_PREV_END);
    return PAGING_INTERCEPT_COMPLETE;
}

static void *wk_resume_later(void *argument)
{
    wk_resumption *r = (wk_resumption *)argument;
    work_plugin *p = r->plugin;
    const paging_host_t *h = p->host;
    if (strcmp(p->mode, "complete") == 0) {
        p->async_host->resume(h, r->id, wk_answer_complete, p);
    } else if (strcmp(p->mode, "redefer") == 0) {
        paging_status_t status = p->async_host->resume(h, r->id, wk_answer_redefer, p);
        wk_log(p, "redefer resume: %llu%s", (unsigned long long)status, "");
    } else if (strcmp(p->mode, "bogus-id") == 0) {
        paging_status_t bogus = p->async_host->resume(h, r->id + 1000000000ull, wk_answer_proceed, NULL);
        wk_log(p, "bogus resume: %llu%s", (unsigned long long)bogus, "");
        p->async_host->resume(h, r->id, wk_answer_proceed, NULL);
    } else if (strcmp(p->mode, "null-answer") == 0) {
        p->async_host->resume(h, r->id, NULL, p);
    } else if (strcmp(p->mode, "complete-bad") == 0) {
        paging_status_t status = p->async_host->resume(h, r->id, wk_answer_complete_bad, p);
        wk_log(p, "bad complete resume: %llu%s", (unsigned long long)status, "");
    } else if (strcmp(p->mode, "fail-bad") == 0) {
        paging_status_t status = p->async_host->resume(h, r->id, wk_answer_fail_bad, p);
        wk_log(p, "bad fail resume: %llu%s", (unsigned long long)status, "");
    } else if (strcmp(p->mode, "joined") == 0) {
        paging_status_t status = p->async_host->resume(h, r->id, wk_answer_joined, p);
        wk_log(p, "joined resume: %llu%s", (unsigned long long)status, "");
    } else if (strcmp(p->mode, "slow-answer") == 0) {
        paging_status_t status = p->async_host->resume(h, r->id, wk_answer_slowly, r->resume_file);
        wk_log(p, "slow answer resume: %llu%s", (unsigned long long)status, "");
    } else {
        p->async_host->resume(h, r->id, wk_answer_proceed, NULL);
        if (strcmp(p->mode, "twice") == 0) {
            paging_status_t second = p->async_host->resume(h, r->id, wk_answer_proceed, NULL);
            wk_log(p, "second resume: %llu%s", second, "");
        }
    }
    free(r);
    return NULL;
}

static uint32_t wk_defer(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)self->plugin_data;
    wk_resumption *r;
    pthread_t thread;
    uint64_t id;
    (void)request;
    if (strcmp(p->mode, "no-defer") == 0) return PAGING_INTERCEPT_PENDING;
    if (strcmp(p->mode, "gate") == 0) {
        uint32_t answer = PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
        pthread_mutex_lock(&p->lock);
        if (!p->gate_busy) {
            p->gate_busy = 1;
        } else if (p->gate_count < 64) {
            p->gate_queue[p->gate_count++] = p->async_host->defer(out);
            answer = PAGING_INTERCEPT_PENDING;
        } else {
            answer = PAGING_INTERCEPT_FAIL;
        }
        pthread_mutex_unlock(&p->lock);
        return answer;
    }
    if (strcmp(p->mode, "slow") == 0)
        while (remove(p->resume_file) != 0) wk_sleep_ms(5);
    id = p->async_host->defer(out);
    if (strcmp(p->mode, "sync") == 0) return PAGING_INTERCEPT_PROCEED;
    if (strcmp(p->mode, "never") == 0 || strcmp(p->mode, "slow") == 0) {
        wk_log(p, "deferred %llu%s", (unsigned long long)id, "");
        return PAGING_INTERCEPT_PENDING;
    }
    if (strcmp(p->mode, "inline") == 0) {
        p->async_host->resume(p->host, id, wk_answer_proceed, NULL);
        return PAGING_INTERCEPT_PENDING;
    }
    if (strcmp(p->mode, "inline-then-proceed") == 0) {
        paging_status_t status = p->async_host->resume(p->host, id, wk_answer_complete, p);
        wk_log(p, "inline resume: %llu%s", (unsigned long long)status, "");
        return PAGING_INTERCEPT_PROCEED;
    }
    r = (wk_resumption *)malloc(sizeof *r);
    if (r == NULL) return PAGING_INTERCEPT_FAIL;
    r->plugin = p;
    r->id = id;
    r->host = p->host;
    r->async_host = p->async_host;
    snprintf(r->resume_file, sizeof r->resume_file, "%s", p->resume_file);
    if (strcmp(p->mode, "late") == 0 || strcmp(p->mode, "slow-answer") == 0) wk_log(p, "deferred %llu%s", (unsigned long long)id, "");
    if (pthread_create(&thread, NULL, strcmp(p->mode, "late") == 0 ? wk_resume_late : wk_resume_later, r) != 0) {
        free(r);
        return PAGING_INTERCEPT_FAIL;
    }
    if (strcmp(p->mode, "joined") == 0 && !p->resuming) {
        p->resumer = thread;
        p->resuming = 1;
    } else {
        pthread_detach(thread);
    }
    return PAGING_INTERCEPT_PENDING;
}

static void wk_cancel(void *self, uint64_t id)
{
    work_plugin *p = (work_plugin *)((paging_interceptor_t *)self)->plugin_data;
    int i, j;
    wk_log(p, "cancel %llu%s", (unsigned long long)id, "");
    pthread_mutex_lock(&p->lock);
    for (i = 0; i < p->gate_count; i++)
        if (p->gate_queue[i] == id) {
            for (j = i; j + 1 < p->gate_count; j++) p->gate_queue[j] = p->gate_queue[j + 1];
            p->gate_count--;
            break;
        }
    pthread_mutex_unlock(&p->lock);
}

/* "gate": the load that was out ended; the oldest intercept deferred behind it goes on (one the
 * host ended meanwhile, its resume refused, passes its turn to the next). */
static void wk_gate_next(work_plugin *p)
{
    for (;;) {
        uint64_t next;
        int i;
        pthread_mutex_lock(&p->lock);
        if (p->gate_count == 0) {
            p->gate_busy = 0;
            pthread_mutex_unlock(&p->lock);
            return;
        }
        next = p->gate_queue[0];
        for (i = 1; i < p->gate_count; i++) p->gate_queue[i - 1] = p->gate_queue[i];
        p->gate_count--;
        pthread_mutex_unlock(&p->lock);
        if (p->async_host->resume(p->host, next, wk_answer_observe, NULL) == PAGING_OK) return;
    }
}

static void wk_gate_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    (void)page;
    wk_gate_next((work_plugin *)self->plugin_data);
}

static void wk_gate_failed(void *self, const paging_request_t *request, paging_status_t code, const char *message)
{
    (void)request; (void)code; (void)message;
    wk_gate_next((work_plugin *)((paging_interceptor_t *)self)->plugin_data);
}

static const paging_ext_load_outcome_t wk_gate_outcome_table = { wk_gate_failed };

static const paging_ext_async_intercept_t wk_async_table = { wk_cancel };

/* ---- listener ---- */

static uint32_t wk_proceed(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)self->plugin_data;
    const paging_ext_metrics_host_t *metrics =
        (const paging_ext_metrics_host_t *)p->host->get_extension(p->host, PAGING_EXT_METRICS);
    if (metrics != NULL) {
        metrics->counter_add(p->host, "proceeded", 1);
        metrics->gauge_set(p->host, "page_size", (double)request->page_size);
    }
    if (metrics != NULL && strcmp(p->mode, "spam") == 0) {
        char name[80];
        int i;
        for (i = 0; i < 70; i++) {
            snprintf(name, sizeof name, "c%d", i);
            metrics->counter_add(p->host, name, 1);
        }
        memset(name, 'x', 65);
        name[65] = 0;
        metrics->counter_add(p->host, name, 1);
        metrics->counter_add(p->host, "c0", INT64_MAX);
        metrics->counter_add(p->host, "c1", -1);
        metrics->gauge_set(p->host, "page_size", 0.0 / 0.0);
    }
    if (strcmp(p->mode, "param-not-utf8") == 0 || strcmp(p->mode, "param-no-name") == 0) {
        paging_bytes_t name = wk_text(strcmp(p->mode, "param-no-name") == 0 ? "" : "\xff");
        wk_log(p, "set param: %llu%s", (unsigned long long)p->host->out_set_param(out, name, wk_text("x")), "");
    }
    if (strncmp(p->mode, "size-", 5) == 0) {
        uint32_t size = (uint32_t)strtoul(p->mode + 5, NULL, 10);
        wk_log(p, "set size: %llu%s", (unsigned long long)p->host->out_set_page_size(out, size), "");
    }
    if (strncmp(p->mode, "key-", 4) == 0) {
        size_t length = (size_t)strtoul(p->mode + 4, NULL, 10);
        uint8_t *bytes = (uint8_t *)malloc(length + 1);
        paging_bytes_t key;
        if (bytes == NULL) return PAGING_INTERCEPT_PROCEED;
        memset(bytes, '1', length);
        key.data = bytes;
        key.len = length;
        wk_log(p, "set key: %llu%s", (unsigned long long)p->host->out_set_key(out, key), "");
        free(bytes);
    }
    return PAGING_INTERCEPT_PROCEED;
}

static void wk_failed(void *self, const paging_request_t *request, paging_status_t code, const char *message)
{
    work_plugin *p = (work_plugin *)((paging_interceptor_t *)self)->plugin_data;
    (void)request;
    wk_log(p, "failed %llu %s", code, message);
}

static const paging_ext_load_outcome_t wk_outcome_table = { wk_failed };

/* ---- hinting ---- */

static uint32_t wk_hint(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    work_plugin *p = (work_plugin *)self->plugin_data;
    (void)request;
    if (!wk_take_failure(p)) return PAGING_INTERCEPT_PROCEED;
    p->hint_host->out_retry_after(out, (uint64_t)p->retry_after_ms);
    p->host->out_fail(out, PAGING_ERR_TRANSIENT, "slow down");
    return PAGING_INTERCEPT_FAIL;
}

/* ---- offsets ---- */

static unsigned long wk_offset(paging_bytes_t key)
{
    unsigned long value = 0;
    size_t i;
    for (i = 0; i < key.len && key.data[i] >= '0' && key.data[i] <= '9'; i++) value = value * 10 + (unsigned long)(key.data[i] - '0');
    return value;
}

static paging_status_t wk_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    work_plugin *p = (work_plugin *)self->plugin_data;
    paging_bytes_t zero = wk_text("0");
    return p->host->keys_set(out, PAGING_KEY_CURRENT, &zero);
}

/* The key of `offset` (padded with key_padding letters), to free; NULL when out of memory. */
static char *wk_key_text(const work_plugin *p, unsigned long offset)
{
    char *text = (char *)malloc(32 + (size_t)p->key_padding);
    int n;
    if (text == NULL) return NULL;
    n = snprintf(text, 32, "%lu", offset);
    if (p->key_padding > 0) {
        text[n] = '-';
        memset(text + n + 1, 'k', (size_t)p->key_padding);
        text[n + 1 + p->key_padding] = 0;
    }
    return text;
}

/* Sets key `which` to the key of `offset`. */
static void wk_set_key(const work_plugin *p, paging_keys_out_t *out, uint32_t which, unsigned long offset)
{
    char *text = wk_key_text(p, offset);
    paging_bytes_t b;
    if (text == NULL) return;
    b = wk_text(text);
    p->host->keys_set(out, which, &b);
    free(text);
}

/* The items a page of `page_size` holds: at most "cap". */
static unsigned long wk_step(const work_plugin *p, uint32_t page_size)
{
    return p->cap > 0 && (unsigned long)p->cap < page_size ? (unsigned long)p->cap : page_size;
}

static paging_status_t wk_sized_key_chain(void *self, paging_bytes_t key, uint32_t asked, paging_keys_out_t *out)
{
    work_plugin *p = (work_plugin *)((paging_source_t *)self)->plugin_data;
    unsigned long offset = wk_offset(key), page_size = wk_step(p, asked);
    if (p->chain_fails) return PAGING_ERR_TRANSIENT;
    /* With "change_at", the most items there will be. */
    unsigned long most = (unsigned long)(p->count_after > p->count ? p->count_after : p->count);
    if (offset + page_size < most) wk_set_key(p, out, PAGING_KEY_NEXT, offset + page_size);
    if (offset > 0) wk_set_key(p, out, PAGING_KEY_PREV, offset > page_size ? offset - page_size : 0);
    return PAGING_OK;
}

static const paging_ext_sized_key_chain_t wk_sized_table = { wk_sized_key_chain };

static paging_status_t wk_refresh_key_at(void *self, paging_bytes_t anchor_page_key, uint32_t anchor_index,
                                         paging_bytes_t anchor_item, uint32_t page_size, paging_keys_out_t *out)
{
    work_plugin *p = (work_plugin *)((paging_source_t *)self)->plugin_data;
    char text[32];
    paging_bytes_t key;
    (void)anchor_item; (void)page_size;
    snprintf(text, sizeof text, "%lu", wk_offset(anchor_page_key) + anchor_index);
    key = wk_text(text);
    return p->host->keys_set(out, PAGING_KEY_CURRENT, &key);
}

static const paging_ext_invalidation_t wk_invalidation_table = { wk_refresh_key_at };

static void *wk_watch(void *argument)
{
    work_plugin *p = (work_plugin *)argument;
    const paging_ext_invalidation_host_t *invalidation =
        (const paging_ext_invalidation_host_t *)p->host->get_extension(p->host, PAGING_EXT_INVALIDATION);
    struct timespec pause = { 0, 5000000 };
    int stop = 0;
    while (!stop) {
        if (invalidation != NULL && remove(p->invalidate_file) == 0) {
            p->host->log(p->host, PAGING_LOG_INFO, "invalidated");
            invalidation->invalidate(p->host);
        }
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&p->lock);
        stop = p->stop;
        pthread_mutex_unlock(&p->lock);
    }
    return NULL;
}

static paging_status_t wk_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    work_plugin *p = (work_plugin *)self->plugin_data;
    const paging_host_t *h = p->host;
    unsigned long offset = wk_offset(request->key), i, count, page_size = wk_step(p, request->page_size);
    long fetch;
    int changed;
    char item[64], tag[32] = "";
    if (wk_take_failure(p)) {
        p->hint_host->fetch_retry_after(h, id, (uint64_t)p->retry_after_ms);
        h->fetch_fail(h, id, PAGING_ERR_TRANSIENT, "busy");
        return PAGING_OK;
    }
    fetch = __atomic_add_fetch(&p->fetches, 1, __ATOMIC_SEQ_CST);
    changed = p->change_at > 0 && fetch >= p->change_at;
    count = (unsigned long)(changed ? p->count_after : p->count);
    if (fetch == p->invalidate_at) {
        const paging_ext_invalidation_host_t *invalidation =
            (const paging_ext_invalidation_host_t *)h->get_extension(h, PAGING_EXT_INVALIDATION);
        if (invalidation != NULL) invalidation->invalidate(h);
    }
    for (i = 0; i < request->param_count; i++) {
        const paging_param_t *param = &request->params[i];
        size_t j, ok = param->name.len == 3 && memcmp(param->name.data, "tag", 3) == 0 && param->value.len <= 16;
        for (j = 0; ok && j < param->value.len; j++) ok = isalnum(param->value.data[j]);
        if (ok) snprintf(tag, sizeof tag, ",\"tag\":\"%.*s\"", (int)param->value.len, (const char *)param->value.data);
    }
    for (i = offset; i < offset + page_size && i < count; i++) {
        snprintf(item, sizeof item, changed ? "{\"n\":%lu,\"v\":\"b\"%s}" : "{\"n\":%lu%s}", changed ? i + 1 : i, tag);
        h->fetch_add_item(h, id, wk_text(item));
    }
    if (p->key_padding > 0 && offset + page_size < count) {
        char *text = wk_key_text(p, offset + page_size);
        paging_bytes_t next;
        if (text != NULL) {
            next = wk_text(text);
            h->fetch_set_next_key(h, id, &next);
            free(text);
        }
    }
    h->fetch_complete(h, id);
    return PAGING_OK;
}

/* ---- instances ---- */

static const void *wk_interceptor_extension(paging_interceptor_t *self, const char *id)
{
    work_plugin *p = (work_plugin *)self->plugin_data;
    if (p->transform_host != NULL && strcmp(id, PAGING_EXT_PAGE_TRANSFORM) == 0) return &wk_transform_table;
    if (p->async_host != NULL && strcmp(id, PAGING_EXT_ASYNC_INTERCEPT) == 0) return &wk_async_table;
    if (self->intercept == wk_proceed && strcmp(id, PAGING_EXT_LOAD_OUTCOME) == 0) return &wk_outcome_table;
    if (self->intercept == wk_defer && strcmp(p->mode, "gate") == 0 && strcmp(id, PAGING_EXT_LOAD_OUTCOME) == 0) return &wk_gate_outcome_table;
    return NULL;
}

static const void *wk_source_extension(paging_source_t *self, const char *id)
{
    (void)self;
    if (strcmp(id, PAGING_EXT_INVALIDATION) == 0) return &wk_invalidation_table;
    return strcmp(id, PAGING_EXT_SIZED_KEY_CHAIN) == 0 ? &wk_sized_table : NULL;
}

static void wk_free(work_plugin *p)
{
    if (p->watching) {
        pthread_mutex_lock(&p->lock);
        p->stop = 1;
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->watcher, NULL);
    }
    pthread_mutex_destroy(&p->lock);
    free(p);
}

static void wk_destroy_interceptor(paging_interceptor_t *self)
{
    work_plugin *p = (work_plugin *)self->plugin_data;
    if (p->resuming) {
        wk_log(p, "destroy%.0llu%s", 0, "");
        pthread_join(p->resumer, NULL);
    }
    wk_free(p);
}
static void wk_destroy_source(paging_source_t *self) { wk_free((work_plugin *)self->plugin_data); }

static work_plugin *wk_new(const paging_host_t *host, const paging_config_t *config)
{
    work_plugin *p = (work_plugin *)calloc(1, sizeof *p);
    const char *mode;
    if (p == NULL) return NULL;
    pthread_mutex_init(&p->lock, NULL);
    p->host = host;
    mode = host->config_string(config, "mode");
    snprintf(p->mode, sizeof p->mode, "%s", mode != NULL ? mode : "");
    p->count = (long)host->config_int(config, "count", 100);
    p->change_at = (long)host->config_int(config, "change_at", 0);
    p->count_after = (long)host->config_int(config, "count_after", p->count);
    p->key_padding = (long)host->config_int(config, "key_padding", 0);
    p->chain_fails = host->config_bool(config, "chain_fails", 0);
    p->cap = (long)host->config_int(config, "cap", 0);
    if (p->key_padding < 0 || p->key_padding > 100000000) p->key_padding = 0;
    p->fail_times = (long)host->config_int(config, "fail_times", 0);
    p->invalidate_at = (long)host->config_int(config, "invalidate_at", 0);
    p->retry_after_ms = (long)host->config_int(config, "retry_after_ms", 100);
    mode = host->config_string(config, "resume_file");
    snprintf(p->resume_file, sizeof p->resume_file, "%s", mode != NULL ? mode : "");
    p->hint_host = (const paging_ext_retry_hint_host_t *)host->get_extension(host, PAGING_EXT_RETRY_HINT);
    return p;
}

static paging_interceptor_t *wk_create_interceptor(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    work_plugin *p = wk_new(host, config);
    if (p == NULL) return NULL;
    p->interceptor.struct_size = sizeof p->interceptor;
    p->interceptor.plugin_data = p;
    p->interceptor.destroy = wk_destroy_interceptor;
    p->interceptor.get_extension = wk_interceptor_extension;
    if (strcmp(plugin_id, "transformer") == 0) {
        p->transform_host = (const paging_ext_page_transform_host_t *)host->get_extension(host, PAGING_EXT_PAGE_TRANSFORM);
        p->interceptor.intercept = wk_proceed_observe;
        /* A table whose struct_size was never set: its get_extension goes unread. */
        if (host->config_bool(config, "struct_size_zero", 0)) p->interceptor.struct_size = 0;
    } else if (strcmp(plugin_id, "deferring") == 0) {
        p->async_host = (const paging_ext_async_intercept_host_t *)host->get_extension(host, PAGING_EXT_ASYNC_INTERCEPT);
        p->interceptor.intercept = wk_defer;
        if (strcmp(p->mode, "gate") == 0) p->interceptor.handle = wk_gate_handle;
    } else if (strcmp(plugin_id, "listener") == 0) {
        p->interceptor.intercept = wk_proceed;
    } else {
        if (host->config_type(config, "fail_times") == PAGING_CONFIG_ABSENT) p->fail_times = 1;
        p->interceptor.intercept = wk_hint;
    }
    return &p->interceptor;
}

static paging_source_t *wk_create_source(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    work_plugin *p = wk_new(host, config);
    const char *file;
    (void)plugin_id;
    if (p == NULL) return NULL;
    p->source.struct_size = sizeof p->source;
    p->source.plugin_data = p;
    p->source.refresh_key = wk_refresh_key;
    p->source.fetch = wk_fetch;
    p->source.destroy = wk_destroy_source;
    p->source.get_extension = wk_source_extension;
    file = host->config_string(config, "invalidate_file");
    if (file != NULL) {
        snprintf(p->invalidate_file, sizeof p->invalidate_file, "%s", file);
        p->watching = pthread_create(&p->watcher, NULL, wk_watch, p) == 0;
    }
    return &p->source;
}

static const char *const wk_transform_needs[] = { PAGING_EXT_PAGE_TRANSFORM, NULL };
static const char *const wk_async_needs[] = { PAGING_EXT_ASYNC_INTERCEPT, NULL };
static const char *const wk_hint_needs[] = { PAGING_EXT_RETRY_HINT, NULL };

static const paging_plugin_descriptor_t wk_descriptors[] = {
    { PAGING_DESCRIPTOR_HEAD, "transformer", "Transformer (fixture)", "1.1.0", "paging.page-transform/1 by mode.",
      PAGING_PLUGIN_INTERCEPTOR, PAGING_PLUGIN_THREAD_SAFE, wk_transform_needs },
    { PAGING_DESCRIPTOR_HEAD, "deferring", "Deferring (fixture)", "1.1.0", "paging.async-intercept/1 by mode.",
      PAGING_PLUGIN_INTERCEPTOR, PAGING_PLUGIN_THREAD_SAFE, wk_async_needs },
    { PAGING_DESCRIPTOR_HEAD, "listener", "Listener (fixture)", "1.1.0", "paging.load-outcome/1: logs failures.",
      PAGING_PLUGIN_INTERCEPTOR, PAGING_PLUGIN_THREAD_SAFE, NULL },
    { PAGING_DESCRIPTOR_HEAD, "hinting", "Hinting (fixture)", "1.1.0", "paging.retry-hint/1 on its failures.",
      PAGING_PLUGIN_INTERCEPTOR, PAGING_PLUGIN_THREAD_SAFE, wk_hint_needs },
    { PAGING_DESCRIPTOR_HEAD, "offsets", "Offsets (fixture)", "1.1.0", "paging.sized-key-chain/1 over offsets.",
      PAGING_PLUGIN_SOURCE, PAGING_PLUGIN_THREAD_SAFE, wk_hint_needs },
};

static uint32_t wk_count(void) { return sizeof wk_descriptors / sizeof wk_descriptors[0]; }
static const paging_plugin_descriptor_t *wk_describe(uint32_t i) { return i < wk_count() ? &wk_descriptors[i] : NULL; }
static const paging_plugin_entry_t wk_entry = {
    PAGING_ENTRY_HEAD, wk_count, wk_describe, wk_create_source, wk_create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &wk_entry; }
