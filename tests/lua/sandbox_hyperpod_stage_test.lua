-- The sandbox's SageMaker HyperPod and Service Quotas as stage 4 needs
-- them, driven with plain AWS calls (hypd's own client in process; boto3
-- and the aws CLI against a sandbox process where the machine has them):
-- CreateCluster refuses an execution role SageMaker cannot assume, an
-- OnCreate script missing under SourceS3Uri, an override subnet outside the
-- cluster's VPC, a Spot group on a training plan; it takes about 15 minutes
-- to InService; a Scheduled training plan is taken and its nodes wait for
-- it; Service Quotas serves HyperPod's cluster-usage quotas, paged, and a
-- lowered quota holds CreateCluster and UpdateCluster (ResourceLimitExceeded).
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local json = require "hypd.json"
local task = require "hypd.task"
local H = dofile("tests/lua/helpers.lua")

local srv, OPTS = H.sandbox_here()
local quotas = require "sandbox.services.servicequotas"

local function call(service, op, params) return aws.call(service, op, params or {}, OPTS) end
local function try(service, op, params) return aws.try(service, op, params or {}, OPTS) end

-- default_sg(subnet) -> the default security group of the subnet's VPC (a
-- HyperPod VpcConfig names 1 to 5 security groups)
local function default_sg(subnet)
  local vpc = call("ec2", "DescribeSubnets", { SubnetIds = { subnet } }).Subnets[1].VpcId
  return call("ec2", "DescribeSecurityGroups", { Filters = { { Name = "vpc-id", Values = { vpc } },
    { Name = "group-name", Values = { "default" } } } }).SecurityGroups[1].GroupId
end

local function refused(code, pattern, service, op, params)
  local out, err = try(service, op, params)
  t.eq(out, nil, service .. " " .. op .. " is refused")
  t.eq(err and err.code, code)
  if pattern and err then t.like(err.message, pattern) end
end

local function wait(check, limit)
  local t0 = core.now()
  while not check() do
    if core.now() - t0 > (limit or 3600) then error("timed out after " .. (core.now() - t0) .. " s", 2) end
    task.sleep(30)
  end
  return core.now() - t0
end

local function trust(service)
  return json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = service },
    Action = "sts:AssumeRole" } } }
end

local S = {}

t.test("the prerequisites: roles, two VPCs, a lifecycle bucket and an ACTIVE EKS cluster", function()
  S.eks_role = call("iam", "CreateRole", { RoleName = "st4-eks", AssumeRolePolicyDocument = trust("eks.amazonaws.com") })
    .Role.Arn
  S.exec = call("iam", "CreateRole", { RoleName = "st4-exec",
    AssumeRolePolicyDocument = trust("sagemaker.amazonaws.com") }).Role.Arn
  S.eks_only = call("iam", "CreateRole", { RoleName = "st4-eks-only",
    AssumeRolePolicyDocument = trust("eks.amazonaws.com") }).Role.Arn
  S.vpc = call("ec2", "CreateVpc", { CidrBlock = "10.60.0.0/16" }).Vpc.VpcId
  S.other_vpc = call("ec2", "CreateVpc", { CidrBlock = "10.61.0.0/16" }).Vpc.VpcId
  S.a = call("ec2", "CreateSubnet", { VpcId = S.vpc, CidrBlock = "10.60.0.0/20", AvailabilityZone = "us-west-2a" })
    .Subnet.SubnetId
  S.b = call("ec2", "CreateSubnet", { VpcId = S.vpc, CidrBlock = "10.60.16.0/20", AvailabilityZone = "us-west-2b" })
    .Subnet.SubnetId
  S.elsewhere = call("ec2", "CreateSubnet", { VpcId = S.other_vpc, CidrBlock = "10.61.0.0/20",
    AvailabilityZone = "us-west-2a" }).Subnet.SubnetId
  call("s3", "CreateBucket", { Bucket = "st4-lcc", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = "st4-lcc", Key = "lcc/on_create.sh", Body = "#!/bin/bash\n" })
  call("s3", "PutObject", { Bucket = "st4-lcc", Key = "docs/README", Body = "no scripts here\n" })
  call("eks", "CreateCluster", { name = "st4", roleArn = S.eks_role, resourcesVpcConfig = { subnetIds = { S.a, S.b } },
    accessConfig = { authenticationMode = "API" } })
  wait(function() return call("eks", "DescribeCluster", { name = "st4" }).cluster.status == "ACTIVE" end)
  S.eks_arn = call("eks", "DescribeCluster", { name = "st4" }).cluster.arn
end)

local function group(extra)
  local g = { InstanceGroupName = "g", InstanceType = "ml.g5.12xlarge", InstanceCount = 1, ExecutionRole = S.exec,
    LifeCycleConfig = { SourceS3Uri = "s3://st4-lcc/lcc/", OnCreate = "on_create.sh" } }
  for k, v in pairs(extra or {}) do g[k] = v end
  return g
end

