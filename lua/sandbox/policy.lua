-- sandbox.policy: an IAM identity-based policy on the sandbox's caller.
--
--   local ok, err = policy.set(doc)   -- doc: a policy document (table), or nil / json.null to remove it
--   policy.get() -> doc | nil
--   local err = policy.authorize(ctx, service, operation, input, protocol)
--   -- nil: allowed; else the AWS error to answer { code, status, message,
--   -- type, action, resource, explicit }
--
-- With a policy set, every signed request (static keys, and the sessions
-- STS issues, whoever they stand for) is evaluated as IAM evaluates an
-- identity-based policy: an explicit Deny wins; otherwise some Allow must
-- match; nothing matching is an implicit deny. A statement matches when its
-- Action (or NotAction) matches the request's action and its Resource (or
-- NotResource) matches the request's resource.
--
-- Evaluated:
--   Effect Allow | Deny; Action and NotAction, a string or a list, "*" or
--   "service:Pattern" with * and ? wildcards, case-insensitive as IAM
--   matches actions; Resource and NotResource, "*" or ARN patterns with *
--   and ?, each of the ARN's six colon-separated parts matched on its own
--   (a wildcard does not span parts), case-sensitive. A request with no resource ARN (below) is matched only
--   by Resource "*".
--   Condition: every operator AWS defines, with IfExists and the
--   ForAnyValue:/ForAllValues: set prefixes (sandbox.policy_conditions),
--   against the request's context (sandbox.policy_context); a statement
--   whose Condition does not hold does not apply. Policy variables
--   (${aws:username}, ${aws:PrincipalAccount}, ...) in Resource and
--   NotResource and in String/Arn condition values.
-- Not evaluated (said here, never silently pretended):
--   no resource-based policies, permission boundaries, SCPs or session
--   policies; an assumed-role session is held to this policy, not to its
--   role's policies.
-- Always allowed, as in AWS: sts:GetCallerIdentity and sts:GetSessionToken
-- ("no permissions are required"). Unsigned requests (operations AWS takes
-- without a signature) and the sandbox's /_sandbox/* routes are not subject
-- to the policy.
--
-- What a request asks for (its action, the resources it is authorized on,
-- the roles it passes with iam:PassedToService) is sandbox.policy_resources
-- (its table in sandbox.data.policy_resources); the request context the
-- conditions read is sandbox.policy_context; the operators are
-- sandbox.policy_conditions.
local C = require "sandbox.policy_conditions"
local PC = require "sandbox.policy_context"
local R = require "sandbox.policy_resources"
local errors = require "hypd.errors"
local json = require "hypd.json"
local policy_values = require "sandbox.policy_values"
local sys = require "hypd.sys"

local M = {}

local current -- the policy document in force, or nil

local is_list, as_list = policy_values.is_list, policy_values.as_list

-- --- the document -------------------------------------------------------------

local STATEMENT_KEYS = { Sid = true, Effect = true, Action = true, NotAction = true, Resource = true,
  NotResource = true, Condition = true }

local function bad(message) return errors.fail("VALIDATION", "policy: " .. message, { field = "policy" }) end

local function strings(st, key, i, check)
  local v = st[key]
  local list = as_list(v)
  if #list == 0 then return bad(string.format("Statement %d: %s must be a string or a non-empty list", i, key)) end
  for _, s in ipairs(list) do
    if type(s) ~= "string" or s == "" then
      return bad(string.format("Statement %d: %s must hold strings", i, key))
    end
    local ok, msg = check(s)
    if not ok then return bad(string.format("Statement %d: %s", i, msg)) end
  end
  return true
end

local function check_action(s)
  if s == "*" or s:match("^[%w%-]+:[%w%*%?]*$") then return true end
  return false, "the action '" .. s .. "' must be \"*\" or \"service:Action\" (wildcards * and ?)"
end

local function check_resource(s)
  if s == "*" or s:sub(1, 4) == "arn:" then return true end
  return false, "the resource '" .. s .. "' must be \"*\" or an ARN"
end

