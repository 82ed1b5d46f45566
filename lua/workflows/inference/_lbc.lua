-- inference/_lbc: whether the AWS Load Balancer Controller runs on a
-- cluster, for the tools that make a Service only it serves (an NLB: type
-- LoadBalancer with service.beta.kubernetes.io/aws-load-balancer-type
-- external; inference_deploy_container and inference_assign_pool_pod with
-- service=external). Without a ready controller such a Service has no
-- address (kubectl shows EXTERNAL-IP <pending>) however long one waits:
-- the warning says so and gives the complete command that installs it.
-- Found by its chart's label or its name, in any namespace (an add-on or
-- another install may put it elsewhere or prefix it).
local M = {}

local function is_lbc(dep)
  local l = dep.metadata.labels or {}
  return l["app.kubernetes.io/name"] == "aws-load-balancer-controller" or
    dep.metadata.name:find("aws-load-balancer-controller", 1, true) ~= nil
end

-- warning(conn, eks, region) -> nil when a controller has a ready replica,
-- else the sentence that names the cause and the fix
function M.warning(conn, eks, region)
  local seen = {}
  for _, dep in ipairs(conn:list("apps/v1", "Deployment", { all_namespaces = true }) or {}) do
    if is_lbc(dep) then
      if ((dep.status or {}).readyReplicas or 0) > 0 then return nil end
      seen[#seen + 1] = string.format("%s/%s (%d/%d ready)", dep.metadata.namespace, dep.metadata.name,
        (dep.status or {}).readyReplicas or 0, (dep.spec or {}).replicas or 1)
    end
  end
  local cmd = "hypd call cluster_configure_dependencies cluster=" .. tostring(eks) ..
    (region and (" region=" .. region) or "") .. " load_balancer_controller=true"
  if #seen > 0 then
    return "the AWS Load Balancer Controller has no ready replica (Deployment " .. table.concat(seen, ", ") ..
      "): the NLB of an external Service is made only once it runs, and until then the Service's address " ..
      "stays <pending>; see why with kubectl -n " .. seen[1]:match("^([^/]+)") .. " describe deployment, or " ..
      "(re)install it: " .. cmd .. ". The Service works inside the cluster meanwhile"
  end
  return "no AWS Load Balancer Controller runs on EKS cluster " .. tostring(eks) .. " (no Deployment named or " ..
    "labelled aws-load-balancer-controller): the NLB of an external Service is made only by it, so the " ..
    "Service's address stays <pending>; install it: " .. cmd .. ". The Service works inside the cluster meanwhile"
end

return M
