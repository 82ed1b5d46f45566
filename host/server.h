/*
 * server: the HTTP server (libmicrohttpd) that hands every request to the
 * engine. Server threads never touch Lua: a finished request is posted to
 * the engine's job queue (its push builds the Lua request table), the
 * connection is suspended, and hserver_respond() resumes it with the
 * answer the engine produced.
 */
#ifndef HYPD_SERVER_H
#define HYPD_SERVER_H

#include <stddef.h>
#include <stdint.h>

#include "jobs.h"

typedef struct hserver hserver;

/*
 * Listens on addr (an IPv4 address, e.g. "127.0.0.1") and port (0: any
 * free one). Request bodies over max_body bytes get 413 without reaching
 * the engine. Returns NULL with a message on failure.
 */
hserver *hserver_start(const char *addr, int port, jobs *q, size_t max_body,
		       char *err, size_t errlen);

/* The port it listens on. */
int hserver_port(const hserver *s);

/*
 * Answers request id (from the request table) with status, "Name: value"
 * header lines (NULL-terminated, may be NULL) and a body (copied). Status 0
 * closes the connection without an answer (a simulated reset).
 * Engine thread. Returns -1 when the request is gone (client left).
 */
int hserver_respond(hserver *s, uint64_t id, int status, const char *const *headers,
		    const char *body, size_t len);

/* Requests received and not yet answered. */
int hserver_open_requests(hserver *s);

/* Stops listening and frees everything; unanswered requests get 503. */
void hserver_stop(hserver *s);

#endif
