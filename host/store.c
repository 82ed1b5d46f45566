/* store: the host's durable state over SQLite (see store.h). */
#include "store.h"

#include <ctype.h>
#include <errno.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "statedir.h"

/*
 * The schema, one step per version: step i takes user_version from i to
 * i + 1. Append new steps; never edit or reorder a released one.
 */
static const char *const migrations[] = {
	/* 1: key-value, operations, the event log */
	"CREATE TABLE kv(key TEXT PRIMARY KEY, value TEXT NOT NULL,"
	" updated_at REAL NOT NULL);"
	"CREATE TABLE operations(id TEXT PRIMARY KEY, tool TEXT NOT NULL,"
	" target TEXT, params TEXT NOT NULL DEFAULT '{}', caller TEXT,"
	" frontend TEXT, phase TEXT, status TEXT NOT NULL,"
	" steps TEXT NOT NULL DEFAULT '[]', result TEXT, error TEXT,"
	" created_at REAL NOT NULL, updated_at REAL NOT NULL,"
	" finished_at REAL);"
	"CREATE INDEX operations_status ON operations(status);"
	"CREATE INDEX operations_tool_target ON operations(tool, target);"
	"CREATE INDEX operations_created ON operations(created_at);"
	"CREATE TABLE events(seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" at REAL NOT NULL, kind TEXT NOT NULL, operation_id TEXT,"
	" data TEXT NOT NULL);",
	/* 2: one operation's events, in order (followers of an operation) */
	"CREATE INDEX events_operation ON events(operation_id, seq);",
};

#define N_MIGRATIONS ((int)(sizeof(migrations) / sizeof(migrations[0])))

#define OP_COLS "id, tool, target, params, caller, frontend, phase, status," \
		" steps, result, error, created_at, updated_at, finished_at"

/* Statements run once per call, cached after their first use. */
enum { ST_KV_GET, ST_KV_PUT, ST_KV_DELETE, ST_OP_INSERT, ST_OP_GET,
       ST_OP_UPDATE, ST_EVENT_APPEND, ST_COUNT };

static const char *const stmt_sql[ST_COUNT] = {
	[ST_KV_GET] = "SELECT value FROM kv WHERE key = ?1",
	[ST_KV_PUT] = "INSERT INTO kv(key, value, updated_at)"
		" VALUES(?1, ?2, ?3)"
		" ON CONFLICT(key) DO UPDATE SET value = excluded.value,"
		" updated_at = excluded.updated_at",
	[ST_KV_DELETE] = "DELETE FROM kv WHERE key = ?1",
	[ST_OP_INSERT] = "INSERT INTO operations(" OP_COLS ") VALUES(?1, ?2,"
		" ?3, coalesce(?4, '{}'), ?5, ?6, ?7, ?8, coalesce(?9, '[]'),"
		" ?10, ?11, ?12, ?13, ?14)",
	[ST_OP_GET] = "SELECT " OP_COLS " FROM operations WHERE id = ?1",
	/* ?odd: 1 to write the column, ?even: its new value */
	[ST_OP_UPDATE] = "UPDATE operations SET"
		" target = CASE WHEN ?1 THEN ?2 ELSE target END,"
		" params = CASE WHEN ?3 THEN ?4 ELSE params END,"
		" caller = CASE WHEN ?5 THEN ?6 ELSE caller END,"
		" frontend = CASE WHEN ?7 THEN ?8 ELSE frontend END,"
		" phase = CASE WHEN ?9 THEN ?10 ELSE phase END,"
		" status = CASE WHEN ?11 THEN ?12 ELSE status END,"
		" steps = CASE WHEN ?13 THEN ?14 ELSE steps END,"
		" result = CASE WHEN ?15 THEN ?16 ELSE result END,"
		" error = CASE WHEN ?17 THEN ?18 ELSE error END,"
		" finished_at = CASE WHEN ?19 THEN ?20 ELSE finished_at END,"
		" updated_at = ?21 WHERE id = ?22",
	[ST_EVENT_APPEND] = "INSERT INTO events(at, kind, operation_id, data)"
		" VALUES(?1, ?2, ?3, ?4)",
};

