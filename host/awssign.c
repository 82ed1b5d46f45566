/* awssign: AWS request signing with cached credentials (see awssign.h). */
#include "awssign.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "creds.h"
#include "sigv4.h"

static char *line(const char *name, const char *value)
{
	size_t n = strlen(name) + strlen(value) + 3;
	char *s = malloc(n);

	if (s)
		snprintf(s, n, "%s: %s", name, value);
	return s;
}

/* Splits "Name: value" request header lines into sigv4 headers (pointers
 * into copies the caller frees with free_split). */
static sigv4_header *split_headers(const httpc_request *req, const char *host,
				   size_t *n, char ***copies)
{
	size_t count = 0, i = 0;
	sigv4_header *h;

	for (const char *const *hp = req->headers; hp && *hp; hp++)
		count++;
	h = calloc(count + 1, sizeof *h);
	*copies = calloc(count + 1, sizeof **copies);
	if (!h || !*copies) {
		free(h);
		free(*copies);
		*copies = NULL;
		return NULL;
	}
	for (const char *const *hp = req->headers; hp && *hp; hp++) {
		char *c = strdup(*hp), *colon = c ? strchr(c, ':') : NULL;

		(*copies)[i] = c;
		if (!colon)
			continue; /* malformed lines are not signed */
		*colon = 0;
		if (strcasecmp(c, "host") == 0)
			continue; /* the URL's host is the one signed */
		h[i].name = c;
		h[i].value = colon + 1 + strspn(colon + 1, " ");
		i++;
	}
	h[i].name = "host";
	h[i].value = host;
	*n = i + 1;
	return h;
}

static void free_split(sigv4_header *h, char **copies)
{
	for (size_t i = 0; copies && copies[i]; i++)
		free(copies[i]);
	free(copies);
	free(h);
}

int awssign_headers(const httpc_request *req, const awssign_params *p, time_t now,
		    char *lines[AWSSIGN_MAX_LINES], int *n, const char **code,
		    char *err, size_t errlen)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *path = NULL, *query = NULL, *hostport = NULL;
	char **copies = NULL;
	sigv4_header *hdrs = NULL;
	sigv4_output out;
	sigv4_input in;
	aws_creds c;
	size_t nh = 0;
	int rc = -1, have_creds = 0, have_out = 0;

	memset(&out, 0, sizeof out);
	memset(&c, 0, sizeof c);
	*n = 0;
	*code = "VALIDATION";
	if (!u || curl_url_set(u, CURLUPART_URL, req->url, CURLU_PATH_AS_IS) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
		snprintf(err, errlen, "cannot sign: '%s' is not a valid URL", req->url);
		goto done;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	curl_url_get(u, CURLUPART_QUERY, &query, 0);
	hostport = malloc(strlen(host) + (port ? strlen(port) : 0) + 2);
	if (!hostport)
		goto oom;
	sprintf(hostport, "%s%s%s", host, port ? ":" : "", port ? port : "");
	if (creds_cached(p->profile, &c) != 0) {
		*code = "CREDENTIALS";
		snprintf(err, errlen, "no fresh AWS credentials for profile %s (resolve them first)",
			 p->profile ? p->profile : "(default)");
		goto done;
	}
	have_creds = 1;
	hdrs = split_headers(req, hostport, &nh, &copies);
	if (!hdrs)
		goto oom;
	memset(&in, 0, sizeof in);
	in.method = req->method ? req->method : "GET";
	in.path = path;
	in.query = query;
	in.headers = hdrs;
	in.nheaders = nh;
	in.payload = req->body ? req->body : "";
	in.payload_len = req->body ? req->body_len : 0;
	in.payload_hash = p->unsigned_payload ? SIGV4_UNSIGNED_PAYLOAD : NULL;
	in.access_key = c.access_key;
	in.secret_key = c.secret_key;
	in.session_token = c.session_token;
	in.region = p->region;
	in.service = p->service;
	in.when = now;
	in.normalize_path = !p->s3_path;
	in.sign_body = p->sign_body || p->unsigned_payload;
	if (sigv4_sign(&in, &out, err, errlen) != 0)
		goto done;
	have_out = 1;
	if (!(lines[(*n)++] = line("X-Amz-Date", out.amz_date)))
		goto oom;
	if (c.session_token && !(lines[(*n)++] = line("X-Amz-Security-Token", c.session_token)))
		goto oom;
	if (in.sign_body && !(lines[(*n)++] = line("X-Amz-Content-Sha256", out.payload_hash)))
		goto oom;
	if (!(lines[(*n)++] = line("Authorization", out.authorization)))
		goto oom;
	rc = 0;
	goto done;
oom:
	snprintf(err, errlen, "out of memory while signing");
done:
	if (rc != 0) {
		for (int i = 0; i < *n; i++)
			free(lines[i]);
		*n = 0;
	}
	if (have_out)
		sigv4_output_free(&out);
	if (have_creds)
		creds_free(&c);
	free_split(hdrs, copies);
	free(hostport);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(query);
	curl_url_cleanup(u);
	return rc;
}
