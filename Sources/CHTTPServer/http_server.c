#define _GNU_SOURCE
#include "paging_http_server.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <dlfcn.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

/* libmicrohttpd is opened when a server starts, not when the program does: loading it (and
 * GnuTLS behind it) cost every `pager` command ~2 ms, and only `pager serve` uses it. */
static struct {
    __typeof__(&MHD_start_daemon) start_daemon;
    __typeof__(&MHD_stop_daemon) stop_daemon;
    __typeof__(&MHD_quiesce_daemon) quiesce_daemon;
    __typeof__(&MHD_get_daemon_info) get_daemon_info;
    __typeof__(&MHD_get_connection_values_n) get_connection_values_n;
    __typeof__(&MHD_get_connection_info) get_connection_info;
    __typeof__(&MHD_suspend_connection) suspend_connection;
    __typeof__(&MHD_resume_connection) resume_connection;
    __typeof__(&MHD_create_response_from_buffer) create_response_from_buffer;
    __typeof__(&MHD_add_response_header) add_response_header;
    __typeof__(&MHD_queue_response) queue_response;
    __typeof__(&MHD_destroy_response) destroy_response;
} mhd;
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;
static char mhd_error[300];

#define MHD_LIBRARY "libmicrohttpd.so.12"
#define MHD_SYMBOL(field, name) \
    if (mhd_error[0] == '\0' && (*(void **)&mhd.field = dlsym(library, name)) == NULL) \
        snprintf(mhd_error, sizeof mhd_error, "%s has no %s", MHD_LIBRARY, name);

static void mhd_load(void)
{
    void *library = dlopen(MHD_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        snprintf(mhd_error, sizeof mhd_error, "cannot load %s (GNU libmicrohttpd; on Debian: apt install libmicrohttpd12): %s",
                 MHD_LIBRARY, dlerror());
        return;
    }
    MHD_SYMBOL(start_daemon, "MHD_start_daemon")
    MHD_SYMBOL(stop_daemon, "MHD_stop_daemon")
    MHD_SYMBOL(quiesce_daemon, "MHD_quiesce_daemon")
    MHD_SYMBOL(get_daemon_info, "MHD_get_daemon_info")
    MHD_SYMBOL(get_connection_values_n, "MHD_get_connection_values_n")
    MHD_SYMBOL(get_connection_info, "MHD_get_connection_info")
    MHD_SYMBOL(suspend_connection, "MHD_suspend_connection")
    MHD_SYMBOL(resume_connection, "MHD_resume_connection")
    MHD_SYMBOL(create_response_from_buffer, "MHD_create_response_from_buffer")
    MHD_SYMBOL(add_response_header, "MHD_add_response_header")
    MHD_SYMBOL(queue_response, "MHD_queue_response")
    MHD_SYMBOL(destroy_response, "MHD_destroy_response")
}

/* An open connection, while it waits for a request's line and headers: since it opened, or
 * since its last response was sent (keep-alive); and while its request waits for the handler's
 * answer (`waiting`), watched for its client going away. */
typedef struct tracked_connection {
    struct tracked_connection *prev, *next;
    int fd;
    int awaiting_headers;
    int nul_decoded; /* the request's path or query had a %00 (set by unescape) */
    int bad_escape;  /* ... or a % not followed by two hex digits (set by unescape) */
    uint64_t since_ms;
    struct paging_http_exchange *waiting; /* under the server's lock */
} tracked_connection;

struct paging_http_server {
    struct MHD_Daemon *daemon;
    paging_http_handler handler;
    paging_http_refused refused;
    paging_http_gone gone;
    uint64_t next_exchange_id; /* under `lock` */
    void *context;
    uint16_t port;
    /* Requests begun and not yet complete (their response sent, or their connection ended):
     * a handler's answer is only queued, and the server's thread sends it later. */
    pthread_mutex_t lock;
    pthread_cond_t completed;
    size_t open;
    /* Of those, the ones handed to the handler and not yet complete: their connections may be
     * suspended, and libmicrohttpd ends the process when it is stopped with one. */
    size_t handed;
    /* Set by paging_http_stop_accepting: a request that comes on a connection kept alive is
     * answered 503 and its connection closed (under `lock`). */
    int refusing;
    /* Every open connection (under `lock`), and the thread that shuts down those whose
     * headers take longer than header_timeout_ms, however steadily they trickle in: the idle
     * timeout alone let a byte every few seconds hold a connection for ever. */
    tracked_connection connections;
    unsigned header_timeout_ms;
    /* The bytes of the answers queued and not yet sent (under `lock`): clients that never read
     * held a copy of their page each, 600 MB for 60 of them. */
    size_t unsent_bytes;
    size_t max_unsent_bytes;
    /* A request's line and headers at most, as they sit in libmicrohttpd's memory (below). */
    size_t request_bytes;
    pthread_t reaper;
    int reaper_running;
    int stopping;
    pthread_cond_t stop_reaper;
};

