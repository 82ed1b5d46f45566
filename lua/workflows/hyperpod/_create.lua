-- hyperpod/_create: stage 4, the SageMaker HyperPod cluster on an EKS
-- cluster: what the steps of hyperpod_create call, and the pieces other
-- tools run on their own:
--
--   ensure_role(ctx, tag) -> role: the execution role hypd-<tag>-hyperpod-exec
--     (trusts sagemaker.amazonaws.com) with AmazonSageMakerClusterInstanceRolePolicy
--     and the inline policy hypd-hyperpod-nodes (the VPC, ECR and Pod
--     Identity actions HyperPod's EKS nodes need, and reading the
--     lifecycle buckets)
--   ensure_lifecycle(ctx, tag) -> {bucket, source_s3_uri, on_create}: the
--     bucket hypd-<tag>-lifecycle-<hash of account and region> with the
--     lifecycle scripts (hyperpod/_lifecycle) uploaded
--   Neither needs the EKS cluster: cluster_create starts them while EKS is
--   still creating. Both are ctx:ensure resources (plan themselves); the
--   actions they call are M.AWS_ROLE and M.AWS_LIFECYCLE.
--   group_spec(o) -> the CreateCluster/UpdateCluster instance group
--   eks_cluster(ctx, p) -> what a call works on (EKS, tag, VPC, groups)
--
-- The runs of hyperpod_create's steps: check (every decision against the
-- account: hyperpod/_checks; reads only), execution_role, lifecycle,
-- subnet (hyperpod/_subnet), cluster (CreateCluster: NodeRecovery
-- Automatic, NodeProvisioningMode Continuous), wait_cluster (InService,
-- about 15 minutes), wait_ready_nodes (the nodes Ready in Kubernetes with
-- their health labels), record (the clusters registry, the result).
local checks = require "hyperpod._checks"
local hp = require "hyperpod._hp"
local iam = require "_iam"
local json = hypd.json
local errors = hypd.errors
local lifecycle = require "hyperpod._lifecycle"
local net = require "cluster._eks_network"
local subnet = require "hyperpod._subnet"

local M = {}

M.IN_SERVICE_POLL, M.IN_SERVICE_LIMIT = 60, 90 * 60 -- HyperPod takes about 15 minutes

-- in_service_pace(waited) -> seconds to the next check: rare while a
-- creation or update cannot be done yet (under 10 minutes), close once it is due
function M.in_service_pace(waited) return waited < 10 * 60 and 120 or 30 end
M.NODES_POLL, M.NODES_LIMIT = 30, 30 * 60
M.CAPACITY_GRACE = 15 * 60 -- how long HyperPod may look for capacity before the wait stops and says so
M.ROLE_RETRY_WAIT, M.ROLE_RETRY_FOR = 10, 60       -- a new execution role SageMaker does not see yet
M.VOLUME_GB = 500
M.DEEP_CHECKS = { "InstanceStress", "InstanceConnectivity" }
M.HEALTH_LABEL = "sagemaker.amazonaws.com/node-health-status"
M.MANAGED_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"
M.NODE_POLICY = "hypd-hyperpod-nodes"

-- the decisions and options of an instance group, the same on hyperpod_create
-- and hyperpod_add_instance_group (a tool's file changes one with P.with)
local P = require "_params"
M.GROUP_PARAMS = {
  availability_zone = P.with(P.availability_zone, { decision = true, fixed_at_create = true,
    description = "the Availability Zone (name or zone ID) of the instances; required unless a training plan " ..
      "is used, whose reserved zone then decides (and overrides one given here; the result says so)" }),
  capacity_type = P.with(P.capacity_type, { decision = true, fixed_at_create = true }),
  training_plan = P.with(P.training_plan, { decision = true, fixed_at_create = true }),
  efa_only = { type = "boolean", default = false, fixed_at_create = true,
    description = "an efa-only network interface (types with EFA and more than one EFA interface: p4d, p5, " ..
      "p6, g6e.24xlarge and larger, ...)" },
  volume_size_gb = { type = "integer", minimum = 1, maximum = 16384, default = M.VOLUME_GB,
    description = "the EBS volume each instance gets for containers and data, in GB (mounted at /opt/sagemaker)" },
  threads_per_core = { type = "integer", enum = { 1, 2 },
    description = "threads per CPU core (default: 2 for ml.p4*, ml.p5*, ml.p6* and training plans, else 1)" },
  deep_health_checks = { type = "boolean", default = false,
    description = "run HyperPod's deep health checks (instance stress and connectivity) when instances start; " ..
      "they add time to every new node" },
}

M.AWS_ROLE = { "iam:GetRole", "iam:CreateRole", "iam:UpdateAssumeRolePolicy", "iam:ListAttachedRolePolicies",
  "iam:AttachRolePolicy", "iam:GetRolePolicy", "iam:PutRolePolicy" }
M.AWS_LIFECYCLE = { "sts:GetCallerIdentity", "s3:CreateBucket", "s3:GetBucketTagging", "s3:GetObject",
  "s3:PutObject" }

M.TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }

