/* json: JSON text <-> Lua values, and the module "hypd.json" (see json.h). */
#include "json.h"
#include "luax.h"

#include <ctype.h>
#include <lauxlib.h>
#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OBJECT_MT HJ_OBJECT_MT
#define ARRAY_MT HJ_ARRAY_MT
#define ENCODER_MT "hypd.json.encoder"

enum { UNMARKED, OBJECT, ARRAY };

/* Pushes the object and the array metatables, creating them on first use. */
static void push_marks(lua_State *L)
{
	luaL_newmetatable(L, OBJECT_MT);
	luaL_newmetatable(L, ARRAY_MT);
}

static int mark_of(lua_State *L, int idx, int objmt, int arrmt)
{
	int mark = UNMARKED;

	if (lua_getmetatable(L, idx)) {
		if (lua_rawequal(L, -1, objmt))
			mark = OBJECT;
		else if (lua_rawequal(L, -1, arrmt))
			mark = ARRAY;
		lua_pop(L, 1);
	}
	return mark;
}

void hj_pushnull(lua_State *L)
{
	lua_pushlightuserdata(L, NULL);
}

int hj_isnull(lua_State *L, int idx)
{
	return lua_type(L, idx) == LUA_TLIGHTUSERDATA && !lua_touserdata(L, idx);
}

/* Decoding: recursive descent over s[0..len), pushing values as it goes. */

struct dec {
	lua_State *L;
	const char *s;		/* the text, not NUL-terminated */
	size_t len;		/* its length in bytes */
	size_t pos;		/* offset of the next byte to read */
	int depth;		/* arrays and objects open at pos */
	int objmt, arrmt;	/* stack indices of the marker metatables */
	int bytes;		/* strings may hold any bytes (the store's own text) */
	size_t where;		/* offset of the error */
	char *err;		/* the caller's message buffer */
	size_t errlen;		/* its size */
};

static int peek(struct dec *d)
{
	return d->pos < d->len ? (unsigned char)d->s[d->pos] : -1;
}

static int dec_fail(struct dec *d, const char *what)
{
	char found[16] = "end of input";
	int c = peek(d);

	d->where = d->pos;
	if (c > ' ' && c < 0x7f)
		snprintf(found, sizeof found, "'%c'", c);
	else if (c >= 0)
		snprintf(found, sizeof found, "byte 0x%02x", (unsigned)c);
	if (d->errlen)
		snprintf(d->err, d->errlen, "%s at byte offset %zu, found %s",
			 what, d->pos, found);
	return -1;
}

static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}

static void skip_ws(struct dec *d)
{
	int c;

	while ((c = peek(d)) == ' ' || c == '\t' || c == '\n' || c == '\r')
		d->pos++;
}

/* The value of four hex digits at p, or -1. */
static long hex4(const char *p)
{
	char b[5];
	int i;

	for (i = 0; i < 4; i++)
		if (!isxdigit((unsigned char)(b[i] = p[i])))
			return -1;
	b[4] = '\0';
	return strtol(b, NULL, 16);
}

/* Adds the UTF-8 of \uXXXX at pos (joining a surrogate pair) to b. */
static int dec_unicode(struct dec *d, luaL_Buffer *b)
{
	long cp, lo;

	if (d->len - d->pos < 6 || (cp = hex4(d->s + d->pos + 2)) < 0)
		return dec_fail(d, "invalid \\u escape");
	if (cp >= 0xdc00 && cp <= 0xdfff)
		return dec_fail(d, "lone low surrogate in \\u escape");
	d->pos += 6;
	if (cp >= 0xd800 && cp <= 0xdbff) {
		if (d->len - d->pos < 6 || memcmp(d->s + d->pos, "\\u", 2) ||
		    (lo = hex4(d->s + d->pos + 2)) < 0xdc00 || lo > 0xdfff)
			return dec_fail(d, "high surrogate not followed by a low surrogate");
		cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
		d->pos += 6;
	}
	if (b) {
		lua_pushfstring(d->L, "%U", cp);	/* Lua's UTF-8 encoder */
		luaL_addvalue(b);
	}
	return 0;
}

/*
 * The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong
 * forms, no surrogates, nothing above U+10FFFF), or 0.
 */
