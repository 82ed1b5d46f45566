/*
 * fuzz_xml: libFuzzer target for xml.decode (host/xml.c).
 *
 *   clang -fsanitize=fuzzer,address,undefined -Ihost $(pkg-config --cflags lua5.4) \
 *     tests/fuzz/fuzz_xml.c host/xml.c host/luax.c $(pkg-config --libs lua5.4 expat) \
 *     -o build/fuzz_xml && build/fuzz_xml -max_total_time=60 tests/fuzz/corpus/xml
 *
 * Every input must come back as a tree or as nil, err with code "XML". One
 * input in three runs with the state's memory capped just above what the
 * input needs (by its middle byte), so Lua memory errors inside expat
 * callbacks are exercised too: they must leak nothing.
 */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "luax.h"
#include "xml.h"

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

	luaL_requiref(L, "hypd.xml", luaopen_hypd_xml, 0);
	lua_getfield(L, -1, "decode");
	lua_pushlstring(L, s, len);
	lua_call(L, 1, 2);
	if (lua_isnil(L, -2)) {
		lua_getfield(L, -1, "code");
		if (strcmp(lua_tostring(L, -1), "XML") != 0)
			abort();
	} else if (!lua_istable(L, -2)) {
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
