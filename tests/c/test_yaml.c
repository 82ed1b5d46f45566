/*
 * test_yaml: the YAML reader's C core (host/yml.c) without Lua: scalar
 * resolution, keys, merges, duplicates, aliases, documents, the caps and
 * the error positions.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tap.h"
#include "yml.h"

static struct yml_error err;

/* Loads text (first document unless all); NULL on failure (err filled). */
static const struct yml_node *load_with(struct yml_stream *st, const char *text,
					struct yml_limits lim)
{
	if (yml_load(text, strlen(text), &lim, st, &err) != 0)
		return NULL;
	return st->ndocs ? st->docs[0] : NULL;
}

static const struct yml_node *load(struct yml_stream *st, const char *text)
{
	struct yml_limits lim = YML_LIMITS_DEFAULT;

	return load_with(st, text, lim);
}

static const struct yml_node *get(const struct yml_node *map, const char *key)
{
	size_t i;

	if (!map || map->kind != YML_MAP)
		return NULL;
	for (i = 0; i < map->u.map.n; i++)
		if (map->u.map.pairs[i].klen == strlen(key) &&
		    memcmp(map->u.map.pairs[i].key, key, strlen(key)) == 0)
			return map->u.map.pairs[i].value;
	return NULL;
}

static int is_str(const struct yml_node *n, const char *s)
{
	return n && n->kind == YML_STR && n->u.str.len == strlen(s) &&
	       memcmp(n->u.str.s, s, n->u.str.len) == 0;
}

/* Fails with text when it loads; checks the message's start otherwise. */
static int refused(const char *text, const char *prefix)
{
	struct yml_stream st;
	int r = !load(&st, text) && st.arena == NULL &&
		strncmp(err.message, prefix, strlen(prefix)) == 0;

	if (!r)
		printf("#   message: %s\n#   wanted:  %s...\n", err.message, prefix);
	yml_release(&st);
	return r;
}

/* Plain scalars: the text, the kind, and the value as text. */
static const struct {
	const char *text;
	enum yml_kind kind;
	const char *want; /* %lld of an integer, %.17g of a float, the string, 0/1 */
} plain[] = {
	{ "", YML_NULL, "" }, { "~", YML_NULL, "" }, { "null", YML_NULL, "" },
	{ "Null", YML_NULL, "" }, { "NULL", YML_NULL, "" }, { "nULL", YML_STR, "nULL" },
	{ "true", YML_BOOL, "1" }, { "True", YML_BOOL, "1" }, { "TRUE", YML_BOOL, "1" },
	{ "false", YML_BOOL, "0" }, { "False", YML_BOOL, "0" }, { "FALSE", YML_BOOL, "0" },
	{ "tRue", YML_STR, "tRue" },
	{ "yes", YML_STR, "yes" }, { "no", YML_STR, "no" }, { "on", YML_STR, "on" },
	{ "off", YML_STR, "off" }, { "y", YML_STR, "y" }, { "N", YML_STR, "N" },
	{ "0", YML_INT, "0" }, { "-0", YML_INT, "0" }, { "42", YML_INT, "42" },
	{ "+12", YML_INT, "12" }, { "-17", YML_INT, "-17" },
	{ "0600", YML_INT, "384" }, { "-0600", YML_INT, "-384" }, { "0900", YML_INT, "900" },
	{ "0o17", YML_INT, "15" }, { "0x1F", YML_INT, "31" }, { "-0x1f", YML_INT, "-31" },
	{ "0b101", YML_INT, "5" }, { "1_000", YML_INT, "1000" }, { "0x_1F", YML_INT, "31" },
	{ "9223372036854775807", YML_INT, "9223372036854775807" },
	{ "-9223372036854775808", YML_INT, "-9223372036854775808" },
	{ "9223372036854775808", YML_FLOAT, "9.2233720368547758e+18" },
	{ "1.5", YML_FLOAT, "1.5" }, { "1.20", YML_FLOAT, "1.2" }, { ".5", YML_FLOAT, "0.5" },
	{ "5.", YML_FLOAT, "5" }, { "1e3", YML_FLOAT, "1000" }, { "-2.5E-3", YML_FLOAT, "-0.0025" },
	{ "1.0", YML_FLOAT, "1" }, { ".inf", YML_FLOAT, "inf" }, { "-.Inf", YML_FLOAT, "-inf" },
	{ "+.INF", YML_FLOAT, "inf" }, { ".nan", YML_FLOAT, "nan" },
	{ "0x", YML_STR, "0x" }, { "0b2", YML_STR, "0b2" }, { "1.2.3", YML_STR, "1.2.3" },
	{ "12:30", YML_STR, "12:30" }, { "2024-01-01", YML_STR, "2024-01-01" },
	{ "-x", YML_STR, "-x" }, { "+", YML_STR, "+" }, { ".", YML_STR, "." }, { "_1", YML_STR, "_1" },
	{ "1e", YML_STR, "1e" }, { "inf", YML_STR, "inf" }, { "v1.2", YML_STR, "v1.2" },
	{ "https://h:443/x", YML_STR, "https://h:443/x" },
};

