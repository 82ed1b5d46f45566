/* lua_engine: module "hypd.core" (see lua_engine.h). */
#include "lua_engine.h"

#include <dirent.h>
#include <errno.h>
#include <lauxlib.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

#include "awssign.h"
#include "clock.h"
#include "creds.h"
#include "ekstoken.h"
#include "embedded.h"
#include "jobs.h"
#include "log.h"
#include "luax.h"
#include "server.h"
#include "tlsgen.h"
#include "websocket.h"

#define HTTP_KEY "hypd.httpc"
#define JOBS_KEY "hypd.jobs"
#define SERVERS_KEY "hypd.servers"        /* handle -> hserver */
#define SERVER_SEQ_KEY "hypd.server_seq"  /* the last handle given */
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
	double idle;

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
	lua_getfield(L, idx, "stream");
	b->req.stream = lua_toboolean(L, -1);
	lua_getfield(L, idx, "idle_timeout");
	idle = luaL_optnumber(L, -1, 0);
	/* whole seconds for libcurl; a fraction rounds up; at most a day */
	b->req.idle_timeout = idle > 0 ? (long)ceil(idle < 86400 ? idle : 86400) : 0;
	lua_pop(L, 11);

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

/*
 * Adds "Authorization: Bearer <EKS token>" when req.eks = {cluster, region,
 * profile, sts_url} is set (and req.aws is not): the token is made in C
 * from the cached credentials (resolve them first) and only the header
 * string, kept on the stack, exists on the Lua side, as for req.aws.
 * Returns 0, or pushes nil, err and returns 2.
 */
static int eks_request(lua_State *L, int idx, struct req_build *b)
{
	const char *cluster, *region, *profile, *sts_url;
	char err[256], *token = NULL;
	time_t expires;

	if (lua_getfield(L, idx, "eks") != LUA_TTABLE) {
		lua_pop(L, 1);
		return 0;
	}
	if (lua_getfield(L, idx, "aws") != LUA_TNIL)
		return hx_fail(L, "VALIDATION", "a request is either AWS-signed (aws) or EKS (eks), not both");
	lua_pop(L, 1);
	lua_getfield(L, -1, "cluster");
	cluster = luaL_checkstring(L, -1);
	lua_getfield(L, -2, "region");
	region = luaL_checkstring(L, -1);
	lua_getfield(L, -3, "profile");
	profile = luaL_optstring(L, -1, NULL);
	lua_getfield(L, -4, "sts_url");
	sts_url = luaL_checkstring(L, -1);
	if (eks_token(sts_url, cluster, region, profile, (time_t)hclock_now(), &token, &expires, err,
		      sizeof err) != 0)
		return hx_fail(L, "CREDENTIALS", "EKS token for cluster %s: %s", cluster, err);
	lua_pushfstring(L, "Authorization: Bearer %s", token);
	OPENSSL_cleanse(token, strlen(token));
	free(token);
	b->hdrs[b->nhdrs++] = lua_tostring(L, -1);
	b->hdrs[b->nhdrs] = NULL;
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
	if (eks_request(L, 1, &b) != 0)
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

/* core.http_pause(id, paused) -> true | false (no such stream): while
 * paused a stream takes no more bytes, so the sender waits */
static int l_http_pause(lua_State *L)
{
	lua_Integer id = luaL_checkinteger(L, 1);

	luaL_checkany(L, 2);
	lua_pushboolean(L, httpc_pause(get_http(L), (uint64_t)id, lua_toboolean(L, 2)) == 0);
	return 1;
}

/* core.inflight() -> HTTP transfers and jobs the engine still waits for */
static int l_inflight(lua_State *L)
{
	lua_pushinteger(L, httpc_inflight(get_http(L)) + jobs_pending(lua_engine_jobs(L)));
	return 1;
}

/* Pushes a table of response headers (lower-case names). */
static void push_headers(lua_State *L, const httpc_header *h, size_t n)
{
	lua_createtable(L, 0, (int)n);
	for (size_t i = 0; i < n; i++) {
		/* repeated headers join with ", " as RFC 9110 allows */
		if (lua_getfield(L, -1, h[i].name) == LUA_TSTRING) {
			lua_pushfstring(L, "%s, %s", lua_tostring(L, -1), h[i].value);
			lua_remove(L, -2);
		} else {
			lua_pop(L, 1);
			lua_pushstring(L, h[i].value);
		}
		lua_setfield(L, -2, h[i].name);
	}
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
		push_headers(L, r->headers, r->nheaders);
		lua_setfield(L, -2, "headers");
		lua_pushlstring(L, r->body, r->body_len);
		lua_setfield(L, -2, "body");
	}
	lua_pushnumber(L, r->seconds);
	lua_setfield(L, -2, "seconds");
	lua_seti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
}

