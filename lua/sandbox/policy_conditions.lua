-- sandbox.policy_conditions: a statement's Condition block, evaluated as IAM
-- evaluates it against a request context.
--
--   local C = require "sandbox.policy_conditions"
--   C.holds(condition, context) -> bool
--   C.context(pairs) -> context: keys lower-cased (IAM's condition keys are
--     case-insensitive); a value is a string, number, boolean or a list of
--     strings (a multivalued key such as aws:TagKeys)
--   C.substitute(s, context) -> s with ${key} policy variables replaced
--
-- AWS's semantics (IAM JSON policy elements: Condition operators):
-- - every operator of the block must hold, and every key of an operator
--   (AND); a key's list of values holds when any value matches (OR); a
--   negated operator (StringNotEquals, ArnNotLike, ...) holds when the
--   request's value matches none of them;
-- - a key missing from the request context makes the condition false,
--   except for a negated operator (true), ...IfExists (true) and Null
--   (which tests exactly that: "true" holds when the key is absent);
-- - ForAllValues: every value of the request's key matches some policy
--   value (also true when the key is absent or empty); ForAnyValue: at
--   least one does (false when the key is absent);
-- - operators: String{Equals,NotEquals,EqualsIgnoreCase,NotEqualsIgnoreCase,
--   Like,NotLike}, Numeric{Equals,NotEquals,LessThan,LessThanEquals,
--   GreaterThan,GreaterThanEquals}, Date{... the same six}, Bool,
--   BinaryEquals, IpAddress, NotIpAddress, Arn{Equals,Like,NotEquals,NotLike},
--   Null, each (Null aside) with IfExists; an operator IAM does not know
--   makes the condition false, so its statement does not apply;
-- - policy variables (${aws:username}, ${aws:PrincipalAccount}, and ${*},
--   ${?}, ${$} for the literal characters) in String and Arn values; a
--   variable the context lacks makes that value match nothing.
local json = require "hypd.json"
local policy_values = require "sandbox.policy_values"

local M = {}

local is_list, as_list = policy_values.is_list, policy_values.as_list

function M.context(t)
  local out = {}
  for k, v in pairs(t or {}) do
    if v ~= nil and v ~= json.null then out[tostring(k):lower()] = v end
  end
  return out
end

-- glob(pattern, s): IAM's * (any run) and ? (one character), case-sensitive
local function glob(pattern, s)
  local lp = pattern:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".")
  return s:match("^" .. lp .. "$") ~= nil
end

local LITERAL = { ["*"] = "\1", ["?"] = "\2", ["$"] = "$" }

-- substitute(s, ctx) -> s with its policy variables replaced, or nil when
-- one names a key the context lacks (the value then matches nothing);
-- like: the literal * and ? of ${*} and ${?} stay literal in a Like match
function M.substitute(s, ctx, like)
  local missing = false
  local out = s:gsub("%${([^}]*)}", function(name)
    if LITERAL[name] then return LITERAL[name] end
    local v = ctx[name:lower()]
    if type(v) == "table" or v == nil then missing = true return "" end
    return tostring(v)
  end)
  if missing then return nil end
  if like then return out end
  return (out:gsub("\1", "*"):gsub("\2", "?"))
end

local function like(pattern, s)
  local lp = pattern:gsub("[%^%$%(%)%%%.%[%]%+%-]", "%%%0"):gsub("%*", ".*"):gsub("%?", ".")
  lp = lp:gsub("\1", "%%*"):gsub("\2", "%%?")
  return s:match("^" .. lp .. "$") ~= nil
end

local function arn_parts(s)
  local a, p, svc, r, acct, res = s:match("^([^:]*):([^:]*):([^:]*):([^:]*):([^:]*):(.*)$")
  if a then return { a, p, svc, r, acct, res } end
end

-- arn_like(pattern, s): each of the six colon-separated parts on its own
local function arn_like(pattern, s)
  local pp, sp = arn_parts(pattern), arn_parts(s)
  if not pp or not sp then return false end
  for i = 1, 6 do
    if not like(pp[i], sp[i]) then return false end
  end
  return true
end

local number = tonumber

