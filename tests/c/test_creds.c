/*
 * The AWS credential chain: environment, shared files, assume role and web
 * identity, with STS played by tests/tools/fake_metadata.py on loopback
 * (the fake verifies every SigV4 signature).
 */
#include "creds_harness.h"

#define SECRETS "{\"secrets\": {\"AKIDDEV\": \"dev-secret-4567890\", \"AKIDSELF\": \"self-secret-12345\"," \
		"\"AKIDENV\": \"env-secret-abcdef\", \"AKIDTOK\": \"tok-secret-123456\"}}"

#define ROLES \
	"[profile dev-role]\nrole_arn = arn:aws:iam::123456789012:role/dev\nsource_profile = dev\n" \
	"role_session_name = hypd-test\nexternal_id = ext-42\nduration_seconds = 1800\n" \
	"[profile chained]\nrole_arn = arn:aws:iam::123456789012:role/chained\nsource_profile = dev-role\n" \
	"[profile loop-a]\nrole_arn = arn:aws:iam::1:role/a\nsource_profile = loop-b\n" \
	"[profile loop-b]\nrole_arn = arn:aws:iam::1:role/b\nsource_profile = loop-a\n" \
	"[profile self]\nrole_arn = arn:aws:iam::1:role/self\nsource_profile = self\n" \
	"aws_access_key_id = AKIDSELF\naws_secret_access_key = self-secret-12345\n" \
	"[profile self-nokeys]\nrole_arn = arn:aws:iam::1:role/s\nsource_profile = self-nokeys\n" \
	"[profile orphan]\nrole_arn = arn:aws:iam::1:role/o\nsource_profile = ghost\n" \
	"[profile nosource]\nrole_arn = arn:aws:iam::1:role/n\n" \
	"[profile both]\nrole_arn = arn:aws:iam::1:role/n\nsource_profile = dev\ncredential_source = Environment\n" \
	"[profile from-env]\nrole_arn = arn:aws:iam::1:role/env\ncredential_source = Environment\n" \
	"[profile from-ecs]\nrole_arn = arn:aws:iam::1:role/ecs\ncredential_source = EcsContainer\n" \
	"[profile from-ec2]\nrole_arn = arn:aws:iam::1:role/ec2\ncredential_source = Ec2InstanceMetadata\n" \
	"[profile bad-source]\nrole_arn = arn:aws:iam::1:role/x\ncredential_source = environment\n" \
	"[profile mfa]\nrole_arn = arn:aws:iam::1:role/m\nsource_profile = dev\nmfa_serial = arn:aws:iam::1:mfa/u\n" \
	"[profile tok-role]\nrole_arn = arn:aws:iam::1:role/tok\nsource_profile = tok\nregion = ap-northeast-1\n" \
	"[profile bad-duration]\nrole_arn = arn:aws:iam::1:role/d\nsource_profile = dev\nduration_seconds = 60\n"

#define ROLE_CREDS STATIC_CREDS \
	"[tok]\naws_access_key_id = AKIDTOK\naws_secret_access_key = tok-secret-123456\n" \
	"aws_session_token = tok-session-token-98765\n"

static void environment(void)
{
	fresh(NULL, STATIC_CREDS);
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "env-secret-abcdef", 1);
	setenv("AWS_SESSION_TOKEN", "env-token-abcdef", 1);
	ok(resolve(NULL) == 0 && is(c.source, "env") && is(c.access_key, "AKIDENV") &&
	   is(c.secret_key, "env-secret-abcdef") && is(c.session_token, "env-token-abcdef") &&
	   c.expiration == 0, "environment keys and token come first when no profile is named");
	setenv("AWS_PROFILE", "dev", 1);
	creds_reset();
	ok(resolve(NULL) == 0 && is(c.source, "env"),
	   "environment keys still win over AWS_PROFILE when no profile is named, as in botocore");
	ok(resolve("dev") == 0 && is(c.source, "profile:dev") && is(c.access_key, "AKIDDEV"),
	   "a named profile skips the environment keys");

	fresh(NULL, STATIC_CREDS);
	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	ok(resolve(NULL) != 0 && has(err, "AWS_SECRET_ACCESS_KEY"),
	   "AWS_ACCESS_KEY_ID without AWS_SECRET_ACCESS_KEY is an error naming the missing variable");
	setenv("AWS_SECRET_ACCESS_KEY", "env-secret-abcdef", 1);
	setenv("AWS_CREDENTIAL_EXPIRATION", "2999-01-01T00:00:00Z", 1);
	ok(resolve(NULL) == 0 && c.expiration == 32472144000.0,
	   "AWS_CREDENTIAL_EXPIRATION gives environment credentials their expiration");
}

