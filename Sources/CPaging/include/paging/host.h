/*
 * paging/host.h - the function table a host gives each plugin instance.
 *
 * Naming: everything a plugin calls on the host lives in this table (host->...); everything
 * the host calls on a plugin lives in the plugin's tables (source.h, interceptor.h, entry.h).
 *
 * Every host function copies what it is given: bytes and strings are borrowed for the call
 * only, and the plugin keeps ownership of its memory. A host function given NULL data with a
 * non-zero length, a NULL required pointer, an unknown slot, or an unknown/finished fetch id
 * returns PAGING_ERR_INVALID_ARGUMENT (and logs it); it never reads through the bad pointer
 * and never crashes. The `host` argument itself must be the pointer the host gave the
 * instance (or NULL, refused): a copy of the table, or any other pointer, is undefined behaviour.
 *
 * Call handles. `paging_config_t *`, `paging_intercept_out_t *` and `paging_keys_out_t *` each
 * belong to one call of the host into the plugin (create_*, intercept(), refresh_key() or
 * key_chain()). A handle may be used only on the thread that runs that call, and only until
 * the call returns. They are opaque values, not pointers to read: the host checks each use,
 * and a handle kept from an earlier call, or used from another thread, is refused
 * (PAGING_ERR_INVALID_ARGUMENT; the config getters answer NULL, PAGING_CONFIG_ABSENT or the
 * default), logged naming the plugin, and never applied to another call. The refusal counts
 * as a refused call of that function (what the plugin set through it is missing) against the
 * call the handle belongs to (used from another thread while that call ran, or passed to a
 * function that takes another kind), and against a call of the same kind running on the thread
 * that used it (a kept or NULL handle in place of the call's own): that fails the call, but for
 * the functions that build a page (out_add_item, out_set_prev_key, out_set_next_key,
 * out_set_flags, and the page-transform builder's), whose refusal fails only an answer with
 * that page, as each says. Work that continues after the call returns uses what outlives
 * calls: the paging_host_t pointer and fetch ids.
 *
 * Core forever (version.h, rule 1): every member below. The table grows at its end only;
 * struct_size says how far (read a later member only when PAGING_STRUCT_HAS holds).
 * Capabilities beyond the core are extensions: host->get_extension (extensions.h).
 */
#ifndef PAGING_HOST_H
#define PAGING_HOST_H

#include <stdint.h>

#include "types.h"
#include "version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- ABI 1.0: opaque handles, owned by the host --------------------------------------- */

/* The plugin's configuration: a call handle of the create_* call that receives it (see above). */
typedef struct paging_config paging_config_t;
/* The result builder of one intercept() call: a call handle of that call (see above). */
typedef struct paging_intercept_out paging_intercept_out_t;
/* The result of one refresh_key()/key_chain() call: a call handle of that call (see above). */
typedef struct paging_keys_out paging_keys_out_t;

/* Slots for paging_host_t.keys_set. */
#define PAGING_KEY_CURRENT 0u /* refresh_key(): the key to load first / on refresh. */
#define PAGING_KEY_PREV    1u /* key_chain(): the key of the page before. */
#define PAGING_KEY_NEXT    2u /* key_chain(): the key of the page after. */

/* What paging_host_t.config_type answers for a top-level config key. */
#define PAGING_CONFIG_ABSENT 0u /* no such key. */
#define PAGING_CONFIG_NULL   1u /* JSON null. */
#define PAGING_CONFIG_BOOL   2u /* true or false: config_bool reads it. */
#define PAGING_CONFIG_INT    3u /* a number without fraction or exponent that fits int64_t: config_int (and config_double) read it. */
#define PAGING_CONFIG_DOUBLE 4u /* any other number: config_double reads it. */
#define PAGING_CONFIG_STRING 5u /* a string: config_string reads it. */
#define PAGING_CONFIG_ARRAY  6u /* an array: read it from config_json. */
#define PAGING_CONFIG_OBJECT 7u /* an object: read it from config_json. */

typedef struct paging_host paging_host_t;

/* The host's table. Each plugin instance gets its own paging_host_t, owned by the host and
 * valid from the create_* call until that instance's destroy() returns. The table is never
 * modified while the instance lives. */
struct paging_host {
    /* ---- ABI 1.0 draft members ---- */

    /* The ABI version the host was built against (for messages: test members with
     * PAGING_STRUCT_HAS and capabilities with get_extension). [any-thread] Value member. */
    paging_version_t abi_version;

    /* sizeof(paging_host_t) in the host's headers (version.h, rule 2). [any-thread] Value member. */
    uint32_t struct_size;

    /* The host's private data; plugins never read or write it. Owned by the host. [any-thread] */
    void *host_data;

