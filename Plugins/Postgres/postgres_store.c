/*
 * postgres_store.c - a SwiftPaging interceptor plugin keeping pages in PostgreSQL: the multi-host
 * twin of sqlite-store. Every host pointing at the same database (and namespace) shares the pages
 * any of them loaded; several may write the same namespace at once.
 *
 * Plugin id: "postgres-store" (kind INTERCEPTOR; not THREAD_SAFE: the host serializes calls on an
 * instance, and a lock inside keeps them apart from the plugin's thread). Links against the system
 * libpq. Uses paging.async-intercept/1 (reads on the plugin's one thread, holding no host thread)
 * and paging.metrics/1 (counters "hits", "stale_hits", "misses", "unavailable"); offers
 * paging.health/1.
 *
 * Config keys:
 *   conninfo           string, required: a libpq connection string ("host=... port=... dbname=...
 *                      user=...") or URI ("postgresql://user@host:port/db"); ${NAME} and
 *                      ${NAME:-default} are read from the environment, and libpq's own variables
 *                      (PGHOST, PGPORT, PGPASSWORD, PGPASSFILE...) fill in what it leaves out. Keep
 *                      the password out of the manifest (PGPASSWORD or a passfile): the plugin
 *                      never logs the string nor the password, only host, port and database.
 *   namespace          string of 1-128 bytes (default "default"): pages are stored and looked up under it.
 *   policy, max_age_seconds   as sqlite-store.
 *   statement_timeout_ms  integer 1...3600000 (default 5000): each statement's limit (SET
 *                      statement_timeout); connect_timeout_ms 1000...600000 (default 5000).
 *   retry_interval_ms  integer 0...600000 (default 1000): while the server is unreachable, how
 *                      often a connection is tried again (loads in between go straight on).
 *
 * Behaviour: as sqlite-store. A lookup reads the page's row (one statement: one snapshot) and,
 * when it is whole, answers by the policy; a hard refresh proceeds, and its page replaces the
 * namespace's rows in the statement that writes it (a failed load leaves them); handle() writes
 * the page with one INSERT ... ON CONFLICT DO UPDATE
 * (one transaction a page): concurrent writers of a namespace lose nothing, and a page is
 * replaced whole or not at all, never half. Rows are read in binary and checked (lengths, the
 * array's shape, the item count); a row that does not check out is a miss with a warning.
 * A lost connection (server restarted, backend terminated) is re-established at once and the
 * statement run again, once; while the server is unreachable, loads proceed, handle() stores
 * nothing, and a warning goes out at most once a minute. The store is a cache, never a failure.
 *
 * Schema, version 1 (created in the connection's search_path, under an advisory lock so that
 * hosts starting together do not race; a `paging_pages` table without the `paging_meta` row is
 * another application's and is refused, as is a newer version):
 *   CREATE TABLE paging_meta (name text PRIMARY KEY, value bigint NOT NULL);  -- ('schema_version', 1)
 *   CREATE TABLE paging_pages (namespace text NOT NULL, identity bytea NOT NULL,  -- see PG_IDENTITY_OF_2
 *       prev_key bytea, next_key bytea, flags integer NOT NULL, item_count integer NOT NULL,
 *       stored_at bigint NOT NULL,  -- Unix time in milliseconds
 *       items bytea[] NOT NULL,     -- one JSON value each, bytes as given
 *       PRIMARY KEY (namespace, identity));
 *
 * build (third-party path): cc -std=c99 -Wall -Wextra -pedantic -Werror -shared -fPIC -pthread \
 *     -I Sources/CPaging/include -I Plugins/StoreSupport/include Plugins/Postgres/postgres_store.c \
 *     Plugins/StoreSupport/paging_store.c $(pkg-config --cflags --libs libpq) -o libpostgres-store.so
 */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <postgresql/libpq-fe.h>

#include "paging/paging.h"
#include "paging_store.h"

#define PG_SCHEMA_VERSION 1
#define PG_OID_INT4 23
#define PG_OID_INT8 20
#define PG_OID_TEXT 25
#define PG_OID_BYTEA 17
#define PG_OID_BYTEA_ARRAY 1001

typedef struct pg_state {
    paging_interceptor_t interceptor; /* first member: `self` points here */
    const paging_host_t *host;
    const paging_ext_async_intercept_host_t *async;
    const paging_ext_metrics_host_t *metrics;
    pthread_mutex_t conn_lock;      /* the connection, for the host's calls and the plugin's thread */
    PGconn *conn;                   /* NULL: not connected */
    int64_t next_attempt_ms;
    int64_t down_until_ms;          /* read without the lock (__atomic) */
    int was_down;
    int schema;                     /* 0 not set up yet, 1 ready, -1 refused */
    char schema_refused[500];       /* why it was refused */
    char *conninfo;                 /* secret: never logged; zeroed at destroy */
    char connect_timeout[24];
    char target[300];               /* host:port/dbname, for messages */
    char *ns;
    int64_t statement_timeout_ms, retry_ms;
    pstore_freshness fresh;
    pstore_queue queue;
    /* Unavailable; a statement refused; a write refused (apart: a read's warning held back
     * every write's for a minute, and pages went unstored without a word). */
    pstore_warner warn_down, warn_bad, warn_write;
} pg_state;

static const paging_plugin_descriptor_t pg_descriptor = {
    PAGING_DESCRIPTOR_HEAD,
    "postgres-store",
    "PostgreSQL page store",
    "1.0.0",
    "Stores loaded pages in PostgreSQL, shared by every host using the database; serves whole pages from it.",
    PAGING_PLUGIN_INTERCEPTOR,
    0, NULL
};

/* The identity column's value for the identity $2: itself, or, when it is longer than a btree
 * index row may be (PostgreSQL refuses keys over 2704 bytes: a page of a long query was never
 * stored), "sha256:" and its SHA-256. An identity that itself starts with "sha256:" is hashed
 * too, so that no identity can pass for another's hash. */
#define PG_IDENTITY_OF_2 \
    "(CASE WHEN octet_length($2) > 2000 OR substring($2 FROM 1 FOR 7) = '\\x7368613235363a'::bytea" \
    " THEN '\\x7368613235363a'::bytea || sha256($2) ELSE $2 END)"

