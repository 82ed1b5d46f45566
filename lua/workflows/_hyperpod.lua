-- _hyperpod: what the tools of every area that work on HyperPod share: the
-- EKS cluster a call works on and its Kubernetes client, the HyperPod
-- cluster that EKS cluster orchestrates, a group of it, and the one
-- function that turns a DescribeCluster instance group into an UpdateCluster
-- one. (The names hypd gives what it makes are _names'.)
local M = {}

-- eks(ctx, p) -> {name, region, record}: the EKS cluster a call works on
-- (ctx:cluster(p)), whose region becomes the call's
function M.eks(ctx, p)
  local c = ctx:cluster(p)
  ctx.region = c.region
  return c
end

-- k8s(ctx, p) -> conn, e: hypd's Kubernetes client on the EKS cluster a
-- call works on (eks above), whose name and region go into ctx.state
function M.k8s(ctx, p)
  local e = M.eks(ctx, p)
  ctx.state.eks, ctx.state.region = e.name, e.region
  return ctx:k8s(e.name), e
end

-- find(ctx, eks_arn [, name]) -> the DescribeCluster of the HyperPod
-- cluster orchestrated by that EKS cluster (or named name), or nil
function M.find(ctx, eks_arn, name)
  if name then
    local d, err = ctx:try("sagemaker", "DescribeCluster", { ClusterName = name })
    if d then return d end
    if err.code ~= "ResourceNotFound" and err.code ~= "ValidationException" then error(err, 0) end
    return nil
  end
  local list = hypd.aws.all("sagemaker", "ListClusters", {}, ctx:aws_opts())
  for _, s in ipairs(list) do
    local d = ctx:try("sagemaker", "DescribeCluster", { ClusterName = s.ClusterName })
    local orch = d and d.Orchestrator and d.Orchestrator.Eks
    if orch and orch.ClusterArn == eks_arn then return d end
  end
end

-- group(describe, name) -> the DescribeCluster instance group of that name | nil
function M.group(describe, name)
  for _, g in ipairs(describe.InstanceGroups or {}) do
    if g.InstanceGroupName == name then return g end
  end
end

-- update_group(detail) -> the UpdateCluster instance group (a
-- ClusterInstanceGroupSpecification) that keeps everything a group has:
-- DescribeCluster's names mapped to UpdateCluster's (TargetCount ->
-- InstanceCount, MinCount -> MinInstanceCount, DesiredImageId or
-- CurrentImageId -> ImageId, desired Kubernetes labels and taints, desired
-- instance types), then only the fields the API model's specification has.
-- Scaling through it never resets health checks, threads per core, the
-- network interface, storage, lifecycle or capacity settings.
local allowed
function M.update_group(d)
  if not allowed then
    allowed = {}
    for _, m in ipairs(hypd.aws.members("sagemaker", "ClusterInstanceGroupSpecification")) do allowed[m] = true end
  end
  local g = {}
  for k, v in pairs(d) do g[k] = v end
  g.InstanceCount = d.TargetCount or d.CurrentCount
  g.MinInstanceCount = d.MinCount
  g.ImageId = d.DesiredImageId or d.CurrentImageId
  if type(d.KubernetesConfig) == "table" then
    local k = d.KubernetesConfig
    g.KubernetesConfig = { Labels = k.DesiredLabels or k.CurrentLabels, Taints = k.DesiredTaints or k.CurrentTaints }
    if g.KubernetesConfig.Labels == nil and g.KubernetesConfig.Taints == nil then g.KubernetesConfig = nil end
  end
  if type(d.InstanceRequirements) == "table" then
    local types = d.InstanceRequirements.DesiredInstanceTypes or d.InstanceRequirements.CurrentInstanceTypes
    g.InstanceRequirements = types and { InstanceTypes = types } or nil
  end
  local out = {}
  for k, v in pairs(g) do
    if allowed[k] then out[k] = v end
  end
  return out
end

return M
