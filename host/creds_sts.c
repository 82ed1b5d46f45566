/* creds_sts: STS AssumeRole and AssumeRoleWithWebIdentity for the
 * credential chain (see creds_int.h). Query protocol, XML answers (expat). */
#include "creds_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>
#include <expat.h>
#include <openssl/crypto.h>

#include "log.h"
#include "sigv4.h"

#define STS_MAX_BODY ((size_t)256 << 10)
#define XML_TEXT_MAX ((size_t)16 << 10)
#define STS_VERSION "2011-06-15"

/* --- the XML answer --- */

struct xp {
	XML_Parser p;         /* the parser */
	char path[512];       /* "/AssumeRoleResponse/AssumeRoleResult/..." */
	char text[XML_TEXT_MAX]; /* character data of the element open now */
	size_t tlen;          /* bytes in text */
	int refused;          /* a DOCTYPE or entity declaration was seen */
	int oom;              /* an allocation failed */
	char *ak, *sk, *token, *expiration; /* Credentials/... (malloc'd) */
	char *code, *message, *request_id;  /* Error/Code, Error/Message, RequestId */
};

static void x_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct xp *x = ud;
	const char *local = strrchr(name, ':');
	size_t n = strlen(x->path);

	(void)attrs;
	local = local ? local + 1 : name;
	if (n + strlen(local) + 2 < sizeof x->path) {
		x->path[n] = '/';
		strcpy(x->path + n + 1, local);
	} else {
		x->refused = 1; /* absurdly deep; no STS answer is */
		XML_StopParser(x->p, XML_FALSE);
	}
	x->tlen = 0;
}

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), t = strlen(tail);

	return n >= t && strcmp(s + n - t, tail) == 0;
}

static void x_end(void *ud, const XML_Char *name)
{
	struct xp *x = ud;
	char **slot = NULL, *slash;

	(void)name;
	if (ends_with(x->path, "/Credentials/AccessKeyId"))
		slot = &x->ak;
	else if (ends_with(x->path, "/Credentials/SecretAccessKey"))
		slot = &x->sk;
	else if (ends_with(x->path, "/Credentials/SessionToken"))
		slot = &x->token;
	else if (ends_with(x->path, "/Credentials/Expiration"))
		slot = &x->expiration;
	else if (ends_with(x->path, "/Error/Code"))
		slot = &x->code;
	else if (ends_with(x->path, "/Error/Message"))
		slot = &x->message;
	else if (ends_with(x->path, "/RequestId"))
		slot = &x->request_id;
	if (slot && !*slot) {
		if ((*slot = malloc(x->tlen + 1)) != NULL) {
			memcpy(*slot, x->text, x->tlen);
			(*slot)[x->tlen] = 0;
		} else {
			x->oom = 1;
		}
	}
	OPENSSL_cleanse(x->text, x->tlen);
	x->tlen = 0;
	slash = strrchr(x->path, '/');
	if (slash)
		*slash = 0;
}

static void x_text(void *ud, const XML_Char *s, int len)
{
	struct xp *x = ud;
	size_t n = (size_t)len;

	if (n > sizeof x->text - x->tlen)
		n = sizeof x->text - x->tlen;
	memcpy(x->text + x->tlen, s, n);
	x->tlen += n;
}

static void x_doctype(void *ud, const XML_Char *name, const XML_Char *sysid,
		      const XML_Char *pubid, int internal)
{
	struct xp *x = ud;

	(void)name, (void)sysid, (void)pubid, (void)internal;
	x->refused = 1;
	XML_StopParser(x->p, XML_FALSE);
}

static void xp_clear(struct xp *x)
{
	char **all[] = { &x->ak, &x->sk, &x->token, &x->expiration, &x->code,
			 &x->message, &x->request_id };

	for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
		cr_wipe(*all[i]);
		*all[i] = NULL;
	}
	OPENSSL_cleanse(x->text, sizeof x->text);
	if (x->p)
		XML_ParserFree(x->p);
	x->p = NULL;
}

/* Parses body into x (allocated by the caller, zeroed). 0 or -1. */
static int xp_parse(struct xp *x, const char *body, size_t len)
{
	if (!(x->p = XML_ParserCreate(NULL)))
		return -1;
	XML_SetUserData(x->p, x);
	XML_SetElementHandler(x->p, x_start, x_end);
	XML_SetCharacterDataHandler(x->p, x_text);
	XML_SetStartDoctypeDeclHandler(x->p, x_doctype);
	if (XML_Parse(x->p, body, (int)len, XML_TRUE) != XML_STATUS_OK || x->refused || x->oom)
		return -1;
	return 0;
}

