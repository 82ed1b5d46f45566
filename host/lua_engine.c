/* lua_engine: module "hypd.core" (see lua_engine.h). */
#include "lua_engine.h"

#include <lauxlib.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "awssign.h"
#include "clock.h"
#include "embedded.h"
#include "jobs.h"
#include "log.h"
#include "luax.h"
#include "server.h"

#define HTTP_KEY "hypd.httpc"
#define JOBS_KEY "hypd.jobs"
#define SERVER_KEY "hypd.server"
#define HOOK_EVERY 1000

/* The guard of the task that runs now (one engine thread, so one at a time). */
static struct {
	int armed;             /* a task is running under the guard */
	double deadline;       /* engine-clock deadline, 0 = none */
	double slice_end;      /* real monotonic end of this run slice, 0 = none */
} guard;
static volatile sig_atomic_t interrupted; /* lua_engine_interrupt was called */

void lua_engine_set_http(lua_State *L, httpc *h)
{
	lua_pushlightuserdata(L, h);
	lua_setfield(L, LUA_REGISTRYINDEX, HTTP_KEY);
}

void lua_engine_set_jobs(lua_State *L, jobs *q)
{
	lua_pushlightuserdata(L, q);
	lua_setfield(L, LUA_REGISTRYINDEX, JOBS_KEY);
}

jobs *lua_engine_jobs(lua_State *L)
{
	jobs *q;

	lua_getfield(L, LUA_REGISTRYINDEX, JOBS_KEY);
	q = lua_touserdata(L, -1);
	lua_pop(L, 1);
	if (!q)
		hx_raise(L, "STATE", "the engine has no worker pool");
	return q;
}

void lua_engine_interrupt(void) { interrupted = 1; }

static httpc *get_http(lua_State *L)
{
	httpc *h;

	lua_getfield(L, LUA_REGISTRYINDEX, HTTP_KEY);
	h = lua_touserdata(L, -1);
	lua_pop(L, 1);
	if (!h)
		hx_raise(L, "STATE", "the engine has no HTTP client");
	return h;
}

/* --- clock --- */

static int l_now(lua_State *L) { lua_pushnumber(L, hclock_now()); return 1; }
static int l_mono(lua_State *L) { lua_pushnumber(L, hclock_mono()); return 1; }
static int l_wall(lua_State *L) { lua_pushnumber(L, hclock_wall()); return 1; }

static int l_virtual(lua_State *L)
{
	if (!lua_isnone(L, 1))
		hclock_set_virtual(lua_toboolean(L, 1));
	lua_pushboolean(L, hclock_is_virtual());
	return 1;
}

static int l_advance_to(lua_State *L)
{
	double t = luaL_checknumber(L, 1);

	if (hclock_advance_to(t) != 0)
		return hx_raise(L, "STATE", "the clock is not virtual");
	lua_pushnumber(L, hclock_now());
	return 1;
}

/* --- deadline guard --- */

static void guard_hook(lua_State *L, lua_Debug *ar)
{
	const char *why = NULL, *code = "TIMEOUT";

	(void)ar;
	if (!guard.armed)
		return;
	if (interrupted) {
		why = "interrupted";
		code = "CANCELLED";
	} else if (guard.deadline > 0 && hclock_now() >= guard.deadline) {
		why = "deadline exceeded";
	} else if (guard.slice_end > 0 && hclock_mono() >= guard.slice_end) {
		why = "ran too long without yielding (CPU loop?)";
	}
	if (!why)
		return;
	hx_newerror(L, code, "%s", why);
	lua_pushboolean(L, 1);
	lua_setfield(L, -2, "abort");
	lua_error(L);
}

/* core.guard(co): watch coroutine co (and those it creates) with the hook. */
static int l_guard(lua_State *L)
{
	lua_State *co = lua_tothread(L, 1);

	luaL_argexpected(L, co != NULL, 1, "thread");
	lua_sethook(co, guard_hook, LUA_MASKCOUNT, HOOK_EVERY);
	return 0;
}

/* core.arm(deadline|nil, slice_seconds|nil): before resuming a task. */
static int l_arm(lua_State *L)
{
	double slice = luaL_optnumber(L, 2, 0);

	guard.deadline = luaL_optnumber(L, 1, 0);
	guard.slice_end = slice > 0 ? hclock_mono() + slice : 0;
	guard.armed = 1;
	return 0;
}

static int l_disarm(lua_State *L)
{
	(void)L;
	guard.armed = 0;
	return 0;
}

/* core.interrupted([clear]): was lua_engine_interrupt called? */
static int l_interrupted(lua_State *L)
{
	lua_pushboolean(L, interrupted);
	if (lua_toboolean(L, 1))
		interrupted = 0;
	return 1;
}

