/* lua_server: the HTTP server functions of module "hypd.core" (see
 * lua_server.h). */
#include "lua_server.h"

#include <lauxlib.h>
#include <string.h>

#include "lua_engine.h"
#include "luax.h"
#include "server.h"
#include "websocket.h"

#define SERVERS_KEY "hypd.servers"        /* handle -> hserver */
#define SERVER_SEQ_KEY "hypd.server_seq"  /* the last handle given */

/* The registry table handle -> hserver (light userdata), pushed. */
static int push_servers(lua_State *L)
{
	if (lua_getfield(L, LUA_REGISTRYINDEX, SERVERS_KEY) != LUA_TTABLE) {
		lua_pop(L, 1);
		lua_newtable(L);
		lua_pushvalue(L, -1);
		lua_setfield(L, LUA_REGISTRYINDEX, SERVERS_KEY);
	}
	return lua_gettop(L);
}

/* The running server with handle h, or NULL (never started, or stopped). */
static hserver *find_server(lua_State *L, lua_Integer h)
{
	hserver *s;

	push_servers(L);
	lua_geti(L, -1, h);
	s = lua_islightuserdata(L, -1) ? lua_touserdata(L, -1) : NULL;
	lua_pop(L, 2);
	return s;
}

/*
 * The headers table at idx as "Name: value" lines, NULL-terminated, in a
 * userdata pushed on the stack; the strings stay on the stack below it.
 */
static const char **header_lines(lua_State *L, int idx)
{
	const char **lines;
	size_t n = 0;

	luaL_checktype(L, idx, LUA_TTABLE);
	lua_pushnil(L);
	while (lua_next(L, idx))
		lua_pop(L, 1), n++;
	lines = lua_newuserdatauv(L, (n + 1) * sizeof *lines, 0);
	n = 0;
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		luaL_checkstack(L, 4, "headers");
		if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
			luaL_error(L, "headers must map names to strings");
		lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), lua_tostring(L, -1));
		lines[n++] = lua_tostring(L, -1);
		lua_insert(L, -3); /* keep the string below the key */
		lua_pop(L, 1);
	}
	lines[n] = NULL;
	return lines;
}

/* core.server_start(addr, port [, max_body [, tls [, ws [, threads]]]]) -> handle, port | nil, err
 * tls = {cert_pem = "...", key_pem = "..."} serves HTTPS; ws = {max_message
 * = bytes, ping = seconds, idle = seconds} sets the websocket limits;
 * threads is hserver_opts.threads (0: the default). */
static int l_server_start(lua_State *L)
{
	struct hserver_opts o;
	lua_Integer port = luaL_checkinteger(L, 2);
	lua_Integer max_body = luaL_optinteger(L, 3, 0);
	lua_Integer threads = luaL_optinteger(L, 6, 0);
	lua_Integer h;
	char err[256];
	hserver *s;
	jobs *q;
	int t;

	memset(&o, 0, sizeof o);
	o.addr = luaL_checkstring(L, 1);
	luaL_argcheck(L, port >= 0 && port <= 65535, 2, "a port from 0 to 65535");
	luaL_argcheck(L, max_body >= 0, 3, "a size in bytes");
	luaL_argcheck(L, threads >= 0 && threads <= 64, 6, "from 1 to 64 threads (0: the default)");
	if (!lua_isnoneornil(L, 4)) {
		luaL_checktype(L, 4, LUA_TTABLE);
		lua_getfield(L, 4, "cert_pem");
		lua_getfield(L, 4, "key_pem");
		luaL_argcheck(L, lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING,
			      4, "tls needs cert_pem and key_pem strings");
		o.cert_pem = lua_tostring(L, -2);
		o.key_pem = lua_tostring(L, -1);
	}
	if (!lua_isnoneornil(L, 5)) {
		luaL_checktype(L, 5, LUA_TTABLE);
		lua_getfield(L, 5, "max_message");
		lua_getfield(L, 5, "ping");
		lua_getfield(L, 5, "idle");
		luaL_argcheck(L, luaL_optinteger(L, -3, 0) >= 0 && luaL_optnumber(L, -2, 0) >= 0 &&
			      luaL_optnumber(L, -1, 0) >= 0, 5, "websocket limits must not be negative");
		o.ws_max_message = (size_t)luaL_optinteger(L, -3, 0);
		o.ws_ping = luaL_optnumber(L, -2, 0);
		o.ws_idle = luaL_optnumber(L, -1, 0);
	}
	o.port = (int)port;
	o.max_body = (size_t)max_body;
	o.threads = (int)threads;
	q = lua_engine_jobs(L);
	/* the next handle, never reused: a late request of a stopped server
	 * must not reach a newer one */
	lua_getfield(L, LUA_REGISTRYINDEX, SERVER_SEQ_KEY);
	h = lua_tointeger(L, -1) + 1;
	lua_pop(L, 1);
	lua_pushinteger(L, h);
	lua_setfield(L, LUA_REGISTRYINDEX, SERVER_SEQ_KEY);
	o.tag = h;
	/* reserve the slot first: storing the server must not raise */
	t = push_servers(L);
	lua_pushboolean(L, 0);
	lua_seti(L, t, h);
	s = hserver_start(&o, q, err, sizeof err);
	if (s)
		lua_pushlightuserdata(L, s);
	else
		lua_pushnil(L);
	lua_seti(L, t, h);
	if (!s)
		return hx_fail(L, "LISTEN", "%s", err);
	lua_pushinteger(L, h);
	lua_pushinteger(L, hserver_port(s));
	return 2;
}

