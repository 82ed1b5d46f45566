-- hyperpod/_create: stage 4, the SageMaker HyperPod cluster on an EKS
-- cluster: what the steps of hyperpod_create call (the execution role and
-- the lifecycle bucket are _hyperpod_setup's), and the pieces other tools
-- run on their own:
--   group_spec(o) -> the CreateCluster/UpdateCluster instance group
--   eks_cluster(ctx, p) -> what a call works on (EKS, tag, VPC, groups)
--
-- The runs of hyperpod_create's steps: check (every decision against the
-- account: hyperpod/_checks; reads only), execution_role, lifecycle,
-- subnet (hyperpod/_subnet), cluster (CreateCluster: NodeRecovery
-- Automatic, NodeProvisioningMode Continuous), wait_cluster (InService,
-- about 15 minutes), wait_ready_nodes (the nodes Ready in Kubernetes with
-- their health labels), record (the clusters registry, the result).
local Names = require "_names"
local checks = require "hyperpod._checks"
local hp = require "_hyperpod"
local json = hypd.json
local errors = hypd.errors
local net = require "_network"
local P = require "_params"
local setup = require "_hyperpod_setup"
local subnet = require "hyperpod._subnet"

local M = {}

M.IN_SERVICE_POLL, M.IN_SERVICE_LIMIT = 60, 90 * 60 -- HyperPod takes about 15 minutes

-- in_service_pace(waited) -> seconds to the next check: rare while a
-- creation or update cannot be done yet (under 10 minutes), close once it is due
function M.in_service_pace(waited) return waited < 10 * 60 and 120 or 30 end
M.NODES_POLL, M.NODES_LIMIT = 30, 30 * 60
M.CAPACITY_GRACE = 15 * 60 -- how long HyperPod may look for capacity before the wait stops and says so
M.ROLE_RETRY_WAIT, M.ROLE_RETRY_FOR = 10, 60       -- a new execution role SageMaker does not see yet
M.DEEP_CHECKS = { "InstanceStress", "InstanceConnectivity" }
M.HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
-- the EKS cluster a call works on ---------------------------------------------------

-- tag_of(record, eks) -> the cluster tag: recorded, tagged on the EKS
-- cluster, or made from the cluster's name (an imported cluster)
local function tag_of(rec, c)
  local t = rec.tag or (c.tags or {})[Names.TAG] or c.name:match("^hypd%-([a-z][a-z0-9-]*[a-z0-9])$")
  if t then return t end
  t = c.name:lower():gsub("[^a-z0-9-]", "-"):gsub("^[^a-z]+", ""):sub(1, 32):gsub("-+$", "")
  if #t < 3 then t = ("hp-" .. t .. "-x"):sub(1, 32) end
  return t
end

-- planned_eks(e) -> what a plan works on when the EKS cluster hypd-<tag> is
-- itself only planned (cluster_create --plan): the planned ids
-- cluster_create_eks's plan gives its VPC, security group and NAT gateway
local function planned_eks(e)
  local tag = e.record.tag or e.name:match("^hypd%-([a-z][a-z0-9-]*[a-z0-9])$")
  if not tag then return nil end
  local id = hypd.kit.planned_id
  return { name = e.name, arn = id("eks:cluster", e.name), region = e.region, tag = tag,
    vpc_id = id("ec2:vpc", Names.eks(tag, "vpc")), security_group_ids = { id("ec2:security-group",
      Names.eks(tag, "cluster")) }, nat_gateway_id = id("ec2:nat-gateway", Names.eks(tag, "nat")),
    hyperpod_name = Names.hyperpod(tag).cluster, planned = true }
end

