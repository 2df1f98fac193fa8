/*
 * sqlite_store.c - a SwiftPaging interceptor plugin keeping pages in a SQLite database file, so
 * pages loaded once are served from disk (also after a restart) instead of from the source.
 * It plays the role of CoreDataInterceptor: a persistent store in front of the source.
 *
 * Plugin id: "sqlite-store" (kind INTERCEPTOR; not THREAD_SAFE: the host serializes calls on an
 * instance, and a lock inside keeps them apart from the reader thread). Links against the system
 * libsqlite3. Uses paging.async-intercept/1 when the host offers it, and paging.metrics/1
 * (counters "hits", "stale_hits" and "misses": pager run --stats).
 *
 * Config keys:
 *   path               string, required. The database file; created when missing. The host
 *                      resolves relative paths before the config reaches the plugin. A missing
 *                      key, an unopenable file, a file that is not a SQLite database or one with
 *                      a newer schema fails create with PAGING_ERR_INVALID_CONFIG naming the key,
 *                      the path and SQLite's error. So does a database of another application
 *                      (schema objects, but not the store's `meta` table with its
 *                      schema_version row): it is read in a read transaction and left unchanged.
 *                      An empty database or a new file becomes a store.
 *   namespace          string of 1-128 bytes, optional (default "default"). Pages are stored and
 *                      looked up under this name; instances with different namespaces share a
 *                      file safely.
 *   policy             string, optional (default "cache-first"). When a stored page answers:
 *                        "cache-first"  a fresh stored page answers; a stale one is loaded again
 *                        "network-first"  every request goes on to the source; a stored page
 *                                       (of any age) answers only when that load fails, with a
 *                                       warning naming the failure
 *                        "stale-while-revalidate"  a stored page answers at once; a stale one
 *                                       is then loaded again in the background and stored
 *   max_age_seconds    integer >= 0, optional. How long a stored page is fresh (default: for
 *                      ever; with "stale-while-revalidate", 0: every answer is revalidated).
 *   busy_timeout_ms    integer, optional (default 5000, 0...2147483647). How long a call waits
 *                      for another process holding the write lock.
 *   max_pages          integer, optional (1...2147483647; default: no bound). The most pages the
 *                      namespace keeps: a write that takes it past the bound drops the oldest
 *                      stored pages, down to nine tenths of it (never the page just written),
 *                      counted as `evicted`. What bounds a store in front of `pager serve`,
 *                      whose clients' parameters each make pages of their own.
 *   Any other key fails create naming it, as does a key of the wrong type; so does a `path` that
 *   is a folder, a FIFO, a socket or a device.
 *
 * Test hook (the durability test only): with the environment variable
 * PAGING_SQLITE_STORE_TEST_CRASH_AFTER_ITEMS=N at create, handle() calls _exit(137) right after
 * inserting N items of a page, inside the open write transaction. It is not a config key, so
 * no manifest can set it.
 *
 * Behaviour:
 *   Pages are stored under (namespace, the request's identity): its key, page size and every
 *   param but hard_refresh and reload (paging_request_t.identity), so a page loaded for one
 *   query is never served for another.
 *   intercept(): a REFRESH request with param hard_refresh = "true" proceeds (its page, once
 *   loaded, replaces every page of the namespace; a failed load leaves them); so does a request
 *   with param reload = "true" (a short page loaded again; its page replaces the one stored
 *   under its identity). Otherwise the page stored under the request's identity, when it is
 *   complete (item_count >= page_size, or flags has PAGING_PAGE_NEXT_END:
 *   the last page is complete even when short; or it names its next page: a page a filter after
 *   the source made short), answers by the policy: COMPLETE (fresh),
 *   PROCEED_OR_FALL_BACK (network-first) or COMPLETE_THEN_REVALIDATE (stale, with
 *   stale-while-revalidate), with its items, stored prev/next keys and flags on `out`.
 *   Anything else proceeds and observes. A read error is logged at
 *   WARNING and the request proceeds: the store is a cache, never a failure.
 *   Reads off the caller's thread: when the host offers paging.async-intercept/1, intercept()
 *   copies the request's identity and page size, queues the lookup and defers its answer
 *   (PAGING_INTERCEPT_PENDING); the instance's reader thread (one, started with the first
 *   lookup) runs the lookups in order and answers each through resume() with the result above.
 *   cancel() drops a lookup still queued; destroy() stops and joins the reader, dropping the
 *   lookups it had not started (the host ends them). Without the extension intercept() reads on
 *   the caller's thread.
 *   handle(): stores the page, replacing the one with the same namespace and identity (the
 *   page of a hard refresh: every page of the namespace), in one transaction. A write error
 *   (disk full, lock timeout) is logged at ERROR and the store is left as it was.
 *
 * File format, schema version 3 (a version 2 file is upgraded in place, its pages kept; a
 * version 1 file too, its pages dropped with a WARNING, because version 1 did not record the
 * params each page was loaded with; any other version is refused):
 *   CREATE TABLE meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;
 *       -- one row: ('schema_version', 3)
 *   CREATE TABLE pages (id INTEGER PRIMARY KEY,
 *       namespace TEXT NOT NULL,
 *       identity BLOB NOT NULL,              -- paging_request_t.identity, bytes as given
 *       prev_key BLOB, next_key BLOB,        -- NULL: the source gave no key
 *       flags INTEGER NOT NULL,              -- PAGING_PAGE_* bits
 *       item_count INTEGER NOT NULL,
 *       stored_at INTEGER NOT NULL,          -- Unix time in milliseconds
 *       UNIQUE (namespace, identity));
 *   CREATE TABLE items (page INTEGER NOT NULL, -- pages.id
 *       position INTEGER NOT NULL,           -- 0-based
 *       item BLOB NOT NULL,                  -- one JSON value, bytes as given
 *       PRIMARY KEY (page, position)) WITHOUT ROWID;
 *   Version 2 keyed each item by its page's namespace and identity: a page of 100 items held
 *   its identity 101 times (a client of `pager serve` sending 3 KB parameters wrote 0.5 MB).
 *   The file uses journal_mode=WAL and synchronous=NORMAL.
 *
 * Atomicity: each page write (and each namespace clear) is one BEGIN IMMEDIATE ... COMMIT
 * transaction, and each lookup reads the page row and its items inside one read transaction
 * (one snapshot) and checks the item count, so a reader only ever sees whole pages: a process
 * killed mid-write leaves the previous state of the page (or no page), never half a page.
 * With synchronous=NORMAL a committed page can be lost on power failure (not on a process
 * crash); the database stays consistent either way. Several processes may share the file.
 *
 * Extensions offered: paging.health/1 (the file opened is still at its path, and the store can
 * take a write lock: BEGIN IMMEDIATE, then ROLLBACK; a file removed or replaced since, or a store
 * another process holds locked longer than the busy timeout, is unhealthy), and
 * paging.async-intercept/1 (cancel() drops a queued lookup).
 *
 * build (third-party path): cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC \
 *     -pthread -I Sources/CPaging/include Plugins/SQLite/sqlite_store.c -lsqlite3 -o libsqlite-store.so
 */
#define _POSIX_C_SOURCE 200809L /* _exit, clock_gettime */

#include <errno.h>
#include <pthread.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "paging/paging.h"
#include "paging_store.h"

#define SQLS_SCHEMA_VERSION 3

typedef struct sqls_span {
    size_t offset; /* into sqls_state.buf */
    size_t len;
} sqls_span;

/* A lookup queued for the reader thread: what it needs of the request, copied. */
typedef struct sqls_lookup {
    struct sqls_lookup *next;
    uint64_t id;              /* the deferred intercept to answer */
    uint32_t page_size;
    size_t identity_len;
    uint8_t identity[];       /* identity_len bytes */
} sqls_lookup;

/* What sqls_read_page found, for sqls_answer: the page's views point into the read buffer. */
typedef struct sqls_found {
    int result;               /* sqls_read_page's */
    pstore_page page;
} sqls_found;

