/* build: cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread -I Sources/CPaging/include Tests/Fixtures/plugins/fuzz_source.c -o libfuzz_source.so */
/*
 * Fuzzing fixture for the ABI bridges (Tests/ReliabilityTests/BridgeFuzzTests.swift). Two plugins
 * that answer every call with seeded random behaviour, most of it legal, much of it not:
 *
 *   source "fuzz-source": refresh_key sets a random key. key_chain sets random keys (or NULL, or
 *     NULL data with a length, or an unknown slot) or fails. Each fetch picks one of: complete
 *     at once with random items (0..80, random lengths, random bytes), random prev/next keys and
 *     random flags; items with NULL data and a length; items claiming huge lengths (up to
 *     `huge_len`, always backed by a real buffer of that size); hundreds of items; a random
 *     status code returned by fetch(); fetch_fail with a random code (0 and unknown codes too)
 *     and a NULL or random message; completing twice (adding items after completing); never
 *     completing; completing or failing from another thread after 0..`max_delay_ms` ms (often
 *     after the host's timeout); completing an unknown id first; keys with NULL data.
 *   interceptor "fuzz-interceptor": each intercept picks one of PROCEED (after random
 *     out_set_key, out_set_page_size (0 too), out_set_param, with NULL data sometimes),
 *     PROCEED_AND_OBSERVE (handle() then reads every byte of the page), COMPLETE with a random
 *     page (as above, huge and many items too), FAIL with or without out_fail, an unknown
 *     result code, builder calls with a NULL `out`.
 *
 * Config: seed (integer, default 1), huge_len (default 1048576, at most 16 MiB), max_delay_ms
 * (default 30). The source and the interceptor are not THREAD_SAFE: the host serializes their
 * calls, so the generator needs no lock; the threads a fetch starts get their choices up front.
 * A plugin that misbehaves in these ways must never crash the host: each misuse is refused and
 * logged, or fails that load.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "paging/paging.h"

#define FZ_MAX_HUGE (16u << 20)

/* One buffer, shared read-only once filled: every byte handed to the host points into it. */
static uint8_t *fz_bytes = NULL;
static size_t fz_bytes_len = 0;
static pthread_once_t fz_once = PTHREAD_ONCE_INIT;

static void fz_fill(void)
{
    size_t i;
    fz_bytes_len = FZ_MAX_HUGE;
    fz_bytes = (uint8_t *)malloc(fz_bytes_len);
    if (fz_bytes == NULL) { fz_bytes_len = 0; return; }
    for (i = 0; i < fz_bytes_len; i++) fz_bytes[i] = (uint8_t)((i * 2654435761u) >> 13);
}

typedef struct fz_rng { uint64_t s; } fz_rng;

