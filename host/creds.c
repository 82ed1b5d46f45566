/* creds: the credential provider chain and its cache (see creds.h). */
#include "creds_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "log.h"

#define MAX_CHAIN 16          /* source_profile hops */
#define FAILED_GRACE 30.0     /* creds_cached serves old ones this long after a failed refresh */
#define CACHED_MIN_LEFT 60.0  /* ... when they still have this long */

/* --- one resolution --- */

struct chain {
	awsconfig *cfg;                  /* the shared files (owned) */
	const char *profile;             /* the top-level profile */
	int named;                       /* the caller named it: no environment providers */
	const char *visited[MAX_CHAIN];  /* source_profile hops so far (borrowed) */
	int nvisited;                    /* entries in visited */
	char *sts_endpoint;              /* resolved on first use (owned) */
	char sts_region[64];             /* signing region of STS */
	char tried[1200];                /* notes of the providers that had nothing */
};

static void note(struct chain *ch, const char *msg)
{
	size_t n = strlen(ch->tried);

	snprintf(ch->tried + n, sizeof ch->tried - n, "%s%s", n ? "; " : "", msg);
}

static int from_env(aws_creds *out, char *err, size_t errlen)
{
	const char *ak = awsconfig_env("AWS_ACCESS_KEY_ID");
	const char *sk = awsconfig_env("AWS_SECRET_ACCESS_KEY");
	const char *tok = awsconfig_env("AWS_SESSION_TOKEN");
	const char *exp = awsconfig_env("AWS_CREDENTIAL_EXPIRATION");
	double when = 0;

	if (!tok)
		tok = awsconfig_env("AWS_SECURITY_TOKEN");
	if (!ak) {
		snprintf(err, errlen, "environment: AWS_ACCESS_KEY_ID is not set");
		return CR_NONE;
	}
	if (!sk) {
		snprintf(err, errlen, "environment: AWS_ACCESS_KEY_ID is set but "
			 "AWS_SECRET_ACCESS_KEY is not");
		return CR_FAIL;
	}
	if (exp && cr_parse_time(exp, &when) != 0) {
		snprintf(err, errlen, "environment: AWS_CREDENTIAL_EXPIRATION is not an ISO 8601 time");
		return CR_FAIL;
	}
	if (cr_fill(out, ak, sk, tok, when, "env") != 0) {
		snprintf(err, errlen, "out of memory");
		return CR_FAIL;
	}
	cr_obtained(out);
	return CR_OK;
}

static const char *file_name(enum awsconfig_file f)
{
	return f == AWSCONFIG_CREDENTIALS ? "credentials" : "config";
}

static int from_static(struct chain *ch, const char *profile, enum awsconfig_file f,
		       aws_creds *out, char *err, size_t errlen)
{
	const char *ak = awsconfig_get_in(ch->cfg, f, profile, "aws_access_key_id");
	const char *sk = awsconfig_get_in(ch->cfg, f, profile, "aws_secret_access_key");
	const char *tok = awsconfig_get_in(ch->cfg, f, profile, "aws_session_token");
	char source[48];

	if (!tok)
		tok = awsconfig_get_in(ch->cfg, f, profile, "aws_security_token");
	if (!ak || !*ak) {
		snprintf(err, errlen, "%s file: profile %s has no aws_access_key_id", file_name(f), profile);
		return CR_NONE;
	}
	if (!sk || !*sk) {
		snprintf(err, errlen, "%s file: profile %s has aws_access_key_id but no "
			 "aws_secret_access_key", file_name(f), profile);
		return CR_FAIL;
	}
	snprintf(source, sizeof source, "profile:%s", profile);
	if (cr_fill(out, ak, sk, tok, 0, source) != 0) {
		snprintf(err, errlen, "out of memory");
		return CR_FAIL;
	}
	cr_obtained(out);
	return CR_OK;
}

