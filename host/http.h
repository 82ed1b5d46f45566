/*
 * http: asynchronous HTTP client transport over libcurl's multi interface.
 * Pure C; the engine binding (lua_engine.c) maps it onto coroutines.
 *
 * One httpc drives many transfers at once on the engine thread. Start a
 * transfer with httpc_start(); httpc_poll() waits for network activity (or a
 * wakeup from another thread) and hands every finished transfer to a
 * callback. Response bodies are capped (max_body) so nothing from the wire
 * grows without bound.
 *
 * Ownership: httpc_start copies everything it needs from the request. The
 * response passed to the done callback, with its headers and body, is owned
 * by httpc and freed when the callback returns.
 */
#ifndef HYPD_HTTP_H
#define HYPD_HTTP_H

#include <stddef.h>
#include <stdint.h>

typedef struct httpc httpc;

typedef struct {
	const char *method;          /* "GET" when NULL */
	const char *url;             /* http:// or https:// */
	const char *const *headers;  /* "Name: value" strings, NULL-terminated, or NULL */
	const char *body;            /* request body or NULL */
	size_t body_len;             /* bytes of body */
	long timeout_ms;             /* whole transfer; 0 = 60 s */
	long connect_timeout_ms;     /* connect phase; 0 = 10 s */
	const char *ca_file;         /* CA bundle file for TLS, or NULL */
	const char *ca_pem;          /* inline CA certificate(s) in PEM, or NULL */
	size_t max_body;             /* response body cap; 0 = 64 MiB */
	int fresh_connection;        /* 1: never reuse a connection, so libcurl
					cannot silently resend the request when
					a reused one turns out dead (unsafe calls) */
} httpc_request;

typedef struct {
	char *name;   /* lower-cased header name */
	char *value;  /* header value, trimmed */
} httpc_header;

typedef struct {
	uint64_t id;              /* as returned by httpc_start */
	long status;              /* HTTP status, 0 when the transfer failed */
	httpc_header *headers;    /* response headers of the final response */
	size_t nheaders;          /* entries in headers */
	char *body;               /* response body, NUL-terminated */
	size_t body_len;          /* bytes of body */
	const char *error_code;   /* NULL, or TIMEOUT, CONNECT (nothing sent),
				     RESET (connection broke; the request may
				     have arrived), TLS, TOO_LARGE, CANCELLED,
				     HTTP (other transport failures) */
	char error[256];          /* what failed, for people */
	double seconds;           /* total time of the transfer */
} httpc_response;

typedef void (*httpc_done_fn)(void *ud, httpc_response *resp);

/* max_connections bounds open connections in total (0 = 64). */
httpc *httpc_new(int max_connections);
void httpc_free(httpc *h);

/* Starts a transfer. Returns 0 and sets *id, or -1 with a message in err. */
int httpc_start(httpc *h, const httpc_request *req, uint64_t *id, char *err,
		size_t errlen);

/* Aborts a transfer; its done callback runs on the next poll with
 * error_code CANCELLED. Returns -1 if id is unknown. */
int httpc_cancel(httpc *h, uint64_t id);

/* Transfers started and not yet handed to a done callback. */
int httpc_inflight(const httpc *h);

/*
 * Waits up to timeout_ms (-1: until something happens) for network
 * activity or a wakeup, then calls done for each finished transfer.
 * Returns the number of finished transfers, or -1 on a multi error.
 */
int httpc_poll(httpc *h, int timeout_ms, httpc_done_fn done, void *ud);

/* Makes a waiting httpc_poll return early. Safe from any thread. */
void httpc_wakeup(httpc *h);

#endif
