/*
 * The credential chain's network providers and its cache: container
 * credentials (ECS, EKS Pod Identity), instance metadata (IMDSv2), expiry
 * and refresh, with tests/tools/fake_metadata.py on loopback.
 */
#include "creds_harness.h"

static void route(const char *host_port)
{
	char spec[128];

	snprintf(spec, sizeof spec, "%s:127.0.0.1:%d", host_port, port);
	creds_set_connect_to(spec);
}

static void container(void)
{
	char url[128];
	static const char *const allowed[][2] = {
		{ "http://169.254.170.23/v1/credentials", "169.254.170.23:80" },
		{ "http://[fd00:ec2::23]/v1/credentials", "[fd00:ec2::23]:80" },
		{ "http://localhost/container/x", "localhost:80" },
	};

	fresh(NULL, NULL);
	route("169.254.170.2:80");
	write_file("ctoken", "pod-identity-token-1\n");
	fake_config("{\"container_token\": \"pod-identity-token-1\"}");
	setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/abc", 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file("ctoken"), 1);
	ok(resolve(NULL) == 0 && is(c.source, "container") && !strncmp(c.access_key, "ASIAFAKE", 8) &&
	   c.session_token && c.expiration > (double)time(NULL) + 3000,
	   "the relative URI is fetched from 169.254.170.2 with an expiration");
	ok(is(call_field("container", 0, "path"), "/v2/credentials/abc") &&
	   is(call_field("container", 0, "authorization"), "pod-identity-token-1"),
	   "the token file's content, trailing newline removed, is the Authorization header");
	write_file("ctoken", "pod-identity-token-2");
	fake_config("{\"container_token\": \"pod-identity-token-2\"}");
	creds_reset();
	ok(resolve(NULL) == 0 && is(call_field("container", 1, "authorization"), "pod-identity-token-2"),
	   "the token file is read again for each fetch");

	fresh(NULL, NULL);
	snprintf(url, sizeof url, "%s/container/creds", base);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN", "ecs-token-abcdef", 1);
	fake_config("{\"container_token\": \"ecs-token-abcdef\"}");
	ok(resolve(NULL) == 0 && is(c.source, "container") &&
	   is(call_field("container", 0, "path"), "/container/creds"),
	   "a full URI on loopback works with AWS_CONTAINER_AUTHORIZATION_TOKEN");
	write_file("ctoken", "file-token-abcdef");
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file("ctoken"), 1);
	fake_config("{\"container_token\": \"file-token-abcdef\"}");
	creds_reset();
	ok(resolve(NULL) == 0, "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE wins over AWS_CONTAINER_AUTHORIZATION_TOKEN");
	route("169.254.170.2:80");
	setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/relative", 1);
	creds_reset();
	ok(resolve(NULL) == 0 && is(call_field("container", 2, "path"), "/v2/relative"),
	   "the relative URI wins over the full URI");

	fresh(NULL, NULL);
	for (size_t i = 0; i < sizeof allowed / sizeof *allowed; i++) {
		route(allowed[i][1]);
		setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", allowed[i][0], 1);
		creds_reset();
		ok(resolve(NULL) == 0 && is(c.source, "container"), "the full URI host %s is allowed", allowed[i][1]);
	}
	fresh(NULL, NULL);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://169.254.169.254/latest", 1);
	ok(resolve(NULL) != 0 && has(err, "not allowed") && calls("container") == 0,
	   "a full URI to a host outside the allowed list is refused without a request");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "http://10.0.0.1.example.com/creds", 1);
	ok(resolve(NULL) != 0 && has(err, "not allowed"), "a plain-http full URI to a DNS name is refused");
	route("creds.example.invalid:443");
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", "https://creds.example.invalid/x", 1);
	ok(resolve(NULL) != 0 && !strstr(err, "not allowed") && has(err, "https://creds.example.invalid/x"),
	   "an https full URI may name any host (this one then fails its TLS handshake)");

	fresh(NULL, NULL);
	snprintf(url, sizeof url, "%s/container/creds", base);
	setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", url, 1);
	write_file("ctoken", "two\nlines-token");
	setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", file("ctoken"), 1);
	ok(resolve(NULL) != 0 && has(err, "line break") && calls("container") == 0,
	   "a token with a line break inside is refused before any request");
	write_file("ctoken", "wrong-token-abcdef");
	fake_config("{\"container_token\": \"expected-token\"}");
	ok(resolve(NULL) != 0 && has(err, "HTTP 401") && has(err, "not valid"),
	   "a refused token gives the status and the endpoint's message");
	fake_config("{\"container_token\": null, \"fail\": {\"container\": 1}}");
	ok(resolve(NULL) == 0 && calls("container") == 3, "one failed container request is retried");
	fake_config("{\"fail\": {\"container\": 2}}");
	creds_reset();
	ok(resolve(NULL) != 0 && has(err, "HTTP 500"), "two failed container requests are an error");
}

