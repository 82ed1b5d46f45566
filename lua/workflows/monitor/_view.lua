-- monitor._view: the answer of monitor_get_cluster made from the cache's
-- records (monitor._kinds): node health, GPUs and EFA per node and group,
-- pending demand, pods by phase, workloads, Warning events.
local K = require "monitor._kinds"

local M = {}

M.EVENTS = 50 -- Warning events shown, newest first
M.PENDING = 100 -- pending pods listed (all are counted)

local ORDER = { failed = 1, degraded = 2, unknown = 3, healthy = 4 }
local TERMINAL = { Succeeded = true, Failed = true }

-- health(n) -> "healthy" | "degraded" | "failed" | "unknown", and why
function M.health(n)
  local first = n.conditions[1]
  local why = first and (first.type .. "=" .. tostring(first.status) .. (first.message and (": " .. first.message) or ""))
  if n.health == "Unschedulable" then
    return "failed", "HyperPod health status Unschedulable" .. (why and ("; " .. why) or "")
  end
  if n.deep == "Failed" then return "failed", "deep health check Failed" .. (why and ("; " .. why) or "") end
  if n.health and n.health:match("^UnschedulablePending") then
    return "degraded", "HyperPod health status " .. n.health .. (why and ("; " .. why) or "")
  end
  if n.ready == "False" then return "failed", why or "not Ready" end
  if n.ready ~= "True" then return "unknown", why or "Ready is Unknown: the kubelet stopped reporting" end
  if #n.conditions > 0 then return "degraded", why end
  if n.health and n.health ~= "Schedulable" then return "degraded", "HyperPod health status " .. n.health end
  if n.deep and n.deep ~= "Passed" then return "degraded", "deep health check " .. n.deep end
  if n.unschedulable then return "degraded", "cordoned (spec.unschedulable)" end
  return "healthy", nil
end

local function res(cap, alloc, req, pending)
  return { capacity = cap, allocatable = alloc, requested = req, free = math.max(0, alloc - req), pending = pending }
end

