/*
 * hypd.h: the embeddable API of the hypd host.
 *
 *   hypd_options o = {0};
 *   char *err, *out;
 *   hypd *h = hypd_open(&o, &err);
 *   if (hypd_call(h, "hello", "{\"name\":\"x\"}", &out) == 0) puts(out);
 *   hypd_free(out);
 *   hypd_close(h);
 *
 * A host owns one Lua state, one store (SQLite under the state directory)
 * and one engine; use it from one thread at a time. The clock and the log
 * are process-wide, and so is the state directory's lock: only one process
 * at a time runs or resumes operations on a state directory, and a host
 * takes the lock when its first mutating call needs it (a call then fails
 * with code LOCKED, naming the holder, while another process has it). Link with build/libhypd.a and
 * `pkg-config --libs lua5.4 libcurl libcjson openssl libmicrohttpd sqlite3 expat`.
 */
#ifndef HYPD_H
#define HYPD_H

#include <stddef.h>

#define HYPD_VERSION "0.1.0"

typedef struct hypd hypd;

typedef struct {
	const char *state_dir;     /* NULL: $HYPD_STATE, else ~/.hypd */
	const char *playbooks_dir; /* NULL: $HYPD_PLAYBOOKS, else none */
	int virtual_clock;         /* 1: virtual clock; 0: $HYPD_CLOCK decides */
	const char *log_level;     /* NULL: $HYPD_LOG_LEVEL, else "info" */
	double timeout;            /* seconds a call may take; 0 = no limit */
	size_t memory_limit;       /* bytes for the Lua state; 0 = 1 GiB */
	const char *region;        /* AWS region; NULL: AWS_REGION, the profile, ... */
	const char *profile;       /* AWS profile; NULL: AWS_PROFILE or default */
} hypd_options;

/*
 * Opens a host. The state directory is created 0700 when missing; one that
 * users other than its owner can write is refused (a readable one is a
 * warning on the log). Returns NULL on failure and sets *err to a message
 * the caller frees with hypd_free (err may be NULL).
 */
hypd *hypd_open(const hypd_options *opts, char **err);

/*
 * Calls a tool or playbook by name (or a playbook file path ending in .lua)
 * with a JSON object of arguments (NULL means {}). Runs the engine until the
 * call finishes. Returns 0 and sets *out to the JSON result, or -1 and sets
 * *out to a JSON error object {"code", "message", ...}. The caller frees
 * *out with hypd_free.
 */
int hypd_call(hypd *h, const char *name, const char *args_json, char **out);

/* Frees a string returned by this API. */
void hypd_free(void *p);

/*
 * Stops the engine, releases the state directory's lock if this host took
 * it, and frees everything the host holds. NULL is a no-op.
 */
void hypd_close(hypd *h);

#endif