    /* Writes `message` (NUL-terminated UTF-8, borrowed for the call; the host copies it, up to
     * 64 KiB: a longer one is cut there and says how many bytes more it had) at `level`
     * (PAGING_LOG_*) to the host's log, tagged with the plugin instance. [any-thread] */
    void (*log)(const paging_host_t *host, uint32_t level, const char *message);

    /* ---- configuration - during create_source/create_interceptor only, on its thread ----
     * A NULL `key` is answered as for a key the config does not have (and logged). */

    /* The whole `config` object of this plugin as JSON text ("{}" when absent). The string is
     * owned by the host, NUL-terminated, and valid until the create_* call returns. [create-only] */
    const char *(*config_json)(const paging_config_t *config);

    /* The top-level string value for `key` (NUL-terminated, borrowed), or NULL when absent or
     * not a string (config_type tells which). The returned string is owned by the host and valid until the create_* call
     * returns; copy it to keep it. NULL too for a string holding U+0000, which a C string would
     * cut short (the host logs why; a manifest with one is refused before create). [create-only] */
    const char *(*config_string)(const paging_config_t *config, const char *key);

    /* The top-level integer for `key` (NUL-terminated, borrowed), or default_value when absent
     * or not an integer (config_type tells which). Returns a value; nothing to free. [create-only] */
    int64_t (*config_int)(const paging_config_t *config, const char *key, int64_t default_value);

    /* The top-level boolean for `key` as 1/0, or default_value when absent or not a boolean
     * (config_type tells which).
     * Returns a value; nothing to free. [create-only] */
    uint32_t (*config_bool)(const paging_config_t *config, const char *key, uint32_t default_value);

    /* The top-level number for `key`, or default_value when absent or not a number
     * (config_type tells which). Returns a
     * value; nothing to free. [create-only] */
    double (*config_double)(const paging_config_t *config, const char *key, double default_value);

    /* Records why create_* is about to return NULL: `code` (PAGING_ERR_*) and `message`
     * (NUL-terminated, borrowed; the host copies it, as log's). Call it at most once, then return NULL.
     * A NULL return without it is reported as PAGING_ERR_INTERNAL; a second call is ignored;
     * an instance returned after it is destroyed, and create fails all the same. [create-only] */
    void (*config_fail)(const paging_config_t *config, paging_status_t code, const char *message);

    /* ---- intercept result builder - during the intercept() that received `out`, on its thread ---- */

    /* Rewrites the request's key; used with PROCEED/PROCEED_AND_OBSERVE. `key` is borrowed for
     * the call; the host copies it. The keys around the new key are the source's key_chain()
     * for it, as for any request. A refused call here or in the two below
     * (PAGING_ERR_INVALID_ARGUMENT) fails the intercept whatever it returns: the request it
     * would pass on is not the one the plugin meant. [intercept-only] */
    paging_status_t (*out_set_key)(paging_intercept_out_t *out, paging_bytes_t key);

    /* Rewrites the request's page size; used with PROCEED/PROCEED_AND_OBSERVE. Value
     * argument: 0, and a size above the host's max_items_per_page (a manifest's setting; its
     * page could not be taken), are refused. [intercept-only] */
    paging_status_t (*out_set_page_size)(paging_intercept_out_t *out, uint32_t page_size);

    /* Adds or replaces the request param `name`; used with PROCEED/PROCEED_AND_OBSERVE. Both
     * are borrowed for the call; the host copies them. At most 1024 params and 1 MiB of names
     * and values in all. [intercept-only] */
    paging_status_t (*out_set_param)(paging_intercept_out_t *out, paging_bytes_t name, paging_bytes_t value);

    /* Appends one item (one JSON value) to the page returned with COMPLETE. `item` is borrowed
     * for the call; the host copies it. A refused call here or in the three below
     * (PAGING_ERR_INVALID_ARGUMENT) fails an answer with the page (COMPLETE,
     * COMPLETE_THEN_REVALIDATE, PROCEED_OR_FALL_BACK), not a PROCEED: a store whose copy turns
     * out broken loads the page from the source. [intercept-only] */
    paging_status_t (*out_add_item)(paging_intercept_out_t *out, paging_bytes_t item);

    /* Sets the previous-page key of the page returned with COMPLETE; NULL clears it. `key` and
     * what it points to are borrowed for the call; the host copies them. [intercept-only] */
    paging_status_t (*out_set_prev_key)(paging_intercept_out_t *out, const paging_bytes_t *key);

    /* Sets the next-page key of the page returned with COMPLETE; NULL clears it. `key` and
     * what it points to are borrowed for the call; the host copies them. [intercept-only] */
    paging_status_t (*out_set_next_key)(paging_intercept_out_t *out, const paging_bytes_t *key);