static int scalar_is(const struct yml_node *n, enum yml_kind kind, const char *want)
{
	char got[64] = "";

	if (!n || n->kind != kind)
		return 0;
	switch (kind) {
	case YML_BOOL:
		snprintf(got, sizeof got, "%d", n->u.b);
		break;
	case YML_INT:
		snprintf(got, sizeof got, "%lld", (long long)n->u.i);
		break;
	case YML_FLOAT:
		if (isnan(n->u.f))
			snprintf(got, sizeof got, "nan");
		else if (isinf(n->u.f))
			snprintf(got, sizeof got, n->u.f > 0 ? "inf" : "-inf");
		else if (n->u.f == strtod(want, NULL))
			return 1;
		else
			snprintf(got, sizeof got, "%.17g", n->u.f);
		break;
	case YML_STR:
		return is_str(n, want);
	default:
		break;
	}
	if (strcmp(got, want) != 0)
		printf("#   got %s, want %s\n", got, want);
	return strcmp(got, want) == 0;
}

static void test_scalars(void)
{
	struct yml_stream st;
	char text[128];
	size_t i;

	for (i = 0; i < sizeof plain / sizeof plain[0]; i++) {
		snprintf(text, sizeof text, "v: %s\n", plain[i].text);
		ok(scalar_is(get(load(&st, text), "v"), plain[i].kind, plain[i].want),
		   "plain '%s' reads as %s", plain[i].text, plain[i].want);
		yml_release(&st);
	}
	ok(is_str(get(load(&st, "a: 'true'\nb: \"12\"\nc: '~'\nd: ''\n"), "a"), "true") &&
	   is_str(get(st.docs[0], "b"), "12") && is_str(get(st.docs[0], "c"), "~") &&
	   is_str(get(st.docs[0], "d"), ""),
	   "quoted scalars are strings, even when they look like something else");
	yml_release(&st);
	ok(is_str(get(load(&st, "a: |\n  x\n  y\nb: >-\n  p\n  q\n\n  r\nc: |-\n  z\n"), "a"), "x\ny\n") &&
	   is_str(get(st.docs[0], "b"), "p q\nr") && is_str(get(st.docs[0], "c"), "z"),
	   "literal and folded block scalars, with their chomping");
	yml_release(&st);
	ok(get(load(&st, "a: \"t\\u00e9\\x41\\n\\0z\"\n"), "a") && get(st.docs[0], "a")->u.str.len == 7 &&
	   memcmp(get(st.docs[0], "a")->u.str.s, "t\xc3\xa9" "A\n\0z", 7) == 0,
	   "double-quoted escapes decode to UTF-8 and a NUL byte stays in the length");
	yml_release(&st);
	ok(is_str(get(load(&st, "a: !!str 12\nb: ! 12\nc: !local 12\nd: !!timestamp 2024-01-01\n"), "a"), "12") &&
	   is_str(get(st.docs[0], "b"), "12") && is_str(get(st.docs[0], "c"), "12") &&
	   is_str(get(st.docs[0], "d"), "2024-01-01"),
	   "!!str, the non-specific !, a local tag and !!timestamp give strings");
	ok(!get(st.docs[0], "a")->tag && !get(st.docs[0], "b")->tag && get(st.docs[0], "c")->tag &&
	   strcmp(get(st.docs[0], "c")->tag, "!local") == 0 && !get(st.docs[0], "d")->tag,
	   "only a local tag is kept in the node's tag");
	yml_release(&st);
	ok(get(load(&st, "a: !Sub [x, {y: 1}]\nb: !Base64 {c: d}\n"), "a") && get(st.docs[0], "a")->kind == YML_SEQ &&
	   strcmp(get(st.docs[0], "a")->tag, "!Sub") == 0 && get(st.docs[0], "b")->kind == YML_MAP &&
	   strcmp(get(st.docs[0], "b")->tag, "!Base64") == 0 && !st.docs[0]->tag,
	   "sequences and mappings keep their local tag too");
	yml_release(&st);
	ok(scalar_is(get(load(&st, "a: !!int \"12\"\nb: !!float 1\nc: !!bool 'true'\nd: !!null ''\n"), "a"),
		     YML_INT, "12") &&
	   scalar_is(get(st.docs[0], "b"), YML_FLOAT, "1") && scalar_is(get(st.docs[0], "c"), YML_BOOL, "1") &&
	   get(st.docs[0], "d")->kind == YML_NULL,
	   "!!int, !!float, !!bool and !!null read quoted text as their type");
	yml_release(&st);
	ok(refused("a: !!int 1.5\n", "line 1 column 4: \"1.5\" is not a valid !!int"),
	   "a scalar that is not of its tag's type is refused");
	ok(is_str(get(load(&st, "a: !!binary aGVs\n  bG8=\n"), "a"), "hello"),
	   "!!binary decodes base64 across lines");
	yml_release(&st);
	ok(refused("a: !!binary a$b=\n", "line 1 column 4: a !!binary scalar is not base64"),
	   "bad base64 in !!binary is refused");
}