/* STS endpoint and region for this resolution. 0 or -1. */
static int sts_setup(struct chain *ch, cr_sts *sts, char *err, size_t errlen)
{
	const char *region = awsconfig_region_of(ch->cfg, ch->profile);
	const char *ca = awsconfig_env("AWS_CA_BUNDLE");

	snprintf(ch->sts_region, sizeof ch->sts_region, "%s", region ? region : "us-east-1");
	if (!ch->sts_endpoint) {
		if (awsconfig_endpoint_url(ch->cfg, ch->profile, "sts", &ch->sts_endpoint, err,
					   errlen) != 0)
			return -1;
		if (!ch->sts_endpoint) {
			size_t n = strlen(ch->sts_region) + 40;

			if (!(ch->sts_endpoint = malloc(n))) {
				snprintf(err, errlen, "out of memory");
				return -1;
			}
			snprintf(ch->sts_endpoint, n, "https://sts.%s.amazonaws.com%s", ch->sts_region,
				 strncmp(ch->sts_region, "cn-", 3) == 0 ? ".cn" : "");
		}
	}
	sts->endpoint = ch->sts_endpoint;
	sts->region = ch->sts_region;
	sts->ca_file = ca ? ca : awsconfig_get(ch->cfg, ch->profile, "ca_bundle");
	return 0;
}

/* web identity: the environment (IRSA) when use_env, then the profile */
static int web_identity(struct chain *ch, const char *profile, int use_env, aws_creds *out,
			char *err, size_t errlen)
{
	const char *env_file = use_env ? awsconfig_env("AWS_WEB_IDENTITY_TOKEN_FILE") : NULL;
	const char *file = env_file ? env_file : awsconfig_get(ch->cfg, profile, "web_identity_token_file");
	const char *role = use_env ? awsconfig_env("AWS_ROLE_ARN") : NULL;
	const char *session = use_env ? awsconfig_env("AWS_ROLE_SESSION_NAME") : NULL;
	char *token, why[400], source[48];
	cr_sts sts;
	int rc;

	if (!role)
		role = awsconfig_get(ch->cfg, profile, "role_arn");
	if (!session)
		session = awsconfig_get(ch->cfg, profile, "role_session_name");
	if (!file) {
		snprintf(err, errlen, use_env ? "web identity: AWS_WEB_IDENTITY_TOKEN_FILE is not set "
			 "and profile %s has no web_identity_token_file" :
			 "web identity: profile %s has no web_identity_token_file", profile);
		return CR_NONE;
	}
	if (!role) {
		snprintf(err, errlen, "web identity: a token file is configured but no role "
			 "(AWS_ROLE_ARN or role_arn in profile %s)", profile);
		return CR_FAIL;
	}
	if (!(token = cr_read_token(file, "the web identity token file", why, sizeof why))) {
		snprintf(err, errlen, "web identity: %s", why);
		return CR_FAIL;
	}
	log_add_secret(token);
	if (env_file)
		snprintf(source, sizeof source, "web-identity");
	else
		snprintf(source, sizeof source, "web-identity:%s", profile);
	rc = sts_setup(ch, &sts, err, errlen) != 0 ? -1 :
	     cr_assume_role_web(&sts, role, session, token, source, out, err, errlen);
	cr_wipe(token);
	return rc == 0 ? CR_OK : CR_FAIL;
}

/* botocore's profile providers: web identity, (sso), credentials file,
 * (credential_process), config file */
static int profile_providers(struct chain *ch, const char *profile, int use_env,
			     aws_creds *out, char *err, size_t errlen)
{
	static const char *const sso[] = { "sso_session", "sso_start_url", "sso_account_id" };
	int r;

	if ((r = web_identity(ch, profile, use_env, out, err, errlen)) != CR_NONE)
		return r;
	note(ch, err);
	for (size_t i = 0; i < sizeof sso / sizeof *sso; i++)
		if (awsconfig_get(ch->cfg, profile, sso[i])) {
			snprintf(err, errlen, "profile %s uses IAM Identity Center (%s), which hypd does "
				 "not support: export role credentials or use a role profile", profile, sso[i]);
			return CR_FAIL;
		}
	if ((r = from_static(ch, profile, AWSCONFIG_CREDENTIALS, out, err, errlen)) != CR_NONE)
		return r;
	note(ch, err);
	if (awsconfig_get(ch->cfg, profile, "credential_process")) {
		snprintf(err, errlen, "profile %s uses credential_process, which hypd does not run",
			 profile);
		return CR_FAIL;
	}
	if ((r = from_static(ch, profile, AWSCONFIG_CONFIG, out, err, errlen)) != CR_NONE)
		return r;
	note(ch, err);
	snprintf(err, errlen, "profile %s has no credentials", profile);
	return CR_NONE;
}