    /* Sets the PAGING_PAGE_* flags of the page returned with COMPLETE (replaces earlier
     * flags). Value argument. [intercept-only] */
    paging_status_t (*out_set_flags)(paging_intercept_out_t *out, uint32_t flags);

    /* Records the failure returned with FAIL: `code` (PAGING_ERR_*) and `message`
     * (NUL-terminated, borrowed; the host copies it, as log's; NULL: none). [intercept-only] */
    paging_status_t (*out_fail)(paging_intercept_out_t *out, paging_status_t code, const char *message);

    /* ---- key results - during the refresh_key()/key_chain() that received `out`, on its thread ---- */

    /* Sets the key in `slot` (PAGING_KEY_*); NULL means "no key in that slot". `key` and what
     * it points to are borrowed for the call; the host copies them. An unknown slot returns
     * PAGING_ERR_INVALID_ARGUMENT, and fails the call it was made in whatever that returns: a
     * key_chain() its load, a refresh_key() the source's creation (the host reads the refresh
     * key as it creates a source). [keys-only: during the refresh_key()/key_chain() call] */
    paging_status_t (*keys_set)(paging_keys_out_t *out, uint32_t slot, const paging_bytes_t *key);

    /* ---- completing a fetch ----
     * Callable from any thread, from the moment fetch() is entered until the fetch is completed
     * or failed (from inside fetch() is fine). Fetch ids are opaque integers, not pointers: an
     * unknown or finished id (completed, failed, or its source destroyed) returns
     * PAGING_ERR_INVALID_ARGUMENT and is logged; it never crashes. A fetch the host ended itself
     * (it cancelled it, or it timed out) returns PAGING_ERR_CANCELLED or PAGING_ERR_TIMEOUT to
     * the plugin's later calls for it: completing it after cancel() is expected, not misuse.
     * A refused call (PAGING_ERR_INVALID_ARGUMENT: an item that is not one JSON value, NULL
     * data, a page past max_items_per_page or max_page_bytes) fails the fetch with the reason,
     * logged: the id is finished, and later calls for it return PAGING_ERR_INVALID_ARGUMENT.
     * Calls for one id must not overlap; calls for different ids may. */

    /* Appends one item (one JSON value) to the fetch's page. `item` is borrowed for the call;
     * the host copies it. [any-thread] */
    paging_status_t (*fetch_add_item)(const paging_host_t *host, uint64_t fetch_id, paging_bytes_t item);

    /* Sets the previous-page key of the fetch's page; NULL clears it. Borrowed for the call;
     * the host copies it. [any-thread] */
    paging_status_t (*fetch_set_prev_key)(const paging_host_t *host, uint64_t fetch_id, const paging_bytes_t *key);

    /* Sets the next-page key of the fetch's page; NULL clears it. Borrowed for the call; the
     * host copies it. [any-thread] */
    paging_status_t (*fetch_set_next_key)(const paging_host_t *host, uint64_t fetch_id, const paging_bytes_t *key);

    /* Sets the PAGING_PAGE_* flags of the fetch's page (replaces earlier flags). Value
     * argument. [any-thread] */
    paging_status_t (*fetch_set_flags)(const paging_host_t *host, uint64_t fetch_id, uint32_t flags);

    /* Completes the fetch with the items/keys/flags set so far; the id is finished afterwards.
     * [any-thread] */
    paging_status_t (*fetch_complete)(const paging_host_t *host, uint64_t fetch_id);

    /* Fails the fetch with `code` (PAGING_ERR_*) and `message` (NUL-terminated, borrowed; the
     * host copies it, as log's; NULL: none); the id is finished afterwards. [any-thread] */
    paging_status_t (*fetch_fail)(const paging_host_t *host, uint64_t fetch_id, paging_status_t code, const char *message);

    /* ---- ABI 1.0 ---- */

    /* The host's table for the extension `id` (NUL-terminated, e.g. PAGING_EXT_LOG_LEVEL; see
     * extensions.h), or NULL when this host does not offer it. The table is static, owned by
     * the host and valid until the instance's destroy() returns; call its functions with this
     * `host`. Cheap: ask once in create_* and keep the pointer. [any-thread] */
    const void *(*get_extension)(const paging_host_t *host, const char *id);

    /* What the top-level value for `key` (NUL-terminated, borrowed) is: PAGING_CONFIG_*. Tells
     * an absent key (PAGING_CONFIG_ABSENT: use your default) from one of the wrong type (refuse
     * it with config_fail, naming the key and what you expected). [create-only] */
    uint32_t (*config_type)(const paging_config_t *config, const char *key);

    /* Members added in later 1.x versions go here, at the end. */
};

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* PAGING_HOST_H */
