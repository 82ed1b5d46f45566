-- cluster/_hyperpods: the SageMaker HyperPod clusters of a region, by the
-- EKS cluster each is orchestrated by.
local M = {}


-- by_eks(ctx) -> EKS cluster ARN -> {name, status, arn, describe}
function M.by_eks(ctx)
  local out = {}
  local list = ctx:try("sagemaker", "ListClusters", {})
  for _, s in ipairs(list and list.ClusterSummaries or {}) do
    local d = ctx:try("sagemaker", "DescribeCluster", { ClusterName = s.ClusterName })
    local eks = d and d.Orchestrator and d.Orchestrator.Eks and d.Orchestrator.Eks.ClusterArn
    if eks then out[eks] = { name = d.ClusterName, status = d.ClusterStatus, arn = d.ClusterArn, describe = d } end
  end
  return out
end

-- which(p) -> cluster name, region: the one named, else the active one
function M.which(p)
  local act = hypd.clusters.active()
  local name = p.cluster or (act and act.name)
  if not name then
    hypd.errors.raise("NOT_FOUND", "no cluster given and none is active: pass cluster, or call cluster_switch",
      { fields = { { field = "cluster", rule = "required", message = "cluster: no active cluster" } } })
  end
  return name, p.region or (not p.cluster and act and act.region) or nil
end

return M
