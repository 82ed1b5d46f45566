/*
 * log: one line per event on stderr (or a file), with levels, and the
 * secret-redaction hook every output of hypd passes through.
 *
 * Line shape: "2026-11-29T19:30:00.123Z info  engine: message". Newlines and
 * control characters inside a message are escaped so one event stays one
 * line. Thread-safe: the HTTP server threads log too.
 *
 * Redaction: every registered secret value, and anything shaped like an AWS
 * access key id, an AWS secret in "key=value" form, a Hugging Face token, an
 * EKS bearer token or an HTTP Authorization value, is replaced by
 * "[REDACTED]" before a line is written. Other modules call log_redact() on
 * anything they persist or show (operation records, errors, the UI).
 */
#ifndef HYPD_LOG_H
#define HYPD_LOG_H

#include <stdio.h>

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR, LOG_OFF };

/* Parses "debug", "info", "warn", "error", "off"; -1 if unknown. */
int log_parse_level(const char *name);
void log_set_level(enum log_level level);
enum log_level log_get_level(void);

/* Lines go to f (not owned; default stderr). */
void log_set_output(FILE *f);

/* Writes one line if level is enabled. The message is redacted. */
void log_msg(enum log_level level, const char *component, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void log_write(enum log_level level, const char *component, const char *msg);

/*
 * Registers a secret value (copied) that must never be printed, with its
 * transforms: upper-cased, lower-cased, reversed, base64 and base64url
 * (what a tool that echoes a secret turned would print). Values shorter
 * than 6 bytes are ignored (they would mask ordinary words). Returns 0, or
 * -1 when out of memory.
 *
 * Who gave it decides how long it is kept, so a caller cannot flush the
 * list by sending many secrets:
 *   LOG_SECRET_HOST       the host's own (credentials, tokens, sign-in
 *                         codes): the newest 1024 or so are kept (5,120
 *                         entries, counting transforms), evicted only by
 *                         newer host secrets (credential refreshes)
 *   LOG_SECRET_OPERATION  a running operation's: kept while any operation
 *                         holds it (one hold per registration), never
 *                         evicted; log_release_secret drops a hold, and
 *                         with the last one it becomes a caller secret
 *   LOG_SECRET_CALLER     given in a call (validation registers them): the
 *                         newest 1024 or so, evicted only by newer ones
 * A value keeps the strongest kind it was registered as (host, operation,
 * caller). log_add_secret is log_add_secret_as(value, LOG_SECRET_HOST).
 */
enum log_secret_kind { LOG_SECRET_HOST, LOG_SECRET_OPERATION, LOG_SECRET_CALLER };
int log_add_secret(const char *value);
int log_add_secret_as(const char *value, enum log_secret_kind kind);
void log_release_secret(const char *value);

/* Entries of kind registered (each value counts with its transforms). */
size_t log_secret_count(enum log_secret_kind kind);

/* Forgets every registered secret (tests; host close). */
void log_clear_secrets(void);

/* Returns a malloc'd copy of s[0..len) with secrets replaced. NULL on OOM. */
char *log_redact(const char *s, size_t len, size_t *outlen);

#endif
