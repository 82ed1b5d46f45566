-- _iam: IAM roles hypd makes, as kit resources (ctx:ensure), shared by the
-- stages (the EKS cluster role, the FSx CSI driver's role, ...).
--   local iam = require "_iam"
--   local role = iam.role(ctx, { name, tag, trust, description, key, field, needs, fields, retry })
--   iam.attach(ctx, role, iam.managed(role, "AmazonFSxFullAccess") [, retry])
-- A role is tagged hypd:cluster-tag=<tag> and Name by CreateRole itself, so
-- an untagged role of that name is someone else's: a CONFLICT, never adopted.
local net = require "cluster._eks_network" -- the tags and "not yet" every stage shares

local M = {}

M.TAG = net.TAG_KEY

-- tags(tag, name) -> the role's tag list
function M.tags(tag, name) return net.tag_list(tag, name) end

-- not_yet(err) -> a note when IAM does not show a thing made a moment ago
M.not_yet = net.not_yet

-- role(ctx, o) -> the role (GetRole's shape; a plan's placeholder {Arn, RoleName}).
-- o: name, tag, trust (the policy document as JSON text), description, key
-- (ctx.state field of its ARN), field (what a CONFLICT names), needs,
-- fields (more for a plan to show), retry (default not_yet)
function M.role(ctx, o)
  local fields = { AssumeRolePolicyDocument = o.trust, ["tag:" .. M.TAG] = o.tag }
  for k, v in pairs(o.fields or {}) do fields[k] = v end
  return ctx:ensure { type = "iam:role", label = "IAM role", name = o.name, key = o.key, id = "Arn", field = o.field,
    exists = "EntityAlreadyExists", retry = o.retry or M.not_yet, needs = o.needs,
    owned = net.owned_by(o.tag, function(r) return r.Tags end),
    search = function()
      local r, err = ctx:try("iam", "GetRole", { RoleName = o.name })
      if r then return r.Role end
      if err.code ~= "NoSuchEntity" then error(err, 0) end
    end,
    fields = fields,
    placeholder = function(id) return { Arn = id, RoleName = o.name } end,
    create = function()
      local r = ctx:call("iam", "CreateRole", { RoleName = o.name, AssumeRolePolicyDocument = o.trust,
        Description = o.description, Tags = M.tags(o.tag, o.name) }).Role
      r.Tags = r.Tags or M.tags(o.tag, o.name) -- made just now, with them
      return r
    end }
end

-- managed(role, name) -> the ARN of AWS managed policy name in the role's partition
function M.managed(role, name)
  local part = tostring(role.Arn):match("^arn:([^:]+):") or "aws"
  return "arn:" .. part .. ":iam::aws:policy/" .. name
end

-- attach(ctx, role, policy [, retry]): the managed policy is attached to the role
function M.attach(ctx, role, policy, retry)
  local name = role.RoleName or tostring(role.Arn):match("role/(.+)$")
  return ctx:ensure { type = "iam:role-policy-attachment", label = "policy attachment",
    name = policy:match("([^/]+)$") .. " on " .. name, needs = role.Arn, id = "PolicyArn", retry = retry or M.not_yet,
    fields = { RoleName = name, PolicyArn = policy },
    search = function()
      for _, p in ipairs(hypd.aws.all("iam", "ListAttachedRolePolicies", { RoleName = name }, ctx:aws_opts())) do
        if p.PolicyArn == policy then return p end
      end
    end,
    create = function()
      ctx:call("iam", "AttachRolePolicy", { RoleName = name, PolicyArn = policy })
      return { PolicyArn = policy }
    end }
end

return M