function M.eks_cluster(ctx, p)
  local e = hp.eks(ctx, p)
  local out, err = ctx:try("eks", "DescribeCluster", { name = e.name })
  if not out and ctx.plan and err.code == "ResourceNotFoundException" and planned_eks(e) then
    return planned_eks(e)
  end
  if not out then
    if err.code == "ResourceNotFoundException" then
      errors.refuse("cluster", "exists", "no EKS cluster " .. e.name .. " in " .. e.region .. " (cluster_list shows the " ..
        "clusters hypd knows)", { code = "NOT_FOUND", field_message = "no EKS cluster " ..
          e.name })
    end
    error(err, 0)
  end
  local c = out.cluster
  -- a plan may look at a cluster still being created (its VPC is known)
  if c.status ~= "ACTIVE" and not (ctx.plan and c.status == "CREATING") then
    errors.raise("CONFLICT", "EKS cluster " .. e.name .. " is " .. tostring(c.status) .. "; HyperPod needs it " ..
      "ACTIVE (follow cluster_get_creation_status)", { field = "cluster" })
  end
  local vpc = c.resourcesVpcConfig or {}
  local sgs = e.record.security_group_id and { e.record.security_group_id } or vpc.securityGroupIds or {}
  if #sgs == 0 then sgs = { vpc.clusterSecurityGroupId } end
  local tag = tag_of(e.record, c)
  return { name = c.name, arn = c.arn, region = e.region, vpc_id = vpc.vpcId, security_group_ids = sgs, tag = tag,
    hyperpod_name = (e.record.hyperpod or {}).name or Names.hyperpod(tag).cluster }
end

-- the instance group ------------------------------------------------------------------

-- group_spec{name, d, role, lifecycle, volume_gb, deep_health_checks,
-- subnet_id, security_group_ids} -> ClusterInstanceGroupSpecification
function M.group_spec(o)
  local d = o.d
  local g = { InstanceGroupName = o.name, InstanceType = d.instance_type, InstanceCount = d.count,
    ExecutionRole = o.role, ThreadsPerCore = d.threads,
    LifeCycleConfig = { SourceS3Uri = o.lifecycle.source_s3_uri, OnCreate = o.lifecycle.on_create },
    InstanceStorageConfigs = { { EbsVolumeConfig = { VolumeSizeInGB = o.volume_gb or setup.VOLUME_GB } } } }
  if o.deep_health_checks then g.OnStartDeepHealthChecks = M.DEEP_CHECKS end
  if d.plan then g.TrainingPlanArn = d.plan.arn end
  if d.capacity == "spot" then g.CapacityRequirements = { Spot = json.object() } end
  if d.efa_only then g.NetworkInterface = { InterfaceType = "efa-only" } end
  if o.subnet_id then g.OverrideVpcConfig = { SecurityGroupIds = o.security_group_ids, Subnets = { o.subnet_id } } end
  return g
end

-- role_not_yet(err) -> a note while SageMaker does not see a new execution role
function M.role_not_yet(err)
  if err.code == "ValidationException" and tostring(err.message):find("execution role", 1, true) then
    return "SageMaker does not see the execution role yet"
  end
end

-- the waits -----------------------------------------------------------------------------

local function describe(ctx, name)
  local d, err = ctx:try("sagemaker", "DescribeCluster", { ClusterName = name })
  if d then return d end
  if err.code == "ResourceNotFound" then return nil end
  error(err, 0)
end
M.describe = describe

