-- cluster/_node_groups: what the node group tools share
-- (cluster_list_instance_groups, cluster_scale_node_group,
-- cluster_delete_node_group, cluster_get_node_group_status): the EKS
-- cluster a call works on, its managed node groups and HyperPod instance
-- groups as one kind of entry, the Nodes each group has in Kubernetes, and
-- the refusals of a group that is not an EKS node group.
local hp = require "_hyperpod"

local M = {}

M.LABEL = "eks.amazonaws.com/nodegroup" -- the label EKS gives a managed node group's Nodes
M.POLL, M.LIMIT = 15, 30 * 60           -- seconds between EKS checks; give up after
M.NODES_POLL, M.NODES_LIMIT = 10, 15 * 60

-- EKS's capacity types and HyperPod's, in the words of hypd's parameters
local CAPACITY = { ON_DEMAND = "on-demand", SPOT = "spot", CAPACITY_BLOCK = "capacity-block" }

M.node_group = { type = "string", pattern = "^[0-9A-Za-z][A-Za-z0-9_-]{0,62}$",
  pattern_help = "a node group name: up to 63 letters, digits, '-' or '_', starting with a letter or digit",
  description = "the EKS managed node group's name (cluster_list_instance_groups lists them)" }

-- which(ctx, p) -> {name, region, record}: the EKS cluster (p.cluster, else the active one)
function M.which(ctx, p) return hp.eks(ctx, p) end

-- target(p) -> "nodegroup/<region>/<cluster>/<node group>", what one operation works on
function M.target(p)
  local c = hypd.clusters.target(p) or { region = p.region }
  local cluster, region = c.name or "?", c.region
  if not region then
    local ok, r = pcall(hypd.aws.region, {})
    region = ok and r or "default"
  end
  return "nodegroup/" .. region .. "/" .. cluster .. "/" .. tostring(p.node_group)
end

-- describe(ctx, cluster, name) -> the node group, or nil when EKS has none of that name
function M.describe(ctx, cluster, name)
  local r, err = ctx:try("eks", "DescribeNodegroup", { clusterName = cluster, nodegroupName = name })
  if r then return r.nodegroup end
  if err.code == "ResourceNotFoundException" then return nil end
  error(err, 0)
end

-- eks_cluster(ctx, name) -> the EKS cluster; NOT_FOUND naming the field when there is none
function M.eks_cluster(ctx, name)
  local r, err = ctx:try("eks", "DescribeCluster", { name = name })
  if r then return r.cluster end
  if err.code == "ResourceNotFoundException" then
    hypd.errors.refuse("cluster", "unknown", "cluster: no EKS cluster named " .. name .. " in " .. ctx:aws_region(),
      { field_message = "no EKS cluster " .. name })
  end
  error(err, 0)
end

-- hyperpod(ctx, eks, record) -> the DescribeCluster of the HyperPod cluster
-- the EKS cluster orchestrates, or nil
function M.hyperpod(ctx, eks, record)
  local named = record and record.hyperpod and record.hyperpod.name
  local d = named and hp.find(ctx, eks.arn, named)
  if d and ((d.Orchestrator or {}).Eks or {}).ClusterArn == eks.arn then return d end
  return hp.find(ctx, eks.arn)
end

-- nodes(ctx, cluster) -> {group = {total, ready}} for the Nodes labelled
-- with a managed node group, or nil, why (the Kubernetes API cannot be read)
function M.nodes(ctx, cluster)
  local ok, items = pcall(function()
    local list, err = ctx:k8s(cluster):list("v1", "Node", { labels = M.LABEL })
    if not list then error(err, 0) end
    return list
  end)
  if not ok then
    local e = items
    return nil, "the Kubernetes API of " .. cluster .. " could not be read (" ..
      tostring(type(e) == "table" and (e.code or "") .. ": " .. tostring(e.message) or e) .. ")"
  end
  local out = {}
  for _, n in ipairs(items) do
    local g = ((n.metadata or {}).labels or {})[M.LABEL]
    if g then
      local c = out[g] or { total = 0, ready = 0 }
      c.total = c.total + 1
      for _, cond in ipairs((n.status or {}).conditions or {}) do
        if cond.type == "Ready" and cond.status == "True" and not (n.spec or {}).unschedulable then
          c.ready = c.ready + 1
        end
      end
      out[g] = c
    end
  end
  return out
end

function M.eks_capacity(ng) return CAPACITY[ng.capacityType or "ON_DEMAND"] or tostring(ng.capacityType):lower() end

function M.hyperpod_capacity(g)
  if g.TrainingPlanArn then return "training-plan" end
  if (g.CapacityRequirements or {}).Spot then return "spot" end
  return "on-demand"
