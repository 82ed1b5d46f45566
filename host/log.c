/* log: leveled one-line logging with secret redaction (see log.h). */
#include "log.h"

#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MASK "[REDACTED]"
#define MAX_SECRETS 1024 /* registered secrets kept; refreshes add more */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static enum log_level min_level = LOG_INFO;
static FILE *out;
static char **secrets;   /* registered values, owned */
static size_t nsecrets;  /* entries in secrets */

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

int log_add_secret(const char *value)
{
	char **grown, *copy;

	if (!value || strlen(value) < 6)
		return 0;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nsecrets; i++)
		if (strcmp(secrets[i], value) == 0)
			goto done;
	copy = strdup(value);
	if (copy && nsecrets == MAX_SECRETS) {
		/* the oldest go first: by now they are expired credentials */
		free(secrets[0]);
		memmove(secrets, secrets + 1, (nsecrets - 1) * sizeof *secrets);
		secrets[--nsecrets] = NULL;
	}
	grown = copy ? realloc(secrets, (nsecrets + 1) * sizeof *secrets) : NULL;
	if (!grown) {
		free(copy);
		pthread_mutex_unlock(&lock);
		return -1;
	}
	secrets = grown;
	secrets[nsecrets++] = copy;
done:
	pthread_mutex_unlock(&lock);
	return 0;
}

void log_clear_secrets(void)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < nsecrets; i++)
		free(secrets[i]);
	free(secrets);
	secrets = NULL;
	nsecrets = 0;
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
		for (size_t k = 0; k < nsecrets; k++) {
			size_t sl = strlen(secrets[k]);

			if (sl > hit && sl <= len - i && memcmp(s + i, secrets[k], sl) == 0) {
				hit = sl;
				keep = 0;
			}
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
