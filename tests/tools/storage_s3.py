"""What the storage tests do with boto3 against a hypd sandbox, as a user
would with the AWS SDK (AWS_ENDPOINT_URL and the keys come from the
environment):

  storage_s3.py cluster NAME   an ACTIVE EKS cluster NAME (tag hypd:cluster-tag
                               = NAME without hypd-) with the Mountpoint for S3
                               CSI add-on ACTIVE; prints the endpoint
  storage_s3.py put BUCKET     a tree of objects: three at the top, 250 under
                               datasets/, two under models/, one under
                               checkpoints/step-1/; versioning on and one
                               object overwritten and one deleted; prints the
                               number of keys listed
  storage_s3.py versions BUCKET  prints how many versions and delete markers
                               ListObjectVersions pages list
  storage_s3.py gone BUCKET    exits 0 when HeadBucket answers 404
"""
import json
import sys

import boto3
import botocore.exceptions

cmd, arg = sys.argv[1], sys.argv[2]


def cluster(name):
    iam, ec2, eks = (boto3.client(s) for s in ("iam", "ec2", "eks"))
    trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {
        "Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
    role = iam.create_role(RoleName=name + "-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
    vpc = ec2.create_vpc(CidrBlock="10.43.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.43.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
               for i, z in enumerate(("us-west-2a", "us-west-2b"))]
    tag = name[5:] if name.startswith("hypd-") else name
    eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
                       accessConfig={"authenticationMode": "API"}, tags={"hypd:cluster-tag": tag})
    eks.get_waiter("cluster_active").wait(name=name, WaiterConfig={"Delay": 1, "MaxAttempts": 300})
    eks.create_addon(clusterName=name, addonName="aws-mountpoint-s3-csi-driver")
    eks.get_waiter("addon_active").wait(clusterName=name, addonName="aws-mountpoint-s3-csi-driver",
                                         WaiterConfig={"Delay": 1, "MaxAttempts": 300})
    print(eks.describe_cluster(name=name)["cluster"]["endpoint"])


def put(bucket):
    s3 = boto3.client("s3")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    for k in ("README.md", "config.yaml", "notes.txt"):
        s3.put_object(Bucket=bucket, Key=k, Body=b"top " + k.encode())
    for i in range(250):
        s3.put_object(Bucket=bucket, Key="datasets/img-%03d.jpg" % i, Body=b"x" * (i + 1))
    s3.put_object(Bucket=bucket, Key="models/llama/config.json", Body=b"{}")
    s3.put_object(Bucket=bucket, Key="models/llama/weights.bin", Body=b"w" * 4096)
    s3.put_object(Bucket=bucket, Key="checkpoints/step-1/model.pt", Body=b"c" * 100)
    s3.put_object(Bucket=bucket, Key="config.yaml", Body=b"second version")
    s3.delete_object(Bucket=bucket, Key="notes.txt")
    n = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 100}):
        n += page["KeyCount"]
    print(n)


def versions(bucket):
    s3 = boto3.client("s3")
    v = m = 0
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket):
        v += len(page.get("Versions", []))
        m += len(page.get("DeleteMarkers", []))
    print(v, m)


def gone(bucket):
    try:
        boto3.client("s3").head_bucket(Bucket=bucket)
    except botocore.exceptions.ClientError as e:
        sys.exit(0 if e.response["Error"]["Code"] == "404" else 1)
    sys.exit(1)


{"cluster": cluster, "put": put, "versions": versions, "gone": gone}[cmd](arg)
