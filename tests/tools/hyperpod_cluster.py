"""Builds a HyperPod-ready EKS cluster in a hypd sandbox with boto3, as a
user would with the AWS SDK: IAM role, VPC and subnets, the EKS cluster
(API authentication), the add-ons the training operator needs, and a
HyperPod cluster whose nodes join Kubernetes.

usage: python3 hyperpod_cluster.py EKS_NAME HYPERPOD_NAME INSTANCE_TYPE COUNT
(AWS_ENDPOINT_URL and the keys come from the environment). Prints the
EKS endpoint."""
import json
import sys
import time

import boto3

eks_name, hp_name, itype, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
iam, ec2, eks, s3, sm = (boto3.client(s) for s in ("iam", "ec2", "eks", "s3", "sagemaker"))

trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": [
    "eks.amazonaws.com", "sagemaker.amazonaws.com", "pods.eks.amazonaws.com"]},
    "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
role = iam.create_role(RoleName=eks_name + "-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.42.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
           for i, z in enumerate(zones)]
sg = ec2.create_security_group(GroupName=eks_name, Description="hyperpod", VpcId=vpc)["GroupId"]
s3.create_bucket(Bucket=eks_name + "-lcc", CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
s3.put_object(Bucket=eks_name + "-lcc", Key="lcc/on_create.sh", Body=b"#!/bin/bash\n")

eks.create_cluster(name=eks_name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets, "securityGroupIds": [sg]},
                   accessConfig={"authenticationMode": "API"})
eks.get_waiter("cluster_active").wait(name=eks_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})


def addon(name):
    eks.create_addon(clusterName=eks_name, addonName=name)
    eks.get_waiter("addon_active").wait(clusterName=eks_name, addonName=name,
                                         WaiterConfig={"Delay": 1, "MaxAttempts": 120})


for name in ("cert-manager", "eks-pod-identity-agent", "amazon-sagemaker-hyperpod-training-operator"):
    addon(name)

sm.create_cluster(ClusterName=hp_name, InstanceGroups=[{
    "InstanceGroupName": "workers", "InstanceType": itype, "InstanceCount": count, "ExecutionRole": role,
    "LifeCycleConfig": {"SourceS3Uri": "s3://%s-lcc/lcc/" % eks_name, "OnCreate": "on_create.sh"},
    "ThreadsPerCore": 1}],
    Orchestrator={"Eks": {"ClusterArn": eks.describe_cluster(name=eks_name)["cluster"]["arn"]}},
    VpcConfig={"SecurityGroupIds": [sg], "Subnets": [subnets[0]]}, NodeRecovery="Automatic")
for _ in range(300):
    if sm.describe_cluster(ClusterName=hp_name)["ClusterStatus"] == "InService":
        break
    time.sleep(0.2)
print(eks.describe_cluster(name=eks_name)["cluster"]["endpoint"])
