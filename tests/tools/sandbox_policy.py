#!/usr/bin/env python3
"""Calls under the sandbox's identity policy as boto3 sees them: one JSON
line per case, {"case", "ok": true} for an answer, or {"case", "status",
"code", "message"} as botocore parsed the error. The last case decodes the
EC2 refusal's "Encoded authorization failure message" with
sts:DecodeAuthorizationMessage ({"case", "decoded": {...}}).

Env: AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
(as `hypd sandbox` prints them).
"""
import json
import os

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

CFG = Config(region_name=os.environ.get("AWS_REGION", "us-west-2"), retries={"max_attempts": 1},
             s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=10)
CASES = [
    ("ec2 DescribeVpcs", "ec2", "describe_vpcs", {}),
    ("ec2 CreateVpc", "ec2", "create_vpc", {"CidrBlock": "10.9.0.0/16"}),
    ("iam CreateRole", "iam", "create_role", {"RoleName": "boto-role", "AssumeRolePolicyDocument": "{}"}),
    ("sts GetCallerIdentity", "sts", "get_caller_identity", {}),
    ("eks ListClusters", "eks", "list_clusters", {}),
    ("sagemaker ListClusters", "sagemaker", "list_clusters", {}),
    ("s3 ListObjectsV2", "s3", "list_objects_v2", {"Bucket": "boto-bucket"}),
]


def out(case, **kw):
    print(json.dumps(dict(case=case, **kw)), flush=True)


def client(svc):
    return boto3.client(svc, endpoint_url=os.environ["AWS_ENDPOINT_URL"], config=CFG)


def main():
    encoded = None
    for case, svc, method, params in CASES:
        try:
            getattr(client(svc), method)(**params)
            out(case, ok=True)
        except ClientError as e:
            err = e.response.get("Error", {})
            status = e.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            out(case, status=status, code=err.get("Code"), message=err.get("Message"))
            msg = err.get("Message") or ""
            if svc == "ec2" and "Encoded authorization failure message: " in msg:
                encoded = msg.split("Encoded authorization failure message: ", 1)[1]
    if encoded:
        try:
            r = client("sts").decode_authorization_message(EncodedMessage=encoded)
            out("sts DecodeAuthorizationMessage", decoded=json.loads(r["DecodedMessage"]))
        except ClientError as e:
            out("sts DecodeAuthorizationMessage", code=e.response["Error"].get("Code"),
                message=e.response["Error"].get("Message"))


if __name__ == "__main__":
    main()
