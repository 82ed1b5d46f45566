/* creds_http: blocking HTTP, container credentials and instance metadata
 * for the credential chain (see creds_int.h). */
#include "creds_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <openssl/crypto.h>

#include "log.h"

#define META_MAX_BODY ((size_t)64 << 10)
#define CONTAINER_HOST "http://169.254.170.2"
#define IMDS_HOST "http://169.254.169.254"
#define IMDS_HOST6 "http://[fd00:ec2::254]"

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t connect_lock = PTHREAD_MUTEX_INITIALIZER;
static char *connect_to;  /* creds_set_connect_to, tests only */

static void init_curl(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

void cr_wipe(char *s)
{
	if (s) {
		OPENSSL_cleanse(s, strlen(s));
		free(s);
	}
}

void creds_set_connect_to(const char *spec)
{
	pthread_mutex_lock(&connect_lock);
	free(connect_to);
	connect_to = spec ? strdup(spec) : NULL;
	pthread_mutex_unlock(&connect_lock);
}

struct sink {
	char *buf;    /* preallocated max + 1 bytes, so secrets are never copied */
	size_t len;   /* bytes received */
	size_t max;   /* cap */
	int toobig;   /* the answer passed the cap */
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct sink *s = ud;
	size_t add = size * n;

	if (add > s->max - s->len) {
		s->toobig = 1;
		return 0;
	}
	memcpy(s->buf + s->len, p, add);
	s->len += add;
	return add;
}

int cr_http(const cr_request *rq, cr_answer *an, char *err, size_t errlen)
{
	CURL *h = NULL;
	struct curl_slist *hdrs = NULL, *cto = NULL, *l;
	struct sink s = { NULL, 0, rq->max_body ? rq->max_body : META_MAX_BODY, 0 };
	char ebuf[CURL_ERROR_SIZE] = "";
	const char *method = rq->method ? rq->method : "GET";
	CURLcode rc;
	int ret = -1;

	memset(an, 0, sizeof *an);
	pthread_once(&curl_once, init_curl);
	if (!(s.buf = malloc(s.max + 1)) || !(h = curl_easy_init())) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	for (const char *const *p = rq->headers; p && *p; p++)
		if (!(l = curl_slist_append(hdrs, *p))) {
			snprintf(err, errlen, "out of memory");
			goto done;
		} else {
			hdrs = l;
		}
	pthread_mutex_lock(&connect_lock);
	if (connect_to)
		cto = curl_slist_append(NULL, connect_to);
	pthread_mutex_unlock(&connect_lock);
	curl_easy_setopt(h, CURLOPT_URL, rq->url);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, rq->timeout_ms > 0 ? rq->timeout_ms : 10000L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
			 rq->connect_timeout_ms > 0 ? rq->connect_timeout_ms : 5000L);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, ebuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "hypd");
	if (hdrs)
		curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
	if (cto)
		curl_easy_setopt(h, CURLOPT_CONNECT_TO, cto);
	if (rq->no_proxy)
		curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	if (rq->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, rq->ca_file);
	if (rq->body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, rq->body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)rq->body_len);
	}
	if (strcmp(method, "GET") != 0 && !(rq->body && strcmp(method, "POST") == 0))
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	rc = curl_easy_perform(h);
	if (rc == CURLE_WRITE_ERROR && s.toobig) {
		snprintf(err, errlen, "%s %s: the answer is larger than %zu bytes", method,
			 rq->url, s.max);
	} else if (rc == CURLE_OPERATION_TIMEDOUT) {
		snprintf(err, errlen, "%s %s: timed out", method, rq->url);
	} else if (rc != CURLE_OK) {
		snprintf(err, errlen, "%s %s: %s", method, rq->url,
			 ebuf[0] ? ebuf : curl_easy_strerror(rc));
	} else {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &an->status);
		s.buf[s.len] = 0;
		an->body = s.buf;
		an->len = s.len;
		s.buf = NULL;
		ret = 0;
	}
done:
	if (h)
		curl_easy_cleanup(h);
	for (l = hdrs; l; l = l->next)
		OPENSSL_cleanse(l->data, strlen(l->data));
	curl_slist_free_all(hdrs);
	curl_slist_free_all(cto);
	if (s.buf) {
		OPENSSL_cleanse(s.buf, s.len);
		free(s.buf);
	}
	return ret;
}

void cr_answer_free(cr_answer *an)
{
	if (an->body) {
		OPENSSL_cleanse(an->body, an->len);
		free(an->body);
	}
	memset(an, 0, sizeof *an);
}