struct store {
	sqlite3 *db;			/* the connection */
	int depth;			/* store_begin nesting level */
	sqlite3_stmt *stmt[ST_COUNT];	/* cached statements, or NULL */
	char err[512];			/* message of the last failure */
};

const char store_clear[] = "";

__attribute__((format(printf, 3, 4)))
static int fail(store *s, int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->err, sizeof(s->err), fmt, ap);
	va_end(ap);
	return code;
}

/* Puts "what: " before the current message. */
static int prefix_err(store *s, int code, const char *what)
{
	char msg[sizeof(s->err)];

	memcpy(msg, s->err, sizeof(msg));
	return fail(s, code, "%s: %s", what, msg);
}

/* Maps a SQLite result code to a store code, keeping sqlite3_errmsg. */
static int sql_fail(store *s, int rc, const char *what)
{
	int code = STORE_ERROR;

	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		code = STORE_BUSY;
		break;
	}
	if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
		code = STORE_EXISTS;
	return fail(s, code, "%s: %s", what, sqlite3_errmsg(s->db));
}

static sqlite3_stmt *cached(store *s, int which)
{
	int rc;

	if (s->stmt[which])
		return s->stmt[which];
	rc = sqlite3_prepare_v3(s->db, stmt_sql[which], -1,
				SQLITE_PREPARE_PERSISTENT, &s->stmt[which],
				NULL);
	if (rc != SQLITE_OK) {
		sql_fail(s, rc, "prepare");
		s->stmt[which] = NULL;
	}
	return s->stmt[which];
}

/* Makes a cached statement ready for its next use. */
static void done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Steps a write; with noun, a write that changed no row is NOTFOUND. */
static int step_write(store *s, sqlite3_stmt *st, const char *what,
		      const char *noun, const char *key)
{
	int rc = sqlite3_step(st);

	if (rc != SQLITE_DONE)
		rc = sql_fail(s, rc, what);
	else if (noun && sqlite3_changes(s->db) == 0)
		rc = fail(s, STORE_NOTFOUND, "%s: no %s %s", what, noun, key);
	else
		rc = STORE_OK;
	done(st);
	return rc;
}

static int prepare(store *s, const char *sql, sqlite3_stmt **st,
		   const char *what)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);

	return rc == SQLITE_OK ? STORE_OK : sql_fail(s, rc, what);
}

/* The end of a listing loop whose last sqlite3_step returned rc. */
static int list_end(store *s, int rc, const char *what)
{
	return rc == SQLITE_ROW || rc == SQLITE_DONE ? STORE_OK
						     : sql_fail(s, rc, what);
}

static int bind_text(sqlite3_stmt *st, int i, const char *v)
{
	if (!v || v == STORE_CLEAR)
		return sqlite3_bind_null(st, i);
	return sqlite3_bind_text(st, i, v, -1, SQLITE_STATIC);
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	if (sqlite3_column_type(st, i) == SQLITE_NULL)
		return NULL;
	return (const char *)sqlite3_column_text(st, i);
}

/* Runs a statement without arguments or rows (BEGIN, COMMIT, ...). */
static int run(store *s, const char *sql)
{
	int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);

	return rc == SQLITE_OK ? STORE_OK : sql_fail(s, rc, sql);
}

/* Runs a PRAGMA and copies the first column of its row into out. */
static int pragma(store *s, const char *sql, char *out, size_t outlen)
{
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);

	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		snprintf(out, outlen, "%s", sqlite3_column_text(st, 0)
			 ? (const char *)sqlite3_column_text(st, 0) : "");
		rc = STORE_OK;
	} else {
		rc = sql_fail(s, rc, sql);
	}
	sqlite3_finalize(st);
	return rc;
}