static void test_keys(void)
{
	struct yml_stream st;
	const struct yml_node *m = load(&st, "1: a\n1.5: b\ntrue: c\n0x10: d\n1e6: e\n100000.0: f\n"
					  "0.1: g\n.inf: h\n\"q\": i\nyes: j\n");

	ok(m && m->u.map.n == 10, "ten keys");
	ok(is_str(get(m, "1"), "a") && is_str(get(m, "1.5"), "b") && is_str(get(m, "true"), "c") &&
	   is_str(get(m, "16"), "d") && is_str(get(m, "1e+06"), "e") && is_str(get(m, "100000"), "f") &&
	   is_str(get(m, "0.1"), "g") && is_str(get(m, ".inf"), "h") && is_str(get(m, "q"), "i") &&
	   is_str(get(m, "yes"), "j"),
	   "non-string keys become strings as sigs.k8s.io/yaml writes them");
	ok(m && strcmp(m->u.map.pairs[0].key, ".inf") == 0 && strcmp(m->u.map.pairs[9].key, "yes") == 0,
	   "pairs come in key byte order");
	yml_release(&st);
	ok(refused("~: a\n", "line 1 column 1: a mapping key is null"), "a null key is refused");
	ok(refused("[a]: b\n", "line 1 column 1: a mapping key is a sequence"), "a sequence key is refused");
	ok(refused("? {a: 1}\n: b\n", "line 1 column 3: a mapping key is a mapping"), "a mapping key is refused");
}