static int credential_source(struct chain *ch, const char *profile, const char *src,
			     aws_creds *out, char *err, size_t errlen)
{
	char why[400];
	int r;

	if (strcmp(src, "Environment") == 0)
		r = from_env(out, why, sizeof why);
	else if (strcmp(src, "EcsContainer") == 0)
		r = cr_container(out, why, sizeof why);
	else if (strcmp(src, "Ec2InstanceMetadata") == 0)
		r = cr_imds(ch->cfg, ch->profile, out, why, sizeof why);
	else {
		snprintf(err, errlen, "profile %s: credential_source %.60s is not one of Environment, "
			 "Ec2InstanceMetadata, EcsContainer", profile, src);
		return CR_FAIL;
	}
	if (r == CR_OK)
		return CR_OK;
	snprintf(err, errlen, "profile %s: credential_source %s gave no credentials (%s)", profile,
		 src, why);
	return CR_FAIL;
}

static int has_static(struct chain *ch, const char *profile)
{
	return awsconfig_get(ch->cfg, profile, "aws_access_key_id") ||
	       awsconfig_get(ch->cfg, profile, "aws_secret_access_key");
}

static int has_role(struct chain *ch, const char *profile)
{
	return awsconfig_get(ch->cfg, profile, "role_arn") &&
	       !awsconfig_get(ch->cfg, profile, "web_identity_token_file");
}

static int assume_role(struct chain *ch, const char *profile, aws_creds *out, char *err,
		       size_t errlen);

/* The source credentials of a role profile (botocore _resolve_source_credentials). */
static int role_source(struct chain *ch, const char *profile, const char *sp, const char *cs,
		       aws_creds *src, char *err, size_t errlen)
{
	char path[600] = "";
	int r;

	if (cs)
		return credential_source(ch, profile, cs, src, err, errlen);
	if (!awsconfig_has_profile(ch->cfg, sp)) {
		snprintf(err, errlen, "the source_profile %s of profile %s does not exist", sp, profile);
		return CR_FAIL;
	}
	for (int i = 0; i < ch->nvisited; i++) {
		if (strcmp(ch->visited[i], sp) != 0)
			continue;
		if (strcmp(sp, profile) == 0 && has_static(ch, sp))
			break; /* a profile may source its own static keys */
		for (int k = 0; k < ch->nvisited; k++)
			snprintf(path + strlen(path), sizeof path - strlen(path), "%s -> ", ch->visited[k]);
		snprintf(err, errlen, "the source_profile chain loops: %s%s", path, sp);
		return CR_FAIL;
	}
	if (ch->nvisited == MAX_CHAIN) {
		snprintf(err, errlen, "the source_profile chain of profile %s is longer than %d",
			 ch->profile, MAX_CHAIN);
		return CR_FAIL;
	}
	ch->visited[ch->nvisited++] = sp;
	if (has_static(ch, sp) || !has_role(ch, sp)) {
		r = profile_providers(ch, sp, 0, src, err, errlen);
		if (r == CR_NONE) {
			snprintf(err, errlen, "the source_profile %s of profile %s has no credentials",
				 sp, profile);
			r = CR_FAIL;
		}
		return r;
	}
	return assume_role(ch, sp, src, err, errlen);
}

static int assume_role(struct chain *ch, const char *profile, aws_creds *out, char *err,
		       size_t errlen)
{
	const char *role = awsconfig_get(ch->cfg, profile, "role_arn");
	const char *sp = awsconfig_get(ch->cfg, profile, "source_profile");
	const char *cs = awsconfig_get(ch->cfg, profile, "credential_source");
	const char *dur = awsconfig_get(ch->cfg, profile, "duration_seconds");
	char source[48], *end;
	long duration = 0;
	aws_creds src;
	cr_sts sts;
	int r;

	memset(&src, 0, sizeof src);
	if (sp && cs) {
		snprintf(err, errlen, "profile %s has both source_profile and credential_source", profile);
		return CR_FAIL;
	}
	if (!sp && !cs) {
		snprintf(err, errlen, "profile %s has role_arn but neither source_profile nor "
			 "credential_source", profile);
		return CR_FAIL;
	}
	if (awsconfig_get(ch->cfg, profile, "mfa_serial")) {
		snprintf(err, errlen, "profile %s needs an MFA code (mfa_serial), which hypd cannot "
			 "ask for", profile);
		return CR_FAIL;
	}
	if (dur) {
		errno = 0;
		duration = strtol(dur, &end, 10);
		if (errno || *end || duration < 900 || duration > 43200) {
			snprintf(err, errlen, "profile %s: duration_seconds must be a whole number from "
				 "900 to 43200", profile);
			return CR_FAIL;
		}
	}
	if ((r = role_source(ch, profile, sp, cs, &src, err, errlen)) != CR_OK)
		return r;
	snprintf(source, sizeof source, "assume-role:%s", profile);
	r = sts_setup(ch, &sts, err, errlen) != 0 ? -1 :
	    cr_assume_role(&sts, &src, role, awsconfig_get(ch->cfg, profile, "role_session_name"),
			   awsconfig_get(ch->cfg, profile, "external_id"), duration, source, out,
			   err, errlen);
	creds_free(&src);
	return r == 0 ? CR_OK : CR_FAIL;
}

