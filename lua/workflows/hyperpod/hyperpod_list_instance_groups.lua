-- hyperpod_list_instance_groups: the HyperPod instance groups of a cluster,
-- read from DescribeCluster (and EC2 for the zones of their subnets); the
-- status tool of the capacity tools, following their operations. Each group
-- names the capacity operation running on it; a group that
-- hyperpod_add_instance_group is making is listed (status Pending, from the
-- operation's parameters) before its UpdateCluster, so a list shows it
-- from the start.
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local cap = require "_capacity"
local GC = require "_group_cost"

local TOOLS = { hyperpod_scale_instance_group = true, hyperpod_delete_instance_group = true,
  hyperpod_update_software = true, hyperpod_add_instance_group = true }

-- operation(p, target) -> the view of the operation to follow: the one
-- named, else the latest running capacity operation on this cluster
local function operation(p, prefix)
  if p.operation_id then
    local v = hypd.operations.get(p.operation_id)
    if not v then
      hypd.errors.refuse("operation_id", "exists", "no operation " .. p.operation_id,
        { code = "NOT_FOUND", field_message = "operation_id: no such operation" })
    end
    return v
  end
  for _, v in ipairs(hypd.operations.list { status = "running", limit = 50 }) do
    if TOOLS[v.tool] and v.target and v.target:sub(1, #prefix) == prefix then return v end
  end
end

-- group_of(prefix, target) -> the group a capacity operation works on:
-- "<prefix>/<group>" (an add), "<prefix>/group/<group>" (a scale or a delete)
local function group_of(prefix, target)
  target = tostring(target)
  if target:sub(1, #prefix + 1) ~= prefix .. "/" then return nil end
  local rest = target:sub(#prefix + 2)
  return rest:match("^group/([^/]+)$") or rest:match("^([^/]+)$")
end

-- working(prefix) -> group name -> the short view of the capacity
-- operation running on it (the oldest when several do)
local function working(prefix)
  local out = {}
  for _, v in ipairs(hypd.operations.list { status = "running", limit = 50 }) do
    local name = TOOLS[v.tool] and group_of(prefix, v.target)
    if name then out[name] = { view = v, short = R.short(v) } end
  end
  return out
end

-- pending(name, v) -> the entry of a group an add operation is making that
-- DescribeCluster does not list yet: what the operation asked for
local function pending(name, v)
  local p = v.params or {}
  return { name = name, status = "Pending", pending = true, instance_type = p.instance_type, current_count = 0,
    target_count = p.instance_count, capacity_type = p.capacity_type or "on-demand", efa_only = p.efa_only == true,
    subnets = hypd.json.array(), storage = hypd.json.array(), deep_health_checks = hypd.json.array() }
end

return tool {
  name = "hyperpod_list_instance_groups",
  summary = "The instance groups of the active (or named) HyperPod cluster: counts, status, capacity and settings",
  description = "Lists the instance groups of the HyperPod cluster of the active (or named) EKS cluster: type, " ..
    "status, counts, capacity type, subnets, health checks and software. The status tool of " ..
    "hyperpod_scale_instance_group, hyperpod_delete_instance_group and hyperpod_update_software: with " ..
    "operation_id it adds that operation's status and phase; with wait_seconds it answers at the first " ..
    "change. Each group names the capacity operation running on it (operation); a group " ..
    "hyperpod_add_instance_group is adding is listed at once, status Pending (pending = true) until " ..
    "HyperPod lists it (Creating).",
  kind = "read",
  aws = cap.aws("ec2:DescribeSubnets", "pricing:GetProducts"),
  params = P.form({},
    { "operation_id", "cluster", "region", "wait_seconds" },
    {
    cluster = P.cluster, region = P.region,
    operation_id = P.with(P.operation_id, { description = "a capacity operation to follow (what " ..
      "hyperpod_scale_instance_group, hyperpod_delete_instance_group or hyperpod_update_software returned); " ..
      "default: the latest one running on this cluster" }),
    wait_seconds = P.wait_seconds,
  }),
  result = { type = "object", properties = {
    hyperpod_cluster = { type = "object" }, instance_groups = { type = "array", items = { type = "object",
      properties = { subnets = { type = "array" }, security_groups = { type = "array" }, storage = { type = "array" },
        deep_health_checks = { type = "array" } } } },
    operation = { type = "object" }, waited = { type = "object" },
    cost = { type = "object", description = "what the groups cost an hour and a month as they run (USD, on-demand " ..
      "list prices, 730 hours a month); each group has its own cost (or cost_unknown)",
      properties = { items = { type = "array" }, unpriced = { type = "array" } } },
    cost_error = { type = "string" } } },
  run = function(ctx, p)
    local e = require("_hyperpod").eks(ctx, p)
    local prefix = cap.target({ cluster = e.name, region = e.region })
    -- read() -> the groups now and the operation followed: the one named,
    -- else the capacity operation running on the cluster, with the
    -- top-level one at work on it (cluster_create's hyperpod stage)
    local function read()
      local op = operation(p, prefix .. "/")
      local _, d = cap.cluster(ctx, p)
      local ids, seen = {}, {}
      for _, g in ipairs(d.InstanceGroups or {}) do
        for _, id in ipairs(cap.subnets(d, g)) do
          if not seen[id] then ids[#ids + 1], seen[id] = id, true end
        end
      end
      local zones = cap.zones(ctx, ids)
      local groups, listed, at = hypd.json.array(), {}, working(prefix)
      for _, g in ipairs(d.InstanceGroups or {}) do
        local v = cap.view(d, g, zones)
        v.operation, listed[v.name] = at[v.name] and at[v.name].short, true
        groups[#groups + 1] = v
      end
      local adding = {}
      for name, w in pairs(at) do
        if not listed[name] and w.view.tool == "hyperpod_add_instance_group" then adding[#adding + 1] = name end
      end
      table.sort(adding)
      for _, name in ipairs(adding) do
        local g = pending(name, at[name].view)
        g.operation = at[name].short
        groups[#groups + 1] = g
      end
      local out = { hyperpod_cluster = { name = d.ClusterName, arn = d.ClusterArn, status = d.ClusterStatus,
        failure_message = d.FailureMessage, node_recovery = d.NodeRecovery,
        node_provisioning_mode = d.NodeProvisioningMode, eks_cluster = e.name, region = e.region },
        instance_groups = groups }
      -- what the groups cost while they run (never fails the read: cost_error says why there is none)
      out.cost, out.cost_error = GC.priced(groups, e.region)
      if op then
        out.operation = { operation_id = op.operation_id, tool = op.tool, status = op.status, phase = op.phase,
          target = op.target, error = op.error, result = op.result, seconds = op.seconds,
          running_child = op.status == "running" and R.short(op).running_child or nil }
      end
      local top = R.on(prefix)
      if top and not (op and op.operation_id == top.operation_id) then
        if out.operation and out.operation.status == "running" then out.operation.top = top else out.operation = top end
      end
      return out
    end
    local function sig(x)
      local parts = { tostring(x.hyperpod_cluster.status), R.signature(x.operation and x.operation.status == "running"
        and x.operation or nil) }
      for _, g in ipairs(x.instance_groups) do
        parts[#parts + 1] = tostring(g.name) .. "=" .. tostring(g.status) .. "/" .. tostring(g.current_count) .. "/" ..
          tostring(g.target_count) .. "/" .. tostring(g.operation and g.operation.phase)
      end
      return table.concat(parts, " ")
    end
    local out, waited = W.follow(p.wait_seconds, { read = read, signature = sig,
      quick = function() return R.fingerprint(prefix, { p.operation_id }) end,
      settled = function(x)
        if x.operation and x.operation.status == "running" or W.moving(x.hyperpod_cluster.status) then return false end
        for _, g in ipairs(x.instance_groups) do if W.moving(g.status) then return false end end
        return true
      end })
    out.waited = waited
    return out
  end,
}