static void shared_files(void)
{
	fresh(NULL, STATIC_CREDS);
	ok(resolve(NULL) == 0 && is(c.source, "profile:default") && is(c.access_key, "AKIDDEFAULT") &&
	   is(c.profile, "default"), "without any environment the default profile's keys are used");
	setenv("AWS_PROFILE", "dev", 1);
	creds_reset();
	ok(resolve(NULL) == 0 && is(c.source, "profile:dev") && is(c.profile, "dev"),
	   "AWS_PROFILE selects the profile of the default chain");
	ok(resolve("default") == 0 && is(c.access_key, "AKIDDEFAULT"),
	   "an explicitly named profile wins over AWS_PROFILE");

	fresh("[profile cfg]\naws_access_key_id = AKIDCFG\naws_secret_access_key = cfg-secret-123456\n"
	      "aws_session_token = cfg-token-1234567\n", NULL);
	ok(resolve("cfg") == 0 && is(c.access_key, "AKIDCFG") && is(c.session_token, "cfg-token-1234567"),
	   "static keys in the config file are used when the credentials file has none");
	fresh("[profile both]\naws_access_key_id = AKIDCFG\naws_secret_access_key = cfg-secret-123456\n",
	      "[both]\naws_access_key_id = AKIDCRED\naws_secret_access_key = cred-secret-12345\n");
	ok(resolve("both") == 0 && is(c.access_key, "AKIDCRED") && is(c.secret_key, "cred-secret-12345"),
	   "the credentials file's keys win over the config file's");
	fresh(NULL, "[half]\naws_access_key_id = AKIDHALF\n");
	ok(resolve("half") != 0 && has(err, "aws_secret_access_key") && has(err, "half"),
	   "a profile with an access key but no secret is an error naming what is missing");

	fresh(NULL, STATIC_CREDS);
	ok(resolve("nosuch") != 0 && has(err, "nosuch"), "a named profile that does not exist is an error");
	setenv("AWS_PROFILE", "nosuch", 1);
	ok(resolve(NULL) != 0 && has(err, "nosuch"), "an AWS_PROFILE that does not exist is an error");

	fresh("[profile sso]\nsso_start_url = https://x.awsapps.com/start\nsso_account_id = 1\n", NULL);
	ok(resolve("sso") != 0 && has(err, "IAM Identity Center"),
	   "an IAM Identity Center profile is refused as unsupported, not skipped");
	fresh("[profile proc]\ncredential_process = /bin/echo\n", NULL);
	ok(resolve("proc") != 0 && has(err, "credential_process"),
	   "a credential_process profile is refused as unsupported");
	fresh(NULL, NULL);
	ok(resolve(NULL) != 0 && has(err, "AWS_ACCESS_KEY_ID is not set") && has(err, "container:") &&
	   has(err, "instance metadata: disabled"),
	   "no credentials anywhere is an error naming every provider tried");
	fresh("[default]\nnot a setting\n", NULL);
	ok(resolve("default") != 0 && has(err, "line 2"), "a malformed config file is an error with its line");
}

