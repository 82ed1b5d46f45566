-- hyperpod/_feat_addon: EKS add-ons as links of the managed features'
-- chains.
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
-- An add-on someone else installed is used as it is (never reconfigured);
-- disabling a feature deletes its add-on whoever installed it: that is what
-- turning the feature off means.
local Names = require "_names"
local F = require "hyperpod._feat"
local json = hypd.json

local M = {}
M.EVERY = 15                 -- seconds between add-on checks (EKS takes a minute or two)
M.TIMEOUT = 10 * 60          -- the notes' limit for cert-manager and the operators

function M.describe(ctx, env, name)
  local r = F.try(ctx, "ResourceNotFoundException", "eks", "DescribeAddon", { clusterName = env.eks, addonName = name })
  return r and r.addon
end

local function issues(a)
  local out = {}
  for _, i in ipairs((a.health or {}).issues or {}) do
    out[#out + 1] = (i.code and (i.code .. ": ") or "") .. tostring(i.message)
  end
  return table.concat(out, "; ")
end

local FAILED = { CREATE_FAILED = true, DEGRADED = true, UPDATE_FAILED = true, DELETE_FAILED = true }
local PENDING = { CREATING = true, UPDATING = true, DELETING = true }

local function config_of(a)
  local v = a.configurationValues
  if type(v) ~= "string" or v == "" then return json.null end
  return json.decode(v) or v
end

local function wait_active(ctx, env, name, timeout)
  return ctx:poll { what = "EKS add-on " .. name .. " to be ACTIVE", every = M.EVERY, timeout = timeout or M.TIMEOUT,
    check = function()
      local a = M.describe(ctx, env, name)
      if not a then hypd.errors.raise("NOT_FOUND", "EKS add-on " .. name .. " is gone from " .. env.eks) end
      if FAILED[a.status] then
        hypd.errors.raise("FAILED", "EKS add-on " .. name .. " is " .. a.status ..
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
  local found = M.describe(ctx, env, name)
  if found and not F.owned(env, found.tags) then
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
  local tags = { [Names.TAG] = env.tag, [F.FEATURE_TAG] = feature }
  local a, action = ctx:ensure { type = "eks:addon", label = label, name = name, id = "addonArn", field = feature,
    exists = "ResourceInUseException",
    search = function() return M.describe(ctx, env, name) end,
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
  local now = M.describe(ctx, env, name) or a
  if FAILED[now.status] and now.status ~= "DELETE_FAILED" then
    -- made before its prerequisites were there (a crash, or someone else):
    -- applying it again makes EKS check it again
    ctx:phase("updating EKS add-on " .. name .. " (it is " .. now.status .. ")")
    local _, err = ctx:try("eks", "UpdateAddon", { clusterName = env.eks, addonName = name,
      resolveConflicts = "OVERWRITE" })
    if err then
      hypd.errors.raise("FAILED", "EKS add-on " .. name .. " is " .. now.status .. " (" .. issues(now) .. ") and " ..
        "EKS refuses to update it (" .. tostring(err.message) .. "); disable " .. feature .. " with " ..
        "hyperpod_disable_advanced_features, then enable it again", { addon = name })
    end
  end
  return wait_active(ctx, env, name, opts.timeout) or now, action
end

function M.absent(ctx, env, name)
  return ctx:absent { type = "eks:addon", label = "EKS add-on", name = name, gone = { "ResourceNotFoundException" },
    find = function() return M.describe(ctx, env, name) end,
    every = M.EVERY, timeout = 15 * 60,
    delete = function(a)
      if a.status ~= "DELETING" then ctx:call("eks", "DeleteAddon", { clusterName = env.eks, addonName = name }) end
    end }
end

function M.read(ctx, env, name)
  local a = M.describe(ctx, env, name)
  if not a then return { name = name, present = false } end
  local out = { name = name, present = true, status = a.status, version = a.addonVersion, id = a.addonArn,
    ok = a.status == "ACTIVE", pending = PENDING[a.status] == true, failed = FAILED[a.status] == true,
    owned = F.owned(env, a.tags), role = a.serviceAccountRoleArn }
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

return M