typedef struct sqls_state {
    paging_interceptor_t interceptor; /* first member: `self` points here */
    const paging_host_t *host;
    const paging_ext_async_intercept_host_t *async; /* NULL: reads run on the caller's thread */
    const paging_ext_metrics_host_t *metrics;       /* NULL: the host takes no counters */
    /* The connection and its statements are used by the host's calls and by the reader thread;
     * db_lock keeps them apart. The read buffer belongs to whoever reads: the caller's thread
     * while no reader thread runs, the reader thread alone from its start (it fills it, and the
     * answer of that lookup reads it). */
    pthread_mutex_t db_lock;
    sqlite3 *db;
    char *ns;                 /* namespace, NUL-terminated */
    int64_t crash_after_items;
    int64_t max_pages;        /* 0: no bound */
    int said_damaged;         /* a damaged file was logged (once an instance; then at debug) */
    int said_failing;         /* a write failure that fails every page alike (a full disk, an I/O
                               * error, the write lock held past the busy timeout) was logged (then
                               * at debug until a page is stored) */
    int busy_ms;              /* busy_timeout_ms */
    int locked_out;           /* a write found the lock held past busy_ms: writes wait no more
                               * (busy timeout 0) until one is stored */
    struct stat opened;       /* the file opened, to tell it was removed or replaced (health) */
    pstore_freshness freshness;
    /* prepared once at create, reused */
    sqlite3_stmt *begin_read, *begin_write, *commit, *rollback;
    sqlite3_stmt *get_page, *get_items;
    sqlite3_stmt *put_page, *del_items, *put_item;
    sqlite3_stmt *clear_pages, *clear_items;
    sqlite3_stmt *count_pages, *evict_items, *evict_pages;
    /* read buffer: a page is read whole before anything is handed to the host */
    uint8_t *buf;
    size_t buf_cap;
    sqls_span *spans;
    paging_bytes_t *views;    /* the spans as views into buf, once a page is read whole */
    size_t span_cap;
    /* The reader thread and its queue, guarded by queue_lock. */
    pthread_mutex_t queue_lock;
    pthread_cond_t queue_wake;
    sqls_lookup *queue_head, *queue_tail;
    pthread_t reader;
    int reader_started;
    int stopping;
} sqls_state;

static const paging_plugin_descriptor_t sqls_descriptor = {
    PAGING_DESCRIPTOR_HEAD,
    "sqlite-store",
    "SQLite page store",
    "1.0.0",
    "Stores loaded pages in a SQLite file and serves complete pages from it.",
    PAGING_PLUGIN_INTERCEPTOR,
    0, NULL
};

static const char sqls_schema_meta[] =
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL) WITHOUT ROWID;";

/* The tables of schema version 3, under the names `pages` and `items` (an upgrade creates them
 * under others first). */
#define SQLS_SCHEMA_V3(pages, items) \
    "CREATE TABLE IF NOT EXISTS " pages " (" \
    " id INTEGER PRIMARY KEY, namespace TEXT NOT NULL, identity BLOB NOT NULL," \
    " prev_key BLOB, next_key BLOB, flags INTEGER NOT NULL, item_count INTEGER NOT NULL," \
    " stored_at INTEGER NOT NULL," \
    " UNIQUE (namespace, identity));" \
    "CREATE TABLE IF NOT EXISTS " items " (" \
    " page INTEGER NOT NULL, position INTEGER NOT NULL, item BLOB NOT NULL," \
    " PRIMARY KEY (page, position)) WITHOUT ROWID;"

/* ---- helpers --------------------------------------------------------------------------- */

static void sqls_log(sqls_state *st, uint32_t level, const char *what)
{
    char msg[1600];
    int code = sqlite3_errcode(st->db) & 0xFF; /* extended codes (SQLITE_CORRUPT_INDEX...) */
    const char *file = sqlite3_db_filename(st->db, "main");
    /* A damaged file fails every read and write alike: said once, with what to do. */
    int damaged = code == SQLITE_CORRUPT || code == SQLITE_NOTADB;
    /* A full disk, an I/O error (a file size limit: EFBIG) and a write lock held by another
     * process fail every write alike (a probe: one line a page, 164 of them): said once until a
     * page is stored again, the I/O error with the system's reason ("disk I/O error" alone). */
    int full = code == SQLITE_FULL, io = code == SQLITE_IOERR, busy = code == SQLITE_BUSY;
    int system_errno = io ? sqlite3_system_errno(st->db) : 0;
    char io_reason[160] = "";
    if ((damaged && st->said_damaged) || ((full || io || busy) && st->said_failing)) level = PAGING_LOG_DEBUG;
    if (damaged) st->said_damaged = 1;
    if (full || io || busy) st->said_failing = 1;
    if (system_errno != 0) snprintf(io_reason, sizeof io_reason, " (%.120s)", strerror(system_errno));
    snprintf(msg, sizeof msg, "sqlite-store: '%.400s': %.300s: %.600s%s%s", file != NULL ? file : "", what, sqlite3_errmsg(st->db), io_reason,
             damaged ? " (the file is damaged: pages load from the source meanwhile; remove the file to start a new store)"
             : busy ? " (another process held the write lock past busy_timeout_ms: pages are not stored while it holds it, "
                      "and no longer wait for it; said once until a page is stored again)"
             : full || io ? " (pages load from the source meanwhile; said once until a page is stored again)" : "");
    st->host->log(st->host, level, msg);
}

/* Runs a one-shot statement (BEGIN, COMMIT, a DELETE...) and resets it. Returns SQLite's code. */
static int sqls_exec(sqlite3_stmt *stmt)
{
    int rc = sqlite3_step(stmt);
    sqlite3_reset(stmt);
    return rc == SQLITE_ROW ? SQLITE_DONE : rc;
}

/* Ends any open transaction without keeping its changes. */
static void sqls_abort(sqls_state *st)
{
    if (!sqlite3_get_autocommit(st->db)) sqls_exec(st->rollback);
}

/* Binds bytes as a BLOB; zero-length data binds an empty BLOB (never NULL). The bytes must stay
 * valid until the statement is reset (they are the host's, borrowed for the current call). */
static int sqls_bind_bytes(sqlite3_stmt *stmt, int index, paging_bytes_t b)
{
    if (b.len > 0x7fffffff) return SQLITE_TOOBIG;
    return sqlite3_bind_blob(stmt, index, b.len ? (const void *)b.data : (const void *)"",
                             (int)b.len, SQLITE_STATIC);
}

static int sqls_bind_opt_bytes(sqlite3_stmt *stmt, int index, const paging_bytes_t *b)
{
    return b == NULL ? sqlite3_bind_null(stmt, index) : sqls_bind_bytes(stmt, index, *b);
}

/* Binds ?1 namespace, ?2 a request's identity. */
static int sqls_bind_page_id(sqls_state *st, sqlite3_stmt *stmt, paging_bytes_t identity)
{
    int rc = sqlite3_bind_text(stmt, 1, st->ns, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK) rc = sqls_bind_bytes(stmt, 2, identity);
    return rc;
}

static void sqls_done(sqlite3_stmt *stmt)
{
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
}

/* Appends bytes to the read buffer as span `index`; returns 0 when out of memory. */
static int sqls_buffer(sqls_state *st, size_t index, size_t used, const void *data, size_t len)
{
    if (index >= st->span_cap) {
        size_t ncap = st->span_cap ? st->span_cap * 2 : 64;
        sqls_span *ns;
        paging_bytes_t *nv;
        while (ncap <= index) ncap *= 2;
        ns = (sqls_span *)realloc(st->spans, ncap * sizeof *ns);
        if (ns == NULL) return 0;
        st->spans = ns;
        nv = (paging_bytes_t *)realloc(st->views, ncap * sizeof *nv);
        if (nv == NULL) return 0;
        st->views = nv;
        st->span_cap = ncap;
    }
    if (st->buf_cap - used < len) {
        size_t ncap = st->buf_cap ? st->buf_cap : 4096;
        uint8_t *nb;
        while (ncap - used < len) ncap *= 2;
        nb = (uint8_t *)realloc(st->buf, ncap);
        if (nb == NULL) return 0;
        st->buf = nb;
        st->buf_cap = ncap;
    }
    if (len) memcpy(st->buf + used, data, len);
    st->spans[index].offset = used;
    st->spans[index].len = len;
    return 1;
}

