"""Makes EKS clusters (API authentication, the caller an admin) in a hypd
sandbox with boto3, one per Kubernetes version given, named NAME-<major>-<minor>.

usage: python3 eks_clusters.py NAME VERSION... (AWS_ENDPOINT_URL and the keys
come from the environment). Prints each cluster's name."""
import json
import sys

import boto3

name, versions = sys.argv[1], sys.argv[2:]
iam, ec2, eks = (boto3.client(s) for s in ("iam", "ec2", "eks"))
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {
    "Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
role = iam.create_role(RoleName=name + "-eks", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
vpc = ec2.create_vpc(CidrBlock="10.44.0.0/16")["Vpc"]["VpcId"]
zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.44.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
           for i, z in enumerate(zones)]
names = []
for v in versions:
    n = "%s-%s" % (name, v.replace(".", "-"))
    eks.create_cluster(name=n, version=v, roleArn=role, resourcesVpcConfig={"subnetIds": subnets},
                       accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True})
    names.append(n)
for n in names:
    eks.get_waiter("cluster_active").wait(name=n, WaiterConfig={"Delay": 1, "MaxAttempts": 600})
    print(n)