-- node_policy(tag, partition) -> what HyperPod's EKS nodes do as the
-- execution role beyond the managed policy (AWS docs, "IAM role for
-- SageMaker HyperPod", EKS orchestration): their network interfaces in the
-- VPC, images from ECR, EKS Pod Identity, and reading the lifecycle scripts
function M.node_policy(tag, partition)
  local bucket = "arn:" .. partition .. ":s3:::" .. hp.names(tag).lifecycle_prefix .. "-*"
  return { Version = "2012-10-17", Statement = {
    { Sid = "NodeNetworking", Effect = "Allow", Resource = "*", Action = {
      "ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
      "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
      "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute", "ec2:UnassignPrivateIpAddresses",
      "ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetAuthorizationToken",
      "ecr:GetDownloadUrlForLayer", "eks-auth:AssumeRoleForPodIdentity" } },
    { Sid = "NodeInterfaceTags", Effect = "Allow", Action = { "ec2:CreateTags" },
      Resource = { "arn:" .. partition .. ":ec2:*:*:network-interface/*" } },
    { Sid = "LifecycleScripts", Effect = "Allow", Action = { "s3:ListBucket", "s3:GetObject" },
      Resource = { bucket, bucket .. "/*" } },
  } }
end

function M.ensure_role(ctx, tag)
  local name = hp.names(tag).execution_role
  local role = iam.role(ctx, { name = name, tag = tag, key = "execution_role_arn", trust = M.TRUST,
    service = "sagemaker.amazonaws.com",
    description = "hypd " .. tag .. ": the execution role of the HyperPod cluster's instances" })
  local part = iam.partition(role.Arn)
  iam.attach(ctx, role, "arn:" .. part .. ":iam::aws:policy/" .. M.MANAGED_POLICY, M.MANAGED_POLICY)
  iam.inline(ctx, role, M.NODE_POLICY, M.node_policy(tag, part))
  return role
end

-- bucket_name(tag, account, region) -> the lifecycle bucket's name (global:
-- the account and region make it unique; at most 56 characters)
function M.bucket_name(tag, account, region)
  return hp.names(tag).lifecycle_prefix .. "-" .. hypd.digest("sha256", account .. "/" .. region):sub(1, 8)
end

local function tags_map(list)
  local out = {}
  for _, t in ipairs(list or {}) do out[t.Key] = t.Value end
  return out
end

local function absent(err, ...)
  for _, c in ipairs { ... } do if err.code == c then return true end end
  return err.status == 404
end

