/*
 * server: an HTTP or HTTPS server (libmicrohttpd) that hands every request
 * to the engine. Server threads never touch Lua: a finished request is
 * posted to the engine's job queue (its push builds the Lua request table),
 * the connection is suspended, and hserver_respond() or
 * hserver_stream_start() resumes it with the answer the engine produced.
 * A process may run any number of servers; each has its own thread.
 *
 * Ownership: every function copies what it is given (headers, bodies,
 * stream bytes, PEM text); the caller keeps its buffers. The server owns
 * its requests until libmicrohttpd completes their connections.
 */
#ifndef HYPD_SERVER_H
#define HYPD_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "jobs.h"

typedef struct hserver hserver;

/* Unsent stream bytes a request may hold; a write past it fails the stream. */
#define HSERVER_STREAM_MAX ((size_t)8 << 20)

struct hserver_opts {
	const char *addr;      /* IPv4 address to listen on, e.g. "127.0.0.1" */
	int port;              /* 0: any free port */
	size_t max_body;       /* request body cap in bytes; 0: 64 MiB */
	const char *cert_pem;  /* certificate chain (PEM); NULL: plain HTTP */
	const char *key_pem;   /* its private key (PEM, EC or RSA); with cert_pem */
	long long tag;         /* pushed to Lua as req.server */
};

/*
 * Listens as o describes. Request bodies over max_body bytes get 413
 * without reaching the engine. Returns NULL with a message on failure
 * (address in use, bad PEM, no TLS in libmicrohttpd).
 */
hserver *hserver_start(const struct hserver_opts *o, jobs *q, char *err, size_t errlen);

/* The port it listens on. */
int hserver_port(const hserver *s);

/*
 * Answers request id (from the request table) with status, "Name: value"
 * header lines (NULL-terminated, may be NULL) and a body. Status 0 closes
 * the connection without an answer (a simulated reset).
 * Engine thread. Returns -1 when the request is gone (client left) or
 * already answered.
 */
int hserver_respond(hserver *s, uint64_t id, int status, const char *const *headers,
		    const char *body, size_t len);

/*
 * Streams: hserver_stream_start() sends status and headers and no
 * Content-Length (HTTP/1.1 clients get a chunked body); each write queues
 * bytes; hserver_stream_end() finishes the body once the queue drains, or
 * with failed set closes the connection so the client sees a truncated
 * body. All return -1 when the client is gone (or the stream ended); a
 * write of 0 bytes only asks that. A write that would hold more than
 * HSERVER_STREAM_MAX unsent bytes fails the stream (a slow client) and
 * returns -1. Engine thread; a write costs one copy of data.
 */
int hserver_stream_start(hserver *s, uint64_t id, int status, const char *const *headers);
int hserver_stream_write(hserver *s, uint64_t id, const char *data, size_t len);
int hserver_stream_end(hserver *s, uint64_t id, int failed);

/* Requests received and not yet answered (started streams do not count). */
int hserver_open_requests(hserver *s);

/* Stops listening and frees s; connections still open (unanswered
 * requests, streams) are closed. Request jobs already posted still reach
 * the engine, carrying only the tag: the caller must not answer them
 * through s. */
void hserver_stop(hserver *s);

#endif
