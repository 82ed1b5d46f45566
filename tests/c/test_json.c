/*
 * test_json: the JSON converter, driven by the vectors in tests/data/json/
 * (run from the repository root), plus the cases too big for a vector file.
 *
 * Vector files: one case per line, fields separated by tabs, '#' lines and
 * blank lines ignored. In every field %XX stands for the byte 0xXX (so a
 * percent sign is %25). Lua chunks get the module as `json`.
 */
#include "json.h"
#include "luax.h"
#include "tap.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#define DATA "tests/data/json/"
#define MAXF 4

typedef void case_fn(lua_State *L, char **f, size_t *n);

static int hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Decodes %XX in place; returns the new length (the field stays NUL-ended). */
static size_t unpercent(char *s)
{
	char *w = s, *r = s;

	while (*r) {
		if (r[0] == '%' && hexval(r[1]) >= 0 && hexval(r[2]) >= 0) {
			*w++ = (char)(hexval(r[1]) << 4 | hexval(r[2]));
			r += 3;
		} else {
			*w++ = *r++;
		}
	}
	*w = '\0';
	return (size_t)(w - s);
}

static char *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) >= 0 &&
	    fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
		*len = fread(buf, 1, (size_t)n, f);
		buf[*len] = '\0';
	}
	fclose(f);
	return buf;
}

/* Runs fn on every case of a vector file with nf fields. */
static void run_file(lua_State *L, const char *name, int nf, case_fn *fn)
{
	char path[256], *buf, *line, *next, *f[MAXF];
	size_t len, n[MAXF];
	int lineno = 0, cases = 0, i;

	snprintf(path, sizeof path, DATA "%s", name);
	if (!(buf = slurp(path, &len))) {
		ok(0, "the vector file %s can be read", path);
		return;
	}
	for (line = buf; line && *line; line = next) {
		lineno++;
		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		if (*line == '\0' || *line == '#')
			continue;
		for (i = 0; i < nf && line; i++) {
			f[i] = line;
			if ((line = strchr(line, '\t')))
				*line++ = '\0';
		}
		if (i < nf || line) {
			ok(0, "%s:%d has %d tab-separated fields", path, lineno, nf);
			continue;
		}
		for (i = 0; i < nf; i++)
			n[i] = unpercent(f[i]);
		fn(L, f, n);
		cases++;
		if (lua_gettop(L) != 0) {
			ok(0, "%s:%d leaves the Lua stack as it found it", path, lineno);
			lua_settop(L, 0);
		}
	}
	ok(cases > 0, "%s holds %d cases", path, cases);
	free(buf);
}

/* Whether out is exactly want[0..wlen). */
static int same(const char *out, const char *want, size_t wlen)
{
	return out && strlen(out) == wlen && memcmp(out, want, wlen) == 0;
}

/* Decodes then encodes; NULL (message in err) when either fails. */
static char *reencode(lua_State *L, const char *s, size_t len, int pretty,
		      char *err, size_t errlen)
{
	char *out;

	if (hj_decode(L, s, len, err, errlen))
		return NULL;
	out = hj_encode(L, -1, pretty, err, errlen);
	lua_pop(L, 1);
	return out;
}

/* roundtrip.tsv: sentence, JSON in, compact JSON out ("=": the input). */
static void roundtrip(lua_State *L, char **f, size_t *n)
{
	char err[256] = "", *out, *again = NULL;
	const char *want = strcmp(f[2], "=") ? f[2] : f[1];
	size_t wlen = strcmp(f[2], "=") ? n[2] : n[1];

	out = reencode(L, f[1], n[1], 0, err, sizeof err);
	if (out)	/* and the output is a fixed point */
		again = reencode(L, out, strlen(out), 0, err, sizeof err);
	ok(same(out, want, wlen) && same(again, want, wlen), "%s", f[0]);
	if (!same(out, want, wlen) || !same(again, want, wlen))
		printf("#   got %s / %s (%s)\n", out ? out : "NULL",
		       again ? again : "NULL", err);
	free(out);
	free(again);
}

/* Calls the function json.<name> with the value at the top of the stack. */
static int call_json(lua_State *L, const char *name, int nargs, int nres)
{
	lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
	lua_getfield(L, -1, "hypd.json");
	lua_getfield(L, -1, name);
	lua_replace(L, -3);
	lua_pop(L, 1);
	lua_insert(L, -1 - nargs);
	return hx_pcall(L, nargs, nres);
}