/* Reads a nullable BLOB column into the buffer as span `index`; *present = 0 for NULL. */
static int sqls_buffer_column(sqls_state *st, sqlite3_stmt *stmt, int col, size_t index,
                              size_t *used, int *present)
{
    const void *data;
    size_t len;
    *present = sqlite3_column_type(stmt, col) != SQLITE_NULL;
    data = sqlite3_column_blob(stmt, col);
    len = (size_t)sqlite3_column_bytes(stmt, col);
    if (!*present) len = 0;
    if (!sqls_buffer(st, index, *used, data, len)) return 0;
    *used += len;
    return 1;
}

/* ---- intercept ------------------------------------------------------------------------- */

/* Reads the page stored under `identity` for pages of `page_size` into the buffer (span 0 =
 * prev key, 1 = next key, 2.. = items) and sets `page` to views of it. Returns 1 when a whole
 * page was read, 0 when there is none (or it is not whole), -1 on a read error (already logged).
 * Both statements run in one read transaction (one snapshot). [under db_lock] */
static int sqls_read_page(sqls_state *st, paging_bytes_t identity, uint32_t page_size, pstore_page *page)
{
    size_t used = 0, n = 0, i;
    sqlite3_int64 item_count = 0, page_id = 0;
    int rc, found = 0, nomem = 0;

    rc = sqls_exec(st->begin_read);
    if (rc != SQLITE_DONE) { sqls_log(st, PAGING_LOG_WARNING, "read: cannot begin"); return -1; }

    rc = sqls_bind_page_id(st, st->get_page, identity);
    if (rc == SQLITE_OK) rc = sqlite3_step(st->get_page);
    if (rc == SQLITE_ROW) {
        page->flags = (uint32_t)sqlite3_column_int64(st->get_page, 2);
        item_count = sqlite3_column_int64(st->get_page, 3);
        page->stored_at_ms = sqlite3_column_int64(st->get_page, 4);
        page_id = sqlite3_column_int64(st->get_page, 5);
        page->count = item_count < 0 ? 0 : (size_t)item_count;
        page->has_next = sqlite3_column_type(st->get_page, 1) != SQLITE_NULL;
        if (pstore_page_is_whole(page, page_size)) {
            found = 1;
            nomem = !sqls_buffer_column(st, st->get_page, 0, 0, &used, &page->has_prev)
                    || !sqls_buffer_column(st, st->get_page, 1, 1, &used, &page->has_next);
        }
        rc = SQLITE_DONE;
    }
    sqls_done(st->get_page);

    if (rc == SQLITE_DONE && found && !nomem) {
        rc = sqlite3_bind_int64(st->get_items, 1, page_id);
        if (rc == SQLITE_OK) {
            while ((rc = sqlite3_step(st->get_items)) == SQLITE_ROW) {
                const void *data = sqlite3_column_blob(st->get_items, 0);
                size_t len = (size_t)sqlite3_column_bytes(st->get_items, 0);
                if (!sqls_buffer(st, 2 + n, used, data, len)) { nomem = 1; break; }
                used += len;
                n++;
            }
        }
        sqls_done(st->get_items);
        if (nomem) rc = SQLITE_DONE;
    }
    if (rc == SQLITE_DONE) rc = sqls_exec(st->commit);
    if (rc != SQLITE_DONE || nomem) {
        if (nomem)
            st->host->log(st->host, PAGING_LOG_WARNING, "sqlite-store: read: out of memory");
        else
            sqls_log(st, PAGING_LOG_WARNING, "read: cannot read the page");
        sqls_abort(st);
        return -1;
    }
    if (found && (sqlite3_int64)n != item_count) {
        st->host->log(st->host, PAGING_LOG_WARNING,
                      "sqlite-store: read: stored item count does not match the items; ignoring the page");
        return 0;
    }
    if (!found) return 0;
    /* The buffer is read whole: its spans are now views that stay where they are. */
    for (i = 0; i < 2 + n; i++) {
        st->views[i].data = st->buf + st->spans[i].offset;
        st->views[i].len = st->spans[i].len;
    }
    page->prev = st->views[0];
    page->next = st->views[1];
    page->count = n;
    page->items = st->views + 2;
    return 1;
}

/* Looks the page up: sqls_read_page under db_lock. */
static void sqls_find(sqls_state *st, paging_bytes_t identity, uint32_t page_size, sqls_found *found)
{
    memset(found, 0, sizeof *found);
    pthread_mutex_lock(&st->db_lock);
    found->result = sqls_read_page(st, identity, page_size, &found->page);
    pthread_mutex_unlock(&st->db_lock);
}

/* Answers a request with what sqls_find found: sets the page on `out` and returns the
 * PAGING_INTERCEPT_* value the policy says. Counts misses, pages held too old, and hits. */
static uint32_t sqls_answer(sqls_state *st, const sqls_found *found, paging_intercept_out_t *out)
{
    int fresh;

    if (found->result != 1) {
        pstore_count(st->host, st->metrics, "misses");
        return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    }
    fresh = pstore_page_is_fresh(&st->freshness, &found->page);
    /* A page the host refuses (limits lowered, an item changed underneath) is no hit: a miss. */
    if ((st->freshness.policy != PSTORE_CACHE_FIRST || fresh) && !pstore_put_page(st->host, "sqlite-store", &found->page, out)) {
        pstore_count(st->host, st->metrics, "misses");
        return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    }
    pstore_count(st->host, st->metrics, fresh ? "hits" : "stale_hits");
    if (st->freshness.policy == PSTORE_CACHE_FIRST && !fresh) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    if (st->freshness.policy == PSTORE_NETWORK_FIRST) return PAGING_INTERCEPT_PROCEED_OR_FALL_BACK;
    return fresh ? PAGING_INTERCEPT_COMPLETE : PAGING_INTERCEPT_COMPLETE_THEN_REVALIDATE;
}

/* ---- the reader thread ----------------------------------------------------------------- */

typedef struct sqls_answer_context {
    sqls_state *st;
    const sqls_found *found;
} sqls_answer_context;

static uint32_t sqls_answer_deferred(void *context, paging_intercept_out_t *out)
{
    const sqls_answer_context *c = (const sqls_answer_context *)context;
    return sqls_answer(c->st, c->found, out);
}

/* Runs the queued lookups in order and answers each, until destroy() stops it. */
static void *sqls_reader_main(void *arg)
{
    sqls_state *st = (sqls_state *)arg;
    pthread_mutex_lock(&st->queue_lock);
    for (;;) {
        sqls_lookup *lookup;
        sqls_found found;
        sqls_answer_context context;
        paging_bytes_t identity;
        while (st->queue_head == NULL && !st->stopping) pthread_cond_wait(&st->queue_wake, &st->queue_lock);
        if (st->stopping) break;
        lookup = st->queue_head;
        st->queue_head = lookup->next;
        if (st->queue_head == NULL) st->queue_tail = NULL;
        pthread_mutex_unlock(&st->queue_lock);

        identity.data = lookup->identity;
        identity.len = lookup->identity_len;
        sqls_find(st, identity, lookup->page_size, &found);
        context.st = st;
        context.found = &found;
        /* No lock is held: the host may call handle() or cancel() meanwhile. */
        st->async->resume(st->host, lookup->id, sqls_answer_deferred, &context);
        free(lookup);
        pthread_mutex_lock(&st->queue_lock);
    }
    pthread_mutex_unlock(&st->queue_lock);
    return NULL;
}

/* Queues the lookup for `request` and defers its answer. Returns PAGING_INTERCEPT_PENDING; or 0
 * when no reader thread could start: the caller then reads itself; or
 * PAGING_INTERCEPT_PROCEED_AND_OBSERVE when out of memory or the host refused to defer (the read
 * buffer is the reader's: the request goes to the source). */