static size_t utf8_seq(const unsigned char *p, size_t left)
{
	unsigned c = p[0], lo = 0x80, hi = 0xbf;
	size_t n, i;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4;
	else
		return 0;
	if (left < n)
		return 0;
	if (c == 0xe0)
		lo = 0xa0;		/* overlong */
	else if (c == 0xed)
		hi = 0x9f;		/* surrogates */
	else if (c == 0xf0)
		lo = 0x90;		/* overlong */
	else if (c == 0xf4)
		hi = 0x8f;		/* above U+10FFFF */
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xbf)
			return 0;
	return n;
}

/*
 * Pushes the string at pos (on its opening quote); with skip, checks it
 * the same way and pushes nothing.
 */
static int dec_string(struct dec *d, int skip)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *s = d->s, *p;
	luaL_Buffer b;
	int buffered = 0;
	size_t i, n;

	d->pos++;
	for (;;) {
		for (i = d->pos; i < d->len; i++) {
			unsigned char c = (unsigned char)s[i];

			if (c == '"' || c == '\\' || c < ' ')
				break;
			if (c >= 0x80 && !d->bytes) {
				if (!(n = utf8_seq((const unsigned char *)s + i, d->len - i))) {
					d->pos = i;
					return dec_fail(d, "invalid UTF-8 in string");
				}
				i += n - 1;
			}
		}
		if (i < d->len && s[i] == '"' && !buffered) {
			if (!skip)
				lua_pushlstring(d->L, s + d->pos, i - d->pos);
			d->pos = i + 1;
			return 0;
		}
		if (!buffered++ && !skip)
			luaL_buffinit(d->L, &b);
		if (!skip)
			luaL_addlstring(&b, s + d->pos, i - d->pos);
		d->pos = i;
		if (i >= d->len || (s[i] == '\\' && i + 1 >= d->len)) {
			d->pos = d->len;
			return dec_fail(d, "unterminated string");
		}
		if (s[i] == '"') {
			d->pos++;
			if (!skip)
				luaL_pushresult(&b);
			return 0;
		}
		if (s[i] != '\\')
			return dec_fail(d, "control character in string");
		if (s[i + 1] == 'u') {
			if (dec_unicode(d, skip ? NULL : &b))
				return -1;
			continue;
		}
		if (!(p = memchr(from, s[i + 1], sizeof from - 1))) {
			d->pos = i + 1;
			return dec_fail(d, "invalid escape in string");
		}
		if (!skip)
			luaL_addchar(&b, to[p - from]);
		d->pos = i + 2;
	}
}

/* Steps over digits at pos; fails if there are none. */
static int dec_digits(struct dec *d, const char *what)
{
	if (!is_digit(peek(d)))
		return dec_fail(d, what);
	while (is_digit(peek(d)))
		d->pos++;
	return 0;
}

/* Pushes the number at pos: an integer if the text is one and fits. */
static int dec_number(struct dec *d)
{
	size_t start = d->pos, n;

	if (peek(d) == '-')
		d->pos++;
	if (peek(d) == '0') {
		d->pos++;
		if (is_digit(peek(d)))
			return dec_fail(d, "leading zero in number");
	} else if (dec_digits(d, "expected a digit")) {
		return -1;
	}
	if (peek(d) == '.') {
		d->pos++;
		if (dec_digits(d, "expected a digit after '.'"))
			return -1;
	}
	if (peek(d) == 'e' || peek(d) == 'E') {
		d->pos++;
		if (peek(d) == '+' || peek(d) == '-')
			d->pos++;
		if (dec_digits(d, "expected a digit in the exponent"))
			return -1;
	}
	/* Lua's own conversion: integers when they fit, locale-proof floats */
	n = d->pos - start;
	lua_pushlstring(d->L, d->s + start, n);
	if (lua_stringtonumber(d->L, lua_tostring(d->L, -1)) != n + 1) {
		d->pos = start;
		return dec_fail(d, "number Lua cannot read");
	}
	lua_remove(d->L, -2);
	return 0;
}

static int dec_literal(struct dec *d, const char *word, size_t n)
{
	if (d->len - d->pos < n || memcmp(d->s + d->pos, word, n))
		return dec_fail(d, "invalid literal (expected true, false or null)");
	d->pos += n;
	return 0;
}

