/*
 * redis_cache.c - a SwiftPaging interceptor plugin keeping pages in Redis, shared by every process
 * (on every machine) that points at the same Redis: a page one process loaded is served to the
 * others, and when several ask for the same page at once, one fetches it and the others wait for
 * its result (a lease). Redis is a cache, never a failure: while it is down or restarting, loads
 * go on to the next interceptor or the source.
 *
 * Plugin id: "redis-cache" (kind INTERCEPTOR; not THREAD_SAFE: the host serializes calls on an
 * instance, and a lock inside keeps them apart from the plugin's thread). Links against the system
 * libhiredis (0.14 or later). Uses paging.async-intercept/1 (lookups and waits on the plugin's one
 * thread, holding no host thread), paging.metrics/1 (counters "hits", "stale_hits", "misses",
 * "lease_waits", "unavailable"), and offers paging.health/1 and paging.load-outcome/1.
 *
 * Config keys:
 *   address            string (default "127.0.0.1:6379"): "host:port", "host" (port 6379),
 *                      "[v6-address]:port" or "unix:/path/to/redis.sock". ${NAME} and
 *                      ${NAME:-default} are read from the environment.
 *   password_env       string, optional: the name of an environment variable holding the password
 *                      (AUTH); the password itself never appears in the manifest or a log.
 *   database           integer >= 0 (default 0): SELECT.
 *   key_prefix         string (default "swiftpaging"), namespace string (default "default"): each
 *                      1-128 characters of [A-Za-z0-9_.-]. Pages live under
 *                      "<key_prefix>:<namespace>:p:<identity>", leases under "...:l:<identity>",
 *                      where <identity> is paging_request_t.identity, bytes as given.
 *   ttl_seconds        integer >= 1 (default 86400): how long Redis keeps a page (PX).
 *   policy, max_age_seconds   as sqlite-store: "cache-first" (default), "network-first",
 *                      "stale-while-revalidate"; how long a page is fresh (default: while Redis
 *                      keeps it; with stale-while-revalidate, 0).
 *   lease_ms           integer 1...3600000 (default 10000): how long one process may hold the
 *                      right to fetch a page. Keep it above the upstream's usual fetch time and
 *                      below the manifest's timeout_ms.
 *   poll_ms            integer 1...10000 (default 20): how often a waiting load looks for the page.
 *   connect_timeout_ms, command_timeout_ms   integers 1...60000 (defaults 500, 1000).
 *   retry_interval_ms  integer 0...600000 (default 1000): while Redis is unavailable, how often a
 *                      connection is tried again (loads in between go straight on).
 *   max_page_bytes     integer 1024...536870912 (default 67108864): a value larger than this is
 *                      not read (a miss, with a warning), a page larger is not stored.
 *
 * Behaviour:
 *   intercept() defers the request to the plugin's thread, which reads the page (GETRANGE, so that
 *   no value larger than max_page_bytes is read) and answers by the policy, as sqlite-store does:
 *   a whole page (page_size items, or the last page) fresh -> COMPLETE; network-first ->
 *   PROCEED_OR_FALL_BACK with the page; stale with stale-while-revalidate -> COMPLETE_THEN_REVALIDATE
 *   when this process takes the lease (else COMPLETE: another is revalidating it).
 *   One fetch across the fleet: on a miss (or a stale page, cache-first) the thread takes the lease
 *   with SET <lease> <token> NX PX lease_ms. Taken: the request proceeds, and handle() stores the
 *   page (SET PX ttl) and releases the lease (only its own: compare-and-delete); a failed load
 *   releases it too (paging.load-outcome/1). Held by another process: the load waits, without a
 *   thread, polling every poll_ms, until the page appears (COMPLETE), the lease is gone (it takes
 *   the lease itself, or waits on for the new holder) or lease_ms have passed since it began to
 *   wait (it proceeds: a holder killed mid-fetch never makes others wait past the lease).
 *   Network-first takes no lease (every load goes to the source).
 *   A hard refresh proceeds; its page, once loaded, replaces the namespace's pages (SCAN +
 *   UNLINK, then SET: pages written meanwhile may stay); a failed load leaves them.
 *   A reply larger than max_page_bytes + 1 MiB, or of more than 1,048,576 values, is not read on:
 *   the connection is dropped and Redis counts as unavailable (a broken or hostile server cannot
 *   make the process allocate without end; hiredis alone would buffer any reply whole).
 *   Redis unavailable (refused, timed out, restarting, a protocol error): the load proceeds as if
 *   nothing were held, handle() stores nothing, and a warning goes out at most once a minute; a
 *   broken connection is tried again at once, then every retry_interval_ms, and an INFO line says
 *   when it is back. A value that is not a page (wrong magic, lengths past its end, another
 *   identity, too large, not a string, a checksum that does not match) is a miss with a warning,
 *   never a crash. The checksum is no signature: a value forged with a matching checksum and an
 *   item that is not JSON fails its load (the host refuses the item, naming it), as in sqlite-store.
 *
 * Value format, version 1 (big-endian integers):
 *   "SPG1" | checksum u64 (FNV-1a of all that follows) | stored_at_ms u64 | flags u32 | has_prev u8 | prev_len u32 | prev | has_next u8 |
 *   next_len u32 | next | identity_len u32 | identity | item_count u32 | (item_len u32 | item)*
 *   and nothing after.
 *
 * build (third-party path): cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread \
 *     -I Sources/CPaging/include -I Plugins/StoreSupport/include Plugins/Redis/redis_cache.c \
 *     Plugins/StoreSupport/paging_store.c $(pkg-config --cflags --libs hiredis) -o libredis-cache.so
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <hiredis/hiredis.h>

#include "paging/paging.h"
#include "paging_store.h"

#define RC_WAIT 100u /* internal decision: wait for the lease holder's page */

typedef struct rc_state {
    paging_interceptor_t interceptor; /* first member: `self` points here */
    const paging_host_t *host;
    const paging_ext_async_intercept_host_t *async; /* NULL: lookups run on the caller's thread */
    const paging_ext_metrics_host_t *metrics;
    /* The connection, used by the host's calls and by the plugin's thread, under conn_lock. */
    pthread_mutex_t conn_lock;
    redisContext *ctx;          /* NULL: not connected */
    int64_t next_attempt_ms;    /* while not connected: no attempt before this */
    int64_t down_until_ms;      /* read without the lock (__atomic): intercept passes straight on */
    int was_down;               /* a warning went out since the last connection */
    char down_reason[400];      /* why it went down last (its password hidden), under conn_lock */
    size_t reply_objects;       /* objects made for the reply being read (rc_get_reply) */
    /* where */
    char *host_name;            /* NULL with a socket */
    int port;
    char *socket_path;
    char *password;
    int64_t database;
    char select_refused[300];   /* Redis answered SELECT with an error (a database it lacks); "" else */
    char address[300];          /* for messages */
    struct timeval connect_timeout, command_timeout;
    int64_t retry_ms;
    /* keys */
    char *page_prefix, *lease_prefix;
    size_t page_prefix_len, lease_prefix_len;
    char token[33];             /* this instance's lease value */
    int64_t ttl_ms, lease_ms, max_page_bytes;
    pstore_freshness fresh;
    pstore_queue queue;
    /* Unavailable; a bad reply; a page too large to store (said at most once a minute: it was
     * said for every page, every request of a pager serve). */
    pstore_warner warn_down, warn_bad, warn_big;
} rc_state;

static const paging_plugin_descriptor_t rc_descriptor = {
    PAGING_DESCRIPTOR_HEAD,
    "redis-cache",
    "Redis page cache",
    "1.0.0",
    "Keeps pages in Redis, shared by every process using it; one fetch per page across them.",
    PAGING_PLUGIN_INTERCEPTOR,
    0, NULL
};

static const char rc_release_script[] =
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/* Takes the lease (1), or says another process holds it (0), or that the key at its name is no
 * lease (2): every lease is a string that expires, and a key without an expiry or of another
 * type (another application's) would have had every load of its page wait lease_ms, for ever. */
