#!/usr/bin/env python3
"""Signatures per second of botocore's SigV4 signer on the requests of
sigv4_bench.c (SageMaker CreateCluster POST, EKS DescribeCluster GET, STS
GetCallerIdentity presigned for 60 s), signed round robin.

    python3 tests/bench/sigv4_botocore.py [SECONDS]

Each signature builds a fresh AWSRequest (add_auth mutates it, and botocore
builds one per API call too); the signer objects are reused, which is kinder
to botocore than its own clients are. Prints
"RESULT botocore <signatures/s> <sig A> <sig B> <sig C>".
"""
import datetime
import os
import sys
import time
from unittest import mock

import botocore.auth as A
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

CREATE_CLUSTER = (
    b'{"ClusterName":"hp-demo","InstanceGroups":[{"InstanceCount":2,"InstanceGroupName":"workers",'
    b'"ExecutionRole":"arn:aws:iam::123456789012:role/HyperPodExec","InstanceType":"ml.g5.8xlarge",'
    b'"LifeCycleConfig":{"SourceS3Uri":"s3://bucket/lifecycle/","OnCreate":"on_create.sh"},'
    b'"ThreadsPerCore":1}],"VpcConfig":{"SecurityGroupIds":["sg-0123"],"Subnets":["subnet-0123"]},'
    b'"Tags":[{"Key":"team","Value":"ml"}],"Orchestrator":{"Eks":{"ClusterArn":'
    b'"arn:aws:eks:us-west-2:123456789012:cluster/eks1"}},"NodeRecovery":"Automatic"}')


class Fixed(datetime.datetime):
    utcnow = classmethod(lambda cls: cls(2015, 8, 30, 12, 36))
    now = classmethod(lambda cls, tz=None: cls(2015, 8, 30, 12, 36, tzinfo=tz))


def main():
    seconds = float(sys.argv[1] if len(sys.argv) > 1 else os.environ.get("SIGV4_BENCH_SECONDS", "1"))
    creds = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    sm = A.SigV4Auth(creds, "sagemaker", "us-west-2")
    eks = A.SigV4Auth(creds, "eks", "us-west-2")
    sts = A.SigV4QueryAuth(creds, "sts", "us-west-2", expires=60)

    def sign_sm():
        r = AWSRequest(method="POST", url="https://api.sagemaker.us-west-2.amazonaws.com/",
                       data=CREATE_CLUSTER,
                       headers={"Content-Type": "application/x-amz-json-1.1",
                                "X-Amz-Target": "SageMaker.CreateCluster"})
        sm.add_auth(r)
        return r.headers["Authorization"].rsplit("Signature=", 1)[1]

    def sign_eks():
        r = AWSRequest(method="GET", url="https://eks.us-west-2.amazonaws.com/clusters/eks1",
                       data=b"", headers={"Accept": "application/json"})
        eks.add_auth(r)
        return r.headers["Authorization"].rsplit("Signature=", 1)[1]

    def sign_sts():
        r = AWSRequest(method="GET", url="https://sts.us-west-2.amazonaws.com/",
                       params={"Action": "GetCallerIdentity", "Version": "2011-06-15"},
                       headers={"x-k8s-aws-id": "eks1"})
        sts.add_auth(r)
        return r.url.rsplit("X-Amz-Signature=", 1)[1]

    fns = [sign_sm, sign_eks, sign_sts]
    with mock.patch.object(A.datetime, "datetime", Fixed):
        sigs = [f() for f in fns]
        n, t0 = 0, time.perf_counter()
        while True:
            for _ in range(100):
                for f in fns:
                    f()
            n += 300
            dt = time.perf_counter() - t0
            if dt >= seconds:
                break
    print(f"RESULT botocore {n / dt:.0f} {' '.join(sigs)}")


if __name__ == "__main__":
    main()
