-- diagnose/_trust_checks: the IAM trust of the identity chains hypd
-- builds, for diagnose_cluster_creation: the HyperPod execution roles
-- (SageMaker must be able to assume them) and the IRSA roles the cluster's
-- service accounts name (the cluster's OIDC provider and that service
-- account, as _irsa.trust makes them). w as diagnose/_creation_checks'.
local F = require "diagnose._findings"
local iam = require "_iam"

local M = {}

local ev = F.evidence

-- execution_roles(ctx, r, w, names): the execution roles' trust (SageMaker must be
-- able to assume them); names: role ARNs or names
function M.execution_roles(ctx, r, w, names)
  local n = 0
  for _, id in ipairs(names) do
    local name = tostring(id):match("role/(.+)$") or id
    name = name:match("([^/]+)$")
    local g = ctx:try("iam", "GetRole", { RoleName = name })
    if g then
      n = n + 1
      if not iam.trusts(g.Role.AssumeRolePolicyDocument, "sagemaker.amazonaws.com") then
        local d = iam.doc(g.Role.AssumeRolePolicyDocument)
        r:add { severity = "critical", code = "EXECUTION_ROLE_TRUST", subject = "IAM role " .. name,
          summary = "SageMaker cannot assume the HyperPod execution role",
          evidence = { ev("iam GetRole " .. name .. " AssumeRolePolicyDocument", hypd.json.encode(d)) },
          explanation = "HyperPod's instances run as the group's execution role, which SageMaker assumes: its " ..
            "trust policy must allow the service principal sagemaker.amazonaws.com sts:AssumeRole. " ..
            "CreateCluster is refused (or nodes fail) until it does",
          next = { F.step("inspect", "hyperpod_list_instance_groups", { cluster = w.name, region = w.region_given },
            "see each group's execution role") } }
      end
    end
  end
  r:checked("execution roles", n .. " roles' trust of sagemaker.amazonaws.com")
end

-- irsa(ctx, r, w, conn): every service account of the cluster that names
-- an IAM role (eks.amazonaws.com/role-arn): the role's trust must name the
-- cluster's OIDC provider and exactly that service account, as hypd's
-- roles do (_irsa.trust)
M.ROLE_ANNOTATION = "eks.amazonaws.com/role-arn"
function M.irsa(ctx, r, w, conn)
  local c = w.eks
  local issuer = c and ((c.identity or {}).oidc or {}).issuer
  if not issuer then return end
  local host = tostring(issuer):gsub("^https://", ""):gsub("/$", "")
  local sas, err = conn:list("v1", "ServiceAccount", { all_namespaces = true })
  if not sas then
    r:checked("IRSA roles", "service accounts not readable: " .. tostring(err and err.message or err))
    return
  end
  local n = 0
  for _, sa in ipairs(sas) do
    local arn = ((sa.metadata or {}).annotations or {})[M.ROLE_ANNOTATION]
    local name = arn and tostring(arn):match("role/(.+)$")
    name = name and name:match("([^/]+)$")
    local g = name and ctx:try("iam", "GetRole", { RoleName = name })
    if g then
      n = n + 1
      local who = "system:serviceaccount:" .. sa.metadata.namespace .. ":" .. sa.metadata.name
      local d = iam.doc(g.Role.AssumeRolePolicyDocument) or {}
      local sts = d.Statement or {}
      if sts.Effect then sts = { sts } end
      local provider, subject = false, false
      for _, st in ipairs(sts) do
        local fed = type(st.Principal) == "table" and st.Principal.Federated
        if st.Effect == "Allow" and type(fed) == "string" and fed:sub(-#host - 1) == "/" .. host then
          provider = true
          for _, op in ipairs { "StringEquals", "StringLike" } do
            local v = ((st.Condition or {})[op] or {})[host .. ":sub"]
            for _, x in ipairs(type(v) == "table" and v or { v }) do
              subject = subject or x == who or (op == "StringLike" and x == "system:serviceaccount:" ..
                sa.metadata.namespace .. ":*")
            end
          end
        end
      end
      if not (provider and subject) then
        r:add { severity = "critical", code = "IRSA_TRUST_MISMATCH",
          subject = "IAM role " .. name .. " of " .. sa.metadata.namespace .. "/" .. sa.metadata.name,
          summary = provider and "the role's trust does not name the service account" or
            "the role's trust does not name the cluster's OIDC provider",
          evidence = { ev("ServiceAccount/" .. sa.metadata.namespace .. "/" .. sa.metadata.name .. " annotation " ..
              M.ROLE_ANNOTATION, arn),
            ev("eks DescribeCluster cluster.identity.oidc.issuer", issuer),
            ev("iam GetRole " .. name .. " AssumeRolePolicyDocument", hypd.json.encode(d)) },
          explanation = "a pod of the service account gets the role's credentials only when the trust allows " ..
            "sts:AssumeRoleWithWebIdentity from the cluster's OIDC provider (" .. host .. ") with " .. host ..
            ":sub = " .. who .. "; otherwise its AWS calls fail with AccessDenied (a role made for another " ..
            "cluster, or the cluster made again with a new issuer)",
          next = { F.step("inspect", "cluster_get_dependency_status", { cluster = w.name, region = w.region_given },
            "see the dependencies whose roles hypd made") } }
      end
    end
  end
  r:checked("IRSA roles", n .. " service accounts' roles against the cluster's OIDC provider")
end

return M
