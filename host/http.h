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
 * A streaming transfer (req.stream) does not collect its body: each poll
 * hands the bytes that arrived since the last one to a data callback, and
 * max_body caps only those pending bytes. When they reach the cap the
 * transfer is paused until the next poll has delivered them, so a slow
 * consumer slows the sender instead of growing memory. httpc_pause() lets
 * the consumer hold a stream while its own buffer is full.
 *
 * Ownership: httpc_start copies everything it needs from the request. The
 * response passed to the done callback and the chunk passed to the data
 * callback, with their headers and bytes, are owned by httpc and valid only
 * until the callback returns.
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
	long timeout_ms;             /* whole transfer; 0 = 60 s, or none for
					a stream */
	long connect_timeout_ms;     /* connect phase; 0 = 10 s */
	const char *ca_file;         /* CA bundle file for TLS, or NULL */
	const char *ca_pem;          /* inline CA certificate(s) in PEM, or NULL */
	size_t max_body;             /* response body cap; 0 = 64 MiB (a stream:
					cap of the bytes not yet delivered) */
	long idle_timeout;           /* seconds below 1 byte/s that fail the
					transfer with TIMEOUT; 0 = no limit */
	int stream;                  /* 1: deliver the body as it arrives */
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
	const char *error_code;   /* NULL, or TIMEOUT, CONNECT (nothing sent:
				     no connection, or a TLS handshake that
				     broke), TLS (the certificate refused),
				     RESET (connection broke; the request may
				     have arrived), TOO_LARGE, CANCELLED,
				     HTTP (other transport failures) */
	char error[256];          /* what failed, for people */
	double seconds;           /* total time of the transfer */
} httpc_response;

/* What a stream received since the last poll. */
typedef struct {
	uint64_t id;                   /* as returned by httpc_start */
	long status;                   /* HTTP status of the final response */
	const httpc_header *headers;   /* response headers on the first chunk
					  of a transfer, else NULL */
	size_t nheaders;               /* entries in headers */
	const char *data;              /* new body bytes (may be none on the
					  first chunk: headers alone) */
	size_t len;                    /* bytes of data */
} httpc_chunk;

/* A finished transfer. For a stream, every byte has gone to the data
 * callback before this one runs, and resp->body is empty. */
typedef void (*httpc_done_fn)(void *ud, httpc_response *resp);

/* New bytes (or, the first time, the headers) of a streaming transfer. */
typedef void (*httpc_data_fn)(void *ud, const httpc_chunk *chunk);

/* max_connections bounds open connections in total (0 = 64). */
httpc *httpc_new(int max_connections);
void httpc_free(httpc *h);

/* Starts a transfer. Returns 0 and sets *id, or -1 with a message in err. */
int httpc_start(httpc *h, const httpc_request *req, uint64_t *id, char *err,
		size_t errlen);

/* Aborts a transfer; its done callback runs on the next poll with
 * error_code CANCELLED. Returns -1 if id is unknown. */
int httpc_cancel(httpc *h, uint64_t id);

/* Holds (paused = 1) or releases (0) a stream: while held it receives no
 * more bytes; the sender waits. Idle timeouts do not run while held.
 * Returns -1 if id is unknown or not a stream. */
int httpc_pause(httpc *h, uint64_t id, int paused);

/* Transfers started, not cancelled and not yet handed to a done callback. */
int httpc_inflight(const httpc *h);

/*
 * Waits up to timeout_ms (-1: until something happens) for network
 * activity or a wakeup, then calls data for each stream with new bytes
 * and done for each finished transfer (data may be NULL when no stream
 * was started). Returns the number of callbacks made, or -1 on a multi
 * error.
 */
int httpc_poll(httpc *h, int timeout_ms, httpc_done_fn done, httpc_data_fn data,
	       void *ud);

/* Makes a waiting httpc_poll return early. Safe from any thread. */
void httpc_wakeup(httpc *h);

#endif