static uint32_t sqls_defer_lookup(sqls_state *st, const paging_request_t *request, paging_intercept_out_t *out)
{
    sqls_lookup *lookup;
    int ready;

    pthread_mutex_lock(&st->queue_lock);
    if (!st->reader_started) st->reader_started = pthread_create(&st->reader, NULL, sqls_reader_main, st) == 0;
    ready = st->reader_started;
    pthread_mutex_unlock(&st->queue_lock);
    if (!ready) return 0;

    lookup = (sqls_lookup *)malloc(sizeof *lookup + request->identity.len);
    if (lookup == NULL) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    lookup->next = NULL;
    lookup->page_size = request->page_size;
    lookup->identity_len = request->identity.len;
    if (request->identity.len) memcpy(lookup->identity, request->identity.data, request->identity.len);
    /* The host is called outside the lock: its cancel() path may hold a lock defer needs. */
    lookup->id = st->async->defer(out);
    if (lookup->id == 0) {
        free(lookup);
        return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    }
    pthread_mutex_lock(&st->queue_lock);
    if (st->queue_tail != NULL) st->queue_tail->next = lookup;
    else st->queue_head = lookup;
    st->queue_tail = lookup;
    pthread_cond_signal(&st->queue_wake);
    pthread_mutex_unlock(&st->queue_lock);
    return PAGING_INTERCEPT_PENDING;
}

static uint32_t sqls_intercept(paging_interceptor_t *self, const paging_request_t *request,
                               paging_intercept_out_t *out)
{
    sqls_state *st = (sqls_state *)self;
    sqls_found found;

    /* A hard refresh goes to the source (its page replaces the namespace's, handle), and a
     * reload (its page replaces the one stored under its identity). */
    if (pstore_goes_to_source(request))
        return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    if (st->async != NULL) {
        uint32_t deferred = sqls_defer_lookup(st, request, out);
        if (deferred != 0) return deferred;
    }
    sqls_find(st, request->identity, request->page_size, &found);
    return sqls_answer(st, &found, out);
}

/* paging.async-intercept/1: the host stopped waiting for `id`; drop its lookup if still queued. */
static void sqls_cancel(void *self, uint64_t id)
{
    sqls_state *st = (sqls_state *)self;
    sqls_lookup *prev = NULL, *lookup;
    pthread_mutex_lock(&st->queue_lock);
    for (lookup = st->queue_head; lookup != NULL; prev = lookup, lookup = lookup->next) {
        if (lookup->id != id) continue;
        if (prev != NULL) prev->next = lookup->next;
        else st->queue_head = lookup->next;
        if (st->queue_tail == lookup) st->queue_tail = prev;
        break;
    }
    pthread_mutex_unlock(&st->queue_lock);
    free(lookup);
}

/* ---- handle ---------------------------------------------------------------------------- */

/* Inside the write of page `kept`: when the namespace holds more than max_pages pages, drops the
 * oldest (never `kept`) down to nine tenths of the bound, so that a store at its bound does not
 * drop and sort on every write. Returns SQLITE_OK or SQLite's error. [under db_lock] */
static int sqls_evict(sqls_state *st, sqlite3_int64 kept)
{
    sqlite3_int64 count = 0, excess;
    int rc = sqlite3_bind_text(st->count_pages, 1, st->ns, -1, SQLITE_STATIC);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st->count_pages)) == SQLITE_ROW) {
        count = sqlite3_column_int64(st->count_pages, 0);
        rc = SQLITE_OK;
    }
    sqls_done(st->count_pages);
    if (rc != SQLITE_OK || count <= st->max_pages) return rc;
    excess = count - st->max_pages + st->max_pages / 10;
    /* Items first, then their pages: both choose the same pages (nothing changes in between). */
    sqlite3_stmt *steps[2] = { st->evict_items, st->evict_pages };
    for (int k = 0; k < 2 && rc == SQLITE_OK; k++) {
        sqlite3_bind_text(steps[k], 1, st->ns, -1, SQLITE_STATIC);
        sqlite3_bind_int64(steps[k], 2, excess);
        sqlite3_bind_int64(steps[k], 3, kept);
        rc = sqls_exec(steps[k]);
        sqlite3_clear_bindings(steps[k]);
        if (rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    if (rc == SQLITE_OK && st->metrics != NULL) st->metrics->counter_add(st->host, "evicted", (uint64_t)excess);
    return rc;
}

/* Writes `page` in one transaction. [under db_lock] */
/* Stores the page, replacing the one under its identity; the page of a hard refresh replaces
 * every page of the namespace. One transaction: a failure leaves the store as it was. */
static void sqls_store_page(sqls_state *st, const paging_page_t *page)
{
    const paging_request_t *req = page->request;
    size_t i;
    sqlite3_int64 page_id = 0;
    int rc = sqls_exec(st->begin_write);
    if (rc != SQLITE_DONE) {
        /* Held past the busy timeout, the lock held every page that long (5 s a page): the next
         * writes only try it, until one is stored. */
        if ((rc & 0xFF) == SQLITE_BUSY && !st->locked_out) {
            st->locked_out = 1;
            sqlite3_busy_timeout(st->db, 0);
        }
        sqls_log(st, PAGING_LOG_ERROR, "write: cannot begin");
        return;
    }

    if (pstore_is_hard_refresh(req)) {
        sqlite3_bind_text(st->clear_items, 1, st->ns, -1, SQLITE_STATIC);
        sqlite3_bind_text(st->clear_pages, 1, st->ns, -1, SQLITE_STATIC);
        rc = sqls_exec(st->clear_items);
        if (rc == SQLITE_DONE) rc = sqls_exec(st->clear_pages);
        sqlite3_clear_bindings(st->clear_items);
        sqlite3_clear_bindings(st->clear_pages);
    }
    /* Replace: drop the old page's items, then write the page row and the new items. */
    if (rc == SQLITE_DONE) rc = sqls_bind_page_id(st, st->del_items, req->identity);
    if (rc == SQLITE_OK) rc = sqls_exec(st->del_items);
    sqlite3_clear_bindings(st->del_items);

    if (rc == SQLITE_DONE) {
        rc = sqls_bind_page_id(st, st->put_page, req->identity);
        if (rc == SQLITE_OK) rc = sqls_bind_opt_bytes(st->put_page, 3, page->prev_key);
        if (rc == SQLITE_OK) rc = sqls_bind_opt_bytes(st->put_page, 4, page->next_key);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st->put_page, 5, (sqlite3_int64)page->flags);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st->put_page, 6, (sqlite3_int64)page->item_count);
        if (rc == SQLITE_OK) rc = sqlite3_bind_int64(st->put_page, 7, (sqlite3_int64)pstore_now_ms());
        if (rc == SQLITE_OK) rc = sqls_exec(st->put_page);
        sqlite3_clear_bindings(st->put_page);
    }

    if (rc == SQLITE_DONE) {
        /* The items name the page row just written by its id. */
        page_id = sqlite3_last_insert_rowid(st->db);
        rc = sqlite3_bind_int64(st->put_item, 1, page_id);
        for (i = 0; rc == SQLITE_OK && i < page->item_count; i++) {
            if ((int64_t)i == st->crash_after_items) _exit(137); /* test hook: see the top comment */
            rc = sqlite3_bind_int64(st->put_item, 2, (sqlite3_int64)i);
            if (rc == SQLITE_OK) rc = sqls_bind_bytes(st->put_item, 3, page->items[i]);
            if (rc == SQLITE_OK) rc = sqls_exec(st->put_item);
            if (rc == SQLITE_DONE) rc = SQLITE_OK;
        }
        sqlite3_clear_bindings(st->put_item);
        if (rc == SQLITE_OK && (int64_t)page->item_count == st->crash_after_items) _exit(137);
        if (rc == SQLITE_OK && st->max_pages > 0) rc = sqls_evict(st, page_id);
        if (rc == SQLITE_OK) rc = sqls_exec(st->commit);
    }
    if (rc != SQLITE_DONE) {
        char why[400];
        snprintf(why, sizeof why, "the write failed: %.300s", sqlite3_errmsg(st->db));
        sqls_log(st, PAGING_LOG_ERROR, "write: page not stored");
        sqls_abort(st);
        /* One transaction: failed, it replaced nothing. */
        if (pstore_is_hard_refresh(req)) pstore_say_not_replaced(st->host, "sqlite-store", why);
    } else {
        st->said_failing = 0;
        if (st->locked_out) {
            st->locked_out = 0;
            sqlite3_busy_timeout(st->db, st->busy_ms);
            st->host->log(st->host, PAGING_LOG_INFO, "sqlite-store: the write lock is free again: pages are stored again");
        }
    }
}

