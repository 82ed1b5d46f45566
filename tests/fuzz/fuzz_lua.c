/*
 * fuzz_lua: libFuzzer driver for the Lua-level targets in
 * tests/fuzz/lua_targets.lua, run inside a full engine (hypd_open).
 *
 *   make build/fuzz/fuzz_lua_regex && build/fuzz/fuzz_lua_regex -max_total_time=60 tests/fuzz/corpus/lua_regex
 *
 * One binary, one target per process: the target is the part of the
 * program's name after "fuzz_lua_" (the Makefile links fuzz_lua_NAME to
 * fuzz_lua), or $HYPD_FUZZ_TARGET. The targets file is read from
 * $HYPD_FUZZ_TARGETS, else tests/fuzz/lua_targets.lua (run from the
 * repository root, as tests/fuzz_smoke.sh does). The engine's state
 * directory is a fresh one under /tmp, removed at exit; the AWS variables
 * point at nothing real.
 *
 * A finding is a sanitizer report, or any Lua error out of a target (its
 * contract and bad() are in lua_targets.lua): it is printed with a
 * traceback and the process aborts.
 *
 * Coverage: libFuzzer sees only instrumented C, and the Lua interpreter
 * (liblua5.4) is not, so a line hook feeds it the Lua side: each pair of
 * consecutive lines run (chunk, line) bumps one of COV_N counters in
 * libFuzzer's extra-counters section, AFL's edge hashing. The hook is set
 * only while a target runs, and whatever hook the engine had is put back.
 *
 * Leaks: Lua's collector frees an input's garbage during later inputs, so
 * libFuzzer's per-input leak check would fire (and scan the heap) on
 * every input; the driver adds -detect_leaks=0 unless the command line
 * says otherwise. The C-level fuzzers keep their leak checks.
 */
#include <lauxlib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "hypd.h"
#include "luax.h"

#define COV_N (1u << 16)

/* libFuzzer's extra counters (Linux): read after each input, cleared before */
__attribute__((used, section("__libfuzzer_extra_counters"))) static uint8_t cov[COV_N];
static uintptr_t cov_prev;

static void line_hook(lua_State *L1, lua_Debug *ar)
{
	uintptr_t loc;

	if (!lua_getinfo(L1, "S", ar))
		return;
	/* the chunk's source string lives as long as its functions */
	loc = (uintptr_t)ar->source * 0x9E3779B1u ^ (uintptr_t)ar->currentline * 0x85EBCA6Bu;
	cov[(loc ^ cov_prev) & (COV_N - 1)]++;
	cov_prev = loc >> 1;
}

static hypd *host;
static lua_State *L;
static int target_ref = LUA_NOREF;
static char state_dir[] = "/tmp/hypd-fuzz-lua.XXXXXX";

static void remove_state_dir(void)
{
	char cmd[sizeof state_dir + 16];

	snprintf(cmd, sizeof cmd, "rm -rf '%s'", state_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "fuzz_lua: could not remove %s\n", state_dir);
}

/* A finding: the state directory goes (libFuzzer keeps the input), then abort. */
static void finding(void)
{
	remove_state_dir();
	abort();
}

static int bad(lua_State *L1)
{
	fprintf(stderr, "fuzz_lua: contract broken: %s\n", luaL_checkstring(L1, 1));
	finding();
	return 0;
}

static int traceback(lua_State *L1)
{
	const char *m = hx_tostring_error(L1, 1);

	luaL_traceback(L1, L1, m ? m : "(no message)", 1);
	return 1;
}

static void cleanup(void)
{
	hypd_close(host);
	remove_state_dir();
}

static void die(const char *what, const char *detail)
{
	fprintf(stderr, "fuzz_lua: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
	exit(2);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *name = getenv("HYPD_FUZZ_TARGET"), *file = getenv("HYPD_FUZZ_TARGETS"), *p;
	hypd_options o = { 0 };
	char *err = NULL;

	static char no_leaks[] = "-detect_leaks=0";
	char **args;
	int i, leaks_set = 0;

	for (i = 1; i < *argc; i++)
		leaks_set |= strncmp((*argv)[i], "-detect_leaks=", 14) == 0;
	if (!leaks_set && (args = malloc(((size_t)*argc + 2) * sizeof *args)) != NULL) {
		memcpy(args, *argv, (size_t)*argc * sizeof *args);
		args[(*argc)++] = no_leaks;
		args[*argc] = NULL;
		*argv = args; /* kept for the process, as libFuzzer keeps argv */
	}
	if (!name || !*name) {
		p = strrchr((*argv)[0], '/');
		p = p ? p + 1 : (*argv)[0];
		name = strncmp(p, "fuzz_lua_", 9) == 0 ? p + 9 : NULL;
	}
	if (!name || !*name)
		die("no target: run as fuzz_lua_NAME or set HYPD_FUZZ_TARGET", NULL);
	if (!mkdtemp(state_dir))
		die("cannot make a state directory", state_dir);
	setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", 1);
	setenv("AWS_REGION", "us-west-2", 1);
	setenv("AWS_CONFIG_FILE", "/dev/null", 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null", 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	unsetenv("AWS_PROFILE");
	o.state_dir = state_dir;
	o.log_level = "off";
	if (!(host = hypd_open(&o, &err)))
		die("hypd_open failed", err);
	atexit(cleanup);
	L = hypd_lua(host);
	lua_pushcfunction(L, traceback);
	if (luaL_loadfile(L, file && *file ? file : "tests/fuzz/lua_targets.lua") != LUA_OK ||
	    lua_pcall(L, 0, 1, -2) != LUA_OK)
		die("cannot load the targets", lua_tostring(L, -1));
	if (lua_getfield(L, -1, name) != LUA_TFUNCTION)
		die("no such target in lua_targets.lua", name);
	target_ref = luaL_ref(L, LUA_REGISTRYINDEX);
	lua_pop(L, 2);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int top = lua_gettop(L), mask = lua_gethookmask(L), count = lua_gethookcount(L), rc;
	lua_Hook old = lua_gethook(L);

	lua_pushcfunction(L, traceback);
	lua_rawgeti(L, LUA_REGISTRYINDEX, target_ref);
	lua_pushlstring(L, (const char *)data, size);
	lua_pushcfunction(L, bad);
	cov_prev = 0;
	lua_sethook(L, line_hook, LUA_MASKLINE, 0);
	rc = lua_pcall(L, 2, 0, top + 1);
	lua_sethook(L, old, mask, count);
	if (rc != LUA_OK) {
		fprintf(stderr, "fuzz_lua: a Lua error escaped the target:\n%s\n", lua_tostring(L, -1));
		finding();
	}
	lua_settop(L, top);
	return 0;
}