static const char pg_schema_sql[] =
    "CREATE TABLE IF NOT EXISTS paging_meta (name text PRIMARY KEY, value bigint NOT NULL);"
    "INSERT INTO paging_meta (name, value) VALUES ('schema_version', 1) ON CONFLICT (name) DO NOTHING;"
    "CREATE TABLE IF NOT EXISTS paging_pages (namespace text NOT NULL, identity bytea NOT NULL,"
    " prev_key bytea, next_key bytea, flags integer NOT NULL, item_count integer NOT NULL,"
    " stored_at bigint NOT NULL, items bytea[] NOT NULL, PRIMARY KEY (namespace, identity));";

/* libpq's message on one line, without its trailing newline. */
static void pg_message(const char *text, char *out, size_t len)
{
    size_t i;
    snprintf(out, len, "%s", text != NULL ? text : "");
    for (i = 0; out[i] != '\0'; i++)
        if (out[i] == '\n' || out[i] == '\r') out[i] = ' ';
    while (i > 0 && out[i - 1] == ' ') out[--i] = '\0';
}

/* ---- connection ------------------------------------------------------------------------ */

/* Marks the server unreachable for retry_interval_ms and warns (once a minute). [under conn_lock] */
static void pg_down(pg_state *st, const char *why)
{
    char msg[1000];
    int64_t until = pstore_now_ms() + st->retry_ms;
    if (st->conn != NULL) PQfinish(st->conn);
    st->conn = NULL;
    st->next_attempt_ms = until;
    __atomic_store_n(&st->down_until_ms, until, __ATOMIC_RELAXED);
    st->was_down = 1;
    snprintf(msg, sizeof msg, "postgres-store: PostgreSQL at %.300s is unavailable (%.400s); loads go on without it "
             "until it is back (this warning at most once a minute)", st->target, why);
    pstore_warn(st->host, &st->warn_down, msg);
}

/* The result of `sql` (with `n` parameters; without, it may hold several statements), waited for
 * at most `wait_ms`: statement_timeout is the server's to enforce, and a server (or proxy) that
 * stops answering held the plugin's thread, and destroy() with it, for ever. NULL when the time
 * ran out, with `why`; the connection is then shut (PQstatus says CONNECTION_BAD). */
static PGresult *pg_query(PGconn *conn, int64_t wait_ms, const char *sql, int n, const Oid *types, const char *const *values,
                          const int *lens, const int *formats, int binary_result, char *why, size_t why_len)
{
    PGresult *last = NULL, *r;
    int64_t deadline = pstore_now_ms() + wait_ms;
    int sent = n > 0 ? PQsendQueryParams(conn, sql, n, types, values, lens, formats, binary_result) : PQsendQuery(conn, sql);
    if (!sent) {
        pg_message(PQerrorMessage(conn), why, why_len);
        return NULL;
    }
    for (;;) {
        struct pollfd wait;
        int64_t left;
        int rc;
        while (!PQisBusy(conn)) {
            if ((r = PQgetResult(conn)) == NULL) return last;
            PQclear(last);
            last = r;
        }
        left = deadline - pstore_now_ms();
        if (left <= 0) break;
        wait.fd = PQsocket(conn);
        wait.events = POLLIN;
        wait.revents = 0;
        rc = poll(&wait, 1, (int)left);
        if (rc < 0 && errno == EINTR) continue;
        if (rc <= 0 || !PQconsumeInput(conn)) break;
    }
    PQclear(last);
    if (PQstatus(conn) != CONNECTION_BAD) {
        snprintf(why, why_len, "no answer within %lld ms", (long long)wait_ms);
        shutdown(PQsocket(conn), SHUT_RDWR);
        PQconsumeInput(conn);
    } else {
        pg_message(PQerrorMessage(conn), why, why_len);
    }
    return NULL;
}

/* Runs `sql` (no parameters) on the connection; returns 1 when it succeeded, else 0 with `why`. */
static int pg_simple(PGconn *conn, int64_t wait_ms, const char *sql, char *why, size_t why_len)
{
    PGresult *r = pg_query(conn, wait_ms, sql, 0, NULL, NULL, NULL, NULL, 0, why, why_len);
    ExecStatusType status = PQresultStatus(r);
    int ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
    if (!ok && r != NULL) pg_message(PQerrorMessage(conn), why, why_len);
    PQclear(r);
    return ok;
}

/* Creates or checks the schema, in one transaction under an advisory lock. Returns 1 ready, 0
 * failed (`why`), -1 refused (`why`: another application's table, a newer version). */
static int pg_setup_schema(PGconn *conn, int64_t wait_ms, char *why, size_t why_len)
{
    PGresult *r;
    int has_meta, has_pages, result = 1;
    long long version;
    if (!pg_simple(conn, wait_ms, "BEGIN", why, why_len)) return 0;
    if (!pg_simple(conn, wait_ms, "SELECT pg_advisory_xact_lock(7231960551148)", why, why_len)) goto fail;
    r = pg_query(conn, wait_ms, "SELECT to_regclass('paging_meta') IS NOT NULL, to_regclass('paging_pages') IS NOT NULL",
                 0, NULL, NULL, NULL, NULL, 0, why, why_len);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        if (r != NULL) pg_message(PQerrorMessage(conn), why, why_len);
        PQclear(r);
        goto fail;
    }
    has_meta = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
    has_pages = strcmp(PQgetvalue(r, 0, 1), "t") == 0;
    PQclear(r);
    if (has_pages && !has_meta) {
        snprintf(why, why_len, "the database has a table paging_pages but no paging_meta: it belongs to another "
                 "application (it was left unchanged)");
        result = -1;
        goto fail;
    }
    /* A paging_meta of another application is left as it is: its schema_version row is looked
     * for before anything is written (the row inserted below made any table pass). */
    if (has_meta) {
        r = pg_query(conn, wait_ms, "SELECT value FROM paging_meta WHERE name = 'schema_version'", 0, NULL, NULL, NULL, NULL, 0,
                     why, why_len);
        if (r == NULL) goto fail;
        if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
            snprintf(why, why_len, "paging_meta has no schema_version row: another application's table (left unchanged)");
            PQclear(r);
            result = -1;
            goto fail;
        }
        PQclear(r);
    }
    if (!pg_simple(conn, wait_ms, pg_schema_sql, why, why_len)) goto fail;
    r = pg_query(conn, wait_ms, "SELECT value FROM paging_meta WHERE name = 'schema_version'", 0, NULL, NULL, NULL, NULL, 0, why, why_len);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
        if (r != NULL) pg_message(PQerrorMessage(conn), why, why_len);
        PQclear(r);
        goto fail;
    }
    version = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (version != PG_SCHEMA_VERSION) {
        snprintf(why, why_len, "the database has schema version %lld, this plugin supports version %d%s", version,
                 PG_SCHEMA_VERSION, version > PG_SCHEMA_VERSION ? " (written by a newer plugin)" : "");
        result = -1;
        goto fail;
    }
    /* Tables of the same names with other columns (another application's, beside a meta
     * table that looks like the store's) were written to, each load failing on them. */
    r = pg_query(conn, wait_ms,
                 "SELECT c.relname, string_agg(a.attname || ' ' || format_type(a.atttypid, a.atttypmod), ', ' ORDER BY a.attnum) "
                 "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
                 "WHERE a.attrelid IN ('paging_meta'::regclass, 'paging_pages'::regclass) AND a.attnum > 0 AND NOT a.attisdropped "
                 "GROUP BY c.relname ORDER BY c.relname", 0, NULL, NULL, NULL, NULL, 0, why, why_len);
    if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 2) {
        if (r != NULL) pg_message(PQerrorMessage(conn), why, why_len);
        PQclear(r);
        goto fail;
    }
    for (int row = 0; row < 2; row++) {
        static const char *const expected[2] = {
            "name text, value bigint",
            "namespace text, identity bytea, prev_key bytea, next_key bytea, flags integer, item_count integer, stored_at bigint, items bytea[]",
        };
        if (strcmp(PQgetvalue(r, row, 1), expected[row]) != 0) {
            snprintf(why, why_len, "the table %s has the columns (%.200s), not the store's (%s): another application's (left unchanged)",
                     PQgetvalue(r, row, 0), PQgetvalue(r, row, 1), expected[row]);
            PQclear(r);
            result = -1;
            goto fail;
        }
    }
    PQclear(r);
    if (!pg_simple(conn, wait_ms, "COMMIT", why, why_len)) return 0;
    return 1;