/* The whole chain for a profile as the caller named it (NULL: default). */
static int run_chain(const char *named, aws_creds *out, char *err, size_t errlen)
{
	struct chain ch;
	char why[600];
	int r;

	memset(&ch, 0, sizeof ch);
	ch.named = named != NULL;
	ch.profile = awsconfig_profile_name(named);
	if (!ch.named) {
		if ((r = from_env(out, why, sizeof why)) != CR_NONE)
			goto done;
		note(&ch, why);
	}
	if (!(ch.cfg = awsconfig_load(why, sizeof why))) {
		r = CR_FAIL;
		goto done;
	}
	if ((ch.named || awsconfig_env("AWS_PROFILE") || awsconfig_env("AWS_DEFAULT_PROFILE")) &&
	    !awsconfig_has_profile(ch.cfg, ch.profile)) {
		snprintf(why, sizeof why, "profile %s is in neither the config nor the credentials file",
			 ch.profile);
		r = CR_FAIL;
		goto done;
	}
	ch.visited[ch.nvisited++] = ch.profile;
	if (has_role(&ch, ch.profile)) {
		r = assume_role(&ch, ch.profile, out, why, sizeof why);
		goto done;
	}
	if ((r = profile_providers(&ch, ch.profile, !ch.named, out, why, sizeof why)) != CR_NONE)
		goto done;
	if ((r = cr_container(out, why, sizeof why)) != CR_NONE)
		goto done;
	note(&ch, why);
	if ((r = cr_imds(ch.cfg, ch.profile, out, why, sizeof why)) != CR_NONE)
		goto done;
	note(&ch, why);
	snprintf(err, errlen, "no AWS credentials found for profile %s; tried %s", ch.profile,
		 ch.tried);
	OPENSSL_cleanse(ch.tried, sizeof ch.tried);
	awsconfig_free(ch.cfg);
	free(ch.sts_endpoint);
	return -1;
done:
	if (r == CR_OK && !(out->profile = strdup(ch.profile))) {
		creds_free(out);
		snprintf(why, sizeof why, "out of memory");
		r = CR_FAIL;
	}
	if (r != CR_OK)
		snprintf(err, errlen, "%s", why);
	OPENSSL_cleanse(ch.tried, sizeof ch.tried);
	awsconfig_free(ch.cfg);
	free(ch.sts_endpoint);
	return r == CR_OK ? 0 : -1;
}

/* --- the cache --- */

struct entry {
	char *key;              /* '=' + named profile, or '~' + the default chain's profile */
	pthread_mutex_t fetch;  /* held by the one thread fetching for this key */
	aws_creds creds;        /* the cached set; access_key NULL when none */
	double failed_at;       /* last failed refresh while these were kept, 0 = none */
	struct entry *next;     /* list link */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* guards cache and entries' creds */
static struct entry *cache;

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void creds_free(aws_creds *c)
{
	if (!c)
		return;
	cr_wipe(c->access_key);
	cr_wipe(c->secret_key);
	cr_wipe(c->session_token);
	free(c->profile);
	memset(c, 0, sizeof *c);
}

static int copy_creds(aws_creds *dst, const aws_creds *src)
{
	if (cr_fill(dst, src->access_key, src->secret_key, src->session_token, src->expiration,
		    src->source) != 0)
		return -1;
	if (src->profile && !(dst->profile = strdup(src->profile))) {
		creds_free(dst);
		return -1;
	}
	return 0;
}

static char *make_key(const char *profile)
{
	const char *name = awsconfig_profile_name(profile);
	char *k = malloc(strlen(name) + 2);

	if (k)
		sprintf(k, "%c%s", profile ? '=' : '~', name);
	return k;
}

/* Caller holds lock. */
static struct entry *find(const char *key)
{
	for (struct entry *e = cache; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			return e;
	return NULL;
}

static struct entry *find_or_add(const char *key)
{
	struct entry *e;

