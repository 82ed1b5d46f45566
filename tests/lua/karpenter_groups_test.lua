-- Managed Karpenter's defaults keep the work they scaled for, and the
-- caller chooses the groups (issue 19, "Managed autoscaling defaults that
-- keep the workload"), against the in-process sandbox under the virtual
-- clock, through the registry and hypd.tool.operations:
--   * with the defaults (karpenter = true), a Job against a group at 0
--     nodes gets a node, completes (no pod lost with its node), and the
--     node goes once idle for the default consolidateAfter: 0 to 1 to 0;
--   * the plan names every instance group and what the call does to it;
--     a sized group is not put under Karpenter unless named, and keeps its
--     nodes; named in karpenter.instance_groups, the plan says its nodes
--     will go when idle; a name that is no group is refused;
--   * hyperpod_get_advanced_features says each group's coverage, and
--     hyperpod_add_instance_group says (in its plan and its result) that a
--     group added later is not under Karpenter and how to put it under.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()
local srv, OPTS = H.sandbox_here()
local FH = dofile("tests/lua/features_helpers.lua")
local call = FH.aws(OPTS)
local core, json, op = require "hypd.core", require "hypd.json", require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local task = require "hypd.task"
local ADMIN = { name = "admin-tester", scope = "admin", front = "test" }
local UPDATE, GET = "hyperpod_update_advanced_features", "hyperpod_get_advanced_features"
local EKS, HP = "kgrp", "kgrp-hp"
local K

local function update(params)
  params.cluster = EKS
  local acc, err = dispatch.call(UPDATE, params, ADMIN)
  if not acc then return nil, err end
  return op.wait(acc.operation_id)
end

local function plan(name, params)
  params.cluster = EKS
  params.plan = true
  local r, err = dispatch.call(name, params, ADMIN)
  assert(r, err and err.message)
  return r.plan
end

-- groups(entries) -> {ig = entry} of a plan's hyperpod:autoscaling entries
local function groups(entries)
  local out = {}
  for _, e in ipairs(entries) do
    if e.type == "hyperpod:autoscaling" then out[e.name:match("^(%S+)")] = e end
  end
  return out
end

local function has(entries, action, typ, name)
  for _, e in ipairs(entries) do
    if e.action == action and e.type == typ and e.name == name then return e end
  end
end

local function group(name)
  for _, g in ipairs(call("sagemaker", "DescribeCluster", { ClusterName = HP }).InstanceGroups) do
    if g.InstanceGroupName == name then return g end
  end
end

-- job(name) -> {lost, most, done, gone}: a Job of one 4-GPU pod that runs
-- 600 s against the group gpu, followed until the node it got is gone
-- (lost: why a pod of it failed; most: the group's highest target count;
-- done, gone: seconds after the start)
local function job(name)
  assert(K:create { apiVersion = "batch/v1", kind = "Job", metadata = { name = name, namespace = "default" },
    spec = { backoffLimit = 0, template = { metadata = { annotations = { ["sandbox.hypd.io/run-seconds"] = "600" } },
      spec = { restartPolicy = "Never", nodeSelector = { ["node.kubernetes.io/instance-type"] = "ml.g5.12xlarge" },
        containers = { { name = "main", image = "busybox:1.36", command = { "sh", "-c", "echo training" },
          resources = { limits = { ["nvidia.com/gpu"] = "4" } } } } } } } })
  local t0 = core.now()
  local most, done, gone, node, lost = 0, nil, nil, nil, nil
  while core.now() - t0 < 4 * 3600 do
    task.sleep(10)
    local g = group("gpu")
    most = math.max(most, g.TargetCount)
    for _, p in ipairs(K:list("v1", "Pod", { namespace = "default" }) or {}) do
      if (p.metadata.labels or {})["job-name"] == name then
        node = node or p.spec.nodeName
        if p.status.phase == "Failed" then lost = (p.status.reason or "Failed") .. ": " .. tostring(p.status.message) end
      end
    end
    local j = K:get("batch/v1", "Job", name, { namespace = "default" })
    if not done and ((j.status or {}).succeeded or 0) >= 1 then done = core.now() - t0 end
    if lost or ((j.status or {}).failed or 0) > 0 then break end
    if done and g.TargetCount == 0 and node and not K:get("v1", "Node", node) then gone = core.now() - t0 break end
  end
  return { lost = lost, most = most, done = done, gone = gone }
end

t.test("a HyperPod cluster with a GPU group at 0 nodes and a CPU group of 1", function()
  local eks = H.eks_cluster(call, EKS, 74)
  local trust = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }
  local role = call("iam", "CreateRole", { RoleName = EKS .. "-exec", AssumeRolePolicyDocument = trust }).Role.Arn
  local sg = call("ec2", "CreateSecurityGroup", { GroupName = EKS .. "-hp", Description = "hyperpod",
    VpcId = eks.resourcesVpcConfig.vpcId }).GroupId
  call("s3", "CreateBucket", { Bucket = EKS .. "-lcc", CreateBucketConfiguration = { LocationConstraint = "us-west-2" } })
  call("s3", "PutObject", { Bucket = EKS .. "-lcc", Key = "lcc/on_create.sh", Body = "#!/bin/bash\n" })
  local lcc = { SourceS3Uri = "s3://" .. EKS .. "-lcc/lcc/", OnCreate = "on_create.sh" }
  call("sagemaker", "CreateCluster", { ClusterName = HP, NodeRecovery = "None", NodeProvisioningMode = "Continuous",
    InstanceGroups = {
      { InstanceGroupName = "gpu", InstanceType = "ml.g5.12xlarge", InstanceCount = 0, ExecutionRole = role,
        LifeCycleConfig = lcc },
      { InstanceGroupName = "cpu", InstanceType = "ml.m5.2xlarge", InstanceCount = 1, ExecutionRole = role,
        LifeCycleConfig = lcc } },
    Orchestrator = { Eks = { ClusterArn = eks.arn } },
    VpcConfig = { Subnets = { eks.resourcesVpcConfig.subnetIds[1] }, SecurityGroupIds = { sg } } })
  FH.wait(function() return call("sagemaker", "DescribeCluster", { ClusterName = HP }).ClusterStatus == "InService" end)
  K = require("hypd.k8s").connect { cluster = EKS, region = "us-west-2" }
  FH.wait(function() return #(K:list("v1", "Node") or {}) == 1 end)
  -- a NAT gateway, as cluster_create_eks makes one: hyperpod_add_instance_group needs it
  local vpc = eks.resourcesVpcConfig.vpcId
  local igw = call("ec2", "CreateInternetGateway", {}).InternetGateway.InternetGatewayId
  call("ec2", "AttachInternetGateway", { InternetGatewayId = igw, VpcId = vpc })
  local eip = call("ec2", "AllocateAddress", { Domain = "vpc" }).AllocationId
  call("ec2", "CreateNatGateway", { SubnetId = eks.resourcesVpcConfig.subnetIds[2], AllocationId = eip })
  FH.wait(function()
    local n = call("ec2", "DescribeNatGateways", { Filter = { { Name = "vpc-id", Values = { vpc } } } }).NatGateways
    return n[1] and n[1].State == "available"
  end)
  t.eq(group("cpu").TargetCount, 1)
end)

t.test("a group that is no group of the cluster, or an empty list, is refused before anything is sent", function()
  local m = FH.mark()
  for _, c in ipairs { { { "nope" }, "exists", "nope" }, { {}, "min_items", "at least one" } } do
    local v = update { karpenter = { enabled = true, instance_groups = c[1] } }
    t.eq({ v.status, v.error.code }, { "failed", "VALIDATION" }, json.encode(v.error))
    t.eq({ v.error.fields[1].field, v.error.fields[1].rule }, { "karpenter.instance_groups", c[2] })
    t.like(v.error.message, c[3])
  end
  local _, n = FH.since(m)
  t.eq(n, 0, "no AWS mutation")
end)

t.test("the default plan names every group: the group at 0 goes under Karpenter, the sized one keeps its node",
  function()
  local m = FH.mark()
  local entries = plan(UPDATE, { karpenter = true })
  local pool = has(entries, "create", "k8s:nodepool", "gpu-nodepool")
  t.ok(pool, "a NodePool for the group at 0 nodes")
  t.eq(pool and pool.fields.spec.disruption.consolidateAfter, "10m", "the default consolidateAfter")
  t.eq(has(entries, "create", "k8s:nodepool", "cpu-nodepool"), nil, "none for the sized group")
  local g = groups(entries)
  t.eq(g.gpu and g.gpu.action, "change")
  t.like(g.gpu and g.gpu.how or "", "put under Karpenter")
  t.like(g.gpu and g.gpu.how or "", "idle for 10m")
  t.eq(g.cpu and g.cpu.action, "keep")
  t.like(g.cpu and g.cpu.how or "", "not under Karpenter: keeps its 1 node")
  t.like(g.cpu and g.cpu.how or "", "instance_groups")
  local _, n = FH.since(m)
  t.eq(n, 0, "a plan sends nothing")
end)

t.test("with the defaults, a Job against the group at 0 gets a node, completes, and the node goes: 0 to 1 to 0",
  function()
  local v = update { karpenter = true }
  t.eq(v.status, "succeeded", json.encode(v.error))
  local pool = assert(K:get("karpenter.sh/v1", "NodePool", "gpu-nodepool"))
  t.eq(pool.spec.disruption.consolidateAfter, "10m")
  t.eq(K:get("karpenter.sh/v1", "NodePool", "cpu-nodepool"), nil, "the sized group is not under Karpenter")
  t.eq(group("gpu").TargetCount, 0)
  local r = job("train")
  local lost, most, done, gone = r.lost, r.most, r.done, r.gone
  t.eq(lost, nil, "no pod of the Job failed (a node removed under it fails it NodeLost)")
  t.eq(most, 1, "one node added for the Job")
  t.ok(done, "the Job completed")
  t.ok(gone, "the node went once idle: the group is back at 0")
  t.ok(gone and done and gone - done >= 600, "not before the default consolidateAfter, 10m (idle " ..
    tostring(gone and done and (gone - done)) .. " s)")
  t.ok(gone and done and gone - done <= 600 + 300, "counted from when the node became empty: it went within " ..
    "minutes of 10m idle (a node takes up to 240 s to shut down)")
  t.eq(group("cpu").TargetCount, 1, "the sized group kept its node all along")
  t.eq(#(K:list("v1", "Node") or {}), 1, "the CPU node is still there")
end)

t.test("hyperpod_get_advanced_features says each group's coverage", function()
  local r = assert(dispatch.call(GET, { cluster = EKS, features = { "karpenter" } }, ADMIN))
  local s = r.features.karpenter
  t.eq(s.status, "enabled", json.encode(s))
  local by = {}
  for _, row in ipairs(s.instance_groups or {}) do by[row.instance_group] = row end
  t.eq(by.gpu and by.gpu.autoscaling, true)
  t.eq(by.gpu and by.gpu.nodepool, "gpu-nodepool")
  t.eq(by.cpu and by.cpu.autoscaling, false)
  t.like(by.cpu and by.cpu.note or "", "not under Karpenter")
  t.like(s.note or "", "cpu")
end)

t.test("named in karpenter.instance_groups, a sized group's plan says its nodes go when idle", function()
  local entries = plan(UPDATE, { karpenter = { enabled = true, instance_groups = { "cpu" } } })
  t.ok(has(entries, "create", "k8s:nodepool", "cpu-nodepool"), "a NodePool for the named group")
  local g = groups(entries)
  t.eq(g.cpu and g.cpu.action, "change")
  t.like(g.cpu and g.cpu.how or "", "its 1 node%(s%) are removed once idle for 10m, never below MinCount 0")
  t.eq(g.gpu and g.gpu.action, "keep")
  t.like(g.gpu and g.gpu.how or "", "stays under Karpenter")
end)

t.test("a group added later is said not to be under Karpenter, in the plan and the result", function()
  local params = { instance_group = "gpu-2", instance_type = "ml.g5.12xlarge", instance_count = 0,
    availability_zone = "us-west-2a" }
  local entries = plan("hyperpod_add_instance_group", json.decode(json.encode(params)))
  local e = groups(entries)["gpu-2"]
  t.eq(e and e.action, "keep", json.encode(entries))
  t.like(e and e.how or "", "not under Karpenter")
  t.like(e and e.how or "", "instance_groups")
  params.cluster = EKS
  local acc = assert(dispatch.call("hyperpod_add_instance_group", params, ADMIN))
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  local said = table.concat(v.result.notes or {}, "\n")
  t.like(said, "gpu%-2 is not under Karpenter")
  local r = assert(dispatch.call(GET, { cluster = EKS, features = { "karpenter" } }, ADMIN))
  local row
  for _, x in ipairs(r.features.karpenter.instance_groups) do if x.instance_group == "gpu-2" then row = x end end
  t.eq(row and row.autoscaling, false)
  -- at 0 nodes, the default covers it
  v = update { karpenter = true }
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.ok(K:get("karpenter.sh/v1", "NodePool", "gpu-2-nodepool"), "karpenter=true put the new group at 0 under it")
  t.eq(K:get("karpenter.sh/v1", "NodePool", "cpu-nodepool"), nil, "and still not the sized group")
end)

t.test("the sandbox's Karpenter counts consolidateAfter from when a node is empty: with 0s, the node made " ..
  "for a pod is kept until the pod lands, and goes once the Job is done", function()
  local v = update { karpenter = { enabled = true, consolidate_after = "0s" } }
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(K:get("karpenter.sh/v1", "NodePool", "gpu-nodepool").spec.disruption.consolidateAfter, "0s")
  local r = job("train-0s")
  t.eq(r.lost, nil, "no pod of the Job failed")
  t.eq(r.most, 1, "one node added for the Job")
  t.ok(r.done, "the Job completed")
  t.ok(r.gone and r.done and r.gone - r.done < 300, "the node went soon after (idle " ..
    tostring(r.gone and r.done and (r.gone - r.done)) .. " s)")
end)

t.cleanup(function() srv:stop() end)