static const char rc_take_script[] =
    "if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end "
    "if redis.call('type', KEYS[1])['ok'] ~= 'string' or redis.call('pttl', KEYS[1]) == -1 then return 2 end "
    "return 0";

/* ---- connection ------------------------------------------------------------------------ */

/* `text` with each occurrence of the password replaced, in place, by "***": a server may quote
 * what it was sent (a hostile or odd one echoes AUTH's argument in its error). */
static void rc_hide_password(const rc_state *st, char *text)
{
    size_t n = st->password != NULL ? strlen(st->password) : 0;
    char *at = text;
    if (n < 3) return;
    /* On past each "***" written: a password that is "***" itself was replaced for ever. */
    while ((at = strstr(at, st->password)) != NULL) {
        memcpy(at, "***", 3);
        memmove(at + 3, at + n, strlen(at + n) + 1);
        at += 3;
    }
}

/* Marks Redis unavailable for retry_interval_ms and warns (once a minute). [under conn_lock] */
static void rc_down(rc_state *st, const char *why)
{
    char msg[1000];
    int64_t until = pstore_now_ms() + st->retry_ms;
    if (st->ctx != NULL) redisFree(st->ctx);
    st->ctx = NULL;
    st->next_attempt_ms = until;
    __atomic_store_n(&st->down_until_ms, until, __ATOMIC_RELAXED);
    st->was_down = 1;
    snprintf(st->down_reason, sizeof st->down_reason, "%s", why);
    rc_hide_password(st, st->down_reason);
    snprintf(msg, sizeof msg, "redis-cache: Redis at %.300s is unavailable (%.400s); loads go on without it "
             "until it is back (this warning at most once a minute)", st->address, why);
    rc_hide_password(st, msg);
    pstore_warn(st->host, &st->warn_down, msg);
}

/* ---- replies within bounds --------------------------------------------------------------- */

/* hiredis buffers a reply whole and makes an object per element, however large the server says
 * it is: a broken or hostile server could make this process allocate without end. A reply is
 * read within bounds instead: at most max_page_bytes + 1 MiB of it (a page, GETRANGE'd to
 * max_page_bytes, is the largest reply a Redis sends here) and at most RC_MAX_OBJECTS objects
 * (arrays come from SCAN ... COUNT 1000 only). */
enum { RC_MAX_OBJECTS = 1 << 20 };

static redisReplyObjectFunctions rc_bounded;          /* hiredis's own, each counted first */
static const redisReplyObjectFunctions *rc_default;
static pthread_once_t rc_bounded_once = PTHREAD_ONCE_INIT;

/* Counts one more object (and `elements` more slots) of the reply being read; 0 past the bound. */
static int rc_count_object(const redisReadTask *task, size_t elements)
{
    rc_state *st = (rc_state *)task->privdata;
    if (st == NULL) return 1;
    st->reply_objects += 1 + elements;
    return st->reply_objects <= RC_MAX_OBJECTS;
}

static void *rc_create_string(const redisReadTask *task, char *str, size_t len)
{
    return rc_count_object(task, 0) ? rc_default->createString(task, str, len) : NULL;
}

static void *rc_create_array(const redisReadTask *task, int elements)
{
    return rc_count_object(task, elements > 0 ? (size_t)elements : 0) ? rc_default->createArray(task, elements) : NULL;
}

static void *rc_create_integer(const redisReadTask *task, long long value)
{
    return rc_count_object(task, 0) ? rc_default->createInteger(task, value) : NULL;
}

static void *rc_create_nil(const redisReadTask *task)
{
    return rc_count_object(task, 0) ? rc_default->createNil(task) : NULL;
}

static void rc_bounded_init(void)
{
    redisReader *reader = redisReaderCreate(); /* to learn hiredis's own functions (a static table) */
    if (reader == NULL) return;
    rc_default = reader->fn;
    redisReaderFree(reader);
    rc_bounded = *rc_default;
    rc_bounded.createString = rc_create_string;
    rc_bounded.createArray = rc_create_array;
    rc_bounded.createInteger = rc_create_integer;
    rc_bounded.createNil = rc_create_nil;
}

/* Makes `ctx`'s replies counted against `st`'s bounds; 0 when out of memory. */
static int rc_bound_replies(rc_state *st, redisContext *ctx)
{
    pthread_once(&rc_bounded_once, rc_bounded_init);
    if (rc_default == NULL) return 0;
    ctx->reader->fn = &rc_bounded;
    ctx->reader->privdata = st;
    return 1;
}

/* A read or write that failed for want of an answer within command_timeout_ms: said as such
 * (hiredis says the socket timeout's EAGAIN, "Resource temporarily unavailable"). Returns
 * REDIS_ERR for the caller to return. */
static int rc_io_failed(rc_state *st, redisContext *ctx)
{
    if (ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        long ms = (long)st->command_timeout.tv_sec * 1000 + (long)st->command_timeout.tv_usec / 1000;
        snprintf(ctx->errstr, sizeof ctx->errstr, "no answer within command_timeout_ms (%ld ms)", ms);
    }
    return REDIS_ERR;
}

/* As redisGetReply, within the bounds above; past them, the context's error says which. */
static int rc_get_reply(rc_state *st, redisContext *ctx, redisReply **reply)
{
    size_t limit = (size_t)st->max_page_bytes + (1u << 20), received = 0;
    void *object = NULL;
    int written = 0;
    *reply = NULL;
    st->reply_objects = 0;
    while (!written) {
        if (redisBufferWrite(ctx, &written) != REDIS_OK) return rc_io_failed(st, ctx);
    }
    for (;;) {
        if (redisReaderGetReply(ctx->reader, &object) != REDIS_OK) {
            ctx->err = ctx->reader->err;
            if (st->reply_objects > RC_MAX_OBJECTS)
                snprintf(ctx->errstr, sizeof ctx->errstr, "a reply of more than %d values; connection dropped", RC_MAX_OBJECTS);
            else
                snprintf(ctx->errstr, sizeof ctx->errstr, "%s", ctx->reader->errstr);
            return REDIS_ERR;
        }
        if (object != NULL) {
            *reply = (redisReply *)object;
            return REDIS_OK;
        }
        if (received > limit) {
            ctx->err = REDIS_ERR_PROTOCOL;
            snprintf(ctx->errstr, sizeof ctx->errstr, "a reply larger than %zu bytes (max_page_bytes + 1 MiB); connection dropped", limit);
            return REDIS_ERR;
        }
        size_t before = ctx->reader->len;
        if (redisBufferRead(ctx) != REDIS_OK) return rc_io_failed(st, ctx);
        received += ctx->reader->len - before;
    }
}

/* Sends one command on a new connection and checks its answer is not an error. Returns 1, 0
 * when no answer came (`why` says why), -1 when Redis answered with an error (`why` quotes it). */
static int rc_setup_command(rc_state *st, redisContext *ctx, int argc, const char **argv, char *why, size_t why_len)
{
    redisReply *r = NULL;
    if (redisAppendCommandArgv(ctx, argc, argv, NULL) == REDIS_OK) rc_get_reply(st, ctx, &r);
    int result = r == NULL ? 0 : r->type == REDIS_REPLY_ERROR ? -1 : 1;
    if (r == NULL) snprintf(why, why_len, "%s", ctx->errstr);
    else if (result < 0) snprintf(why, why_len, "%s refused: %.200s", argv[0], r->str != NULL ? r->str : "");
    if (r != NULL) freeReplyObject(r);
    return result;
}

/* Connects when not connected and an attempt is due (or `force`). Returns 1 when connected.
 * [under conn_lock] */
