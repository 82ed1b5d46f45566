/*
 * lua_aws: module "hypd._aws", the Lua face of awsconfig and creds (see
 * creds.h). Nothing secret crosses: Lua gets profile names, settings,
 * where credentials came from and when they expire, never the keys.
 *
 *   _aws.config([profile])            -> settings | nil, err
 *   _aws.endpoint_url(service_id [, profile]) -> url, source | nil | nil, err
 *   _aws.region([profile])            -> region | nil | nil, err
 *   _aws.credentials([profile])       -> job id; result {source, expiration, profile} | {err}
 *   _aws.credentials_cached([profile]) -> {source, expiration, profile} | nil
 *   _aws.imds_region()                -> job id; result {region} | {err}
 */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "awsconfig.h"
#include "creds.h"
#include "jobs.h"
#include "lua_engine.h"
#include "luax.h"

#define CONFIG_MT "hypd.awsconfig"

/* --- settings --- */

static int box_gc(lua_State *L)
{
	awsconfig **b = luaL_checkudata(L, 1, CONFIG_MT);

	awsconfig_free(*b);
	*b = NULL;
	return 0;
}

/* A userdata that owns the awsconfig while tables are built, so a Lua
 * memory error cannot leak it. */
static awsconfig **new_box(lua_State *L)
{
	awsconfig **b = lua_newuserdatauv(L, sizeof *b, 0);

	*b = NULL;
	if (luaL_newmetatable(L, CONFIG_MT)) {
		lua_pushcfunction(L, box_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_setmetatable(L, -2);
	return b;
}

/* Loads the files into a new box on the stack; checks a named profile
 * exists. Returns the resolved profile, or NULL with nil, err pushed. */
static const char *load(lua_State *L, const char *named, awsconfig **b)
{
	char err[512];
	const char *profile = awsconfig_profile_name(named);

	if (!(*b = awsconfig_load(err, sizeof err))) {
		hx_fail(L, "CONFIG", "%s", err);
		return NULL;
	}
	if ((named || awsconfig_env("AWS_PROFILE") || awsconfig_env("AWS_DEFAULT_PROFILE")) &&
	    !awsconfig_has_profile(*b, profile)) {
		hx_fail(L, "NOT_FOUND", "profile %s is in neither the config nor the credentials file",
			profile);
		return NULL;
	}
	return profile;
}

static void set_str(lua_State *L, const char *key, const char *value)
{
	if (value) {
		lua_pushstring(L, value);
		lua_setfield(L, -2, key);
	}
}

/* awsconfig_services_each callback: services[service].endpoint_url = value */
static void add_service(void *ud, const char *service, const char *key, const char *value)
{
	lua_State *L = ud;

	if (strcmp(key, "endpoint_url") != 0)
		return;
	if (lua_getfield(L, -1, service) != LUA_TTABLE) {
		lua_pop(L, 1);
		lua_createtable(L, 0, 1);
		lua_pushvalue(L, -1);
		lua_setfield(L, -3, service);
	}
	set_str(L, "endpoint_url", value);
	lua_pop(L, 1);
}

static const char *env_or(const awsconfig *c, const char *profile, const char *env,
			  const char *key)
{
	const char *v = awsconfig_env(env);

	return v ? v : awsconfig_get(c, profile, key);
}

/* _aws.config([profile]) -> the profile's non-secret settings | nil, err */
static int l_config(lua_State *L)
{
	const char *named = luaL_optstring(L, 1, NULL), *profile, *v, *services;
	awsconfig **b = new_box(L);
	char *end;
	long n;

	if (!(profile = load(L, named, b)))
		return 2;
	lua_createtable(L, 0, 12);
	set_str(L, "profile", profile);
	set_str(L, "region", awsconfig_region_of(*b, profile));
	set_str(L, "endpoint_url", env_or(*b, profile, "AWS_ENDPOINT_URL", "endpoint_url"));
	set_str(L, "role_arn", awsconfig_get(*b, profile, "role_arn"));
	set_str(L, "source_profile", awsconfig_get(*b, profile, "source_profile"));
	set_str(L, "credential_source", awsconfig_get(*b, profile, "credential_source"));
	set_str(L, "retry_mode", env_or(*b, profile, "AWS_RETRY_MODE", "retry_mode"));
	v = env_or(*b, profile, "AWS_MAX_ATTEMPTS", "max_attempts");
	if (v && (n = strtol(v, &end, 10)) > 0 && *end == 0) {
		lua_pushinteger(L, n);
		lua_setfield(L, -2, "max_attempts");
	}
	lua_pushboolean(L, awsconfig_ignore_endpoints(*b, profile));
	lua_setfield(L, -2, "ignore_configured_endpoint_urls");
	lua_newtable(L);
	if ((services = awsconfig_get(*b, profile, "services")) != NULL)
		awsconfig_services_each(*b, services, add_service, L);
	lua_setfield(L, -2, "services");
	awsconfig_free(*b);
	*b = NULL;
	return 1;
}

/* _aws.endpoint_url(service_id [, profile]) -> url, source | nil | nil, err */
static int l_endpoint_url(lua_State *L)
{
	const char *service = luaL_checkstring(L, 1), *named = luaL_optstring(L, 2, NULL), *profile;
	awsconfig **b = new_box(L);
	char err[512], *url = NULL, copy[2048];
	const char *source;

	if (!(profile = load(L, named, b)))
		return 2;
	if (awsconfig_endpoint_url_from(*b, profile, service, &url, &source, err, sizeof err) != 0)
		return hx_fail(L, "CONFIG", "%s", err);
	awsconfig_free(*b);
	*b = NULL;
	if (!url)
		return 0;
	snprintf(copy, sizeof copy, "%s", url); /* no C memory held while Lua allocates */
	free(url);
	lua_pushstring(L, copy);
	lua_pushstring(L, source);
	return 2;
}

/* _aws.region([profile]) -> region | nil */
static int l_region(lua_State *L)
{
	const char *named = luaL_optstring(L, 1, NULL), *profile, *r;
	awsconfig **b = new_box(L);

	if (!(profile = load(L, named, b)))
		return 2;
	r = awsconfig_region_of(*b, profile);
	lua_pushstring(L, r);
	awsconfig_free(*b);
	*b = NULL;
	return 1;
}

/* --- credentials, through the worker pool --- */

struct cred_job {
	job base;            /* first: the pool sees a job */
	char *profile;       /* as the caller named it, or NULL */
	int rc;              /* creds_resolve's result */
	char source[48];     /* the provider that answered */
	char *resolved;      /* the profile the chain used */
	double expiration;   /* 0 = never */
	char err[1024];      /* the failure, for people (no secrets) */
};

static void push_info(lua_State *L, const char *source, double expiration, const char *profile)
{
	lua_createtable(L, 0, 3);
	set_str(L, "source", source);
	if (expiration > 0) {
		lua_pushnumber(L, expiration);
		lua_setfield(L, -2, "expiration");
	}
	set_str(L, "profile", profile);
}

static void cred_run(job *j)
{
	struct cred_job *c = (struct cred_job *)j;
	aws_creds cr;

	c->rc = creds_resolve(c->profile, &cr, c->err, sizeof c->err);
	if (c->rc == 0) {
		memcpy(c->source, cr.source, sizeof c->source);
		c->expiration = cr.expiration;
		c->resolved = cr.profile ? strdup(cr.profile) : NULL;
		creds_free(&cr); /* the keys stay in the cache, never in the job */
	}
}

static void cred_push(job *j, void *lua_state)
{
	struct cred_job *c = (struct cred_job *)j;
	lua_State *L = lua_state;

	if (c->rc == 0) {
		push_info(L, c->source, c->expiration, c->resolved);
		return;
	}
	lua_createtable(L, 0, 1);
	hx_newerror(L, "CREDENTIALS", "%s", c->err);
	set_str(L, "profile", c->profile);
	lua_setfield(L, -2, "err");
}

static void cred_destroy(job *j)
{
	struct cred_job *c = (struct cred_job *)j;

	free(c->profile);
	free(c->resolved);
	free(c);
}

/* _aws.credentials([profile]) -> job id (await it with _sched.await("job", id)) */
static int l_credentials(lua_State *L)
{
	const char *profile = luaL_optstring(L, 1, NULL);
	jobs *q = lua_engine_jobs(L);
	struct cred_job *c = calloc(1, sizeof *c);
	uint64_t id;

	if (!c || (profile && !(c->profile = strdup(profile)))) {
		free(c);
		return luaL_error(L, "out of memory");
	}
	c->base.run = cred_run;
	c->base.push = cred_push;
	c->base.destroy = cred_destroy;
	if (!(id = jobs_submit(q, &c->base))) {
		cred_destroy(&c->base);
		return hx_fail(L, "STATE", "no worker thread could start");
	}
	lua_pushinteger(L, (lua_Integer)id);
	return 1;
}

/* _aws.credentials_cached([profile]) -> info | nil (never blocks) */
static int l_credentials_cached(lua_State *L)
{
	const char *profile = luaL_optstring(L, 1, NULL);
	char source[48], resolved[256];
	double expiration;
	aws_creds cr;

	if (creds_cached(profile, &cr) != 0)
		return 0;
	memcpy(source, cr.source, sizeof source);
	snprintf(resolved, sizeof resolved, "%s", cr.profile ? cr.profile : "");
	expiration = cr.expiration;
	creds_free(&cr); /* before any Lua call can raise */
	push_info(L, source, expiration, resolved);
	return 1;
}

struct region_job {
	job base;          /* first: the pool sees a job */
	char *region;      /* the answer (malloc'd) */
	char err[512];     /* the failure */
};

static void region_run(job *j)
{
	struct region_job *r = (struct region_job *)j;

	imds_region(&r->region, r->err, sizeof r->err);
}

static void region_push(job *j, void *lua_state)
{
	struct region_job *r = (struct region_job *)j;
	lua_State *L = lua_state;

	lua_createtable(L, 0, 1);
	if (r->region) {
		set_str(L, "region", r->region);
	} else {
		hx_newerror(L, "IMDS", "%s", r->err);
		lua_setfield(L, -2, "err");
	}
}

static void region_destroy(job *j)
{
	struct region_job *r = (struct region_job *)j;

	free(r->region);
	free(r);
}

/* _aws.imds_region() -> job id; result {region = ...} | {err = ...} */
static int l_imds_region(lua_State *L)
{
	jobs *q = lua_engine_jobs(L);
	struct region_job *r = calloc(1, sizeof *r);
	uint64_t id;

	if (!r)
		return luaL_error(L, "out of memory");
	r->base.run = region_run;
	r->base.push = region_push;
	r->base.destroy = region_destroy;
	if (!(id = jobs_submit(q, &r->base))) {
		region_destroy(&r->base);
		return hx_fail(L, "STATE", "no worker thread could start");
	}
	lua_pushinteger(L, (lua_Integer)id);
	return 1;
}

static const luaL_Reg aws_funcs[] = {
	{ "config", l_config },
	{ "endpoint_url", l_endpoint_url },
	{ "region", l_region },
	{ "credentials", l_credentials },
	{ "credentials_cached", l_credentials_cached },
	{ "imds_region", l_imds_region },
	{ NULL, NULL },
};

int luaopen_hypd__aws(lua_State *L)
{
	luaL_newlib(L, aws_funcs);
	return 1;
}
