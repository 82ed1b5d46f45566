/*
 * lua_statelock: module "hypd._lock", the binding of statelock.h (the lock
 * of a state directory). The policy (who takes it, what a refusal says) is
 * lua/hypd/statelock.lua's.
 *
 *   _lock.acquire(dir, command [, wait [, settle]]) -> true | nil, err
 *       err.code LOCKED with err.holder = {pid, command, since, stopping,
 *       grace, url} when another process holds it; IO when the file cannot
 *       be used. wait > 0: while the holder is stopping, keep trying for up
 *       to wait seconds of real time, and for settle seconds in any case
 *       (statelock_wait; blocks the engine; Ctrl-C ends it).
 *   _lock.held() -> the directory whose lock this process holds | nil
 *   _lock.update{url, stopping, grace} -> true | nil, err
 *   _lock.release([dir])
 *   _lock.holder(dir) -> what dir/lock says | nil
 */
#include <lauxlib.h>
#include <lua.h>

#include "lua_engine.h"
#include "luax.h"
#include "statelock.h"

static void push_info(lua_State *L, const statelock_info *h)
{
	lua_createtable(L, 0, 6);
	if (h->pid > 0) {
		lua_pushinteger(L, h->pid);
		lua_setfield(L, -2, "pid");
	}
	if (h->command[0]) {
		lua_pushstring(L, h->command);
		lua_setfield(L, -2, "command");
	}
	if (h->since > 0) {
		lua_pushnumber(L, h->since);
		lua_setfield(L, -2, "since");
	}
	lua_pushboolean(L, h->stopping);
	lua_setfield(L, -2, "stopping");
	if (h->stopping) {
		lua_pushnumber(L, h->grace);
		lua_setfield(L, -2, "grace");
	}
	if (h->url[0]) {
		lua_pushstring(L, h->url);
		lua_setfield(L, -2, "url");
	}
}

static int l_acquire(lua_State *L)
{
	const char *dir = luaL_checkstring(L, 1);
	const char *command = luaL_checkstring(L, 2);
	double wait = luaL_optnumber(L, 3, 0);
	double settle = luaL_optnumber(L, 4, 0);
	statelock_info holder;
	char err[512];
	int rc;

	rc = wait > 0 || settle > 0
		? statelock_wait(dir, command, wait, settle, lua_engine_interrupted, &holder, err, sizeof err)
		: statelock_acquire(dir, command, &holder, err, sizeof err);
	if (rc == STATELOCK_HELD) {
		lua_pushboolean(L, 1);
		return 1;
	}
	if (rc == STATELOCK_ERROR)
		return hx_fail(L, "IO", "%s", err);
	hx_fail(L, "LOCKED", "another process holds the lock of the state directory %s", dir);
	push_info(L, &holder);
	lua_setfield(L, -2, "holder");
	lua_pushstring(L, dir);
	lua_setfield(L, -2, "dir");
	return 2;
}

static int l_held(lua_State *L)
{
	const char *dir = statelock_dir();

	if (dir)
		lua_pushstring(L, dir);
	else
		lua_pushnil(L);
	return 1;
}

static int l_update(lua_State *L)
{
	const char *url;
	int stopping;
	double grace;

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "url");
	url = luaL_optstring(L, -1, NULL);
	lua_getfield(L, 1, "stopping");
	stopping = lua_toboolean(L, -1);
	lua_getfield(L, 1, "grace");
	grace = luaL_optnumber(L, -1, 0);
	if (statelock_update(url, stopping, grace) != 0)
		return hx_fail(L, statelock_dir() ? "IO" : "STATE", "%s", statelock_dir()
			       ? "cannot rewrite the lock file" : "this process does not hold a lock");
	lua_pushboolean(L, 1);
	return 1;
}

static int l_release(lua_State *L)
{
	statelock_release(luaL_optstring(L, 1, NULL));
	return 0;
}

static int l_holder(lua_State *L)
{
	statelock_info info;

	if (statelock_read(luaL_checkstring(L, 1), &info) != 0 || info.pid <= 0) {
		lua_pushnil(L);
		return 1;
	}
	push_info(L, &info);
	return 1;
}

static const luaL_Reg funcs[] = {
	{ "acquire", l_acquire },
	{ "held", l_held },
	{ "update", l_update },
	{ "release", l_release },
	{ "holder", l_holder },
	{ NULL, NULL },
};

int luaopen_hypd__lock(lua_State *L)
{
	luaL_newlib(L, funcs);
	return 1;
}