/* decode_fail.tsv: sentence, JSON in, error offset, part of the message. */
static void decode_fail(lua_State *L, char **f, size_t *n)
{
	char err[256] = "";
	const char *msg = "";
	int pass, crc;

	crc = hj_decode(L, f[1], n[1], err, sizeof err);
	pass = crc == -1 && lua_gettop(L) == 0 && strstr(err, f[3]);
	lua_pushlstring(L, f[1], n[1]);
	if (call_json(L, "decode", 1, 2) == LUA_OK && lua_isnil(L, -2) &&
	    lua_istable(L, -1)) {
		lua_getfield(L, -1, "code");
		lua_getfield(L, -2, "offset");
		lua_getfield(L, -3, "message");
		msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "";
		pass = pass && lua_tostring(L, -3) &&
		       !strcmp(lua_tostring(L, -3), "JSON") &&
		       lua_tointeger(L, -2) == atoi(f[2]) && !strcmp(msg, err);
	} else {
		pass = 0;
	}
	ok(pass, "%s", f[0]);
	if (!pass)
		printf("#   got %d \"%s\" / \"%s\"\n", crc, err, msg);
	lua_settop(L, 0);
}

/* Loads a chunk of a vector file and calls it with the module. */
static int run_chunk(lua_State *L, const char *code, size_t len, int nres)
{
	lua_pushliteral(L, "local json = ...; ");
	lua_pushlstring(L, code, len);
	lua_concat(L, 2);
	if (luaL_loadbuffer(L, lua_tostring(L, -1), lua_rawlen(L, -1),
			    "=vector") != LUA_OK) {
		lua_remove(L, -2);
		return LUA_ERRSYNTAX;
	}
	lua_remove(L, -2);
	lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
	lua_getfield(L, -1, "hypd.json");
	lua_remove(L, -2);
	return hx_pcall(L, 1, nres);
}

/* encode.tsv: sentence, chunk returning a value [and options], JSON out. */
static void encode_ok(lua_State *L, char **f, size_t *n)
{
	const char *got = "(chunk failed)";
	size_t glen = 0;
	int pass = 0;

	if (run_chunk(L, f[1], n[1], 2) == LUA_OK) {
		if (call_json(L, "encode", 2, 1) == LUA_OK) {
			got = lua_tolstring(L, -1, &glen);
			pass = glen == n[2] && !memcmp(got, f[2], glen);
		} else {
			got = hx_tostring_error(L, -1);
		}
	}
	ok(pass, "%s", f[0]);
	if (!pass)
		printf("#   got %s\n", got);
	lua_settop(L, 0);
}

/*
 * encode_fail.tsv: sentence, chunk returning a value, part of the message.
 * Both json.encode (which raises) and hj_encode (which returns NULL and
 * leaves the stack alone) must fail.
 */
static void encode_fail(lua_State *L, char **f, size_t *n)
{
	const char *got = "(it encoded)";
	char err[256], *out = NULL;
	int pass = 0;

	if (run_chunk(L, f[1], n[1], 1) != LUA_OK) {
		got = hx_tostring_error(L, -1);
	} else if ((out = hj_encode(L, -1, 1, err, sizeof err)) ||
		   lua_gettop(L) != 1) {
		got = "(hj_encode did not fail cleanly)";
	} else if (call_json(L, "encode", 1, 1) != LUA_OK) {
		lua_getfield(L, -1, "code");
		got = hx_tostring_error(L, -2);
		pass = lua_tostring(L, -2) && !strcmp(lua_tostring(L, -2), "JSON")
		       && strstr(got, f[2]) && !strcmp(got + 6, err);
	}
	ok(pass, "%s", f[0]);
	if (!pass)
		printf("#   got %s\n", got);
	free(out);
	lua_settop(L, 0);
}

/* lua.tsv: sentence, chunk that returns true (or false and a hint). */
static void lua_check(lua_State *L, char **f, size_t *n)
{
	int pass = 0;

	if (run_chunk(L, f[1], n[1], 2) == LUA_OK) {
		pass = lua_toboolean(L, -2);
		if (!pass)
			printf("#   hint: %s\n", luaL_tolstring(L, -1, NULL));
	} else {
		printf("#   %s\n", hx_tostring_error(L, -1));
	}
	ok(pass, "%s", f[0]);
	lua_settop(L, 0);
}

static char *repeat(const char *unit, size_t times, const char *tail)
{
	size_t u = strlen(unit), t = strlen(tail), i;
	char *s = malloc(u * times + t + 1);

	for (i = 0; s && i < times; i++)
		memcpy(s + i * u, unit, u);
	if (s)
		memcpy(s + u * times, tail, t + 1);
	return s;
}

