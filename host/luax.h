/*
 * luax: what every Lua binding of the host shares.
 *
 * Errors are tables {code = "NOT_FOUND", message = "...", ...} with the
 * metatable HX_ERROR_MT (its __tostring gives "CODE: message"). Bindings use
 * two channels (STYLE.md): misuse raises (luaL_check*, hx_raise); failures of
 * the world return nil, err (hx_fail).
 *
 * hx_pcall is the one protected entry point for every call from C into Lua:
 * whatever the callee raises, the caller finds a normalized error table with
 * a `traceback` field on the stack.
 */
#ifndef HYPD_LUAX_H
#define HYPD_LUAX_H

#include <lua.h>
#include <lauxlib.h>

#define HX_ERROR_MT "hypd.error"

/* Pushes a new error table {code, message}. Allocates only Lua memory. */
void hx_newerror(lua_State *L, const char *code, const char *fmt, ...);

/* Pushes nil and a new error table; returns 2 (for `return hx_fail(...)`). */
int hx_fail(lua_State *L, const char *code, const char *fmt, ...);

/* Raises a new error table. Never returns. */
int hx_raise(lua_State *L, const char *code, const char *fmt, ...);

/*
 * Replaces the error value at the top of L with an error table: a table
 * keeps its fields (code defaults to "INTERNAL"), a string becomes the
 * message of an "INTERNAL" error. Adds `traceback` of thread `co` (the one
 * that failed; may be L) when the table has none.
 */
void hx_normalize_error(lua_State *L, lua_State *co);

/*
 * Calls the function below nargs arguments like lua_pcall. On failure
 * returns the lua status and leaves one normalized error table (with a
 * traceback) on the stack.
 */
int hx_pcall(lua_State *L, int nargs, int nresults);

/* Pushes "CODE: message" for the error value at idx (any Lua value). */
const char *hx_tostring_error(lua_State *L, int idx);

/* Creates HX_ERROR_MT in the registry. Called once per state. */
void hx_open(lua_State *L);

/*
 * Registers the metatable `name` of a handle class once: methods as
 * __index, gc as __gc, scope as __close (a handle's close is the same
 * idempotent function for both), tostring as __tostring. Leaves the stack
 * as it was.
 */
void hx_newclass(lua_State *L, const char *name, const luaL_Reg *methods, lua_CFunction gc,
		 lua_CFunction scope, lua_CFunction tostring);

#endif
