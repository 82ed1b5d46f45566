"""Builds, with boto3 as a user would, an EKS cluster and a HyperPod cluster
whose two instance groups carry the settings a scaling must keep, for
tests/lua/hyperpod_capacity_test.lua:
  gpu  ml.g6e.24xlarge x2, spot, efa-only network interface, threads per
       core 2, deep health checks InstanceStress and InstanceConnectivity,
       a 500 GB EBS volume, its own subnet (OverrideVpcConfig), MinCount 1
  cpu  ml.m5.xlarge x1, on-demand, threads per core 2, deep health check
       InstanceStress, in the cluster's subnets

usage: python3 hyperpod_capacity.py EKS_NAME HYPERPOD_NAME   (AWS_ENDPOINT_URL
and the keys come from the environment). Prints one JSON line: the subnets,
the security group and the role."""
import json
import sys
import time

import boto3

eks_name, hp_name = sys.argv[1], sys.argv[2]
iam, ec2, eks, s3, sm = (boto3.client(s) for s in ("iam", "ec2", "eks", "s3", "sagemaker"))

trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": [
    "eks.amazonaws.com", "sagemaker.amazonaws.com"]}, "Action": ["sts:AssumeRole", "sts:TagSession"]}]})
role = iam.create_role(RoleName=eks_name + "-role", AssumeRolePolicyDocument=trust)["Role"]["Arn"]
vpc = ec2.create_vpc(CidrBlock="10.43.0.0/16")["Vpc"]["VpcId"]
zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.43.%d.0/24" % i, AvailabilityZone=z)["Subnet"]["SubnetId"]
           for i, z in enumerate(zones)]
sg = ec2.create_security_group(GroupName=eks_name, Description="hyperpod", VpcId=vpc)["GroupId"]
bucket = eks_name + "-lcc"
s3.create_bucket(Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": "us-west-2"})
s3.put_object(Bucket=bucket, Key="lcc/on_create.sh", Body=b"#!/bin/bash\n")

eks.create_cluster(name=eks_name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets, "securityGroupIds": [sg]},
                   accessConfig={"authenticationMode": "API"})
eks.get_waiter("cluster_active").wait(name=eks_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})

lcc = {"SourceS3Uri": "s3://%s/lcc/" % bucket, "OnCreate": "on_create.sh"}
sm.create_cluster(ClusterName=hp_name, InstanceGroups=[
    {"InstanceGroupName": "gpu", "InstanceType": "ml.g6e.24xlarge", "InstanceCount": 2, "MinInstanceCount": 1,
     "ExecutionRole": role, "LifeCycleConfig": lcc, "ThreadsPerCore": 2,
     "OnStartDeepHealthChecks": ["InstanceStress", "InstanceConnectivity"],
     "NetworkInterface": {"InterfaceType": "efa-only"}, "CapacityRequirements": {"Spot": {}},
     "InstanceStorageConfigs": [{"EbsVolumeConfig": {"VolumeSizeInGB": 500}}],
     "OverrideVpcConfig": {"SecurityGroupIds": [sg], "Subnets": [subnets[1]]}},
    {"InstanceGroupName": "cpu", "InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "ExecutionRole": role,
     "LifeCycleConfig": lcc, "ThreadsPerCore": 2, "OnStartDeepHealthChecks": ["InstanceStress"]}],
    Orchestrator={"Eks": {"ClusterArn": eks.describe_cluster(name=eks_name)["cluster"]["arn"]}},
    VpcConfig={"SecurityGroupIds": [sg], "Subnets": [subnets[0]]}, NodeRecovery="Automatic",
    NodeProvisioningMode="Continuous")
for _ in range(600):
    if sm.describe_cluster(ClusterName=hp_name)["ClusterStatus"] == "InService":
        break
    time.sleep(0.1)
print(json.dumps({"subnets": subnets, "zones": zones, "security_group": sg, "role": role,
                  "status": sm.describe_cluster(ClusterName=hp_name)["ClusterStatus"]}))
