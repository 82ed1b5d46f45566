/*
 * sigv4.c: AWS Signature Version 4 (see sigv4.h).
 *
 * Shaped like curl's lib/http_aws_sigv4.c: a pipeline of small steps over a
 * per-call state, chained with `if (!rc)`, and one cleanup block:
 *   check_input -> hash_payload -> collect_headers -> collect_query ->
 *   canonical_request -> string_to_sign -> signature -> finish
 * SHA-256 goes through EVP with one digest context per thread, HMAC is built
 * on it, and signing keys are cached per (secret, date, region, service).
 * A signature allocates only its outputs unless the request is large.
 *
 * Where the specification leaves room, the official suite decides, then
 * botocore and @smithy/signature-v4 (which agree):
 * - normalize = 1: empty and "." segments dropped, ".." pops one ("/a/b/.."
 *   is "/a"), trailing '/' kept when segments remain; segments URI-encoded,
 *   '%' too (AWS's double encoding of the path as sent). normalize = 0: the
 *   path as is; only bytes illegal in an encoded path are escaped.
 * - query: split on '&' (empty pieces skipped) and the first '=', %XX
 *   decoded ('+' stays a plus), re-encoded, sorted by key then value.
 * - headers: names lower-cased, values trimmed with whitespace runs as one
 *   space, repeats joined with ','. Never signed: authorization, expect,
 *   transfer-encoding, user-agent, x-amzn-trace-id (as both references),
 *   nor a caller's copy of a header the signer adds.
 * - presign: payload hash chosen as for headers (the suite and all three
 *   references hash the body; S3 passes SIGV4_UNSIGNED_PAYLOAD); sign_body
 *   does not apply; out.query is the caller's query as given, then the
 *   X-Amz-* parameters in the suite's order.
 */
#include "sigv4.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#define ALGORITHM   "AWS4-HMAC-SHA256"
#define BUF_MAX     (8u << 20) /* no canonical request or query beyond 8 MiB */
#define INPUT_MAX   (1u << 20) /* longest path or query accepted */
#define HEADERS_MAX 1000       /* most headers accepted */
#define SMALL_N     32         /* headers / query parameters kept on the stack */
#define EXPIRES_MAX 604800L    /* 7 days, the SigV4 limit for presigned URLs */
#define KEYCACHE_N  8          /* signing keys cached */

enum { ENC_SLASH = 1, ENC_PERCENT = 2 };

/* ---- growable, capped buffer (curl's dynbuf, with a sticky failure) ---- */

typedef struct {
	char *p;     /* bytes, NUL-terminated */
	size_t len;  /* bytes used, without the NUL */
	size_t cap;  /* bytes available at p */
	int onstack; /* p is the caller's array, not malloc'd */
	int fail;    /* out of memory or over BUF_MAX: later adds do nothing */
} dbuf;

static void db_init(dbuf *b, char *stack, size_t size)
{
	*b = (dbuf){ stack, 0, stack ? size : 0, stack != NULL, 0 };
	if (stack)
		stack[0] = '\0';
}

/* Makes room for n more bytes and the NUL. Returns 0, or -1 (sticky). */
static int db_reserve(dbuf *b, size_t n)
{
	size_t cap;
	char *p;

	if (b->fail || n > BUF_MAX - b->len)
		return b->fail = -1;
	if (b->len + n + 1 <= b->cap)
		return 0;
	for (cap = b->cap ? b->cap : 256; cap < b->len + n + 1; cap *= 2)
		;
	if (b->onstack && (p = malloc(cap)) != NULL)
		memcpy(p, b->p, b->len + 1);
	else if (!b->onstack)
		p = realloc(b->p, cap);
	else
		p = NULL;
	if (!p)
		return b->fail = -1;
	*b = (dbuf){ p, b->len, cap, 0, 0 };
	return 0;
}

/* Appends s[0..n); s must not point into b (see db_addown). */
static void db_add(dbuf *b, const void *s, size_t n)
{
	if (n == 0 || db_reserve(b, n))
		return;
	memcpy(b->p + b->len, s, n);
	b->len += n;
	b->p[b->len] = '\0';
}

/* Appends b's own bytes [off, off + n). Growing may move b->p, so the
 * source is found by offset after the room is made, never before: a
 * pointer into b taken earlier would point into the freed old block. */
static void db_addown(dbuf *b, size_t off, size_t n)
{
	if (n == 0 || db_reserve(b, n))
		return;
	memcpy(b->p + b->len, b->p + off, n);
	b->len += n;
	b->p[b->len] = '\0';
}

