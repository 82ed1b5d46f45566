#!/usr/bin/env python3
"""Writes SigV4 vectors for hypd's signer, made with botocore (an independent
signer), to tests/data/sigv4/extra/*.json. test_sigv4.c reads them.

    python3 mk/make_sigv4_vectors.py [OUTDIR]

The official suite has no UNSIGNED-PAYLOAD case, no S3 and no EKS token; these
vectors cover them. Time is fixed at 2015-08-30T12:36:00Z by patching
botocore.auth.datetime (utcnow for botocore 1.29, now for 1.43).

Each file holds the input as hypd takes it (headers always include Host,
path as sent, query as sent) and, under "expected", what botocore produced.
botocore options map to hypd flags as follows:
  SigV4Auth                    -> sigv4_sign, normalize 1
  + X-Amz-Content-SHA256 hdr   -> sign_body 1 (botocore signs that header and
                                  uses its value as the payload hash)
  S3SigV4Auth, payload signing off -> normalize 0, sign_body 1,
                                  payload_hash UNSIGNED-PAYLOAD
  SigV4QueryAuth               -> sigv4_presign, normalize 1
  S3SigV4QueryAuth             -> sigv4_presign, normalize 0,
                                  payload_hash UNSIGNED-PAYLOAD
"""
import datetime
import hashlib
import json
import os
import sys
from unittest import mock
from urllib.parse import parse_qs, urlsplit

import botocore
import botocore.auth as A
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

AKID = "AKIDEXAMPLE"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = ("IQoJb3JpZ2luX2VjEXAMPLE//////////wEaCXVzLXdlc3QtMiJHMEUCIQD+"
         "example/token+with/slashes==")
WHEN = "2015-08-30T12:36:00Z"
EKS_SIGNATURE = "d0b19acefc46cc452ae06c3317b928b9e49d76479262bf156f7199d38ba31716"

CREATE_CLUSTER = (
    '{"ClusterName":"hp-demo","InstanceGroups":[{"InstanceCount":2,"InstanceGroupName":"workers",'
    '"ExecutionRole":"arn:aws:iam::123456789012:role/HyperPodExec","InstanceType":"ml.g5.8xlarge",'
    '"LifeCycleConfig":{"SourceS3Uri":"s3://bucket/lifecycle/","OnCreate":"on_create.sh"},'
    '"ThreadsPerCore":1}],"VpcConfig":{"SecurityGroupIds":["sg-0123"],"Subnets":["subnet-0123"]},'
    '"Tags":[{"Key":"team","Value":"ml"}],"Orchestrator":{"Eks":{"ClusterArn":'
    '"arn:aws:eks:us-west-2:123456789012:cluster/eks1"}},"NodeRecovery":"Automatic"}')


class FixedDatetime(datetime.datetime):
    utcnow = classmethod(lambda cls: cls(2015, 8, 30, 12, 36))
    now = classmethod(lambda cls, tz=None: cls(2015, 8, 30, 12, 36, tzinfo=tz))


def capture(auth):
    """Records the canonical request and string to sign botocore computes."""
    seen = {}
    cr, sts = auth.canonical_request, auth.string_to_sign

    def canonical_request(request):
        seen["canonical_request"] = cr(request)
        return seen["canonical_request"]

    def string_to_sign(request, canonical):
        seen["string_to_sign"] = sts(request, canonical)
        return seen["string_to_sign"]

    auth.canonical_request = canonical_request
    auth.string_to_sign = string_to_sign
    return seen