static void test_duplicates_and_merges(void)
{
	struct yml_stream st;
	struct yml_limits last = YML_LIMITS_DEFAULT;
	const struct yml_node *d;

	last.dup_last = 1;
	ok(refused("a: 1\nb: 2\na: 3\n", "line 3 column 1: duplicate key \"a\""),
	   "a repeated key is refused at its second place");
	ok(refused("1: x\n0x1: y\n", "line 2 column 1: duplicate key \"1\""),
	   "keys that become the same string are duplicates");
	ok(scalar_is(get(load_with(&st, "a: 1\na: 3\n", last), "a"), YML_INT, "3"),
	   "dup_last keeps the last value");
	yml_release(&st);
	d = load(&st, "base: &b {server: https://a, port: 1}\n"
		      "x:\n  <<: *b\n  port: 2\n"
		      "y:\n  <<: [{port: 3}, *b, {extra: 4}]\n");
	ok(is_str(get(get(d, "x"), "server"), "https://a") && scalar_is(get(get(d, "x"), "port"), YML_INT, "2") &&
	   get(get(d, "x"), "<<") == NULL,
	   "a merge brings the keys the mapping does not set; its own key after '<<' wins");
	ok(scalar_is(get(get(d, "y"), "port"), YML_INT, "3") && is_str(get(get(d, "y"), "server"), "https://a") &&
	   scalar_is(get(get(d, "y"), "extra"), YML_INT, "4"),
	   "in a list of merges the earlier mapping wins");
	yml_release(&st);
	ok(refused("b: &b {p: 1}\nx:\n  p: 2\n  <<: *b\n", "line 3 column 3: key \"p\" is set before a '<<' merge"),
	   "a key set before a merge that sets it too is refused (kubectl and the spec disagree)");
	ok(scalar_is(get(get(load_with(&st, "b: &b {p: 1}\nx:\n  p: 2\n  <<: *b\n", last), "x"), "p"),
		     YML_INT, "1"),
	   "with dup_last the later merge wins, as in kubectl");
	yml_release(&st);
	ok(refused("x:\n  <<: {a: 1}\n  <<: {b: 1}\n", "line 3 column 3: duplicate key \"<<\""),
	   "two merge keys in one mapping are duplicates");
	ok(refused("x:\n  <<: [1]\n", "line 2 column 8: a '<<' merge takes a mapping"),
	   "a merge of a scalar is refused");
	d = load(&st, "x:\n  \"<<\": {a: 1}\ny:\n  ! <<: {a: 1}\n");
	ok(get(get(d, "x"), "<<") && !get(get(d, "x"), "a") && get(get(d, "y"), "<<") && !get(get(d, "y"), "a"),
	   "a quoted or !-tagged '<<' is an ordinary key");
	yml_release(&st);
}

static void test_aliases_and_documents(void)
{
	struct yml_stream st;
	struct yml_limits all = YML_LIMITS_DEFAULT;
	const struct yml_node *d = load(&st, "a: &x {p: [1, 2]}\nb: *x\nc: &s str\nd: *s\n");

	all.all = 1;
	ok(get(d, "a") && get(d, "a") == get(d, "b") && is_str(get(d, "d"), "str"),
	   "an alias is the node its anchor names (shared in the tree)");
	/* the root, 4 keys, {p: [1, 2]} (5 nodes) twice, "str" twice */
	ok(d && d->weight == 1 + 4 + 5 + 5 + 1 + 1, "an alias counts as every node it copies");
	yml_release(&st);
	ok(refused("a: *nope\n", "line 1 column 4: the alias *nope names no anchor before it"),
	   "an unknown alias is refused");
	ok(refused("a: &a [1, *a]\n", "line 1 column 11: the alias *a is inside the node it names"),
	   "a recursive alias is refused");
	ok(!load_with(&st, "a: &a 1\n---\nb: *a\n", all) &&
	   strcmp(err.message, "line 3 column 4: the alias *a names no anchor before it") == 0,
	   "anchors are per document");
	ok(load(&st, "a: 1\n---\nb: 2\n") && st.ndocs == 1, "without all, only the first document is read");
	yml_release(&st);
	ok(load_with(&st, "a: 1\n---\n---\nb: 2\n...\n", all) && st.ndocs == 3 &&
	   st.docs[1]->kind == YML_NULL && get(st.docs[2], "b"),
	   "with all, every document, an empty one as null");
	yml_release(&st);
	ok(!load_with(&st, "", all) && st.ndocs == 0 && err.message[0] == '\0',
	   "empty input has no documents and no error");
	yml_release(&st);
	ok(!load_with(&st, "# just a comment\n", all) && st.ndocs == 0, "comments alone are no document");
	yml_release(&st);
	ok(load(&st, "%YAML 1.2\n---\na: 1\n") != NULL, "a %%YAML 1.2 directive is accepted");
	yml_release(&st);
	yml_release(&st);
	ok(st.arena == NULL, "yml_release twice is harmless");
}

