/*
 * host: what the CLI needs from a hypd host beyond the public API.
 */
#ifndef HYPD_HOST_H
#define HYPD_HOST_H

#include <lua.h>

#include "hypd.h"

/* The host's Lua state (owned by the host). */
lua_State *hypd_lua(hypd *h);

/*
 * Calls function `fn` of module `module` with the value on top of L as its
 * only argument (popped), through the protected entry point. On success
 * leaves the result on the stack and returns 0; on failure leaves the error
 * table and returns -1.
 */
int hypd_call_module(hypd *h, const char *module, const char *fn);

/* Asks the running call to stop (from a signal handler or another thread). */
void hypd_interrupt(hypd *h);

#endif
