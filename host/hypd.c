/* hypd: the host object and the embeddable API (see hypd.h). */
#include "hypd.h"

#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "host.h"
#include "http.h"
#include "jobs.h"
#include "json.h"
#include "log.h"
#include "lstate.h"
#include "lua_engine.h"
#include "luax.h"
#include "statedir.h"
#include "statelock.h"
#include "store.h"

struct hypd {
	lua_State *L;      /* the one Lua state, owned */
	store *db;         /* the store, owned */
	httpc *http;       /* the HTTP client, owned */
	jobs *workers;     /* the worker pool for blocking work, owned */
	char *state_dir;   /* resolved state directory */
	char *playbooks;   /* resolved playbook directory or NULL */
	char *region;      /* --region or NULL */
	char *profile;     /* --profile or NULL */
	double timeout;    /* seconds per call, 0 = none */
};

static char *dup_or_null(const char *s) { return s && *s ? strdup(s) : NULL; }

static char *errorf(const char *fmt, const char *a, const char *b)
{
	size_t n = strlen(fmt) + strlen(a) + strlen(b) + 1;
	char *m = malloc(n);

	if (m)
		snprintf(m, n, fmt, a, b);
	return m;
}

/* package.loaded["hypd.config"]: what Lua needs to know about the host */
static void publish_config(hypd *h)
{
	lua_State *L = h->L;

	luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
	lua_createtable(L, 0, 4);
	lua_pushstring(L, h->state_dir);
	lua_setfield(L, -2, "state_dir");
	if (h->playbooks) {
		lua_pushstring(L, h->playbooks);
		lua_setfield(L, -2, "playbooks_dir");
	}
	lua_pushnumber(L, h->timeout);
	lua_setfield(L, -2, "timeout");
	if (h->region) {
		lua_pushstring(L, h->region);
		lua_setfield(L, -2, "region");
	}
	if (h->profile) {
		lua_pushstring(L, h->profile);
		lua_setfield(L, -2, "profile");
	}
	lua_pushliteral(L, HYPD_VERSION);
	lua_setfield(L, -2, "version");
	lua_setfield(L, -2, "hypd.config");
	lua_pop(L, 1);
}

static void wake_engine(void *http) { httpc_wakeup(http); }

hypd *hypd_open(const hypd_options *opts, char **err)
{
	hypd_options none = { 0 };
	static int warned; /* the state directory's modes were reported */
	const char *level, *clock_mode;
	char msg[512] = "", note[512];
	hypd *h;

	if (err)
		*err = NULL;
	if (!opts)
		opts = &none;
	level = opts->log_level ? opts->log_level : getenv("HYPD_LOG_LEVEL");
	if (level && *level) {
		if (log_parse_level(level) < 0) {
			if (err)
				*err = errorf("log level '%s' is not one of debug, info, warn, error, off%s",
					      level, "");
			return NULL;
		}
		log_set_level((enum log_level)log_parse_level(level));
	}
	clock_mode = getenv("HYPD_CLOCK");
	if (clock_mode && *clock_mode && strcmp(clock_mode, "virtual") &&
	    strcmp(clock_mode, "real")) {
		if (err)
			*err = errorf("HYPD_CLOCK '%s' must be 'virtual' or 'real'%s",
				      clock_mode, "");
		return NULL;
	}
	if (opts->virtual_clock || (clock_mode && !strcmp(clock_mode, "virtual")))
		hclock_set_virtual(1);

	h = calloc(1, sizeof *h);
	if (!h)
		goto oom;
	h->timeout = opts->timeout;
	h->state_dir = opts->state_dir ? strdup(opts->state_dir) : statedir_default();
	h->playbooks = dup_or_null(opts->playbooks_dir ? opts->playbooks_dir
						      : getenv("HYPD_PLAYBOOKS"));
	h->region = dup_or_null(opts->region);
	h->profile = dup_or_null(opts->profile);
	if (!h->state_dir || (opts->region && !h->region) || (opts->profile && !h->profile))
		goto oom;
	if (statedir_prepare(h->state_dir, msg, sizeof msg, note, sizeof note) != 0) {
		if (err)
			*err = errorf("%s%s", msg, "");
		hypd_close(h);
		return NULL;
	}
	if (note[0] && !warned) {
		warned = 1; /* once per process, whatever the number of hosts */
		log_msg(LOG_WARN, "state", "%s", note);
	}
	if (store_open(h->state_dir, &h->db, msg, sizeof msg) != 0) {
		if (err)
			*err = errorf("cannot open the store in %s: %s", h->state_dir, msg);
		hypd_close(h);
		return NULL;
	}
	/* the virtual clock goes on from the latest time this state recorded:
	 * started at the real time again, it went back as far as the last
	 * process on the state had jumped ahead, and what that process
	 * scheduled at its times (the sandbox's transitions, run_later) came
	 * that much later, after the waits of the resumed operations had
	 * timed out (an add-on left CREATING or UPDATING for 10 minutes) */
	if (hclock_is_virtual()) {
		double latest;

		if (store_latest_time(h->db, &latest) == STORE_OK)
			hclock_advance_to(latest);
	}
	h->http = httpc_new(0);
	h->workers = h->http ? jobs_new(4, wake_engine, h->http) : NULL;
	h->L = lstate_new(opts->memory_limit);
	if (!h->http || !h->workers || !h->L)
		goto oom;
	lua_store_set(h->L, h->db);
	lua_store_set_clock(hclock_now);
	lua_engine_set_http(h->L, h->http);
	lua_engine_set_jobs(h->L, h->workers);
	publish_config(h);
	lua_pushnil(h->L);
	if (hypd_call_module(h, "hypd.runner", "init") != 0) {
		if (err)
			*err = errorf("%s%s", hx_tostring_error(h->L, -1), "");
		hypd_close(h);
		return NULL;
	}
	lua_settop(h->L, 0);
	return h;
oom:
	if (err)
		*err = strdup("out of memory");
	hypd_close(h);
	return NULL;
}

