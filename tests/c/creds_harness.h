/*
 * creds_harness.h: what the credential chain tests share: the fake
 * metadata / container / STS server (tests/tools/fake_metadata.py) started
 * as a child process, a temporary directory for the shared files, and a
 * fresh environment per case. Static functions, like tap.h.
 */
#ifndef HYPD_CREDS_HARNESS_H
#define HYPD_CREDS_HARNESS_H

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <curl/curl.h>

#include "creds.h"
#include "log.h"
#include "tap.h"

static char dir[] = "/tmp/hypd-creds.XXXXXX";
static char base[64];     /* http://127.0.0.1:<port> of the fake */
static int port;
static pid_t fake_pid;
static char err[2048];
static aws_creds c;

/* every error message creds_resolve gave, for the no-secret check */
static char *errors_seen[64];
static int nerrors;

static const char *const env_vars[] = {
	"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
	"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
	"AWS_CREDENTIAL_EXPIRATION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS",
	"AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN",
	"AWS_ROLE_SESSION_NAME", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
	"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN",
	"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_DISABLED",
	"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
	"AWS_EC2_METADATA_V1_DISABLED", "AWS_METADATA_SERVICE_TIMEOUT",
	"AWS_METADATA_SERVICE_NUM_ATTEMPTS", "AWS_CA_BUNDLE",
};

/* --- the fake server --- */

static int start_fake(void)
{
	int fds[2];
	char line[64] = "";
	FILE *f;

	if (pipe(fds) != 0)
		return -1;
	fake_pid = fork();
	if (fake_pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		close(fds[1]);
		execlp("python3", "python3", "tests/tools/fake_metadata.py", "300", (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	f = fdopen(fds[0], "r");
	if (!f || !fgets(line, sizeof line, f) || sscanf(line, "PORT %d", &port) != 1)
		return -1;
	fclose(f);
	snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
	return 0;
}

static size_t keep(char *p, size_t size, size_t n, void *ud)
{
	char **buf = ud;
	size_t old = *buf ? strlen(*buf) : 0, add = size * n;
	char *grown = realloc(*buf, old + add + 1);

	if (!grown)
		return 0;
	memcpy(grown + old, p, add);
	grown[old + add] = 0;
	*buf = grown;
	return add;
}

/* GET (body NULL) or POST to the fake; returns the answer (malloc'd) */
static char *fake_http(const char *path, const char *body)
{
	CURL *h = curl_easy_init();
	char url[256], *out = NULL;

	snprintf(url, sizeof url, "%s%s", base, path);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, keep);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &out);
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	if (body)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_perform(h);
	curl_easy_cleanup(h);
	return out;
}

static void fake_config(const char *json)
{
	free(fake_http("/_config", json));
}

static cJSON *fake_stats(void)
{
	char *s = fake_http("/_stats", NULL);
	cJSON *j = cJSON_Parse(s ? s : "{}");

	free(s);
	return j;
}

static int calls(const char *kind)
{
	cJSON *j = fake_stats();
	cJSON *n = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "counts"), kind);
	int v = cJSON_IsNumber(n) ? n->valueint : 0;

	cJSON_Delete(j);
	return v;
}

/* field of the i-th call of kind (i from 0), copied into a static buffer */
static const char *call_field(const char *kind, int i, const char *field)
{
	static char buf[512];
	cJSON *j = fake_stats(), *e;

	buf[0] = 0;
	cJSON_ArrayForEach(e, cJSON_GetObjectItem(j, "calls")) {
		cJSON *k = cJSON_GetObjectItem(e, "kind"), *v;

		if (!cJSON_IsString(k) || strcmp(k->valuestring, kind) != 0 || i-- > 0)
			continue;
		v = cJSON_GetObjectItem(e, field);
		if (cJSON_IsString(v))
			snprintf(buf, sizeof buf, "%s", v->valuestring);
		else if (cJSON_IsBool(v))
			snprintf(buf, sizeof buf, "%s", cJSON_IsTrue(v) ? "true" : "false");
		else if (v && !cJSON_IsNull(v))
			snprintf(buf, sizeof buf, "%d", v->valueint);
		break;
	}
	cJSON_Delete(j);
	return buf;
}

