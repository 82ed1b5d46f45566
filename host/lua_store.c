/*
 * hypd.store: the Lua binding of the store (see store.h for the core).
 *
 *   get(key) -> value|nil            put(key, value) -> true
 *   delete(key) -> existed           list([prefix]) -> {key = value}
 *   op_create(t) -> true             op_update(id, patch) -> true
 *   op_get(id) -> op|nil             op_list([filter]) -> {op, ...}
 *   event(kind, op_id, data) -> seq  events([after, limit]) -> {ev, ...}
 *   query(sql, ...) -> {row, ...}    exec(sql, ...) -> changes
 *   transaction(fn) -> fn's results  schema_version() -> n
 *
 * Values are stored as JSON text (hj_encode / hj_decode_bytes: any bytes). In an op_update
 * patch, json.null clears a field (SQL NULL). Misuse raises; failures of
 * the world return nil, err with err.code "STORE" ("EXISTS" for a taken
 * operation id, "NOT_FOUND" for op_update of an unknown id) and
 * err.retryable = true when the database was busy.
 *
 * C memory is never held across a raise: strings malloc'd by the core or by
 * hj_encode belong to a holder userdata whose __gc frees them, and rows of
 * a listing are pushed under lua_pcall so that a memory error cannot jump
 * over the core's cleanup.
 */
#include "json.h"
#include "luax.h"
#include "store.h"

#include <lauxlib.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define HOLDER_MT "hypd.store.holder"

static const char store_key = 's';	/* registry key of the store */
static double (*clock_now)(void);	/* set by the host, or NULL */

/* C memory owned by the Lua GC until the binding function is done. */
struct holder {
	char *json[4];		/* JSON texts from hj_encode */
	char *text;		/* a value from store_kv_get */
	store_op op;		/* an operation from store_op_get */
};

/* A listing in progress: the core calls back, rows go into a Lua table. */
struct rows {
	lua_State *L;		/* the state being filled */
	int table;		/* absolute index of the result table */
	int n;			/* rows appended so far */
	void (*fill)(lua_State *L, struct rows *r); /* pushes r->row into 1 */
	const void *row;	/* the row of the current callback */
	int ncol;		/* query rows: number of columns */
	const char *const *names; /* query rows: column names */
	const char *key;	/* kv rows: the key */
	int status;		/* lua_pcall status; an error waits on top */
	char err[256];		/* why a stored text did not decode */
};

static double wall_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double now(void)
{
	return clock_now ? clock_now() : wall_now();
}

static store *check_store(lua_State *L)
{
	store *s;

	lua_rawgetp(L, LUA_REGISTRYINDEX, &store_key);
	s = lua_touserdata(L, -1);
	lua_pop(L, 1);
	if (!s)
		hx_raise(L, "STATE", "no store is open");
	return s;
}

static const char *check_key(lua_State *L, int arg)
{
	size_t len;
	const char *key = luaL_checklstring(L, arg, &len);

	luaL_argcheck(L, strlen(key) == len, arg, "contains a NUL byte");
	return key;
}

static void holder_free(struct holder *h)
{
	size_t i;

	for (i = 0; i < sizeof(h->json) / sizeof(h->json[0]); i++) {
		free(h->json[i]);
		h->json[i] = NULL;
	}
	free(h->text);
	h->text = NULL;
	store_op_free(&h->op);
}

static int holder_gc(lua_State *L)
{
	holder_free(luaL_checkudata(L, 1, HOLDER_MT));
	return 0;
}

static struct holder *new_holder(lua_State *L)
{
	struct holder *h = lua_newuserdatauv(L, sizeof(*h), 0);

	memset(h, 0, sizeof(*h));
	luaL_setmetatable(L, HOLDER_MT);
	return h;
}

/* Encodes the value at idx into h->json[slot]; raises if it cannot. */
static const char *encode(lua_State *L, int idx, struct holder *h, int slot,
			  const char *what)
{
	char err[200];

	h->json[slot] = hj_encode(L, idx, 0, err, sizeof(err));
	if (!h->json[slot])
		luaL_error(L, "hypd.store: %s cannot be stored as JSON: %s",
			   what, err);
	return h->json[slot];
}

/* Pushes the value of a JSON text; on failure pushes nothing. */
static int decode(lua_State *L, const char *json, char *err, size_t errlen)
{
	int top = lua_gettop(L);

	if (hj_decode_bytes(L, json, strlen(json), err, errlen) == 0)
		return 0;
	lua_settop(L, top);
	return -1;
}

