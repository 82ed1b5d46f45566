/* ekstoken: EKS bearer tokens (see ekstoken.h). */
#include "ekstoken.h"

#include <curl/curl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "creds.h"
#include "log.h"
#include "sigv4.h"

#define TOKEN_PREFIX "k8s-aws-v1."
#define VALID_SECONDS (15 * 60)
#define REUSE_SECONDS (10 * 60)
#define CACHE_SLOTS 16

struct slot {
	char key[512];   /* sts_url \n cluster \n region \n profile */
	char *token;     /* the token, owned */
	time_t made;     /* signing time */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot cache[CACHE_SLOTS];

static void drop(struct slot *s)
{
	if (s->token) {
		OPENSSL_cleanse(s->token, strlen(s->token));
		free(s->token);
	}
	memset(s, 0, sizeof *s);
}

void eks_token_reset(void)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < CACHE_SLOTS; i++)
		drop(&cache[i]);
	pthread_mutex_unlock(&lock);
}

/* base64url without padding of s */
static char *b64url(const char *s, size_t len)
{
	size_t cap = 4 * ((len + 2) / 3) + 1 + sizeof TOKEN_PREFIX;
	char *out = malloc(cap);
	int n;

	if (!out)
		return NULL;
	memcpy(out, TOKEN_PREFIX, sizeof TOKEN_PREFIX - 1);
	n = EVP_EncodeBlock((unsigned char *)out + sizeof TOKEN_PREFIX - 1,
			    (const unsigned char *)s, (int)len);
	n += (int)sizeof TOKEN_PREFIX - 1;
	for (int i = (int)sizeof TOKEN_PREFIX - 1; i < n; i++)
		out[i] = out[i] == '+' ? '-' : out[i] == '/' ? '_' : out[i];
	while (n > 0 && out[n - 1] == '=')
		n--;
	out[n] = 0;
	return out;
}

static char *make_token(const char *sts_url, const char *cluster, const char *region,
			const char *profile, time_t now, char *err, size_t errlen)
{
	CURLU *u = curl_url();
	char *host = NULL, *port = NULL, *path = NULL, *scheme = NULL, *hostport = NULL;
	char *url = NULL, *token = NULL;
	sigv4_header hdrs[2];
	sigv4_output out;
	sigv4_input in;
	aws_creds c;
	int have_creds = 0, have_out = 0;
	size_t n;

	memset(&out, 0, sizeof out);
	memset(&c, 0, sizeof c);
	if (!u || curl_url_set(u, CURLUPART_URL, sts_url, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
	    curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
		snprintf(err, errlen, "STS endpoint '%s' is not a valid URL", sts_url);
		goto done;
	}
	curl_url_get(u, CURLUPART_PORT, &port, 0);
	n = strlen(host) + (port ? strlen(port) : 0) + 2;
	if (!(hostport = malloc(n)))
		goto oom;
	snprintf(hostport, n, "%s%s%s", host, port ? ":" : "", port ? port : "");
	if (creds_cached(profile, &c) != 0) {
		snprintf(err, errlen, "no fresh AWS credentials for profile %s",
			 profile ? profile : "(default)");
		goto done;
	}
	have_creds = 1;
	hdrs[0].name = "host";
	hdrs[0].value = hostport;
	hdrs[1].name = "x-k8s-aws-id";
	hdrs[1].value = cluster;
	memset(&in, 0, sizeof in);
	in.method = "GET";
	in.path = path;
	in.query = "Action=GetCallerIdentity&Version=2011-06-15";
	in.headers = hdrs;
	in.nheaders = 2;
	in.payload = "";
	in.access_key = c.access_key;
	in.secret_key = c.secret_key;
	in.session_token = c.session_token;
	in.region = region;
	in.service = "sts";
	in.when = now;
	in.normalize_path = 1;
	in.expires = 60;
	if (sigv4_presign(&in, &out, err, errlen) != 0)
		goto done;
	have_out = 1;
	n = strlen(scheme) + strlen(hostport) + strlen(path) + strlen(out.query) + 8;
	if (!(url = malloc(n)))
		goto oom;
	snprintf(url, n, "%s://%s%s?%s", scheme, hostport, path, out.query);
	token = b64url(url, strlen(url));
	if (!token)
		goto oom;
	log_add_secret(token);
	goto done;
oom:
	snprintf(err, errlen, "out of memory");
done:
	if (url) {
		OPENSSL_cleanse(url, strlen(url));
		free(url);
	}
	if (have_out)
		sigv4_output_free(&out);
	if (have_creds)
		creds_free(&c);
	free(hostport);
	curl_free(host);
	curl_free(port);
	curl_free(path);
	curl_free(scheme);
	curl_url_cleanup(u);
	return token;
}

int eks_token(const char *sts_url, const char *cluster, const char *region,
	      const char *profile, time_t now, char **token, time_t *expires,
	      char *err, size_t errlen)
{
	char key[512];
	struct slot *free_slot = NULL, *oldest = &cache[0];
	char *fresh;

	*token = NULL;
	if (!cluster || !*cluster) {
		snprintf(err, errlen, "cluster: a cluster name is required");
		return -1;
	}
	if ((size_t)snprintf(key, sizeof key, "%s\n%s\n%s\n%s", sts_url, cluster, region,
			     profile ? profile : "") >= sizeof key) {
		snprintf(err, errlen, "cluster: name too long");
		return -1;
	}
	pthread_mutex_lock(&lock);
	for (int i = 0; i < CACHE_SLOTS; i++) {
		struct slot *s = &cache[i];

		if (s->token && strcmp(s->key, key) == 0 && now - s->made < REUSE_SECONDS) {
			*token = strdup(s->token);
			*expires = s->made + VALID_SECONDS;
			pthread_mutex_unlock(&lock);
			return *token ? 0 : -1;
		}
		if (!s->token && !free_slot)
			free_slot = s;
		if (s->made < oldest->made)
			oldest = s;
	}
	pthread_mutex_unlock(&lock);
	fresh = make_token(sts_url, cluster, region, profile, now, err, errlen);
	if (!fresh)
		return -1;
	*token = strdup(fresh);
	*expires = now + VALID_SECONDS;
	pthread_mutex_lock(&lock);
	{
		struct slot *s = free_slot && !free_slot->token ? free_slot : oldest;

		drop(s);
		snprintf(s->key, sizeof s->key, "%s", key);
		s->token = fresh;
		s->made = now;
	}
	pthread_mutex_unlock(&lock);
	return *token ? 0 : -1;
}
