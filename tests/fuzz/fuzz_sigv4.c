/*
 * fuzz_sigv4.c: libFuzzer target for the SigV4 signer.
 *
 * Input layout: byte 0 holds flags, bytes 1..8 a signing time (used when
 * flag 0x80 is set), then lines: method, path, query, header lines
 * ("Name:value") up to an empty line, and the body after it. Each input is
 * signed four ways (header and presign, normalize on and off) and its bytes
 * are also URI-encoded. Every string is copied to an exact-size buffer so
 * that ASan sees any read past its end.
 *
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -Ihost \
 *       tests/fuzz/fuzz_sigv4.c host/sigv4.c -lcrypto -o fuzz_sigv4
 *   ./fuzz_sigv4 -max_total_time=60 tests/fuzz/corpus/sigv4
 */
#include "sigv4.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HEADERS 64

static char *dupn(const uint8_t *p, size_t n)
{
	char *s = malloc(n + 1);

	if (s) {
		memcpy(s, p, n);
		s[n] = '\0';
	}
	return s;
}

/* Next line of [*p, end) as a fresh string; *p moves past its '\n'. */
static char *next_line(const uint8_t **p, const uint8_t *end, size_t *len)
{
	const uint8_t *e = memchr(*p, '\n', (size_t)(end - *p));
	char *s;

	if (!e)
		e = end;
	*len = (size_t)(e - *p);
	s = dupn(*p, *len);
	*p = e < end ? e + 1 : end;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const long expires[] = { 0, 1, 60, 3600, 604800, 604801, -5, 900 };
	static const char *regions[] = { "us-east-1", "us-west-2", "eu-west-1", "x" };
	const uint8_t *p, *end = data + size;
	char *method, *path, *query, *hname[MAX_HEADERS], *hval[MAX_HEADERS], *body, *enc;
	sigv4_header h[MAX_HEADERS];
	sigv4_input in;
	sigv4_output out;
	char err[128];
	size_t n, nh = 0, i, blen;
	uint8_t flags;
	int64_t t = 1440938160;
	int norm;

	if (size < 9)
		return 0;
	flags = data[0];
	if (flags & 0x80) {
		memcpy(&t, data + 1, sizeof t);
	}
	p = data + 9;
	method = next_line(&p, end, &n);
	path = next_line(&p, end, &n);
	query = next_line(&p, end, &n);
	while (p < end && nh < MAX_HEADERS) {
		char *line = next_line(&p, end, &n), *colon;

		if (!line)
			break;
		if (n == 0) {
			free(line);
			break;
		}
		colon = strchr(line, ':');
		hname[nh] = colon ? dupn((const uint8_t *)line, (size_t)(colon - line)) : dupn((const uint8_t *)line, strlen(line));
		hval[nh] = dupn((const uint8_t *)(colon ? colon + 1 : ""), colon ? strlen(colon + 1) : 0);
		h[nh].name = hname[nh];
		h[nh].value = hval[nh];
		nh++;
		free(line);
	}
	blen = (size_t)(end - p);
	body = blen ? dupn(p, blen) : NULL;

	memset(&in, 0, sizeof in);
	in.method = method;
	in.path = path;
	in.query = (flags & 0x40) ? NULL : query;
	in.headers = h;
	in.nheaders = nh;
	in.payload = body;
	in.payload_len = blen;
	in.payload_hash = (flags & 0x03) == 1 ? SIGV4_UNSIGNED_PAYLOAD
			  : (flags & 0x03) == 2 ? "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
			  : (flags & 0x03) == 3 ? query : NULL;
	in.access_key = "AKIDEXAMPLE";
	in.secret_key = (flags & 0x04) ? "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" : method;
	in.session_token = (flags & 0x08) ? ((flags & 0x10) ? query : "AQoDYXdzEPT//////////wEXAMPLE") : NULL;
	in.omit_session_token = (flags & 0x20) != 0;
	in.sign_body = (flags & 0x01) != 0;
	in.region = regions[(flags >> 2) & 3];
	in.service = (flags & 0x10) ? "s3" : "service";
	in.when = (time_t)t;
	in.expires = expires[(flags >> 3) & 7];
	for (norm = 0; norm <= 1; norm++) {
		in.normalize_path = norm;
		if (sigv4_sign(&in, &out, err, sizeof err) == 0 &&
		    (!out.canonical_request || !out.string_to_sign || !out.authorization || strlen(out.signature) != 64))
			abort();
		sigv4_output_free(&out);
		if (sigv4_presign(&in, &out, err, sizeof err) == 0 &&
		    (!out.canonical_request || !out.query || out.authorization))
			abort();
		sigv4_output_free(&out);
	}
	for (norm = 0; norm <= 1; norm++) {
		enc = sigv4_uri_encode((const char *)data, size, norm);
		if (!enc)
			abort();
		for (i = 0; enc[i]; i++)
			if (enc[i] == ' ' || (unsigned char)enc[i] >= 0x80)
				abort();
		free(enc);
	}
	for (i = 0; i < nh; i++) {
		free(hname[i]);
		free(hval[i]);
	}
	free(method);
	free(path);
	free(query);
	free(body);
	return 0;
}
