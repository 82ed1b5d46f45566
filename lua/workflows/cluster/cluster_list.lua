-- cluster_list: the EKS clusters of a region and what hypd knows of them.
local Names = require "_names"
local P = require "_params"
local hp = require "cluster._hyperpods"
local left = require "cluster._leftovers"

local AWS = { "eks:ListClusters", "eks:DescribeCluster", "sagemaker:ListClusters", "sagemaker:DescribeCluster" }
table.move(left.AWS, 1, #left.AWS, #AWS + 1, AWS)

return tool {
  name = "cluster_list",
  summary = "EKS clusters in the region: which hypd manages, their HyperPod cluster, the active one",
  description = "Lists the EKS clusters of the region with status and Kubernetes version, whether hypd " ..
    "created them (tag hypd:cluster-tag), the SageMaker HyperPod cluster attached to each, and which one is " ..
    "active (the default for other tools; change it with cluster_switch). In leftovers: the cluster tags whose " ..
    "EKS cluster is gone but whose resources are not (what a teardown kept or could not delete: VPC, security " ..
    "groups, subnets, NAT gateway, FSx file systems, S3 buckets), each with the command that removes them.",
  kind = "read",
  aws = AWS,
  params = P.form({}, { "region" }, { region = P.region }),
  result = { type = "object", properties = { region = { type = "string" }, active = { type = "string" },
    clusters = { type = "array", items = { type = "object", properties = {
      name = { type = "string" }, status = { type = "string" }, version = { type = "string" },
      managed = { type = "boolean" }, cluster_tag = { type = "string" }, hyperpod = { type = "object" },
      active = { type = "boolean" } } } },
    leftovers = { type = "array", items = { type = "object", properties = {
      cluster_tag = { type = "string" }, eks_name = { type = "string" }, resources = { type = "array" },
      data = { type = "boolean" }, remove = { type = "string" }, note = { type = "string" } } } } } },
  run = function(ctx)
    local region = ctx:aws_region()
    local names = hypd.aws.all("eks", "ListClusters", {}, ctx:aws_opts())
    local hps = hp.by_eks(ctx)
    local act = hypd.clusters.active()
    local out, live = {}, {}
    for _, name in ipairs(names) do
      local c = ctx:try("eks", "DescribeCluster", { name = name })
      c = c and c.cluster
      if c then
        if (c.tags or {})[Names.TAG] then live[c.tags[Names.TAG]] = true end
        local h = hps[c.arn]
        out[#out + 1] = { name = name, status = c.status, version = c.version, arn = c.arn,
          managed = (c.tags or {})[Names.TAG] ~= nil, cluster_tag = (c.tags or {})[Names.TAG],
          hyperpod = h and { name = h.name, status = h.status } or nil,
          active = act ~= nil and act.name == name and act.region == region }
      end
    end
    table.sort(out, function(a, b) return a.name < b.name end)
    return { region = region, active = act and act.region == region and act.name or nil, clusters = out,
      leftovers = hypd.json.array(left.find(ctx, live)) }
  end,
}