/* core.server_respond(handle, id, status, headers, body) -> true | false
 * (client gone, or server stopped). Status 0 drops the connection. */
static int l_server_respond(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	lua_Integer status = luaL_checkinteger(L, 3);
	const char **lines;
	const char *body;
	size_t len;
	hserver *s;

	luaL_argcheck(L, status == 0 || (status >= 100 && status <= 999), 3, "an HTTP status or 0");
	body = luaL_optlstring(L, 5, "", &len);
	lines = header_lines(L, 4);
	s = find_server(L, h);
	lua_pushboolean(L, s && hserver_respond(s, (uint64_t)id, (int)status, lines, body, len) == 0);
	return 1;
}

/* core.server_stream_start(handle, id, status, headers) -> true | false */
static int l_server_stream_start(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	lua_Integer status = luaL_checkinteger(L, 3);
	const char **lines;
	hserver *s;

	luaL_argcheck(L, status >= 100 && status <= 999, 3, "an HTTP status");
	lines = header_lines(L, 4);
	s = find_server(L, h);
	lua_pushboolean(L, s && hserver_stream_start(s, (uint64_t)id, (int)status, lines) == 0);
	return 1;
}

/* core.server_stream_write(handle, id, data) -> true | false (client gone,
 * or too slow); an empty write only asks whether the client is there */
static int l_server_stream_write(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	size_t len;
	const char *data = luaL_checklstring(L, 3, &len);
	hserver *s = find_server(L, h);

	lua_pushboolean(L, s && hserver_stream_write(s, (uint64_t)id, data, len) == 0);
	return 1;
}

/* core.server_stream_end(handle, id [, failed]) -> true | false; failed
 * cuts the connection so the client sees a truncated body */
static int l_server_stream_end(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	int failed = lua_toboolean(L, 3);
	hserver *s = find_server(L, h);

	lua_pushboolean(L, s && hserver_stream_end(s, (uint64_t)id, failed) == 0);
	return 1;
}

/* core.server_ws_accept(handle, id, headers) -> true | false, status (the
 * request was no valid handshake: answered 400 or 426) | false (gone) */
static int l_server_ws_accept(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	const char **lines = header_lines(L, 3);
	hserver *s = find_server(L, h);
	int rc = s ? hserver_ws_accept(s, (uint64_t)id, lines) : -1;

	lua_pushboolean(L, rc == 0);
	if (rc <= 0)
		return 1;
	lua_pushinteger(L, rc);
	return 2;
}