static uint64_t fz_next(fz_rng *r)
{
    uint64_t z;
    r->s += 0x9E3779B97F4A7C15ull;
    z = r->s;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t fz_below(fz_rng *r, size_t n) { return n == 0 ? 0 : (size_t)(fz_next(r) % n); }

/* Random bytes of length `len` (taken from the shared buffer). */
static paging_bytes_t fz_random_bytes(fz_rng *r, size_t len)
{
    paging_bytes_t b;
    if (len > fz_bytes_len) len = fz_bytes_len;
    b.data = fz_bytes + fz_below(r, fz_bytes_len - len + 1);
    b.len = len;
    if (len == 0 && fz_below(r, 2) == 0) b.data = NULL; /* NULL with length 0 is legal */
    return b;
}

static paging_bytes_t fz_null_with_length(fz_rng *r)
{
    paging_bytes_t b;
    b.data = NULL;
    b.len = 1 + fz_below(r, 1u << 20);
    return b;
}

typedef struct fz_common {
    const paging_host_t *host;
    fz_rng rng;
    size_t huge_len;
    uint32_t max_delay_ms;
} fz_common;

static const uint32_t fz_codes[] = { 0u, 1u, 2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 77u, 0xFFFFFFFFu };

static uint32_t fz_code(fz_rng *r) { return fz_codes[fz_below(r, sizeof fz_codes / sizeof fz_codes[0])]; }

/* A random item: mostly small, sometimes empty, sometimes huge, sometimes NULL with a length. */
static paging_bytes_t fz_item(fz_common *c, int allow_bad)
{
    size_t pick = fz_below(&c->rng, 100);
    if (allow_bad && pick < 3) return fz_null_with_length(&c->rng);
    if (pick < 8) return fz_random_bytes(&c->rng, 0);
    if (pick < 12) return fz_random_bytes(&c->rng, fz_below(&c->rng, c->huge_len + 1));
    return fz_random_bytes(&c->rng, fz_below(&c->rng, 256));
}

/* A random key pointer: NULL (clear), a random key, or (when allowed) NULL data with a length. */
static const paging_bytes_t *fz_key(fz_common *c, paging_bytes_t *storage, int allow_bad)
{
    size_t pick = fz_below(&c->rng, 10);
    if (pick == 0) return NULL;
    if (allow_bad && pick == 1) *storage = fz_null_with_length(&c->rng);
    else *storage = fz_random_bytes(&c->rng, fz_below(&c->rng, 33));
    return storage;
}

static uint32_t fz_flags(fz_rng *r)
{
    switch (fz_below(r, 4)) {
    case 0: return 0;
    case 1: return PAGING_PAGE_NEXT_END;
    case 2: return PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END;
    default: return (uint32_t)fz_next(r);
    }
}

/* Touches every byte the host lent us, so that a bad view shows under a sanitizer. */
static volatile uint64_t fz_sink = 0;
static void fz_touch(paging_bytes_t b)
{
    uint64_t sum = 0;
    size_t i;
    if (b.data == NULL) return;
    for (i = 0; i < b.len; i++) sum += b.data[i];
    fz_sink += sum;
}

static void fz_touch_request(const paging_request_t *req)
{
    size_t i;
    if (req == NULL) return;
    fz_touch(req->key);
    if (req->prev_key) fz_touch(*req->prev_key);
    if (req->next_key) fz_touch(*req->next_key);
    for (i = 0; i < req->param_count; i++) { fz_touch(req->params[i].name); fz_touch(req->params[i].value); }
}

static void fz_sleep_ms(uint32_t ms)
{
    struct timespec ts;
    ts.tv_sec = (time_t)(ms / 1000u);
    ts.tv_nsec = (long)(ms % 1000u) * 1000000L;
    nanosleep(&ts, NULL);
}

/* ---- source --------------------------------------------------------------------------- */

typedef struct fz_source { paging_source_t base; fz_common c; } fz_source;

static paging_status_t fz_refresh_key(paging_source_t *self, paging_keys_out_t *out)
{
    fz_source *s = (fz_source *)self;
    paging_bytes_t k = fz_random_bytes(&s->c.rng, 1 + fz_below(&s->c.rng, 8));
    return s->c.host->keys_set(out, PAGING_KEY_CURRENT, &k);
}

static paging_status_t fz_key_chain(paging_source_t *self, paging_bytes_t key, paging_keys_out_t *out)
{
    fz_source *s = (fz_source *)self;
    paging_bytes_t a, b;
    size_t pick = fz_below(&s->c.rng, 10);
    fz_touch(key);
    if (pick == 0) return fz_code(&s->c.rng);
    if (pick == 1) {
        a = fz_random_bytes(&s->c.rng, 4);
        return s->c.host->keys_set(out, 3u + (uint32_t)fz_below(&s->c.rng, 100), &a);
    }
    s->c.host->keys_set(out, PAGING_KEY_PREV, fz_key(&s->c, &a, 1));
    s->c.host->keys_set(out, PAGING_KEY_NEXT, fz_key(&s->c, &b, 1));
    if (pick == 2) s->c.host->keys_set(NULL, PAGING_KEY_NEXT, NULL);
    return PAGING_OK;
}

/* Adds a random page to fetch `id`: items, keys, flags. */
static void fz_fill_fetch(fz_common *c, uint64_t id, size_t items, int allow_bad)
{
    const paging_host_t *h = c->host;
    paging_bytes_t k;
    size_t i;
    for (i = 0; i < items; i++) {
        if (h->fetch_add_item(h, id, fz_item(c, allow_bad)) != PAGING_OK && fz_below(&c->rng, 2)) break;
    }
    if (fz_below(&c->rng, 2)) h->fetch_set_prev_key(h, id, fz_key(c, &k, allow_bad));
    if (fz_below(&c->rng, 2)) h->fetch_set_next_key(h, id, fz_key(c, &k, allow_bad));
    if (fz_below(&c->rng, 2)) h->fetch_set_flags(h, id, fz_flags(&c->rng));
}

typedef struct fz_job {
    const paging_host_t *host;
    uint64_t id;
    uint32_t delay_ms;
    int fail;
    uint32_t code;
    size_t items;
    fz_rng rng;
} fz_job;

static void *fz_thread(void *arg)
{
    fz_job *job = (fz_job *)arg;
    fz_common c;
    fz_sleep_ms(job->delay_ms);
    c.host = job->host;
    c.rng = job->rng;
    c.huge_len = 4096;
    c.max_delay_ms = 0;
    if (job->fail) {
        job->host->fetch_fail(job->host, job->id, job->code, "fuzz-source: failed from another thread");
    } else {
        fz_fill_fetch(&c, job->id, job->items, 1);
        job->host->fetch_complete(job->host, job->id);
    }
    free(job);
    return NULL;
}

static void fz_spawn(fz_source *s, uint64_t id, int fail)
{
    pthread_t thread;
    pthread_attr_t attr;
    fz_job *job = (fz_job *)malloc(sizeof *job);
    if (job == NULL) return;
    job->host = s->c.host;
    job->id = id;
    job->delay_ms = (uint32_t)fz_below(&s->c.rng, s->c.max_delay_ms + 1);
    job->fail = fail;
    job->code = fz_code(&s->c.rng);
    job->items = fz_below(&s->c.rng, 40);
    job->rng.s = fz_next(&s->c.rng);
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&thread, &attr, fz_thread, job) != 0) free(job);
    pthread_attr_destroy(&attr);
}

