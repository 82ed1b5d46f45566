-- The node group tools through dispatch.call against the in-process sandbox
-- under the virtual clock: cluster_list_instance_groups (EKS managed node
-- groups and HyperPod instance groups in one list, groups at zero too),
-- cluster_scale_node_group and cluster_delete_node_group (their plans send
-- no mutation; bad input is refused before any mutation, naming the field
-- and the rule; a HyperPod group is refused by name; a second call changes
-- nothing; the nodes are counted in Kubernetes with hypd's client), and
-- cluster_get_node_group_status following them with wait_seconds.
local t = require "hypd.tap"
local H = dofile("tests/lua/helpers.lua")
local srv = H.sandbox_here()
require("hypd.tool.loader").load()
local E = dofile("tests/lua/eks_helpers.lua")
local dispatch = require "hypd.tool.dispatch"
local clusters, core, json, k8s, op, task, tool = require "hypd.clusters", require "hypd.core", require "hypd.json",
  require "hypd.k8s", require "hypd.tool.operations", require "hypd.task", require "hypd.tool.registry"
local call, mark, since = E.call, E.mark, E.since

-- default_sg(subnet) -> the default security group of the subnet's VPC (a
-- HyperPod VpcConfig names 1 to 5 security groups)
local function default_sg(subnet)
  local vpc = call("ec2", "DescribeSubnets", { SubnetIds = { subnet } }).Subnets[1].VpcId
  return call("ec2", "DescribeSecurityGroups", { Filters = { { Name = "vpc-id", Values = { vpc } },
    { Name = "group-name", Values = { "default" } } } }).SecurityGroups[1].GroupId
end
local WHO, READ = E.WHO, E.READ
local ADMIN = { name = "admin", scope = "admin", front = "test" }

local EKS = "ngt-eks"
local HP = "ngt-hp"
local c, role, subnets

-- esc(s) -> a Lua pattern matching s literally
local function esc(s) return (s:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0")) end

local function trust(service)
  return json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow", Principal = { Service = service },
    Action = "sts:AssumeRole" } } }
end

local function nodegroup(name) return call("eks", "DescribeNodegroup", { clusterName = EKS, nodegroupName = name }).nodegroup end

-- settle(name): waits (simulated) until the node group is no longer CREATING or UPDATING
local function settle(name)
  for _ = 1, 200 do
    local g = nodegroup(name)
    if g.status ~= "CREATING" and g.status ~= "UPDATING" then return g end
    task.sleep(15)
  end
  error("node group " .. name .. " never settled")
end

-- nodes(group) -> the Node objects of a managed node group, read with hypd's Kubernetes client
local function nodes(group)
  local list = assert(k8s.connect { cluster = EKS, region = "us-west-2" }:list("v1", "Node",
    { labels = { ["eks.amazonaws.com/nodegroup"] = group } }))
  return list
end

-- mutations(m) -> {"service Operation" = n} of the mutating calls since mark m
local function mutations(m)
  local counts, total = since(m)
  return counts, total
end

-- by_name(list) -> name -> entry
local function by_name(list)
  local out = {}
  for _, e in ipairs(list) do out[e.name] = e end
  return out
end

-- run(tool, params [, who]) -> the finished operation's view
local function run(name, params, who)
  local acc, err = dispatch.call(name, params, who or WHO)
  assert(acc, json.encode(err))
  t.ok(acc.operation_id, name .. " answers with an operation")
  t.eq(acc.status_tool, "cluster_get_node_group_status")
  return op.wait(acc.operation_id), acc
end

