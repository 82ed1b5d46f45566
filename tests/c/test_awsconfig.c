/* The AWS shared config and credentials files, read as botocore reads them
 * (pure C: no network, no Lua). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "awsconfig.h"
#include "tap.h"

static char err[512];

static awsconfig *parse2(const char *config, const char *credentials)
{
	awsconfig *c = awsconfig_new();

	err[0] = 0;
	if (config && awsconfig_parse(c, AWSCONFIG_CONFIG, "config", config, strlen(config),
				      err, sizeof err) != 0) {
		awsconfig_free(c);
		return NULL;
	}
	if (credentials && awsconfig_parse(c, AWSCONFIG_CREDENTIALS, "credentials", credentials,
					   strlen(credentials), err, sizeof err) != 0) {
		awsconfig_free(c);
		return NULL;
	}
	return c;
}

static int eq(const char *a, const char *b)
{
	if (a && b && strcmp(a, b) == 0)
		return 1;
	if (!a && !b)
		return 1;
	printf("#   got %s%s%s, want %s%s%s\n", a ? "\"" : "", a ? a : "NULL", a ? "\"" : "",
	       b ? "\"" : "", b ? b : "NULL", b ? "\"" : "");
	return 0;
}

static void clear_env(void)
{
	static const char *const vars[] = {
		"AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_STS", "AWS_ENDPOINT_URL_S3",
		"AWS_ENDPOINT_URL_ELASTIC_BEANSTALK", "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
		"AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE",
	};

	for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
		unsetenv(vars[i]);
}

static char *endpoint(awsconfig *c, const char *profile, const char *service)
{
	static char buf[256];
	char *url = NULL;

	if (awsconfig_endpoint_url(c, profile, service, &url, err, sizeof err) != 0)
		return NULL;
	snprintf(buf, sizeof buf, "%s", url ? url : "(none)");
	free(url);
	return buf;
}

int main(void)
{
	awsconfig *c;
	char dir[] = "/tmp/hypd-awsconfig.XXXXXX", path[256], *r;
	FILE *f;

	clear_env();
	c = parse2("# a comment\n"
		   "; another\n"
		   "\n"
		   "[default]\n"
		   "Region = us-west-2\n"
		   "  # an indented comment\n"
		   "OUTPUT: json\n"
		   "role_session_name = a b # not a comment\n"
		   "\t\n"
		   "[profile dev]\r\n"
		   "region=eu-west-1\r\n", NULL);
	ok(c && eq(awsconfig_get(c, "default", "region"), "us-west-2"),
	   "keys are case-insensitive and '#' / ';' lines are comments");
	ok(c && eq(awsconfig_get(c, "default", "output"), "json"), "'key: value' works like 'key = value'");
	ok(c && eq(awsconfig_get(c, "default", "role_session_name"), "a b # not a comment"),
	   "a '#' after a value belongs to the value, as in botocore");
	ok(c && eq(awsconfig_get(c, "dev", "region"), "eu-west-1"), "CRLF line ends are read");
	awsconfig_free(c);

	c = parse2("[profile \"my team\"]\nregion = r1\n"
		   "[Profile caps]\nregion = r2\n"
		   "[preview]\nregion = r3\n"
		   "[profile  spaced ] ; trailing text\nregion = r4\n"
		   "[profile Dev]\nregion = r5\n", NULL);
	ok(c && eq(awsconfig_get(c, "my team", "region"), "r1"), "a quoted profile name is read like shlex");
	ok(c && !awsconfig_has_profile(c, "caps") && !awsconfig_has_profile(c, "Profile caps"),
	   "section names are case-sensitive: [Profile caps] is not a profile");
	ok(c && !awsconfig_has_profile(c, "preview"), "a section without 'profile' is not a profile");
	ok(c && eq(awsconfig_get(c, "spaced", "region"), "r4"),
	   "the header ends at the last ']' and extra blanks around the name are dropped");
	ok(c && eq(awsconfig_get(c, "Dev", "region"), "r5") && !awsconfig_get(c, "dev", "region"),
	   "profile names are case-sensitive");
	awsconfig_free(c);

	c = parse2("[default]\n"
		   "s3 =\n"
		   "  endpoint_url = http://localhost:4566\n"
		   "\n"
		   "  addressing_style = path\n"
		   "region = us-east-2\n"
		   "services = local\n"
		   "[services local]\n"
		   "sts =\n"
		   "  endpoint_url = http://127.0.0.1:9000\n"
		   "elastic_beanstalk =\n"
		   "  endpoint_url = http://127.0.0.1:9001\n", NULL);
	ok(c && eq(awsconfig_get_sub(c, "default", "s3", "endpoint_url"), "http://localhost:4566") &&
	   eq(awsconfig_get_sub(c, "default", "s3", "addressing_style"), "path"),
	   "indented sub-properties under an empty value are nested");
	ok(c && !awsconfig_get(c, "default", "s3"), "a nested key has no plain value");
	ok(c && eq(awsconfig_get(c, "default", "region"), "us-east-2"),
	   "a key at the outer indentation ends the nested block");
	ok(c && eq(awsconfig_service(c, "local", "sts", "endpoint_url"), "http://127.0.0.1:9000"),
	   "a [services NAME] section holds nested endpoints per service");
	ok(c && eq(endpoint(c, "default", "sts"), "http://127.0.0.1:9000") &&
	   eq(endpoint(c, "default", "elastic-beanstalk"), "http://127.0.0.1:9001"),
	   "the profile's services section gives the endpoint of a service (ids in snake case)");
	ok(c && eq(endpoint(c, "default", "iam"), "(none)"), "a service the section lacks has no endpoint");
	awsconfig_free(c);

	c = parse2("[default]\nservices = missing\n", NULL);
	ok(c && !endpoint(c, "default", "sts") && strstr(err, "missing"),
	   "a profile naming a services section that does not exist is an error naming it");
	awsconfig_free(c);

	ok(!parse2("region = x\n[default]\n", NULL) && strstr(err, "line 1"),
	   "a setting before any section is refused with its line number");
	ok(!parse2("[default]\nregion = x\njust words\n", NULL) && strstr(err, "config line 3"),
	   "a line that is not 'key = value' is refused with the file and line");
	ok(!parse2("[default]\ns3 =\n  no equals sign\n", NULL) && strstr(err, "s3"),
	   "a nested line without '=' is refused naming the key");
	ok(!parse2("[default]\n= value\n", NULL), "an empty key is refused");

	c = parse2("[default]\nregion = a\n[profile dev]\nregion = c\n[profile default]\noutput = text\n"
		   "[profile dev]\noutput = yaml\nregion = d\n",
		   "[dev]\naws_access_key_id = AKIDCREDS\n"
		   "[profile dev]\naws_access_key_id = AKIDLITERAL\n");
	ok(c && eq(awsconfig_get(c, "default", "region"), "a") &&
	   eq(awsconfig_get(c, "default", "output"), "text"),
	   "[default] and [profile default] are one profile");
	ok(c && eq(awsconfig_get(c, "dev", "region"), "d") && eq(awsconfig_get(c, "dev", "output"), "yaml"),
	   "a repeated section merges and its later value wins");
	ok(c && eq(awsconfig_get(c, "dev", "aws_access_key_id"), "AKIDCREDS") &&
	   eq(awsconfig_get(c, "profile dev", "aws_access_key_id"), "AKIDLITERAL"),
	   "the credentials file names profiles without the 'profile' prefix");
	awsconfig_free(c);

	c = parse2("[profile dev]\naws_access_key_id = FROMCONFIG\nregion = r\n",
		   "[dev]\naws_access_key_id = FROMCREDS\n");
	ok(c && eq(awsconfig_get(c, "dev", "aws_access_key_id"), "FROMCREDS") &&
	   eq(awsconfig_get_in(c, AWSCONFIG_CONFIG, "dev", "aws_access_key_id"), "FROMCONFIG"),
	   "the credentials file wins over the config file for the same key");
	ok(c && eq(awsconfig_get(c, "dev", "region"), "r"), "keys only in the config file still apply");

	ok(eq(awsconfig_profile_name(NULL), "default"), "without AWS_PROFILE the profile is default");
	setenv("AWS_DEFAULT_PROFILE", "legacy", 1);
	ok(eq(awsconfig_profile_name(NULL), "legacy"), "AWS_DEFAULT_PROFILE names the profile");
	setenv("AWS_PROFILE", "dev", 1);
	ok(eq(awsconfig_profile_name(NULL), "dev"), "AWS_PROFILE wins over AWS_DEFAULT_PROFILE");
	ok(eq(awsconfig_profile_name("ops"), "ops"), "an explicit profile wins over AWS_PROFILE");
	setenv("AWS_PROFILE", "", 1);
	ok(eq(awsconfig_profile_name(NULL), "legacy"), "an empty AWS_PROFILE counts as unset");
	clear_env();

	ok(eq(awsconfig_region_of(c, "dev"), "r"), "the region comes from the profile");
	setenv("AWS_DEFAULT_REGION", "ap-south-1", 1);
	ok(eq(awsconfig_region_of(c, "dev"), "ap-south-1"), "AWS_DEFAULT_REGION wins over the profile");
	setenv("AWS_REGION", "sa-east-1", 1);
	ok(eq(awsconfig_region_of(c, "dev"), "sa-east-1"), "AWS_REGION wins over AWS_DEFAULT_REGION");
	clear_env();
	awsconfig_free(c);

	c = parse2("[default]\nendpoint_url = http://profile\nservices = s\n"
		   "[services s]\nsts =\n  endpoint_url = http://services-sts\n"
		   "[profile ignoring]\nendpoint_url = http://x\nignore_configured_endpoint_urls = TRUE\n",
		   NULL);
	ok(c && eq(endpoint(c, "default", "s3"), "http://profile"),
	   "the profile's endpoint_url applies to services without their own");
	ok(c && eq(endpoint(c, "default", "sts"), "http://services-sts"),
	   "a service's endpoint in the services section wins over the profile's endpoint_url");
	setenv("AWS_ENDPOINT_URL", "http://env-global", 1);
	ok(c && eq(endpoint(c, "default", "sts"), "http://env-global"),
	   "AWS_ENDPOINT_URL wins over the config file (botocore's lookup order)");
	setenv("AWS_ENDPOINT_URL_STS", "http://env-sts", 1);
	ok(c && eq(endpoint(c, "default", "sts"), "http://env-sts") &&
	   eq(endpoint(c, "default", "s3"), "http://env-global"),
	   "AWS_ENDPOINT_URL_<SERVICE> wins for its service only");
	setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true", 1);
	ok(c && eq(endpoint(c, "default", "sts"), "(none)"),
	   "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=true ignores every configured endpoint");
	setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "false", 1);
	ok(c && eq(endpoint(c, "ignoring", "sts"), "http://env-sts"),
	   "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS=false overrides the profile's setting");
	clear_env();
	ok(c && eq(endpoint(c, "ignoring", "sts"), "(none)"),
	   "ignore_configured_endpoint_urls in the profile is read case-insensitively");
	awsconfig_free(c);

	/* files on disk */
	if (!mkdtemp(dir))
		return 1;
	snprintf(path, sizeof path, "%s/config", dir);
	f = fopen(path, "w");
	fputs("[profile dev]\nregion = eu-north-1\n", f);
	fclose(f);
	setenv("AWS_CONFIG_FILE", path, 1);
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	c = awsconfig_load(err, sizeof err);
	ok(c && eq(awsconfig_get(c, "dev", "region"), "eu-north-1"),
	   "AWS_CONFIG_FILE names the config file and a missing credentials file is empty");
	awsconfig_free(c);
	ok(awsconfig_region("dev", &r) == 0 && eq(r, "eu-north-1"), "awsconfig_region reads the files");
	free(r);
	ok(awsconfig_region(NULL, &r) == 0 && r == NULL, "no region anywhere gives NULL");
	setenv("HOME", dir, 1);
	unsetenv("AWS_CONFIG_FILE");
	snprintf(path, sizeof path, "%s/.aws", dir);
	ok(mkdir(path, 0700) == 0, "a home directory with ~/.aws can be made");
	snprintf(path, sizeof path, "%s/.aws/config", dir);
	f = fopen(path, "w");
	fputs("[default]\nregion = home-1\n", f);
	fclose(f);
	ok(awsconfig_region(NULL, &r) == 0 && eq(r, "home-1"), "~/.aws/config is the default config file");
	free(r);
	snprintf(path, sizeof path, "%s/bad", dir);
	f = fopen(path, "w");
	fputs("[default]\nnot a setting\n", f);
	fclose(f);
	setenv("AWS_CONFIG_FILE", path, 1);
	ok(!awsconfig_load(err, sizeof err) && strstr(err, path), "a malformed file is refused naming the file");
	unlink(path);
	snprintf(path, sizeof path, "%s/.aws/config", dir);
	unlink(path);
	snprintf(path, sizeof path, "%s/.aws", dir);
	rmdir(path);
	snprintf(path, sizeof path, "%s/config", dir);
	unlink(path);
	ok(rmdir(dir) == 0, "the temporary directory is removed");
	clear_env();
	return tap_done();
}