static void sqls_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    sqls_state *st = (sqls_state *)self;
    const paging_request_t *req = page->request;

    if (req == NULL || (page->item_count > 0 && page->items == NULL)) {
        st->host->log(st->host, PAGING_LOG_ERROR, "sqlite-store: handle: malformed page; not stored");
        return;
    }
    pthread_mutex_lock(&st->db_lock);
    sqls_store_page(st, page);
    pthread_mutex_unlock(&st->db_lock);
}

/* ---- extensions ------------------------------------------------------------------------ */

/* paging.health/1: is the file opened still the store's, and can it be written now? */
static paging_status_t sqls_health(void *self)
{
    sqls_state *st = (sqls_state *)self;
    char msg[1200];
    struct stat now;
    int rc;
    pthread_mutex_lock(&st->db_lock);
    /* Removed or replaced since it was opened (an rm, a restore over it): this process would read
     * and write the old file, which other processes no longer see, and say it was well. */
    if (stat(sqlite3_db_filename(st->db, "main"), &now) != 0 || now.st_dev != st->opened.st_dev || now.st_ino != st->opened.st_ino) {
        snprintf(msg, sizeof msg, "sqlite-store: the store file '%.1000s' was removed or replaced since it was opened: this "
                 "process reads and writes the old one, which other processes do not see (restart it)", sqlite3_db_filename(st->db, "main"));
        pthread_mutex_unlock(&st->db_lock);
        st->host->log(st->host, PAGING_LOG_ERROR, msg);
        return PAGING_ERR_INTERNAL;
    }
    rc = sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
    if (rc == SQLITE_OK) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    else snprintf(msg, sizeof msg, "the store cannot be written: %.500s", sqlite3_errmsg(st->db));
    pthread_mutex_unlock(&st->db_lock);
    if (rc == SQLITE_OK) return PAGING_OK;
    st->host->log(st->host, PAGING_LOG_ERROR, msg);
    return rc == SQLITE_BUSY || rc == SQLITE_LOCKED ? PAGING_ERR_TRANSIENT : PAGING_ERR_INTERNAL;
}

static const paging_ext_health_t sqls_health_ext = { sqls_health };
static const paging_ext_async_intercept_t sqls_async_ext = { sqls_cancel };

static const void *sqls_get_extension(paging_interceptor_t *self, const char *id)
{
    (void)self;
    if (strcmp(id, PAGING_EXT_HEALTH) == 0) return &sqls_health_ext;
    return strcmp(id, PAGING_EXT_ASYNC_INTERCEPT) == 0 ? &sqls_async_ext : NULL;
}

/* ---- create / destroy ------------------------------------------------------------------ */

static void sqls_destroy(paging_interceptor_t *self)
{
    sqls_state *st = (sqls_state *)self;
    sqlite3_stmt **stmts[14];
    size_t i;
    pthread_mutex_lock(&st->queue_lock);
    st->stopping = 1;
    pthread_cond_signal(&st->queue_wake);
    pthread_mutex_unlock(&st->queue_lock);
    if (st->reader_started) pthread_join(st->reader, NULL);
    while (st->queue_head != NULL) { /* not started: the host ends them */
        sqls_lookup *next = st->queue_head->next;
        free(st->queue_head);
        st->queue_head = next;
    }
    stmts[0] = &st->begin_read;  stmts[1] = &st->begin_write; stmts[2] = &st->commit;
    stmts[3] = &st->rollback;    stmts[4] = &st->get_page;    stmts[5] = &st->get_items;
    stmts[6] = &st->put_page;    stmts[7] = &st->del_items;   stmts[8] = &st->put_item;
    stmts[9] = &st->clear_pages; stmts[10] = &st->clear_items;
    stmts[11] = &st->count_pages; stmts[12] = &st->evict_items; stmts[13] = &st->evict_pages;
    for (i = 0; i < sizeof stmts / sizeof stmts[0]; i++) {
        sqlite3_finalize(*stmts[i]);
        *stmts[i] = NULL;
    }
    if (st->db != NULL && !sqlite3_get_autocommit(st->db)) sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_close(st->db);
    free(st->spans);
    free(st->views);
    free(st->buf);
    free(st->ns);
    pthread_cond_destroy(&st->queue_wake);
    pthread_mutex_destroy(&st->queue_lock);
    pthread_mutex_destroy(&st->db_lock);
    free(st);
}

/* Fails create naming the path and SQLite's error (`error` with its result `code`, or the
 * connection's last one), and frees `st`: TRANSIENT when another process holds the file locked
 * past busy_timeout_ms, or the disk is full or fails (a file size limit: EFBIG), none the
 * config's fault (a full disk was "invalid config", exit 2), else INVALID_CONFIG. */
static paging_interceptor_t *sqls_fail_db_with(sqls_state *st, const paging_config_t *config,
                                               const char *path, const char *what, const char *error, int code)
{
    char msg[1600], folder[1100];
    const char *slash = strrchr(path, '/');
    if (error == NULL) code = st->db ? sqlite3_errcode(st->db) : SQLITE_NOMEM;
    /* SQLite writes its journal files beside the database: a writable file in a folder this
     * process cannot write reads as "attempt to write a readonly database". */
    snprintf(folder, sizeof folder, "%.*s", slash == NULL ? 1 : slash == path ? 1 : (int)(slash - path), slash == NULL ? "." : path);
    if ((code & 0xff) == SQLITE_READONLY || (code & 0xff) == SQLITE_CANTOPEN) {
        struct stat info;
        int folder_error = stat(folder, &info) != 0 ? errno : !S_ISDIR(info.st_mode) ? ENOTDIR : access(folder, W_OK) == 0 ? 0 : errno;
        /* A missing folder is said so: "not writable" sent users to look at permissions. */
        if (folder_error == ENOENT || folder_error == ENOTDIR)
            error = folder_error == ENOENT ? "its folder does not exist" : "its folder's path names a file that is not a folder";
        else if (folder_error != 0 && (access(path, W_OK) == 0 || errno == ENOENT))
            error = "its folder is not writable by this process (SQLite keeps its journal files beside the database)";
    }
    code &= 0xff;
    snprintf(msg, sizeof msg, "sqlite-store: config `path` '%.1000s': %.200s: %.300s%s", path, what,
             error != NULL ? error : st->db ? sqlite3_errmsg(st->db) : "out of memory",
             /* The store is a cache: a damaged file is one to remove (pages load from the source). */
             code == SQLITE_CORRUPT || code == SQLITE_NOTADB
                 ? " (if this is the store's own file, damaged, remove it: the pages are loaded from the source again)" : "");
    st->host->config_fail(config, code == SQLITE_BUSY || code == SQLITE_LOCKED || code == SQLITE_FULL || code == SQLITE_IOERR
                          ? PAGING_ERR_TRANSIENT : PAGING_ERR_INVALID_CONFIG, msg);
    sqls_destroy(&st->interceptor);
    return NULL;
}

static paging_interceptor_t *sqls_fail_db(sqls_state *st, const paging_config_t *config,
                                          const char *path, const char *what)
{
    return sqls_fail_db_with(st, config, path, what, NULL, SQLITE_OK);
}

static int sqls_prepare(sqls_state *st, sqlite3_stmt **stmt, const char *sql)
{
    return sqlite3_prepare_v2(st->db, sql, -1, stmt, NULL) == SQLITE_OK;
}

/* Upgrades a version 1 file, inside the caller's write transaction: its pages were stored
 * under (key, page_size) without the params they were loaded with, so none can be matched to
 * a request's identity; they are dropped, and the count logged. Returns 1 on success. */
