-- _eks_addon: EKS add-ons, as the managed features' chains make them and as
-- the storage tools need them.
--   describe(ctx, eks, name) -> the DescribeAddon of add-on name on EKS
--     cluster eks | nil
--   issue_list(a) -> its health issues, {"code: message", ...} (a may be nil)
--   issues(a) -> the same as one string, "code: message; ..." ("" when none)
--   FAILED, PENDING: the add-on statuses that failed, and those still at work
--   ensure(ctx, env, feature, name, opts) -> add-on, made when missing
--     (tagged hypd:cluster-tag and hypd:feature), its role and
--     configuration made to hold when it is hypd's, then waited for until
--     ACTIVE. opts: role_arn (IRSA: serviceAccountRoleArn), pod_identity
--     ({{serviceAccount, roleArn}}), config (a table: configurationValues),
--     timeout (seconds; default 10 minutes), label (for phases)
--   absent(ctx, env, name) -> action: deleted and waited for until gone
--   read(ctx, env, name) -> part fields (present, status, ok, pending,
--     failed, version, note)
--   version_at_least(have, want) -> true when "v1.15.0-eksbuild.1" >= want
--   require_active(ctx, cl, name, why [, fix]) -> the add-on a storage
--     needs and another tool installs, ACTIVE (waited for while it is
--     being created or updated); refused, naming the tool that installs it
--     (M.INSTALLER, or saying fix), when it is missing or failed
-- An add-on someone else installed is used as it is (never reconfigured);
-- disabling a feature deletes its add-on whoever installed it: that is what
-- turning the feature off means. env is the managed features' cluster
-- (hyperpod/_feat env: eks, tag); cl the storage tools' (_storage cluster:
-- name, planned).
local Names = require "_names"
local net = require "_network"
local errors = hypd.errors
local json = hypd.json

local M = {}
M.EVERY = 15                 -- seconds between add-on checks (EKS takes a minute or two)
M.TIMEOUT = 10 * 60          -- the notes' limit for cert-manager and the operators
M.INSTALLER = "cluster_configure_dependencies"
M.REQUIRE_LIMIT = 20 * 60    -- how long a storage tool waits for an add-on being created or updated

function M.describe(ctx, eks, name)
  local a, err = ctx:try("eks", "DescribeAddon", { clusterName = eks, addonName = name })
  if a then return a.addon end
  if err.code == "ResourceNotFoundException" then return nil end
  error(err, 0)
end

function M.issue_list(a)
  local out = {}
  for _, i in ipairs(((a or {}).health or {}).issues or {}) do
    out[#out + 1] = (i.code and (i.code .. ": ") or "") .. tostring(i.message)
  end
  return out
end

function M.issues(a) return table.concat(M.issue_list(a), "; ") end
local issues = M.issues

-- owned(env, tags) -> true when the add-on's tags ({key = value}, as EKS
-- answers them) say it is this cluster tag's
local function owned(env, tags)
  local v = (tags or {})[net.TAG_KEY]
  return v ~= nil and v == env.tag
end

local FAILED = { CREATE_FAILED = true, DEGRADED = true, UPDATE_FAILED = true, DELETE_FAILED = true }
local PENDING = { CREATING = true, UPDATING = true, DELETING = true }
M.FAILED, M.PENDING = FAILED, PENDING

local function config_of(a)
  local v = a.configurationValues
  if type(v) ~= "string" or v == "" then return json.null end
  return json.decode(v) or v
end

local function wait_active(ctx, env, name, timeout)
  return ctx:poll { what = "EKS add-on " .. name .. " to be ACTIVE", every = M.EVERY, timeout = timeout or M.TIMEOUT,
    check = function()
      local a = M.describe(ctx, env.eks, name)
      if not a then errors.raise("NOT_FOUND", "EKS add-on " .. name .. " is gone from " .. env.eks) end
      if FAILED[a.status] then
        errors.raise("FAILED", "EKS add-on " .. name .. " is " .. a.status ..
          (issues(a) ~= "" and (": " .. issues(a)) or "") .. ". Fix what it reports, then call again.",
          { addon = name, status = a.status })
      end
      return a.status == "ACTIVE", "EKS add-on " .. name .. " " .. tostring(a.status) ..
        (issues(a) ~= "" and (": " .. issues(a)) or ""), a
    end }
end

