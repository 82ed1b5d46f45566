-- SageMaker HyperPod UpdateCluster on an instance group that exists: what
-- a sent ClusterInstanceGroupSpecification does to it. UpdateCluster's
-- InstanceGroups is an upsert by name: a group that is not sent is left as
-- it is; a group that is sent is given the whole specification sent, not a
-- patch of it (the API documents it as "the specifications of an instance
-- group that you need to define", with InstanceCount, InstanceGroupName and
-- ExecutionRole required, and says what an update may change: the type, the
-- count, the lifecycle script). So a caller must resend what it keeps:
--   fixed for the group's life     InstanceType, CapacityRequirements,
--                                  NetworkInterface, OverrideVpcConfig
--                                  (subnet placement), TrainingPlanArn: a
--                                  value that differs, an omitted one too,
--                                  is refused (ValidationException)
--   settable                       LifeCycleConfig, ThreadsPerCore,
--                                  OnStartDeepHealthChecks,
--                                  ScheduledUpdateConfig, MinInstanceCount:
--                                  the sent value replaces the group's, an
--                                  omitted one goes back to its default (none;
--                                  ThreadsPerCore 1), as at creation
--   InstanceStorageConfigs         volumes stay attached: an EBS volume may
--                                  grow; dropping or shrinking one, or
--                                  changing an FSx mount, is refused
--   ImageId, KubernetesConfig      an omitted one keeps the group's
-- A tool that forgets to carry a field forward is caught: refused, or the
-- setting visibly reset in DescribeCluster.
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = {}

M.FIXED = { "InstanceType", "CapacityRequirements", "NetworkInterface", "OverrideVpcConfig", "TrainingPlanArn" }
M.SETTABLE = { "LifeCycleConfig", "ThreadsPerCore", "OnStartDeepHealthChecks", "ScheduledUpdateConfig" }
M.DEFAULTS = { ThreadsPerCore = 1 }

local function empty(v) return v == nil or v == json.null or (type(v) == "table" and next(v) == nil) end

-- same(a, b) -> JSON equality, with absent, null and empty taken as one
local function same(a, b)
  if empty(a) and empty(b) then return true end
  if type(a) ~= "table" or type(b) ~= "table" then return a == b end
  for k, v in pairs(a) do if not same(v, b[k]) then return false end end
  for k, v in pairs(b) do if a[k] == nil and not empty(v) then return false end end
  return true
end
M.same = same

local function invalid(ctx, msg) ctx.error("ValidationException", msg) end

-- storage(ctx, g, spec): the group's volumes are all still there, none smaller
local function storage(ctx, g, spec)
  local sent = spec.InstanceStorageConfigs or {}
  for _, old in ipairs(g.InstanceStorageConfigs or {}) do
    local kept = false
    for _, new in ipairs(sent) do
      local o, n = old.EbsVolumeConfig, new.EbsVolumeConfig
      if o and n and (o.RootVolume or false) == (n.RootVolume or false) and same(o.VolumeKmsKeyId, n.VolumeKmsKeyId) then
        if (n.VolumeSizeInGB or 0) < (o.VolumeSizeInGB or 0) then
          invalid(ctx, "The EBS volume size of instance group " .. g.InstanceGroupName .. " cannot be decreased " ..
            "(from " .. tostring(o.VolumeSizeInGB) .. " to " .. tostring(n.VolumeSizeInGB) .. " GB).")
        end
        kept = true
      elseif not o and same(old, new) then
        kept = true
      end
    end
    if not kept then
      invalid(ctx, "InstanceStorageConfigs of the existing instance group " .. g.InstanceGroupName .. " cannot " ..
        "remove or change an attached volume: " .. json.encode(old) .. " is missing from the request.")
    end
  end
end

-- check(ctx, g, spec): refuses a specification that would change what is
-- fixed (an omission counts) or drop a volume; before anything changes
function M.check(ctx, g, spec)
  for _, f in ipairs(M.FIXED) do
    if not same(g[f], spec[f]) then
      invalid(ctx, f .. " of the existing instance group " .. g.InstanceGroupName .. " cannot be changed" ..
        (spec[f] == nil and " (the request omits it; send the group's current value)" or "") .. ".")
    end
  end
  storage(ctx, g, spec)
  local image = spec.ImageId
  if image ~= nil and (type(image) ~= "string" or not (image == "default" or image:match("^ami%-%x+$"))) then
    invalid(ctx, "ImageId '" .. tostring(image) .. "' for instance group " .. g.InstanceGroupName ..
      " must be an AMI ID (ami-...) or default.")
  end
end

-- apply(g, spec): the group record takes the specification (after check)
function M.apply(g, spec)
  for _, f in ipairs(M.SETTABLE) do
    local v = D.copy(spec[f])
    if v == nil then v = M.DEFAULTS[f] end
    g[f] = v
  end
  g.InstanceStorageConfigs = D.copy(spec.InstanceStorageConfigs)
  g.TargetCount, g.MinCount = spec.InstanceCount, spec.MinInstanceCount
  g.ExecutionRole = spec.ExecutionRole
  if spec.ImageId then g.DesiredImageId = spec.ImageId end
  local k = spec.KubernetesConfig
  if k then
    g.labels = k.Labels or json.object()
    g.taints = k.Taints or json.array()
  end
end

-- deletable(ctx, c, deleting): refuses a request that would leave the
-- cluster without an instance group (DeleteCluster removes a cluster)
function M.deletable(ctx, c, deleting, adding)
  if not next(deleting) then return end
  local left = adding or 0
  for _, g in ipairs(c.groups) do
    if not deleting[g.InstanceGroupName] and g.Status ~= "Deleting" then left = left + 1 end
  end
  left = left + #(c.RestrictedInstanceGroups or {})
  if left == 0 then
    invalid(ctx, "Cannot delete all instance groups of cluster " .. c.ClusterName .. ". A cluster must keep at " ..
      "least one instance group; to remove the cluster, use DeleteCluster.")
  end
end

return M
