-- hyperpod/_feat_iam: the IAM links of the managed features' chains, each
-- one ctx:ensure (found by name, hypd's by its hypd:cluster-tag tag,
-- made only when missing, its policy documents compared as JSON and
-- changed only where they differ) or one ctx:absent (hypd's only; the
-- rest is kept):
--   role(ctx, env, feature, name, trust, description) -> role
--   attach(ctx, role, policy_arn)            a managed policy on a role
--   policy(ctx, env, feature, name, document) -> {Arn}   a customer policy
--   role_absent(ctx, env, name), policy_absent(ctx, env, name)
--   trust_services(services, actions), trust_oidc(env, subjects) -> JSON text
--   read_role(ctx, env, name), read_policy(ctx, env, name) -> part fields
local Names = require "_names"
local F = require "hyperpod._feat"
local json = hypd.json

local M = {}

-- doc(text) -> the policy document as a table (IAM answers it URL-encoded)
M.doc = require("_iam").doc

function M.arn(env, kind, name) return string.format("arn:%s:iam::%s:%s/%s", env.partition, env.account, kind, name) end
function M.aws_policy(env, name) return string.format("arn:%s:iam::aws:policy/%s", env.partition, name) end

-- trust_services({"pods.eks.amazonaws.com"}, {"sts:AssumeRole", ...}) -> JSON text
function M.trust_services(services, actions)
  return json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
    Principal = { Service = #services == 1 and services[1] or services },
    Action = #actions == 1 and actions[1] or actions } } }
end

-- trust_oidc(env, subjects [, extra_statements]) -> JSON text: the cluster's
-- OIDC provider may assume the role for exactly these service accounts
-- ("namespace:name"; a "*" in one makes it a StringLike)
function M.trust_oidc(env, subjects, extra)
  local subs, like = {}, false
  for i, s in ipairs(subjects) do
    subs[i] = "system:serviceaccount:" .. s
    like = like or s:find("*", 1, true) ~= nil
  end
  local cond = { [env.oidc_host .. ":sub"] = #subs == 1 and subs[1] or subs,
    [env.oidc_host .. ":aud"] = "sts.amazonaws.com" }
  local st = { { Effect = "Allow", Principal = { Federated = env.oidc_arn }, Action = "sts:AssumeRoleWithWebIdentity",
    Condition = { [like and "StringLike" or "StringEquals"] = cond } } }
  for _, x in ipairs(extra or {}) do st[#st + 1] = x end
  return json.encode { Version = "2012-10-17", Statement = st }
end

function M.get_role(ctx, name)
  local r = F.try(ctx, "NoSuchEntity", "iam", "GetRole", { RoleName = name })
  return r and r.Role
end

local function get_policy(ctx, arn)
  local r = F.try(ctx, "NoSuchEntity", "iam", "GetPolicy", { PolicyArn = arn })
  return r and r.Policy
end

-- IAM is eventually consistent: a role or policy made a moment ago may not
-- be found by the next call yet
local function not_yet(err)
  if err.code == "NoSuchEntity" then return "IAM does not show it yet" end
end

function M.role(ctx, env, feature, name, trust, description)
  local want = M.doc(trust)
  local tags = F.tags(env, feature)
  return ctx:ensure { type = "iam:role", label = "IAM role", name = name, id = "Arn", field = feature,
    exists = "EntityAlreadyExists", retry = not_yet,
    owned = function(r) return F.owned(env, r.Tags) end,
    search = function() return M.get_role(ctx, name) end,
    fields = { ["tag:" .. Names.TAG] = env.tag, ["tag:" .. F.FEATURE_TAG] = feature },
    desired = { AssumeRolePolicyDocument = want },
    current = function(r) return { AssumeRolePolicyDocument = M.doc(r.AssumeRolePolicyDocument) } end,
    placeholder = function(id) return { Arn = id, RoleName = name } end,
    create = function()
      local r = ctx:call("iam", "CreateRole", { RoleName = name, AssumeRolePolicyDocument = trust,
        Description = description, Tags = tags }).Role
      r.Tags = r.Tags or tags
      return r
    end,
    update = function(r)
      ctx:call("iam", "UpdateAssumeRolePolicy", { RoleName = name, PolicyDocument = trust })
      r.AssumeRolePolicyDocument = trust
      return r
    end }
end

local function short(arn) return tostring(arn):match("([^/:]+)$") end

local function attached(ctx, role)
  local list, err = hypd.aws.all("iam", "ListAttachedRolePolicies", { RoleName = role }, ctx:aws_opts())
  if not list then
    if type(err) == "table" and err.code == "NoSuchEntity" then return {} end
    error(err, 0)
  end
  return list
end

-- attach(ctx, role, policy_arn): the managed or customer policy attached
function M.attach(ctx, role, policy_arn) return require("_iam").attach(ctx, role, policy_arn) end

local function default_document(ctx, p)
  local v = ctx:call("iam", "GetPolicyVersion", { PolicyArn = p.Arn, VersionId = p.DefaultVersionId }).PolicyVersion
  return M.doc(v.Document)
end

function M.policy(ctx, env, feature, name, document)
  local arn = M.arn(env, "policy", name)
  local text = json.encode(document)
  local tags = F.tags(env, feature)
  return ctx:ensure { type = "iam:policy", label = "IAM policy", name = name, id = "Arn", field = feature,
    exists = "EntityAlreadyExists", retry = not_yet,
    owned = function(p) return F.owned(env, p.Tags) end,
    search = function() return get_policy(ctx, arn) end,
    fields = { ["tag:" .. Names.TAG] = env.tag },
    desired = { PolicyDocument = M.doc(text) },
    current = function(p) return { PolicyDocument = p.document or default_document(ctx, p) } end,
    placeholder = function(id) return { Arn = id, PolicyName = name } end,
    create = function()
      local p = ctx:call("iam", "CreatePolicy", { PolicyName = name, PolicyDocument = text, Tags = tags,
        Description = "hypd " .. env.tag .. ": " .. feature }).Policy
      p.Tags = p.Tags or tags
      p.document = M.doc(text)
      return p
    end,
    update = function(p)
      local versions = ctx:call("iam", "ListPolicyVersions", { PolicyArn = p.Arn }).Versions or {}
      if #versions >= 5 then
        hypd.errors.raise("CONFLICT", "IAM policy " .. name .. " differs from what " .. feature .. " needs and " ..
          "already has 5 versions; disable " .. feature .. " (hyperpod_disable_advanced_features), then enable it",
          { field = feature })
      end
      ctx:call("iam", "CreatePolicyVersion", { PolicyArn = p.Arn, PolicyDocument = text, SetAsDefault = true })
      p.document = M.doc(text)
      return p
    end }
end

-- role_absent(ctx, env, name) -> action, why: the role goes (its managed
-- policies detached and inline ones deleted first), when it is hypd's
function M.role_absent(ctx, env, name)
  local role = M.get_role(ctx, name)
  if not role then return "absent" end
  local mine, why = F.owned(env, role.Tags)
  if mine then
    for _, p in ipairs(attached(ctx, name)) do
      ctx:absent { type = "iam:role-policy-attachment", label = "policy attachment",
        name = short(p.PolicyArn) .. " on " .. name, gone = { "NoSuchEntity" },
        find = function()
          for _, q in ipairs(attached(ctx, name)) do
            if q.PolicyArn == p.PolicyArn then return q end
          end
        end,
        delete = function() ctx:call("iam", "DetachRolePolicy", { RoleName = name, PolicyArn = p.PolicyArn }) end }
    end
    local inline = hypd.aws.all("iam", "ListRolePolicies", { RoleName = name }, ctx:aws_opts()) or {}
    for _, pname in ipairs(inline) do
      ctx:absent { type = "iam:role-policy", label = "inline policy", name = pname .. " on " .. name,
        gone = { "NoSuchEntity" },
        find = function()
          local r = F.try(ctx, "NoSuchEntity", "iam", "GetRolePolicy", { RoleName = name, PolicyName = pname })
          return r
        end,
        delete = function() ctx:call("iam", "DeleteRolePolicy", { RoleName = name, PolicyName = pname }) end }
    end
  end
  return ctx:absent { type = "iam:role", label = "IAM role", name = name, gone = { "NoSuchEntity" },
    find = function() return M.get_role(ctx, name) end,
    owned = function() return mine, why end,
    -- a detach a moment ago may not be seen yet
    retry = function(err) if err.code == "DeleteConflict" then return "IAM still shows policies on it" end end,
    delete = function() ctx:call("iam", "DeleteRole", { RoleName = name }) end }
end

-- policy_absent(ctx, env, name) -> action, why: the customer policy goes
-- (its other versions first), when it is hypd's
function M.policy_absent(ctx, env, name)
  local arn = M.arn(env, "policy", name)
  return ctx:absent { type = "iam:policy", label = "IAM policy", name = name, gone = { "NoSuchEntity" },
    find = function() return get_policy(ctx, arn) end,
    owned = function(p) return F.owned(env, p.Tags) end,
    retry = function(err)
      if err.code == "DeleteConflict" then return "IAM still shows it attached" end
    end,
    delete = function()
      for _, v in ipairs(ctx:call("iam", "ListPolicyVersions", { PolicyArn = arn }).Versions or {}) do
        if not v.IsDefaultVersion then
          ctx:call("iam", "DeletePolicyVersion", { PolicyArn = arn, VersionId = v.VersionId })
        end
      end
      ctx:call("iam", "DeletePolicy", { PolicyArn = arn })
    end }
end

-- read_role(ctx, env, name [, want_trust, policies]) -> part fields: present,
-- ok (hypd's, trusting what it should, with these managed policies), id
function M.read_role(ctx, env, name, want_trust, policies)
  local r = M.get_role(ctx, name)
  if not r then return { name = name, present = false } end
  local mine, why = F.owned(env, r.Tags)
  local out = { name = name, present = true, id = r.Arn, owned = mine, ok = true }
  if not mine then out.note = why end
  if want_trust then
    out.ok = M.same(M.doc(r.AssumeRolePolicyDocument), M.doc(want_trust))
    if not out.ok then out.note = "its trust policy differs from what hypd sets" end
  end
  if policies then
    local have = {}
    for _, p in ipairs(attached(ctx, name)) do have[p.PolicyArn] = true end
    for _, arn in ipairs(policies) do
      if not have[arn] then
        out.ok, out.note = false, "policy " .. short(arn) .. " is not attached"
      end
    end
  end
  return out
end

function M.read_policy(ctx, env, name)
  local p = get_policy(ctx, M.arn(env, "policy", name))
  if not p then return { name = name, present = false } end
  local mine, why = F.owned(env, p.Tags)
  return { name = name, present = true, id = p.Arn, owned = mine, note = not mine and why or nil, ok = true }
end

-- same(a, b) -> true when two JSON values are equal
M.same = hypd.json.equal

return M