/* --- cases --- */

static void write_file(const char *name, const char *text)
{
	char path[256];
	FILE *f;

	snprintf(path, sizeof path, "%s/%s", dir, name);
	f = fopen(path, "w");
	fputs(text, f);
	fclose(f);
}

static const char *file(const char *name)
{
	static char path[4][256];
	static int n;

	n = (n + 1) % 4;
	snprintf(path[n], sizeof path[n], "%s/%s", dir, name);
	return path[n];
}

/* A fresh case: no AWS variables, empty files, an empty cache, a reset
 * fake, STS on the fake, instance metadata off. */
static void fresh(const char *config, const char *credentials)
{
	for (size_t i = 0; i < sizeof env_vars / sizeof *env_vars; i++)
		unsetenv(env_vars[i]);
	write_file("config", config ? config : "");
	write_file("credentials", credentials ? credentials : "");
	setenv("AWS_CONFIG_FILE", file("config"), 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", file("credentials"), 1);
	setenv("AWS_ENDPOINT_URL_STS", base, 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	creds_set_connect_to(NULL);
	creds_reset();
	creds_free(&c);
	fake_config("{\"reset\": true}");
}

static void use_imds(void)
{
	unsetenv("AWS_EC2_METADATA_DISABLED");
	setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", base, 1);
}

/* creds_resolve into c; keeps every error message for the secret check */
static int resolve(const char *profile)
{
	int rc;

	creds_free(&c);
	err[0] = 0;
	rc = creds_resolve(profile, &c, err, sizeof err);
	if (rc != 0) {
		if (nerrors < 64)
			errors_seen[nerrors++] = strdup(err);
		printf("#   error: %s\n", err);
	}
	return rc;
}

static int is(const char *a, const char *b)
{
	int same = a && b && strcmp(a, b) == 0;

	if (!same)
		printf("#   got %s, want %s\n", a ? a : "NULL", b ? b : "NULL");
	return same;
}

static int has(const char *s, const char *part)
{
	int found = s && strstr(s, part);

	if (!found)
		printf("#   %s does not contain %s\n", s ? s : "NULL", part);
	return found;
}

#define STATIC_CREDS "[default]\naws_access_key_id = AKIDDEFAULT\naws_secret_access_key = default-secret-123\n" \
		     "[dev]\naws_access_key_id = AKIDDEV\naws_secret_access_key = dev-secret-4567890\n"

/* Starts the fake; 0 or -1. */
static int harness_start(void)
{
	if (!mkdtemp(dir) || start_fake() != 0) {
		printf("not ok 1 - the fake metadata server starts\n1..1\n");
		return -1;
	}
	log_set_level(LOG_ERROR);
	return 0;
}

/* Every error message seen holds none of the secrets (NULL-terminated). */
static int no_secret_in_errors(const char *const *secrets)
{
	int clean = nerrors > 0;

	for (int i = 0; i < nerrors; i++)
		for (const char *const *s = secrets; *s; s++)
			if (strstr(errors_seen[i], *s)) {
				printf("#   secret %s in: %s\n", *s, errors_seen[i]);
				clean = 0;
			}
	return clean;
}

static int harness_end(void)
{
	char cmd[128];

	creds_free(&c);
	creds_reset();
	creds_set_connect_to(NULL);
	for (int i = 0; i < nerrors; i++)
		free(errors_seen[i]);
	kill(fake_pid, SIGTERM);
	waitpid(fake_pid, NULL, 0);
	snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
	if (system(cmd) != 0)
		printf("# could not remove %s\n", dir);
	curl_global_cleanup();
	return tap_done();
}

#endif
