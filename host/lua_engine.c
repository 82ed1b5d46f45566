/* lua_engine: module "hypd.core" (see lua_engine.h); the HTTP server
 * ("hypd._server") and the system functions ("hypd.sys") are modules of
 * their own, in lua_server.c and lua_sys.c. */
#include "lua_engine.h"

#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "awssign.h"
#include "clock.h"
#include "ekstoken.h"
#include "embedded.h"
#include "jobs.h"
#include "log.h"
#include "lua_server.h"
#include "luax.h"

#define HTTP_KEY "hypd.httpc"
#define JOBS_KEY "hypd.jobs"
#define STREAM_MT "hypd.http_stream"
#define HOOK_EVERY 1000

#define CHUNKS_KEY "hypd.playbook_chunks" /* chunk name -> true: code the hook may preempt */
#define PENDING_KEY "hypd.pending_error" /* the error the hook raises in the task next */
#define NESTED_KEY "hypd.preemptible" /* weak set of coroutines whose resumer passes a preemption up */

/*
 * The guard of the task that runs now (one engine thread, so one at a time).
 * The count hook checks it every HOOK_EVERY instructions of the task and of
 * the coroutines it creates (they inherit the hook):
 *   - it raises (an error with abort = true) when the engine is interrupted,
 *     the task's deadline passed, this run passed slice_end, or the task
 *     spent its CPU budget (CPU time of the engine thread while it ran);
 *   - past preempt_at, where the task's own coroutine runs playbook code
 *     (a chunk core.playbook_chunk named) and may yield, it yields it with
 *     no values (Lua 5.4 lets a count hook yield so): the engine puts the
 *     task back in the ready queue, behind the network. So does a
 *     coroutine a playbook made (core.preemptible): its resumer, the
 *     playbook's coroutine.resume, sees core.preempted() and passes the
 *     preemption up as a checkpoint. Host code is never preempted: between
 *     its own yields it may count on running alone;
 *   - an error left by core.arm(..., err) is raised at the task's first
 *     instruction (a yield the engine cannot answer fails where it was made).
 */
