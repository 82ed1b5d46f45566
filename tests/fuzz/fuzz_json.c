/*
 * fuzz_json: libFuzzer target for json.decode and json.encode (host/json.c).
 *
 *   make build/fuzz/fuzz_json && build/fuzz/fuzz_json -max_total_time=60 tests/fuzz/corpus/json
 *
 * Byte 0 picks the mode (odd: {bytes = true}, the store's own text, where
 * strings may hold any bytes; even: strict UTF-8, as for text from
 * outside); the rest is the JSON text. The contract checked:
 *   - decode returns a value, or nil and an error with code "JSON", an
 *     integer offset within the text and a message of printable ASCII
 *     (a refused string is never echoed);
 *   - a decoded value encodes, or encode raises a "JSON" error (a 1e400
 *     decodes to inf, which does not encode);
 *   - what encode wrote decodes again in the same mode (so in strict mode
 *     every decoded string was UTF-8) and encodes to the same text.
 * Memory caps (lua_harness.h) make decode and encode raise Lua memory
 * errors: those must leak nothing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "lua_harness.h"

static const char check[] =
	"local json, bad, s = ...\n"
	"local opts = { bytes = (s:byte(1) or 0) % 2 == 1 }\n"
	"s = s:sub(2)\n"
	"local v, err = json.decode(s, opts)\n"
	"local keep = { a = true, b = { a = true, c = { ['*'] = { a = true } } }, [''] = {}, ['0'] = false }\n"
	"local pv, perr = json.decode(s, { bytes = opts.bytes, keep = keep })\n"
	"if (v == nil) ~= (pv == nil) then bad('a projection changed whether the text decodes') end\n"
	"if v == nil and (perr.offset ~= err.offset or perr.message ~= err.message) then bad('a projection changed the error') end\n"
	"local function project(x, k)\n"
	"  if type(x) ~= 'table' then return x end\n"
	"  local out = setmetatable({}, getmetatable(x))\n"
	"  if json.is_array(x) then\n"
	"    for i, e in ipairs(x) do out[i] = project(e, k) end\n"
	"    return out\n"
	"  end\n"
	"  for key, e in pairs(x) do\n"
	"    local sub = k[key]\n"
	"    if sub == nil then sub = k['*'] end\n"
	"    if type(sub) == 'table' then out[key] = project(e, sub) elseif sub then out[key] = e end\n"
	"  end\n"
	"  return out\n"
	"end\n"
	"if v ~= nil then\n"
	"  local ok1, t1 = pcall(json.encode, project(v, keep))\n"
	"  local ok2, t2 = pcall(json.encode, pv)\n"
	"  if not ok1 and type(t1) ~= 'table' then error(t1, 0) end -- a memory error\n"
	"  if not ok2 and type(t2) ~= 'table' then error(t2, 0) end\n"
	"  if ok1 ~= ok2 or (ok1 and t1 ~= t2) then bad('a projected decode differs from the projected value') end\n"
	"end\n"
	"if v == nil then\n"
	"  if type(err) ~= 'table' or err.code ~= 'JSON' then bad('decode failed without a JSON error') end\n"
	"  if math.type(err.offset) ~= 'integer' or err.offset < 0 or err.offset > #s then bad('offset out of range') end\n"
	"  if type(err.message) ~= 'string' or not err.message:match('^[\\32-\\126]*$') then bad('message not printable ASCII') end\n"
	"  return\n"
	"end\n"
	"local ok, text = pcall(json.encode, v)\n"
	"if not ok then\n"
	"  if type(text) ~= 'table' then error(text, 0) end -- a memory error\n"
	"  if text.code ~= 'JSON' then bad('encode raised a non-JSON error') end\n"
	"  return\n"
	"end\n"
	"local v2, err2 = json.decode(text, opts)\n"
	"if v2 == nil then bad('encode wrote text decode refuses: ' .. tostring(err2.message)) end\n"
	"if json.encode(v2) ~= text then bad('decode(encode(v)) encodes differently') end\n";

static int bad(lua_State *L)
{
	fprintf(stderr, "fuzz_json: %s\n", luaL_checkstring(L, 1));
	abort();
}

static int run(lua_State *L)
{
	int rc;

	if ((rc = luaL_loadbuffer(L, check, sizeof check - 1, "=fuzz_json")) != LUA_OK) {
		if (rc != LUA_ERRMEM)
			abort();
		return lua_error(L);
	}
	luaL_requiref(L, "hypd.json", luaopen_hypd_json, 0);
	lua_pushcfunction(L, bad);
	lua_pushvalue(L, 1);
	lua_call(L, 3, 0);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return fuzz_lua(data, size, run);
}