static uint64_t now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (uint64_t)now.tv_sec * 1000u + (uint64_t)now.tv_nsec / 1000000u;
}

/* The connection's tracking record, set when it opened. */
static tracked_connection *tracked(struct MHD_Connection *connection)
{
    const union MHD_ConnectionInfo *info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info != NULL ? info->socket_context : NULL;
}

static void on_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    paging_http_server *server = cls;
    tracked_connection *entry = *socket_context;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        entry = calloc(1, sizeof *entry);
        if (entry == NULL || info == NULL) {
            free(entry);
            return;
        }
        entry->fd = info->connect_fd;
        entry->awaiting_headers = 1;
        entry->since_ms = now_ms();
        pthread_mutex_lock(&server->lock);
        entry->next = server->connections.next;
        entry->prev = &server->connections;
        entry->next->prev = entry;
        server->connections.next = entry;
        pthread_mutex_unlock(&server->lock);
        *socket_context = entry;
    } else if (entry != NULL) {
        pthread_mutex_lock(&server->lock);
        entry->prev->next = entry->next;
        entry->next->prev = entry->prev;
        pthread_mutex_unlock(&server->lock);
        free(entry);
        *socket_context = NULL;
    }
}

/* Marks the connection's request as arrived whole (1) or its response as sent (0: the next
 * request's headers are awaited from now). */
static void headers_arrived(paging_http_server *server, struct MHD_Connection *connection, int arrived)
{
    tracked_connection *entry = tracked(connection);
    if (entry == NULL) return;
    pthread_mutex_lock(&server->lock);
    entry->awaiting_headers = !arrived;
    entry->since_ms = now_ms();
    pthread_mutex_unlock(&server->lock);
}

typedef struct query_argument { char *key; char *value; } query_argument;

struct paging_http_exchange {
    struct MHD_Connection *connection;
    paging_http_server *server;
    char *method;
    char *path;
    query_argument *query;
    size_t query_count;
    size_t query_capacity;
    int query_has_nul; /* a query name or value decoded to a NUL byte */
    int nul_decoded;   /* the path or the query did (unescape) */
    int bad_escape;    /* the path or the query had a % not followed by two hex digits (unescape) */
    int started;      /* handed to the handler (the connection is suspended) */
    int answered;     /* paging_http_respond was called */
    uint64_t id;
    tracked_connection *entry; /* its connection's record (outlives the exchange) */
    int done;         /* answered, under the server's lock: no longer watched */
    int gone_told;    /* its client went away, and `gone` was told (under the server's lock) */
    pthread_mutex_t lock;
    struct MHD_Response *response; /* set by paging_http_respond_with_header */
    unsigned status;
    size_t unsent_bytes; /* its answer's part of the server's unsent_bytes */
};

/* Whether the client of `fd` has gone away: closed its side (or shut down its sending half),
 * or reset the connection. POLLRDHUP says so even when bytes it sent before are still unread
 * (a byte, or a pipelined request, after this one hid its close from a peek). */