static void imds(void)
{
	char *r = NULL;
	int rc;

	fresh(NULL, NULL);
	use_imds();
	ok(resolve(NULL) == 0 && is(c.source, "imds") && !strncmp(c.access_key, "ASIAFAKE", 8) &&
	   c.expiration > (double)time(NULL) + 3000, "instance metadata gives the role's credentials");
	ok(calls("imds_token") == 1 && is(call_field("imds_token", 0, "ttl"), "21600") &&
	   is(call_field("imds_role", 0, "token"), "true") &&
	   is(call_field("imds_creds", 0, "token"), "true") &&
	   is(call_field("imds_creds", 0, "path"), "/latest/meta-data/iam/security-credentials/hypd-test-role"),
	   "IMDSv2: a session token with a TTL is fetched and sent with every metadata request");

	fresh(NULL, NULL);
	ok(resolve(NULL) != 0 && has(err, "disabled by AWS_EC2_METADATA_DISABLED") &&
	   calls("imds_token") == 0, "AWS_EC2_METADATA_DISABLED skips instance metadata");
	use_imds();
	fake_config("{\"imds_v1\": true}");
	ok(resolve(NULL) == 0 && is(call_field("imds_creds", 0, "token"), "false"),
	   "when the token request answers 404 the service is used without a token (IMDSv1)");
	setenv("AWS_EC2_METADATA_V1_DISABLED", "true", 1);
	creds_reset();
	ok(resolve(NULL) != 0 && has(err, "HTTP 404"), "AWS_EC2_METADATA_V1_DISABLED forbids that fallback");

	fresh(NULL, NULL);
	use_imds();
	fake_config("{\"fail\": {\"imds_creds\": 1}}");
	ok(resolve(NULL) == 0 && calls("imds_creds") == 2, "one failed metadata request is retried once");
	fake_config("{\"delay\": {\"imds_token\": 3}}");
	creds_reset();
	rc = calls("imds_token");
	ok(resolve(NULL) != 0 && has(err, "timed out") && calls("imds_token") == rc + 2,
	   "an unresponsive metadata service gives up after a 1 s attempt and one retry");

	{
		char cfg[256];

		snprintf(cfg, sizeof cfg, "[default]\nec2_metadata_service_endpoint = %s/\n", base);
		fresh(cfg, NULL);
	}
	unsetenv("AWS_EC2_METADATA_DISABLED");
	ok(resolve(NULL) == 0 && is(c.source, "imds"), "the profile's ec2_metadata_service_endpoint is honoured");
	ok(imds_region(&r, err, sizeof err) == 0 && is(r, "eu-west-3") &&
	   is(call_field("imds_region", 0, "token"), "true"), "imds_region reads the region with a session token");
	free(r);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	ok(imds_region(&r, err, sizeof err) != 0 && !r && has(err, "disabled"),
	   "imds_region reports a disabled metadata service");
}

static void *resolve_thread(void *arg)
{
	aws_creds *mine = arg;
	char e[512];

	if (creds_resolve(NULL, mine, e, sizeof e) != 0) {
		printf("#   thread error: %s\n", e);
		memset(mine, 0, sizeof *mine);
	}
	return NULL;
}

