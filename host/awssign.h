/*
 * awssign: signs an outgoing HTTP request for AWS with the cached
 * credentials of a profile, in C, so no secret ever reaches Lua.
 *
 * The engine calls it when a Lua request carries `aws = {service, region,
 * profile, sign_body, unsigned_payload}`; the credentials must already be in
 * the cache (Lua resolves them first through hypd._aws.credentials).
 */
#ifndef HYPD_AWSSIGN_H
#define HYPD_AWSSIGN_H

#include <time.h>

#include "http.h"

typedef struct {
	const char *service;   /* signing name, e.g. "sagemaker" */
	const char *region;    /* signing region */
	const char *profile;   /* credentials profile, NULL = default chain */
	int sign_body;         /* add and sign x-amz-content-sha256 (S3) */
	int unsigned_payload;  /* sign with UNSIGNED-PAYLOAD */
	int s3_path;           /* path is already encoded: no normalization (S3) */
} awssign_params;

#define AWSSIGN_MAX_LINES 4

/*
 * Computes the headers to add to req (X-Amz-Date, X-Amz-Security-Token,
 * X-Amz-Content-Sha256, Authorization) at time now. On success returns 0 and
 * fills lines[0..*n) with malloc'd "Name: value" strings the caller frees;
 * on failure returns -1 with a message (never a secret) and sets *code to
 * "CREDENTIALS" or "VALIDATION".
 */
int awssign_headers(const httpc_request *req, const awssign_params *p, time_t now,
		    char *lines[AWSSIGN_MAX_LINES], int *n, const char **code,
		    char *err, size_t errlen);

#endif
