/*
 * sigv4: AWS Signature Version 4, header and presigned-URL (query) signing.
 * Pure C over OpenSSL's libcrypto; no Lua. Thread-safe (no shared state
 * except an internal signing-key cache guarded by a mutex).
 *
 *   sigv4_input in = { .method = "GET", .path = "/", .query = "Action=...",
 *       .headers = hdrs, .nheaders = 2, .payload = "", .payload_len = 0,
 *       .access_key = ..., .secret_key = ..., .session_token = NULL,
 *       .region = "us-west-2", .service = "sts", .when = 1440938160,
 *       .normalize_path = 1 };
 *   sigv4_output out;
 *   if (sigv4_sign(&in, &out, err, sizeof err) == 0) { ...; sigv4_output_free(&out); }
 *
 * Ownership: the input is borrowed; every string in sigv4_output is
 * malloc'd and freed by sigv4_output_free().
 */
#ifndef HYPD_SIGV4_H
#define HYPD_SIGV4_H

#include <stddef.h>
#include <time.h>

#define SIGV4_UNSIGNED_PAYLOAD "UNSIGNED-PAYLOAD"

typedef struct {
	const char *name;   /* header name as given (any case, may repeat) */
	const char *value;  /* header value as given (may have odd spacing) */
} sigv4_header;

typedef struct {
	const char *method;        /* "GET", "POST", ... */
	const char *path;          /* the request path, e.g. "/a b/../c" (normalize) or
				      "/already%20encoded" (S3, normalize = 0) */
	const char *query;         /* the raw query string without '?', or NULL */
	const sigv4_header *headers; /* must include Host */
	size_t nheaders;
	const char *payload;       /* request body (may be NULL when payload_len is 0) */
	size_t payload_len;
	const char *payload_hash;  /* NULL: SHA-256 of payload; or a given hex hash;
				      or SIGV4_UNSIGNED_PAYLOAD */
	const char *access_key;    /* credentials (borrowed, never logged) */
	const char *secret_key;
	const char *session_token; /* NULL when none */
	const char *region;        /* e.g. "us-west-2" */
	const char *service;       /* signing name, e.g. "sts", "s3", "sagemaker" */
	time_t when;               /* signing time, seconds since the epoch (UTC) */
	int normalize_path;        /* 1: remove dot segments, encode once (all but S3);
				      0: path is already encoded, used as is (S3) */
	int sign_body;             /* 1: add and sign x-amz-content-sha256 */
	int omit_session_token;    /* 1: sign without the token, add it afterwards */
	long expires;              /* presign only: X-Amz-Expires in seconds */
} sigv4_input;

typedef struct {
	char *canonical_request;  /* the canonical request */
	char *string_to_sign;     /* the string to sign */
	char signature[65];       /* lower-case hex signature */
	char *authorization;      /* header signing: the Authorization value; presign: NULL */
	char amz_date[17];        /* "20150830T123600Z" */
	char payload_hash[65];    /* the x-amz-content-sha256 value used (or UNSIGNED-PAYLOAD) */
	char *query;              /* presign: the full query string to send (original
				     parameters plus every X-Amz-* one, encoded);
				     header signing: NULL */
} sigv4_output;

/*
 * Header signing. The caller sends the request with its own headers plus:
 * X-Amz-Date: out.amz_date; X-Amz-Security-Token: in.session_token (when
 * set); X-Amz-Content-Sha256: out.payload_hash (when sign_body);
 * Authorization: out.authorization. Returns 0, or -1 with a message in err.
 */
int sigv4_sign(const sigv4_input *in, sigv4_output *out, char *err, size_t errlen);

/* Presigned URL (query) signing with in->expires. Returns 0 or -1. */
int sigv4_presign(const sigv4_input *in, sigv4_output *out, char *err, size_t errlen);

void sigv4_output_free(sigv4_output *out);

/*
 * URI-encodes s[0..len) per SigV4 (unreserved A-Z a-z 0-9 - . _ ~ kept;
 * '/' kept when keep_slash). Returns a malloc'd string, NULL on OOM.
 */
char *sigv4_uri_encode(const char *s, size_t len, int keep_slash);

#endif