static int mkdirs(store *s, const char *dir)
{
	char *p = strdup(dir), *c, end;
	struct stat sb;
	int rc = STORE_OK;

	if (!p)
		return fail(s, STORE_ERROR, "out of memory");
	for (c = p + 1; ; c++) {
		if (*c != '/' && *c)
			continue;
		end = *c;
		*c = '\0';
		if (mkdir(p, 0700) && errno != EEXIST) {
			rc = fail(s, STORE_ERROR, "mkdir %s: %s", p,
				  strerror(errno));
			goto out;
		}
		*c = end;
		if (!end)
			break;
	}
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode))
		rc = fail(s, STORE_ERROR, "%s is not a directory", dir);
out:
	free(p);
	return rc;
}

static int too_new(store *s, int v)
{
	return fail(s, STORE_ERROR, "the database has schema version %d but"
		    " this hypd knows only %d: it was written by a newer hypd;"
		    " refusing to open it", v, N_MIGRATIONS);
}

/*
 * Refuses a database of a newer schema before configure switches it to WAL
 * (a write to its header): refused, it is left byte for byte as it was.
 * migrate checks again under the write lock.
 */
static int check_not_newer(store *s)
{
	char v[16];
	int rc = pragma(s, "PRAGMA user_version", v, sizeof(v));

	return rc ? rc : atoi(v) > N_MIGRATIONS ? too_new(s, atoi(v)) : STORE_OK;
}

/* Applies the missing steps, each in its own transaction. */
static int migrate(store *s)
{
	char bump[64];
	int v, rc;

	for (;;) {
		rc = run(s, "BEGIN IMMEDIATE");
		if (rc)
			return rc;
		/* read under the write lock: another process may migrate too */
		rc = pragma(s, "PRAGMA user_version", bump, sizeof(bump));
		if (rc)
			goto fail;
		v = atoi(bump);
		if (v > N_MIGRATIONS) {
			rc = too_new(s, v);
			goto fail;
		}
		if (v == N_MIGRATIONS)
			return run(s, "COMMIT");
		rc = run(s, migrations[v]);
		if (rc) {
			snprintf(bump, sizeof(bump), "migration %d", v + 1);
			prefix_err(s, rc, bump);
			goto fail;
		}
		snprintf(bump, sizeof(bump), "PRAGMA user_version = %d", v + 1);
		rc = run(s, bump);
		if (!rc)
			rc = run(s, "COMMIT");
		if (rc)
			goto fail;
	}
fail:
	sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	return rc;
}

static int configure(store *s)
{
	char mode[16];
	int rc;

	sqlite3_extended_result_codes(s->db, 1);
	sqlite3_busy_timeout(s->db, 5000);
	rc = pragma(s, "PRAGMA journal_mode=WAL", mode, sizeof(mode));
	if (!rc && strcmp(mode, "wal"))
		rc = fail(s, STORE_ERROR, "journal_mode WAL refused (got %s)",
			  mode);
	if (!rc)
		rc = run(s, "PRAGMA synchronous=FULL");
	if (!rc)
		rc = run(s, "PRAGMA foreign_keys=ON");
	return rc;
}

int store_open(const char *dir, store **out, char *err, size_t errlen)
{
	store *s = calloc(1, sizeof(*s));
	char *path = NULL;
	size_t n;
	int rc;

	*out = NULL;
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return STORE_ERROR;
	}
	if (!dir || !*dir) {
		rc = fail(s, STORE_MISUSE, "store_open: empty directory");
		goto fail;
	}
	rc = mkdirs(s, dir);
	if (rc)
		goto fail;
	n = strlen(dir) + sizeof("/hypd.db");
	path = malloc(n);
	if (!path) {
		rc = fail(s, STORE_ERROR, "out of memory");
		goto fail;
	}
	snprintf(path, n, "%s/hypd.db", dir);
	/* 0600 whatever the umask; SQLite gives the WAL and SHM files its mode */
	if (statedir_create_private(path, s->err, sizeof(s->err)) != 0) {
		rc = STORE_ERROR;
		goto fail;
	}
	rc = sqlite3_open_v2(path, &s->db,
			     SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
	if (rc != SQLITE_OK) {
		rc = fail(s, STORE_ERROR, "open %s: %s", path,
			  s->db ? sqlite3_errmsg(s->db) : "out of memory");
		goto fail;
	}
	rc = check_not_newer(s);
	if (!rc)
		rc = configure(s);
	if (!rc)
		rc = migrate(s);
	if (rc) {
		prefix_err(s, rc, path);
		goto fail;
	}
	free(path);
	*out = s;
	return STORE_OK;
fail:
	snprintf(err, errlen, "%s", s->err);
	free(path);
	store_close(s);
	return rc;
}