/*
 * What a value becomes (keep): KEEP_ALL, the whole value; KEEP_NONE, nothing
 * (the text is checked as for KEEP_ALL, and no Lua value is made); or the
 * stack index (> 0) of a projection table: of an object only the members
 * it names are kept (a true value keeps the member whole, a table projects
 * it, "*" stands for any member not named), of an array every element is
 * projected by the same table, and a scalar is kept as it is.
 */
enum { KEEP_NONE = -1, KEEP_ALL = 0 };

static int dec_value(struct dec *d, int keep);

/* The keep of the member whose key is on the top of the stack. */
static int member_keep(struct dec *d, int keep, int wild)
{
	lua_State *L = d->L;

	lua_pushvalue(L, -1);
	lua_rawget(L, keep);
	if (lua_isnil(L, -1) && wild) {
		lua_pop(L, 1);
		lua_pushliteral(L, "*");
		lua_rawget(L, keep);
	}
	if (lua_istable(L, -1))
		return lua_gettop(L);
	if (lua_toboolean(L, -1)) {
		lua_pop(L, 1);
		return KEEP_ALL;
	}
	lua_pop(L, 1);
	return KEEP_NONE;
}

/* Pushes the array or object at pos, marked with its metatable (see keep). */
static int dec_container(struct dec *d, int object, int keep)
{
	int close = object ? '}' : ']', skip = keep == KEEP_NONE, wild = 0;
	lua_Integer n = 0, kept = 0;

	if (++d->depth > HJ_MAXDEPTH)
		return dec_fail(d, "nesting deeper than 256");
	luaL_checkstack(d->L, 8, "JSON nesting");
	if (!skip) {
		lua_newtable(d->L);
		lua_pushvalue(d->L, object ? d->objmt : d->arrmt);
		lua_setmetatable(d->L, -2);
	}
	if (keep > 0 && object) {
		lua_pushliteral(d->L, "*");
		wild = lua_rawget(d->L, keep) != LUA_TNIL;
		lua_pop(d->L, 1);
	}
	d->pos++;
	for (;;) {
		int child = skip ? KEEP_NONE : keep;

		skip_ws(d);
		if (peek(d) == close && n == 0)
			break;
		if (object) {
			if (peek(d) != '"')
				return dec_fail(d, "expected a string key");
			if (dec_string(d, skip))
				return -1;
			if (keep > 0)
				child = member_keep(d, keep, wild);
			else if (!skip)
				child = KEEP_ALL;
			skip_ws(d);
			if (peek(d) != ':')
				return dec_fail(d, "expected ':'");
			d->pos++;
		}
		if (dec_value(d, child))
			return -1;
		if (object && !skip) {
			if (child > 0)
				lua_remove(d->L, -2);	/* the member's projection */
			if (child == KEEP_NONE)
				lua_pop(d->L, 1);	/* its key */
			else
				lua_rawset(d->L, -3);
		} else if (!skip) {
			lua_rawseti(d->L, -2, ++kept);
		}
		n++;
		skip_ws(d);
		if (peek(d) == close)
			break;
		if (peek(d) != ',')
			return dec_fail(d, object ? "expected ',' or '}'" :
						    "expected ',' or ']'");
		d->pos++;
	}
	d->pos++;
	d->depth--;
	return 0;
}

static int dec_value(struct dec *d, int keep)
{
	int c;

	skip_ws(d);
	switch ((c = peek(d))) {
	case '{':
	case '[':
		return dec_container(d, c == '{', keep);
	case '"':
		return dec_string(d, keep == KEEP_NONE);
	case 't':
	case 'f':
		if (dec_literal(d, c == 't' ? "true" : "false", c == 't' ? 4 : 5))
			return -1;
		if (keep != KEEP_NONE)
			lua_pushboolean(d->L, c == 't');
		return 0;
	case 'n':
		if (dec_literal(d, "null", 4))
			return -1;
		if (keep != KEEP_NONE)
			hj_pushnull(d->L);
		return 0;
	default:
		if (c == '-' || is_digit(c)) {
			if (dec_number(d))
				return -1;
			if (keep == KEEP_NONE)
				lua_pop(d->L, 1);
			return 0;
		}
		return dec_fail(d, "expected a value");
	}
}

