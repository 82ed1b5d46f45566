/* yml: YAML text -> a tree of C values, with libyaml (see yml.h). */
#include "yml.h"

#include <locale.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* The arena: blocks freed together by yml_release. */

struct chunk {
	struct chunk *next;           /* the older chunk */
	size_t used, cap;             /* bytes handed out and available in data */
	max_align_t data[];           /* the memory */
};

struct yml_arena {
	struct chunk *head;           /* the chunk allocations come from */
};

#define CHUNK ((size_t)64 << 10)

static void *arena_alloc(struct yml_arena *a, size_t n)
{
	const size_t al = _Alignof(max_align_t);
	struct chunk *c = a->head, *nc;
	size_t cap;
	void *p;

	if (n > SIZE_MAX / 2)
		return NULL;
	n = n ? (n + al - 1) / al * al : al;
	if (!c || c->cap - c->used < n) {
		cap = n > CHUNK / 4 ? n : CHUNK;
		if (!(nc = malloc(sizeof *nc + cap)))
			return NULL;
		nc->used = 0;
		nc->cap = cap;
		if (cap == n && c) {
			/* a block of its own: the head keeps its free space */
			nc->next = c->next;
			c->next = nc;
		} else {
			nc->next = c;
			a->head = nc;
		}
		c = nc;
	}
	p = (char *)c->data + c->used;
	c->used += n;
	return p;
}

static void arena_free(struct yml_arena *a)
{
	struct chunk *c, *next;

	if (!a)
		return;
	for (c = a->head; c; c = next) {
		next = c->next;
		free(c);
	}
	free(a);
}

/* The builder: one per yml_load. */

/* A sequence or mapping that is open. */
struct frame {
	struct yml_node *node;        /* the collection (in the arena) */
	const struct yml_node **kids; /* children so far; a mapping's alternate key, value */
	size_t n, cap;                /* children used and allocated */
	size_t produced;              /* the node count before this node */
};

/* An anchor name and the node it names now. */
struct anchor {
	const char *name;             /* NUL-ended, in the arena; NULL = free slot */
	const struct yml_node *node;  /* the node */
};

/* One candidate key of a mapping being finished. */
struct cand {
	const char *key;              /* the key string */
	size_t klen;                  /* its length */
	const struct yml_node *value; /* its value */
	size_t pos;                   /* the pair that brought it (key, value or `<<`) */
	size_t sub;                   /* within one `<<`: the order it is applied in */
	int own;                      /* set by the mapping itself, not by a merge */
	int line, column;             /* where its key is */
};

struct builder {
	const struct yml_limits *lim; /* the caps */
	struct yml_arena *arena;      /* the result's memory; NULL once handed over */
	struct frame *frames;         /* max_depth open collections at most */
	int depth;                    /* how many are open */
	struct anchor *anchors;       /* open-addressing table, cap slots */
	size_t nanchors, acap;        /* slots used and allocated */
	const struct yml_node *root;  /* the open document's root, once read */
	const struct yml_node **docs; /* documents read */
	size_t ndocs, dcap;           /* used and allocated */
	size_t produced;              /* nodes so far, aliases expanded */
	char *scratch;                /* a number's text without '_' */
	size_t scap;                  /* its size */
	struct cand *cands;           /* candidates of the mapping being finished */
	size_t ccap;                  /* their capacity */
	struct yml_error *err;        /* where the failure goes */
	int failed;                   /* err is filled */
};

static int failv(struct builder *b, int line, int column, const char *fmt,
		 va_list ap)
{
	struct yml_error *e = b->err;
	int n = 0;

	if (b->failed)
		return -1;
	b->failed = 1;
	e->line = line;
	e->column = column;
	if (line > 0)
		n = snprintf(e->message, sizeof e->message, "line %d column %d: ",
			     line, column);
	vsnprintf(e->message + n, sizeof e->message - (size_t)n, fmt, ap);
	return -1;
}

