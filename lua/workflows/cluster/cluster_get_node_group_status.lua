-- cluster_get_node_group_status: a node group operation (scale or delete)
-- and the live state of its EKS managed node group.
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local ng = require "cluster._node_groups"

local TOOLS = { cluster_scale_node_group = true, cluster_delete_node_group = true }

-- find(p) -> the operation named by operation_id, else the latest on the
-- node group (nil when there is none)
local function find(p)
  if p.operation_id then
    local v = hypd.operations.get(p.operation_id)
    if v and TOOLS[v.tool] then return v end
    hypd.errors.raise("NOT_FOUND", "no node group operation " .. p.operation_id)
  end
  if not p.node_group then
    hypd.errors.refuse("operation_id", "required", "cluster_get_node_group_status: give operation_id, or node_group",
      { field_message = "operation_id or node_group" })
  end
  return hypd.operations.list { target = ng.target(p), limit = 1 }[1]
end

return tool {
  name = "cluster_get_node_group_status",
  summary = "Progress of cluster_scale_node_group or cluster_delete_node_group, and the node group as EKS has it",
  description = "Reports a node group operation (by operation_id, or the latest for cluster and node_group) and the " ..
    "EKS node group now: status, sizes, health issues, Ready nodes (NOT_FOUND once deleted). With " ..
    "wait_seconds it answers at the first change.",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:DescribeNodegroup" },
  k8s = { "list" },
  params = P.form({},
    { "node_group", "operation_id", "cluster", "region", "wait_seconds" },
    {
    operation_id = P.with(P.operation_id, { description = "what cluster_scale_node_group or " ..
      "cluster_delete_node_group returned" }),
    cluster = P.cluster, region = P.region,
    node_group = P.with(ng.node_group, { description = "the node group (with cluster, the latest operation on it)" }),
    wait_seconds = P.wait_seconds,
  }),
  run = function(ctx, p)
    -- read() -> the operation (with the child it runs, and the top-level
    -- one at work on the node group when that is another) and the live group
    local watch -- the node group's operations, once found
    local function read()
      local view = find(p)
      if view then watch = view.target end
      if view then view.running_child = R.short(view).running_child end
      local st = view and hypd.operations.state(view.operation_id) or {}
      local cluster, group = st.cluster, st.node_group
      if view then
        ctx.region = st.region or (view.params or {}).region or ctx.region
        cluster = cluster or (view.params or {}).cluster
        group = group or (view.params or {}).node_group
      end
      if not cluster then cluster = ng.which(ctx, p).name end
      if not group then group = p.node_group end
      local live = { cluster = cluster, name = group }
      local ok, err = pcall(function()
        local g = ng.describe(ctx, cluster, group)
        if not g then
          live.status = "NOT_FOUND"
          return
        end
        local counts, why = ng.nodes(ctx, cluster)
        for k, v in pairs(ng.eks_entry(g, counts)) do live[k] = v end
        live.kubernetes = why
      end)
      if not ok then live.error = tostring(type(err) == "table" and err.message or err) end
      local out = { operation = view or hypd.json.null, node_group = live }
      local at_work = view and view.target and R.on(view.target)
      if at_work and at_work.operation_id ~= view.operation_id then out.at_work = at_work end
      return out
    end
    local function running(x) return (x.operation ~= hypd.json.null and x.operation.status == "running") or x.at_work end
    local out, waited = W.follow(p.wait_seconds, { read = read,
      quick = function() return R.fingerprint(watch) end,
      -- settled: nothing at work, and the group not on its way (its Ready nodes as many as desired)
      settled = function(x)
        local g = x.node_group
        return not running(x) and not W.moving(g.status) and
          not (type(g.current) == "number" and type(g.desired) == "number" and g.current ~= g.desired)
      end,
      signature = function(x)
        local g = x.node_group
        return R.signature(x.operation ~= hypd.json.null and x.operation.status == "running" and R.short(x.operation) or
          nil) .. " " .. R.signature(x.at_work) .. " " .. tostring(g.status) .. "/" .. tostring(g.desired) ..
          "/" .. tostring(g.current)
      end })
    out.waited = waited
    return out
  end,
}
