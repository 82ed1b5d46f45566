/* lua_sys: module "hypd.sys", the system functions (see lua_sys.h). */
#include "lua_sys.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <lauxlib.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <zlib.h>

#include "creds.h"
#include "jobs.h"
#include "lua_engine.h"
#include "luax.h"
#include "tlsgen.h"

/* --- environment and standard input --- */

/*
 * sys.setenv(name [, value]): sets (or, without value, unsets) an
 * environment variable of the process. Changing an AWS_* variable also
 * forgets the cached credentials, so the provider chain reads the new
 * environment. Only for start-up (hypd serve --sandbox), before any
 * credential resolution runs on a worker.
 */
static int l_setenv(lua_State *L)
{
	const char *name = luaL_checkstring(L, 1);
	const char *value = luaL_optstring(L, 2, NULL);
	int rc = value ? setenv(name, value, 1) : unsetenv(name);

	if (rc != 0)
		return luaL_error(L, "setenv %s: %s", name, strerror(errno));
	if (!strncmp(name, "AWS_", 4))
		creds_reset();
	return 0;
}

/*
 * Standard input, one line at a time, read on a worker so the engine keeps
 * running (MCP over stdio). One read at a time; bytes past the line stay in
 * `in` for the next read. A read waits at most a second, then answers
 * {again = true}, so a blocked read never holds up the worker pool's
 * shutdown for long.
 */
#define STDIN_LINE_MAX ((size_t)16 << 20) /* longest line accepted */

static struct {
	char *buf;     /* bytes read and not yet returned (engine-owned between jobs) */
	size_t len;    /* bytes in buf */
	size_t cap;    /* allocated */
	int eof;       /* read(2) returned 0 */
	int skipping;  /* dropping the rest of a line that was too long */
	int busy;      /* a job is reading (engine thread only) */
} in;

struct stdin_job {
	job base;      /* first: the pool sees a job */
	char *line;    /* the line without its newline (malloc'd), or NULL */
	size_t len;    /* bytes in line */
	int status;    /* 0 line, 1 end of input, 2 nothing yet, 3 too long, 4 error */
	char err[160]; /* the failure (status 4) */
};

/* takes the first line out of in.buf; 1 when there was one */
static int stdin_take(struct stdin_job *s)
{
	char *nl = in.len ? memchr(in.buf, '\n', in.len) : NULL;
	size_t n;

	if (!nl)
		return 0;
	n = (size_t)(nl - in.buf);
	if (in.skipping) {
		in.skipping = 0;
		s->status = 3;
	} else if (!(s->line = malloc(n + 1))) {
		s->status = 4;
		snprintf(s->err, sizeof s->err, "out of memory");
	} else {
		memcpy(s->line, in.buf, n);
		s->line[n] = '\0';
		s->len = n > 0 && s->line[n - 1] == '\r' ? n - 1 : n;
		s->status = 0;
	}
	memmove(in.buf, nl + 1, in.len - n - 1);
	in.len -= n + 1;
	return 1;
}

static void stdin_run(job *j)
{
	struct stdin_job *s = (struct stdin_job *)j;
	struct pollfd pfd = { .fd = 0, .events = POLLIN };
	ssize_t got;
	int ready;

	for (;;) {
		if (stdin_take(s))
			return;
		if (in.eof) {
			s->status = 1;
			if (in.len && !in.skipping && (s->line = malloc(in.len + 1))) {
				memcpy(s->line, in.buf, in.len);
				s->line[in.len] = '\0';
				s->len = in.len;
				s->status = 0;
			}
			in.len = 0;
			return;
		}
		if (in.len >= STDIN_LINE_MAX) {
			in.len = 0;
			in.skipping = 1;
		}
		if (in.cap - in.len < 65536) {
			size_t cap = in.cap ? in.cap * 2 : 65536 * 2;
			char *b = realloc(in.buf, cap);

			if (!b) {
				s->status = 4;
				snprintf(s->err, sizeof s->err, "out of memory");
				return;
			}
			in.buf = b;
			in.cap = cap;
		}
		ready = poll(&pfd, 1, 1000);
		got = ready > 0 ? read(0, in.buf + in.len, in.cap - in.len) : -1;
		if (ready == 0 || (got < 0 && (errno == EINTR || errno == EAGAIN))) {
			s->status = 2;
			return;
		}
		if (got < 0) {
			s->status = 4;
			snprintf(s->err, sizeof s->err, "reading standard input: %s", strerror(errno));
			return;
		}
		if (got == 0)
			in.eof = 1;
		in.len += (size_t)got;
	}
}