fail:
    {
        char ignored[200];
        pg_simple(conn, wait_ms, "ROLLBACK", ignored, sizeof ignored);
    }
    return result == -1 ? -1 : 0;
}

/* The server's notices ("relation already exists, skipping", a shutdown's warning) would go to
 * stderr, past the host's log: they are dropped (failures come back as errors). */
static void pg_ignore_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Connects when not connected and an attempt is due (or `force`). Returns 1 connected. [under conn_lock] */
static int pg_connect(pg_state *st, int force)
{
    const char *keys[3], *values[3];
    char why[500], sql[80], msg[900];
    PGconn *conn;
    int schema;
    if (st->conn != NULL) return 1;
    if (st->schema < 0 || (!force && pstore_now_ms() < st->next_attempt_ms)) return 0;
    keys[0] = "connect_timeout"; values[0] = st->connect_timeout; /* the conninfo's own wins */
    keys[1] = "dbname";          values[1] = st->conninfo;
    keys[2] = NULL;              values[2] = NULL;
    conn = PQconnectdbParams(keys, values, 1);
    if (conn == NULL || PQstatus(conn) != CONNECTION_OK) {
        pg_message(conn != NULL ? PQerrorMessage(conn) : "out of memory", why, sizeof why);
        if (conn != NULL) PQfinish(conn);
        pg_down(st, why);
        return 0;
    }
    PQsetNoticeProcessor(conn, pg_ignore_notice, NULL);
    snprintf(sql, sizeof sql, "SET statement_timeout = %lld", (long long)st->statement_timeout_ms);
    if (!pg_simple(conn, st->statement_timeout_ms + 1000, sql, why, sizeof why)) {
        PQfinish(conn);
        pg_down(st, why);
        return 0;
    }
    if (st->schema == 0) {
        schema = pg_setup_schema(conn, st->statement_timeout_ms + 1000, why, sizeof why);
        if (schema <= 0) {
            PQfinish(conn);
            if (schema < 0) {
                st->schema = -1;
                snprintf(st->schema_refused, sizeof st->schema_refused, "%s", why);
                snprintf(msg, sizeof msg, "postgres-store: %.300s: %.500s; the store is not used", st->target, why);
                st->host->log(st->host, PAGING_LOG_ERROR, msg);
            } else {
                pg_down(st, why);
            }
            return 0;
        }
        st->schema = 1;
    }
    st->conn = conn;
    __atomic_store_n(&st->down_until_ms, (int64_t)0, __ATOMIC_RELAXED);
    if (st->was_down) {
        st->was_down = 0;
        pstore_warner_reset(&st->warn_down);
        snprintf(msg, sizeof msg, "postgres-store: connected again to PostgreSQL at %.300s", st->target);
        st->host->log(st->host, PAGING_LOG_INFO, msg);
    }
    return 1;
}

/* Runs a statement with parameters; returns its result when its status is `expect`, else NULL
 * (logged through `warner`). A lost connection is re-established at once and the statement run
 * again, once; a statement unanswered for its whole wait, or cancelled by the server for its
 * statement_timeout (a locked table), counts the server as down at once: each load waited the
 * timeout for the read and again for the write. [under conn_lock] */
static PGresult *pg_exec(pg_state *st, pstore_warner *warner, const char *what, const char *sql, int n, const Oid *types,
                         const char *const *values, const int *lens, const int *formats, int binary_result,
                         ExecStatusType expect)
{
    int attempt;
    char why[500], msg[800];
    for (attempt = 0; attempt < 2; attempt++) {
        PGresult *r;
        const char *sqlstate;
        int cancelled;
        int64_t wait = st->statement_timeout_ms + 1000, began;
        if (!pg_connect(st, attempt > 0)) return NULL;
        began = pstore_now_ms();
        r = pg_query(st->conn, wait, sql, n, types, values, lens, formats, binary_result, why, sizeof why);
        if (PQresultStatus(r) == expect) return r;
        if (r != NULL) pg_message(PQerrorMessage(st->conn), why, sizeof why);
        /* 57014, query_canceled: the server's statement_timeout (or an operator) ended it. */
        sqlstate = r != NULL ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
        cancelled = sqlstate != NULL && strcmp(sqlstate, "57014") == 0;
        PQclear(r);
        if (cancelled) break;
        if (PQstatus(st->conn) != CONNECTION_BAD) {
            snprintf(msg, sizeof msg, "postgres-store: %s (PostgreSQL at %.300s): %.400s", what, st->target, why);
            pstore_warn(st->host, warner, msg);
            return NULL;
        }
        if (r == NULL && pstore_now_ms() - began >= wait) break;
        PQfinish(st->conn);
        st->conn = NULL;
    }
    pg_down(st, why);
    return NULL;
}