-- date(v) -> epoch seconds: a number, or ISO 8601 (2026-01-31T12:00:00Z, or a date alone)
local function date(v)
  if type(v) == "number" then return v end
  if type(v) ~= "string" then return nil end
  if v:match("^%d+$") then return tonumber(v) end
  local y, mo, d, rest = v:match("^(%d%d%d%d)%-(%d%d)%-(%d%d)(.*)$")
  if not y then return nil end
  local h, mi, s = rest:match("^T(%d%d):(%d%d):?(%d?%d?)")
  -- days from the civil date (Howard Hinnant's algorithm), UTC
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  if mo <= 2 then y = y - 1 end
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (mo + (mo > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  local days = era * 146097 + doe - 719468
  return days * 86400 + (tonumber(h) or 0) * 3600 + (tonumber(mi) or 0) * 60 + (tonumber(s) or 0)
end

local function ipv4(s)
  local a, b, c, d = tostring(s):match("^(%d+)%.(%d+)%.(%d+)%.(%d+)$")
  if not a then return nil end
  return ((tonumber(a) * 256 + tonumber(b)) * 256 + tonumber(c)) * 256 + tonumber(d)
end

local function in_cidr(cidr, ip)
  local base, bits = tostring(cidr):match("^([%d%.]+)/(%d+)$")
  base, bits = base or cidr, tonumber(bits) or 32
  local b, v = ipv4(base), ipv4(ip)
  if not b or not v then return false end
  local size = 2 ^ (32 - bits)
  return b // size == v // size
end

local function compare(test)
  return function(conv)
    return function(pv, v)
      local a, b = conv(v), conv(pv)
      return a ~= nil and b ~= nil and test(a, b)
    end
  end
end
local eq, lt, le = compare(function(a, b) return a == b end), compare(function(a, b) return a < b end),
  compare(function(a, b) return a <= b end)
local gt, ge = compare(function(a, b) return a > b end), compare(function(a, b) return a >= b end)

-- base operator -> { match(policy_value, request_value), negated, takes policy variables }
local OPS = {
  StringEquals = { function(pv, v) return pv == v end, false, true },
  StringNotEquals = { function(pv, v) return pv == v end, true, true },
  StringEqualsIgnoreCase = { function(pv, v) return pv:lower() == v:lower() end, false, true },
  StringNotEqualsIgnoreCase = { function(pv, v) return pv:lower() == v:lower() end, true, true },
  StringLike = { like, false, "like" },
  StringNotLike = { like, true, "like" },
  NumericEquals = { eq(number), false }, NumericNotEquals = { eq(number), true },
  NumericLessThan = { lt(number), false }, NumericLessThanEquals = { le(number), false },
  NumericGreaterThan = { gt(number), false }, NumericGreaterThanEquals = { ge(number), false },
  DateEquals = { eq(date), false }, DateNotEquals = { eq(date), true },
  DateLessThan = { lt(date), false }, DateLessThanEquals = { le(date), false },
  DateGreaterThan = { gt(date), false }, DateGreaterThanEquals = { ge(date), false },
  Bool = { function(pv, v) return pv:lower() == v:lower() end, false },
  BinaryEquals = { function(pv, v) return pv == v end, false },
  IpAddress = { in_cidr, false }, NotIpAddress = { in_cidr, true },
  ArnEquals = { arn_like, false, "like" }, ArnLike = { arn_like, false, "like" },
  ArnNotEquals = { arn_like, true, "like" }, ArnNotLike = { arn_like, true, "like" },
}
M.OPERATORS = OPS

local function text(v)
  if type(v) == "boolean" then return v and "true" or "false" end
  if type(v) == "number" then return tostring(v) end
  return type(v) == "string" and v or nil
end

-- parse(name) -> base, set ("ForAllValues" | "ForAnyValue" | nil), ifexists
local function parse(name)
  local set, rest = tostring(name):match("^(For%a+Values?):(.+)$")
  if set and set ~= "ForAllValues" and set ~= "ForAnyValue" then return nil end
  rest = rest or tostring(name)
  local base = rest:match("^(.-)IfExists$")
  if base and base ~= "" and base ~= "Null" then return base, set, true end
  return rest, set, false
end

-- key_holds(op, set, ifexists, actual, wanted, ctx) -> bool
local function key_holds(base, set, ifexists, actual, wanted, ctx)
  local values = {}
  for _, v in ipairs(type(actual) == "table" and actual or { actual }) do
    local s = text(v)
    if s then values[#values + 1] = s end
  end
  local present = actual ~= nil and #values > 0
  if base == "Null" then
    for _, w in ipairs(wanted) do
      if (text(w) or ""):lower() == "true" and not present then return true end
      if (text(w) or ""):lower() == "false" and present then return true end
    end
    return false
  end
  local spec = OPS[base]
  if not spec then return false end
  local match, negated, vars = spec[1], spec[2], spec[3]
  if not present then
    if set == "ForAllValues" or ifexists then return true end
    if set == "ForAnyValue" then return false end
    return negated
  end
  local pvs = {}
  for _, w in ipairs(wanted) do
    local s = text(w)
    if s and vars then s = M.substitute(s, ctx, vars == "like") end
    if s then pvs[#pvs + 1] = s end
  end
  -- one(v): this request value satisfies the operator (a negated one: it
  -- matches none of the policy's values)
  local function one(v)
    local hit = false
    for _, pv in ipairs(pvs) do
      if match(pv, v) then hit = true break end
    end
    if negated then return not hit end
    return hit
  end
  if set == "ForAllValues" then
    for _, v in ipairs(values) do
      if not one(v) then return false end
    end
    return true
  end
  if set == "ForAnyValue" or not negated then
    for _, v in ipairs(values) do
      if one(v) then return true end
    end
    return false
  end
  -- a negated operator on a single- (or, without a set prefix, multi-)
  -- valued key: no value of the request matches any of the policy's
  for _, v in ipairs(values) do
    if not one(v) then return false end
  end
  return true
end

-- holds(condition, ctx) -> whether every operator and key of the block holds
function M.holds(condition, ctx)
  if condition == nil or condition == json.null then return true end
  if type(condition) ~= "table" then return false end
  ctx = ctx or {}
  for name, block in pairs(condition) do
    local base, set, ifexists = parse(name)
    if not base or (base ~= "Null" and not OPS[base]) then return false end
    if type(block) ~= "table" or is_list(block) then return false end
    for key, wanted in pairs(block) do
      if not key_holds(base, set, ifexists, ctx[tostring(key):lower()], as_list(wanted), ctx) then return false end
    end
  end
  return true
end

M.glob = glob

return M