void store_close(store *s)
{
	int i;

	if (!s)
		return;
	for (i = 0; i < ST_COUNT; i++)
		sqlite3_finalize(s->stmt[i]);
	if (s->db && !sqlite3_get_autocommit(s->db))
		sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
	sqlite3_close_v2(s->db);
	free(s);
}

const char *store_errmsg(const store *s)
{
	return s->err;
}

int store_schema_version(store *s)
{
	char v[16];

	return pragma(s, "PRAGMA user_version", v, sizeof(v)) ? -1 : atoi(v);
}

int store_schema_latest(void)
{
	return N_MIGRATIONS;
}

const char *store_migration_sql(int i)
{
	return i >= 0 && i < N_MIGRATIONS ? migrations[i] : NULL;
}

int store_latest_time(store *s, double *out)
{
	static const char sql[] =
		"SELECT max(t) FROM (SELECT max(updated_at) AS t FROM kv"
		" UNION ALL SELECT max(updated_at) FROM operations"
		" UNION ALL SELECT max(at) FROM events)";
	sqlite3_stmt *st = NULL;
	int rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);

	*out = 0;
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_type(st, 0) != SQLITE_NULL)
			*out = sqlite3_column_double(st, 0);
		rc = STORE_OK;
	} else {
		rc = sql_fail(s, rc, sql);
	}
	sqlite3_finalize(st);
	return rc;
}

/* ---- Transactions ---- */

int store_begin(store *s)
{
	char sql[48];
	int rc;

	if (s->depth == 0)
		rc = run(s, "BEGIN IMMEDIATE");
	else {
		snprintf(sql, sizeof(sql), "SAVEPOINT hypd_%d", s->depth);
		rc = run(s, sql);
	}
	if (!rc)
		s->depth++;
	return rc;
}

int store_commit(store *s)
{
	char sql[48];
	int rc;

	if (s->depth == 0)
		return fail(s, STORE_MISUSE, "commit without a transaction");
	if (s->depth == 1)
		rc = run(s, "COMMIT");
	else {
		snprintf(sql, sizeof(sql), "RELEASE hypd_%d", s->depth - 1);
		rc = run(s, sql);
	}
	if (!rc)
		s->depth--;
	return rc;
}

int store_rollback(store *s)
{
	char sql[80];
	int rc;

	if (s->depth == 0)
		return fail(s, STORE_MISUSE, "rollback without a transaction");
	if (s->depth == 1) {
		rc = sqlite3_get_autocommit(s->db) ? STORE_OK
						   : run(s, "ROLLBACK");
	} else {
		snprintf(sql, sizeof(sql), "ROLLBACK TO hypd_%d;"
			 " RELEASE hypd_%d", s->depth - 1, s->depth - 1);
		rc = run(s, sql);
	}
	s->depth--;	/* the level is gone either way */
	return rc;
}

int store_tx_depth(const store *s)
{
	return s->depth;
}

/* ---- Key-value ---- */

int store_kv_put(store *s, const char *key, const char *value, double now)
{
	sqlite3_stmt *st = cached(s, ST_KV_PUT);

	if (!st)
		return STORE_ERROR;
	if (!key || !value)
		return fail(s, STORE_MISUSE, "kv_put: NULL key or value");
	bind_text(st, 1, key);
	bind_text(st, 2, value);
	sqlite3_bind_double(st, 3, now);
	return step_write(s, st, "kv_put", NULL, NULL);
}