static paging_status_t fz_fetch(paging_source_t *self, const paging_request_t *request, uint64_t id)
{
    fz_source *s = (fz_source *)self;
    fz_common *c = &s->c;
    const paging_host_t *h = c->host;
    size_t pick = fz_below(&c->rng, 100);
    paging_bytes_t k;
    fz_touch_request(request);
    if (pick < 35) {                       /* a random, mostly legal page */
        fz_fill_fetch(c, id, fz_below(&c->rng, 81), 0);
        h->fetch_complete(h, id);
    } else if (pick < 40) {                /* NULL data with a length among the items */
        fz_fill_fetch(c, id, 1 + fz_below(&c->rng, 10), 1);
        h->fetch_add_item(h, id, fz_null_with_length(&c->rng));
        h->fetch_complete(h, id);
    } else if (pick < 45) {                /* huge items */
        size_t i, n = 1 + fz_below(&c->rng, 8);
        for (i = 0; i < n; i++) h->fetch_add_item(h, id, fz_random_bytes(&c->rng, c->huge_len - fz_below(&c->rng, 16)));
        h->fetch_complete(h, id);
    } else if (pick < 50) {                /* too many items */
        size_t i, n = 50 + fz_below(&c->rng, 500);
        for (i = 0; i < n; i++) h->fetch_add_item(h, id, fz_random_bytes(&c->rng, fz_below(&c->rng, 8)));
        h->fetch_complete(h, id);
    } else if (pick < 55) {                /* a random status from fetch() itself */
        if (fz_below(&c->rng, 2)) h->fetch_complete(h, id);
        return 1u + (uint32_t)fz_below(&c->rng, 20);
    } else if (pick < 60) {                /* fetch_fail: any code, NULL or random message */
        h->fetch_fail(h, id, fz_code(&c->rng), fz_below(&c->rng, 2) ? NULL : "fuzz-source: \xff\xfe not UTF-8 \n two lines");
    } else if (pick < 65) {                /* completed twice, items after completion */
        fz_fill_fetch(c, id, fz_below(&c->rng, 5), 0);
        h->fetch_complete(h, id);
        h->fetch_add_item(h, id, fz_item(c, 0));
        h->fetch_set_next_key(h, id, fz_key(c, &k, 1));
        h->fetch_complete(h, id);
        h->fetch_fail(h, id, PAGING_ERR_TRANSIENT, "fuzz-source: fail after complete");
    } else if (pick < 68) {                /* never completed: the host's timeout ends it */
    } else if (pick < 80) {                /* completed from another thread, maybe too late */
        fz_spawn(s, id, 0);
    } else if (pick < 85) {                /* failed from another thread */
        fz_spawn(s, id, 1);
    } else if (pick < 90) {                /* an unknown id first */
        h->fetch_add_item(h, id ^ (1 + fz_next(&c->rng)), fz_item(c, 0));
        h->fetch_complete(h, id + 1000000007u);
        h->fetch_fail(h, 0, PAGING_ERR_TRANSIENT, "fuzz-source: id 0");
        fz_fill_fetch(c, id, fz_below(&c->rng, 10), 0);
        h->fetch_complete(h, id);
    } else {                               /* keys with NULL data */
        k = fz_null_with_length(&c->rng);
        h->fetch_set_next_key(h, id, &k);
        h->fetch_set_prev_key(h, id, &k);
        h->fetch_complete(h, id);
    }
    return PAGING_OK;
}