static int client_gone(int fd)
{
    struct pollfd watched = { fd, POLLRDHUP, 0 };
    return poll(&watched, 1, 0) > 0 && (watched.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

#define GONE_PER_ROUND 64

/* A few times a second: shuts down each connection whose headers are late (the server's thread
 * then reads the end of the stream and closes it), and tells `gone` of each request waiting
 * for its answer whose client went away (its load is cancelled: a client that sent requests
 * and closed at once had them load for nobody, each holding a request slot). */
static void *watch_connections(void *cls)
{
    paging_http_server *server = cls;
    unsigned period_ms = server->header_timeout_ms == 0 || server->header_timeout_ms / 4 > 250 ? 250 : server->header_timeout_ms / 4 + 1;
    pthread_mutex_lock(&server->lock);
    while (!server->stopping) {
        struct timespec wake;
        tracked_connection *entry;
        uint64_t now = now_ms(), gone[GONE_PER_ROUND];
        size_t gone_count = 0, i;
        for (entry = server->connections.next; entry != &server->connections; entry = entry->next) {
            if (server->header_timeout_ms > 0 && entry->awaiting_headers && now - entry->since_ms > server->header_timeout_ms) {
                shutdown(entry->fd, SHUT_RDWR);
                entry->awaiting_headers = 0;
            }
            if (entry->waiting != NULL && !entry->waiting->gone_told && gone_count < GONE_PER_ROUND && client_gone(entry->fd)) {
                entry->waiting->gone_told = 1;
                gone[gone_count++] = entry->waiting->id;
            }
        }
        /* Told without the lock: the handler may answer from `gone`. */
        if (gone_count > 0 && server->gone != NULL) {
            pthread_mutex_unlock(&server->lock);
            for (i = 0; i < gone_count; i++) server->gone(server->context, gone[i]);
            pthread_mutex_lock(&server->lock);
            continue;
        }
        clock_gettime(CLOCK_REALTIME, &wake);
        wake.tv_nsec += (long)period_ms * 1000000L;
        if (wake.tv_nsec >= 1000000000L) {
            wake.tv_sec++;
            wake.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&server->stop_reaper, &server->lock, &wake);
    }
    pthread_mutex_unlock(&server->lock);
    return NULL;
}

static char *copy(const char *text) { return text == NULL ? NULL : strdup(text); }

static enum MHD_Result collect_argument(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                        const char *value, size_t value_size)
{
    paging_http_exchange *exchange = cls;
    (void)kind;
    /* %00 decodes to a NUL, which would cut the C string short: "ab%00cd" would be taken for "ab". */
    if ((key != NULL && strlen(key) != key_size) || (value != NULL && strlen(value) != value_size)) {
        exchange->query_has_nul = 1;
        return MHD_YES;
    }
    if (exchange->query_count == exchange->query_capacity) {
        size_t capacity = exchange->query_capacity == 0 ? 8 : exchange->query_capacity * 2;
        query_argument *grown = realloc(exchange->query, capacity * sizeof *grown);
        if (grown == NULL) return MHD_NO;
        exchange->query = grown;
        exchange->query_capacity = capacity;
    }
    exchange->query[exchange->query_count].key = copy(key);
    exchange->query[exchange->query_count].value = copy(value);
    exchange->query_count++;
    return MHD_YES;
}

static void free_exchange(paging_http_exchange *exchange)
{
    size_t i;
    for (i = 0; i < exchange->query_count; i++) {
        free(exchange->query[i].key);
        free(exchange->query[i].value);
    }
    free(exchange->query);
    free(exchange->method);
    free(exchange->path);
    if (exchange->response != NULL) mhd.destroy_response(exchange->response);
    pthread_mutex_destroy(&exchange->lock);
    free(exchange);
}

/* Answers a request the server refuses itself (told to `refused`, for counting). */
static enum MHD_Result answer_now(paging_http_server *server, const char *path, struct MHD_Connection *connection,
                                  unsigned status, const char *body, int close)
{
    struct MHD_Response *response = mhd.create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    enum MHD_Result result;
    if (server->refused != NULL) server->refused(server->context, path != NULL ? path : "", status);
    if (response == NULL) return MHD_NO;
    mhd.add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    mhd.add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED) mhd.add_response_header(response, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    if (close) mhd.add_response_header(response, MHD_HTTP_HEADER_CONNECTION, "close");
    result = mhd.queue_response(connection, status, response);
    mhd.destroy_response(response);
    return result;
}

/* How a request says where its body ends: its Content-Length headers and Transfer-Encodings. */
typedef struct body_framing {
    unsigned content_lengths;
    int content_length_valid; /* every value is 1 to 18 digits, and all are the same */
    char first[24];
    unsigned transfer_encodings;
    int spaced_name; /* a header name with a space or tab (before its colon) */
} body_framing;

static enum MHD_Result note_framing(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                    const char *value, size_t value_size)
{
    body_framing *framing = cls;
    size_t i;
    (void)kind; (void)key_size;
    if (key == NULL) return MHD_YES;
    if (strpbrk(key, " \t") != NULL) framing->spaced_name = 1;
    if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        framing->transfer_encodings++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
        /* At most 18 digits: any length a request may have, and no overflow. */
        int digits = value != NULL && value_size > 0 && value_size <= 18;
        for (i = 0; digits && i < value_size; i++) digits = value[i] >= '0' && value[i] <= '9';
        if (framing->content_lengths++ == 0) {
            framing->content_length_valid = digits;
            if (digits) memcpy(framing->first, value, value_size + 1);
        } else if (!digits || strcmp(framing->first, value) != 0) {
            framing->content_length_valid = 0;
        }
    }
    return MHD_YES;
}

/* Why the request's body cannot be told from the next request with certainty (RFC 9112 6.3:
 * several differing Content-Lengths, one that is not a number, or one with a Transfer-Encoding;
 * 5.1: a header name with whitespace before its colon, "Transfer-Encoding :", which one reader
 * takes for the header and another not), or NULL. A proxy in front may read such a request
 * otherwise than this server would: one request to the proxy, two here (request smuggling).
 * `has_body`: the request says a body follows. */
static const char *ambiguous_framing(struct MHD_Connection *connection, int *has_body)
{
    body_framing framing;
    memset(&framing, 0, sizeof framing);
    if (mhd.get_connection_values_n(connection, MHD_HEADER_KIND, note_framing, &framing) < 0) return "{\"error\": \"unreadable headers\"}\n";
    if (framing.spaced_name) return "{\"error\": \"a header name with whitespace before its colon\"}\n";
    *has_body = framing.transfer_encodings > 0 || (framing.content_lengths > 0 && strspn(framing.first, "0") != strlen(framing.first));
    if (framing.content_lengths > 0 && !framing.content_length_valid)
        return "{\"error\": \"Content-Length headers that differ, or one that is not a number\"}\n";
    if (framing.content_lengths > 0 && framing.transfer_encodings > 0)
        return "{\"error\": \"both Content-Length and Transfer-Encoding\"}\n";
    return NULL;
}

/* libmicrohttpd 0.9.75 keeps each query parameter (about 64 bytes) in its connection's memory
 * pool beside the request line while it reads it, and when they do not fit it neither answers
 * nor closes the connection: the client waited for the header timeout. So a request line with
 * more than MAX_QUERY_ARGUMENTS parameters, or a query longer than MAX_QUERY_BYTES, is refused:
 * with the largest path it leaves the headers half the pool (32 KiB). */
#define MAX_QUERY_ARGUMENTS 100
#define MAX_QUERY_BYTES ((size_t)16 << 10)

/* An answer this small is sent whatever the answers not read yet hold (unsent_bytes). */
#define SMALL_ANSWER_BYTES ((size_t)64 << 10)

/* The state of a request answered by on_request_line. */
static char refused_request;

/* How long a refusal sent on the socket itself may wait for room there. */
#define REFUSAL_SEND_MS 200

/* Answers `status` on the connection's socket itself, then shuts the socket down (the server's
 * thread reads the end of the stream and closes it): for a request libmicrohttpd could not
 * answer from its connection's memory. Told to `refused`, for counting. Whether it was sent. */
static int refuse_on_socket(paging_http_server *server, struct MHD_Connection *connection, const char *path,
                            unsigned status, const char *reason, const char *body)
{
    const union MHD_ConnectionInfo *info = mhd.get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    char head[512];
    int head_length;
    size_t sent = 0;
    uint64_t deadline = now_ms() + REFUSAL_SEND_MS;
    if (info == NULL) return 0;
    if (server->refused != NULL) server->refused(server->context, path, status);
    head_length = snprintf(head, sizeof head,
                           "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nCache-Control: no-store\r\n"
                           "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", status, reason, strlen(body), body);
    /* The answer before it (a pipelined request's) may still fill the socket's send buffer: the
     * refusal goes after it as room comes, for REFUSAL_SEND_MS at most (this is the server's
     * thread); a client that reads nothing meanwhile sees the connection end without it. */
    while (head_length > 0 && sent < (size_t)head_length) {
        ssize_t n = send(info->connect_fd, head + sent, (size_t)head_length - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n > 0) {
            sent += (size_t)n;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else {
            struct pollfd writable = { .fd = info->connect_fd, .events = POLLOUT, .revents = 0 };
            uint64_t now = now_ms();
            if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) || now >= deadline
                || poll(&writable, 1, (int)(deadline - now)) <= 0) break;
        }
    }
    shutdown(info->connect_fd, SHUT_RDWR);
    return 1;
}

