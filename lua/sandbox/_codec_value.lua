-- sandbox._codec_value: the shape-driven value rules every protocol of the
-- sandbox codec shares (lua/sandbox/codec.lua): scalars read from text
-- (query strings, headers, XML), JSON input read strictly, output values
-- made wire-ready leniently, and the required-member check with AWS-style
-- paths. Readers record the first bad value in a context C:
--   C.bad = { path, value, want } and return nil; C.wire(m) is a member's
--   wire name, C.field(path, name) and C.item(path, i) build paths.
local json = require "hypd.json"
local S = require "hypd.aws.shape"
local sys = require "hypd.sys"

local M = {}

-- the years a timestamp may fall in (0001..9999), as epoch seconds
local MIN_EPOCH, MAX_EPOCH = -62135596800, 253402300799

-- epoch(v) -> seconds, microseconds of a timestamp value, or nil
function M.epoch(v)
  local ok, secs, us = pcall(S.to_epoch, v)
  if not ok or not secs or secs ~= secs or secs < MIN_EPOCH or secs > MAX_EPOCH then return nil end
  secs = math.tointeger(secs)
  if not secs or type(us) ~= "number" or us ~= us then return nil end
  return secs, math.tointeger(us) or 0
end

-- iso(v) -> "2023-11-14T22:13:20.123Z" (milliseconds when not zero), or nil
function M.iso(v)
  local secs, us = M.epoch(v)
  return secs and S.iso(secs, us, 3) or nil
end

-- b64(text) -> bytes of base64 text (whitespace and missing padding
-- tolerated), or nil
function M.b64(text)
  text = text:gsub("%s", "")
  if #text % 4 == 2 then text = text .. "==" elseif #text % 4 == 3 then text = text .. "=" end
  return sys.b64decode(text)
end

