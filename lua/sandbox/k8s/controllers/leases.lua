-- sandbox.k8s.controllers.leases: each node's Lease in kube-node-lease
-- (coordination.k8s.io/v1, named after the node, owned by it), as the
-- kubelet keeps one: holderIdentity the node, leaseDurationSeconds 40,
-- renewTime when the node joined; the renewals every 10 s are written as
-- a client reads the Leases (sandbox.k8s.heartbeats), not on a timer.
-- kubectl describe node reads it.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local core = require "hypd.core"

local M = {}

M.NAMESPACE = "kube-node-lease"

-- micro(t) -> a metav1.MicroTime ("2026-01-01T00:00:00.000000Z")
local function micro(t)
  t = t or core.now()
  return (ctl_.stamp(t):gsub("Z$", string.format(".%06dZ", math.floor((t % 1) * 1e6))))
end

ctl_.handlers.lease = function(ctl, name)
  local cl = ctl.cl
  local nr, lr = ctl:r("", "v1", "nodes"), ctl:r("coordination.k8s.io", "v1", "leases")
  local node = cl:get(nr, nil, name)
  if not node or node.metadata.deletionTimestamp then return end
  local lease = cl:get(lr, M.NAMESPACE, name)
  if lease then
    if (lease.spec or {}).holderIdentity == name then return end
    local c = ctl_.copy(lease)
    c.spec = c.spec or {}
    c.spec.holderIdentity, c.spec.renewTime = name, micro()
    cl:update(lr, c)
    return
  end
  cl:create(lr, { apiVersion = "coordination.k8s.io/v1", kind = "Lease",
    metadata = { name = name, namespace = M.NAMESPACE, ownerReferences = { { apiVersion = "v1", kind = "Node",
      name = name, uid = node.metadata.uid } } },
    spec = { holderIdentity = name, leaseDurationSeconds = 40, renewTime = micro() } })
end

function M.watch(ctl, etype, r, obj)
  if r.group == "" and r.kind == "Node" and etype ~= "DELETED" then ctl:enqueue("lease", obj.metadata.name) end
end

function M.start(ctl)
  for _, n in ipairs(ctl.cl:list(ctl:r("", "v1", "nodes"))) do ctl:enqueue("lease", n.metadata.name) end
end

return M