static void assume_role(void)
{
	char first[64];

	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	ok(resolve("dev-role") == 0 && is(c.source, "assume-role:dev-role") &&
	   !strncmp(c.access_key, "ASIAFAKE", 8) && c.session_token &&
	   c.expiration > (double)time(NULL) + 3000, "a role profile with source_profile assumes the role");
	ok(is(call_field("sts_assume_role", 0, "key"), "AKIDDEV"),
	   "AssumeRole is signed with the source profile's key (the fake verifies the signature)");
	ok(is(call_field("sts_assume_role", 0, "role_arn"), "arn:aws:iam::123456789012:role/dev") &&
	   is(call_field("sts_assume_role", 0, "session_name"), "hypd-test") &&
	   is(call_field("sts_assume_role", 0, "external_id"), "ext-42") &&
	   is(call_field("sts_assume_role", 0, "duration"), "1800"),
	   "role_arn, role_session_name, external_id and duration_seconds reach STS");
	ok(is(call_field("sts_assume_role", 0, "security_token"), "false") &&
	   is(call_field("sts_assume_role", 0, "region"), "us-east-1"),
	   "static source keys send no security token and STS is signed for us-east-1 by default");

	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	ok(resolve("chained") == 0 && is(c.source, "assume-role:chained") && calls("sts_assume_role") == 2,
	   "a role whose source_profile is another role assumes both");
	snprintf(first, sizeof first, "%s", call_field("sts_assume_role", 0, "key"));
	ok(is(first, "AKIDDEV") && !strncmp(call_field("sts_assume_role", 1, "key"), "ASIAFAKE", 8) &&
	   is(call_field("sts_assume_role", 1, "security_token"), "true") &&
	   is(call_field("sts_assume_role", 1, "role_arn"), "arn:aws:iam::123456789012:role/chained"),
	   "the second AssumeRole is signed with the first role's temporary key and token");
	ok(!strncmp(call_field("sts_assume_role", 1, "session_name"), "hypd-session-", 13),
	   "without role_session_name the session is named hypd-session-<time>");

	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	ok(resolve("loop-a") != 0 && has(err, "loop-a -> loop-b -> loop-a") && calls("sts_assume_role") == 0,
	   "a source_profile loop is refused with its path and no STS call");
	ok(resolve("self") == 0 && is(call_field("sts_assume_role", 0, "key"), "AKIDSELF"),
	   "a role profile may use its own static keys as its source");
	ok(resolve("self-nokeys") != 0 && has(err, "loops"), "a profile sourcing itself without keys is a loop");
	ok(resolve("orphan") != 0 && has(err, "ghost"), "a source_profile that does not exist is named in the error");
	ok(resolve("nosource") != 0 && has(err, "neither source_profile nor credential_source"),
	   "role_arn without a source is refused");
	ok(resolve("both") != 0 && has(err, "both source_profile and credential_source"),
	   "source_profile together with credential_source is refused");
	ok(resolve("mfa") != 0 && has(err, "mfa_serial"), "a role that needs an MFA code is refused clearly");
	ok(resolve("bad-duration") != 0 && has(err, "duration_seconds"),
	   "a duration_seconds outside 900..43200 is refused");
	ok(resolve("bad-source") != 0 && has(err, "not one of"),
	   "credential_source names are case-sensitive: 'environment' is refused");

	setenv("AWS_ACCESS_KEY_ID", "AKIDENV", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "env-secret-abcdef", 1);
	ok(resolve("from-env") == 0 && is(call_field("sts_assume_role", 1, "key"), "AKIDENV"),
	   "credential_source = Environment signs with the environment keys although the profile is named");
	unsetenv("AWS_ACCESS_KEY_ID");
	creds_reset();
	ok(resolve("from-env") != 0 && has(err, "credential_source Environment gave no credentials"),
	   "credential_source = Environment without environment keys is an error");

	fresh(ROLES, ROLE_CREDS);
	{
		char spec[64];

		snprintf(spec, sizeof spec, "169.254.170.2:80:127.0.0.1:%d", port);
		creds_set_connect_to(spec);
	}
	setenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "/v2/credentials/task", 1);
	ok(resolve("from-ecs") == 0 && calls("container") == 1 &&
	   !strncmp(call_field("sts_assume_role", 0, "key"), "ASIAFAKE", 8) &&
	   is(call_field("sts_assume_role", 0, "security_token"), "true"),
	   "credential_source = EcsContainer signs AssumeRole with container credentials");
	use_imds();
	ok(resolve("from-ec2") == 0 && calls("imds_creds") == 1 && calls("sts_assume_role") == 2,
	   "credential_source = Ec2InstanceMetadata signs AssumeRole with instance credentials");

	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	fake_config("{\"sts_expect\": {\"arn:aws:iam::123456789012:role/dev\": \"AKIDOTHER\"}}");
	ok(resolve("dev-role") != 0 && has(err, "AccessDenied") &&
	   has(err, "arn:aws:iam::123456789012:role/dev") && has(err, "HTTP 403") && has(err, "req-err-1"),
	   "an STS error gives STS's code, the role, the status and the request id");
	fresh(ROLES, ROLE_CREDS);
	ok(resolve("dev-role") != 0 && has(err, "unknown access key"),
	   "a signature STS cannot verify is reported with STS's message");
}