static void test_caps(void)
{
	struct yml_stream st;
	struct yml_limits lim = YML_LIMITS_DEFAULT;
	char *deep, *text;
	size_t i, n;
	clock_t t0;
	double secs;

	/* billion laughs: nine levels of nine aliases */
	text = malloc(4096);
	n = (size_t)sprintf(text, "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
	for (i = 1; i < 9; i++)
		n += (size_t)sprintf(text + n, "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n",
				     (int)('a' + i), (int)('a' + i), (int)('a' + i - 1), (int)('a' + i - 1),
				     (int)('a' + i - 1), (int)('a' + i - 1), (int)('a' + i - 1),
				     (int)('a' + i - 1), (int)('a' + i - 1), (int)('a' + i - 1),
				     (int)('a' + i - 1));
	t0 = clock();
	ok(refused(text, "line 7 column "), "a billion-laughs document is refused");
	secs = (double)(clock() - t0) / CLOCKS_PER_SEC;
	ok(strstr(err.message, "more than 2000000 nodes (an alias counts as every node it copies)") != NULL,
	   "the message names the node budget and aliases");
	ok(secs < 0.05, "it is refused at once (%.4f s)", secs);
	free(text);

	deep = malloc(1000);
	memset(deep, '[', 256);
	memset(deep + 256, ']', 256);
	deep[512] = '\0';
	ok(load(&st, deep) && st.docs[0]->height == 256, "256 nested sequences are read");
	yml_release(&st);
	memset(deep, '[', 257);
	memset(deep + 257, ']', 257);
	deep[514] = '\0';
	ok(refused(deep, "line 1 column 257: sequences and mappings nest deeper than 256"),
	   "257 are refused where the 257th opens");
	free(deep);
	lim.max_depth = 3;
	ok(!load_with(&st, "a: &a [[1]]\nb: [*a]\n", lim) &&
	   strcmp(err.message, "line 2 column 5: sequences and mappings nest deeper than 3 (through the alias *a)") == 0,
	   "the depth an alias brings counts");
	ok(load_with(&st, "a: &a [[1]]\nb: *a\n", lim) != NULL, "up to the cap it does not");
	yml_release(&st);

	lim = (struct yml_limits)YML_LIMITS_DEFAULT;
	lim.max_bytes = 8;
	ok(!load_with(&st, "a: 123456\n", lim) && err.line == 0 &&
	   strcmp(err.message, "the YAML text has 10 bytes, more than the limit of 8") == 0,
	   "input over max_bytes is refused before parsing");
	lim = (struct yml_limits)YML_LIMITS_DEFAULT;
	lim.max_nodes = 5;
	ok(load_with(&st, "[1, 2, 3, 4]\n", lim) != NULL, "five nodes fit a budget of five");
	yml_release(&st);
	ok(!load_with(&st, "[1, 2, 3, 4, 5]\n", lim), "six do not");
}

static void test_errors(void)
{
	char key[301], big[700];

	memset(key, 'k', 300);
	key[300] = '\0';
	snprintf(big, sizeof big, "%s: 1\n%s: 2\n", key, key);
	ok(refused("a: 1\nb: [1, 2\nc: 3\n",
		   "line 3 column 2: did not find expected ',' or ']' (while parsing a flow sequence at line 2 column 4)"),
	   "a syntax error names the line and column, and the construct it is in");
	ok(refused("a:\n  b: 1\n c: 2\n", "line 3 column 2: did not find expected key"),
	   "bad indentation names its line");
	ok(refused("a: \"x\xff\"\n", "line 1 column 6: invalid leading UTF-8 octet (byte 0xff)"),
	   "invalid UTF-8 names its place");
	ok(refused("a:\n\tb: 1\n", "line 2 column 1: found character that cannot start any token"),
	   "a tab as indentation is refused");
	ok(refused(big, "line 2 column 1: duplicate key \"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk\"..."),
	   "a long key is cut to 32 bytes in the message");
	ok(strlen(err.message) < 100, "so the message stays short");
}

int main(void)
{
	test_scalars();
	test_keys();
	test_duplicates_and_merges();
	test_aliases_and_documents();
	test_caps();
	test_errors();
	return tap_done();
}
