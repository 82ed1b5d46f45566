-- hyperpod_list_instance_groups: the HyperPod instance groups of a cluster,
-- read from DescribeCluster (and EC2 for the zones of their subnets); the
-- status tool of the capacity tools, following their operations.
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local cap = require "_capacity"

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

return tool {
  name = "hyperpod_list_instance_groups",
  summary = "The instance groups of the active (or named) HyperPod cluster: counts, status, capacity and settings",
  description = "Lists the instance groups of the HyperPod cluster of the active (or named) EKS cluster: type, " ..
    "status, counts, capacity type, subnets, health checks and software. The status tool of " ..
    "hyperpod_scale_instance_group, hyperpod_delete_instance_group and hyperpod_update_software: with " ..
    "operation_id it adds that operation's status and phase; with wait_seconds it answers at the first " ..
    "change.",
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
      local groups = hypd.json.array()
      for _, g in ipairs(d.InstanceGroups or {}) do groups[#groups + 1] = cap.view(d, g, zones) end
      local out = { hyperpod_cluster = { name = d.ClusterName, arn = d.ClusterArn, status = d.ClusterStatus,
        failure_message = d.FailureMessage, node_recovery = d.NodeRecovery,
        node_provisioning_mode = d.NodeProvisioningMode, eks_cluster = e.name, region = e.region },
        instance_groups = groups }
      -- what the groups cost while they run (never fails the read: cost_error says why there is none)
      out.cost, out.cost_error = cap.priced(groups, e.region)
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
          tostring(g.target_count)
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
