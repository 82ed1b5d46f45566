-- diagnose_subnets_nodes: a read tool over AWS and Kubernetes, the shape of
-- an operator's own diagnostic. It lists the subnets of the active cluster's
-- VPC (hypd.aws through ctx) and the cluster's nodes with their instance
-- type and zone (hypd.k8s), so a person sees which subnet each node is in.
--   hypd --playbooks examples/playbooks call diagnose_subnets_nodes
local P = require "_params"

return tool {
  name = "diagnose_subnets_nodes",
  summary = "The active cluster's subnets and its nodes, by zone",
  description = "Lists the subnets of the EKS cluster's VPC with their zone, CIDR and free addresses, and the " ..
    "cluster's Kubernetes nodes with their instance type and zone. Read-only.",
  kind = "read",
  aws = { "eks:DescribeCluster", "ec2:DescribeSubnets" },
  k8s = { "list" },
  params = { cluster = P.cluster, region = P.region },
  result = { type = "object", properties = { cluster = { type = "string" },
    subnets = { type = "array", items = { type = "object" } }, nodes = { type = "array", items = { type = "object" } } } },
  run = function(ctx, p)
    local name = p.cluster or (hypd.clusters.active() or {}).name
    if not name then hypd.errors.raise("NOT_FOUND", "no cluster given and none is active", { field = "cluster" }) end
    local c = ctx:call("eks", "DescribeCluster", { name = name }).cluster
    local vpc = (c.resourcesVpcConfig or {}).vpcId
    local subnets = {}
    local out = ctx:call("ec2", "DescribeSubnets", { Filters = { { Name = "vpc-id", Values = { vpc } } } })
    for _, s in ipairs(out.Subnets or {}) do
      subnets[#subnets + 1] = { id = s.SubnetId, zone = s.AvailabilityZone, cidr = s.CidrBlock,
        free = s.AvailableIpAddressCount }
    end
    table.sort(subnets, function(a, b) return a.cidr < b.cidr end)
    local nodes = {}
    for _, n in ipairs(assert(ctx:k8s(name):list("v1", "Node"))) do
      local l = n.metadata.labels or {}
      nodes[#nodes + 1] = { name = n.metadata.name, instance_type = l["node.kubernetes.io/instance-type"],
        zone = l["topology.kubernetes.io/zone"] }
    end
    table.sort(nodes, function(a, b) return a.name < b.name end)
    return { cluster = name, subnets = subnets, nodes = nodes }
  end,
}
