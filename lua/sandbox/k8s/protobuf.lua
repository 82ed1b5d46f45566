-- sandbox.k8s.protobuf: request bodies sent as
-- application/vnd.kubernetes.protobuf (kubectl 1.32+ sends its imperative
-- creates, and its reviews, that way), decoded into the JSON object the
-- API server would have read from application/json.
--
-- The wire: the magic "k8s\0", then a runtime.Unknown { typeMeta
-- {apiVersion, kind}, raw, contentEncoding, contentType } whose raw is the
-- object's message. The messages are the descriptors generated from the
-- upstream generated.proto files and Go struct tags (mk/k8s_proto.py ->
-- sandbox.k8s.proto.*): field names are the JSON names, a zero scalar of an
-- omitempty non-pointer Go field is left out (as Go's JSON encoder leaves
-- it out), inline fields join their parent, and the special messages
-- (Time, MicroTime, Duration, Quantity, IntOrString, RawExtension,
-- FieldsV1, list wrappers) become their JSON forms.
--
-- decode(body) -> object | nil, why. message(full_name) -> descriptor |
-- nil. for_kind(apiVersion, kind) -> full message name | nil.
local json = require "hypd.json"
local sys = require "hypd.sys"

local M = {}

local INDEX = require "sandbox.k8s.proto.index"
local loaded = {}

-- package(name) -> the generated module of a proto package | nil
local function package(name)
  if loaded[name] == nil then
    local mod = INDEX[name]
    loaded[name] = mod and require("sandbox.k8s.proto." .. mod) or false
  end
  return loaded[name] or nil
end

function M.message(full)
  local pkg, name = full:match("^(.*)%.([^.]+)$")
  local p = pkg and package(pkg)
  return p and p.messages[name]
end

-- for_kind(apiVersion, kind) -> the full name of the message of a
-- built-in kind: "apps/v1" -> k8s.io.api.apps.v1; the core group's "v1"
-- -> k8s.io.api.core.v1; options kinds (DeleteOptions...) live in meta/v1
function M.for_kind(api_version, kind)
  local group, version = (api_version or ""):match("^(.-)/?([^/]+)$")
  if not version or not kind or kind == "" then return nil end
  local short = group == "" and "core" or group:match("^([^.]+)")
  if not short then return nil end -- a group that starts with '.' (".apps/v1")
  local full = "k8s.io.api." .. short .. "." .. version .. "." .. kind
  if M.message(full) then return full end
  full = "k8s.io.apimachinery.pkg.apis.meta.v1." .. kind
  if M.message(full) then return full end
  return nil
end

-- the wire --------------------------------------------------------------

local function varint(s, i)
  local v, shift = 0, 0
  while true do
    local b = s:byte(i)
    if not b then error("truncated varint", 0) end
    i = i + 1
    v = v | ((b & 0x7f) << shift)
    if b < 0x80 then return v, i end
    shift = shift + 7
    if shift > 63 then error("varint too long", 0) end
  end
end

-- fields(s) -> iterator of (number, wire type, value): a varint's integer,
-- a fixed's raw bytes, a length-delimited field's bytes
local function fields(s)
  local i = 1
  return function()
    if i > #s then return nil end
    local key
    key, i = varint(s, i)
    local num, wt = key >> 3, key & 7
    local v
    if wt == 0 then
      v, i = varint(s, i)
    elseif wt == 1 then
      if i + 7 > #s then error("truncated fixed64", 0) end
      v, i = s:sub(i, i + 7), i + 8
    elseif wt == 2 then
      local len
      len, i = varint(s, i)
      if len < 0 or i + len - 1 > #s then error("truncated field " .. num, 0) end
      v, i = s:sub(i, i + len - 1), i + len
    elseif wt == 5 then
      if i + 3 > #s then error("truncated fixed32", 0) end
      v, i = s:sub(i, i + 3), i + 4
    else
      error("unsupported wire type " .. wt .. " for field " .. num, 0)
    end
    return num, wt, v
  end
end

local VARINTS = { int32 = true, int64 = true, uint32 = true, uint64 = true, bool = true, sint32 = true, sint64 = true }
local FIXED = { fixed32 = "<I4", sfixed32 = "<i4", float = "<f", fixed64 = "<I8", sfixed64 = "<i8", double = "<d" }

