#!/usr/bin/env python3
"""Refused requests as boto3 sees them: for each service of the sandbox, a
call with no signature (botocore's UNSIGNED), a wrong secret key, an
unknown access key, a clock 16 minutes ahead and one 16 minutes behind;
then raw requests, signed by botocore's SigV4Auth or not signed at all,
naming an unknown action, target or path, or nothing that names a service.

Prints one JSON line per case: {"case", "status", "code", "message",
"type"} where code and message are what botocore parsed out of the answer
(a ClientError, or botocore's parser for the raw requests); a response
botocore could not parse gives {"case", "unparsed": "<exception>"}.

Env: AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
(as `hypd sandbox` prints them).
"""
import datetime
import json
import os
import sys
from unittest import mock

import boto3
import botocore.auth
import botocore.session
from botocore import UNSIGNED
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from botocore.parsers import create_parser

ENDPOINT = os.environ["AWS_ENDPOINT_URL"]
REGION = os.environ.get("AWS_REGION", "us-west-2")
AKID = os.environ["AWS_ACCESS_KEY_ID"]
SECRET = os.environ["AWS_SECRET_ACCESS_KEY"]
BASE = dict(region_name=REGION, retries={"max_attempts": 1}, s3={"addressing_style": "path"},
            connect_timeout=5, read_timeout=10)

# one cheap read per service
CALLS = {
    "ec2": ("describe_vpcs", {}),
    "iam": ("list_roles", {}),
    "sts": ("get_caller_identity", {}),
    "s3": ("list_buckets", {}),
    "sagemaker": ("list_clusters", {}),
    "eks": ("list_clusters", {}),
    "fsx": ("describe_file_systems", {}),
}


def out(case, **kw):
    print(json.dumps(dict(case=case, **kw)), flush=True)


def client(svc, **kw):
    cfg = Config(signature_version=kw.pop("signature_version")) if "signature_version" in kw else None
    c = Config(**BASE)
    if cfg:
        c = c.merge(cfg)
    return boto3.client(svc, endpoint_url=ENDPOINT, config=c,
                        aws_access_key_id=kw.get("akid", AKID), aws_secret_access_key=kw.get("secret", SECRET))


def shifted(minutes):
    """botocore's clock, moved (both the 1.43 and the older helper)."""
    real = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    when = real + datetime.timedelta(minutes=minutes)

    class Fake(datetime.datetime):
        @classmethod
        def utcnow(cls):
            return when

        @classmethod
        def now(cls, tz=None):
            return when.replace(tzinfo=tz) if tz else when

    patches = [mock.patch.object(botocore.auth.datetime, "datetime", Fake)]
    if hasattr(botocore.auth, "get_current_datetime"):
        patches.append(mock.patch.object(botocore.auth, "get_current_datetime", lambda *a, **k: when))
    return patches


def attempt(case, svc, **kw):
    patches = kw.pop("patches", [])
    c = client(svc, **kw)
    name, params = CALLS[svc]
    for p in patches:
        p.start()
    try:
        getattr(c, name)(**params)
        out(case, status=200)
    except ClientError as e:
        err = e.response.get("Error", {})
        out(case, status=e.response.get("ResponseMetadata", {}).get("HTTPStatusCode"), code=err.get("Code"),
            message=err.get("Message"), type=err.get("Type"))
    except Exception as e:  # noqa: BLE001 - a parse failure is the finding
        out(case, unparsed=f"{type(e).__name__}: {e}")
    finally:
        for p in patches:
            p.stop()


SESSION = botocore.session.get_session()


def raw(case, svc, op, method="POST", path="/", body=b"", headers=None, sign=True):
    """sends a request by hand; parses the answer with botocore's parser for svc"""
    import urllib.request
    import urllib.error
    headers = dict(headers or {})
    req = AWSRequest(method=method, url=ENDPOINT + path, data=body, headers=headers)
    if sign:
        name = sign if isinstance(sign, str) else SESSION.get_service_model(svc).signing_name
        botocore.auth.SigV4Auth(Credentials(AKID, SECRET), name, REGION).add_auth(req)
    prepared = req.prepare()
    r = urllib.request.Request(prepared.url, data=prepared.body or None, method=method,
                               headers=dict(prepared.headers))
    try:
        with urllib.request.urlopen(r, timeout=10) as resp:
            status, rheaders, rbody = resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as e:
        status, rheaders, rbody = e.code, dict(e.headers), e.read()
    model = SESSION.get_service_model(svc)
    shape = model.operation_model(op).output_shape
    rheaders = {k.lower(): v for k, v in rheaders.items()}
    try:
        parsed = create_parser(model.metadata["protocol"]).parse(
            {"status_code": status, "headers": rheaders, "body": rbody}, shape)
    except Exception as e:  # noqa: BLE001
        out(case, unparsed=f"{type(e).__name__}: {e}", status=status, body=rbody.decode(errors="replace")[:300])
        return
    err = parsed.get("Error", {})
    out(case, status=status, code=err.get("Code"), message=err.get("Message"), type=err.get("Type"),
        content_type=rheaders.get("content-type"))