static void test_deep(lua_State *L)
{
	static const char *units[] = { "[", "{\"a\":", "[{\"a\":" };
	char err[256];
	size_t i;
	int rc;

	for (i = 0; i < sizeof units / sizeof *units; i++) {
		char *s = repeat(units[i], 100000, "");

		rc = hj_decode(L, s, strlen(s), err, sizeof err);
		ok(rc == -1 && lua_gettop(L) == 0 &&
		   strstr(err, "nesting deeper than 256"),
		   "100000 levels of %s fail cleanly with a nesting error",
		   units[i]);
		free(s);
	}
	{
		char *s = malloc(200001);

		memset(s, '[', 100000);
		memset(s + 100000, ']', 100000);
		s[200000] = '\0';
		rc = hj_decode(L, s, 200000, err, sizeof err);
		ok(rc == -1 && strstr(err, "at byte offset 256,"),
		   "100000 balanced brackets fail at the 257th bracket");
		free(s);
	}
}

/* A canonical (sorted, compact) document of at least 10 MB. */
static char *big_document(size_t *len)
{
	size_t cap = 11u << 20, n = 0, i;
	char *s = malloc(cap);

	if (!s)
		return NULL;
	s[n++] = '[';
	for (i = 0; n < (10u << 20); i++) {
		n += (size_t)snprintf(s + n, cap - n,
			"%s{\"id\":%zu,\"name\":\"item %zu \xc3\xa9 \\n\","
			"\"ok\":%s,\"tags\":[\"a\",null,{}],\"v\":%zu.25}",
			i ? "," : "", i, i * 7919, i % 3 ? "true" : "false", i);
	}
	s[n++] = ']';
	s[n] = '\0';
	*len = n;
	return s;
}

static void test_big(lua_State *L)
{
	char err[256] = "", *out = NULL, *pretty = NULL;
	size_t len = 0;
	char *doc = big_document(&len);

	if (doc && hj_decode(L, doc, len, err, sizeof err) == 0) {
		out = hj_encode(L, -1, 0, err, sizeof err);
		pretty = hj_encode(L, -1, 1, err, sizeof err);
		lua_pop(L, 1);
	}
	ok(same(out, doc, len), "a 10 MB document decodes and re-encodes byte for byte");
	ok(pretty && strlen(pretty) > len, "a 10 MB document pretty-prints");
	if (!out || !pretty)
		printf("#   %s\n", err);
	free(doc);
	free(out);
	free(pretty);
}

static void test_c_api(lua_State *L)
{
	char err[256] = "", *out;

	hj_pushnull(L);
	lua_pushboolean(L, 0);
	ok(hj_isnull(L, -2) && !hj_isnull(L, -1) && !hj_isnull(L, 5),
	   "hj_isnull is true for json.null only");
	lua_settop(L, 0);

	ok(hj_decode(L, "[1", 2, NULL, 0) == -1 && lua_gettop(L) == 0,
	   "hj_decode accepts a NULL message buffer");
	ok(hj_decode(L, "[1]xyz", 3, err, sizeof err) == 0 &&
	   lua_gettop(L) == 1, "hj_decode reads only len bytes");
	lua_settop(L, 0);

	lua_pushinteger(L, 1);
	lua_pushcfunction(L, luaopen_hypd_json);
	lua_pushinteger(L, 2);
	out = hj_encode(L, -2, 0, err, sizeof err);
	ok(!out && strstr(err, "function") && lua_gettop(L) == 3,
	   "hj_encode fails on a function and leaves the stack alone");
	out = hj_encode(L, 1, 1, err, sizeof err);
	ok(out && !strcmp(out, "1") && lua_gettop(L) == 3,
	   "hj_encode takes positive indices and leaves the stack alone");
	free(out);
	lua_settop(L, 0);
}

int main(void)
{
	lua_State *L = luaL_newstate();

	luaL_openlibs(L);
	hx_open(L);
	luaL_requiref(L, "hypd.json", luaopen_hypd_json, 0);
	lua_pop(L, 1);

	run_file(L, "roundtrip.tsv", 3, roundtrip);
	run_file(L, "decode_fail.tsv", 4, decode_fail);
	run_file(L, "encode.tsv", 3, encode_ok);
	run_file(L, "encode_fail.tsv", 3, encode_fail);
	run_file(L, "lua.tsv", 2, lua_check);
	test_deep(L);
	test_big(L);
	test_c_api(L);

	lua_close(L);
	return tap_done();
}