/* ---- rows ------------------------------------------------------------------------------ */

static uint32_t pg_get32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

static void pg_put32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)(v >> 24); p[1] = (uint8_t)(v >> 16); p[2] = (uint8_t)(v >> 8); p[3] = (uint8_t)v;
}

/* Reads a row (binary) into `page` (views into r; page->items malloc'd). Returns NULL, or what is wrong. */
static const char *pg_decode(const PGresult *r, pstore_page *page)
{
    const uint8_t *a;
    size_t len, off, i;
    uint32_t ndim, dim = 0;
    int64_t item_count;
    memset(page, 0, sizeof *page);
    if (PQnfields(r) != 6 || PQgetlength(r, 0, 2) != 4 || PQgetlength(r, 0, 3) != 4 || PQgetlength(r, 0, 4) != 8
        || PQgetisnull(r, 0, 5))
        return "unexpected columns";
    page->has_prev = !PQgetisnull(r, 0, 0);
    page->prev.data = (const uint8_t *)PQgetvalue(r, 0, 0);
    page->prev.len = page->has_prev ? (size_t)PQgetlength(r, 0, 0) : 0;
    page->has_next = !PQgetisnull(r, 0, 1);
    page->next.data = (const uint8_t *)PQgetvalue(r, 0, 1);
    page->next.len = page->has_next ? (size_t)PQgetlength(r, 0, 1) : 0;
    page->flags = pg_get32((const uint8_t *)PQgetvalue(r, 0, 2));
    item_count = (int32_t)pg_get32((const uint8_t *)PQgetvalue(r, 0, 3));
    a = (const uint8_t *)PQgetvalue(r, 0, 4);
    page->stored_at_ms = (int64_t)(((uint64_t)pg_get32(a) << 32) | pg_get32(a + 4));
    if (page->flags & ~(uint32_t)(PAGING_PAGE_PREV_END | PAGING_PAGE_NEXT_END | PAGING_PAGE_SHORTENED | PAGING_PAGE_EMPTIED)) return "unknown flags";
    /* bytea[] binary: ndim, has-null flag, element type, then per dimension size and lower bound,
     * then per element a length (-1: NULL) and its bytes. */
    a = (const uint8_t *)PQgetvalue(r, 0, 5);
    len = (size_t)PQgetlength(r, 0, 5);
    if (len < 12) return "the items array is cut short";
    ndim = pg_get32(a);
    if (pg_get32(a + 8) != PG_OID_BYTEA || ndim > 1) return "the items are not a one-dimensional bytea array";
    off = 12;
    if (ndim == 1) {
        if (len < 20) return "the items array is cut short";
        dim = pg_get32(a + 12);
        off = 20;
    }
    if (item_count < 0 || (int64_t)dim != item_count) return "item_count does not match the items";
    if (dim > (len - off) / 4) return "more items than the array can hold";
    page->items = (paging_bytes_t *)malloc((dim ? dim : 1) * sizeof *page->items);
    if (page->items == NULL) return "out of memory";
    for (i = 0; i < dim; i++) {
        uint32_t item_len;
        if (len - off < 4) break;
        item_len = pg_get32(a + off);
        off += 4;
        if (item_len > len - off) break; /* also a NULL element (0xffffffff) */
        page->items[i].data = a + off;
        page->items[i].len = item_len;
        off += item_len;
    }
    if (i < dim || off != len) {
        free(page->items);
        page->items = NULL;
        return "an item runs past the end of the array";
    }
    page->count = dim;
    return NULL;
}

/* What the plugin's thread decided for a request. */
typedef struct pg_decision {
    pg_state *st;
    uint32_t result;
    int has_page;
    pstore_page page;
    PGresult *res;
    const char *hit; /* the counter of a page answered ("hits", "stale_hits"), counted by pg_answer */
} pg_decision;

static void pg_decision_free(pg_decision *d)
{
    PQclear(d->res);
    free(d->page.items);
    d->res = NULL;
    d->page.items = NULL;
    d->has_page = 0;
}

/* Looks the page up and decides by the policy. */
static void pg_decide(pg_state *st, const pstore_job *job, pg_decision *d)
{
    const char *values[2], *bad;
    int lens[2], formats[2] = { 0, 1 };
    Oid types[2] = { PG_OID_TEXT, PG_OID_BYTEA };
    int whole, fresh;
    char msg[300];
    memset(d, 0, sizeof *d);
    d->st = st;
    d->result = PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    values[0] = st->ns; lens[0] = 0;
    values[1] = (const char *)job->identity; lens[1] = (int)job->identity_len;
    pthread_mutex_lock(&st->conn_lock);
    d->res = pg_exec(st, &st->warn_bad, "read", "SELECT prev_key, next_key, flags, item_count, stored_at, items FROM paging_pages"
                     " WHERE namespace = $1 AND identity = " PG_IDENTITY_OF_2, 2, types, values, lens, formats, 1, PGRES_TUPLES_OK);
    pthread_mutex_unlock(&st->conn_lock);
    if (d->res == NULL) {
        pstore_count(st->host, st->metrics, "unavailable");
        return;
    }
    if (PQntuples(d->res) == 1) {
        bad = pg_decode(d->res, &d->page);
        if (bad == NULL) d->has_page = 1;
        else {
            snprintf(msg, sizeof msg, "postgres-store: a stored row is not a valid page (%s); treated as a miss", bad);
            pstore_warn(st->host, &st->warn_bad, msg);
        }
    }
    whole = d->has_page && pstore_page_is_whole(&d->page, job->page_size);
    fresh = whole && pstore_page_is_fresh(&st->fresh, &d->page);
    d->hit = !whole ? "misses" : fresh ? "hits" : "stale_hits";
    if (!whole || (st->fresh.policy == PSTORE_CACHE_FIRST && !fresh)) {
        pstore_count(st->host, st->metrics, d->hit);
        pg_decision_free(d);
        return;
    }
    /* A page answered is counted once the host takes it (pg_answer): one it refuses is a miss. */
    d->result = st->fresh.policy == PSTORE_NETWORK_FIRST ? PAGING_INTERCEPT_PROCEED_OR_FALL_BACK
              : fresh ? PAGING_INTERCEPT_COMPLETE : PAGING_INTERCEPT_COMPLETE_THEN_REVALIDATE;
}

