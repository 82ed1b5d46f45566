/* store_backup: hypd backup and hypd restore over SQLite (see store_backup.h). */
#include "store_backup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "statedir.h"
#include "store.h"

#define STEP_PAGES 64     /* pages per backup step: the source's lock is never held long */
#define BUSY_TRIES 2000   /* 5 ms apart: a step waits at most 10 s for a lock */

__attribute__((format(printf, 4, 5)))
static int fail(int code, char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return code;
}

static int exists(const char *path)
{
	struct stat sb;

	return lstat(path, &sb) == 0;
}

static long long size_of(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* Writes "<a><b>" into out; nonzero when it does not fit. */
static int join(char *out, const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);

	if (na + nb >= PATH_MAX)
		return 1;
	memcpy(out, a, na);
	memcpy(out + na, b, nb + 1);
	return 0;
}

/* Removes path and the journal, WAL and SHM files SQLite may leave beside it. */
static void unlink_db(const char *path)
{
	static const char *const tails[] = { "", "-journal", "-wal", "-shm" };
	char p[PATH_MAX];

	for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++)
		if (!join(p, path, tails[i]))
			unlink(p);
}

/* fsyncs the directory holding path, so a rename in it is durable. */
static void sync_dir_of(const char *path)
{
	char d[PATH_MAX];
	char *slash;
	int fd;

	snprintf(d, sizeof(d), "%s", path);
	slash = strrchr(d, '/');
	if (slash == d)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(d, sizeof(d), ".");
	fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

/* The first column of the first row of sql as an integer; -1 with the message in err. */
static long long query_int(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *st = NULL;
	long long v = -1;
	int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
		v = sqlite3_column_int64(st, 0);
	else
		snprintf(err, errlen, "%s", sqlite3_errmsg(db));
	sqlite3_finalize(st);
	return v;
}

static int open_db(const char *path, int flags, sqlite3 **db, char *err, size_t errlen)
{
	if (sqlite3_open_v2(path, db, flags, NULL) != SQLITE_OK) {
		fail(STORE_BACKUP_ERROR, err, errlen, "cannot open %s: %s", path,
		     *db ? sqlite3_errmsg(*db) : "out of memory");
		sqlite3_close_v2(*db);
		*db = NULL;
		return STORE_BACKUP_ERROR;
	}
	sqlite3_extended_result_codes(*db, 1);
	sqlite3_busy_timeout(*db, 5000);
	return STORE_BACKUP_OK;
}

int store_backup_check(const char *path, const char *label, store_backup_info *info,
		       char *err, size_t errlen)
{
	static const char tables[] = "SELECT count(*) FROM sqlite_schema WHERE type = 'table'"
		" AND name IN ('kv', 'operations', 'events')";
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	char why[256] = "";
	int rc;
	long long v;

	memset(info, 0, sizeof(*info));
	if (!exists(path))
		return fail(STORE_BACKUP_MISSING, err, errlen, "%s: no such file", label);
	rc = open_db(path, SQLITE_OPEN_READWRITE, &db, err, errlen);
	if (rc)
		return rc;
	rc = sqlite3_prepare_v2(db, "PRAGMA integrity_check(1)", -1, &st, NULL);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		rc = fail(STORE_BACKUP_INVALID, err, errlen, "%s is not a usable SQLite database: %s", label,
			  sqlite3_errmsg(db));
		goto out;
	}
	snprintf(why, sizeof(why), "%s", sqlite3_column_text(st, 0) ? (const char *)sqlite3_column_text(st, 0) : "");
	for (char *c = why; *c; c++)
		if (*c == '\n')
			*c = ' '; /* one line: it ends up in an error message */
	if (strcmp(why, "ok")) {
		rc = fail(STORE_BACKUP_INVALID, err, errlen, "%s is damaged: SQLite's integrity_check says: %s",
			  label, why);
		goto out;
	}
	v = query_int(db, "PRAGMA user_version", why, sizeof(why));
	if (v > store_schema_latest()) {
		rc = fail(STORE_BACKUP_INVALID, err, errlen, "%s has schema version %lld but this hypd knows only"
			  " versions up to %d: it was written by a newer hypd; use that hypd (or a newer one)",
			  label, v, store_schema_latest());
		goto out;
	}
	if (v < 1 || query_int(db, tables, why, sizeof(why)) != 3) {
		rc = fail(STORE_BACKUP_INVALID, err, errlen, "%s is not a hypd state: it lacks the tables kv,"
			  " operations and events (schema version %lld)", label, v);
		goto out;
	}
	info->schema = (int)v;
	info->operations = query_int(db, "SELECT count(*) FROM operations", why, sizeof(why));
	if (info->operations < 0) {
		rc = fail(STORE_BACKUP_INVALID, err, errlen, "%s: cannot count its operations: %s", label, why);
		goto out;
	}
	rc = STORE_BACKUP_OK;
out:
	sqlite3_finalize(st);
	sqlite3_close_v2(db);
	if (!rc)
		info->bytes = size_of(path);
	return rc;
}

