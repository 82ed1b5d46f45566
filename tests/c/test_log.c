/* The log's redaction and one-line guarantees (pure C, no Lua). */
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "tap.h"

static int redacts(const char *in, const char *want)
{
	size_t n;
	char *out = log_redact(in, strlen(in), &n);
	int same = out && strcmp(out, want) == 0 && n == strlen(want);

	if (!same)
		printf("#   got: %s\n#  want: %s\n", out ? out : "(null)", want);
	free(out);
	return same;
}

static int line_of(enum log_level level, const char *msg, char *buf, size_t cap)
{
	FILE *f = tmpfile();
	size_t n;

	log_set_output(f);
	log_write(level, "test", msg);
	log_set_output(NULL);
	rewind(f);
	n = fread(buf, 1, cap - 1, f);
	buf[n] = 0;
	fclose(f);
	return (int)n;
}

int main(void)
{
	char buf[512];

	ok(redacts("key AKIAIOSFODNN7EXAMPLE here", "key [REDACTED] here"),
	   "an AWS access key id is redacted");
	ok(redacts("ASIAXXXXXXXXXXXXXXXX", "[REDACTED]"),
	   "a temporary access key id is redacted");
	ok(redacts("AKIASHORT", "AKIASHORT"), "a shorter look-alike stays");
	ok(redacts("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY end",
		   "aws_secret_access_key=[REDACTED] end"),
	   "a secret access key after its name is redacted");
	ok(redacts("Authorization: AWS4-HMAC-SHA256 Credential=AKID/x, SignedHeaders=host, Signature=ab\nnext",
		   "Authorization: AWS4-HMAC-SHA256 [REDACTED]\nnext"),
	   "an Authorization header's credentials are redacted to the line end, its scheme kept");
	ok(redacts("Authorization: Bearer hypd_abc", "Authorization: Bearer [REDACTED]"),
	   "a short bearer credential in an Authorization header is redacted");
	ok(redacts("sent Bearer hypd_abcdefgh1234 twice", "sent Bearer [REDACTED] twice"),
	   "a bearer token is redacted");
	ok(redacts("the bearer token is not valid", "the bearer token is not valid"),
	   "prose about a bearer token stays readable");
	ok(redacts("token k8s-aws-v1.aHR0cHM6Ly9zdHM_x-y", "token [REDACTED]"),
	   "an EKS bearer token is redacted");
	ok(redacts("hf_abcdefghijklmnopqrstuvwxyz", "[REDACTED]"),
	   "a Hugging Face token is redacted");
	ok(redacts("Bearer hypd_tok_123456 ok", "Bearer [REDACTED] ok"),
	   "a bearer token is redacted");
	ok(log_add_secret("s3cr3t-value") == 0, "a secret can be registered");
	ok(redacts("x=s3cr3t-value;y=s3cr3t-value", "x=[REDACTED];y=[REDACTED]"),
	   "a registered secret is redacted everywhere it appears");
	ok(log_add_secret("abc") == 0 && redacts("abc", "abc"),
	   "values under 6 bytes are not treated as secrets");
	log_clear_secrets();
	ok(redacts("s3cr3t-value", "s3cr3t-value"), "cleared secrets are forgotten");
	{
		char v[32];
		int all_ok = 1;

		for (int i = 0; i < 1100; i++) {
			snprintf(v, sizeof v, "secret-number-%04d", i);
			all_ok &= log_add_secret(v) == 0;
		}
		ok(all_ok && redacts("secret-number-1099", "[REDACTED]") &&
		   redacts("secret-number-0000", "secret-number-0000"),
		   "the newest 1024 secrets are kept, the oldest dropped");
		log_clear_secrets();
	}
	{
		char v[32];

		log_add_secret("Host-Key-1234");
		log_add_secret_as("Op-Secret-5678", LOG_SECRET_OPERATION);
		for (int i = 0; i < 3000; i++) {
			snprintf(v, sizeof v, "caller-secret-%05d", i);
			log_add_secret_as(v, LOG_SECRET_CALLER);
		}
		ok(redacts("Host-Key-1234 Op-Secret-5678", "[REDACTED] [REDACTED]"),
		   "3000 caller secrets evict neither a host secret nor an operation's");
		ok(redacts("caller-secret-02999", "[REDACTED]") && redacts("caller-secret-00000", "caller-secret-00000"),
		   "caller secrets evict older caller secrets");
		ok(redacts("HOST-KEY-1234 host-key-1234 4321-yeK-tsoH SG9zdC1LZXktMTIzNA== SG9zdC1LZXktMTIzNA",
			   "[REDACTED] [REDACTED] [REDACTED] [REDACTED] [REDACTED]"),
		   "its transforms are masked: upper, lower, reversed, base64, base64url");
		log_release_secret("Op-Secret-5678");
		for (int i = 0; i < 3000; i++) {
			snprintf(v, sizeof v, "caller-later-%05d", i);
			log_add_secret_as(v, LOG_SECRET_CALLER);
		}
		ok(redacts("Op-Secret-5678", "Op-Secret-5678") && redacts("Host-Key-1234", "[REDACTED]"),
		   "released by its operation, a secret is evictable like a caller's");
		log_add_secret_as("Both-Kinds-999", LOG_SECRET_CALLER);
		log_add_secret("Both-Kinds-999");
		for (int i = 0; i < 3000; i++) {
			snprintf(v, sizeof v, "caller-third-%05d", i);
			log_add_secret_as(v, LOG_SECRET_CALLER);
		}
		ok(redacts("Both-Kinds-999", "[REDACTED]"), "a value keeps the strongest kind it was given");
		log_clear_secrets();
	}

	log_set_level(LOG_INFO);
	line_of(LOG_INFO, "two\nlines", buf, sizeof buf);
	ok(strstr(buf, "info  test: two\\nlines\n") != NULL && strchr(buf, '\n') == buf + strlen(buf) - 1,
	   "a message with a newline stays one line");
	ok(line_of(LOG_DEBUG, "hidden", buf, sizeof buf) == 0,
	   "messages below the level are not written");
	line_of(LOG_ERROR, "key AKIAIOSFODNN7EXAMPLE", buf, sizeof buf);
	ok(strstr(buf, "AKIA") == NULL && strstr(buf, "[REDACTED]") != NULL,
	   "log lines pass through redaction");
	ok(log_parse_level("warn") == LOG_WARN && log_parse_level("loud") == -1,
	   "level names parse, unknown ones are refused");
	return tap_done();
}