/* --- the call --- */

/* application/x-www-form-urlencoded value: unreserved bytes kept */
static void form_add(char **buf, size_t *len, size_t *cap, const char *name, const char *value)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t need = strlen(name) + 3 * strlen(value) + 3;
	char *b;

	if (!*buf && *len)
		return; /* an earlier allocation failed */
	if (*len + need >= *cap) {
		size_t ncap = (*len + need) * 2;

		b = malloc(ncap);
		if (b && *buf)
			memcpy(b, *buf, *len + 1);
		if (*buf) {
			OPENSSL_cleanse(*buf, *len);
			free(*buf);
		}
		*buf = b;
		*cap = ncap;
		if (!b)
			return;
	}
	b = *buf + *len;
	if (*len)
		*b++ = '&';
	b += sprintf(b, "%s=", name);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || *p == '-' || *p == '.' || *p == '_' || *p == '~') {
			*b++ = (char)*p;
		} else {
			*b++ = '%';
			*b++ = hex[*p >> 4];
			*b++ = hex[*p & 15];
		}
	}
	*b = 0;
	*len = (size_t)(b - *buf);
}

/* Host header value and path of an endpoint URL. 0 or -1. */
static int split_endpoint(const char *url, char *host, size_t hostlen, char *path,
			  size_t pathlen)
{
	CURLU *u = curl_url();
	char *h = NULL, *port = NULL, *p = NULL;
	int rc = -1;

	if (u && curl_url_set(u, CURLUPART_URL, url, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &h, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_PATH, &p, 0) == CURLUE_OK) {
		curl_url_get(u, CURLUPART_PORT, &port, 0); /* only when written */
		snprintf(host, hostlen, "%s%s%s", h, port ? ":" : "", port ? port : "");
		snprintf(path, pathlen, "%s", p && *p ? p : "/");
		rc = 0;
	}
	curl_free(h);
	curl_free(port);
	curl_free(p);
	curl_url_cleanup(u);
	return rc;
}

/*
 * POSTs form to STS (signed with src when not NULL) and parses the
 * credentials. what names the call in messages ("AssumeRole for arn:...").
 */
