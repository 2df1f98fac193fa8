// The http source's transport: libcurl's multi interface driven by one thread per client.
//
// Why one multi handle: its connection cache keeps connections alive across pages (no new TCP
// handshake a page), and one poll loop serves every transfer without a thread per request.
// Redirects are not followed here: the caller decides, host by host, which headers go along.
// Every body and header byte is counted as it arrives (after decompression), so neither an
// endless body, an inflating gzip bomb nor a huge header is buffered past its limit.
#define _GNU_SOURCE /* pthread_setname_np */
#include "http_core.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct buffer {
    uint8_t *data;
    size_t len;
    size_t cap;
} buffer;

static int buffer_append(buffer *b, const void *bytes, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 16384;
        while (cap < b->len + n + 1) cap *= 2;
        uint8_t *grown = realloc(b->data, cap);
        if (!grown) return -1;
        b->data = grown;
        b->cap = cap;
    }
    memcpy(b->data + b->len, bytes, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

typedef struct transfer {
    struct transfer *next;
    uint64_t id;
    CURL *easy;
    struct curl_slist *headers;
    ht_callback callback;
    void *context;
    buffer body;
    buffer head;
    size_t max_body;
    size_t max_head;
    size_t head_total;      // header bytes of every response so far (1xx ones too)
    int head_ended;         // the last header line was the blank one ending a response's headers
    int limit;
    int not_http;
    int cancelled;
    char error[CURL_ERROR_SIZE];
} transfer;

struct ht_client {
    CURLM *multi;
    pthread_t thread;
    pthread_mutex_t lock;
    transfer *pending;      // started, not yet handed to the multi handle (guarded by lock)
    uint64_t *cancels;      // ids to cancel (guarded by lock)
    size_t cancel_count, cancel_cap;
    int stopping;           // guarded by lock
    int detached;           // freed from its own thread: the thread frees the client
    uint64_t next_id;       // guarded by lock
    transfer *active;       // in the multi handle (thread only)
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_ok = 0;
static void global_init(void) { global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK; }

static void transfer_free(transfer *t) {
    if (t->easy) curl_easy_cleanup(t->easy);
    curl_slist_free_all(t->headers);
    free(t->body.data);
    free(t->head.data);
    free(t);
}

static size_t on_body(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t n = size * count;
    long status = 0;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &status);
    if (status == 0) {
        // HTTP/0.9 (allowed only to see it): keep a little of what came, for the message.
        t->not_http = 1;
        size_t room = t->body.len < 200 ? 200 - t->body.len : 0;
        buffer_append(&t->body, data, n < room ? n : room);
        return t->body.len >= 200 ? 0 : n;
    }
    if (t->body.len + n > t->max_body) {
        t->limit = HT_LIMIT_BODY;
        return 0; // aborts the transfer (CURLE_WRITE_ERROR)
    }
    return buffer_append(&t->body, data, n) == 0 ? n : 0;
}

static size_t on_header(char *data, size_t size, size_t count, void *user) {
    transfer *t = user;
    size_t n = size * count;
    // The limit counts the headers of every response, so that neither one huge response nor
    // endless 1xx ones pass it.
    t->head_total += n;
    if (t->head_total > t->max_head) {
        t->limit = HT_LIMIT_HEADERS;
        return 0;
    }
    // After the blank line that ends a response's headers (a 100 Continue's, say), a status
    // line starts the headers of the next response: only the final one's are kept. Any other
    // line there is a trailer of a chunked body, which libcurl hands here too: not kept (it
    // replaced the headers, and with them the Link to the next page).
    if (t->head_ended) {
        if (n < 5 || memcmp(data, "HTTP/", 5) != 0) return n;
        t->head.len = 0;
    }
    t->head_ended = (n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n');
    return buffer_append(&t->head, data, n) == 0 ? n : 0;
}

static void finish(transfer *t, CURLcode code) {
    ht_response r;
    memset(&r, 0, sizeof r);
    r.curl_code = (int)code;
    r.error = code == CURLE_OK ? "" : (t->error[0] ? t->error : curl_easy_strerror(code));
    r.limit = t->limit;
    // libcurl refuses a header line over 100 KiB as "out of memory" once the status line and
    // earlier headers came: say what it was.
    if (code == CURLE_OUT_OF_MEMORY && t->head.len > 0 && t->body.len == 0 && !t->limit) r.limit = HT_LIMIT_HEADER_LINE;
    r.not_http = t->not_http;
    r.cancelled = t->cancelled;
    curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &r.status);
    r.body = t->body.data ? t->body.data : (const uint8_t *)"";
    r.body_len = t->body.len;
    r.headers = t->head.data ? (const char *)t->head.data : "";
    r.headers_len = t->head.len;
    char *location = NULL;
    if (r.status >= 300 && r.status < 400) curl_easy_getinfo(t->easy, CURLINFO_REDIRECT_URL, &location);
    r.redirect_url = location;
    t->callback(t->context, &r);
}

/// Whether ht_client_free was called (perhaps by the callback that just ran).
static int is_stopping(ht_client *c) {
    pthread_mutex_lock(&c->lock);
    int stopping = c->stopping;
    pthread_mutex_unlock(&c->lock);
    return stopping;
}

static void *run(void *arg) {
    ht_client *c = arg;
    for (;;) {
        pthread_mutex_lock(&c->lock);
        int stopping = c->stopping;
        transfer *incoming = c->pending;
        c->pending = NULL;
        uint64_t *cancels = c->cancels;
        size_t cancel_count = c->cancel_count;
        c->cancels = NULL;
        c->cancel_count = c->cancel_cap = 0;
        pthread_mutex_unlock(&c->lock);

        while (incoming) {
            transfer *t = incoming;
            incoming = t->next;
            if (stopping) { transfer_free(t); continue; }
            if (curl_multi_add_handle(c->multi, t->easy) != CURLM_OK) {
                finish(t, CURLE_FAILED_INIT);
                transfer_free(t);
                continue;
            }
            t->next = c->active;
            c->active = t;
        }
        for (size_t i = 0; i < cancel_count && !stopping && !is_stopping(c); i++) {
            for (transfer **p = &c->active; *p; p = &(*p)->next) {
                if ((*p)->id != cancels[i]) continue;
                transfer *t = *p;
                *p = t->next;
                curl_multi_remove_handle(c->multi, t->easy);
                t->cancelled = 1;
                finish(t, CURLE_ABORTED_BY_CALLBACK);
                transfer_free(t);
                break;
            }
        }
        free(cancels);
        if (stopping || is_stopping(c)) break;

        int running = 0;
        curl_multi_perform(c->multi, &running);
        CURLMsg *msg;
        int left;
        while (!is_stopping(c) && (msg = curl_multi_info_read(c->multi, &left))) {
            if (msg->msg != CURLMSG_DONE) continue;
            for (transfer **p = &c->active; *p; p = &(*p)->next) {
                if ((*p)->easy != msg->easy_handle) continue;
                transfer *t = *p;
                *p = t->next;
                CURLcode code = msg->data.result;
                curl_multi_remove_handle(c->multi, t->easy);
                finish(t, code);
                transfer_free(t);
                break;
            }
        }
        // Transfers started or cancelled meanwhile: handled before waiting.
        pthread_mutex_lock(&c->lock);
        int more = c->pending != NULL || c->cancel_count > 0;
        pthread_mutex_unlock(&c->lock);
        if (!more) curl_multi_poll(c->multi, NULL, 0, 1000, NULL);
    }
    while (c->active) {
        transfer *t = c->active;
        c->active = t->next;
        curl_multi_remove_handle(c->multi, t->easy);
        transfer_free(t);
    }
    if (c->detached) {
        curl_multi_cleanup(c->multi);
        pthread_mutex_destroy(&c->lock);
        free(c);
    }
    return NULL;
}

ht_client *ht_client_new(void) {
    pthread_once(&global_once, global_init);
    if (!global_ok) return NULL;
    ht_client *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->multi = curl_multi_init();
    if (!c->multi) { free(c); return NULL; }
    // Keep connections to a few hosts (an API and its token endpoint) alive between pages.
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 8L);
    pthread_mutex_init(&c->lock, NULL);
    c->next_id = 1;
    if (pthread_create(&c->thread, NULL, run, c) != 0) {
        curl_multi_cleanup(c->multi);
        pthread_mutex_destroy(&c->lock);
        free(c);
        return NULL;
    }
    // Named for top, perf and gdb (at most 15 characters); otherwise it shows the name of the
    // thread that created it.
    pthread_setname_np(c->thread, "paging-http");
    return c;
}

