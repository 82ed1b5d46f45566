-- hypd's own AWS client runs a provisioning-like sequence against the
-- in-process sandbox under the virtual clock: network, role, bucket, EKS
-- cluster to ACTIVE, HyperPod cluster to InService. The audit log then shows
-- every mutation exactly once. Garbage requests get protocol errors, never
-- a crash.
local t = require "hypd.tap"
local aws = require "hypd.aws"
local core = require "hypd.core"
local http = require "hypd.http"
local json = require "hypd.json"
local sandbox = require "sandbox"
local store = require "hypd.store"
local task = require "hypd.task"

local srv = assert(sandbox.start { listen = "127.0.0.1:0",
  credentials = { [os.getenv("AWS_ACCESS_KEY_ID")] = os.getenv("AWS_SECRET_ACCESS_KEY") } })
local port = srv.port
local OPTS = { endpoint_url = "http://127.0.0.1:" .. port, region = "us-west-2" }
local ctx = {}

local function call(service, op, params) return aws.call(service, op, params, OPTS) end

-- default_sg(subnet) -> the default security group of the subnet's VPC (a
-- HyperPod VpcConfig names 1 to 5 security groups)
local function default_sg(subnet)
  local vpc = call("ec2", "DescribeSubnets", { SubnetIds = { subnet } }).Subnets[1].VpcId
  return call("ec2", "DescribeSecurityGroups", { Filters = { { Name = "vpc-id", Values = { vpc } },
    { Name = "group-name", Values = { "default" } } } }).SecurityGroups[1].GroupId
end

-- polls like a workflow: describe, sleep 30 s of (virtual) time, until done
local function wait_for(what, fn, want, max_minutes)
  local deadline = core.now() + (max_minutes or 60) * 60
  local last
  repeat
    last = fn()
    if last == want then return last end
    task.sleep(30)
  until core.now() > deadline
  error(what .. " stayed " .. tostring(last), 0)
end

local function virtual(fn)
  return function()
    core.virtual(true)
    local ok, err = pcall(fn)
    core.virtual(false)
    if not ok then error(err, 0) end
  end
end

