-- sandbox.k8s.controllers.deployments: Deployments and ReplicaSets. A
-- Deployment owns one ReplicaSet per pod template (<deploy>-<hash>, label
-- pod-template-hash); the current one is scaled to spec.replicas and older
-- ones to 0 (a rollout without surge). A ReplicaSet keeps spec.replicas
-- unfinished pods (<rs>-<5 chars>). Both report the status kubectl shows.
-- Deleting either takes its children with it (garbage collection in
-- objects.lua).
local ctl_ = require "sandbox.k8s.controllers._ctl"
local json = require "hypd.json"
local select = require "sandbox.k8s.select"

local M = {}

local REV = "deployment.kubernetes.io/revision"

local key = ctl_.key
local function split(k) return k:match("^([^/]*)/(.*)$") end
local nz = ctl_.nz

-- template_hash(template) -> the pod-template-hash of a pod template
function M.template_hash(template)
  return ctl_.hash(json.encode(template or json.object()))
end

local function with_hash(template, hash)
  local t = ctl_.copy(template or {})
  t.metadata = t.metadata or {}
  t.metadata.labels = t.metadata.labels or {}
  t.metadata.labels["pod-template-hash"] = hash
  return t
end

local function new_rs(d, hash, replicas, revision)
  local sel = ctl_.copy(d.spec.selector or { matchLabels = ((d.spec.template or {}).metadata or {}).labels })
  sel.matchLabels = sel.matchLabels or {}
  sel.matchLabels["pod-template-hash"] = hash
  local t = with_hash(d.spec.template, hash)
  local labels = ctl_.copy(t.metadata.labels)
  return { apiVersion = "apps/v1", kind = "ReplicaSet",
    metadata = { name = d.metadata.name .. "-" .. hash, namespace = d.metadata.namespace, labels = labels,
      annotations = { [REV] = tostring(revision), ["deployment.kubernetes.io/desired-replicas"] = tostring(replicas),
        ["deployment.kubernetes.io/max-replicas"] = tostring(replicas + math.max(1, math.ceil(replicas / 4))) },
      ownerReferences = { ctl_.owner_ref(d) } },
    spec = { replicas = replicas, selector = sel, template = t, minReadySeconds = d.spec.minReadySeconds } }
end

ctl_.handlers.deploy = function(ctl, k)
  local cl = ctl.cl
  local ns, name = split(k)
  local dr, rsr = ctl:r("apps", "v1", "deployments"), ctl:r("apps", "v1", "replicasets")
  local d = cl:get(dr, ns, name)
  if not d then return end
  local want = d.spec.replicas or 1
  local hash = M.template_hash(d.spec.template)
  local rss = ctl_.children(ctl, rsr, d)
  local cur, rev = nil, 0
  for _, rs in ipairs(rss) do
    rev = math.max(rev, tonumber((rs.metadata.annotations or {})[REV]) or 0)
    if (rs.metadata.labels or {})["pod-template-hash"] == hash then cur = rs end
  end
  local created = false
  if not cur then
    cur = cl:create(rsr, new_rs(d, hash, want, rev + 1))
    created = true
    if not cur then return end
    ctl_.event(ctl, d, "Normal", "ScalingReplicaSet", string.format("Scaled up replica set %s from 0 to %d",
      cur.metadata.name, want), "deployment-controller")
    rss[#rss + 1] = cur
  elseif cur.spec.replicas ~= want then
    local c = ctl_.copy(cur)
    ctl_.event(ctl, d, "Normal", "ScalingReplicaSet", string.format("Scaled %s replica set %s from %d to %d",
      want > (c.spec.replicas or 0) and "up" or "down", c.metadata.name, c.spec.replicas or 0, want),
      "deployment-controller")
    c.spec.replicas = want
    c.metadata.annotations = c.metadata.annotations or {}
    c.metadata.annotations["deployment.kubernetes.io/desired-replicas"] = tostring(want)
    cur = cl:update(rsr, c) or cur
  end
  local replicas, ready, available, old_live = 0, 0, 0, 0
  for _, rs in ipairs(rss) do
    if rs.metadata.uid ~= cur.metadata.uid and (rs.spec.replicas or 0) > 0 then
      local c = ctl_.copy(rs)
      ctl_.event(ctl, d, "Normal", "ScalingReplicaSet", string.format("Scaled down replica set %s from %d to 0",
        c.metadata.name, c.spec.replicas), "deployment-controller")
      c.spec.replicas = 0
      rs = cl:update(rsr, c) or rs
    end
    local s = rs.status or {}
    replicas = replicas + (s.replicas or 0)
    ready = ready + (s.readyReplicas or 0)
    available = available + (s.availableReplicas or 0)
    if rs.metadata.uid ~= cur.metadata.uid then old_live = old_live + (s.replicas or 0) end
  end
  local cs = (cur.status or {})
  local updated = cs.replicas or 0
  local st = ctl_.copy(d.status or {})
  st.observedGeneration = d.metadata.generation
  st.replicas, st.updatedReplicas = nz(replicas), nz(updated)
  st.readyReplicas, st.availableReplicas = nz(ready), nz(available)
  st.unavailableReplicas = nz(want - available)
  local opt = { update = true }
  if available >= want then
    st.conditions = ctl_.set_condition(st.conditions, "Available", "True", "MinimumReplicasAvailable",
      "Deployment has minimum availability.", opt)
  else
    st.conditions = ctl_.set_condition(st.conditions, "Available", "False", "MinimumReplicasUnavailable",
      "Deployment does not have minimum availability.", opt)
  end
  local rsname = cur.metadata.name
  if created then
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "True", "NewReplicaSetCreated",
      string.format('Created new replica set "%s"', rsname), opt)
  elseif (cs.availableReplicas or 0) >= want and old_live == 0 and (cs.replicas or 0) == want then
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "True", "NewReplicaSetAvailable",
      string.format('ReplicaSet "%s" has successfully progressed.', rsname), opt)
  else
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "True", "ReplicaSetUpdated",
      string.format('ReplicaSet "%s" is progressing.', rsname), opt)
  end
  ctl_.put_status(ctl, dr, d, st)
