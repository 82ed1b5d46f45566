-- cluster_get_status: one EKS cluster, its add-ons, its HyperPod cluster,
-- the operations running on it and what it runs costs.
local GC = require "_group_cost"
local Names = require "_names"
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local hp = require "cluster._hyperpods"
local net = require "_network"

local PACE = 15 -- seconds between looks while a caller waits for a change
local GONE = { DELETING = true, DELETED = true, FAILED = true } -- FSx lifecycles that are not billed as running

-- running_cost(ctx, c, tag, h) -> cost | nil, cost_error: what the cluster
-- runs costs an hour and a month: its EKS control plane, the NAT gateways
-- and FSx file systems hypd made for it (they carry its tag), the HyperPod
-- instance groups by their current count; its EKS managed node groups are
-- listed unpriced (EC2 instances). Never raises: a read that fails is the
-- one-line cost_error.
local function running_cost(ctx, c, tag, h)
  local ok, cost, why = pcall(function()
    local things = { { type = "eks", name = c.name, action = "running" } }
    if tag then
      local f = { net.filter("tag:" .. Names.TAG, tag) }
      local vpc = (c.resourcesVpcConfig or {}).vpcId
      if vpc then f[2] = net.filter("vpc-id", vpc) end
      for _, n in ipairs(ctx:call("ec2", "DescribeNatGateways", { Filter = f }).NatGateways or {}) do
        if n.State == "pending" or n.State == "available" then
          things[#things + 1] = { type = "nat", name = net.tag_value(n.Tags, "Name") or n.NatGatewayId,
            action = "running" }
        end
      end
      for _, fs in ipairs(hypd.aws.all("fsx", "DescribeFileSystems", {}, ctx:aws_opts())) do
        if net.tag_value(fs.Tags, Names.TAG) == tag and not GONE[fs.Lifecycle] then
          things[#things + 1] = GC.fsx(fs, "running", net.tag_value(fs.Tags, "Name") or fs.FileSystemId)
        end
      end
    end
    for _, t in ipairs(GC.instances(h and h.describe.InstanceGroups, "running", h and h.name)) do
      things[#things + 1] = t
    end
    local out, why = hypd.cost.estimate(things, ctx:aws_region())
    -- an EKS managed node group runs EC2 instances, which hypd does not price: named, not left out silently
    for _, g in ipairs(out and hypd.aws.all("eks", "ListNodegroups", { clusterName = c.name }, ctx:aws_opts()) or {}) do
      out.unpriced[#out.unpriced + 1] = { type = "eks-nodegroup", name = g, action = "running",
        why = "hypd prices HyperPod instances, not an EKS node group's EC2 instances" }
    end
    return out, why
  end)
  if ok then return cost, why end
  local e = cost
  local msg = type(e) == "table" and ((e.code and (e.code .. ": ") or "") .. tostring(e.message)) or tostring(e)
  return nil, "the cost could not be read: " .. msg:gsub("%s+", " ")
end

-- view(ctx, p) -> the status, a signature of what can change in it, whether
-- it is settled, and what running_cost reads (priced once, for the answer,
-- not at each look of a wait)
local function view(ctx, p)
  local target = ctx:cluster(p)
  local name = target.name
  ctx.region = target.region
  local c = ctx:call("eks", "DescribeCluster", { name = name }).cluster
  local addons = {}
  for _, a in ipairs(hypd.aws.all("eks", "ListAddons", { clusterName = name }, ctx:aws_opts())) do
    local d = ctx:try("eks", "DescribeAddon", { clusterName = name, addonName = a })
    d = d and d.addon
    local issue = d and d.health and d.health.issues and d.health.issues[1] -- what EKS says is wrong
    addons[#addons + 1] = { name = a, version = d and d.addonVersion, status = d and d.status,
      message = issue and ((issue.code and (issue.code .. ": ") or "") .. tostring(issue.message)) or nil }
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
      instance_groups = groups, failure_message = h.describe.FailureMessage }
  end
  local ops = {}
  local tag = (c.tags or {})[Names.TAG]
  -- the top-level operations at work on the cluster (cluster_create, not the
  -- stage it runs now), each with the child it runs
  local seen = {}
  for _, v in ipairs(hypd.operations.list { status = "running" }) do
    if v.target and (v.target:find(name, 1, true) or (tag and v.target:find("/" .. tag, 1, true))) then
      local top = R.top(v)
      if top.status == "running" and not seen[top.operation_id] then
        seen[top.operation_id] = true
        local s = R.short(top)
        ops[#ops + 1] = { operation_id = s.operation_id, tool = s.tool, phase = s.phase, target = s.target,
          running_child = s.running_child }
      end
    end
  end
  local act = hypd.clusters.active()
  local out = { region = ctx:aws_region(), active = act ~= nil and act.name == name and act.region == ctx:aws_region(),
    eks = { name = c.name, arn = c.arn, status = c.status, version = c.version, endpoint = c.endpoint,
      platform_version = c.platformVersion, authentication_mode = (c.accessConfig or {}).authenticationMode,
      vpc_id = (c.resourcesVpcConfig or {}).vpcId, subnet_ids = (c.resourcesVpcConfig or {}).subnetIds,
      managed = tag ~= nil, cluster_tag = tag },
    addons = addons, hyperpod = hyperpod, operations = ops }
  -- what a waiting caller watches: every status and running phase
  local sig = { tostring(c.status), tostring(hyperpod and hyperpod.status) }
  for _, a in ipairs(addons) do sig[#sig + 1] = a.name .. "=" .. tostring(a.status) end
  for _, g in ipairs(hyperpod and hyperpod.instance_groups or {}) do
    sig[#sig + 1] = g.name .. "=" .. tostring(g.status) .. "/" .. tostring(g.current) .. "/" .. tostring(g.target)
  end
  for _, o in ipairs(ops) do sig[#sig + 1] = R.signature(o) end
  local moving = #ops > 0 or W.any_moving(sig) ~= nil
  for _, a in ipairs(addons) do moving = moving or W.moving(a.status) end
  for _, g in ipairs(hyperpod and hyperpod.instance_groups or {}) do moving = moving or W.moving(g.status) end
  return out, table.concat(sig, " "), not moving, { c = c, tag = tag, h = h }
end

return tool {
  name = "cluster_get_status",
  summary = "EKS status, version, endpoint, add-ons, HyperPod instance groups and running operations",
  description = "Reports one EKS cluster (the active one unless named): status, Kubernetes version, endpoint, " ..
    "authentication mode and VPC; its EKS add-ons with versions and status; the attached HyperPod cluster " ..
    "with each instance group's type and current/target count; hypd operations running on it; and what it " ..
    "runs costs an hour and a month (cost: EKS, NAT gateways, instance groups, FSx). With " ..
    "wait_seconds it answers at once when nothing is in progress " ..
    "(waited.ended = settled), else as soon as one of those statuses, or a running operation's phase, changes (or when " ..
    "the time is up).",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:ListAddons", "eks:DescribeAddon", "sagemaker:ListClusters",
    "sagemaker:DescribeCluster", "ec2:DescribeNatGateways", "fsx:DescribeFileSystems", "eks:ListNodegroups",
    "pricing:GetProducts" },
  params = P.form({},
    { "cluster", "region", "wait_seconds" },
    { cluster = P.cluster, region = P.region, wait_seconds = P.wait_seconds }),
  run = function(ctx, p)
    local watch -- the cluster's name and tag, once read
    local sigs, settled, facts = setmetatable({}, { __mode = "k" }), setmetatable({}, { __mode = "k" }),
      setmetatable({}, { __mode = "k" })
    local out, waited = W.follow(p.wait_seconds, { every = PACE,
      quick = function()
        return R.fingerprint(watch and function(target)
          return target:find(watch.name, 1, true) ~= nil or (watch.tag and target:find("/" .. watch.tag, 1, true)) ~= nil
        end)
      end,
      read = function()
        local o, sig, calm, f = view(ctx, p)
        watch = { name = o.eks.name, tag = o.eks.cluster_tag }
        sigs[o], settled[o], facts[o] = sig, calm, f
        return o
      end,
      settled = function(o) return settled[o] end,
      signature = function(o) return sigs[o] end })
    local f = facts[out]
    if f then out.cost, out.cost_error = running_cost(ctx, f.c, f.tag, f.h) end
    out.waited = waited
    return out
  end,
}
