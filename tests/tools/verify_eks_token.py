#!/usr/bin/env python3
"""Checks an EKS bearer token with botocore, an independent signer.

    verify_eks_token.py TOKEN CLUSTER   (credentials from AWS_ACCESS_KEY_ID,
                                         AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN)

Decodes the token, re-signs the same STS GetCallerIdentity URL with
botocore's SigV4QueryAuth at the token's own X-Amz-Date, and prints
"match" when the signatures agree (else "mismatch ..."). Exit 3 when
botocore is absent.
"""
import base64
import datetime
import os
import sys
from unittest import mock
from urllib.parse import parse_qsl, urlsplit

try:
    import botocore.auth as auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials
except ImportError:
    print("botocore is absent")
    sys.exit(3)

token, cluster = sys.argv[1], sys.argv[2]
assert token.startswith("k8s-aws-v1.")
b64 = token[len("k8s-aws-v1."):]
url = base64.urlsafe_b64decode(b64 + "=" * (-len(b64) % 4)).decode()
parts = urlsplit(url)
q = dict(parse_qsl(parts.query, keep_blank_values=True))
when = datetime.datetime.strptime(q["X-Amz-Date"], "%Y%m%dT%H%M%SZ")
region = q["X-Amz-Credential"].split("/")[2]


class Fixed(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return cls(when.year, when.month, when.day, when.hour, when.minute, when.second)

    @classmethod
    def now(cls, tz=None):
        return cls(when.year, when.month, when.day, when.hour, when.minute, when.second, tzinfo=tz)


base = "%s://%s%s?Action=GetCallerIdentity&Version=2011-06-15" % (parts.scheme, parts.netloc, parts.path)
req = AWSRequest(method="GET", url=base, headers={"x-k8s-aws-id": cluster})
creds = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                    os.environ.get("AWS_SESSION_TOKEN"))
with mock.patch.object(auth.datetime, "datetime", Fixed):
    auth.SigV4QueryAuth(creds, "sts", region, expires=int(q["X-Amz-Expires"])).add_auth(req)
theirs = dict(parse_qsl(urlsplit(req.url).query, keep_blank_values=True))
if theirs["X-Amz-Signature"] == q["X-Amz-Signature"]:
    print("match")
else:
    print("mismatch hypd=%s botocore=%s" % (q["X-Amz-Signature"], theirs["X-Amz-Signature"]))
    sys.exit(1)