int store_kv_get(store *s, const char *key, char **value)
{
	sqlite3_stmt *st = cached(s, ST_KV_GET);
	int rc;

	*value = NULL;
	if (!st)
		return STORE_ERROR;
	bind_text(st, 1, key);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*value = strdup(col_text(st, 0));
		rc = *value ? STORE_OK : fail(s, STORE_ERROR, "out of memory");
	} else if (rc == SQLITE_DONE) {
		rc = fail(s, STORE_NOTFOUND, "kv_get: no key %s", key);
	} else {
		rc = sql_fail(s, rc, "kv_get");
	}
	done(st);
	return rc;
}

int store_kv_delete(store *s, const char *key)
{
	sqlite3_stmt *st = cached(s, ST_KV_DELETE);

	if (!st)
		return STORE_ERROR;
	bind_text(st, 1, key);
	return step_write(s, st, "kv_delete", "key", key);
}

int store_kv_list(store *s, const char *prefix, store_kv_fn fn, void *ud)
{
	sqlite3_stmt *st = NULL;
	size_t n;
	char *upper;
	int rc;

	if (!prefix)
		prefix = "";
	n = strlen(prefix);
	upper = malloc(n + 1);
	if (!upper)
		return fail(s, STORE_ERROR, "out of memory");
	/*
	 * Keys with the prefix are exactly those in [prefix, upper), where
	 * upper is the prefix with its last byte below 0xff incremented (and
	 * what follows it dropped). Binary collation, no LIKE: nothing in
	 * the prefix is a wildcard.
	 */
	memcpy(upper, prefix, n + 1);
	while (n > 0 && (unsigned char)upper[n - 1] == 0xff)
		n--;
	if (n > 0) {
		upper[n - 1] = (char)((unsigned char)upper[n - 1] + 1);
		upper[n] = '\0';
	}
	rc = prepare(s, n > 0
		? "SELECT key, value FROM kv WHERE key >= ?1 AND key < ?2"
		  " ORDER BY key"
		: "SELECT key, value FROM kv WHERE key >= ?1 ORDER BY key",
		&st, "kv_list");
	if (rc)
		goto out;
	bind_text(st, 1, prefix);
	if (n > 0)
		bind_text(st, 2, upper);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW &&
	       !fn(ud, col_text(st, 0), col_text(st, 1)))
		;
	rc = list_end(s, rc, "kv_list");
out:
	sqlite3_finalize(st);
	free(upper);
	return rc;
}

/* ---- Operations ---- */

/* The text fields of store_op, in the order of OP_COLS. */
static const size_t op_text[] = {
	offsetof(store_op, id), offsetof(store_op, tool),
	offsetof(store_op, target), offsetof(store_op, params),
	offsetof(store_op, caller), offsetof(store_op, frontend),
	offsetof(store_op, phase), offsetof(store_op, status),
	offsetof(store_op, steps), offsetof(store_op, result),
	offsetof(store_op, error),
};

#define N_OP_TEXT ((int)(sizeof(op_text) / sizeof(op_text[0])))

static const char **op_field(const store_op *op, int i)
{
	return (const char **)((const char *)op + op_text[i]);
}

/* Points op's fields into the current row of st (valid until next step). */
static void read_op(sqlite3_stmt *st, store_op *op)
{
	int i;

	for (i = 0; i < N_OP_TEXT; i++)
		*op_field(op, i) = col_text(st, i);
	op->created_at = sqlite3_column_double(st, 11);
	op->updated_at = sqlite3_column_double(st, 12);
	op->has_finished_at = sqlite3_column_type(st, 13) != SQLITE_NULL;
	op->finished_at = sqlite3_column_double(st, 13);
}

