-- cluster_list, cluster_get_status, cluster_switch, cluster_create_eks and
-- its status tool cluster_get_creation_status.
local aws = require "hypd.aws"
local common = require "hypd.tools.common"
local errors = require "hypd.errors"
local json = require "hypd.json"
local op = require "hypd.op"
local store = require "hypd.store"
local tool = require "hypd.tool"

local ACTIVE_KEY = "hypd/active_cluster"
local TAG = "hypd:cluster-tag"

local REGION = common.REGION
local CLUSTER = { type = "string", pattern = "^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$",
  pattern_help = "an EKS cluster name: 1 to 100 letters, digits, '-' or '_', starting with a letter or digit",
  description = "EKS cluster name (default: the active cluster; see cluster_switch)" }

local opts = common.aws_opts

local function active() return store.get(ACTIVE_KEY) end

-- hyperpods(o) -> EKS cluster ARN -> {name, status, arn}
local function hyperpods(o)
  local out = {}
  local list = aws.try("sagemaker", "ListClusters", {}, o)
  for _, s in ipairs(list and list.ClusterSummaries or {}) do
    local d = aws.try("sagemaker", "DescribeCluster", { ClusterName = s.ClusterName }, o)
    local eks = d and d.Orchestrator and d.Orchestrator.Eks and d.Orchestrator.Eks.ClusterArn
    if eks then out[eks] = { name = d.ClusterName, status = d.ClusterStatus, arn = d.ClusterArn, describe = d } end
  end
  return out
end

tool.define {
  name = "cluster_list",
  summary = "EKS clusters in the region: which hypd manages, their HyperPod cluster, the active one",
  description = "Lists the EKS clusters of the region with status and Kubernetes version, whether hypd " ..
    "created them (tag hypd:cluster-tag), the SageMaker HyperPod cluster attached to each, and which one is " ..
    "active (the default for other tools; change it with cluster_switch).",
  kind = "read",
  params = { region = REGION },
  result = { type = "object", properties = { region = { type = "string" }, active = { type = "string" },
    clusters = { type = "array", items = { type = "object", properties = {
      name = { type = "string" }, status = { type = "string" }, version = { type = "string" },
      managed = { type = "boolean" }, cluster_tag = { type = "string" }, hyperpod = { type = "object" },
      active = { type = "boolean" } } } } } },
  run = function(_, p)
    local o = opts(p.region)
    local names = aws.all("eks", "ListClusters", {}, o)
    local hp = hyperpods(o)
    local act = active()
    local out = {}
    for _, name in ipairs(names) do
      local c = aws.try("eks", "DescribeCluster", { name = name }, o)
      c = c and c.cluster
      if c then
        local h = hp[c.arn]
        out[#out + 1] = { name = name, status = c.status, version = c.version, arn = c.arn,
          managed = (c.tags or {})[TAG] ~= nil, cluster_tag = (c.tags or {})[TAG],
          hyperpod = h and { name = h.name, status = h.status } or nil,
          active = act ~= nil and act.name == name and act.region == o.region }
      end
    end
    table.sort(out, function(a, b) return a.name < b.name end)
    return { region = o.region, active = act and act.region == o.region and act.name or nil, clusters = out }
  end,
}

local function which(p)
  local act = active()
  local name = p.cluster or (act and act.name)
  if not name then
    errors.raise("NOT_FOUND", "no cluster given and none is active: pass cluster, or call cluster_switch",
      { fields = { { field = "cluster", rule = "required", message = "cluster: no active cluster" } } })
  end
  return name, p.region or (not p.cluster and act and act.region) or nil
end

