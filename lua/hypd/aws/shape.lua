-- hypd.aws.shape: what every AWS protocol shares: resolving the shape
-- references of a generated model (lua/hypd/aws/models/*.lua, described in
-- mk/aws_models.py), checking parameters against them, timestamps,
-- scalars, percent-encoding and UUIDs.
local errors = require "hypd.errors"
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

local SCALAR = {
  string = true, integer = true, long = true, boolean = true, timestamp = true,
  blob = true, double = true, float = true, document = true,
}
M.SCALAR = SCALAR
local NOTRAITS = {}

-- ref(r) -> head, traits: for a list member, map key or value reference
function M.ref(r)
  if type(r) == "string" then return r, NOTRAITS end
  return r[1], r
end

-- member(m) -> head, traits: for a structure member { "Name", head, ... }
function M.member(m) return m[2], m end

-- kind(model, head) -> type name, shape table (nil for scalars)
function M.kind(model, head)
  if SCALAR[head] then return head, nil end
  local shape = model.shapes[head]
  if not shape then error("model has no shape '" .. tostring(head) .. "'") end
  return shape[1], shape
end

local index_cache = setmetatable({}, { __mode = "k" })

-- index(shape) -> { Name = member } for a structure shape (cached)
function M.index(shape)
  local idx = index_cache[shape]
  if not idx then
    idx = {}
    for _, m in ipairs(shape[2]) do idx[m[1]] = m end
    index_cache[shape] = idx
  end
  return idx
end

-- present(v) -> whether a parameter value counts as given
function M.present(v) return v ~= nil and v ~= json.null end

-- --- timestamps ---------------------------------------------------------

local function days_from_civil(y, m, d)
  y = m <= 2 and y - 1 or y
  local era = y // 400
  local yoe = y - era * 400
  local doy = (153 * (m > 2 and m - 3 or m + 9) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468
end

local function civil_from_days(z)
  z = z + 719468
  local era = z // 146097
  local doe = z - era * 146097
  local yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  local doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  local mp = (5 * doy + 2) // 153
  local d = doy - (153 * mp + 2) // 5 + 1
  local m = mp < 10 and mp + 3 or mp - 9
  return yoe + era * 400 + (m <= 2 and 1 or 0), m, d
end

local MONTHS = { Jan = 1, Feb = 2, Mar = 3, Apr = 4, May = 5, Jun = 6, Jul = 7, Aug = 8, Sep = 9, Oct = 10,
  Nov = 11, Dec = 12 }
local MONTH_NAMES = { "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec" }
local DAY_NAMES = { "Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed" }

local function split_number(v)
  local s = math.floor(v)
  local us = math.floor((v - s) * 1e6 + 0.5)
  if us >= 1000000 then s, us = s + 1, us - 1000000 end
  return math.tointeger(s) or s, us
end

-- to_epoch(v) -> seconds (integer), microseconds; or nil for a value that
-- is no timestamp. v: epoch seconds (number or numeric string), ISO 8601
-- ("2023-11-14T22:13:20.5Z", "+01:00" offsets, a date alone) or RFC 1123.
function M.to_epoch(v)
  if type(v) == "number" then
    if v ~= v or v == math.huge or v == -math.huge then return nil end
    return split_number(v)
  end
  if type(v) ~= "string" then return nil end
  local n = tonumber(v)
  if n and v:match("^%s*[-+]?[%d.]+[eE]?[-+]?%d*%s*$") then return split_number(n) end
  local y, mo, d, rest = v:match("^(%d%d%d%d)-(%d%d)-(%d%d)(.*)$")
  local h, mi, s, frac, zone = 0, 0, 0, "", ""
  if y then
    if rest ~= "" then
      h, mi, s, frac, zone = rest:match("^[Tt ](%d%d):(%d%d):?(%d*)%.?(%d*)(.*)$")
      if not h then return nil end
      if s == "" then s = 0 end
    end
  else
    -- RFC 1123: "Tue, 14 Nov 2023 22:13:20 GMT"
    local mon
    d, mon, y, h, mi, s, zone = v:match("^%a+,%s+(%d+)%s+(%a+)%s+(%d+)%s+(%d+):(%d+):(%d+)%s*(.*)$")
    mo = MONTHS[mon or ""]
    if not mo then return nil end
    if zone == "GMT" or zone == "UTC" then zone = "Z" end
  end
  local offset = 0
  if zone ~= "" and zone ~= "Z" and zone ~= "z" then
    local sign, oh, om = zone:match("^([-+])(%d%d):?(%d%d)$")
    if not sign then return nil end
    offset = (tonumber(oh) * 3600 + tonumber(om) * 60) * (sign == "-" and -1 or 1)
  end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  h, mi, s = tonumber(h), tonumber(mi), tonumber(s)
  if mo < 1 or mo > 12 or d < 1 or d > 31 or h > 23 or mi > 59 or s > 60 then return nil end
  local us = frac ~= "" and math.tointeger(tonumber((frac .. "000000"):sub(1, 6))) or 0
  return days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + s - offset, us
end

local function civil(secs)
  local days = secs // 86400
  local rem = secs - days * 86400
  local y, m, d = civil_from_days(days)
  return y, m, d, rem // 3600, rem % 3600 // 60, rem % 60, days
end

-- iso(secs, us, digits) -> "2023-11-14T22:13:20Z", with a fraction of
-- `digits` (3 or 6) digits when it is not zero at that precision
function M.iso(secs, us, digits)
  local y, m, d, h, mi, s = civil(secs)
  local out = string.format("%04d-%02d-%02dT%02d:%02d:%02d", y, m, d, h, mi, s)
  local f = digits == 3 and us // 1000 or us
  if f > 0 then out = out .. string.format(digits == 3 and ".%03d" or ".%06d", f) end
  return out .. "Z"
end

-- rfc822(secs) -> "Tue, 14 Nov 2023 22:13:20 GMT"
function M.rfc822(secs)
  local y, m, d, h, mi, s, days = civil(secs)
  return string.format("%s, %02d %s %04d %02d:%02d:%02d GMT", DAY_NAMES[days % 7 + 1], d, MONTH_NAMES[m], y, h, mi, s)
end

-- format_timestamp(v, format) -> wire value of an input timestamp, or nil
-- format: "iso8601" (microseconds when given), "rfc822", "unixtimestamp"
-- (a number: integer seconds, or seconds with a fraction)
function M.format_timestamp(v, format)
  local secs, us = M.to_epoch(v)
  if not secs then return nil end
  if format == "rfc822" then return M.rfc822(secs) end
  if format == "unixtimestamp" then
    if us == 0 then return secs end
    return secs + us / 1e6
  end
  return M.iso(secs, us, 6)
end

-- output_timestamp(v) -> "2023-11-14T22:13:20.123Z" (milliseconds only when
-- not zero) for any timestamp a service sends; the text itself when it is
-- no timestamp hypd can read
function M.output_timestamp(v)
  local secs, us = M.to_epoch(v)
  if not secs then return v end
  return M.iso(secs, us, 3)
end

-- --- scalars ------------------------------------------------------------

-- number_text(v) -> a number as services write it: "1", "1.5"
function M.number_text(v)
  if math.type(v) == "integer" then return string.format("%d", v) end
  if v == math.huge then return "Infinity" end
  if v == -math.huge then return "-Infinity" end
  if v ~= v then return "NaN" end
  if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%.1f", v) end
  for _, fmt in ipairs { "%.15g", "%.16g", "%.17g" } do
    local s = string.format(fmt, v)
    if tonumber(s) == v then return s end
  end
end

-- parse_scalar(typ, text) -> Lua value of a scalar the service wrote as text
-- (XML, headers, query strings)
function M.parse_scalar(typ, text, traits)
  if typ == "string" then
    if traits and traits.jsonvalue then
      return json.decode(sys.b64decode(text) or "") or text
    end
    return text
  elseif typ == "integer" or typ == "long" then
    return math.tointeger(tonumber(text)) or tonumber(text) or text
  elseif typ == "double" or typ == "float" then
    if text == "Infinity" then return math.huge end
    if text == "-Infinity" then return -math.huge end
    if text == "NaN" then return 0 / 0 end
    local n = tonumber(text)
    return n and n + 0.0 or text
  elseif typ == "boolean" then
    return text == "true"
  elseif typ == "timestamp" then
    return M.output_timestamp(text)
  elseif typ == "blob" then
    return sys.b64decode((text:gsub("%s", ""))) or text
  end
  return text
end

-- --- encoding -------------------------------------------------------------

local function hex(c) return string.format("%%%02X", c:byte()) end

-- uri_encode(s, keep_slash) -> RFC 3986 percent-encoding (unreserved kept;
-- "/" kept too when keep_slash, for greedy labels)
function M.uri_encode(s, keep_slash)
  return (s:gsub(keep_slash and "[^%w%-%._~/]" or "[^%w%-%._~]", hex))
end

-- form_encode(s) -> application/x-www-form-urlencoded ("+" for spaces)
function M.form_encode(s)
  return (s:gsub("[^%w%-%._~ ]", hex):gsub(" ", "+"))
end

-- uuid4() -> a random UUID (version 4)
function M.uuid4()
  local b = { sys.random_bytes(16):byte(1, 16) }
  b[7] = (b[7] & 0x0f) | 0x40
  b[9] = (b[9] & 0x3f) | 0x80
  return string.format("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
    table.unpack(b))
end

-- --- validation -----------------------------------------------------------

local function bad(path, rule)
  return errors.new("VALIDATION", "invalid parameter " .. path .. ": " .. rule, { field = path })
end

local function join(path, name) return path == "" and name or path .. "." .. name end

local function is_sequence(v)
  local n = 0
  for k in pairs(v) do
    if math.type(k) ~= "integer" or k < 1 then return false end
    n = n + 1
  end
  return n == #v
end

local check

local function check_structure(model, shape, v, path)
  if type(v) ~= "table" or json.is_array(v) and next(v) ~= nil then
    return bad(path, "must be a table of members")
  end
  local idx = M.index(shape)
  for k, x in pairs(v) do
    if type(k) ~= "string" then return bad(path, "has a key that is not a member name: " .. tostring(k)) end
    local m = idx[k]
    if not m then
      local names = {}
      for _, mm in ipairs(shape[2]) do names[#names + 1] = mm[1] end
      return bad(join(path, k), "unknown member (valid: " .. table.concat(names, ", ") .. ")")
    end
    if M.present(x) then
      local err = check(model, m[2], x, join(path, k))
      if err then return err end
    end
  end
  for _, name in ipairs(shape.required or NOTRAITS) do
    if not M.present(v[name]) then return bad(join(path, name), "is required") end
  end
end

check = function(model, head, v, path)
  local typ, shape = M.kind(model, head)
  local t = type(v)
  if typ == "structure" then
    return check_structure(model, shape, v, path)
  elseif typ == "list" then
    if t ~= "table" or not is_sequence(v) then return bad(path, "must be a list") end
    local item = M.ref(shape[2])
    for i, x in ipairs(v) do
      local err = check(model, item, x, path .. "[" .. i .. "]")
      if err then return err end
    end
  elseif typ == "map" then
    if t ~= "table" or json.is_array(v) and next(v) ~= nil then return bad(path, "must be a map") end
    local value = M.ref(shape[3])
    for k, x in pairs(v) do
      if type(k) ~= "string" then return bad(path, "map keys must be strings") end
      local err = check(model, value, x, path .. "[" .. string.format("%q", k) .. "]")
      if err then return err end
    end
  elseif typ == "string" then
    if t ~= "string" then return bad(path, "must be a string, not a " .. t) end
  elseif typ == "integer" or typ == "long" then
    if t ~= "number" or not math.tointeger(v) then return bad(path, "must be an integer") end
  elseif typ == "double" or typ == "float" then
    if t ~= "number" then return bad(path, "must be a number, not a " .. t) end
  elseif typ == "boolean" then
    if t ~= "boolean" then return bad(path, "must be a boolean, not a " .. t) end
  elseif typ == "timestamp" then
    if not M.to_epoch(v) then return bad(path, "must be a timestamp (ISO 8601 text or epoch seconds)") end
  elseif typ == "blob" then
    if t ~= "string" then return bad(path, "must be a string of bytes, not a " .. t) end
  end
end

-- validate(model, input_shape_name, params) -> nil, or a VALIDATION error
-- naming the field (Filters[1].Name) and the rule broken
function M.validate(model, input, params)
  if type(params) ~= "table" then return bad("params", "must be a table") end
  if not input then
    if next(params) ~= nil then return bad(tostring(next(params)), "unknown member (the operation takes none)") end
    return nil
  end
  return check(model, input, params, "")
end

return M
