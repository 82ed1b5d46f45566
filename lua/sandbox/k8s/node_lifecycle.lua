-- sandbox.k8s.node_lifecycle: what kube-controller-manager's node
-- lifecycle controller does to a node whose kubelet stopped posting (its
-- instance stopped: the machine's controller marks the node, see
-- heartbeats.STOPPED). Once the node-monitor grace period has passed since
-- the node's last heartbeat (the later of its Lease's renewTime and Ready's
-- lastHeartbeatTime): Ready, MemoryPressure, DiskPressure and PIDPressure
-- go Unknown (NodeStatusUnknown, "Kubelet stopped posting node status.",
-- lastTransitionTime the end of the grace, lastHeartbeatTime kept), and
-- the node is tainted node.kubernetes.io/unreachable NoSchedule and
-- NoExecute (the NoExecute one with timeAdded). Until then it stays as its
-- kubelet last posted it. The grace is --node-monitor-grace-period: 40 s
-- below Kubernetes 1.32, 50 s from 1.32 (the default changed in 1.32).
--
-- The pods on such a node stay bound and keep the phase their kubelet
-- last posted; as the controller does (MarkPodsNotReady), their Ready
-- condition goes False, so Services stop sending them traffic. The taint
-- manager would evict them once their toleration of the NoExecute taint
-- (tolerationSeconds, 300 s by default) runs out: the sandbox does not
-- simulate that eviction.
--
-- check(cl, node, now) runs when the node is read (sandbox.k8s.heartbeats)
-- and when its machine's controller reconciles it, so it happens on the
-- simulated clock without a timer per node.
local heartbeats = require "sandbox.k8s.heartbeats"
local objects = require "sandbox.k8s.objects"

local M = {}

M.TAINT = "node.kubernetes.io/unreachable"
M.REASON, M.MESSAGE = "NodeStatusUnknown", "Kubelet stopped posting node status."
local KUBELET = { Ready = true, MemoryPressure = true, DiskPressure = true, PIDPressure = true }

local epoch = function(ts) return require("sandbox.k8s.table").epoch(ts) end
local function copy(t) return require("hypd.json").decode(require("hypd.json").encode(t)) end

-- grace(version) -> the node-monitor grace period of a "1.31"-style version
function M.grace(version)
  local minor = tonumber(tostring(version):match("^1%.(%d+)"))
  return (minor and minor < 32) and 40 or 50
end

local function version_of(cl)
  return (cl.controllers and cl.controllers.version) or cl.version
end

local function ready(node)
  for _, c in ipairs((node.status or {}).conditions or {}) do
    if c.type == "Ready" then return c end
  end
end

-- deadline(cl, node) -> when the grace of a node whose kubelet stopped
-- ends, or nil while its kubelet posts
function M.deadline(cl, node)
  if not heartbeats.stopped(node) then return nil end
  local lease = cl:get(cl.reg:find("coordination.k8s.io", "v1", "leases"), heartbeats.LEASES, node.metadata.name)
  local c = ready(node) or {}
  local last = epoch(c.lastHeartbeatTime or c.lastTransitionTime) or 0
  local renewed = lease and epoch((lease.spec or {}).renewTime)
  if renewed and renewed > last then last = renewed end
  return last + M.grace(version_of(cl))
end

-- taints(list, old) -> list with the unreachable taints old carries (its
-- timeAdded kept)
function M.taints(list, old)
  local out = list or {}
  for _, t in ipairs(old and old.spec and old.spec.taints or {}) do
    if t.key == M.TAINT then out[#out + 1] = copy(t) end
  end
  return #out > 0 and out or nil
end

-- unknown(node) -> the node is the controller's: Ready Unknown
function M.unknown(node)
  local c = node and ready(node)
  return c ~= nil and c.status == "Unknown"
end

-- check(cl, node, now) -> the end of the grace when it is still to come:
-- the node's conditions and taints written once it has passed
function M.check(cl, node, now)
  if M.unknown(node) then return nil end
  heartbeats.refresh(cl, cl.reg:find("coordination.k8s.io", "v1", "leases"), heartbeats.LEASES, node.metadata.name)
  local at = M.deadline(cl, node)
  if not at or now < at then return at end
  local nr = cl.reg:find("", "v1", "nodes")
  local x = copy(node)
  local stamp = objects.rfc3339(at)
  for _, c in ipairs(x.status.conditions or {}) do
    if KUBELET[c.type] then
      c.status, c.reason, c.message, c.lastTransitionTime = "Unknown", M.REASON, M.MESSAGE, stamp
    end
  end
  x = cl:update(nr, x, { subresource = "status" }) or x
  x = copy(x)
  x.spec = x.spec or {}
  local taints = {}
  for _, t in ipairs(x.spec.taints or {}) do
    if t.key ~= M.TAINT then taints[#taints + 1] = t end
  end
  taints[#taints + 1] = { key = M.TAINT, effect = "NoSchedule" }
  taints[#taints + 1] = { key = M.TAINT, effect = "NoExecute", timeAdded = stamp }
  x.spec.taints = taints
  cl:update(nr, x)
  M.pods_not_ready(cl, node.metadata.name, stamp)
  return nil
end

-- pods_not_ready(cl, node_name, stamp): the Ready condition of every pod
-- bound to the node goes False (lastTransitionTime stamp)
function M.pods_not_ready(cl, name, stamp)
  local pr = cl.reg:find("", "v1", "pods")
  for _, p in ipairs(cl:list(pr)) do
    if p.spec and p.spec.nodeName == name then
      for _, c in ipairs((p.status or {}).conditions or {}) do
        if c.type == "Ready" and c.status ~= "False" then
          local x = copy(p)
          for _, xc in ipairs(x.status.conditions) do
            if xc.type == "Ready" then xc.status, xc.lastTransitionTime = "False", stamp end
          end
          cl:update(pr, x, { subresource = "status" })
        end
      end
    end
  end
end

return M
