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
#include <stdlib.h>
#include <string.h>

#include "lua_harness.h"
#include "xml.h"

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
	return fuzz_lua(data, size, run);
}
