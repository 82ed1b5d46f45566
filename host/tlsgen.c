/* tlsgen: keys and certificates with OpenSSL 3 (see tlsgen.h). */
#include "tlsgen.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#define DEFAULT_DAYS 3650
#define MAX_DAYS 36500
#define MAX_CN 64     /* ub-common-name (RFC 5280) */
#define MAX_DNS 253   /* a full domain name */

struct gen {
	const tlsgen_opts *o;   /* what to make */
	X509 *issuer;           /* the signing CA's certificate, or NULL */
	EVP_PKEY *issuer_key;   /* its key, or NULL */
	EVP_PKEY *key;          /* the new key */
	X509 *cert;             /* the new certificate */
	const char **field;     /* set to the option at fault */
	char *err;              /* message for people */
	size_t errlen;          /* bytes of err */
};

static int fail(struct gen *g, const char *field, const char *fmt, ...)
{
	va_list ap;

	*g->field = field;
	va_start(ap, fmt);
	vsnprintf(g->err, g->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Reports what OpenSSL said last; the queue is cleared at the end. */
static int ssl_fail(struct gen *g, const char *field, const char *what)
{
	char reason[160];

	ERR_error_string_n(ERR_peek_last_error(), reason, sizeof reason);
	return fail(g, field, "%s: %s", what, reason);
}

static int dns_name_ok(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > MAX_DNS)
		return 0;
	/* letters, digits, '-', '.', and '*' for a wildcard label */
	return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			 "0123456789-.*") == n;
}

static int check_opts(struct gen *g)
{
	const tlsgen_opts *o = g->o;

	if (!o->cn || !*o->cn)
		return fail(g, "cn", "cn: a common name is required");
	if (strlen(o->cn) > MAX_CN)
		return fail(g, "cn", "cn: at most %d characters", MAX_CN);
	if (o->days < 0 || o->days > MAX_DAYS)
		return fail(g, "days", "days: from 1 to %d", MAX_DAYS);
	if (o->issuer_cert_pem && !o->issuer_key_pem)
		return fail(g, "issuer_key_pem", "issuer_key_pem: required with issuer_cert_pem");
	if (o->issuer_key_pem && !o->issuer_cert_pem)
		return fail(g, "issuer_cert_pem", "issuer_cert_pem: required with issuer_key_pem");
	for (const char *const *d = o->dns; d && *d; d++)
		if (!dns_name_ok(*d))
			return fail(g, "dns", "dns: '%.80s' is not a DNS name", *d);
	return 0;
}

/* Never prompts for a passphrase: an encrypted issuer key just fails. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf, (void)size, (void)rwflag, (void)u;
	return -1;
}

static int load_issuer(struct gen *g)
{
	BIO *b;

	if (!g->o->issuer_cert_pem)
		return 0;
	b = BIO_new_mem_buf(g->o->issuer_cert_pem, -1);
	g->issuer = b ? PEM_read_bio_X509(b, NULL, no_passphrase, NULL) : NULL;
	BIO_free(b);
	if (!g->issuer)
		return ssl_fail(g, "issuer_cert_pem", "issuer_cert_pem: not a PEM certificate");
	if (X509_check_ca(g->issuer) < 1)
		return fail(g, "issuer_cert_pem", "issuer_cert_pem: not a CA certificate");
	b = BIO_new_mem_buf(g->o->issuer_key_pem, -1);
	g->issuer_key = b ? PEM_read_bio_PrivateKey(b, NULL, no_passphrase, NULL) : NULL;
	BIO_free(b);
	if (!g->issuer_key)
		return ssl_fail(g, "issuer_key_pem", "issuer_key_pem: not an unencrypted PEM private key");
	if (X509_check_private_key(g->issuer, g->issuer_key) != 1)
		return fail(g, "issuer_key_pem", "issuer_key_pem: does not match issuer_cert_pem");
	return 0;
}

static int make_key(struct gen *g)
{
	g->key = EVP_EC_gen("P-256");
	if (!g->key)
		return ssl_fail(g, NULL, "key generation failed");
	return 0;
}

/* A random positive 128-bit serial (RFC 5280 allows up to 20 octets). */
static int set_serial(struct gen *g)
{
	unsigned char b[16];
	BIGNUM *bn;
	int ok;

	if (RAND_bytes(b, sizeof b) != 1)
		return ssl_fail(g, NULL, "no randomness for the serial");
	b[0] &= 0x7f;
	b[0] |= 0x40; /* keeps all 16 octets, never zero */
	bn = BN_bin2bn(b, sizeof b, NULL);
	ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(g->cert)) != NULL;
	BN_free(bn);
	return ok ? 0 : ssl_fail(g, NULL, "cannot set the serial");
}

