-- Stage 4, hyperpod_create (its steps in hyperpod/_create, its checks in
-- hyperpod/_checks, the compute subnet from hyperpod/_subnet), and its
-- status tool hyperpod_get_creation_status, run through the tool registry
-- and hypd.tool.operations against the in-process sandbox under the virtual clock, on
-- EKS clusters made by cluster_create_eks: a plan on a cluster without
-- HyperPod lists every resource and mutates nothing; a run makes each
-- resource once and reaches InService with the nodes Ready in Kubernetes
-- with their health labels; a second run makes nothing; every bad decision
-- is refused before any mutation, naming the field and the rule (the
-- Service Quotas quota lowered by the test through the sandbox's control
-- route); a training plan's zone overrides the requested one; the subnet
-- allocator finds free space, adds a secondary VPC CIDR when there is none,
-- and reuses hp-compute-<az>. Adding instance groups is in
-- hyperpod_instance_group_test.lua.
local t = require "hypd.tap"
local http = require "hypd.http"
local json = require "hypd.json"
local playbook = require "hypd.playbook"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local srv = H.sandbox_here()
local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local E = Hp.E
local call, mark, since, tags_of, has = E.call, E.mark, E.since, E.tags_of, E.has
local stage1, nodes_of, ready = Hp.stage1, Hp.nodes_of, Hp.ready
local lifecycle = playbook.load("_lifecycle")
local subnet = playbook.load("hyperpod._subnet")
local BASE = "http://127.0.0.1:" .. srv.port
local clusters = require "hypd.clusters"
local function try(service, operation, params) return require("hypd.aws").try(service, operation, params, E.OPTS) end
local function short_hash(s) return require("hypd.sys").digest("sha256", s, "hex"):sub(1, 8) end
local function create(params) return Hp.run("hyperpod_create", params) end
local function plan(params) return Hp.plan("hyperpod_create", params) end
local rows = E.rows

local ACCOUNT_BUCKET -- the lifecycle bucket of tag demo

local G5 = { instance_type = "ml.g5.12xlarge", instance_count = 2, availability_zone = "us-west-2a" }

-- the allocator ---------------------------------------------------------------------

t.test("the allocator takes the first free /20 of the VPC's CIDRs, in their order, around every subnet", function()
  t.eq(subnet.allocate({ "10.192.0.0/16" }, {}), "10.192.0.0/20")
  t.eq(subnet.allocate({ "10.192.0.0/16" }, { "10.192.0.0/20", "10.192.16.0/20", "10.192.32.0/20",
    "10.192.48.0/20" }), "10.192.64.0/20", "after the four subnets of the EKS stage")
  t.eq(subnet.allocate({ "10.192.0.0/16" }, { "10.192.64.0/24" }), "10.192.0.0/20")
  t.eq(subnet.allocate({ "10.192.0.0/16" }, { "10.192.0.0/24" }), "10.192.16.0/20", "a /24 takes its /20")
  t.eq(subnet.allocate({ "10.50.0.0/20", "10.0.0.0/16" }, { "10.50.0.0/24" }), "10.0.0.0/20",
    "a full primary: the secondary CIDR")
  t.eq(subnet.allocate({ "10.50.0.0/20" }, { "10.50.0.0/24" }), nil, "a /20 VPC with a subnet has no free /20")
  t.eq(subnet.allocate({ "10.50.0.0/24" }, {}), nil, "a /24 holds no /20")
  t.eq(subnet.allocate({ "10.50.0.0/20" }, { "10.50.0.0/24" }, 24), "10.50.1.0/24", "another size")
  -- a secondary CIDR: a /16 of the primary's private range that no VPC CIDR overlaps
  t.eq(subnet.secondary({ "10.50.0.0/20" }), "10.0.0.0/16")
  t.eq(subnet.secondary({ "10.0.0.0/16", "10.1.0.0/16" }), "10.2.0.0/16")
  t.eq(subnet.secondary({ "172.31.0.0/16" }), "172.16.0.0/16")
  t.eq(subnet.secondary({ "192.168.0.0/16" }), "100.64.0.0/16", "192.168.0.0/16 has no room beside it")
  t.eq(subnet.name("us-west-2a"), "hp-compute-us-west-2a")
  t.eq(subnet.name("us-west-2b", "gpu-efa"), "hp-compute-gpu-efa-us-west-2b")
end)

-- plan, run, run again ------------------------------------------------------------

local DEMO -- {eks, id, view, hyperpod}

