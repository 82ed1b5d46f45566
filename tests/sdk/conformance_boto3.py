#!/usr/bin/env python3
"""The sandbox judged by boto3: a shorter provisioning run than the
JavaScript harness (network, role, bucket, EKS to ACTIVE with an add-on and an
access entry and a managed node group scaled and deleted, HyperPod to
InService with its nodes, MLflow, training plans, FSx, EC2 regions and
boto3's paginators over small pages), then modelled errors asserted by their code and, where the
model declares them, by boto3's exception class.

Env: AWS_ENDPOINT_URL, AWS_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
(as `hypd sandbox` prints them); CONFORMANCE_TAG names the resources;
CONFORMANCE_BUDGET_S bounds all waiting (default 15).
Output: TAP, one line per check, the plan last. A failed step never stops
the run. Exit 0 whatever the checks say; 1 only if the harness breaks.
"""
import json
import os
import sys
import time
import traceback
import uuid

try:
    import boto3
    from botocore.config import Config
    from botocore.exceptions import BotoCoreError, ClientError
except ImportError:
    print("ok 1 - the boto3 harness # SKIP boto3 is absent")
    print("1..1")
    sys.exit(0)

REGION = os.environ.get("AWS_REGION", "us-west-2")
ACCOUNT = "123456789012"
TAG = os.environ.get("CONFORMANCE_TAG") or "b" + uuid.uuid4().hex[:6]
DEADLINE = time.monotonic() + float(os.environ.get("CONFORMANCE_BUDGET_S", "15"))
CONFIG = Config(region_name=REGION, retries={"max_attempts": 1, "mode": "standard"},
                s3={"addressing_style": "path"}, connect_timeout=5, read_timeout=10)
LABEL = {"sts": "STS", "iam": "IAM", "ec2": "EC2", "s3": "S3", "eks": "EKS", "sagemaker": "SageMaker",
         "fsx": "FSx", "service-quotas": "Service Quotas"}
CLIENTS = {svc: boto3.client(svc, endpoint_url=os.environ.get("AWS_ENDPOINT_URL"), config=CONFIG)
           for svc in LABEL}
MISSING_ID = "0123456789abcdef0"

called = set()
unanswered = 0
ctx = {}
n = 0
failed = 0


class Missing(Exception):
    """A step needs what an earlier step failed to produce."""


def call(svc, op, _client=None, **params):
    """Calls operation `op` (API name, e.g. "CreateVpc") of service `svc`. After three
    calls in a row get no HTTP answer at all, the rest fail at once."""
    global unanswered
    client = _client or CLIENTS[svc]
    called.add(LABEL[svc] + " " + op)
    method = next((m for m, api in client.meta.method_to_api_mapping.items() if api == op), None)
    if method is None:
        raise AttributeError("harness: boto3 %s has no operation %s" % (svc, op))
    if unanswered >= 3:
        raise RuntimeError("not sent: the sandbox stopped answering")
    try:
        out = getattr(client, method)(**params)
    except ClientError:
        unanswered = 0
        raise
    except BotoCoreError:
        unanswered += 1
        raise
    unanswered = 0
    return out


def one_line(s):
    return " ".join(str(s).split())[:400]


def describe(e):
    if isinstance(e, Missing):
        return str(e)
    if isinstance(e, ClientError):
        err = e.response.get("Error", {})
        meta = e.response.get("ResponseMetadata", {})
        return one_line("%s: %s (HTTP %s)" % (err.get("Code"), err.get("Message"), meta.get("HTTPStatusCode")))
    return one_line("%s: %s" % (type(e).__name__, e))


def report(ok, label, why=None):
    global n, failed
    n += 1
    if ok:
        print("ok %d - %s" % (n, label), flush=True)
    else:
        failed += 1
        print("not ok %d - %s # %s" % (n, label, why), flush=True)


def check(label):
    """Decorator: runs the function now as one check."""
    def run(fn):
        try:
            fn()
            report(True, label)
        except Exception as e:  # every failure is a TAP line, never a stop
            report(False, label, describe(e))
        return fn
    return run


def expect_error(label, code, fn, svc=None):
    """fn must fail with the AWS error `code`; if `svc` models it, as its exception class too."""
    try:
        fn()
    except Missing as e:
        return report(False, label, str(e))
    except ClientError as e:
        got = e.response.get("Error", {}).get("Code")
        if got != code:
            return report(False, label, "expected %s, got %s" % (code, describe(e)))
        cls = getattr(CLIENTS[svc].exceptions, code, None) if svc else None
        if cls is not None and not isinstance(e, cls):
            return report(False, label, "the code is %s but boto3 raised %s" % (code, type(e).__name__))
        return report(True, label)
    except Exception as e:
        return report(False, label, "expected %s, got %s" % (code, describe(e)))
    report(False, label, "expected %s, but the call succeeded" % code)


