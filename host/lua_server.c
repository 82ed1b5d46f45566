/* lua_server: module "hypd._server", the HTTP server functions and the
 * server and websocket handles (see lua_server.h). */
#include "lua_server.h"

#include <lauxlib.h>
#include <string.h>

#include "lua_engine.h"
#include "luax.h"
#include "server.h"
#include "websocket.h"

#define SERVERS_KEY "hypd.servers"        /* handle -> struct lserver (light) */
#define SERVER_SEQ_KEY "hypd.server_seq"  /* the last handle given */
#define SERVER_MT "hypd.server"
#define WS_MT "hypd.websocket"

/*
 * A server handle (liolib's shape): born closed, before the server
 * exists; stop, __close and __gc are one idempotent function. While the
 * server runs the registry maps its handle to this struct (a light
 * userdata: the registry does not keep the handle alive), so requests,
 * which carry only the handle number, find it, and lua_server_close can
 * stop what was never collected.
 */
struct lserver {
	hserver *s;            /* the running server; NULL once stopped (or never started) */
	lua_Integer tag;       /* its handle: req.server, the registry key */
	int port;              /* the port it listened on (kept after stop) */
};

/*
 * A websocket handle: born closed before hserver_ws_accept, open from the
 * 101 until the engine closes it or its end reaches the engine. The
 * websocket lives in its server (server_ws.c); the handle names it by
 * (server handle, id), so a handle that outlives its server fails
 * cleanly instead of pointing at freed memory.
 */
struct lws {
	lua_Integer tag;       /* the server's handle */
	lua_Integer id;        /* the websocket (its request id) */
	int open;              /* accepted and not yet closed */
};

/* The registry table handle -> struct lserver (light userdata), pushed. */
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

/*
 * The running server with handle h, or NULL (never started, or stopped).
 * Callers look it up after their last Lua allocation: a collection could
 * run a server's __gc (hserver_stop) in between.
 */
static hserver *find_server(lua_State *L, lua_Integer h)
{
	struct lserver *ls;

	push_servers(L);
	lua_geti(L, -1, h);
	ls = lua_islightuserdata(L, -1) ? lua_touserdata(L, -1) : NULL;
	lua_pop(L, 2);
	return ls ? ls->s : NULL;
}