static int fail_at(struct builder *b, int line, int column, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int fail_at(struct builder *b, int line, int column, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = failv(b, line, column, fmt, ap);
	va_end(ap);
	return rc;
}

static int fail_node(struct builder *b, const struct yml_node *nd,
		     const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fail_node(struct builder *b, const struct yml_node *nd,
		     const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = failv(b, nd->line, nd->column, fmt, ap);
	va_end(ap);
	return rc;
}

static int oom(struct builder *b)
{
	return fail_at(b, 0, 0, "out of memory");
}

/* Writes s[0..len) (quoted unless bare), at most 32 bytes of it, escaping
 * what is not printable ASCII: error messages never carry much input. */
static const char *excerpt_as(char out[160], const char *s, size_t len, int bare)
{
	size_t i, w = 0;

	if (!bare)
		out[w++] = '"';
	for (i = 0; i < len && i < 32; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c == '"' || c == '\\') {
			out[w++] = '\\';
			out[w++] = (char)c;
		} else if (c >= 0x20 && c < 0x7f) {
			out[w++] = (char)c;
		} else {
			w += (size_t)snprintf(out + w, 5, "\\x%02x", c);
		}
	}
	if (!bare)
		out[w++] = '"';
	if (i < len) {
		memcpy(out + w, "...", 3);
		w += 3;
	}
	out[w] = '\0';
	return out;
}

static const char *excerpt(char out[160], const char *s, size_t len)
{
	return excerpt_as(out, s, len, 0);
}

static char *arena_str(struct builder *b, const char *s, size_t len)
{
	char *p = arena_alloc(b->arena, len + 1);

	if (p) {
		memcpy(p, s, len);
		p[len] = '\0';
	}
	return p;
}

/* Anchors: an open-addressing table keyed by name, emptied per document. */

static size_t hash(const char *s)
{
	size_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

static struct anchor *anchor_slot(struct anchor *tab, size_t cap, const char *name)
{
	size_t i = hash(name) & (cap - 1);

	while (tab[i].name && strcmp(tab[i].name, name) != 0)
		i = (i + 1) & (cap - 1);
	return &tab[i];
}

static int anchor_set(struct builder *b, const char *name, const struct yml_node *nd)
{
	struct anchor *slot, *tab;
	size_t i, cap;

	if (b->nanchors + 1 > b->acap / 2) {
		cap = b->acap ? b->acap * 2 : 64;
		if (!(tab = calloc(cap, sizeof *tab)))
			return oom(b);
		for (i = 0; i < b->acap; i++)
			if (b->anchors[i].name)
				*anchor_slot(tab, cap, b->anchors[i].name) = b->anchors[i];
		free(b->anchors);
		b->anchors = tab;
		b->acap = cap;
	}
	slot = anchor_slot(b->anchors, b->acap, name);
	if (!slot->name) {
		if (!(slot->name = arena_str(b, name, strlen(name))))
			return oom(b);
		b->nanchors++;
	}
	slot->node = nd;
	return 0;
}

static const struct yml_node *anchor_get(struct builder *b, const char *name)
{
	struct anchor *slot;

	if (!b->acap)
		return NULL;
	slot = anchor_slot(b->anchors, b->acap, name);
	return slot->name ? slot->node : NULL;
}

/* Scalars. */

static int one_of(const char *s, size_t n, const char *const *list)
{
	for (; *list; list++)
		if (strlen(*list) == n && memcmp(*list, s, n) == 0)
			return 1;
	return 0;
}

static int digit_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return 99;
}

/* strtod of the NUL-ended s, whatever the locale's decimal point. */
static double c_strtod(char *s)
{
	char point = localeconv()->decimal_point[0], *p;
	double d;

	if (point != '.' && (p = strchr(s, '.')))
		*p = point;
	d = strtod(s, NULL);
	if (point != '.' && p)
		*p = '.';
	return d;
}

/*
 * The integer in s (NUL-ended, no '_'), read as go-yaml reads it: an
 * optional sign, then 0x/0o/0b and digits of that base, or 0 and octal
 * digits, or decimal digits. Returns 1 with *v, 2 with *f when it does not
 * fit in 64 bits, 0 when s is no integer.
 */
static int read_int(char *s, size_t n, int64_t *v, double *f)
{
	size_t i = 0, j;
	int neg = 0, base = 10, over = 0, dv;
	uint64_t u = 0, limit;
	double d = 0;

	if (i < n && (s[i] == '+' || s[i] == '-'))
		neg = s[i++] == '-';
	if (i == n)
		return 0;
	if (s[i] == '0' && i + 1 < n) {
		switch (s[i + 1]) {
		case 'x': case 'X': base = 16; i += 2; break;
		case 'o': case 'O': base = 8; i += 2; break;
		case 'b': case 'B': base = 2; i += 2; break;
		default:
			/* 0600 is octal, but 0900 (not octal) reads as 900 */
			base = 8;
			for (j = i; j < n; j++)
				if (s[j] == '8' || s[j] == '9')
					base = 10;
		}
		if (i == n)
			return 0;
	}
	for (j = i; j < n; j++) {
		if ((dv = digit_value((unsigned char)s[j])) >= base)
			return 0;
		if (u > (UINT64_MAX - (uint64_t)dv) / (uint64_t)base)
			over = 1;
		else
			u = u * (uint64_t)base + (uint64_t)dv;
		d = d * base + dv;
	}
	limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
	if (over || u > limit) {
		*f = base == 10 ? c_strtod(s) : neg ? -d : d;
		return 2;
	}
	if (!neg)
		*v = (int64_t)u;
	else
		*v = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
	return 1;
}

/* Whether s matches [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static int is_float(const char *s, size_t n)
{
	size_t i = 0, digits = 0;

	if (i < n && (s[i] == '+' || s[i] == '-'))
		i++;
	while (i < n && s[i] >= '0' && s[i] <= '9')
		i++, digits++;
	if (i < n && s[i] == '.') {
		size_t frac = 0;

		for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			frac++;
		if (!digits && !frac)
			return 0;
	} else if (!digits) {
		return 0;
	}
	if (i < n && (s[i] == 'e' || s[i] == 'E')) {
		size_t exp = 0;

		i++;
		if (i < n && (s[i] == '+' || s[i] == '-'))
			i++;
		for (; i < n && s[i] >= '0' && s[i] <= '9'; i++)
			exp++;
		if (!exp)
			return 0;
	}
	return i == n;
}

/* Resolves the untagged plain scalar s[0..n) into nd (see yml.h). */
static int resolve_plain(struct builder *b, struct yml_node *nd, const char *s,
			 size_t n)
{
	static const char *const nulls[] = { "~", "null", "Null", "NULL", NULL };
	static const char *const trues[] = { "true", "True", "TRUE", NULL };
	static const char *const falses[] = { "false", "False", "FALSE", NULL };
	static const char *const pinf[] = { ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL };
	static const char *const ninf[] = { "-.inf", "-.Inf", "-.INF", NULL };
	static const char *const nans[] = { ".nan", ".NaN", ".NAN", NULL };
	size_t i, w = 0;
	int c = n ? (unsigned char)s[0] : 0, r;

	if (n == 0 || one_of(s, n, nulls)) {
		nd->kind = YML_NULL;
		return 0;
	}
	if (one_of(s, n, trues) || one_of(s, n, falses)) {
		nd->kind = YML_BOOL;
		nd->u.b = s[0] == 't' || s[0] == 'T';
		return 0;
	}
	if (c == '.' || c == '+' || c == '-' || (c >= '0' && c <= '9')) {
		if (one_of(s, n, pinf) || one_of(s, n, ninf) || one_of(s, n, nans)) {
			nd->kind = YML_FLOAT;
			nd->u.f = one_of(s, n, nans) ? NAN : one_of(s, n, ninf) ? -INFINITY : INFINITY;
			return 0;
		}
		if (n + 1 > b->scap) {
			char *p = realloc(b->scratch, n + 1);

			if (!p)
				return oom(b);
			b->scratch = p;
			b->scap = n + 1;
		}
		for (i = 0; i < n; i++)
			if (s[i] != '_')
				b->scratch[w++] = s[i];
		b->scratch[w] = '\0';
		if ((r = read_int(b->scratch, w, &nd->u.i, &nd->u.f)) != 0) {
			nd->kind = r == 1 ? YML_INT : YML_FLOAT;
			return 0;
		}
		if (is_float(b->scratch, w)) {
			nd->kind = YML_FLOAT;
			nd->u.f = c_strtod(b->scratch);
			return 0;
		}
	}
	nd->kind = YML_STR;
	nd->merge = n == 2 && s[0] == '<' && s[1] == '<';
	if (!(nd->u.str.s = arena_str(b, s, n)))
		return oom(b);
	nd->u.str.len = n;
	return 0;
}

static int b64_value(int c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

/* !!binary: base64 (line breaks and spaces allowed) into nd's string. */
static int binary(struct builder *b, struct yml_node *nd, const char *s, size_t n)
{
	char *out = arena_alloc(b->arena, n / 4 * 3 + 4);
	size_t i, w = 0, quad = 0, pad = 0;
	unsigned acc = 0;
	int v = 0;

	if (!out)
		return oom(b);
	for (i = 0; i < n; i++) {
		int c = (unsigned char)s[i];

		if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
			continue;
		if (c == '=' && quad >= 2) {
			pad++;
			quad++;
		} else if (pad || (v = b64_value(c)) < 0) {
			return fail_node(b, nd, "a !!binary scalar is not base64");
		} else {
			acc = acc << 6 | (unsigned)v;
			quad++;
		}
		if (quad == 4) {
			acc <<= 6 * pad;
			out[w++] = (char)(acc >> 16);
			if (pad < 2)
				out[w++] = (char)(acc >> 8);
			if (pad < 1)
				out[w++] = (char)acc;
			acc = 0;
			quad = 0;
			if (pad)
				pad = 3; /* nothing may follow the padding */
		}
	}
	if (quad != 0)
		return fail_node(b, nd, "a !!binary scalar is not base64");
	out[w] = '\0';
	nd->kind = YML_STR;
	nd->u.str.s = out;
	nd->u.str.len = w;
	return 0;
}

#define TAG_PREFIX "tag:yaml.org,2002:"

/* Fills nd from a scalar event: its tag, style and text. */
static int scalar(struct builder *b, struct yml_node *nd, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	const char *tag = (const char *)ev->data.scalar.tag, *t;
	size_t n = ev->data.scalar.length;
	char ex[160];
	enum yml_kind want;

	if (!tag && ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
		return resolve_plain(b, nd, s, n);
	t = !tag ? NULL :
	    strncmp(tag, TAG_PREFIX, sizeof TAG_PREFIX - 1) == 0 ? tag + sizeof TAG_PREFIX - 1 : NULL;
	if (t && strcmp(t, "binary") == 0)
		return binary(b, nd, s, n);
	if (t && strcmp(t, "merge") == 0 && n == 2 && memcmp(s, "<<", 2) == 0) {
		if (resolve_plain(b, nd, s, n))
			return -1;
		nd->merge = 1;
		return 0;
	}
	if (!t || (strcmp(t, "int") && strcmp(t, "float") && strcmp(t, "bool") &&
		   strcmp(t, "null"))) {
		/* quoted and block scalars, and !!str, `!`, !!timestamp and
		 * every other tag: a string */
		nd->kind = YML_STR;
		if (!(nd->u.str.s = arena_str(b, s, n)))
			return oom(b);
		nd->u.str.len = n;
		return 0;
	}
	want = *t == 'i' ? YML_INT : *t == 'f' ? YML_FLOAT : *t == 'b' ? YML_BOOL : YML_NULL;
	if (resolve_plain(b, nd, s, n))
		return -1;
	nd->merge = 0;
	if (want == YML_FLOAT && nd->kind == YML_INT) {
		nd->kind = YML_FLOAT;
		nd->u.f = (double)nd->u.i;
	}
	if (nd->kind != want)
		return fail_node(b, nd, "%s is not a valid !!%s", excerpt(ex, s, n), t);
	return 0;
}

/* Mapping keys as strings (see yml.h). */

/* Go's strconv.FormatFloat(d, 'g', -1, 32), and .inf/-.inf/.nan. */
static void go_float32(char *out, size_t size, double d)
{
	float f = (float)d;
	char buf[48], point = localeconv()->decimal_point[0], *e, *p;
	int digits, exp;

	if (isnan(f)) {
		snprintf(out, size, ".nan");
		return;
	}
	if (isinf(f)) {
		snprintf(out, size, f > 0 ? ".inf" : "-.inf");
		return;
	}
	for (digits = 1; digits < 9; digits++) {
		snprintf(buf, sizeof buf, "%.*e", digits - 1, (double)f);
		if ((float)strtod(buf, NULL) == f)
			break;
	}
	snprintf(buf, sizeof buf, "%.*e", digits - 1, (double)f);
	e = strchr(buf, 'e');
	exp = e ? atoi(e + 1) : 0;
	if (exp < -4 || exp >= 6)
		snprintf(out, size, "%s", buf);
	else
		snprintf(out, size, "%.*f", digits - 1 - exp > 0 ? digits - 1 - exp : 0,
			 (double)f);
	if (point != '.' && (p = strchr(out, point)))
		*p = '.';
}

static int key_string(struct builder *b, const struct yml_node *k,
		      const char **s, size_t *n)
{
	char buf[48];

	switch (k->kind) {
	case YML_STR:
		*s = k->u.str.s;
		*n = k->u.str.len;
		return 0;
	case YML_BOOL:
		*s = k->u.b ? "true" : "false";
		*n = strlen(*s);
		return 0;
	case YML_INT:
		snprintf(buf, sizeof buf, "%lld", (long long)k->u.i);
		break;
	case YML_FLOAT:
		go_float32(buf, sizeof buf, k->u.f);
		break;
	case YML_NULL:
		return fail_node(b, k, "a mapping key is null");
	default:
		return fail_node(b, k, "a mapping key is a %s; keys must be scalars",
				 k->kind == YML_SEQ ? "sequence" : "mapping");
	}
	*n = strlen(buf);
	return (*s = arena_str(b, buf, *n)) ? 0 : oom(b);
}

/* Mappings: keys, `<<` merges, duplicates. */

static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand *a = pa, *b = pb;
	size_t n = a->klen < b->klen ? a->klen : b->klen;
	int c = memcmp(a->key, b->key, n);

	if (c)
		return c;
	if (a->klen != b->klen)
		return a->klen < b->klen ? -1 : 1;
	if (a->pos != b->pos)
		return a->pos < b->pos ? -1 : 1;
	return a->sub < b->sub ? -1 : a->sub > b->sub;
}

static int add_cands(struct builder *b, size_t need)
{
	struct cand *p;

	if (need <= b->ccap)
		return 0;
	if (need > SIZE_MAX / sizeof *p || !(p = realloc(b->cands, need * sizeof *p)))
		return oom(b);
	b->cands = p;
	b->ccap = need;
	return 0;
}

/* The mappings a `<<` value merges: one, or a sequence of them. */
static int merge_sources(struct builder *b, const struct yml_node *key,
			 const struct yml_node *v, size_t *count, size_t *pairs)
{
	size_t i;

	*count = *pairs = 0;
	if (v->kind == YML_MAP) {
		*count = 1;
		*pairs = v->u.map.n;
		return 0;
	}
	if (v->kind != YML_SEQ)
		return fail_node(b, key, "a '<<' merge takes a mapping or a sequence of mappings");
	for (i = 0; i < v->u.seq.n; i++) {
		if (v->u.seq.items[i]->kind != YML_MAP)
			return fail_node(b, v->u.seq.items[i],
					 "a '<<' merge takes a mapping or a sequence of mappings");
		*pairs += v->u.seq.items[i]->u.map.n;
	}
	*count = v->u.seq.n;
	return 0;
}

/*
 * Turns the open mapping's children into its pairs. Every key and merged
 * key is a candidate; sorted by key, then in the order go-yaml v2 (kubectl)
 * applies them (document order; the mappings of one `<<` last to first),
 * the last candidate of each key wins. Without dup_last, a key set twice,
 * two `<<`, or a key set before a `<<` that sets it too, is refused.
 */
static int finish_map(struct builder *b, struct frame *f)
{
	struct yml_node *nd = f->node;
	struct yml_pair *pairs;
	size_t i, j, k, m, need = 0, nc = 0, np = 0, merges = 0, cnt, prs;
	int height = 0, own_seen;
	char ex[160];

	for (i = 0; i + 1 < f->n; i += 2) {
		if (!f->kids[i]->merge) {
			need++;
			continue;
		}
		if (merges++ && !b->lim->dup_last)
			return fail_node(b, f->kids[i], "duplicate key \"<<\"");
		if (merge_sources(b, f->kids[i], f->kids[i + 1], &cnt, &prs))
			return -1;
		need += prs;
	}
	if (add_cands(b, need))
		return -1;
	for (i = 0; i + 1 < f->n; i += 2) {
		const struct yml_node *key = f->kids[i], *v = f->kids[i + 1];
		struct cand *c;

		if (!key->merge) {
			c = &b->cands[nc++];
			if (key_string(b, key, &c->key, &c->klen))
				return -1;
			c->value = v;
			c->pos = i;
			c->sub = 0;
			c->own = 1;
			c->line = key->line;
			c->column = key->column;
			continue;
		}
		m = v->kind == YML_MAP ? 1 : v->u.seq.n;
		for (j = 0; j < m; j++) {
			const struct yml_node *src = v->kind == YML_MAP ? v : v->u.seq.items[j];

			for (k = 0; k < src->u.map.n; k++) {
				c = &b->cands[nc++];
				c->key = src->u.map.pairs[k].key;
				c->klen = src->u.map.pairs[k].klen;
				c->value = src->u.map.pairs[k].value;
				c->pos = i;
				c->sub = m - 1 - j;
				c->own = 0;
				c->line = key->line;
				c->column = key->column;
			}
		}
	}
	qsort(b->cands, nc, sizeof *b->cands, cand_cmp);
	if (!(pairs = arena_alloc(b->arena, (nc ? nc : 1) * sizeof *pairs)))
		return oom(b);
	for (i = 0; i < nc; i = j) {
		own_seen = 0;
		for (j = i; j < nc && b->cands[j].klen == b->cands[i].klen &&
			    memcmp(b->cands[j].key, b->cands[i].key, b->cands[i].klen) == 0; j++) {
			const struct cand *c = &b->cands[j];

			if (!b->lim->dup_last && own_seen && c->own)
				return fail_at(b, c->line, c->column, "duplicate key %s",
					       excerpt(ex, c->key, c->klen));
			if (!b->lim->dup_last && own_seen && !c->own)
				return fail_at(b, b->cands[j - 1].line, b->cands[j - 1].column,
					       "key %s is set before a '<<' merge that sets it "
					       "too (readers disagree on which wins: write '<<' first)",
					       excerpt(ex, c->key, c->klen));
			own_seen |= c->own;
		}
		pairs[np].key = b->cands[j - 1].key;
		pairs[np].klen = b->cands[j - 1].klen;
		pairs[np].value = b->cands[j - 1].value;
		if (pairs[np].value->height > height)
			height = pairs[np].value->height;
		np++;
	}
	nd->u.map.pairs = pairs;
	nd->u.map.n = np;
	nd->height = height + 1;
	return 0;
}

/* Events. */

static int count_nodes(struct builder *b, size_t n, const yaml_mark_t *at)
{
	if (n > b->lim->max_nodes - b->produced || (b->produced += n) > b->lim->max_nodes)
		return fail_at(b, (int)at->line + 1, (int)at->column + 1,
			       "the document holds more than %zu nodes (an alias counts "
			       "as every node it copies)", b->lim->max_nodes);
	return 0;
}

/* The event's tag when it is a local one: "!" and a name ("!Sub"), not the
 * non-specific "!" nor a "tag:..." URI such as !!str's. */
static const char *local_tag(const yaml_event_t *ev)
{
	const char *tag = (const char *)(ev->type == YAML_SCALAR_EVENT ? ev->data.scalar.tag :
					 ev->type == YAML_SEQUENCE_START_EVENT ? ev->data.sequence_start.tag :
					 ev->type == YAML_MAPPING_START_EVENT ? ev->data.mapping_start.tag : NULL);

	return tag && tag[0] == '!' && tag[1] && tag[1] != '!' ? tag : NULL;
}

static struct yml_node *new_node(struct builder *b, const yaml_event_t *ev)
{
	struct yml_node *nd = arena_alloc(b->arena, sizeof *nd);
	const char *tag = local_tag(ev);

	if (!nd) {
		oom(b);
		return NULL;
	}
	memset(nd, 0, sizeof *nd);
	nd->line = (int)ev->start_mark.line + 1;
	nd->column = (int)ev->start_mark.column + 1;
	if (tag && !(nd->tag = arena_str(b, tag, strlen(tag)))) {
		oom(b);
		return NULL;
	}
	return nd;
}

/* Adds a finished node (or an alias's target) to the open collection. */
static int add_child(struct builder *b, const struct yml_node *nd)
{
	struct frame *f;
	const struct yml_node **p;
	size_t cap;

	if (b->depth == 0) {
		b->root = nd;
		return 0;
	}
	f = &b->frames[b->depth - 1];
	if (f->n == f->cap) {
		cap = f->cap ? f->cap * 2 : 8;
		if (!(p = realloc(f->kids, cap * sizeof *p)))
			return oom(b);
		f->kids = p;
		f->cap = cap;
	}
	f->kids[f->n++] = nd;
	return 0;
}

static int open_collection(struct builder *b, const yaml_event_t *ev,
			   enum yml_kind kind, const char *anchor)
{
	struct yml_node *nd;
	struct frame *f;

	if (b->depth >= b->lim->max_depth)
		return fail_at(b, (int)ev->start_mark.line + 1, (int)ev->start_mark.column + 1,
			       "sequences and mappings nest deeper than %d", b->lim->max_depth);
	if (!(nd = new_node(b, ev)))
		return -1;
	nd->kind = kind;
	f = &b->frames[b->depth];
	f->produced = b->produced;
	if (count_nodes(b, 1, &ev->start_mark))
		return -1;
	if (anchor && anchor_set(b, anchor, nd))
		return -1;
	f->node = nd;
	f->n = 0;
	b->depth++;
	return 0;
}

static int close_collection(struct builder *b)
{
	struct frame *f = &b->frames[--b->depth];
	struct yml_node *nd = f->node;
	const struct yml_node **items;
	size_t i;
	int height = 0;

	if (nd->kind == YML_MAP) {
		if (finish_map(b, f))
			return -1;
	} else {
		if (!(items = arena_alloc(b->arena, (f->n ? f->n : 1) * sizeof *items)))
			return oom(b);
		for (i = 0; i < f->n; i++) {
			items[i] = f->kids[i];
			if (items[i]->height > height)
				height = items[i]->height;
		}
		nd->u.seq.items = items;
		nd->u.seq.n = f->n;
		nd->height = height + 1;
	}
	nd->weight = b->produced - f->produced;
	nd->done = 1;
	return add_child(b, nd);
}

static int alias(struct builder *b, const yaml_event_t *ev)
{
	const char *name = (const char *)ev->data.alias.anchor;
	const struct yml_node *nd = anchor_get(b, name);
	int line = (int)ev->start_mark.line + 1, col = (int)ev->start_mark.column + 1;
	char ex[160];

	if (!nd)
		return fail_at(b, line, col, "the alias *%s names no anchor before it",
			       excerpt_as(ex, name, strlen(name), 1));
	if (!nd->done)
		return fail_at(b, line, col, "the alias *%s is inside the node it names",
			       excerpt_as(ex, name, strlen(name), 1));
	if (nd->height > b->lim->max_depth - b->depth)
		return fail_at(b, line, col, "sequences and mappings nest deeper than %d "
			       "(through the alias *%s)", b->lim->max_depth,
			       excerpt_as(ex, name, strlen(name), 1));
	if (count_nodes(b, nd->weight, &ev->start_mark))
		return -1;
	return add_child(b, nd);
}

static int end_document(struct builder *b, const yaml_event_t *ev)
{
	const struct yml_node **p;
	struct yml_node *nd;
	size_t cap;

	if (!b->root) {
		if (!(nd = new_node(b, ev)))
			return -1;
		nd->kind = YML_NULL;
		nd->done = 1;
		b->root = nd;
	}
	if (b->ndocs == b->dcap) {
		cap = b->dcap ? b->dcap * 2 : 4;
		if (!(p = realloc(b->docs, cap * sizeof *p)))
			return oom(b);
		b->docs = p;
		b->dcap = cap;
	}
	b->docs[b->ndocs++] = b->root;
	b->root = NULL;
	return 0;
}

/* Handles one event; sets *done at the end of what was asked for. */
static int on_event(struct builder *b, const yaml_event_t *ev, int *done)
{
	struct yml_node *nd;
	const char *anchor;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		if (!(nd = new_node(b, ev)) || scalar(b, nd, ev))
			return -1;
		nd->weight = 1;
		nd->done = 1;
		if (count_nodes(b, 1, &ev->start_mark))
			return -1;
		anchor = (const char *)ev->data.scalar.anchor;
		if (anchor && anchor_set(b, anchor, nd))
			return -1;
		return add_child(b, nd);
	case YAML_SEQUENCE_START_EVENT:
		return open_collection(b, ev, YML_SEQ,
				       (const char *)ev->data.sequence_start.anchor);
	case YAML_MAPPING_START_EVENT:
		return open_collection(b, ev, YML_MAP,
				       (const char *)ev->data.mapping_start.anchor);
	case YAML_SEQUENCE_END_EVENT:
	case YAML_MAPPING_END_EVENT:
		return close_collection(b);
	case YAML_ALIAS_EVENT:
		return alias(b, ev);
	case YAML_DOCUMENT_START_EVENT:
		/* anchors name nodes of their own document only */
		if (b->acap)
			memset(b->anchors, 0, b->acap * sizeof *b->anchors);
		b->nanchors = 0;
		b->root = NULL;
		return 0;
	case YAML_DOCUMENT_END_EVENT:
		if (end_document(b, ev))
			return -1;
		*done = !b->lim->all;
		return 0;
	case YAML_STREAM_END_EVENT:
		*done = 1;
		return 0;
	default:
		return 0;
	}
}

/* Fills b->err from libyaml's error. */
static void parser_error(struct builder *b, const yaml_parser_t *p,
			 const char *s, size_t len)
{
	size_t off, i, nl = 0, line = 1;

	if (p->error == YAML_MEMORY_ERROR || !p->problem) {
		oom(b);
		return;
	}
	if (p->error == YAML_READER_ERROR) {
		off = p->problem_offset < len ? p->problem_offset : len;
		for (i = 0; i < off; i++)
			if (s[i] == '\n')
				line++, nl = i + 1;
		if (p->problem_value >= 0)
			fail_at(b, (int)line, (int)(off - nl + 1), "%s (byte 0x%02x)",
				p->problem, (unsigned)p->problem_value & 0xff);
		else
			fail_at(b, (int)line, (int)(off - nl + 1), "%s", p->problem);
		return;
	}
	if (p->context)
		fail_at(b, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
			"%s (%s at line %d column %d)", p->problem, p->context,
			(int)p->context_mark.line + 1, (int)p->context_mark.column + 1);
	else
		fail_at(b, (int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1,
			"%s", p->problem);
}

static void builder_free(struct builder *b)
{
	int i;

	if (b->frames)
		for (i = 0; i <= b->lim->max_depth; i++)
			free(b->frames[i].kids);
	free(b->frames);
	free(b->anchors);
	free(b->docs);
	free(b->scratch);
	free(b->cands);
	arena_free(b->arena);
}

int yml_load(const char *s, size_t len, const struct yml_limits *lim,
	     struct yml_stream *out, struct yml_error *err)
{
	struct builder b;
	yaml_parser_t parser;
	yaml_event_t ev;
	const struct yml_node **docs;
	int have_parser = 0, done = 0, rc = -1, r;

	memset(out, 0, sizeof *out);
	memset(err, 0, sizeof *err);
	memset(&b, 0, sizeof b);
	b.lim = lim;
	b.err = err;
	if (len > lim->max_bytes) {
		fail_at(&b, 0, 0, "the YAML text has %zu bytes, more than the limit of %zu",
			len, lim->max_bytes);
		return -1;
	}
	if (lim->max_depth < 1 || !(b.arena = calloc(1, sizeof *b.arena)) ||
	    !(b.frames = calloc((size_t)lim->max_depth + 1, sizeof *b.frames))) {
		oom(&b);
		goto done;
	}
	if (!yaml_parser_initialize(&parser)) {
		oom(&b);
		goto done;
	}
	have_parser = 1;
	yaml_parser_set_input_string(&parser, (const unsigned char *)s, len);
	while (!done) {
		if (!yaml_parser_parse(&parser, &ev)) {
			parser_error(&b, &parser, s, len);
			goto done;
		}
		r = on_event(&b, &ev, &done);
		yaml_event_delete(&ev);
		if (r)
			goto done;
	}
	if (!(docs = arena_alloc(b.arena, (b.ndocs ? b.ndocs : 1) * sizeof *docs))) {
		oom(&b);
		goto done;
	}
	if (b.ndocs)
		memcpy(docs, b.docs, b.ndocs * sizeof *docs);
	out->docs = docs;
	out->ndocs = b.ndocs;
	out->arena = b.arena;
	b.arena = NULL;
	rc = 0;
done:
	if (have_parser)
		yaml_parser_delete(&parser);
	builder_free(&b);
	return rc;
}

void yml_release(struct yml_stream *st)
{
	arena_free(st->arena);
	st->arena = NULL;
	st->docs = NULL;
	st->ndocs = 0;
}
