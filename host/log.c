/* log: leveled one-line logging with secret redaction (see log.h). */
#include "log.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MASK "[REDACTED]"
/* values kept of each evictable kind (each with its transforms); refreshes
 * of host credentials add more */
#define MAX_VALUES 1024

/*
 * A registered secret, or one of its transforms (upper-cased, lower-cased,
 * reversed, base64, base64url): what a tool that echoes a secret turned
 * would print. The kinds do not evict each other (log.h): a caller sending
 * thousands of secrets pushes out only older caller-given ones.
 */
struct secret {
	char *v;                /* the bytes, owned */
	size_t len;             /* strlen(v) */
	enum log_secret_kind kind;
	unsigned refs;          /* LOG_SECRET_OPERATION: operations holding it */
	int primary;            /* a value registered, not (only) a transform */
	unsigned long seq;      /* registration order, for eviction */
	struct secret *next;    /* in the bucket of its first byte */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static enum log_level min_level = LOG_INFO;
static FILE *out;
static struct secret *buckets[256]; /* by first byte: the redaction's index */
static size_t counts[3];            /* primary entries of each kind */
static unsigned long seq;           /* last seq given */

static const char *const level_names[] = { "debug", "info", "warn", "error", "off" };

int log_parse_level(const char *name)
{
	for (int i = 0; i <= LOG_OFF; i++)
		if (name && strcmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

void log_set_level(enum log_level level) { min_level = level; }
enum log_level log_get_level(void) { return min_level; }
void log_set_output(FILE *f) { out = f; }

/* The link that points at the entry with bytes v[0..len), or NULL. Lock held. */
static struct secret **link_of(const char *v, size_t len)
{
	for (struct secret **p = &buckets[(unsigned char)v[0]]; *p; p = &(*p)->next)
		if ((*p)->len == len && memcmp((*p)->v, v, len) == 0)
			return p;
	return NULL;
}

/* Unlinks and frees the entry *p. Lock held. */
static void unlink_entry(struct secret **p)
{
	struct secret *e = *p;

	*p = e->next;
	if (e->primary)
		counts[e->kind]--;
	free(e->v);
	free(e);
}

static void b64(const unsigned char *in, size_t n, char *outb, int url)
{
	const char *abc = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
			      : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
	size_t o = 0;

	for (size_t i = 0; i < n; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (i + 1 < n ? (unsigned)in[i + 1] << 8 : 0) |
			     (i + 2 < n ? in[i + 2] : 0);

		outb[o++] = abc[v >> 18 & 63];
		outb[o++] = abc[v >> 12 & 63];
		if (i + 1 < n)
			outb[o++] = abc[v >> 6 & 63];
		else if (!url)
			outb[o++] = '=';
		if (i + 2 < n)
			outb[o++] = abc[v & 63];
		else if (!url)
			outb[o++] = '=';
	}
	outb[o] = 0;
}

/*
 * Calls fn(t, tlen, kind) for each transform t of value: upper-cased,
 * lower-cased, reversed, base64, base64url (what a tool that echoes a
 * secret turned prints). -1 when out of memory or fn failed.
 */
static int each_transform(const char *value, size_t len, enum log_secret_kind kind,
			  int (*fn)(const char *, size_t, enum log_secret_kind))
{
	char *t = calloc(1, len * 4 / 3 + 8);
	int rc = 0;

	if (!t)
		return -1;
	for (size_t i = 0; i < len; i++)
		t[i] = (char)toupper((unsigned char)value[i]);
	rc |= fn(t, len, kind);
	for (size_t i = 0; i < len; i++)
		t[i] = (char)tolower((unsigned char)value[i]);
	rc |= fn(t, len, kind);
	for (size_t i = 0; i < len; i++)
		t[i] = value[len - 1 - i];
	rc |= fn(t, len, kind);
	b64((const unsigned char *)value, len, t, 0);
	rc |= fn(t, strlen(t), kind);
	b64((const unsigned char *)value, len, t, 1);
	rc |= fn(t, strlen(t), kind);
	free(t);
	return rc;
}

/* fn of each_transform: drops a transform of an evicted value (one of its
 * kind that is no value itself). Lock held. */
static int drop_transform(const char *v, size_t len, enum log_secret_kind kind)
{
	struct secret **p = len >= 6 ? link_of(v, len) : NULL;

	if (p && !(*p)->primary && (*p)->kind == kind)
		unlink_entry(p);
	return 0;
}

/* Drops the oldest value of kind with its transforms. Never called for
 * operations' secrets. Lock held. */
static void evict_oldest(enum log_secret_kind kind)
{
	struct secret **oldest = NULL;
	char *v;
	size_t len;

	for (int b = 0; b < 256; b++)
		for (struct secret **p = &buckets[b]; *p; p = &(*p)->next)
			if ((*p)->kind == kind && (*p)->primary && (!oldest || (*p)->seq < (*oldest)->seq))
				oldest = p;
	if (!oldest)
		return;
	v = (*oldest)->v;
	len = (*oldest)->len;
	(*oldest)->v = NULL; /* kept for its transforms */
	unlink_entry(oldest);
	each_transform(v, len, kind, drop_transform);
	free(v);
}

/* Registers v (a value when primary, else a transform) as kind. Lock held;
 * -1 when out of memory. */
static int add_entry(const char *v, size_t len, enum log_secret_kind kind, int primary)
{
	struct secret *e, **p;

	if (len < 6)
		return 0;
	if ((p = link_of(v, len))) {
		enum log_secret_kind was;

		e = *p;
		was = e->kind;
		/* a value keeps the strongest kind it was registered as */
		if (kind == LOG_SECRET_HOST) {
			e->kind = LOG_SECRET_HOST;
		} else if (kind == LOG_SECRET_OPERATION && e->kind != LOG_SECRET_HOST) {
			e->kind = LOG_SECRET_OPERATION;
			e->refs++;
		}
		if (e->kind == kind)
			e->seq = ++seq; /* seen again: the newest of its kind */
		if (e->primary && was != e->kind) {
			counts[was]--;
			counts[e->kind]++;
		}
		if (primary && !e->primary) {
			e->primary = 1;
			counts[e->kind]++;
		}
		return 0;
	}
	e = calloc(1, sizeof *e);
	if (!e || !(e->v = malloc(len + 1))) {
		free(e);
		return -1;
	}
	memcpy(e->v, v, len);
	e->v[len] = 0;
	e->len = len;
	e->kind = kind;
	e->primary = primary;
	e->refs = kind == LOG_SECRET_OPERATION;
	e->seq = ++seq;
	e->next = buckets[(unsigned char)v[0]];
	buckets[(unsigned char)v[0]] = e;
	if (primary)
		counts[kind]++;
	return 0;
}

static int add_transform(const char *v, size_t len, enum log_secret_kind kind)
{
	return add_entry(v, len, kind, 0);
}

int log_add_secret_as(const char *value, enum log_secret_kind kind)
{
	size_t len;
	int rc;

	if (!value || (len = strlen(value)) < 6)
		return 0;
	pthread_mutex_lock(&lock);
	if (kind != LOG_SECRET_OPERATION && counts[kind] >= MAX_VALUES && !link_of(value, len))
		evict_oldest(kind);
	rc = add_entry(value, len, kind, 1);
	rc |= each_transform(value, len, kind, add_transform);
	pthread_mutex_unlock(&lock);
	return rc;
}

int log_add_secret(const char *value) { return log_add_secret_as(value, LOG_SECRET_HOST); }

/* fn of each_transform (and for the value): one operation no longer holds
 * v; with the last hold it becomes a caller's, still masked but evictable.
 * Lock held. */
static int release_entry(const char *v, size_t len, enum log_secret_kind kind)
{
	struct secret **p = len >= 6 ? link_of(v, len) : NULL;
	struct secret *e = p ? *p : NULL;

	(void)kind;
	if (e && e->kind == LOG_SECRET_OPERATION && e->refs > 0 && --e->refs == 0) {
		if (e->primary) {
			if (counts[LOG_SECRET_CALLER] >= MAX_VALUES)
				evict_oldest(LOG_SECRET_CALLER);
			counts[LOG_SECRET_OPERATION]--;
			counts[LOG_SECRET_CALLER]++;
		}
		e->kind = LOG_SECRET_CALLER;
		e->seq = ++seq;
	}
	return 0;
}

void log_release_secret(const char *value)
{
	size_t len;

	if (!value || (len = strlen(value)) < 6)
		return;
	pthread_mutex_lock(&lock);
	release_entry(value, len, LOG_SECRET_OPERATION);
	each_transform(value, len, LOG_SECRET_OPERATION, release_entry);
	pthread_mutex_unlock(&lock);
}

size_t log_secret_count(enum log_secret_kind kind)
{
	size_t n;

	pthread_mutex_lock(&lock);
	n = counts[kind];
	pthread_mutex_unlock(&lock);
	return n;
}

void log_clear_secrets(void)
{
	pthread_mutex_lock(&lock);
	for (int b = 0; b < 256; b++)
		while (buckets[b]) {
			struct secret *e = buckets[b];

			buckets[b] = e->next;
			free(e->v);
			free(e);
		}
	memset(counts, 0, sizeof counts);
	pthread_mutex_unlock(&lock);
}

static int is_key_char(int c) { return isupper(c) || isdigit(c); }
static int is_token_char(int c) { return isalnum(c) || c == '_' || c == '-'; }

static int is_b64_char(int c)
{
	return isalnum(c) || c == '.' || c == '_' || c == '~' || c == '+' || c == '/' || c == '=' || c == '-';
}

/* Bytes up to the end of a header value: a quote, a line end or the end. */
static size_t value_len(const char *s, size_t left)
{
	size_t n = 0;

	while (n < left && s[n] != '"' && s[n] != '\n' && s[n] != '\r')
		n++;
	return n;
}

/*
 * Length of a pattern-shaped secret starting at s (0 if none), and how many
 * leading bytes to keep visible (a prefix such as "Authorization: Bearer ").
 * A Bearer value is a credential only when it looks like one (8 or more
 * token characters), so prose ("the bearer token is ...") stays readable.
 */
static size_t pattern_at(const char *s, size_t left, size_t *keep)
{
	static const char *const prefixed[] = {
		"aws_secret_access_key=", "AWS_SECRET_ACCESS_KEY=",
		"aws_session_token=", "AWS_SESSION_TOKEN=",
	};
	static const char *const auth[] = { "Authorization: ", "authorization: " };
	static const char *const bearer[] = { "Bearer ", "bearer " };
	size_t n = 0;

	*keep = 0;
	if (left >= 20 && (!strncmp(s, "AKIA", 4) || !strncmp(s, "ASIA", 4))) {
		while (n < 20 && is_key_char((unsigned char)s[n]))
			n++;
		if (n == 20 && (left == 20 || !is_key_char((unsigned char)s[20])))
			return 20;
	}
	if (left > 3 && !strncmp(s, "hf_", 3)) {
		for (n = 3; n < left && isalnum((unsigned char)s[n]); n++)
			;
		if (n >= 23)
			return n;
	}
	if (left > 11 && !strncmp(s, "k8s-aws-v1.", 11)) {
		for (n = 11; n < left && is_token_char((unsigned char)s[n]); n++)
			;
		return n;
	}
	for (size_t i = 0; i < 2; i++) {
		size_t p = strlen(auth[i]), scheme = 0;

		if (left <= p || strncmp(s, auth[i], p))
			continue;
		/* keep the scheme word (Bearer, AWS4-HMAC-SHA256, Basic) */
		while (p + scheme < left && (isalnum((unsigned char)s[p + scheme]) || s[p + scheme] == '-'))
			scheme++;
		if (p + scheme < left && s[p + scheme] == ' ')
			p += scheme + 1;
		n = p + value_len(s + p, left - p);
		if (n > p) {
			*keep = p;
			return n;
		}
	}
	for (size_t i = 0; i < 2; i++) {
		size_t p = strlen(bearer[i]);

		if (left <= p || strncmp(s, bearer[i], p))
			continue;
		for (n = p; n < left && is_b64_char((unsigned char)s[n]); n++)
			;
		if (n - p >= 8) {
			*keep = p;
			return n;
		}
	}
	for (size_t i = 0; i < sizeof prefixed / sizeof *prefixed; i++) {
		size_t p = strlen(prefixed[i]);

		if (left > p && !strncmp(s, prefixed[i], p)) {
			for (n = p; n < left && !isspace((unsigned char)s[n]) &&
				    s[n] != '"' && s[n] != ',' && s[n] != '&'; n++)
				;
			if (n > p) {
				*keep = p;
				return n;
			}
		}
	}
	return 0;
}

/* Caller holds the lock. */
static char *redact_locked(const char *s, size_t len, size_t *outlen)
{
	size_t cap = len + 64, n = 0, i = 0;
	char *buf = malloc(cap), *grown;

	while (buf && i < len) {
		size_t keep = 0, hit = pattern_at(s + i, len - i, &keep);

		/* the longest registered secret here: when one secret begins
		 * another, no fragment of the longer one is left behind */
		for (struct secret *e = buckets[(unsigned char)s[i]]; e; e = e->next)
			if (e->len > hit && e->len <= len - i && memcmp(s + i, e->v, e->len) == 0) {
				hit = e->len;
				keep = 0;
			}
		if (n + keep + sizeof MASK + 1 > cap) {
			cap = cap * 2 + keep + sizeof MASK;
			grown = realloc(buf, cap);
			if (!grown) {
				free(buf);
				return NULL;
			}
			buf = grown;
		}
		if (hit) {
			memcpy(buf + n, s + i, keep);
			n += keep;
			memcpy(buf + n, MASK, sizeof MASK - 1);
			n += sizeof MASK - 1;
			i += hit;
		} else {
			buf[n++] = s[i++];
		}
	}
	if (buf) {
		buf[n] = 0;
		if (outlen)
			*outlen = n;
	}
	return buf;
}

char *log_redact(const char *s, size_t len, size_t *outlen)
{
	char *r;

	pthread_mutex_lock(&lock);
	r = redact_locked(s, len, outlen);
	pthread_mutex_unlock(&lock);
	return r;
}

static void write_escaped(FILE *f, const char *s)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\n')
			fputs("\\n", f);
		else if (c == '\r')
			fputs("\\r", f);
		else if (c < 0x20 && c != '\t')
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
}

void log_write(enum log_level level, const char *component, const char *msg)
{
	struct timespec ts;
	struct tm tm;
	char stamp[32], *clean;
	FILE *f;

	if (level < min_level || level >= LOG_OFF)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
	pthread_mutex_lock(&lock);
	f = out ? out : stderr;
	clean = redact_locked(msg, strlen(msg), NULL);
	fprintf(f, "%s.%03ldZ %-5s %s: ", stamp, ts.tv_nsec / 1000000,
		level_names[level], component ? component : "hypd");
	write_escaped(f, clean ? clean : "(out of memory)");
	fputc('\n', f);
	fflush(f);
	free(clean);
	pthread_mutex_unlock(&lock);
}

void log_msg(enum log_level level, const char *component, const char *fmt, ...)
{
	char buf[2048];
	va_list ap;

	if (level < min_level)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	log_write(level, component, buf);
}
