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

return M
