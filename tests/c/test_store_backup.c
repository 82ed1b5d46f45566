/*
 * test_store_backup: the C core of hypd backup and hypd restore, without
 * Lua: a backup taken while a second connection holds the store open and
 * writes; a backup refuses an existing file; the checks refuse a newer, a
 * foreign and a damaged file; a restore keeps the old state, and refuses a
 * state another connection still has open, leaving it as it was.
 */
#include "store.h"
#include "store_backup.h"
#include "tap.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char root[64];

static int has_key(const char *dir, const char *key)
{
	char err[512], *v = NULL;
	store *s = NULL;
	int found;

	if (store_open(dir, &s, err, sizeof(err)) != STORE_OK)
		return -1;
	found = store_kv_get(s, key, &v) == STORE_OK;
	free(v);
	store_close(s);
	return found;
}

/* Writes bytes at offset of path. */
static int poke(const char *path, long offset, const void *bytes, size_t n)
{
	FILE *f = fopen(path, "r+b");
	int rc = f && fseek(f, offset, SEEK_SET) == 0 && fwrite(bytes, 1, n, f) == n ? 0 : -1;

	if (f)
		fclose(f);
	return rc;
}

static int copy(const char *from, const char *to)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
	return system(cmd);
}

static void test_backup(const char *dir, const char *file)
{
	char err[1024], taken[256];
	store_backup_info info;
	store *s = NULL;
	int rc;

	rc = store_open(dir, &s, err, sizeof(err));
	ok(rc == STORE_OK, "a store to back up (%s)", rc ? err : "open");
	if (!s)
		return;
	store_kv_put(s, "before", "1", 1);
	store_op_insert(s, &(store_op){ .id = "op-1", .tool = "t", .status = "running", .created_at = 1,
					.updated_at = 1 });
	/* the store stays open with a write of its own: the backup must not wait for it to close */
	rc = store_backup_to(dir, file, 0, &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_OK, "a backup is taken while the store is open (%s)", rc ? err : "taken");
	ok(info.schema == store_schema_latest() && info.operations == 1 && info.bytes > 0,
	   "it reports schema %d, 1 operation and its size (%d, %lld, %lld)", store_schema_latest(), info.schema,
	   info.operations, info.bytes);
	ok(store_kv_put(s, "after", "2", 2) == STORE_OK, "the store goes on writing after it");
	store_close(s);
	snprintf(taken, sizeof(taken), "%s-wal", file);
	ok(access(taken, F_OK) != 0, "the backup is one file, without a WAL beside it");
	rc = store_backup_to(dir, file, 0, &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_EXISTS && strstr(err, "--force"), "an existing file is refused without force (%s)", err);
	rc = store_backup_to(dir, file, 1, &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_OK, "and replaced with force (%s)", rc ? err : "replaced");
	rc = store_backup_to(root, taken, 0, &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_MISSING, "a directory without a database has nothing to back up (%s)", err);
}

static void test_checks(const char *file)
{
	char err[1024], newer[256], torn[256], foreign[256], want[64];
	unsigned char v[4] = { 0, 0, 0, (unsigned char)(store_schema_latest() + 1) };
	store_backup_info info;
	sqlite3 *db = NULL;
	int rc;

	rc = store_backup_check(file, "B", &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_OK, "a backup passes the checks (%s)", rc ? err : "ok");
	snprintf(newer, sizeof(newer), "%s/newer.db", root);
	copy(file, newer);
	poke(newer, 60, v, sizeof(v)); /* the header's user_version */
	rc = store_backup_check(newer, "N", &info, err, sizeof(err));
	snprintf(want, sizeof(want), "version %d but this hypd knows only versions up to %d", store_schema_latest() + 1,
		 store_schema_latest());
	ok(rc == STORE_BACKUP_INVALID && strstr(err, want), "a newer schema is refused naming both versions (%s)", err);
	snprintf(torn, sizeof(torn), "%s/torn.db", root);
	copy(file, torn);
	poke(torn, 4096 + 8, "\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377\377", 16);
	rc = store_backup_check(torn, "T", &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_INVALID, "a damaged page is refused (%s)", err);
	snprintf(foreign, sizeof(foreign), "%s/foreign.db", root);
	if (sqlite3_open(foreign, &db) == SQLITE_OK)
		sqlite3_exec(db, "CREATE TABLE kv(x); PRAGMA user_version = 1", NULL, NULL, NULL);
	sqlite3_close(db);
	rc = store_backup_check(foreign, "F", &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_INVALID && strstr(err, "not a hypd state"), "another program's database is refused (%s)",
	   err);
}

static void test_restore(const char *file)
{
	char dir[160], err[1024], path[256];
	store_backup_info info;
	sqlite3 *holder = NULL;
	struct stat a, b;
	int rc;

	snprintf(dir, sizeof(dir), "%s/target", root);
	ok(has_key(dir, "mine") == 0, "a second state directory, with a state of its own");
	{
		store *s = NULL;

		store_open(dir, &s, err, sizeof(err));
		store_kv_put(s, "mine", "1", 1);
		store_close(s);
	}
	snprintf(path, sizeof(path), "%s/hypd.db", dir);
	/* another connection with the database open: the restore must not pull it out from under it */
	sqlite3_open(path, &holder);
	sqlite3_exec(holder, "SELECT count(*) FROM kv", NULL, NULL, NULL);
	stat(path, &a);
	rc = store_backup_restore(dir, file, &info, err, sizeof(err));
	stat(path, &b);
	ok(rc == STORE_BACKUP_INUSE && strstr(err, "open"), "a state another connection has open is refused (%s)", err);
	ok(a.st_ino == b.st_ino, "and its database is the same file");
	sqlite3_close(holder);
	ok(has_key(dir, "mine") == 1 && has_key(dir, "before") == 0, "with its own rows");
	rc = store_backup_restore(dir, file, &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_OK && info.kept && info.operations == 1, "with no one else on it, it is restored (%s)",
	   rc ? err : "restored");
	ok(has_key(dir, "before") == 1 && has_key(dir, "mine") == 0, "the state is now the backup's");
	snprintf(path, sizeof(path), "%s/before", root);
	mkdir(path, 0700);
	snprintf(err, sizeof(err), "%s/hypd.db.before-restore", dir);
	snprintf(path, sizeof(path), "%s/before/hypd.db", root);
	copy(err, path);
	snprintf(path, sizeof(path), "%s/before", root);
	ok(has_key(path, "mine") == 1, "and the old one is kept as hypd.db.before-restore");
	snprintf(path, sizeof(path), "%s/newer.db", root);
	rc = store_backup_restore(dir, path, &info, err, sizeof(err));
	ok(rc == STORE_BACKUP_INVALID && has_key(dir, "before") == 1, "a newer backup is refused, the state kept (%s)",
	   err);
	snprintf(path, sizeof(path), "%s/hypd.db.restore", dir);
	ok(access(path, F_OK) != 0, "and its copy removed");
}

int main(void)
{
	char dir[128], file[160];

	snprintf(root, sizeof(root), "/tmp/test_store_backup.XXXXXX");
	if (!mkdtemp(root)) {
		perror("mkdtemp");
		return 1;
	}
	snprintf(dir, sizeof(dir), "%s/state", root);
	snprintf(file, sizeof(file), "%s/backup.db", root);
	test_backup(dir, file);
	test_checks(file);
	test_restore(file);
	if (!tap_failed) {
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
		if (system(cmd) != 0)
			fprintf(stderr, "# could not remove %s\n", root);
	}
	return tap_done();
}
