"""Gives a new IAM role view-only access to an EKS cluster in a hypd sandbox
(an access entry with AmazonEKSViewPolicy, cluster scope, username "viewer")
and prints the role's temporary credentials: ACCESS_KEY SECRET SESSION_TOKEN.

usage: python3 eks_viewer.py CLUSTER ROLE_NAME (AWS_ENDPOINT_URL and the keys
come from the environment)."""
import json
import sys

import boto3

cluster, role = sys.argv[1], sys.argv[2]
iam, eks, sts = boto3.client("iam"), boto3.client("eks"), boto3.client("sts")
me = sts.get_caller_identity()["Arn"]
trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"AWS": me},
                                                 "Action": "sts:AssumeRole"}]}
arn = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust))["Role"]["Arn"]
key = sts.assume_role(RoleArn=arn, RoleSessionName=role + "-session")["Credentials"]
eks.create_access_entry(clusterName=cluster, principalArn=arn, username="viewer")
eks.associate_access_policy(clusterName=cluster, principalArn=arn,
                            policyArn="arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy",
                            accessScope={"type": "cluster"})
print(key["AccessKeyId"], key["SecretAccessKey"], key["SessionToken"])