/* core.error(co, err): err as a normalized error table with co's traceback */
static int l_error(lua_State *L)
{
	lua_State *co = lua_tothread(L, 1);

	luaL_argexpected(L, co != NULL, 1, "thread");
	lua_settop(L, 2);
	hx_normalize_error(L, co);
	return 1;
}

/* --- HTTP --- */

struct req_build {
	httpc_request req;   /* the request */
	const char **hdrs;   /* header lines (Lua-owned strings), NULL-terminated */
	size_t nhdrs;        /* lines in hdrs */
};

/* Reads req table at idx; header strings are pushed on the stack (kept alive). */
static void read_request(lua_State *L, int idx, struct req_build *b)
{
	size_t n = 0;

	memset(&b->req, 0, sizeof b->req);
	lua_getfield(L, idx, "url");
	b->req.url = luaL_checkstring(L, -1);
	lua_getfield(L, idx, "method");
	b->req.method = luaL_optstring(L, -1, "GET");
	lua_getfield(L, idx, "body");
	b->req.body = luaL_optlstring(L, -1, NULL, &b->req.body_len);
	lua_getfield(L, idx, "ca_file");
	b->req.ca_file = luaL_optstring(L, -1, NULL);
	lua_getfield(L, idx, "ca_pem");
	b->req.ca_pem = luaL_optstring(L, -1, NULL);
	lua_getfield(L, idx, "timeout");
	b->req.timeout_ms = (long)(luaL_optnumber(L, -1, 0) * 1000);
	lua_getfield(L, idx, "connect_timeout");
	b->req.connect_timeout_ms = (long)(luaL_optnumber(L, -1, 0) * 1000);
	lua_getfield(L, idx, "max_body");
	b->req.max_body = (size_t)luaL_optinteger(L, -1, 0);
	lua_getfield(L, idx, "fresh_connection");
	b->req.fresh_connection = lua_toboolean(L, -1);
	lua_pop(L, 9);

	lua_getfield(L, idx, "headers");
	if (lua_istable(L, -1)) {
		lua_pushnil(L);
		while (lua_next(L, -2))
			lua_pop(L, 1), n++;
	}
	b->hdrs = lua_newuserdatauv(L, (n + 1 + AWSSIGN_MAX_LINES) * sizeof *b->hdrs, 0);
	lua_insert(L, -2);
	n = 0;
	if (lua_istable(L, -1)) {
		lua_pushnil(L);
		while (lua_next(L, -2)) {
			luaL_checkstack(L, 4, "too many headers");
			if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
				luaL_error(L, "headers must map names to strings");
			lua_pushfstring(L, "%s: %s", lua_tostring(L, -2),
					lua_tostring(L, -1));
			b->hdrs[n++] = lua_tostring(L, -1);
			lua_insert(L, -4); /* keep the string below the table */
			lua_pop(L, 1);
		}
	}
	b->hdrs[n] = NULL;
	lua_pop(L, 1);
	b->req.headers = b->hdrs;
	b->nhdrs = n;
}

/*
 * Signs the request when req.aws is set: the signature headers are computed
 * in C from the cached credentials and appended to b->hdrs (as Lua strings
 * kept on the stack). Returns 0, or pushes nil, err and returns 2.
 */
static int sign_request(lua_State *L, int idx, struct req_build *b)
{
	awssign_params p;
	char *lines[AWSSIGN_MAX_LINES], err[256];
	const char *code;
	int n;

	if (lua_getfield(L, idx, "aws") != LUA_TTABLE) {
		lua_pop(L, 1);
		return 0;
	}
	memset(&p, 0, sizeof p);
	lua_getfield(L, -1, "service");
	p.service = luaL_checkstring(L, -1);
	lua_getfield(L, -2, "region");
	p.region = luaL_checkstring(L, -1);
	lua_getfield(L, -3, "profile");
	p.profile = luaL_optstring(L, -1, NULL);
	lua_getfield(L, -4, "sign_body");
	p.sign_body = lua_toboolean(L, -1);
	lua_getfield(L, -5, "unsigned_payload");
	p.unsigned_payload = lua_toboolean(L, -1);
	lua_getfield(L, -6, "s3_path");
	p.s3_path = lua_toboolean(L, -1);
	if (awssign_headers(&b->req, &p, (time_t)hclock_now(), lines, &n, &code, err,
			    sizeof err) != 0)
		return hx_fail(L, code, "%s", err);
	/* copy into Lua strings first, then free: nothing raises while C holds them */
	luaL_checkstack(L, n, "signing");
	for (int i = 0; i < n; i++) {
		lua_pushstring(L, lines[i]);
		b->hdrs[b->nhdrs++] = lua_tostring(L, -1);
	}
	b->hdrs[b->nhdrs] = NULL;
	for (int i = 0; i < n; i++) {
		OPENSSL_cleanse(lines[i], strlen(lines[i]));
		free(lines[i]);
	}
	return 0;
}

