-- sandbox.k8s.controllers.nodes: HyperPod instances join the EKS cluster
-- that orchestrates them as Node objects named hyperpod-<instance id>, with
-- the labels, capacity and conditions real HyperPod nodes carry.
--
-- The SageMaker side tells us when its nodes change (sync, called from
-- services/sagemaker); the handler compares every HyperPod node of this
-- cluster with the Node objects:
--   Running, SystemUpdating          Node Ready, health Schedulable
--   Failure                          Ready False, UnschedulablePendingReplacement
--                                    (Unschedulable without automatic recovery),
--                                    NoSchedule taints; removed once replaced
--   rebooting, being replaced        Ready False, UnschedulablePendingReboot/Replacement
--   ShuttingDown, gone, launching    no Node
-- A person setting the health label to UnschedulablePendingReplacement or
-- UnschedulablePendingReboot on a healthy (or failed) node makes HyperPod
-- replace or reboot it, as the real health agent does.
local C = require "sandbox.services.sagemaker.common"
local D = require "sandbox.services.eks.deps"
local aws = require "sandbox.k8s.controllers._aws"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local errors = require "hypd.errors"
local faults = require "sandbox.faults"
local faults_nodes = require "sandbox.faults_nodes"
local log = require "hypd.log"
local node_ = require "sandbox.k8s.controllers._node"
local state = require "sandbox.state"
local task = require "hypd.task"

local M = {}

M.HEALTH = "sagemaker.amazonaws.com/node-health-status"
M.DEEP = "sagemaker.amazonaws.com/deep-health-check-status"
local MARK = "sandbox.hypd.io/instance-id" -- annotation: a Node this controller owns
local SET = "sandbox.hypd.io/health-status" -- annotation: the health label value this controller last wrote

function M.node_name(instance_id) return "hyperpod-" .. instance_id end

-- eks_of(c) -> region, name of the EKS cluster a HyperPod cluster record names
local function eks_of(c)
  local arn = c.Orchestrator and c.Orchestrator.Eks and c.Orchestrator.Eks.ClusterArn
  return tostring(arn):match("^arn:aws[%w-]*:eks:([%w-]+):%d+:cluster/(.+)$")
end

