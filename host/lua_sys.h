/*
 * lua_sys: the system functions of module "hypd.core": the environment
 * (setenv), standard input (stdin_line, read on a worker), directories
 * (listdir), bytes (b64encode, b64decode, digest, random_bytes) and
 * certificates (tls_cert, a binding of tlsgen.h).
 */
#ifndef HYPD_LUA_SYS_H
#define HYPD_LUA_SYS_H

#include <lua.h>

/* Adds the system functions to the table at idx (luaopen_hypd_core). */
void lua_sys_register(lua_State *L, int idx);

#endif