/* core.http_start(req) -> id | nil, err */
static int l_http_start(lua_State *L)
{
	httpc *h = get_http(L);
	struct req_build b;
	uint64_t id;
	char err[256];

	luaL_checktype(L, 1, LUA_TTABLE);
	read_request(L, 1, &b);
	if (sign_request(L, 1, &b) != 0)
		return 2;
	if (httpc_start(h, &b.req, &id, err, sizeof err) != 0)
		return hx_fail(L, "VALIDATION", "%s", err);
	lua_pushinteger(L, (lua_Integer)id);
	return 1;
}

static int l_http_cancel(lua_State *L)
{
	lua_Integer id = luaL_checkinteger(L, 1);

	lua_pushboolean(L, httpc_cancel(get_http(L), (uint64_t)id) == 0);
	return 1;
}

/* core.inflight() -> HTTP transfers and jobs the engine still waits for */
static int l_inflight(lua_State *L)
{
	lua_pushinteger(L, httpc_inflight(get_http(L)) + jobs_pending(lua_engine_jobs(L)));
	return 1;
}

/* Appends one finished transfer to the result array on top of the stack. */
static void on_done(void *ud, httpc_response *r)
{
	lua_State *L = ud;

	lua_createtable(L, 0, 6);
	lua_pushinteger(L, (lua_Integer)r->id);
	lua_setfield(L, -2, "id");
	if (r->error_code) {
		hx_newerror(L, r->error_code, "%s", r->error);
		lua_setfield(L, -2, "err");
	} else {
		lua_pushinteger(L, r->status);
		lua_setfield(L, -2, "status");
		lua_createtable(L, 0, (int)r->nheaders);
		for (size_t i = 0; i < r->nheaders; i++) {
			/* repeated headers join with ", " as RFC 9110 allows */
			if (lua_getfield(L, -1, r->headers[i].name) == LUA_TSTRING) {
				lua_pushfstring(L, "%s, %s", lua_tostring(L, -1),
						r->headers[i].value);
				lua_remove(L, -2);
			} else {
				lua_pop(L, 1);
				lua_pushstring(L, r->headers[i].value);
			}
			lua_setfield(L, -2, r->headers[i].name);
		}
		lua_setfield(L, -2, "headers");
		lua_pushlstring(L, r->body, r->body_len);
		lua_setfield(L, -2, "body");
	}
	lua_pushnumber(L, r->seconds);
	lua_setfield(L, -2, "seconds");
	lua_seti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
}

/* core.poll(timeout_seconds|nil) -> array of finished transfers */
static int l_poll(lua_State *L)
{
	httpc *h = get_http(L);
	double t = luaL_optnumber(L, 1, -1);
	int ms = t < 0 ? -1 : t > 3600 ? 3600000 : (int)(t * 1000 + 0.5);

	jobs *q = lua_engine_jobs(L);
	job *j;

	lua_settop(L, 1);
	lua_newtable(L);
	/* the callback pushes Lua values: a Lua memory error inside it would
	 * leak that one transfer's buffers (only at the state's memory cap) */
	if ((j = jobs_take_done(q)) != NULL)
		ms = 0; /* a job already finished: do not sleep */
	if (httpc_poll(h, ms, on_done, L) < 0) {
		if (j)
			j->destroy(j);
		return hx_raise(L, "INTERNAL", "curl multi poll failed");
	}
	for (; j; j = jobs_take_done(q)) {
		lua_createtable(L, 0, 4);
		lua_pushinteger(L, (lua_Integer)j->id);
		lua_setfield(L, -2, "id");
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, "job");
		j->push(j, L);
		lua_setfield(L, -2, "result");
		j->destroy(j);
		lua_seti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
	}
	return 1;
}

/* --- embedded sources, logging, redaction --- */

/* core.embedded(modname) -> source, chunkname | nil */
static int l_embedded(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);

	for (const struct hypd_chunk *c = hypd_embedded; c->module; c++)
		if (strcmp(c->module, name) == 0) {
			lua_pushlstring(L, c->data, (size_t)c->size);
			lua_pushstring(L, c->chunkname);
			return 2;
		}
	return 0;
}

