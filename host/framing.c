/* framing: request-head checks libmicrohttpd 0.9.75 leaves out (see framing.h). */
#include "framing.h"

#include <stdint.h>
#include <string.h>
#include <strings.h>

static int refuse(struct fr_verdict *v, int status, const char *code, const char *message)
{
	v->status = status;
	v->code = code;
	v->message = message;
	return -1;
}

static int bad(struct fr_verdict *v, const char *message)
{
	return refuse(v, 400, "VALIDATION", message);
}

/* tchar (RFC 9110 5.6.2) */
static int is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c && strchr("!#$%&'*+-.^_`|~", c));
}

static int is_ows(char c) { return c == ' ' || c == '\t'; }

/* Is f's name `name` (lower case, any case in f)? */
static int named(const struct fr_field *f, const char *name)
{
	return f->nlen == strlen(name) && strncasecmp(f->name, name, f->nlen) == 0;
}

size_t fr_scan_target(const char *target, struct fr_verdict *v)
{
	size_t n;

	for (n = 0; target[n]; n++) {
		unsigned char c = (unsigned char)target[n];

		if ((c <= ' ' || c == 0x7f) && !v->status)
			bad(v, "a control character or space in the request target");
	}
	return n;
}

int fr_check_target(const char *target, size_t target_len, const char *version,
		    struct fr_verdict *v)
{
	/* one SP, now a NUL, separates target and version (a space in the
	 * target is refused, so libmicrohttpd cannot have taken it for one) */
	if (target && version != target + target_len + 1)
		return bad(v, "a NUL in the request target");
	return 0;
}

/*
 * The bytes between two fields' strings (or around the first and the
 * last): line ends, each 1 or 2 NULs, between lo and hi of them in all.
 * A byte other than NUL is one the strings hide.
 */
static int line_ends(const char *p, const char *q, size_t lo, size_t hi, struct fr_verdict *v)
{
	for (const char *x = p; x < q; x++)
		if (*x) /* a continuation line starts with SP or HT after a line end */
			return bad(v, x > p && is_ows(*x) && !x[-1] ?
					      "obsolete line folding (obs-fold) in the header block" :
					      "a NUL in a header value");
	if ((size_t)(q - p) < lo || (size_t)(q - p) > hi)
		return bad(v, "a NUL in a header value");
	return 0;
}

int fr_check_head(const char *head, const char *end, const struct fr_field *f, size_t n,
		  struct fr_verdict *v)
{
	const char *p = head;

	for (size_t i = 0; i < n; i++) {
		const char *name = f[i].name;

		/* only a folded field is copied out of the block */
		if (name < p || name >= end || f[i].value < name || f[i].value + f[i].vlen > end)
			return bad(v, "obsolete line folding (obs-fold) in the header block");
		if (line_ends(p, name, 1, 2, v) != 0)
			return -1;
		if (f[i].nlen == 0)
			return bad(v, "a header line without a name");
		for (size_t k = 0; k < f[i].nlen; k++)
			if (!is_tchar((unsigned char)name[k]))
				return bad(v, is_ows(name[k]) ? "whitespace in a header name or before its colon" :
							 "a header name that is not a token");
		p = name + f[i].nlen;
		if (p >= end || *p++ != '\0') /* the colon */
			return bad(v, "a malformed header line");
		while (p < f[i].value && is_ows(*p))
			p++;
		if (p != f[i].value)
			return bad(v, "a malformed header line");
		for (size_t k = 0; k < f[i].vlen; k++) {
			unsigned char c = (unsigned char)p[k];

			if ((c < ' ' && c != '\t') || c == 0x7f)
				return bad(v, "a control character in a header value");
		}
		p += f[i].vlen;
	}
	/* the last line's end and the blank line's */
	return line_ends(p, end, 2, 4, v);
}

/* Transfer-Encoding: codings that end in exactly one chunked (RFC 9112 6.1, 6.3 #4). */
static int check_codings(const struct fr_field *f, size_t n, struct fr_verdict *v)
{
	size_t codings = 0, chunked = 0;
	int last_chunked = 0;

	for (size_t i = 0; i < n; i++) {
		const char *s = f[i].value, *e = f[i].value + f[i].vlen;

		if (!named(&f[i], "transfer-encoding"))
			continue;
		while (s < e) {
			const char *tok;
			size_t len;
			int params = 0;

			if (is_ows(*s) || *s == ',') { /* empty list elements are allowed */
				s++;
				continue;
			}
			for (tok = s; s < e && is_tchar((unsigned char)*s); s++)
				;
			len = (size_t)(s - tok);
			while (s < e && is_ows(*s))
				s++;
			if (s < e && *s == ';') {
				params = 1;
				while (s < e && *s != ',')
					s++;
			}
			if (len == 0 || (s < e && *s != ','))
				return bad(v, "a malformed Transfer-Encoding");
			codings++;
			last_chunked = !params && len == 7 && strncasecmp(tok, "chunked", 7) == 0;
			chunked += (size_t)last_chunked;
		}
	}
	if (codings == 0)
		return bad(v, "a Transfer-Encoding that names no coding");
	if (!last_chunked)
		return bad(v, "the final transfer coding is not chunked");
	if (chunked > 1)
		return bad(v, "chunked is applied more than once");
	if (codings > chunked)
		return refuse(v, 501, "VALIDATION", "only the chunked transfer coding is implemented");
	return 0;
}

int fr_check_length(const struct fr_field *f, size_t n, int http10, uint64_t max_body,
		    struct fr_verdict *v)
{
	const struct fr_field *cl = NULL;
	size_t hosts = 0, lengths = 0, codings = 0;
	uint64_t len = 0;

	for (size_t i = 0; i < n; i++) {
		if (named(&f[i], "host"))
			hosts++;
		else if (named(&f[i], "transfer-encoding"))
			codings++;
		else if (named(&f[i], "content-length")) {
			lengths++;
			cl = &f[i];
		}
	}
	if (hosts == 0 && !http10)
		return bad(v, "an HTTP/1.1 request without Host");
	if (hosts > 1)
		return bad(v, "more than one Host header");
	if (codings && http10)
		return bad(v, "Transfer-Encoding in an HTTP/1.0 request");
	if (codings && lengths)
		return bad(v, "Content-Length together with Transfer-Encoding");
	if (codings)
		return check_codings(f, n, v);
	if (lengths > 1)
		return bad(v, "more than one Content-Length header");
	if (!cl)
		return 0;
	if (cl->vlen == 0)
		return bad(v, "a Content-Length that is not a number");
	for (size_t k = 0; k < cl->vlen; k++) {
		unsigned d = (unsigned)(unsigned char)cl->value[k] - '0';

		if (d > 9)
			return bad(v, "a Content-Length that is not a number");
		if (len > (UINT64_MAX - d) / 10)
			return refuse(v, 413, "TOO_LARGE", "request body too large");
		len = len * 10 + d;
	}
	if (len > max_body)
		return refuse(v, 413, "TOO_LARGE", "request body too large");
	return 0;
}
