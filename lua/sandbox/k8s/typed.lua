-- sandbox.k8s.typed: what the API server's JSON decoder refuses when it
-- reads a built-in kind into its Go types (sigs.k8s.io/json, a fork of
-- encoding/json), before any validation: a value of the wrong JSON type at
-- a typed field. The types come from the descriptors of sandbox.k8s.proto
-- (the message of each field, its JSON name, repeated, map, inline, and the
-- special messages with their own UnmarshalJSON: Time, Duration,
-- Quantity, IntOrString).
--
-- As the decoder does, the object is read in document order (kubectl
-- sends objects with their keys sorted, as Go marshals a map): a plain
-- type error is remembered and reading goes on (the first one is
-- answered: `json: cannot unmarshal string into Go struct field
-- DeploymentSpec.spec.replicas of type int32`); an UnmarshalJSON error
-- (a malformed quantity, time or duration) stops the reading at once.
--
-- error(r, obj) -> nil | the decoder's error text (nil for a custom
-- resource or a kind with no descriptor: the CRD's schema judges those,
-- sandbox.k8s.structural)
local json = require "hypd.json"
local merge = require "sandbox.k8s.merge"
local protobuf = require "sandbox.k8s.protobuf"

local M = {}

-- fields(full) -> json name -> field, inline messages' fields joined
local cache = {}
local function fields(full)
  if cache[full] then return cache[full] end
  local out = {}
  for _, f in pairs(protobuf.message(full) or {}) do
    if type(f) == "table" then
      if f[3]:find("i", 1, true) then
        for k, v in pairs(fields(f[2])) do out[k] = v end
      else
        out[f[1]] = f
      end
    end
  end
  cache[full] = out
  return out
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do if type(k) == "string" then keys[#keys + 1] = k end end
  table.sort(keys)
  return keys
end

local GO_SCALAR = { string = "string", int32 = "int32", int64 = "int64", uint32 = "uint32", uint64 = "uint64",
  bool = "bool", double = "float64", float = "float32", bytes = "[]uint8" }
local RANGE = { int32 = { -2147483648, 2147483647 }, int64 = { math.mininteger, math.maxinteger },
  uint32 = { 0, 4294967295 }, uint64 = { 0, math.maxinteger } }

-- go_name(ty) -> the Go type a message or scalar decodes into: the last
-- element of the package is the Go package's name (v1.PodTemplateSpec,
-- resource.Quantity)
local function go_name(ty)
  if GO_SCALAR[ty] then return GO_SCALAR[ty] end
  local pkg, name = ty:match("([^.]+)%.([^.]+)$")
  return pkg and pkg .. "." .. name or ty
end

-- word(v) -> what encoding/json calls a JSON value of v's type
local function word(v)
  if type(v) == "string" then return "string" end
  if type(v) == "boolean" then return "bool" end
  if type(v) == "number" then return "number" end
  return merge.is_list(v) and "array" or "object"
end

local function number_text(v)
  if math.type(v) == "integer" then return tostring(v) end
  local s = string.format("%.17g", v)
  for p = 15, 17 do -- the shortest text that reads back as v, as Go prints it
    local t = string.format("%." .. p .. "g", v)
    if tonumber(t) == v then s = t break end
  end
  return s
end

-- an integer JSON number in range of the Go integer type ty
local function fits(v, ty)
  local n = math.tointeger(v)
  if not n or math.type(v) ~= "integer" then return false end
  return n >= RANGE[ty][1] and n <= RANGE[ty][2]
end

-- Quantity's UnmarshalJSON (resource.ParseQuantity)
local QUANTITY_RE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
local SUFFIX = { [""] = true, Ki = true, Mi = true, Gi = true, Ti = true, Pi = true, Ei = true, n = true, u = true,
  m = true, k = true, M = true, G = true, T = true, P = true, E = true }
local function quantity_error(text)
  text = text:match("^%s*(.-)%s*$")
  local num, suffix = text:match("^([+-]?[0-9.]+)(.*)$")
  if not num or not suffix:match("^[eEinumkKMGTP]*[-+]?[0-9]*$") then return QUANTITY_RE end
  if not (num:match("^[+-]?%d+%.?%d*$") or num:match("^[+-]?%.%d+$")) then
    return "unable to parse numeric part of quantity"
  end
  if not (SUFFIX[suffix] or suffix:match("^[eE][-+]?%d+$")) then return "unable to parse quantity's suffix" end
  return nil
