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
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "luax.h"

int luaopen_hypd_yaml(lua_State *L);

struct mem {
	size_t used;  /* bytes allocated now */
	size_t limit; /* cap, 0 = none */
};

static void *alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct mem *m = ud;
	size_t old = ptr ? osize : 0;
	void *p;

	if (nsize == 0) {
		free(ptr);
		m->used -= old;
		return NULL;
	}
	if (m->limit && nsize > old && m->used - old + nsize > m->limit)
		return NULL;
	if (!(p = realloc(ptr, nsize)))
		return NULL;
	m->used = m->used - old + nsize;
	return p;
}

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
	struct mem m = { 0, 0 };
	lua_State *L = lua_newstate(alloc, &m);

	if (!L)
		return 0;
	luaL_openlibs(L);
	hx_open(L);
	if (size && size % 3 == 0)
		m.limit = m.used + 2 * size + 512 * (size_t)(data[size / 2] % 64 + 1);
	lua_pushcfunction(L, run);
	lua_pushlstring(L, (const char *)data, size);
	lua_pcall(L, 1, 0, 0);
	m.limit = 0; /* finalizers need memory to run */
	lua_close(L);
	if (m.used != 0)
		abort();
	return 0;
}