lua_State *hypd_lua(hypd *h) { return h->L; }

int hypd_call_module(hypd *h, const char *module, const char *fn)
{
	lua_State *L = h->L;

	lua_getglobal(L, "require");
	lua_pushstring(L, module);
	if (hx_pcall(L, 1, 1) != LUA_OK) {
		lua_remove(L, -2); /* the argument */
		return -1;
	}
	lua_getfield(L, -1, fn);
	lua_remove(L, -2);
	lua_insert(L, -2);
	return hx_pcall(L, 1, 1) == LUA_OK ? 0 : -1;
}

void hypd_interrupt(hypd *h)
{
	lua_engine_interrupt();
	if (h && h->http)
		httpc_wakeup(h->http);
}

/*
 * Encodes the value on top (popped) as a malloc'd JSON string; error values
 * are redacted. A value JSON cannot hold becomes a JSON error and *failed
 * is set.
 */
static char *encode_top(lua_State *L, int is_error, int *failed)
{
	char err[256], *s = hj_encode(L, -1, 0, err, sizeof err), *r;

	lua_pop(L, 1);
	if (!s) {
		*failed = 1;
		hx_newerror(L, "JSON", "the result cannot be encoded as JSON: %s", err);
		s = hj_encode(L, -1, 0, err, sizeof err);
		lua_pop(L, 1);
		is_error = 1;
	}
	if (!s || !is_error)
		return s;
	r = log_redact(s, strlen(s), NULL);
	free(s);
	return r;
}

int hypd_call(hypd *h, const char *name, const char *args_json, char **out)
{
	lua_State *L = h->L;
	char err[256];
	int rc = 0, failed;

	*out = NULL;
	lua_settop(L, 0);
	lua_createtable(L, 0, 3);
	lua_pushstring(L, name);
	lua_setfield(L, -2, "name");
	if (args_json && hj_decode(L, args_json, strlen(args_json), err, sizeof err) != 0) {
		hx_newerror(L, "VALIDATION", "arguments are not valid JSON: %s", err);
		lua_remove(L, -2);
		*out = encode_top(L, 1, &rc);
		return -1;
	}
	if (args_json)
		lua_setfield(L, -2, "args");
	if (h->timeout > 0) {
		lua_pushnumber(L, h->timeout);
		lua_setfield(L, -2, "timeout");
	}
	rc = hypd_call_module(h, "hypd.runner", "call");
	if (rc != 0) {
		/* the traceback is for the log, not for callers */
		lua_getfield(L, -1, "traceback");
		log_msg(LOG_DEBUG, "host", "%s failed: %s", name,
			lua_isstring(L, -1) ? lua_tostring(L, -1) : "");
		lua_pop(L, 1);
		lua_pushnil(L);
		lua_setfield(L, -2, "traceback");
	}
	failed = rc != 0;
	*out = encode_top(L, failed, &failed);
	lua_settop(L, 0);
	return *out && !failed ? 0 : -1;
}

void hypd_free(void *p) { free(p); }

void hypd_close(hypd *h)
{
	if (!h)
		return;
	if (h->L)
		lua_engine_close(h->L); /* no new requests while the pool drains */
	jobs_free(h->workers); /* before the state: done jobs are destroyed, not pushed */
	lstate_close(h->L);
	httpc_free(h->http);
	store_close(h->db);
	if (h->state_dir)
		statelock_release(h->state_dir); /* when this host's directory is the one locked */
	free(h->state_dir);
	free(h->playbooks);
	free(h->region);
	free(h->profile);
	free(h);
}
