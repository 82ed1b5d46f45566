"""The boto3 rows of probe.py: the reads of probe_aws.py through clients,
paginators and waiters, and the not-found forms (a ClientError with the
error code AWS gives)."""
import boto3

FAST = {"Delay": 1, "MaxAttempts": 30}


def row(label, call, check=None, code=None, gap=None):
    return {"label": label, "call": call, "check": check, "code": code, "gap": gap}


def pages(client, op, key, **kw):
    """Every item of key across the pages of op."""
    out = []
    for page in client.get_paginator(op).paginate(**kw):
        out += page[key]
    return out


def rows(i):
    c = {s: boto3.client(s) for s in ("sts", "ec2", "eks", "iam", "sagemaker", "s3", "fsx", "logs",
                                      "cloudformation", "ssm", "elbv2", "service-quotas")}
    c["pricing"] = boto3.client("pricing", region_name="us-east-1")
    sts, ec2, eks, iam, sm, s3 = (c[s] for s in ("sts", "ec2", "eks", "iam", "sagemaker", "s3"))
    eksn, hp, vpc, bucket = i["eks"], i["hp"], i["vpc"], i["bucket"]
    paged = {"PageSize": 5}  # EC2 pages hold 5 to 1000
    return [
        row("sts.get_caller_identity", sts.get_caller_identity, lambda v: v["Account"] == "123456789012"),
        row("ec2.describe_regions", ec2.describe_regions,
            lambda v: "us-west-2" in [r["RegionName"] for r in v["Regions"]]),
        row("ec2.describe_availability_zones", ec2.describe_availability_zones,
            lambda v: len(v["AvailabilityZones"]) >= 2),
        row("ec2 paginate describe_vpcs", lambda: pages(ec2, "describe_vpcs", "Vpcs", PaginationConfig=paged),
            lambda v: vpc in [x["VpcId"] for x in v]),
        row("ec2 paginate describe_subnets",
            lambda: pages(ec2, "describe_subnets", "Subnets", PaginationConfig=paged),
            lambda v: set(i["subnets"]) <= {x["SubnetId"] for x in v}),
        row("ec2 paginate describe_security_groups",
            lambda: pages(ec2, "describe_security_groups", "SecurityGroups", PaginationConfig=paged),
            lambda v: i["sg"] in [x["GroupId"] for x in v]),
        row("ec2 paginate describe_network_interfaces", lambda: pages(
            ec2, "describe_network_interfaces", "NetworkInterfaces", PaginationConfig={"PageSize": 5}),
            lambda v: set(i["enis"]) <= {x["NetworkInterfaceId"] for x in v}),
        row("ec2 paginate describe_route_tables",
            lambda: pages(ec2, "describe_route_tables", "RouteTables", PaginationConfig={"PageSize": 5}),
            lambda v: set(i["route_tables"]) <= {x["RouteTableId"] for x in v}),
        row("ec2 paginate describe_instances", lambda: pages(ec2, "describe_instances", "Reservations"),
            lambda v: isinstance(v, list)),
        row("ec2 waiter vpc_available", lambda: ec2.get_waiter("vpc_available").wait(
            VpcIds=[vpc], WaiterConfig=FAST)),
        row("ec2 waiter subnet_available", lambda: ec2.get_waiter("subnet_available").wait(
            SubnetIds=i["subnets"], WaiterConfig=FAST)),
        row("ec2 waiter security_group_exists", lambda: ec2.get_waiter("security_group_exists").wait(
            GroupIds=[i["sg"]], WaiterConfig=FAST)),
        row("ec2.describe_instance_types", lambda: ec2.describe_instance_types(InstanceTypes=["g5.12xlarge"]),
            lambda v: v["InstanceTypes"][0]["VCpuInfo"]["DefaultVCpus"] == 48),
        row("ec2.describe_vpcs missing", lambda: ec2.describe_vpcs(VpcIds=["vpc-0123456789abcdef0"]),
            code="InvalidVpcID.NotFound"),
        row("ec2.describe_subnets missing", lambda: ec2.describe_subnets(SubnetIds=["subnet-0123456789abcdef0"]),
            code="InvalidSubnetID.NotFound"),
        row("eks.list_clusters", eks.list_clusters, lambda v: eksn in v["clusters"]),
        row("eks paginate list_clusters", lambda: pages(eks, "list_clusters", "clusters",
                                                        PaginationConfig={"PageSize": 1}),
            lambda v: eksn in v),
        row("eks.describe_cluster", lambda: eks.describe_cluster(name=eksn),
            lambda v: v["cluster"]["status"] == "ACTIVE" and v["cluster"]["arn"] == i["eks_arn"]),
        row("eks waiter cluster_active", lambda: eks.get_waiter("cluster_active").wait(
            name=eksn, WaiterConfig=FAST)),
        row("eks waiter addon_active", lambda: eks.get_waiter("addon_active").wait(
            clusterName=eksn, addonName=i["addons"][0], WaiterConfig=FAST)),
        row("eks paginate list_addons", lambda: pages(eks, "list_addons", "addons", clusterName=eksn,
                                                      PaginationConfig={"PageSize": 1}),
            lambda v: sorted(v) == sorted(i["addons"])),
        row("eks.describe_addon", lambda: eks.describe_addon(clusterName=eksn, addonName=i["addons"][0]),
            lambda v: v["addon"]["status"] == "ACTIVE"),
        row("eks paginate describe_addon_versions", lambda: pages(
            eks, "describe_addon_versions", "addons", kubernetesVersion=i["eks_version"],
            PaginationConfig={"PageSize": 2}), lambda v: len(v) >= 3),
        row("eks paginate list_nodegroups", lambda: pages(eks, "list_nodegroups", "nodegroups", clusterName=eksn),
            lambda v: v == []),
        row("eks paginate list_access_entries", lambda: pages(eks, "list_access_entries", "accessEntries",
                                                              clusterName=eksn),
            lambda v: i["principal"] in v),
        row("eks paginate list_access_policies", lambda: pages(eks, "list_access_policies", "accessPolicies"),
            lambda v: any(p["name"] == "AmazonEKSClusterAdminPolicy" for p in v)),
        row("eks paginate list_updates", lambda: pages(eks, "list_updates", "updateIds", name=eksn),
            lambda v: isinstance(v, list)),
        row("eks.describe_cluster missing", lambda: eks.describe_cluster(name="nope"),
            code="ResourceNotFoundException"),
        row("eks.describe_addon missing", lambda: eks.describe_addon(clusterName=eksn, addonName="vpc-cni"),
            code="ResourceNotFoundException"),
        row("iam paginate list_roles", lambda: pages(iam, "list_roles", "Roles"),
            lambda v: i["role"] in [r["RoleName"] for r in v]),
        row("iam.get_role", lambda: iam.get_role(RoleName=i["role"]), lambda v: v["Role"]["Arn"] == i["role_arn"]),
        row("iam waiter role_exists", lambda: iam.get_waiter("role_exists").wait(
            RoleName=i["role"], WaiterConfig=FAST)),
        row("iam paginate list_policies", lambda: pages(iam, "list_policies", "Policies", Scope="AWS",
                                                        PaginationConfig={"PageSize": 10}),
            lambda v: "AmazonEKSClusterPolicy" in [p["PolicyName"] for p in v]),
        row("iam paginate list_attached_role_policies", lambda: pages(
            iam, "list_attached_role_policies", "AttachedPolicies", RoleName=i["role"]),
            lambda v: isinstance(v, list)),
        row("iam.get_role missing", lambda: iam.get_role(RoleName="nope"), code="NoSuchEntity"),
        row("sagemaker paginate list_clusters", lambda: pages(sm, "list_clusters", "ClusterSummaries",
                                                              PaginationConfig={"PageSize": 1}),
            lambda v: hp in [x["ClusterName"] for x in v]),
        row("sagemaker.describe_cluster", lambda: sm.describe_cluster(ClusterName=hp),
            lambda v: v["ClusterStatus"] == "InService" and v["Orchestrator"]["Eks"]["ClusterArn"] == i["eks_arn"]),
        row("sagemaker paginate list_cluster_nodes", lambda: pages(
            sm, "list_cluster_nodes", "ClusterNodeSummaries", ClusterName=hp, PaginationConfig={"PageSize": 1}),
            lambda v: sorted(n["InstanceId"] for n in v) == sorted(i["nodes"])),
        row("sagemaker.describe_cluster_node", lambda: sm.describe_cluster_node(ClusterName=hp, NodeId=i["node"]),
            lambda v: v["NodeDetails"]["InstanceId"] == i["node"]),
        row("sagemaker paginate list_training_plans", lambda: pages(
            sm, "list_training_plans", "TrainingPlanSummaries"),
            lambda v: all(p["TrainingPlanArn"].endswith("/" + p["TrainingPlanName"]) for p in v)),
        row("sagemaker.describe_cluster missing", lambda: sm.describe_cluster(ClusterName="nope"),
            code="ResourceNotFound"),
        row("s3.list_buckets", s3.list_buckets, lambda v: bucket in [b["Name"] for b in v["Buckets"]]),
        row("s3 waiter bucket_exists", lambda: s3.get_waiter("bucket_exists").wait(Bucket=bucket, WaiterConfig=FAST)),
        row("s3 waiter object_exists", lambda: s3.get_waiter("object_exists").wait(
            Bucket=bucket, Key="lcc/on_create.sh", WaiterConfig=FAST)),
        row("s3 paginate list_objects_v2", lambda: pages(s3, "list_objects_v2", "Contents", Bucket=bucket),
            lambda v: [o["Key"] for o in v] == ["lcc/on_create.sh"]),
        row("s3.get_object", lambda: s3.get_object(Bucket=bucket, Key="lcc/on_create.sh")["Body"].read(),
            lambda v: v == b"#!/bin/bash\n"),
        row("s3.head_bucket missing", lambda: s3.head_bucket(Bucket="hypd-probe-no-such-bucket"), code="404"),
        row("s3.get_object missing", lambda: s3.get_object(Bucket=bucket, Key="nope"), code="NoSuchKey"),
        row("fsx paginate describe_file_systems", lambda: pages(c["fsx"], "describe_file_systems", "FileSystems"),
            lambda v: v == []),
        row("logs paginate describe_log_groups", lambda: pages(c["logs"], "describe_log_groups", "logGroups"),
            lambda v: i["log_group"] in [g["logGroupName"] for g in v]),
        row("logs paginate describe_log_streams", lambda: pages(
            c["logs"], "describe_log_streams", "logStreams", logGroupName=i["log_group"]),
            lambda v: i["log_stream"] in [s["logStreamName"] for s in v]),
        row("logs paginate filter_log_events", lambda: pages(
            c["logs"], "filter_log_events", "events", logGroupName=i["log_group"]), lambda v: isinstance(v, list)),
        row("logs.describe_log_streams missing", lambda: c["logs"].describe_log_streams(logGroupName="/aws/none"),
            code="ResourceNotFoundException"),
        row("cloudformation paginate describe_stacks", lambda: pages(
            c["cloudformation"], "describe_stacks", "Stacks"), lambda v: v == []),
        row("cloudformation paginate list_stacks", lambda: pages(
            c["cloudformation"], "list_stacks", "StackSummaries"), lambda v: v == []),
        row("ssm.get_parameter", lambda: c["ssm"].get_parameter(
            Name="/aws/service/eks/optimized-ami/%s/amazon-linux-2023/x86_64/standard/recommended/image_id"
            % i["eks_version"]), lambda v: v["Parameter"]["Value"].startswith("ami-")),
        row("ssm.get_parameter missing", lambda: c["ssm"].get_parameter(Name="/hypd/none"), code="ParameterNotFound"),
        row("elbv2 paginate describe_load_balancers", lambda: pages(
            c["elbv2"], "describe_load_balancers", "LoadBalancers"), lambda v: v == []),
        row("pricing paginate get_products", lambda: pages(
            c["pricing"], "get_products", "PriceList", ServiceCode="AmazonSageMaker",
            Filters=[{"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-west-2"}],
            PaginationConfig={"MaxItems": 3}), lambda v: len(v) == 3),
        row("service-quotas paginate list_service_quotas", lambda: pages(
            c["service-quotas"], "list_service_quotas", "Quotas", ServiceCode="sagemaker",
            PaginationConfig={"MaxItems": 150}), lambda v: len(v) > 100),
        row("service-quotas.get_service_quota", lambda: c["service-quotas"].get_service_quota(
            ServiceCode="sagemaker", QuotaCode="L-CC407510"), lambda v: v["Quota"]["QuotaCode"] == "L-CC407510"),
    ]
