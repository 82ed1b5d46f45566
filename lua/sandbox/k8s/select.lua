-- sandbox.k8s.select: label and field selectors, as the API server parses
-- them (`app=web,tier!=db,env in (a,b),!legacy`, `status.phase=Running`).
local M = {}

local function trim(s) return (s:gsub("^%s+", ""):gsub("%s+$", "")) end

-- split at commas outside parentheses
local function terms(s)
  local out, depth, start = {}, 0, 1
  for i = 1, #s do
    local c = s:sub(i, i)
    if c == "(" then depth = depth + 1
    elseif c == ")" then depth = depth - 1
    elseif c == "," and depth == 0 then
      out[#out + 1] = trim(s:sub(start, i - 1))
      start = i + 1
    end
  end
  out[#out + 1] = trim(s:sub(start))
  return out
end

local KEY = "^[%w][%w%._/%-]*$"

-- labels(s) -> requirements | nil, message
function M.labels(s)
  local reqs = {}
  if s == nil or trim(s) == "" then return reqs end
  for _, t in ipairs(terms(s)) do
    local k, op, vs
    k, op, vs = t:match("^([^%s!=]+)%s+(notin)%s*%((.-)%)$")
    if not k then k, op, vs = t:match("^([^%s!=]+)%s+(in)%s*%((.-)%)$") end
    if k then
      local set = {}
      for v in vs:gmatch("[^,]+") do set[trim(v)] = true end
      reqs[#reqs + 1] = { key = k, op = op, set = set }
    else
      local key, o, v = t:match("^([^%s!=]+)%s*([!=]=?)%s*(.-)$")
      if key and (o == "=" or o == "==" or o == "!=") then
        reqs[#reqs + 1] = { key = key, op = o == "!=" and "!=" or "=", value = v }
      elseif t:match("^!%s*[^%s]+$") then
        reqs[#reqs + 1] = { key = trim(t:sub(2)), op = "!" }
      elseif t:match(KEY) then
        reqs[#reqs + 1] = { key = t, op = "exists" }
      else
        return nil, "unable to parse requirement: " .. t
      end
    end
    local last = reqs[#reqs]
    if not last.key:match(KEY) then return nil, "invalid label key \"" .. last.key .. "\"" end
  end
  return reqs
end

-- match_labels(reqs, labels) -> boolean
function M.match_labels(reqs, labels)
  labels = labels or {}
  for _, r in ipairs(reqs) do
    local v = labels[r.key]
    if r.op == "=" then
      if v ~= r.value then return false end
    elseif r.op == "!=" then
      if v == r.value then return false end
    elseif r.op == "in" then
      if v == nil or not r.set[v] then return false end
    elseif r.op == "notin" then
      if v ~= nil and r.set[v] then return false end
    elseif r.op == "exists" then
      if v == nil then return false end
    elseif r.op == "!" then
      if v ~= nil then return false end
    end
  end
  return true
end

-- the field a field selector names, read from an object
local function field(obj, path)
  local v = obj
  for part in path:gmatch("[^.]+") do
    if type(v) ~= "table" then return nil end
    v = v[part]
  end
  if v == nil then return "" end
  return tostring(v)
end

-- the fields each kind supports (metadata.name and metadata.namespace for all)
local FIELDS = {
  Pod = { ["spec.nodeName"] = true, ["spec.restartPolicy"] = true, ["spec.schedulerName"] = true,
    ["spec.serviceAccountName"] = true, ["status.phase"] = true, ["status.podIP"] = true,
    ["status.nominatedNodeName"] = true },
  Node = { ["spec.unschedulable"] = true },
  Event = { ["involvedObject.kind"] = true, ["involvedObject.name"] = true, ["involvedObject.namespace"] = true,
    ["involvedObject.uid"] = true, ["involvedObject.apiVersion"] = true, ["involvedObject.resourceVersion"] = true,
    ["involvedObject.fieldPath"] = true, ["reason"] = true, ["reportingComponent"] = true, ["type"] = true,
    ["source"] = true },
  Secret = { ["type"] = true },
  Namespace = { ["status.phase"] = true },
  Job = { ["status.successful"] = true },
}

-- fields(s, kind) -> requirements | nil, message
function M.fields(s, kind)
  local reqs = {}
  if s == nil or trim(s) == "" then return reqs end
  for _, t in ipairs(terms(s)) do
    local key, o, v = t:match("^([%w%.]+)%s*([!=]=?)%s*(.-)$")
    if not key or not (o == "=" or o == "==" or o == "!=") then
      return nil, "invalid selector: '" .. t .. "'; can't understand '" .. t .. "'"
    end
    if key ~= "metadata.name" and key ~= "metadata.namespace" and not (FIELDS[kind] or {})[key] then
      return nil, string.format("field label not supported: %s", key)
    end
    reqs[#reqs + 1] = { path = key, op = o == "!=" and "!=" or "=", value = v }
  end
  return reqs
end

function M.match_fields(reqs, obj)
  for _, r in ipairs(reqs) do
    local v = field(obj, r.path)
    if (r.op == "=") ~= (v == r.value) then return false end
  end
  return true
end

-- match_selector(sel, labels) -> boolean for a LabelSelector object
-- ({matchLabels, matchExpressions}); an empty selector matches everything
function M.match_selector(sel, labels)
  labels = labels or {}
  if type(sel) ~= "table" then return true end
  for k, v in pairs(sel.matchLabels or {}) do
    if labels[k] ~= v then return false end
  end
  for _, e in ipairs(sel.matchExpressions or {}) do
    local v, set = labels[e.key], {}
    for _, x in ipairs(e.values or {}) do set[x] = true end
    if e.operator == "In" and (v == nil or not set[v]) then return false end
    if e.operator == "NotIn" and v ~= nil and set[v] then return false end
    if e.operator == "Exists" and v == nil then return false end
    if e.operator == "DoesNotExist" and v ~= nil then return false end
  end
  return true
end

return M