/* hj_decode, also telling where the error is. */
static int decode(lua_State *L, const char *s, size_t len, char *err,
		  size_t errlen, size_t *where, int bytes, int keep)
{
	struct dec d = { .L = L, .s = s, .len = len, .err = err,
			 .errlen = err ? errlen : 0, .bytes = bytes };
	int top = lua_gettop(L);

	luaL_checkstack(L, 8, "JSON");
	push_marks(L);
	d.objmt = top + 1;
	d.arrmt = top + 2;
	if (!dec_value(&d, keep)) {
		skip_ws(&d);
		if (d.pos == len) {
			lua_replace(L, top + 1);
			lua_settop(L, top + 1);
			return 0;
		}
		dec_fail(&d, "trailing characters after the value");
	}
	lua_settop(L, top);	/* also closes a luaL_Buffer box */
	*where = d.where;
	return -1;
}

int hj_decode(lua_State *L, const char *s, size_t len, char *err,
	      size_t errlen)
{
	size_t where;

	return decode(L, s, len, err, errlen, &where, 0, KEEP_ALL);
}

int hj_decode_bytes(lua_State *L, const char *s, size_t len, char *err,
		    size_t errlen)
{
	size_t where;

	return decode(L, s, len, err, errlen, &where, 1, KEEP_ALL);
}

/*
 * Encoding: into a malloc'd buffer owned by a userdata (struct enc) on the
 * stack, so that a Lua memory error while encoding frees it through __gc.
 */

struct key {
	const char *s;		/* the key's bytes, owned by its table */
	size_t len;		/* their count */
};

struct enc {
	char *buf;		/* the text so far (malloc'd) */
	size_t len;		/* bytes used in buf */
	size_t cap;		/* bytes allocated for buf */
	struct key *keys;	/* keys of the objects being written, a stack */
	size_t nkeys;		/* entries used in keys */
	size_t keycap;		/* entries allocated for keys */
	int pretty;		/* indent two spaces a level */
	int objmt, arrmt;	/* stack indices of the marker metatables */
	char path[96];		/* where the error is, built while unwinding */
	size_t pathlen;		/* bytes used in path */
	int cut;		/* path lost its outer part */
	char *err;		/* the caller's message buffer */
	size_t errlen;		/* its size */
};

static int enc_value(lua_State *L, struct enc *e, int idx, int depth);

__attribute__((format(printf, 2, 3)))
static int enc_fail(struct enc *e, const char *fmt, ...)
{
	va_list ap;

	if (e->errlen) {
		va_start(ap, fmt);
		vsnprintf(e->err, e->errlen, fmt, ap);
		va_end(ap);
	}
	return -1;
}

/* Prepends a path segment (".key" or "[i]") while an error unwinds. */
static void enc_where(struct enc *e, const char *seg, size_t n)
{
	if (e->cut || e->pathlen + n >= sizeof e->path) {
		e->cut = 1;
		return;
	}
	memmove(e->path + n, e->path, e->pathlen);
	memcpy(e->path, seg, n);
	e->pathlen += n;
}

static void enc_free(struct enc *e)
{
	free(e->buf);
	free(e->keys);
	e->buf = NULL;
	e->keys = NULL;
}

static int enc_gc(lua_State *L)
{
	enc_free(lua_touserdata(L, 1));
	return 0;
}

static int grow(struct enc *e, size_t n)
{
	size_t cap = e->cap ? e->cap : 256;
	char *p;

	while (cap - e->len < n) {
		if (cap > SIZE_MAX / 2)
			return enc_fail(e, "out of memory");
		cap *= 2;
	}
	if (!(p = realloc(e->buf, cap)))
		return enc_fail(e, "out of memory");
	e->buf = p;
	e->cap = cap;
	return 0;
}

static int put(struct enc *e, const char *s, size_t n)
{
	if (e->cap - e->len < n && grow(e, n))
		return -1;
	memcpy(e->buf + e->len, s, n);
	e->len += n;
	return 0;
}

/* In pretty mode: a newline and two spaces per level. */
static int newline(struct enc *e, int depth)
{
	size_t n = 1 + 2 * (size_t)depth;

	if (!e->pretty)
		return 0;
	if (e->cap - e->len < n && grow(e, n))
		return -1;
	e->buf[e->len] = '\n';
	memset(e->buf + e->len + 1, ' ', n - 1);
	e->len += n;
	return 0;
}