def main():
    only = set(sys.argv[1:])
    for svc in CALLS:
        if only and svc not in only:
            continue
        attempt(f"{svc} unsigned", svc, signature_version=UNSIGNED)
        attempt(f"{svc} wrong secret", svc, secret="wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
        attempt(f"{svc} unknown key", svc, akid="AKIAUNKNOWNKEY000001")
        attempt(f"{svc} 16 minutes ahead", svc, patches=shifted(16))
        attempt(f"{svc} 16 minutes behind", svc, patches=shifted(-16))
    if only:
        return
    # the edges of the windows: 5 minutes ahead for most, 15 for S3 and EC2, 15 behind for all
    attempt("sts 4 minutes ahead", "sts", patches=shifted(4))
    attempt("sts 6 minutes ahead", "sts", patches=shifted(6))
    attempt("sts 14 minutes behind", "sts", patches=shifted(-14))
    attempt("s3 14 minutes ahead", "s3", patches=shifted(14))
    attempt("ec2 14 minutes ahead", "ec2", patches=shifted(14))
    form = {"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"}
    raw("sts unknown action", "sts", "GetCallerIdentity", body=b"Action=NoSuchAction&Version=2011-06-15",
        headers=form)
    raw("iam unknown action", "iam", "ListRoles", body=b"Action=NoSuchAction&Version=2010-05-08", headers=form)
    raw("ec2 unknown action", "ec2", "DescribeVpcs", body=b"Action=NoSuchAction&Version=2016-11-15", headers=form)
    raw("sts unknown action unsigned", "sts", "GetCallerIdentity",
        body=b"Action=NoSuchAction&Version=2011-06-15", headers=form, sign=False)
    raw("ec2 unknown action unsigned", "ec2", "DescribeVpcs", body=b"Action=NoSuchAction&Version=2016-11-15",
        headers=form, sign=False)
    for svc, target in (("sagemaker", "SageMaker"), ("fsx", "AWSSimbaAPIService_v20180301")):
        op = "ListClusters" if svc == "sagemaker" else "DescribeFileSystems"
        h = {"Content-Type": "application/x-amz-json-1.1", "X-Amz-Target": target + ".NoSuchOperation"}
        raw(f"{svc} unknown target", svc, op, body=b"{}", headers=h)
        raw(f"{svc} unknown target unsigned", svc, op, body=b"{}", headers=h, sign=False)
    raw("eks unknown path", "eks", "ListClusters", method="GET", path="/no-such-thing/at-all")
    # unsigned, an unknown path says nothing of EKS: any path is an S3 path
    raw("unknown path unsigned", "s3", "ListBuckets", method="GET", path="/no-such-thing/at-all", sign=False)
    raw("eks unsigned GET /clusters", "eks", "ListClusters", method="GET", path="/clusters", sign=False)
    raw("s3 unsigned GET of an object", "s3", "GetObject", method="GET", path="/some-bucket/some/key", sign=False)
    raw("unsigned form with an unknown Version", "sts", "GetCallerIdentity",
        body=b"Action=GetCallerIdentity&Version=1999-01-01", headers=form, sign=False)
    raw("unsigned POST / with nothing to go by", "s3", "ListBuckets", method="POST", sign=False)
    # signed for services the sandbox does not simulate: answered in the protocol of what the request looks like
    raw("signed for sns, a query form", "sts", "GetCallerIdentity", body=b"Action=ListTopics&Version=2010-03-31",
        headers=form, sign="sns")
    raw("signed for dynamodb, an awsJson target", "sagemaker", "ListClusters", body=b"{}",
        headers={"Content-Type": "application/x-amz-json-1.0", "X-Amz-Target": "DynamoDB_20120810.ListTables"},
        sign="dynamodb")


if __name__ == "__main__":
    main()
