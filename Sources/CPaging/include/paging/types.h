/*
 * paging/types.h - value types shared by hosts and plugins: byte strings, requests, pages,
 * status codes and log levels.
 *
 * Everything here is borrowed: a pointer the host passes into a plugin call is valid for that
 * call only. A plugin that needs data later copies it before returning.
 *
 * Core forever (version.h, rule 1): paging_request_t and paging_page_t, which may grow at their
 * end (check struct_size with PAGING_STRUCT_HAS before reading a member added after 1.0);
 * paging_bytes_t and paging_param_t, which are fixed forever (rule 5).
 */
#ifndef PAGING_TYPES_H
#define PAGING_TYPES_H

#include <stddef.h>
#include <stdint.h>

#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ABI 1.0: byte strings ------------------------------------------------------------ */

/* A borrowed run of bytes, not NUL-terminated. Fixed forever. `data` may be NULL only when
 * `len` == 0; a host function given NULL data with a non-zero len returns
 * PAGING_ERR_INVALID_ARGUMENT and reads nothing. Keys are opaque bytes (by convention UTF-8
 * text), at most 1 MiB (a longer one is refused with PAGING_ERR_INVALID_ARGUMENT). Each item
 * must be exactly one JSON value in valid UTF-8 (RFC 8259; whitespace around it allowed), its
 * arrays and objects nested at most 512 deep (`[[1]]` is 2): the host checks every item it is
 * handed and fails the page otherwise, naming the plugin and the item's index. */
typedef struct paging_bytes {
    const uint8_t *data; /* first byte; owned by the caller, borrowed for the call only. [any-thread] */
    size_t len;          /* number of bytes at data. [any-thread] Value member. */
} paging_bytes_t;

/* ---- ABI 1.0: requests ---------------------------------------------------------------- */

/* paging_request_t.kind values. */
#define PAGING_REQUEST_REFRESH 0u /* load the page at `key` (initial load or refresh). */
#define PAGING_REQUEST_PREPEND 1u /* load the page before the loaded ones; key is its key. */
#define PAGING_REQUEST_APPEND  2u /* load the page after the loaded ones; key is its key. */

/* One name/value pair of a request's user info (a string map). Fixed forever. Both borrowed
 * with the request. */
typedef struct paging_param {
    paging_bytes_t name;  /* UTF-8 name, e.g. "hard_refresh". Borrowed for the call only. [any-thread] */
    paging_bytes_t value; /* UTF-8 value, e.g. "true". Borrowed for the call only. [any-thread] */
} paging_param_t;

/* A load request. The struct and everything it points to are owned by the host and borrowed
 * for the duration of the call that receives it; copy what you need to keep.
 *
 * The keys around `key` are what the source's key_chain() says of it, whatever the kind: on a
 * PREPEND `key` is the page before the first loaded one and next_key (when the chain names it)
 * the key of that first page; on an APPEND prev_key is the key of the last loaded page. Both
 * are NULL when the source has no key_chain() (its pages carry their keys) or names no key in
 * that direction. A page whose own keys are not set inherits these (see paging_page_t). */
typedef struct paging_request {
    /* ---- ABI 1.0 draft members ---- */
    uint32_t kind;                  /* PAGING_REQUEST_*. [any-thread] Value member. */
    uint32_t page_size;             /* requested number of items (a hint; a page may hold fewer or more). [any-thread] Value member. */
    paging_bytes_t key;             /* the key of the page to load. Borrowed for the call only. [any-thread] */
    const paging_bytes_t *prev_key; /* key known before `key`, or NULL: none known. Borrowed for the call only. [any-thread] */
    const paging_bytes_t *next_key; /* key known after `key`, or NULL: none known. Borrowed for the call only. [any-thread] */
    const paging_param_t *params;   /* param_count user-info pairs, sorted by name, names unique (NULL when param_count == 0). Borrowed for the call only. [any-thread] */
    size_t param_count;             /* number of entries at params. [any-thread] Value member. */
    /* ---- ABI 1.0 ---- */
    uint32_t struct_size;           /* sizeof(paging_request_t) in the host's headers (version.h, rule 2). [any-thread] Value member. */
    uint32_t reserved;              /* 0. [any-thread] Value member. */
    paging_bytes_t identity;        /* what identifies the page asked for (see below): key caches and stores by it. Borrowed for the call only. [any-thread] */
    /* Members added in later 1.x versions go here, at the end. */
} paging_request_t;