static int rc_connect(rc_state *st, int force)
{
    redisContext *ctx;
    char why[400], db[32], msg[500];
    if (st->ctx != NULL) return 1;
    if (!force && pstore_now_ms() < st->next_attempt_ms) return 0;
    ctx = st->socket_path != NULL ? redisConnectUnixWithTimeout(st->socket_path, st->connect_timeout)
                                  : redisConnectWithTimeout(st->host_name, st->port, st->connect_timeout);
    if (ctx == NULL || ctx->err) {
        snprintf(why, sizeof why, "%s", ctx != NULL ? ctx->errstr : "out of memory");
        if (ctx != NULL) redisFree(ctx);
        rc_down(st, why);
        return 0;
    }
    if (!rc_bound_replies(st, ctx)) {
        redisFree(ctx);
        rc_down(st, "out of memory");
        return 0;
    }
    redisSetTimeout(ctx, st->command_timeout);
    if (st->socket_path == NULL) redisEnableKeepAlive(ctx);
    why[0] = '\0';
    if (st->password != NULL) {
        const char *argv[2];
        argv[0] = "AUTH";
        argv[1] = st->password;
        if (rc_setup_command(st, ctx, 2, argv, why, sizeof why) != 1) {
            redisFree(ctx);
            rc_down(st, why);
            return 0;
        }
    }
    if (st->database != 0) {
        const char *argv[2];
        int selected;
        snprintf(db, sizeof db, "%lld", (long long)st->database);
        argv[0] = "SELECT";
        argv[1] = db;
        if ((selected = rc_setup_command(st, ctx, 2, argv, why, sizeof why)) != 1) {
            if (selected < 0) snprintf(st->select_refused, sizeof st->select_refused, "%s", why);
            redisFree(ctx);
            rc_down(st, why);
            return 0;
        }
    }
    if (st->was_down) {
        /* A server that accepts connections may still not answer (stopped, or its kernel
         * accepting for it): it is back when it answers. */
        const char *argv[1] = { "PING" };
        if (rc_setup_command(st, ctx, 1, argv, why, sizeof why) != 1) {
            redisFree(ctx);
            rc_down(st, why);
            return 0;
        }
    }
    st->ctx = ctx;
    __atomic_store_n(&st->down_until_ms, (int64_t)0, __ATOMIC_RELAXED);
    if (st->was_down) {
        st->was_down = 0;
        pstore_warner_reset(&st->warn_down);
        snprintf(msg, sizeof msg, "redis-cache: connected again to Redis at %.300s", st->address);
        st->host->log(st->host, PAGING_LOG_INFO, msg);
    }
    return 1;
}

/* Sends `n` commands in one round trip and reads their replies into replies[] (the caller frees
 * each). A broken connection is reconnected at once and the commands sent again, once. Returns
 * 1, or 0 when Redis is unavailable (logged; replies[] all NULL). [under conn_lock] */
static int rc_pipeline(rc_state *st, int n, const int *argc, const char ***argv, const size_t **lens,
                       redisReply **replies)
{
    int attempt, i;
    char why[400];
    for (i = 0; i < n; i++) replies[i] = NULL;
    for (attempt = 0; attempt < 2; attempt++) {
        int ok = 1;
        if (!rc_connect(st, attempt > 0)) return 0;
        for (i = 0; i < n && ok; i++) ok = redisAppendCommandArgv(st->ctx, argc[i], argv[i], lens[i]) == REDIS_OK;
        for (i = 0; i < n && ok; i++) ok = rc_get_reply(st, st->ctx, &replies[i]) == REDIS_OK && replies[i] != NULL;
        if (ok) return 1;
        snprintf(why, sizeof why, "%s", st->ctx->errstr[0] ? st->ctx->errstr : "no reply");
        for (i = 0; i < n; i++) {
            if (replies[i] != NULL) freeReplyObject(replies[i]);
            replies[i] = NULL;
        }
        redisFree(st->ctx);
        st->ctx = NULL;
    }
    rc_down(st, why);
    return 0;
}

/* One command: rc_pipeline of one. Returns the reply, or NULL when Redis is unavailable. */
static redisReply *rc_command(rc_state *st, int argc, const char **argv, const size_t *lens)
{
    redisReply *reply = NULL;
    rc_pipeline(st, 1, &argc, &argv, &lens, &reply);
    return reply;
}

/* A warning about what Redis answered (an error reply, a bad value), once a minute. */
static void rc_warn_bad(rc_state *st, const char *what, const char *detail)
{
    char msg[1000];
    snprintf(msg, sizeof msg, "redis-cache: %.400s%s%.400s", what, detail != NULL ? ": " : "", detail != NULL ? detail : "");
    rc_hide_password(st, msg);
    pstore_warn(st->host, &st->warn_bad, msg);
}

/* Whether `r` is an error reply (warned, naming `command`). */
static int rc_is_error(rc_state *st, const redisReply *r, const char *command)
{
    char what[500];
    const char *why = "";
    if (r->type != REDIS_REPLY_ERROR) return 0;
    /* Said by the reply's error code: a NOAUTH was said to be a key of another type. */
    if (r->str != NULL && strncmp(r->str, "WRONGTYPE", 9) == 0) why = " (the key holds another type)";
    else if (r->str != NULL && (strncmp(r->str, "NOAUTH", 6) == 0 || strncmp(r->str, "WRONGPASS", 9) == 0))
        why = " (it wants a password, or another one: config password_env names the variable holding it)";
    else if (r->str != NULL && strncmp(r->str, "NOPERM", 6) == 0) why = " (the user lacks the permission)";
    snprintf(what, sizeof what, "Redis at %.300s refused %s%s", st->address, command, why);
    rc_warn_bad(st, what, r->str);
    return 1;
}

/* "<prefix><identity>" in a new buffer; NULL when out of memory. */
static char *rc_key(const char *prefix, size_t prefix_len, const uint8_t *identity, size_t identity_len, size_t *len)
{
    char *key = (char *)malloc(prefix_len + identity_len + 1);
    if (key == NULL) return NULL;
    memcpy(key, prefix, prefix_len);
    if (identity_len) memcpy(key + prefix_len, identity, identity_len);
    key[prefix_len + identity_len] = '\0';
    *len = prefix_len + identity_len;
    return key;
}

/* ---- the value format ------------------------------------------------------------------ */

static void rc_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

static uint32_t rc_get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* FNV-1a, 64 bits: the value's checksum, so that a value cut, flipped or written by another
 * program is a miss, not a page (the items of a page this plugin wrote were checked by the host). */