/* core.embedded_list(prefix) -> array of module names */
static int l_embedded_list(lua_State *L)
{
	const char *prefix = luaL_optstring(L, 1, "");
	size_t pl = strlen(prefix);
	lua_Integer n = 0;

	lua_newtable(L);
	for (const struct hypd_chunk *c = hypd_embedded; c->module; c++)
		if (strncmp(c->module, prefix, pl) == 0) {
			lua_pushstring(L, c->module);
			lua_seti(L, -2, ++n);
		}
	return 1;
}

static int l_redact(lua_State *L)
{
	size_t len, outlen;
	const char *s = luaL_checklstring(L, 1, &len);
	char *r = log_redact(s, len, &outlen);

	if (!r)
		return luaL_error(L, "out of memory");
	lua_pushlstring(L, r, outlen);
	free(r);
	return 1;
}

static int l_add_secret(lua_State *L)
{
	if (log_add_secret(luaL_checkstring(L, 1)) != 0)
		return luaL_error(L, "out of memory");
	return 0;
}

/* --- the HTTP server --- */

static hserver *get_server(lua_State *L)
{
	hserver *s;

	lua_getfield(L, LUA_REGISTRYINDEX, SERVER_KEY);
	s = lua_touserdata(L, -1);
	lua_pop(L, 1);
	return s;
}

/* core.server_start(addr, port [, max_body]) -> port | nil, err */
static int l_server_start(lua_State *L)
{
	const char *addr = luaL_checkstring(L, 1);
	lua_Integer port = luaL_checkinteger(L, 2);
	lua_Integer max_body = luaL_optinteger(L, 3, 0);
	char err[256];
	hserver *s;

	luaL_argcheck(L, port >= 0 && port <= 65535, 2, "a port from 0 to 65535");
	if (get_server(L))
		return hx_fail(L, "STATE", "a server is already running");
	s = hserver_start(addr, (int)port, lua_engine_jobs(L), (size_t)max_body, err, sizeof err);
	if (!s)
		return hx_fail(L, "LISTEN", "%s", err);
	lua_pushlightuserdata(L, s);
	lua_setfield(L, LUA_REGISTRYINDEX, SERVER_KEY);
	lua_pushinteger(L, hserver_port(s));
	return 1;
}

/* core.server_respond(id, status, headers, body) -> true | false (client gone) */
static int l_server_respond(lua_State *L)
{
	lua_Integer id = luaL_checkinteger(L, 1);
	int status = (int)luaL_checkinteger(L, 2);
	size_t len, n = 0;
	const char *body;
	const char **lines;
	hserver *s = get_server(L);

	luaL_checktype(L, 3, LUA_TTABLE);
	body = luaL_optlstring(L, 4, "", &len);
	if (!s)
		return hx_raise(L, "STATE", "no server is running");
	lua_pushnil(L);
	while (lua_next(L, 3))
		lua_pop(L, 1), n++;
	lines = lua_newuserdatauv(L, (n + 1) * sizeof *lines, 0);
	n = 0;
	lua_pushnil(L);
	while (lua_next(L, 3)) {
		luaL_checkstack(L, 4, "headers");
		if (lua_type(L, -2) != LUA_TSTRING || !lua_isstring(L, -1))
			return luaL_error(L, "headers must map names to strings");
		lua_pushfstring(L, "%s: %s", lua_tostring(L, -2), lua_tostring(L, -1));
		lines[n++] = lua_tostring(L, -1);
		lua_insert(L, -3);
		lua_pop(L, 1);
	}
	lines[n] = NULL;
	lua_pushboolean(L, hserver_respond(s, (uint64_t)id, status, lines, body, len) == 0);
	return 1;
}

/* core.listening() -> port | nil */
static int l_listening(lua_State *L)
{
	hserver *s = get_server(L);

	if (!s)
		return 0;
	lua_pushinteger(L, hserver_port(s));
	return 1;
}

void lua_engine_close(lua_State *L)
{
	hserver *s = get_server(L);

	if (s) {
		hserver_stop(s);
		lua_pushnil(L);
		lua_setfield(L, LUA_REGISTRYINDEX, SERVER_KEY);
	}
}

static int l_server_stop(lua_State *L)
{
	lua_engine_close(L);
	return 0;
}

/* --- bytes: base64, digests, randomness --- */

/* core.b64encode(s [, url]) -> base64 (url: base64url without padding) */
static int l_b64encode(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	int url = lua_toboolean(L, 2);
	luaL_Buffer b;
	size_t n = 4 * ((len + 2) / 3);
	char *out = luaL_buffinitsize(L, &b, n + 1);
	int w = EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len);

	if (url) {
		for (int i = 0; i < w; i++)
			out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
		while (w > 0 && out[w - 1] == '=')
			w--;
	}
	luaL_pushresultsize(&b, (size_t)w);
	return 1;
}

