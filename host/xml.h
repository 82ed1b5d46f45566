/*
 * xml: XML text -> Lua tree (expat underneath), the Lua module "hypd.xml".
 * It reads the answers of the AWS query, EC2 and REST-XML protocols; it
 * writes nothing (the Lua protocol code builds its few XML bodies itself).
 *
 *   xml.decode(s) -> tree, or nil, err
 *
 * Tree: each element is a table
 *   { name = "Tag",             local name: a "prefix:" is stripped
 *     attrs = { k = v } | nil,  attributes as written (prefixes kept, so
 *                               "xsi:type"), nil when there are none
 *     text = "...",             leaves only (no child elements): all the
 *                               character data, entities decoded, CDATA
 *                               included, whitespace kept exactly ("" for
 *                               <a/>)
 *     [1..n] = child elements in document order }
 * An element with child elements has no `text`: the character data between
 * its children (indentation) is dropped, and so is any other mixed content,
 * which no AWS answer uses.
 *
 * Refused, as err {code = "XML", message = "line L, column C: ...", line,
 * column}: malformed XML, a DOCTYPE (no AWS answer has one, and refusing it
 * rules out entity expansion attacks), nesting deeper than XML_MAXDEPTH,
 * input longer than XML_MAXINPUT bytes.
 *
 * Memory: the expat parser and the text buffer belong to a userdata on the
 * Lua stack, freed at once on success and failure and by __gc when a Lua
 * memory error escapes a callback, so decode raises only on a Lua memory
 * error and leaks nothing even then. Cost: one pass over s, one Lua table
 * per element.
 */
#ifndef HYPD_XML_H
#define HYPD_XML_H

#include <lua.h>

#define XML_MAXDEPTH 256
#define XML_MAXINPUT ((size_t)64 << 20)

/* The Lua module (open with luaL_requiref; call hx_open first). */
int luaopen_hypd_xml(lua_State *L);

#endif