static int put_string(struct enc *e, const char *s, size_t len)
{
	static const char from[] = "\"\\\b\f\n\r\t", to[] = "\"\\bfnrt";
	char esc[6] = "\\u00";
	const char *p;
	size_t i, run = 0;
	unsigned char c;

	if (put(e, "\"", 1))
		return -1;
	for (i = 0; i < len; i++) {
		c = (unsigned char)s[i];
		if (c >= ' ' && c != '"' && c != '\\')
			continue;
		if ((p = memchr(from, c, sizeof from - 1)))
			esc[1] = to[p - from];
		else
			esc[1] = 'u';
		esc[4] = "0123456789abcdef"[c >> 4];
		esc[5] = "0123456789abcdef"[c & 15];
		if (put(e, s + run, i - run) || put(e, esc, p ? 2 : 6))
			return -1;
		run = i + 1;
	}
	if (put(e, s + run, len - run))
		return -1;
	return put(e, "\"", 1);
}

/* The shortest of %.15g..%.17g that reads back as d, always float-looking. */
static int put_float(struct enc *e, double d)
{
	static const char *const fmts[] = { "%.15g", "%.16g", "%.17g" };
	char b[40], point = localeconv()->decimal_point[0], *p;
	int i, n = 0;

	if (!isfinite(d))
		return enc_fail(e, "cannot encode NaN or infinity");
	for (i = 0; i < 3; i++) {
		n = snprintf(b, sizeof b - 2, fmts[i], d);
		if (strtod(b, NULL) == d)
			break;
	}
	if (point != '.' && (p = strchr(b, point)))
		*p = '.';
	if (!strpbrk(b, ".e")) {
		memcpy(b + n, ".0", 3);
		n += 2;
	}
	return put(e, b, (size_t)n);
}

static int put_number(lua_State *L, struct enc *e, int idx)
{
	char b[32];
	int n;

	if (!lua_isinteger(L, idx))
		return put_float(e, (double)lua_tonumber(L, idx));
	n = snprintf(b, sizeof b, LUA_INTEGER_FMT,
		     (LUAI_UACINT)lua_tointeger(L, idx));
	return put(e, b, (size_t)n);
}

static int push_key(lua_State *L, struct enc *e, int idx)
{
	struct key *k;
	size_t cap;

	if (e->nkeys == e->keycap) {
		cap = e->keycap ? 2 * e->keycap : 64;
		if (cap > SIZE_MAX / sizeof *k ||
		    !(k = realloc(e->keys, cap * sizeof *k)))
			return enc_fail(e, "out of memory");
		e->keys = k;
		e->keycap = cap;
	}
	k = &e->keys[e->nkeys++];
	k->s = lua_tolstring(L, idx, &k->len);
	return 0;
}

static int key_cmp(const void *a, const void *b)
{
	const struct key *x = a, *y = b;
	int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);

	if (c)
		return c;
	return (x->len > y->len) - (x->len < y->len);
}

/*
 * Writes n members: the array's elements 1..n, or the object's keys
 * e->keys[base..base+n) in byte order with their values.
 */
static int enc_members(lua_State *L, struct enc *e, int idx, int depth,
		       size_t n, size_t base, int object)
{
	struct key k = { "", 0 };
	char seg[32];
	size_t i;
	int rc;

	if (object && n > 1)
		qsort(e->keys + base, n, sizeof *e->keys, key_cmp);
	if (put(e, object ? "{" : "[", 1))
		return -1;
	for (i = 0; i < n; i++) {
		if ((i && put(e, ",", 1)) || newline(e, depth))
			return -1;
		if (object) {
			k = e->keys[base + i];	/* keys move as values nest */
			if (put_string(e, k.s, k.len) ||
			    put(e, ": ", e->pretty ? 2 : 1))
				return -1;
			lua_pushlstring(L, k.s, k.len);
			lua_rawget(L, idx);
		} else {
			lua_rawgeti(L, idx, (lua_Integer)i + 1);
		}
		rc = enc_value(L, e, lua_gettop(L), depth);
		lua_pop(L, 1);
		if (rc && object) {
			enc_where(e, k.s, k.len);
			enc_where(e, ".", 1);
		} else if (rc) {
			enc_where(e, seg, (size_t)snprintf(seg, sizeof seg,
							   "[%zu]", i + 1));
		}
		if (rc)
			return -1;
	}
	if (n && newline(e, depth - 1))
		return -1;
	return put(e, object ? "}" : "]", 1);
}