end

-- time.Parse(time.RFC3339, s): the layout's elements in order
local LAYOUT = "2006-01-02T15:04:05Z07:00"
local ELEMENTS = { { "2006", "^%d%d%d%d" }, { "-", "^%-" }, { "01", "^%d%d" }, { "-", "^%-" }, { "02", "^%d%d" },
  { "T", "^T" }, { "15", "^%d%d" }, { ":", "^:" }, { "04", "^%d%d" }, { ":", "^:" }, { "05", "^%d%d%.?%d*" },
  { "Z07:00", "^Z" } }
local function time_error(s)
  local rest = s
  for _, e in ipairs(ELEMENTS) do
    local m = rest:match(e[2]) or e[1] == "Z07:00" and rest:match("^[+-]%d%d:%d%d")
    if not m then
      return string.format("parsing time %q as %q: cannot parse %q as %q", s, LAYOUT, rest, e[1])
    end
    rest = rest:sub(#m + 1)
  end
  if rest ~= "" then return string.format("parsing time %q: extra text: %q", s, rest) end
  return nil
end

-- time.ParseDuration(s)
local UNITS = { ns = true, us = true, ["µs"] = true, ["μs"] = true, ms = true, s = true, m = true, h = true }
local function duration_error(s)
  local body = s:match("^[-+]?(.*)$")
  if body == "0" then return nil end
  if body == "" then return string.format("time: invalid duration %q", s) end
  while body ~= "" do
    local num, rest = body:match("^(%d*%.?%d*)(.*)$")
    if num == "" or num == "." then return string.format("time: invalid duration %q", s) end
    local unit = rest:match("^([^%d.]+)") or ""
    if unit == "" then return string.format("time: missing unit in duration %q", s) end
    if not UNITS[unit] then return string.format("time: unknown unit %q in duration %q", unit, s) end
    body = rest:sub(#unit + 1)
  end
  return nil
end

local B64 = "^[A-Za-z0-9+/]*=?=?$"

local Reader = {}
Reader.__index = Reader

-- type_error(value word, Go type): encoding/json's UnmarshalTypeError
-- with the context of the field being read; the first one is kept
function Reader:type_error(what, go_type)
  self.first = self.first or { path = table.concat(self.path), go_type = go_type, what = what }
  self.saved = self.saved or string.format("json: cannot unmarshal %s into Go struct field %s.%s of type %s", what,
    self.struct, table.concat(self.stack, "."), go_type)
end

-- value(ty, v) -> nil | the error of an UnmarshalJSON (reading stops)
function Reader:value(ty, v)
  if v == json.null then return nil end
  local w = word(v)
  if GO_SCALAR[ty] then
    if ty == "string" then
      if w ~= "string" then self:type_error(w, "string") end
    elseif ty == "bool" then
      if w ~= "bool" then self:type_error(w, "bool") end
    elseif ty == "double" or ty == "float" then
      if w ~= "number" then self:type_error(w, GO_SCALAR[ty]) end
    elseif ty == "bytes" then
      if w == "string" then
        if #v % 4 ~= 0 or not v:match(B64) then
          local at = v:find("[^A-Za-z0-9+/=]") or #v - #v % 4
          self.saved = self.saved or string.format("illegal base64 data at input byte %d", at > 0 and at - 1 or 0)
        end
      elseif w ~= "array" then
        self:type_error(w, "[]uint8")
      end
    elseif w == "number" then
      if not fits(v, ty) then self:type_error("number " .. number_text(v), GO_SCALAR[ty]) end
    else
      self:type_error(w, GO_SCALAR[ty])
    end
    return nil
  end
  local desc = protobuf.message(ty)
  if not desc then return nil end
  local special = desc.special
  if special == "raw" or special == "fieldsv1" then return nil end
  if special == "intorstring" then
    -- IntOrString.UnmarshalJSON: a string, or json.Unmarshal into its int32
    if w == "string" or w == "number" and fits(v, "int32") then return nil end
    return string.format("json: cannot unmarshal %s into Go struct field %s.%s of type int32",
      w == "number" and "number " .. number_text(v) or w, self.struct, table.concat(self.stack, "."))
  end
  if special == "quantity" then
    if w == "string" then return quantity_error(v) end
    if w == "number" then return quantity_error(number_text(v)) end
    return QUANTITY_RE
  end
  if special == "time" or special == "microtime" or special == "duration" then
    if w ~= "string" then
      -- json.Unmarshal into a string, inside the field's context
      return string.format("json: cannot unmarshal %s into Go struct field %s.%s of type string", w, self.struct,
        table.concat(self.stack, "."))
    end
    return special == "duration" and duration_error(v) or time_error(v)
  end
  if special == "list" then
    if w ~= "array" then self:type_error(w, go_name(ty)) return nil end
    for i, x in ipairs(v) do
      local err = self:item(i, x, function() return self:value(desc[1][2], x) end)
      if err then return err end
    end
    return nil
  end
  if w ~= "object" then self:type_error(w, go_name(ty)) return nil end
  return self:message(ty, v)
end

-- item(i, x, read): a list's element, named in the path as
-- structured-merge-diff names it (by its name key when it has one)
function Reader:item(i, x, read)
  local key = type(x) == "table" and type(x.name) == "string" and string.format("[name=%q]", x.name)
  self.path[#self.path + 1] = key or "[" .. (i - 1) .. "]"
  local err = read()
  self.path[#self.path] = nil
  return err
end

-- field(f, v) -> nil | an UnmarshalJSON error: one field of a struct
function Reader:field(f, v)
  if v == json.null then return nil end
  local ty, w = f[2], word(v)
  if ty == "map" then
    if w ~= "object" then self:type_error(w, "map[string]" .. go_name(f[4])) return nil end
    for _, k in ipairs(sorted_keys(v)) do
      self.path[#self.path + 1] = "." .. k
      local err = self:value(f[4], v[k])
      self.path[#self.path] = nil
      if err then return err end
    end
    return nil
  end
  if f[3]:find("r", 1, true) then
    if w ~= "array" then self:type_error(w, "[]" .. go_name(ty)) return nil end
    for i, x in ipairs(v) do
      local err = self:item(i, x, function() return self:value(ty, x) end)
      if err then return err end
    end
    return nil
  end
  return self:value(ty, v)
end

-- message(full, obj) -> nil | an UnmarshalJSON error: the fields of a
-- struct, in key order; unknown keys are the strict decoder's business
-- (sandbox.k8s.validate)
function Reader:message(full, obj)
  local known = fields(full)
  local outer = self.struct
  local name = full:match("([^.]+)$")
  for _, k in ipairs(sorted_keys(obj)) do
    local f = known[k]
    if f then
      self.struct = name
      self.stack[#self.stack + 1] = k
      self.path[#self.path + 1] = "." .. k
      local err = self:field(f, obj[k])
      self.stack[#self.stack] = nil
      self.path[#self.path] = nil
      if err then return err end
    end
  end
  self.struct = outer
  return nil
end

local function read(r, obj)
  if r.crd then return nil end
  local full = protobuf.for_kind(r.group == "" and r.version or r.group .. "/" .. r.version, r.kind)
  if not full or type(obj) ~= "table" then return nil end
  local reader = setmetatable({ stack = {}, path = {}, struct = full:match("([^.]+)$") }, Reader)
  return reader, reader:message(full, obj)
end

function M.error(r, obj)
  local reader, err = read(r, obj)
  return reader and (err or reader.saved)
end

-- Go's %T of a JSON value read as unstructured
local GO_T = { string = "string", bool = "bool", object = "map[string]interface {}", array = "[]interface {}" }

-- apply_error(r, obj) -> nil | the text structured-merge-diff gives a
-- server-side apply whose value of a numeric field is no number (its
-- typed patch object cannot be made): ".spec.replicas: expected numeric
-- (int or float), got string"; the other mismatches are not judged here
function M.apply_error(r, obj)
  local reader = read(r, obj)
  local f = reader and reader.first
  if not f or not f.go_type:match("^u?int%d+$") and not f.go_type:match("^float%d+$") or not GO_T[f.what] then
    return nil
  end
  return string.format("%s: expected numeric (int or float), got %s", f.path, GO_T[f.what])
end

-- check(r, obj) -> nil | Status: a create's or an update's body that the
-- decoder refuses (400 BadRequest, as the API server answers)
function M.check(r, obj)
  local err = M.error(r, obj)
  if not err then return nil end
  return { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Failure", code = 400,
    reason = "BadRequest", message = string.format("%s in version %q cannot be handled as a %s: %s", r.kind,
      r.version, r.kind, err) }
end

return M
