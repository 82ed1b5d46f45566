-- sandbox.k8s.openapi: the component schemas of an OpenAPI v3
-- group-version document, as the API server publishes them, built from
-- the generated descriptors and doc comments of sandbox.k8s.proto (field
-- types, JSON names, inline fields, special messages) and, for custom
-- resources, from their CRD's openAPIV3Schema. kubectl explain reads them
-- (descriptions, types, $ref'd structures).
--
-- schemas(reg, group, version, out) adds to `out` (name -> schema) the
-- schema of every kind of that group-version and of what they reference.
local json = require "hypd.json"
local merge = require "sandbox.k8s.merge"
local protobuf = require "sandbox.k8s.protobuf"

local M = {}

local INDEX = require "sandbox.k8s.proto.index"
local docs_of = {}

-- doc(full, field) -> the doc comment of a message (or of one of its fields) | nil
local function doc(full, field)
  local pkg, name = full:match("^(.*)%.([^.]+)$")
  if docs_of[pkg] == nil then
    local mod = INDEX[pkg]
    docs_of[pkg] = mod and require("sandbox.k8s.proto.docs." .. mod) or false
  end
  local d = docs_of[pkg]
  return d and d[field and name .. "." .. field or name] or nil
end

-- name(full) -> the OpenAPI name of a message: k8s.io.api.apps.v1.Deployment -> io.k8s.api.apps.v1.Deployment
function M.name(full) return (full:gsub("^k8s%.io%.", "io.k8s.")) end

local SCALAR = {
  string = { type = "string" }, bytes = { type = "string", format = "byte" }, bool = { type = "boolean" },
  int32 = { type = "integer", format = "int32" }, int64 = { type = "integer", format = "int64" },
  uint32 = { type = "integer", format = "int32" }, uint64 = { type = "integer", format = "int64" },
  double = { type = "number", format = "double" }, float = { type = "number", format = "double" },
}

local SPECIAL = {
  time = { type = "string", format = "date-time" }, microtime = { type = "string", format = "date-time" },
  duration = { type = "string" }, quantity = { type = "string" },
  intorstring = { type = "string", format = "int-or-string", ["x-kubernetes-int-or-string"] = true },
  raw = { type = "object" }, fieldsv1 = { type = "object" },
}

local add_message

-- ref(full, out) -> the schema of a field of message type `full`
local function ref(full, out)
  add_message(full, out)
  return { allOf = { { ["$ref"] = "#/components/schemas/" .. M.name(full) } } }
end

local function type_schema(ty, out)
  if SCALAR[ty] then return merge.copy(SCALAR[ty]) end
  local desc = protobuf.message(ty)
  if not desc then return { type = "object" } end
  if desc.special == "list" then return { type = "array", items = type_schema(desc[1][2], out) } end
  return ref(ty, out)
end

-- props(full, out, into) -> the properties of a message, inline ones joined
local function props(full, out, into)
  local desc = protobuf.message(full) or {}
  for num, f in pairs(desc) do
    if type(num) == "number" then
      local name, ty, flags = f[1], f[2], f[3]
      if flags:find("i", 1, true) then
        props(ty, out, into)
      else
        local s
        if ty == "map" then
          s = { type = "object", additionalProperties = type_schema(f[4], out) }
        elseif flags:find("r", 1, true) then
          s = { type = "array", items = type_schema(ty, out) }
        else
          s = type_schema(ty, out)
        end
        s.description = doc(full, name)
        into[name] = s
      end
    end
  end
  return into
end

add_message = function(full, out, gvk)
  local name = M.name(full)
  if out[name] then return end
  local desc = protobuf.message(full)
  local s
  if desc and SPECIAL[desc.special] then
    s = merge.copy(SPECIAL[desc.special])
  else
    s = { type = "object" }
    out[name] = s -- before the fields: a message may reach itself (JSONSchemaProps does)
    s.properties = props(full, out, json.object())
  end
  s.description = doc(full)
  if gvk then
    s["x-kubernetes-group-version-kind"] = { gvk }
    s.properties.apiVersion = { type = "string", description = "APIVersion defines the versioned schema of this " ..
      "representation of an object. Servers should convert recognized schemas to the latest internal value, and may " ..
      "reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/" ..
      "api-conventions.md#resources" }
    s.properties.kind = { type = "string", description = "Kind is a string value representing the REST resource " ..
      "this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be " ..
      "updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/" ..
      "api-conventions.md#types-kinds" }
  end
  out[name] = s
end

local META = "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"

function M.schemas(reg, group, version, out)
  for _, r in ipairs(reg.list) do
    if r.group == group and r.version == version then
      local gvk = { group = group, version = version, kind = r.kind }
      local gv = group == "" and version or group .. "/" .. version
      local full = not r.crd and protobuf.for_kind(gv, r.kind)
      if full then
        add_message(full, out, gvk)
      else
        -- a custom resource (or a kind with no descriptor): its CRD's
        -- schema, with the standard metadata
        local s = type(r.schema) == "table" and merge.copy(r.schema)
          or { type = "object", ["x-kubernetes-preserve-unknown-fields"] = true }
        s.properties = s.properties or json.object()
        s.properties.metadata = s.properties.metadata or ref(META, out)
        s.properties.metadata.description = s.properties.metadata.description or "Standard object's metadata. " ..
          "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata"
        s.properties.apiVersion = s.properties.apiVersion or { type = "string", description = "APIVersion defines " ..
          "the versioned schema of this representation of an object." }
        s.properties.kind = s.properties.kind or { type = "string", description = "Kind is a string value " ..
          "representing the REST resource this object represents." }
        s["x-kubernetes-group-version-kind"] = { gvk }
        local parts = {} -- sagemaker.amazonaws.com -> com.amazonaws.sagemaker, as the API server names them
        for p in group:gmatch("[^.]+") do table.insert(parts, 1, p) end
        out[table.concat(parts, ".") .. "." .. version .. "." .. r.kind] = s
      end
    end
  end
  return out
end

return M