static void fz_cancel(paging_source_t *self, uint64_t id)
{
    (void)self;
    (void)id; /* the fetch's thread, if any, will complete it; the host refuses that */
}

static void fz_source_destroy(paging_source_t *self) { free(self); }

/* ---- interceptor ---------------------------------------------------------------------- */

typedef struct fz_interceptor { paging_interceptor_t base; fz_common c; } fz_interceptor;

static void fz_out_page(fz_common *c, paging_intercept_out_t *out, size_t items, int allow_bad)
{
    const paging_host_t *h = c->host;
    paging_bytes_t k;
    size_t i;
    for (i = 0; i < items; i++) {
        if (h->out_add_item(out, fz_item(c, allow_bad)) != PAGING_OK && fz_below(&c->rng, 2)) break;
    }
    if (fz_below(&c->rng, 2)) h->out_set_prev_key(out, fz_key(c, &k, allow_bad));
    if (fz_below(&c->rng, 2)) h->out_set_next_key(out, fz_key(c, &k, allow_bad));
    if (fz_below(&c->rng, 2)) h->out_set_flags(out, fz_flags(&c->rng));
}

static uint32_t fz_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    fz_interceptor *f = (fz_interceptor *)self;
    fz_common *c = &f->c;
    const paging_host_t *h = c->host;
    size_t pick = fz_below(&c->rng, 100);
    paging_bytes_t a, b;
    fz_touch_request(request);
    if (pick < 45) {
        if (fz_below(&c->rng, 4) == 0) h->out_set_key(out, fz_below(&c->rng, 8) ? fz_random_bytes(&c->rng, fz_below(&c->rng, 16)) : fz_null_with_length(&c->rng));
        if (fz_below(&c->rng, 4) == 0) h->out_set_page_size(out, (uint32_t)fz_below(&c->rng, 3) == 0 ? 0u : (uint32_t)fz_next(&c->rng));
        if (fz_below(&c->rng, 4) == 0) {
            a = fz_random_bytes(&c->rng, fz_below(&c->rng, 12));
            b = fz_below(&c->rng, 8) ? fz_random_bytes(&c->rng, fz_below(&c->rng, 40)) : fz_null_with_length(&c->rng);
            h->out_set_param(out, a, b);
        }
        return PAGING_INTERCEPT_PROCEED;
    }
    if (pick < 55) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    if (pick < 70) {
        size_t many = fz_below(&c->rng, 10) == 0 ? 50 + fz_below(&c->rng, 300) : fz_below(&c->rng, 40);
        fz_out_page(c, out, many, 1);
        return PAGING_INTERCEPT_COMPLETE;
    }
    if (pick < 80) {
        if (fz_below(&c->rng, 2)) h->out_fail(out, fz_code(&c->rng), fz_below(&c->rng, 2) ? NULL : "fuzz-interceptor: refused");
        return PAGING_INTERCEPT_FAIL;
    }
    if (pick < 85) return 4u + (uint32_t)fz_below(&c->rng, 1000);
    if (pick < 92) {
        a = fz_random_bytes(&c->rng, 3);
        h->out_add_item(NULL, a);
        h->out_set_next_key(NULL, &a);
        h->out_fail(NULL, PAGING_ERR_INTERNAL, "fuzz-interceptor: NULL out");
        return PAGING_INTERCEPT_PROCEED;
    }
    h->out_fail(out, PAGING_ERR_TRANSIENT, "fuzz-interceptor: fail, then proceed");
    return fz_below(&c->rng, 2) ? PAGING_INTERCEPT_PROCEED : PAGING_INTERCEPT_COMPLETE;
}

