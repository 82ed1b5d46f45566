-- sandbox.k8s.controllers.csinodes: each node's CSINode (storage.k8s.io/v1,
-- named after the node, owned by it), as its kubelet keeps one: the CSI
-- drivers registered on the node. The CSI add-ons' node DaemonSets
-- tolerate every taint, so every CSIDriver an add-on registers
-- (controllers.addons) runs on every node; nodeID is what the driver
-- reports: the EC2 instance id for FSx (from the instance metadata), the
-- node's name for Mountpoint for S3.
local ctl_ = require "sandbox.k8s.controllers._ctl"

local M = {}

local NODE_ID = { ["s3.csi.aws.com"] = "name" }

local function instance_id(node)
  return ((node.spec or {}).providerID or ""):match("(i%-[%w]+)$") or node.metadata.name
end

-- drivers(ctl, node) -> the CSINode's spec.drivers, sorted by name
local function drivers(ctl, node)
  local out = {}
  for _, d in ipairs(ctl.cl:list(ctl:r("storage.k8s.io", "v1", "csidrivers"))) do
    if (d.metadata.annotations or {})[require("sandbox.k8s.controllers.addons").ANN] and
        not d.metadata.deletionTimestamp then
      local name = d.metadata.name
      out[#out + 1] = { name = name,
        nodeID = NODE_ID[name] == "name" and node.metadata.name or instance_id(node) }
    end
  end
  table.sort(out, function(x, y) return x.name < y.name end)
  return out
end

local function same(a, b)
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i].name ~= b[i].name or a[i].nodeID ~= b[i].nodeID then return false end
  end
  return true
end

ctl_.handlers.csinode = function(ctl, name)
  local cl = ctl.cl
  local nr, cr = ctl:r("", "v1", "nodes"), ctl:r("storage.k8s.io", "v1", "csinodes")
  local node = cl:get(nr, nil, name)
  if not node or node.metadata.deletionTimestamp then return end
  local want = drivers(ctl, node)
  local have = cl:get(cr, nil, name)
  if have then
    if same((have.spec or {}).drivers or {}, want) then return end
    local c = ctl_.copy(have)
    c.spec = { drivers = want }
    cl:update(cr, c)
    return
  end
  cl:create(cr, { apiVersion = "storage.k8s.io/v1", kind = "CSINode",
    metadata = { name = name, ownerReferences = { { apiVersion = "v1", kind = "Node", name = name,
      uid = node.metadata.uid } } },
    spec = { drivers = want } })
end

local function all(ctl)
  for _, n in ipairs(ctl.cl:list(ctl:r("", "v1", "nodes"))) do ctl:enqueue("csinode", n.metadata.name) end
end

function M.watch(ctl, etype, r, obj)
  if r.group == "" and r.kind == "Node" and etype == "ADDED" then
    ctl:enqueue("csinode", obj.metadata.name)
  elseif r.group == "storage.k8s.io" and r.kind == "CSIDriver" then
    all(ctl)
  end
end

M.start = all

return M
