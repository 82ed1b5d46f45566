-- sandbox STS (global): who is calling, and sessions for IAM roles.
-- AssumeRole and AssumeRoleWithWebIdentity read the role from IAM's
-- records, evaluate its trust policy (principals, actions and its
-- conditions: sts:ExternalId, sts:RoleSessionName, aws:PrincipalArn,
-- aws:PrincipalAccount, aws:SourceIdentity for AssumeRole; for web
-- identity <issuer>:sub, <issuer>:aud, <issuer>:amr and
-- aws:FederatedProvider, the issuer without https://) and
-- issue session credentials through sandbox.auth, which then verifies
-- requests signed with them (ExpiredToken once they expire).
local PC = require "sandbox.policy_context"
local T = require "sandbox.policy_trust"
local auth = require "sandbox.auth"
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = { scope = "global", operations = {}, transitions = {} }
local ops = M.operations

local ACCOUNT = auth.ACCOUNT

local function as_list(v)
  if v == nil then return {} end
  if type(v) == "table" and not json.is_object(v) then return v end
  return { v }
end

-- trusts(doc, action, principal_fn, values) -> whether the trust policy
-- lets it in (sandbox.policy_trust: principals, actions and every condition
-- operator against the request's context keys)
local function trusts(doc, action, principal_fn, values)
  return T.allows(doc, action, principal_fn, values)
end

local function validation(ctx, value, field, constraint)
  ctx.error("ValidationError", string.format("1 validation error detected: Value '%s' at '%s' failed to " ..
    "satisfy constraint: %s", tostring(value), field, constraint))
end

local function check_session_name(ctx, name)
  if type(name) ~= "string" or #name < 2 or #name > 64 then
    validation(ctx, name, "roleSessionName", "Member must have length between 2 and 64")
  end
  if not name:match("^[%w+=,%.@_%-]+$") then
    validation(ctx, name, "roleSessionName", "Member must satisfy regular expression pattern: [\\w+=,.@-]*")
  end
end

-- role_of(ctx, arn) -> the IAM role record, or nil when the arn names none
local function role_of(ctx, arn)
  if type(arn) ~= "string" or #arn < 20 then
    validation(ctx, arn, "roleArn", "Member must have length greater than or equal to 20")
  end
  local account, path_name = arn:match("^arn:aws:iam::(%d+):role(/.+)$")
  if not account then ctx.error("ValidationError", arn .. " is invalid") end
  local name = path_name:match("([^/]+)$")
  local r = account == ACCOUNT and ctx:view("iam"):get("role", name)
  if r and r.Arn == arn then return r end
end

local function duration(ctx, input, role)
  local d = input.DurationSeconds and math.tointeger(tonumber(input.DurationSeconds)) or 3600
  if not d or d < 900 or d > 43200 then
    validation(ctx, input.DurationSeconds, "durationSeconds",
      "Member must have value " .. ((d or 0) < 900 and "greater than or equal to 900" or "less than or equal to 43200"))
  end
  if d > (role.MaxSessionDuration or 3600) then
    ctx.error("ValidationError", "The requested DurationSeconds exceeds the MaxSessionDuration set for this role.")
  end
  return d
end

local function check_policy(ctx, input)
  if input.Policy ~= nil then
    local doc = json.decode(input.Policy)
    if type(doc) ~= "table" then ctx.error("MalformedPolicyDocument", "The policy is not in the valid JSON format.") end
    if #input.Policy > 2048 then
      ctx.error("PackedPolicyTooLarge", "Packed policy consumes more than the allowed size.")
    end
    return math.max(1, #input.Policy * 100 // 2048)
  end
end

-- session(ctx, role, name, seconds) -> Credentials, AssumedRoleUser
local function session(role, name, seconds)
  local arn = string.format("arn:aws:sts::%s:assumed-role/%s/%s", ACCOUNT, role.RoleName, name)
  local id = role.RoleId .. ":" .. name
  local c = auth.issue({ arn = arn, user_id = id }, seconds)
  return { AccessKeyId = c.AccessKeyId, SecretAccessKey = c.SecretAccessKey, SessionToken = c.SessionToken,
           Expiration = c.Expiration },
         { AssumedRoleId = id, Arn = arn }
end

function ops.GetCallerIdentity(ctx)
  local p = ctx.principal or {}
  return { UserId = p.user_id or auth.USER_ID, Account = ACCOUNT, Arn = p.arn or auth.USER }
end

-- the role a caller's arn stands for (an assumed-role session stands for its role)
local function caller_names(p)
  local names = { [p.arn or ""] = true, ["arn:aws:iam::" .. ACCOUNT .. ":root"] = true, [ACCOUNT] = true }
  return names, (p.arn or ""):match("^arn:aws:sts::%d+:assumed%-role/([^/]+)/")
end

function ops.AssumeRole(ctx, input)
  check_session_name(ctx, input.RoleSessionName)
  local p = ctx.principal or { arn = auth.USER }
  local role = role_of(ctx, input.RoleArn)
  local denied = string.format("User: %s is not authorized to perform: sts:AssumeRole on resource: %s",
    p.arn, tostring(input.RoleArn))
  if not role then ctx.error("AccessDenied", denied, 403) end
  local names, session_role = caller_names(p)
  local ok = trusts(json.decode(role.AssumeRolePolicyDocument) or {}, "sts:AssumeRole", function(ptype, v)
    if ptype ~= "AWS" then return false end
    if v == "*" or names[v] then return true end
    local rn = v:match("^arn:aws:iam::%d+:role/.-([^/]+)$")
    return session_role ~= nil and rn == session_role
  end, { ["sts:ExternalId"] = input.ExternalId, ["aws:PrincipalArn"] = (PC.principal_arn(p)),
         ["aws:PrincipalAccount"] = ACCOUNT, ["sts:RoleSessionName"] = input.RoleSessionName,
         ["aws:SourceIdentity"] = input.SourceIdentity, ["aws:userid"] = p.user_id })
  if not ok then ctx.error("AccessDenied", denied, 403) end
  local seconds = duration(ctx, input, role)
  local packed = check_policy(ctx, input)
  local creds, user = session(role, input.RoleSessionName, seconds)
  ctx.target = role.RoleName
  return { Credentials = creds, AssumedRoleUser = user, PackedPolicySize = packed,
           SourceIdentity = input.SourceIdentity }
end

function ops.GetSessionToken(ctx, input)
  local p = ctx.principal or { arn = auth.USER, user_id = auth.USER_ID }
  if (p.arn or ""):find(":assumed-role/", 1, true) then
    ctx.error("AccessDenied", "Cannot call GetSessionToken with session credentials", 403)
  end
  local d = input.DurationSeconds and math.tointeger(tonumber(input.DurationSeconds)) or 43200
  if not d or d < 900 or d > 129600 then
    validation(ctx, input.DurationSeconds, "durationSeconds", "Member must have value between 900 and 129600")
  end
  local c = auth.issue({ arn = p.arn, user_id = p.user_id }, d)
  return { Credentials = { AccessKeyId = c.AccessKeyId, SecretAccessKey = c.SecretAccessKey,
                           SessionToken = c.SessionToken, Expiration = c.Expiration } }
end

-- the encoded authorization failure messages the sandbox's EC2 answers
-- with (sandbox.policy) read back; anything else is not one of ours
function ops.DecodeAuthorizationMessage(ctx, input)
  local text = require("sandbox.policy").decode(input.EncodedMessage)
  if not text then
    ctx.error("InvalidAuthorizationMessageException", "The encoded message is not a valid authorization message.")
  end
  return { DecodedMessage = text }
end

function ops.GetAccessKeyInfo(ctx, input)
  if type(input.AccessKeyId) ~= "string" or #input.AccessKeyId < 16 then
    validation(ctx, input.AccessKeyId, "accessKeyId", "Member must have length greater than or equal to 16")
  end
  return { Account = ACCOUNT }
end

-- --- web identity ---------------------------------------------------------

local function b64url(s)
  s = s:gsub("-", "+"):gsub("_", "/")
  s = s .. string.rep("=", (4 - #s % 4) % 4)
  return sys.b64decode(s)
end

-- claims(ctx, token) -> the decoded payload of a JWT, or InvalidIdentityToken
local function claims(ctx, token)
  if type(token) ~= "string" or #token < 4 or #token > 20000 then
    validation(ctx, "***", "webIdentityToken", "Member must have length between 4 and 20000")
  end
  local h, p, s = token:match("^([%w_%-]+)%.([%w_%-]+)%.([%w_%-]*)$")
  local header = h and b64url(h)
  local payload = p and b64url(p)
  local hdoc = header and json.decode(header)
  local doc = payload and json.decode(payload)
  if not s or type(hdoc) ~= "table" or type(doc) ~= "table" or json.is_array(doc) then
    ctx.error("InvalidIdentityToken", "The ID Token provided is not a valid JWT. (You may see this error if you " ..
      "sent an Access Token)")
  end
  return doc
end

function ops.AssumeRoleWithWebIdentity(ctx, input)
  check_session_name(ctx, input.RoleSessionName)
  local doc = claims(ctx, input.WebIdentityToken)
  local iss = type(doc.iss) == "string" and doc.iss or ""
  local host = iss:gsub("^https://", ""):gsub("/$", "")
  local iam = ctx:view("iam")
  local provider = host ~= "" and iam:get("oidc", host)
  if not provider then
    ctx.error("InvalidIdentityToken", "No OpenIDConnect provider found in your account for " .. iss)
  end
  local auds = as_list(doc.aud)
  local audience
  for _, a in ipairs(auds) do
    for _, c in ipairs(provider.ClientIDList) do
      if a == c then audience = a end
    end
  end
  if not audience then ctx.error("InvalidIdentityToken", "Incorrect token audience") end
  local now = ctx.now()
  if type(doc.exp) == "number" and doc.exp <= now then
    ctx.error("ExpiredTokenException", string.format("Token expired: current date/time %d must be before the " ..
      "expiration date/time %d", math.floor(now), math.floor(doc.exp)))
  end
  local role = role_of(ctx, input.RoleArn)
  local denied = "Not authorized to perform sts:AssumeRoleWithWebIdentity"
  if not role then ctx.error("AccessDenied", denied, 403) end
  local values = { [host .. ":sub"] = doc.sub, [host .. ":aud"] = audience, [host .. ":amr"] = doc.amr,
                   [host .. ":oaud"] = audience, ["aws:FederatedProvider"] = provider.Arn,
                   ["sts:RoleSessionName"] = input.RoleSessionName }
  local ok = trusts(json.decode(role.AssumeRolePolicyDocument) or {}, "sts:AssumeRoleWithWebIdentity",
    function(ptype, v) return ptype == "Federated" and v == provider.Arn end, values)
  if not ok then ctx.error("AccessDenied", denied, 403) end
  local seconds = duration(ctx, input, role)
  local packed = check_policy(ctx, input)
  local creds, user = session(role, input.RoleSessionName, seconds)
  ctx.target = role.RoleName
  return { Credentials = creds, SubjectFromWebIdentityToken = doc.sub, AssumedRoleUser = user,
           PackedPolicySize = packed, Provider = provider.Arn, Audience = audience }
end

return M
