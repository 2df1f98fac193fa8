/*
 * A small HTTP server for `pager serve`, on GNU libmicrohttpd: it owns the sockets, the HTTP
 * parsing and the limits on connections, and hands each request to a handler that answers it
 * later, from any thread. It knows nothing of paging.
 */
#ifndef PAGING_HTTP_SERVER_H
#define PAGING_HTTP_SERVER_H

#include <stddef.h>
#include <stdint.h>

typedef struct paging_http_server paging_http_server;
typedef struct paging_http_exchange paging_http_exchange;

/* Called on the server's thread once a request has arrived whole; it must not block. The
 * exchange stays valid until it is answered (paging_http_respond_with_header, then
 * paging_http_send; exactly once). */
typedef void (*paging_http_handler)(void *context, paging_http_exchange *exchange);

/* Called on the server's thread for each request the server refuses itself, before the handler
 * would see it (ambiguous framing, a body, a NUL in the path or query), with its path and the
 * status sent: so that every answer can be counted. It must not block. */
typedef void (*paging_http_refused)(void *context, const char *path, unsigned status);

/* Called on a thread of the server's, at most once a request, when the client of a request
 * waiting for its answer has gone away (closed or reset its connection): the handler may stop
 * working on it (it must still answer it). The request is named by its paging_http_exchange_id:
 * it may have been answered meanwhile. It must not block. */
typedef void (*paging_http_gone)(void *context, uint64_t exchange_id);

typedef struct paging_http_limits {
    unsigned connections;          /* open connections at most; more are refused */
    unsigned connections_per_address; /* open connections from one address at most (0: no
                                    * limit): one client cannot take every connection */
    unsigned idle_timeout_seconds; /* a connection silent this long is closed (a slow client) */
    size_t request_bytes;          /* a request's line and headers at most (larger: 4xx) */
    unsigned header_timeout_ms;    /* a request's line and headers must arrive within this, from
                                    * the connection's start or the last response (0: no limit) */
    size_t unsent_answer_bytes;    /* the answers queued and not read by their clients yet, at most
                                    * (beyond: 503); one answer always fits */
} paging_http_limits;

/* Listens on `address` (an IPv4 or IPv6 literal) and `port` (0: any free port). NULL on
 * failure, with the reason in `error`. */
paging_http_server *paging_http_start(const char *address, uint16_t port, paging_http_limits limits,
                                      paging_http_handler handler, paging_http_refused refused, paging_http_gone gone, void *context,
                                      char *error, size_t error_size);

/* The port the server listens on. */
uint16_t paging_http_port(const paging_http_server *server);

/* Stops accepting connections; requests already being answered go on, and a request that comes
 * later on a connection kept alive is answered 503 and its connection closed. */
void paging_http_stop_accepting(paging_http_server *server);

/* Waits up to `wait_ms` until the answers given are sent (a request is complete once its
 * response is written, or its connection ended), then closes every connection, frees the
 * server and returns 1. Returns 0, and frees nothing, when a request handed to the handler is
 * still not complete then (its answer unsent or not given): the server ends with the process. */
int paging_http_stop(paging_http_server *server, unsigned wait_ms);

/* The request's id: unique within the server, never 0. */
uint64_t paging_http_exchange_id(const paging_http_exchange *exchange);

/* The request: its method, its path (without the query), its query arguments in order (a
 * value is NULL for an argument without `=`), percent-decoded. */
const char *paging_http_method(const paging_http_exchange *exchange);
const char *paging_http_path(const paging_http_exchange *exchange);
size_t paging_http_query_count(const paging_http_exchange *exchange);
const char *paging_http_query_key(const paging_http_exchange *exchange, size_t index);
const char *paging_http_query_value(const paging_http_exchange *exchange, size_t index);

/* Sets the request's answer: `status`, a Content-Type, one more header `name: value` (none when
 * either is NULL) and a copy of `body`; from any thread, once. Returns the status that will be
 * sent: 503 instead when the answers clients have not read yet would hold more than the limits'
 * unsent_answer_bytes with this one (each keeps a copy of its body until it is read; an answer
 * of at most 64 KiB always goes and is not counted, and one alone always fits). The answer goes
 * out with paging_http_send. */
unsigned paging_http_respond_with_header(paging_http_exchange *exchange, unsigned status, const char *content_type,
                                         const char *name, const char *value, const uint8_t *body, size_t length);

/* Sends the answer set by paging_http_respond_with_header; the exchange is not to be used after. */
void paging_http_send(paging_http_exchange *exchange);

#endif
