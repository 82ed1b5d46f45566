-- cluster_get_status: one EKS cluster, its add-ons, its HyperPod cluster
-- and the operations running on it.
local P = require "_params"
local hp = require "cluster._hyperpods"

return tool {
  name = "cluster_get_status",
  summary = "EKS status, version, endpoint, add-ons, HyperPod instance groups and running operations",
  description = "Reports one EKS cluster (the active one unless named): status, Kubernetes version, endpoint, " ..
    "authentication mode and VPC; its EKS add-ons with versions and status; the attached HyperPod cluster " ..
    "with each instance group's type and current/target count; and hypd operations running on it.",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:ListAddons", "eks:DescribeAddon", "sagemaker:ListClusters",
    "sagemaker:DescribeCluster" },
  params = { cluster = P.cluster, region = P.region },
  run = function(ctx, p)
    local name, region = hp.which(p)
    if region then ctx.region = region end
    local c = ctx:call("eks", "DescribeCluster", { name = name }).cluster
    local addons = {}
    for _, a in ipairs(hypd.aws.all("eks", "ListAddons", { clusterName = name }, ctx:aws_opts())) do
      local d = ctx:try("eks", "DescribeAddon", { clusterName = name, addonName = a })
      d = d and d.addon
      addons[#addons + 1] = { name = a, version = d and d.addonVersion, status = d and d.status }
    end
    local h = hp.by_eks(ctx)[c.arn]
    local hyperpod
    if h then
      local groups = {}
      for _, g in ipairs(h.describe.InstanceGroups or {}) do
        groups[#groups + 1] = { name = g.InstanceGroupName, instance_type = g.InstanceType,
          current = g.CurrentCount, target = g.TargetCount, status = g.Status }
      end
      hyperpod = { name = h.name, status = h.status, arn = h.arn, node_recovery = h.describe.NodeRecovery,
        instance_groups = groups }
    end
    local ops = {}
    local tag = (c.tags or {})[hp.TAG]
    for _, v in ipairs(hypd.operations.list { status = "running" }) do
      if v.target and (v.target:find(name, 1, true) or (tag and v.target:find("/" .. tag, 1, true))) then
        ops[#ops + 1] = { operation_id = v.operation_id, tool = v.tool, phase = v.phase }
      end
    end
    local act = hypd.clusters.active()
    return { region = ctx:aws_region(), active = act ~= nil and act.name == name and act.region == ctx:aws_region(),
      eks = { name = c.name, arn = c.arn, status = c.status, version = c.version, endpoint = c.endpoint,
        platform_version = c.platformVersion, authentication_mode = (c.accessConfig or {}).authenticationMode,
        vpc_id = (c.resourcesVpcConfig or {}).vpcId, subnet_ids = (c.resourcesVpcConfig or {}).subnetIds,
        managed = tag ~= nil, cluster_tag = tag },
      addons = addons, hyperpod = hyperpod, operations = ops }
  end,
}