-- sync(region [, hyperpod_cluster_record]): the Node objects follow the
-- HyperPod nodes (soon, in the cluster's controller task); cheap, never raises
function M.sync(region, c)
  local r, name
  if c then
    r, name = eks_of(c)
    if r ~= region then return end
  end
  node_.wake(region, name, "nodes")
end

-- fail(region, hyperpod_cluster, node_id [, message]) -> true | nil, err:
-- the HyperPod node fails its health checks, as the health agent would
-- report; with NodeRecovery Automatic HyperPod replaces it in 10 to 15
-- minutes (services/sagemaker transition node_recovered)
function M.fail(region, hp, id, message)
  local ctx = aws.ctx(region, "sagemaker", "(sandbox node failure)")
  local n = ctx.state:get("node", id)
  if not n or n.cluster ~= hp then
    return errors.fail("NOT_FOUND", "no node " .. tostring(id) .. " in HyperPod cluster " .. tostring(hp))
  end
  local c = ctx.state:get("cluster", hp)
  n.Status = "Failure"
  n.Message = message or "Node failed health checks: the health-monitoring agent reported an unrecoverable GPU " ..
    "fault (sandbox)."
  if c and c.NodeRecovery == "Automatic" and not n.recovering then
    n.recovering = true
    ctx:later(D.between(600, 900), "node_recovered", { id = id })
  end
  ctx.state:put("node", id, n)
  local g = c and C.group(c, n.group)
  if g and g.Status == "InService" then
    g.Status = "Degraded"
    ctx.state:put("cluster", c.ClusterName, c)
  end
  M.sync(region)
  return true
end

-- schedule_fault(region, cluster, node): a node_failures fault from the fault
-- file ({cluster, instance_group, after = seconds, count}) fails a node that
-- has joined, `after` simulated seconds later
local consumed = {}
function M.schedule_fault(region, c, n)
  local hit, f = faults.applies("node_failures", { cluster = c.ClusterName, instance_group = n.group })
  if not hit then return end
  consumed[f] = (consumed[f] or 0) + 1
  if consumed[f] > (f.count or 1) then return end
  local id, hp = n.InstanceId, c.ClusterName
  task.spawn(function()
    task.sleep((tonumber(f.after) or 60) / require("sandbox").speed)
    local ok, err = M.fail(region, hp, id, "Node failed health checks: injected node_failures fault.")
    if not ok then log.warn("sandbox", "node_failures fault for %s: %s", id, tostring(err)) end
  end, { name = "sandbox node failure " .. id, daemon = true })
end

-- the state a HyperPod node shows on its Node: health label value, Ready,
-- or nil when it should have no Node
local function health(n, c)
  if n.Status == "Running" or n.Status == "SystemUpdating" then return "Schedulable", true end
  if n.Status == "Failure" then
    return (c.NodeRecovery == "Automatic" and n.recovering) and "UnschedulablePendingReplacement" or "Unschedulable",
      false, true
  end
  if n.Status == "Pending" and n.Message == "Rebooting" then return "UnschedulablePendingReboot", false, true end
  if n.Status == "ShuttingDown" and n.Message == "Replacing" then return "UnschedulablePendingReplacement", false, true end
end

local function labels_of(ctl, n, c, g, hv)
  local l = {}
  for k, v in pairs(g and g.labels or {}) do l[k] = v end
  l["sagemaker.amazonaws.com/compute-type"] = "hyperpod"
  l["sagemaker.amazonaws.com/cluster-name"] = c.ClusterName
  l["sagemaker.amazonaws.com/instance-group-name"] = n.group
  l["sagemaker.amazonaws.com/node-logical-id"] = n.NodeLogicalId
  l[M.HEALTH] = hv
  l[M.DEEP] = "Passed"
  for k, v in pairs(node_.labels(ctl, n, M.node_name(n.InstanceId))) do l[k] = v end
  if n.capacity == "Spot" then l["sagemaker.amazonaws.com/capacity-type"] = "Spot" end
  return l
end

local function taints_of(g, bad)
  local out = {}
  for _, t in ipairs(g and g.taints or {}) do out[#out + 1] = { key = t.Key or t.key, value = t.Value or t.value,
    effect = t.Effect or t.effect } end
  if bad then
    out[#out + 1] = { key = M.HEALTH, value = "Unschedulable", effect = "NoSchedule" }
    out[#out + 1] = { key = "node.kubernetes.io/not-ready", effect = "NoSchedule" }
    out[#out + 1] = { key = "node.kubernetes.io/not-ready", effect = "NoExecute" }
  end
  return #out > 0 and out or nil
end

local NOT_READY = "node is not ready: HyperPod health checks report the instance unhealthy"

-- act(ctl, n, c, value): a person asked for a replacement or a reboot
local function act(ctl, n, c, value)
  local op = value == "UnschedulablePendingReboot" and "BatchRebootClusterNodes" or "BatchReplaceClusterNodes"
  local out, err = aws.call(ctl.region, "sagemaker", op, { ClusterName = c.ClusterName, NodeIds = { n.InstanceId } })
  if not out or #(out.Failed or {}) > 0 then
    log.warn("sandbox", "node %s: %s after %s=%s failed: %s", M.node_name(n.InstanceId), op, M.HEALTH, value,
      tostring(err and err.message or out.Failed[1].Message))
    return false
  end
  log.info("sandbox", "node %s: %s=%s; HyperPod %s it", M.node_name(n.InstanceId), M.HEALTH, value,
    op == "BatchRebootClusterNodes" and "reboots" or "replaces")
  return true
end

-- injected(node, status, c, n, old) -> the Events to write: the
-- node_health faults (sandbox.faults_nodes) on the Node about to be
-- written, as the health-monitoring agent would report them
local KUBELET = { Ready = true, MemoryPressure = true, DiskPressure = true, PIDPressure = true }
local function injected(node, status, c, n, old)
  local said = {}
  local labels, ann = node.metadata.labels, node.metadata.annotations
  local before = old and old.metadata.labels or {}
  -- a condition only a fault set (NetworkUnavailable) goes with the fault
  local kept = {}
  for _, cd in ipairs(status.conditions) do if KUBELET[cd.type] then kept[#kept + 1] = cd end end
  status.conditions = kept
  for _, f in ipairs(faults_nodes.node(c.ClusterName, n.group, node.metadata.name)) do
    for key, v in pairs { [M.HEALTH] = f.label, [M.DEEP] = f.deep_health } do
      labels[key] = v
      if key == M.HEALTH then ann[SET] = v end -- the agent's verdict, not a person's request
      if before[key] ~= v then
        said[#said + 1] = { key == M.HEALTH and "NodeHealthStatusChanged" or "DeepHealthCheckStatusChanged",
          string.format("%s changed from %s to %s", key, tostring(before[key] or "(none)"), v) }
      end
    end
    if f.condition then
      local x = f.condition
      status.conditions = ctl_.set_condition(status.conditions, x.type, x.status, x.reason or x.type,
        x.message or "")
      local prev = old and ctl_.condition((old.status or {}).conditions or {}, x.type)
      if not prev or prev.status ~= x.status then
        said[#said + 1] = { x.reason or x.type, x.message or (x.type .. " is " .. x.status) }
      end
    end
    if f.taint then
      node.spec.taints = node.spec.taints or {}
      table.insert(node.spec.taints, { key = f.taint.key, value = f.taint.value, effect = f.taint.effect })
    end
    for key, lost in pairs { ["nvidia.com/gpu"] = f.gpu_lost, ["vpc.amazonaws.com/efa"] = f.efa_lost } do
      local have = tonumber(status.capacity[key])
      if have then status.allocatable[key] = tostring(math.max(0, math.tointeger(have) - lost)) end
    end
  end
  return said
end

local ASKS = { UnschedulablePendingReplacement = true, UnschedulablePendingReboot = true }

local function reconcile(ctl, r, n, c)
  local cl = ctl.cl
  local name = M.node_name(n.InstanceId)
  local old = cl:get(r, nil, name)
  local hv, ready, bad = health(n, c)
  if hv and old and not n.busy and not n.recovering and (n.Status == "Running" or n.Status == "Failure") then
    local asked = (old.metadata.labels or {})[M.HEALTH]
    if ASKS[asked] and asked ~= (old.metadata.annotations or {})[SET] and act(ctl, n, c, asked) then
      return -- the SageMaker side changed; sync brings us back
    end
  end
  if not hv or (not old and not ready) then
    if old then cl:delete(r, nil, name) end
    return
  end
  local g = C.group(c, n.group)
  local node = old and ctl_.copy(old) or { metadata = { name = name } }
  local md = node.metadata
  local labels = md.labels or {}
  for k, v in pairs(labels_of(ctl, n, c, g, hv)) do labels[k] = v end
  md.labels = labels
  node_.annotate(md, n)
  md.annotations[MARK] = n.InstanceId
  md.annotations[SET] = hv
  node.spec = node.spec or {}
  node.spec.providerID = string.format("aws:///%s/sagemaker/cluster/hyperpod-%s-%s", n.az_id or n.az or "",
    (c.ClusterArn or ""):match("([^/]+)$") or c.ClusterName, n.InstanceId)
  node.spec.taints = taints_of(g, bad)
  local status = node_.status(ctl, old and old.status, n, ready, { not_ready = NOT_READY })
  local said = injected(node, status, c, n, old)
  if node_.put(ctl, r, old, node, status) then M.schedule_fault(ctl.region, c, n) end
  for _, e in ipairs(said) do ctl_.event(ctl, cl:get(r, nil, name) or node, "Warning", e[1], e[2], "health-monitoring-agent") end
end

ctl_.handlers.nodes = function(ctl)
  local r = ctl:r("", "v1", "nodes")
  local sm = state.view(ctl.region, "sagemaker")
  local mine = {}
  for _, c in ipairs(sm:list("cluster")) do
    local region, name = eks_of(c)
    if region == ctl.region and name == ctl.cl.name then mine[c.ClusterName] = c end
  end
  local want = {}
  for _, n in ipairs(sm:list("node")) do
    local c = mine[n.cluster]
    if c then want[M.node_name(n.InstanceId)] = { n = n, c = c } end
  end
  node_.follow(ctl, r, MARK, want, function(_, w) reconcile(ctl, r, w.n, w.c) end)
end

-- a person's label change reaches the handler
function M.watch(ctl, etype, r, obj)
  if r.kind == "Node" and etype == "MODIFIED" and obj.metadata.annotations and obj.metadata.annotations[MARK] then
    local v = (obj.metadata.labels or {})[M.HEALTH]
    if ASKS[v] and v ~= obj.metadata.annotations[SET] then ctl:enqueue("nodes") end
  end
end

function M.start(ctl) ctl:enqueue("nodes") end

return M