function M.ensure(ctx, env, feature, name, opts)
  opts = opts or {}
  local label = "EKS add-on"
  local found = M.describe(ctx, env.eks, name)
  if found and not owned(env, found.tags) then
    -- someone else's: used as it is
    if not ctx.plan and found.status ~= "ACTIVE" then wait_active(ctx, env, name, opts.timeout) end
    return found, "unchanged"
  end
  local desired
  if opts.role_arn then desired = { serviceAccountRoleArn = opts.role_arn } end
  if opts.config then
    desired = desired or {}
    desired.configurationValues = opts.config
  end
  local tags = { [net.TAG_KEY] = env.tag, [net.FEATURE_KEY] = feature }
  local a, action = ctx:ensure { type = "eks:addon", label = label, name = name, id = "addonArn", field = feature,
    exists = "ResourceInUseException",
    search = function() return M.describe(ctx, env.eks, name) end,
    fields = { clusterName = env.eks, podIdentityAssociations = opts.pod_identity, tags = tags },
    desired = desired,
    current = function(x)
      return { serviceAccountRoleArn = x.serviceAccountRoleArn, configurationValues = config_of(x) }
    end,
    placeholder = function(id) return { addonArn = id, addonName = name, status = "CREATING" } end,
    -- IAM is eventually consistent: EKS may not see a new role yet
    retry = function(err)
      if err.code == "InvalidParameterException" and tostring(err.message):find("[Rr]ole") then
        return "EKS does not see the role yet"
      end
    end,
    create = function()
      return ctx:call("eks", "CreateAddon", { clusterName = env.eks, addonName = name,
        serviceAccountRoleArn = opts.role_arn, podIdentityAssociations = opts.pod_identity,
        configurationValues = opts.config and json.encode(opts.config) or nil, resolveConflicts = "OVERWRITE",
        tags = tags, clientRequestToken = Names.token(ctx.op_id, name) }).addon
    end,
    update = function(x)
      ctx:call("eks", "UpdateAddon", { clusterName = env.eks, addonName = name, serviceAccountRoleArn = opts.role_arn,
        configurationValues = opts.config and json.encode(opts.config) or nil, resolveConflicts = "OVERWRITE" })
      return x
    end }
  if ctx.plan then return a, action end
  local now = M.describe(ctx, env.eks, name) or a
  if FAILED[now.status] and now.status ~= "DELETE_FAILED" then
    -- made before its prerequisites were there (a crash, or someone else):
    -- applying it again makes EKS check it again
    ctx:phase("updating EKS add-on " .. name .. " (it is " .. now.status .. ")")
    local _, err = ctx:try("eks", "UpdateAddon", { clusterName = env.eks, addonName = name,
      resolveConflicts = "OVERWRITE" })
    if err then
      errors.raise("FAILED", "EKS add-on " .. name .. " is " .. now.status .. " (" .. issues(now) .. ") and " ..
        "EKS refuses to update it (" .. tostring(err.message) .. "); disable " .. feature .. " with " ..
        "hyperpod_disable_advanced_features, then enable it again", { addon = name })
    end
  end
  return wait_active(ctx, env, name, opts.timeout) or now, action
end

function M.absent(ctx, env, name)
  return ctx:absent { type = "eks:addon", label = "EKS add-on", name = name, gone = { "ResourceNotFoundException" },
    find = function() return M.describe(ctx, env.eks, name) end,
    every = M.EVERY, timeout = 15 * 60,
    delete = function(a)
      if a.status ~= "DELETING" then ctx:call("eks", "DeleteAddon", { clusterName = env.eks, addonName = name }) end
    end }
end

function M.read(ctx, env, name)
  local a = M.describe(ctx, env.eks, name)
  if not a then return { name = name, present = false } end
  local out = { name = name, present = true, status = a.status, version = a.addonVersion, id = a.addonArn,
    ok = a.status == "ACTIVE", pending = PENDING[a.status] == true, failed = FAILED[a.status] == true,
    owned = owned(env, a.tags), role = a.serviceAccountRoleArn }
  if issues(a) ~= "" then out.note = issues(a) end
  return out
end

-- version_at_least("v1.15.0-eksbuild.1", "v1.14.1-eksbuild.1") -> true
local function nums(v)
  local out = {}
  for n in tostring(v):gmatch("%d+") do out[#out + 1] = tonumber(n) end
  return out
end
function M.version_at_least(have, want)
  local a, b = nums(have), nums(want)
  for i = 1, math.max(#a, #b) do
    local x, y = a[i] or 0, b[i] or 0
    if x ~= y then return x > y end
  end
  return true
end

-- require_active: see the header. A planned cluster (a pipeline's plan) has
-- nothing to read.
function M.require_active(ctx, cl, name, why, fix)
  if cl.planned then return end
  fix = fix or string.format("%s cluster=%s installs it", M.INSTALLER, cl.name)
  local a = M.describe(ctx, cl.name, name)
  if not a then
    errors.raise("STATE", string.format("EKS cluster %s has no %s add-on, which %s needs; %s, then call this " ..
      "tool again", cl.name, name, why, fix), { cluster = cl.name, addon = name, tool = M.INSTALLER })
  end
  if a.status == "ACTIVE" then return a end
  local function noted(x) return issues(x) ~= "" and (": " .. issues(x)) or "" end
  local function failed(x)
    errors.raise("STATE", string.format("the %s add-on of EKS cluster %s is %s%s; %s",
      name, cl.name, tostring(x.status), noted(x), fix), { cluster = cl.name, addon = name, tool = M.INSTALLER })
  end
  if a.status ~= "CREATING" and a.status ~= "UPDATING" then failed(a) end
  if ctx.plan then return a end
  return ctx:poll { what = "add-on " .. name .. " to be ACTIVE", every = M.EVERY, timeout = M.REQUIRE_LIMIT,
    check = function()
      local x = M.describe(ctx, cl.name, name)
      if not x then
        errors.raise("STATE", "the " .. name .. " add-on of EKS cluster " .. cl.name .. " went away; " .. fix,
          { cluster = cl.name, addon = name })
      end
      if x.status ~= "ACTIVE" and x.status ~= "CREATING" and x.status ~= "UPDATING" then failed(x) end
      return x.status == "ACTIVE", "add-on " .. name .. " " .. x.status .. noted(x), x
    end }
end

return M