/* A header or query parameter as it sits in a connection's memory: its text and libmicrohttpd's
 * record of it (56 bytes in 0.9.75, rounded up). */
#define HEADER_RECORD_BYTES 64

static enum MHD_Result add_footprint(void *cls, enum MHD_ValueKind kind, const char *key, size_t key_size,
                                     const char *value, size_t value_size)
{
    (void)kind;
    (void)key;
    (void)value;
    *(size_t *)cls += key_size + value_size + 4 + HEADER_RECORD_BYTES;
    return MHD_YES;
}

/* libmicrohttpd answers nothing, and closes the connection, when a request fits its
 * connection's memory but the answer's headers do not (within ~150 bytes of the limit): the
 * memory is `request_bytes` and some room for the answer, and a request past `request_bytes`
 * is refused here (431) on the socket. */
#define ANSWER_ROOM_BYTES ((size_t)16 << 10)

static size_t request_footprint(struct MHD_Connection *connection, const char *method, const char *url)
{
    size_t bytes = strlen(method) + strlen(url) + sizeof " HTTP/1.1\r\n";
    if (mhd.get_connection_values_n(connection, MHD_HEADER_KIND, add_footprint, &bytes) < 0) return SIZE_MAX;
    if (mhd.get_connection_values_n(connection, MHD_GET_ARGUMENT_KIND, add_footprint, &bytes) < 0) return SIZE_MAX;
    return bytes;
}