/* days since 1970-01-01 of a civil date (Howard Hinnant's algorithm) */
static long days_from_civil(long y, long m, long d)
{
	long era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

int cr_parse_time(const char *s, double *out)
{
	int y, mo, d, h, mi, sec, n = 0;
	double frac = 0, off = 0;
	const char *p;

	if (!s || sscanf(s, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6 ||
	    n == 0 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
		return -1;
	p = s + n;
	if (*p == '.') {
		double scale = 0.1;

		for (p++; isdigit((unsigned char)*p); p++, scale /= 10)
			frac += (*p - '0') * scale;
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		int oh, om;

		if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2)
			return -1;
		off = (oh * 3600.0 + om * 60.0) * (*p == '+' ? 1 : -1);
		p += 6;
	} else {
		return -1;
	}
	if (*p)
		return -1;
	*out = (double)days_from_civil(y, mo, d) * 86400.0 + h * 3600.0 + mi * 60.0 + sec +
	       frac - off;
	return 0;
}

int cr_fill(aws_creds *c, const char *ak, const char *sk, const char *token,
	    double expiration, const char *source)
{
	memset(c, 0, sizeof *c);
	c->access_key = strdup(ak);
	c->secret_key = strdup(sk);
	c->session_token = token && *token ? strdup(token) : NULL;
	c->expiration = expiration;
	snprintf(c->source, sizeof c->source, "%s", source);
	if (!c->access_key || !c->secret_key || (token && *token && !c->session_token)) {
		creds_free(c);
		return -1;
	}
	return 0;
}

void cr_obtained(const aws_creds *c)
{
	log_add_secret(c->secret_key);
	log_add_secret(c->session_token);
}

char *cr_read_token(const char *path, const char *what, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t n;

	if (!f) {
		snprintf(err, errlen, "cannot read %s %s: %s", what, path, strerror(errno));
		return NULL;
	}
	buf = malloc(META_MAX_BODY + 1);
	n = buf ? fread(buf, 1, META_MAX_BODY + 1, f) : 0;
	fclose(f);
	if (!buf || n > META_MAX_BODY) {
		snprintf(err, errlen, buf ? "%s %s is larger than 64 KiB" : "out of memory", what, path);
		if (buf)
			OPENSSL_cleanse(buf, n);
		free(buf);
		return NULL;
	}
	while (n && isspace((unsigned char)buf[n - 1]))
		n--;
	buf[n] = 0;
	if (!n) {
		snprintf(err, errlen, "%s %s is empty", what, path);
		free(buf);
		return NULL;
	}
	return buf;
}

/* Wipes every string in a cJSON tree, then frees it. */
static void json_wipe(cJSON *j)
{
	for (cJSON *c = j; c; c = c->next) {
		if (c->child)
			json_wipe(c->child);
		if (c->valuestring)
			OPENSSL_cleanse(c->valuestring, strlen(c->valuestring));
	}
}

static const char *jstr(const cJSON *o, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);

	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

/* The JSON answer of the container and instance metadata endpoints. */
static int creds_from_json(const cr_answer *an, const char *where, const char *source,
			   aws_creds *out, char *err, size_t errlen)
{
	cJSON *j = cJSON_ParseWithLength(an->body, an->len);
	const char *ak, *sk, *tok, *exp, *code;
	double when = 0;
	int rc = -1;

	if (!j || !cJSON_IsObject(j)) {
		snprintf(err, errlen, "%s: the answer is not a JSON object", where);
		goto done;
	}
	code = jstr(j, "Code");
	ak = jstr(j, "AccessKeyId");
	sk = jstr(j, "SecretAccessKey");
	tok = jstr(j, "Token");
	exp = jstr(j, "Expiration");
	if (code && strcmp(code, "Success") != 0) {
		snprintf(err, errlen, "%s: the answer has Code %.64s", where, code);
	} else if (!ak || !sk) {
		snprintf(err, errlen, "%s: the answer has no AccessKeyId or SecretAccessKey", where);
	} else if (exp && cr_parse_time(exp, &when) != 0) {
		snprintf(err, errlen, "%s: the answer has an unreadable Expiration", where);
	} else if (cr_fill(out, ak, sk, tok, when, source) != 0) {
		snprintf(err, errlen, "out of memory");
	} else {
		cr_obtained(out);
		rc = 0;
	}
done:
	if (j) {
		json_wipe(j);
		cJSON_Delete(j);
	}
	return rc;
}

/* --- container credentials --- */

static int is_allowed_host(const char *host)
{
	static const char *const named[] = { "localhost", "169.254.170.2", "169.254.170.23" };
	unsigned char a[16], want[16];
	char h[128];
	size_t n = strlen(host);

	for (size_t i = 0; i < sizeof named / sizeof *named; i++)
		if (strcmp(host, named[i]) == 0)
			return 1;
	if (host[0] == '[' && n > 2 && n - 2 < sizeof h && host[n - 1] == ']') {
		memcpy(h, host + 1, n - 2);
		h[n - 2] = 0;
		if (inet_pton(AF_INET6, h, a) != 1)
			return 0;
		inet_pton(AF_INET6, "fd00:ec2::23", want);
		if (memcmp(a, want, 16) == 0)
			return 1;
		inet_pton(AF_INET6, "::1", want);
		if (memcmp(a, want, 16) == 0)
			return 1;
		/* IPv4-mapped loopback, ::ffff:127.x.y.z */
		return memcmp(a, "\0\0\0\0\0\0\0\0\0\0\xff\xff\x7f", 13) == 0;
	}
	return inet_pton(AF_INET, host, a) == 1 && a[0] == 127;
}

/* Checks AWS_CONTAINER_CREDENTIALS_FULL_URI: https, or an allowed host. */
static int check_full_uri(const char *uri, char *err, size_t errlen)
{
	CURLU *u = curl_url();
	char *scheme = NULL, *host = NULL;
	int ok = 0;

	if (u && curl_url_set(u, CURLUPART_URL, uri, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) == CURLUE_OK &&
	    curl_url_get(u, CURLUPART_HOST, &host, 0) == CURLUE_OK) {
		ok = strcmp(scheme, "https") == 0 ||
		     (strcmp(scheme, "http") == 0 && is_allowed_host(host));
		if (!ok)
			snprintf(err, errlen, "container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI "
				 "host %.64s is not allowed: use https, or http to a loopback address, "
				 "169.254.170.2, 169.254.170.23 or [fd00:ec2::23]", host);
	} else {
		snprintf(err, errlen, "container credentials: AWS_CONTAINER_CREDENTIALS_FULL_URI "
			 "is not a URL");
	}
	curl_free(scheme);
	curl_free(host);
	curl_url_cleanup(u);
	return ok ? 0 : -1;
}

int cr_container(aws_creds *out, char *err, size_t errlen)
{
	const char *rel = awsconfig_env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = awsconfig_env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	const char *file = awsconfig_env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
	const char *hdrs[2] = { NULL, NULL };
	char *url = NULL, *token = NULL, *auth = NULL, why[300];
	cr_request rq = { .timeout_ms = 2000, .connect_timeout_ms = 1000, .no_proxy = 1 };
	cr_answer an = { 0, NULL, 0 };
	int rc = CR_FAIL;

	if (!rel && !full) {
		snprintf(err, errlen, "container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI and "
			 "AWS_CONTAINER_CREDENTIALS_FULL_URI are not set");
		return CR_NONE;
	}
	if (rel) {
		url = malloc(sizeof CONTAINER_HOST + strlen(rel) + 1);
		if (url)
			sprintf(url, "%s%s%s", CONTAINER_HOST, rel[0] == '/' ? "" : "/", rel);
	} else if (check_full_uri(full, err, errlen) != 0) {
		return CR_FAIL;
	} else {
		url = strdup(full);
	}
	if (!url) {
		snprintf(err, errlen, "out of memory");
		return CR_FAIL;
	}
	if (file) {
		if (!(token = cr_read_token(file, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", why, sizeof why))) {
			snprintf(err, errlen, "container credentials: %s", why);
			goto done;
		}
	} else if (awsconfig_env("AWS_CONTAINER_AUTHORIZATION_TOKEN")) {
		token = strdup(getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"));
	}
	if (token) {
		if (strpbrk(token, "\r\n")) {
			snprintf(err, errlen, "container credentials: the authorization token has a line break");
			goto done;
		}
		log_add_secret(token);
		if (!(auth = malloc(strlen(token) + 16))) {
			snprintf(err, errlen, "out of memory");
			goto done;
		}
		sprintf(auth, "Authorization: %s", token);
		hdrs[0] = auth;
	}
	rq.url = url;
	rq.headers = hdrs;
	for (int attempt = 0; attempt < 2; attempt++) {
		cr_answer_free(&an);
		if (cr_http(&rq, &an, why, sizeof why) == 0 && an.status < 500)
			break;
	}
	if (!an.body) {
		snprintf(err, errlen, "container credentials: %s", why);
	} else if (an.status != 200) {
		cJSON *j = cJSON_ParseWithLength(an.body, an.len);
		const char *msg = j ? jstr(j, "message") : NULL;

		if (!msg && j)
			msg = jstr(j, "Message");
		snprintf(err, errlen, "container credentials: %s answered HTTP %ld%s%.200s", url,
			 an.status, msg ? ": " : "", msg ? msg : "");
		cJSON_Delete(j);
	} else if (creds_from_json(&an, "container credentials", "container", out, err, errlen) == 0) {
		rc = CR_OK;
	}
done:
	cr_answer_free(&an);
	cr_wipe(auth);
	cr_wipe(token);
	free(url);
	return rc;
}

/* --- instance metadata (IMDSv2) --- */

struct imds {
	char base[256];     /* endpoint without a trailing '/' */
	long timeout_ms;    /* per request */
	int attempts;       /* per request, at least 1 */
	int v1_disabled;    /* no fallback without a token */
	char token[128];    /* the session token; "" for IMDSv1 */
};

/* env value, else profile value */
static const char *setting(const awsconfig *cfg, const char *profile, const char *env,
			   const char *key)
{
	const char *v = awsconfig_env(env);

	return v ? v : cfg ? awsconfig_get(cfg, profile, key) : NULL;
}

static void imds_setup(struct imds *m, const awsconfig *cfg, const char *profile)
{
	const char *ep = setting(cfg, profile, "AWS_EC2_METADATA_SERVICE_ENDPOINT",
				 "ec2_metadata_service_endpoint");
	const char *mode = setting(cfg, profile, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
				   "ec2_metadata_service_endpoint_mode");
	const char *t = setting(cfg, profile, "AWS_METADATA_SERVICE_TIMEOUT", "metadata_service_timeout");
	const char *a = setting(cfg, profile, "AWS_METADATA_SERVICE_NUM_ATTEMPTS",
				"metadata_service_num_attempts");
	size_t n;

	if (!ep)
		ep = mode && strcasecmp(mode, "IPv6") == 0 ? IMDS_HOST6 : IMDS_HOST;
	snprintf(m->base, sizeof m->base, "%s", ep);
	n = strlen(m->base);
	while (n && m->base[n - 1] == '/')
		m->base[--n] = 0;
	m->timeout_ms = t && atof(t) > 0 ? (long)(atof(t) * 1000) : 1000;
	m->attempts = a && atoi(a) > 0 ? atoi(a) : 2;
	m->v1_disabled = awsconfig_true(setting(cfg, profile, "AWS_EC2_METADATA_V1_DISABLED",
						"ec2_metadata_v1_disabled"));
	m->token[0] = 0;
}

/* One metadata request, retried on transport failures and 5xx. Returns 0
 * with an answer, or -1 with a message. */
static int imds_call(struct imds *m, const char *method, const char *path,
		     const char *extra, cr_answer *an, char *why, size_t whylen)
{
	char url[512], tok[200];
	const char *hdrs[3] = { NULL, NULL, NULL };
	int n = 0;
	cr_request rq = { .method = method, .url = url, .headers = hdrs,
			  .timeout_ms = m->timeout_ms, .connect_timeout_ms = m->timeout_ms,
			  .no_proxy = 1 };

	snprintf(url, sizeof url, "%s%s", m->base, path);
	if (extra)
		hdrs[n++] = extra;
	if (m->token[0]) {
		snprintf(tok, sizeof tok, "X-aws-ec2-metadata-token: %s", m->token);
		hdrs[n++] = tok;
	}
	memset(an, 0, sizeof *an);
	for (int attempt = 0; attempt < m->attempts; attempt++) {
		cr_answer_free(an);
		if (cr_http(&rq, an, why, whylen) == 0 && an->status < 500)
			break;
	}
	OPENSSL_cleanse(tok, sizeof tok);
	return an->body ? 0 : -1;
}

/* IMDSv2 session token into m->token ("" when falling back to IMDSv1). */
static int imds_token(struct imds *m, char *why, size_t whylen)
{
	cr_answer an;
	size_t n;

	if (imds_call(m, "PUT", "/latest/api/token",
		      "X-aws-ec2-metadata-token-ttl-seconds: 21600", &an, why, whylen) != 0)
		return -1;
	n = an.len;
	while (n && isspace((unsigned char)an.body[n - 1]))
		n--;
	if (an.status == 200 && n > 0 && n < sizeof m->token) {
		memcpy(m->token, an.body, n);
		m->token[n] = 0;
		log_add_secret(m->token);
	} else if ((an.status == 403 || an.status == 404 || an.status == 405) && !m->v1_disabled) {
		m->token[0] = 0;
	} else {
		snprintf(why, whylen, "the token request to %s answered HTTP %ld", m->base, an.status);
		cr_answer_free(&an);
		return -1;
	}
	cr_answer_free(&an);
	return 0;
}

int cr_imds(const awsconfig *cfg, const char *profile, aws_creds *out, char *err, size_t errlen)
{
	struct imds m;
	cr_answer an = { 0, NULL, 0 };
	char why[300], path[400], role[256];
	size_t n = 0;
	int rc = CR_NONE;

	if (awsconfig_true(awsconfig_env("AWS_EC2_METADATA_DISABLED"))) {
		snprintf(err, errlen, "instance metadata: disabled by AWS_EC2_METADATA_DISABLED");
		return CR_NONE;
	}
	imds_setup(&m, cfg, profile);
	if (imds_token(&m, why, sizeof why) != 0) {
		snprintf(err, errlen, "instance metadata: %s", why);
		goto done;
	}
	if (imds_call(&m, "GET", "/latest/meta-data/iam/security-credentials/", NULL, &an,
		      why, sizeof why) != 0) {
		snprintf(err, errlen, "instance metadata: %s", why);
		goto done;
	}
	if (an.status != 200) {
		snprintf(err, errlen, an.status == 404 ? "instance metadata: no IAM role is attached"
			 " to the instance" : "instance metadata: the role lookup answered HTTP %ld",
			 an.status);
		goto done;
	}
	while (n < an.len && n < sizeof role - 1 && !isspace((unsigned char)an.body[n]) &&
	       (isalnum((unsigned char)an.body[n]) || strchr("+=,.@_-", an.body[n])))
		role[n] = an.body[n], n++;
	role[n] = 0;
	if (!n) {
		snprintf(err, errlen, "instance metadata: the role lookup gave no usable role name");
		goto done;
	}
	snprintf(path, sizeof path, "/latest/meta-data/iam/security-credentials/%s", role);
	cr_answer_free(&an);
	if (imds_call(&m, "GET", path, NULL, &an, why, sizeof why) != 0) {
		snprintf(err, errlen, "instance metadata: %s", why);
	} else if (an.status != 200) {
		snprintf(err, errlen, "instance metadata: the credentials of role %s answered HTTP %ld",
			 role, an.status);
	} else if (creds_from_json(&an, "instance metadata", "imds", out, err, errlen) == 0) {
		rc = CR_OK;
	}
done:
	cr_answer_free(&an);
	OPENSSL_cleanse(m.token, sizeof m.token);
	return rc;
}

int imds_region(char **out, char *err, size_t errlen)
{
	struct imds m;
	cr_answer an = { 0, NULL, 0 };
	char why[300];
	awsconfig *cfg;
	size_t n;
	int rc = -1;

	*out = NULL;
	if (awsconfig_true(awsconfig_env("AWS_EC2_METADATA_DISABLED"))) {
		snprintf(err, errlen, "instance metadata is disabled by AWS_EC2_METADATA_DISABLED");
		return -1;
	}
	cfg = awsconfig_load(why, sizeof why); /* settings only: a bad file is not fatal */
	imds_setup(&m, cfg, awsconfig_profile_name(NULL));
	awsconfig_free(cfg);
	if (imds_token(&m, why, sizeof why) != 0 ||
	    imds_call(&m, "GET", "/latest/meta-data/placement/region", NULL, &an, why,
		      sizeof why) != 0) {
		snprintf(err, errlen, "instance metadata: %s", why);
		goto done;
	}
	n = an.len;
	while (n && isspace((unsigned char)an.body[n - 1]))
		n--;
	if (an.status != 200 || n == 0 || n > 64) {
		snprintf(err, errlen, "instance metadata: the region lookup answered HTTP %ld",
			 an.status);
		goto done;
	}
	an.body[n] = 0;
	if (!(*out = strdup(an.body))) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	rc = 0;
done:
	cr_answer_free(&an);
	OPENSSL_cleanse(m.token, sizeof m.token);
	return rc;
}
