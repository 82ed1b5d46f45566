/*
 * json: JSON text <-> Lua values, and the Lua module "hypd.json".
 *
 * Mapping (decode -> Lua -> encode):
 *   null          json.null, a light userdata NULL (hj_pushnull, hj_isnull)
 *   true, false   booleans
 *   123, -0       Lua integers when the text has no '.' or exponent and fits
 *                 in 64 bits; otherwise floats. Integers encode exactly.
 *   1.0, 1e2      Lua floats. Floats encode as the shortest of %.15g, %.16g,
 *                 %.17g that reads back to the same double, with ".0" added
 *                 when the text has no '.' or exponent, so 1.0 -> "1.0",
 *                 -0.0 -> "-0.0", 1e300 -> "1e+300". NaN and infinities do
 *                 not encode; a decoded 1e400 is inf (and will not encode).
 *   "..."         Lua strings, byte for byte. Escapes decode to UTF-8
 *                 (surrogate pairs joined, lone surrogates rejected);
 *                 strings are not checked for valid UTF-8 either way. The
 *                 encoder escapes '"', '\', and bytes below 0x20 (\n, \t...
 *                 or \u00XX, so NUL is \u0000) and copies every other byte.
 *   [...]         tables with keys 1..n and the json.array metatable
 *   {...}         tables with string keys and the json.object metatable;
 *                 a repeated key keeps its last value.
 *
 * The encoder looks at a table's metatable, then at its keys (raw access,
 * no metamethods):
 *   json.array mark    array; keys must be exactly 1..n (n may be 0)
 *   json.object mark   object; keys must all be strings (may be empty)
 *   no mark, empty     {}  (mark it with json.array() to get [])
 *   no mark, 1..n      array
 *   no mark, strings   object
 *   anything else      error: mixed keys, sparse array, other key types.
 * Object keys are written in byte order, so output is deterministic.
 * Compact output has no whitespace; pretty output puts each element on its
 * own line indented by two spaces, writes `"key": value`, keeps empty
 * containers as {} and [], and has no final newline.
 *
 * Nesting deeper than HJ_MAXDEPTH arrays and objects fails both ways (a
 * table that contains itself fails this way too). Neither direction uses
 * cJSON: cJSON 1.7 holds numbers as doubles, truncates strings at NUL and
 * pretty-prints with tabs.
 *
 * Both directions allocate Lua memory and raise only on a Lua memory error
 * (as any Lua API call may). C memory held while encoding belongs to a
 * userdata on the stack, so such an error leaks nothing.
 */
#ifndef HYPD_JSON_H
#define HYPD_JSON_H

#include <lua.h>
#include <stddef.h>

#define HJ_MAXDEPTH 256

/* The registry names of the object and array marks (see json.object). */
#define HJ_OBJECT_MT "json.object"
#define HJ_ARRAY_MT "json.array"

/*
 * Pushes the Lua value for the JSON text s[0..len) (NUL bytes in it are
 * just bytes). Returns 0, or -1 with nothing pushed and a message in
 * err[0..errlen) that names the byte offset (0-based) and what was wrong.
 * Decoded objects and arrays carry the json.object and json.array
 * metatables. Strings must be UTF-8 (RFC 8259 8.1: no overlong forms,
 * surrogates or truncated sequences); one that is not is refused with its
 * offset, never echoed. Cost: one pass over s, one Lua table per array or
 * object.
 */
int hj_decode(lua_State *L, const char *s, size_t len, char *err,
	      size_t errlen);

/*
 * hj_decode for text hypd wrote itself (the store's values): strings may
 * hold any bytes, as hj_encode writes them. Input from outside goes through
 * hj_decode, which refuses strings that are not UTF-8.
 */
int hj_decode_bytes(lua_State *L, const char *s, size_t len, char *err,
		    size_t errlen);

/*
 * Encodes the value at idx (any index; the stack is left as it was).
 * Returns a NUL-terminated string the caller frees with free(), or NULL
 * with a message in err[0..errlen) naming what could not be encoded and
 * where ("... (at $.a[2].b)", Lua indices in brackets). pretty: two-space
 * indentation. Cost: one pass over the value, plus sorting each object's
 * keys.
 */
char *hj_encode(lua_State *L, int idx, int pretty, char *err, size_t errlen);

/* Pushes json.null (a light userdata NULL). */
void hj_pushnull(lua_State *L);

/* Whether the value at idx is json.null. */
int hj_isnull(lua_State *L, int idx);

/*
 * The Lua module "hypd.json" (open with luaL_requiref; call hx_open first):
 *   json.decode(s [, opts])    value, or nil, err (err.code "JSON",
 *                              err.message, err.offset: 0-based byte).
 *                              opts.bytes: as hj_decode_bytes. opts.keep: a
 *                              projection, a tree of the members to keep
 *                              ({metadata = {name = true}, spec = true}):
 *                              an object keeps only the members it names
 *                              (true: whole; a table: projected; "*": any
 *                              member not named), an array projects each
 *                              element by the same table. What is not kept
 *                              is checked exactly as a full decode checks
 *                              it (same errors, same offsets) but makes no
 *                              Lua value, so a large answer costs only what
 *                              is kept.
 *   json.encode(v [, opts])    string; opts.pretty for indentation. Raises
 *                              a "JSON" error table for what JSON cannot
 *                              hold (see above).
 *   json.null                  the null sentinel
 *   json.object([t])           sets the json.object metatable on t (or a
 *                              new table), replacing any other; returns it
 *   json.array([t])            same with the json.array metatable
 *   json.is_object(v), json.is_array(v)   whether v carries that mark
 * The marks are registry metatables named "json.object" and "json.array"
 * (their __name); they have no __metatable, so setmetatable may replace
 * them, after which the table encodes by its keys.
 */
int luaopen_hypd_json(lua_State *L);

#endif