-- utf8_clean(s, json_text) -> s with invalid UTF-8 replaced (U+FFFD) and, unless
-- for JSON, the control characters XML cannot hold dropped, so every SDK
-- can parse what we send
function M.utf8_clean(s, json_text)
  if utf8.len(s) and (json_text or not s:find("[\0-\8\11\12\14-\31]")) then return s end
  local out, i, n = {}, 1, #s
  while i <= n do
    local c = s:byte(i)
    local len = c < 0x80 and 1 or c >= 0xC2 and c <= 0xDF and 2 or c >= 0xE0 and c <= 0xEF and 3
      or c >= 0xF0 and c <= 0xF4 and 4 or 0
    local ch = len > 0 and s:sub(i, i + len - 1) or ""
    if len > 0 and #ch == len and utf8.len(ch) then
      if len > 1 or json_text or not ch:find("[\0-\8\11\12\14-\31]") then out[#out + 1] = ch end
      i = i + len
    else
      out[#out + 1] = "\u{FFFD}"
      i = i + 1
    end
  end
  return table.concat(out)
end

-- --- input ------------------------------------------------------------------

local function lcfirst(s) return (s:gsub("^%u", string.lower)) end

-- context(style, wire) -> C for the readers: style "coral" names paths as
-- AWS's Java services do ('instanceGroups.1.member.instanceCount'), "wire"
-- by the names on the wire ('Filter.1.Name'); wire(m) is a member's name
function M.context(style, wire)
  if style == "coral" then
    return {
      wire = wire,
      field = function(p, n) n = lcfirst(n) return p == "" and n or p .. "." .. n end,
      item = function(p, i) return p .. "." .. i .. ".member" end,
    }
  end
  return {
    wire = wire,
    field = function(p, n) return p == "" and n or p .. "." .. n end,
    item = function(p, i) return p .. "." .. i end,
  }
end

local WANT = { integer = "an integer", long = "an integer", double = "a number", float = "a number",
  boolean = "a boolean", timestamp = "a timestamp", blob = "base64 data", string = "a string",
  structure = "a structure", list = "a list", map = "a map" }
M.WANT = WANT

local function bad(C, path, value, typ)
  C.bad = C.bad or { path = path, value = value, want = WANT[typ] or typ }
  return nil
end
M.bad = bad

-- scalar(typ, traits, text) -> the value of a scalar written as text, or
-- nil when text is not one
function M.scalar(typ, traits, text)
  if typ == "string" then
    if traits and traits.jsonvalue then
      local raw = M.b64(text)
      local v = raw and json.decode(raw)
      if v == nil then return nil end
      return v
    end
    return text
  elseif typ == "integer" or typ == "long" then
    if not text:match("^%s*[-+]?%d+%s*$") then return nil end
    return math.tointeger(tonumber(text))
  elseif typ == "double" or typ == "float" then
    if text == "NaN" then return 0 / 0 end
    if text == "Infinity" then return math.huge end
    if text == "-Infinity" then return -math.huge end
    if not text:match("^%s*[-+]?[%d.]+[eE]?[-+]?%d*%s*$") then return nil end
    local n = tonumber(text)
    return n and n + 0.0
  elseif typ == "boolean" then
    local l = text:lower()
    if l == "true" then return true elseif l == "false" then return false end
    return nil
  elseif typ == "timestamp" then
    return M.iso(text)
  elseif typ == "blob" then
    return M.b64(text)
  end
  return text -- document
end

-- text_value(C, model, head, traits, text, path) -> typed value (records
-- a bad value in C)
function M.text_value(C, model, head, traits, text, path)
  local typ = S.kind(model, head)
  local v = M.scalar(typ, traits, text)
  if v == nil then return bad(C, path, text, typ) end
  return v
end

local function is_object(v) return type(v) == "table" and not json.is_array(v) end
local function is_array(v) return type(v) == "table" and (json.is_array(v) or next(v) == nil) end

local from_json

local function json_structure(C, model, shape, v, path)
  if not is_object(v) then return bad(C, path, v, "structure") end
  local out = json.object()
  for _, m in ipairs(shape[2]) do
    if not m.loc then
      local name = m.name or m[1]
      local x = v[name]
      if x ~= nil and x ~= json.null then
        local y = from_json(C, model, m[2], m, x, C.field(path, name))
        if y == nil then return nil end
        out[m[1]] = y
      end
    end
  end
  return out
end

-- from_json(C, model, head, traits, v, path) -> the input value of JSON
-- value v, typed by the shape; nil (and C.bad) when v does not fit
from_json = function(C, model, head, _, v, path)
  local typ, shape = S.kind(model, head)
  local t = type(v)
  if typ == "structure" then
    return json_structure(C, model, shape, v, path)
  elseif typ == "list" then
    if not is_array(v) then return bad(C, path, v, typ) end
    local item, it = S.ref(shape[2])
    local out = json.array()
    for i, x in ipairs(v) do
      if x ~= json.null then
        local y = from_json(C, model, item, it, x, C.item(path, i))
        if y == nil then return nil end
        out[#out + 1] = y
      end
    end
    return out
  elseif typ == "map" then
    if not is_object(v) then return bad(C, path, v, typ) end
    local value, vt = S.ref(shape[3])
    local out = json.object()
    for k, x in pairs(v) do
      if x ~= json.null then
        local y = from_json(C, model, value, vt, x, C.field(path, k))
        if y == nil then return nil end
        out[k] = y
      end
    end
    return out
  elseif typ == "string" then
    if t ~= "string" then return bad(C, path, v, typ) end
    return v
  elseif typ == "integer" or typ == "long" then
    local n = t == "number" and math.tointeger(v)
    if not n then return bad(C, path, v, typ) end
    return n
  elseif typ == "double" or typ == "float" then
    if t == "number" then return v + 0.0 end
    if t == "string" and (v == "NaN" or v == "Infinity" or v == "-Infinity") then return M.scalar(typ, nil, v) end
    return bad(C, path, v, typ)
  elseif typ == "boolean" then
    if t ~= "boolean" then return bad(C, path, v, typ) end
    return v
  elseif typ == "timestamp" then
    local iso = (t == "number" or t == "string") and M.iso(v)
    if not iso then return bad(C, path, v, typ) end
    return iso
  elseif typ == "blob" then
    local raw = t == "string" and M.b64(v)
    if not raw then return bad(C, path, v, typ) end
    return raw
  end
  return v -- document
end
M.from_json = from_json

-- missing(C, model, head, v, path, out) -> out: the paths of required
-- members absent from input value v (in model order, nested ones too)
function M.missing(C, model, head, v, path, out)
  out = out or {}
  if type(v) ~= "table" or #out >= 10 then return out end
  local typ, shape = S.kind(model, head)
  if typ == "structure" then
    local req = {}
    for _, name in ipairs(shape.required or {}) do req[name] = true end
    for _, m in ipairs(shape[2]) do
      local p = C.field(path, C.wire(m))
      if v[m[1]] == nil then
        if req[m[1]] then out[#out + 1] = p end
      elseif not S.SCALAR[m[2]] then
        M.missing(C, model, m[2], v[m[1]], p, out)
      end
    end
  elseif typ == "list" then
    local item = S.ref(shape[2])
    if not S.SCALAR[item] then
      for i, x in ipairs(v) do M.missing(C, model, item, x, C.item(path, i), out) end
    end
  elseif typ == "map" then
    local value = S.ref(shape[3])
    if not S.SCALAR[value] then
      for k, x in pairs(v) do M.missing(C, model, value, x, C.field(path, tostring(k)), out) end
    end
  end
  return out
end

-- --- output -----------------------------------------------------------------

-- number_string(n) -> a finite number as the text of a string member
function M.number_string(n)
  if n ~= n or n == math.huge or n == -math.huge then return nil end
  return math.tointeger(n) and string.format("%d", math.tointeger(n)) or S.number_text(n)
end

-- text(model, head, traits, v, ts_default) -> wire text of an output scalar,
-- or nil when v cannot be one
function M.text(model, head, traits, v, ts_default)
  local typ = S.kind(model, head)
  local t = type(v)
  if typ == "boolean" then
    if t == "boolean" then return v and "true" or "false" end
    if v == "true" or v == "false" then return v end
    return nil
  elseif typ == "timestamp" then
    local secs, us = M.epoch(v)
    if not secs then return nil end
    local format = traits.ts or ts_default
    if format == "rfc822" then return S.rfc822(secs) end
    if format == "unixtimestamp" then return us == 0 and tostring(secs) or S.number_text(secs + us // 1000 / 1000) end
    return S.iso(secs, us, 3)
  elseif typ == "integer" or typ == "long" then
    local n = math.tointeger(v) or t == "string" and math.tointeger(tonumber(v))
    return n and string.format("%d", n) or nil
  elseif typ == "double" or typ == "float" then
    local n = tonumber(v)
    return n and S.number_text(n + 0.0) or nil
  elseif typ == "blob" then
    if t ~= "string" then return nil end
    return sys.b64encode(v)
  elseif typ == "string" and traits.jsonvalue then
    local ok, s = pcall(json.encode, v)
    return ok and sys.b64encode(s) or nil
  end
  if t == "string" then return M.utf8_clean(v) end
  if t == "number" then return M.number_string(v) end
  if t == "boolean" then return tostring(v) end
  return nil
end

local to_json

local function out_structure(model, shape, v)
  local out = json.object()
  for _, m in ipairs(shape[2]) do
    local x = v[m[1]]
    if S.present(x) and not m.loc then
      local y = to_json(model, m[2], m, x)
      if y ~= nil then out[m.name or m[1]] = y end
    end
  end
  return out
end

-- to_json(model, head, traits, v) -> the JSON-ready output value of v
-- (timestamps as epoch seconds, blobs in base64); nil for what cannot fit
to_json = function(model, head, traits, v)
  local typ, shape = S.kind(model, head)
  local t = type(v)
  if typ == "structure" then
    return t == "table" and out_structure(model, shape, v) or nil
  elseif typ == "list" then
    if t ~= "table" then return nil end
    local item, it = S.ref(shape[2])
    local out = json.array()
    for _, x in ipairs(v) do
      if S.present(x) then
        local y = to_json(model, item, it, x)
        if y ~= nil then out[#out + 1] = y end
      end
    end
    return out
  elseif typ == "map" then
    if t ~= "table" then return nil end
    local value, vt = S.ref(shape[3])
    local out = json.object()
    for k, x in pairs(v) do
      if type(k) == "string" and S.present(x) then
        local y = to_json(model, value, vt, x)
        if y ~= nil then out[M.utf8_clean(k, true)] = y end
      end
    end
    return out
  elseif typ == "timestamp" then
    local format = traits.ts or "unixtimestamp"
    if format == "unixtimestamp" then
      local secs, us = M.epoch(v)
      if not secs then return nil end
      return us // 1000 == 0 and secs or secs + us // 1000 / 1000
    end
    return M.text(model, head, traits, v, format)
  elseif typ == "integer" or typ == "long" then
    return math.tointeger(v) or t == "string" and math.tointeger(tonumber(v)) or nil
  elseif typ == "double" or typ == "float" then
    local n = tonumber(v)
    if not n then return nil end
    if n ~= n then return "NaN" end
    if n == math.huge then return "Infinity" end
    if n == -math.huge then return "-Infinity" end
    return n + 0.0
  elseif typ == "boolean" then
    if t == "boolean" then return v end
    if v == "true" or v == "false" then return v == "true" end
    return nil
  elseif typ == "blob" then
    return t == "string" and sys.b64encode(v) or nil
  elseif typ == "string" then
    if t == "string" then return M.utf8_clean(v, true) end
    if t == "number" then return M.number_string(v) end
    return nil
  end
  return v -- document
end
M.to_json = to_json

return M