/* Stops ls if it runs; 1 when it did. Allocates nothing (a finalizer). */
static int stop_server(lua_State *L, struct lserver *ls)
{
	hserver *s = ls->s;

	if (!s)
		return 0;
	ls->s = NULL;
	if (lua_getfield(L, LUA_REGISTRYINDEX, SERVERS_KEY) == LUA_TTABLE) {
		lua_pushnil(L);
		lua_seti(L, -2, ls->tag); /* clearing a field never allocates */
	}
	lua_pop(L, 1);
	hserver_stop(s);
	return 1;
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

/* _server.start(addr, port [, max_body [, tls [, ws [, threads [, limits]]]]])
 * -> server handle, port | nil, err
 * tls = {cert_pem = "...", key_pem = "..."} serves HTTPS; ws = {max_message
 * = bytes, ping = seconds, idle = seconds} sets the websocket limits;
 * threads is hserver_opts.threads (0: the default); limits = {max_per_client
 * = n, header_timeout = seconds} (absent: the defaults of server.h). */
static int l_server_start(lua_State *L)
{
	struct hserver_opts o;
	lua_Integer port = luaL_checkinteger(L, 2);
	lua_Integer max_body = luaL_optinteger(L, 3, 0);
	lua_Integer threads = luaL_optinteger(L, 6, 0);
	struct lserver *ls;
	lua_Integer h;
	char err[256];
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
	if (!lua_isnoneornil(L, 7)) {
		luaL_checktype(L, 7, LUA_TTABLE);
		lua_getfield(L, 7, "max_per_client");
		lua_getfield(L, 7, "header_timeout");
		luaL_argcheck(L, luaL_optinteger(L, -2, 0) >= 0 && luaL_optinteger(L, -2, 0) <= 100000 &&
			      luaL_optnumber(L, -1, 0) >= 0, 7, "limits must not be negative");
		o.max_per_client = (int)luaL_optinteger(L, -2, 0);
		o.header_timeout = luaL_optnumber(L, -1, 0);
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
	/* the handle, born closed: from here on nothing raises before it
	 * owns the server, and once it does its __gc stops it */
	ls = lua_newuserdatauv(L, sizeof *ls, 0);
	memset(ls, 0, sizeof *ls);
	ls->tag = h;
	luaL_setmetatable(L, SERVER_MT);
	ls->s = hserver_start(&o, q, err, sizeof err);
	if (!ls->s) {
		lua_pushnil(L);
		lua_seti(L, t, h);
		return hx_fail(L, "LISTEN", "%s", err);
	}
	ls->port = hserver_port(ls->s);
	lua_pushlightuserdata(L, ls);
	lua_seti(L, t, h);
	lua_pushinteger(L, ls->port);
	return 2;
}

/* The server handle at idx, which must still run; raises CLOSED naming it. */
static struct lserver *check_running(lua_State *L, int idx)
{
	struct lserver *ls = luaL_checkudata(L, idx, SERVER_MT);

	if (!ls->s)
		hx_raise(L, "CLOSED", "hypd.server %I (port %d) is stopped", ls->tag, ls->port);
	return ls;
}

/* srv:stop() -> true | false (was not running); also __close and __gc.
 * Stops listening, closes the open connections (also those whose request
 * waits for the engine) and websockets with 1001 (hserver_stop: up to a
 * second for their clients). */
static int l_srv_stop(lua_State *L)
{
	lua_pushboolean(L, stop_server(L, luaL_checkudata(L, 1, SERVER_MT)));
	return 1;
}

/* srv:running() -> true | false */
static int l_srv_running(lua_State *L)
{
	lua_pushboolean(L, ((struct lserver *)luaL_checkudata(L, 1, SERVER_MT))->s != NULL);
	return 1;
}

/* srv:handle() -> the handle number requests carry (req.server); kept after stop */
static int l_srv_handle(lua_State *L)
{
	lua_pushinteger(L, ((struct lserver *)luaL_checkudata(L, 1, SERVER_MT))->tag);
	return 1;
}

/* srv:port() -> the bound port; raises CLOSED once stopped */
static int l_srv_port(lua_State *L)
{
	lua_pushinteger(L, check_running(L, 1)->port);
	return 1;
}

/* srv:requests() -> requests received and not yet answered; raises
 * CLOSED once stopped */
static int l_srv_requests(lua_State *L)
{
	lua_pushinteger(L, hserver_open_requests(check_running(L, 1)->s));
	return 1;
}

static int l_srv_tostring(lua_State *L)
{
	struct lserver *ls = luaL_checkudata(L, 1, SERVER_MT);

	if (ls->s)
		lua_pushfstring(L, "hypd.server %I (port %d)", ls->tag, ls->port);
	else
		lua_pushfstring(L, "hypd.server %I (stopped)", ls->tag);
	return 1;
}

/* _server.respond(handle, id, status, headers, body) -> true | false
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

/* _server.stream_start(handle, id, status, headers) -> true | false */
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

/* _server.stream_write(handle, id, data) -> true | false (client gone,
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

/* _server.stream_end(handle, id [, failed]) -> true | false; failed
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

/* _server.ws_accept(handle, id, headers) -> websocket handle |
 * false, status (the request was no valid handshake: answered 400 or
 * 426) | false (gone) */
static int l_server_ws_accept(lua_State *L)
{
	lua_Integer h = luaL_checkinteger(L, 1);
	lua_Integer id = luaL_checkinteger(L, 2);
	const char **lines = header_lines(L, 3);
	struct lws *w;
	hserver *s;
	int rc;

	/* born closed: it opens only once the server took the websocket */
	w = lua_newuserdatauv(L, sizeof *w, 0);
	w->tag = h;
	w->id = id;
	w->open = 0;
	luaL_setmetatable(L, WS_MT);
	s = find_server(L, h);
	rc = s ? hserver_ws_accept(s, (uint64_t)id, lines) : -1;
	if (rc == 0) {
		w->open = 1;
		return 1;
	}
	lua_pushboolean(L, 0);
	if (rc < 0)
		return 1;
	lua_pushinteger(L, rc);
	return 2;
}

/* The websocket handle at idx, which must be open; raises CLOSED naming it. */
static struct lws *check_open(lua_State *L, int idx)
{
	struct lws *w = luaL_checkudata(L, idx, WS_MT);

	if (!w->open)
		hx_raise(L, "CLOSED", "hypd.websocket %I of server %I is closed", w->id, w->tag);
	return w;
}

/* ws:send(data [, kind]) -> true | false (gone, closing, or too slow);
 * kind "text" (the default: data must be UTF-8), "binary" or "ping" (at
 * most 125 bytes). Raises CLOSED after ws:close. */
static int l_ws_send(lua_State *L)
{
	static const char *const kinds[] = { "text", "binary", "ping", NULL };
	static const int opcodes[] = { WS_TEXT, WS_BINARY, WS_PING };
	struct lws *w = check_open(L, 1);
	size_t len;
	const char *data = luaL_checklstring(L, 2, &len);
	int kind = luaL_checkoption(L, 3, "text", kinds);
	hserver *s;

	if (kind == 0 && !ws_utf8_valid((const unsigned char *)data, len))
		return hx_raise(L, "VALIDATION", "a websocket text message must be UTF-8 (send binary instead)");
	luaL_argcheck(L, kind != 2 || len <= WS_CONTROL_MAX, 2, "a ping carries at most 125 bytes");
	s = find_server(L, w->tag);
	lua_pushboolean(L, s && hserver_ws_send(s, (uint64_t)w->id, opcodes[kind], data, len) == 0);
	return 1;
}

/* Closes w with code and reason unless it is closed; 1 when it was open
 * and the close handshake started. Allocates nothing (a finalizer). */
static int close_ws(lua_State *L, struct lws *w, int code, const char *reason, size_t len)
{
	hserver *s;

	if (!w->open)
		return 0;
	w->open = 0;
	s = find_server(L, w->tag);
	return s && hserver_ws_close(s, (uint64_t)w->id, code, reason, len) == 0;
}

/* ws:close([code [, reason]]) -> true | false (already closed, or gone);
 * code 1000 by default. Idempotent. */
static int l_ws_close(lua_State *L)
{
	struct lws *w = luaL_checkudata(L, 1, WS_MT);
	lua_Integer code = luaL_optinteger(L, 2, 1000);
	size_t len;
	const char *reason = luaL_optlstring(L, 3, "", &len);

	luaL_argcheck(L, code >= 0 && code < 5000 && ws_close_code_valid((int)code), 2,
		      "a close code: 1000-1003, 1007-1014 or 3000-4999");
	luaL_argcheck(L, len <= WS_REASON_MAX && ws_utf8_valid((const unsigned char *)reason, len), 3,
		      "a close reason is UTF-8 of at most 123 bytes");
	lua_pushboolean(L, close_ws(L, w, (int)code, reason, len));
	return 1;
}

/* __close(ws, err): 1000, or 1011 when the scope is left by an error */
static int l_ws_close_scope(lua_State *L)
{
	struct lws *w = luaL_checkudata(L, 1, WS_MT);

	if (lua_isnoneornil(L, 2))
		close_ws(L, w, 1000, "", 0);
	else
		close_ws(L, w, 1011, "internal error", 14);
	return 0;
}

/* __gc: a websocket nobody holds any more goes away (1001) */
static int l_ws_gc(lua_State *L)
{
	close_ws(L, luaL_checkudata(L, 1, WS_MT), 1001, "going away", 10);
	return 0;
}

/* ws:isopen() -> true | false */
static int l_ws_isopen(lua_State *L)
{
	lua_pushboolean(L, ((struct lws *)luaL_checkudata(L, 1, WS_MT))->open);
	return 1;
}

static int l_ws_tostring(lua_State *L)
{
	struct lws *w = luaL_checkudata(L, 1, WS_MT);

	lua_pushfstring(L, "hypd.websocket %I of server %I%s", w->id, w->tag, w->open ? "" : " (closed)");
	return 1;
}

/* _server.listening() -> number of running servers | nil when none */
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

/* lua_server.h: stops every server still running. */
void lua_server_close(lua_State *L)
{
	if (lua_getfield(L, LUA_REGISTRYINDEX, SERVERS_KEY) == LUA_TTABLE) {
		lua_pushnil(L);
		while (lua_next(L, -2)) {
			struct lserver *ls = lua_islightuserdata(L, -1) ? lua_touserdata(L, -1) : NULL;

			lua_pop(L, 1);
			if (ls && ls->s) {
				/* the handle stays (its __gc finds it stopped) */
				hserver_stop(ls->s);
				ls->s = NULL;
			}
		}
		lua_pushnil(L);
		lua_setfield(L, LUA_REGISTRYINDEX, SERVERS_KEY);
	}
	lua_pop(L, 1);
}

static const luaL_Reg server_funcs[] = {
	{ "start", l_server_start },
	{ "respond", l_server_respond },
	{ "stream_start", l_server_stream_start },
	{ "stream_write", l_server_stream_write },
	{ "stream_end", l_server_stream_end },
	{ "ws_accept", l_server_ws_accept },
	{ "listening", l_listening },
	{ NULL, NULL },
};

static const luaL_Reg server_methods[] = {
	{ "stop", l_srv_stop },
	{ "close", l_srv_stop },
	{ "running", l_srv_running },
	{ "handle", l_srv_handle },
	{ "port", l_srv_port },
	{ "requests", l_srv_requests },
	{ NULL, NULL },
};

static const luaL_Reg ws_methods[] = {
	{ "send", l_ws_send },
	{ "close", l_ws_close },
	{ "isopen", l_ws_isopen },
	{ NULL, NULL },
};

int luaopen_hypd__server(lua_State *L)
{
	hx_newclass(L, SERVER_MT, server_methods, l_srv_stop, l_srv_stop, l_srv_tostring);
	hx_newclass(L, WS_MT, ws_methods, l_ws_gc, l_ws_close_scope, l_ws_tostring);
	luaL_newlib(L, server_funcs);
	return 1;
}
