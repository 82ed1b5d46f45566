/*
 * lua_sys: module "hypd.sys", the system functions: the environment
 * (setenv), standard input (stdin_line, read on a worker), terminals
 * (isatty), files and directories (listdir, stat, write_private,
 * remove), bytes (b64encode, b64decode, digest, gzip, random_bytes) and
 * certificates (tls_cert, a binding of tlsgen.h).
 */
#ifndef HYPD_LUA_SYS_H
#define HYPD_LUA_SYS_H

#include <lua.h>

/* Opens module "hypd.sys" (lstate.c). */
int luaopen_hypd_sys(lua_State *L);

#endif