/* core.b64decode(s) -> bytes, or nil when s is not base64 */
static int l_b64decode(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	luaL_Buffer b;
	char *out;
	int w, pad = 0;

	if (len % 4 != 0)
		return 0;
	out = luaL_buffinitsize(L, &b, len / 4 * 3 + 1);
	w = len ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len) : 0;
	if (w < 0)
		return 0;
	while (pad < 2 && len > (size_t)pad && s[len - 1 - pad] == '=')
		pad++;
	luaL_pushresultsize(&b, (size_t)(w - pad));
	return 1;
}

/* core.digest("sha256"|"md5", data, "hex"|"base64"|"raw") */
static int l_digest(lua_State *L)
{
	static const char *const algs[] = { "sha256", "md5", NULL };
	static const char *const encs[] = { "hex", "base64", "raw", NULL };
	int alg = luaL_checkoption(L, 1, NULL, algs);
	size_t len;
	const char *data = luaL_checklstring(L, 2, &len);
	int enc = luaL_checkoption(L, 3, "hex", encs);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];

	if (!EVP_Digest(data, len, md, &mdlen, alg == 0 ? EVP_sha256() : EVP_md5(), NULL))
		return hx_raise(L, "INTERNAL", "digest failed");
	if (enc == 2) {
		lua_pushlstring(L, (const char *)md, mdlen);
	} else if (enc == 1) {
		char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];

		lua_pushlstring(L, b64, (size_t)EVP_EncodeBlock((unsigned char *)b64, md, (int)mdlen));
	} else {
		for (unsigned int i = 0; i < mdlen; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
		lua_pushlstring(L, hex, 2 * mdlen);
	}
	return 1;
}

/* core.random_bytes(n) -> n cryptographically random bytes */
static int l_random_bytes(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);
	luaL_Buffer b;
	unsigned char *out;

	luaL_argcheck(L, n >= 0 && n <= 4096, 1, "0 to 4096 bytes");
	out = (unsigned char *)luaL_buffinitsize(L, &b, (size_t)n);
	if (n > 0 && RAND_bytes(out, (int)n) != 1)
		return hx_raise(L, "INTERNAL", "no randomness available");
	luaL_pushresultsize(&b, (size_t)n);
	return 1;
}

static const luaL_Reg core_funcs[] = {
	{ "server_start", l_server_start },
	{ "server_respond", l_server_respond },
	{ "server_stop", l_server_stop },
	{ "listening", l_listening },
	{ "b64encode", l_b64encode },
	{ "b64decode", l_b64decode },
	{ "digest", l_digest },
	{ "random_bytes", l_random_bytes },
	{ "now", l_now },
	{ "mono", l_mono },
	{ "wall", l_wall },
	{ "virtual", l_virtual },
	{ "advance_to", l_advance_to },
	{ "guard", l_guard },
	{ "arm", l_arm },
	{ "disarm", l_disarm },
	{ "interrupted", l_interrupted },
	{ "error", l_error },
	{ "http_start", l_http_start },
	{ "http_cancel", l_http_cancel },
	{ "inflight", l_inflight },
	{ "poll", l_poll },
	{ "embedded", l_embedded },
	{ "embedded_list", l_embedded_list },
	{ "redact", l_redact },
	{ "add_secret", l_add_secret },
	{ NULL, NULL },
};

int luaopen_hypd_core(lua_State *L)
{
	luaL_newlib(L, core_funcs);
	luaL_getmetatable(L, HX_ERROR_MT);
	lua_setfield(L, -2, "error_mt");
	return 1;
}

/* log.write(level, component, message) */
static int l_log_write(lua_State *L)
{
	static const char *const levels[] = { "debug", "info", "warn", "error", NULL };
	int level = luaL_checkoption(L, 1, NULL, levels);
	const char *component = luaL_checkstring(L, 2);
	const char *msg = luaL_checkstring(L, 3);

	log_write((enum log_level)level, component, msg);
	return 0;
}

static int l_log_level(lua_State *L)
{
	static const char *const names[] = { "debug", "info", "warn", "error", "off" };

	lua_pushstring(L, names[log_get_level()]);
	return 1;
}

static const luaL_Reg log_funcs[] = {
	{ "write", l_log_write },
	{ "level", l_log_level },
	{ NULL, NULL },
};

int luaopen_hypd_log(lua_State *L)
{
	luaL_newlib(L, log_funcs);
	return 1;
}
