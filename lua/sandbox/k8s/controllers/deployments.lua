-- sandbox.k8s.controllers.deployments: Deployments and ReplicaSets, as
-- kube-controller-manager's deployment and replicaset controllers run them.
-- A Deployment owns one ReplicaSet per pod template (<deploy>-<hash>, label
-- pod-template-hash), numbered by deployment.kubernetes.io/revision (the
-- Deployment carries its current one). A template change makes a new
-- ReplicaSet and rolls to it: RollingUpdate within maxSurge/maxUnavailable
-- (25%/25% by default; up first, then down, one step a sync), Recreate
-- (every old pod gone before the new ones start). Going back to an older
-- template (kubectl rollout undo) reuses its ReplicaSet under a new
-- revision. Old ReplicaSets stay at 0, the newest revisionHistoryLimit
-- (10) of them. A paused Deployment does not roll. Conditions Available
-- and Progressing (False, ProgressDeadlineExceeded, after
-- progressDeadlineSeconds of simulated time without progress) and
-- observedGeneration are what kubectl rollout status reads. A ReplicaSet keeps spec.replicas unfinished pods (<rs>-<5
-- chars>). Deleting either takes its children with it (garbage
-- collection in objects.lua).
local ctl_ = require "sandbox.k8s.controllers._ctl"
local json = require "hypd.json"
local core = require "hypd.core"
local select = require "sandbox.k8s.select"
local tbl = require "sandbox.k8s.table"

local M = {}

local REV = "deployment.kubernetes.io/revision"
local HISTORY = "deployment.kubernetes.io/revision-history"
local DESIRED = "deployment.kubernetes.io/desired-replicas"
local MAX = "deployment.kubernetes.io/max-replicas"
-- the Deployment's annotations a ReplicaSet does not copy (annotationsToSkip)
local SKIP = { [REV] = true, [HISTORY] = true, [DESIRED] = true, [MAX] = true,
  ["kubectl.kubernetes.io/last-applied-configuration"] = true, ["deprecated.deployment.rollback.to"] = true }

local TIMED_OUT = "ProgressDeadlineExceeded"

local key = ctl_.key
local function split(k) return k:match("^([^/]*)/(.*)$") end
local nz = ctl_.nz

-- normal(v) -> v without nulls, empty objects and empty lists: a template
-- as the API server's typed decoding sees it (kubectl rollout undo sends
-- back "creationTimestamp": null and "resources": {})
local function normal(v)
  if type(v) ~= "table" or v == json.null then return v end
  local out, n = {}, 0
  for k, x in pairs(v) do
    x = normal(x)
    if x ~= nil and x ~= json.null and not (type(x) == "table" and next(x) == nil) then
      out[k] = x
      n = n + 1
    end
  end
  if n == 0 then return nil end
  return out
end

-- template_hash(template) -> the pod-template-hash of a pod template
function M.template_hash(template)
  local t = ctl_.copy(template or {})
  if t.metadata and t.metadata.labels then t.metadata.labels["pod-template-hash"] = nil end
  return ctl_.hash(json.encode(normal(t) or json.object()))
end

local function with_hash(template, hash)
  local t = ctl_.copy(template or {})
  t.metadata = t.metadata or {}
  t.metadata.labels = t.metadata.labels or {}
  t.metadata.labels["pod-template-hash"] = hash
  return t
end

local function revision(rs) return tonumber(((rs.metadata or {}).annotations or {})[REV]) or 0 end

-- resolve(v, total, up) -> an IntOrString (3 or "25%") of total, percentages rounded up or down
local function resolve(v, total, up)
  if math.type(v) == "integer" then return v end
  local pct = tostring(v):match("^(%d+)%%$")
  if pct then
    local x = tonumber(pct) * total / 100
    return math.tointeger(up and math.ceil(x) or math.floor(x))
  end
  return math.tointeger(tonumber(v) or 0) or 0
end

-- fenceposts(d) -> maxSurge, maxUnavailable as numbers of pods (never both 0)
local function fenceposts(d)
  local want = d.spec.replicas or 1
  local strategy = d.spec.strategy or {}
  if strategy.type == "Recreate" then return 0, 0 end
  local ru = strategy.rollingUpdate or {}
  local surge = resolve(ru.maxSurge == nil and "25%" or ru.maxSurge, want, true)
  local unavailable = resolve(ru.maxUnavailable == nil and "25%" or ru.maxUnavailable, want, false)
  if surge == 0 and unavailable == 0 then unavailable = 1 end
  return surge, unavailable
end

-- copy_annotations(d, rs): the Deployment's annotations onto its ReplicaSet
-- (kubernetes.io/change-cause is what kubectl rollout history shows)
local function copy_annotations(d, ann)
  for k, v in pairs(d.metadata.annotations or {}) do
    if not SKIP[k] then ann[k] = v end
  end
  return ann
