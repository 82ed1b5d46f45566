-- EKS add-ons: CreateAddon, DescribeAddon, ListAddons, UpdateAddon,
-- DeleteAddon, DescribeAddonVersions. Records: "addon" (id "<cluster>/<addon>").
local C = require "sandbox.services.eks.clusters"
local D = require "sandbox.services.eks.deps"
local faults_nodes = require "sandbox.faults_nodes"
local json = require "hypd.json"
local log = require "hypd.log"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

local ALL = { "1.28", "1.29", "1.30", "1.31", "1.32", "1.33", "1.34" }
local FROM_130 = { "1.30", "1.31", "1.32", "1.33", "1.34" }
local FROM_131 = { "1.31", "1.32", "1.33", "1.34" }

-- the catalog: versions newest first; each lists the Kubernetes versions it supports
local CATALOG = {
  ["vpc-cni"] = { type = "networking", ns = "kube-system", iam = true, versions = {
    { "v1.20.4-eksbuild.2", ALL }, { "v1.19.5-eksbuild.3", ALL }, { "v1.19.2-eksbuild.1", ALL } } },
  coredns = { type = "networking", ns = "kube-system", versions = {
    { "v1.12.4-eksbuild.1", { "1.33", "1.34" } }, { "v1.11.4-eksbuild.14", { "1.31", "1.32", "1.33" } },
    { "v1.11.4-eksbuild.2", { "1.29", "1.30", "1.31" } }, { "v1.10.1-eksbuild.18", { "1.28", "1.29" } } } },
  ["kube-proxy"] = { type = "networking", ns = "kube-system", versions = {
    { "v1.34.0-eksbuild.2", { "1.34" } }, { "v1.33.3-eksbuild.4", { "1.33" } }, { "v1.32.6-eksbuild.2", { "1.32" } },
    { "v1.31.10-eksbuild.2", { "1.31" } }, { "v1.30.14-eksbuild.2", { "1.30" } },
    { "v1.29.15-eksbuild.10", { "1.29" } }, { "v1.28.15-eksbuild.20", { "1.28" } } } },
  ["eks-pod-identity-agent"] = { type = "security", ns = "kube-system", versions = {
    { "v1.3.8-eksbuild.2", ALL }, { "v1.3.4-eksbuild.1", ALL } } },
  ["cert-manager"] = { type = "security", ns = "cert-manager", owner = "community", versions = {
    { "v1.18.2-eksbuild.2", ALL }, { "v1.17.2-eksbuild.1", ALL } } },
  ["metrics-server"] = { type = "observability", ns = "kube-system", owner = "community", versions = {
    { "v0.8.0-eksbuild.2", ALL }, { "v0.7.2-eksbuild.4", ALL } } },
  ["aws-mountpoint-s3-csi-driver"] = { type = "storage", ns = "kube-system", iam = true, versions = {
    { "v2.1.0-eksbuild.1", ALL }, { "v1.15.0-eksbuild.1", ALL }, { "v1.14.1-eksbuild.1", ALL } } },
  ["aws-fsx-csi-driver"] = { type = "storage", ns = "kube-system", iam = true, versions = {
    { "v1.7.0-eksbuild.1", ALL }, { "v1.6.0-eksbuild.1", ALL } } },
  ["amazon-sagemaker-hyperpod-training-operator"] = { type = "machine-learning", ns = "aws-hyperpod", iam = true,
    needs = { "cert-manager", "eks-pod-identity-agent" }, versions = {
    { "v1.2.0-eksbuild.1", FROM_130 }, { "v1.1.0-eksbuild.1", FROM_130 }, { "v1.0.1-eksbuild.1", FROM_130 } } },
  ["amazon-sagemaker-hyperpod-inference"] = { type = "machine-learning", ns = "hyperpod-inference-system",
    iam = true, config = true, needs = { "cert-manager", "aws-mountpoint-s3-csi-driver", "aws-fsx-csi-driver",
    "metrics-server" }, required = { "executionRoleArn", "tlsCertificateS3Bucket", "hyperpodClusterArn" },
    versions = { { "v1.1.0-eksbuild.1", FROM_131 }, { "v1.0.0-eksbuild.1", FROM_131 } } },
  ["amazon-sagemaker-hyperpod-observability"] = { type = "observability", ns = "hyperpod-observability", iam = true,
    versions = { { "v1.0.2-eksbuild.1", FROM_130 }, { "v1.0.0-eksbuild.1", FROM_130 } } },
  ["amazon-sagemaker-hyperpod-taskgovernance"] = { type = "machine-learning", ns = "kueue-system",
    versions = { { "v1.2.0-eksbuild.1", FROM_130 }, { "v1.1.3-eksbuild.1", FROM_130 } } },
}

