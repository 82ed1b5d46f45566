-- cluster/_deps_steps: the runs of cluster_configure_dependencies' steps,
-- one function each (stage 3; the items and the rules are in cluster/_deps):
--
--   cluster            the EKS cluster (the named or the active one): ACTIVE,
--                      and hypd may read and write its Kubernetes API
--   oidc_provider      the IAM OIDC provider of its issuer
--   s3_csi_role        the S3 CSI driver's IRSA role and its inline policy
--   addons             each add-on created, or updated where it drifted, with
--                      no waiting (EKS takes a minute or two each, all at once)
--   node_dependencies  each Kubernetes component, object by object: created by
--                      server-side apply, or, when a server-side dry run says an
--                      apply would change it, applied again (forced); a plan
--                      lists the fields that would change
--   wait_addons        until every add-on made or changed here is ACTIVE
--   load_balancer_controller  when asked: its IRSA role and its objects,
--                      once cert-manager serves its API
--   finish             the result; a FAILED error naming each item that failed
--
-- Every resource is a ctx:ensure (hypd.tool.kit), every wait a ctx:poll, so a
-- re-run sends no mutation for what is present, and plan = true lists what
-- would be created or changed. An item that fails (an add-on EKS refuses, an
-- object the API server rejects) does not stop the others: its reason is
-- kept in the operation's state (failed), shown by
-- cluster_get_dependency_status, and the operation ends failed naming it;
-- calling again retries only what is missing or drifted.
local Names = require "_names"
local D = require "cluster._deps"
local A = require "_eks_addon"
local irsa = require "_irsa"
local access = require "cluster._access"
local errors, json = hypd.errors, hypd.json

local M = {}

-- which(p) -> name, region of the cluster a call works on, without AWS calls
local function which(p)
  local c = hypd.clusters.target(p) or { region = p.region }
  local name = c.name
  local known = not p.region and p.cluster and hypd.clusters.get(p.cluster)
  local region = c.region or (known and known.region)
  if not region then
    local ok, r = pcall(hypd.aws.region, {})
    region = ok and r or "default"
  end
  return name, region
end

function M.target(p)
  local name, region = which(p)
  return "deps/" .. region .. "/" .. tostring(name)
end

-- validate(p): the tool's validate; a call needs a cluster, named or active
function M.validate(p)
  if not which(p) then
    errors.refuse("cluster", "required", "cluster_configure_dependencies: " .. hypd.clusters.NONE,
      { field_message = "cluster: required when no cluster is active" })
  end
end

local function token(ctx, what)
  return Names.token((tostring(ctx.op_id or "plan"):gsub("^op%-", "")), what)
end

-- item(ctx, name, fn): runs one item; a failure of the world (an AWS or
-- Kubernetes error) is kept as the item's reason and the next item goes on;
-- cancellation, guardrails and bugs stop the operation
local function item(ctx, name, fn)
  local st = ctx.state
  if ctx.plan then return fn() end
  local ok, e = pcall(fn)
  if ok then
    st.failed[name] = nil
    return
  end
  if type(e) ~= "table" or e.abort or not e.code or e.code == "CANCELLED" or e.code == "GUARDRAIL" or
      e.code == "INTERNAL" or e.code == "SANDBOX" then
    error(e, 0)
  end
  st.failed[name] = tostring(e.code) .. ": " .. tostring(e.message)
  st.actions[name] = "failed"
  ctx:progress(name .. " failed: " .. st.failed[name])
  ctx:save()
end

local function not_yet(err)
  local code = tostring(err.code)
  if code == "NoSuchEntity" then return "IAM does not show it yet" end
  if code == "MalformedPolicyDocument" and tostring(err.message):find("Federated", 1, true) then
    return "IAM does not see the new OIDC provider yet"
  end
end

-- steps -----------------------------------------------------------------------