static uint32_t pg_answer(void *context, paging_intercept_out_t *out)
{
    pg_decision *d = (pg_decision *)context;
    if (d->has_page) {
        int taken = pstore_put_page(d->st->host, "postgres-store", &d->page, out);
        pstore_count(d->st->host, d->st->metrics, taken ? d->hit : "misses");
        if (!taken) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    }
    return d->result;
}

/* The plugin's thread: a queued job. */
static void pg_run(void *owner, pstore_job *job)
{
    pg_state *st = (pg_state *)owner;
    pg_decision d;
    if (job->to_source) { /* a hard refresh (its page replaces the namespace's, pg_handle) or a reload */
        memset(&d, 0, sizeof d);
        d.st = st;
        d.result = PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    } else {
        pg_decide(st, job, &d);
    }
    pstore_resume(st->host, st->async, job, pg_answer, &d);
    pg_decision_free(&d);
    free(job);
}

static void pg_poll(void *owner, pstore_job *jobs)
{
    (void)owner;
    (void)jobs; /* nothing waits here */
}

/* ---- the interceptor ------------------------------------------------------------------- */

static uint32_t pg_intercept(paging_interceptor_t *self, const paging_request_t *request, paging_intercept_out_t *out)
{
    pg_state *st = (pg_state *)self;
    pstore_job *job;
    pg_decision d;
    uint32_t result;
    if (pstore_now_ms() < __atomic_load_n(&st->down_until_ms, __ATOMIC_RELAXED)) {
        pstore_count(st->host, st->metrics, "unavailable");
        return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    }
    if (st->async != NULL) {
        result = pstore_queue_defer(&st->queue, st->async, request, out);
        if (result != 0) return result;
    }
    if (pstore_goes_to_source(request)) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    job = (pstore_job *)calloc(1, sizeof *job + request->identity.len);
    if (job == NULL) return PAGING_INTERCEPT_PROCEED_AND_OBSERVE;
    job->page_size = request->page_size;
    job->identity_len = request->identity.len;
    if (request->identity.len) memcpy(job->identity, request->identity.data, request->identity.len);
    pg_decide(st, job, &d);
    result = pg_answer(&d, out);
    pg_decision_free(&d);
    free(job);
    return result;
}

/* Writes a page: namespace, identity, prev and next keys, flags, item count, when, items. */
#define PG_PUT_PAGE \
    "INSERT INTO paging_pages (namespace, identity, prev_key, next_key, flags, item_count, stored_at, items)" \
    " VALUES ($1, " PG_IDENTITY_OF_2 ", $3, $4, $5, $6, $7, $8) ON CONFLICT (namespace, identity) DO UPDATE SET" \
    " prev_key = EXCLUDED.prev_key, next_key = EXCLUDED.next_key, flags = EXCLUDED.flags," \
    " item_count = EXCLUDED.item_count, stored_at = EXCLUDED.stored_at, items = EXCLUDED.items"

static void pg_handle(paging_interceptor_t *self, const paging_page_t *page)
{
    pg_state *st = (pg_state *)self;
    const paging_request_t *req = page->request;
    const char *values[8];
    int lens[8], formats[8] = { 0, 1, 1, 1, 0, 0, 0, 1 };
    Oid types[8] = { PG_OID_TEXT, PG_OID_BYTEA, PG_OID_BYTEA, PG_OID_BYTEA, PG_OID_INT4, PG_OID_INT4, PG_OID_INT8,
                     PG_OID_BYTEA_ARRAY };
    char flags[16], count[16], stored[32];
    size_t i, total = page->item_count ? 20 : 12; /* an empty array has no dimension */
    uint8_t *array, *p;
    PGresult *r;

    if (req == NULL || (page->item_count > 0 && page->items == NULL) || page->item_count > 0x7fffffff) {
        st->host->log(st->host, PAGING_LOG_ERROR, "postgres-store: handle: malformed page; not stored");
        return;
    }
    for (i = 0; i < page->item_count; i++) total += 4 + page->items[i].len;
    if (total > 0x3fffffff || req->identity.len > 0x3fffffff) { /* PostgreSQL's limit for a value: 1 GB */
        st->host->log(st->host, PAGING_LOG_WARNING, "postgres-store: a page over 1 GB; not stored");
        return;
    }
    array = p = (uint8_t *)malloc(total);
    if (array == NULL) {
        st->host->log(st->host, PAGING_LOG_ERROR, "postgres-store: out of memory; page not stored");
        return;
    }
    /* bytea[] binary: 1 dimension (0 when empty), no NULLs, element type bytea, size, lower bound 1. */
    pg_put32(p, page->item_count ? 1 : 0); pg_put32(p + 4, 0); pg_put32(p + 8, PG_OID_BYTEA);
    p += 12;
    if (page->item_count) {
        pg_put32(p, (uint32_t)page->item_count); pg_put32(p + 4, 1);
        p += 8;
    }
    for (i = 0; i < page->item_count; i++) {
        pg_put32(p, (uint32_t)page->items[i].len);
        p += 4;
        if (page->items[i].len) memcpy(p, page->items[i].data, page->items[i].len);
        p += page->items[i].len;
    }
    snprintf(flags, sizeof flags, "%u", (unsigned)page->flags);
    snprintf(count, sizeof count, "%zu", page->item_count);
    snprintf(stored, sizeof stored, "%lld", (long long)pstore_now_ms());
    values[0] = st->ns; lens[0] = 0;
    values[1] = (const char *)req->identity.data; lens[1] = (int)req->identity.len;
    values[2] = page->prev_key != NULL ? (const char *)page->prev_key->data : NULL;
    lens[2] = page->prev_key != NULL ? (int)page->prev_key->len : 0;
    values[3] = page->next_key != NULL ? (const char *)page->next_key->data : NULL;
    lens[3] = page->next_key != NULL ? (int)page->next_key->len : 0;
    /* An empty key is an empty bytea, not NULL: libpq needs a non-NULL pointer for it. */
    if (page->prev_key != NULL && values[2] == NULL) values[2] = "";
    if (page->next_key != NULL && values[3] == NULL) values[3] = "";
    if (values[1] == NULL) values[1] = "";
    values[4] = flags; values[5] = count; values[6] = stored;
    lens[4] = lens[5] = lens[6] = 0;
    values[7] = (const char *)array; lens[7] = (int)total;
    pthread_mutex_lock(&st->conn_lock);
    /* The page of a hard refresh replaces every page of the namespace, in the same statement
     * (a failed load left them). */
    r = pg_exec(st, &st->warn_write, "write: page not stored",
                pstore_is_hard_refresh(req)
                ? "WITH cleared AS (DELETE FROM paging_pages WHERE namespace = $1 AND identity <> " PG_IDENTITY_OF_2 ") " PG_PUT_PAGE
                : PG_PUT_PAGE,
                8, types, values, lens, formats, 0, PGRES_COMMAND_OK);
    pthread_mutex_unlock(&st->conn_lock);
    /* The write is one statement: failed, it replaced nothing. */
    if (r == NULL && pstore_is_hard_refresh(req)) {
        char why[400];
        snprintf(why, sizeof why, "PostgreSQL at %.300s did not take the write (it is unavailable, or it refused it: see the warning)", st->target);
        pstore_say_not_replaced(st->host, "postgres-store", why);
    }
    PQclear(r);
    free(array);
}