static void endpoints(void)
{
	char spec[96];

	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1", 1);
	ok(resolve("dev-role") == 0, "AWS_ENDPOINT_URL_STS is honoured over AWS_ENDPOINT_URL");
	unsetenv("AWS_ENDPOINT_URL_STS");
	creds_reset();
	ok(resolve("dev-role") != 0 && has(err, "http://127.0.0.1:1"),
	   "AWS_ENDPOINT_URL sends STS to the global endpoint when no STS one is set");

	{
		char cfg[512];

		snprintf(cfg, sizeof cfg, "[profile svc]\nrole_arn = arn:aws:iam::1:role/svc\n"
			 "source_profile = dev\nservices = local\nendpoint_url = http://127.0.0.1:1\n"
			 "[services local]\nsts =\n  endpoint_url = %s\n", base);
		fresh(cfg, ROLE_CREDS);
	}
	fake_config(SECRETS);
	unsetenv("AWS_ENDPOINT_URL_STS");
	ok(resolve("svc") == 0, "the profile's services section sends STS to its sts endpoint_url");

	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	ok(resolve("tok-role") == 0 && is(call_field("sts_assume_role", 0, "region"), "ap-northeast-1"),
	   "STS is signed for the profile's region");
	setenv("AWS_REGION", "eu-central-1", 1);
	creds_reset();
	ok(resolve("tok-role") == 0 && is(call_field("sts_assume_role", 1, "region"), "eu-central-1"),
	   "AWS_REGION wins over the profile's region for STS");
	setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
	snprintf(spec, sizeof spec, "sts.eu-central-1.amazonaws.com:443:127.0.0.1:%d", port);
	creds_set_connect_to(spec);
	creds_reset();
	ok(resolve("tok-role") != 0 && has(err, "https://sts.eu-central-1.amazonaws.com"),
	   "with configured endpoints ignored STS is the regional https endpoint");
	creds_set_connect_to(NULL);
}

