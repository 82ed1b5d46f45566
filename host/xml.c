/* xml: XML text -> Lua tree with expat (see xml.h). */
#include "xml.h"

#include <expat.h>
#include <lauxlib.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "luax.h"

#define DECODER_MT "hypd.xml.decoder"

/*
 * Every block expat allocates carries this header and sits on its decoder's
 * circular list, so the decoder can free them all even when a Lua memory
 * error has unwound through expat mid-parse (XML_ParserFree leaks then).
 */
union blk {
	struct {
		union blk *prev, *next; /* neighbours on the decoder's list */
	} l;
	max_align_t align;              /* keeps the payload aligned */
};

/* One decode: owned by a userdata so every exit frees it. */
struct xdec {
	XML_Parser parser;            /* NULL once freed */
	int parsing;                  /* inside XML_Parse (or unwound from it) */
	union blk blocks;             /* sentinel of expat's blocks */
	lua_State *L;                 /* the state the tree is built in */
	char *text;                   /* character data of the open leaf */
	size_t len, cap;              /* bytes used and allocated in text */
	int depth;                    /* open elements */
	int nchild[XML_MAXDEPTH + 1]; /* child elements of each open element */
	const char *why;              /* our reason to stop, NULL = none */
};

/* The decoder that expat allocates for now (malloc_fcn has no context). */
static _Thread_local struct xdec *alloc_owner;

static void *x_malloc(size_t n)
{
	union blk *b = malloc(sizeof *b + n), *head = &alloc_owner->blocks;

	if (!b)
		return NULL;
	b->l.prev = head;
	b->l.next = head->l.next;
	head->l.next->l.prev = b;
	head->l.next = b;
	return b + 1;
}

static void *x_realloc(void *p, size_t n)
{
	union blk *b;

	if (!p)
		return x_malloc(n);
	if (!(b = realloc((union blk *)p - 1, sizeof *b + n)))
		return NULL;
	b->l.prev->l.next = b;
	b->l.next->l.prev = b;
	return b + 1;
}

static void x_free(void *p)
{
	union blk *b = p ? (union blk *)p - 1 : NULL;

	if (!b)
		return;
	b->l.prev->l.next = b->l.next;
	b->l.next->l.prev = b->l.prev;
	free(b);
}

static const XML_Memory_Handling_Suite x_mem = { x_malloc, x_realloc, x_free };

static void dec_free(struct xdec *d)
{
	union blk *b, *next;

	if (d->parser && !d->parsing)
		XML_ParserFree(d->parser);
	d->parser = NULL;
	if (d->blocks.l.next) {
		for (b = d->blocks.l.next; b != &d->blocks; b = next) {
			next = b->l.next;
			free(b);
		}
	}
	d->blocks.l.prev = d->blocks.l.next = &d->blocks;
	free(d->text);
	d->text = NULL;
	d->len = d->cap = 0;
}

static int dec_gc(lua_State *L)
{
	dec_free(luaL_checkudata(L, 1, DECODER_MT));
	return 0;
}

static void stop(struct xdec *d, const char *why)
{
	if (!d->why) {
		d->why = why;
		XML_StopParser(d->parser, XML_FALSE);
	}
}

static const char *local_name(const char *name)
{
	const char *colon = strrchr(name, ':');

	return colon ? colon + 1 : name;
}