static void stdin_push(job *j, void *lua_state)
{
	static const char *const flags[] = { NULL, "eof", "again", "too_long" };
	struct stdin_job *s = (struct stdin_job *)j;
	lua_State *L = lua_state;

	in.busy = 0;
	lua_createtable(L, 0, 1);
	if (s->status == 0) {
		lua_pushlstring(L, s->line, s->len);
		lua_setfield(L, -2, "line");
	} else if (s->status == 4) {
		hx_newerror(L, "IO", "%s", s->err);
		lua_setfield(L, -2, "err");
	} else {
		lua_pushboolean(L, 1);
		lua_setfield(L, -2, flags[s->status]);
	}
}

static void stdin_destroy(job *j)
{
	struct stdin_job *s = (struct stdin_job *)j;

	free(s->line);
	free(s);
}

/* sys.stdin_line() -> job id (await it with _sched.await("job", id));
 * the result is {line = text (no newline)} | {eof = true} | {again = true}
 * (nothing within a second: ask again) | {too_long = true} (a line over
 * 16 MiB was dropped) | {err = IO error} */
static int l_stdin_line(lua_State *L)
{
	jobs *q = lua_engine_jobs(L);
	struct stdin_job *s;
	uint64_t id;

	if (in.busy)
		return hx_raise(L, "STATE", "standard input is already being read");
	if (!(s = calloc(1, sizeof *s)))
		return luaL_error(L, "out of memory");
	s->base.run = stdin_run;
	s->base.push = stdin_push;
	s->base.destroy = stdin_destroy;
	if (!(id = jobs_submit(q, &s->base))) {
		stdin_destroy(&s->base);
		return hx_fail(L, "STATE", "no worker thread could start");
	}
	in.busy = 1;
	lua_pushinteger(L, (lua_Integer)id);
	return 1;
}

/* --- files --- */

/* sys.listdir(path) -> sorted array of entry names (no . or ..) | nil, err */
/*
 * sys.write_private(path, data) -> true | nil, err: writes a file only its
 * owner can read (0600, in a 0700 directory it creates if missing),
 * durably (fsync, then rename over the old one). sys.remove(path) -> true.
 * For the secrets a running operation needs after a restart.
 */
static int l_write_private(lua_State *L)
{
	size_t len;
	const char *path = luaL_checkstring(L, 1);
	const char *data = luaL_checklstring(L, 2, &len);
	char tmp[4096], dir[4096], *slash;
	int fd, ok;

	if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
		return hx_fail(L, "VALIDATION", "path too long");
	snprintf(dir, sizeof dir, "%s", path);
	slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir(dir, 0700) != 0 && errno != EEXIST)
			return hx_fail(L, "IO", "%s: %s", dir, strerror(errno));
	}
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return hx_fail(L, "IO", "%s: %s", tmp, strerror(errno));
	ok = fchmod(fd, 0600) == 0 && write(fd, data, len) == (ssize_t)len && fsync(fd) == 0;
	if (close(fd) != 0)
		ok = 0;
	if (!ok || rename(tmp, path) != 0) {
		int e = errno;

		unlink(tmp);
		return hx_fail(L, "IO", "%s: %s", path, strerror(e));
	}
	lua_pushboolean(L, 1);
	return 1;
}

static int l_remove(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);

	if (unlink(path) != 0 && errno != ENOENT)
		return hx_fail(L, "IO", "%s: %s", path, strerror(errno));
	lua_pushboolean(L, 1);
	return 1;
}

