/*
 * sigv4_diff.c: signs every request of a JSON-lines file written by
 * tests/tools/sigv4_diff.py with hypd's signer and compares the canonical
 * request, string to sign and signature with botocore's. One TAP line per
 * request. Run through tests/sigv4_diff.sh.
 *
 *   sigv4_diff FILE
 */
#include "sigv4.h"
#include "tap.h"

#include <cJSON.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 64

static const char *jstr(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jbool(const cJSON *o, const char *k)
{
	return cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, k));
}

static double jnum(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* Decodes hex into a malloc'd buffer; *len gets its length. */
static char *unhex(const char *hex, size_t *len)
{
	size_t n = hex ? strlen(hex) / 2 : 0, i;
	char *p = malloc(n + 1);
	unsigned int b;

	for (i = 0; p && i < n; i++) {
		if (sscanf(hex + 2 * i, "%2x", &b) != 1)
			break;
		p[i] = (char)b;
	}
	*len = i;
	return p;
}

static void show(const char *what, const char *s)
{
	const char *e;

	printf("# %s:\n", what);
	for (; s && *s; s = *e ? e + 1 : e) {
		e = strchr(s, '\n');
		if (!e)
			e = s + strlen(s);
		printf("#   |%.*s|\n", (int)(e - s), s);
	}
}

static void check(const cJSON *v, long lineno)
{
	sigv4_header h[MAX_HEADERS];
	const cJSON *hs = cJSON_GetObjectItemCaseSensitive(v, "headers"), *x;
	const cJSON *exp = cJSON_GetObjectItemCaseSensitive(v, "expected");
	sigv4_input in;
	sigv4_output out;
	char err[256];
	size_t n = 0, blen;
	char *body = unhex(jstr(v, "body_hex"), &blen);
	int rc, good;

	cJSON_ArrayForEach(x, hs) {
		if (n < MAX_HEADERS && cJSON_GetArraySize(x) == 2) {
			h[n].name = cJSON_GetArrayItem(x, 0)->valuestring;
			h[n].value = cJSON_GetArrayItem(x, 1)->valuestring;
			n++;
		}
	}
	memset(&in, 0, sizeof in);
	in.method = jstr(v, "method");
	in.path = jstr(v, "path");
	in.query = jstr(v, "query");
	in.headers = h;
	in.nheaders = n;
	in.payload = body;
	in.payload_len = blen;
	in.payload_hash = jstr(v, "payload_hash");
	in.access_key = jstr(v, "access_key");
	in.secret_key = jstr(v, "secret_key");
	in.session_token = jstr(v, "session_token");
	in.omit_session_token = jbool(v, "omit_session_token");
	in.region = jstr(v, "region");
	in.service = jstr(v, "service");
	in.when = (time_t)jnum(v, "when");
	in.normalize_path = jbool(v, "normalize");
	in.sign_body = jbool(v, "sign_body");
	in.expires = (long)jnum(v, "expires");

	rc = jbool(v, "presign") ? sigv4_presign(&in, &out, err, sizeof err)
				 : sigv4_sign(&in, &out, err, sizeof err);
	good = rc == 0 && jstr(exp, "signature") && !strcmp(out.signature, jstr(exp, "signature")) &&
	       jstr(exp, "canonical_request") && !strcmp(out.canonical_request, jstr(exp, "canonical_request")) &&
	       jstr(exp, "string_to_sign") && !strcmp(out.string_to_sign, jstr(exp, "string_to_sign"));
	ok(good, "request %ld (%s) signs like botocore", lineno, jstr(v, "desc") ? jstr(v, "desc") : "?");
	if (!good) {
		if (rc)
			printf("# error: %s\n", err);
		show("botocore canonical request", jstr(exp, "canonical_request"));
		show("hypd canonical request", out.canonical_request);
		printf("# botocore signature %s\n# hypd signature     %s\n",
		       jstr(exp, "signature") ? jstr(exp, "signature") : "?", out.signature);
	}
	sigv4_output_free(&out);
	free(body);
}

int main(int argc, char **argv)
{
	FILE *f = argc == 2 ? fopen(argv[1], "r") : NULL;
	char *line = NULL;
	size_t cap = 0;
	long lineno = 0;

	if (!f) {
		ok(0, "the request file %s opens (usage: sigv4_diff FILE)", argc == 2 ? argv[1] : "");
		return tap_done();
	}
	while (getline(&line, &cap, f) > 0) {
		cJSON *v = cJSON_Parse(line);

		lineno++;
		if (!v)
			ok(0, "line %ld of %s is JSON", lineno, argv[1]);
		else
			check(v, lineno);
		cJSON_Delete(v);
	}
	free(line);
	fclose(f);
	if (lineno == 0)
		ok(0, "%s holds requests", argv[1]);
	return tap_done();
}
