/*
 * main: the hypd command line. Parsing, usage texts and every command are
 * Lua (lua/hypd/cli.lua); this file only opens the host. It hands the
 * words after `hypd` to hypd.cli twice:
 *
 *   1. plan(argv) in a bare Lua state, before any host exists: help,
 *      version and usage errors end there (no state directory is touched);
 *      otherwise it answers the hypd_open options the command needs
 *      (state_dir, playbooks_dir, log_level, region, profile) and whether
 *      Ctrl-C should interrupt the engine rather than kill the process;
 *   2. main(argv) in the host opened with them: runs the command and
 *      returns its exit status.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "host.h"
#include "hypd.h"
#include "lstate.h"
#include "luax.h"

static hypd *running;

static void on_signal(int sig)
{
	(void)sig;
	hypd_interrupt(running);
}

/*
 * Calls hypd.cli.<fn>(argv) in L through the protected entry point. Returns
 * 0 with the result on top, or -1 after printing the error.
 */
static int call_cli(lua_State *L, const char *fn, int argc, char **argv)
{
	lua_getglobal(L, "require");
	lua_pushliteral(L, "hypd.cli");
	if (hx_pcall(L, 1, 1) == LUA_OK) {
		lua_getfield(L, -1, fn);
		lua_createtable(L, argc, 0);
		for (int i = 0; i < argc; i++) {
			lua_pushstring(L, argv[i]);
			lua_seti(L, -2, i + 1);
		}
		if (hx_pcall(L, 1, 1) == LUA_OK)
			return 0;
	}
	fprintf(stderr, "hypd: %s\n", hx_tostring_error(L, -1));
	return -1;
}

/* The string field `name` of the table on top, or NULL. */
static const char *field(lua_State *L, const char *name)
{
	const char *s;

	lua_getfield(L, -1, name);
	s = lua_tostring(L, -1);
	lua_pop(L, 1); /* the string stays alive in the table */
	return s;
}

int main(int argc, char **argv)
{
	hypd_options o = { 0 };
	char *err = NULL;
	lua_State *P = lstate_new(0);
	hypd *h;
	int rc, signals;

	if (!P) {
		fputs("hypd: out of memory\n", stderr);
		return 1;
	}
	if (call_cli(P, "plan", argc - 1, argv + 1) != 0) {
		lstate_close(P);
		return 1;
	}
	if (lua_getfield(P, -1, "exit") == LUA_TNUMBER) {
		rc = (int)lua_tointeger(P, -1);
		lstate_close(P);
		return rc;
	}
	lua_getfield(P, -2, "signals");
	signals = lua_toboolean(P, -1);
	lua_getfield(P, -3, "host");
	o.state_dir = field(P, "state_dir");
	o.playbooks_dir = field(P, "playbooks_dir");
	o.log_level = field(P, "log_level");
	o.region = field(P, "region");
	o.profile = field(P, "profile");
	h = hypd_open(&o, &err); /* copies what it keeps */
	lstate_close(P);
	if (!h) {
		fprintf(stderr, "hypd: %s\n", err ? err : "cannot start");
		hypd_free(err);
		return 1;
	}
	if (signals) {
		running = h;
		signal(SIGINT, on_signal);
		signal(SIGTERM, on_signal);
	}
	rc = call_cli(hypd_lua(h), "main", argc - 1, argv + 1) == 0 &&
	     lua_isinteger(hypd_lua(h), -1) ? (int)lua_tointeger(hypd_lua(h), -1) : 1;
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	running = NULL;
	hypd_close(h);
	return rc;
}
