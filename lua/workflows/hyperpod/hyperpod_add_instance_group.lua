-- hyperpod_add_instance_group: a new instance group on the HyperPod
-- cluster of the active (or named) EKS cluster: GPU capacity, or a CPU
-- group for system work (model downloads, routers). UpdateCluster is sent
-- with the new group only (InstanceGroups is an upsert); its execution role
-- and lifecycle scripts are the cluster's (copied from its groups).
local P = require "_params"
local checks = require "hyperpod._checks"
local create = require "hyperpod._create"
local setup = require "_hyperpod_setup"
local hp = require "_hyperpod"
local net = require "_network"
local subnet = require "hyperpod._subnet"
local KG = require "hyperpod._karpenter_groups"

local errors = hypd.errors

local params = {
  cluster = P.cluster,
  region = P.region,
  instance_group = P.with(P.instance_group, { required = true, decision = true,
    description = "the new group's name (e.g. gpu-2, system)" }),
  instance_type = P.with(P.instance_type, { required = true, decision = true,
    description = "the group's instance type: a GPU type for training and inference, or a CPU type such as " ..
      "ml.m5.2xlarge for system work (model downloads, routers)" }),
  instance_count = P.with(P.instance_count, { required = true, decision = true }),
  dedicated_subnet = { type = "boolean", default = false, fixed = true,
    description = "a subnet of the group's own, hp-compute-<group>-<az> (tag hyperpod:dedicated-ig=<group>), " ..
      "instead of the shared hp-compute-<az>" },
  kubernetes_labels = { type = "object", description = "labels the group's nodes carry in Kubernetes, e.g. " ..
    "{\"hypd.io/role\": \"system\"} for a CPU group that system pods select" },
}
for k, spec in pairs(setup.GROUP_PARAMS) do params[k] = spec end

-- fixed(ctx, c, g, d, p): a group that exists keeps what was fixed when it
-- was made (hyperpod._checks.fixed), its subnet placement too; asking
-- otherwise is refused, naming the field
local function fixed(ctx, c, g, d, p)
  local s = checks.fixed(ctx, c, g, d)
  if s then
    local dedicated = net.tag_value(s.Tags, subnet.DEDICATED_TAG) == g.InstanceGroupName
    if dedicated ~= (p.dedicated_subnet == true) then
      errors.refuse("dedicated_subnet", "fixed_at_create", string.format("instance group %s has dedicated_subnet " ..
        "%s; it is fixed when the group is created (HyperPod cannot change it in place), not %s: delete the group " ..
        "(hyperpod_delete_instance_group) and add it again, or add a group of another name", g.InstanceGroupName,
        tostring(dedicated), tostring(p.dedicated_subnet)), { prefix = "message" })
    end
  end