static uint64_t rc_checksum(const uint8_t *p, size_t len)
{
    uint64_t h = 14695981039346656037ull;
    size_t i;
    for (i = 0; i < len; i++) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

/* Encodes `page` (for `identity`) into a new buffer; NULL when too large or out of memory. */
static uint8_t *rc_encode(const rc_state *st, const paging_page_t *page, size_t *len)
{
    const paging_request_t *req = page->request;
    size_t i, total = 4 + 8 + 8 + 4 + 5 + 5 + 4 + req->identity.len + 4;
    uint8_t *buf, *p;
    uint64_t now = (uint64_t)pstore_now_ms(), sum;
    if (page->prev_key != NULL) total += page->prev_key->len;
    if (page->next_key != NULL) total += page->next_key->len;
    for (i = 0; i < page->item_count; i++) {
        if (page->items[i].len > 0xffffffffu) return NULL;
        total += 4 + page->items[i].len;
    }
    *len = total;
    if (total > (size_t)st->max_page_bytes || page->item_count > 0xffffffffu) return NULL;
    buf = p = (uint8_t *)malloc(total);
    if (buf == NULL) return NULL;
    memcpy(p, "SPG1", 4); p += 4;
    p += 8; /* the checksum, below */
    rc_put32(p, (uint32_t)(now >> 32)); rc_put32(p + 4, (uint32_t)now); p += 8;
    rc_put32(p, page->flags); p += 4;
    *p++ = page->prev_key != NULL;
    rc_put32(p, page->prev_key != NULL ? (uint32_t)page->prev_key->len : 0); p += 4;
    if (page->prev_key != NULL && page->prev_key->len) { memcpy(p, page->prev_key->data, page->prev_key->len); p += page->prev_key->len; }
    *p++ = page->next_key != NULL;
    rc_put32(p, page->next_key != NULL ? (uint32_t)page->next_key->len : 0); p += 4;
    if (page->next_key != NULL && page->next_key->len) { memcpy(p, page->next_key->data, page->next_key->len); p += page->next_key->len; }
    rc_put32(p, (uint32_t)req->identity.len); p += 4;
    if (req->identity.len) { memcpy(p, req->identity.data, req->identity.len); p += req->identity.len; }
    rc_put32(p, (uint32_t)page->item_count); p += 4;
    for (i = 0; i < page->item_count; i++) {
        rc_put32(p, (uint32_t)page->items[i].len); p += 4;
        if (page->items[i].len) { memcpy(p, page->items[i].data, page->items[i].len); p += page->items[i].len; }
    }
    sum = rc_checksum(buf + 12, total - 12);
    rc_put32(buf + 4, (uint32_t)(sum >> 32));
    rc_put32(buf + 8, (uint32_t)sum);
    *len = total;
    return buf;
}

/* A reader over a value: every take checks the bytes are there. */
typedef struct rc_reader {
    const uint8_t *p;
    size_t left;
} rc_reader;

static int rc_take(rc_reader *r, size_t n, const uint8_t **out)
{
    if (n > r->left) return 0;
    *out = r->p;
    r->p += n;
    r->left -= n;
    return 1;
}

static int rc_take32(rc_reader *r, uint32_t *v)
{
    const uint8_t *p;
    if (!rc_take(r, 4, &p)) return 0;
    *v = rc_get32(p);
    return 1;
}

/* An optional key: a presence byte (0 or 1), a length, the bytes. */
static int rc_take_key(rc_reader *r, int *present, paging_bytes_t *key)
{
    const uint8_t *p;
    uint32_t len;
    if (!rc_take(r, 1, &p) || *p > 1) return 0;
    *present = *p;
    if (!rc_take32(r, &len) || (!*present && len != 0) || !rc_take(r, len, &key->data)) return 0;
    key->len = len;
    return 1;
}

/* Decodes a value into `page` (views into `data`; page->items malloc'd, the caller frees it).
 * Returns NULL, or what is wrong with it. */
static const char *rc_decode(const uint8_t *data, size_t len, const uint8_t *identity, size_t identity_len,
                             pstore_page *page)
{
    rc_reader r;
    const uint8_t *p;
    uint32_t hi, lo, id_len, count, i;
    memset(page, 0, sizeof *page);
    r.p = data;
    r.left = len;
    if (!rc_take(&r, 4, &p) || memcmp(p, "SPG1", 4) != 0) return "not a page of this plugin (no SPG1 mark)";
    if (!rc_take32(&r, &hi) || !rc_take32(&r, &lo)) return "cut short";
    if ((((uint64_t)hi << 32) | lo) != rc_checksum(r.p, r.left)) return "its checksum does not match (cut short or changed)";
    if (!rc_take32(&r, &hi) || !rc_take32(&r, &lo) || !rc_take32(&r, &page->flags)) return "cut short";
    page->stored_at_ms = (int64_t)(((uint64_t)hi << 32) | lo);
    if (page->flags & ~(uint32_t)(PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END | PAGING_PAGE_SHORTENED | PAGING_PAGE_EMPTIED)) return "unknown flags";
    if (!rc_take_key(&r, &page->has_prev, &page->prev) || !rc_take_key(&r, &page->has_next, &page->next))
        return "a key runs past the end";
    if (!rc_take32(&r, &id_len) || !rc_take(&r, id_len, &p)) return "the identity runs past the end";
    if (id_len != identity_len || (id_len && memcmp(p, identity, id_len) != 0)) return "stored for another request";
    if (!rc_take32(&r, &count)) return "cut short";
    if (count > r.left / 4) return "more items than the value can hold";
    page->items = (paging_bytes_t *)malloc((count ? count : 1) * sizeof *page->items);
    if (page->items == NULL) return "out of memory";
    for (i = 0; i < count; i++) {
        uint32_t item_len;
        if (!rc_take32(&r, &item_len) || !rc_take(&r, item_len, &page->items[i].data)) {
            free(page->items);
            page->items = NULL;
            return "an item runs past the end";
        }
        page->items[i].len = item_len;
    }
    if (r.left != 0) {
        free(page->items);
        page->items = NULL;
        return "bytes after the last item";
    }
    page->count = count;
    return NULL;
}

/* ---- lookups --------------------------------------------------------------------------- */

/* What the plugin's thread decided for a request. */
typedef struct rc_decision {
    rc_state *st;
    uint32_t result;       /* PAGING_INTERCEPT_* or RC_WAIT */
    int has_page;
    pstore_page page;      /* views into reply */
    redisReply *reply;
    const char *hit;       /* the counter of a page answered ("hits", "stale_hits"), counted by rc_answer */
} rc_decision;

static void rc_decision_free(rc_decision *d)
{
    if (d->reply != NULL) freeReplyObject(d->reply);
    free(d->page.items);
    d->reply = NULL;
    d->page.items = NULL;
    d->has_page = 0;
}

/* Reads the page stored for `identity` into d (has_page when a decodable value is there).
 * Returns 1, or 0 when Redis is unavailable. [takes conn_lock] */
static int rc_read(rc_state *st, const uint8_t *identity, size_t identity_len, rc_decision *d)
{
    size_t key_len;
    char *key = rc_key(st->page_prefix, st->page_prefix_len, identity, identity_len, &key_len);
    char end[32];
    const char *argv[4];
    size_t lens[4];
    redisReply *r;
    const char *bad;
    if (key == NULL) return 1;
    snprintf(end, sizeof end, "%lld", (long long)st->max_page_bytes);
    argv[0] = "GETRANGE"; lens[0] = 8;
    argv[1] = key;        lens[1] = key_len;
    argv[2] = "0";        lens[2] = 1;
    argv[3] = end;        lens[3] = strlen(end);
    pthread_mutex_lock(&st->conn_lock);
    r = rc_command(st, 4, argv, lens);
    pthread_mutex_unlock(&st->conn_lock);
    free(key);
    if (r == NULL) return 0;
    if (rc_is_error(st, r, "GETRANGE (reading a page)") || r->type != REDIS_REPLY_STRING || r->len == 0) {
        freeReplyObject(r);
        return 1;
    }
    if ((int64_t)r->len > st->max_page_bytes) {
        rc_warn_bad(st, "a stored page is larger than max_page_bytes; treated as a miss", NULL);
        freeReplyObject(r);
        return 1;
    }
    bad = rc_decode((const uint8_t *)r->str, r->len, identity, identity_len, &d->page);
    if (bad != NULL) {
        rc_warn_bad(st, "a stored value is not a valid page; treated as a miss", bad);
        freeReplyObject(r);
        return 1;
    }
    d->reply = r;
    d->has_page = 1;
    return 1;
}

/* Tries to take the lease for `identity`. Returns 1 taken (or no lease can be held: the load
 * goes on), 0 held by another, -1 unavailable. */
static int rc_take_lease(rc_state *st, const uint8_t *identity, size_t identity_len)
{
    size_t key_len;
    char *key = rc_key(st->lease_prefix, st->lease_prefix_len, identity, identity_len, &key_len);
    char ms[32];
    const char *argv[6];
    size_t lens[6];
    redisReply *r;
    int taken;
    if (key == NULL) return 1;
    snprintf(ms, sizeof ms, "%lld", (long long)st->lease_ms);
    argv[0] = "EVAL"; lens[0] = 4;
    argv[1] = rc_take_script; lens[1] = strlen(rc_take_script);
    argv[2] = "1";   lens[2] = 1;
    argv[3] = key;   lens[3] = key_len;
    argv[4] = st->token; lens[4] = strlen(st->token);
    argv[5] = ms;    lens[5] = strlen(ms);
    pthread_mutex_lock(&st->conn_lock);
    r = rc_command(st, 6, argv, lens);
    pthread_mutex_unlock(&st->conn_lock);
    if (r == NULL) {
        free(key);
        return -1;
    }
    if (r->type == REDIS_REPLY_INTEGER && r->integer == 2) {
        char what[700];
        snprintf(what, sizeof what, "the key %.300s at a lease's name is no lease of redis-cache (it has no expiry, or "
                 "another type); loads of its page do not wait for it (delete it, or choose another key_prefix)", key);
        rc_warn_bad(st, what, NULL);
    }
    taken = r->type != REDIS_REPLY_INTEGER || r->integer != 0;
    if (r->type != REDIS_REPLY_INTEGER) rc_is_error(st, r, "EVAL (taking the lease)");
    freeReplyObject(r);
    free(key);
    return taken;
}

/* Whether the lease for `identity` still exists. 1 yes, 0 gone, -1 unavailable. */
static int rc_lease_exists(rc_state *st, const uint8_t *identity, size_t identity_len)
{
    size_t key_len;
    char *key = rc_key(st->lease_prefix, st->lease_prefix_len, identity, identity_len, &key_len);
    const char *argv[2];
    size_t lens[2];
    redisReply *r;
    int exists;
    if (key == NULL) return 0;
    argv[0] = "EXISTS"; lens[0] = 6;
    argv[1] = key;      lens[1] = key_len;
    pthread_mutex_lock(&st->conn_lock);
    r = rc_command(st, 2, argv, lens);
    pthread_mutex_unlock(&st->conn_lock);
    free(key);
    if (r == NULL) return -1;
    exists = r->type == REDIS_REPLY_INTEGER && r->integer > 0;
    freeReplyObject(r);
    return exists;
}

/* Releases this instance's lease for `identity` (compare-and-delete). [under conn_lock] */
static void rc_release_lease(rc_state *st, const paging_bytes_t identity)
{
    size_t key_len;
    char *key = rc_key(st->lease_prefix, st->lease_prefix_len, identity.data, identity.len, &key_len);
    const char *argv[5];
    size_t lens[5];
    redisReply *r;
    if (key == NULL) return;
    argv[0] = "EVAL"; lens[0] = 4;
    argv[1] = rc_release_script; lens[1] = strlen(rc_release_script);
    argv[2] = "1";   lens[2] = 1;
    argv[3] = key;   lens[3] = key_len;
    argv[4] = st->token; lens[4] = strlen(st->token);
    r = rc_command(st, 5, argv, lens);
    if (r != NULL) {
        rc_is_error(st, r, "EVAL (releasing the lease)");
        freeReplyObject(r);
    }
    free(key);
}

/* Reads `job`'s page into `d`: 1 when it is the lease holder's (whole, stored since the job
 * began to wait), 0 when not (`d` freed), -1 when Redis is unavailable. */
static int rc_holders_page(rc_state *st, const pstore_job *job, rc_decision *d)
{
    memset(d, 0, sizeof *d);
    d->st = st;
    if (!rc_read(st, job->identity, job->identity_len, d)) return -1;
    if (d->has_page && pstore_page_is_whole(&d->page, job->page_size) && d->page.stored_at_ms != job->mark_ms) return 1;
    rc_decision_free(d);
    return 0;
}

/* Lets go of the lease this instance took for `job` (its page came meanwhile). [takes conn_lock] */
static void rc_give_back_lease(rc_state *st, const pstore_job *job)
{
    paging_bytes_t identity = { job->identity, job->identity_len };
    pthread_mutex_lock(&st->conn_lock);
    if (st->ctx != NULL) rc_release_lease(st, identity);
    pthread_mutex_unlock(&st->conn_lock);
}

/* Decides the first answer for a job: by the policy, with the lease on a miss. */
static void rc_decide(rc_state *st, pstore_job *job, rc_decision *d)
{
    int whole, fresh, lease;
    memset(d, 0, sizeof *d);
    d->st = st;
    if (!rc_read(st, job->identity, job->identity_len, d)) {
        pstore_count(st->host, st->metrics, "unavailable");
        d->result = PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
        return;
    }
    whole = d->has_page && pstore_page_is_whole(&d->page, job->page_size);
    fresh = whole && pstore_page_is_fresh(&st->fresh, &d->page);
    job->mark_ms = d->has_page ? d->page.stored_at_ms : -1; /* a waiter takes only another page */
    if (!whole) rc_decision_free(d);
    /* A page answered is counted once the host takes it (rc_answer): one it refuses is a miss. */
    d->hit = fresh ? "hits" : "stale_hits";
    if (st->fresh.policy == PSTORE_NETWORK_FIRST) {
        if (!whole) pstore_count(st->host, st->metrics, "misses");
        d->result = whole ? PAGING_INTERCEPT_PROCEED_OR_FALL_BACK : PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
        return;
    }
    if (fresh) {
        d->result = PAGING_INTERCEPT_COMPLETE;
        return;
    }
    lease = rc_take_lease(st, job->identity, job->identity_len);
    if (whole && st->fresh.policy == PSTORE_STALE_WHILE_REVALIDATE) {
        d->result = lease != 0 ? PAGING_INTERCEPT_COMPLETE_THEN_REVALIDATE : PAGING_INTERCEPT_COMPLETE;
        return;
    }
    if (lease == 1) {
        /* Taken: the holder may have stored its page and let its lease go between the read above
         * and the lease taken (a second fetch of the page): read it once more, as a waiter does.
         * Its page is the answer, a hit; only then is the first read's miss not one. */
        rc_decision again;
        if (rc_holders_page(st, job, &again) == 1) {
            rc_give_back_lease(st, job);
            rc_decision_free(d);
            *d = again;
            d->hit = "hits";
            d->result = PAGING_INTERCEPT_COMPLETE;
            return;
        }
    }
    /* A miss, or a stale page loaded again (cache-first). */
    pstore_count(st->host, st->metrics, whole ? d->hit : "misses");
    rc_decision_free(d);
    d->result = lease != 0 ? PAGING_INTERCEPT_PROCEED_AND_OBSERVE : RC_WAIT;
}

static uint32_t rc_answer(void *context, paging_intercept_out_t *out)
{
    rc_decision *d = (rc_decision *)context;
    if (d->has_page) {
        int taken = pstore_put_page(d->st->host, "redis-cache", &d->page, out);
        /* A lease waiter's page (rc_poll) was counted when it began to wait: hit is NULL. */
        if (d->hit != NULL) pstore_count(d->st->host, d->st->metrics, taken ? d->hit : "misses");
        if (!taken) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    }
    return d->result;
}

/* Answers the job with d's result and frees both. */
static void rc_finish(rc_state *st, pstore_job *job, rc_decision *d)
{
    pstore_resume(st->host, st->async, job, rc_answer, d);
    rc_decision_free(d);
    free(job);
}

/* Deletes every page of the namespace (SCAN + UNLINK): 1 when all went, 0 when some may be
 * left (Redis unavailable, a refusal, the walk cut off). [takes conn_lock] */
static int rc_clear_namespace(rc_state *st)
{
    int walked = 0, unlinked = 1;
    char cursor[32] = "0", *pattern;
    const char *argv[6];
    size_t lens[6];
    /* A SCAN whose cursor never comes back to 0 (a hostile server; a keyspace too big to walk
     * in time) must not hold the hard refresh, and the process, for ever: after ten command
     * timeouts the clearing stops; what is left expires with its TTL. */
    int64_t command_ms = (int64_t)st->command_timeout.tv_sec * 1000 + st->command_timeout.tv_usec / 1000;
    int64_t deadline = pstore_now_ms() + 10 * command_ms, deleted = 0;
    char msg[600];
    pattern = (char *)malloc(st->page_prefix_len + 2);
    if (pattern == NULL) return 0;
    memcpy(pattern, st->page_prefix, st->page_prefix_len);
    memcpy(pattern + st->page_prefix_len, "*", 2);
    pthread_mutex_lock(&st->conn_lock);
    do {
        redisReply *r;
        argv[0] = "SCAN";   lens[0] = 4;
        argv[1] = cursor;   lens[1] = strlen(cursor);
        argv[2] = "MATCH";  lens[2] = 5;
        argv[3] = pattern;  lens[3] = strlen(pattern);
        argv[4] = "COUNT";  lens[4] = 5;
        argv[5] = "1000";   lens[5] = 4;
        r = rc_command(st, 6, argv, lens);
        if (r == NULL) break;
        if (rc_is_error(st, r, "SCAN") || r->type != REDIS_REPLY_ARRAY || r->elements != 2
            || r->element[0]->type != REDIS_REPLY_STRING || r->element[0]->len >= sizeof cursor
            || r->element[1]->type != REDIS_REPLY_ARRAY) {
            freeReplyObject(r);
            break;
        }
        memcpy(cursor, r->element[0]->str, r->element[0]->len);
        cursor[r->element[0]->len] = '\0';
        walked = strcmp(cursor, "0") == 0;
        if (r->element[1]->elements > 0) {
            size_t i, n = r->element[1]->elements;
            const char **keys = (const char **)malloc((n + 1) * sizeof *keys);
            size_t *key_lens = (size_t *)malloc((n + 1) * sizeof *key_lens);
            if (keys != NULL && key_lens != NULL) {
                redisReply *u;
                keys[0] = "UNLINK";
                key_lens[0] = 6;
                for (i = 0; i < n; i++) {
                    const redisReply *k = r->element[1]->element[i];
                    keys[i + 1] = k->type == REDIS_REPLY_STRING ? k->str : "";
                    key_lens[i + 1] = k->type == REDIS_REPLY_STRING ? k->len : 0;
                }
                u = rc_command(st, (int)n + 1, keys, key_lens);
                if (u != NULL && u->type == REDIS_REPLY_INTEGER) deleted += u->integer;
                else unlinked = 0;
                if (u != NULL) freeReplyObject(u);
            } else {
                unlinked = 0;
            }
            free(keys);
            free(key_lens);
        }
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0 && pstore_now_ms() < deadline);
    pthread_mutex_unlock(&st->conn_lock);
    free(pattern);
    if (strcmp(cursor, "0") != 0 && pstore_now_ms() >= deadline) {
        snprintf(msg, sizeof msg, "redis-cache: hard refresh: the namespace's keys were not all found within %lld ms "
                 "(%lld deleted); the rest expire with their TTL", (long long)(10 * command_ms), (long long)deleted);
        st->host->log(st->host, PAGING_LOG_WARNING, msg);
    }
    return walked && unlinked;
}

/* The plugin's thread: a queued job. */
static void rc_run(void *owner, pstore_job *job)
{
    rc_state *st = (rc_state *)owner;
    rc_decision d;
    if (job->to_source) { /* a hard refresh (its page replaces the namespace's, rc_handle) or a reload */
        memset(&d, 0, sizeof d);
        d.st = st;
        d.result = PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
        rc_finish(st, job, &d);
        return;
    }
    rc_decide(st, job, &d);
    if (d.result != RC_WAIT) {
        rc_finish(st, job, &d);
        return;
    }
    pstore_count(st->host, st->metrics, "lease_waits");
    job->next = NULL;
    job->waiting_since_ms = pstore_now_ms();
    pstore_queue_wait(&st->queue, job);
}

/* The plugin's thread, every poll_ms: the jobs waiting for a lease holder's page. */
static void rc_poll(void *owner, pstore_job *jobs)
{
    rc_state *st = (rc_state *)owner;
    while (jobs != NULL) {
        pstore_job *job = jobs;
        rc_decision d;
        int lease, page;
        jobs = job->next;
        job->next = NULL;
        if ((page = rc_holders_page(st, job, &d)) != 0) {
            d.result = page > 0 ? PAGING_INTERCEPT_COMPLETE : PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
            rc_finish(st, job, &d);
            continue;
        }
        lease = rc_lease_exists(st, job->identity, job->identity_len);
        if (lease == 0) {
            int taken = rc_take_lease(st, job->identity, job->identity_len);
            /* Taken: the holder may have stored its page and let its lease go between the read
             * above and the lease's end (a second fetch of the page): read it once more. */
            if (taken == 1 && rc_holders_page(st, job, &d) == 1) {
                rc_give_back_lease(st, job);
                d.result = PAGING_INTERCEPT_COMPLETE;
                rc_finish(st, job, &d);
                continue;
            }
            lease = taken == 0 ? 1 : taken == 1 ? -2 : -1;
        }
        if (lease == 1 && pstore_now_ms() - job->waiting_since_ms < st->lease_ms) {
            pstore_queue_wait(&st->queue, job); /* still held: wait on */
            continue;
        }
        /* Taken (-2), Redis unavailable (-1), or waited out the lease: go on to the source. Said
         * when the holder left no page: a run after one that was killed stalled for the
         * killed run's lease without a word (a probe). */
        if (lease != -1) {
            char msg[300];
            snprintf(msg, sizeof msg, "redis-cache: waited %lld ms for a page another process was loading, %s without storing it "
                     "(it may have ended mid-load); loading it", (long long)(pstore_now_ms() - job->waiting_since_ms),
                     lease == 1 ? "which held it past lease_ms" : "whose lease ended");
            st->host->log(st->host, PAGING_LOG_INFO, msg);
        }
        d.result = PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
        rc_finish(st, job, &d);
    }
}

/* ---- the interceptor ------------------------------------------------------------------- */

static uint32_t rc_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    rc_state *st = (rc_state *)self;
    pstore_job *job;
    rc_decision d;
    uint32_t result;

    if (pstore_now_ms() < __atomic_load_n(&st->down_until_ms, __ATOMIC_RELAXED)) {
        pstore_count(st->host, st->metrics, "unavailable");
        return PAGING_INTERCEPT_PROCEED_AND_OBSERVE; /* Redis is down: straight on */
    }
    if (st->async != NULL) {
        result = pstore_queue_defer(&st->queue, st->async, request, out);
        if (result != 0) return result;
    }
    /* Without the extension (or its thread): decide here; a load never waits for a lease. */
    job = (pstore_job *)calloc(1, sizeof *job + request->identity.len);
    if (job == NULL) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    job->page_size = request->page_size;
    job->identity_len = request->identity.len;
    if (request->identity.len) memcpy(job->identity, request->identity.data, request->identity.len);
    if (pstore_goes_to_source(request)) {
        result = PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    } else {
        rc_decide(st, job, &d);
        result = d.result == RC_WAIT ? PAGING_INTERCEPT_PROCEED_AND_OBSERVE : rc_answer(&d, out);
        rc_decision_free(&d);
    }
    free(job);
    return result;
}

