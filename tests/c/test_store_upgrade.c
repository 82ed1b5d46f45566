/*
 * test_store_upgrade: a state written with the predecessor schema (the
 * first N-1 migration steps only, user_version N-1) opens with this hypd,
 * keeps its data and ends at the latest version; a state one version newer
 * than this hypd knows is refused, naming both versions, and left as it was.
 */
#include "store.h"
#include "tap.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

/* Builds dir/hypd.db with SQLite alone: the first steps migrations, user_version = version, one row per table. */
static int build_state(const char *dir, int steps, int version)
{
	char path[256], sql[128];
	sqlite3 *db = NULL;
	int rc;

	snprintf(path, sizeof(path), "%s/hypd.db", dir);
	if (mkdir(dir, 0700) || sqlite3_open(path, &db) != SQLITE_OK)
		return -1;
	rc = 0;
	for (int i = 0; i < steps && !rc; i++)
		rc = sqlite3_exec(db, store_migration_sql(i), NULL, NULL, NULL);
	snprintf(sql, sizeof(sql), "PRAGMA user_version = %d", version);
	if (!rc)
		rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
	if (!rc)
		rc = sqlite3_exec(db,
			"INSERT INTO kv VALUES('clusters/active', '{\"name\":\"c1\"}', 10.5);"
			"INSERT INTO operations(id, tool, target, params, status, steps, created_at, updated_at)"
			" VALUES('op-0a1b', 'hyperpod_create', 'cluster/c1', '{\"x\":1}', 'running',"
			" '[{\"name\":\"vpc\"}]', 11, 12);"
			"INSERT INTO events(at, kind, operation_id, data)"
			" VALUES(12, 'operation.phase', 'op-0a1b', '{\"phase\":\"vpc\"}');",
			NULL, NULL, NULL);
	sqlite3_close(db);
	return rc;
}

/* The bytes of path, malloc'd, in *len; NULL when it cannot be read. */
static char *slurp(const char *path, long *len)
{
	FILE *f = fopen(path, "rb");
	char *b = NULL;

	if (f && fseek(f, 0, SEEK_END) == 0 && (*len = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (b = malloc((size_t)*len + 1)) && fread(b, 1, (size_t)*len, f) != (size_t)*len) {
		free(b);
		b = NULL;
	}
	if (f)
		fclose(f);
	return b;
}

static int count_events(void *ud, const store_event *ev)
{
	int *n = ud;

	*n += !strcmp(ev->kind, "operation.phase") && ev->operation_id && !strcmp(ev->operation_id, "op-0a1b");
	return 0;
}

/* Counts the rows of sql on s (its first column). */
static int count_rows(void *ud, int ncol, const char *const *names, const store_value *vals)
{
	(void)ncol;
	(void)names;
	(void)vals;
	++*(int *)ud;
	return 0;
}

static void test_upgrade(void)
{
	char dir[128], err[512];
	int latest = store_schema_latest(), events = 0, indexes = 0, rc;
	store *s = NULL;
	store_op op = { 0 };
	char *v = NULL;

	snprintf(dir, sizeof(dir), "%s/old", root);
	ok(latest >= 2, "this hypd has a predecessor schema to upgrade from (latest %d)", latest);
	ok(build_state(dir, latest - 1, latest - 1) == 0, "a state of schema version %d is built from the first %d"
	   " migration steps", latest - 1, latest - 1);
	rc = store_open(dir, &s, err, sizeof(err));
	ok(rc == STORE_OK, "this hypd opens it (%s)", rc == STORE_OK ? "migrated" : err);
	if (!s)
		return;
	ok(store_schema_version(s) == latest, "its schema is now version %d (%d)", latest, store_schema_version(s));
	rc = store_kv_get(s, "clusters/active", &v);
	ok(rc == STORE_OK && v && !strcmp(v, "{\"name\":\"c1\"}"), "its key-value rows survive (%s)", v ? v : "none");
	ok(store_op_get(s, "op-0a1b", &op) == STORE_OK && !strcmp(op.tool, "hyperpod_create") &&
	   !strcmp(op.status, "running") && !strcmp(op.params, "{\"x\":1}") && op.created_at == 11,
	   "its operations survive with their fields");
	rc = store_event_list(s, 0, 0, count_events, &events);
	ok(rc == STORE_OK && events == 1, "its events survive (%d)", events);
	ok(store_sql(s, "SELECT name FROM sqlite_schema WHERE type = 'index' AND name = 'events_operation'", NULL, 0,
		     count_rows, &indexes, NULL) == STORE_OK && indexes == 1,
	   "the last step's index now exists");
	ok(store_op_insert(s, &(store_op){ .id = "op-new", .tool = "t", .status = "running", .created_at = 20,
					    .updated_at = 20 }) == STORE_OK, "it takes new operations");
	free(v);
	store_op_free(&op);
	store_close(s);
}

static void test_newer_refused(void)
{
	char dir[128], path[160], err[512], want[64], want2[64];
	int latest = store_schema_latest();
	store *s = NULL;
	long before_len = -1, after_len = -2;
	char *before, *after;
	struct stat sb;

	snprintf(dir, sizeof(dir), "%s/new", root);
	snprintf(path, sizeof(path), "%s/hypd.db", dir);
	ok(build_state(dir, latest, latest + 1) == 0, "a state of schema version %d is built", latest + 1);
	before = slurp(path, &before_len);
	ok(store_open(dir, &s, err, sizeof(err)) != STORE_OK && s == NULL, "this hypd refuses to open it");
	snprintf(want, sizeof(want), "schema version %d", latest + 1);
	snprintf(want2, sizeof(want2), "knows only %d", latest);
	ok(strstr(err, want) && strstr(err, want2) && strstr(err, "newer hypd"),
	   "the refusal names both versions: %s", err);
	after = slurp(path, &after_len);
	ok(before && after && before_len == after_len && !memcmp(before, after, (size_t)before_len),
	   "the database file is byte for byte what it was (%ld bytes, then %ld)", before_len, after_len);
	snprintf(path, sizeof(path), "%s/hypd.db-wal", dir);
	ok(stat(path, &sb) != 0 || sb.st_size == 0, "and no write waits in a WAL file");
	free(before);
	free(after);
}

int main(void)
{
	snprintf(root, sizeof(root), "/tmp/test_store_upgrade.XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	test_upgrade();
	test_newer_refused();
	if (!tap_failed) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd) != 0)
			fprintf(stderr, "# could not remove %s\n", root);
	}
	return tap_done();
}
