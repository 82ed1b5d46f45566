-- sandbox.k8s.controllers.scheduler: the default-scheduler. Pending pods
-- without spec.nodeName go to a node that tolerates-wise, selector-wise and
-- resource-wise fits (extended resources: nvidia.com/gpu, EFA, Neuron; a
-- node's free amount is its allocatable minus what bound, unfinished pods
-- request), preferring nodes that match preferred node affinity, then the
-- least busy. A pod that fits nowhere stays Pending with PodScheduled False
-- (Unschedulable) and one FailedScheduling event per distinct message, in
-- the scheduler's words ("0/3 nodes are available: 3 Insufficient
-- nvidia.com/gpu. preemption: 0/3 nodes are available: 3 No preemption
-- victims found for incoming pod."); any node change or freed capacity
-- runs the pass again.
local ctl_ = require "sandbox.k8s.controllers._ctl"

local M = {}
M.RESOURCES = { "nvidia.com/gpu", "vpc.amazonaws.com/efa", "aws.amazon.com/neurondevice" }

-- requests(pod) -> {resource -> amount} of the extended resources it asks
-- for (a request defaults to its limit; init containers count by their max)
function M.requests(pod)
  local out = {}
  local function each(list, add)
    for _, c in ipairs(list or {}) do
      local rq, lim = (c.resources or {}).requests or {}, (c.resources or {}).limits or {}
      for _, res in ipairs(M.RESOURCES) do
        local v = rq[res] or lim[res]
        if v then add(res, ctl_.quantity(v)) end
      end
    end
  end
  each(pod.spec.containers, function(res, n) out[res] = (out[res] or 0) + n end)
  each(pod.spec.initContainers, function(res, n) out[res] = math.max(out[res] or 0, n) end)
  return out
end

-- tolerates(tolerations, taint) -> true when one toleration matches
function M.tolerates(tolerations, taint)
  for _, t in ipairs(tolerations or {}) do
    local effect = not t.effect or t.effect == "" or t.effect == taint.effect
    local key
    if t.operator == "Exists" then
      key = not t.key or t.key == "" or t.key == taint.key
    else
      key = t.key == taint.key and (t.value or "") == (taint.value or "")
    end
    if effect and key then return true end
  end
  return false
end

-- untolerated(spec, node) -> the first NoSchedule/NoExecute taint of node
-- the pod spec does not tolerate, or nil
function M.untolerated(spec, node)
  for _, taint in ipairs((node.spec or {}).taints or {}) do
    if (taint.effect == "NoSchedule" or taint.effect == "NoExecute") and not M.tolerates(spec.tolerations, taint) then
      return taint
    end
  end
end

local function expr_match(e, labels)
  local v = labels[e.key]
  local set = {}
  for _, x in ipairs(e.values or {}) do set[x] = true end
  if e.operator == "In" then return v ~= nil and set[v] == true end
  if e.operator == "NotIn" then return v == nil or not set[v] end
  if e.operator == "Exists" then return v ~= nil end
  if e.operator == "DoesNotExist" then return v == nil end
  if e.operator == "Gt" or e.operator == "Lt" then
    local a, b = tonumber(v), tonumber((e.values or {})[1])
    if not a or not b then return false end
    if e.operator == "Gt" then return a > b end
    return a < b
  end
  return false
end

local function term_match(term, node)
  local labels = node.metadata.labels or {}
  for _, e in ipairs(term.matchExpressions or {}) do
    if not expr_match(e, labels) then return false end
  end
  for _, e in ipairs(term.matchFields or {}) do
    if not expr_match(e, { ["metadata.name"] = node.metadata.name }) then return false end
  end
  return true
end

-- selects(spec, node) -> spec.nodeSelector and its required node affinity
-- (terms ORed, expressions ANDed) match node
function M.selects(spec, node)
  local labels = node.metadata.labels or {}
  for k, v in pairs(spec.nodeSelector or {}) do
    if labels[k] ~= v then return false end
  end
  local na = (spec.affinity or {}).nodeAffinity or {}
  local terms = (na.requiredDuringSchedulingIgnoredDuringExecution or {}).nodeSelectorTerms
  if not terms or #terms == 0 then return true end
  for _, term in ipairs(terms) do
    if term_match(term, node) then return true end
  end
  return false
end

local function preference(spec, node)
  local score = 0
  local na = (spec.affinity or {}).nodeAffinity or {}
  for _, p in ipairs(na.preferredDuringSchedulingIgnoredDuringExecution or {}) do
    if p.preference and term_match(p.preference, node) then score = score + (p.weight or 0) end
  end
  return score
end

function M.node_ready(node) return ctl_.is_true((node.status or {}).conditions, "Ready") end

local NOT_READY = { key = "node.kubernetes.io/not-ready", effect = "NoSchedule" }

-- why(pod, node, need, used) -> nil when the pod fits the node, else the
-- scheduler's reason, in its filter order
local function why(pod, node, need, used)
  if node.spec and node.spec.unschedulable then return "node(s) were unschedulable" end
  local taint = M.untolerated(pod.spec, node)
  if not taint and not M.node_ready(node) and not M.tolerates(pod.spec.tolerations, NOT_READY) then taint = NOT_READY end
  if taint then return string.format("node(s) had untolerated taint {%s: %s}", taint.key, taint.value or "") end
  if not M.selects(pod.spec, node) then return "node(s) didn't match Pod's node affinity/selector" end
  local alloc = (node.status or {}).allocatable or {}
  local u = used[node.metadata.name] or {}
  for _, res in ipairs(M.RESOURCES) do
    local n = need[res]
    if n and n > 0 and ctl_.quantity(alloc[res]) - (u[res] or 0) < n then return "Insufficient " .. res end
  end
  if (u.pods or 0) >= ctl_.quantity(alloc.pods or "110") then return "Too many pods" end
