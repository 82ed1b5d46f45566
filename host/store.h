/*
 * store: the host's durable state in one SQLite database, dir/hypd.db.
 *
 * Journal mode WAL with synchronous=FULL: every write function returns only
 * after its transaction is committed to disk, so a phase written before a
 * mutation survives kill -9 and power loss. Inside store_begin/store_commit
 * the writes become durable at the outermost commit.
 *
 * The schema is a list of migration steps in store.c; PRAGMA user_version
 * counts the steps applied. Opening applies the missing ones, each in its
 * own transaction, and refuses a database written by a newer hypd.
 *
 * Ownership: strings passed in are borrowed for the call. Strings passed out
 * through a pointer (store_kv_get, store_op_get) are malloc'd and belong to
 * the caller. Strings handed to a callback live until the callback returns.
 * JSON columns (params, steps, result, error, data) are text to this layer.
 *
 * Errors: functions return STORE_OK (0) or a negative enum store_code and
 * keep a message for store_errmsg. One store is used by one thread at a time.
 */
#ifndef HYPD_STORE_H
#define HYPD_STORE_H

#include <stddef.h>
#include <stdint.h>

typedef struct store store;

enum store_code {
	STORE_OK = 0,
	STORE_NOTFOUND = -1,	/* no such key or operation */
	STORE_EXISTS = -2,	/* an operation with this id exists */
	STORE_ERROR = -3,	/* SQLite failed: disk full, corrupt, ... */
	STORE_BUSY = -4,	/* another connection held the lock for 5 s */
	STORE_MISUSE = -5,	/* bad SQL or arguments: a caller's bug */
};

/*
 * Passed as a patch field: set the column to NULL (target, caller, frontend,
 * phase, result, error). Compared by address.
 */
extern const char store_clear[];
#define STORE_CLEAR store_clear

/* ---- Lifetime ---- */

/*
 * Creates dir (mode 0700, with parents) when missing, opens dir/hypd.db and
 * migrates it. A new hypd.db is created with mode 0600 whatever the umask
 * (SQLite gives its WAL and SHM files the database's mode). On failure returns a code, *out = NULL, and a message in err.
 */
int store_open(const char *dir, store **out, char *err, size_t errlen);

/* Rolls back an open transaction, finalizes statements, closes. NULL is ok. */
void store_close(store *s);

/* The message of the last failed call on s (never NULL). */
const char *store_errmsg(const store *s);

/* The applied schema version (PRAGMA user_version). */
int store_schema_version(store *s);

/* The number of migration steps this binary knows. */
int store_schema_latest(void);

/*
 * The SQL of migration step i (0-based: it takes user_version from i to
 * i + 1), or NULL past the last. Static text. For the upgrade tests, which
 * build a state of an older schema with the first steps only.
 */
const char *store_migration_sql(int i);

/* The latest time written in the store (kv and operations updated_at,
 * events at) in *out, 0 when it is empty. */
int store_latest_time(store *s, double *out);

/* ---- Transactions ---- */

/*
 * BEGIN IMMEDIATE (takes the write lock now, so commit never meets BUSY).
 * Nested calls open savepoints; commit/rollback close the innermost level.
 */
int store_begin(store *s);
int store_commit(store *s);
int store_rollback(store *s);

/* Nesting depth of store_begin: 0 outside a transaction. */
int store_tx_depth(const store *s);

/* ---- Key-value ---- */

/* Inserts or replaces key with value (JSON text); updated_at = now. */
int store_kv_put(store *s, const char *key, const char *value, double now);

/* *value = malloc'd copy, or NULL and STORE_NOTFOUND when absent. */
int store_kv_get(store *s, const char *key, char **value);

/* STORE_NOTFOUND when key was absent (nothing changed). */
int store_kv_delete(store *s, const char *key);

/*
 * Calls fn for every key starting with prefix ("" or NULL = all), in byte
 * order.
 * The prefix is literal: '%' and '_' match only themselves. fn returns 0 to
 * go on, nonzero to stop (the list still returns STORE_OK).
 */
typedef int (*store_kv_fn)(void *ud, const char *key, const char *value);
int store_kv_list(store *s, const char *prefix, store_kv_fn fn, void *ud);

/* ---- Operations ---- */