int store_op_insert(store *s, const store_op *op)
{
	sqlite3_stmt *st;
	int i, rc;

	if (!op->id || !op->tool || !op->status)
		return fail(s, STORE_MISUSE, "op_insert: id, tool and status "
			    "are required");
	st = cached(s, ST_OP_INSERT);
	if (!st)
		return STORE_ERROR;
	for (i = 0; i < N_OP_TEXT; i++)
		bind_text(st, i + 1, *op_field(op, i));
	sqlite3_bind_double(st, 12, op->created_at);
	sqlite3_bind_double(st, 13, op->updated_at);
	if (op->has_finished_at)
		sqlite3_bind_double(st, 14, op->finished_at);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE)
		rc = STORE_OK;
	else if (rc == SQLITE_CONSTRAINT_PRIMARYKEY)
		rc = fail(s, STORE_EXISTS, "op_insert: operation %s exists",
			  op->id);
	else
		rc = sql_fail(s, rc, "op_insert");
	done(st);
	return rc;
}

static void bind_patch(sqlite3_stmt *st, int i, const char *v)
{
	sqlite3_bind_int(st, i, v != NULL);
	bind_text(st, i + 1, v);
}

int store_op_update(store *s, const char *id, const store_op_patch *p,
		    double now)
{
	sqlite3_stmt *st;

	if (p->params == STORE_CLEAR || p->status == STORE_CLEAR ||
	    p->steps == STORE_CLEAR)
		return fail(s, STORE_MISUSE, "op_update: params, status and "
			    "steps cannot be cleared");
	st = cached(s, ST_OP_UPDATE);
	if (!st)
		return STORE_ERROR;
	bind_patch(st, 1, p->target);
	bind_patch(st, 3, p->params);
	bind_patch(st, 5, p->caller);
	bind_patch(st, 7, p->frontend);
	bind_patch(st, 9, p->phase);
	bind_patch(st, 11, p->status);
	bind_patch(st, 13, p->steps);
	bind_patch(st, 15, p->result);
	bind_patch(st, 17, p->error);
	sqlite3_bind_int(st, 19, p->has_finished_at != 0);
	sqlite3_bind_double(st, 20, p->finished_at);
	sqlite3_bind_double(st, 21, now);
	bind_text(st, 22, id);
	return step_write(s, st, "op_update", "operation", id);
}

int store_op_get(store *s, const char *id, store_op *out)
{
	sqlite3_stmt *st = cached(s, ST_OP_GET);
	const char **f;
	int i, rc;

	memset(out, 0, sizeof(*out));
	if (!st)
		return STORE_ERROR;
	bind_text(st, 1, id);
	rc = sqlite3_step(st);
	if (rc == SQLITE_DONE) {
		rc = fail(s, STORE_NOTFOUND, "op_get: no operation %s", id);
		goto out;
	}
	if (rc != SQLITE_ROW) {
		rc = sql_fail(s, rc, "op_get");
		goto out;
	}
	read_op(st, out);
	rc = STORE_OK;
	for (i = 0; i < N_OP_TEXT; i++) {
		f = op_field(out, i);
		if (*f && !(*f = strdup(*f)))
			rc = STORE_ERROR;
	}
	if (rc) {
		store_op_free(out);
		fail(s, rc, "out of memory");
	}
out:
	done(st);
	return rc;
}

void store_op_free(store_op *op)
{
	int i;

	for (i = 0; i < N_OP_TEXT; i++)
		free((char *)*op_field(op, i));
	memset(op, 0, sizeof(*op));
}