function M.cluster(ctx)
  local p, st = ctx.params, ctx.state
  local info = irsa.cluster(ctx, p)
  if not info.planned and info.status ~= "ACTIVE" then
    errors.raise("CONFLICT", string.format("EKS cluster %s is %s, not ACTIVE: configure its dependencies once it " ..
      "is ACTIVE", info.name, tostring(info.status)), { field = "cluster", status = info.status })
  end
  if not info.planned then
    local a = access.check(ctx, info.describe)
    if a.access ~= "read-write" then
      errors.refuse("cluster", "forbidden", string.format("hypd reads but may not write the Kubernetes API of EKS " ..
        "cluster %s: associate %s with the access entry of %s (aws eks associate-access-policy --cluster-name %s " ..
        "--principal-arn %s --policy-arn arn:aws:eks::aws:cluster-access-policy/%s --access-scope type=cluster)", info.name,
        access.ADMIN, a.principal, info.name, a.principal, access.ADMIN), { code = "FORBIDDEN", reason = "read_only",
        principal = a.principal })
    end
  end
  info.describe = nil
  st.info, st.region = info, info.region -- a resumed operation works in the cluster's region
  st.failed, st.actions = st.failed or {}, st.actions or {}
end

function M.oidc_provider(ctx)
  local st = ctx.state
  local info = st.info
  ctx.region = info.region
  local arn = irsa.provider_arn(info)
  item(ctx, "oidc-provider", function()
    local _, action = ctx:ensure { type = "iam:oidc-provider", label = "IAM OIDC provider",
      name = info.planned and ("the issuer of " .. info.name) or irsa.issuer_path(info), id = "Arn", needs = info.arn,
      exists = "EntityAlreadyExists",
      -- the cluster's one identity provider: used whoever made it
      search = function()
        local out, err = ctx:try("iam", "GetOpenIDConnectProvider", { OpenIDConnectProviderArn = arn })
        if out then
          out.Arn = arn
          return out
        end
        if err.code == "NoSuchEntity" then return nil end
        error(err, 0)
      end,
      fields = { Url = info.issuer, ClientIDList = { irsa.AUDIENCE }, ThumbprintList = { D.THUMBPRINT } },
      desired = { ClientID = irsa.AUDIENCE },
      current = function(pv)
        for _, c in ipairs(pv.ClientIDList or {}) do
          if c == irsa.AUDIENCE then return { ClientID = c } end
        end
        return { ClientID = json.null }
      end,
      update = function()
        ctx:call("iam", "AddClientIDToOpenIDConnectProvider", { OpenIDConnectProviderArn = arn, ClientID = irsa.AUDIENCE })
      end,
      create = function()
        local out = ctx:call("iam", "CreateOpenIDConnectProvider", { Url = info.issuer, ClientIDList = { irsa.AUDIENCE },
          ThumbprintList = { D.THUMBPRINT }, Tags = D.tag_list(info) })
        return { Arn = out.OpenIDConnectProviderArn, ClientIDList = { irsa.AUDIENCE } }
      end }
    st.actions["oidc-provider"] = action
  end)
end

