/*
 * lua_harness.h: what the Lua-binding fuzzers share. fuzz_lua(data, size,
 * run) runs run(input) in a fresh Lua state with hypd's error tables; one
 * input in three runs with the state's memory capped just above what the
 * input needs (by its middle byte), so Lua memory errors inside the
 * binding are exercised too. Closing the state must free every byte:
 * anything left is a leak, and the fuzzer aborts.
 */
#ifndef FUZZ_LUA_HARNESS_H
#define FUZZ_LUA_HARNESS_H

#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>

#include "luax.h"

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

static int fuzz_lua(const uint8_t *data, size_t size, lua_CFunction run)
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

#endif