/* sys.isatty(fd) -> true when fd (0, 1, 2) is a terminal */
static int l_isatty(lua_State *L)
{
	lua_Integer fd = luaL_checkinteger(L, 1);

	luaL_argcheck(L, fd >= 0 && fd <= 2, 1, "0, 1 or 2");
	lua_pushboolean(L, isatty((int)fd) == 1);
	return 1;
}

static int l_listdir(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return hx_fail(L, errno == ENOENT ? "NOT_FOUND" : "IO", "%s: %s", path, strerror(errno));
	lua_newtable(L);
	while ((e = readdir(d)) != NULL) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		lua_pushstring(L, e->d_name);
		lua_rawseti(L, -2, ++n);
	}
	closedir(d);
	lua_getglobal(L, "table");
	lua_getfield(L, -1, "sort");
	lua_pushvalue(L, -3);
	lua_call(L, 1, 0);
	lua_pop(L, 1);
	return 1;
}

/*
 * sys.stat(path) -> {type = "file"|"dir"|"link"|"other", mode = permission
 * bits, uid, size} | nil, err. lstat: a link is reported as a link.
 */
static int l_stat(lua_State *L)
{
	const char *path = luaL_checkstring(L, 1);
	struct stat st;

	if (lstat(path, &st) != 0)
		return hx_fail(L, errno == ENOENT ? "NOT_FOUND" : "IO", "%s: %s", path, strerror(errno));
	lua_createtable(L, 0, 4);
	lua_pushstring(L, S_ISREG(st.st_mode) ? "file" : S_ISDIR(st.st_mode) ? "dir"
			  : S_ISLNK(st.st_mode) ? "link" : "other");
	lua_setfield(L, -2, "type");
	lua_pushinteger(L, (lua_Integer)(st.st_mode & 07777));
	lua_setfield(L, -2, "mode");
	lua_pushinteger(L, (lua_Integer)st.st_uid);
	lua_setfield(L, -2, "uid");
	lua_pushinteger(L, (lua_Integer)st.st_size);
	lua_setfield(L, -2, "size");
	return 1;
}

/* --- bytes: base64, digests, randomness --- */

/* sys.b64encode(s [, url]) -> base64 (url: base64url without padding) */
static int l_b64encode(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	int url = lua_toboolean(L, 2);
	luaL_Buffer b;
	size_t n = 4 * ((len + 2) / 3);
	char *out = luaL_buffinitsize(L, &b, n + 1);
	int w = EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len);

	if (url) {
		for (int i = 0; i < w; i++)
			out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
		while (w > 0 && out[w - 1] == '=')
			w--;
	}
	luaL_pushresultsize(&b, (size_t)w);
	return 1;
}

/* sys.b64decode(s) -> bytes, or nil when s is not base64 */
static int l_b64decode(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	luaL_Buffer b;
	char *out;
	int w, pad = 0;

	if (len % 4 != 0)
		return 0;
	out = luaL_buffinitsize(L, &b, len / 4 * 3 + 1);
	w = len ? EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)s, (int)len) : 0;
	if (w < 0)
		return 0;
	while (pad < 2 && len > (size_t)pad && s[len - 1 - pad] == '=')
		pad++;
	luaL_pushresultsize(&b, (size_t)(w - pad));
	return 1;
}