static int sts_call(const cr_sts *sts, const char *form, const aws_creds *src,
		    const char *what, const char *source, aws_creds *out, char *err, size_t errlen)
{
	char host[300], path[512], hosthdr[320], datehdr[40], why[300];
	const char *hdrs[6] = { NULL };
	char *tokhdr = NULL, *authhdr = NULL;
	cr_request rq = { .method = "POST", .url = sts->endpoint, .headers = hdrs, .body = form,
			  .body_len = strlen(form), .timeout_ms = 10000, .connect_timeout_ms = 3000,
			  .max_body = STS_MAX_BODY, .ca_file = sts->ca_file };
	cr_answer an = { 0, NULL, 0 };
	struct xp *x = calloc(1, sizeof *x);
	double when = 0;
	int n = 0, rc = -1;

	if (!x) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (split_endpoint(sts->endpoint, host, sizeof host, path, sizeof path) != 0) {
		snprintf(err, errlen, "STS %s: the endpoint %.200s is not a URL", what, sts->endpoint);
		goto done;
	}
	snprintf(hosthdr, sizeof hosthdr, "Host: %s", host);
	hdrs[n++] = hosthdr;
	hdrs[n++] = "Content-Type: application/x-www-form-urlencoded; charset=utf-8";
	if (src) {
		sigv4_header sh[2] = { { "Host", host },
				       { "Content-Type", "application/x-www-form-urlencoded; charset=utf-8" } };
		sigv4_input in = { .method = "POST", .path = path, .headers = sh, .nheaders = 2,
				   .payload = form, .payload_len = strlen(form),
				   .access_key = src->access_key, .secret_key = src->secret_key,
				   .session_token = src->session_token, .region = sts->region,
				   .service = "sts", .when = time(NULL), .normalize_path = 1 };
		sigv4_output so;

		if (sigv4_sign(&in, &so, why, sizeof why) != 0) {
			snprintf(err, errlen, "STS %s: signing failed: %s", what, why);
			goto done;
		}
		snprintf(datehdr, sizeof datehdr, "X-Amz-Date: %s", so.amz_date);
		authhdr = malloc(strlen(so.authorization) + 16);
		if (authhdr)
			sprintf(authhdr, "Authorization: %s", so.authorization);
		sigv4_output_free(&so);
		if (src->session_token && (tokhdr = malloc(strlen(src->session_token) + 24)))
			sprintf(tokhdr, "X-Amz-Security-Token: %s", src->session_token);
		if (!authhdr || (src->session_token && !tokhdr)) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		hdrs[n++] = datehdr;
		hdrs[n++] = authhdr;
		if (tokhdr)
			hdrs[n++] = tokhdr;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		cr_answer_free(&an);
		if (cr_http(&rq, &an, why, sizeof why) == 0 && an.status < 500)
			break;
	}
	if (!an.body) {
		snprintf(err, errlen, "STS %s at %s failed: %s", what, sts->endpoint, why);
		goto done;
	}
	if (xp_parse(x, an.body, an.len) != 0 && an.status == 200) {
		snprintf(err, errlen, "STS %s: the answer (HTTP %ld) is not readable XML", what,
			 an.status);
		goto done;
	}
	if (an.status != 200) {
		snprintf(err, errlen, "STS %s at %s failed: %s%s%.300s (HTTP %ld%s%.80s)", what,
			 sts->endpoint,
			 x->code ? x->code : "an error without a code", x->message ? ": " : "",
			 x->message ? x->message : "", an.status, x->request_id ? ", request id " : "",
			 x->request_id ? x->request_id : "");
		goto done;
	}
	if (!x->ak || !x->sk || !x->token || !*x->ak || !*x->sk) {
		snprintf(err, errlen, "STS %s: the answer has no credentials", what);
		goto done;
	}
	if (!x->expiration || cr_parse_time(x->expiration, &when) != 0) {
		snprintf(err, errlen, "STS %s: the answer has no readable Expiration", what);
		goto done;
	}
	if (cr_fill(out, x->ak, x->sk, x->token, when, source) != 0) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	cr_obtained(out);
	rc = 0;
done:
	cr_answer_free(&an);
	cr_wipe(authhdr);
	cr_wipe(tokhdr);
	xp_clear(x);
	free(x);
	return rc;
}

static void default_session_name(char *buf, size_t len, const char *given)
{
	if (given && *given)
		snprintf(buf, len, "%s", given);
	else
		snprintf(buf, len, "hypd-session-%lld", (long long)time(NULL));
}

int cr_assume_role(const cr_sts *sts, const aws_creds *src, const char *role_arn,
		   const char *session_name, const char *external_id, long duration,
		   const char *source, aws_creds *out, char *err, size_t errlen)
{
	char *form = NULL, name[128], num[24], what[300];
	size_t len = 0, cap = 0;
	int rc;

	default_session_name(name, sizeof name, session_name);
	form_add(&form, &len, &cap, "Action", "AssumeRole");
	form_add(&form, &len, &cap, "Version", STS_VERSION);
	form_add(&form, &len, &cap, "RoleArn", role_arn);
	form_add(&form, &len, &cap, "RoleSessionName", name);
	if (external_id)
		form_add(&form, &len, &cap, "ExternalId", external_id);
	if (duration > 0) {
		snprintf(num, sizeof num, "%ld", duration);
		form_add(&form, &len, &cap, "DurationSeconds", num);
	}
	if (!form) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(what, sizeof what, "AssumeRole for %.250s", role_arn);
	rc = sts_call(sts, form, src, what, source, out, err, errlen);
	cr_wipe(form);
	return rc;
}

int cr_assume_role_web(const cr_sts *sts, const char *role_arn, const char *session_name,
		       const char *token, const char *source, aws_creds *out, char *err,
		       size_t errlen)
{
	char *form = NULL, name[128], what[300];
	size_t len = 0, cap = 0;
	int rc;

	default_session_name(name, sizeof name, session_name);
	form_add(&form, &len, &cap, "Action", "AssumeRoleWithWebIdentity");
	form_add(&form, &len, &cap, "Version", STS_VERSION);
	form_add(&form, &len, &cap, "RoleArn", role_arn);
	form_add(&form, &len, &cap, "RoleSessionName", name);
	form_add(&form, &len, &cap, "WebIdentityToken", token);
	if (!form) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	snprintf(what, sizeof what, "AssumeRoleWithWebIdentity for %.250s", role_arn);
	rc = sts_call(sts, form, NULL, what, source, out, err, errlen);
	cr_wipe(form);
	return rc;
}