end

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local e = create.eks_cluster(ctx, p)
  st.region, st.eks_name, st.eks_arn, st.vpc_id, st.tag = e.region, e.name, e.arn, e.vpc_id, e.tag
  local c = hp.find(ctx, e.arn)
  if not c then
    errors.refuse("cluster", "hyperpod", "EKS cluster " .. e.name .. " has no HyperPod cluster: create it first " ..
      "(hyperpod_create)", { code = "NOT_FOUND", field_message = "no HyperPod cluster" })
  end
  st.hyperpod_name, st.hyperpod_arn, st.instance_group = c.ClusterName, c.ClusterArn, p.instance_group
  local g = hp.group(c, p.instance_group)
  -- the caller's decisions first (type, zone, capacity): what the call itself gets wrong is said before
  -- what the cluster lacks
  local d = checks.decisions(ctx, p, { skip_quota = g ~= nil })
  local first = (c.InstanceGroups or {})[1]
  if not first or not first.LifeCycleConfig then
    errors.raise("CONFLICT", "HyperPod cluster " .. c.ClusterName .. " has no instance group to copy the " ..
      "execution role and lifecycle scripts from", { cluster = c.ClusterName })
  end
  st.execution_role_arn = first.ExecutionRole
  st.lifecycle = { source_s3_uri = first.LifeCycleConfig.SourceS3Uri, on_create = first.LifeCycleConfig.OnCreate }
  st.security_group_ids = (c.VpcConfig or {}).SecurityGroupIds or e.security_group_ids
  if g then
    fixed(ctx, c, g, d, p)
    if g.TargetCount ~= d.count then
      d.notes[#d.notes + 1] = string.format("instance group %s exists with %d instances; kept as it is " ..
        "(hyperpod_scale_instance_group changes the count)", g.InstanceGroupName, g.TargetCount or 0)
    end
  end
  if not g and (c.AutoScaling or {}).Mode == "Enable" then
    -- managed Karpenter covers only the groups with a NodePool: a new one has none
    local why = KG.later(p.instance_group, d.count)
    d.notes[#d.notes + 1] = "instance group " .. why
    KG.entry(ctx, "keep", c.ClusterName, p.instance_group, why)
  end
  for _, n in ipairs(d.notes) do ctx:progress(n) end
  if d.zone_note then ctx:progress(d.zone_note) end
  st.decisions, st.exists = d, g ~= nil
end

local function subnet_step(ctx)
  local p, st = ctx.params, ctx.state
  st.subnet = subnet.ensure(ctx, { vpc_id = st.vpc_id, az = st.decisions.zone.name, eks = st.eks_name,
    tag = st.tag, group = p.dedicated_subnet and p.instance_group or nil })
end

-- UpdateCluster waits for a cluster that is not InService (another update)
local function busy(err)
  if err.code == "ValidationException" and tostring(err.message):find("InService", 1, true) then
    return "the HyperPod cluster is busy with another change"
  end
end

local function update(ctx)
  local p, st = ctx.params, ctx.state
  local name, gname = st.hyperpod_name, p.instance_group
  local spec = create.group_spec { name = gname, d = st.decisions, role = st.execution_role_arn,
    lifecycle = st.lifecycle, volume_gb = p.volume_size_gb, deep_health_checks = p.deep_health_checks,
    subnet_id = st.subnet.subnet_id, security_group_ids = st.security_group_ids }
  if p.kubernetes_labels and next(p.kubernetes_labels) then spec.KubernetesConfig = { Labels = p.kubernetes_labels } end
  ctx:ensure { type = "sagemaker:instance-group", label = "instance group", name = gname .. " in " .. name,
    id = "InstanceGroupName", needs = st.subnet.subnet_id, fields = spec,
    search = function() return hp.group(create.describe(ctx, name) or {}, gname) end,
    retry = busy, retry_every = create.IN_SERVICE_POLL, retry_for = create.IN_SERVICE_LIMIT,
    create = function()
      ctx:call("sagemaker", "UpdateCluster", { ClusterName = name, InstanceGroups = { spec } })
      return { InstanceGroupName = gname }
    end }
  st.updated_at = st.updated_at or hypd.now()
end

local function wait(ctx)
  local st = ctx.state
  if ctx.plan then return end
  local c = create.wait_in_service(ctx, st.hyperpod_name, st.updated_at, st.instance_group)
  local g = hp.group(c, st.instance_group)
  local d = st.decisions
  if d.plan and d.plan.status == "Scheduled" then
    ctx:progress("training plan " .. d.plan.name .. " is Scheduled: its instances join when it becomes Active")
    st.nodes = hypd.json.array()
    return
  end
  st.nodes = create.wait_nodes(ctx, st, st.instance_group, g and g.TargetCount or d.count)
end

local function result(ctx)
  local st, p = ctx.state, ctx.params
  if ctx.plan then return end
  local d = st.decisions
  st.result = { hyperpod_cluster = st.hyperpod_name, eks_cluster = st.eks_name, region = st.region,
    instance_group = st.instance_group, instance_type = d.instance_type, instance_count = d.count,
    capacity_type = d.capacity, training_plan = d.plan and d.plan.arn or nil, efa_only = d.efa_only,
    availability_zone = d.zone.name, availability_zone_id = d.zone.id, requested_zone = d.requested_zone,
    zone_note = d.zone_note, threads_per_core = d.threads, quota = d.quota, dedicated_subnet = p.dedicated_subnet,
    subnet_id = st.subnet.subnet_id, subnet_name = st.subnet.name, subnet_cidr = st.subnet.cidr,
    existed = st.exists, nodes = st.nodes, notes = d.notes }
end

local AWS = { "pricing:GetProducts", "eks:DescribeCluster", "sagemaker:ListClusters", "sagemaker:DescribeCluster",
  "sagemaker:UpdateCluster", "sagemaker:DescribeTrainingPlan", "sagemaker:ListClusterNodes",
  "servicequotas:ListServiceQuotas", "iam:PassRole" }
for _, a in ipairs(subnet.AWS) do AWS[#AWS + 1] = a end

return tool {
  name = "hyperpod_add_instance_group",
  summary = "Add an instance group (GPU capacity, or CPU for system work) to the HyperPod cluster",
  description = "Adds one instance group to the HyperPod cluster of the active (or named) EKS cluster, with the same " ..
    "decisions and checks as hyperpod_create (instance_type, instance_count, availability_zone, " ..
    "capacity_type) plus efa_only and dedicated_subnet: ask the person. A CPU type makes a group for " ..
    "system work (downloads, routers). Capacity type, efa_only and subnet are fixed once created. Follow " ..
    "it with hyperpod_get_creation_status (wait_seconds); plan = true lists what it would make.",
  kind = "mutating",
  aws = AWS,
  k8s = { "list" },
  params = P.form({ "instance_group", "availability_zone", "instance_type", "instance_count", "capacity_type", "training_plan" },
    { "volume_size_gb", "deep_health_checks", "efa_only", "dedicated_subnet", "threads_per_core", "kubernetes_labels",
      "cluster", "region" },
    params),
  status_tool = "hyperpod_get_creation_status",
  target = function(p) return create.target(p) .. "/" .. p.instance_group end,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "subnet", run = subnet_step },
    { name = "update", run = update },
    { name = "wait", run = wait },
    { name = "result", run = result },
  },
}