static void db_adds(dbuf *b, const char *s) { db_add(b, s, strlen(s)); }
static void db_addc(dbuf *b, char c) { db_add(b, &c, 1); }
static int lower(int c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

static void db_lower(dbuf *b, const char *s, size_t n)
{
	size_t i;

	if (n == 0 || db_reserve(b, n))
		return;
	for (i = 0; i < n; i++)
		b->p[b->len++] = (char)lower((unsigned char)s[i]);
	b->p[b->len] = '\0';
}

static void db_free(dbuf *b)
{
	if (!b->onstack)
		free(b->p);
	db_init(b, NULL, 0);
}

/* ---- URI encoding ---- */

static const char HEX_UPPER[] = "0123456789ABCDEF";
static const char HEX_LOWER[] = "0123456789abcdef";

static int unreserved(unsigned char c)
{
	return (unsigned)((c | 32) - 'a') < 26 || (unsigned)(c - '0') < 10 ||
	       c == '-' || c == '.' || c == '_' || c == '~';
}

static int hexval(unsigned char c)
{
	return (unsigned)(c - '0') < 10 ? c - '0' : (unsigned)((c | 32) - 'a') < 6 ? (c | 32) - 'a' + 10 : -1;
}

/* Writes s[0..n) URI-encoded at o (room for 3n bytes); returns the end.
 * With decode, %XX escapes are decoded first (a stray '%' is literal). */
static char *encode_into(char *o, const char *s, size_t n, int keep, int decode)
{
	size_t i;
	int hi, lo;

	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (decode && c == '%' && i + 2 < n && (hi = hexval((unsigned char)s[i + 1])) >= 0 &&
		    (lo = hexval((unsigned char)s[i + 2])) >= 0) {
			c = (unsigned char)(hi << 4 | lo);
			i += 2;
		}
		if (unreserved(c) || (c == '/' && (keep & ENC_SLASH)) || (c == '%' && (keep & ENC_PERCENT))) {
			*o++ = (char)c;
		} else {
			*o++ = '%';
			*o++ = HEX_UPPER[c >> 4];
			*o++ = HEX_UPPER[c & 15];
		}
	}
	return o;
}

/* Appends s[0..n) URI-encoded; with s NULL, b's own bytes [off, off + n)
 * (found after growing, as in db_addown). */
static void db_encode_from(dbuf *b, const char *s, size_t off, size_t n, int keep, int decode)
{
	char *o;

	if (n > BUF_MAX)
		b->fail = -1;
	if (n == 0 || b->fail || db_reserve(b, 3 * n))
		return;
	o = encode_into(b->p + b->len, s ? s : b->p + off, n, keep, decode);
	b->len = (size_t)(o - b->p);
	*o = '\0';
}

/* s must not point into b: use db_encode_from(b, NULL, off, ...) for that. */
static void db_encode(dbuf *b, const char *s, size_t n, int keep, int decode)
{
	db_encode_from(b, s, 0, n, keep, decode);
}

char *sigv4_uri_encode(const char *s, size_t len, int keep_slash)
{
	char *p, *o;

	if (len > (SIZE_MAX - 1) / 3 || (!s && len) || !(p = malloc(3 * len + 1)))
		return NULL;
	o = encode_into(p, s, len, keep_slash ? ENC_SLASH : 0, 0);
	*o = '\0';
	return p;
}

/* ---- SHA-256 and HMAC over EVP, one digest context per thread ---- */

static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static EVP_MD *sha256_md;    /* fetched once, kept for the process */
static pthread_key_t md_key; /* each thread's EVP_MD_CTX, freed at its exit */
static int md_key_ok;        /* 1: md_key exists */

static void md_ctx_free(void *p) { EVP_MD_CTX_free(p); }

static void crypto_init(void)
{
	sha256_md = EVP_MD_fetch(NULL, "SHA256", NULL);
	md_key_ok = pthread_key_create(&md_key, md_ctx_free) == 0;
}

static EVP_MD_CTX *thread_md(void)
{
	EVP_MD_CTX *c;

	if (pthread_once(&crypto_once, crypto_init) != 0 || !sha256_md || !md_key_ok)
		return NULL;
	c = pthread_getspecific(md_key);
	if (!c && (c = EVP_MD_CTX_new()) != NULL && pthread_setspecific(md_key, c) != 0) {
		EVP_MD_CTX_free(c);
		c = NULL;
	}
	return c;
}