local function supports(entry, kv)
  for _, v in ipairs(entry[2]) do
    if v == kv then return true end
  end
  return false
end

-- default_version(name, kv) -> the newest version of add-on `name` that supports Kubernetes kv
function M.default_version(name, kv)
  for _, e in ipairs(CATALOG[name].versions) do
    if supports(e, kv) then return e[1] end
  end
end

local function key(cluster, addon) return cluster .. "/" .. addon end

-- k8s(ctx, cluster): the add-ons' workloads in the cluster follow the
-- records (sandbox.k8s.controllers.addons); never fails the AWS side
local function k8s(ctx, cluster)
  local ok, err = pcall(function() require("sandbox.k8s.controllers.addons").sync(ctx.region, cluster) end)
  if not ok then log.warn("sandbox", "EKS add-ons: Kubernetes sync failed: %s", tostring(err)) end
end

local view = D.public

local function get(ctx, cluster, name)
  return D.child(ctx, "addon", cluster, name, "No addon: " .. tostring(name) .. " found in cluster: " .. tostring(cluster))
end

local function check_config(ctx, values, cat)
  local v
  if values ~= nil and values ~= "" then
    v = json.decode(values)
    if type(v) ~= "table" then
      ctx.error("InvalidParameterException", "ConfigurationValue provided in request is not supported: " ..
        "configuration values must be a JSON or YAML object")
    end
  end
  -- an add-on that requires configuration refuses to be made without its required keys
  for _, k in ipairs((cat or {}).required or {}) do
    if type(v) ~= "table" or v[k] == nil or v[k] == "" then
      ctx.error("InvalidParameterException", "ConfigurationValue provided in request is not supported: " ..
        "Json schema validation failed with error: [$: required property '" .. k .. "' not found]")
    end
  end
end