static int sqls_upgrade_from_v1(sqls_state *st, const char *path)
{
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 pages = 0;
    char msg[1400];
    if (sqlite3_prepare_v2(st->db, "SELECT count(*) FROM pages", -1, &stmt, NULL) != SQLITE_OK) return 0;
    if (sqlite3_step(stmt) == SQLITE_ROW) pages = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    if (sqlite3_exec(st->db, "DROP TABLE IF EXISTS items; DROP TABLE IF EXISTS pages;"
                     " UPDATE meta SET value = 3 WHERE name = 'schema_version';", NULL, NULL, NULL) != SQLITE_OK)
        return 0;
    snprintf(msg, sizeof msg,
             "sqlite-store: '%.1000s' upgraded from schema version 1 to 3: its %lld stored pages were "
             "dropped (version 1 did not record the params each page was loaded with)", path, (long long)pages);
    st->host->log(st->host, PAGING_LOG_WARNING, msg);
    return 1;
}

/* The most items a version 2 file may hold for its pages to be copied on upgrade: a larger store
 * (this format's repeated identities made them large) could not be copied within create's time,
 * nor in the space left; its pages are dropped instead, as a cache's may be. */
#define SQLS_UPGRADE_MAX_ITEMS 1000000

/* Upgrades a version 2 file, inside the caller's write transaction: its pages are copied into
 * version 3's tables, each item now naming its page by id (dropped, with a WARNING, beyond
 * SQLS_UPGRADE_MAX_ITEMS). Returns 1 on success. */
static int sqls_upgrade_from_v2(sqls_state *st, const char *path)
{
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 pages = 0, items = 0;
    int copy, ok;
    char msg[1400];
    if (sqlite3_prepare_v2(st->db, "SELECT (SELECT count(*) FROM pages), (SELECT count(*) FROM items)", -1, &stmt, NULL) != SQLITE_OK)
        return 0;
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        pages = sqlite3_column_int64(stmt, 0);
        items = sqlite3_column_int64(stmt, 1);
    }
    sqlite3_finalize(stmt);
    copy = items <= SQLS_UPGRADE_MAX_ITEMS;
    ok = sqlite3_exec(st->db,
                      copy ? SQLS_SCHEMA_V3("pages_v3", "items_v3")
                             "INSERT INTO pages_v3 (namespace, identity, prev_key, next_key, flags, item_count, stored_at)"
                             " SELECT namespace, identity, prev_key, next_key, flags, item_count, stored_at FROM pages;"
                             "INSERT INTO items_v3 (page, position, item)"
                             " SELECT p.id, i.position, i.item FROM items i JOIN pages_v3 p"
                             " ON p.namespace = i.namespace AND p.identity = i.identity;"
                             "DROP TABLE items; DROP TABLE pages;"
                             "ALTER TABLE pages_v3 RENAME TO pages; ALTER TABLE items_v3 RENAME TO items;"
                             "UPDATE meta SET value = 3 WHERE name = 'schema_version';"
                           : "DROP TABLE items; DROP TABLE pages;"
                             "UPDATE meta SET value = 3 WHERE name = 'schema_version';",
                      NULL, NULL, NULL) == SQLITE_OK;
    if (!ok) return 0;
    if (copy)
        snprintf(msg, sizeof msg, "sqlite-store: '%.1000s' upgraded from schema version 2 to 3: its %lld stored pages were kept "
                 "(processes of an older pager that share the file can no longer use it)", path, (long long)pages);
    else
        snprintf(msg, sizeof msg, "sqlite-store: '%.1000s' upgraded from schema version 2 to 3: its %lld stored pages (%lld items, "
                 "more than %d to copy) were dropped; they are loaded from the source again", path, (long long)pages,
                 (long long)items, SQLS_UPGRADE_MAX_ITEMS);
    st->host->log(st->host, copy ? PAGING_LOG_INFO : PAGING_LOG_WARNING, msg);
    return 1;
}

/* The store's columns, in order, of each of its tables, in schema versions 3 and 2. */
#define SQLS_PAGES_COLUMNS "id,namespace,identity,prev_key,next_key,flags,item_count,stored_at"
#define SQLS_ITEMS_COLUMNS "page,position,item"
#define SQLS_PAGES_COLUMNS_V2 "namespace,identity,prev_key,next_key,flags,item_count,stored_at"
#define SQLS_ITEMS_COLUMNS_V2 "namespace,identity,position,item"

/* Whether `table` is absent or has exactly `columns` (names in order, comma-separated). */
static int sqls_has_columns(sqls_state *st, const char *table, const char *columns)
{
    sqlite3_stmt *stmt = NULL;
    int ok = 0;
    if (sqlite3_prepare_v2(st->db, "SELECT count(*), coalesce(group_concat(name, ','), '') FROM"
                           " (SELECT name FROM pragma_table_info(?1) ORDER BY cid)", -1, &stmt, NULL) != SQLITE_OK)
        return 0;
    sqlite3_bind_text(stmt, 1, table, -1, SQLITE_STATIC);
    if (sqlite3_step(stmt) == SQLITE_ROW) {
        const char *found = (const char *)sqlite3_column_text(stmt, 1);
        ok = sqlite3_column_int64(stmt, 0) == 0 || (found != NULL && strcmp(found, columns) == 0);
    }
    sqlite3_finalize(stmt);
    return ok;
}

/* The schema_version row's value, or -1. */
static sqlite3_int64 sqls_schema_version(sqls_state *st)
{
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 version = -1;
    if (sqlite3_prepare_v2(st->db, "SELECT value FROM meta WHERE name = 'schema_version'", -1, &stmt, NULL) != SQLITE_OK)
        return -1;
    if (sqlite3_step(stmt) == SQLITE_ROW) version = sqlite3_column_int64(stmt, 0);
    sqlite3_finalize(stmt);
    return version;
}

/* Refuses a database another application owns before anything is written to it (not even the
 * journal mode): one holding schema objects (tables, views, indexes, triggers) without the
 * store's `meta` table and its schema_version row. An empty database or a new file passes. It
 * reads in one read transaction. Returns 1, or 0 after config_fail (st freed). */
static int sqls_check_is_store(sqls_state *st, const paging_config_t *config, const char *path)
{
    sqlite3_stmt *stmt = NULL;
    char found[400], msg[1600];
    size_t used = 0;
    long objects = 0;
    int has_meta = 0, is_store = 0, foreign = 0, rc;
    const char *columns_unlike = NULL;

    found[0] = '\0';
    if (sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        sqls_fail_db(st, config, path, "cannot begin a read transaction");
        return 0;
    }
    rc = sqlite3_prepare_v2(st->db, "SELECT type, name FROM sqlite_master WHERE name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
                            " ORDER BY type <> 'table', name", -1, &stmt, NULL);
    while (rc == SQLITE_OK && (rc = sqlite3_step(stmt)) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(stmt, 0);
        const char *name = (const char *)sqlite3_column_text(stmt, 1);
        int n;
        if (type == NULL || name == NULL) continue;
        if (strcmp(type, "table") == 0 && strcmp(name, "meta") == 0) has_meta = 1;
        if (strcmp(type, "table") != 0 || (strcmp(name, "meta") != 0 && strcmp(name, "pages") != 0 && strcmp(name, "items") != 0))
            foreign = 1;
        if (objects++ < 5 && used < sizeof found) {
            n = snprintf(found + used, sizeof found - used, "%s%.10s '%.60s'", objects > 1 ? ", " : "", type, name);
            if (n > 0) used += (size_t)n;
        }
        rc = SQLITE_OK;
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_DONE) {
        /* ROLLBACK resets the connection's error: keep SQLite's word first ("file is not a database"). */
        char error[300];
        int code = sqlite3_errcode(st->db) & 0xFF; /* extended codes (SQLITE_CORRUPT_INDEX...) */
        snprintf(error, sizeof error, "%s", sqlite3_errmsg(st->db));
        sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
        sqls_fail_db_with(st, config, path, "cannot read the database's tables", error, code);
        return 0;
    }
    /* A `meta` table of another application may lack the columns: that is not a store either. */
    if (has_meta && sqlite3_prepare_v2(st->db, "SELECT 1 FROM meta WHERE name = 'schema_version'", -1, &stmt,
                                       NULL) == SQLITE_OK) {
        is_store = sqlite3_step(stmt) == SQLITE_ROW;
        sqlite3_finalize(stmt);
    }
    /* Nor is a database with a schema_version row of its own and more besides: a store holds
     * its three tables only, with the store's columns (a version 1 file's pages and items are
     * dropped on upgrade: another application's tables of those names were). */
    if (is_store && foreign) columns_unlike = "objects a store does not hold";
    else if (is_store && !sqls_has_columns(st, "meta", "name,value")) columns_unlike = "a `meta` table whose columns are not the store's";
    else if (is_store && sqls_schema_version(st) == 2
             && (!sqls_has_columns(st, "pages", SQLS_PAGES_COLUMNS_V2) || !sqls_has_columns(st, "items", SQLS_ITEMS_COLUMNS_V2)))
        columns_unlike = "`pages` or `items` tables whose columns are not the store's";
    else if (is_store && sqls_schema_version(st) == SQLS_SCHEMA_VERSION
             && (!sqls_has_columns(st, "pages", SQLS_PAGES_COLUMNS) || !sqls_has_columns(st, "items", SQLS_ITEMS_COLUMNS)))
        columns_unlike = "`pages` or `items` tables whose columns are not the store's";
    sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
    if (objects == 0 || (is_store && columns_unlike == NULL)) return 1;
    /* The store's own tables and nothing else, its meta row lost: a damaged store, most likely
     * (it was said to be another application's). */
    snprintf(msg, sizeof msg,
             "sqlite-store: config `path` '%.1000s' is not a sqlite-store database: it holds %ld schema object%s "
             "(%s%s) and %s; it was left unchanged%s", path, objects, objects == 1 ? "" : "s", found,
             objects > 5 ? ", ..." : "",
             columns_unlike != NULL ? columns_unlike : has_meta ? "a `meta` table without a schema_version row" : "no `meta` table",
             !foreign && has_meta && !is_store && objects == 3
                 ? " (the store's own table names: if this is the store's own file, damaged, remove it: the pages are loaded from the source again)"
                 : "");
    st->host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
    sqls_destroy(&st->interceptor);
    return 0;
}

