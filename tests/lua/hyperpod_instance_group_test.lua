-- hyperpod_add_instance_group through the tool registry and hypd.tool.operations against
-- the in-process sandbox under the virtual clock, on a HyperPod cluster
-- hyperpod_create made: a CPU group for system work and an efa-only group
-- in a dedicated subnet, each sent to UpdateCluster alone with the
-- cluster's execution role and lifecycle scripts, InService with its nodes
-- Ready in Kubernetes; a second call makes nothing; what is fixed when a
-- group is made (capacity type, efa-only, subnet placement) is refused when
-- asked otherwise, before any mutation; a Scheduled training plan's group
-- is made without waiting for nodes that come when the plan starts.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local tool = require "hypd.tool.registry"
local H = dofile("tests/lua/helpers.lua")
require("hypd.tool.loader").load()

local srv = H.sandbox_here()
local Hp = dofile("tests/lua/hyperpod_helpers.lua")
local E = Hp.E
local call, mark, since, tags_of, has = E.call, E.mark, E.since, E.tags_of, E.has
local run = Hp.run

local function add(params) return run("hyperpod_add_instance_group", params) end

local function group(name)
  for _, g in ipairs(call("sagemaker", "DescribeCluster", { ClusterName = "hypd-grp-hp" }).InstanceGroups) do
    if g.InstanceGroupName == name then return g end
  end
end

local function nodes_of(g) return Hp.nodes_of("hypd-grp", "hypd-grp-hp", g) end

