-- diagnose/_workloads: what diagnose_training_job and diagnose_inference
-- both read in a workload's pods, their events and their nodes, turned
-- into findings (diagnose._findings). Only reads.
--
--   local WL = require "diagnose._workloads"
--   local s = WL.scope(e, p)                -- {cluster, region}: the exact args every suggested call carries
--   WL.pods(r, pods, opts)                  -- Pending (scheduler's reason), image pulls, crash loops, OOM
--                                           -- kills, failed containers, not ready; opts.inspect = {steps}
--   WL.events(conn, ns, objects, pods)      -- the Warning events of those objects and pods, newest first
--   WL.other_events(r, events, covered, opts) -- a finding per Warning reason no other finding explains
--   WL.nodes(r, conn, pods, s)              -- the nodes the pods run on that are not healthy
--   WL.node_steps(s, node, why)             -- inspect (diagnose_node_health), reboot, replace the node
--   WL.scale_fix(conn, s, pods)             -- {POD_PENDING_GPU = {a scale of the group}} when nodes would help,
--                                           -- else {}, {POD_PENDING_GPU = {evidence: the nodes have fewer}}
--   WL.epoch(ts)                            -- an RFC 3339 time as seconds
local F = require "diagnose._findings"
local cap = require "_capacity"

local M = {}

M.HEALTHY = "Schedulable"          -- HyperPod's node-health-status of a healthy node
M.COVERED = { FailedScheduling = true, BackOff = true, Failed = true, Unhealthy = true }
M.MAX_EVIDENCE = 5
M.TYPE_LABEL = "node.kubernetes.io/instance-type"

-- epoch(ts) -> seconds (fraction kept) of "2026-01-01T00:00:00[.123]Z"
function M.epoch(ts)
  local y, mo, d, h, mi, s, frac = tostring(ts):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)(%.?%d*)")
  if not y then return nil end
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  y = mo <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (mo + (mo > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return (era * 146097 + doe - 719468) * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s) +
    (tonumber("0" .. frac) or 0)
end

function M.scope(e, _) return { cluster = e.name, region = e.region } end

-- args(s, t) -> t with the scope's cluster and region
function M.args(s, t)
  local out = { cluster = s.cluster, region = s.region }
  for k, v in pairs(t or {}) do out[k] = v end
  return out
end

-- step(action, tool, s, args, why) -> a suggested call, or nil when the
-- tool is not registered (an override may have removed it)
function M.step(action, tool, s, args, why)
  if not hypd.tools.exists(tool) then return nil end
  return F.step(action, tool, M.args(s, args), why)
end

-- list(...) -> the non-nil steps, in order
function M.list(...)
  local out = {}
  for i = 1, select("#", ...) do
    local x = select(i, ...)
    if x then out[#out + 1] = x end
  end
  return out
end

function M.node_steps(s, node, why)
  local hyperpod = tostring(node):match("^hyperpod%-i%-%x+$") ~= nil
  return M.list(
    M.step("inspect", "diagnose_node_health", s, { node = node }, "what is wrong with node " .. node) or
      (hyperpod and M.step("inspect", "hyperpod_list_nodes", s, {}, "the instance status of the nodes")) or nil,
    hyperpod and M.step("reboot", "hyperpod_node_reboot", s, { nodes = { node } }, why or
      "a reboot clears a GPU or EFA device in a bad state; the pods on it are restarted") or nil,
    hyperpod and M.step("replace", "hyperpod_node_replace", s, { nodes = { node } },
      "when a reboot does not help: a new instance (its local data is lost)") or nil)
end

local function cond(obj, t)
  for _, c in ipairs(((obj or {}).status or {}).conditions or {}) do if c.type == t then return c end end
end
M.cond = cond

local function pod_source(pod, what) return "Pod/" .. pod.metadata.name .. " " .. what end

-- classify(message) -> code, summary: why the scheduler cannot place a pod
local function pending_code(msg)
  msg = tostring(msg)
  if msg:find("Insufficient nvidia.com/gpu", 1, true) then return "POD_PENDING_GPU", "not enough free GPUs" end
  if msg:find("Insufficient vpc.amazonaws.com/efa", 1, true) then
    return "POD_PENDING_EFA", "not enough free EFA devices"
  end
  if msg:find("node affinity/selector", 1, true) then
    return "POD_PENDING_SELECTOR", "no node matches the pod's node selector"
  end
  if msg:find("untolerated taint", 1, true) then
    return "POD_PENDING_TAINT", "the nodes carry taints the pod does not tolerate"
  end
  if msg:find("Insufficient ", 1, true) then return "POD_PENDING_RESOURCES", "not enough free CPU or memory" end
  return "POD_PENDING", "the scheduler cannot place the pod"
end

local EXPLAIN = {
  POD_PENDING_GPU = "The pods ask for more nvidia.com/gpu than the nodes they may run on have free: other " ..
    "pods hold them, the nodes have fewer than asked, or too few nodes have joined.",
  POD_PENDING_EFA = "The pods ask for vpc.amazonaws.com/efa devices the nodes do not have free (the EFA device " ..
    "plugin advertises them; an instance type without EFA has none).",
  POD_PENDING_SELECTOR = "The pods' nodeSelector or affinity (instance type, instance group) matches no node " ..
    "that could hold them.",
  POD_PENDING_TAINT = "The nodes that could hold the pods carry taints (a HyperPod node being repaired is " ..
    "tainted) that the pods do not tolerate.",
  POD_PENDING_RESOURCES = "The pods ask for more CPU or memory than any node has free.",
  POD_PENDING = "The scheduler gave a reason it cannot place the pods; it is quoted.",
  IMAGE_PULL_FAILED = "The kubelet cannot pull the container image: the name or tag is wrong, the repository " ..
    "is private and the node has no pull permission, or the registry cannot be reached.",
  POD_CRASHLOOP = "The container exits soon after it starts and the kubelet restarts it with a growing " ..
    "back-off; its exit code and its last log lines say why.",
  POD_OOMKILLED = "The container used more memory than its limit (or the node had) and the kernel killed it " ..
    "(exit code 137).",
  CONTAINER_FAILED = "A container ended with a non-zero exit code.",
  POD_NOT_READY = "The pod runs but its readiness probe does not pass, so no Service sends it traffic.",
}

-- add_grouped(r, code, severity, rows, summary, opts): one finding for every pod
-- with that code
local function add_grouped(r, code, severity, rows, summary, opts)
  local ev, names = {}, {}
  for _, row in ipairs(rows) do
    names[#names + 1] = row.pod
    if #ev < M.MAX_EVIDENCE then ev[#ev + 1] = row.evidence end
  end
  for _, e in ipairs((opts.evidence or {})[code] or {}) do ev[#ev + 1] = e end
  local subject = #names == 1 and "pod " .. names[1] or string.format("%d pods (%s%s)", #names,
    table.concat(names, ", ", 1, math.min(#names, 3)), #names > 3 and ", ..." or "")
  local steps = {}
  for _, st in ipairs(opts.inspect or {}) do steps[#steps + 1] = st end
  for _, st in ipairs((opts.fix or {})[code] or {}) do steps[#steps + 1] = st end
  r:add { severity = severity, code = code, subject = subject, summary = summary, evidence = ev,
    explanation = EXPLAIN[code], next = steps }
end

-- pods(r, pods, opts): the findings of the pods' own statuses; opts.inspect:
-- the steps every finding starts with; opts.fix[code]: more steps of a code;
-- opts.evidence[code]: more evidence of a code
function M.pods(r, pods, opts)
  opts = opts or {}
  local by = {}
  local function put(code, sev, summary, pod, evidence)
    by[code] = by[code] or { sev = sev, summary = summary, rows = {} }
    local g = by[code]
    g.rows[#g.rows + 1] = { pod = pod.metadata.name, evidence = evidence }
  end
  for _, pod in ipairs(pods) do
    local ps = pod.status or {}
    local sc = cond(pod, "PodScheduled")
    if (ps.phase or "Pending") == "Pending" and sc and sc.status == "False" then
      local code, why = pending_code(sc.message or sc.reason)
      put(code, "critical", "pods stay Pending: " .. why, pod,
        F.evidence(pod_source(pod, "condition PodScheduled"), tostring(sc.reason) .. ": " .. tostring(sc.message),
          sc.lastTransitionTime))
    end
    local running, notready = 0, false
    for _, cs in ipairs(ps.containerStatuses or {}) do
      local st, last = cs.state or {}, (cs.lastState or {}).terminated
      local w, term = st.waiting, st.terminated
      local src = pod_source(pod, "container " .. tostring(cs.name))
      if st.running then running = running + 1 end
      if st.running and not cs.ready then notready = true end
      if w and (w.reason == "ErrImagePull" or w.reason == "ImagePullBackOff") then
        put("IMAGE_PULL_FAILED", "critical", "the image cannot be pulled", pod,
          F.evidence(src .. " state.waiting", w.reason .. ": " .. tostring(w.message)))
      elseif w and w.reason == "CrashLoopBackOff" then
        local oom = last and last.reason == "OOMKilled"
        local quote = string.format("CrashLoopBackOff (restartCount %s); last exit: %s, exitCode %s",
          tostring(cs.restartCount), tostring(last and last.reason), tostring(last and last.exitCode))
        put(oom and "POD_OOMKILLED" or "POD_CRASHLOOP", "critical",
          oom and "the container is killed for using too much memory" or "the container keeps crashing", pod,
          F.evidence(src .. " state", quote, last and last.finishedAt))
      elseif term and term.reason == "OOMKilled" then
        put("POD_OOMKILLED", "critical", "the container is killed for using too much memory", pod,
          F.evidence(src .. " state.terminated", "OOMKilled, exitCode " .. tostring(term.exitCode), term.finishedAt))
      elseif term and (tonumber(term.exitCode) or 0) ~= 0 and term.reason ~= "ContainerStatusUnknown" then
        put("CONTAINER_FAILED", "critical", "a container ended with an error", pod,
          F.evidence(src .. " state.terminated", tostring(term.reason) .. ", exitCode " .. tostring(term.exitCode),
            term.finishedAt))
      end
    end
    if notready and opts.readiness ~= false then
      local rc = cond(pod, "Ready")
      put("POD_NOT_READY", opts.readiness_severity or "warning", "pods run but are not Ready", pod,
        F.evidence(pod_source(pod, "condition Ready"), string.format("%s %s: %s", tostring(rc and rc.status),
          tostring(rc and rc.reason), tostring(rc and rc.message)), rc and rc.lastTransitionTime))
    end
  end
  local codes = {}
  for code in pairs(by) do codes[#codes + 1] = code end
  table.sort(codes)
  for _, code in ipairs(codes) do
    local g = by[code]
    add_grouped(r, code, g.sev, g.rows, g.summary, opts)
  end
  r:checked("pods", #pods .. " pods: phases, scheduling, container states")
  return by
end

-- events(conn, ns, objects, pods) -> the Warning events whose object is one
-- of objects ({"Kind/name" = true}) or pods, newest first
function M.events(conn, ns, objects, pods)
  local names = {}
  for _, p in ipairs(pods) do names[p.metadata.name] = true end
  local out = {}
  for _, ev in ipairs(conn:list("v1", "Event", { namespace = ns }) or {}) do
    local io = ev.involvedObject or {}
    if ev.type == "Warning" and (objects[tostring(io.kind) .. "/" .. tostring(io.name)] or
        (io.kind == "Pod" and names[io.name])) then
      out[#out + 1] = { reason = ev.reason, message = ev.message, object = io.kind .. "/" .. tostring(io.name),
        count = ev.count, at = ev.lastTimestamp or ev.eventTime or (ev.metadata or {}).creationTimestamp }
    end
  end
  table.sort(out, function(a, b) return tostring(a.at) > tostring(b.at) end)
  return out
end

-- event_evidence(ev) -> the evidence of one event
function M.event_evidence(ev)
  return F.evidence("Event " .. ev.object .. " reason " .. tostring(ev.reason), tostring(ev.message) ..
    ((ev.count or 1) > 1 and string.format(" (x%d)", ev.count) or ""), ev.at)
end

-- other_events(r, events, covered, opts): a warning per event reason no
-- other finding explains (covered: {reason = true})
function M.other_events(r, events, covered, opts)
  local by, order = {}, {}
  for _, ev in ipairs(events) do
    if not covered[ev.reason] and not M.COVERED[ev.reason] then
      if not by[ev.reason] then by[ev.reason] = {}; order[#order + 1] = ev.reason end
      local list = by[ev.reason]
      if #list < M.MAX_EVIDENCE then list[#list + 1] = M.event_evidence(ev) end
    end
  end
  for _, reason in ipairs(order) do
    r:add { severity = "warning", code = "WARNING_EVENT", subject = "events " .. reason,
      summary = "Warning events " .. reason, evidence = by[reason],
      explanation = "Kubernetes reported Warning events of this reason on the workload or its pods; they are quoted.",
      next = (opts or {}).inspect or {} }
  end
  r:checked("events", #events .. " Warning events")
end

-- nodes(r, conn, pods, s): a finding per node a pod runs on that HyperPod
-- or Kubernetes says is not healthy (node-health-status, Ready)
function M.nodes(r, conn, pods, s)
  local seen, n = {}, 0
  for _, pod in ipairs(pods) do
    local name = pod.spec and pod.spec.nodeName
    if name and name ~= "" and not seen[name] then
      seen[name] = true
      n = n + 1
      local node = conn:get("v1", "Node", name)
      local ev = {}
      if not node then
        ev[1] = F.evidence("Node/" .. name, "not found (pod " .. pod.metadata.name .. " is bound to it)")
      else
        local health = (node.metadata.labels or {})[cap.HEALTH]
        if health and health ~= M.HEALTHY then
          ev[#ev + 1] = F.evidence("Node/" .. name .. " label " .. cap.HEALTH, health)
        end
        local rc = cond(node, "Ready")
        if rc and rc.status ~= "True" then
          ev[#ev + 1] = F.evidence("Node/" .. name .. " condition Ready", string.format("%s %s: %s", rc.status,
            tostring(rc.reason), tostring(rc.message)), rc.lastTransitionTime)
        end
        if node.spec and node.spec.unschedulable then
          ev[#ev + 1] = F.evidence("Node/" .. name .. " spec.unschedulable", "true")
        end
      end
      if #ev > 0 then
        r:add { severity = "critical", code = "NODE_UNHEALTHY", subject = "node " .. name,
          summary = "a node of the workload is not healthy", evidence = ev,
          explanation = "A pod of the workload runs (or ran) on a node that HyperPod's health agent or Kubernetes " ..
            "marks unhealthy; the workload cannot make progress there until the node is fixed.",
          next = M.node_steps(s, name) }
      end
    end
  end
  r:checked("nodes", n .. " nodes the pods run on: health label, Ready")
end

-- scale_fix(conn, s, pods) -> {POD_PENDING_GPU = {step}} when more nodes of
-- the group the pending pods ask for would hold them; or {}, and
-- {POD_PENDING_GPU = {evidence}} when no node of it could hold one pod
function M.scale_fix(conn, s, pods)
  local pending = {}
  for _, pod in ipairs(pods) do
    local sc = M.cond(pod, "PodScheduled")
    if sc and sc.status == "False" and tostring(sc.message):find("Insufficient nvidia.com/gpu", 1, true) then
      pending[#pending + 1] = pod
    end
  end
  if #pending == 0 then return {} end
  local sel = pending[1].spec.nodeSelector or {}
  local want = 0
  for _, c in ipairs(pending[1].spec.containers or {}) do
    local rq = (c.resources or {}).limits or (c.resources or {}).requests or {}
    want = want + (tonumber(rq["nvidia.com/gpu"]) or 0)
  end
  local labels = {}
  if sel[cap.GROUP_LABEL] then labels[cap.GROUP_LABEL] = sel[cap.GROUP_LABEL]
  elseif sel[M.TYPE_LABEL] then labels[M.TYPE_LABEL] = sel[M.TYPE_LABEL]
  else return {} end
  local group, count, fits, most, most_node = nil, 0, false, -1, nil
  for _, n in ipairs(conn:list("v1", "Node", { labels = labels }) or {}) do
    local g = (n.metadata.labels or {})[cap.GROUP_LABEL]
    if g and (not group or g == group) then
      group, count = g, count + 1
      local have = tonumber(((n.status or {}).allocatable or {})["nvidia.com/gpu"]) or 0
      fits = fits or have >= want
      if have > most then most, most_node = have, n.metadata.name end
    end
  end
  if group and not fits then
    -- no node of the group could ever hold one pod: more nodes do not help
    return {}, { POD_PENDING_GPU = { F.evidence("Node/" .. most_node .. " status.allocatable nvidia.com/gpu",
      string.format("%d (the most of group %s's nodes); a pod asks %d", most, group, want)) } }
  end
  if not group or not hypd.tools.exists("hyperpod_scale_instance_group") then return {} end
  return { POD_PENDING_GPU = { M.step("fix", "hyperpod_scale_instance_group", s,
    { instance_group = group, instance_count = count + #pending },
    string.format("room for the %d pending pod(s), one node each (ask the person: instances cost money)",
      #pending)) } }
end

return M
