/* luax: error tables and the protected entry point (see luax.h). */
#include "luax.h"

#include <lauxlib.h>
#include <stdarg.h>

static void push_error_v(lua_State *L, const char *code, const char *fmt,
			 va_list ap)
{
	lua_createtable(L, 0, 3);
	lua_pushstring(L, code);
	lua_setfield(L, -2, "code");
	lua_pushvfstring(L, fmt, ap);
	lua_setfield(L, -2, "message");
	luaL_setmetatable(L, HX_ERROR_MT);
}

void hx_newerror(lua_State *L, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	push_error_v(L, code, fmt, ap);
	va_end(ap);
}

int hx_fail(lua_State *L, const char *code, const char *fmt, ...)
{
	va_list ap;

	lua_pushnil(L);
	va_start(ap, fmt);
	push_error_v(L, code, fmt, ap);
	va_end(ap);
	return 2;
}

int hx_raise(lua_State *L, const char *code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	push_error_v(L, code, fmt, ap);
	va_end(ap);
	return lua_error(L);
}

void hx_normalize_error(lua_State *L, lua_State *co)
{
	int err = lua_gettop(L);

	if (lua_type(L, err) != LUA_TTABLE) {
		const char *msg = lua_tostring(L, err);

		lua_createtable(L, 0, 3);
		lua_pushliteral(L, "INTERNAL");
		lua_setfield(L, -2, "code");
		if (msg)
			lua_pushstring(L, msg);
		else
			lua_pushfstring(L, "(error object is a %s value)",
					luaL_typename(L, err));
		lua_setfield(L, -2, "message");
		lua_replace(L, err);
	}
	if (lua_getfield(L, err, "code") == LUA_TNIL) {
		lua_pushliteral(L, "INTERNAL");
		lua_setfield(L, err, "code");
	}
	lua_pop(L, 1);
	if (lua_getfield(L, err, "traceback") == LUA_TNIL) {
		luaL_traceback(L, co, NULL, co == L ? 1 : 0);
		lua_setfield(L, err, "traceback");
	}
	lua_pop(L, 1);
	if (!lua_getmetatable(L, err)) {
		luaL_setmetatable(L, HX_ERROR_MT);
	} else {
		lua_pop(L, 1);
	}
}

static int msghandler(lua_State *L)
{
	hx_normalize_error(L, L);
	return 1;
}

int hx_pcall(lua_State *L, int nargs, int nresults)
{
	int base = lua_gettop(L) - nargs, status;

	lua_pushcfunction(L, msghandler);
	lua_insert(L, base);
	status = lua_pcall(L, nargs, nresults, base);
	lua_remove(L, base);
	if (status != LUA_OK && lua_type(L, -1) != LUA_TTABLE) {
		/* memory errors skip the handler */
		hx_normalize_error(L, L);
	}
	return status;
}

const char *hx_tostring_error(lua_State *L, int idx)
{
	idx = lua_absindex(L, idx);
	if (lua_type(L, idx) == LUA_TTABLE) {
		lua_getfield(L, idx, "code");
		lua_getfield(L, idx, "message");
		lua_pushfstring(L, "%s: %s",
				lua_isstring(L, -2) ? lua_tostring(L, -2) : "ERROR",
				lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
		lua_replace(L, -3);
		lua_pop(L, 1);
	} else {
		lua_pushstring(L, luaL_tolstring(L, idx, NULL));
		lua_remove(L, -2);
	}
	return lua_tostring(L, -1);
}

static int error_tostring(lua_State *L)
{
	hx_tostring_error(L, 1);
	return 1;
}

void hx_open(lua_State *L)
{
	if (luaL_newmetatable(L, HX_ERROR_MT)) {
		lua_pushcfunction(L, error_tostring);
		lua_setfield(L, -2, "__tostring");
		lua_pushliteral(L, "error");
		lua_setfield(L, -2, "__name");
	}
	lua_pop(L, 1);
}

void hx_newclass(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
		 lua_CFunction scope, lua_CFunction tostring)
{
	if (luaL_newmetatable(L, name)) {
		lua_newtable(L);
		luaL_setfuncs(L, methods, 0);
		lua_setfield(L, -2, "__index");
		lua_pushcfunction(L, gc);
		lua_setfield(L, -2, "__gc");
		lua_pushcfunction(L, scope);
		lua_setfield(L, -2, "__close");
		lua_pushcfunction(L, tostring);
		lua_setfield(L, -2, "__tostring");
	}
	lua_pop(L, 1);
}
