-- HyperPod nodes: hyperpod_list_nodes (paged, with each node's Kubernetes
-- side) and the node operations hyperpod_node_reboot, hyperpod_node_replace
-- and hyperpod_node_delete against the sandbox in this process under the
-- virtual clock (one clock: a rebooting node stays rebooting until a tool
-- waits), on a HyperPod cluster of gpu x2 and cpu x1 (capacity_helpers).
-- Nodes are named as instance ids or Kubernetes node names; SageMaker gets
-- instance ids; a node it does not know is reported with its
-- code, `Code` for delete and `ErrorCode` for reboot and replace, as the API
-- model has them.
local t = require "hypd.tap"
local json = require "hypd.json"
local dispatch = require "hypd.tool.dispatch"
local tool = require "hypd.tool.registry"
local C = dofile("tests/lua/capacity_helpers.lua")

local OPER, ADMIN, UNKNOWN = C.OPER, C.ADMIN, C.UNKNOWN
local S
local function skip() return t.skip("no cluster: the first test failed to make it") end

-- nodes(params) -> every node, page after page (and the pages' sizes)
local function all_nodes(params)
  local out, sizes, token = {}, {}, nil
  repeat
    local p = { page_token = token }
    for k, v in pairs(params or {}) do p[k] = v end
    local r, err = dispatch.call("hyperpod_list_nodes", p, OPER)
    if not r then error("hyperpod_list_nodes: " .. json.encode(err), 0) end
    sizes[#sizes + 1] = #r.nodes
    for _, n in ipairs(r.nodes) do out[#out + 1] = n end
    token = r.next_page_token
  until not token
  return out, sizes
end

local function by_group(list)
  local out = {}
  for _, n in ipairs(list) do
    out[n.instance_group] = out[n.instance_group] or {}
    table.insert(out[n.instance_group], n)
  end
  return out
end

-- wait_for(pred) -> the nodes once pred(nodes) holds, following with wait_seconds
local function wait_for(pred)
  for _ = 1, 40 do
    local list = all_nodes()
    if pred(list) then return list end
    C.resync()
    dispatch.call("hyperpod_list_nodes", { wait_seconds = 60 }, OPER)
  end
  error("the nodes never reached the state awaited", 0)
end

local function group()
  for _, g in ipairs(S.call("sagemaker", "DescribeCluster", { ClusterName = S.hp }).InstanceGroups) do
    if g.InstanceGroupName == "gpu" then return g end
  end
end

local function status_of(list, id)
  for _, n in ipairs(list) do if n.instance_id == id then return n end end
end

t.test("on an empty account the capacity tools and their plans answer NOT_FOUND naming cluster, sending nothing",
  function()
  S = C.here()
  local calls = {
    { "hyperpod_scale_instance_group", { cluster = "nobody", instance_group = "gpu", instance_count = 2, plan = true } },
    { "hyperpod_delete_instance_group", { cluster = "nobody", instance_group = "gpu", plan = true }, ADMIN },
    { "hyperpod_update_software", { cluster = "nobody", plan = true } },
    { "hyperpod_list_instance_groups", { cluster = "nobody" } },
    { "hyperpod_list_nodes", { cluster = "nobody" } },
    { "hyperpod_node_reboot", { cluster = "nobody", nodes = { UNKNOWN } } },
    { "hyperpod_scale_instance_group", { instance_group = "gpu", instance_count = 2, plan = true } },
  }
  for _, c in ipairs(calls) do
    local out, err = dispatch.call(c[1], c[2], c[3] or OPER)
    t.fails(out, err, "NOT_FOUND", c[1])
    t.eq(err and err.fields and err.fields[1].field, "cluster", c[1] .. " names cluster")
  end
  t.eq(#S.audit(), 0, "the sandbox's audit log stays empty")
end)

t.test("a sandbox with an EKS cluster and a HyperPod cluster of three nodes", function()
  S.build("nodes-demo", "hp-nodes")
end)

t.test("hyperpod_list_nodes pages with page_token until next_page_token is absent, each node once, with its " ..
  "Kubernetes node name, readiness and health", function()
  if not S then return skip() end
  C.resync()
  local list, sizes = all_nodes { page_size = 2 }
  t.eq(sizes, { 2, 1 }, "two pages of 2 and 1")
  local seen = {}
  for _, n in ipairs(list) do
    t.eq(seen[n.instance_id], nil, n.instance_id .. " once")
    seen[n.instance_id] = true
    t.like(n.instance_id, "^i%-%x+$")
    t.eq(n.node_name, "hyperpod-" .. n.instance_id)
    t.eq({ n.instance_status, n.kubernetes.joined, n.kubernetes.ready, n.health_status },
      { "Running", true, true, "Schedulable" }, n.node_name)
  end
  local groups = by_group(list)
  t.eq({ #groups.gpu, #groups.cpu }, { 2, 1 })
  t.eq(groups.gpu[1].instance_type, "ml.g6e.24xlarge")
  local only = all_nodes { instance_group = "cpu" }
  t.eq(#only, 1, "instance_group filters")
  t.eq(only[1].instance_id, groups.cpu[1].instance_id)
  local r, err = dispatch.call("hyperpod_list_nodes", { page_token = "not-a-token" }, OPER)
  t.fails(r, err, "ValidationException", "a token SageMaker did not give is refused by it")
end)

t.test("a malformed node or an empty list is refused before anything is sent, naming nodes and the rule", function()
  if not S then return skip() end
  C.resync()
  local a0 = #S.audit()
  local out, err = dispatch.call("hyperpod_node_reboot", { nodes = { "node-1" } }, OPER)
  t.fails(out, err, "VALIDATION")
  t.eq({ err.fields[1].field, err.fields[1].rule }, { "nodes[0]", "pattern" })
  t.like(err.fields[1].message, "hyperpod%-i%-")
  out, err = dispatch.call("hyperpod_node_reboot", { nodes = {} }, OPER)
  t.fails(out, err, "VALIDATION")
  t.eq({ err.fields[1].field, err.fields[1].rule }, { "nodes", "min_items" })
  out, err = dispatch.call("hyperpod_node_reboot", {}, OPER)
  t.fails(out, err, "VALIDATION")
  t.eq(err.fields[1].field, "nodes")
  t.eq(#S.audit(), a0, "no mutation")
end)

t.test("hyperpod_node_reboot takes i-... and hyperpod-i-... forms, sends instance ids, and reports an unknown " ..
  "node with its ErrorCode", function()
  if not S then return skip() end
  C.resync()
  local groups = by_group(all_nodes())
  local cpu, gpu = groups.cpu[1].instance_id, groups.gpu[1].instance_id
  local r, err = dispatch.call("hyperpod_node_reboot", { nodes = { "hyperpod-" .. cpu, gpu, UNKNOWN, cpu } }, OPER)
  t.ok(r, json.encode(err))
  t.eq(r.status_tool, "hyperpod_list_nodes")
  t.eq(C.last("BatchRebootClusterNodes").NodeIds, { cpu, gpu, UNKNOWN }, "instance ids, each once")
  t.eq({ r.requested, #r.succeeded, r.ok }, { 3, 2, false })
  t.eq(r.succeeded[1], { instance_id = cpu, node_name = "hyperpod-" .. cpu })
  t.eq(#r.failed, 1)
  t.eq({ r.failed[1].instance_id, r.failed[1].node_name, r.failed[1].code },
    { UNKNOWN, "hyperpod-" .. UNKNOWN, "InstanceIdNotFound" })
  t.like(r.failed[1].message, UNKNOWN)
  -- a node that is rebooting is refused by SageMaker, not rebooted twice
  local again = dispatch.call("hyperpod_node_reboot", { nodes = { cpu } }, OPER)
  t.eq({ #again.succeeded, again.failed[1] and again.failed[1].code }, { 0, "InstanceIdInUse" })
  local now = dispatch.call("hyperpod_list_nodes", { instance_group = "cpu" }, OPER)
  t.eq(now.nodes[1].instance_status, "Pending", "SageMaker shows the reboot at once")
  local follow = dispatch.call("hyperpod_list_nodes", { instance_group = "cpu", wait_seconds = 60 }, OPER)
  t.eq(follow.changed, true, "wait_seconds answers when the node changes")
  t.eq({ follow.nodes[1].instance_status, follow.nodes[1].kubernetes.ready, follow.nodes[1].health_status },
    { "Pending", false, "UnschedulablePendingReboot" }, "Kubernetes shows the reboot")
  local list = wait_for(function(l)
    for _, id in ipairs { cpu, gpu } do
      local n = status_of(l, id)
      if not (n and n.instance_status == "Running" and n.kubernetes.ready) then return false end
    end
    return true
  end)
  t.eq(status_of(list, cpu).health_status, "Schedulable", "Ready again after the reboot")
end)

t.test("hyperpod_node_replace is destructive, warns that local volumes are wiped, and reports an unknown node " ..
  "with its ErrorCode", function()
  if not S then return skip() end
  C.resync()
  local def = tool.get("hyperpod_node_replace")
  t.eq(def.kind, "destructive")
  t.like(def.description, "local volumes are wiped")
  local gpu = by_group(all_nodes()).gpu[1].instance_id
  local out, err = dispatch.call("hyperpod_node_replace", { nodes = { gpu } }, OPER)
  t.fails(out, err, "FORBIDDEN", "replacing needs the admin scope")
  local r
  r, err = dispatch.call("hyperpod_node_replace", { nodes = { gpu, "hyperpod-" .. UNKNOWN } }, ADMIN)
  t.ok(r, json.encode(err))
  t.eq(C.last("BatchReplaceClusterNodes").NodeIds, { gpu, UNKNOWN })
  t.eq(r.succeeded, { { instance_id = gpu, node_name = "hyperpod-" .. gpu } }, json.encode(r.failed))
  t.eq({ r.failed[1].instance_id, r.failed[1].code }, { UNKNOWN, "InstanceIdNotFound" })
  local list = wait_for(function(l)
    local gpus = by_group(l).gpu or {}
    if #gpus ~= 2 or status_of(l, gpu) then return false end
    for _, n in ipairs(gpus) do if n.instance_status ~= "Running" or not n.kubernetes.ready then return false end end
    return true
  end)
  t.eq(#by_group(list).gpu, 2, "the replacement joined with a new instance id")
end)

t.test("hyperpod_node_delete reports an unknown node with its Code and lowers the group's target count", function()
  if not S then return skip() end
  C.resync()
  local gpu = by_group(all_nodes()).gpu[1].instance_id
  local before = group().TargetCount
  local r, err = dispatch.call("hyperpod_node_delete", { nodes = { "hyperpod-" .. gpu, UNKNOWN } }, ADMIN)
  t.ok(r, json.encode(err))
  t.eq(C.last("BatchDeleteClusterNodes").NodeIds, { gpu, UNKNOWN })
  t.eq(r.succeeded, { { instance_id = gpu, node_name = "hyperpod-" .. gpu } })
  t.eq({ r.failed[1].instance_id, r.failed[1].code }, { UNKNOWN, "NodeIdNotFound" },
    "BatchDeleteClusterNodes' Code, not ErrorCode")
  t.eq(group().TargetCount, before - 1, "the group's target is lower")
  wait_for(function(l) return not status_of(l, gpu) end)
  local again = dispatch.call("hyperpod_node_delete", { nodes = { gpu } }, ADMIN)
  t.eq(again.failed[1].code, "NodeIdNotFound", "a node that is gone is not deleted twice")
end)