static void fz_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    size_t i;
    (void)self;
    if (page == NULL) return;
    fz_touch_request(page->request);
    for (i = 0; i < page->item_count; i++) fz_touch(page->items[i]);
    if (page->prev_key) fz_touch(*page->prev_key);
    if (page->next_key) fz_touch(*page->next_key);
}

static void fz_interceptor_destroy(paging_interceptor_t *self) { free(self); }

/* ---- create / entry ------------------------------------------------------------------- */

static int fz_configure(fz_common *c, const paging_host_t *host, const paging_config_t *config)
{
    int64_t huge = host->config_int(config, "huge_len", 1 << 20);
    int64_t delay = host->config_int(config, "max_delay_ms", 30);
    pthread_once(&fz_once, fz_fill);
    if (fz_bytes == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "fuzz: out of memory"); return 0; }
    if (huge < 1 || huge > (int64_t)FZ_MAX_HUGE || delay < 0 || delay > 10000) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "fuzz: huge_len must be 1...16777216, max_delay_ms 0...10000");
        return 0;
    }
    c->host = host;
    c->rng.s = (uint64_t)host->config_int(config, "seed", 1);
    c->huge_len = (size_t)huge;
    c->max_delay_ms = (uint32_t)delay;
    return 1;
}

static paging_source_t *fz_create_source(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fz_source *s = (fz_source *)calloc(1, sizeof *s);
    (void)plugin_id;
    if (s == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    if (!fz_configure(&s->c, host, config)) { free(s); return NULL; }
    s->base.plugin_data = s;
    s->base.refresh_key = fz_refresh_key;
    s->base.key_chain = fz_key_chain;
    s->base.fetch = fz_fetch;
    s->base.cancel = fz_cancel;
    s->base.destroy = fz_source_destroy;
    return &s->base;
}

static paging_interceptor_t *fz_create_interceptor(const char *plugin_id, const paging_host_t *host, const paging_config_t *config)
{
    fz_interceptor *f = (fz_interceptor *)calloc(1, sizeof *f);
    (void)plugin_id;
    if (f == NULL) { host->config_fail(config, PAGING_ERR_INTERNAL, "out of memory"); return NULL; }
    if (!fz_configure(&f->c, host, config)) { free(f); return NULL; }
    f->base.plugin_data = f;
    f->base.intercept = fz_intercept;
    f->base.handle = fz_handle;
    f->base.destroy = fz_interceptor_destroy;
    return &f->base;
}

static const paging_plugin_descriptor_t fz_descriptors[2] = {
    { PAGING_DESCRIPTOR_HEAD, "fuzz-source", "Fuzz source (fixture)", "1.0.0",
      "Seeded random pages, keys, lengths, codes and completions.", PAGING_PLUGIN_SOURCE, 0, NULL },
    { PAGING_DESCRIPTOR_HEAD, "fuzz-interceptor", "Fuzz interceptor (fixture)", "1.0.0",
      "Seeded random intercept results.", PAGING_PLUGIN_INTERCEPTOR, 0, NULL }
};
static uint32_t fz_count(void) { return 2; }
static const paging_plugin_descriptor_t *fz_descriptor_at(uint32_t i) { return i < 2 ? &fz_descriptors[i] : NULL; }
static const paging_plugin_entry_t fz_entry = {
    PAGING_ENTRY_HEAD, fz_count, fz_descriptor_at, fz_create_source, fz_create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void) { return &fz_entry; }