int store_op_list(store *s, const store_op_filter *f, store_op_fn fn,
		  void *ud)
{
	static const store_op_filter none;
	static const char *const conds[3] = { "status", "tool", "target" };
	const char *vals[3];
	char sql[512];
	sqlite3_stmt *st = NULL;
	store_op op;
	int i, n = 0, len, rc;

	if (!f)
		f = &none;
	vals[0] = f->status;
	vals[1] = f->tool;
	vals[2] = f->target;
	len = snprintf(sql, sizeof(sql), "SELECT " OP_COLS " FROM operations");
	for (i = 0; i < 3; i++) {
		if (vals[i])
			len += snprintf(sql + len, sizeof(sql) - len,
					" %s %s = ?", n++ ? "AND" : "WHERE",
					conds[i]);
	}
	snprintf(sql + len, sizeof(sql) - len,
		 " ORDER BY created_at DESC, rowid DESC LIMIT ?");
	rc = prepare(s, sql, &st, "op_list");
	if (rc)
		goto out;
	for (i = 0, n = 0; i < 3; i++) {
		if (vals[i])
			bind_text(st, ++n, vals[i]);
	}
	sqlite3_bind_int(st, n + 1, f->limit > 0 ? f->limit : -1);
	do {
		rc = sqlite3_step(st);
		if (rc == SQLITE_ROW)
			read_op(st, &op);
	} while (rc == SQLITE_ROW && !fn(ud, &op));
	rc = list_end(s, rc, "op_list");
out:
	sqlite3_finalize(st);
	return rc;
}

/* ---- Events ---- */

int store_event_append(store *s, double at, const char *kind,
		       const char *operation_id, const char *data,
		       int64_t *seq)
{
	sqlite3_stmt *st;
	int rc;

	if (!kind || !data)
		return fail(s, STORE_MISUSE, "event_append: NULL kind or data");
	st = cached(s, ST_EVENT_APPEND);
	if (!st)
		return STORE_ERROR;
	sqlite3_bind_double(st, 1, at);
	bind_text(st, 2, kind);
	bind_text(st, 3, operation_id);
	bind_text(st, 4, data);
	rc = step_write(s, st, "event_append", NULL, NULL);
	if (!rc && seq)
		*seq = sqlite3_last_insert_rowid(s->db);
	return rc;
}

int store_event_list(store *s, int64_t after_seq, int limit,
		     store_event_fn fn, void *ud)
{
	sqlite3_stmt *st = NULL;
	store_event ev;
	int rc;

	rc = prepare(s, "SELECT seq, at, kind, operation_id, data FROM events"
		     " WHERE seq > ?1 ORDER BY seq LIMIT ?2", &st,
		     "event_list");
	if (rc)
		goto out;
	sqlite3_bind_int64(st, 1, after_seq);
	sqlite3_bind_int(st, 2, limit > 0 ? limit : -1);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		ev.seq = sqlite3_column_int64(st, 0);
		ev.at = sqlite3_column_double(st, 1);
		ev.kind = col_text(st, 2);
		ev.operation_id = col_text(st, 3);
		ev.data = col_text(st, 4);
		if (fn(ud, &ev))
			break;
	}
	rc = list_end(s, rc, "event_list");
out:
	sqlite3_finalize(st);
	return rc;
}

/* ---- Generic SQL ---- */

static int bind_value(sqlite3_stmt *st, int i, const store_value *v)
{
	switch (v->type) {
	case STORE_T_INT:
		return sqlite3_bind_int64(st, i, v->i);
	case STORE_T_REAL:
		return sqlite3_bind_double(st, i, v->d);
	case STORE_T_TEXT:
		return sqlite3_bind_text64(st, i, v->s, v->len, SQLITE_STATIC,
					   SQLITE_UTF8);
	case STORE_T_BLOB:
		return sqlite3_bind_blob64(st, i, v->s, v->len, SQLITE_STATIC);
	default:
		return sqlite3_bind_null(st, i);
	}
}