static void cache(void)
{
	char first[64], second[64], line[4096];
	aws_creds x;
	FILE *logf;
	size_t n;

	fresh(NULL, NULL);
	use_imds();
	ok(resolve(NULL) == 0, "instance credentials valid for an hour resolve");
	snprintf(first, sizeof first, "%s", c.access_key);
	ok(resolve(NULL) == 0 && is(c.access_key, first) && calls("imds_creds") == 1,
	   "cached credentials are reused without another call");
	ok(creds_cached(NULL, &x) == 0 && is(x.access_key, first) && is(x.source, "imds"),
	   "creds_cached hands out the cached credentials without blocking");
	creds_free(&x);
	ok(creds_cached("dev", &x) != 0 && !x.access_key, "creds_cached has nothing for a profile never resolved");

	fresh(NULL, NULL);
	use_imds();
	fake_config("{\"expires_in\": 200}");
	ok(resolve(NULL) == 0, "credentials with 200 s left resolve");
	snprintf(first, sizeof first, "%s", c.access_key);
	ok(creds_cached(NULL, &x) != 0, "creds_cached refuses credentials due for refresh (under 5 minutes left)");
	ok(resolve(NULL) == 0 && strcmp(c.access_key, first) != 0 && calls("imds_creds") == 2,
	   "credentials within 5 minutes of expiry are refreshed by the next resolve");
	snprintf(second, sizeof second, "%s", c.access_key);
	logf = tmpfile();
	log_set_output(logf);
	log_set_level(LOG_WARN);
	fake_config("{\"fail\": {\"imds_creds\": 5}}");
	ok(resolve(NULL) == 0 && is(c.access_key, second) && calls("imds_creds") == 4,
	   "when a refresh fails the old credentials stay in use");
	log_set_output(NULL);
	log_set_level(LOG_ERROR);
	rewind(logf);
	n = fread(line, 1, sizeof line - 1, logf);
	line[n] = 0;
	fclose(logf);
	ok(strstr(line, "warn") && strstr(line, "refreshing the credentials") && strstr(line, "HTTP 500") &&
	   !strstr(line, c.secret_key) && !strstr(line, c.session_token),
	   "the failed refresh is logged as a warning without secrets");
	ok(creds_cached(NULL, &x) == 0 && is(x.access_key, second),
	   "after a failed refresh creds_cached serves the kept credentials");
	creds_free(&x);
	fake_config("{\"fail\": {}}");
	ok(resolve(NULL) == 0 && strcmp(c.access_key, second) != 0, "the next resolve refreshes once the source recovers");

	fresh(NULL, NULL);
	use_imds();
	fake_config("{\"expires_in\": 10}");
	ok(resolve(NULL) != 0 && has(err, "expire at once") && creds_cached(NULL, &x) != 0,
	   "credentials that expire at once are an error and are not cached");

	fresh(NULL, NULL);
	{
		char when[32];
		/* 5 s above the margin (CREDS_EXPIRY_MARGIN 15 s): a slow machine
		 * still resolves them; after sleep(6) they are inside it */
		time_t soon = time(NULL) + 20;

		strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&soon));
		setenv("AWS_CREDENTIAL_EXPIRATION", when, 1);
	}
	setenv("AWS_ACCESS_KEY_ID", "AKIDSHORT", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "short-secret-abcdef", 1);
	ok(resolve(NULL) == 0, "environment credentials with 20 s left resolve");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	sleep(6);
	ok(resolve(NULL) != 0 && has(err, "AWS_SECRET_ACCESS_KEY"),
	   "credentials about to expire are not kept when the refresh fails");

	fresh(NULL, STATIC_CREDS);
	ok(resolve("dev") == 0 && is(c.access_key, "AKIDDEV"), "static keys resolve");
	write_file("credentials", "[dev]\naws_access_key_id = AKIDNEW\naws_secret_access_key = new-secret-123456\n");
	ok(resolve("dev") == 0 && is(c.access_key, "AKIDDEV"),
	   "static credentials stay cached, as in a botocore session");
	creds_reset();
	ok(resolve("dev") == 0 && is(c.access_key, "AKIDNEW"), "creds_reset forgets them");
	ok(resolve(NULL) != 0 && creds_cached("dev", &x) == 0 && is(x.access_key, "AKIDNEW"),
	   "each profile has its own cache entry");
	creds_free(&x);

	fresh(NULL, NULL);
	use_imds();
	fake_config("{\"delay\": {\"imds_creds\": 0.5}}");
	{
		pthread_t th[4];
		aws_creds got[4];
		int same = 1;

		for (int i = 0; i < 4; i++)
			pthread_create(&th[i], NULL, resolve_thread, &got[i]);
		for (int i = 0; i < 4; i++)
			pthread_join(th[i], NULL);
		for (int i = 0; i < 4; i++)
			same = same && got[i].access_key && got[0].access_key &&
			       strcmp(got[i].access_key, got[0].access_key) == 0;
		for (int i = 0; i < 4; i++)
			creds_free(&got[i]);
		ok(same && calls("imds_creds") == 1,
		   "four threads resolving at once make one fetch and share its credentials");
	}
}

int main(void)
{
	const char *const all[] = {
		"pod-identity-token-1", "pod-identity-token-2", "ecs-token-abcdef", "file-token-abcdef",
		"wrong-token-abcdef", "short-secret-abcdef", "dev-secret-4567890", "new-secret-123456",
		"secret-imds-", "secret-container-", "token-imds-", "token-container-", NULL,
	};

	if (harness_start() != 0)
		return 1;
	container();
	imds();
	cache();
	ok(no_secret_in_errors(all), "no error message of these cases holds a secret or token");
	return harness_end();
}
