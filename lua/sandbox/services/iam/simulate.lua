-- SimulatePrincipalPolicy with the sandbox's own policy evaluator
-- (sandbox.policy.evaluate): the identity policies of a role (its inline
-- and attached managed policies) or of the account's user (the policy set
-- on the sandbox's caller; with none set the sandbox refuses nothing, so
-- every action is allowed and no statement is named), plus any
-- PolicyInputList, for each action and resource asked (Resource "*" when
-- none), with the ContextEntries as condition keys. Not simulated: resource
-- policies, permissions boundaries, paging (every result in one answer).
local auth = require "sandbox.auth"
local conditions = require "sandbox.policy_conditions"
local json = require "hypd.json"
local policies = require "sandbox.services.iam.policies"
local policy = require "sandbox.policy"

local M = { operations = {} }
local ops = M.operations

-- sources(ctx, arn) -> { {id, type, doc} } the identity policies of the principal arn names
local function sources(ctx, arn)
  local out = {}
  local role = type(arn) == "string" and arn:match("^arn:aws:iam::%d+:role/.-([^/]+)$")
  if role then
    local r = ctx.state:get("role", role)
    if not r or r.Arn ~= arn then ctx.error("NoSuchEntity", "The role with name " .. role .. " cannot be found.", 404) end
    local names = {}
    for name in pairs(r.inline) do names[#names + 1] = name end
    table.sort(names)
    for _, name in ipairs(names) do out[#out + 1] = { id = name, type = "role", doc = json.decode(r.inline[name]) } end
    for _, parn in ipairs(r.attached) do
      local p = policies.lookup(ctx, parn)
      for _, v in ipairs(p and p.versions or {}) do
        if v.VersionId == p.DefaultVersionId then
          out[#out + 1] = { id = p.PolicyName, type = p.aws and "aws-managed" or "user-managed",
            doc = json.decode(v.Document) }
        end
      end
    end
    return out
  end
  local user = type(arn) == "string" and arn:match("^arn:aws:iam::%d+:user/.-([^/]+)$")
  if user then
    if arn ~= auth.USER then ctx.error("NoSuchEntity", "The user with name " .. user .. " cannot be found.", 404) end
    local doc = policy.get()
    if doc then out[1] = { id = "sandbox-caller-policy", type = "user", doc = doc } end
    return out, not doc
  end
  ctx.error("InvalidInput", "Invalid ARN: " .. tostring(arn))
end

local function context_of(entries)
  local t = {}
  for _, e in ipairs(entries or {}) do
    local v = e.ContextKeyValues or {}
    t[e.ContextKeyName] = #v == 1 and v[1] or v
  end
  return conditions.context(t)
end

function ops.SimulatePrincipalPolicy(ctx, input)
  local list, unrestricted = sources(ctx, input.PolicySourceArn)
  for i, text in ipairs(input.PolicyInputList or {}) do
    local ok, doc = pcall(json.decode, text)
    if not ok or type(doc) ~= "table" then
      ctx.error("InvalidInput", "Policy document in PolicyInputList." .. i .. " is not valid JSON.")
    end
    list[#list + 1] = { id = "PolicyInputList." .. i, type = "none", doc = doc }
  end
  local cctx = context_of(input.ContextEntries)
  local resources = input.ResourceArns
  if not resources or #resources == 0 then resources = { "*" } end
  local results = json.array()
  for _, action in ipairs(input.ActionNames or {}) do
    for _, resource in ipairs(resources) do
      local allow, deny = json.array(), json.array()
      for _, src in ipairs(list) do
        local stmts = src.doc.Statement
        if type(stmts) == "table" and stmts.Effect then stmts = { stmts } end
        for _, st in ipairs(stmts or {}) do
          local v = policy.evaluate({ Statement = { st } }, action, resource, cctx)
          local m = { SourcePolicyId = src.id, SourcePolicyType = src.type }
          if v == "deny" then deny[#deny + 1] = m elseif v == "allow" then allow[#allow + 1] = m end
        end
      end
      local decision = #deny > 0 and "explicitDeny" or (#allow > 0 or unrestricted) and "allowed" or "implicitDeny"
      results[#results + 1] = { EvalActionName = action, EvalResourceName = resource, EvalDecision = decision,
        MatchedStatements = #deny > 0 and deny or allow, MissingContextValues = json.array() }
    end
  end
  return { EvaluationResults = results, IsTruncated = false }
end

return M