/* out = SHA-256(a || b). Returns 0 or -1. */
static int sha256_2(EVP_MD_CTX *c, const void *a, size_t alen, const void *b, size_t blen,
		    unsigned char out[32])
{
	return EVP_DigestInit_ex(c, sha256_md, NULL) == 1 &&
	       (alen == 0 || EVP_DigestUpdate(c, a, alen) == 1) &&
	       (blen == 0 || EVP_DigestUpdate(c, b, blen) == 1) &&
	       EVP_DigestFinal_ex(c, out, NULL) == 1 ? 0 : -1;
}

/* out = HMAC-SHA256(key = k1 || k2, msg); out may alias k1. */
static int hmac(EVP_MD_CTX *c, const void *k1, size_t k1len, const char *k2, size_t k2len,
		const void *msg, size_t mlen, unsigned char out[32])
{
	unsigned char k[64] = { 0 }, pad[64], inner[32];
	int rc = 0;
	size_t i;

	if (k1len + k2len > sizeof k) {
		rc = sha256_2(c, k1, k1len, k2, k2len, k);
	} else {
		memcpy(k, k1, k1len);
		if (k2len)
			memcpy(k + k1len, k2, k2len);
	}
	for (i = 0; i < sizeof pad; i++)
		pad[i] = k[i] ^ 0x36;
	if (!rc)
		rc = sha256_2(c, pad, sizeof pad, msg, mlen, inner);
	for (i = 0; i < sizeof pad; i++)
		pad[i] = k[i] ^ 0x5c;
	if (!rc)
		rc = sha256_2(c, pad, sizeof pad, inner, sizeof inner, out);
	OPENSSL_cleanse(k, sizeof k);
	OPENSSL_cleanse(pad, sizeof pad);
	return rc;
}

static void hex32(const unsigned char md[32], char out[65])
{
	int i;

	for (i = 0; i < 32; i++) {
		out[2 * i] = HEX_LOWER[md[i] >> 4];
		out[2 * i + 1] = HEX_LOWER[md[i] & 15];
	}
	out[64] = '\0';
}

/* ---- signing-key cache: a few entries, round robin, under a mutex ---- */

typedef struct {
	int used;              /* 1: the entry holds a key */
	char secret[128];      /* the secret access key, NUL-padded */
	char date[9];          /* scope date, "20150830" */
	char region[48];       /* scope region */
	char service[64];      /* scope service */
	unsigned char key[32]; /* the derived signing key */
} keyent;

static keyent keycache[KEYCACHE_N];
static unsigned keycache_next; /* the entry to replace next */
static pthread_mutex_t keycache_lock = PTHREAD_MUTEX_INITIALIZER;

static int derive_key(EVP_MD_CTX *c, const char *secret, const char *date, const char *region,
		      const char *service, unsigned char key[32])
{
	unsigned char k[32];
	int rc;

	rc = hmac(c, "AWS4", 4, secret, strlen(secret), date, 8, k);
	if (!rc)
		rc = hmac(c, k, 32, NULL, 0, region, strlen(region), k);
	if (!rc)
		rc = hmac(c, k, 32, NULL, 0, service, strlen(service), k);
	if (!rc)
		rc = hmac(c, k, 32, NULL, 0, "aws4_request", 12, key);
	OPENSSL_cleanse(k, sizeof k);
	return rc;
}