static void rc_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    rc_state *st = (rc_state *)self;
    const paging_request_t *req = page->request;
    uint8_t *value;
    size_t value_len = 0, key_len;
    char *key, ttl[32], why[400];
    const char *argv[5];
    size_t lens[5];
    redisReply *r;
    int hard, replaced, stored = 0;

    if (req == NULL || (page->item_count > 0 && page->items == NULL)) {
        st->host->log(st->host, PAGING_LOG_ERROR, "redis-cache: handle: malformed page; not stored");
        return;
    }
    value = rc_encode(st, page, &value_len);
    key = rc_key(st->page_prefix, st->page_prefix_len, req->identity.data, req->identity.len, &key_len);
    if (value == NULL && value_len > (size_t)st->max_page_bytes) {
        snprintf(why, sizeof why, "redis-cache: a page of %zu bytes, more than max_page_bytes (%lld); not stored "
                 "(this warning at most once a minute)", value_len, (long long)st->max_page_bytes);
        pstore_warn(st->host, &st->warn_big, why);
    } else if (value == NULL || key == NULL) {
        st->host->log(st->host, PAGING_LOG_ERROR, "redis-cache: out of memory; page not stored");
    }
    snprintf(ttl, sizeof ttl, "%lld", (long long)st->ttl_ms);
    /* The page of a hard refresh replaces the namespace's pages (a failed load left them). */
    hard = pstore_is_hard_refresh(req);
    replaced = value != NULL && key != NULL && hard && rc_clear_namespace(st);
    pthread_mutex_lock(&st->conn_lock);
    if (value != NULL && key != NULL) {
        argv[0] = "SET"; lens[0] = 3;
        argv[1] = key;   lens[1] = key_len;
        argv[2] = (const char *)value; lens[2] = value_len;
        argv[3] = "PX";  lens[3] = 2;
        argv[4] = ttl;   lens[4] = strlen(ttl);
        r = rc_command(st, 5, argv, lens);
        if (r != NULL) {
            stored = !rc_is_error(st, r, "SET (the page was not stored)");
            freeReplyObject(r);
        }
    }
    if (st->ctx != NULL) rc_release_lease(st, req->identity);
    if (hard && !(replaced && stored)) {
        if (value == NULL || key == NULL) snprintf(why, sizeof why, "the page was not stored");
        else if (st->ctx == NULL)
            snprintf(why, sizeof why, "Redis at %.150s is unavailable: %.200s", st->address,
                     st->down_reason[0] != '\0' ? st->down_reason : "not connected");
        else snprintf(why, sizeof why, "Redis at %.150s refused a command, or did not walk every key of the namespace", st->address);
    }
    pthread_mutex_unlock(&st->conn_lock);
    if (hard && !(replaced && stored)) pstore_say_not_replaced(st->host, "redis-cache", why);
    free(value);
    free(key);
}