static struct {
	int armed;             /* a task is running under the guard */
	int steady;            /* the host's interrupt does not strike it (the in-process sandbox) */
	double deadline;       /* engine-clock deadline, 0 = none */
	double slice_end;      /* real monotonic end of this run slice, 0 = none */
	int budgeted;          /* the task has a CPU budget */
	int budget_cpu;        /* it counts CPU time (else real time while it runs) */
	double budget_left;    /* CPU seconds left of it when this run began */
	double armed_mono;     /* hclock_mono() when this run began */
	double armed_cpu;      /* thread_cpu() when this run began */
	double budget;         /* that budget in seconds (for the message) */
	double preempt_at;     /* real monotonic time from which playbook code is preempted, 0 = never */
	lua_State *co;         /* the task's own coroutine (the only one the hook yields) */
	int preempted;         /* the hook yielded co during this run */
	int spent;             /* the hook raised the CPU budget's error during this run */
	int pending;           /* PENDING_KEY holds an error to raise in co */
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
int lua_engine_interrupted(void) { return interrupted != 0; }

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

/* --- SIGHUP: an operator asks a server to re-read its playbooks --- */

static volatile sig_atomic_t hangups;	/* SIGHUPs received */
static httpc *hangup_http;		/* woken by the handler (not owned) */

static void on_hangup(int sig)
{
	(void)sig;
	hangups++;
	if (hangup_http)
		httpc_wakeup(hangup_http);
}

/* core.hangups() -> the number of SIGHUPs received; the first call installs
 * the handler (the process no longer ends on SIGHUP) */
static int l_hangups(lua_State *L)
{
	if (!hangup_http) {
		struct sigaction sa;

		hangup_http = get_http(L);
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_hangup;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGHUP, &sa, NULL);
	}
	lua_pushinteger(L, (lua_Integer)hangups);
	return 1;
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

/* CPU seconds the engine thread has used (what a task's budget counts:
 * neither other processes on a busy machine nor a wait in a system call
 * eat into it). */
static double thread_cpu(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return hclock_mono(); /* no such clock: real time, which only over-counts */
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Has this run spent the task's budget? CPU time never runs ahead of real
 * time, so the CPU clock (a system call) is read only once real time says
 * it may have. */
static int over_budget(double mono)
{
	if (mono - guard.armed_mono < guard.budget_left)
		return 0;
	return !guard.budget_cpu || thread_cpu() - guard.armed_cpu >= guard.budget_left;
}

/* core.cpu() -> CPU seconds the engine thread has used */
static int l_cpu(lua_State *L)
{
	lua_pushnumber(L, thread_cpu());
	return 1;
}

/* Is the function running in L (ar, from the hook) code of a playbook? */
static int playbook_code(lua_State *L, lua_Debug *ar)
{
	int yes;

	if (!lua_getinfo(L, "S", ar) || ar->source == NULL)
		return 0;
	lua_getfield(L, LUA_REGISTRYINDEX, CHUNKS_KEY);
	yes = lua_istable(L, -1) && lua_getfield(L, -1, ar->source) == LUA_TBOOLEAN;
	lua_pop(L, 2);
	return yes;
}

/* May the hook yield L? The task's own coroutine, or one marked by
 * core.preemptible. */
static int preemptible(lua_State *L)
{
	int yes;

	if (L == guard.co)
		return 1;
	if (lua_getfield(L, LUA_REGISTRYINDEX, NESTED_KEY) != LUA_TTABLE) {
		lua_pop(L, 1);
		return 0;
	}
	lua_pushthread(L);
	yes = lua_rawget(L, -2) == LUA_TBOOLEAN;
	lua_pop(L, 2);
	return yes;
}

static void guard_hook(lua_State *L, lua_Debug *ar)
{
	const char *code = "TIMEOUT";
	char why[200] = "";
	double mono;

	if (guard.pending && L == guard.co) {
		guard.pending = 0;
		lua_sethook(L, guard_hook, LUA_MASKCOUNT, HOOK_EVERY);
		lua_getfield(L, LUA_REGISTRYINDEX, PENDING_KEY);
		lua_pushnil(L);
		lua_setfield(L, LUA_REGISTRYINDEX, PENDING_KEY);
		lua_error(L);
	}
	if (!guard.armed)
		return;
	mono = hclock_mono();
	if (interrupted && !guard.steady) {
		snprintf(why, sizeof why, "interrupted");
		code = "CANCELLED";
	} else if (guard.deadline > 0 && hclock_now() >= guard.deadline) {
		snprintf(why, sizeof why, "deadline exceeded");
	} else if (guard.budgeted && over_budget(mono)) {
		snprintf(why, sizeof why, "used its CPU budget of %gs without waiting on a timer, the network, "
			 "a job or a signal (sleep(0) and checkpoints are no waits): a CPU loop?", guard.budget);
		code = "CPU";
		guard.budgeted = 0; /* once: the code that catches it may answer */
		guard.spent = 1;
	} else if (guard.slice_end > 0 && mono >= guard.slice_end) {
		snprintf(why, sizeof why, "ran too long without yielding (CPU loop?)");
		guard.slice_end = 0;
	}
	if (!why[0]) {
		if (guard.preempt_at > 0 && mono >= guard.preempt_at && lua_isyieldable(L) && preemptible(L) &&
		    playbook_code(L, ar)) {
			guard.preempted = 1;
			lua_yield(L, 0); /* returns; the VM yields once the hook is done */
		}
		return;
	}
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

/* mark(L, key, weak): registry[key][arg 1] = true, the set made on first
 * use (weak: its keys do not keep coroutines alive) */
static void mark(lua_State *L, const char *key, int weak)
{
	if (lua_getfield(L, LUA_REGISTRYINDEX, key) != LUA_TTABLE) {
		lua_pop(L, 1);
		lua_newtable(L);
		if (weak) {
			lua_newtable(L);
			lua_pushliteral(L, "k");
			lua_setfield(L, -2, "__mode");
			lua_setmetatable(L, -2);
		}
		lua_pushvalue(L, -1);
		lua_setfield(L, LUA_REGISTRYINDEX, key);
	}
	lua_pushvalue(L, 1);
	lua_pushboolean(L, 1);
	lua_rawset(L, -3);
	lua_pop(L, 1);
}

/* core.preemptible(co): the hook may preempt coroutine co, a playbook's,
 * whose resumer checks core.preempted() each time it returns */
static int l_preemptible(lua_State *L)
{
	luaL_argexpected(L, lua_tothread(L, 1) != NULL, 1, "thread");
	mark(L, NESTED_KEY, 1);
	return 0;
}

/* core.preempted() -> true once after the hook preempted a coroutine
 * (core.preemptible) that has returned to its resumer */
static int l_preempted(lua_State *L)
{
	lua_pushboolean(L, guard.preempted);
	guard.preempted = 0;
	return 1;
}

/* core.playbook_chunk(chunkname): code loaded under that name is a
 * playbook's, which the hook may preempt (see the guard above) */
static int l_playbook_chunk(lua_State *L)
{
	luaL_checkstring(L, 1);
	mark(L, CHUNKS_KEY, 0);
	return 0;
}

/*
 * core.arm(co, deadline|nil, slice|nil, preempt|nil, budget_left|nil,
 * budget|nil, err|nil, cpu, steady): before resuming task coroutine co. slice:
 * real seconds this run may last; preempt: real seconds after which
 * playbook code yields; budget_left: seconds the task has left of budget
 * (<= 0: none left, it fails at its first hook), CPU seconds (core.cpu)
 * when cpu is true, else real seconds while it runs; err: raised in co at
 * its first instruction; steady: the host's interrupt does not strike it
 * (the in-process sandbox).
 */
static int l_arm(lua_State *L)
{
	lua_State *co = lua_tothread(L, 1);
	double now = hclock_mono();
	double slice = luaL_optnumber(L, 3, 0), preempt = luaL_optnumber(L, 4, 0);

	luaL_argexpected(L, co != NULL, 1, "thread");
	guard.steady = lua_toboolean(L, 9);
	guard.deadline = luaL_optnumber(L, 2, 0);
	guard.slice_end = slice > 0 ? now + slice : 0;
	guard.preempt_at = preempt > 0 ? now + preempt : 0;
	guard.budgeted = !lua_isnoneornil(L, 5);
	guard.budget_left = guard.budgeted ? luaL_checknumber(L, 5) : 0;
	guard.armed_mono = now;
	guard.budget_cpu = lua_toboolean(L, 8);
	guard.armed_cpu = guard.budgeted && guard.budget_cpu ? thread_cpu() : 0;
	guard.budget = luaL_optnumber(L, 6, 0);
	guard.co = co;
	guard.preempted = 0;
	guard.spent = 0;
	guard.pending = !lua_isnoneornil(L, 7);
	if (guard.pending) {
		lua_settop(L, 7);
		lua_setfield(L, LUA_REGISTRYINDEX, PENDING_KEY);
		lua_sethook(co, guard_hook, LUA_MASKCOUNT, 1);
	}
	guard.armed = 1;
	return 0;
}

/* core.disarm() -> preempted, spent: preempted when the hook yielded the
 * task (no engine request: put it back in the ready queue); spent when it
 * raised the CPU budget's error (the code that caught it starts afresh) */
static int l_disarm(lua_State *L)
{
	if (guard.pending) { /* never reached an instruction: drop it */
		guard.pending = 0;
		lua_sethook(guard.co, guard_hook, LUA_MASKCOUNT, HOOK_EVERY);
		lua_pushnil(L);
		lua_setfield(L, LUA_REGISTRYINDEX, PENDING_KEY);
	}
	guard.armed = 0;
	guard.co = NULL;
	lua_pushboolean(L, guard.preempted);
	lua_pushboolean(L, guard.spent);
	guard.preempted = 0;
	guard.spent = 0;
	return 2;
}

/* core.interrupted([clear]): was lua_engine_interrupt called? The argument
 * is read before the answer is pushed: read after, with no argument, index 1
 * was the answer itself, so a plain question (op.stopping(), an until_fn)
 * cleared the interrupt it saw, and hypd serve's loop never saw its SIGTERM. */
static int l_interrupted(lua_State *L)
{
	int clear = lua_toboolean(L, 1);

	lua_pushboolean(L, interrupted);
	if (clear)
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

/* The string on top of the stack, field `name` of a request (NULL when it
 * is nil and optional); anything else raises VALIDATION naming the field.
 * A playbook's bad option thus reads as what it is, not as "bad argument #-1". */
static const char *field_string(lua_State *L, const char *name, int optional)
{
	if (lua_isstring(L, -1))
		return lua_tostring(L, -1);
	if (optional && lua_isnil(L, -1))
		return NULL;
	hx_raise(L, "VALIDATION", "hypd.http: request field %s must be a string%s, not %s", name,
		 optional ? " (or absent)" : "", luaL_typename(L, -1));
	return NULL;
}

/* Reads req table at idx; header strings are pushed on the stack (kept alive). */
static void read_request(lua_State *L, int idx, struct req_build *b)
{
	size_t n = 0;
	double idle;

	memset(&b->req, 0, sizeof b->req);
	lua_getfield(L, idx, "url");
	b->req.url = field_string(L, "url", 0);
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
	p.service = field_string(L, "aws.service", 0);
	lua_getfield(L, -2, "region");
	p.region = field_string(L, "aws.region", 0);
	lua_getfield(L, -3, "profile");
	p.profile = field_string(L, "aws.profile", 1);
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
	cluster = field_string(L, "eks.cluster", 0);
	lua_getfield(L, -2, "region");
	region = field_string(L, "eks.region", 0);
	lua_getfield(L, -3, "profile");
	profile = field_string(L, "eks.profile", 1);
	lua_getfield(L, -4, "sts_url");
	sts_url = field_string(L, "eks.sts_url", 0);
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

/* The request table at 1, read, signed (req.aws) or with its EKS token
 * (req.eks) into b. Returns 0, or pushes nil, err and returns 2. */
static int build_request(lua_State *L, struct req_build *b)
{
	luaL_checktype(L, 1, LUA_TTABLE);
	read_request(L, 1, b);
	if (sign_request(L, 1, b) != 0 || eks_request(L, 1, b) != 0)
		return 2;
	return 0;
}

/*
 * A streaming transfer's handle (liolib's shape): born closed, before the
 * transfer exists; close, __close and __gc are one idempotent function
 * that cancels the transfer. Lua's hypd.http stream owns one, so a stream
 * dropped mid-transfer is cancelled when it is collected.
 */
struct lstream {
	httpc *h;              /* the client (outlives the state: lua_engine_set_http) */
	uint64_t id;           /* the transfer */
	int open;              /* started and not yet closed */
};

/*
 * Cancels that wait for httpc_poll to return. Its callbacks push Lua
 * values, so the collector, and a stream's __gc, may run inside them while
 * httpc walks the lists a cancel changes: a __gc then only queues the id.
 * Engine thread only; flushed after every poll, by core.inflight and by
 * lua_engine_close.
 */
static struct {
	int polling;           /* inside httpc_poll */
	struct later_cancel {
		httpc *h;      /* the client */
		uint64_t id;   /* the transfer */
	} *v;                  /* queued cancels, owned */
	size_t n, cap;         /* queued, allocated */
} later;

static void flush_later(void)
{
	for (size_t i = 0; i < later.n; i++)
		httpc_cancel(later.v[i].h, later.v[i].id);
	later.n = 0;
}

/* Cancels ls's transfer unless it is closed; 1 when it was open. */
static int close_stream(struct lstream *ls)
{
	if (!ls->open)
		return 0;
	ls->open = 0;
	if (!later.polling) {
		httpc_cancel(ls->h, ls->id); /* -1 when it already ended: fine */
		return 1;
	}
	if (later.n == later.cap) {
		size_t cap = later.cap ? later.cap * 2 : 16;
		struct later_cancel *v = realloc(later.v, cap * sizeof *v);

		if (!v) {
			/* the task that opened it still cancels it when it ends */
			log_msg(LOG_ERROR, "engine", "out of memory: transfer %llu runs on until its task ends",
				(unsigned long long)ls->id);
			return 1;
		}
		later.v = v;
		later.cap = cap;
	}
	later.v[later.n++] = (struct later_cancel){ ls->h, ls->id };
	return 1;
}

/* The stream handle at idx, which must be open; raises CLOSED naming it. */
static struct lstream *check_stream(lua_State *L, int idx)
{
	struct lstream *ls = luaL_checkudata(L, idx, STREAM_MT);

	if (!ls->open)
		hx_raise(L, "CLOSED", "hypd.http_stream %I is closed", (lua_Integer)ls->id);
	return ls;
}

/* h:close() -> true | false (already closed); also __close and __gc */
static int l_stream_close(lua_State *L)
{
	lua_pushboolean(L, close_stream(luaL_checkudata(L, 1, STREAM_MT)));
	return 1;
}

/* h:id() -> the transfer id its events carry (kept after close) */
static int l_stream_id(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)((struct lstream *)luaL_checkudata(L, 1, STREAM_MT))->id);
	return 1;
}

/* h:isopen() -> true | false */
static int l_stream_isopen(lua_State *L)
{
	lua_pushboolean(L, ((struct lstream *)luaL_checkudata(L, 1, STREAM_MT))->open);
	return 1;
}

/* h:pause(paused) -> true | false (the transfer ended): while paused it
 * takes no more bytes, so the sender waits. Raises CLOSED after close. */
static int l_stream_pause(lua_State *L)
{
	struct lstream *ls = check_stream(L, 1);

	luaL_checkany(L, 2);
	lua_pushboolean(L, httpc_pause(ls->h, ls->id, lua_toboolean(L, 2)) == 0);
	return 1;
}

static int l_stream_tostring(lua_State *L)
{
	struct lstream *ls = luaL_checkudata(L, 1, STREAM_MT);

	lua_pushfstring(L, "hypd.http_stream %I%s", (lua_Integer)ls->id, ls->open ? "" : " (closed)");
	return 1;
}

static const luaL_Reg stream_methods[] = {
	{ "close", l_stream_close },
	{ "id", l_stream_id },
	{ "isopen", l_stream_isopen },
	{ "pause", l_stream_pause },
	{ NULL, NULL },
};


/* core.http_open(req) -> stream handle, id | nil, err: a streaming
 * transfer (req.stream is implied) whose events carry id */
static int l_http_open(lua_State *L)
{
	httpc *h = get_http(L);
	struct req_build b;
	struct lstream *ls;
	uint64_t id;
	char err[256];

	if (build_request(L, &b) != 0)
		return 2;
	b.req.stream = 1;
	ls = lua_newuserdatauv(L, sizeof *ls, 0);
	memset(ls, 0, sizeof *ls);
	ls->h = h;
	luaL_setmetatable(L, STREAM_MT);
	if (httpc_start(h, &b.req, &id, err, sizeof err) != 0)
		return hx_fail(L, "VALIDATION", "%s", err);
	ls->id = id;
	ls->open = 1;
	lua_pushinteger(L, (lua_Integer)id);
	return 2;
}

/* core.http_start(req) -> id | nil, err */
static int l_http_start(lua_State *L)
{
	httpc *h = get_http(L);
	struct req_build b;
	uint64_t id;
	char err[256];

	if (build_request(L, &b) != 0)
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

/*
 * core.inflight([work]) -> HTTP transfers and jobs the engine still waits
 * for; with work = true, without the arrivals from servers it has not read
 * yet (what a leak check counts: work somebody started)
 */
static int l_inflight(lua_State *L)
{
	jobs *q = lua_engine_jobs(L);
	int n;

	flush_later();
	n = httpc_inflight(get_http(L)) + jobs_pending(q);

	if (lua_toboolean(L, 1))
		n -= jobs_arrivals(q);
	lua_pushinteger(L, n);
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

static int collect_in_poll; /* callbacks left that collect first (core.gc_in_poll) */

/* core.gc_in_poll(n): for tests, the next n callbacks of core.poll each
 * run a full collection first, so finalizers run where they must not
 * touch libcurl (a stream's __gc then queues its cancel) */
static int l_gc_in_poll(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);

	luaL_argcheck(L, n >= 0 && n <= 1000, 1, "from 0 to 1000 callbacks");
	collect_in_poll = (int)n;
	return 0;
}

static void maybe_collect(lua_State *L)
{
	if (collect_in_poll > 0) {
		collect_in_poll--;
		lua_gc(L, LUA_GCCOLLECT);
	}
}

/* Appends one finished transfer to the result array on top of the stack. */
static void on_done(void *ud, httpc_response *r)
{
	lua_State *L = ud;

	maybe_collect(L);
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

	maybe_collect(L);
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
	int rc;

	lua_settop(L, 1);
	lua_newtable(L);
	/* the callback pushes Lua values: a Lua memory error inside it would
	 * leak that one transfer's buffers (only at the state's memory cap) */
	if ((j = jobs_take_done(q)) != NULL)
		ms = 0; /* a job already finished: do not sleep */
	flush_later();
	later.polling = 1;
	rc = httpc_poll(h, ms, on_done, on_data, L);
	later.polling = 0;
	flush_later();
	if (rc < 0) {
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

/* lua_engine.h: stops the servers, then makes the queued cancels. */
void lua_engine_close(lua_State *L)
{
	lua_server_close(L);
	flush_later();
	free(later.v);
	later.v = NULL;
	later.cap = 0;
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

/* core.add_secret(value [, kind]): kind "host" (the default), "operation"
 * (held until core.release_secret) or "caller" (log.h says how long each is kept) */
static int l_add_secret(lua_State *L)
{
	static const char *const kinds[] = { "host", "operation", "caller", NULL };
	const char *v = luaL_checkstring(L, 1);
	int kind = luaL_checkoption(L, 2, "host", kinds);

	if (log_add_secret_as(v, (enum log_secret_kind)kind) != 0)
		return luaL_error(L, "out of memory");
	return 0;
}

/* core.release_secret(value): an operation that held value ended */
static int l_release_secret(lua_State *L)
{
	log_release_secret(luaL_checkstring(L, 1));
	return 0;
}

static const luaL_Reg core_funcs[] = {
	{ "now", l_now },
	{ "mono", l_mono },
	{ "cpu", l_cpu },
	{ "wall", l_wall },
	{ "virtual", l_virtual },
	{ "advance_to", l_advance_to },
	{ "guard", l_guard },
	{ "playbook_chunk", l_playbook_chunk },
	{ "preemptible", l_preemptible },
	{ "preempted", l_preempted },
	{ "arm", l_arm },
	{ "disarm", l_disarm },
	{ "interrupted", l_interrupted },
	{ "error", l_error },
	{ "http_start", l_http_start },
	{ "http_open", l_http_open },
	{ "http_cancel", l_http_cancel },
	{ "inflight", l_inflight },
	{ "hangups", l_hangups },
	{ "gc_in_poll", l_gc_in_poll },
	{ "poll", l_poll },
	{ "embedded", l_embedded },
	{ "embedded_list", l_embedded_list },
	{ "redact", l_redact },
	{ "add_secret", l_add_secret },
	{ "release_secret", l_release_secret },
	{ NULL, NULL },
};

int luaopen_hypd_core(lua_State *L)
{
	luaL_newlib(L, core_funcs);
	hx_newclass(L, STREAM_MT, stream_methods, l_stream_close, l_stream_close, l_stream_tostring);
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