local function scalar(ty, wt, v)
  if VARINTS[ty] then
    if wt ~= 0 then error("field of type " .. ty .. " with wire type " .. wt, 0) end
    if ty == "bool" then return v ~= 0 end
    if ty == "int32" then v = ((v & 0xffffffff) ~ 0x80000000) - 0x80000000 end
    if ty == "uint32" then v = v & 0xffffffff end
    if ty == "sint32" or ty == "sint64" then v = (v >> 1) ~ -(v & 1) end
    return v
  end
  local f = FIXED[ty]
  if f then return (string.unpack(f, v)) end
  if wt ~= 2 then error("field of type " .. ty .. " with wire type " .. wt, 0) end
  if ty == "bytes" then return sys.b64encode(v) end
  return v
end

-- packed(ty, bytes) -> the values of a packed repeated scalar field
local function packed(ty, s)
  local out, i = {}, 1
  local f = FIXED[ty]
  while i <= #s do
    local v
    if f then
      local n = string.packsize(f)
      v, i = s:sub(i, i + n - 1), i + n
      out[#out + 1] = scalar(ty, ty:match("64") and 1 or 5, v)
    else
      v, i = varint(s, i)
      out[#out + 1] = scalar(ty, 0, v)
    end
  end
  return out
end

-- JSON forms of the special messages --------------------------------------

local GO_ZERO = -62135596800 -- time.Time{}.Unix(): the zero time, JSON null

local function rfc3339(sec, nanos, micro)
  local base = os.date("!%Y-%m-%dT%H:%M:%S", sec)
  if micro then return base .. string.format(".%06dZ", (nanos or 0) // 1000) end
  return base .. "Z"
end

-- go_duration(ns) -> time.Duration.String(): "1h0m0s", "1.5s", "300ms"
local function go_duration(d)
  if d == 0 then return "0s" end
  local neg = d < 0
  if neg then d = -d end
  local function frac(v, unit)
    local whole, rest = v // unit, v % unit
    if rest == 0 then return tostring(whole) end
    local digits = #tostring(unit) - 1
    return (string.format("%d.%0" .. digits .. "d", whole, rest):gsub("0+$", ""))
  end
  local s
  if d < 1000 then s = d .. "ns"
  elseif d < 1000000 then s = frac(d, 1000) .. "µs"
  elseif d < 1000000000 then s = frac(d, 1000000) .. "ms"
  else
    local h = d // 3600000000000
    local rest = d % 3600000000000
    local m = rest // 60000000000
    local sec = frac(rest % 60000000000, 1000000000) .. "s"
    if h > 0 then s = h .. "h" .. m .. "m" .. sec
    elseif m > 0 then s = m .. "m" .. sec
    else s = sec end
  end
  return (neg and "-" or "") .. s
end
M.go_duration = go_duration

local decode_message

-- special(kind, s) -> the JSON value of a special message's bytes (nil: omitted)
local function special(kind, s, desc)
  local raw = {}
  for num, wt, v in fields(s) do raw[num] = { wt, v } end
  local function int(n) return raw[n] and raw[n][1] == 0 and raw[n][2] or nil end
  local function bytes(n) return raw[n] and raw[n][1] == 2 and raw[n][2] or nil end
  if kind == "time" or kind == "microtime" then
    local sec = int(1)
    if not sec or sec == GO_ZERO then return nil end
    return rfc3339(sec, int(2), kind == "microtime")
  elseif kind == "duration" then
    return go_duration(int(1) or 0)
  elseif kind == "quantity" then
    return bytes(1) or "0"
  elseif kind == "intorstring" then
    if (int(1) or 0) == 1 then return bytes(3) or "" end
    return scalar("int32", 0, int(2) or 0)
  elseif kind == "raw" or kind == "fieldsv1" then
    local b = bytes(1)
    if not b or b == "" then return nil end
    local v = json.decode(b)
    if v == nil then error("raw is not JSON", 0) end
    return v
  elseif kind == "list" then
    local out = json.array()
    local f = desc[1]
    local ty = f[2]
    for num, wt, v in fields(s) do
      if num == 1 then
        if wt == 2 and ty ~= "string" and ty ~= "bytes" and (VARINTS[ty] or FIXED[ty]) then
          for _, x in ipairs(packed(ty, v)) do out[#out + 1] = x end
        elseif M.message(ty) then
          out[#out + 1] = decode_message(ty, v)
        else
          out[#out + 1] = scalar(ty, wt, v)
        end
      end
    end
    return out
  end
  error("unknown special message " .. kind, 0)
end

local function is_zero(v)
  return v == "" or v == 0 or v == false
end

-- value(ty, wt, v) -> the JSON value of one occurrence of a field
local function value(ty, wt, v)
  local desc = M.message(ty)
  if desc then
    if wt ~= 2 then error("message " .. ty .. " with wire type " .. wt, 0) end
    if desc.special then return special(desc.special, v, desc) end
    return decode_message(ty, v)
  end
  if ty:match("^k8s%.") then error("no descriptor for " .. ty, 0) end
  return scalar(ty, wt, v)
end

-- decode_message(full, bytes) -> a JSON object
decode_message = function(full, s, into)
  local desc = M.message(full)
  local out = into or json.object()
  for num, wt, v in fields(s) do
    local f = desc[num]
    if f then
      local name, ty, flags = f[1], f[2], f[3]
      if ty == "map" then
        local key, val
        for n2, w2, v2 in fields(v) do
          if n2 == 1 then key = scalar("string", w2, v2) elseif n2 == 2 then val = value(f[4], w2, v2) end
        end
        if val == nil then -- a value left out is the type's zero value
          local vd = M.message(f[4])
          if vd then val = vd.special and special(vd.special, "", vd) or json.object()
          elseif f[4] == "string" or f[4] == "bytes" then val = ""
          else val = f[4] == "bool" and false or 0 end
        end
        out[name] = out[name] or json.object()
        out[name][key or ""] = val
      elseif flags:find("r", 1, true) then
        out[name] = out[name] or json.array()
        if wt == 2 and (VARINTS[ty] or FIXED[ty]) then
          for _, x in ipairs(packed(ty, v)) do out[name][#out[name] + 1] = x end
        else
          local x = value(ty, wt, v)
          if x ~= nil then out[name][#out[name] + 1] = x end
        end
      elseif flags:find("i", 1, true) then
        decode_message(ty, v, out)
      else
        local x = value(ty, wt, v)
        if x ~= nil and is_zero(x) and flags:find("e", 1, true) and not flags:find("p", 1, true) then x = nil end
        out[name] = x
      end
    end
  end
  return out
end

-- unknown(body) -> {apiVersion, kind, raw, contentEncoding, contentType} | nil, why
function M.unknown(body)
  if type(body) ~= "string" or body:sub(1, 4) ~= "k8s\0" then return nil, "no k8s protobuf envelope" end
  local ok, u = pcall(function()
    local out = {}
    for num, wt, v in fields(body:sub(5)) do
      if wt == 2 then
        if num == 1 then
          for n2, w2, v2 in fields(v) do
            if w2 == 2 and n2 == 1 then out.apiVersion = v2 elseif w2 == 2 and n2 == 2 then out.kind = v2 end
          end
        elseif num == 2 then out.raw = v
        elseif num == 3 then out.contentEncoding = v
        elseif num == 4 then out.contentType = v end
      end
    end
    return out
  end)
  if not ok then return nil, u end
  return u
end

function M.decode(body)
  local u, why = M.unknown(body)
  if not u then return nil, why end
  if (u.contentEncoding or "") ~= "" then return nil, "content encoding " .. u.contentEncoding .. " is not supported" end
  local full = M.for_kind(u.apiVersion, u.kind)
  if not full then
    return nil, string.format("no protobuf message for %s, Kind=%s", tostring(u.apiVersion), tostring(u.kind))
  end
  local ok, obj = pcall(decode_message, full, u.raw or "")
  if not ok then return nil, tostring(obj) end
  if (u.apiVersion or "") ~= "" then obj.apiVersion = u.apiVersion end
  obj.kind = u.kind
  return obj
end

return M
