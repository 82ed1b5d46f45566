-- sandbox.k8s.admit: what the API server fills in or refuses when an
-- object of some kinds is created, after the name and namespace checks and
-- the uid (which a Job's selector names) are set. create(cl, r, obj) ->
-- nil | Status (the create is refused).
local json = require "hypd.json"

local M = {}

local function invalid(r, name, field, why, reason)
  return { kind = "Status", apiVersion = "v1", metadata = json.object(), status = "Failure", code = 422,
    reason = "Invalid", message = string.format("%s.%s %q is invalid: %s: %s", r.kind, r.group ~= "" and r.group
      or "core", name, field, why),
    details = { name = name, group = r.group ~= "" and r.group or nil, kind = r.kind,
      causes = { { reason = reason or "FieldValueInvalid", message = why, field = field } } } }
end

local by_kind = {}

-- batch/v1 Job: unless spec.manualSelector, the selector is generated from
-- the uid and the pod template gets the labels it selects (the Job
-- strategy's PrepareForCreate and generateSelector)
by_kind["batch/Job"] = function(_, r, obj)
  local spec = obj.spec or json.object()
  obj.spec = spec
  if spec.manualSelector == true then return nil end
  local uid, name = obj.metadata.uid, obj.metadata.name
  if spec.selector ~= nil then
    return invalid(r, name, "spec.selector", "Invalid value: " .. json.encode(spec.selector) ..
      ": `selector` will be auto-generated")
  end
  spec.selector = { matchLabels = { ["batch.kubernetes.io/controller-uid"] = uid } }
  local t = spec.template or json.object()
  spec.template = t
  t.metadata = t.metadata or json.object()
  local l = t.metadata.labels or json.object()
  t.metadata.labels = l
  l["batch.kubernetes.io/controller-uid"], l["batch.kubernetes.io/job-name"] = uid, name
  l["controller-uid"], l["job-name"] = uid, name
  return nil
end

function M.create(cl, r, obj)
  local f = by_kind[r.group .. "/" .. r.kind]
  if f then return f(cl, r, obj) end
  return nil
end

M.invalid = invalid
return M
