-- sandbox.k8s.controllers.daemonsets: one pod of a DaemonSet on every node
-- its template selects and whose taints it tolerates (plus the node
-- condition taints a DaemonSet tolerates by itself), placed directly with
-- spec.nodeName. Pods of an older template, on nodes that went or no longer
-- match, and failed pods are deleted; the missing ones are created.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local deployments = require "sandbox.k8s.controllers.deployments"
local revisions = require "sandbox.k8s.controllers._revisions"
local sched = require "sandbox.k8s.controllers.scheduler"

local M = {}

local key = ctl_.key
local nz = ctl_.nz

-- the tolerations the DaemonSet controller adds to every daemon pod
local IMPLICIT = {
  { key = "node.kubernetes.io/not-ready", operator = "Exists", effect = "NoExecute" },
  { key = "node.kubernetes.io/unreachable", operator = "Exists", effect = "NoExecute" },
  { key = "node.kubernetes.io/disk-pressure", operator = "Exists", effect = "NoSchedule" },
  { key = "node.kubernetes.io/memory-pressure", operator = "Exists", effect = "NoSchedule" },
  { key = "node.kubernetes.io/pid-pressure", operator = "Exists", effect = "NoSchedule" },
  { key = "node.kubernetes.io/unschedulable", operator = "Exists", effect = "NoSchedule" },
}

local function template_spec(ds)
  local spec = ctl_.copy((ds.spec.template or {}).spec or {})
  spec.tolerations = spec.tolerations or {}
  for _, t in ipairs(IMPLICIT) do spec.tolerations[#spec.tolerations + 1] = ctl_.copy(t) end
  return spec
end

-- eligible(spec, node): the template selects the node and tolerates its
-- taints; a node that is only not ready keeps its daemon pod (which waits)
local function eligible(spec, node)
  if not sched.selects(spec, node) then return false end
  for _, taint in ipairs((node.spec or {}).taints or {}) do
    if (taint.effect == "NoSchedule" or taint.effect == "NoExecute") and taint.key ~= "node.kubernetes.io/not-ready"
        and not sched.tolerates(spec.tolerations, taint) then
      return false
    end
  end
  return true
end

ctl_.handlers.ds = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local dsr, pr, nr = ctl:r("apps", "v1", "daemonsets"), ctl:r("", "v1", "pods"), ctl:r("", "v1", "nodes")
  local ds = cl:get(dsr, ns, name)
  if not ds then return end
  local spec = template_spec(ds)
  local hash = deployments.template_hash(ds.spec.template)
  revisions.sync(ctl, ds, name .. "-" .. hash, hash)
  local targets = {}
  for _, node in ipairs(cl:list(nr)) do
    if eligible(spec, node) then targets[node.metadata.name] = node end
  end
  local have = {}
  for _, p in ipairs(ctl_.children(ctl, pr, ds)) do
    local nn = p.spec.nodeName
    local stale = ctl_.phase(p) == "Failed" or not targets[nn] or have[nn]
      or (p.metadata.labels or {})["controller-revision-hash"] ~= hash
    if stale then
      cl:delete(pr, ns, p.metadata.name)
    else
      have[nn] = p
    end
  end
  local template = { metadata = ds.spec.template and ds.spec.template.metadata, spec = spec }
  local labels = { ["controller-revision-hash"] = hash,
    ["pod-template-generation"] = tostring(ds.metadata.generation or 1) }
  local desired, ready = 0, 0
  local names = {}
  for nn in pairs(targets) do names[#names + 1] = nn end
  table.sort(names)
  for _, nn in ipairs(names) do
    desired = desired + 1
    if not have[nn] then
      local t = ctl_.copy(template)
      t.spec.nodeName = nn
      local p = cl:create(pr, ctl_.pod(ds, t, name .. "-", labels, true))
      if p then
        have[nn] = p
        ctl_.event(ctl, ds, "Normal", "SuccessfulCreate", "Created pod: " .. p.metadata.name, "daemonset-controller")
      end
    end
    if have[nn] and ctl_.pod_ready(have[nn]) then ready = ready + 1 end
  end
  local current = 0
  for _ in pairs(have) do current = current + 1 end
  ctl_.put_status(ctl, dsr, ds, { desiredNumberScheduled = desired, currentNumberScheduled = current,
    numberReady = ready, numberAvailable = nz(ready), updatedNumberScheduled = nz(current),
    numberMisscheduled = 0, numberUnavailable = nz(desired - ready), observedGeneration = ds.metadata.generation })
end

function M.watch(ctl, etype, r, obj)
  if r.group == "apps" and r.kind == "DaemonSet" then
    if etype ~= "DELETED" then ctl:enqueue("ds", key(obj)) end
  elseif r.group == "" and r.kind == "Pod" then
    local o = ctl_.owner(obj, "DaemonSet")
    if o then ctl:enqueue("ds", obj.metadata.namespace .. "/" .. o.name) end
  elseif r.group == "" and r.kind == "Node" then
    for _, ds in ipairs(ctl.cl:list(ctl:r("apps", "v1", "daemonsets"))) do ctl:enqueue("ds", key(ds)) end
  end
end

function M.start(ctl)
  for _, ds in ipairs(ctl.cl:list(ctl:r("apps", "v1", "daemonsets"))) do ctl:enqueue("ds", key(ds)) end
end

return M