tool.define {
  name = "cluster_get_status",
  summary = "EKS status, version, endpoint, add-ons, HyperPod instance groups and running operations",
  description = "Reports one EKS cluster (the active one unless named): status, Kubernetes version, endpoint, " ..
    "authentication mode and VPC; its EKS add-ons with versions and status; the attached HyperPod cluster " ..
    "with each instance group's type and current/target count; and hypd operations running on it.",
  kind = "read",
  params = { cluster = CLUSTER, region = REGION },
  run = function(_, p)
    local name, region = which(p)
    local o = opts(region)
    local c = aws.call("eks", "DescribeCluster", { name = name }, o).cluster
    local addons = {}
    for _, a in ipairs(aws.all("eks", "ListAddons", { clusterName = name }, o)) do
      local d = aws.try("eks", "DescribeAddon", { clusterName = name, addonName = a }, o)
      d = d and d.addon
      addons[#addons + 1] = { name = a, version = d and d.addonVersion, status = d and d.status }
    end
    local h = hyperpods(o)[c.arn]
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
    local tag = (c.tags or {})[TAG]
    for _, rec in ipairs(op.list { status = "running" }) do
      if rec.target and (rec.target:find(name, 1, true) or (tag and rec.target:find("/" .. tag, 1, true))) then
        ops[#ops + 1] = { operation_id = rec.id, tool = rec.tool, phase = rec.phase }
      end
    end
    local act = active()
    return { region = o.region, active = act ~= nil and act.name == name and act.region == o.region,
      eks = { name = c.name, arn = c.arn, status = c.status, version = c.version, endpoint = c.endpoint,
        platform_version = c.platformVersion, authentication_mode = (c.accessConfig or {}).authenticationMode,
        vpc_id = (c.resourcesVpcConfig or {}).vpcId, subnet_ids = (c.resourcesVpcConfig or {}).subnetIds,
        managed = tag ~= nil, cluster_tag = tag },
      addons = addons, hyperpod = hyperpod, operations = ops }
  end,
}

tool.define {
  name = "cluster_switch",
  summary = "Make an EKS cluster the active one (the default for other tools)",
  description = "Selects the active cluster, recorded in hypd's state, after checking that it exists. Tools " ..
    "that take an optional cluster use it when none is given.",
  kind = "mutating",
  params = { cluster = { type = "string", required = true, pattern = CLUSTER.pattern,
    pattern_help = CLUSTER.pattern_help, description = "EKS cluster name" },
    region = REGION },
  result = { type = "object", properties = { active = { type = "object" }, previous = { type = "object" } } },
  run = function(_, p)
    local o = opts(p.region)
    local c = aws.call("eks", "DescribeCluster", { name = p.cluster }, o).cluster
    local prev = active()
    local now = { name = c.name, region = o.region, arn = c.arn }
    assert(store.put(ACTIVE_KEY, now))
    op.changed("active_cluster", { name = now.name, region = now.region, previous = prev and prev.name or nil })
    return { active = now, previous = prev or json.null }
  end,
}

-- the staged stage 1 of provisioning (hypd.workflows.eks_create)
local ok, flow = pcall(require, "hypd.workflows.eks_create")
if not ok then return end

tool.define {
  name = "cluster_create_eks",
  summary = "Stage 1: create (or reuse) the VPC, networking, IAM role and EKS cluster for a HyperPod cluster",
  description = "Creates, or finds again and reuses, everything the EKS stage needs, named and tagged from " ..
    "cluster_tag (tag hypd:cluster-tag): a VPC with two public subnets, an internet gateway, a NAT gateway, " ..
    "two private subnets for EKS, route tables and a security group; the EKS cluster role; the EKS cluster " ..
    "hypd-<cluster_tag> with API authentication and the caller as cluster admin (access entry). Waits until " ..
    "ACTIVE (8 to 12 minutes on AWS). The only decision is cluster_tag: ask the person for it. Calling it " ..
    "again with the same tag returns the running operation, or changes nothing once done.",
  kind = "mutating",
  aws = { "ec2:Describe*", "ec2:CreateVpc", "ec2:ModifyVpcAttribute", "ec2:CreateSubnet", "ec2:ModifySubnetAttribute",
    "ec2:CreateInternetGateway", "ec2:AttachInternetGateway", "ec2:AllocateAddress", "ec2:CreateNatGateway",
    "ec2:CreateRouteTable", "ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:AssociateRouteTable",
    "ec2:CreateSecurityGroup", "ec2:AuthorizeSecurityGroupIngress", "ec2:CreateTags",
    "iam:GetRole", "iam:CreateRole", "iam:AttachRolePolicy", "iam:ListAttachedRolePolicies",
    "eks:DescribeCluster", "eks:CreateCluster", "eks:DescribeAccessEntry", "eks:CreateAccessEntry",
    "eks:AssociateAccessPolicy", "eks:ListAssociatedAccessPolicies", "sts:GetCallerIdentity" },
  params = flow.params,
  status_tool = "cluster_get_creation_status",
  target = flow.target,
  steps = flow.steps,
}

tool.define {
  name = "cluster_get_creation_status",
  summary = "Progress of cluster_create_eks: each phase with timings, and the live AWS status",
  description = "Reports a cluster_create_eks operation (by operation_id, or the latest one for cluster_tag): " ..
    "status (running, succeeded, failed, cancelled), the current phase, every step with start, end and " ..
    "duration, the result or error, and the live AWS state (EKS cluster status, NAT gateway). Poll it every " ..
    "30 to 60 seconds while status is running.",
  kind = "read",
  params = {
    operation_id = { type = "string", pattern = "^op-[0-9a-f]{16}$",
      pattern_help = "an operation id: op- and 16 hex digits", description = "what cluster_create_eks returned" },
    cluster_tag = { type = "string", pattern = "^[a-z][a-z0-9-]{1,30}[a-z0-9]$",
      pattern_help = "a cluster tag: 3 to 32 characters of a-z, 0-9 and '-', starting with a letter",
      description = "find the latest operation for this tag instead" },
  },
  run = function(_, p)
    local rec
    if p.operation_id then
      rec = op.get(p.operation_id)
    elseif p.cluster_tag then
      for _, r in ipairs(op.list { tool = "cluster_create_eks", limit = 200 }) do
        if (r.params or {}).cluster_tag == p.cluster_tag then rec = r break end
      end
    else
      errors.raise("VALIDATION", "cluster_get_creation_status: give operation_id or cluster_tag",
        { fields = { { field = "operation_id", rule = "required", message = "operation_id or cluster_tag" } } })
    end
    if not rec or rec.tool ~= "cluster_create_eks" then
      errors.raise("NOT_FOUND", "no cluster_create_eks operation for " .. tostring(p.operation_id or p.cluster_tag))
    end
    local view = op.view(rec)
    if flow.status then
      local st = store.get("op/" .. rec.id .. "/state") or {}
      local okl, live = pcall(flow.status, { params = rec.params, state = st, id = rec.id }, opts(st.region))
      view.aws = okl and live or { error = tostring(live and live.message or live) }
    end
    return view
  end,
}
