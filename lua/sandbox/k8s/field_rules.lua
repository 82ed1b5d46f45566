-- sandbox.k8s.field_rules: the API server's validation of the built-in
-- kinds' fields that clients most often write (the part of
-- pkg/apis/*/validation that objects of hypd and of its users reach), on
-- create and update, after decoding: a pod spec's containers (required,
-- names, image, pull policy, ports, env, volume mounts) and restart policy
-- (Always for the workload controllers, OnFailure or Never for a Job,
-- whose template's restart policy is defaulted to Always when empty), a
-- Deployment's, ReplicaSet's or StatefulSet's replicas and selector (it
-- must select its template's labels), a Service's type and ports.
--
-- errors(r, obj) -> { {type, field, value, detail} } in the order the
-- validation finds them; check(r, obj) -> nil | Status (422 Invalid,
-- sandbox.k8s.structural words it)
local merge = require "sandbox.k8s.merge"
local structural = require "sandbox.k8s.structural"

local M = {}

local DNS_LABEL = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must " ..
  "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is " ..
  "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
local PORT_RANGE = "must be between 1 and 65535, inclusive"
local PULL = { "Always", "IfNotPresent", "Never" }
local PROTOCOLS = { "SCTP", "TCP", "UDP" }

local function one_of(v, list)
  for _, x in ipairs(list) do if x == v then return true end end
  return false
end

local function quoted(list)
  local out = {}
  for i, x in ipairs(list) do out[i] = string.format("%q", x) end
  return "supported values: " .. table.concat(out, ", ")
end

local function dns_label(s) return #s <= 63 and s:match("^[a-z0-9]") and s:match("[a-z0-9]$") and
  not s:match("[^a-z0-9-]") end

local function containers(spec, path, out)
  local list = spec.containers
  if type(list) ~= "table" or #list == 0 then
    out[#out + 1] = { type = "Required", field = path .. ".containers" }
    return
  end
  local volumes, names = {}, {}
  for _, v in ipairs(type(spec.volumes) == "table" and spec.volumes or {}) do
    if type(v) == "table" and v.name then volumes[v.name] = true end
  end
  for i, c in ipairs(list) do
    local p = string.format("%s.containers[%d]", path, i - 1)
    if type(c) == "table" then
      if c.name == nil or c.name == "" then
        out[#out + 1] = { type = "Required", field = p .. ".name" }
      elseif names[c.name] then
        out[#out + 1] = { type = "Duplicate", field = p .. ".name", value = c.name }
      else
        names[c.name] = true
        if not dns_label(c.name) then
          out[#out + 1] = { type = "Invalid", field = p .. ".name", value = c.name, detail = DNS_LABEL }
        end
      end
      if c.image == nil or c.image == "" then out[#out + 1] = { type = "Required", field = p .. ".image" } end
      for j, port in ipairs(type(c.ports) == "table" and c.ports or {}) do
        local pp = string.format("%s.ports[%d]", p, j - 1)
        local n = port.containerPort
        if n == nil or n == 0 then
          out[#out + 1] = { type = "Required", field = pp .. ".containerPort" }
        elseif math.type(n) == "integer" and (n < 1 or n > 65535) then
          out[#out + 1] = { type = "Invalid", field = pp .. ".containerPort", value = n, detail = PORT_RANGE }
        end
        if port.protocol ~= nil and not one_of(port.protocol, PROTOCOLS) then
          out[#out + 1] = { type = "NotSupported", field = pp .. ".protocol", value = port.protocol,
            detail = quoted(PROTOCOLS) }
        end
      end
      for j, e in ipairs(type(c.env) == "table" and c.env or {}) do
        if type(e) == "table" and (e.name == nil or e.name == "") then
          out[#out + 1] = { type = "Required", field = string.format("%s.env[%d].name", p, j - 1) }
        end
      end
      for j, m in ipairs(type(c.volumeMounts) == "table" and c.volumeMounts or {}) do
        local mp = string.format("%s.volumeMounts[%d]", p, j - 1)
        if m.name == nil or m.name == "" then
          out[#out + 1] = { type = "Required", field = mp .. ".name" }
        elseif not volumes[m.name] then
          out[#out + 1] = { type = "NotFound", field = mp .. ".name", value = m.name }
        end
        if m.mountPath == nil or m.mountPath == "" then
          out[#out + 1] = { type = "Required", field = mp .. ".mountPath" }
        end
      end
      if c.imagePullPolicy ~= nil and not one_of(c.imagePullPolicy, PULL) then
        out[#out + 1] = { type = "NotSupported", field = p .. ".imagePullPolicy", value = c.imagePullPolicy,
          detail = quoted(PULL) }
      end
    end
  end
end

-- pod_spec(spec, path, restart, out): restart is the restart policies the
-- owner allows (nil: any of a Pod's)
local function pod_spec(spec, path, restart, out)
  if type(spec) ~= "table" then
    out[#out + 1] = { type = "Required", field = path .. ".containers" }
    return
  end
  containers(spec, path, out)
  -- an empty restart policy is defaulted to Always before validation
  -- (which a Job's template then refuses)
  local rp = (spec.restartPolicy == nil or spec.restartPolicy == "") and "Always" or spec.restartPolicy
  if not one_of(rp, restart) then
    out[#out + 1] = { type = "NotSupported", field = path .. ".restartPolicy", value = rp, detail = quoted(restart) }
  end
end

-- go_map(m) -> a map[string]string as Go's %#v prints it
local function go_map(m)
  local keys = {}
  for k in pairs(m or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = {}
  for i, k in ipairs(keys) do parts[i] = string.format("%q:%q", k, tostring(m[k])) end
  return "map[string]string{" .. table.concat(parts, ", ") .. "}"
end

local function selects(sel, labels)
  for k, v in pairs(sel.matchLabels or {}) do
    if labels[k] ~= v then return false end
  end
  for _, e in ipairs(sel.matchExpressions or {}) do
    local v, vals = labels[e.key], e.values or {}
    if e.operator == "In" and not one_of(v, vals) or e.operator == "NotIn" and v ~= nil and one_of(v, vals)
        or e.operator == "Exists" and v == nil or e.operator == "DoesNotExist" and v ~= nil then
      return false
    end
  end
  return true
end

local WORKLOAD = { Deployment = true, ReplicaSet = true, StatefulSet = true, DaemonSet = true }
local POD = { "Always", "OnFailure", "Never" }
local JOB = { "OnFailure", "Never" }

function M.errors(r, obj)
  local out, spec = {}, type(obj.spec) == "table" and obj.spec or {}
  local group_kind = r.group .. "/" .. r.kind
  if group_kind == "/Pod" then
    pod_spec(obj.spec, "spec", POD, out)
  elseif r.group == "apps" and WORKLOAD[r.kind] then
    local n = spec.replicas
    if r.kind ~= "DaemonSet" and math.type(n) == "integer" and n < 0 then
      out[#out + 1] = { type = "Invalid", field = "spec.replicas", value = n,
        detail = "must be greater than or equal to 0" }
    end
    local template = type(spec.template) == "table" and spec.template or {}
    local labels = type(template.metadata) == "table" and template.metadata.labels or {}
    if type(spec.selector) ~= "table" then
      out[#out + 1] = { type = "Required", field = "spec.selector" }
    elseif not selects(spec.selector, labels) then
      out[#out + 1] = { type = "Invalid", field = "spec.template.metadata.labels", shown = go_map(labels),
        detail = "`selector` does not match template `labels`" }
    end
    pod_spec(template.spec, "spec.template.spec", { "Always" }, out)
  elseif group_kind == "batch/Job" then
    pod_spec((spec.template or {}).spec, "spec.template.spec", JOB, out)
  elseif group_kind == "batch/CronJob" then
    local job = ((spec.jobTemplate or {}).spec or {})
    pod_spec((job.template or {}).spec, "spec.jobTemplate.spec.template.spec", JOB, out)
  elseif group_kind == "storage.k8s.io/StorageClass" then
    -- ValidateStorageClass
    if type(obj.provisioner) ~= "string" or obj.provisioner == "" then
      out[#out + 1] = { type = "Required", field = "provisioner" }
    end
    local reclaim, binding = { "Delete", "Retain" }, { "Immediate", "WaitForFirstConsumer" }
    if obj.reclaimPolicy ~= nil and not one_of(obj.reclaimPolicy, reclaim) then
      out[#out + 1] = { type = "NotSupported", field = "reclaimPolicy", value = obj.reclaimPolicy,
        detail = quoted(reclaim) }
    end
    if obj.volumeBindingMode ~= nil and not one_of(obj.volumeBindingMode, binding) then
      out[#out + 1] = { type = "NotSupported", field = "volumeBindingMode", value = obj.volumeBindingMode,
        detail = quoted(binding) }
    end
  elseif group_kind == "/Service" then
    local types = { "ClusterIP", "ExternalName", "LoadBalancer", "NodePort" }
    if spec.type ~= nil and not one_of(spec.type, types) then
      out[#out + 1] = { type = "NotSupported", field = "spec.type", value = spec.type, detail = quoted(types) }
    end
    for i, p in ipairs(type(spec.ports) == "table" and spec.ports or {}) do
      local pp = string.format("spec.ports[%d]", i - 1)
      local n = p.port
      if math.type(n) ~= "integer" or n < 1 or n > 65535 then
        out[#out + 1] = { type = "Invalid", field = pp .. ".port", value = n or 0, detail = PORT_RANGE }
      end
      if p.protocol ~= nil and not one_of(p.protocol, PROTOCOLS) then
        out[#out + 1] = { type = "NotSupported", field = pp .. ".protocol", value = p.protocol,
          detail = quoted(PROTOCOLS) }
      end
    end
  end
  return out
end

-- update_errors(r, old, new) -> the field errors of what an update may not
-- change (ValidateStorageClassUpdate)
function M.update_errors(r, old, new)
  local out = {}
  if r.group == "storage.k8s.io" and r.kind == "StorageClass" then
    for _, k in ipairs { "parameters", "provisioner", "reclaimPolicy" } do
      if not merge.equal(old[k], new[k]) then
        out[#out + 1] = { type = "Forbidden", field = k, detail = "updates to " .. k .. " are forbidden." }
      end
    end
    if new.volumeBindingMode ~= old.volumeBindingMode then
      out[#out + 1] = { type = "Invalid", field = "volumeBindingMode", value = new.volumeBindingMode,
        detail = "field is immutable" }
    end
  end
  return out
end

-- check_update(r, old, new) -> nil | Status: the update refused
function M.check_update(r, old, new)
  if r.crd or type(old) ~= "table" or type(new) ~= "table" then return nil end
  local errs = M.update_errors(r, old, new)
  if #errs == 0 then return nil end
  return structural.invalid(r, (new.metadata or {}).name, errs)
end

function M.check(r, obj)
  if r.crd or type(obj) ~= "table" then return nil end
  local errs = M.errors(r, obj)
  if #errs == 0 then return nil end
  return structural.invalid(r, (obj.metadata or {}).name, errs)
end

return M
