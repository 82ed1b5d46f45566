/*
 * lua_server: module "hypd._server", the HTTP server functions (start,
 * respond, stream_start, stream_write, stream_end, ws_accept, listening),
 * a binding of server.h used by hypd.server and the scheduler,
 * and two handles in liolib's shape (born closed; __gc and __close are the
 * idempotent close; methods on a closed one raise CLOSED naming it):
 *
 *   hypd.server     from start: stop/close, running, handle, port,
 *                   requests. Collected unstopped, it stops (hserver_stop:
 *                   the port is free, open connections close, also those
 *                   whose request waits for the engine; websockets 1001).
 *   hypd.websocket  from ws_accept: send, close, isopen. Collected
 *                   open, it closes with 1001; as a <close> variable with
 *                   1000 (1011 when the scope fails).
 *
 * Requests carry only their server's handle number (req.server); the
 * registry maps running ones to their handle without keeping it alive.
 */
#ifndef HYPD_LUA_SERVER_H
#define HYPD_LUA_SERVER_H

#include <lua.h>

/* Opens module "hypd._server" (lstate.c) and creates the handle
 * metatables. */
int luaopen_hypd__server(lua_State *L);

/* Stops every server still running (lua_engine_close). */
void lua_server_close(lua_State *L);

#endif
