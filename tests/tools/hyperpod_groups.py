"""boto3's view of a HyperPod cluster's instance groups, for the capacity
tests (tests/lua/hyperpod_capacity_test.lua): what hypd did, read back
with the AWS SDK rather than with hypd.

usage: python3 hyperpod_groups.py HYPERPOD_NAME
         prints {"status": ClusterStatus, "groups": {name: DescribeCluster group}}
       python3 hyperpod_groups.py HYPERPOD_NAME 'UPDATE_CLUSTER_JSON'
         calls UpdateCluster(ClusterName=HYPERPOD_NAME, **json) and prints
         {"ok": true} or {"error": code, "message": text}"""
import json
import sys

import boto3
import botocore.exceptions

sm = boto3.client("sagemaker")
name = sys.argv[1]
if len(sys.argv) > 2:
    try:
        sm.update_cluster(ClusterName=name, **json.loads(sys.argv[2]))
        print(json.dumps({"ok": True}))
    except botocore.exceptions.ClientError as e:
        print(json.dumps({"error": e.response["Error"]["Code"], "message": e.response["Error"]["Message"]}))
    sys.exit(0)
d = sm.describe_cluster(ClusterName=name)
print(json.dumps({"status": d["ClusterStatus"], "groups": {g["InstanceGroupName"]: g for g in d["InstanceGroups"]}},
                 default=str))
