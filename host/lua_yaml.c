/*
 * lua_yaml: the Lua module "hypd.yaml", YAML text -> Lua values with the
 * conventions of hypd.json. The reading itself is yml.c (see yml.h for
 * what is read, how scalars resolve, and the caps).
 *
 *   yaml.decode(s [, opts])      -> value | nil, err  (the first document;
 *                                   json.null when s has none)
 *   yaml.decode_all(s [, opts])  -> json.array of documents | nil, err
 *                                   (an empty document is json.null)
 *   yaml.limits                  -> {max_bytes, max_depth, max_nodes}: the
 *                                   defaults, which are also the caps
 *   opts.duplicate_keys  "error" (default): a repeated key is refused;
 *                        "last": it keeps its last value, as kubectl's
 *                        kubeconfig loader does
 *   opts.max_bytes, opts.max_depth, opts.max_nodes: lower caps (1 up to
 *                        the default; more is misuse)
 *   opts.tags            true: a node with a local tag (`!Ref Name`,
 *                        `!Sub [...]`) becomes the mapping {["!Ref"] =
 *                        "Name"}, so a reader such as the sandbox's
 *                        CloudFormation sees CloudFormation's short forms;
 *                        false (default): the tag is dropped
 *
 * Values: null is json.null, mappings are tables with the json.object mark
 * (string keys), sequences tables with the json.array mark, integers Lua
 * integers (exact in 64 bits), floats Lua floats, strings Lua strings. An
 * alias becomes a copy of what it names (no table is shared), as kubectl
 * reads it. err is {code = "YAML", message = "line L column C: ...", line,
 * column} (line and column absent for an error with no place).
 *
 * Misuse (a non-string s, bad opts) raises; failures of the text return
 * nil, err. The tree yml_load builds belongs to a userdata on the stack
 * while Lua values are made, so a Lua memory error leaks nothing.
 */
#include <lauxlib.h>
#include <string.h>

#include "json.h"
#include "luax.h"
#include "yml.h"

#define STREAM_MT "hypd.yaml.stream"

static int stream_gc(lua_State *L)
{
	yml_release(luaL_checkudata(L, 1, STREAM_MT));
	return 0;
}

static void push_node(lua_State *L, const struct yml_node *nd, int objmt, int arrmt, int tags);

/* Pushes nd's value, its tag aside; objmt and arrmt are the marks' stack
 * slots; tags: wrap tagged children (opts.tags). */
static void push_value(lua_State *L, const struct yml_node *nd, int objmt, int arrmt, int tags)
{
	size_t i;

	luaL_checkstack(L, 4, "YAML nesting");
	switch (nd->kind) {
	case YML_NULL:
		hj_pushnull(L);
		break;
	case YML_BOOL:
		lua_pushboolean(L, nd->u.b);
		break;
	case YML_INT:
		lua_pushinteger(L, (lua_Integer)nd->u.i);
		break;
	case YML_FLOAT:
		lua_pushnumber(L, (lua_Number)nd->u.f);
		break;
	case YML_STR:
		lua_pushlstring(L, nd->u.str.s, nd->u.str.len);
		break;
	case YML_SEQ:
		lua_createtable(L, nd->u.seq.n > 1 << 24 ? 1 << 24 : (int)nd->u.seq.n, 0);
		lua_pushvalue(L, arrmt);
		lua_setmetatable(L, -2);
		for (i = 0; i < nd->u.seq.n; i++) {
			push_node(L, nd->u.seq.items[i], objmt, arrmt, tags);
			lua_rawseti(L, -2, (lua_Integer)i + 1);
		}
		break;
	case YML_MAP:
		lua_createtable(L, 0, nd->u.map.n > 1 << 24 ? 1 << 24 : (int)nd->u.map.n);
		lua_pushvalue(L, objmt);
		lua_setmetatable(L, -2);
		for (i = 0; i < nd->u.map.n; i++) {
			lua_pushlstring(L, nd->u.map.pairs[i].key, nd->u.map.pairs[i].klen);
			push_node(L, nd->u.map.pairs[i].value, objmt, arrmt, tags);
			lua_rawset(L, -3);
		}
		break;
	}
}

/* Pushes nd as a Lua value: with tags, a tagged node as {[tag] = value}. */
static void push_node(lua_State *L, const struct yml_node *nd, int objmt, int arrmt, int tags)
{
	if (!tags || !nd->tag) {
		push_value(L, nd, objmt, arrmt, tags);
		return;
	}
	luaL_checkstack(L, 4, "YAML nesting");
	lua_createtable(L, 0, 1);
	lua_pushvalue(L, objmt);
	lua_setmetatable(L, -2);
	lua_pushstring(L, nd->tag);
	push_value(L, nd, objmt, arrmt, tags);
	lua_rawset(L, -3);
}

/* Reads opts (at idx) into lim and returns opts.tags (0 or 1); raises on
 * misuse, before anything is held. */