/* Returns nil, err for a failed core call; raises for misuse. */
static int fail_msg(lua_State *L, int rc, const char *msg)
{
	const char *code = "STORE";

	if (rc == STORE_MISUSE)
		return luaL_error(L, "hypd.store: %s", msg);
	if (rc == STORE_EXISTS)
		code = "EXISTS";
	else if (rc == STORE_NOTFOUND)
		code = "NOT_FOUND";
	hx_fail(L, code, "%s", msg);
	if (rc == STORE_BUSY) {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, "retryable");
	}
	return 2;
}

static int push_fail(lua_State *L, store *s, int rc)
{
	return fail_msg(L, rc, store_errmsg(s));
}

/* Raises unless every key of the table at idx is one of names. */
static void check_fields(lua_State *L, int idx, const char *fn,
			 const char *const *names)
{
	const char *const *n;

	lua_pushnil(L);
	while (lua_next(L, idx)) {
		lua_pop(L, 1);
		for (n = names; *n; n++) {
			if (lua_type(L, -1) == LUA_TSTRING &&
			    !strcmp(lua_tostring(L, -1), *n))
				break;
		}
		if (!*n)
			luaL_error(L, "hypd.store.%s: unknown field '%s'", fn,
				   luaL_tolstring(L, -1, NULL));
	}
}

enum { OPTIONAL, REQUIRED, CLEARABLE };

/*
 * The string field name of the table at idx, or NULL when absent (or
 * STORE_CLEAR for json.null when the mode is CLEARABLE). The pointer stays
 * valid while the table holds the string.
 */
static const char *opt_field(lua_State *L, int idx, const char *fn,
			     const char *name, int mode)
{
	const char *v = NULL;
	int t;

	lua_pushstring(L, name);
	t = lua_rawget(L, idx);
	if (t == LUA_TSTRING)
		v = lua_tostring(L, -1);
	else if (mode == CLEARABLE && hj_isnull(L, -1))
		v = STORE_CLEAR;
	else if (t != LUA_TNIL || mode == REQUIRED)
		luaL_error(L, "hypd.store.%s: field '%s' must be a string%s",
			   fn, name, mode == REQUIRED ? " (required)" : "");
	lua_pop(L, 1);
	return v;
}

/*
 * Encodes field name of the table at idx, or returns NULL when absent.
 * With array, an empty table without a mark is "[]", not "{}".
 */
static const char *json_field(lua_State *L, int idx, const char *name,
			      struct holder *h, int slot, int array)
{
	const char *v = NULL;

	lua_pushstring(L, name);
	if (lua_rawget(L, idx) == LUA_TNIL) {
		lua_pop(L, 1);
		return NULL;
	}
	if (array && lua_type(L, -1) == LUA_TTABLE) {
		if (lua_getmetatable(L, -1)) {
			lua_pop(L, 1);		/* marked: the mark decides */
		} else {
			lua_pushnil(L);
			if (!lua_next(L, -2))
				v = "[]";
			else
				lua_pop(L, 2);
		}
	}
	if (!v)
		v = encode(L, -1, h, slot, name);
	lua_pop(L, 1);
	return v;
}

/* Sets field name of the table on top to the value of a JSON text. */
static int set_json(lua_State *L, const char *json, const char *name,
		    struct rows *r, const char *id)
{
	char why[160];

	if (!json)
		return 0;
	if (decode(L, json, why, sizeof(why))) {
		snprintf(r->err, sizeof(r->err), "operation %s: stored %s is "
			 "not JSON: %s", id, name, why);
		return -1;
	}
	lua_setfield(L, -2, name);
	return 0;
}

static void set_string(lua_State *L, const char *v, const char *name)
{
	if (!v)
		return;
	lua_pushstring(L, v);
	lua_setfield(L, -2, name);
}

static void set_number(lua_State *L, double v, const char *name)
{
	lua_pushnumber(L, v);
	lua_setfield(L, -2, name);
}

