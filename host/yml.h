/*
 * yml: YAML text -> a tree of plain C values (libyaml's event parser
 * underneath). No Lua here: the module "hypd.yaml" (lua_yaml.c) turns the
 * tree into Lua values, and tests/c/test_yaml.c tests it alone.
 *
 * What it reads: all of YAML that libyaml parses (block and flow style,
 * every quoting style, | and > block scalars, comments, directives, several
 * documents in one stream), plus
 *   anchors and aliases   an alias stands for a copy of the node it names;
 *                         an alias inside the node it names is refused
 *   merge keys            `<<: *base` or `<<: [*a, *b]` (a plain, untagged
 *                         or !!merge `<<` key): the mapping gets the keys of
 *                         those mappings that it does not set itself; an
 *                         earlier mapping in the list wins over a later one
 *
 * Scalars (untagged plain ones; see DECISIONS below):
 *   ""  ~  null Null NULL             YML_NULL
 *   true True TRUE false False FALSE  YML_BOOL; nothing else is a boolean
 *   [-+]?[0-9]+                       YML_INT, decimal, but a leading 0
 *                                     means octal when every digit is 0-7
 *                                     (0600 is 384, as kubectl reads it)
 *   0x1F  0o17  0b101 (signed too)    YML_INT in that base
 *   1.5  .5  5.  1e3  -2.5E-3         YML_FLOAT (the YAML 1.2 core form)
 *   .inf  -.Inf  +.INF  .nan .NaN     YML_FLOAT infinities and NaN
 *   anything else                     YML_STR, byte for byte
 * In a plain scalar that starts with a digit, a sign or '.', underscores
 * are dropped before the number is read (1_000 is 1000). Integers that do
 * not fit in 64 bits are floats.
 * Quoted and block scalars are strings. Tags: !!str and the non-specific
 * `!` make strings; !!int, !!float, !!bool and !!null read the text (quoted
 * or not) as that type and refuse it otherwise; !!binary decodes base64
 * into the bytes; !!timestamp and every other tag leave a string. Tags on
 * mappings and sequences do not change them. A local tag (`!Sub`, `!Ref`:
 * one `!` and a name, as CloudFormation's short forms are) is kept in the
 * node's tag field, on scalars, sequences and mappings alike.
 *
 * Mapping keys become strings as sigs.k8s.io/yaml makes them: a string
 * stays, an integer is its decimal digits, true/false are "true"/"false",
 * a float is Go's FormatFloat(f, 'g', -1, 32) (1.0 -> "1", 1e6 ->
 * "1e+06", .inf -> ".inf"). A null key, or a sequence or mapping as a key,
 * is refused.
 *
 * DECISIONS, measured against kubectl 1.32 (client-go reads kubeconfigs
 * with sigs.k8s.io/yaml over go-yaml v2, YAML 1.1 rules):
 *   - Booleans are YAML 1.2's: yes/no/on/off/y/n are strings here, where
 *     kubectl makes them booleans (and a `yes:` key "true"). For kubeconfig
 *     string fields both agree on every file kubectl accepts, since kubectl
 *     refuses a boolean there; hypd.k8s.kubeconfig reads kubectl's
 *     spellings for the boolean field it looks at.
 *     Numbers are read as kubectl reads them, following go-yaml v3's own
 *     choice of YAML 1.1 octals: 0600 is 384, 1_000 is 1000, 0b11 is 3.
 *     kubectl turns 1.0 into 1 (a Go float64 in JSON); here it stays a float.
 *   - Duplicate keys are refused by default (yml_limits.dup_last = 0): the
 *     YAML spec forbids them, go-yaml v3 and kubectl's strict decoding refuse
 *     them. kubectl's (non-strict) kubeconfig loader keeps the last one;
 *     dup_last = 1 does the same.
 *   - kubectl lets a `<<` merge override a key the mapping sets *before*
 *     the `<<` (go-yaml v2); the merge spec says the mapping's own key wins.
 *     With dup_last = 0 that case is refused (write `<<` first and both
 *     agree); with dup_last = 1 the later one wins, as in kubectl.
 *
 * Caps (each refused with a clear error before memory is spent on it):
 *   max_bytes   longer input is refused before parsing
 *   max_depth   sequences and mappings nested deeper, counting the depth an
 *               alias brings with it, are refused when the first one too
 *               many opens
 *   max_nodes   the result may hold at most this many nodes (every scalar,
 *               key, sequence and mapping, with each alias counted as the
 *               whole node it copies): a billion-laughs document fails as
 *               soon as its aliases pass the budget, having built nothing
 *               big, since an alias is a pointer until the binding copies it
 *
 * Ownership: yml_load fills a struct yml_stream whose nodes, strings and
 * arrays all live in one arena; yml_release frees it all at once. Nodes
 * reached through aliases are shared (the tree is a DAG): a reader that
 * wants copies makes them. The input is not referenced after yml_load.
 */
