/*
 * tlsgen: certificates for the servers hypd runs itself (the sandbox's
 * HTTPS Kubernetes API): a CA, and leaf certificates it signs. Pure C over
 * OpenSSL 3; the Lua binding is hypd.sys.tls_cert (lua_sys.c).
 *
 * Every key is a fresh P-256 key. A CA gets basicConstraints CA:TRUE and
 * keyUsage keyCertSign, cRLSign (both critical); a leaf gets CA:FALSE,
 * digitalSignature, keyEncipherment and extendedKeyUsage serverAuth. Both
 * carry subject and authority key identifiers, a random 128-bit serial and
 * a notBefore an hour in the past (clock skew). Signatures use SHA-256.
 *
 * Ownership: tlsgen_cert copies nothing it keeps; on success the caller
 * owns and frees *cert_pem and *key_pem (the key: cleanse it first).
 */
#ifndef HYPD_TLSGEN_H
#define HYPD_TLSGEN_H

#include <stddef.h>

typedef struct {
	const char *cn;               /* subject common name; required */
	int ca;                       /* 1: a CA certificate, else a server leaf */
	const char *issuer_cert_pem;  /* the signing CA; NULL: self-signed */
	const char *issuer_key_pem;   /* its private key; with issuer_cert_pem */
	const char *const *ips;       /* subjectAltName IP addresses (IPv4 or
					 IPv6 text), NULL-terminated, or NULL */
	const char *const *dns;       /* subjectAltName DNS names, NULL-terminated,
					 or NULL */
	int days;                     /* validity from now; 0 = 3650 */
} tlsgen_opts;

/*
 * Generates a key and a certificate as o describes. Returns 0 with
 * *cert_pem (PEM certificate) and *key_pem (PEM PKCS#8 "PRIVATE KEY"),
 * NUL-terminated and malloc'd; or -1 with *field naming the option at
 * fault (NULL when OpenSSL itself failed) and a message in err.
 * Costs one EC key generation and one signature (well under a millisecond).
 */
int tlsgen_cert(const tlsgen_opts *o, char **cert_pem, char **key_pem,
		const char **field, char *err, size_t errlen);

#endif
