/*
 * test_framing: the request-head checks of framing.h without a server.
 * fr_check_length is fed field lists; fr_check_head is fed a header block
 * laid out the way libmicrohttpd 0.9.75 leaves it in its read buffer (see
 * parse() below; tests/lua/http_framing_test.lua runs the real thing).
 */
#include "framing.h"
#include "tap.h"

#include <stdint.h>
#include <string.h>

#define MAXF 8

/* "name: value" lines into fields (the strings stay the caller's) */
static size_t fields(const char *const *lines, struct fr_field *f)
{
	size_t n = 0;

	for (; lines[n]; n++) {
		const char *colon = strchr(lines[n], ':');
		const char *v = colon + 1;

		while (*v == ' ' || *v == '\t')
			v++;
		f[n] = (struct fr_field){ lines[n], (size_t)(colon - lines[n]), v, strlen(v) };
	}
	return n;
}

struct length_case {
	const char *lines[MAXF]; /* NULL-terminated */
	int http10;              /* an HTTP/1.0 request */
	int status;              /* the verdict's, 0: accepted */
	const char *name;        /* what the case shows */
};

static const struct length_case LENGTH[] = {
	{ { "Host: x", NULL }, 0, 0, "no body" },
	{ { "Host: x", "Content-Length: 5", NULL }, 0, 0, "one Content-Length" },
	{ { "Host: x", "Content-Length: 1000", NULL }, 0, 0, "exactly the cap" },
	{ { "Host: x", "Content-Length: 1001", NULL }, 0, 413, "one byte over the cap" },
	{ { "Host: x", "Content-Length: 99999999999999999999999", NULL }, 0, 413, "past 64 bits" },
	{ { "Host: x", "Content-Length: 5", "Content-Length: 5", NULL }, 0, 400, "the same length twice" },
	{ { "Host: x", "Content-Length: 5", "Content-Length: 6", NULL }, 0, 400, "two lengths" },
	{ { "Host: x", "Content-Length: 5, 5", NULL }, 0, 400, "a list of lengths" },
	{ { "Host: x", "Content-Length: +5", NULL }, 0, 400, "a sign" },
	{ { "Host: x", "Content-Length:", NULL }, 0, 400, "an empty length" },
	{ { "Host: x", "Transfer-Encoding: chunked", NULL }, 0, 0, "chunked" },
	{ { "Host: x", "Transfer-Encoding: CHUNKED", NULL }, 0, 0, "chunked in capitals" },
	{ { "Host: x", "Transfer-Encoding: ,chunked ,", NULL }, 0, 0, "empty list elements" },
	{ { "Host: x", "Transfer-Encoding: chunked", "Content-Length: 5", NULL }, 0, 400, "TE and CL" },
	{ { "Transfer-Encoding: chunked", NULL }, 1, 400, "TE in HTTP/1.0" },
	{ { "Host: x", "Transfer-Encoding: gzip", NULL }, 0, 400, "gzip alone" },
	{ { "Host: x", "Transfer-Encoding: xchunked", NULL }, 0, 400, "xchunked" },
	{ { "Host: x", "Transfer-Encoding: chunked, identity", NULL }, 0, 400, "chunked not last" },
	{ { "Host: x", "Transfer-Encoding: chunked;a=b", NULL }, 0, 400, "chunked with a parameter" },
	{ { "Host: x", "Transfer-Encoding: chunked, chunked", NULL }, 0, 400, "chunked twice" },
	{ { "Host: x", "Transfer-Encoding: chunked", "Transfer-Encoding: chunked", NULL }, 0, 400,
	  "chunked twice in two lines" },
	{ { "Host: x", "Transfer-Encoding: ", NULL }, 0, 400, "no coding" },
	{ { "Host: x", "Transfer-Encoding: chunked/x", NULL }, 0, 400, "not a token" },
	{ { "Host: x", "Transfer-Encoding: gzip, chunked", NULL }, 0, 501, "gzip then chunked" },
	{ { "Host: x", "Transfer-Encoding: gzip;q=1, chunked", NULL }, 0, 501, "a parameter" },
	{ { "Host: x", "Transfer-Encoding: gzip", "Transfer-Encoding: chunked", NULL }, 0, 501,
	  "gzip then chunked in two lines" },
	{ { "X-A: b", NULL }, 0, 400, "HTTP/1.1 without Host" },
	{ { "X-A: b", NULL }, 1, 0, "HTTP/1.0 without Host" },
	{ { "Host: x", "host: y", NULL }, 0, 400, "two Hosts" },
};

/*
 * The header block of raw (from the request line's end to the blank
 * line's) as libmicrohttpd 0.9.75 leaves it: CR LF or bare LF and the
 * first colon of a line become NUL, a value's leading OWS is skipped, and
 * a continuation line is appended to the previous name in a copy placed
 * in spill (zeroing the original). Returns the fields; *end is past the
 * blank line.
 */