/* core.server_ws_send(handle, id, data [, kind]) -> true | false (gone,
 * closing, or too slow); kind "text" (the default: data must be UTF-8),
 * "binary" or "ping" (at most 125 bytes) */
static int l_server_ws_send(lua_State *L)
{
	static const char *const kinds[] = { "text", "binary", "ping", NULL };
	static const int opcodes[] = { WS_TEXT, WS_BINARY, WS_PING };
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	size_t len;
	const char *data = luaL_checklstring(L, 3, &len);
	int kind = luaL_checkoption(L, 4, "text", kinds);
	hserver *s;

	if (kind == 0 && !ws_utf8_valid((const unsigned char *)data, len))
		return hx_raise(L, "VALIDATION", "a websocket text message must be UTF-8 (send binary instead)");
	luaL_argcheck(L, kind != 2 || len <= WS_CONTROL_MAX, 3, "a ping carries at most 125 bytes");
	s = find_server(L, h);
	lua_pushboolean(L, s && hserver_ws_send(s, (uint64_t)id, opcodes[kind], data, len) == 0);
	return 1;
}

/* core.server_ws_close(handle, id [, code [, reason]]) -> true | false
 * (gone or already closing); code 1000 by default */
static int l_server_ws_close(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	lua_Integer code = luaL_optinteger(L, 3, 1000);
	size_t len;
	const char *reason = luaL_optlstring(L, 4, "", &len);
	hserver *s;

	luaL_argcheck(L, code >= 0 && code < 5000 && ws_close_code_valid((int)code), 3,
		      "a close code: 1000-1003, 1007-1014 or 3000-4999");
	luaL_argcheck(L, len <= WS_REASON_MAX && ws_utf8_valid((const unsigned char *)reason, len), 4,
		      "a close reason is UTF-8 of at most 123 bytes");
	s = find_server(L, h);
	lua_pushboolean(L, s && hserver_ws_close(s, (uint64_t)id, (int)code, reason, len) == 0);
	return 1;
}

/* core.listening() -> number of running servers | nil when none */
static int l_listening(lua_State *L)
{
	lua_Integer n = 0;
	int t = push_servers(L);

	lua_pushnil(L);
	while (lua_next(L, t)) {
		n += lua_islightuserdata(L, -1);
		lua_pop(L, 1);
	}
	if (n == 0)
		return 0;
	lua_pushinteger(L, n);
	return 1;
}

/* core.server_stop(handle) -> true | false (was not running) */
static int l_server_stop(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	hserver *s = find_server(L, h);
	int t;

	if (s) {
		t = push_servers(L);
		lua_pushnil(L);
		lua_seti(L, t, h); /* clearing a field never allocates */
		hserver_stop(s);
	}
	lua_pushboolean(L, s != NULL);
	return 1;
}

/* lua_engine.h: stops every server still running. */
void lua_engine_close(lua_State *L)
{
	if (lua_getfield(L, LUA_REGISTRYINDEX, SERVERS_KEY) == LUA_TTABLE) {
		lua_pushnil(L);
		while (lua_next(L, -2)) {
			if (lua_islightuserdata(L, -1))
				hserver_stop(lua_touserdata(L, -1));
			lua_pop(L, 1);
		}
		lua_pushnil(L);
		lua_setfield(L, LUA_REGISTRYINDEX, SERVERS_KEY);
	}
	lua_pop(L, 1);
}

static const luaL_Reg server_funcs[] = {
	{ "server_start", l_server_start },
	{ "server_respond", l_server_respond },
	{ "server_stream_start", l_server_stream_start },
	{ "server_stream_write", l_server_stream_write },
	{ "server_stream_end", l_server_stream_end },
	{ "server_ws_accept", l_server_ws_accept },
	{ "server_ws_send", l_server_ws_send },
	{ "server_ws_close", l_server_ws_close },
	{ "server_stop", l_server_stop },
	{ "listening", l_listening },
	{ NULL, NULL },
};

void lua_server_register(lua_State *L, int idx)
{
	idx = lua_absindex(L, idx);
	lua_pushvalue(L, idx);
	luaL_setfuncs(L, server_funcs, 0);
	lua_pop(L, 1);
}