-- irsa_role(ctx, info, w) -> action: an IRSA role trusting exactly one
-- service account through the cluster's OIDC provider, and its inline
-- policy. w = {name, key (where the ARN is kept in the state), ns, sa,
-- policy_name, policy, description}
local function irsa_role(ctx, info, w)
  local name = w.name
  local trust = irsa.trust(info, w.ns, w.sa)
  local role, action = ctx:ensure { type = "iam:role", label = "IAM role", name = name, key = w.key,
    id = "Arn", needs = info.arn, field = "cluster", exists = "EntityAlreadyExists", retry = not_yet,
    owned = function(r)
      local tags = hypd.aws.tags.map(r.Tags)
      if tags[Names.EKS_TAG] == info.name then return true end
      return false, "its " .. Names.EKS_TAG .. " tag is " .. tostring(tags[Names.EKS_TAG] or "missing")
    end,
    search = function()
      local out, err = ctx:try("iam", "GetRole", { RoleName = name })
      if out then return out.Role end
      if err.code == "NoSuchEntity" then return nil end
      error(err, 0)
    end,
    fields = { ["tag:" .. Names.EKS_TAG] = info.name },
    desired = { AssumeRolePolicyDocument = trust },
    current = function(r) return { AssumeRolePolicyDocument = D.policy_doc(r.AssumeRolePolicyDocument) } end,
    update = function()
      ctx:call("iam", "UpdateAssumeRolePolicy", { RoleName = name, PolicyDocument = json.encode(trust) })
    end,
    placeholder = function(id) return { Arn = id, RoleName = name } end,
    create = function()
      local r = ctx:call("iam", "CreateRole", { RoleName = name, AssumeRolePolicyDocument = json.encode(trust),
        Description = w.description .. " of EKS cluster " .. info.name .. " (service account " .. w.ns .. "/" ..
          w.sa .. ")", Tags = D.tag_list(info) }).Role
      r.Tags = r.Tags or D.tag_list(info)
      return r
    end }
  local policy, pname = w.policy, w.policy_name
  local _, paction = ctx:ensure { type = "iam:role-policy", label = "inline policy",
    name = pname .. " on " .. name, needs = role.Arn, id = "PolicyName", retry = not_yet,
    search = function()
      local out, err = ctx:try("iam", "GetRolePolicy", { RoleName = name, PolicyName = pname })
      if out then return { PolicyName = pname, PolicyDocument = D.policy_doc(out.PolicyDocument) } end
      if err.code == "NoSuchEntity" then return nil end
      error(err, 0)
    end,
    desired = { PolicyDocument = policy },
    update = function()
      ctx:call("iam", "PutRolePolicy", { RoleName = name, PolicyName = pname,
        PolicyDocument = json.encode(policy) })
    end,
    create = function()
      ctx:call("iam", "PutRolePolicy", { RoleName = name, PolicyName = pname,
        PolicyDocument = json.encode(policy) })
      return { PolicyName = pname, PolicyDocument = policy }
    end }
  return (action == "unchanged" and paction ~= "unchanged") and "changed" or action
end

function M.s3_csi_role(ctx)
  local p, st = ctx.params, ctx.state
  local info = st.info
  ctx.region = info.region
  local addon = not info.planned and A.describe(ctx, info.name, D.S3_CSI)
  if addon and D.addon_owner(addon) ~= "hypd" and not p.adopt_existing then
    st.actions["iam-role"], st.s3_role = "kept", "kept"
    ctx:progress("add-on " .. D.S3_CSI .. " is not hypd's: its service account role (" ..
      tostring(addon.serviceAccountRoleArn or "none") .. ") is kept, hypd makes none")
    return
  end
  st.s3_role = nil
  item(ctx, "iam-role", function()
    st.actions["iam-role"] = irsa_role(ctx, info, { name = D.role_name(info), key = "s3_csi_role_arn",
      ns = D.S3_SA_NAMESPACE, sa = D.S3_SA, policy_name = D.S3_POLICY, policy = D.s3_policy(info),
      description = "hypd: the Mountpoint for S3 CSI driver" })
  end)
end