/* paging.health/1: can the database be reached (and is the schema ours)? */
static paging_status_t pg_health(void *self)
{
    pg_state *st = (pg_state *)self;
    PGresult *r = NULL;
    char msg[500];
    pthread_mutex_lock(&st->conn_lock);
    if (pg_connect(st, 1)) r = pg_exec(st, &st->warn_bad, "health check", "SELECT 1", 0, NULL, NULL, NULL, NULL, 0, PGRES_TUPLES_OK);
    pthread_mutex_unlock(&st->conn_lock);
    if (r != NULL) {
        PQclear(r);
        return PAGING_OK;
    }
    snprintf(msg, sizeof msg, "postgres-store: PostgreSQL at %.300s cannot serve now%s", st->target,
             st->schema < 0 ? " (its schema was refused)" : "");
    st->host->log(st->host, PAGING_LOG_ERROR, msg);
    return st->schema < 0 ? PAGING_ERR_INVALID_CONFIG : PAGING_ERR_TRANSIENT;
}

static void pg_cancel(void *self, uint64_t id)
{
    pstore_queue_cancel(&((pg_state *)self)->queue, id);
}

static const paging_ext_health_t pg_health_ext = { pg_health };
static const paging_ext_async_intercept_t pg_async_ext = { pg_cancel };

static const void *pg_get_extension(paging_interceptor_t *self, const char *id)
{
    (void)self;
    if (strcmp(id, PAGING_EXT_HEALTH) == 0) return &pg_health_ext;
    return strcmp(id, PAGING_EXT_ASYNC_INTERCEPT) == 0 ? &pg_async_ext : NULL;
}

/* ---- create / destroy ------------------------------------------------------------------ */

static void pg_destroy(paging_interceptor_t *self)
{
    pg_state *st = (pg_state *)self;
    pstore_queue_destroy(&st->queue);
    if (st->conn != NULL) PQfinish(st->conn);
    if (st->conninfo != NULL) memset(st->conninfo, 0, strlen(st->conninfo));
    free(st->conninfo);
    free(st->ns);
    pstore_warner_destroy(&st->warn_down);
    pstore_warner_destroy(&st->warn_bad);
    pstore_warner_destroy(&st->warn_write);
    pthread_mutex_destroy(&st->conn_lock);
    free(st);
}

static paging_interceptor_t *pg_fail(pg_state *st, const paging_config_t *config, paging_status_t code, const char *message)
{
    char msg[900];
    snprintf(msg, sizeof msg, "postgres-store: %.850s", message);
    st->host->config_fail(config, code, msg);
    pg_destroy(&st->interceptor);
    return NULL;
}

/* Whether the connection string may hold a password (a keyword or a URI's user:password@). A
 * URI's parameters may be percent-encoded ("%70assword" is "password"): any "%" counts too. */
static int pg_may_hold_password(const char *conninfo)
{
    const char *at = strchr(conninfo, '@'), *scheme = strstr(conninfo, "://");
    if (strchr(conninfo, '%') != NULL) return 1;
    char lower[16];
    size_t i, n = strlen(conninfo);
    for (i = 0; i + 8 <= n; i++) {
        size_t j;
        for (j = 0; j < 8; j++) lower[j] = (char)((conninfo[i + j] >= 'A' && conninfo[i + j] <= 'Z') ? conninfo[i + j] + 32 : conninfo[i + j]);
        if (memcmp(lower, "password", 8) == 0) return 1;
    }
    return scheme != NULL && at != NULL;
}

/* Whether a URI's password (or user name) holds an '@' or '/' not percent-encoded, which libpq
 * reads as part of the host, port or database, which messages show ("PostgreSQL at
 * ss99@127.0.0.1:5432/db"): an '@' makes two before the path; a '/' makes "user:pa" the host and
 * a port that is no number, the rest of the password (up to its '@') the database. Keyword
 * strings are not looked at, nor is the query ("?user=admin@server" is read as meant), and an
 * '@' in the database name alone is one ("postgresql://host/db@prod"). */
static int pg_uri_password_unencoded(const char *conninfo)
{
    const char *start, *end, *slash, *at, *port;
    if (strncmp(conninfo, "postgresql://", 13) == 0) start = conninfo + 13;
    else if (strncmp(conninfo, "postgres://", 11) == 0) start = conninfo + 11;
    else return 0;
    end = start + strcspn(start, "?");
    slash = memchr(start, '/', (size_t)(end - start));
    if (slash == NULL) slash = end;
    at = memchr(start, '@', (size_t)(slash - start));
    if (at != NULL) return memchr(at + 1, '@', (size_t)(slash - at - 1)) != NULL;
    if (memchr(slash, '@', (size_t)(end - slash)) == NULL) return 0;
    /* The port of the last host (after an IPv6 literal's ']'). */
    for (port = slash; port > start && port[-1] != ':' && port[-1] != ']' && port[-1] != ','; port--) {}
    if (port == start || port[-1] != ':' || port == slash) return 0;
    for (; port < slash; port++)
        if (*port < '0' || *port > '9') return 1;
    return 0;
}

/* The number of ports in `ports` (a comma-separated list, each maybe empty: the default), or 0
 * when one is not a number from 1 to 65535 as libpq reads it (strtol: spaces around it and a
 * sign allowed). */
