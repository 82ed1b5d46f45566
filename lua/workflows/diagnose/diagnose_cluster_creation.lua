-- diagnose_cluster_creation: why a cluster_create, cluster_create_eks or
-- hyperpod_create failed or does not finish, read from the operation's
-- record and from AWS (EKS status, health and add-ons, access entries, the
-- HyperPod cluster and nodes, the lifecycle scripts' CloudWatch log group,
-- Service Quotas, the IAM roles' trust) and the cluster's service accounts,
-- answered as findings (diagnose/_findings). Read only.
local CC = require "diagnose._creation_checks"
local F = require "diagnose._findings"
local Names = require "_names"
local P = require "_params"
local TC = require "diagnose._trust_checks"
local hp = require "_hyperpod"

local TOOLS = { cluster_create = true, cluster_create_eks = true, hyperpod_create = true }
local STALLED = 1800 -- seconds without a phase change that make a running creation look stuck

-- eks_of(v) -> the EKS cluster name an operation creates or works on
local function eks_of(v)
  local p = v.params or {}
  if v.tool == "hyperpod_create" then return p.cluster or tostring(v.target):match("^hyperpod/[^/]+/(.+)$") end
  return p.cluster_tag and Names.eks(p.cluster_tag)
end

local function region_of(v) return tostring(v.target):match("^%a+/([^/]+)/") end

-- latest(name) -> the newest top-level creation operation on EKS cluster name
local function latest(name)
  local best
  for t in pairs(TOOLS) do
    for _, v in ipairs(hypd.operations.list { tool = t, limit = 200 }) do
      if not v.parent and eks_of(v) == name and (not best or v.created_at > best.created_at) then best = v end
    end
  end
  return best
end

-- failed_leaf(v) -> the deepest failed operation under v (v itself when no child failed)
local function failed_leaf(v)
  for _, c in ipairs(v.children or {}) do
    if c.status == "failed" then
      local cv = hypd.operations.get(c.operation_id)
      if cv then return failed_leaf(cv) end
    end
  end
  return v
end

local function failed_step(v)
  for _, s in ipairs(v.steps or {}) do if s.status == "failed" then return s.name end end
end

-- operation(r, w, v): the operation's own findings; its error joins w.texts
local function operation(r, w, v)
  local subject = "operation " .. v.operation_id .. " (" .. v.tool .. ")"
  local inspect = F.step("inspect", "operation_get", { operation_id = v.operation_id },
    "see the operation's steps, phases and children")
  r:checked("operation", subject .. " is " .. tostring(v.status))
  if v.status == "failed" then
    local leaf = failed_leaf(v)
    local e = leaf.error or v.error or {}
    local text = tostring(e.code or "?") .. ": " .. tostring(e.message or "(no message)")
    w.texts[#w.texts + 1] = { source = "operation " .. leaf.operation_id .. " error", text = text }
    local evidence = { F.evidence("operation " .. leaf.operation_id .. " (" .. leaf.tool .. ") error", text,
      leaf.finished_at and os.date("!%Y-%m-%dT%H:%M:%SZ", math.floor(leaf.finished_at)) or nil) }
    local step = failed_step(leaf)
    if step then evidence[#evidence + 1] = F.evidence("operation " .. leaf.operation_id .. " steps", step .. ": failed") end
    local next = { inspect }
    if leaf ~= v then
      next[2] = F.step("inspect", "operation_get", { operation_id = leaf.operation_id }, "see the stage that failed")
    end
    r:add { severity = "critical", code = "OPERATION_FAILED", subject = subject,
      summary = leaf.tool .. " failed" .. (step and (" at step " .. step) or "") .. ": " .. tostring(e.code or "?"),
      evidence = evidence,
      explanation = "the creation stopped at the step quoted, with AWS's or Kubernetes' own answer; the " ..
        "findings below say what the cluster shows now. Once the cause is fixed, the same call resumes " ..
        "from the failed step (what was made is kept)",
      next = next }
  elseif v.status == "running" then
    local idle = hypd.now() - (v.updated_at or v.created_at)
    local stalled = idle > STALLED
    r:add { severity = stalled and "warning" or "info", code = stalled and "OPERATION_STALLED" or "OPERATION_RUNNING",
      subject = subject,
      summary = string.format("%s is %s (phase %s for %d s)", v.tool, stalled and "stalled" or "running",
        tostring(v.phase), math.floor(idle)),
      evidence = { F.evidence("operation " .. v.operation_id .. " phase", tostring(v.phase)),
        F.evidence("operation " .. v.operation_id .. " updated_at", os.date("!%Y-%m-%dT%H:%M:%SZ",
          math.floor(v.updated_at or v.created_at))) },
      explanation = stalled and "the phase has not changed for more than 30 minutes: EKS takes 10 to 15 " ..
        "minutes and HyperPod 15 to 20; the findings below say whether AWS is still at work" or
        "the creation is in progress; follow it with wait_seconds",
      next = { F.step("inspect", "operation_get", { operation_id = v.operation_id, wait_seconds = 60 },
        "follow the operation to its end") } }
  elseif v.status == "cancelled" then
    r:add { severity = "warning", code = "OPERATION_CANCELLED", subject = subject,
      summary = v.tool .. " was cancelled", evidence = { F.evidence("operation " .. v.operation_id .. " status",
        "cancelled") },
      explanation = "someone cancelled the creation; what was made is kept, and the same call resumes it",
      next = { inspect } }
  end
end

return tool {
  name = "diagnose_cluster_creation",
  summary = "Find why an EKS or HyperPod cluster creation failed or is stuck",
  description = "Read-only diagnosis of a failed or stuck cluster_create, cluster_create_eks or hyperpod_create: " ..
    "findings with the evidence quoted (the operation's error, EKS and add-on health, access entries, HyperPod " ..
    "FailureMessage and nodes, lifecycle script log lines, quotas, IAM trust) and suggested calls to review.",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:ListAddons", "eks:DescribeAddon", "eks:ListAccessEntries",
    "eks:ListAssociatedAccessPolicies", "sts:GetCallerIdentity", "sagemaker:ListClusters", "sagemaker:DescribeCluster",
    "sagemaker:ListClusterNodes", "logs:FilterLogEvents", "servicequotas:ListServiceQuotas", "iam:GetRole" },
  k8s = { "get", "list" },
  params = P.form({},
    { "operation_id", "cluster", "region" },
    {
    cluster = P.cluster, region = P.region,
    operation_id = P.with(P.operation_id, { description = "the cluster_create, cluster_create_eks or " ..
      "hyperpod_create operation (default: the latest one on the cluster)" }),
  }),
  result = F.RESULT,
  run = function(ctx, p)
    local v
    if p.operation_id then
      v = hypd.operations.get(p.operation_id)
      if not v then
        hypd.errors.refuse("operation_id", "exists", "no operation " .. p.operation_id,
          { code = "NOT_FOUND", field_message = "operation_id: no such operation" })
      end
      if not TOOLS[v.tool] then
        hypd.errors.refuse("operation_id", "creation", string.format("operation %s is a %s, not a cluster_create, " ..
          "cluster_create_eks or hyperpod_create", p.operation_id, v.tool),
          { field_message = "operation_id: not a creation operation (" .. v.tool .. ")" })
      end
    end
    local name, region
    if p.cluster or not v then
      local t = ctx:cluster(p)
      name, region = t.name, t.region
    else
      name, region = eks_of(v), p.region or region_of(v)
    end
    ctx.region = region
    v = v or latest(name)
    local w = { name = name, region_given = p.region, texts = {} }
    local r = F.new()
    local d, err = ctx:try("eks", "DescribeCluster", { name = name })
    if not d and err.code ~= "ResourceNotFoundException" then error(err, 0) end
    w.eks = d and d.cluster
    if not w.eks and not v then
      hypd.errors.refuse("cluster", "exists", string.format("no EKS cluster %s in %s and no creation operation for it",
        name, region), { code = "NOT_FOUND", field_message = "cluster: no such EKS cluster or creation" })
    end
    if v then operation(r, w, v) else r:checked("operation", "no creation operation recorded for " .. name) end
    if not w.eks then
      r:checked("EKS cluster", name .. " does not exist")
    end
    local tag = (w.eks and (w.eks.tags or {})[Names.TAG]) or (v and (v.params or {}).cluster_tag) or
      name:match("^" .. Names.PREFIX:gsub("%-", "%%-") .. "(.+)$")
    w.hyperpod = (w.eks and hp.find(ctx, w.eks.arn)) or (tag and hp.find(ctx, nil, Names.hyperpod(tag).cluster))
    CC.eks(ctx, r, w)
    CC.access(ctx, r, w)
    CC.hyperpod(ctx, r, w)
    CC.lifecycle(ctx, r, w)
    CC.quotas(ctx, r, w)
    local roles, seen = {}, {}
    for _, g in ipairs(w.hyperpod and w.hyperpod.InstanceGroups or {}) do
      if g.ExecutionRole and not seen[g.ExecutionRole] then
        seen[g.ExecutionRole] = true
        roles[#roles + 1] = g.ExecutionRole
      end
    end
    if #roles == 0 and tag then roles[1] = Names.hyperpod(tag).execution_role end
    TC.execution_roles(ctx, r, w, roles)
    if w.eks and w.eks.status == "ACTIVE" then
      local ok, conn = pcall(ctx.k8s, ctx, name)
      if ok then TC.irsa(ctx, r, w, conn) else r:checked("IRSA roles", "Kubernetes API not reachable") end
    end
    CC.capacity(r, w)
    return r:result()
  end,
}
