-- sandbox.k8s.structural: a custom resource validated against its CRD's
-- structural schema (the openAPIV3Schema of the served version), as the
-- apiextensions API server does after it has pruned the object: the
-- kube-openapi validators (type, x-kubernetes-int-or-string, nullable,
-- required, enum, minimum/maximum and their exclusive forms, multipleOf,
-- minLength/maxLength, pattern, minItems/maxItems), their errors turned
-- into field errors as kubeOpenAPIResultToFieldErrors turns them.
-- Below x-kubernetes-preserve-unknown-fields the unknown fields are not
-- judged, the declared ones still are; an x-kubernetes-embedded-resource
-- needs its apiVersion and kind.
--
-- A null at a field that is not nullable is removed first
-- (PruneNonNullableNullsWithoutDefaults), as the API server removes it.
--
-- errors(schema, obj) -> { {type, field, value, detail} } sorted by field
-- check(r, obj) -> nil | Status (422 Invalid, with the causes)
local json = require "hypd.json"
local merge = require "sandbox.k8s.merge"
local regex = require "hypd.regex"

local M = {}

local REASON = { Invalid = "FieldValueInvalid", TypeInvalid = "FieldValueTypeInvalid",
  Required = "FieldValueRequired", NotSupported = "FieldValueNotSupported", TooLong = "FieldValueTooLong",
  TooMany = "FieldValueTooMany", Duplicate = "FieldValueDuplicate", NotFound = "FieldValueNotFound",
  Forbidden = "FieldValueForbidden" }
local WORDS = { Invalid = "Invalid value", TypeInvalid = "Invalid value", Required = "Required value",
  NotSupported = "Unsupported value", TooLong = "Too long", TooMany = "Too many", Duplicate = "Duplicate value",
  NotFound = "Not found", Forbidden = "Forbidden" }

-- kind(v) -> the JSON type kube-openapi names for a value
local function kind(v)
  if v == json.null then return "null" end
  if type(v) == "string" then return "string" end
  if type(v) == "boolean" then return "boolean" end
  if type(v) == "number" then
    return (math.type(v) == "integer" or v == math.floor(v) and v > -2 ^ 53 and v < 2 ^ 53) and "integer" or "number"
  end
  return merge.is_list(v) and "array" or "object"
end

-- go_value(v): a number as Go's %v prints a float64 or an int64
local function go_number(v)
  if math.type(v) == "integer" then return tostring(v) end
  if v == math.floor(v) and v > -1e21 and v < 1e21 then return string.format("%d", v) end
  return (string.format("%.15g", v))
end

-- ErrorBody's rendering of a bad value: strings quoted, simple types plain
local function render(v)
  if v == nil or v == json.null then return "null" end
  if type(v) == "string" then return string.format("%q", v) end
  if type(v) == "number" then return go_number(v) end
  if type(v) == "boolean" then return tostring(v) end
  return json.encode(v)
end

-- the text of one field error, as field.Error.ErrorBody renders it
local function body(e)
  local s
  if e.type == "Required" or e.type == "TooLong" or e.type == "Forbidden" then
    s = WORDS[e.type]
  else
    s = WORDS[e.type] .. ": " .. (e.shown or render(e.value)) -- shown: a value as Go prints it
  end
  if e.detail and e.detail ~= "" then s = s .. ": " .. e.detail end
  return s
end

local function join(path, key) return path == "" and key or path .. "." .. key end

local function types_of(s)
  if s["x-kubernetes-int-or-string"] then return { "integer", "string" } end
  if type(s.type) == "table" then return s.type end
  if type(s.type) == "string" and s.type ~= "" then return { s.type } end
  return nil
end

local function type_ok(want, got)
  for _, t in ipairs(want) do
    if t == got or t == "number" and got == "integer" then return true end
  end
  return false
end

local walk

