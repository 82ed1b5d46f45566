"""Builds, with boto3 as a user would, an EKS cluster in a hypd sandbox with
the Mountpoint for S3 CSI driver add-on and a HyperPod cluster of one GPU
node (ml.g5.12xlarge) and one CPU node (ml.m5.2xlarge), for the model
download tests.

usage: python3 model_cluster.py EKS_NAME (AWS_ENDPOINT_URL and the keys come
from the environment). Prints the EKS endpoint once both nodes are InService."""
import json
import sys
import time

import boto3

name = sys.argv[1]
iam, ec2, eks, sm = (boto3.client(s) for s in ("iam", "ec2", "eks", "sagemaker"))
trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": [
    "eks.amazonaws.com", "sagemaker.amazonaws.com"]}, "Action": "sts:AssumeRole"}]})
role = iam.create_role(RoleName=name + "-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
vpc = ec2.create_vpc(CidrBlock="10.44.0.0/16")["Vpc"]["VpcId"]
subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.44.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
           for i, z in enumerate(("us-west-2a", "us-west-2b"))]
sg = ec2.create_security_group(GroupName=name, Description="hyperpod", VpcId=vpc)["GroupId"]
tag = name[5:] if name.startswith("hypd-") else name
eks.create_cluster(name=name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets, "securityGroupIds": [sg]},
                   accessConfig={"authenticationMode": "API"}, tags={"hypd:cluster-tag": tag})
eks.get_waiter("cluster_active").wait(name=name, WaiterConfig={"Delay": 1, "MaxAttempts": 300})
eks.create_addon(clusterName=name, addonName="aws-mountpoint-s3-csi-driver")
eks.get_waiter("addon_active").wait(clusterName=name, addonName="aws-mountpoint-s3-csi-driver",
                                     WaiterConfig={"Delay": 1, "MaxAttempts": 300})
sm.create_cluster(ClusterName=name + "-hp", InstanceGroups=[
    {"InstanceGroupName": "gpu", "InstanceType": "ml.g5.12xlarge", "InstanceCount": 1, "ExecutionRole": role},
    {"InstanceGroupName": "cpu", "InstanceType": "ml.m5.2xlarge", "InstanceCount": 1, "ExecutionRole": role}],
    Orchestrator={"Eks": {"ClusterArn": eks.describe_cluster(name=name)["cluster"]["arn"]}},
    VpcConfig={"SecurityGroupIds": [sg], "Subnets": [subnets[0]]}, NodeRecovery="None")
for _ in range(600):
    if sm.describe_cluster(ClusterName=name + "-hp")["ClusterStatus"] == "InService":
        break
    time.sleep(0.2)
print(eks.describe_cluster(name=name)["cluster"]["endpoint"])
