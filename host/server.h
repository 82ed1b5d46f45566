/*
 * server: an HTTP or HTTPS server (libmicrohttpd) that hands every request
 * to the engine. Server threads never touch Lua: a finished request is
 * posted to the engine's job queue (its push builds the Lua request table),
 * the connection is suspended, and hserver_respond() or
 * hserver_stream_start() resumes it with the answer the engine produced.
 * A process may run any number of servers; each has its own thread.
 *
 * WebSockets (RFC 6455): the engine answers a request with
 * hserver_ws_accept(); libmicrohttpd sends the 101 and hands over the
 * socket, and one I/O thread per websocket (websocket.h) reads and writes
 * its frames. Its messages and its end reach the engine as jobs, pushed as
 * {server = tag, ws = id, data = "...", binary = bool} and, last of all,
 * {server = tag, ws = id, closed = code, reason = "..."}.
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

/* libmicrohttpd threads when hserver_opts.threads is 0. */
#define HSERVER_THREADS 1
/* Slow clients (slowloris): one address holds at most this many of the
 * HSERVER_CONNECTIONS, and a new connection's headers must arrive within
 * HSERVER_HEADER_TIMEOUT seconds (server_deadline.h), whatever trickles. */
#define HSERVER_CONNECTIONS 1000
#define HSERVER_PER_CLIENT 64
#define HSERVER_HEADER_TIMEOUT 15.0

/* Unsent stream bytes a request may hold; a write past it fails the stream. */
#define HSERVER_STREAM_MAX ((size_t)8 << 20)

struct hserver_opts {
	const char *addr;      /* IPv4 address to listen on, e.g. "127.0.0.1" */
	int port;              /* 0: any free port */
	size_t max_body;       /* request body cap in bytes; 0: 64 MiB */
	const char *cert_pem;  /* certificate chain (PEM); NULL: plain HTTP */
	const char *key_pem;   /* its private key (PEM, EC or RSA); with cert_pem */
	long long tag;         /* pushed to Lua as req.server */
	size_t ws_max_message; /* largest websocket message from a client; 0: 1 MiB */
	double ws_ping;        /* seconds between pings to websocket clients; 0: 30 */
	double ws_idle;        /* drop a websocket silent this long; 0: 90 */
	int threads;           /* libmicrohttpd threads: 1 polls with poll(), more
				* share the connections with epoll; 0: the default */
	int max_per_client;    /* open connections from one IP address; 0: HSERVER_PER_CLIENT */
	double header_timeout; /* seconds a new connection has to send its first
				* request's headers; 0: HSERVER_HEADER_TIMEOUT */
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

/*
 * Upgrades request id to a websocket whose id is the request id. A
 * request that is not a valid opening handshake (GET, HTTP/1.1, Upgrade:
 * websocket, Connection: Upgrade, a Sec-WebSocket-Key, version 13) is
 * answered 400, or 426 with Sec-WebSocket-Version: 13 when only the
 * version is wrong, and that status is returned. Else the 101 carries
 * Sec-WebSocket-Accept and the header lines given (e.g. the chosen
 * Sec-WebSocket-Protocol) and 0 is returned; from then on exactly one
 * closed event for id reaches the engine. -1 when the request is gone.
 * The job pushed for the request says websocket = true when it is a valid
 * handshake. Engine thread.
 */
int hserver_ws_accept(hserver *s, uint64_t id, const char *const *headers);

/*
 * Queues a frame (WS_TEXT, WS_BINARY or WS_PING from websocket.h; text
 * must be UTF-8, control payloads at most 125 bytes) on websocket id;
 * frames sent before the upgrade completes wait for it. Never blocks on
 * the client: past 8 MiB unsent the websocket is dropped. -1 when it is
 * gone or closing. Engine thread; costs one copy.
 */
int hserver_ws_send(hserver *s, uint64_t id, int opcode, const char *data, size_t len);

/* Starts the close handshake on websocket id (code as RFC 6455 7.4,
 * reason at most 123 bytes); -1 when it is gone or already closing. */
int hserver_ws_close(hserver *s, uint64_t id, int code, const char *reason, size_t len);

/* Requests received and not yet answered (started streams do not count). */
int hserver_open_requests(hserver *s);

/* Stops listening and frees s; connections still open (unanswered
 * requests, streams) are closed, websockets with 1001 (each client gets
 * up to a second to answer; their threads are done before this returns,
 * and their closed events follow). Request jobs already posted still
 * reach the engine, carrying only the tag: the caller must not answer
 * them through s. */
void hserver_stop(hserver *s);

#endif