/* paging.load-outcome/1: a load this instance let proceed failed: release its lease, so that
 * those waiting take it at once instead of at its expiry. */
static void rc_failed(void *self, const paging_request_t *request, paging_status_t code, const char *message)
{
    rc_state *st = (rc_state *)self;
    (void)code;
    (void)message;
    pthread_mutex_lock(&st->conn_lock);
    if (st->ctx != NULL) rc_release_lease(st, request->identity);
    pthread_mutex_unlock(&st->conn_lock);
}

/* paging.health/1: is Redis reachable now? */
static paging_status_t rc_health(void *self)
{
    rc_state *st = (rc_state *)self;
    const char *argv[1];
    size_t lens[1];
    redisReply *r = NULL;
    char msg[800] = "";
    int ok;
    argv[0] = "PING";
    lens[0] = 4;
    pthread_mutex_lock(&st->conn_lock);
    if (rc_connect(st, 1)) {
        r = rc_command(st, 1, argv, lens);
    } else {
        /* Not connected: why (a refused AUTH read as "does not answer PING"). */
        snprintf(msg, sizeof msg, "redis-cache: Redis at %.300s is unavailable: %.400s", st->address,
                 st->down_reason[0] != '\0' ? st->down_reason : "not connected");
    }
    pthread_mutex_unlock(&st->conn_lock);
    ok = r != NULL && r->type == REDIS_REPLY_STATUS;
    if (msg[0] != '\0') {
        st->host->log(st->host, PAGING_LOG_ERROR, msg);
    } else if (!ok) {
        snprintf(msg, sizeof msg, "redis-cache: Redis at %.300s does not answer PING%s%.100s", st->address,
                 r != NULL && r->type == REDIS_REPLY_ERROR ? ": " : "",
                 r != NULL && r->type == REDIS_REPLY_ERROR ? r->str : "");
        rc_hide_password(st, msg);
        st->host->log(st->host, PAGING_LOG_ERROR, msg);
    }
    if (r != NULL) freeReplyObject(r);
    return ok ? PAGING_OK : PAGING_ERR_TRANSIENT;
}