static int pg_port_count(const char *ports)
{
    int count = 0;
    const char *c = ports;
    for (;;) {
        const char *end = c + strcspn(c, ",");
        const char *p = c;
        while (p < end && isspace((unsigned char)*p)) p++;
        if (p < end) {
            long port = 0;
            int digits = 0;
            if (*p == '+' || *p == '-') {
                if (*p == '-') return 0;
                p++;
            }
            for (; p < end && *p >= '0' && *p <= '9'; p++, digits++) {
                port = port * 10 + (*p - '0');
                if (port > 65535) return 0;
            }
            while (p < end && isspace((unsigned char)*p)) p++;
            if (digits == 0 || p != end || port == 0) return 0;
        }
        count++;
        if (*end == '\0') return count;
        c = end + 1;
    }
}

/* The number of hosts a connection string names (libpq's rule: `hostaddr` when set, else
 * `host`, each a comma-separated list; none is one). */
static int pg_host_count(const char *hostaddr, const char *host)
{
    const char *list = hostaddr != NULL && hostaddr[0] != '\0' ? hostaddr : host;
    int count = 1;
    if (list == NULL) return 1;
    for (; *list != '\0'; list++)
        if (*list == ',') count++;
    return count;
}

/* Whether a service is named (`service`, PGSERVICE), whose file may set options. */
static int pg_names_service(PQconninfoOption *options)
{
    PQconninfoOption *o;
    for (o = options; o != NULL && o->keyword != NULL; o++)
        if (o->val != NULL && strcmp(o->keyword, "service") == 0) return 1;
    return getenv("PGSERVICE") != NULL;
}

/* The value of `keyword` in the parsed string, or of `variable`, which libpq reads in its stead
 * (`*from` then names it); NULL when neither has one. A service (`service`, PGSERVICE) may set it
 * between the two: then the variable is not looked at. */
static const char *pg_option(PQconninfoOption *options, const char *keyword, const char *variable, const char **from)
{
    PQconninfoOption *o;
    const char *value = NULL;
    for (o = options; o != NULL && o->keyword != NULL; o++)
        if (o->val != NULL && strcmp(o->keyword, keyword) == 0) value = o->val;
    *from = NULL;
    if (value != NULL || pg_names_service(options)) return value;
    *from = variable;
    return getenv(variable);
}

/* Whether the options libpq takes from a fixed set of words, and the port, hold what it accepts,
 * from the string or from the PG* variable libpq reads in its stead. libpq checks them only
 * when it connects, and its refusal looks like a server down: loads went on, with the store
 * never used. When one is wrong, `problem` says which and what is expected (the value is
 * shown: these options hold no secret). */
static int pg_options_valid(PQconninfoOption *options, char *problem, size_t size)
{
    static const struct { const char *keyword, *variable, *const words[7]; } sets[] = {
        { "sslmode", "PGSSLMODE", { "disable", "allow", "prefer", "require", "verify-ca", "verify-full", NULL } },
        { "gssencmode", "PGGSSENCMODE", { "disable", "prefer", "require", NULL } },
        { "channel_binding", "PGCHANNELBINDING", { "disable", "prefer", "require", NULL } },
        { "target_session_attrs", "PGTARGETSESSIONATTRS",
          { "any", "read-write", "read-only", "primary", "standby", "prefer-standby", NULL } },
    };
    size_t s, w;
    const char *value, *from;
    char source[80];
    for (s = 0; s < sizeof sets / sizeof sets[0]; s++) {
        if ((value = pg_option(options, sets[s].keyword, sets[s].variable, &from)) == NULL) continue;
        for (w = 0; sets[s].words[w] != NULL && strcmp(value, sets[s].words[w]) != 0; w++) {}
        if (sets[s].words[w] != NULL) continue;
        snprintf(source, sizeof source, from != NULL ? " (from the environment variable %s)" : "%s", from != NULL ? from : "");
        int n = snprintf(problem, size, "config `conninfo`: %s \"%.40s\"%s is not one of ", sets[s].keyword, value, source);
        for (w = 0; sets[s].words[w] != NULL && n > 0 && (size_t)n < size; w++)
            n += snprintf(problem + n, size - (size_t)n, "%s%s", w == 0 ? "" : ", ", sets[s].words[w]);
        return 0;
    }
    if ((value = pg_option(options, "port", "PGPORT", &from)) != NULL) {
        const char *host_from, *addr_from;
        const char *host = pg_option(options, "host", "PGHOST", &host_from), *addr = pg_option(options, "hostaddr", "PGHOSTADDR", &addr_from);
        int ports = pg_port_count(value), hosts = pg_host_count(addr, host);
        snprintf(source, sizeof source, from != NULL ? " (from the environment variable %s)" : "%s", from != NULL ? from : "");
        if (ports == 0) {
            snprintf(problem, size, "config `conninfo`: port \"%.40s\"%s is not a port number from 1 to 65535 (or a comma-separated "
                     "list of them)", value, source);
            return 0;
        }
        /* (A service may name the hosts: then they are not counted.) */
        if (ports > 1 && ports != hosts && (host != NULL || addr != NULL || !pg_names_service(options))) {
            snprintf(problem, size, "config `conninfo`: port \"%.40s\"%s lists %d ports for %d host%s: one port, or one for each host",
                     value, source, ports, hosts, hosts == 1 ? "" : "s");
            return 0;
        }
    }
    return 1;
}

/* host:port/dbname of the connection string, for messages (never the password). */
static void pg_describe(pg_state *st, PQconninfoOption *options)
{
    const char *host = NULL, *port = NULL, *db = NULL;
    PQconninfoOption *o;
    for (o = options; o != NULL && o->keyword != NULL; o++) {
        if (o->val == NULL) continue;
        if (strcmp(o->keyword, "host") == 0 || (host == NULL && strcmp(o->keyword, "hostaddr") == 0)) host = o->val;
        else if (strcmp(o->keyword, "port") == 0) port = o->val;
        else if (strcmp(o->keyword, "dbname") == 0) db = o->val;
    }
    if (host == NULL) host = getenv("PGHOST");
    if (port == NULL) port = getenv("PGPORT");
    snprintf(st->target, sizeof st->target, "%.200s:%.10s/%.80s", host != NULL ? host : "(default host)",
             port != NULL ? port : "5432", db != NULL ? db : "(default database)");
}

