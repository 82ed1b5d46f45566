/*
 * creds: the AWS credential provider chain, with a per-profile cache.
 * Pure C (libcurl easy handles, expat, cJSON, libcrypto); no Lua in the
 * core. Credentials never reach Lua, logs or the store: Lua names a
 * profile, C keeps the keys.
 *
 * The chain, in botocore's order:
 *  1. environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 *     AWS_SESSION_TOKEN (skipped when the caller names a profile);
 *  2. assume role: a profile with role_arn and source_profile (chains,
 *     with loop detection) or credential_source (Environment,
 *     Ec2InstanceMetadata, EcsContainer); STS AssumeRole signed with the
 *     source credentials;
 *  3. web identity: web_identity_token_file + role_arn (+
 *     role_session_name) from the environment (IRSA: AWS_WEB_IDENTITY_TOKEN_FILE,
 *     AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME; not when a profile is named)
 *     or the profile; STS AssumeRoleWithWebIdentity, unsigned; the token
 *     file is read at every fetch;
 *  4. static keys of the profile: the credentials file, then the config
 *     file (a profile using sso_* or credential_process is refused as
 *     unsupported rather than skipped);
 *  5. container: AWS_CONTAINER_CREDENTIALS_RELATIVE_URI (on
 *     http://169.254.170.2) or AWS_CONTAINER_CREDENTIALS_FULL_URI (https,
 *     or http to loopback, 169.254.170.2, 169.254.170.23, fd00:ec2::23),
 *     with AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE (read at every fetch) or
 *     AWS_CONTAINER_AUTHORIZATION_TOKEN as Authorization (ECS, EKS Pod
 *     Identity);
 *  6. instance metadata, IMDSv2 (falls back to v1 on 403/404/405 unless
 *     AWS_EC2_METADATA_V1_DISABLED): AWS_EC2_METADATA_DISABLED,
 *     AWS_EC2_METADATA_SERVICE_ENDPOINT (or the profile's
 *     ec2_metadata_service_endpoint / _mode), 1 s timeouts and 1 retry
 *     (AWS_METADATA_SERVICE_TIMEOUT, AWS_METADATA_SERVICE_NUM_ATTEMPTS).
 * A provider that is not configured passes to the next; one that is
 * configured and fails stops the chain (as botocore), except instance
 * metadata, which only reports. Errors name what was tried and never hold
 * a secret.
 *
 * STS: https://sts.<region>.amazonaws.com (region: AWS_REGION,
 * AWS_DEFAULT_REGION, the profile's region, else us-east-1), or the
 * configured endpoint (awsconfig_endpoint_url: AWS_ENDPOINT_URL_STS,
 * AWS_ENDPOINT_URL, the services section, the profile's endpoint_url).
 * TLS trusts AWS_CA_BUNDLE or the profile's ca_bundle when set.
 *
 * Cache: one entry per profile as the caller named it (NULL: the default
 * chain), guarded by a mutex; one fetch per entry at a time. Credentials
 * with an expiration are refreshed when less than CREDS_REFRESH_WINDOW
 * seconds remain; when a refresh fails and the old ones still have more
 * than CREDS_EXPIRY_MARGIN seconds, they are kept and the failure is
 * logged (without secrets). Static credentials stay cached until
 * creds_reset(), as in a botocore session. Every secret key and session
 * token obtained (source credentials of a role included), and every web
 * identity, container authorization and IMDS session token read, is
 * registered with log_add_secret(); error messages pass through
 * log_redact() as well. Secrets are zeroed when freed.
 *
 * Use from the engine: creds_cached() first (never blocks); when it says
 * -1, run creds_resolve() on a worker (hypd._aws.credentials) and ask
 * creds_cached() again. During the refresh window creds_cached() says -1
 * so a refresh happens early; after a refresh failed it serves the old
 * credentials for FAILED_GRACE (30 s) before asking for a new attempt.
 *
 * Threads: every function is thread-safe; creds_resolve and imds_region
 * block on the network (run them on a worker, never on the engine thread).
 */
#ifndef HYPD_CREDS_H
#define HYPD_CREDS_H

#include <stddef.h>

#define CREDS_REFRESH_WINDOW 300.0  /* refresh when fewer seconds remain */
#define CREDS_EXPIRY_MARGIN 15.0    /* never hand out ones closer to expiry */

typedef struct {
	char *access_key;     /* access key id (malloc'd) */
	char *secret_key;     /* secret access key (malloc'd, secret) */
	char *session_token;  /* session token or NULL (malloc'd, secret) */
	double expiration;    /* seconds since the epoch; 0 = never */
	char source[48];      /* "env", "profile:dev", "assume-role:dev",
				 "web-identity", "web-identity:dev",
				 "container", "imds" */
	char *profile;        /* the profile the chain resolved (malloc'd) */
} aws_creds;

/*
 * Resolves credentials for profile (NULL: AWS_PROFILE, AWS_DEFAULT_PROFILE
 * or "default", environment first) through the cache. Blocking (network).
 * Returns 0 and fills *out (the caller owns it: creds_free), or -1 with a
 * message in err (code for Lua: CREDENTIALS).
 */
int creds_resolve(const char *profile, aws_creds *out, char *err, size_t errlen);

/*
 * Non-blocking: returns 0 and a copy (creds_free it) when the cache holds
 * credentials for profile that need no refresh (none due within
 * CREDS_REFRESH_WINDOW, or a refresh failed in the last 30 s and they are
 * still valid for a minute); else -1.
 */
int creds_cached(const char *profile, aws_creds *out);

/* Zeroes the secrets and frees the strings of c (the struct itself is the
 * caller's); c may be partly filled. */
void creds_free(aws_creds *c);

/* Forgets the cache. Tests only: no creds_resolve may be running. */
void creds_reset(void);

/* The region from AWS_REGION, AWS_DEFAULT_REGION, then the profile:
 * awsconfig_region() in awsconfig.h. */

/* Blocking: the instance's region from instance metadata (IMDSv2).
 * Returns 0 with *out malloc'd, or -1 with a message in err. */
int imds_region(char **out, char *err, size_t errlen);

/*
 * Tests only: route every connection to host:port to another host:port,
 * as curl's CURLOPT_CONNECT_TO ("169.254.170.2:80:127.0.0.1:8080"), so a
 * test can serve the fixed container and metadata addresses on loopback.
 * NULL clears. Not for production use.
 */
void creds_set_connect_to(const char *spec);

/* --- Lua binding (lua_aws.c) --- */
struct lua_State;

/* Module "hypd._aws": config, credentials, credentials_cached, region,
 * imds_region, endpoint_url. Needs hx_open and the engine's worker pool. */
int luaopen_hypd__aws(struct lua_State *L);

#endif