function ops.CreateAddon(ctx, input)
  local c = C.get(ctx, input.clusterName)
  local name = input.addonName
  local cat = CATALOG[name]
  ctx.target = c.name .. "/" .. tostring(name)
  if not cat then
    ctx.error("InvalidParameterException", "Addon " .. tostring(name) .. " specified is not supported")
  end
  if c.status ~= "ACTIVE" then
    ctx.error("InvalidRequestException", "Cluster " .. c.name .. " is in " .. c.status ..
      " state. Add-ons can only be created on an ACTIVE cluster.")
  end
  local existing = ctx.state:get("addon", key(c.name, name))
  if existing and input.clientRequestToken and existing.token == input.clientRequestToken then
    return { addon = view(existing) } -- a retry of the same request
  end
  if existing then
    ctx.error("ResourceInUseException", "Addon already exists.", 409)
  end
  local version = input.addonVersion or M.default_version(name, c.version)
  local ok = false
  for _, e in ipairs(cat.versions) do ok = ok or (e[1] == version and supports(e, c.version)) end
  if not ok then
    ctx.error("InvalidParameterException", "Addon version " .. tostring(version) .. " specified is not supported " ..
      "for " .. name .. " in Kubernetes version " .. c.version)
  end
  check_config(ctx, input.configurationValues, cat)
  local ns = (input.namespaceConfig or {}).namespace or cat.ns
  local arn = ctx:arn(string.format("addon/%s/%s/%s", c.name, name, D.uuid(ctx)))
  local pias = json.array()
  for _, p in ipairs(input.podIdentityAssociations or {}) do
    local assoc = require("sandbox.services.eks.access").associate(ctx, c, ns, p.serviceAccount, p.roleArn, arn)
    pias[#pias + 1] = assoc.associationArn
  end
  local now = ctx.now()
  local a = {
    key = key(c.name, name), addonName = name, clusterName = c.name, status = "CREATING", addonVersion = version,
    health = { issues = json.array() }, addonArn = arn, createdAt = now, modifiedAt = now,
    serviceAccountRoleArn = input.serviceAccountRoleArn, tags = input.tags or json.object(),
    publisher = "eks", owner = cat.owner or "aws", configurationValues = input.configurationValues,
    podIdentityAssociations = pias, namespaceConfig = { namespace = ns }, token = input.clientRequestToken,
  }
  ctx.state:put("addon", a.key, a)
  ctx:later(D.between(60, 180), "addon_active", { key = a.key })
  return { addon = view(a) }
end

-- an add-on whose prerequisites are missing comes up unhealthy
local function health(ctx, a)
  local issues = json.array()
  for _, dep in ipairs((CATALOG[a.addonName] or {}).needs or {}) do
    local d = ctx.state:get("addon", key(a.clusterName, dep))
    if not d or d.status ~= "ACTIVE" then
      issues[#issues + 1] = { code = "InsufficientNumberOfReplicas", message = "The add-on is unhealthy " ..
        "because it requires the " .. dep .. " add-on, which is not ACTIVE in this cluster.",
        resourceIds = json.array() }
    end
  end
  local f = faults_nodes.addon(a.clusterName, a.addonName)
  if f then issues[#issues + 1] = { code = f.code, message = f.message, resourceIds = json.array() } end
  return issues
end

function tr.addon_active(ctx, args)
  local a = ctx.state:get("addon", args.key)
  if not a or (a.status ~= "CREATING" and a.status ~= "UPDATING") then return end
  local issues = health(ctx, a)
  a.health = { issues = issues }
  if #issues > 0 then
    a.status = a.status == "CREATING" and "CREATE_FAILED" or "DEGRADED"
  else
    a.status = "ACTIVE"
  end
  a.modifiedAt = ctx.now()
  ctx.state:put("addon", a.key, a)
  k8s(ctx, a.clusterName)
  if args.update then
    local u = ctx.state:get("update", args.update)
    if u then
      u.status = #issues > 0 and "Failed" or "Successful"
      if #issues > 0 then
        u.errors = { { errorCode = "Unknown", errorMessage = issues[1].message, resourceIds = json.array() } }
      end
      ctx.state:put("update", u.key, u)
    end
  end
end

function ops.DescribeAddon(ctx, input)
  local out = view(get(ctx, input.clusterName, input.addonName))
  -- an addon_unhealthy fault (sandbox.faults_nodes) on an add-on that is up: DEGRADED with its issue
  local f = faults_nodes.addon(out.clusterName, out.addonName)
  if f and out.status == "ACTIVE" then
    out.status = "DEGRADED"
    out.health = { issues = { { code = f.code, message = f.message, resourceIds = json.array() } } }
  end
  return { addon = out }
end

function ops.ListAddons(ctx, input)
  local page, nxt = D.children(ctx, "addon", input, "addonName")
  return { addons = page, nextToken = nxt }
end

function ops.UpdateAddon(ctx, input)
  local a = get(ctx, input.clusterName, input.addonName)
  local c = C.get(ctx, input.clusterName)
  ctx.target = a.key
  local again = C.retried(ctx, c.name, input.clientRequestToken, a.addonName)
  if again then return { update = C.update_view(again) } end
  if a.status == "CREATING" or a.status == "UPDATING" or a.status == "DELETING" then
    ctx.error("ResourceInUseException", "Addon " .. a.addonName .. " is in " .. a.status ..
      " state and cannot be updated.", 409)
  end
  local params = json.array()
  if input.addonVersion and input.addonVersion ~= a.addonVersion then
    local ok = false
    for _, e in ipairs(CATALOG[a.addonName].versions) do
      ok = ok or (e[1] == input.addonVersion and supports(e, c.version))
    end
    if not ok then
      ctx.error("InvalidParameterException", "Addon version " .. input.addonVersion .. " specified is not supported")
    end
    params[#params + 1] = { type = "AddonVersion", value = input.addonVersion }
    a.addonVersion = input.addonVersion
  end
  if input.configurationValues ~= nil then
    check_config(ctx, input.configurationValues)
    params[#params + 1] = { type = "ConfigurationValues", value = input.configurationValues }
    a.configurationValues = input.configurationValues
  end
  if input.serviceAccountRoleArn ~= nil then
    params[#params + 1] = { type = "ServiceAccountRoleArn", value = input.serviceAccountRoleArn }
    a.serviceAccountRoleArn = input.serviceAccountRoleArn
  end
  if input.resolveConflicts then
    params[#params + 1] = { type = "ResolveConflicts", value = input.resolveConflicts }
  end
  local u = C.new_update(ctx, c.name, "AddonUpdate", params, a.addonName, input.clientRequestToken)
  a.status, a.modifiedAt = "UPDATING", ctx.now()
  ctx.state:put("addon", a.key, a)
  ctx:later(D.between(30, 120), "addon_active", { key = a.key, update = u.key })
  return { update = C.update_view(u) }
end

function ops.DeleteAddon(ctx, input)
  local a = get(ctx, input.clusterName, input.addonName)
  ctx.target = a.key
  if a.status ~= "DELETING" then
    a.status, a.modifiedAt = "DELETING", ctx.now()
    ctx.state:put("addon", a.key, a)
    ctx:later(D.between(30, 90), "addon_deleted", { key = a.key })
  end
  return { addon = view(a) }
end

function tr.addon_deleted(ctx, args)
  local a = ctx.state:get("addon", args.key)
  if not a then return end
  for _, p in ipairs(ctx.state:list("pod_identity")) do
    if p.ownerArn == a.addonArn then ctx.state:delete("pod_identity", p.key) end
  end
  ctx.state:delete("addon", a.key)
  k8s(ctx, a.clusterName)
end

local function filter_set(list)
  if not list or #list == 0 then return nil end
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

function ops.DescribeAddonVersions(ctx, input)
  local names = {}
  for n in pairs(CATALOG) do names[#names + 1] = n end
  table.sort(names)
  local types, pubs, owners = filter_set(input.types), filter_set(input.publishers), filter_set(input.owners)
  local kv = input.kubernetesVersion
  local out = json.array()
  for _, n in ipairs(names) do
    local cat = CATALOG[n]
    local owner = cat.owner or "aws"
    if (not input.addonName or input.addonName == n) and (not types or types[cat.type])
      and (not pubs or pubs.eks) and (not owners or owners[owner]) then
      local versions = json.array()
      for _, e in ipairs(cat.versions) do
        if not kv or supports(e, kv) then
          local compat = json.array()
          for _, v in ipairs(e[2]) do
            compat[#compat + 1] = { clusterVersion = v, platformVersions = json.array { "*" },
              defaultVersion = M.default_version(n, v) == e[1] }
          end
          versions[#versions + 1] = { addonVersion = e[1], architecture = json.array { "amd64", "arm64" },
            computeTypes = json.array { "ec2", "hyperpod" }, compatibilities = compat,
            requiresConfiguration = cat.config == true, requiresIamPermissions = cat.iam == true }
        end
      end
      if #versions > 0 then
        out[#out + 1] = { addonName = n, type = cat.type, addonVersions = versions, publisher = "eks",
          owner = owner, defaultNamespace = cat.ns }
      end
    end
  end
  local page, nxt = D.page(ctx, out, input.maxResults, input.nextToken, 100, "InvalidParameterException")
  return { addons = page, nextToken = nxt }
end

M.CATALOG = CATALOG
return M
