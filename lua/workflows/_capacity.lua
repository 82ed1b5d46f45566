-- _capacity: what the capacity and node tools share (instance
-- groups listed, scaled and deleted; software updates; node operations;
-- the training and inference tools that place work on them):
-- the HyperPod cluster a call works on, a group's view, the Kubernetes side
-- of its nodes, and the refusal of fixed parameters.
local hp = require "_hyperpod"

local M = {}

M.HEALTH = "sagemaker.amazonaws.com/node-health-status"
M.GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
M.CLUSTER_LABEL = "sagemaker.amazonaws.com/cluster-name"
M.AWS_READ = { "eks:DescribeCluster", "sagemaker:ListClusters", "sagemaker:DescribeCluster" }

-- aws(...) -> M.AWS_READ followed by the given actions (a tool's `aws`)
function M.aws(...)
  local out = {}
  for _, a in ipairs(M.AWS_READ) do out[#out + 1] = a end
  for _, a in ipairs { ... } do out[#out + 1] = a end
  return out
end

-- target(p [, what]) -> "hyperpod/<region>/<EKS cluster>[/<what>]": what one
-- operation works on (the named cluster, else the active one)
function M.target(p, what)
  local c = hypd.clusters.target(p) or { region = p.region }
  local name, region = c.name or "(no active cluster)", c.region
  if not region then
    local ok, r = pcall(hypd.aws.region, {})
    region = ok and r or "default"
  end
  return "hyperpod/" .. region .. "/" .. name .. (what and ("/" .. what) or "")
end

-- cluster(ctx, p) -> e, d: the EKS cluster the call works on (hp.eks: name,
-- region, record; and hyperpod, the HyperPod cluster's name) and the
-- DescribeCluster of the HyperPod cluster it orchestrates; NOT_FOUND when
-- there is none
function M.cluster(ctx, p)
  local e = hp.eks(ctx, p)
  local known = type(e.record.hyperpod) == "table" and e.record.hyperpod.name
  local d = known and hp.find(ctx, nil, known)
  if d and not (d.Orchestrator and d.Orchestrator.Eks) then d = nil end
  if not d then
    local c, err = ctx:try("eks", "DescribeCluster", { name = e.name })
    if not c then
      if err.code == "ResourceNotFoundException" then
        hypd.errors.refuse("cluster", "exists", "no EKS cluster " .. e.name .. " in " .. e.region,
          { code = "NOT_FOUND", field_message = "cluster: no EKS cluster " .. e.name })
      end
      error(err, 0)
    end
    e.arn = c.cluster.arn
    d = hp.find(ctx, e.arn)
  end
  if not d then
    hypd.errors.refuse("cluster", "hyperpod", "EKS cluster " .. e.name .. " (" .. e.region .. ") has no HyperPod cluster; " ..
      "create one with hyperpod_create",
      { code = "NOT_FOUND", field_message = "cluster: " .. e.name .. " has no HyperPod cluster" })
  end
  e.hyperpod = d.ClusterName
  return e, d
end

-- describe(ctx, name) -> the DescribeCluster of HyperPod cluster name
function M.describe(ctx, name) return ctx:call("sagemaker", "DescribeCluster", { ClusterName = name }) end

local function names(d)
  local out = {}
  for _, g in ipairs(d.InstanceGroups or {}) do out[#out + 1] = g.InstanceGroupName end
  return #out > 0 and table.concat(out, ", ") or "none"
end

-- group(d, name [, field]) -> the DescribeCluster instance group, or
-- NOT_FOUND naming the parameter (field, default instance_group) and the
-- groups there are
function M.group(d, name, field)
  local g = hp.group(d, name)
  if g then return g end
  field = field or "instance_group"
  hypd.errors.refuse(field, "exists", string.format("HyperPod cluster %s has no instance group %s (its groups: %s)",
    d.ClusterName, name, names(d)),
    { code = "NOT_FOUND",
      field_message = field .. ": no instance group " .. name .. " in " .. d.ClusterName .. " (groups: " .. names(d) .. ")" })
end

-- capacity_type(g) -> "spot" | "training-plan" | "on-demand"
function M.capacity_type(g)
  if g.CapacityRequirements and g.CapacityRequirements.Spot then return "spot" end
  if g.TrainingPlanArn then return "training-plan" end
  return "on-demand"
end

-- subnets(d, g) -> the subnet ids a group's instances are placed in (its
-- OverrideVpcConfig, else the cluster's VpcConfig)
function M.subnets(d, g)
  local vpc = g.OverrideVpcConfig or d.VpcConfig or {}
  return vpc.Subnets or {}
end

-- zones(ctx, ids) -> subnet id -> {zone, zone_id} (empty when EC2 cannot say)
function M.zones(ctx, ids)
  local out = {}
  if #ids == 0 then return out end
  local r = ctx:try("ec2", "DescribeSubnets", { SubnetIds = ids })
  for _, s in ipairs(r and r.Subnets or {}) do out[s.SubnetId] = { zone = s.AvailabilityZone, zone_id = s.AvailabilityZoneId } end
  return out
end

local function list(t)
  local out = hypd.json.array()
  for i, v in ipairs(t or {}) do out[i] = v end
  return out
end

-- view(d, g, zones) -> what hyperpod_list_instance_groups shows of a group
function M.view(d, g, zones)
  local storage = hypd.json.array()
  for _, s in ipairs(g.InstanceStorageConfigs or {}) do
    if s.EbsVolumeConfig then
      storage[#storage + 1] = { type = "ebs", size_gb = s.EbsVolumeConfig.VolumeSizeInGB,
        root_volume = s.EbsVolumeConfig.RootVolume or false, kms_key_id = s.EbsVolumeConfig.VolumeKmsKeyId }
    elseif s.FsxLustreConfig then
      storage[#storage + 1] = { type = "fsx-lustre", dns_name = s.FsxLustreConfig.DnsName,
        mount_name = s.FsxLustreConfig.MountName, mount_path = s.FsxLustreConfig.MountPath }
    elseif s.FsxOpenZfsConfig then
      storage[#storage + 1] = { type = "fsx-openzfs", dns_name = s.FsxOpenZfsConfig.DnsName,
        mount_path = s.FsxOpenZfsConfig.MountPath }
    end
  end
  local subnets = hypd.json.array()
  for _, id in ipairs(M.subnets(d, g)) do
    local z = zones and zones[id] or {}
    subnets[#subnets + 1] = { subnet_id = id, availability_zone = z.zone, zone_id = z.zone_id }
  end
  local iface = g.NetworkInterface and g.NetworkInterface.InterfaceType
  return {
    name = g.InstanceGroupName, instance_type = g.InstanceType, status = g.Status,
    current_count = g.CurrentCount, target_count = g.TargetCount, min_count = g.MinCount,
    capacity_type = M.capacity_type(g), efa_only = iface == "efa-only", network_interface = iface,
    subnets = subnets, subnets_from = g.OverrideVpcConfig and "group" or "cluster",
    security_groups = list((g.OverrideVpcConfig or d.VpcConfig or {}).SecurityGroupIds),
    threads_per_core = g.ThreadsPerCore, storage = storage,
    deep_health_checks = list(g.OnStartDeepHealthChecks),
    training_plan = g.TrainingPlanArn and { arn = g.TrainingPlanArn, status = g.TrainingPlanStatus } or nil,
    image = { current = g.CurrentImageId, desired = g.DesiredImageId, version_status = g.ImageVersionStatus,
      software_update_status = g.SoftwareUpdateStatus },
    lifecycle = g.LifeCycleConfig and { source = g.LifeCycleConfig.SourceS3Uri, on_create = g.LifeCycleConfig.OnCreate },
    execution_role = g.ExecutionRole,
  }
end

-- ready(node) -> true when a Kubernetes Node's Ready condition is True
function M.ready(node)
  for _, c in ipairs((node.status or {}).conditions or {}) do
    if c.type == "Ready" then return c.status == "True" end
  end
  return false
end

-- k8s_nodes(ctx, e) -> Kubernetes Node name -> {ready, health, group} for the
-- HyperPod nodes of e.hyperpod, or nil, err when the API cannot be reached
function M.k8s_nodes(ctx, e)
  local ok, conn = pcall(ctx.k8s, ctx, e.name)
  if not ok then return nil, conn end
  local items, err = conn:list("v1", "Node", { labels = { [M.CLUSTER_LABEL] = e.hyperpod } })
  if not items then return nil, err end
  local out = {}
  for _, n in ipairs(items) do
    local l = n.metadata.labels or {}
    out[n.metadata.name] = { ready = M.ready(n), health = l[M.HEALTH], group = l[M.GROUP_LABEL] }
  end
  return out
end

-- fixed parameters -----------------------------------------------------------------

-- what each fixed parameter of the capacity tools is in a group:
-- current(d, g, ctx) -> its value; matches(given, current) -> bool; why
M.FIXED = {
  capacity_type = { what = "capacity type", current = function(_, g) return M.capacity_type(g) end,
    why = "HyperPod obtains a group's instances as on-demand, spot or a training plan's reserved capacity " ..
      "when the group is created, and cannot change that for the group's life" },
  training_plan = { what = "training plan", current = function(_, g) return g.TrainingPlanArn end,
    matches = function(given, cur)
      return cur ~= nil and (given == cur or cur:sub(-#given - 1) == "/" .. given)
    end,
    why = "a group is bound to its training plan's reservation when it is created" },
  efa_only = { what = "network interface", current = function(_, g)
      return (g.NetworkInterface or {}).InterfaceType == "efa-only"
    end,
    show = function(v) return v and "efa-only" or "not efa-only" end,
    why = "the network interface type (efa-only) is set when a group's instances are launched" },
  subnet_id = { what = "subnet placement", current = function(d, g) return M.subnets(d, g) end,
    matches = function(given, cur)
      for _, s in ipairs(cur) do if s == given then return true end end
      return false
    end,
    show = function(v) return type(v) == "table" and table.concat(v, ", ") or tostring(v) end,
    why = "the subnets a group's instances are placed in are chosen when the group is created" },
  availability_zone = { what = "Availability Zone",
    current = function(d, g, ctx)
      local out = {}
      for _, z in pairs(M.zones(ctx, M.subnets(d, g))) do out[#out + 1] = z end
      return out
    end,
    matches = function(given, cur)
      for _, z in ipairs(cur) do if z.zone == given or z.zone_id == given then return true end end
      return false
    end,
    show = function(v)
      if type(v) ~= "table" then return tostring(v) end
      local shown = {}
      for _, z in ipairs(v) do shown[#shown + 1] = tostring(z.zone) .. " (" .. tostring(z.zone_id) .. ")" end
      return #shown > 0 and table.concat(shown, ", ") or "unknown"
    end,
    why = "the zone follows the group's subnets, which are chosen when the group is created" },
}

-- refuse_fixed(ctx, def, p, d, g): every fixed parameter of the
-- tool the caller gave with a value the group does not have is refused
-- (VALIDATION, rule fixed_at_create, naming the field, the group's value and
-- why), before any mutation; a value the group already has is accepted
function M.refuse_fixed(ctx, def, p, d, g)
  local fields, msgs = {}, {}
  local pnames = {}
  for k in pairs(def.params) do pnames[#pnames + 1] = k end
  table.sort(pnames)
  for _, k in ipairs(pnames) do
    local spec, rule = def.params[k], M.FIXED[k]
    if spec.fixed and p[k] ~= nil then
      if not rule then error("refuse_fixed: no rule for fixed parameter " .. k, 0) end
      local cur = rule.current(d, g, ctx)
      local same
      if rule.matches then same = rule.matches(p[k], cur) else same = p[k] == cur end
      if not same then
        local show = rule.show or tostring
        local msg = string.format("%s: fixed when instance group %s was created (it is %s; asked %s): %s. To get " ..
          "another %s, add a new group with hyperpod_add_instance_group, move the work, then delete this one with " ..
          "hyperpod_delete_instance_group", k, g.InstanceGroupName, cur == nil and "none" or show(cur),
          tostring(show(p[k])), rule.why, rule.what)
        fields[#fields + 1] = { field = k, rule = "fixed_at_create", message = msg }
        msgs[#msgs + 1] = msg
      end
    end
  end
  if #fields > 0 then
    hypd.errors.refuse_all(fields, def.name .. ": " .. table.concat(msgs, "; "))
  end
end

-- in_service(d, doing): CONFLICT unless the HyperPod cluster accepts a
-- change now (SageMaker takes UpdateCluster and UpdateClusterSoftware only
-- when it is InService)
function M.in_service(d, doing)
  if d.ClusterStatus ~= "InService" then
    hypd.errors.raise("CONFLICT", string.format("HyperPod cluster %s is %s: SageMaker accepts %s only when it is " ..
      "InService; follow the change in progress with hyperpod_list_instance_groups (wait_seconds) and call again",
      d.ClusterName, tostring(d.ClusterStatus), doing), { cluster = d.ClusterName, status = d.ClusterStatus })
  end
end

-- group_nodes(nodes, group) -> ready, total: the Kubernetes nodes of a group
function M.group_nodes(nodes, group)
  local ready, total = 0, 0
  for _, n in pairs(nodes or {}) do
    if n.group == group then
      total = total + 1
      if n.ready then ready = ready + 1 end
    end
  end
  return ready, total
end

return M