static void XMLCALL on_start(void *ud, const XML_Char *name,
			     const XML_Char **atts)
{
	struct xdec *d = ud;
	lua_State *L = d->L;

	if (d->why)
		return;
	if (d->depth >= XML_MAXDEPTH) {
		stop(d, "elements nest deeper than 256");
		return;
	}
	if (!lua_checkstack(L, 6)) {
		stop(d, "out of Lua stack");
		return;
	}
	if (d->depth > 0)
		d->nchild[d->depth]++;
	d->len = 0;
	lua_createtable(L, 0, 2);
	lua_pushstring(L, local_name(name));
	lua_setfield(L, -2, "name");
	if (atts[0]) {
		lua_newtable(L);
		for (int i = 0; atts[i]; i += 2) {
			lua_pushstring(L, atts[i + 1]);
			lua_setfield(L, -2, atts[i]);
		}
		lua_setfield(L, -2, "attrs");
	}
	d->nchild[++d->depth] = 0;
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct xdec *d = ud;
	lua_State *L = d->L;

	(void)name;
	if (d->why || d->depth == 0)
		return;
	if (d->nchild[d->depth] == 0) {
		lua_pushlstring(L, d->text ? d->text : "", d->len);
		lua_setfield(L, -2, "text");
	}
	d->len = 0;
	if (--d->depth > 0)
		lua_seti(L, -2, d->nchild[d->depth]);
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	struct xdec *d = ud;
	size_t need, cap;
	char *p;

	if (d->why || d->depth == 0 || d->nchild[d->depth] > 0 || len <= 0)
		return;
	need = d->len + (size_t)len;
	if (need > d->cap) {
		cap = d->cap ? d->cap : 256;
		while (cap < need)
			cap *= 2;
		if (!(p = realloc(d->text, cap))) {
			stop(d, "out of memory");
			return;
		}
		d->text = p;
		d->cap = cap;
	}
	memcpy(d->text + d->len, s, (size_t)len);
	d->len = need;
}

static void XMLCALL on_doctype(void *ud, const XML_Char *name,
			       const XML_Char *sysid, const XML_Char *pubid,
			       int has_internal_subset)
{
	(void)name, (void)sysid, (void)pubid, (void)has_internal_subset;
	stop(ud, "a DOCTYPE is not allowed");
}

/* Pushes nil and an XML error at the parser's position; returns 2. */
static int parse_fail(lua_State *L, struct xdec *d, const char *msg)
{
	unsigned long line = XML_GetCurrentLineNumber(d->parser);
	unsigned long col = XML_GetCurrentColumnNumber(d->parser) + 1;

	hx_fail(L, "XML", "line %d, column %d: %s", (int)line, (int)col, msg);
	lua_pushinteger(L, (lua_Integer)line);
	lua_setfield(L, -2, "line");
	lua_pushinteger(L, (lua_Integer)col);
	lua_setfield(L, -2, "column");
	return 2;
}

/* xml.decode(s) -> tree | nil, err */
static int l_decode(lua_State *L)
{
	size_t len;
	const char *s = luaL_checklstring(L, 1, &len);
	struct xdec *d;
	int rc;

	if (len > XML_MAXINPUT)
		return hx_fail(L, "XML", "input of %d MiB is larger than the %d MiB limit",
			       (int)(len >> 20), (int)(XML_MAXINPUT >> 20));
	lua_settop(L, 1);
	d = lua_newuserdatauv(L, sizeof *d, 0);
	memset(d, 0, sizeof *d);
	luaL_setmetatable(L, DECODER_MT);
	d->L = L;
	d->blocks.l.prev = d->blocks.l.next = &d->blocks;
	alloc_owner = d;
	if (!(d->parser = XML_ParserCreate_MM(NULL, &x_mem, NULL)))
		return luaL_error(L, "out of memory");
	XML_SetUserData(d->parser, d);
	XML_SetElementHandler(d->parser, on_start, on_end);
	XML_SetCharacterDataHandler(d->parser, on_text);
	XML_SetStartDoctypeDeclHandler(d->parser, on_doctype);
	/* a Lua memory error inside a callback unwinds past XML_Parse; the
	 * userdata at index 2 still owns expat's blocks and frees them in __gc */
	d->parsing = 1;
	alloc_owner = d;
	rc = XML_Parse(d->parser, s, (int)len, XML_TRUE);
	d->parsing = 0;
	if (rc == XML_STATUS_OK && lua_gettop(L) == 3) {
		dec_free(d);
		return 1;
	}
	rc = parse_fail(L, d, d->why ? d->why :
			XML_ErrorString(XML_GetErrorCode(d->parser)));
	dec_free(d);
	return rc;
}

static const luaL_Reg xml_funcs[] = {
	{ "decode", l_decode },
	{ NULL, NULL },
};

int luaopen_hypd_xml(lua_State *L)
{
	if (luaL_newmetatable(L, DECODER_MT)) {
		lua_pushcfunction(L, dec_gc);
		lua_setfield(L, -2, "__gc");
	}
	lua_pop(L, 1);
	luaL_newlib(L, xml_funcs);
	return 1;
}
