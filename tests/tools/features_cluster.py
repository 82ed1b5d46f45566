"""The managed-feature tests' view of a hypd sandbox, through boto3 as a
user's own scripts would see it (never through hypd).

usage:
  python3 features_cluster.py make EKS_NAME HYPERPOD_NAME OCTET
      an ACTIVE EKS cluster (API authentication) with its IAM OIDC provider
      and the Mountpoint S3 CSI driver add-on (what cluster_configure_dependencies
      leaves), and an InService HyperPod cluster on it with continuous node
      provisioning, a GPU group "gpu" at zero and a CPU group "cpu" of one
  python3 features_cluster.py look EKS_NAME HYPERPOD_NAME ROLE,... POLICY,... ADDON,... BUCKET,...
      prints JSON: which of the named IAM roles, customer policies, EKS add-ons
      and S3 buckets exist, the Pod Identity associations of the cluster, and
      the HyperPod cluster's TieredStorageConfig, AutoScaling and ClusterRole
(AWS_ENDPOINT_URL and the keys come from the environment)."""
import json
import sys
import time

import boto3
from botocore.exceptions import ClientError

iam, ec2, eks, s3, sm, sts = (boto3.client(s) for s in ("iam", "ec2", "eks", "s3", "sagemaker", "sts"))


def make(eks_name, hp_name, octet):
    eks_trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "eks.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
    sm_trust = json.dumps({"Version": "2012-10-17", "Statement": [{"Effect": "Allow",
        "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}]})
    eks_role = iam.create_role(RoleName=eks_name + "-eks", AssumeRolePolicyDocument=eks_trust)["Role"]["Arn"]
    exec_role = iam.create_role(RoleName=eks_name + "-exec", AssumeRolePolicyDocument=sm_trust)["Role"]["Arn"]
    vpc = ec2.create_vpc(CidrBlock="10.%d.0.0/16" % octet)["Vpc"]["VpcId"]
    zones = [z["ZoneName"] for z in ec2.describe_availability_zones()["AvailabilityZones"]][:2]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock="10.%d.%d.0/24" % (octet, i), AvailabilityZone=z)
               ["Subnet"]["SubnetId"] for i, z in enumerate(zones)]
    sg = ec2.create_security_group(GroupName=eks_name + "-hp", Description="hyperpod", VpcId=vpc)["GroupId"]
    eks.create_cluster(name=eks_name, roleArn=eks_role, resourcesVpcConfig={"subnetIds": subnets},
                       accessConfig={"authenticationMode": "API"})
    eks.get_waiter("cluster_active").wait(name=eks_name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    issuer = eks.describe_cluster(name=eks_name)["cluster"]["identity"]["oidc"]["issuer"]
    iam.create_open_id_connect_provider(Url=issuer, ClientIDList=["sts.amazonaws.com"],
                                        ThumbprintList=["9e99a48a9960b14926bb7f3b02e22da2b0ab7280"])
    eks.create_addon(clusterName=eks_name, addonName="aws-mountpoint-s3-csi-driver")
    eks.get_waiter("addon_active").wait(clusterName=eks_name, addonName="aws-mountpoint-s3-csi-driver",
                                         WaiterConfig={"Delay": 1, "MaxAttempts": 120})
    sm.create_cluster(ClusterName=hp_name, NodeRecovery="None", NodeProvisioningMode="Continuous", InstanceGroups=[
        {"InstanceGroupName": "gpu", "InstanceType": "ml.g5.12xlarge", "InstanceCount": 0, "ExecutionRole": exec_role},
        {"InstanceGroupName": "cpu", "InstanceType": "ml.m5.2xlarge", "InstanceCount": 1, "ExecutionRole": exec_role}],
        Orchestrator={"Eks": {"ClusterArn": eks.describe_cluster(name=eks_name)["cluster"]["arn"]}},
        VpcConfig={"SecurityGroupIds": [sg], "Subnets": [subnets[0]]})
    for _ in range(600):
        if sm.describe_cluster(ClusterName=hp_name)["ClusterStatus"] == "InService":
            break
        time.sleep(0.1)
    print(json.dumps({"eks": eks_name, "hyperpod": hp_name,
                      "status": sm.describe_cluster(ClusterName=hp_name)["ClusterStatus"]}))


def exists(fn):
    try:
        fn()
        return True
    except ClientError as e:
        code = e.response["Error"]["Code"]
        if code in ("NoSuchEntity", "ResourceNotFoundException", "404", "NoSuchBucket", "NotFound"):
            return False
        raise


def names(arg):
    return [x for x in arg.split(",") if x]


def look(eks_name, hp_name, roles, policies, addons, buckets):
    account = sts.get_caller_identity()["Account"]
    out = {
        "roles": [r for r in names(roles) if exists(lambda r=r: iam.get_role(RoleName=r))],
        "policies": [p for p in names(policies) if exists(
            lambda p=p: iam.get_policy(PolicyArn="arn:aws:iam::%s:policy/%s" % (account, p)))],
        "addons": [a for a in names(addons) if exists(lambda a=a: eks.describe_addon(clusterName=eks_name, addonName=a))],
        "buckets": [b for b in names(buckets) if exists(lambda b=b: s3.head_bucket(Bucket=b))],
        "associations": ["%s/%s" % (a["namespace"], a["serviceAccount"]) for a in
                         eks.list_pod_identity_associations(clusterName=eks_name)["associations"]],
    }
    d = sm.describe_cluster(ClusterName=hp_name)
    out["tiered"] = d.get("TieredStorageConfig", {"Mode": "Disable"})
    out["autoscaling"] = d.get("AutoScaling", {"Mode": "Disable"})
    out["cluster_role"] = d.get("ClusterRole")
    out["node_recovery"] = d.get("NodeRecovery")
    out["status"] = d["ClusterStatus"]
    print(json.dumps(out))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        look(*sys.argv[2:8])