local function cluster(name, groups, extra)
  local p = { ClusterName = name, InstanceGroups = groups, Orchestrator = { Eks = { ClusterArn = S.eks_arn } },
    VpcConfig = { SecurityGroupIds = { default_sg(S.a) }, Subnets = { S.a } }, NodeProvisioningMode = "Continuous" }
  for k, v in pairs(extra or {}) do p[k] = v end
  return p
end

t.test("CreateCluster refuses an execution role SageMaker cannot assume, and a missing OnCreate script", function()
  refused("ValidationException", "cannot be assumed by SageMaker", "sagemaker", "CreateCluster",
    cluster("st4-x", { group { ExecutionRole = S.eks_only } }))
  refused("ValidationException", "The lifecycle script on_create%.sh for instance group g was not found",
    "sagemaker", "CreateCluster", cluster("st4-x", { group { LifeCycleConfig = { SourceS3Uri = "s3://st4-lcc/docs/",
      OnCreate = "on_create.sh" } } }))
  refused("ValidationException", "was not found", "sagemaker", "CreateCluster",
    cluster("st4-x", { group { LifeCycleConfig = { SourceS3Uri = "s3://st4-lcc/lcc/" } } }))
end)

t.test("an instance group's override subnet must be in the cluster's VPC", function()
  refused("ValidationException", "is not in " .. S.vpc:gsub("%-", "%%-") .. ", the VPC of the cluster's VpcConfig",
    "sagemaker",
    "CreateCluster", cluster("st4-x", { group { OverrideVpcConfig = { SecurityGroupIds = { default_sg(S.elsewhere) },
      Subnets = { S.elsewhere } } } }))
end)

t.test("a group on a training plan cannot be Spot; a Scheduled plan is taken and its nodes wait for it", function()
  local tp = call("sagemaker", "DescribeTrainingPlan", { TrainingPlanName = "hypd-p4d-4x-7d" })
  t.eq(tp.Status, "Scheduled")
  local zone = tp.ReservedCapacitySummaries[1].AvailabilityZone
  t.eq(zone, "us-west-2b")
  refused("ValidationException", "cannot be Spot", "sagemaker", "CreateCluster", cluster("st4-x", { group {
    InstanceType = "ml.p4d.24xlarge", TrainingPlanArn = tp.TrainingPlanArn, CapacityRequirements = { Spot = {} },
    OverrideVpcConfig = { SecurityGroupIds = { default_sg(S.b) }, Subnets = { S.b } } } }))
  local t0 = core.now()
  call("sagemaker", "CreateCluster", cluster("st4-plan", { group { InstanceType = "ml.p4d.24xlarge",
    InstanceCount = 2, TrainingPlanArn = tp.TrainingPlanArn,
    OverrideVpcConfig = { SecurityGroupIds = { default_sg(S.b) }, Subnets = { S.b } } } }))
  local waited = wait(function()
    return call("sagemaker", "DescribeCluster", { ClusterName = "st4-plan" }).ClusterStatus == "InService"
  end)
  t.ok(waited >= 780 and waited <= 1080, "InService in about 15 minutes: " .. waited .. " s")
  t.ok(core.now() - t0 >= 780)
  local g = call("sagemaker", "DescribeCluster", { ClusterName = "st4-plan" }).InstanceGroups[1]
  t.eq({ g.Status, g.TargetCount, g.CurrentCount }, { "InService", 2, 0 })
  for _, n in ipairs(call("sagemaker", "ListClusterNodes", { ClusterName = "st4-plan" }).ClusterNodeSummaries) do
    t.eq(n.InstanceStatus.Status, "Pending")
    t.like(n.InstanceStatus.Message, "Waiting for training plan hypd%-p4d%-4x%-7d to become Active")
  end
  call("sagemaker", "DeleteCluster", { ClusterName = "st4-plan" })
  wait(function() return try("sagemaker", "DescribeCluster", { ClusterName = "st4-plan" }) == nil end)
end)

t.test("Service Quotas serves a cluster-usage quota per HyperPod type, paged, with AWS's errors", function()
  local all, pages, token = {}, 0, nil
  repeat
    local r = call("servicequotas", "ListServiceQuotas", { ServiceCode = "sagemaker", NextToken = token })
    pages = pages + 1
    for _, q in ipairs(r.Quotas) do all[q.QuotaName] = q end
    token = r.NextToken
  until not token
  t.ok(pages >= 2, "more than a page: " .. pages)
  for _, itype in ipairs(require "hypd.aws.hyperpod_types") do
    t.ok(all[itype .. " for cluster usage"], itype .. " has its quota")
  end
  local q = all["ml.p5.48xlarge for cluster usage"]
  t.like(q.QuotaCode, "^L%-%x%x%x%x%x%x%x%x$")
  t.eq({ q.ServiceCode, q.ServiceName, q.Adjustable, q.GlobalQuota, q.Unit }, { "sagemaker", "Amazon SageMaker", true,
    false, "None" })
  t.eq(q.QuotaArn, "arn:aws:servicequotas:us-west-2:123456789012:sagemaker/" .. q.QuotaCode)
  t.eq(call("servicequotas", "GetServiceQuota", { ServiceCode = "sagemaker", QuotaCode = q.QuotaCode }).Quota.Value,
    q.Value)
  refused("NoSuchResourceException", "quota does not exist", "servicequotas", "GetServiceQuota",
    { ServiceCode = "sagemaker", QuotaCode = "L-00000000" })
  refused("NoSuchResourceException", "service does not exist", "servicequotas", "ListServiceQuotas",
    { ServiceCode = "nope" })
  -- the default stays what AWS gives when the applied value is lowered
  quotas.set("us-west-2", q.QuotaCode, 1)
  t.eq(call("servicequotas", "GetServiceQuota", { ServiceCode = "sagemaker", QuotaCode = q.QuotaCode }).Quota.Value, 1)
  t.eq(call("servicequotas", "GetAWSDefaultServiceQuota", { ServiceCode = "sagemaker", QuotaCode = q.QuotaCode })
    .Quota.Value, q.Value)
  quotas.set("us-west-2", q.QuotaCode, q.Value)
  -- hypd uses it read-only
  local _, err = aws.try("servicequotas", "RequestServiceQuotaIncrease", { ServiceCode = "sagemaker",
    QuotaCode = q.QuotaCode, DesiredValue = 10 }, OPTS)
  t.eq(err.code, "VALIDATION")
  t.like(err.message, "read%-only")
end)

