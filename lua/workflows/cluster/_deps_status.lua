-- cluster/_deps_status: the live view of a cluster's stage 3 items for
-- cluster_get_dependency_status (reads only: AWS describes and Kubernetes
-- gets and lists, judged by the rules of cluster/_deps), with the latest
-- cluster_configure_dependencies operation of the cluster and the reasons
-- it kept for the items that failed.
local D = require "cluster._deps"
local A = require "_eks_addon"
local irsa = require "_irsa"
local json = hypd.json

local M = {}

local TOOL = "cluster_configure_dependencies"

-- operation(info, p) -> the view of the operation to show (p.operation_id,
-- else the latest for the cluster)
local function operation(info, p)
  local view
  if p.operation_id then
    view = hypd.operations.get(p.operation_id)
    if not view or view.tool ~= TOOL then
      hypd.errors.refuse("operation_id", "exists", "no " .. TOOL .. " operation " .. p.operation_id,
        { code = "NOT_FOUND", field_message = "operation_id: not a " .. TOOL .. " operation" })
    end
  else
    local target = "deps/" .. info.region .. "/" .. info.name
    for _, v in ipairs(hypd.operations.list { tool = TOOL, limit = 200 }) do
      if v.target == target then view = v break end
    end
  end
  return view -- (cluster_get_dependency_status waits, with workflows _wait)
end

local function note_error(item, err)
  item.state = "unknown"
  item.reason = tostring(type(err) == "table" and (tostring(err.code) .. ": " .. tostring(err.message)) or err)
end

local function oidc_item(ctx, info)
  local arn = irsa.provider_arn(info)
  local v = { item = "oidc-provider", kind = "iam", arn = arn, issuer = info.issuer }
  local out, err = ctx:try("iam", "GetOpenIDConnectProvider", { OpenIDConnectProviderArn = arn })
  if not out then
    if err.code == "NoSuchEntity" then v.state = "missing" else note_error(v, err) end
    return v
  end
  local has = false
  for _, c in ipairs(out.ClientIDList or {}) do has = has or c == irsa.AUDIENCE end
  v.client_ids, v.thumbprints = out.ClientIDList, out.ThumbprintList
  local tags = hypd.aws.tags.map(out.Tags)
  v.owner = tags[D.MANAGED_TAG] == D.MANAGED and "hypd" or "other"
  if has then
    v.state = "present"
  else
    v.state = "drifted"
    v.differs = { { field = "ClientIDList", have = out.ClientIDList or json.array(), want = irsa.AUDIENCE } }
  end
  return v
end

