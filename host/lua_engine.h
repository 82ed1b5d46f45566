/*
 * lua_engine: the Lua binding of the engine's mechanisms, module "hypd.core"
 * (clock, asynchronous HTTP, the deadline guard, embedded sources, logging),
 * and the handle of a streaming transfer, "hypd.http_stream" (core.http_open;
 * liolib's shape: born closed, close = __close = __gc cancels the transfer).
 * The scheduler that turns these into coroutines is Lua (lua/hypd/_sched.lua).
 */
#ifndef HYPD_LUA_ENGINE_H
#define HYPD_LUA_ENGINE_H

#include <lua.h>

#include "http.h"
#include "jobs.h"

/* Hands the host's HTTP client to the binding (not owned; it must outlive
 * the state: a stream handle collected at lua_close cancels through it). */
void lua_engine_set_http(lua_State *L, httpc *h);

/* Hands the host's worker pool to the binding (not owned). */
void lua_engine_set_jobs(lua_State *L, jobs *q);

/* The worker pool; raises STATE when there is none. */
jobs *lua_engine_jobs(lua_State *L);

/* Stops every HTTP server still running (before the worker pool goes) and
 * makes the cancels collected stream handles queued. */
void lua_engine_close(lua_State *L);

/* Asks the task running on the engine thread to stop at its next hook
 * check (safe from any thread). */
void lua_engine_interrupt(void);

/* Was lua_engine_interrupt called (and not cleared by core.interrupted)? */
int lua_engine_interrupted(void);

int luaopen_hypd_core(lua_State *L);
int luaopen_hypd_log(lua_State *L);

#endif