#ifndef HYPD_YML_H
#define HYPD_YML_H

#include <stddef.h>
#include <stdint.h>

#define YML_MAXBYTES ((size_t)16 << 20)
#define YML_MAXDEPTH 256
#define YML_MAXNODES ((size_t)2000000)

enum yml_kind { YML_NULL, YML_BOOL, YML_INT, YML_FLOAT, YML_STR, YML_SEQ, YML_MAP };

struct yml_node;

/* One key of a mapping. */
struct yml_pair {
	const char *key;               /* the key as a string (see above); NUL-ended */
	size_t klen;                   /* its length in bytes (NULs allowed) */
	const struct yml_node *value;  /* its value */
};

struct yml_node {
	enum yml_kind kind;            /* which member of u holds the value */
	int line, column;              /* where the node starts, 1-based */
	const char *tag;               /* its local tag ("!Sub"), NUL-ended, or NULL */
	union {
		int b;                 /* YML_BOOL: 0 or 1 */
		int64_t i;             /* YML_INT */
		double f;              /* YML_FLOAT */
		struct {
			const char *s; /* YML_STR bytes, NUL-ended */
			size_t len;    /* their length (NULs allowed) */
		} str;
		struct {
			const struct yml_node **items; /* YML_SEQ items */
			size_t n;                      /* how many */
		} seq;
		struct {
			const struct yml_pair *pairs;  /* YML_MAP keys, in byte order, unique */
			size_t n;                      /* how many */
		} map;
	} u;
	/* bookkeeping while parsing; readers ignore these */
	size_t weight;                 /* nodes this one expands to */
	int height;                    /* nesting levels inside it (0 for a scalar) */
	unsigned char done;            /* complete (an alias may name it) */
	unsigned char merge;           /* a `<<` merge key */
};

/* What yml_load accepts. */
struct yml_limits {
	size_t max_bytes;              /* longest input */
	int max_depth;                 /* deepest nesting, aliases expanded */
	size_t max_nodes;              /* most nodes in the result, aliases expanded */
	int dup_last;                  /* 1: a repeated key keeps its last value; 0: refused */
	int all;                       /* 1: every document; 0: the first only */
};

/* The defaults: the caps above, duplicates refused, the first document. */
#define YML_LIMITS_DEFAULT { YML_MAXBYTES, YML_MAXDEPTH, YML_MAXNODES, 0, 0 }

struct yml_arena;

/* The documents read (one at most unless limits.all). */
struct yml_stream {
	size_t ndocs;                  /* documents in the stream (0 for empty input) */
	const struct yml_node **docs;  /* their roots; an empty document is YML_NULL */
	struct yml_arena *arena;       /* owns everything above; NULL once released */
};

/* Why yml_load failed. */
struct yml_error {
	int line, column;              /* 1-based; 0 when the error has no place */
	char message[256];             /* "line L column C: what" (or just "what") */
};

/*
 * Reads the YAML text s[0..len) into *out. Returns 0, or -1 with *out
 * empty (nothing to release) and *err filled. The message never quotes
 * more than a few dozen bytes of the input. Cost: one pass over s; memory
 * about the size of s plus 64 bytes a node (aliases cost a pointer).
 */
int yml_load(const char *s, size_t len, const struct yml_limits *lim,
	     struct yml_stream *out, struct yml_error *err);

/* Frees everything *st owns and empties it; safe to call twice. */
void yml_release(struct yml_stream *st);

#endif
