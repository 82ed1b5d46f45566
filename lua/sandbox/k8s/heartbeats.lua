-- sandbox.k8s.heartbeats: what each node's kubelet posts as time passes,
-- brought up to date when a client reads it rather than on a timer per
-- node (a 2,000-node cluster would pay for every tick). As the kubelet
-- does: it renews its Lease in kube-node-lease every 10 s (a quarter of
-- leaseDurationSeconds 40) and posts its Node status at least every 5 min
-- (nodeStatusReportFrequency), which sets every kubelet condition's
-- lastHeartbeatTime. refresh(cl, r, ns, name) runs before a get, list or
-- watch of leases, or a get of one node, and writes what is due through
-- the store, so a watch sees the same renewals as a get (MODIFIED, a new
-- resourceVersion). A list of nodes does not post their status: on 2,000
-- nodes that is 2,000 updates every controller hears (the monitor bench
-- times out on them). A node whose Ready is Unknown has no kubelet
-- posting: nothing renews. A node whose machine stopped carries
-- annotation M.STOPPED (the time its kubelet stopped, set by the machine's
-- controller): its Lease and heartbeats stop at that time, and its reads
-- (a get, a list or watch of nodes) run the node lifecycle controller's
-- check (sandbox.k8s.node_lifecycle) on it; cl.silent names such nodes.
local core = require "hypd.core"
local objects = require "sandbox.k8s.objects"

local M = {}

M.RENEW, M.REPORT = 10, 300
M.LEASES = "kube-node-lease"
M.STOPPED = "sandbox.hypd.io/kubelet-stopped" -- annotation: when the node's kubelet stopped (RFC 3339)
local LEASES = M.LEASES
local KUBELET = { Ready = true, MemoryPressure = true, DiskPressure = true, PIDPressure = true }

local epoch = function(ts) return require("sandbox.k8s.table").epoch(ts) end

-- micro(t) -> a metav1.MicroTime
local function micro(t)
  return (objects.rfc3339(t):gsub("Z$", string.format(".%06dZ", math.floor((t % 1) * 1e6))))
end

local function ready(node)
  for _, c in ipairs((node.status or {}).conditions or {}) do
    if c.type == "Ready" then return c end
  end
end

local function posting(node)
  local c = ready(node)
  return node and not node.metadata.deletionTimestamp and c ~= nil and c.status ~= "Unknown"
end

-- stopped(node) -> when the node's kubelet stopped posting, or nil
function M.stopped(node)
  local a = node and node.metadata.annotations
  return a and a[M.STOPPED] and epoch(a[M.STOPPED]) or nil
end

-- upto(node, now) -> the time its kubelet posts until: now, or when it stopped
local function upto(node, now)
  local t = M.stopped(node)
  return t and t < now and t or now
end

-- due(last, now, every) -> the last tick at or before now on last's
-- cadence, or nil when none is due
local function due(last, now, every)
  if not last or now - last < every then return nil end
  return last + every * math.floor((now - last) / every)
end

local function copy(t) return require("hypd.json").decode(require("hypd.json").encode(t)) end

-- lease(cl, nr, lr, l, now): l renewed when its node's kubelet is posting and a renewal is due
local function lease(cl, nr, lr, l, now)
  local node = cl:get(nr, nil, l.metadata.name)
  local at = posting(node) and (l.spec or {}).holderIdentity == l.metadata.name and
    due(epoch(l.spec.renewTime), upto(node, now), M.RENEW)
  if at then
    local c = copy(l)
    c.spec.renewTime = micro(at)
    cl:update(lr, c)
  end
end

-- node(cl, nr, n, now): n's status posted when a report is due
local function node(cl, nr, n, now)
  local c = posting(n) and ready(n)
  local at = c and due(epoch(c.lastHeartbeatTime or c.lastTransitionTime), upto(n, now), M.REPORT)
  if at then
    local x = copy(n)
    for _, cond in ipairs(x.status.conditions) do
      if KUBELET[cond.type] then cond.lastHeartbeatTime = objects.rfc3339(at) end
    end
    cl:update(nr, x, { subresource = "status" })
  end
end

-- refresh(cl, r, ns, name): the heartbeats due by now on what is about to
-- be read (the one object named, or all of r); a second read in the same
-- simulated second finds nothing due
function M.refresh(cl, r, ns, name)
  local leases = r.group == "coordination.k8s.io" and r.resource == "leases" and (ns == nil or ns == LEASES)
  local nodes = r.group == "" and r.resource == "nodes"
  if not leases and not nodes then return end
  local now, nr = core.now(), cl.reg:find("", "v1", "nodes")
  if nodes then
    local lifecycle = require "sandbox.k8s.node_lifecycle"
    for silent in pairs(cl.silent or {}) do
      local o = (name == nil or name == silent) and cl:get(nr, nil, silent)
      if o then lifecycle.check(cl, o, now) end
    end
  end
  if name then
    local o = cl:get(r, leases and LEASES or nil, name)
    if o and leases then lease(cl, nr, r, o, now) elseif o then node(cl, nr, o, now) end
    return
  end
  if nodes then return end
  cl.heartbeats = cl.heartbeats or {}
  if now - (cl.heartbeats[r.resource] or -math.huge) < 1 then return end
  cl.heartbeats[r.resource] = now
  for _, l in ipairs(cl:list(r, LEASES)) do lease(cl, nr, r, l, now) end
end

return M