-- validate(doc) -> true | nil, VALIDATION err: what IAM would reject as a
-- MalformedPolicyDocument, for an identity-based policy
local function validate(doc)
  if type(doc) ~= "table" or is_list(doc) then return bad("expected a policy document (a JSON object)") end
  if doc.Version ~= nil and doc.Version ~= "2012-10-17" and doc.Version ~= "2008-10-17" then
    return bad("Version must be 2012-10-17 (or 2008-10-17)")
  end
  local list = as_list(doc.Statement)
  if #list == 0 then return bad("Statement must be an object or a non-empty list of objects") end
  for i, st in ipairs(list) do
    if type(st) ~= "table" or is_list(st) then return bad("Statement " .. i .. " must be an object") end
    if st.Principal ~= nil or st.NotPrincipal ~= nil then
      return bad("Statement " .. i .. ": an identity-based policy should not specify a principal")
    end
    for k in pairs(st) do
      if not STATEMENT_KEYS[k] then return bad("Statement " .. i .. ": unknown field " .. tostring(k)) end
    end
    if st.Effect ~= "Allow" and st.Effect ~= "Deny" then
      return bad("Statement " .. i .. ": Effect must be Allow or Deny")
    end
    if (st.Action == nil) == (st.NotAction == nil) then
      return bad("Statement " .. i .. ": give exactly one of Action and NotAction")
    end
    if (st.Resource == nil) == (st.NotResource == nil) then
      return bad("Statement " .. i .. ": give exactly one of Resource and NotResource")
    end
    local ok, err = strings(st, st.Action ~= nil and "Action" or "NotAction", i, check_action)
    if not ok then return nil, err end
    ok, err = strings(st, st.Resource ~= nil and "Resource" or "NotResource", i, check_resource)
    if not ok then return nil, err end
    if st.Condition ~= nil then
      if type(st.Condition) ~= "table" or is_list(st.Condition) then
        return bad("Statement " .. i .. ": Condition must be an object of operators")
      end
      for op, block in pairs(st.Condition) do
        if type(block) ~= "table" or is_list(block) then
          return bad("Statement " .. i .. ": Condition " .. tostring(op) .. " must be an object of condition keys")
        end
      end
    end
  end
  return true
end
M.validate = validate

-- set(doc) -> true | nil, err: the policy in force from now on; nil or
-- json.null removes it (every request allowed again)
function M.set(doc)
  if doc == nil or doc == json.null then
    current = nil
    return true
  end
  local ok, err = validate(doc)
  if not ok then return nil, err end
  current = doc
  return true
end

function M.get() return current end

-- load(path) -> doc | nil, err: a policy document from a JSON file
function M.load(path)
  local f, oerr = io.open(path, "rb")
  if not f then return errors.fail("VALIDATION", "policy: cannot read " .. tostring(path) .. ": " .. tostring(oerr),
    { field = "policy" }) end
  local text = f:read("a")
  f:close()
  local doc = json.decode(text)
  if type(doc) ~= "table" then
    return errors.fail("VALIDATION", "policy: " .. path .. " does not hold a JSON policy document", { field = "policy" })
  end
  return doc
end

-- --- matching ----------------------------------------------------------------

-- glob(pattern, s): IAM's * (any run) and ? (one character)
local function glob(pattern, s)
  local lp = pattern:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".")
  return s:match("^" .. lp .. "$") ~= nil
end
M.glob = glob

-- the six parts of an ARN: arn, partition, service, region, account, resource
local function arn_parts(s)
  local a, p, svc, r, acct, res = s:match("^([^:]*):([^:]*):([^:]*):([^:]*):([^:]*):(.*)$")
  if not a then return nil end
  return { a, p, svc, r, acct, res }
end

local function resource_matches(pattern, resource, ctx)
  if pattern == "*" then return true end
  if resource == nil then return false end
  if pattern:find("${", 1, true) then
    pattern = C.substitute(pattern, ctx or {})
    if not pattern then return false end
  end
  local pp, rp = arn_parts(pattern), arn_parts(resource)
  -- "a wildcard can't span segments": a pattern of fewer parts matches no ARN
  if not pp then return false end
  if not rp then return glob(pattern, resource) end
  for i = 1, 6 do
    if not glob(pp[i], rp[i]) then return false end
  end
  return true
end

local function action_matches(pattern, action)
  return glob(pattern:lower(), action:lower())
end

local function any(list, fn, x, ctx)
  for _, p in ipairs(as_list(list)) do
    if fn(p, x, ctx) then return true end
  end
  return false
