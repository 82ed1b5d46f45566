/*
 * lua_cli: module "hypd._cli", what the command line (lua/hypd/cli.lua)
 * needs from C:
 *
 *   _cli.VERSION                    the version, also before a host is open
 *   _cli.self_exe() -> path | nil, err
 *                                   this binary (kubeconfig's exec plugin)
 *   _cli.eks_token{sts_url, cluster, region, profile} -> tok | nil, err
 *                                   an EKS bearer token (ekstoken.h), made
 *                                   from the cached credentials, held in C
 *   tok:expires() -> seconds since the epoch when EKS stops accepting it
 *   tok:write(text) -> true | nil, err
 *                                   writes text to stdout with its one
 *                                   _cli.TOKEN replaced by the token
 *   tok:close()                     forgets the token (also __close, __gc)
 *
 * Lua decides the shape of `hypd eks-token`'s ExecCredential; the token's
 * bytes go from C memory to stdout and never into the Lua state.
 */
#include <errno.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "ekstoken.h"
#include "hypd.h"
#include "luax.h"

#define TOKEN_MT "hypd.eks_token"
#define PLACEHOLDER "${EKS_TOKEN}"

struct tok {
	char *token;    /* the bearer token (a secret), owned; NULL when closed */
	time_t expires; /* when EKS stops accepting it */
};

static struct tok *check_tok(lua_State *L)
{
	struct tok *t = luaL_checkudata(L, 1, TOKEN_MT);

	if (!t->token)
		luaL_error(L, "attempt to use a closed EKS token");
	return t;
}

static int tok_close(lua_State *L)
{
	struct tok *t = luaL_checkudata(L, 1, TOKEN_MT);

	if (t->token) {
		OPENSSL_cleanse(t->token, strlen(t->token));
		free(t->token);
		t->token = NULL;
	}
	return 0;
}

static int tok_expires(lua_State *L)
{
	lua_pushinteger(L, (lua_Integer)check_tok(L)->expires);
	return 1;
}

/* Where the one PLACEHOLDER is in s, or NULL when there is none or more. */
static const char *only_placeholder(const char *s, size_t len)
{
	const size_t n = sizeof PLACEHOLDER - 1;
	const char *found = NULL;

	for (size_t i = 0; i + n <= len; i++) {
		if (memcmp(s + i, PLACEHOLDER, n) != 0)
			continue;
		if (found)
			return NULL;
		found = s + i;
	}
	return found;
}

static int tok_write(lua_State *L)
{
	struct tok *t = check_tok(L);
	size_t len;
	const char *text = luaL_checklstring(L, 2, &len);
	const char *at = only_placeholder(text, len);
	size_t head, tail;

	if (!at)
		return hx_raise(L, "VALIDATION", "the text must hold %s exactly once", PLACEHOLDER);
	head = (size_t)(at - text);
	tail = len - head - (sizeof PLACEHOLDER - 1);
	if (fwrite(text, 1, head, stdout) != head ||
	    fputs(t->token, stdout) == EOF ||
	    fwrite(at + sizeof PLACEHOLDER - 1, 1, tail, stdout) != tail ||
	    fflush(stdout) != 0)
		return hx_fail(L, "IO", "cannot write to standard output: %s", strerror(errno));
	lua_pushboolean(L, 1);
	return 1;
}

static int tok_tostring(lua_State *L)
{
	struct tok *t = luaL_checkudata(L, 1, TOKEN_MT);

	lua_pushstring(L, t->token ? "EKS token" : "EKS token (closed)");
	return 1;
}

/* _cli.eks_token{sts_url, cluster, region, profile} -> tok | nil, err */
static int l_eks_token(lua_State *L)
{
	const char *sts_url, *cluster, *region, *profile;
	char err[256] = "out of memory"; /* what a failed strdup in eks_token leaves */
	struct tok *t;

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_getfield(L, 1, "sts_url");
	sts_url = luaL_checkstring(L, -1);
	lua_getfield(L, 1, "cluster");
	cluster = luaL_checkstring(L, -1);
	lua_getfield(L, 1, "region");
	region = luaL_checkstring(L, -1);
	lua_getfield(L, 1, "profile");
	profile = luaL_optstring(L, -1, NULL);
	/* born closed: the userdata owns the token from the moment it exists */
	t = lua_newuserdatauv(L, sizeof *t, 0);
	t->token = NULL;
	t->expires = 0;
	luaL_setmetatable(L, TOKEN_MT);
	if (eks_token(sts_url, cluster, region, profile, time(NULL), &t->token, &t->expires, err,
		      sizeof err) != 0)
		return hx_fail(L, "CREDENTIALS", "%s", err);
	return 1;
}

/* _cli.self_exe() -> the path of this binary | nil, err */
static int l_self_exe(lua_State *L)
{
	char self[4096];
	ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);

	if (len <= 0)
		return hx_fail(L, "IO", "cannot read /proc/self/exe: %s", strerror(errno));
	lua_pushlstring(L, self, (size_t)len);
	return 1;
}

static const luaL_Reg tok_methods[] = {
	{ "expires", tok_expires },
	{ "write", tok_write },
	{ "close", tok_close },
	{ NULL, NULL },
};

static const luaL_Reg tok_meta[] = {
	{ "__gc", tok_close },
	{ "__close", tok_close },
	{ "__tostring", tok_tostring },
	{ NULL, NULL },
};

static const luaL_Reg cli_funcs[] = {
	{ "eks_token", l_eks_token },
	{ "self_exe", l_self_exe },
	{ NULL, NULL },
};

int luaopen_hypd__cli(lua_State *L)
{
	if (luaL_newmetatable(L, TOKEN_MT)) {
		luaL_setfuncs(L, tok_meta, 0);
		luaL_newlib(L, tok_methods);
		lua_setfield(L, -2, "__index");
		lua_pushboolean(L, 0);
		lua_setfield(L, -2, "__metatable");
	}
	lua_pop(L, 1);
	luaL_newlib(L, cli_funcs);
	lua_pushliteral(L, HYPD_VERSION);
	lua_setfield(L, -2, "VERSION");
	lua_pushliteral(L, PLACEHOLDER);
	lua_setfield(L, -2, "TOKEN");
	return 1;
}
