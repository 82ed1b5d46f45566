/*
 * lstate: creates the host's Lua state: a memory cap, the standard
 * libraries, the C modules in package.preload, and one module searcher that
 * serves the Lua tree compiled into the binary. Loading Lua or C modules
 * from package.path / package.cpath is switched off.
 */
#ifndef HYPD_LSTATE_H
#define HYPD_LSTATE_H

#include <lua.h>
#include <stddef.h>

/* Returns a new state whose allocations are capped at limit bytes (0 = 1 GiB),
 * or NULL when out of memory. Close with lstate_close(). */
lua_State *lstate_new(size_t limit);
void lstate_close(lua_State *L);

/* Bytes the state has allocated now. */
size_t lstate_memory(lua_State *L);

#endif
