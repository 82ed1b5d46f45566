-- _iam: IAM roles and their policies as the kit's resources (ctx:ensure),
-- for every stage that makes a role for a cluster tag.
--
--   role(ctx, o) -> role {Arn, RoleName, ...}: role o.name, created with
--     trust document o.trust (JSON text), description o.description and the
--     tags hypd:cluster-tag=o.tag and Name; a role without that tag is
--     someone else's (CONFLICT, never adopted). o.key: the ctx.state field
--     that remembers its ARN; o.field what a CONFLICT names (default
--     cluster_tag); o.needs, o.fields (more for a plan to show), o.retry
--     (default: IAM not showing yet what was made a moment ago). o.service: a service principal the trust
--     must keep allowing (sts:AssumeRole); when it does not, a statement for
--     it is added and the other statements are kept (another stage may
--     trust more principals in the same role).
--   managed(role, name) -> the ARN of AWS managed policy name in the
--     role's partition
--   attach(ctx, role, policy_arn, short_name): the managed policy attached
--   inline(ctx, role, policy_name, document): the inline policy holds
--     document (a table; compared as JSON, rewritten when it differs)
--   trusts(document, service) -> bool: the trust document (JSON text,
--     URL-encoded as GetRole answers, or a table) allows service to assume
--   get(ctx, absent, service, operation, params) -> the result, or nil when
--     AWS answers the error code absent (there is no such thing)
local Names = require "_names"
local json = hypd.json
local net = require "_network"

local M = {}

-- partition(arn) -> "aws" for arn:aws:..., "aws-cn", ...
function M.partition(arn) return tostring(arn):match("^arn:([^:]+):") or "aws" end

-- get(ctx, absent, service, operation, params) -> the result, or nil on the error code absent
local function get(ctx, absent, service, operation, params)
  local out, err = ctx:try(service, operation, params)
  if out then return out end
  if err.code == absent then return nil end
  error(err, 0)
end
M.get = get

-- doc(text) -> the decoded policy document (IAM answers it URL-encoded)
local function doc(v)
  if type(v) == "table" then return v end
  if type(v) ~= "string" then return nil end
  if v:sub(1, 1) ~= "{" then v = v:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end) end
  return json.decode(v)
end
M.doc = doc
M.not_yet = net.not_yet

local function has(v, want)
  if type(v) == "string" then return v == want or v == "*" end
  for _, x in ipairs(type(v) == "table" and v or {}) do if has(x, want) then return true end end
  return false
end

local function statements(d)
  local sts = type(d) == "table" and d.Statement or {}
  if type(sts) == "table" and sts.Effect then sts = { sts } end
  return sts
end

function M.trusts(document, service)
  for _, st in ipairs(statements(doc(document))) do
    if st.Effect == "Allow" and type(st.Principal) == "table" and has(st.Principal.Service, service) and
      (has(st.Action, "sts:AssumeRole") or has(st.Action, "sts:*")) then return true end
  end
  return false
end

function M.role(ctx, o)
  local name, tag = o.name, o.tag
  local fields = { AssumeRolePolicyDocument = o.trust, ["tag:" .. Names.TAG] = tag }
  for k, v in pairs(o.fields or {}) do fields[k] = v end
  local spec = { type = "iam:role", label = "IAM role", name = name, key = o.key, id = "Arn",
    field = o.field or "cluster_tag", exists = "EntityAlreadyExists", retry = o.retry or net.not_yet, needs = o.needs,
    -- hypd's roles are tagged by CreateRole itself: an untagged one is someone else's
    owned = net.owned_by(tag, function(r) return r.Tags end),
    search = function() return (get(ctx, "NoSuchEntity", "iam", "GetRole", { RoleName = name }) or {}).Role end,
    fields = fields,
    placeholder = function(id) return { Arn = id, RoleName = name } end,
    create = function()
      local r = ctx:call("iam", "CreateRole", { RoleName = name, AssumeRolePolicyDocument = o.trust,
        Description = o.description, Tags = net.tag_list(tag, name) }).Role
      r.Tags = r.Tags or net.tag_list(tag, name) -- made just now, with them
      return r
    end }
  if o.service then
    local key = "trusts " .. o.service
    spec.desired = { [key] = true }
    spec.current = function(r) return { [key] = M.trusts(r.AssumeRolePolicyDocument, o.service) } end
    spec.update = function(r)
      local d = doc(r.AssumeRolePolicyDocument) or { Version = "2012-10-17" }
      local sts = statements(d)
      sts[#sts + 1] = { Effect = "Allow", Principal = { Service = o.service }, Action = "sts:AssumeRole" }
      d.Statement = sts
      ctx:call("iam", "UpdateAssumeRolePolicy", { RoleName = name, PolicyDocument = json.encode(d) })
    end
  end
  return ctx:ensure(spec)
end

function M.managed(role, name) return "arn:" .. M.partition(role.Arn) .. ":iam::aws:policy/" .. name end

function M.attach(ctx, role, policy_arn, short_name)
  local name = role.RoleName or tostring(role.Arn):match("role/(.+)$")
  return ctx:ensure { type = "iam:role-policy-attachment", label = "policy attachment",
    name = (short_name or policy_arn:match("([^/:]+)$")) .. " on " .. name, needs = { role.Arn, policy_arn },
    id = "PolicyArn",
    retry = net.not_yet, fields = { RoleName = name, PolicyArn = policy_arn },
    search = function()
      for _, p in ipairs(hypd.aws.all("iam", "ListAttachedRolePolicies", { RoleName = name }, ctx:aws_opts())) do
        if p.PolicyArn == policy_arn then return p end
      end
    end,
    create = function()
      ctx:call("iam", "AttachRolePolicy", { RoleName = name, PolicyArn = policy_arn })
      return { PolicyArn = policy_arn }
    end }
end

function M.inline(ctx, role, policy_name, document)
  local name = role.RoleName
  local text = json.encode(document)
  local function put() ctx:call("iam", "PutRolePolicy", { RoleName = name, PolicyName = policy_name,
    PolicyDocument = text }) end
  ctx:ensure { type = "iam:role-policy", label = "inline policy", name = policy_name .. " on " .. name,
    needs = role.Arn, id = "PolicyName", retry = net.not_yet, fields = { RoleName = name },
    desired = { PolicyDocument = document },
    current = function(p) return { PolicyDocument = doc(p.PolicyDocument) } end,
    search = function()
      return get(ctx, "NoSuchEntity", "iam", "GetRolePolicy", { RoleName = name, PolicyName = policy_name })
    end,
    create = function()
      put()
      return { PolicyName = policy_name, PolicyDocument = text }
    end,
    update = put }
end

return M
