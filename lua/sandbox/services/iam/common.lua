-- sandbox IAM: what the resource families share: ids, names, tags, paths,
-- Marker/MaxItems pagination, policy documents (parsed, validated and
-- URL-encoded as IAM answers them).
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

M.ACCOUNT = "123456789012"

local ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

-- id("AROA") -> "AROA" + 17 upper-case letters and digits, like IAM's unique ids
function M.id(prefix, seed)
  local bytes = seed and sys.digest("sha256", seed, "raw") or sys.random_bytes(17)
  local out = {}
  for i = 1, 17 do
    local b = bytes:byte(i) % #ALNUM + 1
    out[i] = ALNUM:sub(b, b)
  end
  return prefix .. table.concat(out)
end

function M.now(ctx) return math.floor(ctx.now()) end

function M.arn(kind, path, name)
  return string.format("arn:aws:iam::%s:%s%s%s", M.ACCOUNT, kind, path or "/", name)
end

-- RFC 3986 percent-encoding: how IAM returns policy documents
function M.urlencode(s)
  return (s:gsub("[^%w%-%._~]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- name(ctx, value, field, max): IAM's [\w+=,.@-]+ names
function M.check_name(ctx, value, field, max)
  max = max or 64
  if type(value) ~= "string" or value == "" then
    ctx.error("ValidationError", "1 validation error detected: Value at '" .. field ..
      "' failed to satisfy constraint: Member must not be null")
  end
  if #value > max then
    ctx.error("ValidationError", string.format("1 validation error detected: Value '%s' at '%s' failed to " ..
      "satisfy constraint: Member must have length less than or equal to %d", value, field, max))
  end
  if not value:match("^[%w+=,%.@_%-]+$") then
    ctx.error("ValidationError", string.format("1 validation error detected: Value '%s' at '%s' failed to " ..
      "satisfy constraint: Member must satisfy regular expression pattern: [\\w+=,.@-]+", value, field))
  end
end

-- path(ctx, value) -> "/" or a "/a/b/" path
function M.check_path(ctx, value, field)
  if value == nil then return "/" end
  if type(value) ~= "string" or #value > 512 or not value:match("^/[\33-\126]*$") or value:sub(-1) ~= "/" then
    ctx.error("ValidationError", string.format("The specified value for %s is invalid. It must begin and " ..
      "end with / and contain only alphanumeric characters and/or / characters.", field or "path"))
  end
  return value
end

-- tags(ctx, list) -> a validated array of {Key, Value}
function M.check_tags(ctx, tags)
  local out = json.array()
  if tags == nil then return out end
  if #tags > 50 then
    ctx.error("LimitExceeded", "Cannot exceed quota for TagsPerRole: 50.", 409)
  end
  local seen = {}
  for _, t in ipairs(tags) do
    local k = t.Key
    if type(k) ~= "string" or k == "" or #k > 128 or k:lower():find("^aws:") then
      ctx.error("InvalidInput", "Tag key '" .. tostring(k) .. "' is not valid.")
    end
    if seen[k] then ctx.error("InvalidInput", "Duplicate tag keys found. Please note that Tag keys are case insensitive.") end
    seen[k] = true
    out[#out + 1] = { Key = k, Value = t.Value or "" }
  end
  return out
end

-- merge_tags(existing, new) -> existing with new keys set (in place order kept)
function M.merge_tags(existing, new)
  local out = json.array()
  local by = {}
  for _, t in ipairs(existing or {}) do
    out[#out + 1] = { Key = t.Key, Value = t.Value }
    by[t.Key] = out[#out]
  end
  for _, t in ipairs(new) do
    if by[t.Key] then by[t.Key].Value = t.Value
    else
      out[#out + 1] = { Key = t.Key, Value = t.Value }
      by[t.Key] = out[#out]
    end
  end
  return out
end

function M.remove_tags(existing, keys)
  local drop = {}
  for _, k in ipairs(keys or {}) do drop[k] = true end
  local out = json.array()
  for _, t in ipairs(existing or {}) do
    if not drop[t.Key] then out[#out + 1] = t end
  end
  return out
end

-- append(ctx, list, value, max, message): value added at the end of list,
-- or LimitExceeded (409) with message when list holds max values already
function M.append(ctx, list, value, max, message)
  if #list >= max then ctx.error("LimitExceeded", message, 409) end
  list[#list + 1] = value
end

-- without(ctx, list, value, message) -> a copy of list without value, or
-- NoSuchEntity (404) with message when value is not in it
function M.without(ctx, list, value, message)
  local kept, found = json.array(), false
  for _, v in ipairs(list) do
    if v == value then found = true else kept[#kept + 1] = v end
  end
  if not found then ctx.error("NoSuchEntity", message, 404) end
  return kept
end

local function copy_array(a)
  local out = json.array()
  for i, v in ipairs(a or {}) do out[i] = v end
  return out
end
M.copy_array = copy_array

-- page(ctx, items, input, key) -> page, is_truncated, marker: Marker/MaxItems
-- over items sorted by key(item); the marker names the first item of the next page
function M.page(ctx, items, input, key)
  local max = input.MaxItems
  if max ~= nil then
    max = math.tointeger(tonumber(max))
    if not max or max < 1 or max > 1000 then
      ctx.error("ValidationError", "1 validation error detected: Value '" .. tostring(input.MaxItems) ..
        "' at 'maxItems' failed to satisfy constraint: Member must have value between 1 and 1000")
    end
  end
  max = max or 100
  local start = 1
  if input.Marker ~= nil and input.Marker ~= "" then
    local from = sys.b64decode(input.Marker)
    if not from then ctx.error("ValidationError", "Invalid Marker.") end
    start = #items + 1
    for i, item in ipairs(items) do
      if key(item) >= from then start = i break end
    end
  end
  local out = json.array()
  for i = start, math.min(#items, start + max - 1) do out[#out + 1] = items[i] end
  local nxt = items[start + max]
  if nxt then return out, true, sys.b64encode(key(nxt)) end
  return out, false, nil
end

-- --- policy documents --------------------------------------------------

local function as_list(v)
  if v == nil then return {} end
  if type(v) == "table" and not json.is_object(v) and (#v > 0 or json.is_array(v)) then return v end
  return { v }
end
M.as_list = as_list

local function malformed(ctx, msg) ctx.error("MalformedPolicyDocument", msg) end

-- size(text) -> a policy's size as IAM counts it against its quotas (white
-- space left out)
function M.size(text) return #(text:gsub("%s", "")) end

-- parse_policy(ctx, text, kind) -> document table; kind "trust" (a role's
-- AssumeRolePolicyDocument), "identity" (a managed policy: at most 6,144)
-- or "inline" (a role's inline policy: the role's 10,240 in all, checked
-- by PutRolePolicy)
function M.parse_policy(ctx, text, kind)
  if type(text) ~= "string" or text == "" then malformed(ctx, "Syntax errors in policy.") end
  if kind ~= "inline" and M.size(text) > (kind == "trust" and 2048 or 6144) then
    ctx.error("LimitExceeded", string.format("Cannot exceed quota for %s: %d.",
      kind == "trust" and "ACLSizePerRole" or "PolicySize", kind == "trust" and 2048 or 6144), 409)
  end
  local doc = json.decode(text)
  if type(doc) ~= "table" or json.is_array(doc) or #doc > 0 then
    malformed(ctx, "This policy contains invalid Json")
  end
  if doc.Version ~= nil and doc.Version ~= "2012-10-17" and doc.Version ~= "2008-10-17" then
    malformed(ctx, "The policy failed legacy parsing")
  end
  for k in pairs(doc) do
    if k ~= "Version" and k ~= "Statement" and k ~= "Id" then
      malformed(ctx, "Syntax errors in policy.")
    end
  end
  if doc.Statement == nil then malformed(ctx, "Syntax errors in policy.") end
  local statements = as_list(doc.Statement)
  if #statements == 0 then malformed(ctx, "Syntax errors in policy.") end
  for _, st in ipairs(statements) do
    if type(st) ~= "table" or json.is_array(st) then malformed(ctx, "Syntax errors in policy.") end
    if st.Effect ~= "Allow" and st.Effect ~= "Deny" then
      malformed(ctx, st.Effect == nil and "Missing required field Effect" or "Invalid effect: " .. tostring(st.Effect))
    end
    if st.Action == nil and st.NotAction == nil then malformed(ctx, "Missing required field Action") end
    for _, a in ipairs(as_list(st.Action or st.NotAction)) do
      if type(a) ~= "string" or not (a == "*" or a:match("^[%w%-]+:[%w%*%?%-]+$")) then
        malformed(ctx, "Actions/Conditions must be prefaced by a vendor, e.g., iam, sdb, ec2, etc.")
      end
    end
    if st.Condition ~= nil then -- an object of operators, each an object of condition keys
      if type(st.Condition) ~= "table" or json.is_array(st.Condition) or #st.Condition > 0 then
        malformed(ctx, "Syntax errors in policy.")
      end
      for _, block in pairs(st.Condition) do
        if type(block) ~= "table" or json.is_array(block) or #block > 0 then malformed(ctx, "Syntax errors in policy.") end
      end
    end
    if kind == "trust" then
      if st.Principal == nil and st.NotPrincipal == nil then malformed(ctx, "Missing required field Principal") end
      if st.Resource ~= nil or st.NotResource ~= nil then malformed(ctx, "Has prohibited field Resource") end
      local p = st.Principal or st.NotPrincipal
      if p ~= "*" then
        if type(p) ~= "table" or json.is_array(p) or #p > 0 then malformed(ctx, "Invalid principal in policy") end
        for ptype, vals in pairs(p) do
          if ptype ~= "AWS" and ptype ~= "Service" and ptype ~= "Federated" and ptype ~= "CanonicalUser" then
            malformed(ctx, "Invalid principal in policy: \"" .. tostring(ptype) .. "\"")
          end
          for _, v in ipairs(as_list(vals)) do
            if type(v) ~= "string" or v == "" then malformed(ctx, "Invalid principal in policy") end
            -- an OIDC provider a role trusts must exist in the account (IAM checks federated principals)
            local url = ptype == "Federated" and v:match("^arn:aws[%w-]*:iam::%d+:oidc%-provider/(.+)$")
            if url and not ctx.state:get("oidc", url) then
              malformed(ctx, "Invalid principal in policy: \"Federated\":\"" .. v .. "\"")
            end
          end
        end
      end
    else
      if st.Principal ~= nil or st.NotPrincipal ~= nil then
        malformed(ctx, "Policy document should not specify a principal.")
      end
      if st.Resource == nil and st.NotResource == nil then malformed(ctx, "Missing required field Resource") end
    end
  end
  return doc
end

return M