static paging_interceptor_t *pg_create_interceptor(const char *plugin_id, const paging_host_t *host,
                                                   const paging_config_t *config)
{
    static const char *const keys[] = { "conninfo", "namespace", "policy", "max_age_seconds", "statement_timeout_ms",
                                        "connect_timeout_ms", "retry_interval_ms", NULL };
    pg_state *st;
    const char *conninfo, *ns;
    char problem[1000], error[300], msg[500], unknown[220];
    char *parse_error = NULL;
    PQconninfoOption *options;
    int64_t connect_ms;

    if (plugin_id == NULL || strcmp(plugin_id, "postgres-store") != 0) {
        host->config_fail(config, PAGING_ERR_NOT_FOUND, "postgres-store: unknown plugin id");
        return NULL;
    }
    st = (pg_state *)calloc(1, sizeof *st);
    if (st == NULL) {
        host->config_fail(config, PAGING_ERR_INTERNAL, "postgres-store: out of memory");
        return NULL;
    }
    st->host = host;
    pthread_mutex_init(&st->conn_lock, NULL);
    pstore_warner_init(&st->warn_down);
    pstore_warner_init(&st->warn_bad);
    pstore_warner_init(&st->warn_write);
    pstore_queue_init(&st->queue, st, pg_run, pg_poll, 1000);
    if (!pstore_read_freshness(host, config, "postgres-store", &st->fresh)) {
        pg_destroy(&st->interceptor);
        return NULL;
    }
    problem[0] = '\0';
    if (!pstore_only_known_keys(host, config, keys, unknown, sizeof unknown)) {
        snprintf(problem, sizeof problem, "config `%s`: unknown key; expected conninfo, namespace, policy, max_age_seconds, "
                 "statement_timeout_ms, connect_timeout_ms or retry_interval_ms", unknown);
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, problem);
    }
    conninfo = host->config_string(config, "conninfo");
    ns = host->config_string(config, "namespace");
    if (ns == NULL && host->config_type(config, "namespace") != PAGING_CONFIG_ABSENT)
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, "config `namespace` must be a string");
    /* Part of the table's primary key with the identity (cut at 2,000 bytes): a longer
     * namespace passed PostgreSQL's 2,704 bytes for an index row, and no page was ever stored. */
    if (ns != NULL && (ns[0] == '\0' || strlen(ns) > 128))
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, "config `namespace` must be 1-128 bytes");
    if (conninfo == NULL)
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, "config `conninfo` (string) is required: a libpq "
                       "connection string, e.g. \"host=db.internal port=5432 dbname=paging user=paging\"");
    if (!pstore_config_int(host, config, "statement_timeout_ms", 5000, 1, 3600000, &st->statement_timeout_ms, problem, sizeof problem)
        || !pstore_config_int(host, config, "connect_timeout_ms", 5000, 1000, 600000, &connect_ms, problem, sizeof problem)
        || !pstore_config_int(host, config, "retry_interval_ms", 1000, 0, 600000, &st->retry_ms, problem, sizeof problem))
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, problem);
    snprintf(st->connect_timeout, sizeof st->connect_timeout, "%lld", (long long)(connect_ms / 1000));
    st->ns = (char *)malloc(strlen(ns != NULL ? ns : "default") + 1);
    st->conninfo = pstore_expand_env(conninfo, error, sizeof error);
    if (st->ns == NULL) return pg_fail(st, config, PAGING_ERR_INTERNAL, "out of memory");
    strcpy(st->ns, ns != NULL ? ns : "default");
    if (st->conninfo == NULL) {
        snprintf(problem, sizeof problem, "config `conninfo`: %s", error);
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, problem);
    }
    if (pg_uri_password_unencoded(st->conninfo))
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, "config `conninfo`: an '@' or '/' in the URI's user name or "
                       "password must be percent-encoded (%40, %2F): as written, libpq would read part of it as the host, "
                       "port or database (the string is not shown: it may hold a password)");
    options = PQconninfoParse(st->conninfo, &parse_error);
    if (options == NULL) {
        /* libpq's message quotes the string; it may hold a password. */
        if (parse_error != NULL && !pg_may_hold_password(st->conninfo)) pg_message(parse_error, error, sizeof error);
        else snprintf(error, sizeof error, "libpq's detail is withheld: the string may hold a password");
        PQfreemem(parse_error);
        snprintf(problem, sizeof problem, "config `conninfo` is not a valid connection string (%s)", error);
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, problem);
    }
    if (!pg_options_valid(options, problem, sizeof problem)) {
        PQconninfoFree(options);
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, problem);
    }
    pg_describe(st, options);
    PQconninfoFree(options);
    st->async = (const paging_ext_async_intercept_host_t *)host->get_extension(host, PAGING_EXT_ASYNC_INTERCEPT);
    st->metrics = (const paging_ext_metrics_host_t *)host->get_extension(host, PAGING_EXT_METRICS);

    /* Connect now: a schema of another application is refused at once; a server down is a warning. */
    pthread_mutex_lock(&st->conn_lock);
    if (pg_connect(st, 1)) {
        snprintf(msg, sizeof msg, "postgres-store: connected to PostgreSQL at %.300s (namespace '%.100s')", st->target, st->ns);
        host->log(host, PAGING_LOG_DEBUG, msg);
    }
    pthread_mutex_unlock(&st->conn_lock);
    if (st->schema < 0) {
        snprintf(problem, sizeof problem, "config `conninfo`: PostgreSQL at %.300s: the database's tables are not a "
                 "postgres-store's: %.500s", st->target, st->schema_refused);
        return pg_fail(st, config, PAGING_ERR_INVALID_CONFIG, problem);
    }
    st->interceptor.plugin_data = st;
    st->interceptor.intercept = pg_intercept;
    st->interceptor.handle = pg_handle;
    st->interceptor.destroy = pg_destroy;
    st->interceptor.struct_size = (uint32_t)sizeof st->interceptor;
    st->interceptor.get_extension = pg_get_extension;
    return &st->interceptor;
}

/* ---- entry ----------------------------------------------------------------------------- */

static uint32_t pg_plugin_count(void) { return 1; }

static const paging_plugin_descriptor_t *pg_descriptor_at(uint32_t index)
{
    return index == 0 ? &pg_descriptor : NULL;
}

static const paging_plugin_entry_t pg_entry = {
    PAGING_ENTRY_HEAD,
    pg_plugin_count,
    pg_descriptor_at,
    NULL,
    pg_create_interceptor, NULL, NULL
};

PAGING_EXPORT const paging_plugin_entry_t *paging_plugin_entry(void)
{
    return &pg_entry;
}