/* Creates, upgrades or checks the schema. Returns 1, or 0 after config_fail (st freed). */
static int sqls_open_schema(sqls_state *st, const paging_config_t *config, const char *path)
{
    sqlite3_stmt *stmt = NULL;
    sqlite3_int64 version = 0;
    int rc;

    if (sqlite3_exec(st->db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK) {
        sqls_fail_db(st, config, path, "cannot lock the database");
        return 0;
    }
    if (sqlite3_exec(st->db, sqls_schema_meta, NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_prepare_v2(st->db, "SELECT value FROM meta WHERE name = 'schema_version'", -1,
                              &stmt, NULL) != SQLITE_OK) {
        sqls_fail_db(st, config, path, "cannot create the schema");
        return 0;
    }
    rc = sqlite3_step(stmt);
    /* A value that is no integer ('three') read as version 0: refused below, said as it is. */
    char odd[80] = "";
    if (rc == SQLITE_ROW && sqlite3_column_type(stmt, 0) != SQLITE_INTEGER) {
        const unsigned char *text = sqlite3_column_text(stmt, 0);
        snprintf(odd, sizeof odd, "'%.60s'", text != NULL ? (const char *)text : "NULL");
    } else if (rc == SQLITE_ROW) {
        version = sqlite3_column_int64(stmt, 0);
    }
    sqlite3_finalize(stmt);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        sqls_fail_db(st, config, path, "cannot read the schema version");
        return 0;
    }
    if (rc == SQLITE_ROW && version == 1 && !sqls_upgrade_from_v1(st, path)) {
        sqls_fail_db(st, config, path, "cannot upgrade the schema from version 1");
        return 0;
    }
    if (rc == SQLITE_ROW && version == 2 && !sqls_upgrade_from_v2(st, path)) {
        sqls_fail_db(st, config, path, "cannot upgrade the schema from version 2");
        return 0;
    }
    if (rc == SQLITE_ROW && version != 1 && version != 2 && version != SQLS_SCHEMA_VERSION) {
        char msg[1400], found[120];
        if (odd[0] != '\0') snprintf(found, sizeof found, "the file's schema_version is %s, not a version number;", odd);
        else snprintf(found, sizeof found, "the file has schema version %lld,", (long long)version);
        snprintf(msg, sizeof msg, "sqlite-store: config `path` '%.1000s': %s this plugin supports version %d%s", path, found,
                 SQLS_SCHEMA_VERSION, version > SQLS_SCHEMA_VERSION ? " (written by a newer plugin)" : "");
        st->host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
        sqls_destroy(&st->interceptor);
        return 0;
    }
    if ((rc == SQLITE_DONE
         && sqlite3_exec(st->db, "INSERT INTO meta (name, value) VALUES ('schema_version', 3)",
                         NULL, NULL, NULL) != SQLITE_OK)
        || sqlite3_exec(st->db, SQLS_SCHEMA_V3("pages", "items"), NULL, NULL, NULL) != SQLITE_OK
        || sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
        sqls_fail_db(st, config, path, "cannot create the schema");
        return 0;
    }
    return 1;
}

/* Reads `policy` and `max_age_seconds`. Returns 1, or 0 after config_fail (st freed). */
static int sqls_configure_freshness(sqls_state *st, const paging_config_t *config)
{
    if (pstore_read_freshness(st->host, config, "sqlite-store", &st->freshness)) return 1;
    sqls_destroy(&st->interceptor);
    return 0;
}

/* Whether the config has only keys this plugin reads; otherwise fails create naming the first
 * other one. SQLite's own JSON reader lists the keys. */
static int sqls_known_keys(const paging_host_t *host, const paging_config_t *config)
{
    static const char *const sql =
        "SELECT key FROM json_each(?1) WHERE key NOT IN"
        " ('path', 'namespace', 'policy', 'max_age_seconds', 'busy_timeout_ms', 'max_pages') LIMIT 1";
    sqlite3 *db = NULL;
    sqlite3_stmt *stmt = NULL;
    char msg[400];
    int ok = 1;
    if (sqlite3_open_v2(":memory:", &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK
        && sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) == SQLITE_OK
        && sqlite3_bind_text(stmt, 1, host->config_json(config), -1, SQLITE_STATIC) == SQLITE_OK
        && sqlite3_step(stmt) == SQLITE_ROW) {
        snprintf(msg, sizeof msg, "sqlite-store: config `%.200s`: unknown key; expected path, namespace, policy, "
                 "max_age_seconds, busy_timeout_ms or max_pages", (const char *)sqlite3_column_text(stmt, 0));
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
        ok = 0;
    }
    sqlite3_finalize(stmt);
    sqlite3_close(db);
    return ok;
}

static paging_interceptor_t *sqls_create_interceptor(const char *plugin_id, const paging_host_t *host,
                                                     const paging_config_t *config)
{
    char msg[1400];
    struct stat info;
    const char *path, *ns, *crash_after;
    sqls_state *st;
    int64_t busy, max_pages;
    sqlite3_stmt *stmt = NULL;
    int rc;

    if (plugin_id == NULL || strcmp(plugin_id, "sqlite-store") != 0) {
        host->config_fail(config, PAGING_ERR_NOT_FOUND, "sqlite-store: unknown plugin id");
        return NULL;
    }
    if (!sqls_known_keys(host, config)) return NULL;
    path = host->config_string(config, "path");
    if (path == NULL) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG,
                          "sqlite-store: config `path` (string) is required: the database file");
        return NULL;
    }
    if (path[0] == '\0') {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "sqlite-store: config `path` must not be empty: the database file");
        return NULL;
    }
    /* SQLite would open a device or a FIFO and write a journal beside it (/dev/zero-journal). */
    if (stat(path, &info) == 0 && !S_ISREG(info.st_mode)) {
        snprintf(msg, sizeof msg, "sqlite-store: config `path` '%.1000s' is %s, not a database file", path,
                 S_ISDIR(info.st_mode) ? "a folder" : S_ISFIFO(info.st_mode) ? "a FIFO" : S_ISSOCK(info.st_mode) ? "a socket" : "a device");
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, msg);
        return NULL;
    }
    ns = host->config_string(config, "namespace");
    if (ns == NULL && host->config_type(config, "namespace") != PAGING_CONFIG_ABSENT) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "sqlite-store: config `namespace` must be a string");
        return NULL;
    }
    if (ns == NULL) ns = "default";
    /* As redis-cache and the incremental state bound theirs; any characters, as before. */
    if (ns[0] == '\0' || strlen(ns) > 128) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG, "sqlite-store: config `namespace` must be 1-128 bytes");
        return NULL;
    }
    busy = host->config_int(config, "busy_timeout_ms", 5000);
    if ((host->config_type(config, "busy_timeout_ms") != PAGING_CONFIG_ABSENT
         && host->config_type(config, "busy_timeout_ms") != PAGING_CONFIG_INT)
        || busy < 0 || busy > 0x7fffffff) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG,
                          "sqlite-store: config `busy_timeout_ms` must be an integer in 0...2147483647");
        return NULL;
    }
    max_pages = host->config_int(config, "max_pages", 0);
    if (host->config_type(config, "max_pages") != PAGING_CONFIG_ABSENT
        && (host->config_type(config, "max_pages") != PAGING_CONFIG_INT || max_pages < 1 || max_pages > 0x7fffffff)) {
        host->config_fail(config, PAGING_ERR_INVALID_CONFIG,
                          "sqlite-store: config `max_pages` must be an integer in 1...2147483647 (the most pages the namespace keeps)");
        return NULL;
    }
    st = (sqls_state *)calloc(1, sizeof *st);
    if (st != NULL) st->ns = (char *)malloc(strlen(ns) + 1);
    if (st == NULL || st->ns == NULL) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "sqlite-store: out of memory");
        free(st);
        return NULL;
    }
    memcpy(st->ns, ns, strlen(ns) + 1);
    pthread_mutex_init(&st->db_lock, NULL);
    pthread_mutex_init(&st->queue_lock, NULL);
    pthread_cond_init(&st->queue_wake, NULL);
    st->host = host;
    st->async = (const paging_ext_async_intercept_host_t *)host->get_extension(host, PAGING_EXT_ASYNC_INTERCEPT);
    st->metrics = (const paging_ext_metrics_host_t *)host->get_extension(host, PAGING_EXT_METRICS);
    crash_after = getenv("PAGING_SQLITE_STORE_TEST_CRASH_AFTER_ITEMS");
    st->crash_after_items = crash_after && *crash_after ? strtoll(crash_after, NULL, 10) : -1;
    st->max_pages = max_pages;
    if (!sqls_configure_freshness(st, config)) return NULL;

    rc = sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) return sqls_fail_db(st, config, path, "cannot open the database");
    /* SQLite opens a file it cannot write read-only, without a word: every page would then
     * fail to be stored. */
    if (sqlite3_db_readonly(st->db, "main") == 1)
        return sqls_fail_db_with(st, config, path, "cannot write to it", "the file is read-only to this process", SQLITE_READONLY);
    if (stat(sqlite3_db_filename(st->db, "main"), &st->opened) != 0)
        return sqls_fail_db_with(st, config, path, "cannot find the file it opened", strerror(errno), SQLITE_CANTOPEN);
    sqlite3_extended_result_codes(st->db, 1);
    st->busy_ms = (int)busy;
    sqlite3_busy_timeout(st->db, st->busy_ms);
    if (!sqls_check_is_store(st, config, path)) return NULL;

    /* journal_mode=WAL answers with the mode in effect; it also fails on a non-database file.
     * Switching a new file to WAL returns SQLITE_BUSY at once (without the busy handler) while
     * another process does the same, so it is retried for up to busy_timeout_ms. */
    rc = sqlite3_prepare_v2(st->db, "PRAGMA journal_mode=WAL", -1, &stmt, NULL);
    if (rc == SQLITE_OK) {
        int64_t waited = 0;
        while ((rc = sqlite3_step(stmt)) != SQLITE_ROW && (rc & 0xff) == SQLITE_BUSY && waited < busy) {
            sqlite3_reset(stmt);
            waited += sqlite3_sleep(10);
        }
    }
    if (rc != SQLITE_ROW) {
        sqlite3_finalize(stmt);
        return sqls_fail_db(st, config, path, "cannot set journal_mode=WAL");
    }
    if (strcmp((const char *)sqlite3_column_text(stmt, 0), "wal") != 0) {
        snprintf(msg, sizeof msg, "sqlite-store: '%.1000s': journal mode is '%.50s', not 'wal'; "
                 "other processes may be blocked while it is written", path,
                 (const char *)sqlite3_column_text(stmt, 0));
        host->log(host, PAGING_LOG_WARNING, msg);
    }
    sqlite3_finalize(stmt);
    if (sqlite3_exec(st->db, "PRAGMA synchronous=NORMAL", NULL, NULL, NULL) != SQLITE_OK)
        return sqls_fail_db(st, config, path, "cannot set synchronous=NORMAL");
    if (!sqls_open_schema(st, config, path)) return NULL;

    if (!sqls_prepare(st, &st->begin_read, "BEGIN")
        || !sqls_prepare(st, &st->begin_write, "BEGIN IMMEDIATE")
        || !sqls_prepare(st, &st->commit, "COMMIT")
        || !sqls_prepare(st, &st->rollback, "ROLLBACK")
        || !sqls_prepare(st, &st->get_page,
                         "SELECT prev_key, next_key, flags, item_count, stored_at, id FROM pages"
                         " WHERE namespace = ?1 AND identity = ?2")
        || !sqls_prepare(st, &st->get_items, "SELECT item FROM items WHERE page = ?1 ORDER BY position")
        || !sqls_prepare(st, &st->put_page,
                         "INSERT OR REPLACE INTO pages (namespace, identity, prev_key, next_key,"
                         " flags, item_count, stored_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")
        || !sqls_prepare(st, &st->del_items,
                         "DELETE FROM items WHERE page = (SELECT id FROM pages WHERE namespace = ?1 AND identity = ?2)")
        || !sqls_prepare(st, &st->put_item, "INSERT INTO items (page, position, item) VALUES (?1, ?2, ?3)")
        || !sqls_prepare(st, &st->clear_pages, "DELETE FROM pages WHERE namespace = ?1")
        || !sqls_prepare(st, &st->clear_items, "DELETE FROM items WHERE page IN (SELECT id FROM pages WHERE namespace = ?1)")
        || !sqls_prepare(st, &st->count_pages, "SELECT count(*) FROM pages WHERE namespace = ?1")
        || !sqls_prepare(st, &st->evict_items,
                         "DELETE FROM items WHERE page IN (SELECT id FROM pages WHERE namespace = ?1 AND id <> ?3"
                         " ORDER BY stored_at, id LIMIT ?2)")
        || !sqls_prepare(st, &st->evict_pages,
                         "DELETE FROM pages WHERE id IN (SELECT id FROM pages WHERE namespace = ?1 AND id <> ?3"
                         " ORDER BY stored_at, id LIMIT ?2)"))
        return sqls_fail_db(st, config, path, "cannot prepare statements");

    st->interceptor.plugin_data = st;
    st->interceptor.intercept = sqls_intercept;
    st->interceptor.handle = sqls_handle;
    st->interceptor.destroy = sqls_destroy;
    st->interceptor.struct_size = (uint32_t)sizeof st->interceptor;
    st->interceptor.get_extension = sqls_get_extension;
    snprintf(msg, sizeof msg, "sqlite-store: opened '%.1000s' (namespace '%.200s')", path, st->ns);
    host->log(host, PAGING_LOG_DEBUG, msg);
    return &st->interceptor;
}

/* ---- entry ----------------------------------------------------------------------------- */

static uint32_t sqls_plugin_count(void) { return 1; }

static const paging_plugin_descriptor_t *sqls_descriptor_at(uint32_t index)
{
    return index == 0 ? &sqls_descriptor : NULL;
}

static const paging_plugin_entry_t sqls_entry = {
    PAGING_ENTRY_HEAD,
    sqls_plugin_count,
    sqls_descriptor_at,
    NULL,
    sqls_create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void)
{
    return &sqls_entry;
}