end

local function active(pod) return not ctl_.finished(pod) end

-- deletion_cost(pod) -> its controller.kubernetes.io/pod-deletion-cost (0 unset)
local function deletion_cost(pod)
  return math.tointeger(tonumber((pod.metadata.annotations or {})["controller.kubernetes.io/pod-deletion-cost"])) or 0
end

ctl_.handlers.rs = function(ctl, k)
  local cl = ctl.cl
  local ns, name = split(k)
  local rsr, pr = ctl:r("apps", "v1", "replicasets"), ctl:r("", "v1", "pods")
  local rs = cl:get(rsr, ns, name)
  if not rs then return end
  local want = rs.spec.replicas or 1
  local live = {}
  for _, p in ipairs(ctl_.children(ctl, pr, rs)) do
    if active(p) then live[#live + 1] = p end
  end
  if #live < want then
    local labels = ((rs.spec.template or {}).metadata or {}).labels
    for _ = #live + 1, want do
      local p = cl:create(pr, ctl_.pod(rs, rs.spec.template or {}, rs.metadata.name .. "-", labels, true))
      if p then
        live[#live + 1] = p
        ctl_.event(ctl, rs, "Normal", "SuccessfulCreate", "Created pod: " .. p.metadata.name, "replicaset-controller")
      end
    end
  elseif #live > want then
    -- unscheduled first, then not ready, then the lower
    -- controller.kubernetes.io/pod-deletion-cost, then the newest
    table.sort(live, function(a, b)
      local sa, sb = a.spec.nodeName and 1 or 0, b.spec.nodeName and 1 or 0
      if sa ~= sb then return sa < sb end
      local ra, rb = ctl_.pod_ready(a) and 1 or 0, ctl_.pod_ready(b) and 1 or 0
      if ra ~= rb then return ra < rb end
      local ca, cb = deletion_cost(a), deletion_cost(b)
      if ca ~= cb then return ca < cb end
      return (a.metadata.creationTimestamp or "") > (b.metadata.creationTimestamp or "")
    end)
    for i = 1, #live - want do
      cl:delete(pr, ns, live[i].metadata.name)
      ctl_.event(ctl, rs, "Normal", "SuccessfulDelete", "Deleted pod: " .. live[i].metadata.name,
        "replicaset-controller")
    end
    for _ = 1, #live - want do table.remove(live, 1) end
  end
  local ready, labeled = 0, 0
  for _, p in ipairs(live) do
    if ctl_.pod_ready(p) then ready = ready + 1 end
    if select.match_selector(rs.spec.selector, p.metadata.labels) then labeled = labeled + 1 end
  end
  local st = { replicas = #live, fullyLabeledReplicas = nz(labeled), readyReplicas = nz(ready),
    availableReplicas = nz(ready), observedGeneration = rs.metadata.generation }
  ctl_.put_status(ctl, rsr, rs, st)
end

function M.watch(ctl, etype, r, obj)
  if r.group == "apps" and r.kind == "Deployment" then
    if etype ~= "DELETED" then ctl:enqueue("deploy", key(obj)) end
  elseif r.group == "apps" and r.kind == "ReplicaSet" then
    if etype ~= "DELETED" then ctl:enqueue("rs", key(obj)) end
    local o = ctl_.owner(obj, "Deployment")
    if o then ctl:enqueue("deploy", obj.metadata.namespace .. "/" .. o.name) end
  elseif r.group == "" and r.kind == "Pod" then
    local o = ctl_.owner(obj, "ReplicaSet")
    if o then ctl:enqueue("rs", obj.metadata.namespace .. "/" .. o.name) end
  end
end

function M.start(ctl)
  for _, d in ipairs(ctl.cl:list(ctl:r("apps", "v1", "deployments"))) do ctl:enqueue("deploy", key(d)) end
  for _, rs in ipairs(ctl.cl:list(ctl:r("apps", "v1", "replicasets"))) do ctl:enqueue("rs", key(rs)) end
end

return M