static int check_opts(lua_State *L, int idx, struct yml_limits *lim)
{
	static const char *const caps[] = { "max_bytes", "max_depth", "max_nodes" };
	lua_Integer v = 0, most;
	int i, tags;

	if (lua_isnoneornil(L, idx))
		return 0;
	luaL_checktype(L, idx, LUA_TTABLE);
	if (lua_getfield(L, idx, "tags") != LUA_TNIL && !lua_isboolean(L, -1))
		luaL_error(L, "bad argument #%d (opts.tags must be a boolean)", idx);
	tags = lua_toboolean(L, -1);
	lua_pop(L, 1);
	if (lua_getfield(L, idx, "duplicate_keys") != LUA_TNIL) {
		const char *d = lua_tostring(L, -1);

		if (lua_type(L, -1) != LUA_TSTRING || (strcmp(d, "error") && strcmp(d, "last")))
			luaL_error(L, "bad argument #%d (opts.duplicate_keys must be \"error\" or \"last\")",
				   idx);
		lim->dup_last = strcmp(d, "last") == 0;
	}
	lua_pop(L, 1);
	for (i = 0; i < 3; i++) {
		most = i == 0 ? (lua_Integer)YML_MAXBYTES : i == 1 ? YML_MAXDEPTH :
		       (lua_Integer)YML_MAXNODES;
		if (lua_getfield(L, idx, caps[i]) != LUA_TNIL) {
			if (!lua_isinteger(L, -1) || (v = lua_tointeger(L, -1)) < 1 || v > most)
				luaL_error(L, "bad argument #%d (opts.%s must be an integer from 1 to %I)",
					   idx, caps[i], most);
			if (i == 0)
				lim->max_bytes = (size_t)v;
			else if (i == 1)
				lim->max_depth = (int)v;
			else
				lim->max_nodes = (size_t)v;
		}
		lua_pop(L, 1);
	}
	return tags;
}

static int decode(lua_State *L, int all)
{
	struct yml_limits lim = YML_LIMITS_DEFAULT;
	struct yml_error err;
	struct yml_stream *st;
	size_t len, i;
	const char *s = luaL_checklstring(L, 1, &len);
	int tags = check_opts(L, 2, &lim);

	lim.all = all;
	lua_settop(L, 2);
	st = lua_newuserdatauv(L, sizeof *st, 0); /* 3 */
	memset(st, 0, sizeof *st);
	luaL_setmetatable(L, STREAM_MT);
	if (yml_load(s, len, &lim, st, &err) != 0) {
		hx_fail(L, "YAML", "%s", err.message);
		if (err.line > 0) {
			lua_pushinteger(L, err.line);
			lua_setfield(L, -2, "line");
			lua_pushinteger(L, err.column);
			lua_setfield(L, -2, "column");
		}
		return 2;
	}
	luaL_newmetatable(L, HJ_OBJECT_MT); /* 4: creates the marks if hypd.json */
	luaL_newmetatable(L, HJ_ARRAY_MT);  /* 5: was never opened */
	if (!all) {
		if (st->ndocs)
			push_node(L, st->docs[0], 4, 5, tags);
		else
			hj_pushnull(L);
	} else {
		lua_createtable(L, (int)(st->ndocs > 1 << 20 ? 1 << 20 : st->ndocs), 0);
		lua_pushvalue(L, 5);
		lua_setmetatable(L, -2);
		for (i = 0; i < st->ndocs; i++) {
			push_node(L, st->docs[i], 4, 5, tags);
			lua_rawseti(L, -2, (lua_Integer)i + 1);
		}
	}
	yml_release(st);
	return 1;
}

/* yaml.decode(s [, opts]) -> value | nil, err */
static int l_decode(lua_State *L)
{
	return decode(L, 0);
}

/* yaml.decode_all(s [, opts]) -> documents | nil, err */
static int l_decode_all(lua_State *L)
{
	return decode(L, 1);
}

static const luaL_Reg yaml_funcs[] = {
	{ "decode", l_decode },
	{ "decode_all", l_decode_all },
	{ NULL, NULL },
};

int luaopen_hypd_yaml(lua_State *L)
{
	if (luaL_newmetatable(L, STREAM_MT)) {
		lua_pushcfunction(L, stream_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pop(L, 1);
	luaL_newlib(L, yaml_funcs);
	lua_createtable(L, 0, 3);
	lua_pushinteger(L, (lua_Integer)YML_MAXBYTES);
	lua_setfield(L, -2, "max_bytes");
	lua_pushinteger(L, YML_MAXDEPTH);
	lua_setfield(L, -2, "max_depth");
	lua_pushinteger(L, (lua_Integer)YML_MAXNODES);
	lua_setfield(L, -2, "max_nodes");
	lua_setfield(L, -2, "limits");
	return 1;
}