function M.ensure_lifecycle(ctx, tag)
  local region = ctx:aws_region()
  local account = ctx:call("sts", "GetCallerIdentity", {}).Account
  local bucket = M.bucket_name(tag, account, region)
  local cfg = { Tags = net.tag_list(tag, bucket) }
  if region ~= "us-east-1" then cfg.LocationConstraint = region end
  ctx:ensure { type = "s3:bucket", label = "S3 bucket", name = bucket, key = "lifecycle_bucket", id = "Name",
    field = "cluster_tag", exists = { "BucketAlreadyOwnedByYou" },
    owned = net.owned_by(tag, function(b) return b.Tags end),
    search = function()
      local out, err = ctx:try("s3", "GetBucketTagging", { Bucket = bucket })
      if out then return { Name = bucket, Tags = tags_map(out.TagSet) } end
      if err.code == "NoSuchTagSet" then return { Name = bucket, Tags = {} } end
      if absent(err, "NoSuchBucket") then return nil end
      if err.code == "AccessDenied" or err.status == 403 then
        errors.raise("CONFLICT", "S3 bucket " .. bucket .. " belongs to another account; S3 bucket names are " ..
          "global", { field = "cluster_tag" })
      end
      error(err, 0)
    end,
    fields = { Region = region, ["tag:" .. net.TAG_KEY] = tag },
    create = function()
      ctx:call("s3", "CreateBucket", { Bucket = bucket, CreateBucketConfiguration = cfg })
      return { Name = bucket, Tags = tags_map(cfg.Tags) }
    end }
  local needs = ctx.state.lifecycle_bucket -- a planned id while the bucket is only planned
  for _, s in ipairs(lifecycle.SCRIPTS) do
    local key = lifecycle.PREFIX .. s.key
    local etag = '"' .. hypd.digest("md5", s.body) .. '"'
    local function put()
      return ctx:call("s3", "PutObject", { Bucket = bucket, Key = key, Body = s.body,
        ContentType = "text/x-shellscript" })
    end
    ctx:ensure { type = "s3:object", label = "lifecycle script", name = "s3://" .. bucket .. "/" .. key,
      needs = needs, id = "Key", fields = { Bucket = bucket, Key = key, Bytes = #s.body },
      desired = { ETag = etag }, current = function(o) return { ETag = o.ETag } end,
      search = function()
        -- (a script is small; GetObject is also the IAM action HeadObject needs)
        local out, err = ctx:try("s3", "GetObject", { Bucket = bucket, Key = key })
        if out then return { Key = key, ETag = out.ETag } end
        if absent(err, "NotFound", "NoSuchKey") then return nil end
        error(err, 0)
      end,
      create = function() return { Key = key, ETag = put().ETag } end,
      update = function() put() end }
  end
  return { bucket = bucket, source_s3_uri = "s3://" .. bucket .. "/" .. lifecycle.PREFIX,
    on_create = lifecycle.ON_CREATE }
end

-- the EKS cluster a call works on ---------------------------------------------------

-- tag_of(record, eks) -> the cluster tag: recorded, tagged on the EKS
-- cluster, or made from the cluster's name (an imported cluster)
local function tag_of(rec, c)
  local t = rec.tag or (c.tags or {})[net.TAG_KEY] or c.name:match("^hypd%-([a-z][a-z0-9-]*[a-z0-9])$")
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
  local function id(kind, name) return "planned:" .. kind .. ":" .. name end
  return { name = e.name, arn = id("eks:cluster", e.name), region = e.region, tag = tag,
    vpc_id = id("ec2:vpc", net.name(tag, "vpc")), security_group_ids = { id("ec2:security-group",
      net.name(tag, "cluster")) }, nat_gateway_id = id("ec2:nat-gateway", net.name(tag, "nat")),
    hyperpod_name = hp.names(tag).cluster, planned = true }
end

function M.eks_cluster(ctx, p)
  local e = hp.eks(ctx, p)
  local out, err = ctx:try("eks", "DescribeCluster", { name = e.name })
  if not out and ctx.plan and err.code == "ResourceNotFoundException" and planned_eks(e) then
    return planned_eks(e)
  end
  if not out then
    if err.code == "ResourceNotFoundException" then
      errors.raise("NOT_FOUND", "no EKS cluster " .. e.name .. " in " .. e.region .. " (cluster_list shows the " ..
        "clusters hypd knows)", { fields = { { field = "cluster", rule = "exists", message = "no EKS cluster " ..
          e.name } } })
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
    hyperpod_name = (e.record.hyperpod or {}).name or hp.names(tag).cluster }
end

-- the instance group ------------------------------------------------------------------

-- group_spec{name, d, role, lifecycle, volume_gb, deep_health_checks,
-- subnet_id, security_group_ids} -> ClusterInstanceGroupSpecification
function M.group_spec(o)
  local d = o.d
  local g = { InstanceGroupName = o.name, InstanceType = d.instance_type, InstanceCount = d.count,
    ExecutionRole = o.role, ThreadsPerCore = d.threads,
    LifeCycleConfig = { SourceS3Uri = o.lifecycle.source_s3_uri, OnCreate = o.lifecycle.on_create },
    InstanceStorageConfigs = { { EbsVolumeConfig = { VolumeSizeInGB = o.volume_gb or M.VOLUME_GB } } } }
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
    errors.raise("CONFLICT", string.format("EKS cluster %s already orchestrates HyperPod cluster %s; one EKS " ..
      "cluster has one HyperPod cluster (hyperpod_add_instance_group adds capacity to it)", e.name,
      other.ClusterName), { fields = { { field = "cluster", rule = "one_hyperpod",
        message = "already has HyperPod cluster " .. other.ClusterName } } })
  end
  local mine = other or describe(ctx, e.hyperpod_name)
  if mine and (mine.Orchestrator or {}).Eks and mine.Orchestrator.Eks.ClusterArn ~= e.arn then
    errors.raise("CONFLICT", "HyperPod cluster " .. e.hyperpod_name .. " exists on another EKS cluster (" ..
      tostring(mine.Orchestrator.Eks.ClusterArn) .. ")", { field = "cluster" })
  end
  if mine and not hp.group(mine, st.instance_group) then
    errors.raise("CONFLICT", string.format("HyperPod cluster %s exists without instance group %s; add the group " ..
      "with hyperpod_add_instance_group", e.hyperpod_name, st.instance_group), { fields = { { field =
        "instance_group", rule = "exists", message = "not in HyperPod cluster " .. e.hyperpod_name } } })
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
  ctx.state.execution_role_arn = M.ensure_role(ctx, ctx.state.tag).Arn
end

function M.lifecycle(ctx)
  ctx.state.lifecycle = M.ensure_lifecycle(ctx, ctx.state.tag)
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
      NodeProvisioningMode = req.NodeProvisioningMode, ["tag:" .. net.TAG_KEY] = tag },
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
