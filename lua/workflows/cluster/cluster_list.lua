-- cluster_list: the EKS clusters of a region and what hypd knows of them.
local P = require "_params"
local hp = require "cluster._hyperpods"

return tool {
  name = "cluster_list",
  summary = "EKS clusters in the region: which hypd manages, their HyperPod cluster, the active one",
  description = "Lists the EKS clusters of the region with status and Kubernetes version, whether hypd " ..
    "created them (tag hypd:cluster-tag), the SageMaker HyperPod cluster attached to each, and which one is " ..
    "active (the default for other tools; change it with cluster_switch).",
  kind = "read",
  aws = { "eks:ListClusters", "eks:DescribeCluster", "sagemaker:ListClusters", "sagemaker:DescribeCluster" },
  params = { region = P.region },
  result = { type = "object", properties = { region = { type = "string" }, active = { type = "string" },
    clusters = { type = "array", items = { type = "object", properties = {
      name = { type = "string" }, status = { type = "string" }, version = { type = "string" },
      managed = { type = "boolean" }, cluster_tag = { type = "string" }, hyperpod = { type = "object" },
      active = { type = "boolean" } } } } } },
  run = function(ctx)
    local region = ctx:aws_region()
    local names = hypd.aws.all("eks", "ListClusters", {}, ctx:aws_opts())
    local hps = hp.by_eks(ctx)
    local act = hypd.clusters.active()
    local out = {}
    for _, name in ipairs(names) do
      local c = ctx:try("eks", "DescribeCluster", { name = name })
      c = c and c.cluster
      if c then
        local h = hps[c.arn]
        out[#out + 1] = { name = name, status = c.status, version = c.version, arn = c.arn,
          managed = (c.tags or {})[hp.TAG] ~= nil, cluster_tag = (c.tags or {})[hp.TAG],
          hyperpod = h and { name = h.name, status = h.status } or nil,
          active = act ~= nil and act.name == name and act.region == region }
      end
    end
    table.sort(out, function(a, b) return a.name < b.name end)
    return { region = region, active = act and act.region == region and act.name or nil, clusters = out }
  end,
}
