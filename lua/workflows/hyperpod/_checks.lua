-- hyperpod/_checks: the decisions of an instance group (type, count, zone,
-- capacity), checked against the account before anything is made. Every
-- refusal is a VALIDATION error naming the field and the rule; only reads
-- are sent.
--
--   decisions(ctx, p [, o]) -> d: p has instance_type, instance_count,
--     availability_zone, capacity_type, training_plan, efa_only,
--     threads_per_core; o.skip_quota: a group that exists already (its
--     capacity is counted by AWS; no quota check). d:
--       instance_type, ec2_type, count, capacity ("on-demand" | "spot" |
--       "training-plan"), zone {name, id}, requested_zone, zone_note (the
--       training plan's zone overrode the requested one), plan {arn, name,
--       status, zone, total, available}, threads, efa_only, quota {name,
--       code, value, used} (nil when not checked), notes
--
-- The rules, in order:
--   instance_type   a SageMaker HyperPod instance type (the API model's list)
--   training_plan   given exactly when capacity_type is training-plan; in
--                   this region; exists; Active or Scheduled (AWS: a
--                   Scheduled plan's capacity can be used by HyperPod); its
--                   reserved capacity is of this type, for this many
--                   instances; its zone is the group's zone
--   availability_zone  a zone of the region, offering the type (ec2
--                   DescribeInstanceTypeOfferings)
--   efa_only        the type supports EFA with more than one EFA interface
--                   (ec2 DescribeInstanceTypes)
--   instance_count  within the Service Quotas quota "<type> for cluster
--                   usage" with what the region's HyperPod clusters use
local errors = hypd.errors
local subnet = require "hyperpod._subnet"

local M = {}

M.SERVICE_CODE = "sagemaker"


-- quota_name(itype) -> the Service Quotas name of HyperPod capacity of a type
function M.quota_name(itype) return itype .. " for cluster usage" end

local function is_hyperpod_type(itype)
  for _, t in ipairs(hypd.aws.hyperpod_types()) do
    if t == itype then return true end
  end
  return false
end

-- plan_name(v) -> name, region | nil: a training plan name or ARN
local function plan_ref(v)
  local region, name = tostring(v):match("^arn:aws[%w-]*:sagemaker:([%w-]+):%d+:training%-plan/(.+)$")
  if region then return name, region end
  return v
end

local function training_plan(ctx, p, d)
  local name, region = plan_ref(p.training_plan)
  local here = ctx:aws_region()
  if region and region ~= here then
    errors.refuse("training_plan", "region", string.format("training plan %s is in %s; this cluster is in %s (a plan's " ..
      "capacity serves clusters of its own region)", name, region, here), { prefix = "message" })
  end
  local tp, err = ctx:try("sagemaker", "DescribeTrainingPlan", { TrainingPlanName = name })
  if not tp then
    if err.code == "ResourceNotFound" or err.code == "ValidationException" then
      errors.refuse("training_plan", "exists", "no training plan " .. name .. " in " .. here ..
        " (ListTrainingPlans lists them)", { prefix = "message" })
    end
    error(err, 0)
  end
  if tp.Status ~= "Active" and tp.Status ~= "Scheduled" then
    errors.refuse("training_plan", "status", string.format("training plan %s is %s; HyperPod uses a plan that is Active " ..
      "or Scheduled", name, tostring(tp.Status)), { prefix = "message" })
  end
  local total, zone = 0, nil
  for _, rc in ipairs(tp.ReservedCapacitySummaries or {}) do
    if rc.InstanceType == d.instance_type and rc.Status ~= "Expired" and rc.Status ~= "Failed" then
      total = total + (rc.TotalInstanceCount or 0)
      zone = zone or rc.AvailabilityZone
    end
  end
  if total == 0 then
    local types = {}
    for _, rc in ipairs(tp.ReservedCapacitySummaries or {}) do types[#types + 1] = tostring(rc.InstanceType) end
    errors.refuse("instance_type", "training_plan", string.format("training plan %s reserves %s, not %s", name,
      #types > 0 and table.concat(types, ", ") or "no instances", d.instance_type), { prefix = "message" })
  end
  local available = tp.AvailableInstanceCount or total
  if d.count > total or d.count > available then
    errors.refuse("instance_count", "training_plan", string.format("training plan %s reserves %d %s (%d available); %d " ..
      "asked", name, total, d.instance_type, available, d.count), { prefix = "message" })
  end
  if zone and not zone:find(here, 1, true) then
    errors.refuse("training_plan", "region", string.format("training plan %s reserves capacity in %s, outside %s", name,
      zone, here), { prefix = "message" })
  end
  d.plan = { arn = tp.TrainingPlanArn, name = tp.TrainingPlanName, status = tp.Status, zone = zone, total = total,
    available = available }
end

-- offered(ctx, ec2_type) -> set of zone names offering the type
local function offered(ctx, ec2_type)
  local set, names = {}, {}
  for _, o in ipairs(hypd.aws.all("ec2", "DescribeInstanceTypeOfferings", { LocationType = "availability-zone",
      Filters = { { Name = "instance-type", Values = { ec2_type } } } }, ctx:aws_opts())) do
    if not set[o.Location] then set[o.Location], names[#names + 1] = true, o.Location end
  end
  table.sort(names)
  return set, names
end

-- counted(g, itype) -> the instances a DescribeCluster group holds against
-- itype's quota (training-plan capacity is the plan's)
local function counted(g, itype)
  if g.InstanceType ~= itype or g.TrainingPlanArn or g.Status == "Deleting" then return 0 end
  return g.TargetCount or g.CurrentCount or 0
end

-- usage(ctx, itype) -> instances of itype in the region's HyperPod clusters
local function usage(ctx, itype)
  local n = 0
  for _, s in ipairs(hypd.aws.all("sagemaker", "ListClusters", {}, ctx:aws_opts())) do
    local c = s.ClusterStatus ~= "Deleting" and s.ClusterStatus ~= "Failed" and
      ctx:try("sagemaker", "DescribeCluster", { ClusterName = s.ClusterName })
    for _, g in ipairs(c and c.InstanceGroups or {}) do n = n + counted(g, itype) end
  end
  return n
end

local function quota(ctx, d)
  local want = M.quota_name(d.instance_type)
  local q
  for _, x in ipairs(hypd.aws.all("servicequotas", "ListServiceQuotas", { ServiceCode = M.SERVICE_CODE },
      ctx:aws_opts())) do
    if x.QuotaName == want then q = x end
  end
  if not q then
    d.notes[#d.notes + 1] = "Service Quotas has no quota '" .. want .. "'; the count was not checked against one"
    return
  end
  local used = usage(ctx, d.instance_type)
  local value = math.floor(q.Value or 0)
  d.quota = { name = q.QuotaName, code = q.QuotaCode, value = value, used = used }
  if used + d.count > value then
    errors.refuse("instance_count", "quota", string.format("%d %s asked, %d in use by HyperPod clusters in %s, quota %d: " ..
      "raise the Service Quotas quota '%s' (code %s, service %s) to at least %d, or ask for fewer", d.count, d.instance_type,
      used, ctx:aws_region(), value, q.QuotaName, q.QuotaCode, M.SERVICE_CODE, used + d.count), { prefix = "message" })
  end
end

function M.decisions(ctx, p, o)
  o = o or {}
  local d = { instance_type = p.instance_type, count = p.instance_count, capacity = p.capacity_type or "on-demand",
    efa_only = p.efa_only == true, notes = hypd.json.array() }
  if not is_hyperpod_type(d.instance_type) then
    errors.refuse("instance_type", "hyperpod_type", tostring(d.instance_type) .. " is not a SageMaker HyperPod instance " ..
      "type (aws_get_instance_types lists them)", { prefix = "message" })
  end
  d.ec2_type = d.instance_type:gsub("^ml%.", "")
  if d.capacity == "training-plan" and not p.training_plan then
    errors.refuse("training_plan", "required", "capacity_type training-plan needs training_plan (its name or ARN)",
      { prefix = "message" })
  end
  if p.training_plan and d.capacity ~= "training-plan" then
    errors.refuse("training_plan", "capacity_type", "a training plan is used with capacity_type training-plan, not " ..
      d.capacity, { prefix = "message" })
  end
  if d.capacity == "training-plan" then training_plan(ctx, p, d) end
  local requested = p.availability_zone
  if d.plan and d.plan.zone then
    d.zone = subnet.zone(ctx, d.plan.zone)
    if requested and requested ~= d.zone.name and requested ~= d.zone.id then
      d.zone_note = string.format("the training plan %s reserves its capacity in %s (%s), so the group is placed " ..
        "there, not in the requested %s", d.plan.name, d.zone.name, d.zone.id, requested)
    elseif not requested then
      d.zone_note = string.format("the training plan %s reserves its capacity in %s (%s)", d.plan.name, d.zone.name,
        d.zone.id)
    end
  elseif not requested then
    errors.refuse("availability_zone", "required", "the Availability Zone is a decision (aws_get_availability_zones " ..
      "lists the zones; aws_get_instance_types zone=<zone> what a zone offers)", { prefix = "message" })
  else
    d.zone = subnet.zone(ctx, requested)
  end
  d.requested_zone = requested
  local set, names = offered(ctx, d.ec2_type)
  if not set[d.zone.name] then
    errors.refuse("availability_zone", "offering", string.format("%s (%s) does not offer %s%s", d.zone.name, d.zone.id,
      d.instance_type, #names > 0 and ("; zones that do: " .. table.concat(names, ", ")) or
        ("; no zone of " .. ctx:aws_region() .. " does")), { prefix = "message" })
  end
  if d.efa_only then
    local t = (ctx:call("ec2", "DescribeInstanceTypes", { InstanceTypes = { d.ec2_type } }).InstanceTypes or {})[1]
    local n = t and t.NetworkInfo or {}
    local max = n.EfaSupported and ((n.EfaInfo or {}).MaximumEfaInterfaces or 1) or 0
    if max <= 1 then
      errors.refuse("efa_only", "efa_interfaces", string.format("%s %s; an efa-only network interface needs EFA with more " ..
        "than one EFA interface", d.instance_type, n.EfaSupported and ("has " .. max .. " EFA interface") or
          "does not support EFA"), { prefix = "message" })
    end
  end
  if d.capacity ~= "training-plan" and not o.skip_quota then quota(ctx, d) end
  d.threads = p.threads_per_core or ((d.plan or d.instance_type:match("^ml%.p[456]")) and 2 or 1)
  return d
end

-- capacity_of(group) -> "on-demand" | "spot" | "training-plan": a
-- DescribeCluster instance group's capacity type
function M.capacity_of(g)
  if g.TrainingPlanArn then return "training-plan" end
  if type(g.CapacityRequirements) == "table" and g.CapacityRequirements.Spot then return "spot" end
  return "on-demand"
end

-- fixed(ctx, c, g, d) -> the group's subnet (DescribeSubnets shape) or
-- nil: instance group g of HyperPod cluster c keeps what was fixed when it
-- was made (its type, capacity type, training plan, efa-only, zone); d
-- (decisions) asking otherwise is refused VALIDATION naming the field, rule
-- fixed_at_create. Every tool that meets an existing group checks it so
-- (hyperpod_create, hyperpod_add_instance_group): a different value would
-- otherwise be kept silently
function M.fixed(ctx, c, g, d)
  local function changed(field, have, want)
    errors.refuse(field, "fixed_at_create", string.format("instance group %s has %s %s; it is fixed when the " ..
      "group is created (HyperPod cannot change it in place), not %s: delete the group " ..
      "(hyperpod_delete_instance_group) and add it again, or add a group of another name", g.InstanceGroupName,
      field, tostring(have), tostring(want)), { prefix = "message" })
  end
  if g.InstanceType ~= d.instance_type then changed("instance_type", g.InstanceType, d.instance_type) end
  local cap = M.capacity_of(g)
  if cap ~= d.capacity then changed("capacity_type", cap, d.capacity) end
  if d.plan and g.TrainingPlanArn ~= d.plan.arn then changed("training_plan", g.TrainingPlanArn, d.plan.arn) end
  local efa = (g.NetworkInterface or {}).InterfaceType == "efa-only"
  if efa ~= d.efa_only then changed("efa_only", efa, d.efa_only) end
  local sid = ((g.OverrideVpcConfig or c.VpcConfig or {}).Subnets or {})[1]
  local s = sid and (ctx:call("ec2", "DescribeSubnets", { SubnetIds = { sid } }).Subnets or {})[1]
  if s and s.AvailabilityZone ~= d.zone.name then changed("availability_zone", s.AvailabilityZone, d.zone.name) end
  return s
end

return M