end

local function applies(st, action, resource, ctx)
  local a
  if st.Action ~= nil then a = any(st.Action, action_matches, action)
  else a = not any(st.NotAction, action_matches, action) end
  if not a then return false end
  local r
  if st.Resource ~= nil then r = any(st.Resource, resource_matches, resource, ctx)
  else r = not any(st.NotResource, resource_matches, resource, ctx) end
  return r and C.holds(st.Condition, ctx)
end

-- evaluate(doc, action, resource [, context]) -> "allow" | "deny"
-- (explicit) | "implicit"; context: the request's condition keys
-- (sandbox.policy_conditions.context; none when omitted)
function M.evaluate(doc, action, resource, ctx)
  local allowed = false
  ctx = ctx or {}
  for _, st in ipairs(as_list(doc.Statement)) do
    if applies(st, action, resource, ctx) then
      if st.Effect == "Deny" then return "deny" end
      allowed = true
    end
  end
  return allowed and "allow" or "implicit"
end

-- --- what a request asks for -------------------------------------------------------

M.action = R.action
M.checks = R.checks

-- --- the refusal -------------------------------------------------------------------

-- per protocol: the code and HTTP status of an authorization failure
local DENIED = { ec2 = { "UnauthorizedOperation", 403 }, query = { "AccessDenied", 403 },
  json = { "AccessDeniedException", 400 }, ["rest-json"] = { "AccessDeniedException", 403 },
  ["rest-xml"] = { "AccessDenied", 403 } }

M.ENCODED_PREFIX = "hypd-sandbox:"

-- encoded(...) -> EC2's "encoded authorization failure message": here a
-- base64 JSON that the sandbox's sts:DecodeAuthorizationMessage reads back
local function encoded(principal, action, resource, explicit)
  return sys.b64encode(M.ENCODED_PREFIX .. json.encode {
    allowed = false, explicitDeny = explicit,
    matchedStatements = { items = json.array() }, failures = { items = json.array() },
    context = { principal = { id = principal.user_id, arn = principal.arn }, action = action,
      resource = resource or "*", conditions = { items = json.array() } },
  })
end

-- decode(blob) -> the JSON text an encoded message carries, or nil
function M.decode(blob)
  local ok, text = pcall(sys.b64decode, tostring(blob))
  if not ok or type(text) ~= "string" or text:sub(1, #M.ENCODED_PREFIX) ~= M.ENCODED_PREFIX then return nil end
  return text:sub(#M.ENCODED_PREFIX + 1)
end

local function message(protocol, principal, action, resource, explicit)
  local on = ""
  if resource then
    on = " on resource: " .. (protocol == "rest-xml" and '"' .. resource .. '"' or resource)
  end
  local why = explicit and " with an explicit deny in an identity-based policy"
    or " because no identity-based policy allows the " .. action .. " action"
  local m = "User: " .. principal.arn .. " is not authorized to perform: " .. action .. on .. why
  if protocol == "ec2" then
    m = "You are not authorized to perform this operation. " .. m .. ". Encoded authorization failure message: " ..
      encoded(principal, action, resource, explicit)
  end
  return m
end

-- exempt: no permission is needed, and a Deny does not stop them
local EXEMPT = { ["sts:GetCallerIdentity"] = true, ["sts:GetSessionToken"] = true }

-- authorize(ctx, service, operation, input, protocol) -> nil when the
-- policy (if any) allows the request, else the AWS error to answer
function M.authorize(ctx, service, operation, input, protocol)
  local doc = current
  if not doc then return nil end
  if EXEMPT[M.action(service, operation)] then return nil end
  local base = PC.request(ctx, service, operation, input)
  for _, c in ipairs(M.checks(ctx, service, operation, input)) do
    local action, resource = c[1], c[2]
    local verdict = M.evaluate(doc, action, resource, PC.check(ctx, base, c))
    if verdict ~= "allow" then
      local d = DENIED[protocol] or DENIED.query
      local explicit = verdict == "deny"
      return { code = d[1], status = d[2], type = "Sender", action = action, resource = resource,
        explicit = explicit, message = message(protocol, ctx.principal, action, resource, explicit) }
    end
  end
  return nil
end

return M