/* Decides between array and object from the mark and the keys. */
static int enc_table(lua_State *L, struct enc *e, int idx, int depth)
{
	size_t base = e->nkeys, n = 0, nint = 0;
	lua_Integer k, lo = LUA_MAXINTEGER, hi = 0;
	int mark, dense, rc;

	if (depth > HJ_MAXDEPTH)
		return enc_fail(e, "nesting deeper than %d (is there a cycle?)",
				HJ_MAXDEPTH);
	if (!lua_checkstack(L, 4))
		return enc_fail(e, "out of Lua stack");
	mark = mark_of(L, idx, e->objmt, e->arrmt);
	lua_pushnil(L);
	while (lua_next(L, idx)) {
		n++;
		if (lua_type(L, -2) == LUA_TSTRING) {
			rc = push_key(L, e, -2);
		} else if (lua_isinteger(L, -2)) {
			k = lua_tointeger(L, -2);
			lo = k < lo ? k : lo;
			hi = k > hi ? k : hi;
			nint++;
			rc = 0;
		} else {
			rc = enc_fail(e, "cannot encode a table key of type %s",
				      lua_type(L, -2) == LUA_TNUMBER ?
				      "float" : luaL_typename(L, -2));
		}
		lua_pop(L, rc ? 2 : 1);
		if (rc)
			return -1;
	}
	dense = !nint || (lo >= 1 && (lua_Unsigned)hi == nint);
	if (mark == ARRAY && n > nint)
		return enc_fail(e, "a json.array cannot have string keys");
	if (mark == OBJECT && nint)
		return enc_fail(e, "a json.object cannot have integer keys");
	if (mark == UNMARKED && nint && n > nint)
		return enc_fail(e, "cannot encode a table with both integer and string keys");
	if (!dense)
		return enc_fail(e, "sparse array: %zu integer keys, not 1..n"
				" (largest " LUA_INTEGER_FMT ")", nint,
				(LUAI_UACINT)hi);
	if (mark == ARRAY || (mark == UNMARKED && nint))
		rc = enc_members(L, e, idx, depth, nint, base, 0);
	else
		rc = enc_members(L, e, idx, depth, n, base, 1);
	e->nkeys = base;
	return rc;
}

static int enc_value(lua_State *L, struct enc *e, int idx, int depth)
{
	const char *s;
	size_t n;

	switch (lua_type(L, idx)) {
	case LUA_TNIL:
		return put(e, "null", 4);
	case LUA_TBOOLEAN:
		return lua_toboolean(L, idx) ? put(e, "true", 4) :
					       put(e, "false", 5);
	case LUA_TNUMBER:
		return put_number(L, e, idx);
	case LUA_TSTRING:
		s = lua_tolstring(L, idx, &n);
		return put_string(e, s, n);
	case LUA_TTABLE:
		return enc_table(L, e, idx, depth + 1);
	case LUA_TLIGHTUSERDATA:
		if (hj_isnull(L, idx))
			return put(e, "null", 4);
		return enc_fail(e, "cannot encode a userdata value other than json.null");
	default:
		return enc_fail(e, "cannot encode a %s value", luaL_typename(L, idx));
	}
}

/*
 * Encodes the value at idx into a struct enc left on the top of the stack
 * (its buf NUL-terminated), or returns NULL with err set and the stack as
 * it was.
 */