/* Appends {id, status, data [, headers]} for new bytes of a stream. */
static void on_data(void *ud, const httpc_chunk *c)
{
	lua_State *L = ud;

	lua_createtable(L, 0, 4);
	lua_pushinteger(L, (lua_Integer)c->id);
	lua_setfield(L, -2, "id");
	lua_pushinteger(L, c->status);
	lua_setfield(L, -2, "status");
	if (c->headers) {
		push_headers(L, c->headers, c->nheaders);
		lua_setfield(L, -2, "headers");
	}
	lua_pushlstring(L, c->data, c->len);
	lua_setfield(L, -2, "data");
	lua_seti(L, -2, (lua_Integer)luaL_len(L, -2) + 1);
}

/*
 * core.poll(timeout_seconds|nil) -> array of events: finished transfers
 * {id, status, headers, body, seconds} | {id, err, seconds}; new bytes of a
 * stream {id, status, data, headers (first time only)}; finished jobs
 * {id, job = true, result}.
 */
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
	if (httpc_poll(h, ms, on_done, on_data, L) < 0) {
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

/*
 * core.setenv(name [, value]): sets (or, without value, unsets) an
 * environment variable of the process. Changing an AWS_* variable also
 * forgets the cached credentials, so the provider chain reads the new
 * environment. Only for start-up (hypd serve --sandbox), before any
 * credential resolution runs on a worker.
 */
static int l_setenv(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	const char *value = luaL_optstring(L, 2, NULL);
	int rc = value ? setenv(name, value, 1) : unsetenv(name);

	if (rc != 0)
		return luaL_error(L, "setenv %s: %s", name, strerror(errno));
	if (!strncmp(name, "AWS_", 4))
		creds_reset();
	return 0;
}

/*
 * Standard input, one line at a time, read on a worker so the engine keeps
 * running (MCP over stdio). One read at a time; bytes past the line stay in
 * `in` for the next read. A read waits at most a second, then answers
 * {again = true}, so a blocked read never holds up the worker pool's
 * shutdown for long.
 */
#define STDIN_LINE_MAX ((size_t)16 << 20) /* longest line accepted */

static struct {
	char *buf;     /* bytes read and not yet returned (engine-owned between jobs) */
	size_t len;    /* bytes in buf */
	size_t cap;    /* allocated */
	int eof;       /* read(2) returned 0 */
	int skipping;  /* dropping the rest of a line that was too long */
	int busy;      /* a job is reading (engine thread only) */
} in;

struct stdin_job {
	job base;      /* first: the pool sees a job */
	char *line;    /* the line without its newline (malloc'd), or NULL */
	size_t len;    /* bytes in line */
	int status;    /* 0 line, 1 end of input, 2 nothing yet, 3 too long, 4 error */
	char err[160]; /* the failure (status 4) */
};

/* takes the first line out of in.buf; 1 when there was one */
static int stdin_take(struct stdin_job *s)
{
	char *nl = in.len ? memchr(in.buf, '\n', in.len) : NULL;
	size_t n;

	if (!nl)
		return 0;
	n = (size_t)(nl - in.buf);
	if (in.skipping) {
		in.skipping = 0;
		s->status = 3;
	} else if (!(s->line = malloc(n + 1))) {
		s->status = 4;
		snprintf(s->err, sizeof s->err, "out of memory");
	} else {
		memcpy(s->line, in.buf, n);
		s->line[n] = '\0';
		s->len = n > 0 && s->line[n - 1] == '\r' ? n - 1 : n;
		s->status = 0;
	}
	memmove(in.buf, nl + 1, in.len - n - 1);
	in.len -= n + 1;
	return 1;
}

static void stdin_run(job *j)
{
	struct stdin_job *s = (struct stdin_job *)j;
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	ssize_t got;
	int ready;

	for (;;) {
		if (stdin_take(s))
			return;
		if (in.eof) {
			s->status = 1;
			if (in.len && !in.skipping && (s->line = malloc(in.len + 1))) {
				memcpy(s->line, in.buf, in.len);
				s->line[in.len] = '\0';
				s->len = in.len;
				s->status = 0;
			}
			in.len = 0;
			return;
		}
		if (in.len >= STDIN_LINE_MAX) {
			in.len = 0;
			in.skipping = 1;
		}
		if (in.cap - in.len < 65536) {
			size_t cap = in.cap ? in.cap * 2 : 65536 * 2;
			char *b = realloc(in.buf, cap);

			if (!b) {
				s->status = 4;
				snprintf(s->err, sizeof s->err, "out of memory");
				return;
			}
			in.buf = b;
			in.cap = cap;
		}
		ready = poll(&pfd, 1, 1000);
		got = ready > 0 ? read(0, in.buf + in.len, in.cap - in.len) : -1;
		if (ready == 0 || (got < 0 && (errno == EINTR || errno == EAGAIN))) {
			s->status = 2;
			return;
		}
		if (got < 0) {
			s->status = 4;
			snprintf(s->err, sizeof s->err, "reading standard input: %s", strerror(errno));
			return;
		}
		if (got == 0)
			in.eof = 1;
		in.len += (size_t)got;
	}
}

static void stdin_push(job *j, void *lua_state)
{
	static const char *const flags[] = { NULL, "eof", "again", "too_long" };
	struct stdin_job *s = (struct stdin_job *)j;
	lua_State *L = lua_state;

	in.busy = 0;
	lua_createtable(L, 0, 1);
	if (s->status == 0) {
		lua_pushlstring(L, s->line, s->len);
		lua_setfield(L, -2, "line");
	} else if (s->status == 4) {
		hx_newerror(L, "IO", "%s", s->err);
		lua_setfield(L, -2, "err");
	} else {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, flags[s->status]);
	}
}

