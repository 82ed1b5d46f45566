-- sandbox.k8s.controllers.nodegroups: the instances of EKS managed node
-- groups (services/eks/nodegroups) join their cluster as Node objects named
-- by their private DNS name, with the labels EKS gives them
-- (eks.amazonaws.com/nodegroup, eks.amazonaws.com/capacityType,
-- eks.amazonaws.com/nodegroup-image, the launch template ones, the cloud
-- provider's, instance type, zone, region, ...), the group's own labels and
-- taints, and capacity from the instance type (controllers/_node, the same
-- Node building HyperPod nodes use). A group being deleted has its Nodes
-- cordoned (unschedulable) until its instances are gone; then the Nodes go.
--
-- The EKS side tells us when its instances or groups change (sync); the
-- handler compares the cluster's node group instances with the Nodes this
-- controller owns (annotation sandbox.hypd.io/nodegroup-instance).
--
-- An instance EC2 stopped (services/ec2/power) has no kubelet: its Node is
-- marked (heartbeats.STOPPED) and no longer posted, and once the grace
-- period has passed the node lifecycle controller (sandbox.k8s.node_lifecycle)
-- makes it Ready Unknown and unreachable; when it runs again its kubelet
-- posts Ready at once and the unreachable taints go.
local amis = require "sandbox.services.eks.amis"
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local heartbeats = require "sandbox.k8s.heartbeats"
local json = require "hypd.json"
local lifecycle = require "sandbox.k8s.node_lifecycle"
local node_ = require "sandbox.k8s.controllers._node"
local power = require "sandbox.services.ec2.power"
local state = require "sandbox.state"

local M = {}

M.NODEGROUP = "eks.amazonaws.com/nodegroup"
M.CAPACITY = "eks.amazonaws.com/capacityType"
local MARK = "sandbox.hypd.io/nodegroup-instance" -- annotation: a Node this controller owns
local OWN = "sandbox.hypd.io/nodegroup-labels"    -- annotation: the group labels it last set (JSON list)
local EFFECT = { NO_SCHEDULE = "NoSchedule", NO_EXECUTE = "NoExecute", PREFER_NO_SCHEDULE = "PreferNoSchedule" }

-- sync(region [, eks_cluster_name]): the Nodes follow the node groups (soon,
-- in the cluster's controller task); cheap, never raises
function M.sync(region, name) node_.wake(region, name, "nodegroups") end

local function os_of(ng)
  local ami = ng.amiType or ""
  if ami:find("^AL2023") then
    return { os_image = "Amazon Linux 2023.9.20251027", kernel = "6.1.155-176.282.amzn2023.x86_64" }
  elseif ami:find("^BOTTLEROCKET") then
    return { os_image = "Bottlerocket OS 1.49.0 (aws-k8s-" .. tostring(ng.version) .. ")", kernel = "6.1.153" }
  end
  return { os_image = "Amazon Linux 2", kernel = "5.10.240-238.966.amzn2.x86_64" }
end

local function labels_of(ctl, i, ng)
  local l = {}
  for k, v in pairs(ng.labels or {}) do l[k] = v end
  for k, v in pairs(node_.labels(ctl, i, i.dns)) do l[k] = v end
  l[M.NODEGROUP] = ng.nodegroupName
  l[M.CAPACITY] = ng.capacityType or "ON_DEMAND"
  l["eks.amazonaws.com/nodegroup-image"] = amis.image_id(ng.nodegroupArn:match("^arn:[^:]+:eks:([^:]+):"),
    ng.amiType, ng.releaseVersion)
  l["eks.amazonaws.com/sourceLaunchTemplateId"] = "lt-0" .. node_.stable_hex(ng.nodegroupArn .. "lt", 16)
  l["eks.amazonaws.com/sourceLaunchTemplateVersion"] = "1"
  l["k8s.io/cloud-provider-aws"] = node_.stable_hex(ctl.cl.name, 16) .. node_.stable_hex(ctl.cl.name .. "/", 16)
  return l
end

local function taints_of(ng, draining)
  local out = {}
  for _, t in ipairs(ng.taints or {}) do
    out[#out + 1] = { key = t.key, value = t.value, effect = EFFECT[t.effect] or t.effect }
  end
  if draining then out[#out + 1] = { key = "node.kubernetes.io/unschedulable", effect = "NoSchedule" } end
  return #out > 0 and out or nil
end

local function reconcile(ctl, r, i, ng)
  local name = i.dns
  local old = ctl.cl:get(r, nil, name)
  local node = old and ctl_.copy(old) or { metadata = { name = name } }
  local md = node.metadata
  md.labels = md.labels or {}
  md.annotations = md.annotations or {}
  -- the group labels set before and no longer on the group go
  local before = json.decode(md.annotations[OWN] or "[]") or {}
  for _, k in ipairs(before) do
    if (ng.labels or {})[k] == nil then md.labels[k] = nil end
  end
  for k, v in pairs(labels_of(ctl, i, ng)) do md.labels[k] = v end
  local own = {}
  for k in pairs(ng.labels or {}) do own[#own + 1] = k end
  table.sort(own)
  node_.annotate(md, i)
  md.annotations[MARK] = i.InstanceId
  md.annotations[OWN] = json.encode(json.array(own))
  node.spec = node.spec or {}
  node.spec.providerID = string.format("aws:///%s/%s", i.az or "", i.InstanceId)
  local draining = i.state == "draining"
  node.spec.unschedulable = draining or nil
  node.spec.taints = taints_of(ng, draining)
  local now = core.now()
  local down = power.kubelet_down(i, now)
  ctl.cl.silent = ctl.cl.silent or {}
  ctl.cl.silent[name] = down and true or nil
  if down then
    -- no kubelet: nothing is posted; what the node lifecycle controller set stays
    if not old then return end
    md.annotations[heartbeats.STOPPED] = ctl_.stamp(down)
    node.spec.taints = lifecycle.taints(node.spec.taints, old)
    local cur = ctl.cl:update(r, node) or old
    local at = lifecycle.check(ctl.cl, cur, now)
    if at then ctl:at_weak(at, "nodegroups") end
    return
  end
  local back = old and old.metadata.annotations and old.metadata.annotations[heartbeats.STOPPED]
  md.annotations[heartbeats.STOPPED] = nil
  local status = node_.status(ctl, old and old.status, i, true, os_of(ng))
  if back then
    -- the kubelet started again: it posts its status now
    for _, c in ipairs(status.conditions) do c.lastHeartbeatTime = ctl_.stamp(now) end
  end
  node_.put(ctl, r, old, node, status)
end

ctl_.handlers.nodegroups = function(ctl)
  local r = ctl:r("", "v1", "nodes")
  local eks = state.view(ctl.region, "eks")
  local groups = {}
  for _, ng in ipairs(eks:list("nodegroup")) do
    if ng.clusterName == ctl.cl.name then groups[ng.nodegroupName] = ng end
  end
  local want = {}
  for _, i in ipairs(eks:list("ng_instance")) do
    local ng = i.cluster == ctl.cl.name and groups[i.nodegroup]
    if ng and i.dns then want[i.dns] = { i = i, ng = ng } end
    -- a started instance's kubelet posts once it runs
    local back = ng and power.running_at(i)
    if back and back > core.now() then ctl:at_weak(back, "nodegroups") end
  end
  for name in pairs(ctl.cl.silent or {}) do
    if not want[name] then ctl.cl.silent[name] = nil end
  end
  node_.follow(ctl, r, MARK, want, function(_, w) reconcile(ctl, r, w.i, w.ng) end)
end

function M.start(ctl) ctl:enqueue("nodegroups") end

return M
