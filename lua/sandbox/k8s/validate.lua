-- sandbox.k8s.validate: server-side field validation (the fieldValidation
-- option of create, update and patch: Strict, Warn, Ignore). The unknown
-- fields of an object are found from the same descriptors the protobuf
-- decoder uses (sandbox.k8s.proto: JSON names, inline fields, the special
-- messages), and for a custom resource from its CRD's openAPIV3Schema
-- (none, or x-kubernetes-preserve-unknown-fields: anything goes).
--
-- unknown(r, obj) -> { "spec.replicass", "spec.template.spec.containers[0].imagee", ... }
-- (sorted; empty when all are known or the kind has no schema)
-- check(r, obj, mode, words [, name [, patch]]) -> nil | Status (Strict refused),
-- warnings; under Warn (the default) and Ignore the unknown fields are
-- removed from obj:
-- words = "decode" (create, update, merge patches: "strict decoding
-- error") | "apply" (server-side apply: "field not declared in schema");
-- patch: obj is a merge patch, whose nulls delete (any field may be deleted).
local json = require "hypd.json"
local merge = require "sandbox.k8s.merge"
local protobuf = require "sandbox.k8s.protobuf"

local M = {}

local META = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"
local OPEN = { time = true, microtime = true, duration = true, quantity = true, intorstring = true, raw = true,
  fieldsv1 = true }

-- fields(full) -> json name -> field, with inline messages' fields joined
local cache = {}
local function fields(full)
  if cache[full] then return cache[full] end
  local desc = protobuf.message(full)
  local out = {}
  for _, f in pairs(desc or {}) do
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

local function join(path, key) return path == "" and key or path .. "." .. key end

local walk_message

-- walk_value(ty, v, path, out): v is one value of a field of type ty
local function walk_value(ty, v, path, out)
  local desc = protobuf.message(ty)
  if not desc then return end -- a scalar
  if OPEN[desc.special] then return end
  if desc.special == "list" then
    if type(v) == "table" then
      for i, x in ipairs(v) do walk_value(desc[1][2], x, path .. "[" .. (i - 1) .. "]", out) end
    end
    return
  end
  walk_message(ty, v, path, out)
end

local patching = false -- a patch's null (delete this field) is never unknown

walk_message = function(full, obj, path, out, top)
  if type(obj) ~= "table" or merge.is_list(obj) and next(obj) ~= nil then return end
  local known = fields(full)
  for k, v in pairs(obj) do
    local f = type(k) == "string" and known[k]
    if patching and v == json.null then -- luacheck: ignore 542
      -- deleting a field is fine, known or not
    elseif not f then
      -- a strategic merge patch's directives ($patch, $setElementOrder/...) are no fields
      if not (top and (k == "apiVersion" or k == "kind")) and not tostring(k):match("^%$") then
        out[#out + 1] = { join(path, k), obj, k }
      end
    elseif f[2] == "map" then
      if type(v) == "table" then
        for mk, mv in pairs(v) do walk_value(f[4], mv, join(path, k) .. "." .. mk, out) end
      end
    elseif f[3]:find("r", 1, true) then
      if type(v) == "table" then
        for i, x in ipairs(v) do walk_value(f[2], x, join(path, k) .. "[" .. (i - 1) .. "]", out) end
      end
    else
      walk_value(f[2], v, join(path, k), out)
    end
  end
end

-- walk_schema(s, v, path, out, top): an OpenAPI v3 schema (a CRD's)
local function walk_schema(s, v, path, out, top)
  if type(s) ~= "table" or type(v) ~= "table" then return end
  if s["x-kubernetes-preserve-unknown-fields"] or s["x-kubernetes-int-or-string"] then return end
  if s.type == "array" or (s.items and #v > 0) then
    for i, x in ipairs(v) do walk_schema(s.items, x, path .. "[" .. (i - 1) .. "]", out) end
    return
  end
  if type(s.additionalProperties) == "table" then
    for k, x in pairs(v) do walk_schema(s.additionalProperties, x, join(path, k), out) end
    return
  end
  if s.additionalProperties == true or type(s.properties) ~= "table" then return end
  local embedded = top or s["x-kubernetes-embedded-resource"]
  for k, x in pairs(v) do
    local p = s.properties[k]
    if patching and x == json.null then -- luacheck: ignore 542
      -- deleting a field is fine, known or not
    elseif p then
      walk_schema(p, x, join(path, k), out)
    elseif embedded and k == "metadata" then
      walk_message(META, x, join(path, k), out)
    elseif not (embedded and (k == "apiVersion" or k == "kind")) then
      out[#out + 1] = { join(path, k), v, k }
    end
  end
end

-- found(r, obj) -> { {path, parent table, key} } of the unknown fields
local function found(r, obj)
  local out = {}
  if r.crd then
    local s = r.schema
    if type(s) == "table" then walk_schema(s, obj, "", out, true) end
  else
    local full = protobuf.for_kind(r.group == "" and r.version or r.group .. "/" .. r.version, r.kind)
    if full then walk_message(full, obj, "", out, true) end
  end
  table.sort(out, function(a, b) return a[1] < b[1] end)
  return out
end

function M.unknown(r, obj)
  local out = {}
  for i, x in ipairs(found(r, obj)) do out[i] = x[1] end
  return out
end

local MODES = { Strict = true, Warn = true, Ignore = true }

function M.check(r, obj, mode, words, name, patch)
  mode = (mode == nil or mode == "") and "Warn" or mode
  if not MODES[mode] then
    return { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Failure", code = 400,
      reason = "BadRequest", message = string.format('fieldValidation: Invalid value: %q: fieldValidation must be ' ..
        'one of "Ignore", "Warn", or "Strict"', mode) }, {}
  end
  patching = patch == true
  local unknown = found(r, obj)
  patching = false
  if #unknown == 0 then return nil, {} end
  local words_of = {}
  for i, x in ipairs(unknown) do
    words_of[i] = words == "apply" and "." .. x[1] .. ": field not declared in schema"
      or string.format("unknown field %q", x[1])
  end
  if mode ~= "Strict" then
    -- Warn and Ignore: the unknown fields are dropped, as decoding into
    -- the API server's types (or pruning by a structural schema) drops them
    for _, x in ipairs(unknown) do x[2][x[3]] = nil end
    return nil, mode == "Warn" and words_of or {}
  end
  local gv = r.group == "" and r.version or r.group .. "/" .. r.version
  local message
  if words == "apply" then
    message = string.format("failed to create typed patch object (%s; %s, Kind=%s): %s",
      name or "", gv, r.kind, table.concat(words_of, "\n"))
  else
    message = string.format('%s in version %q cannot be handled as a %s: strict decoding error: %s', r.kind,
      r.version, r.kind, table.concat(words_of, ", "))
  end
  return { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Failure", code = 400,
    reason = "BadRequest", message = message }, {}
end

return M
