-- _ownership: who made a Kubernetes object, so that no tool takes over
-- or deletes what another tool family (or anyone else) made. Every object
-- a family's tools make carries app.kubernetes.io/managed-by=hypd (the
-- client adds it) and hypd.io/family=<family>; a tool that finds an object
-- of its name made by another family, or not by hypd, answers CONFLICT
-- naming the owner and a complete call of the tool that manages it, and
-- changes nothing. Same-named objects are what collide: two tools that
-- both make the Deployment <name> (inference_deploy_container and the
-- inference operator behind inference_deploy_managed), or the claim <name>
-- (storage_create_s3 and storage_create_fsx).
--
-- Upgrades: objects made before the family label existed carry the
-- labels each family always set, so their family is read from those
-- (hypd.io/inference-kind, hypd.io/job-kind, hypd.io/storage, the kind of
-- a training job) and the maker's next apply adds the label; an object a
-- controller made for a custom resource (ownerReferences) belongs to the
-- family of that resource. A hypd object whose family cannot be told is
-- refused like any other owner's (hypd never guesses it is its own).
--
--   local O = require "_ownership"
--   O.family_of(obj) -> family | nil, by_hypd (true when managed-by=hypd)
--   O.label(obj, family) -> obj with the family label (and managed-by)
--   O.check(obj, families, opts): raises CONFLICT unless obj is of one of
--     families (a name or a list); opts.field (the parameter that named
--     it, default "name"), opts.cluster (for the call it suggests),
--     opts.by (the asking tool, default the first family's)
--   O.owned(families, opts) -> fn(obj) -> true (raises as check): a kit
--     spec.owned that refuses with the owner named
--   O.manage_call(obj, family, cluster) -> the call of the tool that manages obj
--   O.FAMILIES[family] = {tool, manager, param}
local errors = hypd.errors

local M = {}

M.MANAGED_BY = "app.kubernetes.io/managed-by"
M.FAMILY = "hypd.io/family"

-- family -> the tool that makes its objects, the one that removes them,
-- and the parameter that names one (the label or field it is read from)
M.FAMILIES = {
  ["inference-container"] = { tool = "inference_deploy_container", manager = "inference_delete", param = "name" },
  ["inference-managed"] = { tool = "inference_deploy_managed", manager = "inference_delete", param = "name" },
  ["inference-jumpstart"] = { tool = "inference_deploy_jumpstart", manager = "inference_delete", param = "name" },
  ["inference-router"] = { tool = "inference_deploy_router", manager = "inference_delete", param = "name" },
  training = { tool = "training_submit", manager = "training_delete_job", param = "name" },
  download = { tool = "model_download", manager = "job_delete", param = "name" },
  ["storage-s3"] = { tool = "storage_create_s3", manager = "storage_delete", param = "claim_name" },
  ["storage-fsx"] = { tool = "storage_create_fsx", manager = "storage_delete", param = "claim_name" },
}

-- what the labels every family always set say (objects from before hypd.io/family)
local INFERENCE_KIND = { container = "inference-container", pool = "inference-container",
  managed = "inference-managed", jumpstart = "inference-jumpstart", router = "inference-router" }
local CR_KIND = { InferenceEndpointConfig = "inference-managed", JumpStartModel = "inference-jumpstart" }
local TRAINING_KIND = { HyperPodPyTorchJob = true, RayJob = true }

local function md(o) return (type(o) == "table" and o.metadata) or {} end
local function labels(o) return md(o).labels or {} end

-- the ownerReference to a custom resource whose controller made the object
local function cr_owner(o)
  for _, r in ipairs(md(o).ownerReferences or {}) do
    if CR_KIND[r.kind] then return r end
  end
end

function M.family_of(o)
  local l = labels(o)
  local by_hypd = l[M.MANAGED_BY] == "hypd"
  local cr = cr_owner(o)
  if cr then return CR_KIND[cr.kind], by_hypd end -- the operator's Deployment and Service of a CR
  if l[M.FAMILY] and M.FAMILIES[l[M.FAMILY]] then return l[M.FAMILY], by_hypd end
  if not by_hypd then return nil, false end
  local kind = l["hypd.io/inference-kind"]
  if kind then return INFERENCE_KIND[kind], true end
  if l["hypd.io/job-kind"] == "model-download" then return "download", true end
  for _, r in ipairs(md(o).ownerReferences or {}) do -- a download's token Secret, owned by its Job
    if r.kind == "Job" and l["hypd.io/model-download"] then return "download", true end
  end
  local st = l["hypd.io/storage"]
  if st == "s3" or st == "fsx" then return "storage-" .. st, true end
  if TRAINING_KIND[o.kind] then return "training", true end
  return nil, true
end

function M.label(o, family)
  assert(M.FAMILIES[family], "unknown family " .. tostring(family))
  o.metadata = o.metadata or {}
  o.metadata.labels = o.metadata.labels or {}
  o.metadata.labels[M.FAMILY] = family
  o.metadata.labels[M.MANAGED_BY] = "hypd"
  return o
end

local function quote(v)
  v = tostring(v)
  if v:match("^[%w._/:@-]+$") then return v end
  return '"' .. v:gsub('"', '\\"') .. '"'
end

-- the name the managing tool knows obj by: an inference deployment's name
-- (its label, or the custom resource that made it), a claim's name (a
-- volume's claimRef), else the object's own
local function managed_name(o, family)
  local l = labels(o)
  if family:match("^inference%-") then
    local cr = cr_owner(o)
    return (cr and cr.name) or l["hypd.io/inference"] or md(o).name
  end
  if family:match("^storage%-") and o.kind == "PersistentVolume" then
    return ((o.spec or {}).claimRef or {}).name or md(o).name, ((o.spec or {}).claimRef or {}).namespace
  end
  if family == "download" and o.kind == "Secret" then
    for _, r in ipairs(md(o).ownerReferences or {}) do
      if r.kind == "Job" then return r.name end
    end
  end
  return md(o).name
end

function M.manage_call(o, family, cluster)
  local f = M.FAMILIES[family]
  local name, ns = managed_name(o, family)
  local parts = { f.manager, f.param .. "=" .. quote(name) }
  ns = ns or md(o).namespace
  if ns then parts[#parts + 1] = "namespace=" .. quote(ns) end
  if type(cluster) == "string" and cluster ~= "" then parts[#parts + 1] = "cluster=" .. quote(cluster) end
  return table.concat(parts, " ")
end

local function set(families)
  if type(families) == "string" then return { [families] = true }, families end
  local s = {}
  for _, f in ipairs(families) do s[f] = true end
  return s, families[1]
end

local function what(o)
  local m = md(o)
  return tostring(o.kind) .. " " .. (m.namespace and (m.namespace .. "/") or "") .. tostring(m.name)
end

function M.check(o, families, opts)
  opts = opts or {}
  local mine, first = set(families)
  local family, by_hypd = M.family_of(o)
  if family and mine[family] then return true end
  local field = opts.field or "name"
  local asking = opts.by or (M.FAMILIES[first] or {}).tool or "this tool"
  local msg, details
  if family then
    local f = M.FAMILIES[family]
    local fix = M.manage_call(o, family, opts.cluster)
    msg = string.format("%s was made by %s (%s=%s), not by %s: hypd does not change or delete what another " ..
      "tool made. Choose another %s, or remove it first with: %s", what(o), f.tool, M.FAMILY, family, asking, field,
      fix)
    details = { owner = family, owner_tool = f.tool, manager = f.manager, fix = fix }
  else
    local by = labels(o)[M.MANAGED_BY]
    local m = md(o)
    local who = by_hypd and ("was made by hypd but carries no " .. M.FAMILY .. " label that tells which tool " ..
      "made it") or (by and ("was not made by hypd (" .. M.MANAGED_BY .. "=" .. by .. ")") or
        ("was not made by hypd (it has no " .. M.MANAGED_BY .. "=hypd label)"))
    local kubectl = "kubectl delete " .. tostring(o.kind):lower() .. " " .. tostring(m.name) ..
      (m.namespace and (" -n " .. m.namespace) or "")
    msg = string.format("%s %s: %s does not change or delete it (hypd changes only what its own tools made). " ..
      "Choose another %s, or remove it yourself (%s) if it is not needed", what(o), who, asking, field, kubectl)
    details = { owner = by_hypd and "hypd" or (by or "unknown"), fix = kubectl }
  end
  details.type, details.name = "k8s:" .. tostring(o.kind):lower(), md(o).name
  details.code = "CONFLICT"
  details.field_message = field .. ": " .. what(o) .. " belongs to " ..
    (family and M.FAMILIES[family].tool or "another owner")
  errors.refuse(field, "owner", msg, details)
end

function M.owned(families, opts)
  return function(o) return M.check(o, families, opts) end
end

return M