static struct enc *enc_run(lua_State *L, int idx, int pretty, char *err,
			   size_t errlen)
{
	struct enc *e;
	size_t m;

	idx = lua_absindex(L, idx);
	luaL_checkstack(L, 8, "JSON");
	e = lua_newuserdatauv(L, sizeof *e, 0);
	memset(e, 0, sizeof *e);
	if (luaL_newmetatable(L, ENCODER_MT)) {
		lua_pushcfunction(L, enc_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_setmetatable(L, -2);
	push_marks(L);
	e->objmt = lua_gettop(L) - 1;
	e->arrmt = lua_gettop(L);
	e->pretty = pretty;
	e->err = err;
	e->errlen = err ? errlen : 0;
	if (!grow(e, 256) && !enc_value(L, e, idx, 0) && !put(e, "", 1)) {
		e->len--;
		lua_pop(L, 2);
		return e;
	}
	m = e->errlen ? strlen(err) : 0;
	if ((e->pathlen || e->cut) && m < e->errlen)
		snprintf(err + m, e->errlen - m, " (at $%s%.*s)",
			 e->cut ? "[...]" : "", (int)e->pathlen, e->path);
	enc_free(e);
	lua_pop(L, 3);
	return NULL;
}

char *hj_encode(lua_State *L, int idx, int pretty, char *err, size_t errlen)
{
	struct enc *e = enc_run(L, idx, pretty, err, errlen);
	char *s;

	if (!e)
		return NULL;
	s = e->buf;
	e->buf = NULL;
	enc_free(e);
	lua_pop(L, 1);
	return s;
}

/* The Lua module. */

static int l_decode(lua_State *L)
{
	char err[160];
	size_t len, where;
	const char *s = luaL_checklstring(L, 1, &len);
	int bytes = 0, keep = KEEP_ALL;

	if (lua_istable(L, 2)) {
		lua_settop(L, 2);
		lua_getfield(L, 2, "bytes");
		bytes = lua_toboolean(L, -1);
		lua_pop(L, 1);
		if (lua_getfield(L, 2, "keep") == LUA_TTABLE)
			keep = 3;	/* stays at 3 while decoding */
		else if (!lua_isnil(L, 3))
			return luaL_argerror(L, 2, "keep must be a table");
	}
	if (!decode(L, s, len, err, sizeof err, &where, bytes, keep))
		return 1;
	hx_fail(L, "JSON", "%s", err);
	lua_pushinteger(L, (lua_Integer)where);
	lua_setfield(L, -2, "offset");
	return 2;
}

static int l_encode(lua_State *L)
{
	char err[256];
	int pretty = 0;
	struct enc *e;

	luaL_checkany(L, 1);
	if (!lua_isnoneornil(L, 2)) {
		luaL_checktype(L, 2, LUA_TTABLE);
		lua_getfield(L, 2, "pretty");
		pretty = lua_toboolean(L, -1);
		lua_pop(L, 1);
	}
	if (!(e = enc_run(L, 1, pretty, err, sizeof err)))
		return hx_raise(L, "JSON", "%s", err);
	lua_pushlstring(L, e->buf, e->len);	/* on error __gc frees buf */
	enc_free(e);
	return 1;
}

/* json.object and json.array: upvalue 1 is the mark. */
static int l_mark(lua_State *L)
{
	if (lua_isnoneornil(L, 1)) {
		lua_settop(L, 0);
		lua_newtable(L);
	}
	luaL_checktype(L, 1, LUA_TTABLE);
	lua_settop(L, 1);
	lua_pushvalue(L, lua_upvalueindex(1));
	lua_setmetatable(L, 1);
	return 1;
}

/* json.is_object and json.is_array: upvalue 1 is the mark. */
static int l_is_marked(lua_State *L)
{
	int yes = lua_type(L, 1) == LUA_TTABLE && lua_getmetatable(L, 1) &&
		  lua_rawequal(L, -1, lua_upvalueindex(1));

	lua_pushboolean(L, yes);
	return 1;
}

static const luaL_Reg json_funcs[] = {
	{ "decode", l_decode },
	{ "encode", l_encode },
	{ NULL, NULL }
};

int luaopen_hypd_json(lua_State *L)
{
	static const char *const names[2][2] = {
		{ "object", "is_object" }, { "array", "is_array" }
	};
	int i;

	luaL_newlib(L, json_funcs);
	push_marks(L);
	for (i = 0; i < 2; i++) {
		lua_pushvalue(L, -2 + i);
		lua_pushcclosure(L, l_mark, 1);
		lua_setfield(L, -4, names[i][0]);
		lua_pushvalue(L, -2 + i);
		lua_pushcclosure(L, l_is_marked, 1);
		lua_setfield(L, -4, names[i][1]);
	}
	lua_pop(L, 2);
	hj_pushnull(L);
	lua_setfield(L, -2, "null");
	return 1;
}
