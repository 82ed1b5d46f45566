"""Makes EKS clusters (API authentication, the caller an admin) in a hypd
sandbox with boto3, one per Kubernetes version given, named NAME-<major>-<minor>.

usage: python3 eks_clusters.py NAME VERSION... [+ADDON...] (AWS_ENDPOINT_URL and
the keys come from the environment): each +ADDON is installed on every cluster,
in order, each waited for (+ADDON=JSON: with those configurationValues). Prints each cluster's name."""
import json
import sys

import boto3

name = sys.argv[1]
versions = [a for a in sys.argv[2:] if not a.startswith("+")]
addons = [a[1:] for a in sys.argv[2:] if a.startswith("+")]
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
    for a in addons:
        a, _, config = a.partition("=")
        extra = {"configurationValues": config} if config else {}
        eks.create_addon(clusterName=n, addonName=a, **extra)
        eks.get_waiter("addon_active").wait(clusterName=n, addonName=a, WaiterConfig={"Delay": 1, "MaxAttempts": 600})
    print(n)