-- sent(fn) -> what fn made UpdateCluster carry (the sandbox's input), fn's result
local function sent(fn)
  local seen = {}
  local restore = E.swap("sagemaker", "UpdateCluster", function(original, ctx, input)
    seen[#seen + 1] = json.decode(json.encode(input))
    return original(ctx, input)
  end)
  local r = fn()
  restore()
  return seen, r
end

local FIRST -- the first group, as DescribeCluster has it

t.test("on a cluster hyperpod_create made, a CPU group for system work is added alone, with the cluster's role " ..
  "and scripts", function()
  t.eq(op.wait(E.start { cluster_tag = "grp" }).status, "succeeded")
  local v = run("hyperpod_create", { instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a" })
  t.eq(v.status, "succeeded", json.encode(v.error))
  FIRST = group("grp-ig")
  local m = mark()
  local seen, g = sent(function()
    return add { instance_group = "system", instance_type = "ml.m5.2xlarge", instance_count = 2,
      availability_zone = "us-west-2a", kubernetes_labels = { ["hypd.io/role"] = "system" } }
  end)
  t.eq(g.status, "succeeded", json.encode(g.error))
  t.eq(since(m), { ["sagemaker UpdateCluster"] = 1 }, "the shared subnet hp-compute-us-west-2a is reused")
  t.eq(#seen, 1)
  local u = seen[1]
  t.eq(#u.InstanceGroups, 1, "UpdateCluster carries only the new group (a partial upsert)")
  local s = u.InstanceGroups[1]
  t.eq({ s.InstanceGroupName, s.InstanceType, s.InstanceCount, s.ThreadsPerCore }, { "system", "ml.m5.2xlarge", 2, 1 })
  t.eq(s.ExecutionRole, FIRST.ExecutionRole, "the execution role is the cluster's")
  t.eq(s.LifeCycleConfig, FIRST.LifeCycleConfig, "the lifecycle scripts are the cluster's")
  t.eq(s.OverrideVpcConfig.Subnets, { v.result.subnet_id })
  t.eq(s.KubernetesConfig, { Labels = { ["hypd.io/role"] = "system" } })
  t.eq({ s.NetworkInterface, s.CapacityRequirements, s.TrainingPlanArn }, { nil, nil, nil })
  local d = group("system")
  t.eq({ d.Status, d.CurrentCount, d.TargetCount }, { "InService", 2, 2 })
  local nodes = nodes_of("system")
  t.eq(#nodes, 2)
  for _, n in ipairs(nodes) do
    t.eq(n.metadata.labels["hypd.io/role"], "system")
    t.eq(n.metadata.labels["sagemaker.amazonaws.com/node-health-status"], "Schedulable")
  end
  t.eq(g.result.nodes, (function()
    local names = {}
    for i, n in ipairs(nodes) do names[i] = n.metadata.name end
    table.sort(names)
    return names
  end)())
  t.eq(group("grp-ig").TargetCount, 1, "the first group is left as it was")
end)

local EFA -- the efa-only group's result

t.test("an efa-only group gets a dedicated subnet hp-compute-<group>-<az>, routed like the shared one", function()
  local m = mark()
  local p = Hp.plan("hyperpod_add_instance_group", { instance_group = "gpu-efa", instance_type = "ml.p5.48xlarge",
    instance_count = 1, availability_zone = "us-west-2b", efa_only = true, dedicated_subnet = true })
  local rows = E.rows(p)
  local _, total = since(m)
  t.eq(total, 0, "a plan mutates nothing")
  local vpce = call("ec2", "DescribeVpcEndpoints", { Filters = E.by_tag("grp") }).VpcEndpoints[1].VpcEndpointId
  t.eq(rows, { "create ec2:subnet hp-compute-gpu-efa-us-west-2b",
    "create ec2:route-table hp-compute-gpu-efa-us-west-2b-rt",
    "create ec2:route 0.0.0.0/0 in hp-compute-gpu-efa-us-west-2b-rt",
    "create ec2:route-table-association hp-compute-gpu-efa-us-west-2b-rt with hp-compute-gpu-efa-us-west-2b",
    "create ec2:vpc-endpoint-route-table " .. vpce .. " for hp-compute-gpu-efa-us-west-2b-rt",
    "create sagemaker:instance-group gpu-efa in hypd-grp-hp" })
  t.eq(p.plan[6].fields.NetworkInterface, { InterfaceType = "efa-only" })
  local g = add { instance_group = "gpu-efa", instance_type = "ml.p5.48xlarge", instance_count = 1,
    availability_zone = "us-west-2b", efa_only = true, dedicated_subnet = true }
  t.eq(g.status, "succeeded", json.encode(g.error))
  EFA = g.result
  t.eq(since(m), { ["ec2 CreateSubnet"] = 1, ["ec2 CreateRouteTable"] = 1, ["ec2 CreateRoute"] = 1,
    ["ec2 AssociateRouteTable"] = 1, ["ec2 ModifyVpcEndpoint"] = 1, ["sagemaker UpdateCluster"] = 1 })
  local s = call("ec2", "DescribeSubnets", { SubnetIds = { EFA.subnet_id } }).Subnets[1]
  t.eq(tags_of(s.Tags), { Name = "hp-compute-gpu-efa-us-west-2b", ["hyperpod:dedicated-ig"] = "gpu-efa",
    ["hypd:cluster-tag"] = "grp", ["karpenter.sh/discovery"] = "hypd-grp", ["kubernetes.io/role/internal-elb"] = "1",
    ["kubernetes.io/cluster/hypd-grp"] = "shared" })
  t.eq(s.AvailabilityZone, "us-west-2b")
  t.eq(EFA.subnet_cidr, "10.192.80.0/20", "the next free /20 after hp-compute-us-west-2a")
  local d = group("gpu-efa")
  t.eq(d.NetworkInterface, { InterfaceType = "efa-only" })
  t.eq({ d.ThreadsPerCore, d.Status, d.CurrentCount }, { 2, "InService", 1 })
  t.eq(d.OverrideVpcConfig.Subnets, { EFA.subnet_id })
  -- the VPC's S3 gateway endpoint now serves both compute route tables
  local e = call("ec2", "DescribeVpcEndpoints", { Filters = E.by_tag("grp") }).VpcEndpoints[1]
  t.eq(#e.RouteTableIds, 2)
  local n = nodes_of("gpu-efa")
  t.eq(#n, 1)
  t.eq(n[1].status.capacity["vpc.amazonaws.com/efa"], "32")
end)

t.test("adding a group again with the same decisions makes no mutating call", function()
  local m = mark()
  local g = add { instance_group = "system", instance_type = "ml.m5.2xlarge", instance_count = 2,
    availability_zone = "us-west-2a", kubernetes_labels = { ["hypd.io/role"] = "system" } }
  t.eq(g.status, "succeeded", json.encode(g.error))
  t.eq(g.result.existed, true)
  local counts, total = since(m)
  t.eq(total, 0, json.encode(counts))
end)

-- refused(params, field, rule): VALIDATION naming field and rule, nothing mutated
local function refused(params, field, rule, pattern)
  return Hp.refused("hyperpod_add_instance_group", params, field, rule, pattern)
end

t.test("capacity type, efa-only and subnet placement are fixed when a group is made: changing them is refused",
  function()
  refused({ instance_group = "system", instance_type = "ml.m5.2xlarge", instance_count = 2,
    availability_zone = "us-west-2a", capacity_type = "spot" }, "capacity_type", "fixed_at_create",
    "instance group system has capacity_type on%-demand; it is fixed when the group is created")
  refused({ instance_group = "gpu-efa", instance_type = "ml.p5.48xlarge", instance_count = 1,
    availability_zone = "us-west-2b", dedicated_subnet = true }, "efa_only", "fixed_at_create")
  refused({ instance_group = "gpu-efa", instance_type = "ml.p5.48xlarge", instance_count = 1,
    availability_zone = "us-west-2b", efa_only = true }, "dedicated_subnet", "fixed_at_create")
  refused({ instance_group = "gpu-efa", instance_type = "ml.p5.48xlarge", instance_count = 1,
    availability_zone = "us-west-2c", efa_only = true, dedicated_subnet = true }, "availability_zone",
    "fixed_at_create")
  refused({ instance_group = "system", instance_type = "ml.m5.4xlarge", instance_count = 2,
    availability_zone = "us-west-2a" }, "instance_type", "fixed_at_create")
  local def = tool.get("hyperpod_add_instance_group").params
  for _, f in ipairs { "capacity_type", "efa_only", "dedicated_subnet", "availability_zone", "training_plan" } do
    t.ok(def[f].fixed, f .. " is marked fixed in the registry")
  end
end)

t.test("the same checks as creation refuse a bad group before any mutation", function()
  refused({ instance_group = "bad", instance_type = "ml.g5.12xlarge", instance_count = 1,
    availability_zone = "us-west-2a", efa_only = true }, "efa_only", "efa_interfaces")
  refused({ instance_group = "bad", instance_type = "ml.p5.48xlarge", instance_count = 1,
    availability_zone = "us-west-2a" }, "availability_zone", "offering")
  assert(require("sandbox.services.servicequotas").set("us-west-2", "ml.m5.2xlarge for cluster usage", 3))
  refused({ instance_group = "bad", instance_type = "ml.m5.2xlarge", instance_count = 2,
    availability_zone = "us-west-2a" }, "instance_count", "quota", "2 ml%.m5%.2xlarge asked, 2 in use")
  assert(require("sandbox.services.servicequotas").set("us-west-2", "ml.m5.2xlarge for cluster usage", 100))
end)

t.test("a group on a Scheduled training plan is made in the plan's zone; its nodes come when the plan starts",
  function()
  local tp = call("sagemaker", "DescribeTrainingPlan", { TrainingPlanName = "hypd-p4d-4x-7d" })
  t.eq(tp.Status, "Scheduled")
  local g = add { instance_group = "reserved", instance_type = "ml.p4d.24xlarge", instance_count = 2,
    capacity_type = "training-plan", training_plan = "hypd-p4d-4x-7d" }
  t.eq(g.status, "succeeded", json.encode(g.error))
  t.eq({ g.result.availability_zone, g.result.threads_per_core, #g.result.nodes }, { "us-west-2b", 2, 0 })
  has(g.result.zone_note, "reserves its capacity in us-west-2b", "the zone came from the plan")
  local d = group("reserved")
  t.eq({ d.Status, d.TrainingPlanArn, d.TargetCount, d.CurrentCount }, { "InService", tp.TrainingPlanArn, 2, 0 })
  local events = table.concat(E.notes_of(g.operation_id), " | ")
  has(events, "is Scheduled: its instances join when it becomes Active", "said why it did not wait")
end)

t.test("a group being added is listed from the start: Pending with its operation until HyperPod lists it, " ..
  "then Creating, then InService with no operation", function()
  local dispatch = require "hypd.tool.dispatch"
  local list = function(extra)
    local out, err = dispatch.call("hyperpod_list_instance_groups", extra or {}, E.WHO)
    t.ok(out, "the list answers: " .. json.encode(err))
    for _, g in ipairs(out and out.instance_groups or {}) do if g.name == "live" then return g, out end end
    return nil, out
  end
  local acc = assert(dispatch.call("hyperpod_add_instance_group", { instance_group = "live",
    instance_type = "ml.m5.2xlarge", instance_count = 1, availability_zone = "us-west-2a" }, E.WHO))
  local g = list()
  t.ok(g, "the group is listed while its operation runs, before UpdateCluster")
  if not g then return end
  t.eq({ g.status, g.pending, g.instance_type, g.target_count, g.current_count },
    { "Pending", true, "ml.m5.2xlarge", 1, 0 })
  t.eq({ g.operation.operation_id, g.operation.tool, g.operation.status },
    { acc.operation_id, "hyperpod_add_instance_group", "running" })
  local seen = { [g.status] = true }
  for _ = 1, 50 do
    g = list { operation_id = acc.operation_id, wait_seconds = 60 }
    if not g or not g.operation then break end
    seen[g.status] = true
    t.eq(g.operation.operation_id, acc.operation_id, "each listing names the operation at work on the group")
  end
  t.ok(seen.Creating, "HyperPod's Creating is shown while the operation runs: " .. json.encode(seen))
  t.eq(op.wait(acc.operation_id).status, "succeeded")
  g = list()
  t.eq({ g.status, g.pending, g.operation }, { "InService", nil, nil }, "once done, the group is as HyperPod says")
  local other = select(2, list())
  for _, x in ipairs(other.instance_groups) do
    t.ok(not x.pending, x.name .. ": no other group is pending")
  end
end)

t.cleanup(function()
  E.restore_all()
  srv:stop()
end)