t.test("on a fresh EKS cluster the plan lists every resource of the stage and sends no mutation", function()
  local eks = stage1("demo")
  local m = mark()
  local sent, before = {}, require("hypd.aws").on_call
  require("hypd.aws").on_call = function(service, operation)
    sent[#sent + 1] = service .. " " .. operation
  end
  local p = plan(G5)
  require("hypd.aws").on_call = before
  local _, total = since(m)
  t.eq(total, 0, "the sandbox's audit log is unchanged")
  for _, s in ipairs(sent) do
    local service, operation = s:match("^(%S+) (%S+)$")
    t.eq(require("hypd.aws").class(service, operation), "read", s)
  end
  ACCOUNT_BUCKET = "hypd-demo-lifecycle-" .. short_hash("123456789012/us-west-2")
  t.eq({ p.tool, p.target, p.create, p.change, p.delete }, { "hyperpod_create", "hyperpod/us-west-2/" .. eks, 12, 0,
    0 })
  t.eq(rows(p), {
    "create iam:role hypd-demo-hyperpod-exec",
    "create iam:role-policy-attachment AmazonSageMakerClusterInstanceRolePolicy on hypd-demo-hyperpod-exec",
    "create iam:role-policy hypd-hyperpod-nodes on hypd-demo-hyperpod-exec",
    "create s3:bucket " .. ACCOUNT_BUCKET,
    "create s3:object s3://" .. ACCOUNT_BUCKET .. "/lifecycle/base-config/on_create.sh",
    "create s3:object s3://" .. ACCOUNT_BUCKET .. "/lifecycle/base-config/on_create_main.sh",
    "create ec2:subnet hp-compute-us-west-2a",
    "create ec2:route-table hp-compute-us-west-2a-rt",
    "create ec2:route 0.0.0.0/0 in hp-compute-us-west-2a-rt",
    "create ec2:route-table-association hp-compute-us-west-2a-rt with hp-compute-us-west-2a",
    "create ec2:vpc-endpoint hypd-demo-s3",
    "create sagemaker:cluster hypd-demo-hp",
  })
  local by = {}
  for _, e in ipairs(p.plan) do by[e.name] = e end
  local sn = by["hp-compute-us-west-2a"].fields
  t.eq({ sn.CidrBlock, sn.AvailabilityZone, sn["tag:karpenter.sh/discovery"], sn["tag:kubernetes.io/role/internal-elb"],
    sn["tag:kubernetes.io/cluster/hypd-demo"], sn["tag:hypd:cluster-tag"] },
    { "10.192.64.0/20", "us-west-2a", "hypd-demo", "1", "shared", "demo" })
  local hp = by["hypd-demo-hp"].fields
  local g = hp.InstanceGroups[1]
  t.eq({ g.InstanceGroupName, g.InstanceType, g.InstanceCount, g.ThreadsPerCore, g.ExecutionRole },
    { "demo-ig", "ml.g5.12xlarge", 2, 1, "planned:iam:role:hypd-demo-hyperpod-exec" })
  t.eq(g.InstanceStorageConfigs, { { EbsVolumeConfig = { VolumeSizeInGB = 500 } } })
  t.eq(g.OnStartDeepHealthChecks, nil, "deep health checks are off unless asked")
  t.eq({ hp.NodeRecovery, hp.NodeProvisioningMode }, { "Automatic", "Continuous" })
  t.eq(hp.VpcConfig.Subnets, { "planned:ec2:subnet:hp-compute-us-west-2a" })
  t.eq(by["hypd-demo-s3"].fields.RouteTableIds, { "planned:ec2:route-table:hp-compute-us-west-2a-rt" })
  DEMO = { eks = eks }
end)

t.test("a plan for an EKS cluster that is itself only planned names the planned ids of cluster_create_eks's plan",
  function()
  local m = mark()
  local p = plan({ cluster = "hypd-later", instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a" })
  local _, total = since(m)
  t.eq(total, 0, "no mutation")
  t.eq(p.create, 12)
  local by = {}
  for _, e in ipairs(p.plan) do by[e.type] = e end
  t.eq({ by["ec2:subnet"].fields.VpcId, by["ec2:subnet"].fields.CidrBlock }, { "planned:ec2:vpc:hypd-later-vpc", nil },
    "the block is chosen once the VPC exists")
  t.eq(by["ec2:route"].fields.NatGatewayId, "planned:ec2:nat-gateway:hypd-later-nat")
  local c = by["sagemaker:cluster"]
  t.eq({ c.name, c.fields.Orchestrator.Eks.ClusterArn, c.fields.VpcConfig.SecurityGroupIds[1] },
    { "hypd-later-hp", "planned:eks:cluster:hypd-later", "planned:ec2:security-group:hypd-later-cluster" })
  -- and the 'cluster_create_eks' plan names the same ids
  local eks = assert(dispatch.call("cluster_create_eks", { cluster_tag = "later", plan = true }, E.WHO))
  local ids = {}
  for _, e in ipairs(eks.plan) do ids[e.id] = true end
  for _, id in ipairs { "planned:ec2:vpc:hypd-later-vpc", "planned:ec2:nat-gateway:hypd-later-nat",
    "planned:eks:cluster:hypd-later", "planned:ec2:security-group:hypd-later-cluster" } do
    t.ok(ids[id], id .. " is in cluster_create_eks's plan")
  end
  -- without plan, a missing EKS cluster is NOT_FOUND, the call's answer
  Hp.refused("hyperpod_create", { cluster = "hypd-later", instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a" }, "cluster", "exists", nil, "NOT_FOUND")
end)

t.test("hyperpod_create makes each resource once, waits for InService and for the nodes Ready with health labels",
  function()
  local m = mark()
  local v = create(G5)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local counts = since(m)
  t.eq(counts, { ["iam CreateRole"] = 1, ["iam AttachRolePolicy"] = 1, ["iam PutRolePolicy"] = 1,
    ["s3 CreateBucket"] = 1, ["s3 PutObject"] = 2, ["ec2 CreateSubnet"] = 1, ["ec2 CreateRouteTable"] = 1,
    ["ec2 CreateRoute"] = 1, ["ec2 AssociateRouteTable"] = 1, ["ec2 CreateVpcEndpoint"] = 1,
    ["sagemaker CreateCluster"] = 1 })
  local names = {}
  for i, s in ipairs(v.steps) do names[i] = s.name .. " " .. s.status end
  t.eq(names, { "check done", "execution_role done", "lifecycle done", "subnet done", "cluster done",
    "wait_in_service done", "wait_nodes done", "record done" })
  local waited = v.steps[6].seconds
  t.ok(waited >= 780 and waited <= 1080, "InService after about 15 minutes: " .. waited .. " s")
  local r = v.result
  DEMO.view, DEMO.hyperpod = v, r.hyperpod_cluster
  t.eq({ r.hyperpod_cluster, r.eks_cluster, r.instance_group, r.availability_zone, r.availability_zone_id,
    r.threads_per_core, r.lifecycle_bucket, r.subnet_name, r.subnet_cidr },
    { "hypd-demo-hp", "hypd-demo", "demo-ig", "us-west-2a", "usw2-az2", 1, ACCOUNT_BUCKET, "hp-compute-us-west-2a",
      "10.192.64.0/20" })
  t.eq({ r.quota.name, r.quota.value, r.quota.used }, { "ml.g5.12xlarge for cluster usage", 100, 0 })
  -- SageMaker's own view
  local d = call("sagemaker", "DescribeCluster", { ClusterName = "hypd-demo-hp" })
  t.eq({ d.ClusterStatus, d.NodeRecovery, d.NodeProvisioningMode }, { "InService", "Automatic", "Continuous" })
  t.eq(d.Orchestrator.Eks.ClusterArn, "arn:aws:eks:us-west-2:123456789012:cluster/hypd-demo")
  t.eq(d.VpcConfig.Subnets, { r.subnet_id })
  local g = d.InstanceGroups[1]
  t.eq({ g.InstanceGroupName, g.InstanceType, g.CurrentCount, g.TargetCount, g.ThreadsPerCore, g.Status },
    { "demo-ig", "ml.g5.12xlarge", 2, 2, 1, "InService" })
  t.eq(g.ExecutionRole, r.execution_role_arn)
  t.eq(g.LifeCycleConfig, { SourceS3Uri = "s3://" .. ACCOUNT_BUCKET .. "/lifecycle/base-config/",
    OnCreate = "on_create.sh" })
  t.eq(g.InstanceStorageConfigs, { { EbsVolumeConfig = { VolumeSizeInGB = 500 } } })
  t.eq(tags_of(call("sagemaker", "ListTags", { ResourceArn = d.ClusterArn }).Tags)["hypd:cluster-tag"], "demo")
  -- the nodes, as Kubernetes has them
  local nodes = nodes_of("hypd-demo", "hypd-demo-hp", "demo-ig")
  t.eq(#nodes, 2)
  local seen = {}
  for _, n in ipairs(nodes) do
    t.ok(ready(n), n.metadata.name .. " is Ready")
    t.eq(n.metadata.labels["sagemaker.amazonaws.com/node-health-status"], "Schedulable")
    t.eq(n.metadata.labels["sagemaker.amazonaws.com/deep-health-check-status"], "Passed")
    t.eq(n.metadata.labels["node.kubernetes.io/instance-type"], "ml.g5.12xlarge")
    seen[#seen + 1] = n.metadata.name
  end
  table.sort(seen)
  t.eq(r.nodes, seen)
  -- the registry knows the HyperPod cluster
  local rec = clusters.get("hypd-demo", "us-west-2")
  t.eq(rec.hyperpod, { name = "hypd-demo-hp", arn = d.ClusterArn })
end)

t.test("the compute subnet, its route table, the NAT route and the S3 gateway endpoint are as specified", function()
  local r = DEMO.view.result
  local s = call("ec2", "DescribeSubnets", { SubnetIds = { r.subnet_id } }).Subnets[1]
  local tags = tags_of(s.Tags)
  t.eq({ s.CidrBlock, s.AvailabilityZone, s.AvailabilityZoneId }, { "10.192.64.0/20", "us-west-2a", "usw2-az2" })
  t.eq(tags, { Name = "hp-compute-us-west-2a", ["hypd:cluster-tag"] = "demo", ["karpenter.sh/discovery"] = "hypd-demo",
    ["kubernetes.io/role/internal-elb"] = "1", ["kubernetes.io/cluster/hypd-demo"] = "shared" })
  local rt = call("ec2", "DescribeRouteTables", { RouteTableIds = { r.route_table_id } }).RouteTables[1]
  t.eq(tags_of(rt.Tags).Name, "hp-compute-us-west-2a-rt")
  t.eq(rt.Associations[1].SubnetId, r.subnet_id)
  local nat = call("ec2", "DescribeNatGateways", { Filter = { { Name = "vpc-id", Values = { s.VpcId } } } })
    .NatGateways[1].NatGatewayId
  local default, s3 = nil, nil
  for _, x in ipairs(rt.Routes) do
    if x.DestinationCidrBlock == "0.0.0.0/0" then default = x.NatGatewayId end
    if x.DestinationPrefixListId then s3 = x.GatewayId end
  end
  t.eq(default, nat, "0.0.0.0/0 leaves through the VPC's NAT gateway")
  t.eq(s3, r.s3_endpoint_id, "S3 goes through the gateway endpoint")
  local e = call("ec2", "DescribeVpcEndpoints", { VpcEndpointIds = { r.s3_endpoint_id } }).VpcEndpoints[1]
  t.eq({ e.ServiceName, e.VpcEndpointType, e.RouteTableIds }, { "com.amazonaws.us-west-2.s3", "Gateway",
    { r.route_table_id } })
end)

t.test("the execution role trusts SageMaker with the policies HyperPod needs; the bucket holds both scripts", function()
  local r = DEMO.view.result
  local role = call("iam", "GetRole", { RoleName = "hypd-demo-hyperpod-exec" }).Role
  t.eq(role.Arn, r.execution_role_arn)
  t.eq(tags_of(role.Tags)["hypd:cluster-tag"], "demo")
  local trust = json.decode((role.AssumeRolePolicyDocument:gsub("%%(%x%x)",
    function(h) return string.char(tonumber(h, 16)) end)))
  t.eq(trust.Statement[1].Principal.Service, "sagemaker.amazonaws.com")
  t.eq(trust.Statement[1].Action, "sts:AssumeRole")
  local attached = call("iam", "ListAttachedRolePolicies", { RoleName = role.RoleName }).AttachedPolicies
  t.eq(attached[1].PolicyArn, "arn:aws:iam::aws:policy/AmazonSageMakerClusterInstanceRolePolicy")
  local inline = call("iam", "GetRolePolicy", { RoleName = role.RoleName, PolicyName = "hypd-hyperpod-nodes" })
  local doc = json.decode((inline.PolicyDocument:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)))
  local actions = {}
  for _, st in ipairs(doc.Statement) do for _, a in ipairs(st.Action) do actions[a] = true end end
  for _, a in ipairs { "ec2:CreateNetworkInterface", "ec2:AssignPrivateIpAddresses", "ec2:DescribeSubnets",
    "ecr:GetAuthorizationToken", "ecr:BatchGetImage", "eks-auth:AssumeRoleForPodIdentity", "ec2:CreateTags",
    "s3:GetObject", "s3:ListBucket" } do
    t.ok(actions[a], "the node policy allows " .. a)
  end
  t.eq(tags_of(call("s3", "GetBucketTagging", { Bucket = r.lifecycle_bucket }).TagSet)["hypd:cluster-tag"], "demo")
  local keys = {}
  for _, o in ipairs(call("s3", "ListObjectsV2", { Bucket = r.lifecycle_bucket }).Contents) do keys[#keys + 1] = o.Key end
  t.eq(keys, { "lifecycle/base-config/on_create.sh", "lifecycle/base-config/on_create_main.sh" })
  for _, s in ipairs(lifecycle.SCRIPTS) do
    local body = call("s3", "GetObject", { Bucket = r.lifecycle_bucket, Key = "lifecycle/base-config/" .. s.key }).Body
    t.eq(body, s.body, s.key .. " is uploaded as kept in the Lua tree")
    t.like(body, "^#!/bin/bash\n")
  end
  has(lifecycle.SCRIPTS[1].body, "on_create_main.sh", "on_create.sh runs what it calls")
end)

t.test("a second call for the same cluster makes no mutating call, and a plan lists nothing", function()
  local m = mark()
  local v = create(G5)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local counts, total = since(m)
  t.eq(total, 0, "no mutation: " .. json.encode(counts))
  t.eq(v.result.hyperpod_arn, DEMO.view.result.hyperpod_arn)
  local p = plan(G5)
  t.eq({ p.create, p.change, p.delete }, { 0, 0, 0 }, json.encode(p.plan))
  -- another first group on a cluster that has one is a CONFLICT, not a wait for nodes that never come
  local other = { instance_group = "other" }
  for k, x in pairs(G5) do other[k] = x end
  local c = Hp.refused("hyperpod_create", other, "instance_group", "exists", nil, "CONFLICT")
  has(c.message, "hyperpod_add_instance_group", "says which tool adds a group")
end)

t.test("hyperpod_get_creation_status shows the operation and SageMaker's and Kubernetes' live view", function()
  local v, err = dispatch.call("hyperpod_get_creation_status", { operation_id = DEMO.view.operation_id }, E.READ)
  t.ok(v, json.encode(err))
  t.eq({ v.tool, v.operation_id, v.status }, { "hyperpod_create", DEMO.view.operation_id, "succeeded" })
  t.eq(v.aws.cluster_status, "InService")
  t.eq(v.aws.instance_groups, { { name = "demo-ig", instance_type = "ml.g5.12xlarge", status = "InService",
    current_count = 2, target_count = 2, nodes_ready = 2 } })
  -- without an id: the latest operation for the active cluster (the call refused above recorded none), with
  -- the same live view
  local latest = assert(dispatch.call("hyperpod_get_creation_status", {}, E.READ))
  t.eq({ latest.tool, latest.status }, { "hyperpod_create", "succeeded" })
  t.eq(latest.aws.cluster_status, "InService")
  local _, nf = dispatch.call("hyperpod_get_creation_status", { cluster = "hypd-nope" }, E.READ)
  t.eq(nf.code, "NOT_FOUND")
end)

t.test("a follower with wait_seconds sees each phase change of a creation as it comes", function()
  local eks = stage1("follow")
  local acc = assert(dispatch.call("hyperpod_create", { cluster = eks, instance_type = "ml.m5.xlarge", instance_count = 1,
    availability_zone = "us-west-2b" }, E.WHO))
  local phases, calls = {}, 0
  while true do
    calls = calls + 1
    local v = assert(dispatch.call("hyperpod_get_creation_status", { operation_id = acc.operation_id,
      wait_seconds = 300 }, E.READ))
    if phases[#phases] ~= v.phase then phases[#phases + 1] = v.phase end
    if v.status ~= "running" then
      t.eq(v.status, "succeeded", json.encode(v.error))
      t.eq(v.aws.cluster_status, "InService")
      break
    end
    t.ok(calls < 40, "a handful of calls, not a busy loop")
  end
  t.ok(calls <= 12, "followed in " .. calls .. " calls")
  local seen = table.concat(phases, " | ")
  has(seen, "waiting for HyperPod cluster hypd-follow-hp to be InService", "the wait was seen")
  t.eq(phases[#phases], "done")
end)

-- refusals before any mutation -----------------------------------------------------

local REFUSE -- the EKS cluster the refusals are tried on (no HyperPod cluster)

-- refused(params, field, rule, pattern): refused on REFUSE, the audit log unchanged
local function refused(params, field, rule, pattern)
  local p = { cluster = REFUSE }
  for k, v in pairs(params) do p[k] = v end
  return Hp.refused("hyperpod_create", p, field, rule, pattern)
end

t.test("bad decisions are refused before any mutation, naming the field and the rule", function()
  REFUSE = stage1("refuse")
  refused({ instance_type = "ml.r5.large", instance_count = 1, availability_zone = "us-west-2a" },
    "instance_type", "hyperpod_type", "not a SageMaker HyperPod instance type")
  local e = refused({ instance_type = "ml.p5.48xlarge", instance_count = 1, availability_zone = "us-west-2a" },
    "availability_zone", "offering", "does not offer ml%.p5%.48xlarge")
  has(e.message, "zones that do: us-west-2b, us-west-2c", "the zones that offer it")
  refused({ instance_type = "ml.g5.12xlarge", instance_count = 1, availability_zone = "us-west-2z" },
    "availability_zone", "exists")
  refused({ instance_type = "ml.g5.12xlarge", instance_count = 1 }, "availability_zone", "required")
  e = refused({ instance_type = "ml.g5.12xlarge", instance_count = 1, availability_zone = "us-west-2a",
    efa_only = true }, "efa_only", "efa_interfaces", "more than one EFA interface")
  has(e.message, "has 1 EFA interface", "the type's EFA interfaces")
  refused({ instance_type = "ml.g5.xlarge", instance_count = 1, availability_zone = "us-west-2a", efa_only = true },
    "efa_only", "efa_interfaces", "does not support EFA")
  refused({ instance_type = "ml.p5.48xlarge", instance_count = 1, capacity_type = "training-plan",
    training_plan = "arn:aws:sagemaker:us-east-1:123456789012:training-plan/hypd-p5-2x-14d" },
    "training_plan", "region", "is in us%-east%-1; this cluster is in us%-west%-2")
  refused({ instance_type = "ml.p5.48xlarge", instance_count = 1, capacity_type = "training-plan",
    training_plan = "no-such-plan" }, "training_plan", "exists")
  refused({ instance_type = "ml.g5.12xlarge", instance_count = 1, capacity_type = "training-plan",
    training_plan = "hypd-g5-1x-3d" }, "training_plan", "status", "is Expired")
  refused({ instance_type = "ml.g5.12xlarge", instance_count = 1, capacity_type = "training-plan",
    training_plan = "hypd-p5-2x-14d" }, "instance_type", "training_plan", "reserves ml%.p5%.48xlarge")
  refused({ instance_type = "ml.p5.48xlarge", instance_count = 3, capacity_type = "training-plan",
    training_plan = "hypd-p5-2x-14d" }, "instance_count", "training_plan", "reserves 2 ml%.p5%.48xlarge")
  refused({ instance_type = "ml.p5.48xlarge", instance_count = 1, capacity_type = "training-plan" },
    "training_plan", "required")
  refused({ instance_type = "ml.g5.12xlarge", instance_count = 1, availability_zone = "us-west-2a",
    training_plan = "hypd-p5-2x-14d" }, "training_plan", "capacity_type")
end)

t.test("a count above the account's Service Quotas quota is refused with the numbers and the quota to raise",
  function()
  -- the test lowers the quota through the sandbox's control route
  local r = assert(http.request { method = "POST", url = BASE .. "/_sandbox/quotas",
    body = json.encode { quota = "ml.g5.12xlarge for cluster usage", value = 3 } })
  t.eq(r.status, 200, r.body)
  local q = json.decode(r.body)
  t.like(q.quota_code, "^L%-%x+$")
  -- Service Quotas answers the lowered value, as boto3 or the CLI would see it
  local got = call("servicequotas", "GetServiceQuota", { ServiceCode = "sagemaker", QuotaCode = q.quota_code }).Quota
  t.eq({ got.QuotaName, got.Value }, { "ml.g5.12xlarge for cluster usage", 3 })
  -- hypd-demo-hp already uses 2 of them
  local e = refused({ instance_type = "ml.g5.12xlarge", instance_count = 2, availability_zone = "us-west-2a" },
    "instance_count", "quota")
  has(e.message, "2 ml.g5.12xlarge asked, 2 in use by HyperPod clusters in us-west-2, quota 3", "the numbers")
  has(e.message, "raise the Service Quotas quota 'ml.g5.12xlarge for cluster usage' (code " .. q.quota_code ..
    ", service sagemaker) to at least 4", "the quota to raise")
  -- SageMaker itself holds to the quota, as AWS does (in the demo cluster's
  -- security groups: a VpcConfig names at least one)
  local sgs = call("sagemaker", "DescribeCluster", { ClusterName = "hypd-demo-hp" }).VpcConfig.SecurityGroupIds
  local _, err = try("sagemaker", "CreateCluster", { ClusterName = "quota-probe", InstanceGroups = { {
    InstanceGroupName = "g", InstanceType = "ml.g5.12xlarge", InstanceCount = 2,
    ExecutionRole = DEMO.view.result.execution_role_arn,
    LifeCycleConfig = { SourceS3Uri = DEMO.view.result.lifecycle_s3_uri, OnCreate = "on_create.sh" } } },
    VpcConfig = { SecurityGroupIds = sgs, Subnets = { DEMO.view.result.subnet_id } } })
  t.eq(err and err.code, "ResourceLimitExceeded", err and err.message)
  t.like(err.message, "'ml%.g5%.12xlarge for cluster usage' is 3 Instances, with current utilization of 2 Instances")
  -- within the quota it goes ahead (the plan shows it)
  local p = plan({ cluster = REFUSE, instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a" })
  t.ok(p.create > 0, "1 more fits")
  assert(http.request { method = "POST", url = BASE .. "/_sandbox/quotas",
    body = json.encode { quota = q.quota_code, value = 100 } })
end)

t.test("stage 4 runs under the IAM policy hypd iam-policy prints for hyperpod_create", function()
  local eks = stage1("policed")
  local doc = assert(require("hypd.iam_policy").document { tools = { "hyperpod_create" } })
  local function set(d)
    return assert(http.request { method = "POST", url = BASE .. "/_sandbox/policy",
      headers = { ["content-type"] = "application/json" }, body = json.encode { policy = d or json.null } }).status
  end
  t.eq(set(doc), 200)
  local v = create({ cluster = eks, instance_type = "ml.m5.xlarge", instance_count = 1,
    availability_zone = "us-west-2a" })
  set(nil)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local denied = 0
  for _, e in ipairs(require("hypd.store").events(0, 1000000) or {}) do
    if e.kind == "sandbox.audit" and e.data.refused then denied = denied + 1 end
  end
  t.eq(denied, 0, "no call was refused")
end)

t.test("the plan shows the defaults and what each option changes: threads per core, spot, deep checks, EBS", function()
  local function group_of(params)
    local p = { cluster = REFUSE }
    for k, v in pairs(params) do p[k] = v end
    for _, e in ipairs(plan(p).plan) do
      if e.type == "sagemaker:cluster" then return e.fields.InstanceGroups[1], e.fields end
    end
  end
  local g, c = group_of { instance_type = "ml.p5.48xlarge", instance_count = 1, availability_zone = "us-west-2b" }
  t.eq({ g.ThreadsPerCore, g.InstanceGroupName, c.NodeRecovery }, { 2, "refuse-ig", "Automatic" },
    "2 threads per core on p5")
  g = group_of { instance_type = "ml.p4d.24xlarge", instance_count = 1, availability_zone = "us-west-2b",
    capacity_type = "spot", deep_health_checks = true, volume_size_gb = 1000, instance_group = "train",
    efa_only = true, node_recovery = "None" }
  t.eq({ g.ThreadsPerCore, g.InstanceGroupName, g.CapacityRequirements, g.OnStartDeepHealthChecks,
    g.InstanceStorageConfigs[1].EbsVolumeConfig.VolumeSizeInGB, g.NetworkInterface },
    { 2, "train", { Spot = {} }, { "InstanceStress", "InstanceConnectivity" }, 1000, { InterfaceType = "efa-only" } })
  g, c = group_of { instance_type = "ml.m5.2xlarge", instance_count = 1, availability_zone = "us-west-2a",
    threads_per_core = 2, node_recovery = "None" }
  t.eq({ g.ThreadsPerCore, g.CapacityRequirements, g.OnStartDeepHealthChecks, c.NodeRecovery }, { 2, nil, nil, "None" })
end)

t.test("the create-hyperpod skill tells an agent the tools, the decisions and how to follow with wait_seconds",
  function()
  local skill = require("hypd.api.mcp").parse_skill(assert(H.read("skills/create-hyperpod/SKILL.md")))
  t.eq(skill.name, "create-hyperpod")
  t.like(skill.description, "hyperpod_create")
  for _, word in ipairs { "hyperpod_create", "hyperpod_get_creation_status", "hyperpod_add_instance_group",
    "wait_seconds", "plan: true", "fixed_at_create", "instance_count/quota", "training_plan" } do
    has(skill.body, word, "the skill")
  end
  for name in skill.body:gmatch("`((hyperpod|cluster|aws)_[a-z_]+)`") do
    if name ~= "hyperpod_scale_instance_group" and name ~= "hyperpod_delete_instance_group" then
      t.ok(tool.get(name), name .. " is a tool")
    end
  end
end)

-- the training plan's zone ------------------------------------------------------------

t.test("a training plan's reserved zone overrides the requested one, and the result says so", function()
  local eks = stage1("plan")
  local tp = call("sagemaker", "DescribeTrainingPlan", { TrainingPlanName = "hypd-p5-2x-14d" })
  local zone = tp.ReservedCapacitySummaries[1].AvailabilityZone
  t.eq(zone, "us-west-2b")
  local v = create({ cluster = eks, instance_type = "ml.p5.48xlarge", instance_count = 2,
    capacity_type = "training-plan", training_plan = "hypd-p5-2x-14d", availability_zone = "us-west-2a" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  local r = v.result
  t.eq({ r.availability_zone, r.requested_zone, r.subnet_name, r.capacity_type, r.training_plan, r.threads_per_core },
    { "us-west-2b", "us-west-2a", "hp-compute-us-west-2b", "training-plan", tp.TrainingPlanArn, 2 })
  has(r.zone_note, "reserves its capacity in us-west-2b (usw2-az1), so the group is placed there, not in the " ..
    "requested us-west-2a", "the result says so")
  t.eq(r.quota, nil, "the plan is the capacity: no quota check")
  local g = call("sagemaker", "DescribeCluster", { ClusterName = "hypd-plan-hp" }).InstanceGroups[1]
  t.eq({ g.TrainingPlanArn, g.ThreadsPerCore, g.CurrentCount }, { tp.TrainingPlanArn, 2, 2 })
  t.eq(#nodes_of(eks, "hypd-plan-hp", "plan-ig"), 2)
end)

-- the allocator in a VPC ------------------------------------------------------------------

t.test("a VPC with no free /20 gets a secondary CIDR first, and the subnet is carved from it", function()
  local eks = stage1("tight", { vpc_cidr = "10.77.0.0/20" })
  local p = plan({ cluster = eks, instance_type = "ml.m5.xlarge", instance_count = 1, availability_zone = "us-west-2a" })
  local by = {}
  for _, e in ipairs(p.plan) do by[e.type] = e end
  t.eq(by["ec2:vpc-cidr-block"] and by["ec2:vpc-cidr-block"].fields.CidrBlock, "10.0.0.0/16")
  t.eq(by["ec2:subnet"].fields.CidrBlock, "10.0.0.0/20")
  local m = mark()
  local v = create({ cluster = eks, instance_type = "ml.m5.xlarge", instance_count = 1,
    availability_zone = "us-west-2a" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(since(m)["ec2 AssociateVpcCidrBlock"], 1)
  t.eq(v.result.subnet_cidr, "10.0.0.0/20")
  local vpc = call("ec2", "DescribeVpcs", { Filters = E.by_tag("tight") }).Vpcs[1]
  local cidrs = {}
  for _, a in ipairs(vpc.CidrBlockAssociationSet) do cidrs[#cidrs + 1] = a.CidrBlock end
  t.eq(cidrs, { "10.77.0.0/20", "10.0.0.0/16" })
  m = mark()
  t.eq(create({ cluster = eks, instance_type = "ml.m5.xlarge", instance_count = 1,
    availability_zone = "us-west-2a" }).status, "succeeded")
  local _, total = since(m)
  t.eq(total, 0, "run again: no second CIDR, no second subnet")
end)

t.test("an hp-compute-<az> subnet the VPC has already is reused, not made again", function()
  local eks = stage1("reuse")
  local vpc = call("ec2", "DescribeVpcs", { Filters = E.by_tag("reuse") }).Vpcs[1].VpcId
  local theirs = call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.192.240.0/20",
    AvailabilityZone = "us-west-2c", TagSpecifications = { { ResourceType = "subnet",
      Tags = { { Key = "Name", Value = "hp-compute-us-west-2c" } } } } }).Subnet
  local m = mark()
  local v = create({ cluster = eks, instance_type = "ml.m5.xlarge", instance_count = 1,
    availability_zone = "us-west-2c" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.result.subnet_id, theirs.SubnetId)
  local counts = since(m)
  t.eq({ counts["ec2 CreateSubnet"], counts["ec2 CreateRouteTable"], counts["ec2 CreateTags"] }, { nil, nil, nil },
    "made by someone else: used as it is, not retagged: " .. json.encode(counts))
  t.eq(tags_of(call("ec2", "DescribeSubnets", { SubnetIds = { theirs.SubnetId } }).Subnets[1].Tags),
    { Name = "hp-compute-us-west-2c" })
end)

t.cleanup(function()
  require("hypd.aws").on_call = nil
  srv:stop()
end)