static int set_names(struct gen *g)
{
	X509_NAME *name = X509_NAME_new();
	int ok;

	ok = name && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
						(const unsigned char *)g->o->cn, -1, -1, 0) &&
	     X509_set_subject_name(g->cert, name) &&
	     X509_set_issuer_name(g->cert, g->issuer ? X509_get_subject_name(g->issuer) : name);
	X509_NAME_free(name);
	return ok ? 0 : ssl_fail(g, "cn", "cn: not a valid common name");
}

static int set_validity(struct gen *g)
{
	int days = g->o->days ? g->o->days : DEFAULT_DAYS;

	/* an hour back: a peer whose clock is a little behind accepts it */
	if (!X509_gmtime_adj(X509_getm_notBefore(g->cert), -3600) ||
	    !X509_time_adj_ex(X509_getm_notAfter(g->cert), days, 0, NULL))
		return ssl_fail(g, "days", "days: cannot set the validity");
	return 0;
}

static int add_ext(struct gen *g, X509V3_CTX *ctx, int nid, const char *value)
{
	X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, ctx, nid, value);
	int ok = ex && X509_add_ext(g->cert, ex, -1);

	X509_EXTENSION_free(ex);
	return ok ? 0 : ssl_fail(g, NULL, "cannot add an extension");
}

/* Appends one SAN entry; takes v (freed on failure). */
static int push_name(GENERAL_NAMES *names, int type, ASN1_STRING *v)
{
	GENERAL_NAME *gn = GENERAL_NAME_new();

	if (!gn) {
		ASN1_STRING_free(v);
		return -1;
	}
	GENERAL_NAME_set0_value(gn, type, v);
	if (!sk_GENERAL_NAME_push(names, gn)) {
		GENERAL_NAME_free(gn);
		return -1;
	}
	return 0;
}

/* inet_pton is strict (no trailing text), unlike a2i_IPADDRESS. */
static ASN1_OCTET_STRING *ip_octets(const char *text)
{
	unsigned char buf[16];
	int len = inet_pton(AF_INET, text, buf) == 1 ? 4 :
		  inet_pton(AF_INET6, text, buf) == 1 ? 16 : 0;
	ASN1_OCTET_STRING *os;

	if (!len || !(os = ASN1_OCTET_STRING_new()))
		return NULL;
	if (!ASN1_OCTET_STRING_set(os, buf, len)) {
		ASN1_OCTET_STRING_free(os);
		return NULL;
	}
	return os;
}

/* subjectAltName from typed entries: no config-string parsing of input. */
static int add_san(struct gen *g)
{
	const tlsgen_opts *o = g->o;
	GENERAL_NAMES *names;
	int rc = 0;

	if (!(o->ips && *o->ips) && !(o->dns && *o->dns))
		return 0;
	if (!(names = sk_GENERAL_NAME_new_null()))
		return ssl_fail(g, NULL, "out of memory");
	for (const char *const *ip = o->ips; !rc && ip && *ip; ip++) {
		ASN1_OCTET_STRING *os = ip_octets(*ip);

		if (!os)
			rc = fail(g, "ips", "ips: '%.80s' is not an IP address", *ip);
		else if (push_name(names, GEN_IPADD, os) != 0)
			rc = ssl_fail(g, NULL, "out of memory");
	}
	for (const char *const *d = o->dns; !rc && d && *d; d++) {
		ASN1_IA5STRING *s = ASN1_IA5STRING_new();

		if (!s || !ASN1_STRING_set(s, *d, -1)) {
			ASN1_IA5STRING_free(s);
			rc = ssl_fail(g, NULL, "out of memory");
		} else if (push_name(names, GEN_DNS, s) != 0) {
			rc = ssl_fail(g, NULL, "out of memory");
		}
	}
	if (!rc && !X509_add1_ext_i2d(g->cert, NID_subject_alt_name, names, 0,
				      X509V3_ADD_DEFAULT))
		rc = ssl_fail(g, NULL, "cannot add subjectAltName");
	GENERAL_NAMES_free(names);
	return rc;
}