	pthread_mutex_lock(&lock);
	if (!(e = find(key)) && (e = calloc(1, sizeof *e)) != NULL) {
		if (!(e->key = strdup(key))) {
			free(e);
			e = NULL;
		} else {
			pthread_mutex_init(&e->fetch, NULL);
			e->next = cache;
			cache = e;
		}
	}
	pthread_mutex_unlock(&lock);
	return e;
}

static int needs_refresh(const aws_creds *c, double t)
{
	return !c->access_key || (c->expiration > 0 && c->expiration - t < CREDS_REFRESH_WINDOW);
}

static int still_valid(const aws_creds *c, double t)
{
	return c->access_key && (c->expiration == 0 || c->expiration - t > CREDS_EXPIRY_MARGIN);
}

int creds_resolve(const char *profile, aws_creds *out, char *err, size_t errlen)
{
	char why[1600], *key = make_key(profile), *red;
	struct entry *e = key ? find_or_add(key) : NULL;
	aws_creds fresh;
	double t;
	int rc = -1;

	memset(out, 0, sizeof *out);
	memset(&fresh, 0, sizeof fresh);
	free(key);
	if (!e) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_mutex_lock(&e->fetch);
	pthread_mutex_lock(&lock);
	if (!needs_refresh(&e->creds, now()))
		rc = copy_creds(out, &e->creds) == 0 ? 0 : -2;
	pthread_mutex_unlock(&lock);
	if (rc != -1) {
		pthread_mutex_unlock(&e->fetch);
		if (rc == -2)
			snprintf(err, errlen, "out of memory");
		return rc == 0 ? 0 : -1;
	}
	rc = run_chain(profile, &fresh, why, sizeof why);
	t = now();
	if (rc == 0 && fresh.expiration > 0 && fresh.expiration - t <= CREDS_EXPIRY_MARGIN) {
		snprintf(why, sizeof why, "the credentials from %s expire at once (in %.0f s)",
			 fresh.source, fresh.expiration - t);
		creds_free(&fresh);
		rc = -1;
	}
	if (rc == 0) {
		log_msg(LOG_DEBUG, "creds", "credentials for %s from %s%s", fresh.profile, fresh.source,
			fresh.expiration > 0 ? " (temporary)" : "");
	}
	pthread_mutex_lock(&lock);
	if (rc == 0) {
		creds_free(&e->creds);
		e->creds = fresh;
		e->failed_at = 0;
		rc = copy_creds(out, &e->creds);
		if (rc != 0)
			snprintf(why, sizeof why, "out of memory");
	} else if (still_valid(&e->creds, t)) {
		log_msg(LOG_WARN, "creds", "refreshing the credentials of profile %s failed; the "
			"current ones (%s) stay in use for %.0f s more: %s", e->creds.profile,
			e->creds.source, e->creds.expiration - t, why);
		e->failed_at = t;
		rc = copy_creds(out, &e->creds);
		if (rc != 0)
			snprintf(why, sizeof why, "out of memory");
	}
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&e->fetch);
	if (rc != 0) {
		/* belt and braces: no registered secret or key-shaped text leaves */
		red = log_redact(why, strlen(why), NULL);
		snprintf(err, errlen, "%s", red ? red : "credentials could not be resolved");
		free(red);
	}
	OPENSSL_cleanse(why, sizeof why);
	return rc;
}

int creds_cached(const char *profile, aws_creds *out)
{
	char *key = make_key(profile);
	struct entry *e;
	double t = now(), left;
	int rc = -1;

	memset(out, 0, sizeof *out);
	if (!key)
		return -1;
	pthread_mutex_lock(&lock);
	e = find(key);
	if (e && e->creds.access_key) {
		left = e->creds.expiration - t;
		if (e->creds.expiration == 0 || left >= CREDS_REFRESH_WINDOW ||
		    (e->failed_at > 0 && t - e->failed_at < FAILED_GRACE && left > CACHED_MIN_LEFT))
			rc = copy_creds(out, &e->creds);
	}
	pthread_mutex_unlock(&lock);
	free(key);
	return rc;
}

void creds_reset(void)
{
	struct entry *e, *next;

	pthread_mutex_lock(&lock);
	for (e = cache; e; e = next) {
		next = e->next;
		creds_free(&e->creds);
		pthread_mutex_destroy(&e->fetch);
		free(e->key);
		free(e);
	}
	cache = NULL;
	pthread_mutex_unlock(&lock);
}
