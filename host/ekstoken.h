/*
 * ekstoken: EKS bearer tokens, the way `aws eks get-token` makes them:
 * "k8s-aws-v1." + unpadded base64url of a presigned STS GetCallerIdentity
 * URL signed with the header x-k8s-aws-id: <cluster>. EKS accepts a token
 * for 15 minutes after signing; tokens are cached and re-made after 10.
 */
#ifndef HYPD_EKSTOKEN_H
#define HYPD_EKSTOKEN_H

#include <stddef.h>
#include <time.h>

/*
 * Makes (or reuses) a token for cluster, signed for sts_url (the resolved
 * STS endpoint, e.g. "https://sts.us-west-2.amazonaws.com") and region with
 * the cached credentials of profile (NULL = default). On success returns 0,
 * sets *token (malloc'd; the caller frees it; it is a secret) and *expires
 * (when EKS stops accepting it). On failure returns -1 with a message.
 */
int eks_token(const char *sts_url, const char *cluster, const char *region,
	      const char *profile, time_t now, char **token, time_t *expires,
	      char *err, size_t errlen);

/* Forgets cached tokens (tests). */
void eks_token_reset(void);

#endif
