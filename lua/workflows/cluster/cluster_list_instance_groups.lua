-- cluster_list_instance_groups: the capacity of one cluster in one list,
-- its EKS managed node groups and its HyperPod instance groups, each
-- HyperPod group with what it costs as it runs (its current count at the
-- on-demand price of its type) and the total.
local GC = require "_group_cost"
local P = require "_params"
local ng = require "cluster._node_groups"

-- what a group runs: a HyperPod group of one instance type, its current count
local function running(g)
  if g.kind ~= "hyperpod" then return nil, "hypd prices HyperPod instances, not an EKS node group's EC2 instances" end
  if #g.instance_types ~= 1 then return nil, "a group of several instance types is not priced" end
  return g.instance_types[1], g.current or 0
end

return tool {
  name = "cluster_list_instance_groups",
  summary = "EKS managed node groups and HyperPod instance groups of a cluster, in one list (groups at zero too)",
  description = "Lists every group of machines of the active (or named) cluster: its EKS managed node groups and " ..
    "HyperPod instance groups (scaled to zero too), each with kind, instance types, current, desired, min " ..
    "and max counts, status and capacity type; each HyperPod group's running cost (cost) and the total.",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:ListNodegroups", "eks:DescribeNodegroup", "sagemaker:ListClusters",
    "sagemaker:DescribeCluster", "pricing:GetProducts" },
  k8s = { "list" },
  params = P.form({},
    { "cluster", "region" },
    { cluster = P.cluster, region = P.region }),
  result = { type = "object", properties = {
    cluster = { type = "string" }, region = { type = "string" }, hyperpod_cluster = { type = "string" },
    kubernetes = { type = "string" },
    instance_groups = { type = "array", items = { type = "object", properties = {
      name = { type = "string" }, kind = { type = "string", enum = { "eks-nodegroup", "hyperpod" } },
      instance_types = { type = "array", items = { type = "string" } },
      current = { type = { "integer", "null" } }, desired = { type = "integer" },
      min = { type = { "integer", "null" } }, max = { type = { "integer", "null" } },
      status = { type = "string" }, capacity_type = { type = "string" }, cost = { type = "object" },
      cost_unknown = { type = "string" } } } },
    cost = { type = "object", description = "what the HyperPod groups cost an hour and a month as they run (USD, " ..
      "on-demand list prices, 730 hours a month)", properties = { items = { type = "array" },
      unpriced = { type = "array" } } },
    cost_error = { type = "string" } } },
  run = function(ctx, p)
    local which = ng.which(ctx, p)
    local c = ng.eks_cluster(ctx, which.name)
    local groups = {}
    for _, name in ipairs(hypd.aws.all("eks", "ListNodegroups", { clusterName = c.name }, ctx:aws_opts())) do
      local g = ng.describe(ctx, c.name, name)
      if g then groups[#groups + 1] = g end
    end
    local counts, why
    if #groups > 0 then counts, why = ng.nodes(ctx, c.name) end
    local out = hypd.json.array()
    for _, g in ipairs(groups) do out[#out + 1] = ng.eks_entry(g, counts) end
    local d = ng.hyperpod(ctx, c, which.record)
    for _, g in ipairs(d and d.InstanceGroups or {}) do out[#out + 1] = ng.hyperpod_entry(g, d.ClusterName) end
    table.sort(out, function(a, b)
      if a.kind ~= b.kind then return a.kind < b.kind end
      return a.name < b.name
    end)
    -- never fails the read: cost_error says why there is no cost
    local cost, cost_error = GC.priced(out, ctx:aws_region(), running)
    return { cluster = c.name, region = ctx:aws_region(), hyperpod_cluster = d and d.ClusterName or nil,
      kubernetes = why or (#groups > 0 and "read" or "not needed"), instance_groups = out, cost = cost,
      cost_error = cost_error }
  end,
}
