/*
 * lua_server: the HTTP server functions of module "hypd.core"
 * (server_start, server_respond, server_stream_start, server_stream_write,
 * server_stream_end, server_ws_accept, server_ws_send, server_ws_close,
 * server_stop, listening), a binding of server.h. Running servers live in
 * the registry (handle -> hserver); lua_engine_close (lua_engine.h), which
 * stops them all, is defined here too.
 */
#ifndef HYPD_LUA_SERVER_H
#define HYPD_LUA_SERVER_H

#include <lua.h>

/* Adds the server functions to the table at idx (luaopen_hypd_core). */
void lua_server_register(lua_State *L, int idx);

#endif
