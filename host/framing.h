/*
 * framing: the checks RFC 9112 asks of a request's head that
 * libmicrohttpd 0.9.75 does not make. Its strict mode
 * (MHD_OPTION_STRICT_FOR_CLIENT = 1) adds only two, and answers them
 * badly: an HTTP/1.1 request without Host gets a 400 whose status line
 * and headers are sent twice, a space in the target a closed connection
 * and no answer; both are checked here instead. server.c runs these
 * checks when the head is in and no body byte is read yet, and refuses
 * with the verdict and a closed connection: per RFC 9112 6.3 such a
 * request is an error.
 *
 * Pure C: no libmicrohttpd, no Lua; the caller hands over what
 * libmicrohttpd parsed. Nothing is allocated; every pointer is borrowed
 * for the call. A verdict's code and message are static strings of
 * printable ASCII without quotes or backslashes (they go into JSON as
 * they are).
 */
#ifndef HYPD_FRAMING_H
#define HYPD_FRAMING_H

#include <stddef.h>
#include <stdint.h>

/* A header field line as libmicrohttpd parsed it (borrowed strings). */
struct fr_field {
	const char *name;  /* as sent, not NUL-terminated necessarily */
	size_t nlen;       /* bytes of name */
	const char *value; /* leading whitespace skipped */
	size_t vlen;       /* bytes of value */
};

/* Why a request is refused. */
struct fr_verdict {
	int status;          /* 400, 413 or 501; 0 while nothing is wrong */
	const char *code;    /* VALIDATION or TOO_LARGE (hypd.errors codes) */
	const char *message; /* what is wrong */
};

/*
 * The request target as libmicrohttpd's URI callback sees it (it splits
 * and unescapes the query in place afterwards): returns its strlen() and,
 * unless it is visible ASCII (no control character, no SP), sets v (400).
 * Costs one pass over the target.
 */
size_t fr_scan_target(const char *target, struct fr_verdict *v);

/*
 * Later, in the first call: the target of target_len bytes (as
 * fr_scan_target counted them) and the version string libmicrohttpd
 * handed to the access handler. In the read buffer the version follows
 * the target after one separator; when it does not, a NUL in the target
 * hid the rest from strlen(). Returns 0 when good (or target is NULL),
 * else -1 with v set (400).
 */
int fr_check_target(const char *target, size_t target_len, const char *version,
		    struct fr_verdict *v);

/*
 * The header block as it lies in libmicrohttpd's read buffer, from the end
 * of the version string (head) to the end of the blank line (end), and
 * the n fields parsed from it, in order. libmicrohttpd 0.9.75 parses in
 * place: it overwrites each line's CR LF (or bare LF) and the colon after
 * a name with NUL, and its strings point into that buffer. So between the
 * end of one value and the next name lie exactly the 1 or 2 NULs of a
 * line end, and anything else is a byte its strings hide: a NUL inside a
 * value (strlen stopped early), or an obs-fold line (libmicrohttpd joins
 * it into a copy outside the block and zeroes the original). Also
 * checked: names are tokens (no whitespace before the colon) and values
 * hold no control character but HT (no bare CR).
 * Returns 0 when good, else -1 with v set (400). Costs one pass over the
 * block.
 */
int fr_check_head(const char *head, const char *end, const struct fr_field *f, size_t n,
		  struct fr_verdict *v);

/*
 * The body length (RFC 9112 6.1-6.3) and Host (3.2) from the n fields of
 * a request of HTTP/1.0 (http10 set) or 1.1: HTTP/1.1 without Host, or a
 * second Host, is 400;
 * Transfer-Encoding in HTTP/1.0 or beside Content-Length is 400; its
 * codings must end in one chunked (else 400) and name nothing else (else
 * 501, only chunked is implemented); one Content-Length of digits only
 * (else 400) no larger than max_body (else 413, TOO_LARGE). Returns 0
 * when good, else -1 with v set.
 */
int fr_check_length(const struct fr_field *f, size_t n, int http10, uint64_t max_body,
		    struct fr_verdict *v);

#endif