t.test("a VPC with public and private subnets in two zones", virtual(function()
  local azs = call("ec2", "DescribeAvailabilityZones", {}).AvailabilityZones
  t.ok(#azs >= 2, "at least two zones")
  ctx.vpc = call("ec2", "CreateVpc", { CidrBlock = "10.1.0.0/16", TagSpecifications = {
    { ResourceType = "vpc", Tags = { { Key = "hypd:cluster-tag", Value = "prov" } } } } }).Vpc.VpcId
  ctx.subnets = {}
  for i = 1, 4 do
    local az = azs[(i - 1) % 2 + 1].ZoneName
    ctx.subnets[i] = call("ec2", "CreateSubnet", { VpcId = ctx.vpc, CidrBlock = "10.1." .. i .. ".0/24",
      AvailabilityZone = az }).Subnet.SubnetId
  end
  local igw = call("ec2", "CreateInternetGateway", {}).InternetGateway.InternetGatewayId
  call("ec2", "AttachInternetGateway", { InternetGatewayId = igw, VpcId = ctx.vpc })
  local eip = call("ec2", "AllocateAddress", { Domain = "vpc" }).AllocationId
  local nat = call("ec2", "CreateNatGateway", { SubnetId = ctx.subnets[1], AllocationId = eip }).NatGateway.NatGatewayId
  wait_for("the NAT gateway", function()
    return call("ec2", "DescribeNatGateways", { NatGatewayIds = { nat } }).NatGateways[1].State
  end, "available")
  local found = call("ec2", "DescribeVpcs", { Filters = { { Name = "tag:hypd:cluster-tag", Values = { "prov" } } } }).Vpcs
  t.eq(#found, 1)
end))

t.test("an IAM role and a bucket with a lifecycle script", virtual(function()
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "eks.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  ctx.eks_role = call("iam", "CreateRole", { RoleName = "prov-eks", AssumeRolePolicyDocument = trust }).Role.Arn
  call("iam", "AttachRolePolicy", { RoleName = "prov-eks", PolicyArn = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy" })
  ctx.exec_role = call("iam", "CreateRole", { RoleName = "prov-exec", AssumeRolePolicyDocument =
    json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
      Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } } }).Role.Arn
  call("s3", "CreateBucket", { Bucket = "prov-lifecycle",
    CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = "prov-lifecycle", Key = "scripts/on_create.sh", Body = "#!/bin/bash\n" })
  t.like(ctx.eks_role, "^arn:aws:iam::123456789012:role/prov%-eks$")
end))

t.test("an EKS cluster reaches ACTIVE under the virtual clock", virtual(function()
  local started = core.now()
  local c = call("eks", "CreateCluster", { name = "prov", roleArn = ctx.eks_role,
    resourcesVpcConfig = { subnetIds = { ctx.subnets[3], ctx.subnets[4] } },
    accessConfig = { authenticationMode = "API", bootstrapClusterCreatorAdminPermissions = true } }).cluster
  t.eq(c.status, "CREATING")
  wait_for("the EKS cluster", function()
    return call("eks", "DescribeCluster", { name = "prov" }).cluster.status
  end, "ACTIVE")
  local minutes = (core.now() - started) / 60
  t.ok(minutes >= 8 and minutes <= 13, "creation took 8 to 12 simulated minutes, took " .. minutes)
  ctx.eks_arn = c.arn
end))

t.test("a HyperPod cluster reaches InService with its nodes running", virtual(function()
  local arn = call("sagemaker", "CreateCluster", { ClusterName = "prov-hp",
    Orchestrator = { Eks = { ClusterArn = ctx.eks_arn } },
    InstanceGroups = { { InstanceGroupName = "workers", InstanceType = "ml.g5.8xlarge", InstanceCount = 2,
      ExecutionRole = ctx.exec_role, ThreadsPerCore = 1,
      LifeCycleConfig = { SourceS3Uri = "s3://prov-lifecycle/scripts/", OnCreate = "on_create.sh" } } },
    VpcConfig = { Subnets = { ctx.subnets[3] }, SecurityGroupIds = { default_sg(ctx.subnets[3]) } },
    NodeRecovery = "Automatic" }).ClusterArn
  t.like(arn, "^arn:aws:sagemaker:us%-west%-2:123456789012:cluster/")
  wait_for("the HyperPod cluster", function()
    return call("sagemaker", "DescribeCluster", { ClusterName = "prov-hp" }).ClusterStatus
  end, "InService")
  local nodes = call("sagemaker", "ListClusterNodes", { ClusterName = "prov-hp" }).ClusterNodeSummaries
  t.eq(#nodes, 2)
  for _, n in ipairs(nodes) do t.eq(n.InstanceStatus.Status, "Running") end
end))

t.test("tags on the EKS and HyperPod clusters are added, listed and removed", virtual(function()
  call("eks", "TagResource", { resourceArn = ctx.eks_arn, tags = { team = "ml", env = "dev" } })
  call("eks", "UntagResource", { resourceArn = ctx.eks_arn, tagKeys = { "env" } })
  t.eq(call("eks", "ListTagsForResource", { resourceArn = ctx.eks_arn }).tags.team, "ml")
  t.eq(call("eks", "DescribeCluster", { name = "prov" }).cluster.tags.env, nil)
  local hp = call("sagemaker", "DescribeCluster", { ClusterName = "prov-hp" }).ClusterArn
  call("sagemaker", "AddTags", { ResourceArn = hp, Tags = { { Key = "team", Value = "ml" } } })
  t.eq(call("sagemaker", "ListTags", { ResourceArn = hp }).Tags[1].Key, "team")
  local _, err = aws.try("eks", "TagResource", { resourceArn = "arn:aws:eks:us-west-2:123456789012:cluster/none",
    tags = { a = "b" } }, OPTS)
  t.eq(err.code, "NotFoundException")
end))

t.test("the audit log shows every mutation exactly once", function()
  local counts, total = {}, 0
  for _, e in ipairs(store.events(0, 100000) or {}) do
    if e.kind == "sandbox.audit" then
      local k = e.data.service .. " " .. e.data.operation .. " " .. e.data.target
      counts[k] = (counts[k] or 0) + 1
      total = total + 1
    end
  end
  t.ok(total >= 15, "the sequence made at least 15 mutations, saw " .. total)
  for k, n in pairs(counts) do
    if k:find("CreateSubnet") == nil and k:find("AllocateAddress") == nil and k:find("CreateInternetGateway") == nil then
      t.eq(n, 1, k)
    end
  end
  t.eq(counts["eks CreateCluster prov"], 1)
  t.eq(counts["sagemaker CreateCluster prov-hp"], 1)
end)

t.test("garbage requests get protocol errors and never crash the sandbox", function()
  local sigv4 = require "hypd.sigv4"
  local seed = 7
  local function rnd(n) seed = (seed * 1103515245 + 12345) % 2147483648 return seed % n end
  local targets = { "SageMaker.CreateCluster", "SageMaker.DescribeCluster", "SageMaker.UpdateCluster" }
  local bodies = { "{", "[]", "null", '{"ClusterName": 5}', string.rep("[", 5000), "\0\1\2",
    '{"a":' .. string.rep("9", 400) .. "}", '{"ClusterName":"x","InstanceGroups":"no"}', "" }
  local host = "127.0.0.1:" .. port
  for i = 1, 60 do
    local body = bodies[rnd(#bodies) + 1]
    local when = math.floor(core.now())
    local headers = { host = host, ["content-type"] = "application/x-amz-json-1.1",
      ["x-amz-target"] = targets[rnd(#targets) + 1], ["x-amz-date"] = os.date("!%Y%m%dT%H%M%SZ", when) }
    headers.authorization = sigv4.sign { method = "POST", path = "/", query = "", headers = headers, body = body,
      access_key = os.getenv("AWS_ACCESS_KEY_ID"), secret_key = os.getenv("AWS_SECRET_ACCESS_KEY"),
      region = "us-west-2", service = "sagemaker", when = when }.authorization
    local r = http.request { method = "POST", url = "http://" .. host .. "/", body = body, headers = headers }
    t.ok(r and r.status >= 400 and r.status < 500, "request " .. i .. " got a 4xx, got " ..
      tostring(r and r.status) .. " " .. tostring(r and r.body))
  end
  local ok = call("sts", "GetCallerIdentity", {})
  t.eq(ok.Account, "123456789012", "the sandbox still answers")
end)

t.cleanup(function()
  srv:stop()
end)
