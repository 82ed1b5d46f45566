/*
 * awsconfig: the AWS shared files (~/.aws/config and ~/.aws/credentials),
 * read the way the AWS CLI and botocore read them. Pure C, no Lua.
 *
 * Files: AWS_CONFIG_FILE (default ~/.aws/config) and
 * AWS_SHARED_CREDENTIALS_FILE (default ~/.aws/credentials); a leading "~"
 * is the home directory. A missing file is an empty file.
 *
 * Syntax (Python's configparser as botocore drives it):
 * - "[header]": the header is the text between the first '[' and the last
 *   ']' of the line, kept as written. In the config file "[default]" and
 *   "[profile NAME]" are profiles (NAME may be quoted), "[services NAME]"
 *   is a services section, any other section is ignored. In the
 *   credentials file every section is a profile named by its whole header.
 * - "key = value" or "key: value": keys are case-insensitive (lower-cased),
 *   values are trimmed and kept as written (no quotes removed, no inline
 *   comments: "a = b # c" has the value "b # c").
 * - Lines that start with '#' or ';' (after blanks) are comments.
 * - A line indented deeper than its key continues the value. A key with an
 *   empty first line and indented "sub = value" lines is nested:
 *       s3 =
 *         endpoint_url = http://localhost:4566
 *   Nested keys are kept as written (botocore does not lower-case them).
 * - Section names are case-sensitive: "[Profile dev]" is not a profile.
 * Refused with "FILE line N: ...": a key before any section, a line that is
 * neither a section, a comment nor "key = value", a nested line without
 * '='. Unlike configparser, a repeated section or key is not an error: the
 * sections merge and the later value wins ("[default]" and
 * "[profile default]" are one profile).
 *
 * Lookups follow botocore's merged view: a profile's value comes from the
 * credentials file when it has the key there, else from the config file.
 *
 * Ownership: an awsconfig owns every string in it; returned `const char *`
 * values are borrowed until awsconfig_free(), which zeroes them (the
 * credentials file holds secrets). Functions returning `char **out` hand
 * over a malloc'd string the caller frees.
 */
#ifndef HYPD_AWSCONFIG_H
#define HYPD_AWSCONFIG_H

#include <stddef.h>

enum awsconfig_file {
	AWSCONFIG_CONFIG,       /* ~/.aws/config */
	AWSCONFIG_CREDENTIALS,  /* ~/.aws/credentials */
};

typedef struct awsconfig awsconfig;

/* --- loading --- */

/* An empty configuration (NULL when out of memory). */
awsconfig *awsconfig_new(void);

/*
 * Parses text[0..len) as one file and merges it into c. name appears in
 * error messages. Returns 0, or -1 with a message in err (c then holds what
 * was parsed before the bad line).
 */
int awsconfig_parse(awsconfig *c, enum awsconfig_file which, const char *name,
		    const char *text, size_t len, char *err, size_t errlen);

/* Reads both shared files. NULL with a message in err when a file cannot
 * be read or parsed. Cost: two small file reads. */
awsconfig *awsconfig_load(char *err, size_t errlen);

/* Zeroes and frees everything (NULL is fine). */
void awsconfig_free(awsconfig *c);

/* --- lookups --- */

/* The profile to use: explicit when not NULL, else AWS_PROFILE, else
 * AWS_DEFAULT_PROFILE, else "default". Borrowed (environment or literal). */
const char *awsconfig_profile_name(const char *explicit_profile);

/* 1 when either file has the profile. */
int awsconfig_has_profile(const awsconfig *c, const char *profile);

/* The value of key (lower-case) in profile: credentials file first, then
 * config file. NULL when absent or nested. */
const char *awsconfig_get(const awsconfig *c, const char *profile, const char *key);

/* The same, in one file only. */
const char *awsconfig_get_in(const awsconfig *c, enum awsconfig_file which,
			     const char *profile, const char *key);

/* Nested value key.sub of a profile ("s3", "endpoint_url"). */
const char *awsconfig_get_sub(const awsconfig *c, const char *profile,
			      const char *key, const char *sub);

/* 1 when the config file has a [services NAME] section. */
int awsconfig_has_services(const awsconfig *c, const char *name);

/* Nested value service.key of [services NAME]; NULL when absent. */
const char *awsconfig_service(const awsconfig *c, const char *name,
			      const char *service, const char *key);

/* Calls fn for every nested property of every service of [services NAME],
 * in file order. */
void awsconfig_services_each(const awsconfig *c, const char *name,
			     void (*fn)(void *ud, const char *service,
					const char *key, const char *value),
			     void *ud);

/* 1 when a value is "true" in any case (botocore's ensure_boolean). */
int awsconfig_true(const char *value);

/* --- settings with the environment applied --- */

/* AWS_REGION, AWS_DEFAULT_REGION, then the profile's region; NULL if none.
 * Borrowed. */
const char *awsconfig_region_of(const awsconfig *c, const char *profile);

/*
 * Loads the files and gives the region as above (profile NULL: the
 * default profile of awsconfig_profile_name). Returns 0 with *out malloc'd
 * or NULL when no region is set; -1 when the files cannot be read.
 */
int awsconfig_region(const char *profile, char **out);

/* AWS_IGNORE_CONFIGURED_ENDPOINT_URLS when set, else the profile's
 * ignore_configured_endpoint_urls. */
int awsconfig_ignore_endpoints(const awsconfig *c, const char *profile);

/*
 * The configured endpoint URL of a service, as the SDKs find it (botocore
 * ConfiguredEndpointProvider): AWS_ENDPOINT_URL_<SERVICE>, then
 * AWS_ENDPOINT_URL, then the profile's services section, then the
 * profile's endpoint_url; none when ignore_configured_endpoint_urls is
 * set. service_id is the snake-case service id ("sts", "s3",
 * "elastic_beanstalk"). Returns 0 with *out malloc'd or NULL; -1 with a
 * message when the profile names a services section that does not exist.
 */
int awsconfig_endpoint_url(const awsconfig *c, const char *profile,
			   const char *service_id, char **out, char *err, size_t errlen);

/* The same, also naming where the URL came from in *source (a static
 * string: "AWS_ENDPOINT_URL_<SERVICE>", "AWS_ENDPOINT_URL", "profile services
 * section", "profile endpoint_url"), or NULL with no URL. */
int awsconfig_endpoint_url_from(const awsconfig *c, const char *profile,
				const char *service_id, char **out, const char **source,
				char *err, size_t errlen);

/* The environment value of name, or NULL when unset or empty. */
const char *awsconfig_env(const char *name);

#endif