local function sorted_values(map, less)
  local out = hypd.json.array()
  for _, v in pairs(map) do out[#out + 1] = v end
  table.sort(out, less)
  return out
end

local function by_ns_name(a, b)
  if a.namespace ~= b.namespace then return tostring(a.namespace) < tostring(b.namespace) end
  return a.name < b.name
end

local function in_ns(p, ns) return not p.namespace or ns == p.namespace end

local function copy(t)
  local c = {}
  for k, v in pairs(t) do c[k] = v end
  return c
end

-- build(c, p) -> the answer (without cluster, operations and utilisation)
function M.build(c, p)
  local nodes, pods = c.items("nodes"), c.items("pods")
  -- GPU and EFA requested per node, by the non-terminal pods bound to it
  local used_gpu, used_efa = {}, {}
  local phases = { Running = 0, Pending = 0, Succeeded = 0, Failed = 0, Unknown = 0 }
  local total_pods = 0
  local pending = {}
  for _, r in pairs(pods) do
    if r.node and not TERMINAL[r.phase] then
      used_gpu[r.node] = (used_gpu[r.node] or 0) + r.gpus
      used_efa[r.node] = (used_efa[r.node] or 0) + r.efa
    end
    if in_ns(p, r.ns) then
      total_pods = total_pods + 1
      phases[r.phase] = (phases[r.phase] or 0) + 1
      if r.phase == "Pending" and not r.node then pending[#pending + 1] = r end
    end
  end
  -- nodes, by group
  local items, by_health = hypd.json.array(), { healthy = 0, degraded = 0, failed = 0, unknown = 0 }
  local groups, types_groups = {}, {}
  local totals = { cap = 0, alloc = 0, req = 0 }
  for _, n in pairs(nodes) do
    local group = n.group or "(no instance group)"
    if n.type then
      types_groups[n.type] = types_groups[n.type] or {}
      types_groups[n.type][group] = true
    end
    if not p.instance_group or p.instance_group == n.group then
      local h, why = M.health(n)
      by_health[h] = by_health[h] + 1
      local greq, ereq = used_gpu[n.name] or 0, used_efa[n.name] or 0
      items[#items + 1] = { name = n.name, instance_group = n.group, instance_type = n.type, health = h,
        health_label = n.health, deep_health_label = n.deep, ready = n.ready == "True", conditions = n.conditions,
        taints = n.taints, message = why, gpu = res(n.gpu_cap, n.gpu_alloc, greq), efa = res(n.efa_cap, n.efa_alloc, ereq) }
      local g = groups[group]
      if not g then
        g = { name = group, instance_type = n.type, nodes = 0, gc = 0, ga = 0, gr = 0, ec = 0, ea = 0, er = 0, pending = 0 }
        groups[group] = g
      end
      g.nodes = g.nodes + 1
      g.gc, g.ga, g.gr = g.gc + n.gpu_cap, g.ga + n.gpu_alloc, g.gr + greq
      g.ec, g.ea, g.er = g.ec + n.efa_cap, g.ea + n.efa_alloc, g.er + ereq
      totals.cap, totals.alloc, totals.req = totals.cap + n.gpu_cap, totals.alloc + n.gpu_alloc, totals.req + greq
    end
  end
  table.sort(items, function(a, b)
    if a.health ~= b.health then return ORDER[a.health] < ORDER[b.health] end
    return a.name < b.name
  end)
  -- pending demand: every GPU a Pending pod asks for; a group's share when
  -- its nodeSelector names the group or an instance type only that group has
  local pend_gpus, pend_items, counted = 0, hypd.json.array(), 0
  table.sort(pending, function(a, b)
    if (a.gpus > 0) ~= (b.gpus > 0) then return a.gpus > 0 end
    if a.since ~= b.since then return tostring(a.since) < tostring(b.since) end
    return a.ns .. "/" .. a.name < b.ns .. "/" .. b.name
  end)
  for _, r in ipairs(pending) do
    local group = r.want_group
    if not group and r.want_type and types_groups[r.want_type] then
      local only
      for gname in pairs(types_groups[r.want_type]) do only = only == nil and gname or false end
      group = only or nil
    end
    if not p.instance_group or group == p.instance_group then
      counted = counted + 1
      pend_gpus = pend_gpus + r.gpus
      if group and groups[group] then groups[group].pending = groups[group].pending + r.gpus end
      if #pend_items < M.PENDING then
        pend_items[#pend_items + 1] = { namespace = r.ns, name = r.name, gpus = r.gpus, instance_group = group,
          reason = r.reason, message = r.message, since = r.since }
      end
    end
  end
  local igs = sorted_values(groups, function(a, b) return a.name < b.name end)
  for i, g in ipairs(igs) do
    igs[i] = { name = g.name, instance_type = g.instance_type, nodes = g.nodes, gpu = res(g.gc, g.ga, g.gr, g.pending),
      efa = res(g.ec, g.ea, g.er) }
  end
  -- workloads and events, by namespace
  local function listed(kind)
    local out = {}
    for _, r in pairs(c.items(kind)) do if in_ns(p, r.namespace) then out[#out + 1] = copy(r) end end
    table.sort(out, by_ns_name)
    return hypd.json.array(out)
  end
  local services = listed("services")
  for _, s in ipairs(services) do s.dcgm = nil end
  local events = {}
  for _, e in pairs(c.items("events")) do if in_ns(p, e.namespace) then events[#events + 1] = e end end
  table.sort(events, function(a, b)
    if a.last ~= b.last then return tostring(a.last) > tostring(b.last) end
    return a.object < b.object
  end)
  local shown = hypd.json.array()
  for i = 1, math.min(#events, M.EVENTS) do shown[i] = copy(events[i]) end
  local out = {
    namespace = p.namespace, instance_group = p.instance_group,
    nodes = { total = #items, by_health = by_health, items = items },
    instance_groups = igs,
    gpus = res(totals.cap, totals.alloc, totals.req, pend_gpus),
    pending = { pods = counted, gpus = pend_gpus, items = pend_items, truncated = counted > #pend_items or nil },
    pods = { total = total_pods, by_phase = phases },
    services = services, deployments = listed("deployments"), inference_endpoints = listed("inference_endpoints"),
    jumpstart_models = listed("jumpstart_models"), pytorch_jobs = listed("pytorch_jobs"), ray_jobs = listed("ray_jobs"),
    events = shown,
  }
  return out
end

-- sample(c) -> one point of the GPU allocation history (the whole cluster)
function M.sample(c)
  local alloc, req = 0, 0
  local nodes = c.items("nodes")
  for _, n in pairs(nodes) do alloc = alloc + n.gpu_alloc end
  for _, r in pairs(c.items("pods")) do
    if r.node and nodes["/" .. r.node] and not TERMINAL[r.phase] then req = req + r.gpus end
  end
  return { gpus_allocatable = alloc, gpus_requested = req }
end

-- dcgm(services) -> the DCGM exporter's Service record, or nil
function M.dcgm(c)
  for _, s in pairs(c.items("services")) do if s.dcgm then return s end end
end

-- utilisation(text) -> {gpus = [{node, gpu, utilisation}]} from the
-- exporter's Prometheus text (DCGM_FI_DEV_GPU_UTIL, percent)
function M.utilisation(text)
  local gpus = hypd.json.array()
  for line in tostring(text):gmatch("[^\n]+") do
    local labels, value = line:match("^DCGM_FI_DEV_GPU_UTIL{(.-)}%s+([%d%.eE+-]+)")
    if labels then
      local l = {}
      for k, v in labels:gmatch('([%w_]+)="(.-)"') do l[k] = v end
      gpus[#gpus + 1] = { node = l.Hostname or l.kubernetes_node or l.instance, gpu = tonumber(l.gpu) or l.gpu,
        utilisation = tonumber(value) }
    end
  end
  table.sort(gpus, function(a, b)
    if a.node ~= b.node then return tostring(a.node) < tostring(b.node) end
    return tostring(a.gpu) < tostring(b.gpu)
  end)
  return gpus
end

M.K = K
return M