/* Pushes an operation as a table; on a decode failure pushes nothing. */
static int push_op(lua_State *L, const store_op *op, struct rows *r)
{
	int top = lua_gettop(L);

	lua_createtable(L, 0, 14);
	set_string(L, op->id, "id");
	set_string(L, op->tool, "tool");
	set_string(L, op->target, "target");
	set_string(L, op->caller, "caller");
	set_string(L, op->frontend, "frontend");
	set_string(L, op->phase, "phase");
	set_string(L, op->status, "status");
	set_number(L, op->created_at, "created_at");
	set_number(L, op->updated_at, "updated_at");
	if (op->has_finished_at)
		set_number(L, op->finished_at, "finished_at");
	if (set_json(L, op->params, "params", r, op->id) ||
	    set_json(L, op->steps, "steps", r, op->id) ||
	    set_json(L, op->result, "result", r, op->id) ||
	    set_json(L, op->error, "error", r, op->id)) {
		lua_settop(L, top);
		return -1;
	}
	return 0;
}

/* ---- Listings: rows pushed under lua_pcall ---- */

static int fill_protected(lua_State *L)
{
	struct rows *r = lua_touserdata(L, 2);

	r->fill(L, r);
	return 0;
}

/* Adds r->row to the result table; nonzero stops the core's listing. */
static int add_row(struct rows *r)
{
	lua_State *L = r->L;

	lua_pushcfunction(L, fill_protected);
	lua_pushvalue(L, r->table);
	lua_pushlightuserdata(L, r);
	r->status = lua_pcall(L, 2, 0, 0);
	return r->status != LUA_OK || r->err[0];
}

static void rows_init(lua_State *L, struct rows *r,
		      void (*fill)(lua_State *L, struct rows *r))
{
	memset(r, 0, sizeof(*r));
	luaL_checkstack(L, 8, NULL);
	r->L = L;
	r->fill = fill;
	lua_newtable(L);
	r->table = lua_gettop(L);
}

/* After the core's listing returned rc: the table, nil + err, or a raise. */
static int rows_finish(lua_State *L, struct rows *r, store *s, int rc)
{
	if (r->status != LUA_OK)
		return lua_error(L);
	if (r->err[0])
		return hx_fail(L, "STORE", "%s", r->err);
	if (rc)
		return push_fail(L, s, rc);
	lua_settop(L, r->table);
	return 1;
}

/* ---- Key-value ---- */

static int l_get(lua_State *L)
{
	store *s = check_store(L);
	const char *key = check_key(L, 1);
	struct holder *h = new_holder(L);
	char err[160];
	int rc;

	rc = store_kv_get(s, key, &h->text);
	if (rc == STORE_NOTFOUND) {
		lua_pushnil(L);
		return 1;
	}
	if (rc)
		return push_fail(L, s, rc);
	rc = decode(L, h->text, err, sizeof(err));
	holder_free(h);
	if (rc)
		return hx_fail(L, "STORE", "key %s: stored value is not JSON: "
			       "%s", key, err);
	return 1;
}