/* Sees each request line before libmicrohttpd splits its query: one it could not keep (above)
 * is answered 414 on its socket, which is then shut down (the server's thread reads the end of
 * the stream and closes it). Returns the request's state: `refused_request` for that one
 * (libmicrohttpd may still call on_request for it), else NULL. */
static void *on_request_line(void *cls, const char *uri, struct MHD_Connection *connection)
{
    paging_http_server *server = cls;
    const char *query = uri != NULL ? strchr(uri, '?') : NULL;
    size_t arguments = 1, path_length;
    char body[200], path[128];
    int body_length;
    if (query == NULL) return NULL;
    for (const char *c = query; *c != '\0'; c++) arguments += *c == '&';
    if (arguments > MAX_QUERY_ARGUMENTS) {
        body_length = snprintf(body, sizeof body, "{\"error\": \"more than %d query parameters\"}\n", MAX_QUERY_ARGUMENTS);
    } else if (strlen(query + 1) > MAX_QUERY_BYTES) {
        body_length = snprintf(body, sizeof body, "{\"error\": \"the query is longer than 16 KiB\"}\n");
    } else {
        return NULL;
    }
    if (body_length < 0) return NULL;
    path_length = (size_t)(query - uri) < sizeof path - 1 ? (size_t)(query - uri) : sizeof path - 1;
    memcpy(path, uri, path_length);
    path[path_length] = '\0';
    return refuse_on_socket(server, connection, path, 414, "URI Too Long", body) ? &refused_request : NULL;
}

/* Percent-decoding as libmicrohttpd's own (%XX, nothing else), noting a %00 on the connection:
 * the C string it cuts short would be taken for another path ("/metrics%00x" for "/metrics").
 * A % not followed by two hex digits is noted too: the request is refused rather than read with
 * the % as it is (a client's mistake, or two parsers that would read the URL differently). */