static void stdin_destroy(job *j)
{
	struct stdin_job *s = (struct stdin_job *)j;

	free(s->line);
	free(s);
}

/* core.stdin_line() -> job id (await it with _sched.await("job", id));
 * the result is {line = text (no newline)} | {eof = true} | {again = true}
 * (nothing within a second: ask again) | {too_long = true} (a line over
 * 16 MiB was dropped) | {err = IO error} */
static int l_stdin_line(lua_State *L)
{
	jobs *q = lua_engine_jobs(L);
	struct stdin_job *s;
	uint64_t id;

	if (in.busy)
		return hx_raise(L, "STATE", "standard input is already being read");
	if (!(s = calloc(1, sizeof *s)))
		return luaL_error(L, "out of memory");
	s->base.run = stdin_run;
	s->base.push = stdin_push;
	s->base.destroy = stdin_destroy;
	if (!(id = jobs_submit(q, &s->base))) {
		stdin_destroy(&s->base);
		return hx_fail(L, "STATE", "no worker thread could start");
	}
	in.busy = 1;
	lua_pushinteger(L, (lua_Integer)id);
	return 1;
}

/* --- the HTTP servers --- */

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

/* core.server_start(addr, port [, max_body [, tls [, ws]]]) -> handle, port | nil, err
 * tls = {cert_pem = "...", key_pem = "..."} serves HTTPS; ws = {max_message
 * = bytes, ping = seconds, idle = seconds} sets the websocket limits. */
static int l_server_start(lua_State *L)
{
	struct hserver_opts o;
	lua_Integer port = luaL_checkinteger(L, 2);
	lua_Integer max_body = luaL_optinteger(L, 3, 0);
	lua_Integer h;
	char err[256];
	hserver *s;
	jobs *q;
	int t;

	memset(&o, 0, sizeof o);
	o.addr = luaL_checkstring(L, 1);
	luaL_argcheck(L, port >= 0 && port <= 65535, 2, "a port from 0 to 65535");
	luaL_argcheck(L, max_body >= 0, 3, "a size in bytes");
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
/* core.listdir(path) -> sorted array of entry names (no . or ..) | nil, err */
static int l_listdir(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return hx_fail(L, errno == ENOENT ? "NOT_FOUND" : "IO", "%s: %s", path, strerror(errno));
	lua_newtable(L);
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		lua_pushstring(L, e->d_name);
		lua_rawseti(L, -2, ++n);
	}
	closedir(d);
	lua_getglobal(L, "table");
	lua_getfield(L, -1, "sort");
	lua_pushvalue(L, -3);
	lua_call(L, 1, 0);
	lua_pop(L, 1);
	return 1;
}

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

/* --- certificates --- */

/* Pushes nil, err(VALIDATION) with err.field; returns 2. */
static int fail_field(lua_State *L, const char *field, const char *msg)
{
	hx_fail(L, "VALIDATION", "tls_cert: %s", msg);
	lua_pushstring(L, field);
	lua_setfield(L, -2, "field");
	return 2;
}

/* Checks opts[name] has Lua type want (or is absent); 0, or pushes nil, err. */
static int check_field(lua_State *L, const char *name, int want)
{
	int t = lua_getfield(L, 1, name);

	lua_pop(L, 1);
	if (t == LUA_TNIL || t == want)
		return 0;
	lua_pushfstring(L, "field '%s' must be a %s", name, lua_typename(L, want));
	return fail_field(L, name, lua_tostring(L, -1));
}