/* A request's identity: the one definition of "the same page" that every cache, store and
 * deduplication uses, in the host and in plugins. Two requests ask for the same page exactly
 * when their identities are equal byte strings. It holds the key, the page size and every
 * param except hard_refresh and reload (how to load, not what); not the kind, nor the keys
 * around the key.
 * A parameter that changes the answer (a query, a filter) must therefore travel as a param.
 * Encoding (compare and store it whole; never parse it): the page size in decimal, a space,
 * the key as <length>:<bytes>, then for each param in name order a space, <length>:<name>,
 * '=', <length>:<value>; lengths are decimal byte counts. For example key "3", page size 20
 * and param q=swift: `20 1:3 1:q=5:swift`.
 * A hard refresh (`pager run --hard-refresh`) is the param hard_refresh with the value "true":
 * a cache or store must not answer it from what it holds (let it proceed to the source), and
 * should replace everything it holds (in its namespace) with the page handed back: only the
 * refresh carries the param, and the appends after it, answered from pages held before it,
 * would mix stale pages with fresh ones. The param reload with the value
 * "true" marks a page loaded again because it may have grown (a short last page), and every
 * request of an incremental run (`pager run` of a manifest with `incremental`), refreshes
 * included: a cache or store must let it proceed to the source too, and should replace the page
 * it holds under its identity with the page handed back (not the others). */

/* ---- ABI 1.0: pages ------------------------------------------------------------------- */

/* paging_page_t.flags bits (and the flags of a fetch/intercept result). An END flag means
 * "there is no key in that direction" and wins over a key set for that direction. Bits this
 * version does not define are ignored (a later minor version may give them a meaning that a
 * host of this one does without). */
#define PAGING_PAGE_PREV_END 1u /* there is no page before this one. */
#define PAGING_PAGE_NEXT_END 2u /* there is no page after this one. */
/* Since 1.3: the page is short, but not because the data ends there: it is not loaded again
 * as a short last page is, and, empty, it is not taken for the end. The host sets it on a full
 * page a transform made short or empty (a filter dropped items); it stays set through the
 * transforms after. A source whose next keys come from key_chain sets it (fetch_set_flags) on
 * a page its server cut short, a cap on the page size: unmarked, each such page is loaded
 * twice more, in case it was a last page that grew. On an empty page a source returns, the
 * host ignores it. An interceptor that keeps pages (a cache, a store) keeps the flags with
 * each page and sets them back (out_set_flags) when it answers with the page: a filtered page
 * read back without this flag reads as a short last page, an empty one as the end, and paging
 * stops early. A host before 1.3 ignores it. */
#define PAGING_PAGE_SHORTENED 4u
/* Since 1.4: the page is empty because a transform dropped every item of a short page (a
 * filter); the source's page had items. Unlike an empty page from the source, it is not the end
 * of the data; unlike a SHORTENED page, it is loaded again as a short last page is (it may
 * have grown). The host sets it on such a page it hands to handle(), and reads it back from an
 * intercept's answer (COMPLETE, COMPLETE_THEN_REVALIDATE, network-first's fallback) of an
 * empty page; it ignores it from a source and on a page with items. An interceptor that keeps
 * pages keeps it as it keeps SHORTENED: a page a filter emptied read back without it, after a
 * short page, reads as the end. A host before 1.4 ignores it. */
