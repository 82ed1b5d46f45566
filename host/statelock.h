/*
 * statelock: one process at a time runs or resumes operations on a state
 * directory. That process holds an exclusive flock(2) on <dir>/lock for its
 * life; the kernel releases it when the process ends, kill -9 included, so
 * a lock is never stale. The file (0600) says who holds it, one "key value"
 * line each, so a refusal can name the holder:
 *
 *   pid 4242
 *   command hypd serve --listen 127.0.0.1:3099
 *   since 1767225600.5        (Unix seconds, wall clock)
 *   status running           (or stopping: a graceful stop has begun)
 *   grace 10                 (stopping: the seconds the stop may take)
 *   url http://127.0.0.1:3099 (where the holder serves its API, if it does)
 *
 * The lock is process-wide, like the clock and the log: one state directory
 * per process. Its descriptor is O_CLOEXEC (no child process inherits it).
 * Pure C: no Lua state. Not thread-safe: use it from the engine thread.
 */
#ifndef HYPD_STATELOCK_H
#define HYPD_STATELOCK_H

#include <stddef.h>

/* What the lock file says about its holder. */
typedef struct {
	long pid;           /* the holder's process id; 0 when the file said none */
	char command[200];  /* what it runs, e.g. "hypd serve --listen 127.0.0.1:3099" */
	double since;       /* when it took the lock, Unix seconds; 0 unknown */
	int stopping;       /* 1 once it began a graceful stop */
	double grace;       /* stopping: the seconds that stop may take */
	char url[200];      /* where it serves its API, or "" */
} statelock_info;

enum statelock_result {
	STATELOCK_HELD = 0,     /* this process holds the lock now */
	STATELOCK_BUSY = 1,     /* another process holds it (holder filled in) */
	STATELOCK_ERROR = -1,   /* the lock file cannot be used (message in err) */
};

/*
 * Takes the lock of dir without waiting, recording command (a short line,
 * never a secret) as this process's. Already held for dir: STATELOCK_HELD.
 * Held for another directory: STATELOCK_ERROR. holder may be NULL.
 */
int statelock_acquire(const char *dir, const char *command, statelock_info *holder,
		      char *err, size_t errlen);

/*
 * Like statelock_acquire, but tries again every 50 ms (real time, whatever
 * the clock) for up to seconds while the holder is stopping (or its file
 * names no one: it is just releasing the lock), and for the first settle
 * seconds whatever it is doing (a holder that has just been sent SIGTERM
 * may not have marked itself stopping yet). Ends early when
 * give_up() returns nonzero (give_up may be NULL). Blocks the calling thread.
 */
int statelock_wait(const char *dir, const char *command, double seconds, double settle,
		   int (*give_up)(void), statelock_info *holder, char *err, size_t errlen);

/* The state directory whose lock this process holds, or NULL. */
const char *statelock_dir(void);

/*
 * Records where this process serves its API (url, or NULL to keep it) and,
 * with stopping = 1, that its graceful stop of up to grace seconds has begun.
 * Returns 0, or -1 when the lock is not held or the file cannot be written.
 */
int statelock_update(const char *url, int stopping, double grace);

/*
 * Releases the lock (empties the file first) when it is held for dir (NULL:
 * whichever directory). Idempotent.
 */
void statelock_release(const char *dir);

/* Reads what dir/lock says into out. Returns 0, or -1 when there is no file. */
int statelock_read(const char *dir, statelock_info *out);

#endif
