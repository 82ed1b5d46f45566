/*
 * creds_int: what the files of the credential chain share (creds.c, the
 * chain and cache; creds_http.c, blocking HTTP, container and instance
 * metadata; creds_sts.c, STS). Not for other modules: use creds.h.
 *
 * Providers return CR_OK (credentials in *out), CR_NONE (not configured
 * here; a note of what was looked at in err) or CR_FAIL (configured but
 * failed; the reason in err). Nothing written to err holds a secret.
 */
#ifndef HYPD_CREDS_INT_H
#define HYPD_CREDS_INT_H

#include <stddef.h>

#include "awsconfig.h"
#include "creds.h"

enum { CR_OK = 0, CR_NONE = 1, CR_FAIL = -1 };

/* --- blocking HTTP (creds_http.c) --- */

typedef struct {
	const char *method;          /* "GET" when NULL */
	const char *url;             /* http:// or https:// */
	const char *const *headers;  /* "Name: value", NULL-terminated, or NULL */
	const char *body;            /* request body or NULL */
	size_t body_len;             /* bytes of body */
	long timeout_ms;             /* whole transfer */
	long connect_timeout_ms;     /* connect phase */
	size_t max_body;             /* answer cap (bytes) */
	int no_proxy;                /* 1: never through a proxy (metadata) */
	const char *ca_file;         /* CA bundle or NULL (system) */
} cr_request;

typedef struct {
	long status;   /* HTTP status */
	char *body;    /* answer, NUL-terminated (malloc'd, zeroed when freed) */
	size_t len;    /* bytes of body */
} cr_answer;

/* Performs one transfer. Returns 0 when an HTTP answer came (any status),
 * -1 with a message when the transfer failed (connect, timeout, too large). */
int cr_http(const cr_request *rq, cr_answer *an, char *err, size_t errlen);
void cr_answer_free(cr_answer *an);

/* ISO 8601 UTC time ("2024-05-01T12:00:00Z", fractions and +hh:mm
 * accepted) as seconds since the epoch. 0 or -1. */
int cr_parse_time(const char *s, double *out);

/* Fills c with copies; source is copied (truncated to fit). 0 or -1 (OOM). */
int cr_fill(aws_creds *c, const char *ak, const char *sk, const char *token,
	    double expiration, const char *source);

/* Registers the secrets of c with log_add_secret (every provider calls it
 * on what it obtains, so even source credentials never reach a log). */
void cr_obtained(const aws_creds *c);

/* Reads a small token file, trailing blanks removed. malloc'd, or NULL
 * with a message. The caller zeroes and frees it. */
char *cr_read_token(const char *path, const char *what, char *err, size_t errlen);

/* Zeroes and frees a string. */
void cr_wipe(char *s);

/* The container provider (ECS, EKS Pod Identity). */
int cr_container(aws_creds *out, char *err, size_t errlen);

/* The instance metadata provider; profile settings from cfg (may be NULL). */
int cr_imds(const awsconfig *cfg, const char *profile, aws_creds *out,
	    char *err, size_t errlen);

/* --- STS (creds_sts.c) --- */

typedef struct {
	const char *endpoint;  /* "https://sts.us-east-1.amazonaws.com" or configured */
	const char *region;    /* signing region */
	const char *ca_file;   /* CA bundle or NULL */
} cr_sts;

/* AssumeRole signed with src. session_name and external_id may be NULL;
 * duration 0 = STS default; source labels the result. Returns 0 or -1 with
 * a message naming the role and STS's error code. */
int cr_assume_role(const cr_sts *sts, const aws_creds *src, const char *role_arn,
		   const char *session_name, const char *external_id, long duration,
		   const char *source, aws_creds *out, char *err, size_t errlen);

/* AssumeRoleWithWebIdentity (unsigned) with token. 0 or -1. */
int cr_assume_role_web(const cr_sts *sts, const char *role_arn, const char *session_name,
		       const char *token, const char *source, aws_creds *out, char *err,
		       size_t errlen);

#endif