/*
 * Reads the array opts[name] of strings into a NULL-terminated vector in a
 * userdata left on the stack (the strings stay alive in opts). Returns 0,
 * or pushes nil, err and returns 2.
 */
static int read_strings(lua_State *L, const char *name, const char *const **out)
{
	const char **v;
	lua_Integer n;

	*out = NULL;
	if (lua_getfield(L, 1, name) == LUA_TNIL) {
		lua_pop(L, 1);
		return 0;
	}
	n = luaL_len(L, -1);
	if (n < 0 || n > 1000)
		return fail_field(L, name, "too many entries");
	v = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *v, 0);
	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_geti(L, -2, i) != LUA_TSTRING) {
			lua_pushfstring(L, "field '%s' must be an array of strings", name);
			return fail_field(L, name, lua_tostring(L, -1));
		}
		v[i - 1] = lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	v[n] = NULL;
	lua_remove(L, -2); /* the table stays referenced by opts */
	*out = v;
	return 0;
}

/*
 * core.tls_cert{cn, ca, issuer_cert_pem, issuer_key_pem, ips, dns, days}
 *   -> cert_pem, key_pem | nil, err (VALIDATION naming err.field)
 */
static int l_tls_cert(lua_State *L)
{
	static const char *const names[] = { "cn", "ca", "issuer_cert_pem",
		"issuer_key_pem", "ips", "dns", "days", NULL };
	static const int types[] = { LUA_TSTRING, LUA_TBOOLEAN, LUA_TSTRING,
		LUA_TSTRING, LUA_TTABLE, LUA_TTABLE, LUA_TNUMBER };
	tlsgen_opts o = { 0 };
	char *cert, *key, err[256];
	const char *field;
	int rc;

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
		int i = 0;

		while (names[i] && (lua_type(L, -2) != LUA_TSTRING ||
				    strcmp(names[i], lua_tostring(L, -2)) != 0))
			i++;
		if (!names[i]) {
			const char *key = luaL_tolstring(L, -2, NULL);

			lua_pushfstring(L, "unknown field '%s'", key);
			return fail_field(L, key, lua_tostring(L, -1));
		}
	}
	for (int i = 0; names[i]; i++)
		if (check_field(L, names[i], types[i]))
			return 2;
	lua_getfield(L, 1, "days");
	if (!lua_isnil(L, -1) && !lua_isinteger(L, -1))
		return fail_field(L, "days", "field 'days' must be an integer");
	o.days = (int)luaL_optinteger(L, -1, 0);
	if (lua_tointeger(L, -1) < 0 || lua_tointeger(L, -1) > 100000)
		return fail_field(L, "days", "field 'days' is out of range");
	lua_getfield(L, 1, "cn");
	o.cn = lua_tostring(L, -1);
	lua_getfield(L, 1, "ca");
	o.ca = lua_toboolean(L, -1);
	lua_getfield(L, 1, "issuer_cert_pem");
	o.issuer_cert_pem = lua_tostring(L, -1);
	lua_getfield(L, 1, "issuer_key_pem");
	o.issuer_key_pem = lua_tostring(L, -1);
	if (read_strings(L, "ips", &o.ips) || read_strings(L, "dns", &o.dns))
		return 2;
	/* only a Lua memory error in the two pushes below could leak them */
	rc = tlsgen_cert(&o, &cert, &key, &field, err, sizeof err);
	if (rc != 0) {
		if (field)
			return fail_field(L, field, err);
		return hx_fail(L, "INTERNAL", "tls_cert: %s", err);
	}
	lua_pushstring(L, cert);
	lua_pushstring(L, key);
	free(cert);
	OPENSSL_cleanse(key, strlen(key));
	free(key);
	return 2;
}

static const luaL_Reg core_funcs[] = {
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
	{ "b64encode", l_b64encode },
	{ "b64decode", l_b64decode },
	{ "digest", l_digest },
	{ "random_bytes", l_random_bytes },
	{ "listdir", l_listdir },
	{ "tls_cert", l_tls_cert },
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
	{ "http_pause", l_http_pause },
	{ "inflight", l_inflight },
	{ "poll", l_poll },
	{ "embedded", l_embedded },
	{ "embedded_list", l_embedded_list },
	{ "redact", l_redact },
	{ "add_secret", l_add_secret },
	{ "stdin_line", l_stdin_line },
	{ "setenv", l_setenv },
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