/* The signing key from the cache, or derived and cached. Returns 0 or -1. */
static int signing_key(EVP_MD_CTX *c, const char *secret, const char *date, const char *region,
		       const char *service, unsigned char key[32])
{
	size_t slen = strlen(secret);
	keyent *e;
	int i;

	if (slen >= sizeof e->secret || strlen(region) >= sizeof e->region ||
	    strlen(service) >= sizeof e->service)
		return derive_key(c, secret, date, region, service, key);
	pthread_mutex_lock(&keycache_lock);
	for (i = 0; i < KEYCACHE_N; i++) {
		e = &keycache[i];
		if (e->used && !strcmp(e->date, date) && !strcmp(e->region, region) &&
		    !strcmp(e->service, service) && !CRYPTO_memcmp(e->secret, secret, slen + 1)) {
			memcpy(key, e->key, 32);
			pthread_mutex_unlock(&keycache_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&keycache_lock);
	if (derive_key(c, secret, date, region, service, key))
		return -1;
	pthread_mutex_lock(&keycache_lock);
	e = &keycache[keycache_next++ % KEYCACHE_N];
	OPENSSL_cleanse(e, sizeof *e);
	memcpy(e->secret, secret, slen);
	memcpy(e->date, date, 9);
	strcpy(e->region, region);
	strcpy(e->service, service);
	memcpy(e->key, key, 32);
	e->used = 1;
	pthread_mutex_unlock(&keycache_lock);
	return 0;
}

/* ---- per-call state ---- */

typedef struct {
	const char *name;  /* header name, trimmed (any case) */
	size_t nlen;       /* its length */
	const char *value; /* raw value, trimmed and collapsed when written */
	size_t order;      /* position in the input: repeated values stay in order */
} hdr;

typedef struct {
	size_t off, len;   /* a string in signer.scratch */
} span;

typedef struct {
	span k, v;         /* encoded key and value in scratch */
	const char *kp, *vp; /* the same as pointers, once scratch is final */
} qparam;

typedef struct {
	const sigv4_input *in;
	sigv4_output *out;
	int presign;           /* 1: query signing */
	char *err;             /* caller's message buffer */
	size_t errlen;
	EVP_MD_CTX *md;        /* this thread's digest context */
	char date[9];          /* scope date */
	char expires[24];      /* X-Amz-Expires, decimal */
	hdr *h;                /* headers to sign, sorted */
	size_t nh;
	qparam *q;             /* canonical query parameters, sorted */
	size_t nq, qcap;
	span sh, scope;        /* "host;x-amz-date"; "20150830/us-east-1/sts/aws4_request" */
	span cred, sh_enc, tok; /* presign: encoded credential, signed headers, token */
	dbuf scratch;          /* encoded query parts, scope, signed headers */
	dbuf cr;               /* canonical request, until out takes it */
	/* stack space first, the heap when a request outgrows it */
	hdr hstack[SMALL_N];
	qparam qstack[SMALL_N];
	char scratch_stack[2048];
} signer;

static int fail(signer *s, const char *msg)
{
	if (s->err && s->errlen)
		snprintf(s->err, s->errlen, "sigv4: %s", msg);
	return -1;
}

static const char *at(const signer *s, span x) { return s->scratch.p + x.off; }

static int is_tchar(unsigned char c)
{
	return unreserved(c) || (c && strchr("!#$%&'*+^`|", c) != NULL);
}

/* Non-empty printable ASCII with none of the characters in `bad`. */
static int printable(const char *s, const char *bad)
{
	if (!s || !*s)
		return 0;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f || strchr(bad, *s))
			return 0;
	return 1;
}

static void put_digits(char *p, long v, int n)
{
	for (; n--; v /= 10)
		p[n] = (char)('0' + v % 10);
}

static int check_input(signer *s)
{
	const sigv4_input *in = s->in;
	char *d = s->out->amz_date;
	struct tm tm;
	size_t i;

	for (i = 0; in->method && in->method[i]; i++)
		if (!is_tchar((unsigned char)in->method[i]))
			break;
	if (i == 0 || in->method[i])
		return fail(s, "missing or invalid method");
	if (!printable(in->access_key, "/,;=") || !in->secret_key || !*in->secret_key)
		return fail(s, "missing or invalid credentials");
	if (in->session_token && !printable(in->session_token, ""))
		return fail(s, "invalid session token");
	if (!printable(in->region, "/") || !printable(in->service, "/"))
		return fail(s, "missing or invalid region or service");
	if ((in->path && strlen(in->path) > INPUT_MAX) || (in->query && strlen(in->query) > INPUT_MAX))
		return fail(s, "path or query too long to sign");
	if (in->nheaders > HEADERS_MAX || (in->nheaders && !in->headers))
		return fail(s, "too many headers, or none given");
	for (i = 0; i < in->nheaders; i++)
		if (!in->headers[i].name || !in->headers[i].value)
			return fail(s, "a header has no name or value");
	if (in->payload_len && !in->payload)
		return fail(s, "payload_len without payload");
	if (in->payload_hash && (!printable(in->payload_hash, "") || strlen(in->payload_hash) > 64))
		return fail(s, "invalid payload hash");
	if (s->presign && (in->expires < 1 || in->expires > EXPIRES_MAX))
		return fail(s, "expires must be 1 to 604800 seconds");
	if (!gmtime_r(&in->when, &tm) || tm.tm_year < -1900 || tm.tm_year > 9999 - 1900)
		return fail(s, "signing time out of range");
	memcpy(d, "yyyymmddThhmmssZ", 17);  /* digits below; snprintf is slow here */
	put_digits(d, tm.tm_year + 1900L, 4);
	put_digits(d + 4, tm.tm_mon + 1L, 2);
	put_digits(d + 6, tm.tm_mday, 2);
	put_digits(d + 9, tm.tm_hour, 2);
	put_digits(d + 11, tm.tm_min, 2);
	put_digits(d + 13, tm.tm_sec, 2);
	memcpy(s->date, d, 8);
	if (s->presign)
		snprintf(s->expires, sizeof s->expires, "%ld", in->expires);
	if (!(s->md = thread_md()))
		return fail(s, "SHA-256 is unavailable");
	return 0;
}

static int hash_payload(signer *s)
{
	unsigned char md[32];

	if (s->in->payload_hash) {
		strcpy(s->out->payload_hash, s->in->payload_hash);
		return 0;
	}
	if (sha256_2(s->md, s->in->payload, s->in->payload_len, NULL, 0, md))
		return fail(s, "SHA-256 failed");
	hex32(md, s->out->payload_hash);
	return 0;
}

static int name_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	size_t i, n = alen < blen ? alen : blen;

	for (i = 0; i < n; i++)
		if (lower((unsigned char)a[i]) != lower((unsigned char)b[i]))
			return lower((unsigned char)a[i]) - lower((unsigned char)b[i]);
	return alen < blen ? -1 : alen > blen;
}

