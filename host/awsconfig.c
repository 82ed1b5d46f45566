/* awsconfig: the AWS shared config and credentials files (see awsconfig.h). */
#include "awsconfig.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#define MAX_FILE ((size_t)1 << 20)

struct kv {
	char *key;         /* lower-cased key (nested keys as written) */
	char *value;       /* trimmed value; NULL when nested */
	struct kv *sub;    /* nested properties */
	size_t nsub;       /* entries in sub */
};

enum kind { K_PROFILE, K_SERVICES, K_OTHER };

struct section {
	enum awsconfig_file file;  /* which file it came from */
	enum kind kind;            /* profile, services or ignored */
	char *name;                /* profile or services name; header for others */
	struct kv *kv;             /* its keys, in file order */
	size_t nkv;                /* entries in kv */
};

struct awsconfig {
	struct section *sec;  /* every section, merged by (file, kind, name) */
	size_t nsec;          /* entries in sec */
};

static void wipe(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

static void kv_free(struct kv *kv)
{
	wipe(kv->key);
	wipe(kv->value);
	for (size_t i = 0; i < kv->nsub; i++)
		kv_free(&kv->sub[i]);
	free(kv->sub);
}

awsconfig *awsconfig_new(void) { return calloc(1, sizeof(awsconfig)); }

void awsconfig_free(awsconfig *c)
{
	if (!c)
		return;
	for (size_t i = 0; i < c->nsec; i++) {
		for (size_t k = 0; k < c->sec[i].nkv; k++)
			kv_free(&c->sec[i].kv[k]);
		free(c->sec[i].kv);
		wipe(c->sec[i].name);
	}
	free(c->sec);
	free(c);
}

static char *dupn(const char *s, size_t n)
{
	char *d = malloc(n + 1);

	if (d) {
		memcpy(d, s, n);
		d[n] = 0;
	}
	return d;
}

/* s[0..*n) without blanks at both ends */
static const char *trim(const char *s, size_t *n)
{
	while (*n && isspace((unsigned char)*s))
		s++, (*n)--;
	while (*n && isspace((unsigned char)s[*n - 1]))
		(*n)--;
	return s;
}

/*
 * shlex.split for a section header: words split at blanks, quotes group,
 * backslash escapes outside single quotes. Returns the word count (up to
 * 3 words kept in w[]), or -1 for an unbalanced quote.
 */
static int split_words(const char *s, char w[3][256])
{
	int n = 0;

	for (;;) {
		size_t len = 0;
		char q = 0;

		while (isspace((unsigned char)*s))
			s++;
		if (!*s)
			return n;
		while (*s && (q || !isspace((unsigned char)*s))) {
			char ch = *s++;

			if (q && ch == q) {
				q = 0;
				continue;
			}
			if (!q && (ch == '"' || ch == '\'')) {
				q = ch;
				continue;
			}
			if (ch == '\\' && q != '\'' && *s)
				ch = *s++;
			if (n < 3 && len < 255)
				w[n][len++] = ch;
		}
		if (q)
			return -1;
		if (n < 3)
			w[n][len] = 0;
		n++;
	}
}

/* The section for a header, found or added. NULL on OOM. */
static struct section *section_for(awsconfig *c, enum awsconfig_file file,
				   const char *header)
{
	enum kind kind = K_OTHER;
	const char *name = header;
	char w[3][256];
	struct section *grown;

	if (file == AWSCONFIG_CREDENTIALS) {
		kind = K_PROFILE;
	} else if (strcmp(header, "default") == 0) {
		kind = K_PROFILE;
	} else if (strncmp(header, "profile", 7) == 0 || strncmp(header, "services", 8) == 0) {
		if (split_words(header, w) == 2 &&
		    (strcmp(w[0], "profile") == 0 || strcmp(w[0], "services") == 0)) {
			kind = w[0][0] == 'p' ? K_PROFILE : K_SERVICES;
			name = w[1];
		}
	}
	for (size_t i = 0; i < c->nsec; i++)
		if (c->sec[i].file == file && c->sec[i].kind == kind &&
		    strcmp(c->sec[i].name, name) == 0)
			return &c->sec[i];
	grown = realloc(c->sec, (c->nsec + 1) * sizeof *c->sec);
	if (!grown)
		return NULL;
	c->sec = grown;
	memset(&c->sec[c->nsec], 0, sizeof *c->sec);
	c->sec[c->nsec].file = file;
	c->sec[c->nsec].kind = kind;
	if (!(c->sec[c->nsec].name = strdup(name)))
		return NULL;
	return &c->sec[c->nsec++];
}

/* Sets key in s (replacing an earlier value); returns the entry or NULL. */
static struct kv *set_key(struct section *s, const char *key, size_t klen,
			  const char *val, size_t vlen)
{
	struct kv *kv = NULL, *grown;
	char *k = dupn(key, klen), *v = dupn(val, vlen);

	if (!k || !v)
		goto fail;
	for (char *p = k; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	for (size_t i = 0; i < s->nkv; i++)
		if (strcmp(s->kv[i].key, k) == 0) {
			kv_free(&s->kv[i]);
			kv = &s->kv[i];
			break;
		}
	if (!kv) {
		grown = realloc(s->kv, (s->nkv + 1) * sizeof *s->kv);
		if (!grown)
			goto fail;
		s->kv = grown;
		kv = &s->kv[s->nkv++];
	}
	memset(kv, 0, sizeof *kv);
	kv->key = k;
	kv->value = v;
	return kv;
fail:
	free(k);
	wipe(v);
	return NULL;
}

/* Appends "\n" + line to the value of kv. */
static int append_line(struct kv *kv, const char *line, size_t n)
{
	size_t old = strlen(kv->value);
	char *v = malloc(old + n + 2);

	if (!v)
		return -1;
	memcpy(v, kv->value, old);
	v[old] = '\n';
	memcpy(v + old + 1, line, n);
	v[old + 1 + n] = 0;
	wipe(kv->value);
	kv->value = v;
	return 0;
}

/* A value whose first line is empty becomes nested "sub = value" lines. */
static int make_nested(struct kv *kv, char *err, size_t errlen, const char *name)
{
	const char *p = kv->value + 1;

	while (*p) {
		const char *end = strchr(p, '\n'), *eq;
		size_t n = end ? (size_t)(end - p) : strlen(p), kl, vl;
		const char *line = trim(p, &n), *k, *v;
		struct kv *grown;

		p = end ? end + 1 : p + strlen(p);
		if (!n)
			continue;
		eq = memchr(line, '=', n);
		if (!eq) {
			snprintf(err, errlen, "%s: the nested value of '%s' has a line without '='",
				 name, kv->key);
			return -1;
		}
		kl = (size_t)(eq - line);
		vl = n - kl - 1;
		k = trim(line, &kl);
		v = trim(eq + 1, &vl);
		grown = realloc(kv->sub, (kv->nsub + 1) * sizeof *kv->sub);
		if (!grown)
			goto oom;
		kv->sub = grown;
		memset(&kv->sub[kv->nsub], 0, sizeof *kv->sub);
		kv->sub[kv->nsub].key = dupn(k, kl);
		kv->sub[kv->nsub].value = dupn(v, vl);
		kv->nsub++;
		if (!kv->sub[kv->nsub - 1].key || !kv->sub[kv->nsub - 1].value)
			goto oom;
	}
	wipe(kv->value);
	kv->value = NULL;
	return 0;
oom:
	snprintf(err, errlen, "%s: out of memory", name);
	return -1;
}

int awsconfig_parse(awsconfig *c, enum awsconfig_file which, const char *name,
		    const char *text, size_t len, char *err, size_t errlen)
{
	struct section *sec = NULL;
	struct kv *cur = NULL;     /* the key a deeper-indented line continues */
	size_t cur_indent = 0, lineno = 0, pos = 0;

	while (pos < len) {
		const char *line = text + pos, *nl = memchr(line, '\n', len - pos);
		size_t n = nl ? (size_t)(nl - line) : len - pos, indent = 0, sl, at, kl, vl;
		const char *s, *k, *v;

		pos += n + (nl ? 1 : 0);
		lineno++;
		while (indent < n && (line[indent] == ' ' || line[indent] == '\t'))
			indent++;
		sl = n;
		s = trim(line, &sl);
		if (!sl || *s == '#' || *s == ';')
			continue;
		if (cur && indent > cur_indent) {
			if (append_line(cur, s, sl) != 0)
				goto oom;
			continue;
		}
		cur = NULL;
		if (*s == '[' && memchr(s, ']', sl)) {
			const char *close = s + sl - 1;
			char *header;

			while (*close != ']')
				close--;
			if (close == s + 1) {
				snprintf(err, errlen, "%s line %zu: an empty section name", name, lineno);
				return -1;
			}
			header = dupn(s + 1, (size_t)(close - s - 1));
			sec = header ? section_for(c, which, header) : NULL;
			free(header);
			if (!sec)
				goto oom;
			continue;
		}
		if (!sec) {
			snprintf(err, errlen, "%s line %zu: a setting before any [section]", name, lineno);
			return -1;
		}
		at = 0;
		while (at < sl && s[at] != '=' && s[at] != ':')
			at++;
		kl = at;
		k = trim(s, &kl);
		if (at == sl || kl == 0) {
			snprintf(err, errlen, "%s line %zu: expected 'key = value'", name, lineno);
			return -1;
		}
		vl = sl - at - 1;
		v = trim(s + at + 1, &vl);
		if (!(cur = set_key(sec, k, kl, v, vl)))
			goto oom;
		cur_indent = indent;
	}
	for (size_t i = 0; i < c->nsec; i++)
		for (size_t k = 0; k < c->sec[i].nkv; k++) {
			struct kv *kv = &c->sec[i].kv[k];

			if (kv->value && kv->value[0] == '\n' &&
			    make_nested(kv, err, errlen, name) != 0)
				return -1;
		}
	return 0;
oom:
	snprintf(err, errlen, "%s: out of memory", name);
	return -1;
}

/* "~/x" with $HOME; a malloc'd path. */
static char *expand_home(const char *path)
{
	const char *home = awsconfig_env("HOME");
	char *out;

	if (path[0] != '~' || (path[1] && path[1] != '/') || !home)
		return strdup(path);
	out = malloc(strlen(home) + strlen(path));
	if (out)
		sprintf(out, "%s%s", home, path + 1);
	return out;
}

static int load_file(awsconfig *c, enum awsconfig_file which, const char *env,
		     const char *fallback, char *err, size_t errlen)
{
	const char *given = awsconfig_env(env);
	char *path = expand_home(given ? given : fallback), *buf = NULL;
	FILE *f = NULL;
	size_t n = 0;
	int rc = -1;

	if (!path) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (!(f = fopen(path, "rb"))) {
		if (errno == ENOENT || errno == ENOTDIR)
			rc = 0;
		else
			snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
		goto done;
	}
	if (!(buf = malloc(MAX_FILE + 1))) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	n = fread(buf, 1, MAX_FILE + 1, f);
	if (ferror(f)) {
		snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
	} else if (n > MAX_FILE) {
		snprintf(err, errlen, "%s is larger than %zu bytes", path, MAX_FILE);
	} else {
		rc = awsconfig_parse(c, which, path, buf, n, err, errlen);
	}
done:
	if (buf) {
		OPENSSL_cleanse(buf, n < MAX_FILE + 1 ? n : MAX_FILE + 1);
		free(buf);
	}
	if (f)
		fclose(f);
	free(path);
	return rc;
}

awsconfig *awsconfig_load(char *err, size_t errlen)
{
	awsconfig *c = awsconfig_new();

	if (!c) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	if (load_file(c, AWSCONFIG_CONFIG, "AWS_CONFIG_FILE", "~/.aws/config", err, errlen) ||
	    load_file(c, AWSCONFIG_CREDENTIALS, "AWS_SHARED_CREDENTIALS_FILE",
		      "~/.aws/credentials", err, errlen)) {
		awsconfig_free(c);
		return NULL;
	}
	return c;
}

const char *awsconfig_env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

const char *awsconfig_profile_name(const char *explicit_profile)
{
	const char *p = explicit_profile;

	if (!p)
		p = awsconfig_env("AWS_PROFILE");
	if (!p)
		p = awsconfig_env("AWS_DEFAULT_PROFILE");
	return p ? p : "default";
}

static const struct section *find(const awsconfig *c, enum awsconfig_file file,
				  enum kind kind, const char *name)
{
	for (size_t i = 0; c && name && i < c->nsec; i++)
		if (c->sec[i].file == file && c->sec[i].kind == kind &&
		    strcmp(c->sec[i].name, name) == 0)
			return &c->sec[i];
	return NULL;
}

static const struct kv *find_key(const struct section *s, const char *key)
{
	for (size_t i = 0; s && i < s->nkv; i++)
		if (strcmp(s->kv[i].key, key) == 0)
			return &s->kv[i];
	return NULL;
}

static const char *find_sub(const struct kv *kv, const char *sub)
{
	for (size_t i = 0; kv && i < kv->nsub; i++)
		if (strcmp(kv->sub[i].key, sub) == 0)
			return kv->sub[i].value;
	return NULL;
}

int awsconfig_has_profile(const awsconfig *c, const char *profile)
{
	return find(c, AWSCONFIG_CREDENTIALS, K_PROFILE, profile) ||
	       find(c, AWSCONFIG_CONFIG, K_PROFILE, profile);
}

const char *awsconfig_get_in(const awsconfig *c, enum awsconfig_file which,
			     const char *profile, const char *key)
{
	const struct kv *kv = find_key(find(c, which, K_PROFILE, profile), key);

	return kv ? kv->value : NULL;
}

const char *awsconfig_get(const awsconfig *c, const char *profile, const char *key)
{
	const char *v = awsconfig_get_in(c, AWSCONFIG_CREDENTIALS, profile, key);

	return v ? v : awsconfig_get_in(c, AWSCONFIG_CONFIG, profile, key);
}

const char *awsconfig_get_sub(const awsconfig *c, const char *profile,
			      const char *key, const char *sub)
{
	const char *v = find_sub(find_key(find(c, AWSCONFIG_CREDENTIALS, K_PROFILE, profile), key), sub);

	return v ? v : find_sub(find_key(find(c, AWSCONFIG_CONFIG, K_PROFILE, profile), key), sub);
}

int awsconfig_has_services(const awsconfig *c, const char *name)
{
	return find(c, AWSCONFIG_CONFIG, K_SERVICES, name) != NULL;
}

const char *awsconfig_service(const awsconfig *c, const char *name,
			      const char *service, const char *key)
{
	return find_sub(find_key(find(c, AWSCONFIG_CONFIG, K_SERVICES, name), service), key);
}

void awsconfig_services_each(const awsconfig *c, const char *name,
			     void (*fn)(void *ud, const char *service,
					const char *key, const char *value),
			     void *ud)
{
	const struct section *s = find(c, AWSCONFIG_CONFIG, K_SERVICES, name);

	for (size_t i = 0; s && i < s->nkv; i++)
		for (size_t k = 0; k < s->kv[i].nsub; k++)
			fn(ud, s->kv[i].key, s->kv[i].sub[k].key, s->kv[i].sub[k].value);
}

int awsconfig_true(const char *v)
{
	static const char t[] = "true";

	if (!v || strlen(v) != 4)
		return 0;
	for (int i = 0; i < 4; i++)
		if (tolower((unsigned char)v[i]) != t[i])
			return 0;
	return 1;
}

const char *awsconfig_region_of(const awsconfig *c, const char *profile)
{
	const char *r = awsconfig_env("AWS_REGION");

	if (!r)
		r = awsconfig_env("AWS_DEFAULT_REGION");
	if (!r)
		r = awsconfig_get(c, profile, "region");
	return r && *r ? r : NULL;
}

int awsconfig_region(const char *profile, char **out)
{
	char err[256];
	awsconfig *c;
	const char *r;

	*out = NULL;
	r = awsconfig_env("AWS_REGION");
	if (!r)
		r = awsconfig_env("AWS_DEFAULT_REGION");
	if (r)
		return (*out = strdup(r)) ? 0 : -1;
	if (!(c = awsconfig_load(err, sizeof err)))
		return -1;
	r = awsconfig_get(c, awsconfig_profile_name(profile), "region");
	if (r && *r && !(*out = strdup(r))) {
		awsconfig_free(c);
		return -1;
	}
	awsconfig_free(c);
	return 0;
}

int awsconfig_ignore_endpoints(const awsconfig *c, const char *profile)
{
	const char *v = awsconfig_env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS");

	if (v)
		return awsconfig_true(v);
	return awsconfig_true(awsconfig_get(c, profile, "ignore_configured_endpoint_urls"));
}

int awsconfig_endpoint_url_from(const awsconfig *c, const char *profile,
				const char *service_id, char **out, const char **source,
				char *err, size_t errlen)
{
	char env[128], id[96];
	const char *v, *services;
	size_t i;

	*out = NULL;
	*source = NULL;
	if (awsconfig_ignore_endpoints(c, profile))
		return 0;
	for (i = 0; service_id[i] && i < sizeof id - 1; i++) {
		char ch = service_id[i] == '-' || service_id[i] == ' ' ? '_' : service_id[i];

		id[i] = (char)tolower((unsigned char)ch);
	}
	id[i] = 0;
	snprintf(env, sizeof env, "AWS_ENDPOINT_URL_%s", id);
	for (char *p = env; *p; p++)
		*p = (char)toupper((unsigned char)*p);
	if ((v = awsconfig_env(env)) != NULL) {
		*source = "AWS_ENDPOINT_URL_<SERVICE>";
	} else if ((v = awsconfig_env("AWS_ENDPOINT_URL")) != NULL) {
		*source = "AWS_ENDPOINT_URL";
	} else if ((services = awsconfig_get(c, profile, "services")) != NULL) {
		if (!awsconfig_has_services(c, services)) {
			snprintf(err, errlen, "profile '%s' uses the services section '%s', "
				 "which the config file does not have", profile, services);
			return -1;
		}
		v = awsconfig_service(c, services, id, "endpoint_url");
		*source = "profile services section";
	}
	if (!v) {
		v = awsconfig_get(c, profile, "endpoint_url");
		*source = "profile endpoint_url";
	}
	if (!v || !*v) {
		*source = NULL;
		return 0;
	}
	if (!(*out = strdup(v))) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	return 0;
}

int awsconfig_endpoint_url(const awsconfig *c, const char *profile,
			   const char *service_id, char **out, char *err, size_t errlen)
{
	const char *source;

	return awsconfig_endpoint_url_from(c, profile, service_id, out, &source, err, errlen);
}
