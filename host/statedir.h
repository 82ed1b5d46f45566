/*
 * statedir: the file modes of the state directory (--state DIR, HYPD_STATE,
 * default ~/.hypd). It holds the store (hypd.db and its WAL and SHM files),
 * the secrets of running operations (secrets/), the lock (lock), the
 * skills of MCP (skills/) and, after a hypd restore, the database it
 * replaced (hypd.db.before-restore): what is in it is hypd's user's alone.
 * docs/state.md describes each file and what a backup holds.
 *
 * The rules, whatever the umask:
 *   - a missing directory is created with mode 0700 (its missing parents
 *     too); the files hypd makes in it are 0600, its subdirectories 0700;
 *   - a directory, store file, lock or secrets/ that users other than the
 *     owner may write (mode & 022: group or others) is refused, with the
 *     chmod that fixes it;
 *   - a directory that they may read (mode & 044) is reported as a warning,
 *     and so is a readable store file when they may enter the directory
 *     (mode & 011); nothing is changed.
 * Pure C: no Lua state; the caller decides where a warning goes.
 */
#ifndef HYPD_STATEDIR_H
#define HYPD_STATEDIR_H

#include <stddef.h>

/*
 * Creates dir when missing (0700) and checks it and the files named above.
 * Returns 0, or -1 with the reason and its fix in err. On success warn holds
 * one warning line, or "" (warn may be NULL). Costs a few stat(2) calls.
 */
int statedir_prepare(const char *dir, char *err, size_t errlen, char *warn, size_t warnlen);

/*
 * The state directory when no --state is given: $HYPD_STATE when set and not
 * empty, else $HOME/.hypd (./.hypd without HOME). malloc'd (the caller frees
 * it), NULL when out of memory.
 */
char *statedir_default(void);

/*
 * Creates path (a regular file) with mode 0600 when it does not exist,
 * whatever the umask; an existing file is left as it is. Returns 0, or -1
 * with the reason in err.
 */
int statedir_create_private(const char *path, char *err, size_t errlen);

#endif