#define PAGING_PAGE_EMPTIED 8u

/* A loaded page, as handed to an interceptor's handle(). Owned by the host; the struct and all
 * it points to are borrowed for the call only. */
typedef struct paging_page {
    /* ---- ABI 1.0 draft members ---- */
    const paging_request_t *request; /* the request this page answers. Borrowed for the call only. [any-thread] */
    const paging_bytes_t *items;     /* item_count items, one JSON value each (NULL when item_count == 0). Borrowed for the call only. [any-thread] */
    size_t item_count;               /* number of entries at items. [any-thread] Value member. */
    const paging_bytes_t *prev_key;  /* key of the page before (the key the page came with, else the request's prev_key), or NULL with PAGING_PAGE_PREV_END: none. Borrowed for the call only. [any-thread] */
    const paging_bytes_t *next_key;  /* key of the page after (the key the page came with, else the request's next_key), or NULL with PAGING_PAGE_NEXT_END: none. Borrowed for the call only. [any-thread] */
    uint32_t flags;                  /* PAGING_PAGE_* bits. [any-thread] Value member. */
    /* ---- ABI 1.0 ---- */
    uint32_t struct_size;            /* sizeof(paging_page_t) in the host's headers (version.h, rule 2). [any-thread] Value member. */
    /* ---- ABI 1.1 (read only when PAGING_STRUCT_HAS(page, paging_page_t, metadata_count)) ---- */
    const paging_param_t *metadata;  /* metadata_count name/value pairs interceptors attached (paging.page-transform/1), sorted by name, names unique (NULL when metadata_count == 0). Borrowed for the call only. [any-thread] */
    size_t metadata_count;           /* number of entries at metadata. [any-thread] Value member. */
    /* Members added in later 1.x versions go here, at the end. */
} paging_page_t;

/* ---- ABI 1.0: status codes ------------------------------------------------------------ */

/* Result/error class of a call. Fixed-width on purpose (enum sizes vary by compiler). A
 * failure carries one of these plus a message; the class drives the retry policy:
 * retryable = PAGING_ERR_TRANSIENT, PAGING_ERR_TIMEOUT; all others are not retried. */
typedef uint32_t paging_status_t;

#define PAGING_OK                   0u /* success. */
#define PAGING_ERR_CANCELLED        1u /* the work was cancelled. Not retried. */
#define PAGING_ERR_TRANSIENT        2u /* temporary failure: network error, HTTP 429, 5xx. Retryable. */
#define PAGING_ERR_TIMEOUT          3u /* the work took too long. Retryable. */
#define PAGING_ERR_INVALID_CONFIG   4u /* the plugin's configuration is wrong. Not retried. */
#define PAGING_ERR_INVALID_REQUEST  5u /* the request cannot be served (e.g. malformed key). Not retried. */
#define PAGING_ERR_NOT_FOUND        6u /* the requested resource does not exist. Not retried. */
#define PAGING_ERR_INTERNAL         7u /* a bug or unexpected state. Not retried. */
#define PAGING_ERR_INVALID_ARGUMENT 8u /* a host function got a bad pointer/length, an unknown/finished id, or a handle outside its call. Not retried. */
#define PAGING_ERR_UNSUPPORTED      9u /* the plugin or host lacks what was asked for (e.g. a required extension). Not retried. */

/* Unknown codes may appear in later 1.x versions: treat a code you do not know as a
 * non-retryable failure. */

/* ---- ABI 1.0: log levels (paging_host_t.log) ------------------------------------------
 * The host prefixes every line a plugin logs with the level and the plugin's id
 * ("[info] jsonlines: ..."): do not repeat the id in the message. */

#define PAGING_LOG_TRACE   0u
#define PAGING_LOG_DEBUG   1u
#define PAGING_LOG_INFO    2u
#define PAGING_LOG_WARNING 3u
#define PAGING_LOG_ERROR   4u

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_TYPES_H */