end

local function new_rs(d, hash, replicas, rev, surge)
  local sel = ctl_.copy(d.spec.selector or { matchLabels = ((d.spec.template or {}).metadata or {}).labels })
  sel.matchLabels = sel.matchLabels or {}
  sel.matchLabels["pod-template-hash"] = hash
  local t = with_hash(d.spec.template, hash)
  local labels = ctl_.copy(t.metadata.labels)
  local want = d.spec.replicas or 1
  local ann = copy_annotations(d, { [REV] = tostring(rev), [DESIRED] = tostring(want), [MAX] = tostring(want + surge) })
  return { apiVersion = "apps/v1", kind = "ReplicaSet",
    metadata = { name = d.metadata.name .. "-" .. hash, namespace = d.metadata.namespace, labels = labels,
      annotations = ann, ownerReferences = { ctl_.owner_ref(d) } },
    spec = { replicas = replicas, selector = sel, template = t, minReadySeconds = d.spec.minReadySeconds } }
end

local function sum(list, f)
  local n = 0
  for _, x in ipairs(list) do n = n + (f(x) or 0) end
  return n
end
local function spec_n(rs) return rs.spec.replicas or 0 end
local function status_n(field) return function(rs) return (rs.status or {})[field] end end

-- one sync of a Deployment, in the order the controller takes it: read
-- (the Deployment and its ReplicaSets), revision (of the current
-- ReplicaSet), roll (paused, Recreate or RollingUpdate), prune (beyond
-- revisionHistoryLimit), stamp (the Deployment's revision), status.
-- s is the sync's state: the Deployment d, its ReplicaSets cur (the
-- template's) and olds (by revision), and what the spec says.

local function read(ctl, k)
  local cl = ctl.cl
  local ns, name = split(k)
  local s = { ctl = ctl, cl = cl, k = k, ns = ns, created = false,
    dr = ctl:r("apps", "v1", "deployments"), rsr = ctl:r("apps", "v1", "replicasets") }
  local d = cl:get(s.dr, ns, name)
  if not d or d.metadata.deletionTimestamp then return nil end
  s.d, s.want, s.hash = d, d.spec.replicas or 1, M.template_hash(d.spec.template)
  s.surge, s.unavailable = fenceposts(d)
  s.recreate = (d.spec.strategy or {}).type == "Recreate"
  s.paused = d.spec.paused == true
  s.olds, s.maxrev = {}, 0
  for _, rs in ipairs(ctl_.children(ctl, s.rsr, d)) do
    if (rs.metadata.labels or {})["pod-template-hash"] == s.hash then
      s.cur = rs
    else
      s.olds[#s.olds + 1] = rs
      s.maxrev = math.max(s.maxrev, revision(rs))
    end
  end
  table.sort(s.olds, function(a, b) return revision(a) < revision(b) end)
  return s
end

-- scale(s, rs, n) -> rs at n replicas (its desired/max-replicas annotations
-- and the ScalingReplicaSet event the controller records)
local function scale(s, rs, n)
  local c = ctl_.copy(rs)
  local from = c.spec.replicas or 0
  c.spec.replicas = n
  c.metadata.annotations = c.metadata.annotations or {}
  c.metadata.annotations[DESIRED] = tostring(s.want)
  c.metadata.annotations[MAX] = tostring(s.want + s.surge)
  local out = s.cl:update(s.rsr, c)
  if out and from ~= n then
    ctl_.event(s.ctl, s.d, "Normal", "ScalingReplicaSet", string.format("Scaled %s replica set %s from %d to %d",
      n > from and "up" or "down", rs.metadata.name, from, n), "deployment-controller")
  end
  return out or rs
end

-- create(s, n) -> the template's new ReplicaSet at n replicas | nil
local function create(s, n)
  local rs = s.cl:create(s.rsr, new_rs(s.d, s.hash, n, s.maxrev + 1, s.surge))
  if not rs then return nil end
  s.created = true
  if n > 0 then
    ctl_.event(s.ctl, s.d, "Normal", "ScalingReplicaSet", string.format("Scaled up replica set %s from 0 to %d",
      rs.metadata.name, n), "deployment-controller")
  end
  return rs
end

-- the new ReplicaSet takes the next revision when it is an older one come
-- back (rollout undo), remembering the ones it had; it copies the
-- Deployment's annotations on every sync
local function revise(s)
  local cur = s.cur
  if not cur then return end
  local c = ctl_.copy(cur)
  c.metadata.annotations = copy_annotations(s.d, c.metadata.annotations or {})
  local r0 = revision(cur)
  if r0 <= s.maxrev then
    c.metadata.annotations[REV] = tostring(s.maxrev + 1)
    local h = c.metadata.annotations[HISTORY]
    c.metadata.annotations[HISTORY] = (h and h ~= "" and h .. "," or "") .. tostring(r0)
  end
  if not ctl_.equal(c, cur) then s.cur = s.cl:update(s.rsr, c) or cur end
end

-- paused: no rollout; a scale reaches the one active ReplicaSet
local function roll_paused(s)
  local active = {}
  for _, rs in ipairs(s.olds) do if spec_n(rs) > 0 then active[#active + 1] = rs end end
  if s.cur and (#active == 0) and spec_n(s.cur) ~= s.want then s.cur = scale(s, s.cur, s.want) end
  if not s.cur and #active == 1 and spec_n(active[1]) ~= s.want then scale(s, active[1], s.want) end
end

-- Recreate: every old pod gone before the new ones start
local function roll_recreate(s)
  local down = false
  for i, rs in ipairs(s.olds) do
    if spec_n(rs) > 0 then s.olds[i] = scale(s, rs, 0); down = true end
  end
  if not down and sum(s.olds, status_n("replicas")) == 0 then
    if not s.cur then s.cur = create(s, s.want) elseif spec_n(s.cur) ~= s.want then s.cur = scale(s, s.cur, s.want) end
  end
end

-- RollingUpdate, up: the new ReplicaSet grows within maxSurge -> true when it did
local function roll_up(s)
  local want, surge = s.want, s.surge
  if not s.cur then
    local n = #s.olds == 0 and want or math.max(0, math.min(want + surge - sum(s.olds, spec_n), want))
    s.cur = create(s, n)
    return s.cur ~= nil
  elseif spec_n(s.cur) > want then
    s.cur = scale(s, s.cur, want)
  elseif spec_n(s.cur) < want then
    local total = spec_n(s.cur) + sum(s.olds, spec_n)
    if total < want + surge then
      s.cur = scale(s, s.cur, spec_n(s.cur) + math.min(want + surge - total, want - spec_n(s.cur)))
      return true
    end
  end
  return false
end

-- RollingUpdate, down, oldest first: the unhealthy old pods, then as many
-- available ones as keep want - maxUnavailable available
local function roll_down(s)
  local cur, olds = s.cur, s.olds
  local min_available = s.want - s.unavailable
  local all = spec_n(cur) + sum(olds, spec_n)
  local budget = all - min_available - (spec_n(cur) - ((cur.status or {}).availableReplicas or 0))
  if budget <= 0 then return end
  for i, rs in ipairs(olds) do
    local unhealthy = spec_n(rs) - ((rs.status or {}).availableReplicas or 0)
    if budget <= 0 then break end
    if spec_n(rs) > 0 and unhealthy > 0 then
      local n = math.min(budget, unhealthy)
      olds[i] = scale(s, rs, spec_n(rs) - n)
      budget = budget - n
    end
  end
  local excess = ((cur.status or {}).availableReplicas or 0) + sum(olds, function(rs)
    return math.min(spec_n(rs), (rs.status or {}).availableReplicas or 0) end) - min_available
  for i, rs in ipairs(olds) do
    if excess <= 0 then break end
    if spec_n(rs) > 0 then
      local n = math.min(spec_n(rs), excess)
      olds[i] = scale(s, rs, spec_n(rs) - n)
      excess = excess - n
    end
  end
end

local function roll(s)
  if s.paused then
    roll_paused(s)
  elseif s.recreate then
    roll_recreate(s)
  elseif not roll_up(s) and s.cur then
    roll_down(s)
  end
end

-- revisionHistoryLimit: the oldest ReplicaSets at 0 beyond it are deleted
local function prune(s)
  local limit = s.d.spec.revisionHistoryLimit or 10
  local idle = {}
  for _, rs in ipairs(s.olds) do
    if spec_n(rs) == 0 and ((rs.status or {}).replicas or 0) == 0 and not rs.metadata.deletionTimestamp then
      idle[#idle + 1] = rs
    end
  end
  for i = 1, #idle - limit do s.cl:delete(s.rsr, s.ns, idle[i].metadata.name, { propagation = "Background" }) end
end

-- the Deployment's own revision annotation: its new ReplicaSet's
local function stamp(s)
  if not s.cur then return end
  local rev = (s.cur.metadata.annotations or {})[REV]
  if rev and (s.d.metadata.annotations or {})[REV] ~= rev then
    local c = ctl_.copy(s.d)
    c.metadata.annotations = c.metadata.annotations or {}
    c.metadata.annotations[REV] = rev
    s.d = s.cl:update(s.dr, c) or s.d
  end
end

-- progressing(s, st, before): the Progressing condition this
-- sync gives (paused, resumed, a new ReplicaSet, complete, progress made)
local function progressing(s, st, before)
  local d, opt = s.d, { update = true }
  local cond = ctl_.condition(st.conditions, "Progressing")
  local rsname = s.cur and s.cur.metadata.name
  local what, who = rsname and "ReplicaSet" or "Deployment", rsname or d.metadata.name
  if s.paused then
    if not cond or cond.reason ~= "DeploymentPaused" then
      st.conditions = ctl_.set_condition(st.conditions, "Progressing", "Unknown", "DeploymentPaused",
        "Deployment is paused", opt)
    end
  elseif cond and cond.reason == "DeploymentPaused" then
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "Unknown", "DeploymentResumed",
      "Deployment is resumed", opt)
  elseif s.created then
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "True", "NewReplicaSetCreated",
      string.format('Created new replica set "%s"', rsname), opt)
  elseif s.complete then
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "True", "NewReplicaSetAvailable",
      string.format('%s "%s" has successfully progressed.', what, who), opt)
  elseif not cond and rsname then
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "True", "FoundNewReplicaSet",
      string.format('Found new replica set "%s"', rsname), opt)
  elseif not ctl_.equal(before.updatedReplicas, st.updatedReplicas) or not ctl_.equal(before.readyReplicas,
      st.readyReplicas) or not ctl_.equal(before.availableReplicas, st.availableReplicas)
      or (st.replicas or 0) < (before.replicas or 0) or (cond and cond.reason ~= "ReplicaSetUpdated"
        and cond.reason ~= TIMED_OUT) then
    st.conditions = ctl_.set_condition(st.conditions, "Progressing", "True", "ReplicaSetUpdated",
      string.format('%s "%s" is progressing.', what, who), opt)
    -- progress moves lastUpdateTime, from which the deadline counts
    for _, c in ipairs(st.conditions) do if c.type == "Progressing" then c.lastUpdateTime = ctl_.stamp() end end
  end
end

-- deadline(s, st): no progress for progressDeadlineSeconds (of simulated
-- time) is timed out, which kubectl rollout status reports as a failure;
-- until then the sync is scheduled again for the deadline
local function deadline(s, st)
  local d = s.d
  local cond = ctl_.condition(st.conditions, "Progressing")
  if s.paused or s.complete or not cond or cond.status ~= "True" then
    s.ctl:cancel("deploy", s.k) -- nothing to time out
  elseif tonumber(d.spec.progressDeadlineSeconds) then
    local from = tbl.epoch(cond.lastUpdateTime)
    local at = from and from + tonumber(d.spec.progressDeadlineSeconds) / ctl_.speed()
    if at and core.now() >= at then
      local rsname = s.cur and s.cur.metadata.name
      st.conditions = ctl_.set_condition(st.conditions, "Progressing", "False", TIMED_OUT,
        string.format('%s "%s" has timed out progressing.', rsname and "ReplicaSet" or "Deployment",
          rsname or d.metadata.name), { update = true })
    elseif at then
      s.ctl:at(at + 1, "deploy", s.k)
    end
  end
end

-- status(s): the counts, Available, Progressing and its deadline
local function status(s)
  local d, want = s.d, s.want
  local all = { table.unpack(s.olds) }
  if s.cur then all[#all + 1] = s.cur end
  local available = sum(all, status_n("availableReplicas"))
  local st = ctl_.copy(d.status or {})
  local before = ctl_.copy(st)
  st.observedGeneration = d.metadata.generation
  st.replicas, st.updatedReplicas = nz(sum(all, status_n("replicas"))), nz(s.cur and (s.cur.status or {}).replicas or 0)
  st.readyReplicas, st.availableReplicas = nz(sum(all, status_n("readyReplicas"))), nz(available)
  st.unavailableReplicas = nz(math.max(0, sum(all, spec_n) - available))
  local opt = { update = true }
  if available >= want - (s.recreate and 0 or s.unavailable) then
    st.conditions = ctl_.set_condition(st.conditions, "Available", "True", "MinimumReplicasAvailable",
      "Deployment has minimum availability.", opt)
  else
    st.conditions = ctl_.set_condition(st.conditions, "Available", "False", "MinimumReplicasUnavailable",
      "Deployment does not have minimum availability.", opt)
  end
  s.complete = (st.updatedReplicas or 0) == want and (st.replicas or 0) == want and available == want
  progressing(s, st, before)
  deadline(s, st)
  ctl_.put_status(s.ctl, s.dr, d, st)
end

ctl_.handlers.deploy = function(ctl, k)
  local s = read(ctl, k)
  if not s then return end
  revise(s)
  roll(s)
  prune(s)
  stamp(s)
  status(s)
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
