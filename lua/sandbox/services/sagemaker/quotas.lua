-- SageMaker HyperPod holds CreateCluster and UpdateCluster to the account's
-- Service Quotas (services/servicequotas): the instances of a type across
-- every HyperPod cluster of the region may not exceed "<type> for cluster
-- usage". Capacity from a training plan is the plan's, not the quota's.
-- The refusal is SageMaker's own ResourceLimitExceeded.
local Q = require "sandbox.services.servicequotas"

local M = {}

-- usage(ctx, itype, skip) -> instances of itype across the region's
-- clusters (targets), leaving out the group skip = {cluster, group}
local function usage(ctx, itype, skip)
  local n = 0
  for _, c in ipairs(ctx.state:list("cluster")) do
    local groups = c.ClusterStatus ~= "Deleting" and c.groups or {}
    for _, g in ipairs(groups) do
      local skipped = skip and skip.cluster == c.ClusterName and skip.group == g.InstanceGroupName
      local counts = g.InstanceType == itype and not g.TrainingPlanArn and g.Status ~= "Deleting" and not skipped
      n = n + (counts and (g.TargetCount or 0) or 0)
    end
  end
  return n
end

-- check(ctx, cluster_name, specs): specs are ClusterInstanceGroupSpecifications
-- the request makes or changes (cluster_name: the cluster they belong to)
function M.check(ctx, cluster_name, specs)
  local delta = {}
  for _, g in ipairs(specs or {}) do
    if g.InstanceType and not g.TrainingPlanArn then
      local d = delta[g.InstanceType] or { n = 0, skip = {} }
      d.n = d.n + (math.tointeger(g.InstanceCount) or 0)
      d.skip[#d.skip + 1] = g.InstanceGroupName
      delta[g.InstanceType] = d
    end
  end
  for itype, d in pairs(delta) do
    local q = Q.find(ctx.region, Q.cluster_usage(itype))
    if q then
      local used = usage(ctx, itype)
      for _, name in ipairs(d.skip) do -- a group being changed: its old count is replaced, not added
        used = used - (usage(ctx, itype) - usage(ctx, itype, { cluster = cluster_name, group = name }))
      end
      if used + d.n > q.Value then
        ctx.error("ResourceLimitExceeded", string.format("The account-level service limit '%s' is %d Instances, " ..
          "with current utilization of %d Instances and a request delta of %d Instances. Please use AWS Service " ..
          "Quotas to request an increase for this quota. If AWS Service Quotas is not available, contact AWS " ..
          "support to request an increase for this quota.", q.QuotaName, q.Value, used, d.n))
      end
    end
  end
end

return M