def need(*keys):
    gone = [k for k in keys if ctx.get(k) is None]
    if gone:
        raise Missing("needs %s, which an earlier step did not produce" % ", ".join(gone))
    return [ctx[k] for k in keys] if len(keys) > 1 else ctx[keys[0]]


def eq(got, want, what):
    if got != want:
        raise AssertionError("%s: expected %r, got %r" % (what, want, got))


def ok(cond, what):
    if not cond:
        raise AssertionError(what)


def until(what, fn, done):
    """Polls fn every 20 ms until done(value); fails when the wait budget is spent."""
    while True:
        last = fn()
        if done(last):
            return last
        if time.monotonic() > DEADLINE:
            raise AssertionError("%s stayed %r (wait budget spent)" % (what, last))
        time.sleep(0.02)


def trust(service):
    return json.dumps({"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}]})


def tags(**kv):
    return [{"Key": k, "Value": v} for k, v in kv.items()]


def run():
    @check("STS GetCallerIdentity: the sandbox account")
    def _():
        eq(call("sts", "GetCallerIdentity")["Account"], ACCOUNT, "Account")

    # network
    @check("EC2 DescribeAvailabilityZones: two zones or more")
    def _():
        zones = call("ec2", "DescribeAvailabilityZones")["AvailabilityZones"]
        ok(len(zones) >= 2, "%d zones" % len(zones))
        ctx["azs"] = [z["ZoneName"] for z in zones[:2]]

    @check("EC2 CreateVpc: a tagged VPC")
    def _():
        vpc = call("ec2", "CreateVpc", CidrBlock="10.100.0.0/16", TagSpecifications=[
            {"ResourceType": "vpc", "Tags": tags(Name=TAG + "-vpc")}])["Vpc"]
        ok(vpc["VpcId"].startswith("vpc-"), vpc["VpcId"])
        ctx["vpc"] = vpc["VpcId"]

    @check("EC2 CreateSubnet: two private subnets")
    def _():
        vpc, azs = need("vpc", "azs")
        ctx["subnets"] = [call("ec2", "CreateSubnet", VpcId=vpc, CidrBlock="10.100.%d.0/24" % (7 + i),
                               AvailabilityZone=azs[i])["Subnet"]["SubnetId"] for i in range(2)]

    @check("EC2 DescribeSubnets: by VPC filter")
    def _():
        vpc = need("vpc")
        eq(len(call("ec2", "DescribeSubnets", Filters=[{"Name": "vpc-id", "Values": [vpc]}])["Subnets"]), 2, "subnets")

    @check("EC2 CreateSecurityGroup: the cluster group")
    def _():
        vpc = need("vpc")
        ctx["sg"] = call("ec2", "CreateSecurityGroup", GroupName=TAG + "-sg", Description="hyperpod",
                         VpcId=vpc)["GroupId"]

    @check("EC2 AuthorizeSecurityGroupIngress: self-referencing rule")
    def _():
        sg = need("sg")
        call("ec2", "AuthorizeSecurityGroupIngress", GroupId=sg,
             IpPermissions=[{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": sg}]}])

    @check("EC2 CreateInternetGateway: attached to the VPC")
    def _():
        vpc = need("vpc")
        igw = call("ec2", "CreateInternetGateway")["InternetGateway"]["InternetGatewayId"]
        call("ec2", "AttachInternetGateway", InternetGatewayId=igw, VpcId=vpc)

    @check("EC2 DescribeVpcs: by tag")
    def _():
        vpc = need("vpc")
        vpcs = call("ec2", "DescribeVpcs", Filters=[{"Name": "tag:Name", "Values": [TAG + "-vpc"]}])["Vpcs"]
        eq([v["VpcId"] for v in vpcs], [vpc], "VPCs")

    @check("EC2 DescribeRegions: the default regions; AllRegions adds the opt-in ones")
    def _():
        names = [r["RegionName"] for r in call("ec2", "DescribeRegions")["Regions"]]
        ok(REGION in names and "us-east-1" in names, "default regions: %s" % names)
        ok("af-south-1" not in names, "an opt-in region answers without AllRegions")
        every = call("ec2", "DescribeRegions", AllRegions=True)["Regions"]
        opt = [r for r in every if r["RegionName"] == "af-south-1"]
        eq([r["OptInStatus"] for r in opt], ["not-opted-in"], "af-south-1")
        ok(all(r["Endpoint"] == "ec2.%s.amazonaws.com" % r["RegionName"] for r in every), "endpoints")
        one = call("ec2", "DescribeRegions", RegionNames=[REGION])["Regions"]
        eq([r["RegionName"] for r in one], [REGION], "by name")

    @check("EC2 CreateVpc and CreateSubnet: more VPCs, subnets, route tables and groups than one small page")
    def _():
        vpc = need("vpc")
        for i in range(4):
            call("ec2", "CreateVpc", CidrBlock="10.%d.0.0/16" % (110 + i), TagSpecifications=[
                {"ResourceType": "vpc", "Tags": tags(Name="%s-page-%d" % (TAG, i))}])
        for i in range(5):
            call("ec2", "CreateSubnet", VpcId=vpc, CidrBlock="10.100.%d.0/24" % (20 + i))
        ctx["paging"] = True

    def pages(op, key, size=5, **params):
        """Every page boto3's paginator fetches with MaxResults=size, and the unpaged answer."""
        client = CLIENTS["ec2"]
        method = next(m for m, api in client.meta.method_to_api_mapping.items() if api == op)
        called.add("EC2 " + op)
        got = list(client.get_paginator(method).paginate(PaginationConfig={"PageSize": size}, **params))
        return got, call("ec2", op, **params)[key]

    for op, key, ident in (("DescribeSubnets", "Subnets", "SubnetId"), ("DescribeVpcs", "Vpcs", "VpcId"),
                           ("DescribeRouteTables", "RouteTables", "RouteTableId"),
                           ("DescribeSecurityGroups", "SecurityGroups", "GroupId")):
        @check("EC2 %s: boto3's paginator with MaxResults=5 sees several pages, together the whole list" % op)
        def _(op=op, key=key, ident=ident):
            need("paging")
            got, whole = pages(op, key)
            ok(len(got) >= 2, "%d page(s) of %s" % (len(got), [len(p[key]) for p in got]))
            ok(all(len(p[key]) <= 5 for p in got), "a page holds at most 5: %s" % [len(p[key]) for p in got])
            ok("NextToken" not in got[-1], "the last page has no NextToken")
            ok(all(p.get("NextToken") for p in got[:-1]), "every other page has one")
            eq(sorted(x[ident] for p in got for x in p[key]), sorted(x[ident] for x in whole), "the items")

    expect_error("EC2 DescribeSubnets: a NextToken EC2 did not give is InvalidParameterValue", "InvalidParameterValue",
                 lambda: call("ec2", "DescribeSubnets", NextToken="not-a-token"))
    expect_error("EC2 DescribeNetworkInterfaces: MaxResults with ids is InvalidParameterCombination",
                 "InvalidParameterCombination",
                 lambda: call("ec2", "DescribeNetworkInterfaces", NetworkInterfaceIds=["eni-" + MISSING_ID],
                              MaxResults=5))

    # roles and bucket
    @check("IAM CreateRole: the HyperPod execution role")
    def _():
        role = call("iam", "CreateRole", RoleName=TAG + "-exec", AssumeRolePolicyDocument=trust(
            "sagemaker.amazonaws.com"))["Role"]
        eq(role["Arn"], "arn:aws:iam::%s:role/%s-exec" % (ACCOUNT, TAG), "Arn")
        ctx["exec"] = role["Arn"]

    @check("IAM CreateRole: the EKS cluster role")
    def _():
        ctx["eks_role"] = call("iam", "CreateRole", RoleName=TAG + "-eks",
                               AssumeRolePolicyDocument=trust("eks.amazonaws.com"))["Role"]["Arn"]

    @check("IAM AttachRolePolicy: a managed policy")
    def _():
        need("exec")
        call("iam", "AttachRolePolicy", RoleName=TAG + "-exec",
             PolicyArn="arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy")

    @check("IAM ListAttachedRolePolicies: the policy is attached")
    def _():
        need("exec")
        pols = call("iam", "ListAttachedRolePolicies", RoleName=TAG + "-exec")["AttachedPolicies"]
        eq([p["PolicyName"] for p in pols], ["AmazonSageMakerClusterInstanceRolePolicy"], "policies")

    @check("IAM GetRole: the role reads back")
    def _():
        need("exec")
        eq(call("iam", "GetRole", RoleName=TAG + "-exec")["Role"]["RoleName"], TAG + "-exec", "RoleName")

    bucket = "sagemaker-%s-lifecycle" % TAG

    @check("S3 CreateBucket: the lifecycle bucket")
    def _():
        call("s3", "CreateBucket", Bucket=bucket, CreateBucketConfiguration={"LocationConstraint": REGION})
        ctx["bucket"] = bucket

    @check("S3 PutObject: the lifecycle script")
    def _():
        need("bucket")
        call("s3", "PutObject", Bucket=bucket, Key="lifecycle/on_create.sh", Body=b"#!/bin/bash\necho hi\n")
        ctx["lifecycle"] = "s3://%s/lifecycle/" % bucket

    @check("S3 GetObject: the script reads back")
    def _():
        need("lifecycle")
        body = call("s3", "GetObject", Bucket=bucket, Key="lifecycle/on_create.sh")["Body"].read()
        eq(body, b"#!/bin/bash\necho hi\n", "Body")

    @check("S3 ListObjectsV2: one key under the prefix")
    def _():
        need("lifecycle")
        r = call("s3", "ListObjectsV2", Bucket=bucket, Prefix="lifecycle/")
        eq([o["Key"] for o in r.get("Contents", [])], ["lifecycle/on_create.sh"], "keys")

    # S3 versions and tags (what storage_delete empties and storage_create_s3 tags)
    vbucket = "hypd-%s-versions" % TAG

    @check("S3 versioned bucket: tags at CreateBucket, versions, a delete marker, ListObjectVersions pages")
    def _():
        call("s3", "CreateBucket", Bucket=vbucket, CreateBucketConfiguration={
            "LocationConstraint": REGION, "Tags": [{"Key": "hypd:cluster-tag", "Value": TAG}]})
        eq(call("s3", "GetBucketTagging", Bucket=vbucket)["TagSet"], [{"Key": "hypd:cluster-tag", "Value": TAG}],
           "TagSet")
        call("s3", "PutBucketVersioning", Bucket=vbucket, VersioningConfiguration={"Status": "Enabled"})
        for body in (b"one", b"two"):
            call("s3", "PutObject", Bucket=vbucket, Key="data/a", Body=body)
        call("s3", "PutObject", Bucket=vbucket, Key="data/b", Body=b"b")
        d = call("s3", "DeleteObject", Bucket=vbucket, Key="data/b")
        eq(d["DeleteMarker"], True, "DeleteMarker")
        seen = []
        for page in CLIENTS["s3"].get_paginator("list_object_versions").paginate(
                Bucket=vbucket, PaginationConfig={"PageSize": 2}):
            seen += [(v["Key"], v["VersionId"]) for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
        eq(len(seen), 4, "versions and markers")
        r = call("s3", "DeleteObjects", Bucket=vbucket, Delete={"Objects": [{"Key": k, "VersionId": v}
                                                                       for k, v in seen]})
        eq(len(r.get("Deleted", [])), 4, "Deleted")
        call("s3", "DeleteBucket", Bucket=vbucket)

    # EKS
    eks_name = "eks-cluster-" + TAG

    @check("EKS CreateCluster: CREATING")
    def _():
        role, subnets, sg = need("eks_role", "subnets", "sg")
        c = call("eks", "CreateCluster", name=eks_name, roleArn=role,
                 resourcesVpcConfig={"subnetIds": subnets, "securityGroupIds": [sg]},
                 accessConfig={"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": True})["cluster"]
        eq(c["status"], "CREATING", "status")
        ctx["eks_arn"] = c["arn"]

    @check("EKS DescribeCluster: ACTIVE (boto3's cluster_active waiter)")
    def _():
        need("eks_arn")
        # boto3's own waiter: its acceptors read the sandbox's cluster.status
        called.add("EKS DescribeCluster")
        CLIENTS["eks"].get_waiter("cluster_active").wait(name=eks_name, WaiterConfig={"Delay": 0.02, "MaxAttempts": 500})
        c = call("eks", "DescribeCluster", name=eks_name)["cluster"]
        eq(c["status"], "ACTIVE", "status")
        ok(c["endpoint"].startswith("https://"), "endpoint")
        ctx["eks_active"] = True

    @check("EKS ListClusters: lists it")
    def _():
        need("eks_arn")
        ok(eks_name in call("eks", "ListClusters")["clusters"], "listed")

    @check("EKS CreateAddon: eks-pod-identity-agent becomes ACTIVE (boto3's addon_active waiter)")
    def _():
        need("eks_active")
        call("eks", "CreateAddon", clusterName=eks_name, addonName="eks-pod-identity-agent")
        called.add("EKS DescribeAddon")
        CLIENTS["eks"].get_waiter("addon_active").wait(clusterName=eks_name, addonName="eks-pod-identity-agent",
                                                       WaiterConfig={"Delay": 0.02, "MaxAttempts": 500})

    @check("EKS ListAddons: the add-on")
    def _():
        need("eks_active")
        eq(call("eks", "ListAddons", clusterName=eks_name)["addons"], ["eks-pod-identity-agent"], "addons")

    @check("EKS CreateAccessEntry: the execution role")
    def _():
        _, role = need("eks_active", "exec")
        eq(call("eks", "CreateAccessEntry", clusterName=eks_name, principalArn=role)["accessEntry"]["principalArn"],
           role, "principalArn")

    @check("EKS ListAccessEntries: the execution role is listed")
    def _():
        role = need("exec")
        ok(role in call("eks", "ListAccessEntries", clusterName=eks_name)["accessEntries"], "listed")

    # a managed node group
    ng = TAG + "-system"

    @check("IAM CreateRole: the node role")
    def _():
        ctx["node_role"] = call("iam", "CreateRole", RoleName=TAG + "-node",
                                AssumeRolePolicyDocument=trust("ec2.amazonaws.com"))["Role"]["Arn"]

    @check("EKS CreateNodegroup: CREATING, then ACTIVE (boto3's nodegroup_active waiter)")
    def _():
        _, role, subnets = need("eks_active", "node_role", "subnets")
        g = call("eks", "CreateNodegroup", clusterName=eks_name, nodegroupName=ng, nodeRole=role, subnets=subnets,
                 instanceTypes=["m5.large"], scalingConfig={"minSize": 1, "maxSize": 3, "desiredSize": 2},
                 labels={"role": "system"})["nodegroup"]
        eq(g["status"], "CREATING", "status")
        ok(g["nodegroupArn"].startswith("arn:aws:eks:%s:%s:nodegroup/%s/%s/" % (REGION, ACCOUNT, eks_name, ng)),
           g["nodegroupArn"])
        called.add("EKS DescribeNodegroup")
        CLIENTS["eks"].get_waiter("nodegroup_active").wait(clusterName=eks_name, nodegroupName=ng,
                                                           WaiterConfig={"Delay": 0.02, "MaxAttempts": 500})
        g = call("eks", "DescribeNodegroup", clusterName=eks_name, nodegroupName=ng)["nodegroup"]
        eq(g["scalingConfig"], {"minSize": 1, "maxSize": 3, "desiredSize": 2}, "scalingConfig")
        eq((g["capacityType"], g["instanceTypes"], g["labels"]), ("ON_DEMAND", ["m5.large"], {"role": "system"}),
           "capacity type, instance types, labels")
        ctx["ng"] = g["nodegroupArn"]

    @check("EKS ListNodegroups: lists it")
    def _():
        need("ng")
        eq(call("eks", "ListNodegroups", clusterName=eks_name)["nodegroups"], [ng], "nodegroups")

    @check("EKS UpdateNodegroupConfig: scale to three; the update succeeds and the group is ACTIVE at 3")
    def _():
        need("ng")
        u = call("eks", "UpdateNodegroupConfig", clusterName=eks_name, nodegroupName=ng,
                 scalingConfig={"desiredSize": 3})["update"]
        eq((u["type"], u["status"], u["params"]), ("ConfigUpdate", "InProgress", [{"type": "DesiredSize", "value": "3"}]),
           "the update")
        done = until("the update", lambda: call("eks", "DescribeUpdate", name=eks_name, updateId=u["id"],
                                                nodegroupName=ng)["update"], lambda x: x["status"] != "InProgress")
        eq(done["status"], "Successful", "update status")
        g = call("eks", "DescribeNodegroup", clusterName=eks_name, nodegroupName=ng)["nodegroup"]
        eq((g["status"], g["scalingConfig"]["desiredSize"]), ("ACTIVE", 3), "status and desiredSize")

    # HyperPod
    hp = "hp-cluster-" + TAG

    def group(name, count):
        return {"InstanceGroupName": name, "InstanceType": "ml.g5.8xlarge", "InstanceCount": count,
                "ExecutionRole": ctx["exec"], "ThreadsPerCore": 1,
                "LifeCycleConfig": {"SourceS3Uri": ctx["lifecycle"], "OnCreate": "on_create.sh"}}

    @check("SageMaker CreateCluster: HyperPod on EKS")
    def _():
        eks_arn, subnets, sg = need("eks_arn", "subnets", "sg", "exec", "lifecycle", "eks_active")[:3]
        arn = call("sagemaker", "CreateCluster", ClusterName=hp, InstanceGroups=[group("workers", 2)],
                   VpcConfig={"SecurityGroupIds": [sg], "Subnets": subnets[:1]},
                   Orchestrator={"Eks": {"ClusterArn": eks_arn}}, NodeRecovery="Automatic")["ClusterArn"]
        ok(arn.startswith("arn:aws:sagemaker:%s:%s:cluster/" % (REGION, ACCOUNT)), arn)
        ctx["hp"] = arn

    @check("SageMaker DescribeCluster: InService")
    def _():
        need("hp")
        c = until("the HyperPod cluster", lambda: call("sagemaker", "DescribeCluster", ClusterName=hp),
                  lambda c: c["ClusterStatus"] != "Creating")
        eq(c["ClusterStatus"], "InService", "ClusterStatus")
        ctx["hp_ready"] = True

    @check("SageMaker ListClusterNodes: two running nodes")
    def _():
        need("hp_ready")
        nodes = call("sagemaker", "ListClusterNodes", ClusterName=hp)["ClusterNodeSummaries"]
        eq([x["InstanceStatus"]["Status"] for x in nodes], ["Running", "Running"], "node statuses")
        ctx["nodes"] = [x["InstanceId"] for x in nodes]

    @check("SageMaker DescribeClusterNode: a node")
    def _():
        nodes = need("nodes")
        eq(call("sagemaker", "DescribeClusterNode", ClusterName=hp, NodeId=nodes[0])["NodeDetails"]["InstanceId"],
           nodes[0], "InstanceId")

    @check("SageMaker UpdateCluster: scale to three nodes")
    def _():
        need("hp_ready")
        call("sagemaker", "UpdateCluster", ClusterName=hp, InstanceGroups=[group("workers", 3)])
        c = until("the update", lambda: call("sagemaker", "DescribeCluster", ClusterName=hp),
                  lambda c: c["ClusterStatus"] != "Updating")
        eq(c["ClusterStatus"], "InService", "ClusterStatus")
        eq(c["InstanceGroups"][0]["TargetCount"], 3, "TargetCount")

    @check("SageMaker BatchRebootClusterNodes: a node reboots")
    def _():
        nodes = need("nodes")
        eq(call("sagemaker", "BatchRebootClusterNodes", ClusterName=hp, NodeIds=nodes[:1])["Successful"],
           nodes[:1], "Successful")

    @check("SageMaker ListClusterNodes: the paginator pages with PageSize 1")
    def _():
        need("hp_ready")
        pages = list(CLIENTS["sagemaker"].get_paginator("list_cluster_nodes").paginate(
            ClusterName=hp, PaginationConfig={"PageSize": 1}))
        called.add("SageMaker ListClusterNodes")
        eq([len(p["ClusterNodeSummaries"]) for p in pages], [1, 1, 1], "page sizes")
        eq(len({x["InstanceId"] for p in pages for x in p["ClusterNodeSummaries"]}), 3, "each node once")

    @check("SageMaker BatchDeleteClusterNodes: an unknown node fails with Code, reboot's with ErrorCode")
    def _():
        need("hp_ready")
        r = call("sagemaker", "BatchDeleteClusterNodes", ClusterName=hp, NodeIds=["i-" + MISSING_ID])
        eq([(f["NodeId"], f["Code"]) for f in r["Failed"]], [("i-" + MISSING_ID, "NodeIdNotFound")], "Failed")
        r = call("sagemaker", "BatchRebootClusterNodes", ClusterName=hp, NodeIds=["i-" + MISSING_ID])
        eq([(f["NodeId"], f["ErrorCode"]) for f in r["Failed"]], [("i-" + MISSING_ID, "InstanceIdNotFound")],
           "Failed")

    @check("SageMaker UpdateClusterSoftware: the named group's update ends Succeeded, the cluster InService")
    def _():
        need("hp_ready")
        until("the reboot", lambda: call("sagemaker", "DescribeCluster", ClusterName=hp),
              lambda c: c["ClusterStatus"] == "InService")
        call("sagemaker", "UpdateClusterSoftware", ClusterName=hp, InstanceGroups=[{"InstanceGroupName": "workers"}])
        c = until("the software update", lambda: call("sagemaker", "DescribeCluster", ClusterName=hp),
                  lambda c: c["ClusterStatus"] not in ("Updating", "SystemUpdating"))
        eq(c["ClusterStatus"], "InService", "ClusterStatus")
        eq(c["InstanceGroups"][0]["SoftwareUpdateStatus"], "Succeeded", "SoftwareUpdateStatus")

    expect_error("SageMaker UpdateCluster: deleting the last instance group is ValidationException",
                 "ValidationException", lambda: need("hp_ready") and call(
                     "sagemaker", "UpdateCluster", ClusterName=hp, InstanceGroupsToDelete=["workers"]))

    @check("SageMaker CreateMlflowTrackingServer: Created")
    def _():
        role = need("exec", "bucket")[0]
        call("sagemaker", "CreateMlflowTrackingServer", TrackingServerName=TAG + "-mlflow",
             ArtifactStoreUri="s3://%s/mlflow" % bucket, RoleArn=role)
        s = until("the tracking server", lambda: call("sagemaker", "DescribeMlflowTrackingServer",
                                                      TrackingServerName=TAG + "-mlflow"),
                  lambda s: s["TrackingServerStatus"] != "Creating")
        eq(s["TrackingServerStatus"], "Created", "TrackingServerStatus")

    @check("SageMaker ListTrainingPlans: the Active plans")
    def _():
        r = call("sagemaker", "ListTrainingPlans", Filters=[{"Name": "Status", "Value": "Active"}])
        ok(r["TrainingPlanSummaries"], "at least one Active plan")
        ctx["plan"] = r["TrainingPlanSummaries"][0]["TrainingPlanName"]

    @check("SageMaker DescribeTrainingPlan: its reserved capacity and zone")
    def _():
        r = call("sagemaker", "DescribeTrainingPlan", TrainingPlanName=need("plan"))
        zone = r["ReservedCapacitySummaries"][0]["AvailabilityZone"]
        ok(zone.startswith(REGION), "AvailabilityZone " + zone)

    @check("Service Quotas ListServiceQuotas: a HyperPod cluster usage quota per type, in pages")
    def _():
        quotas, token = [], None
        while True:
            r = call("service-quotas", "ListServiceQuotas", ServiceCode="sagemaker", MaxResults=100,
                     **({"NextToken": token} if token else {}))
            quotas += r["Quotas"]
            token = r.get("NextToken")
            if not token:
                break
        p5 = [q for q in quotas if q["QuotaName"] == "ml.p5.48xlarge for cluster usage"]
        ok(len(quotas) > 100 and p5, "%d quotas, ml.p5.48xlarge's among them" % len(quotas))
        ctx["quota"] = p5[0]["QuotaCode"]

    @check("Service Quotas GetServiceQuota: one quota by its code")
    def _():
        q = call("service-quotas", "GetServiceQuota", ServiceCode="sagemaker", QuotaCode=need("quota"))["Quota"]
        eq(q["QuotaName"], "ml.p5.48xlarge for cluster usage", "QuotaName")

    expect_error("Service Quotas GetServiceQuota: an unknown quota is NoSuchResourceException",
                 "NoSuchResourceException", lambda: call("service-quotas", "GetServiceQuota", ServiceCode="sagemaker",
                                                         QuotaCode="L-00000000"), "service-quotas")

    @check("SageMaker SearchTrainingPlanOfferings: offerings")
    def _():
        r = call("sagemaker", "SearchTrainingPlanOfferings", InstanceType="ml.p5.48xlarge", InstanceCount=1,
                 DurationHours=24, TargetResources=["hyperpod-cluster"])
        ok(len(r["TrainingPlanOfferings"]) > 0, "at least one offering")

    # FSx
    @check("FSx CreateFileSystem: Lustre, then AVAILABLE")
    def _():
        subnets, sg = need("subnets", "sg")
        fs = call("fsx", "CreateFileSystem", FileSystemType="LUSTRE", StorageCapacity=1200, SubnetIds=subnets[:1],
                  SecurityGroupIds=[sg], LustreConfiguration={"DeploymentType": "SCRATCH_2"})["FileSystem"]
        ctx["fs"] = fs["FileSystemId"]
        f = until("the file system", lambda: call("fsx", "DescribeFileSystems",
                                                  FileSystemIds=[fs["FileSystemId"]])["FileSystems"][0],
                  lambda f: f["Lifecycle"] != "CREATING")
        eq(f["Lifecycle"], "AVAILABLE", "Lifecycle")

    # modelled errors
    expect_error("EKS DescribeCluster: a missing cluster is ResourceNotFoundException", "ResourceNotFoundException",
                 lambda: call("eks", "DescribeCluster", name=TAG + "-missing"), "eks")

    def duplicate_eks():
        role, subnets = need("eks_arn", "eks_role", "subnets")[1:]
        call("eks", "CreateCluster", name=eks_name, roleArn=role, resourcesVpcConfig={"subnetIds": subnets})
    expect_error("EKS CreateCluster: a duplicate name is ResourceInUseException", "ResourceInUseException",
                 duplicate_eks, "eks")
    def desired_above_max():
        need("ng")
        call("eks", "UpdateNodegroupConfig", clusterName=eks_name, nodegroupName=ng, scalingConfig={"desiredSize": 5})
    expect_error("EKS UpdateNodegroupConfig: desiredSize above maxSize is InvalidParameterException",
                 "InvalidParameterException", desired_above_max, "eks")

    def duplicate_ng():
        _, role, subnets = need("ng", "node_role", "subnets")
        call("eks", "CreateNodegroup", clusterName=eks_name, nodegroupName=ng, nodeRole=role, subnets=subnets)
    expect_error("EKS CreateNodegroup: a duplicate name is ResourceInUseException", "ResourceInUseException",
                 duplicate_ng, "eks")
    expect_error("EKS DescribeNodegroup: a missing node group is ResourceNotFoundException", "ResourceNotFoundException",
                 lambda: call("eks", "DescribeNodegroup", clusterName=eks_name, nodegroupName=TAG + "-missing"), "eks")

    def delete_with_nodegroups():
        need("ng")
        call("eks", "DeleteCluster", name=eks_name)
    expect_error("EKS DeleteCluster: a cluster with node groups is ResourceInUseException", "ResourceInUseException",
                 delete_with_nodegroups, "eks")
    expect_error("SageMaker DescribeCluster: a missing cluster is ResourceNotFound", "ResourceNotFound",
                 lambda: call("sagemaker", "DescribeCluster", ClusterName=TAG + "-missing"), "sagemaker")

    # botocore checks ranges on the client: this one lets a negative count reach the sandbox
    unvalidated = boto3.client("sagemaker", endpoint_url=os.environ.get("AWS_ENDPOINT_URL"),
                               config=CONFIG.merge(Config(parameter_validation=False)))

    def invalid_hp():
        eks_arn, subnets, sg, role = need("eks_arn", "subnets", "sg", "exec")
        call("sagemaker", "CreateCluster", _client=unvalidated, ClusterName=TAG + "-bad", InstanceGroups=[{
            "InstanceGroupName": "g", "InstanceType": "ml.g5.8xlarge", "InstanceCount": -1, "ExecutionRole": role,
            "LifeCycleConfig": {"SourceS3Uri": "s3://%s/lifecycle/" % bucket, "OnCreate": "on_create.sh"}}],
            VpcConfig={"SecurityGroupIds": [sg], "Subnets": subnets[:1]}, Orchestrator={"Eks": {"ClusterArn": eks_arn}})
    expect_error("SageMaker CreateCluster: a negative instance count is ValidationException", "ValidationException",
                 invalid_hp)
    expect_error("IAM GetRole: a missing role is NoSuchEntity", "NoSuchEntity",
                 lambda: call("iam", "GetRole", RoleName=TAG + "-missing"), "iam")

    def duplicate_role():
        need("exec")
        call("iam", "CreateRole", RoleName=TAG + "-exec", AssumeRolePolicyDocument=trust("sagemaker.amazonaws.com"))
    expect_error("IAM CreateRole: a duplicate role is EntityAlreadyExists", "EntityAlreadyExists", duplicate_role, "iam")

    def missing_key():
        need("bucket")
        call("s3", "GetObject", Bucket=bucket, Key="missing.sh")
    expect_error("S3 GetObject: a missing key is NoSuchKey", "NoSuchKey", missing_key, "s3")
    expect_error("S3 ListObjectsV2: a missing bucket is NoSuchBucket", "NoSuchBucket",
                 lambda: call("s3", "ListObjectsV2", Bucket=TAG + "-missing-bucket"), "s3")
    expect_error("EC2 DescribeVpcs: a missing VPC is InvalidVpcID.NotFound", "InvalidVpcID.NotFound",
                 lambda: call("ec2", "DescribeVpcs", VpcIds=["vpc-" + MISSING_ID]))
    expect_error("FSx DescribeFileSystems: a missing file system is FileSystemNotFound", "FileSystemNotFound",
                 lambda: call("fsx", "DescribeFileSystems", FileSystemIds=["fs-" + MISSING_ID]), "fsx")

    # teardown
    @check("SageMaker DeleteCluster: deleting")
    def _():
        need("hp")
        eq(call("sagemaker", "DeleteCluster", ClusterName=hp)["ClusterArn"], ctx["hp"], "ClusterArn")

    @check("FSx DeleteFileSystem: DELETING")
    def _():
        fs = need("fs")
        eq(call("fsx", "DeleteFileSystem", FileSystemId=fs)["Lifecycle"], "DELETING", "Lifecycle")

    @check("EKS DeleteAddon: DELETING")
    def _():
        need("eks_active")
        eq(call("eks", "DeleteAddon", clusterName=eks_name, addonName="eks-pod-identity-agent")["addon"]["status"],
           "DELETING", "status")

    @check("EKS DeleteNodegroup: DELETING, then gone (boto3's nodegroup_deleted waiter)")
    def _():
        need("ng")
        eq(call("eks", "DeleteNodegroup", clusterName=eks_name, nodegroupName=ng)["nodegroup"]["status"], "DELETING",
           "status")
        CLIENTS["eks"].get_waiter("nodegroup_deleted").wait(clusterName=eks_name, nodegroupName=ng,
                                                            WaiterConfig={"Delay": 0.02, "MaxAttempts": 500})
        eq(call("eks", "ListNodegroups", clusterName=eks_name)["nodegroups"], [], "nodegroups")

    @check("EKS DeleteCluster: DELETING")
    def _():
        need("eks_arn")
        eq(call("eks", "DeleteCluster", name=eks_name)["cluster"]["status"], "DELETING", "status")

    @check("S3 DeleteObject and DeleteBucket: the bucket is gone")
    def _():
        need("bucket")
        call("s3", "DeleteObject", Bucket=bucket, Key="lifecycle/on_create.sh")
        call("s3", "DeleteBucket", Bucket=bucket)

    @check("IAM DetachRolePolicy and DeleteRole: the roles are gone")
    def _():
        need("exec", "eks_role")
        call("iam", "DetachRolePolicy", RoleName=TAG + "-exec",
             PolicyArn="arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy")
        call("iam", "DeleteRole", RoleName=TAG + "-exec")
        call("iam", "DeleteRole", RoleName=TAG + "-eks")


def main():
    try:
        run()
    except Exception:
        print("not ok %d - harness crashed # %s" % (n + 1, one_line(traceback.format_exc())))
        print("1..%d" % (n + 1))
        return 1
    print("# %d distinct operations called, %d of %d checks passed" % (len(called), n - failed, n))
    print("1..%d" % n)
    return 0


if __name__ == "__main__":
    sys.exit(main())
