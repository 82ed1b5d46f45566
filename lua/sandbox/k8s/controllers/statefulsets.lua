-- sandbox.k8s.controllers.statefulsets: apps/v1 StatefulSets. Pods are
-- named <set>-<ordinal>, 0 to spec.replicas-1, created in order (the next
-- only once the one before is ready, podManagementPolicy OrderedReady;
-- all at once under Parallel) and removed from the highest ordinal down.
-- Each pod carries statefulset.kubernetes.io/pod-name,
-- apps.kubernetes.io/pod-index and controller-revision-hash labels, as the
-- StatefulSet controller sets them. A template change rolls the pods
-- (RollingUpdate, above spec.updateStrategy.rollingUpdate.partition): the
-- highest ordinal first, one at a time, each once the others are ready.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local deployments = require "sandbox.k8s.controllers.deployments"
local revisions = require "sandbox.k8s.controllers._revisions"

local M = {}

local key = ctl_.key
local nz = ctl_.nz

ctl_.handlers.sts = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local sr, pr = ctl:r("apps", "v1", "statefulsets"), ctl:r("", "v1", "pods")
  local set = cl:get(sr, ns, name)
  if not set then return end
  local spec = set.spec or {}
  local want = spec.replicas or 1
  local parallel = spec.podManagementPolicy == "Parallel"
  local hash = name .. "-" .. deployments.template_hash(spec.template)
  revisions.sync(ctl, set, hash, hash)
  local by_ord = {}
  for _, p in ipairs(ctl_.children(ctl, pr, set)) do
    local ord = tonumber(p.metadata.name:match("%-(%d+)$"))
    if ord and ctl_.phase(p) == "Failed" then
      cl:delete(pr, ns, p.metadata.name)
    elseif ord then
      by_ord[ord] = p
    end
  end
  -- scale down: the highest ordinals first, one at a time unless Parallel
  local top = -1
  for ord in pairs(by_ord) do top = math.max(top, ord) end
  for ord = top, want, -1 do
    if by_ord[ord] then
      cl:delete(pr, ns, by_ord[ord].metadata.name)
      ctl_.event(ctl, set, "Normal", "SuccessfulDelete", string.format("delete Pod %s in StatefulSet %s successful",
        by_ord[ord].metadata.name, name), "statefulset-controller")
      by_ord[ord] = nil
      if not parallel then break end
    end
  end
  for ord = 0, want - 1 do
    if not by_ord[ord] then
      local pname = name .. "-" .. ord
      local labels = { ["statefulset.kubernetes.io/pod-name"] = pname, ["apps.kubernetes.io/pod-index"] = tostring(ord),
        ["controller-revision-hash"] = hash }
      local t = ctl_.copy(spec.template or {})
      t.spec = t.spec or {}
      t.spec.hostname = t.spec.hostname or pname
      t.spec.subdomain = t.spec.subdomain or spec.serviceName
      local p = cl:create(pr, ctl_.pod(set, t, pname, labels, false))
      if p then
        by_ord[ord] = p
        ctl_.event(ctl, set, "Normal", "SuccessfulCreate", string.format("create Pod %s in StatefulSet %s successful",
          pname, name), "statefulset-controller")
      end
      if not parallel then break end
    elseif not parallel and not ctl_.pod_ready(by_ord[ord]) then
      break
    end
  end
  -- RollingUpdate: once every pod is there and ready, the highest ordinal
  -- at or above the partition still on an older revision is deleted (and
  -- comes back on the new one), one at a time
  local strategy = spec.updateStrategy or {}
  if (strategy.type or "RollingUpdate") == "RollingUpdate" then
    local partition = tonumber((strategy.rollingUpdate or {}).partition) or 0
    local settled = true
    for ord = 0, want - 1 do
      if not by_ord[ord] or not ctl_.pod_ready(by_ord[ord]) then settled = false end
    end
    for ord = want - 1, partition, -1 do
      local p = settled and by_ord[ord]
      if p and (p.metadata.labels or {})["controller-revision-hash"] ~= hash then
        cl:delete(pr, ns, p.metadata.name)
        ctl_.event(ctl, set, "Normal", "SuccessfulDelete", string.format("delete Pod %s in StatefulSet %s successful",
          p.metadata.name, name), "statefulset-controller")
        by_ord[ord] = nil
        break
      end
    end
  end
  local replicas, ready, updated = 0, 0, 0
  for _, p in pairs(by_ord) do
    replicas = replicas + 1
    if ctl_.pod_ready(p) then ready = ready + 1 end
    if (p.metadata.labels or {})["controller-revision-hash"] == hash then updated = updated + 1 end
  end
  local st = ctl_.copy(set.status or {})
  st.observedGeneration = set.metadata.generation
  -- the current revision becomes the update revision once every pod runs it
  local current = st.currentRevision or hash
  if updated == replicas and replicas == want then current = hash end
  local on_current = 0
  for _, p in pairs(by_ord) do
    if (p.metadata.labels or {})["controller-revision-hash"] == current then on_current = on_current + 1 end
  end
  st.replicas, st.currentReplicas, st.updatedReplicas = replicas, nz(on_current), nz(updated)
  st.readyReplicas, st.availableReplicas = nz(ready), ready
  st.currentRevision, st.updateRevision, st.collisionCount = current, hash, st.collisionCount or 0
  ctl_.put_status(ctl, sr, set, st)
end

function M.watch(ctl, etype, r, obj)
  if r.group == "apps" and r.kind == "StatefulSet" then
    if etype ~= "DELETED" then ctl:enqueue("sts", key(obj)) end
  elseif r.group == "" and r.kind == "Pod" then
    local o = ctl_.owner(obj, "StatefulSet")
    if o then ctl:enqueue("sts", obj.metadata.namespace .. "/" .. o.name) end
  end
end

function M.start(ctl)
  for _, s in ipairs(ctl.cl:list(ctl:r("apps", "v1", "statefulsets"))) do ctl:enqueue("sts", key(s)) end
end

return M