end

local function use(used, node, need)
  local u = used[node]
  if not u then u = {}; used[node] = u end
  for res, n in pairs(need) do u[res] = (u[res] or 0) + n end
  u.pods = (u.pods or 0) + 1
end

local function bind(ctl, pr, pod, node)
  local c = ctl_.copy(pod)
  c.spec.nodeName = node.metadata.name
  local cur = ctl.cl:update(pr, c)
  if not cur then return end
  local st = ctl_.copy(cur.status or {})
  st.phase = st.phase or "Pending"
  st.conditions = ctl_.set_condition(st.conditions, "PodScheduled", "True")
  cur = ctl_.put_status(ctl, pr, cur, st)
  ctl_.event(ctl, cur, "Normal", "Scheduled", string.format("Successfully assigned %s/%s to %s",
    cur.metadata.namespace, cur.metadata.name, node.metadata.name), "default-scheduler")
end

-- preemption(reasons) -> what the preemption pass (PostFilter) says of
-- the nodes: a node short of a resource or of pod slots could make room by
-- evicting lower-priority pods (the sandbox runs none: "No preemption
-- victims found"); one the pod can never use (taints, selector, cordoned)
-- is "Preemption is not helpful"
local RESOLVABLE = { ["Too many pods"] = true }
local function preemption(reasons)
  local counts = {}
  for reason, n in pairs(reasons) do
    local k = (RESOLVABLE[reason] or reason:match("^Insufficient ")) and
      "No preemption victims found for incoming pod" or "Preemption is not helpful for scheduling"
    counts[k] = (counts[k] or 0) + n
  end
  local parts = {}
  for k, n in pairs(counts) do parts[#parts + 1] = n .. " " .. k end
  table.sort(parts)
  return table.concat(parts, ", ")
end

local function unschedulable(ctl, pr, pod, total, reasons)
  local msg
  if total == 0 then
    msg = "no nodes available to schedule pods"
  else
    local parts = {} -- "<count> <reason>", sorted as text (as the scheduler's histogram is)
    for k, n in pairs(reasons) do parts[#parts + 1] = n .. " " .. k end
    table.sort(parts)
    msg = string.format("0/%d nodes are available: %s. preemption: 0/%d nodes are available: %s.", total,
      table.concat(parts, ", "), total, preemption(reasons))
  end
  local st = ctl_.copy(pod.status or {})
  local cond = ctl_.condition(st.conditions, "PodScheduled")
  if cond and cond.status == "False" and cond.message == msg then return end
  st.phase = st.phase or "Pending"
  st.conditions = ctl_.set_condition(st.conditions, "PodScheduled", "False", "Unschedulable", msg)
  local cur = ctl_.put_status(ctl, pr, pod, st)
  ctl_.event(ctl, cur, "Warning", "FailedScheduling", msg, "default-scheduler")
end

ctl_.handlers.sched = function(ctl)
  local cl = ctl.cl
  local pr, nr = ctl:r("", "v1", "pods"), ctl:r("", "v1", "nodes")
  local nodes = cl:list(nr)
  local used, pending = {}, {}
  for _, p in ipairs(cl:list(pr)) do
    local nn = (p.spec or {}).nodeName
    if nn and nn ~= "" then
      if not ctl_.finished(p) then use(used, nn, M.requests(p)) end
    elseif p.spec and not ctl_.finished(p) and (p.spec.schedulerName or "default-scheduler") == "default-scheduler" then
      pending[#pending + 1] = p
    end
  end
  table.sort(pending, function(a, b)
    local ta, tb = a.metadata.creationTimestamp or "", b.metadata.creationTimestamp or ""
    if ta ~= tb then return ta < tb end
    if a.metadata.namespace ~= b.metadata.namespace then return a.metadata.namespace < b.metadata.namespace end
    return a.metadata.name < b.metadata.name
  end)
  for _, p in ipairs(pending) do
    local need = M.requests(p)
    local best, best_score, reasons = nil, nil, {}
    for _, node in ipairs(nodes) do
      local w = why(p, node, need, used)
      if w then
        reasons[w] = (reasons[w] or 0) + 1
      else
        local score = preference(p.spec, node) * 1000 - ((used[node.metadata.name] or {}).pods or 0)
        if not best or score > best_score then best, best_score = node, score end
      end
    end
    if best then
      bind(ctl, pr, p, best)
      use(used, best.metadata.name, need)
    else
      unschedulable(ctl, pr, p, #nodes, reasons)
    end
  end
end

function M.watch(ctl, etype, r, obj)
  if r.group ~= "" then return end
  if r.kind == "Node" then return ctl:enqueue("sched") end
  if r.kind ~= "Pod" then return end
  local bound = obj.spec and obj.spec.nodeName and obj.spec.nodeName ~= ""
  if not bound then
    if etype ~= "DELETED" then ctl:enqueue("sched") end
  elseif etype == "DELETED" or ctl_.finished(obj) then
    ctl:enqueue("sched")
  end
end

function M.start(ctl) ctl:enqueue("sched") end

return M