static int add_extensions(struct gen *g)
{
	X509V3_CTX ctx;
	int ca = g->o->ca, rc;

	X509V3_set_ctx_nodb(&ctx);
	X509V3_set_ctx(&ctx, g->issuer ? g->issuer : g->cert, g->cert, NULL, NULL, 0);
	/* the authority key id of a self-signed CA comes from its own key */
	if (!X509V3_set_issuer_pkey(&ctx, g->issuer_key ? g->issuer_key : g->key))
		return ssl_fail(g, NULL, "cannot set the issuer key");
	rc = add_ext(g, &ctx, NID_basic_constraints, ca ? "critical,CA:TRUE" : "critical,CA:FALSE");
	if (!rc)
		rc = add_ext(g, &ctx, NID_key_usage, ca ? "critical,keyCertSign,cRLSign" :
			     "critical,digitalSignature,keyEncipherment");
	if (!rc && !ca)
		rc = add_ext(g, &ctx, NID_ext_key_usage, "serverAuth");
	if (!rc)
		rc = add_ext(g, &ctx, NID_subject_key_identifier, "hash");
	if (!rc)
		rc = add_ext(g, &ctx, NID_authority_key_identifier, "keyid:always");
	if (!rc)
		rc = add_san(g);
	return rc;
}

static int build_cert(struct gen *g)
{
	int rc;

	if (!(g->cert = X509_new()) || !X509_set_version(g->cert, X509_VERSION_3) ||
	    !X509_set_pubkey(g->cert, g->key))
		return ssl_fail(g, NULL, "cannot make a certificate");
	rc = set_serial(g);
	if (!rc)
		rc = set_names(g);
	if (!rc)
		rc = set_validity(g);
	if (!rc)
		rc = add_extensions(g);
	if (!rc && X509_sign(g->cert, g->issuer_key ? g->issuer_key : g->key, EVP_sha256()) <= 0)
		rc = ssl_fail(g, NULL, "signing failed");
	return rc;
}

/* Copies a memory BIO into a malloc'd NUL-terminated string. */
static char *bio_string(BIO *b)
{
	char *data, *s;
	long n = BIO_get_mem_data(b, &data);

	if (n <= 0 || !(s = malloc((size_t)n + 1)))
		return NULL;
	memcpy(s, data, (size_t)n);
	s[n] = 0;
	return s;
}

static int write_pem(struct gen *g, char **cert_pem, char **key_pem)
{
	BIO *cb = BIO_new(BIO_s_mem());
	BIO *kb = BIO_new(BIO_s_secmem()); /* cleared when freed */
	int rc = -1;

	/* OpenSSL 3 writes PKCS#8 ("BEGIN PRIVATE KEY") for any key type */
	if (cb && kb && PEM_write_bio_X509(cb, g->cert) &&
	    PEM_write_bio_PrivateKey(kb, g->key, NULL, NULL, 0, NULL, NULL) &&
	    (*cert_pem = bio_string(cb)) && (*key_pem = bio_string(kb)))
		rc = 0;
	if (rc != 0) {
		free(*cert_pem);
		*cert_pem = NULL;
		ssl_fail(g, NULL, "cannot write PEM");
	}
	BIO_free(cb);
	BIO_free(kb);
	return rc;
}

int tlsgen_cert(const tlsgen_opts *o, char **cert_pem, char **key_pem,
		const char **field, char *err, size_t errlen)
{
	struct gen g = { .o = o, .field = field, .err = err, .errlen = errlen };
	int rc;

	*cert_pem = *key_pem = NULL;
	*field = NULL;
	rc = check_opts(&g);
	if (!rc)
		rc = load_issuer(&g);
	if (!rc)
		rc = make_key(&g);
	if (!rc)
		rc = build_cert(&g);
	if (!rc)
		rc = write_pem(&g, cert_pem, key_pem);
	X509_free(g.cert);
	X509_free(g.issuer);
	EVP_PKEY_free(g.key);
	EVP_PKEY_free(g.issuer_key);
	ERR_clear_error(); /* nothing left for the next OpenSSL caller */
	return rc;
}