typedef struct store_op {
	const char *id;		/* required: the operation id */
	const char *tool;	/* required: the tool's name */
	const char *target;	/* what it acts on ("cluster/x"), or NULL */
	const char *params;	/* JSON object; NULL inserts "{}" */
	const char *caller;	/* who asked (agent, user), or NULL */
	const char *frontend;	/* "mcp", "rest", "web", "cli", or NULL */
	const char *phase;	/* the last persisted step, or NULL */
	const char *status;	/* required: "running", "succeeded", ... */
	const char *steps;	/* JSON array of step records; NULL = "[]" */
	const char *result;	/* JSON, or NULL */
	const char *error;	/* JSON, or NULL */
	double created_at;	/* seconds since the epoch */
	double updated_at;	/* seconds since the epoch */
	double finished_at;	/* seconds since the epoch, if has_... */
	int has_finished_at;	/* nonzero: finished_at is set */
} store_op;

/* Only non-NULL fields change (STORE_CLEAR sets NULL where allowed). */
typedef struct store_op_patch {
	const char *target;	/* new target */
	const char *params;	/* new params JSON (not clearable) */
	const char *caller;	/* new caller */
	const char *frontend;	/* new frontend */
	const char *phase;	/* new phase */
	const char *status;	/* new status (not clearable) */
	const char *steps;	/* new steps JSON (not clearable) */
	const char *result;	/* new result JSON */
	const char *error;	/* new error JSON */
	double finished_at;	/* written if has_finished_at */
	int has_finished_at;	/* nonzero: write finished_at */
} store_op_patch;

/* NULL fields mean "any"; limit <= 0 means no limit. */
typedef struct store_op_filter {
	const char *status;	/* only this status */
	const char *tool;	/* only this tool */
	const char *target;	/* only this target */
	int limit;		/* at most this many rows */
} store_op_filter;

/* Inserts op as given (timestamps too). STORE_EXISTS if the id is taken. */
int store_op_insert(store *s, const store_op *op);

/* Applies patch and sets updated_at = now. STORE_NOTFOUND if no such id. */
int store_op_update(store *s, const char *id, const store_op_patch *patch,
		    double now);

/* Fills *out with malloc'd strings (free with store_op_free). */
int store_op_get(store *s, const char *id, store_op *out);

/* Frees the strings of an op filled by store_op_get and zeroes it. */
void store_op_free(store_op *op);

/* Calls fn per match, newest first (created_at, then insertion order). */
typedef int (*store_op_fn)(void *ud, const store_op *op);
int store_op_list(store *s, const store_op_filter *f, store_op_fn fn,
		  void *ud);

/* ---- Events: an append-only log ---- */

typedef struct store_event {
	int64_t seq;		/* increasing, never reused */
	double at;		/* seconds since the epoch */
	const char *kind;	/* "operation.phase", ... */
	const char *operation_id; /* or NULL */
	const char *data;	/* JSON */
} store_event;

/* Appends an event; *seq (may be NULL) receives its sequence number. */
int store_event_append(store *s, double at, const char *kind,
		       const char *operation_id, const char *data,
		       int64_t *seq);

/* Calls fn for events with seq > after_seq, oldest first; limit <= 0: all. */
typedef int (*store_event_fn)(void *ud, const store_event *ev);
int store_event_list(store *s, int64_t after_seq, int limit,
		     store_event_fn fn, void *ud);

/* ---- Generic SQL (for the Lua binding's query and exec) ---- */

enum store_type { STORE_T_NULL, STORE_T_INT, STORE_T_REAL, STORE_T_TEXT,
		  STORE_T_BLOB };

typedef struct store_value {
	int type;		/* enum store_type */
	int64_t i;		/* STORE_T_INT */
	double d;		/* STORE_T_REAL */
	const char *s;		/* STORE_T_TEXT, STORE_T_BLOB: bytes */
	size_t len;		/* length of s */
} store_value;

/*
 * Runs one SQL statement with args bound to ?1..?nargs. fn (may be NULL)
 * gets each row: ncol column names and values, valid during the call.
 * *changes (may be NULL) receives the rows the statement changed. Misuse
 * (STORE_MISUSE): SQL that does not compile, text after the first
 * statement, a wrong number of args, and BEGIN, COMMIT, ROLLBACK,
 * SAVEPOINT, RELEASE (use store_begin and friends).
 */
typedef int (*store_row_fn)(void *ud, int ncol, const char *const *names,
			    const store_value *vals);
int store_sql(store *s, const char *sql, const store_value *args, int nargs,
	      store_row_fn fn, void *ud, int64_t *changes);

/* ---- Lua binding (lua_store.c) ---- */

struct lua_State;

/* Opens module hypd.store (for luaL_requiref). */
int luaopen_hypd_store(struct lua_State *L);

/* Hands the process's store to the binding of L (NULL: none). Not owned. */
void lua_store_set(struct lua_State *L, store *s);

/* The binding's clock for timestamps; NULL restores wall-clock time. */
void lua_store_set_clock(double (*now)(void));

#endif
