-- inference/_lbc: whether the AWS Load Balancer Controller runs on a
-- cluster, for the tools that make a Service only it serves (an NLB: type
-- LoadBalancer with service.beta.kubernetes.io/aws-load-balancer-type
-- external; inference_deploy_container and inference_assign_pool_pod with
-- service=external). Without a ready controller such a Service has no
-- address (kubectl shows EXTERNAL-IP <pending>) however long one waits:
-- the warning says so and gives the complete command that installs it.
-- Found by its chart's label or its name, in any namespace (an add-on or
-- another install may put it elsewhere or prefix it). A controller that
-- runs with no IAM role for its service account (no IRSA annotation
-- eks.amazonaws.com/role-arn, no EKS Pod Identity association) calls ELB as
-- the node's role, which AWS refuses (AccessDenied): said too.
local M = {}

local function is_lbc(dep)
  local l = dep.metadata.labels or {}
  return l["app.kubernetes.io/name"] == "aws-load-balancer-controller" or
    dep.metadata.name:find("aws-load-balancer-controller", 1, true) ~= nil
end

-- roleless(ctx, conn, dep, eks) -> "ns/sa" when the controller's service
-- account has neither an IRSA role nor a Pod Identity association
local function roleless(ctx, conn, dep, eks)
  local ns = dep.metadata.namespace
  local sa = (((dep.spec or {}).template or {}).spec or {}).serviceAccountName or "default"
  local obj = conn:get("v1", "ServiceAccount", sa, { namespace = ns })
  if obj and ((obj.metadata or {}).annotations or {})["eks.amazonaws.com/role-arn"] then return nil end
  local out = ctx:call("eks", "ListPodIdentityAssociations", { clusterName = eks, namespace = ns,
    serviceAccount = sa })
  if #(out.associations or {}) > 0 then return nil end
  return ns .. "/" .. sa
end

-- warning(ctx, conn, eks, region) -> nil when a controller has a ready
-- replica and an IAM role, else the sentence that names the cause and the fix
function M.warning(ctx, conn, eks, region)
  local seen = {}
  local cmd = "hypd call cluster_configure_dependencies cluster=" .. tostring(eks) ..
    (region and (" region=" .. region) or "") .. " load_balancer_controller=true"
  for _, dep in ipairs(conn:list("apps/v1", "Deployment", { all_namespaces = true }) or {}) do
    if is_lbc(dep) then
      if ((dep.status or {}).readyReplicas or 0) > 0 then
        local sa = roleless(ctx, conn, dep, eks)
        if not sa then return nil end
        return "the AWS Load Balancer Controller (Deployment " .. dep.metadata.namespace .. "/" ..
          dep.metadata.name .. ") runs with no IAM role for its service account " .. sa .. " (no " ..
          "eks.amazonaws.com/role-arn annotation, no EKS Pod Identity association): AWS refuses it the NLB " ..
          "(AccessDenied; kubectl describe service shows FailedDeployModel) and the address stays <pending>; " ..
          "give it a role with the controller's IAM policy, or install hypd's with its role: " .. cmd
      end
      seen[#seen + 1] = string.format("%s/%s (%d/%d ready)", dep.metadata.namespace, dep.metadata.name,
        (dep.status or {}).readyReplicas or 0, (dep.spec or {}).replicas or 1)
    end
  end
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