static void read_value(sqlite3_stmt *st, int i, store_value *v)
{
	memset(v, 0, sizeof(*v));
	switch (sqlite3_column_type(st, i)) {
	case SQLITE_INTEGER:
		v->type = STORE_T_INT;
		v->i = sqlite3_column_int64(st, i);
		break;
	case SQLITE_FLOAT:
		v->type = STORE_T_REAL;
		v->d = sqlite3_column_double(st, i);
		break;
	case SQLITE_TEXT:
		v->type = STORE_T_TEXT;
		v->s = (const char *)sqlite3_column_text(st, i);
		v->len = (size_t)sqlite3_column_bytes(st, i);
		break;
	case SQLITE_BLOB:
		v->type = STORE_T_BLOB;
		v->s = sqlite3_column_blob(st, i);
		v->len = (size_t)sqlite3_column_bytes(st, i);
		if (!v->s)	/* a zero-length blob */
			v->s = "";
		break;
	default:
		v->type = STORE_T_NULL;
	}
}

/* Whether sql starts with a statement that opens or closes a transaction. */
static int is_tx_control(const char *sql)
{
	static const char *const words[] = { "BEGIN", "COMMIT", "END",
		"ROLLBACK", "SAVEPOINT", "RELEASE", NULL };
	const char *const *w;
	size_t n;

	sql += strspn(sql, " \t\r\n");
	for (w = words; *w; w++) {
		n = strlen(*w);
		if (!strncasecmp(sql, *w, n) && !isalnum((unsigned char)sql[n])
		    && sql[n] != '_')
			return 1;
	}
	return 0;
}

int store_sql(store *s, const char *sql, const store_value *args, int nargs,
	      store_row_fn fn, void *ud, int64_t *changes)
{
	sqlite3_stmt *st = NULL;
	const char **names = NULL;
	store_value *vals = NULL;
	const char *tail = NULL;
	sqlite3_int64 before;
	int rc, i, ncol;

	if (changes)
		*changes = 0;
	if (is_tx_control(sql))
		return fail(s, STORE_MISUSE, "sql: transactions go through "
			    "store_begin/store_commit/store_rollback");
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, &tail);
	if (rc != SQLITE_OK) {
		rc = sql_fail(s, rc, "sql");
		if (rc == STORE_ERROR)	/* syntax, no such table, ... */
			rc = STORE_MISUSE;
		goto out;
	}
	if (!st) {
		rc = fail(s, STORE_MISUSE, "sql: no statement");
		goto out;
	}
	tail += strspn(tail, " \t\r\n;");
	if (*tail) {
		rc = fail(s, STORE_MISUSE, "sql: one statement at a time "
			  "(found more after the first)");
		goto out;
	}
	if (sqlite3_bind_parameter_count(st) != nargs) {
		rc = fail(s, STORE_MISUSE, "sql: the statement takes %d "
			  "parameters, got %d",
			  sqlite3_bind_parameter_count(st), nargs);
		goto out;
	}
	for (i = 0; i < nargs; i++) {
		rc = bind_value(st, i + 1, &args[i]);
		if (rc != SQLITE_OK) {
			rc = sql_fail(s, rc, "sql: bind");
			goto out;
		}
	}
	ncol = sqlite3_column_count(st);
	if (ncol > 0) {
		names = calloc((size_t)ncol, sizeof(*names));
		vals = calloc((size_t)ncol, sizeof(*vals));
		if (!names || !vals) {
			rc = fail(s, STORE_ERROR, "out of memory");
			goto out;
		}
		for (i = 0; i < ncol; i++) {
			names[i] = sqlite3_column_name(st, i);
			if (!names[i]) {
				rc = fail(s, STORE_ERROR, "out of memory");
				goto out;
			}
		}
	}
	before = sqlite3_total_changes64(s->db);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (!fn)
			continue;
		for (i = 0; i < ncol; i++)
			read_value(st, i, &vals[i]);
		if (fn(ud, ncol, names, vals))
			break;
	}
	if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
		rc = sql_fail(s, rc, "sql");
		goto out;
	}
	rc = STORE_OK;
	/* sqlite3_changes keeps the count of the last DML: not ours if the
	 * total did not move (DDL, SELECT) */
	if (changes && sqlite3_total_changes64(s->db) != before)
		*changes = sqlite3_changes64(s->db);
out:
	free(names);
	free(vals);
	sqlite3_finalize(st);
	return rc;
}
