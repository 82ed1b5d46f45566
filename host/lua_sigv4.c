/*
 * lua_sigv4: module "hypd.sigv4", the signer for code that must check
 * signatures (the sandbox verifies every request it receives).
 *
 *   sigv4.sign{ method, path, query, headers = { {name, value}, ... } or
 *     { name = value }, body, payload_hash, access_key, secret_key,
 *     session_token, region, service, when (epoch seconds), normalize,
 *     sign_body, presign = expires_seconds }
 *   -> { signature, canonical_request, string_to_sign, authorization, query }
 *      | nil, err (VALIDATION)
 *
 * These keys are the sandbox's own simulated credentials; hypd's real AWS
 * credentials never pass through here.
 */
#include <lauxlib.h>
#include <lua.h>
#include <string.h>

#include "luax.h"
#include "sigv4.h"

static int l_sign(lua_State *L)
{
	sigv4_input in;
	sigv4_output out;
	sigv4_header *h;
	size_t n = 0, i = 0;
	char err[256];
	int rc;

	luaL_checktype(L, 1, LUA_TTABLE);
	memset(&in, 0, sizeof in);
	memset(&out, 0, sizeof out);
#define STR(field, name) (lua_getfield(L, 1, name), in.field = luaL_optstring(L, -1, NULL))
	STR(method, "method");
	STR(path, "path");
	STR(query, "query");
	STR(payload_hash, "payload_hash");
	STR(access_key, "access_key");
	STR(secret_key, "secret_key");
	STR(session_token, "session_token");
	STR(region, "region");
	STR(service, "service");
#undef STR
	lua_getfield(L, 1, "body");
	in.payload = luaL_optlstring(L, -1, "", &in.payload_len);
	lua_getfield(L, 1, "when");
	in.when = (time_t)luaL_checkinteger(L, -1);
	lua_getfield(L, 1, "normalize");
	in.normalize_path = lua_isnil(L, -1) ? 1 : lua_toboolean(L, -1);
	lua_getfield(L, 1, "sign_body");
	in.sign_body = lua_toboolean(L, -1);
	lua_getfield(L, 1, "presign");
	in.expires = (long)luaL_optinteger(L, -1, 0);
	if (!in.method || !in.path || !in.access_key || !in.secret_key || !in.region || !in.service)
		return luaL_error(L, "sigv4.sign needs method, path, access_key, secret_key, region, service");
	if (lua_getfield(L, 1, "headers") != LUA_TTABLE)
		return luaL_error(L, "sigv4.sign needs headers");
	lua_pushnil(L);
	while (lua_next(L, -2))
		lua_pop(L, 1), n++;
	h = lua_newuserdatauv(L, (n ? n : 1) * sizeof *h, 0);
	lua_pushnil(L);
	while (lua_next(L, -3)) {
		if (lua_type(L, -1) == LUA_TTABLE) { /* { name, value } */
			lua_geti(L, -1, 1);
			lua_geti(L, -2, 2);
			h[i].name = luaL_checkstring(L, -2);
			h[i].value = luaL_checkstring(L, -1);
			lua_pop(L, 2);
		} else {
			h[i].name = luaL_checkstring(L, -2);
			h[i].value = luaL_checkstring(L, -1);
		}
		i++;
		lua_pop(L, 1);
	}
	in.headers = h;
	in.nheaders = i;
	rc = in.expires ? sigv4_presign(&in, &out, err, sizeof err)
			: sigv4_sign(&in, &out, err, sizeof err);
	if (rc != 0)
		return hx_fail(L, "VALIDATION", "%s", err);
	/* copy out, free, then build Lua values (nothing raises while C holds memory
	 * except pushes, which can only fail on out-of-memory) */
	lua_createtable(L, 0, 5);
	lua_pushstring(L, out.signature);
	lua_setfield(L, -2, "signature");
	lua_pushstring(L, out.canonical_request);
	lua_setfield(L, -2, "canonical_request");
	lua_pushstring(L, out.string_to_sign);
	lua_setfield(L, -2, "string_to_sign");
	if (out.authorization) {
		lua_pushstring(L, out.authorization);
		lua_setfield(L, -2, "authorization");
	}
	if (out.query) {
		lua_pushstring(L, out.query);
		lua_setfield(L, -2, "query");
	}
	sigv4_output_free(&out);
	return 1;
}

static const luaL_Reg funcs[] = {
	{ "sign", l_sign },
	{ NULL, NULL },
};

int luaopen_hypd_sigv4(lua_State *L)
{
	luaL_newlib(L, funcs);
	return 1;
}