static void web_identity(void)
{
	fresh(NULL, STATIC_CREDS);
	write_file("token", "eyJhbGciOiJSUzI1NiJ9.irsa-token-one\n");
	fake_config("{\"web_identity_token\": \"eyJhbGciOiJSUzI1NiJ9.irsa-token-one\"}");
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file("token"), 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa", 1);
	setenv("AWS_ROLE_SESSION_NAME", "pod-1", 1);
	ok(resolve(NULL) == 0 && is(c.source, "web-identity") && calls("sts_web_identity") == 1 &&
	   !strncmp(c.access_key, "ASIAFAKE", 8), "IRSA environment variables assume the role with the token");
	ok(is(call_field("sts_web_identity", 0, "token_ok"), "true") &&
	   is(call_field("sts_web_identity", 0, "signed"), "false") &&
	   is(call_field("sts_web_identity", 0, "role_arn"), "arn:aws:iam::1:role/irsa") &&
	   is(call_field("sts_web_identity", 0, "session_name"), "pod-1"),
	   "AssumeRoleWithWebIdentity goes unsigned with the token, role and session name");
	ok(resolve("dev") == 0 && is(c.source, "profile:dev"),
	   "a named profile ignores the IRSA environment variables, as botocore does");

	fresh(NULL, NULL);
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file("token"), 1);
	ok(resolve(NULL) != 0 && has(err, "AWS_ROLE_ARN"), "a web identity token file without a role is an error");
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa", 1);
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/token", 1);
	ok(resolve(NULL) != 0 && has(err, "/nonexistent/token"),
	   "an unreadable token file is an error naming the file");

	{
		char cfg[512];

		snprintf(cfg, sizeof cfg, "[profile wi]\nweb_identity_token_file = %s\n"
			 "role_arn = arn:aws:iam::1:role/wi\n"
			 "[profile wi-role]\nrole_arn = arn:aws:iam::1:role/after-wi\nsource_profile = wi\n",
			 file("token"));
		fresh(cfg, NULL);
	}
	write_file("token", "token-two-abcdef");
	fake_config("{\"web_identity_token\": \"token-two-abcdef\", \"expires_in\": 200}");
	ok(resolve("wi") == 0 && is(c.source, "web-identity:wi") &&
	   is(call_field("sts_web_identity", 0, "role_arn"), "arn:aws:iam::1:role/wi"),
	   "a profile's web_identity_token_file assumes its role_arn");
	write_file("token", "token-three-abcdef");
	fake_config("{\"web_identity_token\": \"token-three-abcdef\"}");
	ok(resolve("wi") == 0 && calls("sts_web_identity") == 2 &&
	   is(call_field("sts_web_identity", 1, "token_ok"), "true"),
	   "the token file is read again when the credentials are refreshed");
	ok(resolve("wi-role") == 0 && is(c.source, "assume-role:wi-role") &&
	   !strncmp(call_field("sts_assume_role", 0, "key"), "ASIAFAKE", 8),
	   "a role can take its source credentials from a web identity profile");
	write_file("token", "token-wrong-abcdef");
	creds_reset();
	ok(resolve("wi") != 0 && has(err, "InvalidIdentityToken"),
	   "a token STS refuses gives STS's error code");
}

static void secrets(void)
{
	const char *const all[] = {
		"default-secret-123", "dev-secret-4567890", "env-secret-abcdef", "env-token-abcdef",
		"cfg-secret-123456", "cfg-token-1234567", "cred-secret-12345", "self-secret-12345",
		"tok-secret-123456", "tok-session-token-98765", "irsa-token-one", "token-two-abcdef",
		"token-three-abcdef", "token-wrong-abcdef", "eyJwrong-token-echoed-123", NULL,
	};
	char *red;

	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	fake_config("{\"sts_error_echo\": true, \"fail\": {\"sts_assume_role\": 1}}");
	ok(resolve("tok-role") != 0 && has(err, "injected failure") && has(err, "token: "),
	   "a careless STS that echoes the request still gives a readable error");
	ok(has(err, "token: [REDACTED]") && !strstr(err, "tok-session-token-98765"),
	   "the echoed session token of the source credentials is redacted from the error");
	fresh(NULL, NULL);
	write_file("token", "eyJwrong-token-echoed-123");
	setenv("AWS_WEB_IDENTITY_TOKEN_FILE", file("token"), 1);
	setenv("AWS_ROLE_ARN", "arn:aws:iam::1:role/irsa", 1);
	fake_config("{\"sts_error_echo\": true, \"web_identity_token\": \"expected\"}");
	ok(resolve(NULL) != 0 && has(err, "InvalidIdentityToken") && has(err, "WebIdentityToken=[REDACTED]"),
	   "an echoed web identity token is redacted from the error");
	fresh(ROLES, ROLE_CREDS);
	fake_config(SECRETS);
	fake_config("{\"fail\": {}}");
	ok(resolve("tok-role") == 0, "the same role resolves once STS behaves");
	red = log_redact(c.secret_key, strlen(c.secret_key), NULL);
	ok(red && strcmp(red, "[REDACTED]") == 0, "the secret key obtained is registered for log redaction");
	free(red);
	red = log_redact("x tok-secret-123456 x", 21, NULL);
	ok(red && !strstr(red, "tok-secret-123456"), "the source profile's secret is registered too");
	free(red);
	ok(no_secret_in_errors(all), "no error message of these cases holds a secret");
}

int main(void)
{
	if (harness_start() != 0)
		return 1;
	environment();
	shared_files();
	assume_role();
	endpoints();
	web_identity();
	secrets();
	return harness_end();
}
