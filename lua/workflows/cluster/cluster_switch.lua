-- cluster_switch: which cluster the other tools work on by default.
local P = require "_params"

return tool {
  name = "cluster_switch",
  summary = "Make an EKS cluster the active one (the default for other tools)",
  description = "Selects the active cluster, recorded in hypd's state, after checking that it exists. Tools " ..
    "that take an optional cluster use it when none is given. Its status tool, cluster_get_status, then " ..
    "reports the active cluster.",
  kind = "mutating",
  status_tool = "cluster_get_status",
  aws = { "eks:DescribeCluster" },
  params = { cluster = P.with(P.cluster, { required = true, description = "EKS cluster name" }), region = P.region },
  result = { type = "object", properties = { active = { type = "object" }, previous = { type = "object" },
    status_tool = { type = "string" } } },
  run = function(ctx, p)
    local c = ctx:call("eks", "DescribeCluster", { name = p.cluster }).cluster
    local now = { name = c.name, region = ctx:aws_region(), arn = c.arn }
    local prev = hypd.clusters.set_active(now)
    return { active = now, previous = prev or hypd.json.null }
  end,
}