static int l_put(lua_State *L)
{
	store *s = check_store(L);
	const char *key = check_key(L, 1);
	struct holder *h;
	int rc;

	luaL_argexpected(L, !lua_isnoneornil(L, 2), 2, "value");
	h = new_holder(L);
	encode(L, 2, h, 0, "the value");
	rc = store_kv_put(s, key, h->json[0], now());
	holder_free(h);
	if (rc)
		return push_fail(L, s, rc);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_delete(lua_State *L)
{
	store *s = check_store(L);
	const char *key = check_key(L, 1);
	int rc = store_kv_delete(s, key);

	if (rc && rc != STORE_NOTFOUND)
		return push_fail(L, s, rc);
	lua_pushboolean(L, rc == STORE_OK);
	return 1;
}

static void fill_kv(lua_State *L, struct rows *r)
{
	char why[160];

	if (decode(L, r->row, why, sizeof(why))) {
		snprintf(r->err, sizeof(r->err), "key %s: stored value is not "
			 "JSON: %s", r->key, why);
		return;
	}
	lua_setfield(L, 1, r->key);
}

static int kv_row(void *ud, const char *key, const char *value)
{
	struct rows *r = ud;

	r->key = key;
	r->row = value;
	return add_row(r);
}

static int l_list(lua_State *L)
{
	store *s = check_store(L);
	const char *prefix = luaL_optstring(L, 1, "");
	struct rows r;

	rows_init(L, &r, fill_kv);
	return rows_finish(L, &r, s, store_kv_list(s, prefix, kv_row, &r));
}

/* ---- Operations ---- */

static const char *const create_fields[] = { "id", "tool", "target",
	"params", "caller", "frontend", "phase", "status", "steps", NULL };

static const char *const patch_fields[] = { "target", "params", "caller",
	"frontend", "phase", "status", "steps", "result", "error",
	"finished_at", NULL };

static const char *const filter_fields[] = { "status", "tool", "target",
	"limit", NULL };

static int l_op_create(lua_State *L)
{
	store *s = check_store(L);
	store_op op = { 0 };
	struct holder *h;
	int rc;

	luaL_checktype(L, 1, LUA_TTABLE);
	check_fields(L, 1, "op_create", create_fields);
	op.id = opt_field(L, 1, "op_create", "id", REQUIRED);
	op.tool = opt_field(L, 1, "op_create", "tool", REQUIRED);
	op.status = opt_field(L, 1, "op_create", "status", REQUIRED);
	op.target = opt_field(L, 1, "op_create", "target", OPTIONAL);
	op.caller = opt_field(L, 1, "op_create", "caller", OPTIONAL);
	op.frontend = opt_field(L, 1, "op_create", "frontend", OPTIONAL);
	op.phase = opt_field(L, 1, "op_create", "phase", OPTIONAL);
	h = new_holder(L);
	op.params = json_field(L, 1, "params", h, 0, 0);
	op.steps = json_field(L, 1, "steps", h, 1, 1);
	op.created_at = op.updated_at = now();
	rc = store_op_insert(s, &op);
	holder_free(h);
	if (rc)
		return push_fail(L, s, rc);
	lua_pushboolean(L, 1);
	return 1;
}

/* result and error encoded as JSON null are cleared to SQL NULL. */
static const char *nullable(const char *json)
{
	return json && !strcmp(json, "null") ? STORE_CLEAR : json;
}

static int l_op_update(lua_State *L)
{
	store *s = check_store(L);
	const char *id = luaL_checkstring(L, 1);
	store_op_patch p = { 0 };
	struct holder *h;
	double t = now();
	int rc;

	luaL_checktype(L, 2, LUA_TTABLE);
	check_fields(L, 2, "op_update", patch_fields);
	p.target = opt_field(L, 2, "op_update", "target", CLEARABLE);
	p.caller = opt_field(L, 2, "op_update", "caller", CLEARABLE);
	p.frontend = opt_field(L, 2, "op_update", "frontend", CLEARABLE);
	p.phase = opt_field(L, 2, "op_update", "phase", CLEARABLE);
	p.status = opt_field(L, 2, "op_update", "status", CLEARABLE);
	lua_pushliteral(L, "finished_at");
	switch (lua_rawget(L, 2)) {
	case LUA_TNIL:
		break;
	case LUA_TBOOLEAN:
		luaL_argcheck(L, lua_toboolean(L, -1), 2,
			      "finished_at must be a number or true");
		p.has_finished_at = 1;
		p.finished_at = t;
		break;
	default:
		luaL_argcheck(L, lua_type(L, -1) == LUA_TNUMBER, 2,
			      "finished_at must be a number or true");
		p.has_finished_at = 1;
		p.finished_at = lua_tonumber(L, -1);
	}
	lua_pop(L, 1);
	h = new_holder(L);
	p.params = json_field(L, 2, "params", h, 0, 0);
	p.steps = json_field(L, 2, "steps", h, 1, 1);
	p.result = nullable(json_field(L, 2, "result", h, 2, 0));
	p.error = nullable(json_field(L, 2, "error", h, 3, 0));
	rc = store_op_update(s, id, &p, t);
	holder_free(h);
	if (rc)
		return push_fail(L, s, rc);
	lua_pushboolean(L, 1);
	return 1;
}

static int l_op_get(lua_State *L)
{
	store *s = check_store(L);
	const char *id = luaL_checkstring(L, 1);
	struct holder *h = new_holder(L);
	struct rows r;
	int rc;

	memset(&r, 0, sizeof(r));
	rc = store_op_get(s, id, &h->op);
	if (rc == STORE_NOTFOUND) {
		lua_pushnil(L);
		return 1;
	}
	if (rc)
		return push_fail(L, s, rc);
	rc = push_op(L, &h->op, &r);
	holder_free(h);
	if (rc)
		return hx_fail(L, "STORE", "%s", r.err);
	return 1;
}

static void fill_op(lua_State *L, struct rows *r)
{
	if (push_op(L, r->row, r) == 0)
		lua_rawseti(L, 1, ++r->n);
}

static int op_row(void *ud, const store_op *op)
{
	struct rows *r = ud;

	r->row = op;
	return add_row(r);
}

static int l_op_list(lua_State *L)
{
	store *s = check_store(L);
	store_op_filter f = { 0 };
	lua_Integer limit;
	struct rows r;

	if (!lua_isnoneornil(L, 1)) {
		luaL_checktype(L, 1, LUA_TTABLE);
		check_fields(L, 1, "op_list", filter_fields);
		f.status = opt_field(L, 1, "op_list", "status", OPTIONAL);
		f.tool = opt_field(L, 1, "op_list", "tool", OPTIONAL);
		f.target = opt_field(L, 1, "op_list", "target", OPTIONAL);
		lua_pushliteral(L, "limit");
		if (lua_rawget(L, 1) != LUA_TNIL) {
			if (!lua_isinteger(L, -1))
				luaL_error(L, "hypd.store.op_list: field "
					   "'limit' must be an integer");
			limit = lua_tointeger(L, -1);
			f.limit = limit > INT_MAX ? INT_MAX
				: limit < 0 ? 0 : (int)limit;
		}
		lua_pop(L, 1);
	}
	rows_init(L, &r, fill_op);
	return rows_finish(L, &r, s, store_op_list(s, &f, op_row, &r));
}

/* ---- Events ---- */

static int l_event(lua_State *L)
{
	store *s = check_store(L);
	const char *kind = luaL_checkstring(L, 1);
	const char *op_id = luaL_optstring(L, 2, NULL);
	const char *data = "{}";
	struct holder *h = new_holder(L);
	int64_t seq = 0;
	int rc;

	if (!lua_isnoneornil(L, 3))
		data = encode(L, 3, h, 0, "the event data");
	rc = store_event_append(s, now(), kind, op_id, data, &seq);
	holder_free(h);
	if (rc)
		return push_fail(L, s, rc);
	lua_pushinteger(L, (lua_Integer)seq);
	return 1;
}

static void fill_event(lua_State *L, struct rows *r)
{
	const store_event *ev = r->row;
	char why[160];

	lua_createtable(L, 0, 5);
	lua_pushinteger(L, (lua_Integer)ev->seq);
	lua_setfield(L, -2, "seq");
	set_number(L, ev->at, "at");
	set_string(L, ev->kind, "kind");
	set_string(L, ev->operation_id, "operation_id");
	if (decode(L, ev->data, why, sizeof(why))) {
		snprintf(r->err, sizeof(r->err), "event %lld: stored data is "
			 "not JSON: %s", (long long)ev->seq, why);
		return;
	}
	lua_setfield(L, -2, "data");
	lua_rawseti(L, 1, ++r->n);
}

static int event_row(void *ud, const store_event *ev)
{
	struct rows *r = ud;

	r->row = ev;
	return add_row(r);
}

static int l_events(lua_State *L)
{
	store *s = check_store(L);
	lua_Integer after = luaL_optinteger(L, 1, 0);
	lua_Integer limit = luaL_optinteger(L, 2, 0);
	struct rows r;

	limit = limit > INT_MAX ? INT_MAX : limit < 0 ? 0 : limit;
	rows_init(L, &r, fill_event);
	return rows_finish(L, &r, s, store_event_list(s, after, (int)limit,
						      event_row, &r));
}

/* ---- Generic SQL ---- */

static void fill_sql(lua_State *L, struct rows *r)
{
	const store_value *v = r->row;
	int i;

	lua_createtable(L, 0, r->ncol);
	for (i = 0; i < r->ncol; i++) {
		switch (v[i].type) {
		case STORE_T_INT:
			lua_pushinteger(L, (lua_Integer)v[i].i);
			break;
		case STORE_T_REAL:
			lua_pushnumber(L, v[i].d);
			break;
		case STORE_T_TEXT:
		case STORE_T_BLOB:
			lua_pushlstring(L, v[i].s, v[i].len);
			break;
		default:
			continue;	/* NULL: the field is absent */
		}
		lua_setfield(L, -2, r->names[i]);
	}
	lua_rawseti(L, 1, ++r->n);
}

static int sql_row(void *ud, int ncol, const char *const *names,
		   const store_value *vals)
{
	struct rows *r = ud;

	r->ncol = ncol;
	r->names = names;
	r->row = vals;
	return add_row(r);
}

/* Binds arguments 2..top; the array is a userdata, so the GC owns it. */
static store_value *check_args(lua_State *L, int *nargs)
{
	int i, n = lua_gettop(L) - 1;
	store_value *v;

	v = lua_newuserdatauv(L, sizeof(*v) * (size_t)(n > 0 ? n : 1), 0);
	memset(v, 0, sizeof(*v) * (size_t)(n > 0 ? n : 1));
	for (i = 0; i < n; i++) {
		switch (lua_type(L, i + 2)) {
		case LUA_TNIL:
			v[i].type = STORE_T_NULL;
			break;
		case LUA_TBOOLEAN:
			v[i].type = STORE_T_INT;
			v[i].i = lua_toboolean(L, i + 2);
			break;
		case LUA_TNUMBER:
			if (lua_isinteger(L, i + 2)) {
				v[i].type = STORE_T_INT;
				v[i].i = (int64_t)lua_tointeger(L, i + 2);
			} else {
				v[i].type = STORE_T_REAL;
				v[i].d = (double)lua_tonumber(L, i + 2);
			}
			break;
		case LUA_TSTRING:
			v[i].type = STORE_T_TEXT;
			v[i].s = lua_tolstring(L, i + 2, &v[i].len);
			break;
		default:
			luaL_typeerror(L, i + 2,
				       "nil, boolean, number or string");
		}
	}
	*nargs = n;
	return v;
}

static int l_query(lua_State *L)
{
	store *s = check_store(L);
	const char *sql = luaL_checkstring(L, 1);
	int nargs;
	store_value *args = check_args(L, &nargs);
	struct rows r;

	rows_init(L, &r, fill_sql);
	return rows_finish(L, &r, s, store_sql(s, sql, args, nargs, sql_row,
					       &r, NULL));
}

static int l_exec(lua_State *L)
{
	store *s = check_store(L);
	const char *sql = luaL_checkstring(L, 1);
	int nargs, rc;
	store_value *args = check_args(L, &nargs);
	int64_t changes = 0;

	rc = store_sql(s, sql, args, nargs, NULL, NULL, &changes);
	if (rc)
		return push_fail(L, s, rc);
	lua_pushinteger(L, (lua_Integer)changes);
	return 1;
}

/* ---- Transactions and schema ---- */

/* Protected: calls fn (index 1) through hx_pcall, raising its error. */
static int tx_body(lua_State *L)
{
	if (hx_pcall(L, 0, LUA_MULTRET) != LUA_OK)
		return lua_error(L);
	return lua_gettop(L);
}

/*
 * Whatever fn or hx_pcall's own error handling raises (memory errors too)
 * is caught by lua_pcall, so the transaction is always closed before the
 * error goes on.
 */
static int l_transaction(lua_State *L)
{
	store *s = check_store(L);
	char msg[256];
	int rc;

	luaL_checktype(L, 1, LUA_TFUNCTION);
	lua_settop(L, 1);
	rc = store_begin(s);
	if (rc)
		return push_fail(L, s, rc);
	lua_pushcfunction(L, tx_body);
	lua_insert(L, 1);
	if (lua_pcall(L, 1, LUA_MULTRET, 0) != LUA_OK) {
		store_rollback(s);
		return lua_error(L);
	}
	rc = store_commit(s);
	if (rc) {
		snprintf(msg, sizeof(msg), "%s", store_errmsg(s));
		store_rollback(s);
		return fail_msg(L, rc, msg);
	}
	return lua_gettop(L);
}

static int l_schema_version(lua_State *L)
{
	store *s = check_store(L);

	lua_pushinteger(L, store_schema_version(s));
	return 1;
}

static const luaL_Reg funcs[] = {
	{ "get", l_get },
	{ "put", l_put },
	{ "delete", l_delete },
	{ "list", l_list },
	{ "op_create", l_op_create },
	{ "op_update", l_op_update },
	{ "op_get", l_op_get },
	{ "op_list", l_op_list },
	{ "event", l_event },
	{ "events", l_events },
	{ "query", l_query },
	{ "exec", l_exec },
	{ "transaction", l_transaction },
	{ "schema_version", l_schema_version },
	{ NULL, NULL }
};

void lua_store_set(lua_State *L, store *s)
{
	if (s)
		lua_pushlightuserdata(L, s);
	else
		lua_pushnil(L);
	lua_rawsetp(L, LUA_REGISTRYINDEX, &store_key);
}

void lua_store_set_clock(double (*fn)(void))
{
	clock_now = fn;
}

int luaopen_hypd_store(lua_State *L)
{
	if (luaL_newmetatable(L, HOLDER_MT)) {
		lua_pushcfunction(L, holder_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pop(L, 1);
	luaL_newlib(L, funcs);
	return 1;
}