local function numbers(s, v, path, out)
  local function add(detail) out[#out + 1] = { type = "Invalid", field = path, value = v, detail = detail } end
  if type(s.maximum) == "number" then
    if s.exclusiveMaximum == true and v >= s.maximum then
      add(string.format("%s in body should be less than %s", path, go_number(s.maximum)))
    elseif v > s.maximum then
      add(string.format("%s in body should be less than or equal to %s", path, go_number(s.maximum)))
    end
  end
  if type(s.minimum) == "number" then
    if s.exclusiveMinimum == true and v <= s.minimum then
      add(string.format("%s in body should be greater than %s", path, go_number(s.minimum)))
    elseif v < s.minimum then
      add(string.format("%s in body should be greater than or equal to %s", path, go_number(s.minimum)))
    end
  end
  if type(s.multipleOf) == "number" and s.multipleOf > 0 then
    local q = v / s.multipleOf
    if q ~= math.floor(q) then
      add(string.format("%s in body should be a multiple of %s", path, go_number(s.multipleOf)))
    end
  end
end

local function strings(s, v, path, out)
  local n = utf8.len(v) or #v
  if math.tointeger(s.maxLength) and n > s.maxLength then
    out[#out + 1] = { type = "TooLong", field = path, value = v,
      detail = string.format("may not be more than %d bytes", s.maxLength) }
  end
  if math.tointeger(s.minLength) and n < s.minLength then
    out[#out + 1] = { type = "Invalid", field = path, value = v,
      detail = string.format("%s in body should be at least %d chars long", path, s.minLength) }
  end
  if type(s.pattern) == "string" then
    local re = regex.compile(s.pattern) -- a pattern outside hypd.regex's subset is not judged
    if re and not re:test(v) then
      out[#out + 1] = { type = "Invalid", field = path, value = v,
        detail = string.format("%s in body should match '%s'", path, s.pattern) }
    end
  end
end

local function object(s, v, path, out, top)
  -- a null where the schema does not allow one is pruned, not refused
  for k, x in pairs(v) do
    local p = type(s.properties) == "table" and s.properties[k]
    if x == json.null and type(p) == "table" and not p.nullable and p.default == nil then v[k] = nil end
  end
  for _, k in ipairs(type(s.required) == "table" and s.required or {}) do
    if v[k] == nil then out[#out + 1] = { type = "Required", field = join(path, k) } end
  end
  if s["x-kubernetes-embedded-resource"] and not top then
    for _, k in ipairs { "apiVersion", "kind" } do
      if v[k] == nil or v[k] == "" then
        out[#out + 1] = { type = "Required", field = join(path, k), detail = "must not be empty" }
      end
    end
  end
  if math.tointeger(s.maxProperties) then
    local n = 0
    for _ in pairs(v) do n = n + 1 end
    if n > s.maxProperties then
      out[#out + 1] = { type = "TooMany", field = path, value = n,
        detail = string.format("must have at most %d items", s.maxProperties) }
    end
  end
  for k, x in pairs(v) do
    local p = type(s.properties) == "table" and s.properties[k]
    if type(p) == "table" then
      walk(p, x, join(path, k), out)
    elseif type(s.additionalProperties) == "table" then
      walk(s.additionalProperties, x, join(path, k), out)
    end
  end
end

walk = function(s, v, path, out, top)
  if type(s) ~= "table" then return end
  local got = kind(v)
  if got == "null" then
    if s.nullable then return end
    local want = types_of(s)
    if want then
      out[#out + 1] = { type = "TypeInvalid", field = path, value = "null",
        detail = string.format("%s in body must be of type %s: \"null\"", path, table.concat(want, ",")) }
    end
    return
  end
  local want = types_of(s)
  if want and not type_ok(want, got) then
    out[#out + 1] = { type = "TypeInvalid", field = path, value = got,
      detail = string.format("%s in body must be of type %s: %q", path, table.concat(want, ","), got) }
    return
  end
  if type(s.enum) == "table" and #s.enum > 0 then
    local found = false
    for _, e in ipairs(s.enum) do
      if merge.equal(e, v) then found = true break end
    end
    if not found then
      local quoted = {}
      for i, e in ipairs(s.enum) do quoted[i] = string.format("%q", type(e) == "string" and e or json.encode(e)) end
      out[#out + 1] = { type = "NotSupported", field = path, value = v,
        detail = "supported values: " .. table.concat(quoted, ", ") }
    end
  end
  if got == "integer" or got == "number" then
    numbers(s, v, path, out)
  elseif got == "string" then
    strings(s, v, path, out)
  elseif got == "array" then
    if math.tointeger(s.maxItems) and #v > s.maxItems then
      out[#out + 1] = { type = "TooMany", field = path, value = #v,
        detail = string.format("must have at most %d items", s.maxItems) }
    end
    if math.tointeger(s.minItems) and #v < s.minItems then
      out[#out + 1] = { type = "Invalid", field = path, value = v,
        detail = string.format("%s in body should have at least %d items", path, s.minItems) }
    end
    for i, x in ipairs(v) do walk(s.items, x, path .. "[" .. (i - 1) .. "]", out) end
  elseif got == "object" then
    object(s, v, path, out, top)
  end
end

-- errors(schema, obj) -> the field errors, sorted (kube-openapi's order
-- follows Go's map order, which is none)
function M.errors(schema, obj)
  local out = {}
  walk(schema, obj, "", out, true)
  table.sort(out, function(a, b)
    if a.field ~= b.field then return a.field < b.field end
    return body(a) < body(b)
  end)
  return out
end

-- invalid(r, name, errs) -> the Status of errors.NewInvalid: one error's
-- text, or several in brackets; a cause for each
function M.invalid(r, name, errs)
  local causes, texts, seen = json.array(), {}, {}
  for _, e in ipairs(errs) do
    local text = (e.field ~= "" and e.field or "<nil>") .. ": " .. body(e)
    causes[#causes + 1] = { reason = REASON[e.type], message = body(e), field = e.field }
    if not seen[text] then seen[text] = true texts[#texts + 1] = text end
  end
  local all = #texts == 1 and texts[1] or "[" .. table.concat(texts, ", ") .. "]"
  local qualified = r.group ~= "" and r.kind .. "." .. r.group or r.kind
  return { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Failure", code = 422,
    reason = "Invalid", message = string.format("%s %q is invalid: %s", qualified, name or "", all),
    details = { name = name, group = r.group ~= "" and r.group or nil, kind = r.kind, causes = causes } }
end

function M.check(r, obj)
  if not r.crd or type(r.schema) ~= "table" then return nil end
  local errs = M.errors(r.schema, obj)
  if #errs == 0 then return nil end
  return M.invalid(r, (obj.metadata or {}).name, errs)
end

return M
