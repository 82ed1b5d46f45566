/*
 * fuzz_yaml: libFuzzer target for yaml.decode and yaml.decode_all
 * (host/lua_yaml.c over host/yml.c and libyaml).
 *
 *   make build/fuzz/fuzz_yaml && build/fuzz/fuzz_yaml -max_total_time=60 tests/fuzz/corpus/yaml
 *
 * Every input must come back as a value or as nil, err with code "YAML".
 * The first byte picks decode or decode_all and the duplicate-key mode.
 * One input in three runs with the state's memory capped just above what
 * the input needs, so Lua memory errors while the tree becomes Lua values
 * are exercised too: the tree belongs to a userdata and must leak nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "lua_harness.h"

int luaopen_hypd_yaml(lua_State *L);

static int run(lua_State *L)
{
	size_t len;
	const char *s = lua_tolstring(L, 1, &len);
	int mode = len ? (unsigned char)s[0] : 0;

	luaL_requiref(L, "hypd.yaml", luaopen_hypd_yaml, 0);
	lua_getfield(L, -1, mode & 1 ? "decode_all" : "decode");
	lua_pushlstring(L, s, len);
	lua_createtable(L, 0, 2);
	lua_pushstring(L, mode & 2 ? "last" : "error");
	lua_setfield(L, -2, "duplicate_keys");
	if (mode & 4) {
		lua_pushinteger(L, 1000);
		lua_setfield(L, -2, "max_nodes");
	}
	lua_call(L, 2, 2);
	if (lua_isnil(L, -2) && lua_istable(L, -1)) {
		lua_getfield(L, -1, "code");
		if (strcmp(lua_tostring(L, -1), "YAML") != 0)
			abort();
	} else if (lua_isnil(L, -2)) {
		abort();
	}
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_lua(data, size, run);
}