end

local function issues(ng)
  local out = hypd.json.array()
  for _, i in ipairs((ng.health or {}).issues or {}) do out[#out + 1] = tostring(i.code) .. ": " .. tostring(i.message) end
  return out
end
M.issues = issues

-- eks_entry(ng, counts) -> the list entry of a managed node group
function M.eks_entry(ng, counts)
  local s = ng.scalingConfig or {}
  local c = counts and (counts[ng.nodegroupName] or { total = 0, ready = 0 })
  return { name = ng.nodegroupName, kind = "eks-nodegroup", instance_types = ng.instanceTypes or hypd.json.array(),
    current = c and c.ready or hypd.json.null, desired = s.desiredSize, min = s.minSize, max = s.maxSize,
    status = ng.status, capacity_type = M.eks_capacity(ng), ami_type = ng.amiType, version = ng.version,
    health_issues = #issues(ng) > 0 and issues(ng) or nil }
end

-- hyperpod_entry(g, hp_name) -> the list entry of a HyperPod instance group
function M.hyperpod_entry(g, hp_name)
  local types = hypd.json.array()
  if g.InstanceType then types[1] = g.InstanceType end
  for _, d in ipairs(g.InstanceTypeDetails or {}) do
    local seen = false
    for _, t in ipairs(types) do seen = seen or t == d.InstanceType end
    if not seen and d.InstanceType then types[#types + 1] = d.InstanceType end
  end
  return { name = g.InstanceGroupName, kind = "hyperpod", instance_types = types, current = g.CurrentCount or 0,
    desired = g.TargetCount, min = g.MinCount or hypd.json.null, max = hypd.json.null, status = g.Status,
    capacity_type = M.hyperpod_capacity(g), hyperpod_cluster = hp_name, training_plan = g.TrainingPlanArn }
end

-- require_node_group(ctx, c, record, name) -> the node group, or VALIDATION:
-- a HyperPod instance group of that name is named as such, an unknown name
-- is listed against the node groups there are
function M.require_node_group(ctx, c, record, name, what)
  local ng = M.describe(ctx, c.name, name)
  if ng then return ng end
  local d = M.hyperpod(ctx, c, record)
  local g = d and hp.group(d, name)
  if g then
    hypd.errors.refuse("node_group", "kind", string.format("node_group: %s is an instance group of HyperPod cluster %s, " ..
      "not an EKS managed node group; %s works only on EKS node groups (hyperpod_%s_instance_group changes " ..
      "HyperPod groups)", name, d.ClusterName, what.tool, what.verb),
      { field_message = name .. " is a HyperPod instance group of " .. d.ClusterName .. ", not an EKS managed node group" })
  end
  local names = hypd.aws.all("eks", "ListNodegroups", { clusterName = c.name }, ctx:aws_opts())
  hypd.errors.refuse("node_group", "unknown", string.format("node_group: EKS cluster %s has no managed node group named %s " ..
    "(it has: %s)", c.name, name, #names > 0 and table.concat(names, ", ") or "none"),
    { field_message = "no node group " .. name .. " in " .. c.name })
end

-- await_nodes(ctx, cluster, group, want) -> the Ready nodes once the group
-- has exactly want Nodes in Kubernetes, all Ready (a poll), or nil, why
-- when hypd cannot read the cluster's Kubernetes API (then nothing is awaited)
function M.await_nodes(ctx, cluster, group, want)
  local counts, why = M.nodes(ctx, cluster)
  if not counts then
    ctx:progress(why .. "; the nodes are not checked")
    return nil, why
  end
  return ctx:poll { what = want .. " Ready node(s) of " .. cluster .. "/" .. group .. " in Kubernetes",
    every = M.NODES_POLL, timeout = M.NODES_LIMIT,
    check = function()
      local c = (M.nodes(ctx, cluster) or {})[group] or { total = 0, ready = 0 }
      return c.ready == want and c.total == want, c.total .. " node(s), " .. c.ready .. " Ready, of " .. want, c.ready
    end }
end

-- resolve(ctx, what) -> the EKS cluster and its node group for the step
-- context's parameters (cluster, region, node_group), refused as
-- require_node_group refuses; what the later steps need goes into ctx.state
-- (region, cluster, node_group, started_at)
function M.resolve(ctx, what)
  local p, st = ctx.params, ctx.state
  local which = M.which(ctx, p)
  local c = M.eks_cluster(ctx, which.name)
  local g = M.require_node_group(ctx, c, which.record, p.node_group, what)
  st.region, st.cluster, st.node_group = ctx:aws_region(), c.name, g.nodegroupName
  st.started_at = st.started_at or hypd.now()
  return c, g
end

return M