local function role_item(ctx, info, addon, k)
  local name = D.role_name(info)
  local v = { item = "iam-role", kind = "iam", name = name }
  if addon and D.addon_owner(addon) ~= "hypd" then
    v.state, v.owner = "present", "other"
    v.arn = addon.serviceAccountRoleArn
    v.kept = "add-on " .. D.S3_CSI .. " is not hypd's: it uses " .. tostring(addon.serviceAccountRoleArn or
      "no service account role") .. ", kept as it is"
    return v
  end
  local out, err = ctx:try("iam", "GetRole", { RoleName = name })
  if not out then
    if err.code == "NoSuchEntity" then v.state = "missing" else note_error(v, err) end
    return v
  end
  local r = out.Role
  v.arn = r.Arn
  local differs = {}
  if not D.same(D.policy_doc(r.AssumeRolePolicyDocument), irsa.trust(info, D.S3_SA_NAMESPACE, D.S3_SA)) then
    differs[#differs + 1] = { field = "AssumeRolePolicyDocument", have = D.policy_doc(r.AssumeRolePolicyDocument),
      want = irsa.trust(info, D.S3_SA_NAMESPACE, D.S3_SA) }
  end
  local pol, perr = ctx:try("iam", "GetRolePolicy", { RoleName = name, PolicyName = D.S3_POLICY })
  if not pol then
    if perr.code ~= "NoSuchEntity" then error(perr, 0) end
    differs[#differs + 1] = { field = "inline policy " .. D.S3_POLICY, have = json.null, want = D.s3_policy(info) }
  elseif not D.same(D.policy_doc(pol.PolicyDocument), D.s3_policy(info)) then
    differs[#differs + 1] = { field = "inline policy " .. D.S3_POLICY, have = D.policy_doc(pol.PolicyDocument),
      want = D.s3_policy(info) }
  end
  if k and addon and addon.status == "ACTIVE" then
    local sa = k:get("v1", "ServiceAccount", D.S3_SA, { namespace = D.S3_SA_NAMESPACE })
    local ann = sa and ((sa.metadata or {}).annotations or {})[D.ROLE_ANNOTATION]
    v.service_account = D.S3_SA_NAMESPACE .. "/" .. D.S3_SA .. (ann and (" (" .. D.ROLE_ANNOTATION .. " " .. ann .. ")")
      or " (no role annotation)")
  end
  v.owner = "hypd"
  if #differs > 0 then v.differs = differs end
  v.state = #differs > 0 and "drifted" or "present"
  return v
end

-- lbc_role_item(ctx, info) -> the AWS Load Balancer Controller's IRSA role:
-- its trust (exactly kube-system/aws-load-balancer-controller) and its
-- inline policy, as cluster_configure_dependencies makes them
local function lbc_role_item(ctx, info)
  local name = D.lbc_role_name(info)
  local v = { item = "iam-role:lb-controller", kind = "iam", name = name }
  local out, err = ctx:try("iam", "GetRole", { RoleName = name })
  if not out then
    if err.code == "NoSuchEntity" then v.state = "missing" else note_error(v, err) end
    return v
  end
  v.arn, v.owner = out.Role.Arn, "hypd"
  local differs = {}
  local trust = irsa.trust(info, D.LBC_NAMESPACE, D.LBC_SA)
  local have = D.policy_doc(out.Role.AssumeRolePolicyDocument)
  if not D.same(have, trust) then
    differs[#differs + 1] = { field = "AssumeRolePolicyDocument", have = have, want = trust }
  end
  local pol, perr = ctx:try("iam", "GetRolePolicy", { RoleName = name, PolicyName = D.LBC_POLICY })
  if not pol then
    if perr.code ~= "NoSuchEntity" then error(perr, 0) end
    differs[#differs + 1] = { field = "inline policy " .. D.LBC_POLICY, have = json.null, want = D.lbc_policy() }
  elseif not D.same(D.policy_doc(pol.PolicyDocument), D.lbc_policy()) then
    differs[#differs + 1] = { field = "inline policy " .. D.LBC_POLICY, have = D.policy_doc(pol.PolicyDocument),
      want = D.lbc_policy() }
  end
  if #differs > 0 then v.differs = differs end
  v.state = #differs > 0 and "drifted" or "present"
  return v
end

-- view(ctx, info, p) -> what cluster_get_dependency_status answers
function M.view(ctx, info, p)
  local op = operation(info, p)
  local st = op and hypd.operations.state(op.operation_id) or {}
  local failed = st.failed or {}
  -- an optional component is shown when asked, or when the latest call installed it
  local asked = {}
  for _, name in ipairs(D.OPTIONAL) do
    asked[name] = p[name]
    if asked[name] == nil then asked[name] = op and (op.params or {})[name] == true or false end
  end
  local kuberay = asked.kuberay
  local items = json.array()
  items[#items + 1] = oidc_item(ctx, info)
  local k, kerr
  local ok, conn = pcall(hypd.k8s.connect, { cluster = info.name, region = info.region })
  if ok then k = conn else kerr = conn end
  local s3 = A.describe(ctx, info.name, D.S3_CSI)
  local rok, role = pcall(role_item, ctx, info, s3, k)
  if not rok then
    local rerr = role
    role = { item = "iam-role", kind = "iam", name = D.role_name(info) }
    note_error(role, rerr)
  end
  items[#items + 1] = role
  for _, name in ipairs(D.ADDONS) do
    local a = name == D.S3_CSI and s3 or A.describe(ctx, info.name, name)
    local versions
    local vok, vr = pcall(D.versions, ctx, name, info.version)
    if vok then versions = vr end
    local role_arn = name == D.S3_CSI and role.owner == "hypd" and role.arn or nil
    items[#items + 1] = D.judge_addon(name, a, { versions = versions, role = role_arn })
  end
  if asked.load_balancer_controller then
    local lok, lv = pcall(lbc_role_item, ctx, info)
    if not lok then
      local lerr = lv
      lv = { item = "iam-role:lb-controller", kind = "iam", name = D.lbc_role_name(info) }
      note_error(lv, lerr)
    end
    items[#items + 1] = lv
  end
  for _, comp in ipairs(D.COMPONENTS) do
    if not comp.optional or asked[comp.optional] then
      local v
      if k then
        local cok, cv = pcall(D.judge_component, k, info, comp)
        v = cok and cv or { item = comp.name, kind = "kubernetes", label = comp.label }
        if not cok then note_error(v, cv) end
      else
        v = { item = comp.name, kind = "kubernetes", label = comp.label }
        note_error(v, kerr)
      end
      items[#items + 1] = v
    end
  end
  local counts = { present = 0, missing = 0, drifted = 0, failed = 0, pending = 0, unknown = 0 }
  for _, v in ipairs(items) do
    if v.state ~= "present" and failed[v.item] and v.state ~= "pending" then
      v.state, v.reason = "failed", v.reason or failed[v.item]
    end
    counts[v.state] = (counts[v.state] or 0) + 1
  end
  local out = { cluster = info.name, region = info.region, kubernetes_version = info.version,
    configured = counts.present == #items, counts = counts, kuberay = kuberay,
    load_balancer_controller = asked.load_balancer_controller, items = items }
  if op then
    out.operation = { operation_id = op.operation_id, status = op.status, phase = op.phase, error = op.error,
      adopt_existing = (op.params or {}).adopt_existing }
  end
  return out
end

return M
