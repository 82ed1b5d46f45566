/* lstate: the host's Lua state (see lstate.h). */
#include "lstate.h"

#include <lauxlib.h>
#include <lualib.h>
#include <stdlib.h>
#include <string.h>

#include "creds.h"
#include "embedded.h"
#include "json.h"
#include "lua_engine.h"
#include "lua_server.h"
#include "lua_sys.h"
#include "log.h"
#include "luax.h"
#include "store.h"
#include "xml.h"

struct mem {
	size_t used;   /* bytes allocated now */
	size_t limit;  /* cap */
};

static void *capped_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
	struct mem *m = ud;
	size_t old = ptr ? osize : 0;
	void *p;

	if (nsize == 0) {
		free(ptr);
		m->used -= old;
		return NULL;
	}
	if (nsize > old && m->used - old + nsize > m->limit)
		return NULL;
	p = realloc(ptr, nsize);
	if (p)
		m->used = m->used - old + nsize;
	return p;
}

static int panic(lua_State *L)
{
	const char *msg = lua_tostring(L, -1);

	log_msg(LOG_ERROR, "lua", "unprotected error: %s", msg ? msg : "?");
	return 0; /* Lua aborts */
}

/* package.searchers entry: the Lua tree compiled into the binary */
static int search_embedded(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);

	if (strncmp(name, "playbooks.", 10) == 0) {
		/* playbooks run only sandboxed, through hypd.playbook */
		lua_pushfstring(L, "'%s' is a playbook, not a module", name);
		return 1;
	}
	for (const struct hypd_chunk *c = hypd_embedded; c->module; c++) {
		if (strcmp(c->module, name) != 0)
			continue;
		if (luaL_loadbufferx(L, c->data, (size_t)c->size, c->chunkname, "t"))
			return lua_error(L);
		lua_pushstring(L, c->chunkname + 1);
		return 2;
	}
	lua_pushfstring(L, "no embedded module '%s'", name);
	return 1;
}

int luaopen_hypd_sigv4(lua_State *L); /* lua_sigv4.c */
int luaopen_hypd__lock(lua_State *L); /* lua_statelock.c */
int luaopen_hypd__cli(lua_State *L);  /* lua_cli.c */
int luaopen_hypd_yaml(lua_State *L);  /* lua_yaml.c */
int luaopen_hypd__backup(lua_State *L); /* lua_store_backup.c */

static const luaL_Reg c_modules[] = {
	{ "hypd.core", luaopen_hypd_core },
	{ "hypd._server", luaopen_hypd__server },
	{ "hypd.sys", luaopen_hypd_sys },
	{ "hypd._log", luaopen_hypd_log },
	{ "hypd.json", luaopen_hypd_json },
	{ "hypd.store", luaopen_hypd_store },
	{ "hypd.xml", luaopen_hypd_xml },
	{ "hypd.yaml", luaopen_hypd_yaml },
	{ "hypd._aws", luaopen_hypd__aws },
	{ "hypd.sigv4", luaopen_hypd_sigv4 },
	{ "hypd._lock", luaopen_hypd__lock },
	{ "hypd._cli", luaopen_hypd__cli },
	{ "hypd._backup", luaopen_hypd__backup },
	{ NULL, NULL },
};

static int setup(lua_State *L)
{
	luaL_openlibs(L);
	/* no bytecode in this state: playbooks reach the string table through
	 * every string's metatable ("").dump), and nothing here dumps */
	lua_getglobal(L, "string");
	lua_pushnil(L);
	lua_setfield(L, -2, "dump");
	lua_pop(L, 1);
	hx_open(L);
	luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PRELOAD_TABLE);
	for (const luaL_Reg *m = c_modules; m->name; m++) {
		lua_pushcfunction(L, m->func);
		lua_setfield(L, -2, m->name);
	}
	lua_pop(L, 1);
	/* searchers: preload, then the embedded tree; nothing from disk */
	lua_getglobal(L, "package");
	lua_getfield(L, -1, "searchers");
	lua_geti(L, -1, 1);
	lua_createtable(L, 2, 0);
	lua_insert(L, -2);
	lua_seti(L, -2, 1);
	lua_pushcfunction(L, search_embedded);
	lua_seti(L, -2, 2);
	lua_setfield(L, -3, "searchers");
	lua_pop(L, 1);
	lua_pushliteral(L, "");
	lua_setfield(L, -2, "path");
	lua_pushliteral(L, "");
	lua_setfield(L, -2, "cpath");
	lua_pop(L, 1);
	return 0;
}

lua_State *lstate_new(size_t limit)
{
	struct mem *m = calloc(1, sizeof *m);
	lua_State *L;

	if (!m)
		return NULL;
	m->limit = limit ? limit : (size_t)1 << 30;
	L = lua_newstate(capped_alloc, m);
	if (!L) {
		free(m);
		return NULL;
	}
	lua_atpanic(L, panic);
	lua_pushcfunction(L, setup);
	if (lua_pcall(L, 0, 0, 0) != LUA_OK) {
		lua_close(L);
		free(m);
		return NULL;
	}
	return L;
}

size_t lstate_memory(lua_State *L)
{
	void *ud;

	lua_getallocf(L, &ud);
	return ((struct mem *)ud)->used;
}

void lstate_close(lua_State *L)
{
	void *ud;

	if (!L)
		return;
	lua_getallocf(L, &ud);
	lua_close(L);
	free(ud);
}