static void rc_cancel(void *self, uint64_t id)
{
    pstore_queue_cancel(&((rc_state *)self)->queue, id);
}

static const paging_ext_health_t rc_health_ext = { rc_health };
static const paging_ext_async_intercept_t rc_async_ext = { rc_cancel };
static const paging_ext_load_outcome_t rc_outcome_ext = { rc_failed };

static const void *rc_get_extension(paging_interceptor_t *self, const char *id)
{
    (void)self;
    if (strcmp(id, PAGING_EXT_HEALTH) == 0) return &rc_health_ext;
    if (strcmp(id, PAGING_EXT_LOAD_OUTCOME) == 0) return &rc_outcome_ext;
    return strcmp(id, PAGING_EXT_ASYNC_INTERCEPT) == 0 ? &rc_async_ext : NULL;
}

/* ---- create / destroy ------------------------------------------------------------------ */

static void rc_destroy(paging_interceptor_t *self)
{
    rc_state *st = (rc_state *)self;
    pstore_queue_destroy(&st->queue);
    if (st->ctx != NULL) redisFree(st->ctx);
    if (st->password != NULL) memset(st->password, 0, strlen(st->password));
    free(st->password);
    free(st->host_name);
    free(st->socket_path);
    free(st->page_prefix);
    free(st->lease_prefix);
    pstore_warner_destroy(&st->warn_down);
    pstore_warner_destroy(&st->warn_bad);
    pstore_warner_destroy(&st->warn_big);
    pthread_mutex_destroy(&st->conn_lock);
    free(st);
}

/* Fails create with `code` and a message naming the plugin, and frees st. */
static paging_interceptor_t *rc_fail(rc_state *st, const paging_config_t *config, paging_status_t code, const char *message)
{
    char msg[700];
    snprintf(msg, sizeof msg, "redis-cache: %.650s", message);
    st->host->config_fail(config, code, msg);
    rc_destroy(&st->interceptor);
    return NULL;
}

/* A string config key (fallback when absent). Returns it (borrowed), or NULL with `problem` set. */
static const char *rc_string(const paging_host_t *host, const paging_config_t *config, const char *key,
                             const char *fallback, char *problem, size_t problem_len)
{
    const char *value = host->config_string(config, key);
    if (value != NULL) return value;
    if (host->config_type(config, key) == PAGING_CONFIG_ABSENT) return fallback;
    snprintf(problem, problem_len, "config `%s` must be a string", key);
    return NULL;
}

static char *rc_strdup(const char *text, size_t len)
{
    char *copy = (char *)malloc(len + 1);
    if (copy == NULL) return NULL;
    memcpy(copy, text, len);
    copy[len] = '\0';
    return copy;
}

/* Parses `address` into the state. Returns NULL, or what is wrong. */
static const char *rc_parse_address(rc_state *st, const char *address)
{
    const char *colon;
    size_t host_len;
    long port = 6379;
    if (strncmp(address, "unix:", 5) == 0) {
        if (address[5] == '\0') return "a unix: address needs the socket's path";
        st->socket_path = rc_strdup(address + 5, strlen(address + 5));
        return st->socket_path == NULL ? "out of memory" : NULL;
    }
    if (address[0] == '[') {
        const char *close = strchr(address, ']');
        if (close == NULL) return "an IPv6 address needs its closing ]";
        host_len = (size_t)(close - address - 1);
        st->host_name = rc_strdup(address + 1, host_len);
        colon = close[1] == ':' ? close + 1 : NULL;
        if (close[1] != '\0' && colon == NULL) return "expected host:port";
    } else {
        colon = strrchr(address, ':');
        host_len = colon != NULL ? (size_t)(colon - address) : strlen(address);
        st->host_name = rc_strdup(address, host_len);
    }
    if (st->host_name == NULL) return "out of memory";
    if (host_len == 0 || host_len > 253) return "the host name is empty or too long";
    if (colon != NULL) {
        char *end;
        port = strtol(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || port < 1 || port > 65535) return "the port must be a number in 1...65535";
    }
    st->port = (int)port;
    return NULL;
}

