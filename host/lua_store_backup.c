/*
 * lua_store_backup: module "hypd._backup", the binding of store_backup.h
 * for hypd backup and hypd restore (lua/hypd/cli/_state.lua). These
 * commands run before any host is open (the host would open the store a
 * restore replaces), so the module also answers what the host would have.
 *
 *   _backup.default_dir() -> the state directory without --state
 *   _backup.prepare(dir) -> warning | "" | nil, err   statedir_prepare: creates
 *       dir when missing (0700) and checks its modes
 *   _backup.latest() -> the schema version this hypd writes
 *   _backup.backup(dir, dest, force) -> info | nil, err
 *   _backup.check(path) -> info | nil, err
 *   _backup.restore(dir, file) -> info | nil, err   (the caller holds the lock)
 *
 * info = {schema, operations, bytes, kept (restore: the old state was kept)}; err.code is EXISTS, INVALID,
 * NOT_FOUND, IN_USE or IO.
 */
#include <lauxlib.h>
#include <lua.h>
#include <stdlib.h>

#include "luax.h"
#include "statedir.h"
#include "store.h"
#include "store_backup.h"

static int push_result(lua_State *L, int rc, const store_backup_info *info, const char *err)
{
	static const char *const codes[] = { "OK", "EXISTS", "INVALID", "NOT_FOUND", "IN_USE", "IO" };

	if (rc != STORE_BACKUP_OK)
		return hx_fail(L, codes[-rc < 6 && -rc > 0 ? -rc : 5], "%s", err);
	lua_createtable(L, 0, 3);
	lua_pushinteger(L, info->schema);
	lua_setfield(L, -2, "schema");
	lua_pushinteger(L, info->operations);
	lua_setfield(L, -2, "operations");
	lua_pushinteger(L, info->bytes);
	lua_setfield(L, -2, "bytes");
	lua_pushboolean(L, info->kept);
	lua_setfield(L, -2, "kept");
	return 1;
}

static int l_default_dir(lua_State *L)
{
	char *d = statedir_default();

	if (!d)
		return luaL_error(L, "out of memory");
	lua_pushstring(L, d);
	free(d);
	return 1;
}

static int l_prepare(lua_State *L)
{
	const char *dir = luaL_checkstring(L, 1);
	char err[1024], warn[1024];

	if (statedir_prepare(dir, err, sizeof err, warn, sizeof warn) != 0)
		return hx_fail(L, "IO", "%s", err);
	lua_pushstring(L, warn);
	return 1;
}

static int l_latest(lua_State *L)
{
	lua_pushinteger(L, store_schema_latest());
	return 1;
}

static int l_backup(lua_State *L)
{
	const char *dir = luaL_checkstring(L, 1);
	const char *dest = luaL_checkstring(L, 2);
	int force = lua_toboolean(L, 3);
	store_backup_info info;
	char err[1024];
	int rc = store_backup_to(dir, dest, force, &info, err, sizeof err);

	return push_result(L, rc, &info, err);
}

static int l_check(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	store_backup_info info;
	char err[1024];
	int rc = store_backup_check(path, path, &info, err, sizeof err);

	return push_result(L, rc, &info, err);
}

static int l_restore(lua_State *L)
{
	const char *dir = luaL_checkstring(L, 1);
	const char *file = luaL_checkstring(L, 2);
	store_backup_info info;
	char err[1024];
	int rc = store_backup_restore(dir, file, &info, err, sizeof err);

	return push_result(L, rc, &info, err);
}

static const luaL_Reg funcs[] = {
	{ "default_dir", l_default_dir },
	{ "prepare", l_prepare },
	{ "latest", l_latest },
	{ "backup", l_backup },
	{ "check", l_check },
	{ "restore", l_restore },
	{ NULL, NULL },
};

int luaopen_hypd__backup(lua_State *L)
{
	luaL_newlib(L, funcs);
	return 1;
}
