/*
 * store_backup: the state database as one file, for hypd backup and hypd
 * restore (docs/state.md). Pure C over SQLite: no Lua state.
 *
 * A backup is one SQLite file, mode 0600, in rollback-journal mode (no WAL
 * or SHM file beside it): a snapshot of <dir>/hypd.db taken with SQLite's
 * online backup API inside one read transaction. In WAL mode a reader never
 * blocks the writer, so a running hypd serve keeps working, and the copy is
 * the database as it was at one moment. The other files of the state
 * directory are not in it (secrets/ holds secrets, lock and skills/ are not
 * state): docs/state.md says why.
 *
 * Strings passed in are borrowed. Every function returns STORE_BACKUP_OK
 * (0) or a negative enum store_backup_code with the reason in err.
 */
#ifndef HYPD_STORE_BACKUP_H
#define HYPD_STORE_BACKUP_H

#include <stddef.h>

enum store_backup_code {
	STORE_BACKUP_OK = 0,
	STORE_BACKUP_EXISTS = -1,   /* the backup file exists and force was not given */
	STORE_BACKUP_INVALID = -2,  /* the file is not a state this hypd can use */
	STORE_BACKUP_MISSING = -3,  /* there is no state database, or no such file */
	STORE_BACKUP_INUSE = -4,    /* another process has the state database open */
	STORE_BACKUP_ERROR = -5,    /* SQLite or the file system failed */
};

/* What a state file holds, as its checks found it. */
typedef struct store_backup_info {
	int schema;            /* its PRAGMA user_version */
	long long operations;  /* the rows of its operations table */
	long long bytes;       /* its size in bytes */
	int kept;              /* restore: 1 when the old database was kept as hypd.db.before-restore */
} store_backup_info;

/*
 * Copies <dir>/hypd.db to dest: writes dest.tmp (0600), checks it as
 * store_backup_check does, then renames it to dest. An existing dest is
 * refused (EXISTS) unless force. Steps of 64 pages; costs one read of the
 * database and one check of the copy. *info describes the copy.
 */
int store_backup_to(const char *dir, const char *dest, int force, store_backup_info *info,
		    char *err, size_t errlen);

/*
 * Checks that path is a hypd state this binary can open: SQLite's
 * integrity_check says ok, it has the tables kv, operations and events, and
 * its schema version is 1 to store_schema_latest() (a newer one is INVALID,
 * naming both versions). Messages name the file as label. Reads the whole
 * file; changes nothing in it.
 */
int store_backup_check(const char *path, const char *label, store_backup_info *info,
		       char *err, size_t errlen);

/*
 * Replaces <dir>/hypd.db with a copy of file, after checking the copy. The
 * caller holds the state directory's lock (statelock.h). The old database
 * is first made one file (a checkpoint) and kept as <dir>/hypd.db.before-restore
 * (a hard link), then the checked copy is renamed over hypd.db: at every
 * moment hypd.db is either the old state or the new one. A state another
 * process still has open is refused (INUSE). A file with a -wal file
 * beside it is a live database, not a backup: INVALID. *info describes the
 * restored file.
 */
int store_backup_restore(const char *dir, const char *file, store_backup_info *info,
			 char *err, size_t errlen);

#endif