local function one_addon(ctx, name)
  local p, st = ctx.params, ctx.state
  local info = st.info
  local key = "addon:" .. name
  local versions = not info.planned and D.versions(ctx, name, info.version) or nil
  local a = not info.planned and A.describe(ctx, info.name, name) or nil
  if a and a.status == "DELETING" then -- someone deletes it: it is made again once gone
    a = ctx:poll { what = "add-on " .. name .. " to be deleted", every = D.ADDON_POLL, timeout = 10 * 60,
      check = function()
        local x = A.describe(ctx, info.name, name)
        return not x or x.status ~= "DELETING", "add-on " .. name .. " DELETING", x or false
      end } or nil
  end
  if a and D.addon_owner(a) ~= "hypd" and not p.adopt_existing then
    st.actions[key] = "kept"
    local d = D.addon_differs(a, { versions = versions })
    ctx:progress("add-on " .. name .. " is not hypd's (" .. tostring(a.addonVersion) .. ", " .. tostring(a.status) ..
      "): kept as it is" .. (#d > 0 and ("; hypd would set " .. d[1].field .. " " .. tostring(d[1].want)) or ""))
    return
  end
  local role = name == D.S3_CSI and st.s3_role ~= "kept" and (st.s3_csi_role_arn or
    hypd.kit.planned_id("iam:role", D.role_name(info))) or nil
  local desired
  if a then
    desired = {}
    for _, d in ipairs(D.addon_differs(a, { versions = versions, role = role })) do desired[d.field] = d.want end
    if A.FAILED[a.status] then desired.status = "ACTIVE" end
    if next(desired) == nil then desired = nil end
  end
  -- on a cluster hypd made, the add-on replaces the self-managed copy EKS
  -- bootstraps; an imported cluster's own settings are not overwritten
  -- unless the call adopts what exists
  local conflicts = (info.created or p.adopt_existing) and "OVERWRITE" or "NONE"
  local _, action = ctx:ensure { type = "eks:addon", label = "EKS add-on", name = name .. " on " .. info.name,
    id = "addonArn", needs = info.arn, exists = "ResourceInUseException",
    search = function() return a end,
    fields = { addonName = name, addonVersion = versions and versions.default or
      "the default for the cluster's Kubernetes version", serviceAccountRoleArn = role, resolveConflicts = conflicts },
    desired = desired,
    current = function(x)
      local c = {}
      for k in pairs(desired or {}) do
        if k == "status" then c.status = A.FAILED[x.status] and x.status or "ACTIVE" else c[k] = x[k] end
      end
      return c
    end,
    update = function(_, changes)
      local req = { clusterName = info.name, addonName = name, resolveConflicts = "OVERWRITE",
        clientRequestToken = token(ctx, name .. "-update") }
      if changes.addonVersion then req.addonVersion = changes.addonVersion.to end
      if changes.serviceAccountRoleArn then req.serviceAccountRoleArn = changes.serviceAccountRoleArn.to end
      ctx:call("eks", "UpdateAddon", req)
    end,
    create = function()
      return ctx:call("eks", "CreateAddon", { clusterName = info.name, addonName = name,
        addonVersion = versions.default, serviceAccountRoleArn = role, resolveConflicts = conflicts,
        tags = D.tags(info), clientRequestToken = token(ctx, name) }).addon
    end }
  st.actions[key] = action
  if action == "created" or action == "changed" then
    st.wait = st.wait or {}
    local known = false
    for _, n in ipairs(st.wait) do known = known or n == name end
    if not known then st.wait[#st.wait + 1] = name end
  end
end

function M.addons(ctx)
  local st = ctx.state
  ctx.region = st.info.region
  st.addons_at = st.addons_at or hypd.now()
  for _, name in ipairs(D.ADDONS) do
    item(ctx, "addon:" .. name, function() one_addon(ctx, name) end)
  end
end

local function copy(v)
  if type(v) ~= "table" then return v end
  local out = json.is_array(v) and json.array() or json.object()
  for k, x in pairs(v) do out[k] = copy(x) end
  return out
end

local function component(ctx, k, comp)
  local p, st = ctx.params, ctx.state
  local info = st.info
  local objs = D.objects(info, comp.name)
  if k and comp.image then
    local mine = {}
    for _, o in ipairs(objs) do mine[o.kind .. "/" .. tostring(o.metadata.namespace) .. "/" .. o.metadata.name] = true end
    local other = {}
    for _, w in ipairs(D.workloads(k, comp.image)) do
      if not mine[w.kind .. "/" .. tostring(w.namespace) .. "/" .. w.name] then
        other[#other + 1] = w.kind .. " " .. w.namespace .. "/" .. w.name
      end
    end
    if #other > 0 then
      st.actions[comp.name] = "kept"
      ctx:progress(comp.label .. " runs as " .. table.concat(other, ", ") .. " (not hypd's): kept, hypd adds none")
      return
    end
  end
  local acts = {}
  for _, obj in ipairs(objs) do
    local live = k and D.get(k, obj) or nil
    local ident = D.ident(obj)
    if live and not D.ours(live) and not p.adopt_existing then
      acts[#acts + 1] = "kept"
      ctx:progress(ident .. " exists and is not hypd's: kept as it is")
    else
      local diff = {}
      if live then
        local after = assert(k:apply(copy(obj), { force = true, dry_run = true }))
        diff = D.apply_changes(live, after)
      end
      local desired = {}
      for _, d in ipairs(diff) do desired[d.path] = d.want end
      local md = obj.metadata
      local _, action = ctx:ensure { type = "kubernetes:" .. obj.kind:lower(), label = obj.kind,
        name = (md.namespace and (md.namespace .. "/") or "") .. md.name, needs = info.arn,
        id = function(o) return (o.metadata or {}).uid or ident end,
        search = function() return live end,
        fields = { manifest = comp.name, apiVersion = obj.apiVersion, kind = obj.kind, namespace = md.namespace,
          name = md.name },
        desired = next(desired) and desired or nil,
        current = function(o)
          local c = {}
          for _, d in ipairs(diff) do
            if o == live then c[d.path] = d.have else c[d.path] = d.want end
          end
          return c
        end,
        update = function() return assert(k:apply(copy(obj), { force = true })) end,
        create = function() return assert(k:apply(copy(obj), { force = true })) end }
      acts[#acts + 1] = action
    end
  end
  local rank = { created = 4, create = 4, changed = 3, change = 3, unchanged = 1, kept = 0 }
  local best = "kept"
  for _, a in ipairs(acts) do if (rank[a] or 0) > rank[best] then best = a end end
  st.actions[comp.name] = best
end

function M.node_dependencies(ctx)
  local p, st = ctx.params, ctx.state
  local info = st.info
  ctx.region = info.region
  local k = not info.planned and ctx:k8s(info.name) or nil
  for _, comp in ipairs(D.COMPONENTS) do
    if (not comp.optional or p[comp.optional]) and not comp.after_addons then
      item(ctx, comp.name, function() component(ctx, k, comp) end)
    end
  end
end

function M.wait_addons(ctx)
  local st = ctx.state
  local info = st.info
  ctx.region = info.region
  local names = st.wait or {}
  if ctx.plan or #names == 0 then return end
  local settled = {}
  ctx:poll { what = "EKS add-ons " .. table.concat(names, ", ") .. " to be ACTIVE", every = D.ADDON_POLL,
    timeout = D.ADDON_LIMIT, since = st.addons_at,
    check = function()
      local left = {}
      for _, n in ipairs(names) do
        if not settled[n] then -- ACTIVE or failed at an earlier check: not asked again
          local a = A.describe(ctx, info.name, n)
          local key = "addon:" .. n
          if not a then
            st.failed[key], settled[n] = "NOT_FOUND: the add-on went away while hypd waited for it", true
          elseif A.FAILED[a.status] then
            local issues = A.issue_list(a)
            st.failed[key] = "FAILED: the add-on is " .. a.status ..
              (#issues > 0 and (": " .. table.concat(issues, "; ")) or "")
            st.actions[key], settled[n] = "failed", true
          elseif a.status == "ACTIVE" then
            settled[n] = true
          else
            local issues = A.issue_list(a) -- a health issue of an add-on still at work, shown with the wait
            left[#left + 1] = n .. " " .. a.status .. (#issues > 0 and (" (" .. table.concat(issues, "; ") .. ")") or "")
          end
        end
      end
      return #left == 0, "add-ons " .. table.concat(left, ", "), true
    end }
  st.wait = nil
end

-- load_balancer_controller: the AWS Load Balancer Controller when asked,
-- once the add-ons are ACTIVE: its IRSA role, then (cert-manager's API
-- served: the webhook certificate is a cert-manager Certificate) its objects
function M.load_balancer_controller(ctx)
  local p, st = ctx.params, ctx.state
  local info = st.info
  ctx.region = info.region
  if not p.load_balancer_controller then return end
  local comp
  for _, c in ipairs(D.COMPONENTS) do if c.optional == "load_balancer_controller" then comp = c end end
  local k = not info.planned and ctx:k8s(info.name) or nil
  -- a controller running under another name (the inference operator's own, a Helm release of another name) is
  -- never doubled: two would fight over the same Services; hypd makes neither it nor its role
  local mine = {}
  for _, o in ipairs(D.objects(info, comp.name)) do mine[o.kind .. "/" .. tostring(o.metadata.namespace) .. "/" ..
    o.metadata.name] = true end
  for _, w in ipairs(k and D.workloads(k, comp.image) or {}) do
    if not mine[w.kind .. "/" .. tostring(w.namespace) .. "/" .. w.name] then
      st.actions[comp.name] = "kept"
      ctx:progress(comp.label .. " runs as " .. w.kind .. " " .. w.namespace .. "/" .. w.name ..
        " (not hypd's): kept, hypd adds none")
      return
    end
  end
  item(ctx, comp.name, function()
    local role = irsa_role(ctx, info, { name = D.lbc_role_name(info), key = "lbc_role_arn", ns = D.LBC_NAMESPACE,
      sa = D.LBC_SA, policy_name = D.LBC_POLICY, policy = D.lbc_policy(),
      description = "hypd: the AWS Load Balancer Controller" })
    if k and not ctx.plan then
      ctx:poll { what = "cert-manager's API (CRD " .. D.CERT_CRD .. ")", every = 10, timeout = 10 * 60,
        check = function()
          local crd = D.get(k, { apiVersion = "apiextensions.k8s.io/v1", kind = "CustomResourceDefinition",
            metadata = { name = D.CERT_CRD } })
          return crd ~= nil, "cert-manager's CRDs are not served yet (the add-on cert-manager installs them)"
        end }
    end
    component(ctx, k, comp)
    if role ~= "unchanged" and st.actions[comp.name] == "unchanged" then st.actions[comp.name] = "changed" end
  end)
end

function M.finish(ctx)
  local p, st = ctx.params, ctx.state
  local info = st.info
  if ctx.plan then return end
  local items = json.array()
  local names = {}
  for k in pairs(st.actions) do names[#names + 1] = k end
  table.sort(names)
  for _, n in ipairs(names) do items[#items + 1] = { item = n, action = st.actions[n], reason = st.failed[n] } end
  local rec = hypd.clusters.get(info.name, info.region)
  if rec then
    hypd.clusters.record { name = info.name, region = info.region, dependencies = { operation_id = ctx.op_id,
      at = hypd.now(), kuberay = p.kuberay == true, failed = next(st.failed) ~= nil } }
  end
  st.result = { cluster = info.name, region = info.region, items = items,
    status_tool = "cluster_get_dependency_status" }
  local failed = {}
  for _, n in ipairs(names) do
    if st.failed[n] then failed[#failed + 1] = n .. " (" .. st.failed[n] .. ")" end
  end
  if #failed > 0 then
    errors.raise("FAILED", string.format("%d of the dependencies of %s failed: %s. The others are configured; " ..
      "cluster_get_dependency_status shows each item, and calling again retries only what is missing, drifted " ..
      "or failed.", #failed, info.name, table.concat(failed, "; ")), { failed = failed })
  end
end

return M