/* sys.digest("sha256"|"md5", data, "hex"|"base64"|"raw") */
static int l_digest(lua_State *L)
{
	static const char *const algs[] = { "sha256", "md5", NULL };
	static const char *const encs[] = { "hex", "base64", "raw", NULL };
	int alg = luaL_checkoption(L, 1, NULL, algs);
	size_t len;
	const char *data = luaL_checklstring(L, 2, &len);
	int enc = luaL_checkoption(L, 3, "hex", encs);
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	char hex[2 * EVP_MAX_MD_SIZE + 1];

	if (!EVP_Digest(data, len, md, &mdlen, alg == 0 ? EVP_sha256() : EVP_md5(), NULL))
		return hx_raise(L, "INTERNAL", "digest failed");
	if (enc == 2) {
		lua_pushlstring(L, (const char *)md, mdlen);
	} else if (enc == 1) {
		char b64[4 * ((EVP_MAX_MD_SIZE + 2) / 3) + 1];

		lua_pushlstring(L, b64, (size_t)EVP_EncodeBlock((unsigned char *)b64, md, (int)mdlen));
	} else {
		for (unsigned int i = 0; i < mdlen; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
		lua_pushlstring(L, hex, 2 * mdlen);
	}
	return 1;
}

/* sys.gzip(data [, level]) -> data as one gzip member (RFC 1952, no name,
 * time 0: the same bytes for the same data), level 1..9 (default 9); the
 * output buffer is Lua's (deflateBound), zlib's state is freed before any raise */
static int l_gzip(lua_State *L)
{
	size_t len;
	const char *data = luaL_checklstring(L, 1, &len);
	int level = (int)luaL_optinteger(L, 2, 9);
	z_stream z;
	luaL_Buffer b;
	char *out;
	uLong cap;
	int rc;

	luaL_argcheck(L, level >= 1 && level <= 9, 2, "a level from 1 to 9");
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return hx_raise(L, "INTERNAL", "gzip: deflateInit2 failed");
	cap = deflateBound(&z, (uLong)len) + 32;
	deflateEnd(&z);
	out = luaL_buffinitsize(L, &b, (size_t)cap);
	memset(&z, 0, sizeof z);
	if (deflateInit2(&z, level, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY) != Z_OK)
		return hx_raise(L, "INTERNAL", "gzip: deflateInit2 failed");
	z.next_in = (Bytef *)data;
	z.avail_in = (uInt)len;
	z.next_out = (Bytef *)out;
	z.avail_out = (uInt)cap;
	rc = deflate(&z, Z_FINISH);
	cap = z.total_out;
	deflateEnd(&z);
	if (rc != Z_STREAM_END)
		return hx_raise(L, "INTERNAL", "gzip: deflate did not finish (%d)", rc);
	luaL_pushresultsize(&b, (size_t)cap);
	return 1;
}

/* sys.random_bytes(n) -> n cryptographically random bytes */
static int l_random_bytes(lua_State *L)
{
	lua_Integer n = luaL_checkinteger(L, 1);
	luaL_Buffer b;
	unsigned char *out;

	luaL_argcheck(L, n >= 0 && n <= 4096, 1, "0 to 4096 bytes");
	out = (unsigned char *)luaL_buffinitsize(L, &b, (size_t)n);
	if (n > 0 && RAND_bytes(out, (int)n) != 1)
		return hx_raise(L, "INTERNAL", "no randomness available");
	luaL_pushresultsize(&b, (size_t)n);
	return 1;
}

/* --- certificates --- */

/* Pushes nil, err(VALIDATION) with err.field; returns 2. */
static int fail_field(lua_State *L, const char *field, const char *msg)
{
	hx_fail(L, "VALIDATION", "tls_cert: %s", msg);
	lua_pushstring(L, field);
	lua_setfield(L, -2, "field");
	return 2;
}

/* Checks opts[name] has Lua type want (or is absent); 0, or pushes nil, err. */
static int check_field(lua_State *L, const char *name, int want)
{
	int t = lua_getfield(L, 1, name);

	lua_pop(L, 1);
	if (t == LUA_TNIL || t == want)
		return 0;
	lua_pushfstring(L, "field '%s' must be a %s", name, lua_typename(L, want));
	return fail_field(L, name, lua_tostring(L, -1));
}

/*
 * Reads the array opts[name] of strings into a NULL-terminated vector in a
 * userdata left on the stack (the strings stay alive in opts). Returns 0,
 * or pushes nil, err and returns 2.
 */
static int read_strings(lua_State *L, const char *name, const char *const **out)
{
	const char **v;
	lua_Integer n;

	*out = NULL;
	if (lua_getfield(L, 1, name) == LUA_TNIL) {
		lua_pop(L, 1);
		return 0;
	}
	n = luaL_len(L, -1);
	if (n < 0 || n > 1000)
		return fail_field(L, name, "too many entries");
	v = lua_newuserdatauv(L, (size_t)(n + 1) * sizeof *v, 0);
	for (lua_Integer i = 1; i <= n; i++) {
		if (lua_geti(L, -2, i) != LUA_TSTRING) {
			lua_pushfstring(L, "field '%s' must be an array of strings", name);
			return fail_field(L, name, lua_tostring(L, -1));
		}
		v[i - 1] = lua_tostring(L, -1);
		lua_pop(L, 1);
	}
	v[n] = NULL;
	lua_remove(L, -2); /* the table stays referenced by opts */
	*out = v;
	return 0;
}

/*
 * sys.tls_cert{cn, ca, issuer_cert_pem, issuer_key_pem, ips, dns, days}
 *   -> cert_pem, key_pem | nil, err (VALIDATION naming err.field)
 */
static int l_tls_cert(lua_State *L)
{
	static const char *const names[] = { "cn", "ca", "issuer_cert_pem",
		"issuer_key_pem", "ips", "dns", "days", NULL };
	static const int types[] = { LUA_TSTRING, LUA_TBOOLEAN, LUA_TSTRING,
		LUA_TSTRING, LUA_TTABLE, LUA_TTABLE, LUA_TNUMBER };
	tlsgen_opts o = { 0 };
	char *cert, *key, err[256];
	const char *field;
	int rc;

	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
		int i = 0;

		while (names[i] && (lua_type(L, -2) != LUA_TSTRING ||
				    strcmp(names[i], lua_tostring(L, -2)) != 0))
			i++;
		if (!names[i]) {
			const char *key = luaL_tolstring(L, -2, NULL);

			lua_pushfstring(L, "unknown field '%s'", key);
			return fail_field(L, key, lua_tostring(L, -1));
		}
	}
	for (int i = 0; names[i]; i++)
		if (check_field(L, names[i], types[i]))
			return 2;
	lua_getfield(L, 1, "days");
	if (!lua_isnil(L, -1) && !lua_isinteger(L, -1))
		return fail_field(L, "days", "field 'days' must be an integer");
	o.days = (int)luaL_optinteger(L, -1, 0);
	if (lua_tointeger(L, -1) < 0 || lua_tointeger(L, -1) > 100000)
		return fail_field(L, "days", "field 'days' is out of range");
	lua_getfield(L, 1, "cn");
	o.cn = lua_tostring(L, -1);
	lua_getfield(L, 1, "ca");
	o.ca = lua_toboolean(L, -1);
	lua_getfield(L, 1, "issuer_cert_pem");
	o.issuer_cert_pem = lua_tostring(L, -1);
	lua_getfield(L, 1, "issuer_key_pem");
	o.issuer_key_pem = lua_tostring(L, -1);
	if (read_strings(L, "ips", &o.ips) || read_strings(L, "dns", &o.dns))
		return 2;
	/* only a Lua memory error in the two pushes below could leak them */
	rc = tlsgen_cert(&o, &cert, &key, &field, err, sizeof err);
	if (rc != 0) {
		if (field)
			return fail_field(L, field, err);
		return hx_fail(L, "INTERNAL", "tls_cert: %s", err);
	}
	lua_pushstring(L, cert);
	lua_pushstring(L, key);
	free(cert);
	OPENSSL_cleanse(key, strlen(key));
	free(key);
	return 2;
}

static const luaL_Reg sys_funcs[] = {
	{ "setenv", l_setenv },
	{ "stdin_line", l_stdin_line },
	{ "listdir", l_listdir },
	{ "stat", l_stat },
	{ "isatty", l_isatty },
	{ "write_private", l_write_private },
	{ "remove", l_remove },
	{ "b64encode", l_b64encode },
	{ "b64decode", l_b64decode },
	{ "digest", l_digest },
	{ "gzip", l_gzip },
	{ "random_bytes", l_random_bytes },
	{ "tls_cert", l_tls_cert },
	{ NULL, NULL },
};

int luaopen_hypd_sys(lua_State *L)
{
	luaL_newlib(L, sys_funcs);
	return 1;
}
