/*
 * fuzz_framing: libFuzzer target for the request-head checks
 * (host/framing.c).
 *
 *   make build/fuzz/fuzz_framing && build/fuzz/fuzz_framing -max_total_time=60 tests/fuzz/corpus/framing
 *
 * The input is a request head as sent ("GET /x HTTP/1.1\r\nHost: a\r\n\r\n").
 * It is copied to an exact-size buffer and cut up the way libmicrohttpd
 * 0.9.75 does in place (framing.h): the SPs of the request line and each
 * line end become NULs, as does the colon after a name; a value starts
 * after its leading whitespace and ends at the first NUL (strlen); an
 * obs-fold line is joined into a copy outside the block and zeroed. An
 * input without a complete head, or with a line libmicrohttpd would refuse
 * itself (no colon), is skipped. Then the four checks run as server.c runs
 * them. The contract checked:
 *   - no read outside the block or the fields (ASan);
 *   - a check returns 0 with no verdict, or -1 with status 400, 413 or 501,
 *     code VALIDATION or TOO_LARGE and a message of printable ASCII
 *     without quotes or backslashes (it goes into JSON as it is);
 *   - when fr_check_head passes, every name is a token and no value holds
 *     a control character but HT (checked here independently).
 */
#include "framing.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIELDS 64

static int tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static void verdict_ok(int rc, const struct fr_verdict *v)
{
	const char *m;

	if (rc == 0 && v->status == 0)
		return;
	if (rc != -1 || (v->status != 400 && v->status != 413 && v->status != 501) || !v->code || !v->message)
		abort();
	if (strcmp(v->code, "VALIDATION") != 0 && strcmp(v->code, "TOO_LARGE") != 0)
		abort();
	for (m = v->message; *m; m++)
		if (*m < ' ' || *m > '~' || *m == '"' || *m == '\\')
			abort();
}

/* The end of the line at p (its first CR LF or LF byte), or NULL. */
static char *line_end(char *p, char *end)
{
	char *e = memchr(p, '\n', (size_t)(end - p));

	if (e && e > p && e[-1] == '\r')
		e--;
	return e;
}

/* Overwrites the line end at e with NULs; returns the next line. */
static char *cut(char *e)
{
	if (*e == '\r')
		*e++ = '\0';
	*e++ = '\0';
	return e;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fr_field f[MAX_FIELDS];
	char *folded[MAX_FIELDS] = { 0 };
	struct fr_verdict v = { 0, NULL, NULL };
	char *buf, *end, *p, *e, *sp1, *sp2, *target, *version;
	size_t n = 0, tlen, i, k;
	int rc;

	if (size == 0 || !(buf = malloc(size)))
		return 0;
	memcpy(buf, data, size);
	end = buf + size;
	/* the request line: method SP target SP version */
	if (!(e = line_end(buf, end)) || !(sp1 = memchr(buf, ' ', (size_t)(e - buf))) ||
	    !(sp2 = memchr(sp1 + 1, ' ', (size_t)(e - sp1 - 1))))
		goto out;
	*sp1 = *sp2 = '\0';
	target = sp1 + 1;
	version = sp2 + 1;
	p = cut(e);
	/* header lines up to the blank one */
	for (;;) {
		char *name = p, *colon, *val;

		if (p >= end || !(e = line_end(p, end)))
			goto out; /* no complete head: libmicrohttpd would wait */
		if (e == p) {
			p = cut(e);
			break;
		}
		if (*p == ' ' || *p == '\t') { /* obs-fold: joined into a copy */
			size_t add = (size_t)(e - p), old;
			char *c;

			if (n == 0)
				goto out;
			old = f[n - 1].vlen;
			if (!(c = malloc(old + add + 1)))
				goto out;
			memcpy(c, f[n - 1].value, old);
			memcpy(c + old, p, add);
			c[old + add] = '\0';
			free(folded[n - 1]);
			folded[n - 1] = c;
			f[n - 1].value = c;
			f[n - 1].vlen = old + add;
			memset(p, 0, (size_t)(e - p));
			p = cut(e);
			continue;
		}
		if (n == MAX_FIELDS || !(colon = memchr(p, ':', (size_t)(e - p))))
			goto out;
		*colon = '\0';
		p = cut(e);
		for (val = colon + 1; *val == ' ' || *val == '\t'; val++)
			;
		f[n++] = (struct fr_field){ name, (size_t)(colon - name), val, strlen(val) };
	}
	tlen = fr_scan_target(target, &v);
	verdict_ok(v.status ? -1 : 0, &v);
	if (strlen(target) != tlen)
		abort();
	rc = fr_check_target(target, tlen, version, &v);
	verdict_ok(rc ? rc : v.status ? -1 : 0, &v);
	v = (struct fr_verdict){ 0, NULL, NULL };
	rc = fr_check_head(version + strlen(version), p, f, n, &v);
	verdict_ok(rc, &v);
	if (rc == 0) {
		for (i = 0; i < n; i++) {
			if (f[i].nlen == 0)
				abort();
			for (k = 0; k < f[i].nlen; k++)
				if (!tchar((unsigned char)f[i].name[k]))
					abort();
			for (k = 0; k < f[i].vlen; k++)
				if (((unsigned char)f[i].value[k] < ' ' && f[i].value[k] != '\t') || f[i].value[k] == 0x7f)
					abort();
		}
	}
	v = (struct fr_verdict){ 0, NULL, NULL };
	rc = fr_check_length(f, n, strcmp(version, "HTTP/1.0") == 0, (uint64_t)1 << 20, &v);
	verdict_ok(rc, &v);
out:
	for (i = 0; i < n; i++)
		free(folded[i]);
	free(buf);
	return 0;
}