/* Copies from's main database into to, one small step at a time. */
static int copy_pages(sqlite3 *from, sqlite3 *to, char *err, size_t errlen)
{
	sqlite3_backup *bk = sqlite3_backup_init(to, "main", from, "main");
	int rc, tries = 0;

	if (!bk)
		return fail(STORE_BACKUP_ERROR, err, errlen, "backup: %s", sqlite3_errmsg(to));
	do {
		rc = sqlite3_backup_step(bk, STEP_PAGES);
		if ((rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED) {
			if (++tries > BUSY_TRIES)
				break;
			sqlite3_sleep(5);
		}
	} while (rc == SQLITE_OK || (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED);
	sqlite3_backup_finish(bk);
	if (rc != SQLITE_DONE)
		return fail(STORE_BACKUP_ERROR, err, errlen, "backup: %s", sqlite3_errstr(rc));
	return STORE_BACKUP_OK;
}

/* Moves tmp to dest: over it with force, else only when dest does not exist. */
static int publish(const char *tmp, const char *dest, int force, char *err, size_t errlen)
{
	if (force ? rename(tmp, dest) == 0 : link(tmp, dest) == 0 && unlink(tmp) == 0)
		return STORE_BACKUP_OK;
	if (errno == EEXIST)
		return fail(STORE_BACKUP_EXISTS, err, errlen, "%s exists: give --force to replace it", dest);
	return fail(STORE_BACKUP_ERROR, err, errlen, "cannot write %s: %s", dest, strerror(errno));
}

int store_backup_to(const char *dir, const char *dest, int force, store_backup_info *info,
		    char *err, size_t errlen)
{
	char src[PATH_MAX], tmp[PATH_MAX], why[256];
	sqlite3 *from = NULL, *to = NULL;
	long long ops, schema;
	int rc;

	memset(info, 0, sizeof(*info));
	if (join(src, dir, "/hypd.db") || join(tmp, dest, ".tmp"))
		return fail(STORE_BACKUP_ERROR, err, errlen, "path too long");
	if (!exists(src))
		return fail(STORE_BACKUP_MISSING, err, errlen, "there is no state database %s", src);
	if (!force && exists(dest))
		return fail(STORE_BACKUP_EXISTS, err, errlen, "%s exists: give --force to replace it", dest);
	unlink_db(tmp); /* a leftover of an interrupted backup */
	rc = open_db(src, SQLITE_OPEN_READWRITE, &from, err, errlen);
	if (rc)
		goto out;
	/* one read transaction for the whole copy: its counts and its pages are one moment */
	if (sqlite3_exec(from, "PRAGMA query_only = 1; BEGIN", NULL, NULL, NULL) != SQLITE_OK ||
	    (schema = query_int(from, "PRAGMA user_version", why, sizeof(why))) < 0 ||
	    (ops = query_int(from, "SELECT count(*) FROM operations", why, sizeof(why))) < 0) {
		rc = fail(STORE_BACKUP_ERROR, err, errlen, "cannot read %s: %s", src, sqlite3_errmsg(from));
		goto out;
	}
	if (statedir_create_private(tmp, err, errlen) != 0) {
		rc = STORE_BACKUP_ERROR;
		goto out;
	}
	rc = open_db(tmp, SQLITE_OPEN_READWRITE, &to, err, errlen);
	if (!rc)
		rc = copy_pages(from, to, err, errlen);
	/* the copy carries the source's WAL mark: make it one self-contained file */
	if (!rc && sqlite3_exec(to, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL) != SQLITE_OK)
		rc = fail(STORE_BACKUP_ERROR, err, errlen, "%s: %s", tmp, sqlite3_errmsg(to));
	sqlite3_close_v2(to);
	to = NULL;
	if (!rc)
		rc = store_backup_check(tmp, tmp, info, err, errlen);
	if (!rc && (info->schema != schema || info->operations != ops))
		rc = fail(STORE_BACKUP_ERROR, err, errlen, "the copy %s does not match the database: schema %d"
			  " and %lld operations instead of %lld and %lld", tmp, info->schema, info->operations,
			  schema, ops);
	if (!rc)
		rc = publish(tmp, dest, force, err, errlen);
	if (!rc)
		sync_dir_of(dest);
out:
	sqlite3_close_v2(from);
	sqlite3_close_v2(to);
	if (rc)
		unlink_db(tmp);
	return rc;
}

/* Copies the bytes of file to path (made 0600), durably. */
static int copy_file(const char *file, const char *path, char *err, size_t errlen)
{
	char buf[65536];
	int in = -1, out = -1, rc = STORE_BACKUP_ERROR;
	ssize_t n = 0;

	in = open(file, O_RDONLY | O_CLOEXEC);
	if (in < 0) {
		int e = errno;

		return fail(e == ENOENT ? STORE_BACKUP_MISSING : STORE_BACKUP_ERROR, err, errlen,
			    "cannot read %s: %s", file, strerror(e));
	}
	if (statedir_create_private(path, err, errlen) != 0)
		goto out;
	out = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (out < 0)
		goto io;
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			goto io;
	if (n < 0 || fsync(out) != 0)
		goto io;
	rc = STORE_BACKUP_OK;
	goto out;
io:
	fail(STORE_BACKUP_ERROR, err, errlen, "cannot copy %s to %s: %s", file, path, strerror(errno));
out:
	if (in >= 0)
		close(in);
	if (out >= 0)
		close(out);
	return rc;
}

/*
 * Folds the WAL of db into it (a checkpoint; the last connection's close
 * deletes the WAL). A WAL left behind by a good checkpoint means another
 * process has db open: INUSE. A database that cannot be checkpointed (a
 * damaged one, which a restore may be replacing) keeps its WAL; *wal says so.
 */
static int settle_old(const char *db, int *wal, char *err, size_t errlen)
{
	char walpath[PATH_MAX], why[256];
	sqlite3 *c = NULL;
	long long busy = -1;

	if (join(walpath, db, "-wal"))
		return fail(STORE_BACKUP_ERROR, err, errlen, "path too long");
	if (open_db(db, SQLITE_OPEN_READWRITE, &c, why, sizeof(why)) == 0)
		busy = query_int(c, "PRAGMA wal_checkpoint(TRUNCATE)", why, sizeof(why));
	sqlite3_close_v2(c);
	*wal = exists(walpath);
	if (busy == 1 || (busy == 0 && *wal))
		return fail(STORE_BACKUP_INUSE, err, errlen, "another process has %s open (a hypd mcp, hypd token"
			    " or a program using it): stop every hypd on this state directory first", db);
	return STORE_BACKUP_OK;
}

int store_backup_restore(const char *dir, const char *file, store_backup_info *info,
			 char *err, size_t errlen)
{
	char db[PATH_MAX], staging[PATH_MAX], before[PATH_MAX], p[PATH_MAX], q[PATH_MAX];
	int rc, wal = 0, kept = 0;

	memset(info, 0, sizeof(*info));
	if (join(db, dir, "/hypd.db") || join(staging, db, ".restore") || join(before, db, ".before-restore") ||
	    join(p, file, "-wal"))
		return fail(STORE_BACKUP_ERROR, err, errlen, "path too long");
	if (size_of(p) > 0)
		return fail(STORE_BACKUP_INVALID, err, errlen, "%s has a WAL file beside it (%s): it is a live"
			    " database, not a backup; make one with hypd backup", file, p);
	unlink_db(staging);
	rc = copy_file(file, staging, err, errlen);
	if (!rc)
		rc = store_backup_check(staging, file, info, err, errlen);
	if (!rc && exists(db))
		rc = settle_old(db, &wal, err, errlen);
	if (rc || !exists(db))
		goto swap;
	/* keep the old state: its database (and a WAL a checkpoint could not fold in) */
	unlink_db(before);
	join(p, db, "-wal");
	join(q, before, "-wal");
	if ((wal && link(p, q) != 0) || link(db, before) != 0) {
		rc = fail(STORE_BACKUP_ERROR, err, errlen, "cannot keep the old state as %s: %s", before,
			  strerror(errno));
		unlink_db(before);
		goto out;
	}
	kept = info->kept = 1;
	unlink(p); /* an old WAL beside the new database would be replayed into it */
	join(p, db, "-shm");
	unlink(p);
swap:
	if (!rc && rename(staging, db) != 0) {
		rc = fail(STORE_BACKUP_ERROR, err, errlen, "cannot rename %s to %s: %s", staging, db,
			  strerror(errno));
		if (kept && wal) { /* the old database is still in place: give it its WAL back */
			join(p, db, "-wal");
			join(q, before, "-wal");
			rename(q, p);
		}
	}
	if (!rc)
		sync_dir_of(db);
	else
		info->kept = 0;
out:
	unlink_db(staging);
	return rc;
}
