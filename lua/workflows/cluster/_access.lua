-- cluster/_access: can hypd reach an EKS cluster's Kubernetes API, and
-- write there? One real Kubernetes call with hypd's own AWS principal (a get
-- of the kube-system namespace), then a server-side dry run (which the API
-- server authorizes and keeps nothing of). When hypd cannot read, the error
-- says exactly what is missing, with the command that fixes it: the
-- cluster's authenticationMode is CONFIG_MAP (no access entries), there is
-- no access entry for the principal, or its access policies do not allow
-- it. cluster_import and cluster_configure_dependencies check this first.
--   access.check(ctx, cluster) -> {principal, access = "read-write" | "read-only", k8s}
--     cluster: DescribeCluster's cluster (ACTIVE); raises FORBIDDEN with
--     reason no_access_entry, no_access_policy, config_map_only, unauthorized
--   access.ADMIN: the access policy hypd's stages need
local eks = require "cluster._eks_stage"

local M = {}

local ADMIN = "AmazonEKSClusterAdminPolicy"
M.ADMIN = ADMIN
local PROBE = "hypd-access-check" -- the namespace a dry run would create

local function fix_entry(name, principal)
  return string.format("create one: aws eks create-access-entry --cluster-name %s --principal-arn %s; then " ..
    "aws eks associate-access-policy --cluster-name %s --principal-arn %s --policy-arn " ..
    "arn:aws:eks::aws:cluster-access-policy/%s --access-scope type=cluster", name, principal, name, principal, ADMIN)
end

-- why_unreachable(ctx, c, principal, err): raises the error that says what
-- keeps hypd's principal out of the cluster's Kubernetes API
local function why_unreachable(ctx, c, principal, err)
  local name = c.name
  local mode = (c.accessConfig or {}).authenticationMode or "CONFIG_MAP"
  if err.code == "Unauthorized" or err.status == 401 then
    if mode == "CONFIG_MAP" then
      hypd.errors.refuse("cluster", "forbidden", string.format("hypd cannot reach the Kubernetes API of EKS cluster %s: " ..
        "its authenticationMode is CONFIG_MAP, which takes no access entries, and %s is not mapped in its aws-auth " ..
        "ConfigMap. Switch it to API_AND_CONFIG_MAP (aws eks update-cluster-config --name %s --access-config " ..
        "authenticationMode=API_AND_CONFIG_MAP), then give %s an access entry (%s), and import again.", name, principal, name,
        principal, fix_entry(name, principal)), { code = "FORBIDDEN", reason = "config_map_only", principal = principal,
        authentication_mode = mode })
    end
    local e, derr = ctx:try("eks", "DescribeAccessEntry", { clusterName = name, principalArn = principal })
    if not e and derr.code == "ResourceNotFoundException" then
      hypd.errors.refuse("cluster", "forbidden", string.format("hypd cannot reach the Kubernetes API of EKS cluster %s: " ..
        "it has no access entry for hypd's principal %s (the API server answered Unauthorized). %s; then import again.",
        name, principal, (fix_entry(name, principal):gsub("^c", "C"))), { code = "FORBIDDEN", reason = "no_access_entry",
        principal = principal, authentication_mode = mode })
    end
    hypd.errors.refuse("cluster", "forbidden", string.format("the Kubernetes API of EKS cluster %s refused hypd's token " ..
      "for %s (Unauthorized) although %s; check the access entry's username and groups", name, principal,
      e and "an access entry exists for it" or ("its access entry could not be read: " .. tostring(derr.message))),
      { code = "FORBIDDEN", reason = "unauthorized", principal = principal, authentication_mode = mode })
  end
  if err.code == "Forbidden" or err.status == 403 then
    local list = ctx:try("eks", "ListAssociatedAccessPolicies", { clusterName = name, principalArn = principal })
    local names = {}
    for _, a in ipairs(list and list.associatedAccessPolicies or {}) do
      names[#names + 1] = tostring(a.policyArn):match("([^/]+)$") .. " (" .. tostring((a.accessScope or {}).type) ..
        ")"
    end
    hypd.errors.refuse("cluster", "forbidden", string.format("hypd reaches the Kubernetes API of EKS cluster %s, but " ..
      "the access entry of %s does not allow reading namespaces (its access policies: %s). Associate %s: aws eks " ..
      "associate-access-policy --cluster-name %s --principal-arn %s --policy-arn " ..
      "arn:aws:eks::aws:cluster-access-policy/%s --access-scope type=cluster; then import again.", name, principal,
      #names > 0 and table.concat(names, ", ") or "none", ADMIN, name, principal, ADMIN), { code = "FORBIDDEN",
      reason = "no_access_policy", principal = principal })
  end
  error(err, 0)
end

function M.check(ctx, c)
  local caller = ctx:call("sts", "GetCallerIdentity", {}).Arn
  local principal = eks.admin_principal(caller)
  local k = ctx:k8s(c.name)
  local ns, kerr = k:get("v1", "Namespace", "kube-system")
  if not ns then why_unreachable(ctx, c, principal, kerr) end
  local _, werr = k:apply({ apiVersion = "v1", kind = "Namespace", metadata = { name = PROBE } }, { dry_run = true })
  if werr and werr.code ~= "Forbidden" then error(werr, 0) end
  return { principal = principal, access = werr and "read-only" or "read-write", k8s = k }
end

return M
