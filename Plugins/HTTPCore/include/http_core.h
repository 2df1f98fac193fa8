// The http source's hot path in C: a libcurl transport (one multi handle and one thread per
// client: connections are reused, bodies decompressed, every byte bounded while it is read) and
// a JSON scanner that validates a body in one pass and finds values by JSON pointer without
// building a tree. Used by the `http` plugin only; not part of the plugin ABI.
#ifndef HTTP_CORE_H
#define HTTP_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// MARK: - Transport

/// Why a response has no usable body (besides a libcurl error code).
enum {
    HT_LIMIT_NONE = 0,
    HT_LIMIT_BODY = 1,     ///< the (decompressed) body passed max_body_bytes; reading stopped
    HT_LIMIT_HEADERS = 2,  ///< the response headers passed max_header_bytes; reading stopped
    HT_LIMIT_HEADER_LINE = 3, ///< one header line passed libcurl's own limit (100 KiB)
};

/// One request. Everything is borrowed for the duration of ht_client_start (copied).
typedef struct ht_request {
    const char *url;
    const char *method;              ///< "GET" (NULL) or "POST"
    const char *const *headers;      ///< "Name: value" lines
    size_t header_count;
    const uint8_t *body;             ///< POST body (copied)
    size_t body_len;
    long timeout_ms;                 ///< the whole transfer, connect to last byte
    size_t max_body_bytes;           ///< decompressed body bytes kept at most
    size_t max_header_bytes;         ///< header bytes of one response at most
    const char *ca_file;             ///< PEM certificates to verify https servers with (NULL: the system's)
} ht_request;

/// A finished transfer. Every pointer is valid during the callback only.
typedef struct ht_response {
    int curl_code;            ///< 0: a response was read (any status)
    const char *error;        ///< libcurl's message when curl_code != 0 ("" otherwise)
    int limit;                ///< HT_LIMIT_*: why reading stopped, if a limit did it
    int not_http;             ///< the reply did not start with an HTTP status line
    int cancelled;            ///< ht_client_cancel ended it
    long status;              ///< the HTTP status (0 when none was read)
    const uint8_t *body;
    size_t body_len;
    const char *headers;      ///< the header lines of the final response, CRLF-separated
    size_t headers_len;
    const char *redirect_url; ///< for a 3xx with Location: the absolute target (not followed)
} ht_response;

typedef void (*ht_callback)(void *context, const ht_response *response);

typedef struct ht_client ht_client;

/// A client: a libcurl multi handle (its connection cache) and the thread that drives it.
/// NULL when libcurl or the thread cannot be set up.
ht_client *ht_client_new(void);

/// Starts a request; `callback` runs exactly once on the client's thread with the response,
/// unless the client is freed first (then never). Returns the transfer's id (> 0), or 0 when
/// the request cannot be set up (the callback does not run). [any-thread]
uint64_t ht_client_start(ht_client *client, const ht_request *request, ht_callback callback, void *context);

/// Ends transfer `id` soon; its callback runs with `cancelled` set (unless it already ran).
/// An unknown id is ignored. [any-thread]
void ht_client_cancel(ht_client *client, uint64_t id);

/// Ends every transfer (their callbacks do not run), stops the thread and frees the client.
/// From the client's own thread (inside a callback) the thread stops after the callback.
void ht_client_free(ht_client *client);

// MARK: - JSON scanning

/// A pointer to look for: its tokens (RFC 6901, already unescaped); a token "*" matches every
/// element of an array.
typedef struct hj_pointer {
    const char *const *tokens;
    const size_t *token_lens;
    size_t token_count;
} hj_pointer;

typedef struct hj_range {
    size_t start;
    size_t end;
} hj_range;

/// Why the items pointer does not resolve (hj_result.items_path_problem).
enum {
    HJ_PATH_OK = 0,
    HJ_PATH_NOT_CONTAINER = 1, ///< a value on the path is not what its next token needs ("*": an array; a name: an object)
    HJ_PATH_MISSING = 2,       ///< an object has no member, or an array no element, that the next token names
    HJ_PATH_NOT_ARRAY = 3,     ///< the pointer resolves to something other than an array
};

/// What a scan found. Owned by the scanner: free with hj_result_free.
typedef struct hj_result {
    /// For each pointer, the values it matched, in document order.
    hj_range **matches;
    size_t *match_counts;
    /// The elements of the array(s) the first pointer matched (the items), in order; when the
    /// first pointer matched something that is not an array, items_not_array is set.
    hj_range *items;
    size_t item_count;
    uint8_t *item_has_space;  ///< per item: it holds whitespace outside strings
    int items_not_array;
    /// Where the items pointer stops resolving, if it does (the first place in the text): an
    /// HJ_PATH_* problem, how many of its tokens resolved (`items_path_depth`), and the byte
    /// offset of the value there (`items_path_at`). A "*" over an empty array is no problem.
    int items_path_problem;
    size_t items_path_depth;
    size_t items_path_at;
    /// Bit k: pointer k has a "*", and its last match (if any) is not in the last element of
    /// the arrays its last "*" goes through ("/data/*/id" when the last item has no "id").
    uint64_t not_in_last_element;
    size_t pointer_count;
    size_t items_cap;
    size_t flags_cap;
    size_t *match_caps;
} hj_result;

/// Validates `len` bytes as one JSON text (RFC 8259: UTF-8, nesting at most 512 deep) and finds
/// the values at `pointers`. Returns 0, or -1 with a message in `error` (naming the byte offset).
/// Without `check_items`, an item (an element of the first pointer's array) that is an array or
/// object and holds no other pointer's value is found by its brackets only, not validated: the
/// host validates every item it is handed; a scan with `check_items` says what is wrong.
int hj_scan(const uint8_t *text, size_t len, const hj_pointer *pointers, size_t pointer_count, int check_items,
            hj_result *result, char *error, size_t error_len);

void hj_result_free(hj_result *result);

/// Copies `len` bytes of valid JSON to `out` without whitespace outside strings; returns the
/// bytes written (at most len).
size_t hj_compact(const uint8_t *text, size_t len, uint8_t *out);

#ifdef __cplusplus
}
#endif

#endif