static size_t unescape(void *cls, struct MHD_Connection *connection, char *text)
{
    char *in = text, *out = text;
    (void)cls;
    while (*in != '\0') {
        if (in[0] == '%' && isxdigit((unsigned char)in[1]) && isxdigit((unsigned char)in[2])) {
            char hex[3] = { in[1], in[2], '\0' };
            *out = (char)strtoul(hex, NULL, 16);
            if (*out == '\0') {
                tracked_connection *entry = tracked(connection);
                if (entry != NULL) entry->nul_decoded = 1;
            }
            out++;
            in += 3;
        } else {
            if (in[0] == '%') {
                tracked_connection *entry = tracked(connection);
                if (entry != NULL) entry->bad_escape = 1;
            }
            *out++ = *in++;
        }
    }
    *out = '\0';
    return (size_t)(out - text);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size, void **state)
{
    paging_http_server *server = cls;
    paging_http_exchange *exchange = *state;
    (void)version; (void)upload_data;
    if (*state == &refused_request) return MHD_NO;
    if (exchange == NULL) {
        /* The headers have come: a request whose end is ambiguous is refused, and its
         * connection closed (what follows it cannot be read as a request with certainty). */
        int has_body = 0;
        const char *ambiguous;
        int refusing;
        pthread_mutex_lock(&server->lock);
        refusing = server->refusing;
        pthread_mutex_unlock(&server->lock);
        if (refusing)
            return answer_now(server, url, connection, MHD_HTTP_SERVICE_UNAVAILABLE, "{\"error\": \"the server is stopping\"}\n", 1);
        if (request_footprint(connection, method, url) > server->request_bytes) {
            char body[200];
            snprintf(body, sizeof body, "{\"error\": \"the request line and headers take more than %zu KiB (64 bytes more for each header and parameter)\"}\n",
                     server->request_bytes >> 10);
            refuse_on_socket(server, connection, url, 431, "Request Header Fields Too Large", body);
            return MHD_NO;
        }
        ambiguous = ambiguous_framing(connection, &has_body);
        if (ambiguous != NULL) return answer_now(server, url, connection, MHD_HTTP_BAD_REQUEST, ambiguous, 1);
        /* Only GET and HEAD are served: a body is refused before it is read, and the connection
         * closed (a body trickled a byte at a time held its connection for ever). */
        if (has_body) {
            int get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
            return answer_now(server, url, connection, get ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_METHOD_NOT_ALLOWED,
                              get ? "{\"error\": \"a GET or HEAD request with a body\"}\n" : "{\"error\": \"only GET and HEAD are served\"}\n", 1);
        }
        exchange = calloc(1, sizeof *exchange);
        if (exchange == NULL) return MHD_NO;
        pthread_mutex_init(&exchange->lock, NULL);
        exchange->connection = connection;
        exchange->server = server;
        exchange->entry = tracked(connection);
        pthread_mutex_lock(&server->lock);
        server->open++;
        exchange->id = ++server->next_exchange_id;
        pthread_mutex_unlock(&server->lock);
        exchange->method = copy(method);
        exchange->path = copy(url);
        {
            tracked_connection *entry = tracked(connection);
            if (entry != NULL) {
                exchange->nul_decoded = entry->nul_decoded;
                exchange->bad_escape = entry->bad_escape;
                entry->nul_decoded = entry->bad_escape = 0;
            }
        }
        *state = exchange;
        headers_arrived(server, connection, 1);
        if (exchange->method == NULL || exchange->path == NULL) return MHD_NO;
        return MHD_YES;
    }
    if (*upload_data_size != 0) {
        /* A body (none is announced, as a request with one is refused above): read past. */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (!exchange->started) {
        if (mhd.get_connection_values_n(connection, MHD_GET_ARGUMENT_KIND, collect_argument, exchange) < 0) return MHD_NO;
        if (exchange->query_has_nul)
            return answer_now(server, exchange->path, connection, MHD_HTTP_BAD_REQUEST, "{\"error\": \"a query name or value holds a NUL byte (%00)\"}\n", 0);
        if (exchange->nul_decoded)
            return answer_now(server, exchange->path, connection, MHD_HTTP_BAD_REQUEST, "{\"error\": \"the path holds a NUL byte (%00)\"}\n", 0);
        if (exchange->bad_escape)
            return answer_now(server, exchange->path, connection, MHD_HTTP_BAD_REQUEST,
                              "{\"error\": \"the URL holds a % not followed by two hex digits (a % itself is written %25)\"}\n", 0);
        exchange->started = 1;
        pthread_mutex_lock(&server->lock);
        server->handed++;
        pthread_mutex_unlock(&server->lock);
        mhd.suspend_connection(connection);
        server->handler(server->context, exchange);
        /* Watched from now on (the handler knows it by its id), unless answered already. */
        pthread_mutex_lock(&server->lock);
        if (!exchange->done && exchange->entry != NULL) exchange->entry->waiting = exchange;
        pthread_mutex_unlock(&server->lock);
        return MHD_YES;
    }
    pthread_mutex_lock(&exchange->lock);
    if (!exchange->answered) {
        pthread_mutex_unlock(&exchange->lock);
        return MHD_YES;
    }
    pthread_mutex_unlock(&exchange->lock);
    /* No response (out of memory): the connection is closed. */
    if (exchange->response == NULL) return MHD_NO;
    return mhd.queue_response(connection, exchange->status, exchange->response);
}

static void on_completed(void *cls, struct MHD_Connection *connection, void **state, enum MHD_RequestTerminationCode code)
{
    paging_http_exchange *exchange = *state;
    paging_http_server *server = cls;
    size_t unsent;
    (void)code;
    headers_arrived(server, connection, 0);
    if (exchange == NULL || *state == &refused_request) return;
    /* A suspended exchange belongs to its handler until answered; MHD ends none of those. */
    unsent = exchange->unsent_bytes;
    pthread_mutex_lock(&server->lock);
    if (exchange->entry != NULL && exchange->entry->waiting == exchange) exchange->entry->waiting = NULL;
    if (exchange->started) server->handed--;
    pthread_mutex_unlock(&server->lock);
    free_exchange(exchange);
    *state = NULL;
    pthread_mutex_lock(&server->lock);
    server->unsent_bytes -= unsent;
    server->open--;
    pthread_cond_broadcast(&server->completed);
    pthread_mutex_unlock(&server->lock);
}

paging_http_server *paging_http_start(const char *address, uint16_t port, paging_http_limits limits,
                                      paging_http_handler handler, paging_http_refused refused, paging_http_gone gone, void *context,
                                      char *error, size_t error_size)
{
    struct sockaddr_storage storage;
    struct sockaddr_in *v4 = (struct sockaddr_in *)&storage;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&storage;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME;
    const union MHD_DaemonInfo *info;
    paging_http_server *server;
    memset(&storage, 0, sizeof storage);
    if (inet_pton(AF_INET, address, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
    } else if (inet_pton(AF_INET6, address, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        /* "::" is every address, IPv4 ones too (it listened on IPv6 alone). */
        flags |= IN6_IS_ADDR_UNSPECIFIED(&v6->sin6_addr) ? MHD_USE_DUAL_STACK : MHD_USE_IPv6;
    } else {
        snprintf(error, error_size, "'%s' is not an IPv4 or IPv6 address", address);
        return NULL;
    }
    pthread_once(&mhd_once, mhd_load);
    if (mhd_error[0] != '\0') {
        snprintf(error, error_size, "%s", mhd_error);
        return NULL;
    }
    server = calloc(1, sizeof *server);
    if (server == NULL) {
        snprintf(error, error_size, "out of memory");
        return NULL;
    }
    server->handler = handler;
    server->refused = refused;
    server->gone = gone;
    server->context = context;
    pthread_mutex_init(&server->lock, NULL);
    pthread_cond_init(&server->completed, NULL);
    pthread_cond_init(&server->stop_reaper, NULL);
    server->connections.next = server->connections.prev = &server->connections;
    server->header_timeout_ms = limits.header_timeout_ms;
    server->max_unsent_bytes = limits.unsent_answer_bytes;
    server->request_bytes = limits.request_bytes;
    errno = 0;
    server->daemon = mhd.start_daemon(flags, port, NULL, NULL, on_request, server,
                                      MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&storage,
                                      MHD_OPTION_CONNECTION_LIMIT, limits.connections,
                                      MHD_OPTION_PER_IP_CONNECTION_LIMIT, limits.connections_per_address,
                                      MHD_OPTION_CONNECTION_TIMEOUT, limits.idle_timeout_seconds,
                                      MHD_OPTION_CONNECTION_MEMORY_LIMIT, limits.request_bytes + ANSWER_ROOM_BYTES,
                                      MHD_OPTION_NOTIFY_COMPLETED, on_completed, server,
                                      MHD_OPTION_NOTIFY_CONNECTION, on_connection, server,
                                      MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL,
                                      MHD_OPTION_URI_LOG_CALLBACK, on_request_line, server,
                                      MHD_OPTION_END);
    if (server->daemon != NULL) {
        server->reaper_running = pthread_create(&server->reaper, NULL, watch_connections, server) == 0;
        if (!server->reaper_running) {
            mhd.stop_daemon(server->daemon);
            server->daemon = NULL;
        }
    }
    if (server->daemon == NULL) {
        snprintf(error, error_size, "cannot listen on %s port %u: %s", address, (unsigned)port,
                 errno != 0 ? strerror(errno) : "the server could not start");
        pthread_cond_destroy(&server->stop_reaper);
        pthread_cond_destroy(&server->completed);
        pthread_mutex_destroy(&server->lock);
        free(server);
        return NULL;
    }
    info = mhd.get_daemon_info(server->daemon, MHD_DAEMON_INFO_BIND_PORT);
    server->port = info != NULL ? info->port : port;
    return server;
}

uint16_t paging_http_port(const paging_http_server *server) { return server->port; }

void paging_http_stop_accepting(paging_http_server *server)
{
    MHD_socket listening;
    pthread_mutex_lock(&server->lock);
    server->refusing = 1;
    pthread_mutex_unlock(&server->lock);
    listening = mhd.quiesce_daemon(server->daemon);
    if (listening != MHD_INVALID_SOCKET) close(listening);
}

int paging_http_stop(paging_http_server *server, unsigned wait_ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += wait_ms / 1000;
    deadline.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&server->lock);
    while (server->open > 0 && pthread_cond_timedwait(&server->completed, &server->lock, &deadline) == 0) {}
    if (server->handed > 0) {
        /* Stopping libmicrohttpd now could find the connection still suspended, which it
         * takes for a fatal error (abort): the server is left to end with the process. */
        pthread_mutex_unlock(&server->lock);
        return 0;
    }
    server->stopping = 1;
    pthread_cond_signal(&server->stop_reaper);
    pthread_mutex_unlock(&server->lock);
    if (server->reaper_running) pthread_join(server->reaper, NULL);
    mhd.stop_daemon(server->daemon);
    pthread_cond_destroy(&server->stop_reaper);
    pthread_cond_destroy(&server->completed);
    pthread_mutex_destroy(&server->lock);
    free(server);
    return 1;
}

uint64_t paging_http_exchange_id(const paging_http_exchange *exchange) { return exchange->id; }
const char *paging_http_method(const paging_http_exchange *exchange) { return exchange->method; }
const char *paging_http_path(const paging_http_exchange *exchange) { return exchange->path; }
size_t paging_http_query_count(const paging_http_exchange *exchange) { return exchange->query_count; }
const char *paging_http_query_key(const paging_http_exchange *exchange, size_t index)
{
    return index < exchange->query_count ? exchange->query[index].key : NULL;
}
const char *paging_http_query_value(const paging_http_exchange *exchange, size_t index)
{
    return index < exchange->query_count ? exchange->query[index].value : NULL;
}

unsigned paging_http_respond_with_header(paging_http_exchange *exchange, unsigned status, const char *content_type,
                                         const char *name, const char *value, const uint8_t *body, size_t length)
{
    static const char full[] = "{\"error\": \"the server holds too many answers its clients have not read; try again shortly\"}\n";
    paging_http_server *server = exchange->server;
    struct MHD_Response *response;
    int room;
    pthread_mutex_lock(&server->lock);
    /* A small answer always goes, and is not counted (health, metrics, errors: a load balancer
     * must not take a server whose clients read slowly for a dead one); a large one fits alone,
     * however large (a page of max_page_bytes), or within the limit. */
    room = length <= SMALL_ANSWER_BYTES || server->unsent_bytes == 0
        || (server->unsent_bytes <= server->max_unsent_bytes && length <= server->max_unsent_bytes - server->unsent_bytes);
    if (room && length > SMALL_ANSWER_BYTES) {
        server->unsent_bytes += length;
        exchange->unsent_bytes = length;
    }
    exchange->done = 1;
    if (exchange->entry != NULL && exchange->entry->waiting == exchange) exchange->entry->waiting = NULL;
    pthread_mutex_unlock(&server->lock);
    if (!room) {
        status = MHD_HTTP_SERVICE_UNAVAILABLE;
        content_type = "application/json";
        name = MHD_HTTP_HEADER_RETRY_AFTER;
        value = "1";
        body = (const uint8_t *)full;
        length = sizeof full - 1;
    }
    response = mhd.create_response_from_buffer(length, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (response != NULL) {
        mhd.add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
        mhd.add_response_header(response, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (name != NULL && value != NULL) mhd.add_response_header(response, name, value);
    }
    pthread_mutex_lock(&exchange->lock);
    exchange->response = response;
    exchange->status = status;
    exchange->answered = 1;
    pthread_mutex_unlock(&exchange->lock);
    return status;
}

void paging_http_send(paging_http_exchange *exchange)
{
    mhd.resume_connection(exchange->connection);
}