def vector(name, description, auth_cls, method, host, path, query="", headers=(),
           body="", token=None, region="us-west-2", service="sagemaker",
           sign_body=False, expires=0, s3_unsigned=False, known=None):
    creds = Credentials(AKID, SECRET, token)
    if auth_cls in (A.SigV4QueryAuth, A.S3SigV4QueryAuth):
        auth = auth_cls(creds, service, region, expires=expires)
    else:
        auth = auth_cls(creds, service, region)
    url = f"https://{host}{path}" + (f"?{query}" if query else "")
    req = AWSRequest(method=method, url=url, data=body.encode())
    for k, v in headers:
        req.headers[k] = v
    if sign_body and not s3_unsigned:
        req.headers["X-Amz-Content-SHA256"] = hashlib.sha256(body.encode()).hexdigest()
    if s3_unsigned:
        req.context["client_config"] = Config(s3={"payload_signing_enabled": False})
    seen = capture(auth)
    with mock.patch.object(A.datetime, "datetime", FixedDatetime):
        auth.add_auth(req)
    presign = auth_cls in (A.SigV4QueryAuth, A.S3SigV4QueryAuth)
    expected = dict(seen)
    if presign:
        q = urlsplit(req.url).query
        expected["query"] = q
        expected["signature"] = parse_qs(q)["X-Amz-Signature"][0]
    else:
        expected["authorization"] = req.headers["Authorization"]
        expected["signature"] = req.headers["Authorization"].rsplit("Signature=", 1)[1]
    out = {
        "name": name,
        "description": description,
        "generator": f"botocore {botocore.__version__} {auth_cls.__name__}",
        "presign": presign,
        "method": method,
        "path": path,
        "query": query,
        "headers": [["Host", host]] + [list(h) for h in headers],
        "body": body,
        "payload_hash": "UNSIGNED-PAYLOAD" if s3_unsigned or auth_cls is A.S3SigV4QueryAuth else None,
        "access_key": AKID,
        "secret_key": SECRET,
        "session_token": token,
        "region": region,
        "service": service,
        "timestamp": WHEN,
        "normalize": auth_cls in (A.SigV4Auth, A.SigV4QueryAuth),
        "sign_body": sign_body,
        "omit_session_token": False,
        "expires": expires,
        "expected": expected,
    }
    if known:
        out["known_signature"] = known
        assert expected["signature"] == known, (name, expected["signature"])
    return out


def vectors():
    return [
        vector("s3-put-object-unsigned-payload",
               "S3 PutObject, path already encoded, payload not signed (UNSIGNED-PAYLOAD)",
               A.S3SigV4Auth, "PUT", "examplebucket.s3.us-west-2.amazonaws.com",
               "/photos/cat%201%2Bdog.jpg",
               headers=[("Content-Type", "image/jpeg"), ("Content-Length", "11")],
               body="hello world", service="s3", sign_body=True, s3_unsigned=True),
        vector("s3-get-object-unsigned-payload",
               "S3 GetObject with a versionId and response override, UNSIGNED-PAYLOAD",
               A.S3SigV4Auth, "GET", "examplebucket.s3.us-west-2.amazonaws.com",
               "/logs/2015/08/30/a~b.txt",
               query="response-content-type=text%2Fplain&versionId=3HL4kqtJlcpXroDTDmJ%2BrmSpXd3dIbrHY",
               headers=[("Range", "bytes=0-9")], service="s3", sign_body=True, s3_unsigned=True),
        vector("eks-token-sts-presign",
               "the EKS bearer token: STS GetCallerIdentity presigned for 60 s with x-k8s-aws-id",
               A.SigV4QueryAuth, "GET", "sts.us-west-2.amazonaws.com", "/",
               query="Action=GetCallerIdentity&Version=2011-06-15",
               headers=[("x-k8s-aws-id", "eks1")], service="sts", expires=60,
               known=EKS_SIGNATURE),
        vector("sagemaker-create-cluster-session-token",
               "SageMaker CreateCluster (awsJson1.1) with a session token, botocore style",
               A.SigV4Auth, "POST", "api.sagemaker.us-west-2.amazonaws.com", "/",
               headers=[("Content-Type", "application/x-amz-json-1.1"),
                        ("X-Amz-Target", "SageMaker.CreateCluster")],
               body=CREATE_CLUSTER, token=TOKEN),
        vector("eks-describe-cluster-session-token-sign-body",
               "EKS DescribeCluster (restJson1 GET) with a session token and a signed "
               "x-amz-content-sha256, as the JS SDK sends it",
               A.SigV4Auth, "GET", "eks.us-west-2.amazonaws.com", "/clusters/eks1",
               headers=[("Accept", "application/json")], service="eks", token=TOKEN,
               sign_body=True),
        vector("sts-presign-session-token",
               "STS GetCallerIdentity presigned for 900 s with a session token (signed in the query)",
               A.SigV4QueryAuth, "GET", "sts.us-west-2.amazonaws.com", "/",
               query="Action=GetCallerIdentity&Version=2011-06-15", service="sts",
               token=TOKEN, expires=900),
        vector("s3-presign-get-unsigned-payload",
               "S3 presigned GetObject URL: path as sent, UNSIGNED-PAYLOAD",
               A.S3SigV4QueryAuth, "GET", "examplebucket.s3.us-west-2.amazonaws.com",
               "/reports/q3%20summary.pdf", service="s3", expires=3600),
    ]


def main():
    outdir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "sigv4", "extra")
    os.makedirs(outdir, exist_ok=True)
    for v in vectors():
        with open(os.path.join(outdir, v["name"] + ".json"), "w") as f:
            json.dump(v, f, indent=2, sort_keys=True)
            f.write("\n")
        print(f"{v['name']}: {v['expected']['signature']}")


if __name__ == "__main__":
    main()
