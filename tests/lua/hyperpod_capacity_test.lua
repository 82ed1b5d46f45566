-- Capacity and nodes: hyperpod_list_instance_groups,
-- hyperpod_scale_instance_group, hyperpod_delete_instance_group,
-- hyperpod_update_software against a sandbox process under the virtual
-- clock, on a HyperPod cluster that boto3 made (tests/tools/
-- hyperpod_capacity.py) and that boto3 reads back (hyperpod_groups.py), not
-- hypd. Scaling up and down keeps the group's health checks, threads per
-- core, network interface, storage, capacity and placement and sends only
-- that group; every fixed parameter that differs is refused
-- before any mutation (the sandbox's audit log unchanged), naming the field
-- and the rule; the sandbox itself refuses or resets what an UpdateCluster
-- omits, so a tool that forgot a field would be caught; plan mode shows
-- each change and sends nothing; a group is deleted, the last one refused;
-- a software update is waited for. Node operations are in
-- hyperpod_nodes_test.lua.
local t = require "hypd.tap"
local json = require "hypd.json"
local op = require "hypd.tool.operations"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local C = dofile("tests/lua/capacity_helpers.lua")

local HP = "hp-cap"
local OPER, ADMIN, sent = C.OPER, C.ADMIN, C.sent
local S, absent -- the sandbox and its clusters; why the setup could not run
local info, read, audit
local function skip() return t.skip(absent or "no cluster: the first test failed to make it") end
local resync = C.resync

-- run(name, params [, caller]) -> the finished operation's view
local function run(name, params, caller)
  local v = C.run(name, params, caller)
  t.eq(tool.get(name).status_tool, "hyperpod_list_instance_groups")
  return v
end

-- refusal(name, params [, caller]) -> {status = "refused", error}: the call
-- itself is refused (its check runs on the call: hypd.tool.operations), no operation
-- recorded
local function refusal(name, params, caller)
  local before = #op.list {}
  local acc, err = dispatch.call(name, params, caller or OPER)
  t.eq(acc, nil, name .. " is refused on the call, with no operation")
  t.eq(#op.list {}, before, name .. ": no operation recorded")
  return { status = acc and "accepted" or "refused", error = err }
end

-- the settings a change of count must keep
local KEPT = { "InstanceType", "ThreadsPerCore", "OnStartDeepHealthChecks", "NetworkInterface",
  "InstanceStorageConfigs", "CapacityRequirements", "OverrideVpcConfig", "LifeCycleConfig", "ExecutionRole" }
local function kept(g)
  local out = {}
  for _, k in ipairs(KEPT) do out[k] = g[k] end
  return out
end

t.test("a sandbox process with an EKS cluster and a HyperPod cluster of two configured groups made with " ..
  "boto3", function()
  S, absent = C.start("cap-demo", HP)
  if not S then return skip() end
  info, read, audit = S.info, S.read, S.audit
end)

t.test("hyperpod_list_instance_groups shows counts, capacity type, efa-only, subnets with zones, threads " ..
  "per core, storage and deep health checks", function()
  if not info then return skip() end
  resync()
  local r, err = dispatch.call("hyperpod_list_instance_groups", {}, OPER)
  t.ok(r, json.encode(err))
  t.eq(r.hyperpod_cluster.name, HP)
  t.eq(r.hyperpod_cluster.status, "InService")
  local by = {}
  for _, g in ipairs(r.instance_groups) do by[g.name] = g end
  local gpu, cpu = by.gpu, by.cpu
  t.eq({ gpu.instance_type, gpu.current_count, gpu.target_count, gpu.min_count, gpu.status },
    { "ml.g6e.24xlarge", 2, 2, 1, "InService" })
  t.eq({ gpu.capacity_type, gpu.efa_only, gpu.network_interface, gpu.threads_per_core },
    { "spot", true, "efa-only", 2 })
  t.eq(gpu.deep_health_checks, { "InstanceStress", "InstanceConnectivity" })
  t.eq(gpu.storage, { { type = "ebs", size_gb = 500, root_volume = false } })
  t.eq(gpu.subnets, { { subnet_id = info.subnets[2], availability_zone = info.zones[2],
    zone_id = gpu.subnets[1].zone_id } })
  t.ok(gpu.subnets[1].zone_id, "the subnet's zone id")
  t.eq(gpu.subnets_from, "group")
  t.eq({ cpu.capacity_type, cpu.efa_only, cpu.threads_per_core, cpu.subnets_from, cpu.subnets[1].subnet_id },
    { "on-demand", false, 2, "cluster", info.subnets[1] })
  t.eq(cpu.image.current, "default")
  t.eq(r.operation, nil, "no capacity operation is running")
end)

t.test("scaling the gpu group up then down keeps its health checks, threads per core, network interface " ..
  "and storage, read back with boto3", function()
  if not info then return skip() end
  resync()
  local before = read().groups
  local n0 = #sent
  local v = run("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 3 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq({ v.result.instance_count, v.result.current_count, v.result.kubernetes_ready, v.result.from_count },
    { 3, 3, 3, 2 })
  t.eq(#sent, n0 + 1, "one UpdateCluster")
  local req = sent[#sent].params
  t.eq(#req.InstanceGroups, 1, "only the group being changed is sent")
  t.eq(req.InstanceGroups[1].InstanceGroupName, "gpu")
  t.eq({ req.InstanceGroups[1].InstanceCount, req.InstanceGroups[1].MinInstanceCount }, { 3, 1 })
  local up = read()
  t.eq(up.groups.gpu.TargetCount, 3)
  t.eq(up.groups.gpu.CurrentCount, 3)
  t.eq(up.groups.gpu.MinCount, 1, "the minimum is carried forward")
  t.eq(kept(up.groups.gpu), kept(before.gpu), "scaling up kept every setting")
  t.eq(up.groups.cpu, before.cpu, "the other group is untouched")

  v = run("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 1, min_instance_count = 0 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq({ v.result.instance_count, v.result.current_count, v.result.kubernetes_ready }, { 1, 1, 1 })
  local down = read()
  t.eq({ down.groups.gpu.TargetCount, down.groups.gpu.CurrentCount, down.groups.gpu.MinCount }, { 1, 1, 0 })
  t.eq(kept(down.groups.gpu), kept(before.gpu), "scaling down kept every setting")
  t.eq(down.groups.gpu.ThreadsPerCore, 2)
  t.eq(down.groups.gpu.OnStartDeepHealthChecks, { "InstanceStress", "InstanceConnectivity" })
  t.eq(down.groups.gpu.NetworkInterface, { InterfaceType = "efa-only" })
  t.eq(down.groups.gpu.InstanceStorageConfigs, { { EbsVolumeConfig = { VolumeSizeInGB = 500 } } })
end)

t.test("scaling to the count the group has sends nothing and succeeds", function()
  if not info then return skip() end
  resync()
  local n0, a0 = #sent, #audit()
  local v = run("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 1 })
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.result.changed, false)
  t.eq(#sent, n0, "no UpdateCluster")
  t.eq(#audit(), a0, "no mutation in the sandbox's audit log")
end)

local FIXED = {
  { "capacity_type", "on-demand", "it is spot" },
  { "efa_only", false, "it is efa%-only" },
  { "subnet_id", "subnet-0123456789abcdef0", "subnet placement" },
  { "availability_zone", "us-west-2c", "Availability Zone" },
  { "training_plan", "my-plan", "training plan" },
}

t.test("each fixed parameter that differs from the group is refused before any mutation, " ..
  "naming the field and the rule", function()
  if not info then return skip() end
  resync()
  local spec = tool.get("hyperpod_scale_instance_group").params
  for _, f in ipairs(FIXED) do
    local field, value, why = f[1], f[2], f[3]
    t.ok(spec[field].fixed, field .. " is marked fixed in the registry")
    local a0 = #audit()
    local v = refusal("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 2, [field] = value })
    t.eq(v.status, "refused", field)
    t.eq(v.error and v.error.code, "VALIDATION", field)
    local fe = v.error and v.error.fields and v.error.fields[1] or {}
    t.eq({ fe.field, fe.rule }, { field, "fixed_at_create" }, field .. " is named with its rule")
    t.like(tostring(fe.message), why, field .. ": the message says what the group has")
    t.like(tostring(fe.message), "fixed when instance group gpu was created", field .. ": and why")
    t.eq(#audit(), a0, field .. ": no mutation reached the sandbox")
  end
  t.eq(read().groups.gpu.TargetCount, 1, "the group was not scaled")
  -- the value the group has is accepted
  local v = run("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 1, capacity_type = "spot",
    efa_only = true, subnet_id = info.subnets[2], availability_zone = info.zones[2] })
  t.eq(v.status, "succeeded", json.encode(v.error))
end)

t.test("bad counts and unknown groups are refused naming the field: min above count, count below the " ..
  "minimum, no such group", function()
  if not info then return skip() end
  resync()
  local a0 = #audit()
  local v = refusal("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 1,
    min_instance_count = 2 })
  t.eq({ v.status, v.error.code, v.error.fields[1].field, v.error.fields[1].rule },
    { "refused", "VALIDATION", "min_instance_count", "maximum" })
  t.eq(#audit(), a0, "no mutation")
  v = run("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 1, min_instance_count = 1 })
  t.eq(v.status, "succeeded", "the minimum alone changes")
  t.eq(read().groups.gpu.MinCount, 1)
  a0 = #audit()
  v = refusal("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 0 })
  t.eq({ v.status, v.error.code, v.error.fields[1].field, v.error.fields[1].rule },
    { "refused", "VALIDATION", "instance_count", "min_count" })
  t.like(v.error.message, "below the group's MinInstanceCount 1")
  v = refusal("hyperpod_scale_instance_group", { instance_group = "nope", instance_count = 1 })
  t.eq({ v.error.code, v.error.fields[1].field, v.error.fields[1].rule }, { "NOT_FOUND", "instance_group", "exists" })
  t.like(v.error.message, "its groups: gpu, cpu")
  local out, err = dispatch.call("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = -1 }, OPER)
  t.fails(out, err, "VALIDATION")
  t.eq(#audit(), a0, "no mutation")
end)

t.test("plan mode of the scale, delete and software tools lists the change and sends no mutation", function()
  if not info then return skip() end
  resync()
  local a0, n0 = #audit(), #sent
  local p, err = dispatch.call("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 4, plan = true },
    OPER)
  t.ok(p, json.encode(err))
  t.eq(#p.plan, 1)
  t.eq({ p.plan[1].action, p.plan[1].type, p.plan[1].name }, { "change", "sagemaker:instance-group", "gpu of " .. HP })
  t.eq(p.plan[1].changes.TargetCount, { from = 1, to = 4 })
  p = dispatch.call("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 1, plan = true }, OPER)
  t.eq(#p.plan, 0, "nothing to change at the group's count")
  p, err = dispatch.call("hyperpod_delete_instance_group", { instance_group = "cpu", plan = true }, ADMIN)
  t.ok(p, json.encode(err))
  t.eq({ p.delete, p.plan[1].action, p.plan[1].name, p.plan[1].id }, { 1, "delete", "cpu of " .. HP, "cpu" })
  p, err = dispatch.call("hyperpod_update_software", { instance_groups = { "cpu" }, plan = true }, OPER)
  t.ok(p, json.encode(err))
  t.eq({ p.create, p.plan[1].type, p.plan[1].fields.InstanceGroups }, { 1, "sagemaker:software-update", { "cpu" } })
  p, err = dispatch.call("hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 4,
    capacity_type = "on-demand", plan = true }, OPER)
  t.fails(p, err, "VALIDATION", "a plan refuses a fixed_at_create change too")
  t.eq(#audit(), a0, "no mutation reached the sandbox")
  t.eq(#sent, n0, "no UpdateCluster was sent")
end)

t.test("the sandbox refuses an UpdateCluster group that omits a fixed field, and resets the settable ones " ..
  "it omits", function()
  if not info then return skip() end
  resync()
  local bare = function(name, itype, n)
    return { InstanceGroupName = name, InstanceType = itype, InstanceCount = n, ExecutionRole = info.role }
  end
  local r = S.update { InstanceGroups = { bare("gpu", "ml.g6e.24xlarge", 2) } }
  t.eq(r.error, "ValidationException")
  t.like(r.message, "CapacityRequirements of the existing instance group gpu cannot be changed")
  local spot = read().groups.gpu
  local spec = { InstanceGroupName = "gpu", InstanceType = spot.InstanceType, InstanceCount = 1,
    ExecutionRole = info.role, CapacityRequirements = spot.CapacityRequirements, NetworkInterface = spot.NetworkInterface,
    OverrideVpcConfig = spot.OverrideVpcConfig, LifeCycleConfig = spot.LifeCycleConfig }
  r = S.update { InstanceGroups = { spec } }
  t.eq(r.error, "ValidationException", "dropping the EBS volume is refused")
  t.like(r.message, "InstanceStorageConfigs")
  -- the cpu group sent bare: its threads per core and health checks go back to the defaults
  r = S.update { InstanceGroups = { bare("cpu", "ml.m5.xlarge", 1) } }
  t.eq(r, { ok = true })
  local after = read()
  t.eq(after.groups.cpu.ThreadsPerCore, 1, "an omitted ThreadsPerCore is reset")
  t.eq(after.groups.cpu.OnStartDeepHealthChecks, nil, "omitted deep health checks are dropped")
  t.eq(after.groups.gpu.TargetCount, 1, "a group not sent is left as it is")
  for _ = 1, 50 do
    if read().status == "InService" then break end
    os.execute("sleep 0.1")
  end
  t.eq(read().status, "InService")
end)

t.test("hyperpod_update_software updates the named group, waits until it is done, and follows it in the " ..
  "status tool", function()
  if not info then return skip() end
  resync()
  local n0 = #sent
  local acc = assert(dispatch.call("hyperpod_update_software", { instance_groups = { "cpu" } }, OPER))
  local seen = dispatch.call("hyperpod_list_instance_groups", { operation_id = acc.operation_id, wait_seconds = 30 }, OPER)
  t.eq(seen.operation.tool, "hyperpod_update_software")
  local v = op.wait(acc.operation_id)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(#sent, n0 + 1)
  t.eq(sent[#sent].operation, "UpdateClusterSoftware")
  t.eq(sent[#sent].params.InstanceGroups, { { InstanceGroupName = "cpu" } })
  t.eq(v.result.instance_groups[1].software_update_status, "Succeeded")
  local g = read()
  t.eq(g.status, "InService")
  t.eq(g.groups.cpu.SoftwareUpdateStatus, "Succeeded")
  t.eq(g.groups.gpu.SoftwareUpdateStatus, nil, "the group not named is not updated")
  t.eq(g.groups.cpu.DesiredImageId, "default", "the image it names stays a valid ImageId")
  local r = dispatch.call("hyperpod_update_software", { instance_groups = { "gpu", "nope" } }, OPER)
  v = op.wait(r.operation_id)
  t.eq({ v.status, v.error.code, v.error.fields[1].field }, { "failed", "NOT_FOUND", "instance_groups[1]" })
end)

t.test("hyperpod_delete_instance_group deletes a group and waits until it and its nodes are gone; the " ..
  "last group is refused", function()
  if not info then return skip() end
  resync()
  local out, err = dispatch.call("hyperpod_delete_instance_group", { instance_group = "cpu" }, OPER)
  t.fails(out, err, "FORBIDDEN", "a destructive tool needs the admin scope")
  local v = run("hyperpod_delete_instance_group", { instance_group = "cpu" }, ADMIN)
  t.eq(v.status, "succeeded", json.encode(v.error))
  t.eq(v.result.deleted, true)
  local g = read()
  t.eq(g.groups.cpu, nil, "boto3 no longer sees the group")
  t.ok(g.groups.gpu, "the other group stays")
  local req = sent[#sent].params
  t.eq(req.InstanceGroupsToDelete, { "cpu" })
  t.eq(req.InstanceGroups, nil, "no group is resent")
  local a0 = #audit()
  v = run("hyperpod_delete_instance_group", { instance_group = "gpu" }, ADMIN)
  t.eq({ v.status, v.error.code, v.error.fields[1].field, v.error.fields[1].rule },
    { "failed", "VALIDATION", "instance_group", "last_group" })
  t.like(v.error.message, "hyperpod_delete")
  t.eq(#audit(), a0, "nothing was sent")
  local r = S.update { InstanceGroupsToDelete = { "gpu" } }
  t.eq(r.error, "ValidationException", "SageMaker (the sandbox) refuses it too")
  t.like(r.message, "at least one instance group")
  v = run("hyperpod_delete_instance_group", { instance_group = "cpu" }, ADMIN)
  t.eq({ v.status, v.error.code }, { "failed", "NOT_FOUND" }, "a group that is gone is not found")
end)
