/* test_store: the SQLite core of the store, without Lua. */
#include "store.h"
#include "tap.h"

#include <dirent.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static void rmtree(const char *path)
{
	struct dirent *e;
	struct stat sb;
	char sub[512];
	DIR *d;

	if (lstat(path, &sb))
		return;
	if (S_ISDIR(sb.st_mode) && (d = opendir(path))) {
		while ((e = readdir(d))) {
			if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", path, e->d_name);
			rmtree(sub);
		}
		closedir(d);
		rmdir(path);
	} else {
		unlink(path);
	}
}

/* Runs sql on a second connection and returns the first column as text. */
static char *side_query(const char *db, const char *sql)
{
	sqlite3 *h = NULL;
	sqlite3_stmt *st = NULL;
	char *out = NULL;

	if (sqlite3_open(db, &h) == SQLITE_OK &&
	    sqlite3_prepare_v2(h, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		out = strdup((const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
	sqlite3_close(h);
	return out;
}

static int streq_free(char *got, const char *want)
{
	int same = got && want && !strcmp(got, want);

	free(got);
	return same;
}

/* Collects "key=value;" for kv_list. */
struct buf {
	char s[1024];	/* the collected text */
	int n;		/* calls so far */
};

static int collect_kv(void *ud, const char *key, const char *value)
{
	struct buf *b = ud;
	size_t len = strlen(b->s);

	snprintf(b->s + len, sizeof(b->s) - len, "%s=%s;", key, value);
	b->n++;
	return 0;
}

static int collect_op(void *ud, const store_op *op)
{
	struct buf *b = ud;
	size_t len = strlen(b->s);

	snprintf(b->s + len, sizeof(b->s) - len, "%s;", op->id);
	b->n++;
	return 0;
}

static int collect_event(void *ud, const store_event *ev)
{
	struct buf *b = ud;
	size_t len = strlen(b->s);

	snprintf(b->s + len, sizeof(b->s) - len, "%lld:%s:%s:%s;",
		 (long long)ev->seq, ev->kind,
		 ev->operation_id ? ev->operation_id : "-", ev->data);
	b->n++;
	return 0;
}

static int collect_row(void *ud, int ncol, const char *const *names,
		       const store_value *vals)
{
	struct buf *b = ud;
	size_t len;
	int i;

	for (i = 0; i < ncol; i++) {
		len = strlen(b->s);
		switch (vals[i].type) {
		case STORE_T_INT:
			snprintf(b->s + len, sizeof(b->s) - len, "%s=i%lld,",
				 names[i], (long long)vals[i].i);
			break;
		case STORE_T_REAL:
			snprintf(b->s + len, sizeof(b->s) - len, "%s=r%g,",
				 names[i], vals[i].d);
			break;
		case STORE_T_TEXT:
		case STORE_T_BLOB:
			snprintf(b->s + len, sizeof(b->s) - len, "%s=s%.*s,",
				 names[i], (int)vals[i].len, vals[i].s);
			break;
		default:
			snprintf(b->s + len, sizeof(b->s) - len, "%s=nil,",
				 names[i]);
		}
	}
	len = strlen(b->s);
	snprintf(b->s + len, sizeof(b->s) - len, ";");
	b->n++;
	return 0;
}

static int stop_after_one(void *ud, const char *key, const char *value)
{
	(void)key;
	(void)value;
	++*(int *)ud;
	return 1;
}

static int stop_after_one_row(void *ud, int ncol, const char *const *names,
			      const store_value *vals)
{
	(void)ncol;
	(void)names;
	(void)vals;
	++*(int *)ud;
	return 1;
}

static void test_open(store **sp, const char *dir, const char *dbpath)
{
	char err[256] = "";
	struct stat sb;
	struct buf b = { "", 0 };
	int rc;

	rc = store_open(dir, sp, err, sizeof(err));
	ok(rc == STORE_OK && *sp, "opening creates missing parent "
	   "directories and the database (%s)", err);
	ok(stat(dir, &sb) == 0 && (sb.st_mode & 0777) == 0700,
	   "the store directory is private (mode 0700)");
	ok(streq_free(side_query(dbpath, "PRAGMA journal_mode"), "wal"),
	   "the database is in WAL mode");
	store_sql(*sp, "PRAGMA synchronous", NULL, 0, collect_row, &b, NULL);
	ok(!strcmp(b.s, "synchronous=i2,;"),
	   "writes are synchronous=FULL (got %s)", b.s);
	b.s[0] = '\0';
	store_sql(*sp, "PRAGMA foreign_keys", NULL, 0, collect_row, &b, NULL);
	ok(!strcmp(b.s, "foreign_keys=i1,;"), "foreign keys are enforced");
	ok(store_schema_version(*sp) == store_schema_latest() &&
	   store_schema_latest() >= 1,
	   "a new database is migrated to the latest schema version");
}

static void test_kv(store *s)
{
	struct buf b = { "", 0 };
	char *v = (char *)"junk";
	int stopped = 0;

	ok(store_kv_put(s, "alpha", "1", 10.0) == STORE_OK &&
	   store_kv_get(s, "alpha", &v) == STORE_OK && streq_free(v, "1"),
	   "a value put under a key is read back");
	ok(store_kv_put(s, "alpha", "{\"x\":2}", 11.0) == STORE_OK &&
	   store_kv_get(s, "alpha", &v) == STORE_OK &&
	   streq_free(v, "{\"x\":2}"),
	   "putting an existing key replaces its value");
	v = (char *)"junk";
	ok(store_kv_get(s, "missing", &v) == STORE_NOTFOUND && v == NULL,
	   "reading an absent key says NOTFOUND and gives NULL");
	ok(store_kv_delete(s, "alpha") == STORE_OK &&
	   store_kv_get(s, "alpha", &v) == STORE_NOTFOUND,
	   "a deleted key is gone");
	ok(store_kv_delete(s, "alpha") == STORE_NOTFOUND,
	   "deleting an absent key says NOTFOUND");

	store_kv_put(s, "a%b", "1", 1);
	store_kv_put(s, "a%c", "2", 1);
	store_kv_put(s, "axb", "3", 1);
	store_kv_put(s, "a_1", "4", 1);
	store_kv_put(s, "ab1", "5", 1);
	store_kv_put(s, "b", "6", 1);
	store_kv_put(s, "a\xff\xff", "7", 1);
	store_kv_put(s, "a\xff\xff" "z", "8", 1);
	store_kv_list(s, "a%", collect_kv, &b);
	ok(!strcmp(b.s, "a%b=1;a%c=2;"),
	   "a prefix with %% matches it literally, not as a wildcard (%s)",
	   b.s);
	b.s[0] = '\0';
	store_kv_list(s, "a_", collect_kv, &b);
	ok(!strcmp(b.s, "a_1=4;"),
	   "a prefix with _ matches it literally, not as one character (%s)",
	   b.s);
	b.s[0] = '\0';
	b.n = 0;
	store_kv_list(s, "a\xff\xff", collect_kv, &b);
	ok(b.n == 2, "a prefix ending in 0xff bytes still finds its keys");
	b.n = 0;
	store_kv_list(s, "", collect_kv, &b);
	ok(b.n == 8, "the empty prefix lists every key");
	b.s[0] = '\0';
	store_kv_list(s, "zz", collect_kv, &b);
	ok(b.s[0] == '\0', "a prefix nothing starts with lists nothing");
	store_kv_list(s, "", stop_after_one, &stopped);
	ok(stopped == 1, "a callback returning nonzero stops the listing");
}

static store_op op_named(const char *id, const char *tool,
			 const char *target, const char *status, double at)
{
	store_op op = { 0 };

	op.id = id;
	op.tool = tool;
	op.target = target;
	op.status = status;
	op.created_at = at;
	op.updated_at = at;
	return op;
}

static void test_ops(store *s)
{
	store_op op = op_named("op-1", "add_group", "cluster/a", "running",
			       100.0), got;
	store_op_patch patch = { 0 };
	store_op_filter f = { 0 };
	struct buf b = { "", 0 };
	int rc;

	op.caller = "agent";
	op.frontend = "mcp";
	op.phase = "validate";
	ok(store_op_insert(s, &op) == STORE_OK,
	   "an operation is inserted");
	ok(store_op_insert(s, &op) == STORE_EXISTS,
	   "inserting the same id again says EXISTS");
	op.tool = NULL;
	op.id = "op-x";
	ok(store_op_insert(s, &op) == STORE_MISUSE,
	   "an operation without a tool is refused");

	rc = store_op_get(s, "op-1", &got);
	ok(rc == STORE_OK && !strcmp(got.tool, "add_group") &&
	   !strcmp(got.target, "cluster/a") && !strcmp(got.params, "{}") &&
	   !strcmp(got.steps, "[]") && !strcmp(got.caller, "agent") &&
	   !strcmp(got.frontend, "mcp") && !strcmp(got.phase, "validate") &&
	   got.result == NULL && got.error == NULL &&
	   got.created_at == 100.0 && !got.has_finished_at,
	   "an inserted operation reads back with defaults {} and [] and "
	   "NULL for absent fields");
	store_op_free(&got);
	ok(got.id == NULL, "store_op_free leaves a zeroed record");

	patch.phase = "create";
	patch.steps = "[{\"name\":\"validate\"}]";
	ok(store_op_update(s, "op-1", &patch, 150.0) == STORE_OK,
	   "an operation is patched");
	rc = store_op_get(s, "op-1", &got);
	ok(rc == STORE_OK && !strcmp(got.phase, "create") &&
	   !strcmp(got.steps, "[{\"name\":\"validate\"}]") &&
	   !strcmp(got.status, "running") && !strcmp(got.caller, "agent") &&
	   !strcmp(got.target, "cluster/a") && got.created_at == 100.0 &&
	   got.updated_at == 150.0,
	   "a patch changes only its fields, and updated_at");
	store_op_free(&got);

	memset(&patch, 0, sizeof(patch));
	patch.status = "succeeded";
	patch.result = "{\"ok\":true}";
	patch.phase = STORE_CLEAR;
	patch.has_finished_at = 1;
	patch.finished_at = 0.0;
	store_op_update(s, "op-1", &patch, 160.0);
	rc = store_op_get(s, "op-1", &got);
	ok(rc == STORE_OK && got.phase == NULL &&
	   !strcmp(got.status, "succeeded") &&
	   !strcmp(got.result, "{\"ok\":true}") && got.has_finished_at &&
	   got.finished_at == 0.0,
	   "STORE_CLEAR sets a field to NULL; finished_at may be 0");
	store_op_free(&got);

	memset(&patch, 0, sizeof(patch));
	patch.status = STORE_CLEAR;
	ok(store_op_update(s, "op-1", &patch, 170.0) == STORE_MISUSE,
	   "clearing the status is refused");
	patch.status = "x";
	ok(store_op_update(s, "op-missing", &patch, 170.0) == STORE_NOTFOUND,
	   "patching an unknown operation says NOTFOUND");
	ok(store_op_get(s, "op-missing", &got) == STORE_NOTFOUND &&
	   got.id == NULL, "reading an unknown operation says NOTFOUND");

	op = op_named("op-2", "add_group", "cluster/b", "running", 200.0);
	store_op_insert(s, &op);
	op = op_named("op-3", "delete_cluster", "cluster/a", "running", 300.0);
	store_op_insert(s, &op);
	op = op_named("op-4", "add_group", "cluster/a", "failed", 300.0);
	store_op_insert(s, &op);

	store_op_list(s, NULL, collect_op, &b);
	ok(!strcmp(b.s, "op-4;op-3;op-2;op-1;"),
	   "operations list newest first, ties in reverse insertion (%s)",
	   b.s);
	b.s[0] = '\0';
	f.status = "running";
	store_op_list(s, &f, collect_op, &b);
	ok(!strcmp(b.s, "op-3;op-2;"), "operations filter by status (%s)",
	   b.s);
	b.s[0] = '\0';
	f.status = NULL;
	f.tool = "add_group";
	f.target = "cluster/a";
	store_op_list(s, &f, collect_op, &b);
	ok(!strcmp(b.s, "op-4;op-1;"),
	   "operations filter by tool and target (%s)", b.s);
	b.s[0] = '\0';
	f.tool = NULL;
	f.target = NULL;
	f.limit = 2;
	store_op_list(s, &f, collect_op, &b);
	ok(!strcmp(b.s, "op-4;op-3;"), "a limit keeps the newest (%s)", b.s);
}

static void test_events(store *s)
{
	struct buf b = { "", 0 };
	int64_t s1 = 0, s2 = 0, s3 = 0;

	ok(store_event_append(s, 1.0, "op.phase", "op-1", "{\"a\":1}",
			      &s1) == STORE_OK &&
	   store_event_append(s, 2.0, "host.start", NULL, "{}", &s2) ==
	   STORE_OK &&
	   store_event_append(s, 3.0, "op.done", "op-1", "[]", &s3) ==
	   STORE_OK,
	   "events are appended");
	ok(s1 > 0 && s2 > s1 && s3 > s2, "event sequence numbers increase");
	store_event_list(s, 0, 0, collect_event, &b);
	ok(b.n == 3 && strstr(b.s, ":host.start:-:{};"),
	   "all events list oldest first, without an operation as NULL");
	b.s[0] = '\0';
	b.n = 0;
	store_event_list(s, s1, 1, collect_event, &b);
	ok(b.n == 1 && strstr(b.s, ":host.start:"),
	   "events list after a sequence number, up to a limit (%s)", b.s);
}

static void test_tx(store *s)
{
	char *v = NULL;

	ok(store_begin(s) == STORE_OK && store_tx_depth(s) == 1,
	   "a transaction begins");
	store_kv_put(s, "tx", "1", 1);
	ok(store_rollback(s) == STORE_OK &&
	   store_kv_get(s, "tx", &v) == STORE_NOTFOUND,
	   "a rolled back write is gone");
	store_begin(s);
	store_kv_put(s, "tx", "outer", 1);
	store_begin(s);
	store_kv_put(s, "tx2", "inner", 1);
	ok(store_tx_depth(s) == 2, "a nested begin opens a savepoint");
	store_rollback(s);
	ok(store_commit(s) == STORE_OK && store_tx_depth(s) == 0 &&
	   store_kv_get(s, "tx", &v) == STORE_OK && streq_free(v, "outer") &&
	   store_kv_get(s, "tx2", &v) == STORE_NOTFOUND,
	   "rolling back a nested level keeps the outer writes");
	ok(store_commit(s) == STORE_MISUSE,
	   "commit outside a transaction is refused");
}

static void test_sql(store *s)
{
	store_value args[4] = {
		{ .type = STORE_T_TEXT, .s = "q1", .len = 2 },
		{ .type = STORE_T_TEXT, .s = "\"v\"", .len = 3 },
		{ .type = STORE_T_REAL, .d = 2.5 },
	};
	struct buf b = { "", 0 };
	int64_t changes = -1;

	ok(store_sql(s, "INSERT INTO kv(key, value, updated_at)"
		     " VALUES(?, ?, ?)", args, 3, NULL, NULL, &changes) ==
	   STORE_OK &&
	   changes == 1, "sql binds parameters and counts changes");
	args[0].type = STORE_T_INT;
	args[0].i = 7;
	args[1].type = STORE_T_NULL;
	ok(store_sql(s, "SELECT key, updated_at, ? AS n, ? AS z FROM kv"
		     " WHERE key = 'q1'", args, 2, collect_row, &b,
		     &changes) == STORE_OK && changes == 0 &&
	   !strcmp(b.s, "key=sq1,updated_at=r2.5,n=i7,z=nil,;"),
	   "sql rows carry names and typed values (%s)", b.s);
	ok(store_sql(s, "CREATE TABLE scratch(x)", NULL, 0, NULL, NULL,
		     &changes) == STORE_OK && changes == 0,
	   "sql counts no changes for DDL after an insert");
	ok(store_sql(s, "SELECT 1; DROP TABLE kv", NULL, 0, NULL, NULL,
		     NULL) == STORE_MISUSE,
	   "sql refuses a second statement");
	ok(store_sql(s, "  commit", NULL, 0, NULL, NULL, NULL) ==
	   STORE_MISUSE && store_sql(s, "savepoint x", NULL, 0, NULL, NULL,
				     NULL) == STORE_MISUSE,
	   "sql refuses transaction control (store_begin owns it)");
	ok(store_sql(s, "SELECT 1 AS \"end\"", NULL, 0, NULL, NULL, NULL) ==
	   STORE_OK, "sql allows a statement that only mentions END");
	ok(store_sql(s, "SELECT ?", NULL, 0, NULL, NULL, NULL) ==
	   STORE_MISUSE && strstr(store_errmsg(s), "parameters"),
	   "sql refuses a wrong number of parameters");
	ok(store_sql(s, "SELEC nonsense", NULL, 0, NULL, NULL, NULL) ==
	   STORE_MISUSE && strstr(store_errmsg(s), "syntax"),
	   "sql reports a syntax error as misuse (%s)", store_errmsg(s));
}

static void test_second_connection(store *s, const char *dir)
{
	char err[256] = "", *v = NULL;
	store *t = NULL;

	ok(store_open(dir, &t, err, sizeof(err)) == STORE_OK &&
	   store_kv_get(t, "tx", &v) == STORE_OK && streq_free(v, "outer"),
	   "a second connection opens the same store and sees its commits");
	if (t)
		store_kv_put(t, "from-t", "1", 1);
	ok(store_kv_get(s, "from-t", &v) == STORE_OK && streq_free(v, "1"),
	   "the first connection sees the second one's commits");
	store_close(t);
}

static void test_reopen(const char *dir, const char *dbpath)
{
	char err[256] = "";
	store *s = NULL;
	char *v = NULL;
	int rc;

	rc = store_open(dir, &s, err, sizeof(err));
	ok(rc == STORE_OK && store_schema_version(s) == store_schema_latest(),
	   "reopening keeps the schema version without re-running "
	   "migrations (%s)", err);
	ok(s && store_kv_get(s, "tx", &v) == STORE_OK &&
	   streq_free(v, "outer"), "reopening keeps the data");
	store_close(s);

	/* a re-run of migration 1 would recreate the table dropped here */
	free(side_query(dbpath, "DROP TABLE events"));
	s = NULL;
	rc = 0;
	store_open(dir, &s, err, sizeof(err));
	ok(s && store_sql(s, "SELECT 1 FROM sqlite_master WHERE name = "
			  "'events'", NULL, 0, stop_after_one_row, &rc,
			  NULL) == STORE_OK && rc == 0,
	   "reopening applies no migration that is already recorded");
	store_close(s);

	free(side_query(dbpath, "PRAGMA user_version = 999"));
	s = (store *)1;
	rc = store_open(dir, &s, err, sizeof(err));
	ok(rc != STORE_OK && s == NULL && strstr(err, "newer hypd") &&
	   strstr(err, "999"),
	   "a database from a newer hypd is refused (%s)", err);
	ok(streq_free(side_query(dbpath, "PRAGMA user_version"), "999"),
	   "refusing a newer database leaves it untouched");
}

static void test_fresh_and_bad(void)
{
	char dir[128], err[256] = "";
	store *s = NULL;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/old", root);
	mkdir(dir, 0700);
	snprintf(err, sizeof(err), "%s/old/hypd.db", root);
	free(side_query(err, "CREATE TABLE stray(x)"));
	ok(store_open(dir, &s, err, sizeof(err)) == STORE_OK &&
	   store_schema_version(s) == store_schema_latest(),
	   "a database at version 0 is migrated from the start");
	store_close(s);

	snprintf(dir, sizeof(dir), "%s/file", root);
	f = fopen(dir, "w");
	if (f)
		fclose(f);
	s = NULL;
	ok(store_open(dir, &s, err, sizeof(err)) != STORE_OK && !s &&
	   strstr(err, "not a directory"),
	   "a path that is a file is refused (%s)", err);
	ok(store_open("", &s, err, sizeof(err)) == STORE_MISUSE,
	   "an empty directory name is refused");
	store_close(NULL);
}

int main(void)
{
	char dir[128], dbpath[160];
	store *s = NULL;

	snprintf(root, sizeof(root), "/tmp/test_store.XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/state/nested", root);
	snprintf(dbpath, sizeof(dbpath), "%s/hypd.db", dir);

	test_open(&s, dir, dbpath);
	if (s) {
		test_kv(s);
		test_ops(s);
		test_events(s);
		test_tx(s);
		test_sql(s);
		test_second_connection(s, dir);
		store_close(s);
		test_reopen(dir, dbpath);
	}
	test_fresh_and_bad();
	rmtree(root);
	return tap_done();
}
