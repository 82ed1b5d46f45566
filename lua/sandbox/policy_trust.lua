-- sandbox.policy_trust: a role's trust policy (AssumeRolePolicyDocument),
-- evaluated as STS evaluates it when someone assumes the role.
--
--   T.doc(v) -> the document: JSON text, URL-encoded JSON text (as IAM
--     answers it) or a table; nil when it is none
--   T.allows(doc, action, principal_fn, context) -> bool: no Deny statement
--     and some Allow statement applies; a statement applies when its Action
--     (or NotAction) matches the action (* and ?, case-insensitive), its
--     Principal matches (Principal "*", or principal_fn(type, value) true
--     for one of its values: type AWS, Service, Federated, ...) and its
--     Condition holds in the context (sandbox.policy_conditions)
--   T.service(ctx, role, service, source_arn) -> bool: the service principal
--     may call sts:AssumeRole on the role. The service passes
--     aws:SourceAccount (the account) and aws:SourceArn (the resource it
--     assumes the role for, when one is given), as SageMaker, EKS and EKS
--     Pod Identity do, so a trust policy scoped with them (confused-deputy
--     protection) is held to them.
local C = require "sandbox.policy_conditions"
local json = require "hypd.json"
local policy_values = require "sandbox.policy_values"

local M = {}

local as_list = policy_values.as_list

function M.doc(v)
  if type(v) == "table" then return v end
  if type(v) ~= "string" then return nil end
  if v:sub(1, 1) == "%" then v = v:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end) end
  local d = json.decode(v)
  return type(d) == "table" and d or nil
end

local function action_matches(st, action)
  local function hit(list)
    for _, a in ipairs(as_list(list)) do
      if type(a) == "string" and C.glob(a:lower(), action:lower()) then return true end
    end
    return false
  end
  if st.Action ~= nil then return hit(st.Action) end
  return not hit(st.NotAction)
end

local function principal_matches(p, principal_fn)
  if p == "*" then return true end
  if type(p) ~= "table" then return false end
  for ptype, vals in pairs(p) do
    for _, v in ipairs(as_list(vals)) do
      if v == "*" and ptype == "AWS" then return true end
      if type(v) == "string" and principal_fn(ptype, v) then return true end
    end
  end
  return false
end

function M.allows(doc, action, principal_fn, context)
  if type(doc) ~= "table" then return false end
  local ctx = C.context(context)
  local allowed = false
  for _, st in ipairs(as_list(doc.Statement)) do
    if type(st) == "table" and action_matches(st, action) and principal_matches(st.Principal, principal_fn)
        and C.holds(st.Condition, ctx) then
      if st.Effect == "Deny" then return false end
      if st.Effect == "Allow" then allowed = true end
    end
  end
  return allowed
end

function M.service(ctx, role, service, source_arn)
  local context = { ["aws:SourceAccount"] = ctx.account, ["aws:SourceArn"] = source_arn,
    ["aws:PrincipalServiceName"] = service }
  return M.allows(M.doc(role and role.AssumeRolePolicyDocument), "sts:AssumeRole",
    function(ptype, v) return ptype == "Service" and v == service end, context)
end

return M