static size_t parse(char *buf, size_t len, char *spill, struct fr_field *f, char **end)
{
	size_t n = 0, pos = 0;
	int first = 1; /* the request line's end */

	*end = buf + len;
	while (pos < len) {
		char *line = buf + pos, *eol = memchr(line, '\n', len - pos), *colon;
		size_t ll = (size_t)(eol - line);

		if (ll && line[ll - 1] == '\r') {
			line[ll - 1] = '\0';
			ll--;
		}
		*eol = '\0';
		pos = (size_t)(eol - buf) + 1;
		if (first) {
			first = 0;
			continue;
		}
		if (ll == 0)
			break;
		if ((line[0] == ' ' || line[0] == '\t') && n) {
			size_t nl = f[n - 1].nlen;

			memcpy(spill, f[n - 1].name, nl);
			memset((char *)f[n - 1].name, 0, nl);
			strcpy(spill + nl, line + strspn(line, " \t"));
			f[n - 1].name = spill;
			f[n - 1].nlen = strlen(spill);
			continue;
		}
		colon = memchr(line, ':', ll);
		*colon = '\0';
		f[n].name = line;
		f[n].nlen = (size_t)(colon - line);
		f[n].value = colon + 1 + strspn(colon + 1, " \t");
		f[n].vlen = strlen(f[n].value);
		n++;
	}
	return n;
}

struct head_case {
	const char *raw; /* after "GET / HTTP/1.1" */
	size_t len;      /* bytes of raw (it may hold NULs) */
	int status;      /* the verdict's */
	const char *name;
};

#define RAW(s) s, sizeof s - 1

static const struct head_case HEAD[] = {
	{ RAW("\r\nHost: x\r\nX-A: b c\r\n\r\n"), 0, "plain lines" },
	{ RAW("\nHost: x\nX-A:\tb \n\n"), 0, "bare LF line ends, tab and trailing space" },
	{ RAW("\r\nHost: x\r\nX-A:\r\n\r\n"), 0, "an empty value" },
	{ RAW("\r\n\r\n"), 0, "no fields" },
	{ RAW("\r\nHost: x\r\nX-A : b\r\n\r\n"), 400, "a space before the colon" },
	{ RAW("\r\nHost: x\r\n X-A: b\r\n\r\n"), 400, "a continuation line" },
	{ RAW("\r\nHost: x\r\nX-A: b\r\n c\r\nX-B: d\r\n\r\n"), 400, "obs-fold" },
	{ RAW("\r\nHost: x\r\nX-A: b\r\n\tc\r\n\r\n"), 400, "obs-fold of the last line" },
	{ RAW("\r\nHost: x\r\nX-A: b\0c\r\nX-B: d\r\n\r\n"), 400, "a NUL in a value" },
	{ RAW("\r\nHost: x\r\nX-A: b\0c\r\n\r\n"), 400, "a NUL in the last value" },
	{ RAW("\r\nHost: x\r\nX-A: b\0\r\n\r\n"), 400, "a NUL ending the last value" },
	{ RAW("\r\nHost: x\r\nX-A: b\rc\r\n\r\n"), 400, "a bare CR" },
	{ RAW("\r\nHost: x\r\nX-A: b\x7f\r\n\r\n"), 400, "DEL" },
	{ RAW("\r\nHost: x\r\nX@A: b\r\n\r\n"), 400, "a name that is not a token" },
};

int main(void)
{
	struct fr_field f[MAXF];
	struct fr_verdict v;
	char target[] = "/a?b=%00";
	char buf[256], spill[256], *end;

	for (size_t i = 0; i < sizeof LENGTH / sizeof LENGTH[0]; i++) {
		const struct length_case *c = &LENGTH[i];
		size_t n = fields(c->lines, f);
		int rc;

		memset(&v, 0, sizeof v);
		rc = fr_check_length(f, n, c->http10, 1000, &v);
		ok(v.status == c->status && rc == (c->status ? -1 : 0),
		   "length: %s gets %d (got %d: %s)", c->name, c->status, v.status,
		   v.message ? v.message : "accepted");
	}
	for (size_t i = 0; i < sizeof HEAD / sizeof HEAD[0]; i++) {
		const struct head_case *c = &HEAD[i];
		size_t n;

		memcpy(buf, c->raw, c->len);
		memset(spill, 0, sizeof spill);
		n = parse(buf, c->len, spill, f, &end);
		memset(&v, 0, sizeof v);
		fr_check_head(buf, end, f, n, &v);
		ok(v.status == c->status, "head: %s gets %d (got %d: %s)", c->name, c->status, v.status,
		   v.message ? v.message : "accepted");
	}

	memset(&v, 0, sizeof v);
	ok(fr_scan_target(target, &v) == 8 && v.status == 0, "a target with a query is visible ASCII");
	memcpy(buf, "/a\x01" "b", 5);
	ok(fr_scan_target(buf, &v) == 4 && v.status == 400, "a control character in the target gets 400");
	memset(&v, 0, sizeof v);
	memcpy(buf, "/a\0b\0HTTP/1.1", 14);
	ok(fr_check_target(buf, 2, buf + 5, &v) == -1 && v.status == 400,
	   "a NUL in the target (the version is not right after it) gets 400");
	memset(&v, 0, sizeof v);
	ok(fr_check_target(buf + 3, 1, buf + 5, &v) == 0 && fr_check_target(NULL, 0, buf, &v) == 0,
	   "a target the version follows, or none, passes");
	return tap_done();
}