t.test("hypd knows Service Quotas by its IAM prefix, with the endpoint and variable the SDKs use", function()
  t.eq(aws.SERVICES.servicequotas, true, "read-only")
  t.eq(aws.endpoint_env("servicequotas"), "AWS_ENDPOINT_URL_SERVICE_QUOTAS")
  t.eq(aws.endpoint_env("logs"), "AWS_ENDPOINT_URL_CLOUDWATCH_LOGS")
  t.eq(aws.endpoint_env("sagemaker"), "AWS_ENDPOINT_URL_SAGEMAKER")
  local ep = require("hypd.aws.endpoints").resolve(aws.model("servicequotas").metadata, "us-west-2", nil,
    { configured = function() return nil end })
  t.eq({ ep.url, ep.signing_name }, { "https://servicequotas.us-west-2.amazonaws.com", "servicequotas" })
  t.eq(aws.class("servicequotas", "ListServiceQuotas"), "read")
  t.eq(aws.class("servicequotas", "RequestServiceQuotaIncrease"), "mutating")
end)

t.test("a lowered quota holds CreateCluster and UpdateCluster to it, counting every cluster's instances", function()
  quotas.set("us-west-2", "ml.m5.xlarge for cluster usage", 3)
  call("sagemaker", "CreateCluster", cluster("st4-q", { group { InstanceGroupName = "cpu",
    InstanceType = "ml.m5.xlarge", InstanceCount = 2 } }))
  wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = "st4-q" }).ClusterStatus == "InService" end)
  refused("ResourceLimitExceeded", "The account%-level service limit 'ml%.m5%.xlarge for cluster usage' is 3 " ..
    "Instances, with current utilization of 2 Instances and a request delta of 2 Instances", "sagemaker",
    "UpdateCluster", { ClusterName = "st4-q", InstanceGroups = { group { InstanceGroupName = "cpu2",
      InstanceType = "ml.m5.xlarge", InstanceCount = 2 } } })
  -- scaling the same group replaces its count: 3 fits
  call("sagemaker", "UpdateCluster", { ClusterName = "st4-q", InstanceGroups = { group { InstanceGroupName = "cpu",
    InstanceType = "ml.m5.xlarge", InstanceCount = 3 } } })
  wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = "st4-q" }).ClusterStatus == "InService" end)
  quotas.set("us-west-2", "ml.m5.xlarge for cluster usage", 100)
end)

t.test("boto3's paginator and the aws CLI read the quotas from a sandbox process", function()
  local dir = H.tmpdir()
  local env, pid = H.sandbox_process(dir)
  t.ok(env, "the sandbox process started")
  t.cleanup(function() os.execute("kill " .. pid .. " 2>/dev/null") end)
  if H.sh("python3 -c 'import boto3'") ~= 0 then return t.skip("boto3 is absent") end
  local rc, out, err = H.with_env(env, dir, [=[python3 -c '
import boto3
sq = boto3.client("service-quotas")
qs = [q for p in sq.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker") for q in p["Quotas"]]
g5 = [q for q in qs if q["QuotaName"] == "ml.g5.12xlarge for cluster usage"][0]
print(len(qs), g5["Value"], sq.get_service_quota(ServiceCode="sagemaker", QuotaCode=g5["QuotaCode"])["Quota"]["QuotaName"])
']=])
  t.eq(rc, 0, err)
  t.eq(out, #require("hypd.aws.hyperpod_types") .. " 100.0 ml.g5.12xlarge for cluster usage\n")
  if H.sh("command -v aws") ~= 0 then return end
  rc, out, err = H.with_env(env, dir, "aws service-quotas list-service-quotas --service-code sagemaker --output json")
  t.eq(rc, 0, err)
  t.eq(#json.decode(out).Quotas, #require("hypd.aws.hyperpod_types"), "the CLI pages through them all")
end)

t.cleanup(function() srv:stop() end)