static int name_is(const hdr *h, const char *lname)
{
	size_t n = strlen(lname);

	return h->nlen == n && !name_cmp(h->name, n, lname, n);
}

static int same_name(const hdr *a, const hdr *b) { return !name_cmp(a->name, a->nlen, b->name, b->nlen); }

static int hdr_cmp(const void *a, const void *b)
{
	const hdr *x = a, *y = b;
	int c = name_cmp(x->name, x->nlen, y->name, y->nlen);

	return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int is_space(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Ends the span that started at off, at the end of scratch. */
static span span_from(const signer *s, size_t off) { return (span){ off, s->scratch.len - off }; }

static int collect_headers(signer *s)
{
	static const char *const never[] = { "authorization", "expect", "transfer-encoding",
					     "user-agent", "x-amzn-trace-id" };
	const sigv4_input *in = s->in;
	int hdrmode = !s->presign, host = 0;
	size_t i, k, off;
	hdr *h;

	s->h = in->nheaders + 3 <= SMALL_N ? s->hstack : malloc((in->nheaders + 3) * sizeof *s->h);
	if (!s->h)
		return fail(s, "out of memory");
	for (i = 0; i < in->nheaders; i++) {
		const char *n = in->headers[i].name, *e;

		while (*n == ' ' || *n == '\t')
			n++;
		for (e = n + strlen(n); e > n && (e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		h = &s->h[s->nh];
		*h = (hdr){ n, (size_t)(e - n), in->headers[i].value, i };
		for (k = 0; k < h->nlen; k++)
			if (!is_tchar((unsigned char)n[k]))
				break;
		if (h->nlen == 0 || k < h->nlen)
			return fail(s, "empty or invalid header name");
		for (k = 0; k < sizeof never / sizeof *never && !name_is(h, never[k]); k++)
			;
		if (k < sizeof never / sizeof *never || (hdrmode && name_is(h, "x-amz-date")) ||
		    (hdrmode && in->session_token && name_is(h, "x-amz-security-token")) ||
		    (hdrmode && in->sign_body && name_is(h, "x-amz-content-sha256")))
			continue;
		host |= name_is(h, "host");
		s->nh++;
	}
	if (!host)
		return fail(s, "no Host header");
	if (hdrmode) {
		s->h[s->nh++] = (hdr){ "x-amz-date", 10, s->out->amz_date, i++ };
		if (in->session_token && !in->omit_session_token)
			s->h[s->nh++] = (hdr){ "x-amz-security-token", 20, in->session_token, i++ };
		if (in->sign_body)
			s->h[s->nh++] = (hdr){ "x-amz-content-sha256", 20, s->out->payload_hash, i++ };
	}
	qsort(s->h, s->nh, sizeof *s->h, hdr_cmp);
	off = s->scratch.len;
	for (i = 0; i < s->nh; i++) {
		if (i && same_name(&s->h[i], &s->h[i - 1]))
			continue;
		if (i)
			db_addc(&s->scratch, ';');
		db_lower(&s->scratch, s->h[i].name, s->h[i].nlen);
	}
	s->sh = span_from(s, off);
	off = s->scratch.len;
	db_add(&s->scratch, s->date, 8);
	db_addc(&s->scratch, '/');
	db_adds(&s->scratch, in->region);
	db_addc(&s->scratch, '/');
	db_adds(&s->scratch, in->service);
	db_adds(&s->scratch, "/aws4_request");
	s->scope = span_from(s, off);
	return s->scratch.fail ? fail(s, "out of memory") : 0;
}

/* Records a parameter whose key starts at koff and value at voff in scratch. */
static int push_param(signer *s, size_t koff, size_t voff)
{
	qparam *q;

	if (s->nq == s->qcap) {
		q = s->q == s->qstack ? malloc(2 * s->qcap * sizeof *q) : realloc(s->q, 2 * s->qcap * sizeof *q);
		if (!q)
			return -1;
		if (s->q == s->qstack)
			memcpy(q, s->qstack, sizeof s->qstack);
		s->q = q;
		s->qcap *= 2;
	}
	s->q[s->nq++] = (qparam){ { koff, voff - koff }, span_from(s, voff), NULL, NULL };
	return 0;
}

/* Adds the parameter key=URI-encode(v[0..n)), or with v NULL the
 * encoding of scratch's own span own; *enc gets the encoded value. */
static int add_param(signer *s, const char *key, const char *v, size_t n, const span *own, span *enc)
{
	size_t koff = s->scratch.len, voff = koff + strlen(key);

	db_adds(&s->scratch, key);
	if (v)
		db_encode(&s->scratch, v, n, 0, 0);
	else
		db_encode_from(&s->scratch, NULL, own->off, own->len, 0, 0);
	if (enc)
		*enc = span_from(s, voff);
	return s->scratch.fail ? -1 : push_param(s, koff, voff);
}

static int qparam_cmp(const void *a, const void *b)
{
	const qparam *x = a, *y = b;
	size_t n = x->k.len < y->k.len ? x->k.len : y->k.len;
	int c = n ? memcmp(x->kp, y->kp, n) : 0;

	if (c || x->k.len != y->k.len)
		return c ? c : (x->k.len < y->k.len ? -1 : 1);
	n = x->v.len < y->v.len ? x->v.len : y->v.len;
	c = n ? memcmp(x->vp, y->vp, n) : 0;
	return c ? c : (x->v.len > y->v.len) - (x->v.len < y->v.len);
}

static int collect_query(signer *s)
{
	const sigv4_input *in = s->in;
	const char *p = in->query ? in->query : "", *amp, *eq;
	size_t i, koff;
	int rc = 0;

	for (; *p && !rc; p = *amp ? amp + 1 : amp) {
		if (!(amp = strchr(p, '&')))
			amp = p + strlen(p);
		if (amp == p)
			continue;
		eq = memchr(p, '=', (size_t)(amp - p));
		koff = s->scratch.len;
		db_encode(&s->scratch, p, (size_t)((eq ? eq : amp) - p), 0, 1);
		i = s->scratch.len;
		if (eq)
			db_encode(&s->scratch, eq + 1, (size_t)(amp - eq - 1), 0, 1);
		rc = push_param(s, koff, i);
	}
	if (!rc && s->presign) {
		size_t tlen = in->session_token ? strlen(in->session_token) : 0;
		span cred;

		/* The raw credential, encoded into a parameter below. Everything
		 * copied from scratch into scratch goes by offset (db_addown,
		 * add_param's own span): any add may grow and move it. */
		koff = s->scratch.len;
		db_adds(&s->scratch, in->access_key);
		db_addc(&s->scratch, '/');
		db_addown(&s->scratch, s->scope.off, s->scope.len);
		cred = span_from(s, koff);
		/* one growth for every X-Amz-* parameter (fewer copies, not safety) */
		rc = db_reserve(&s->scratch, 3 * (cred.len + s->sh.len + tlen) + 256);
		if (!rc)
			rc = add_param(s, "X-Amz-Algorithm", ALGORITHM, strlen(ALGORITHM), NULL, NULL);
		if (!rc)
			rc = add_param(s, "X-Amz-Credential", NULL, 0, &cred, &s->cred);
		if (!rc)
			rc = add_param(s, "X-Amz-Date", s->out->amz_date, 16, NULL, NULL);
		if (!rc)
			rc = add_param(s, "X-Amz-Expires", s->expires, strlen(s->expires), NULL, NULL);
		if (!rc && in->session_token) {
			rc = add_param(s, "X-Amz-Security-Token", in->session_token, tlen, NULL, &s->tok);
			if (!rc && in->omit_session_token)
				s->nq--;  /* kept for out.query, not signed */
		}
		if (!rc)
			rc = add_param(s, "X-Amz-SignedHeaders", NULL, 0, &s->sh, &s->sh_enc);
	}
	if (rc || s->scratch.fail)
		return fail(s, "out of memory or query too long");
	for (i = 0; i < s->nq; i++) {
		s->q[i].kp = at(s, s->q[i].k);
		s->q[i].vp = at(s, s->q[i].v);
	}
	qsort(s->q, s->nq, sizeof *s->q, qparam_cmp);
	return 0;
}

/* Appends a header value trimmed, with runs of whitespace as one space. */
static void add_trimmed(dbuf *b, const char *v)
{
	int space = 0;
	char *o;

	if (db_reserve(b, strlen(v)))
		return;
	o = b->p + b->len;
	for (v += strspn(v, " \t\n\v\f\r"); *v; v++) {
		if (is_space((unsigned char)*v)) {
			space = 1;
			continue;
		}
		if (space)
			*o++ = ' ';
		space = 0;
		*o++ = *v;
	}
	*o = '\0';
	b->len = (size_t)(o - b->p);
}

static void canonical_path(dbuf *b, const char *path, int normalize)
{
	size_t n = strlen(path), base = b->len, i, j;

	if (!normalize || n == 0) {
		db_encode(b, n ? path : "/", n ? n : 1, ENC_SLASH | ENC_PERCENT, 0);
		return;
	}
	for (i = 0; i <= n; i = j + 1) {
		for (j = i; j < n && path[j] != '/'; j++)
			;
		if (j == i || (j - i == 1 && path[i] == '.'))
			continue;
		if (j - i == 2 && path[i] == '.' && path[i + 1] == '.') {
			while (b->len > base && b->p[b->len - 1] != '/')
				b->len--;
			if (b->len > base)
				b->len--;
			if (b->p)
				b->p[b->len] = '\0';
			continue;
		}
		if (b->len > base || path[0] == '/')
			db_addc(b, '/');
		db_encode(b, path + i, j - i, 0, 0);
	}
	if (b->len == base || path[n - 1] == '/')
		db_addc(b, '/');
}

static int canonical_request(signer *s)
{
	const sigv4_input *in = s->in;
	dbuf *b = &s->cr;
	size_t i, est = strlen(in->method) + s->scratch.len + 200;

	est += in->path ? 3 * strlen(in->path) : 1;
	for (i = 0; i < s->nh; i++)
		est += s->h[i].nlen + strlen(s->h[i].value) + 2;
	db_reserve(b, est);
	db_adds(b, in->method);
	db_addc(b, '\n');
	canonical_path(b, in->path ? in->path : "/", in->normalize_path);
	db_addc(b, '\n');
	for (i = 0; i < s->nq; i++) {
		if (i)
			db_addc(b, '&');
		db_add(b, s->q[i].kp, s->q[i].k.len);
		db_addc(b, '=');
		db_add(b, s->q[i].vp, s->q[i].v.len);
	}
	for (i = 0; i < s->nh; i++) {
		if (i && same_name(&s->h[i], &s->h[i - 1])) {
			db_addc(b, ',');
		} else {
			db_addc(b, '\n');
			db_lower(b, s->h[i].name, s->h[i].nlen);
			db_addc(b, ':');
		}
		add_trimmed(b, s->h[i].value);
	}
	db_adds(b, "\n\n");
	db_add(b, at(s, s->sh), s->sh.len);
	db_addc(b, '\n');
	db_adds(b, s->out->payload_hash);
	if (b->fail)
		return fail(s, "out of memory or request too large to sign");
	s->out->canonical_request = b->p;
	b->p = NULL;  /* the output owns it now; b->len stays for string_to_sign */
	return 0;
}

static int string_to_sign(signer *s)
{
	unsigned char md[32];
	char *sts, *p;

	p = sts = malloc(sizeof ALGORITHM + 17 + s->scope.len + 1 + 65);
	if (!sts)
		return fail(s, "out of memory");
	s->out->string_to_sign = sts;
	if (sha256_2(s->md, s->out->canonical_request, s->cr.len, NULL, 0, md))
		return fail(s, "SHA-256 failed");
	memcpy(p, ALGORITHM "\n", sizeof ALGORITHM);
	p += sizeof ALGORITHM;
	memcpy(p, s->out->amz_date, 16);
	p[16] = '\n';
	p += 17;
	memcpy(p, at(s, s->scope), s->scope.len);
	p += s->scope.len;
	*p++ = '\n';
	hex32(md, p);
	return 0;
}

static int signature(signer *s)
{
	unsigned char key[32], md[32];
	const char *sts = s->out->string_to_sign;
	int rc;

	rc = signing_key(s->md, s->in->secret_key, s->date, s->in->region, s->in->service, key);
	if (!rc)
		rc = hmac(s->md, key, 32, NULL, 0, sts, strlen(sts), md);
	OPENSSL_cleanse(key, sizeof key);
	if (rc)
		return fail(s, "HMAC-SHA256 failed");
	hex32(md, s->out->signature);
	return 0;
}

static int finish(signer *s)
{
	const sigv4_input *in = s->in;
	dbuf b;

	db_init(&b, NULL, 0);
	if (!s->presign) {
		db_reserve(&b, 100 + strlen(in->access_key) + s->scope.len + s->sh.len);
		db_adds(&b, ALGORITHM " Credential=");
		db_adds(&b, in->access_key);
		db_addc(&b, '/');
		db_add(&b, at(s, s->scope), s->scope.len);
		db_adds(&b, ", SignedHeaders=");
		db_add(&b, at(s, s->sh), s->sh.len);
		db_adds(&b, ", Signature=");
		db_adds(&b, s->out->signature);
		s->out->authorization = b.p;
	} else {
		const struct { const char *k, *v; size_t n; } q[] = {
			{ "X-Amz-Algorithm=", ALGORITHM, sizeof ALGORITHM - 1 },
			{ "&X-Amz-Credential=", at(s, s->cred), s->cred.len },
			{ "&X-Amz-Date=", s->out->amz_date, 16 },
			{ "&X-Amz-SignedHeaders=", at(s, s->sh_enc), s->sh_enc.len },
			{ "&X-Amz-Expires=", s->expires, strlen(s->expires) },
			{ "&X-Amz-Security-Token=", at(s, s->tok), s->tok.len },
			{ "&X-Amz-Signature=", s->out->signature, 64 },
		};
		size_t i;

		if (in->query && *in->query) {
			db_adds(&b, in->query);
			db_addc(&b, '&');
		}
		for (i = 0; i < sizeof q / sizeof *q; i++) {
			if (i == 5 && !in->session_token)
				continue;
			db_adds(&b, q[i].k);
			db_add(&b, q[i].v, q[i].n);
		}
		s->out->query = b.p;
	}
	return b.fail ? fail(s, "out of memory") : 0;
}

static int sign(const sigv4_input *in, sigv4_output *out, char *err, size_t errlen, int presign)
{
	signer s;
	int rc;

	if (!out)
		return -1;
	memset(out, 0, sizeof *out);
	memset(&s, 0, offsetof(signer, hstack));
	s.in = in;
	s.out = out;
	s.presign = presign;
	s.err = err;
	s.errlen = errlen;
	s.q = s.qstack;
	s.qcap = SMALL_N;
	db_init(&s.scratch, s.scratch_stack, sizeof s.scratch_stack);
	if (err && errlen)
		err[0] = '\0';

	rc = in ? check_input(&s) : fail(&s, "no input");
	if (!rc)
		rc = hash_payload(&s);
	if (!rc)
		rc = collect_headers(&s);
	if (!rc)
		rc = collect_query(&s);
	if (!rc)
		rc = canonical_request(&s);
	if (!rc)
		rc = string_to_sign(&s);
	if (!rc)
		rc = signature(&s);
	if (!rc)
		rc = finish(&s);

	if (s.h != s.hstack)
		free(s.h);
	if (s.q != s.qstack)
		free(s.q);
	db_free(&s.scratch);
	db_free(&s.cr);
	if (rc)
		sigv4_output_free(out);
	return rc;
}

int sigv4_sign(const sigv4_input *in, sigv4_output *out, char *err, size_t errlen)
{
	return sign(in, out, err, errlen, 0);
}

int sigv4_presign(const sigv4_input *in, sigv4_output *out, char *err, size_t errlen)
{
	return sign(in, out, err, errlen, 1);
}

void sigv4_output_free(sigv4_output *out)
{
	if (!out)
		return;
	free(out->canonical_request);
	free(out->string_to_sign);
	free(out->authorization);
	free(out->query);
	memset(out, 0, sizeof *out);
}