t.test("a cluster with two managed node groups (one at zero, one spot) and a HyperPod cluster (one group at zero)",
  function()
  c = H.eks_cluster(call, EKS, 61)
  subnets = c.resourcesVpcConfig.subnetIds
  role = call("iam", "CreateRole", { RoleName = "ngt-node", AssumeRolePolicyDocument = trust("ec2.amazonaws.com") }).Role.Arn
  local exec = call("iam", "CreateRole", { RoleName = "ngt-exec",
    AssumeRolePolicyDocument = trust("sagemaker.amazonaws.com") }).Role.Arn
  for _, g in ipairs {
    { nodegroupName = "system", instanceTypes = { "m5.large" }, scalingConfig = { minSize = 1, maxSize = 3, desiredSize = 2 } },
    { nodegroupName = "gpu-zero", instanceTypes = { "g5.xlarge" },
      scalingConfig = { minSize = 0, maxSize = 2, desiredSize = 0 } },
    { nodegroupName = "spot", instanceTypes = { "c5.large", "c5.xlarge" }, capacityType = "SPOT",
      scalingConfig = { minSize = 1, maxSize = 2, desiredSize = 1 } },
  } do
    g.clusterName, g.nodeRole, g.subnets = EKS, role, subnets
    call("eks", "CreateNodegroup", g)
  end
  call("sagemaker", "CreateCluster", { ClusterName = HP, Orchestrator = { Eks = { ClusterArn = c.arn } },
    VpcConfig = { Subnets = { subnets[1] }, SecurityGroupIds = { default_sg(subnets[1]) } },
    InstanceGroups = {
      { InstanceGroupName = "workers", InstanceType = "ml.g5.8xlarge", InstanceCount = 2, ExecutionRole = exec },
      { InstanceGroupName = "idle", InstanceType = "ml.c5.xlarge", InstanceCount = 0, ExecutionRole = exec },
    } })
  for _, n in ipairs { "system", "gpu-zero", "spot" } do t.eq(settle(n).status, "ACTIVE", n) end
  while call("sagemaker", "DescribeCluster", { ClusterName = HP }).ClusterStatus ~= "InService" do task.sleep(30) end
  clusters.set_active { name = EKS, region = "us-west-2", arn = c.arn }
  t.eq(#nodes("system"), 2, "the system group's two nodes joined Kubernetes")
end)

t.test("cluster_list_instance_groups lists EKS node groups and HyperPod groups of the active cluster in one list",
  function()
  local out = assert(dispatch.call("cluster_list_instance_groups", {}, READ))
  t.eq(out.cluster, EKS)
  t.eq(out.hyperpod_cluster, HP)
  local g = by_name(out.instance_groups)
  t.eq(#out.instance_groups, 5, "three node groups and two instance groups")
  t.like(g.system.cost_unknown or "", "EKS node group", "hypd does not price an EKS node group's EC2 instances")
  g.system.cost_unknown = nil
  t.eq(g.system, { name = "system", kind = "eks-nodegroup", instance_types = { "m5.large" }, current = 2, desired = 2,
    min = 1, max = 3, status = "ACTIVE", capacity_type = "on-demand", ami_type = "AL2023_x86_64_STANDARD",
    version = c.version })
  t.eq({ g["gpu-zero"].current, g["gpu-zero"].desired, g["gpu-zero"].min, g["gpu-zero"].max, g["gpu-zero"].ami_type },
    { 0, 0, 0, 2, "AL2023_x86_64_NVIDIA" }, "a node group at zero is listed")
  t.eq({ g.spot.capacity_type, g.spot.instance_types }, { "spot", { "c5.large", "c5.xlarge" } })
  t.eq({ g.workers.kind, g.workers.instance_types, g.workers.current, g.workers.desired, g.workers.status,
    g.workers.capacity_type, g.workers.hyperpod_cluster },
    { "hyperpod", { "ml.g5.8xlarge" }, 2, 2, "InService", "on-demand", HP })
  t.eq({ g.idle.kind, g.idle.current, g.idle.desired, g.idle.max }, { "hyperpod", 0, 0, json.null },
    "a HyperPod group at zero is listed")
  t.eq(out.kubernetes, "read", "the nodes were counted in Kubernetes")
  -- the same for a cluster named explicitly
  local named = assert(dispatch.call("cluster_list_instance_groups", { cluster = EKS, region = "us-west-2" }, READ))
  t.eq(#named.instance_groups, 5)
end)

t.test("cluster_get_status names the EKS node groups its cost leaves unpriced (EC2 instances), never a figure",
  function()
  local out = assert(dispatch.call("cluster_get_status", {}, READ))
  local cost = out.cost
  t.ok(cost, "a cost: " .. json.encode(out.cost_error))
  local names = {}
  for _, u in ipairs(cost and cost.unpriced or {}) do
    if u.type == "eks-nodegroup" then names[#names + 1] = u.name; t.like(u.why, "EC2") end
  end
  table.sort(names)
  t.eq(names, { "gpu-zero", "spot", "system" })
  for _, i in ipairs(cost and cost.items or {}) do t.ok(i.type ~= "eks-nodegroup", "no node group priced") end
end)

t.test("cluster_list_instance_groups refuses an unknown cluster, naming the field", function()
  local out, err = dispatch.call("cluster_list_instance_groups", { cluster = "no-such-cluster" }, READ)
  t.fails(out, err, "VALIDATION")
  t.eq(err.fields[1].field, "cluster")
end)

t.test("cluster_scale_node_group plan = true shows the change and sends no mutation", function()
  local m = mark()
  local out = assert(dispatch.call("cluster_scale_node_group", { node_group = "system", desired_size = 3, plan = true }, WHO))
  t.eq({ out.create, out.change, out.delete }, { 0, 1, 0 })
  t.eq(out.plan[1].action, "change")
  t.eq(out.plan[1].type, "eks:nodegroup-scaling")
  t.eq(out.plan[1].changes, { desiredSize = { from = 2, to = 3 } }, "only desiredSize differs")
  local _, total = mutations(m)
  t.eq(total, 0, "no mutating call reached the sandbox")
  t.eq(nodegroup("system").scalingConfig.desiredSize, 2, "nothing changed")
end)

t.test("desired_size outside the group's min/max (none given) is refused before any mutation, naming the rule",
  function()
  local m = mark()
  local out, err = dispatch.call("cluster_scale_node_group", { node_group = "system", desired_size = 5, plan = true }, WHO)
  t.fails(out, err, "VALIDATION")
  t.eq(err.fields[1], { field = "desired_size", rule = "maximum",
    message = "desired_size 5 is above the node group's maximum size 3; pass max_size to raise it" })
  local v = run("cluster_scale_node_group", { node_group = "system", desired_size = 0 })
  t.eq(v.status, "failed")
  t.eq(v.error.code, "VALIDATION")
  t.eq(v.error.fields[1].field, "desired_size")
  t.eq(v.error.fields[1].rule, "minimum")
  t.like(v.error.message, "below the node group's minimum size 1; pass min_size")
  v = run("cluster_scale_node_group", { node_group = "system", desired_size = 2, min_size = 3, max_size = 2 })
  t.eq({ v.status, v.error.fields[1].field, v.error.fields[1].rule }, { "failed", "min_size", "range" })
  local _, total = mutations(m)
  t.eq(total, 0, "no mutating call reached the sandbox")
end)

t.test("an unknown node group is refused, listing the node groups there are", function()
  local m = mark()
  local out, err = dispatch.call("cluster_scale_node_group", { node_group = "nope", desired_size = 1, plan = true }, WHO)
  t.fails(out, err, "VALIDATION")
  t.eq({ err.fields[1].field, err.fields[1].rule }, { "node_group", "unknown" })
  t.like(err.message, "has no managed node group named nope %(it has: gpu%-zero, spot, system%)")
  local v = run("cluster_delete_node_group", { node_group = "nope" }, ADMIN)
  t.eq({ v.status, v.error.code, v.error.fields[1].rule }, { "failed", "VALIDATION", "unknown" })
  local _, total = mutations(m)
  t.eq(total, 0)
end)

t.test("a HyperPod instance group is refused by the scale and delete tools, which name it", function()
  local m = mark()
  for _, case in ipairs { { "cluster_scale_node_group", { node_group = "workers", desired_size = 3 }, WHO },
                          { "cluster_delete_node_group", { node_group = "workers" }, ADMIN } } do
    local v = run(case[1], case[2], case[3])
    t.eq(v.status, "failed", case[1])
    t.eq({ v.error.code, v.error.fields[1].field, v.error.fields[1].rule }, { "VALIDATION", "node_group", "kind" })
    t.like(v.error.message, esc("workers is an instance group of HyperPod cluster " .. HP ..
      ", not an EKS managed node group"))
  end
  local _, total = mutations(m)
  t.eq(total, 0, "nothing was sent")
  t.eq(call("sagemaker", "DescribeCluster", { ClusterName = HP }).InstanceGroups[1].TargetCount, 2)
end)

t.test("cluster_scale_node_group scales up: one UpdateNodegroupConfig, ACTIVE at 3, three Ready nodes", function()
  local m = mark()
  local t0 = core.now()
  local v = run("cluster_scale_node_group", { node_group = "system", desired_size = 3 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  local r = v.result
  t.eq({ r.from.desiredSize, r.to.desiredSize, r.status, r.nodes_ready, r.changed }, { 2, 3, "ACTIVE", 3, true })
  local counts = mutations(m)
  t.eq(counts, { ["eks UpdateNodegroupConfig"] = 1 }, "exactly one mutation")
  local took = core.now() - t0
  t.ok(took >= 60 and took <= 400, "simulated minutes, not instant and not forever: " .. took .. " s")
  local g = nodegroup("system")
  t.eq({ g.status, g.scalingConfig }, { "ACTIVE", { minSize = 1, maxSize = 3, desiredSize = 3 } })
  t.eq(#nodes("system"), 3, "three Nodes in Kubernetes")
end)

t.test("the same call again changes nothing: no mutating call", function()
  local m = mark()
  local v = run("cluster_scale_node_group", { node_group = "system", desired_size = 3 })
  t.eq(v.status, "succeeded")
  t.eq(v.result.changed, false)
  local _, total = mutations(m)
  t.eq(total, 0)
end)

t.test("scaling to zero with min_size 0 lowers both in one update and the nodes leave Kubernetes", function()
  local m = mark()
  local v = run("cluster_scale_node_group", { node_group = "system", desired_size = 0, min_size = 0 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.result.to, { minSize = 0, maxSize = 3, desiredSize = 0 })
  t.eq(mutations(m), { ["eks UpdateNodegroupConfig"] = 1 })
  t.eq(#nodes("system"), 0, "no Node left")
  local listed = by_name(assert(dispatch.call("cluster_list_instance_groups", {}, READ)).instance_groups)
  t.eq({ listed.system.current, listed.system.desired, listed.system.min }, { 0, 0, 0 }, "listed at zero")
end)

t.test("cluster_get_node_group_status follows a scale with wait_seconds, answering when the phase changes", function()
  local acc = assert(dispatch.call("cluster_scale_node_group", { node_group = "gpu-zero", desired_size = 2 }, WHO))
  local seen, t0 = {}, core.now()
  local last
  for _ = 1, 20 do
    local s = assert(dispatch.call("cluster_get_node_group_status", { operation_id = acc.operation_id, wait_seconds = 300 },
      READ))
    last = s
    seen[#seen + 1] = s.operation.phase
    if s.operation.status ~= "running" then break end
  end
  t.eq(last.operation.status, "succeeded")
  t.ok(#seen >= 2 and #seen < 20, "a handful of calls: " .. table.concat(seen, ", "))
  t.ok(core.now() - t0 < 20 * 300, "it answered at changes, not at every time-out")
  t.eq({ last.node_group.status, last.node_group.desired, last.node_group.current, last.node_group.kind },
    { "ACTIVE", 2, 2, "eks-nodegroup" })
  -- by cluster and node group, without the id
  local s = assert(dispatch.call("cluster_get_node_group_status", { node_group = "gpu-zero" }, READ))
  t.eq(s.operation.operation_id, acc.operation_id)
  local gpu = nodes("gpu-zero")
  t.eq(#gpu, 2)
  t.eq(gpu[1].status.capacity["nvidia.com/gpu"], "1", "a g5.xlarge node has its GPU")
end)

t.test("a scale called while the group is UPDATING waits for it, then applies", function()
  call("eks", "UpdateNodegroupConfig", { clusterName = EKS, nodegroupName = "spot", scalingConfig = { maxSize = 3 } })
  t.eq(nodegroup("spot").status, "UPDATING")
  local v = run("cluster_scale_node_group", { node_group = "spot", desired_size = 3 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(nodegroup("spot").scalingConfig, { minSize = 1, maxSize = 3, desiredSize = 3 })
end)

t.test("a scale stopped while it waits (the host stopping) resumes and sends no second update", function()
  local m = mark()
  local off
  off = op.subscribe(function(ev)
    if ev.kind == "operation.phase" and ev.tool == "cluster_scale_node_group" and
        tostring(ev.phase):find("^waiting for EKS node group") then
      off()
      local victim = op.active()[ev.operation_id]
      task.spawn(function() victim:cancel("the host is stopping (the test interrupts it)") end)
    end
  end)
  local acc = assert(dispatch.call("cluster_scale_node_group", { node_group = "spot", desired_size = 2 }, WHO))
  t.eq(op.wait(acc.operation_id).status, "running", "the record stays running")
  t.eq(op.resume(), 1, "one operation resumed")
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(mutations(m), { ["eks UpdateNodegroupConfig"] = 1 }, "one update in all")
  t.eq(nodegroup("spot").scalingConfig.desiredSize, 2)
end)

t.test("a DEGRADED group (EKS could not launch its instances) is refused with EKS's reason, before any mutation",
  function()
  local faults = require "sandbox.faults"
  assert(faults.configure { insufficient_capacity = { { instance_type = "g5.xlarge" } } })
  t.cleanup(function() faults.configure {} end)
  local v = run("cluster_scale_node_group", { node_group = "gpu-zero", desired_size = 0, min_size = 0 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  v = run("cluster_scale_node_group", { node_group = "gpu-zero", desired_size = 1 })
  t.eq(v.status, "failed", "the scale-up fails")
  t.eq(v.error.code, "FAILED")
  t.like(v.error.message, "AsgInstanceLaunchFailures: Could not launch On%-Demand Instances")
  t.eq(nodegroup("gpu-zero").status, "DEGRADED")
  local m = mark()
  v = run("cluster_scale_node_group", { node_group = "gpu-zero", desired_size = 2 })
  t.eq({ v.status, v.error.code, v.error.fields[1].rule }, { "failed", "CONFLICT", "state" })
  t.like(v.error.message, "is DEGRADED and cannot be scaled until it is ACTIVE: AsgInstanceLaunchFailures")
  local _, total = mutations(m)
  t.eq(total, 0, "nothing was sent")
  faults.configure {}
end)

t.test("cluster_delete_node_group plan = true lists the delete and sends no mutation", function()
  local m = mark()
  local out = assert(dispatch.call("cluster_delete_node_group", { node_group = "gpu-zero", plan = true }, ADMIN))
  t.eq({ out.create, out.change, out.delete }, { 0, 0, 1 })
  t.eq({ out.plan[1].action, out.plan[1].type, out.plan[1].name }, { "delete", "eks:nodegroup", EKS .. "/gpu-zero" })
  t.like(out.plan[1].id, "^arn:aws:eks:us%-west%-2:%d+:nodegroup/" .. esc(EKS) .. "/gpu%-zero/")
  local _, total = mutations(m)
  t.eq(total, 0)
  t.eq(nodegroup("gpu-zero").status, "DEGRADED", "the group is as it was")
end)

t.test("cluster_delete_node_group needs the admin scope", function()
  local out, err = dispatch.call("cluster_delete_node_group", { node_group = "gpu-zero" }, WHO)
  t.fails(out, err, "FORBIDDEN")
end)

t.test("cluster_delete_node_group deletes the (DEGRADED) group and waits until it and its nodes are gone", function()
  local m = mark()
  local t0 = core.now()
  local v = run("cluster_delete_node_group", { node_group = "gpu-zero" }, ADMIN)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq({ v.result.deleted, v.result.node_group }, { true, "gpu-zero" })
  t.eq(mutations(m), { ["eks DeleteNodegroup"] = 1 }, "one DeleteNodegroup")
  t.ok(core.now() - t0 >= 180, "deleting takes minutes of simulated time")
  t.eq(call("eks", "ListNodegroups", { clusterName = EKS }).nodegroups, { "spot", "system" })
  t.eq(#nodes("gpu-zero"), 0, "its Nodes left Kubernetes")
  local s = assert(dispatch.call("cluster_get_node_group_status", { operation_id = v.operation_id }, READ))
  t.eq(s.node_group.status, "NOT_FOUND")
end)

t.test("the IAM policy hypd iam-policy makes for the four tools is enough when the sandbox enforces it", function()
  local policy = require "sandbox.policy"
  -- the EKS cluster is not hypd's (the test made it): given as a resource, as a user gives an imported one
  -- (the tools only read SageMaker, which needs no resource)
  local doc = assert(require("hypd.iam_policy").document { tools = { "cluster_list_instance_groups",
    "cluster_scale_node_group", "cluster_delete_node_group", "cluster_get_node_group_status" },
    resources = { "arn:aws:eks:us-west-2:123456789012:cluster/ngt-eks" } })
  assert(policy.set(doc))
  t.cleanup(function() policy.set(nil) end)
  local _, denied = require("hypd.aws").try("iam", "GetRole", { RoleName = "ngt-node" }, E.OPTS)
  t.eq(denied and denied.code, "AccessDenied", "the policy is enforced: what it does not allow is refused")
  local m = mark()
  t.ok(dispatch.call("cluster_list_instance_groups", {}, READ), "the list")
  local v = run("cluster_scale_node_group", { node_group = "spot", desired_size = 1 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  v = run("cluster_delete_node_group", { node_group = "spot" }, ADMIN)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(mutations(m), { ["eks UpdateNodegroupConfig"] = 1, ["eks DeleteNodegroup"] = 1 }, "nothing was refused")
  policy.set(nil)
end)

t.test("the HyperPod cluster was never touched", function()
  local d = call("sagemaker", "DescribeCluster", { ClusterName = HP })
  t.eq(d.ClusterStatus, "InService")
  t.eq({ d.InstanceGroups[1].TargetCount, d.InstanceGroups[2].TargetCount }, { 2, 0 })
end)

t.test("on a cluster whose Kubernetes API hypd cannot read (no access entry) the tools still work, saying so",
  function()
  local name = "ngt-noaccess"
  local vpc = call("ec2", "CreateVpc", { CidrBlock = "10.62.0.0/16" }).Vpc.VpcId
  local sn = {}
  for i, az in ipairs { "us-west-2a", "us-west-2b" } do
    sn[i] = call("ec2", "CreateSubnet", { VpcId = vpc, CidrBlock = "10.62." .. i .. ".0/24", AvailabilityZone = az })
      .Subnet.SubnetId
  end
  call("eks", "CreateCluster", { name = name, roleArn = c.roleArn, resourcesVpcConfig = { subnetIds = sn },
    accessConfig = { authenticationMode = "API", bootstrapClusterCreatorAdminPermissions = false } })
  while call("eks", "DescribeCluster", { name = name }).cluster.status ~= "ACTIVE" do task.sleep(30) end
  call("eks", "CreateNodegroup", { clusterName = name, nodegroupName = "imported", nodeRole = role, subnets = sn,
    scalingConfig = { minSize = 1, maxSize = 2, desiredSize = 1 } })
  while call("eks", "DescribeNodegroup", { clusterName = name, nodegroupName = "imported" }).nodegroup.status ~=
    "ACTIVE" do task.sleep(15) end
  local out = assert(dispatch.call("cluster_list_instance_groups", { cluster = name }, READ))
  t.eq(#out.instance_groups, 1)
  t.eq({ out.instance_groups[1].name, out.instance_groups[1].current, out.instance_groups[1].desired },
    { "imported", json.null, 1 }, "current is unknown, not a guess")
  t.like(out.kubernetes, "could not be read")
  local v = run("cluster_scale_node_group", { cluster = name, node_group = "imported", desired_size = 2 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq({ v.result.to.desiredSize, v.result.nodes_ready, v.result.status }, { 2, json.null, "ACTIVE" })
  t.like(v.result.kubernetes, "could not be read")
end)

t.test("the tools declare their actions: the list is read-only, only delete may delete", function()
  local list, scale, del = tool.get("cluster_list_instance_groups"), tool.get("cluster_scale_node_group"),
    tool.get("cluster_delete_node_group")
  t.eq({ list.kind, scale.kind, del.kind }, { "read", "mutating", "destructive" })
  local function has(def, action)
    for _, a in ipairs(def.aws) do if a == action then return true end end
    return false
  end
  t.ok(has(scale, "eks:UpdateNodegroupConfig") and not has(scale, "eks:DeleteNodegroup"))
  t.ok(has(del, "eks:DeleteNodegroup") and not has(del, "eks:UpdateNodegroupConfig"))
  t.eq(scale.status_tool, "cluster_get_node_group_status")
  t.eq(del.status_tool, "cluster_get_node_group_status")
end)

t.cleanup(function() srv:stop() end)