uint64_t ht_client_start(ht_client *c, const ht_request *req, ht_callback callback, void *context) {
    transfer *t = calloc(1, sizeof *t);
    if (!t) return 0;
    t->easy = curl_easy_init();
    if (!t->easy) { free(t); return 0; }
    t->callback = callback;
    t->context = context;
    t->max_body = req->max_body_bytes;
    t->max_head = req->max_header_bytes;
    for (size_t i = 0; i < req->header_count; i++) {
        struct curl_slist *grown = curl_slist_append(t->headers, req->headers[i]);
        if (!grown) { transfer_free(t); return 0; }
        t->headers = grown;
    }
    // Without these, libcurl adds "Expect: 100-continue" to large POSTs and "Accept: */*".
    struct curl_slist *grown = curl_slist_append(t->headers, "Expect:");
    if (!grown) { transfer_free(t); return 0; }
    t->headers = grown;

    CURL *e = t->easy;
    int ok = 1;
    ok &= curl_easy_setopt(e, CURLOPT_URL, req->url) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_HTTPHEADER, t->headers) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "") == CURLE_OK; // every decoder built in
    ok &= curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, req->timeout_ms > 0 ? req->timeout_ms : 30000L) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_HTTP09_ALLOWED, 1L) == CURLE_OK; // to say what came instead
    ok &= curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)req->max_body_bytes) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_WRITEDATA, t) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_HEADERDATA, t) == CURLE_OK;
    ok &= curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->error) == CURLE_OK;
    if (req->ca_file) ok &= curl_easy_setopt(e, CURLOPT_CAINFO, req->ca_file) == CURLE_OK;
    if (req->method && strcmp(req->method, "POST") == 0) {
        ok &= curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len) == CURLE_OK;
        ok &= curl_easy_setopt(e, CURLOPT_COPYPOSTFIELDS, req->body ? (const char *)req->body : "") == CURLE_OK;
    }
    if (!ok) { transfer_free(t); return 0; }

    pthread_mutex_lock(&c->lock);
    if (c->stopping) {
        pthread_mutex_unlock(&c->lock);
        transfer_free(t);
        return 0;
    }
    uint64_t id = c->next_id++;
    t->id = id;
    if (pthread_equal(pthread_self(), c->thread)) {
        pthread_mutex_unlock(&c->lock);
        // From a callback (the client's thread, never inside libcurl): handed to libcurl and
        // sent at once, so that a page fetched ahead is on its way while the callback hands out
        // the current one, rather than after.
        if (curl_multi_add_handle(c->multi, t->easy) != CURLM_OK) {
            transfer_free(t);
            return 0;
        }
        t->next = c->active;
        c->active = t;
        int running = 0;
        curl_multi_perform(c->multi, &running);
        return id;
    }
    t->next = c->pending;
    c->pending = t;
    pthread_mutex_unlock(&c->lock);
    curl_multi_wakeup(c->multi);
    return id;
}

void ht_client_cancel(ht_client *c, uint64_t id) {
    pthread_mutex_lock(&c->lock);
    if (c->cancel_count == c->cancel_cap) {
        size_t cap = c->cancel_cap ? c->cancel_cap * 2 : 8;
        uint64_t *grown = realloc(c->cancels, cap * sizeof *grown);
        if (!grown) { pthread_mutex_unlock(&c->lock); return; }
        c->cancels = grown;
        c->cancel_cap = cap;
    }
    c->cancels[c->cancel_count++] = id;
    pthread_mutex_unlock(&c->lock);
    curl_multi_wakeup(c->multi);
}

void ht_client_free(ht_client *c) {
    if (!c) return;
    pthread_mutex_lock(&c->lock);
    c->stopping = 1;
    pthread_mutex_unlock(&c->lock);
    curl_multi_wakeup(c->multi);
    if (pthread_equal(pthread_self(), c->thread)) {
        c->detached = 1;
        pthread_detach(c->thread);
        return;
    }
    pthread_join(c->thread, NULL);
    free(c->cancels);
    curl_multi_cleanup(c->multi);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