/* Reads the config into st. Returns 1, or 0 with `problem` set (or after config_fail: *failed). */
static int rc_configure(rc_state *st, const paging_config_t *config, char *problem, size_t problem_len)
{
    static const char *const keys[] = { "address", "password_env", "database", "key_prefix", "namespace", "ttl_seconds",
                                        "policy", "max_age_seconds", "lease_ms", "poll_ms", "connect_timeout_ms",
                                        "command_timeout_ms", "retry_interval_ms", "max_page_bytes", NULL };
    const paging_host_t *host = st->host;
    const char *address_text, *password_env, *prefix, *ns, *bad, *at;
    char *address, error[300], unknown[220];
    int64_t ttl, connect_ms, command_ms;
    size_t prefix_len, ns_len;

    if (!pstore_only_known_keys(host, config, keys, unknown, sizeof unknown)) {
        snprintf(problem, problem_len, "config `%s`: unknown key; expected address, password_env, database, key_prefix, "
                 "namespace, ttl_seconds, policy, max_age_seconds, lease_ms, poll_ms, connect_timeout_ms, "
                 "command_timeout_ms, retry_interval_ms or max_page_bytes", unknown);
        return 0;
    }

    if ((address_text = rc_string(host, config, "address", "127.0.0.1:6379", problem, problem_len)) == NULL
        || (prefix = rc_string(host, config, "key_prefix", "swiftpaging", problem, problem_len)) == NULL
        || (ns = rc_string(host, config, "namespace", "default", problem, problem_len)) == NULL
        || (password_env = rc_string(host, config, "password_env", "", problem, problem_len)) == NULL
        || !pstore_config_int(host, config, "database", 0, 0, 2147483647, &st->database, problem, problem_len)
        || !pstore_config_int(host, config, "ttl_seconds", 86400, 1, 2147483647, &ttl, problem, problem_len)
        || !pstore_config_int(host, config, "lease_ms", 10000, 1, 3600000, &st->lease_ms, problem, problem_len)
        || !pstore_config_int(host, config, "poll_ms", 20, 1, 10000, &st->queue.poll_ms, problem, problem_len)
        || !pstore_config_int(host, config, "connect_timeout_ms", 500, 1, 60000, &connect_ms, problem, problem_len)
        || !pstore_config_int(host, config, "command_timeout_ms", 1000, 1, 60000, &command_ms, problem, problem_len)
        || !pstore_config_int(host, config, "retry_interval_ms", 1000, 0, 600000, &st->retry_ms, problem, problem_len)
        || !pstore_config_int(host, config, "max_page_bytes", 67108864, 1024, 536870912, &st->max_page_bytes, problem, problem_len))
        return 0;
    if (!pstore_is_plain_name(prefix, 128) || !pstore_is_plain_name(ns, 128)) {
        snprintf(problem, problem_len, "config `%s` must be 1-128 characters of A-Z, a-z, 0-9, '_', '.' and '-'",
                 pstore_is_plain_name(prefix, 128) ? "namespace" : "key_prefix");
        return 0;
    }
    /* Read first: every line that quotes the address hides it (an address that holds the
     * password, by mistake, was quoted in full by validate's health line and by a refusal). */
    if (password_env[0] != '\0') {
        const char *password = getenv(password_env);
        if (password == NULL) {
            snprintf(problem, problem_len, "config `password_env`: the environment variable %.100s is not set", password_env);
            return 0;
        }
        if ((st->password = rc_strdup(password, strlen(password))) == NULL) return 0;
    }
    address = pstore_expand_env(address_text, error, sizeof error);
    if (address == NULL) {
        snprintf(problem, problem_len, "config `address`: %s", error);
        return 0;
    }
    /* A URL ("redis://:password@host") is not an address: refused without quoting what comes
     * before its '@', which may be a password (it was printed in every warning). */
    if ((at = strrchr(address, '@')) != NULL || strstr(address, "://") != NULL) {
        snprintf(problem, problem_len, "config `address` '%s%.200s': expected host:port, host, [v6-address]:port or "
                 "unix:/path, not a URL; a password goes in the environment variable password_env names",
                 at != NULL ? "***@" : "", at != NULL ? at + 1 : address);
        rc_hide_password(st, problem);
        free(address);
        return 0;
    }
    bad = rc_parse_address(st, address);
    snprintf(st->address, sizeof st->address, "%.290s", address);
    rc_hide_password(st, st->address);
    free(address);
    if (bad != NULL) {
        snprintf(problem, problem_len, "config `address` '%.300s': %s", st->address, bad);
        return 0;
    }
    st->ttl_ms = ttl * 1000;
    st->connect_timeout.tv_sec = (time_t)(connect_ms / 1000);
    st->connect_timeout.tv_usec = (suseconds_t)(connect_ms % 1000) * 1000;
    st->command_timeout.tv_sec = (time_t)(command_ms / 1000);
    st->command_timeout.tv_usec = (suseconds_t)(command_ms % 1000) * 1000;
    prefix_len = strlen(prefix);
    ns_len = strlen(ns);
    st->page_prefix = (char *)malloc(prefix_len + ns_len + 5);
    st->lease_prefix = (char *)malloc(prefix_len + ns_len + 5);
    if (st->page_prefix == NULL || st->lease_prefix == NULL) {
        snprintf(problem, problem_len, "out of memory");
        return 0;
    }
    snprintf(st->page_prefix, prefix_len + ns_len + 5, "%s:%s:p:", prefix, ns);
    snprintf(st->lease_prefix, prefix_len + ns_len + 5, "%s:%s:l:", prefix, ns);
    st->page_prefix_len = strlen(st->page_prefix);
    st->lease_prefix_len = strlen(st->lease_prefix);
    return 1;
}

/* A random token naming this instance's leases. */
static void rc_make_token(rc_state *st)
{
    unsigned char bytes[16];
    size_t i, got = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, bytes, sizeof bytes);
        if (n > 0) got = (size_t)n;
        close(fd);
    }
    for (i = got; i < sizeof bytes; i++) /* no urandom: time, pid and address */
        bytes[i] = (unsigned char)(((uintptr_t)st >> (i % 8)) ^ (unsigned)getpid() ^ (unsigned)pstore_now_ms() >> i);
    for (i = 0; i < sizeof bytes; i++) snprintf(st->token + 2 * i, 3, "%02x", bytes[i]);
}

static paging_interceptor_t *rc_create_interceptor(const char *plugin_id, const paging_host_t *host,
                                                   const paging_config_t *config)
{
    rc_state *st;
    char problem[600], msg[500];

    if (plugin_id == NULL || strcmp(plugin_id, "redis-cache") != 0) {
        host->config_fail(config, PAGING_ERR_NOT_FOUND, "redis-cache: unknown plugin id");
        return NULL;
    }
    st = (rc_state *)calloc(1, sizeof *st);
    if (st == NULL) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "redis-cache: out of memory");
        return NULL;
    }
    st->host = host;
    pthread_mutex_init(&st->conn_lock, NULL);
    pstore_warner_init(&st->warn_down);
    pstore_warner_init(&st->warn_bad);
    pstore_warner_init(&st->warn_big);
    pstore_queue_init(&st->queue, st, rc_run, rc_poll, 20);
    problem[0] = '\0';
    if (!pstore_read_freshness(host, config, "redis-cache", &st->fresh)) {
        rc_destroy(&st->interceptor);
        return NULL;
    }
    if (!rc_configure(st, config, problem, sizeof problem))
        return rc_fail(st, config, problem[0] ? PAGING_ERR_INVALID_CONFIG : PAGING_ERR_INTERNAL,
                       problem[0] ? problem : "out of memory");
    st->async = (const paging_ext_async_intercept_host_t *)host->get_extension(host, PAGING_EXT_ASYNC_INTERCEPT);
    st->metrics = (const paging_ext_metrics_host_t *)host->get_extension(host, PAGING_EXT_METRICS);
    rc_make_token(st);

    /* Connect now, so that a wrong address shows at once; Redis down is a warning, not a failure.
     * A database Redis refuses is the config's mistake: it would count as down for ever. */
    pthread_mutex_lock(&st->conn_lock);
    if (rc_connect(st, 1)) {
        snprintf(msg, sizeof msg, "redis-cache: connected to Redis at %.300s", st->address);
        host->log(host, PAGING_LOG_DEBUG, msg);
    }
    pthread_mutex_unlock(&st->conn_lock);
    if (st->select_refused[0] != '\0') {
        snprintf(problem, sizeof problem, "config `database` %lld: Redis at %.300s has no such database (%.250s)",
                 (long long)st->database, st->address, st->select_refused);
        return rc_fail(st, config, PAGING_ERR_INVALID_CONFIG, problem);
    }

    st->interceptor.plugin_data = st;
    st->interceptor.intercept = rc_intercept;
    st->interceptor.handle = rc_handle;
    st->interceptor.destroy = rc_destroy;
    st->interceptor.struct_size = (uint32_t)sizeof st->interceptor;
    st->interceptor.get_extension = rc_get_extension;
    return &st->interceptor;
}

/* ---- entry ----------------------------------------------------------------------------- */

static uint32_t rc_plugin_count(void) { return 1; }

static const paging_plugin_descriptor_t *rc_descriptor_at(uint32_t index)
{
    return index == 0 ? &rc_descriptor : NULL;
}

static const paging_plugin_entry_t rc_entry = {
    PAGING_ENTRY_HEAD,
    rc_plugin_count,
    rc_descriptor_at,
    NULL,
    rc_create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void)
{
    return &rc_entry;
}