-- wait_in_service(ctx, name, since [, group]): the cluster (and the group) InService
function M.wait_in_service(ctx, name, since, group)
  return ctx:poll { what = "HyperPod cluster " .. name .. " to be InService", every = M.in_service_pace,
    timeout = M.IN_SERVICE_LIMIT, since = since,
    check = function()
      local c = describe(ctx, name)
      if not c then
        errors.raise("NOT_FOUND", "HyperPod cluster " .. name .. " is gone", { cluster = name })
      end
      if c.ClusterStatus == "Failed" or c.ClusterStatus == "Deleting" then
        errors.raise("FAILED", string.format("HyperPod cluster %s is %s%s", name, c.ClusterStatus,
          c.FailureMessage and (": " .. c.FailureMessage) or ""), { cluster = name })
      end
      local g = group and hp.group(c, group)
      if group and not g then
        errors.raise("FAILED", string.format("instance group %s is not in HyperPod cluster %s%s", group, name,
          c.FailureMessage and (" (" .. c.FailureMessage .. ")") or ""), { cluster = name, instance_group = group })
      end
      local parts = {}
      for _, x in ipairs(c.InstanceGroups or {}) do
        parts[#parts + 1] = string.format("%s %s %d/%d", x.InstanceGroupName, tostring(x.Status), x.CurrentCount or 0,
          x.TargetCount or 0)
      end
      local ok = c.ClusterStatus == "InService" and (not g or g.Status == "InService" or g.Status == "Degraded")
      return ok, "HyperPod cluster " .. name .. " " .. tostring(c.ClusterStatus) ..
        (#parts > 0 and (" (" .. table.concat(parts, ", ") .. ")") or "") ..
        ((c.FailureMessage and c.FailureMessage ~= "") and (": " .. c.FailureMessage) or ""), c
    end }
end

-- joined(ctx, eks, hyperpod, group) -> n, nodes: the group's Kubernetes
-- nodes that are Ready with HyperPod's health label
function M.joined(ctx, eks, hyperpod, group)
  local items, err = ctx:k8s(eks):list("v1", "Node", { labels = { ["sagemaker.amazonaws.com/cluster-name"] = hyperpod,
    ["sagemaker.amazonaws.com/instance-group-name"] = group } })
  if not items then error(err, 0) end
  local n, names = 0, {}
  for _, node in ipairs(items) do
    local ready = false
    for _, c in ipairs((node.status or {}).conditions or {}) do
      if c.type == "Ready" then ready = c.status == "True" end
    end
    local health = ((node.metadata or {}).labels or {})[M.HEALTH_LABEL]
    if ready and health then n, names[#names + 1] = n + 1, node.metadata.name end
  end
  table.sort(names)
  return n, names
end

-- wait_nodes(ctx, st, group, want): want nodes of the group joined
function M.wait_nodes(ctx, st, group, want)
  local names
  ctx:poll { what = want .. " nodes of " .. group .. " to join Kubernetes", every = M.NODES_POLL,
    timeout = M.NODES_LIMIT,
    expired = function(waited, note)
      local waiting = {}
      for _, n in ipairs(hypd.aws.all("sagemaker", "ListClusterNodes", { ClusterName = st.hyperpod_name,
          InstanceGroupNameContains = group }, ctx:aws_opts())) do
        local s = n.InstanceStatus or {}
        if s.Status ~= "Running" then waiting[#waiting + 1] = n.InstanceId .. " " .. tostring(s.Status) ..
          (s.Message and (": " .. s.Message) or "") end
      end
      errors.raise("TIMEOUT", string.format("%s after %d s%s%s", note or "nodes have not joined", math.floor(waited),
        #waiting > 0 and "; HyperPod says: " or "", table.concat(waiting, "; ")), { instance_group = group })
    end,
    check = function(waited)
      local n, list = M.joined(ctx, st.eks_name, st.hyperpod_name, group)
      names = list
      if n < want and waited >= M.CAPACITY_GRACE then M.short_of_capacity(ctx, st, group) end
      local said = n < want and M.node_messages(ctx, st, group)
      return n >= want, string.format("%d of %d nodes of %s Ready in Kubernetes%s", n, want, group,
        said and ("; HyperPod says: " .. said) or "")
    end }
  return names
end

-- node_messages(ctx, st, group) -> "2 nodes Pending: Waiting for capacity:
-- InsufficientCapacity: ..." | nil: what HyperPod's nodes of the group that
-- are not Running say (each distinct status and message once, with how many
-- nodes carry it), so a wait shows why it is not done
function M.node_messages(ctx, st, group)
  local seen, order = {}, {}
  for _, n in ipairs(hypd.aws.all("sagemaker", "ListClusterNodes", { ClusterName = st.hyperpod_name,
      InstanceGroupNameContains = group }, ctx:aws_opts())) do
    local s = n.InstanceStatus or {}
    if n.InstanceGroupName == group and s.Status ~= "Running" then
      local key = tostring(s.Status) .. ((s.Message and s.Message ~= "") and (": " .. s.Message) or "")
      if not seen[key] then order[#order + 1] = key end
      seen[key] = (seen[key] or 0) + 1
    end
  end
  if #order == 0 then return nil end
  for i, key in ipairs(order) do
    order[i] = string.format("%d node%s %s", seen[key], seen[key] == 1 and "" or "s", key)
  end
  return table.concat(order, "; ")
end

-- short_of_capacity(ctx, st, group): raises INSUFFICIENT_CAPACITY when
-- HyperPod says it cannot launch the group's instances now (continuous
-- provisioning keeps the group and keeps trying: a later call waits again)
function M.short_of_capacity(ctx, st, group)
  for _, n in ipairs(hypd.aws.all("sagemaker", "ListClusterNodes", { ClusterName = st.hyperpod_name,
      InstanceGroupNameContains = group }, ctx:aws_opts())) do
    local msg = (n.InstanceStatus or {}).Message
    if n.InstanceGroupName == group and msg and msg:find("InsufficientCapacity", 1, true) then
      errors.raise("INSUFFICIENT_CAPACITY", string.format("HyperPod cannot launch the instances of group %s now " ..
        "(%s). The group stays and HyperPod keeps trying (continuous provisioning): call this tool again later " ..
        "to wait for them, or add the capacity in another zone that offers the type with " ..
        "hyperpod_add_instance_group (aws_get_instance_types lists the zones)", group, msg),
        { instance_group = group, instance_id = n.InstanceId })
    end
  end
end

-- the steps of hyperpod_create -------------------------------------------------------------

function M.check(ctx)
  local p, st = ctx.params, ctx.state
  local e = M.eks_cluster(ctx, p)
  st.region, st.eks_name, st.eks_arn, st.vpc_id, st.tag = e.region, e.name, e.arn, e.vpc_id, e.tag
  st.security_group_ids, st.hyperpod_name, st.nat_gateway_id = e.security_group_ids, e.hyperpod_name,
    e.nat_gateway_id
  st.instance_group = p.instance_group or (e.tag .. "-ig")
  local other = hp.find(ctx, e.arn)
  if other and other.ClusterName ~= e.hyperpod_name then
    errors.refuse("cluster", "one_hyperpod", string.format("EKS cluster %s already orchestrates HyperPod cluster %s; one EKS " ..
      "cluster has one HyperPod cluster (hyperpod_add_instance_group adds capacity to it)", e.name,
      other.ClusterName), { code = "CONFLICT", field_message = "already has HyperPod cluster " .. other.ClusterName })
  end
  local mine = other or describe(ctx, e.hyperpod_name)
  if mine and (mine.Orchestrator or {}).Eks and mine.Orchestrator.Eks.ClusterArn ~= e.arn then
    errors.raise("CONFLICT", "HyperPod cluster " .. e.hyperpod_name .. " exists on another EKS cluster (" ..
      tostring(mine.Orchestrator.Eks.ClusterArn) .. ")", { field = "cluster" })
  end
  if mine and not hp.group(mine, st.instance_group) then
    errors.refuse("instance_group", "exists", string.format("HyperPod cluster %s exists without instance group %s; " ..
      "add the group with hyperpod_add_instance_group", e.hyperpod_name, st.instance_group),
      { code = "CONFLICT", field_message = "not in HyperPod cluster " .. e.hyperpod_name })
  end
  local d = checks.decisions(ctx, p, { skip_quota = mine ~= nil })
  if mine then checks.fixed(ctx, mine, hp.group(mine, st.instance_group), d) end
  if mine then
    d.notes[#d.notes + 1] = "HyperPod cluster " .. e.hyperpod_name .. " exists (" .. tostring(mine.ClusterStatus) ..
      "); its capacity is not checked again"
  end
  for _, n in ipairs(d.notes) do ctx:progress(n) end
  if d.zone_note then ctx:progress(d.zone_note) end
  st.decisions = d
end

function M.execution_role(ctx)
  ctx.state.execution_role_arn = setup.ensure_role(ctx, ctx.state.tag).Arn
end

function M.lifecycle(ctx)
  ctx.state.lifecycle = setup.ensure_lifecycle(ctx, ctx.state.tag)
end

function M.subnet(ctx)
  local st = ctx.state
  st.subnet = subnet.ensure(ctx, { vpc_id = st.vpc_id, az = st.decisions.zone.name, eks = st.eks_name,
    tag = st.tag, nat_gateway_id = st.nat_gateway_id })
end

function M.cluster(ctx)
  local p, st = ctx.params, ctx.state
  local name, tag = st.hyperpod_name, st.tag
  local group = M.group_spec { name = st.instance_group, d = st.decisions, role = st.execution_role_arn,
    lifecycle = st.lifecycle, volume_gb = p.volume_size_gb, deep_health_checks = p.deep_health_checks }
  local req = { ClusterName = name, InstanceGroups = { group }, Orchestrator = { Eks = { ClusterArn = st.eks_arn } },
    VpcConfig = { SecurityGroupIds = st.security_group_ids, Subnets = { st.subnet.subnet_id } },
    NodeRecovery = p.node_recovery, NodeProvisioningMode = "Continuous", Tags = net.tag_list(tag, name) }
  local c = ctx:ensure { type = "sagemaker:cluster", label = "HyperPod cluster", name = name, key = "hyperpod_arn",
    id = "ClusterArn", field = "cluster", exists = "ResourceInUse",
    needs = { st.execution_role_arn, st.subnet.subnet_id, ctx.state.lifecycle_bucket },
    owned = net.owned_by(tag, function(x) return x.Tags end),
    search = function()
      local d = describe(ctx, name)
      if d then d.Tags = ctx:call("sagemaker", "ListTags", { ResourceArn = d.ClusterArn }).Tags end
      return d
    end,
    fields = { Orchestrator = req.Orchestrator, VpcConfig = req.VpcConfig, InstanceGroups = req.InstanceGroups,
      NodeProvisioningMode = req.NodeProvisioningMode, ["tag:" .. Names.TAG] = tag },
    desired = { NodeRecovery = p.node_recovery },
    update = function(_, changes)
      ctx:call("sagemaker", "UpdateCluster", { ClusterName = name, NodeRecovery = changes.NodeRecovery.to })
    end,
    retry = M.role_not_yet, retry_every = M.ROLE_RETRY_WAIT, retry_for = M.ROLE_RETRY_FOR,
    placeholder = function(id) return { ClusterArn = id, ClusterName = name } end,
    create = function()
      local out = ctx:call("sagemaker", "CreateCluster", req)
      return { ClusterArn = out.ClusterArn, ClusterName = name, ClusterStatus = "Creating", NodeRecovery =
        req.NodeRecovery, Tags = req.Tags }
    end }
  st.hyperpod_arn = c.ClusterArn
  st.created_at = st.created_at or hypd.now()
  local g = hp.group(c, st.instance_group)
  if g and (g.TargetCount ~= st.decisions.count or g.InstanceType ~= st.decisions.instance_type) then
    ctx:progress(string.format("instance group %s exists with %s x %d; kept as it is (hyperpod_scale_instance_group " ..
      "changes the count)", st.instance_group, tostring(g.InstanceType), g.TargetCount or 0))
  end
end

function M.wait_cluster(ctx)
  local st = ctx.state
  local c = M.wait_in_service(ctx, st.hyperpod_name, st.created_at)
  if c then
    local g = hp.group(c, st.instance_group)
    st.node_target = g and g.TargetCount or st.decisions.count
  end
end

function M.wait_ready_nodes(ctx)
  local st = ctx.state
  if ctx.plan then return end
  local d = st.decisions
  if d.plan and d.plan.status == "Scheduled" then
    ctx:progress("training plan " .. d.plan.name .. " is Scheduled: its instances join when it becomes Active")
    st.nodes = json.array()
    return
  end
  st.nodes = M.wait_nodes(ctx, st, st.instance_group, st.node_target or d.count)
end

function M.record(ctx)
  local st = ctx.state
  if ctx.plan then return end
  hypd.clusters.record { name = st.eks_name, region = st.region, arn = st.eks_arn, tag = st.tag,
    hyperpod = { name = st.hyperpod_name, arn = st.hyperpod_arn } }
  local d = st.decisions
  st.result = { hyperpod_cluster = st.hyperpod_name, hyperpod_arn = st.hyperpod_arn, eks_cluster = st.eks_name,
    region = st.region, instance_group = st.instance_group, instance_type = d.instance_type, instance_count = d.count,
    capacity_type = d.capacity, training_plan = d.plan and d.plan.arn or nil,
    availability_zone = d.zone.name, availability_zone_id = d.zone.id, requested_zone = d.requested_zone,
    zone_note = d.zone_note, threads_per_core = d.threads, quota = d.quota,
    execution_role_arn = st.execution_role_arn, lifecycle_bucket = st.lifecycle.bucket,
    lifecycle_s3_uri = st.lifecycle.source_s3_uri, subnet_id = st.subnet.subnet_id, subnet_name = st.subnet.name,
    subnet_cidr = st.subnet.cidr, route_table_id = st.subnet.route_table_id,
    s3_endpoint_id = st.subnet.vpc_endpoint_id, nodes = st.nodes, notes = d.notes }
end

function M.target(p)
  local region, name = P.where(p)
  return "hyperpod/" .. region .. "/" .. name
end

return M
