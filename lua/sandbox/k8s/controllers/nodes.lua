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
local log = require "hypd.log"
local state = require "sandbox.state"
local task = require "hypd.task"
local types = require "sandbox.data.instance_types"

local M = {}

M.HEALTH = "sagemaker.amazonaws.com/node-health-status"
M.DEEP = "sagemaker.amazonaws.com/deep-health-check-status"
local MARK = "sandbox.hypd.io/instance-id" -- annotation: a Node this controller owns
local SET = "sandbox.hypd.io/health-status" -- annotation: the health label value this controller last wrote
local KUBELET = { ["1.28"] = "v1.28.15", ["1.29"] = "v1.29.15", ["1.30"] = "v1.30.14", ["1.31"] = "v1.31.10",
  ["1.32"] = "v1.32.6", ["1.33"] = "v1.33.3", ["1.34"] = "v1.34.1" }

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
  if c then r, name = eks_of(c) end
  for _, ctl in ipairs(ctl_.each(region)) do
    if not name or (r == region and ctl.cl.name == name) then ctl:enqueue("nodes") end
  end
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

local function reserved_cpu_m(vcpus)
  -- the EKS AMI's kube-reserved: 6% of the first core, 1% of the second,
  -- 0.5% of the next two, 0.25% of the rest
  local m = 60
  if vcpus > 1 then m = m + 10 end
  if vcpus > 2 then m = m + 5 * math.min(2, vcpus - 2) end
  if vcpus > 4 then m = m + 2.5 * (vcpus - 4) end
  return math.floor(m)
end

local function max_pods(vcpus) return vcpus >= 16 and 110 or vcpus >= 4 and 58 or 17 end

-- resources(itype) -> capacity, allocatable
local function resources(itype)
  local t = types[itype] or { vcpus = 2, memory_mib = 4096, accelerators = {} }
  local pods = max_pods(t.vcpus)
  local mem_ki = t.memory_mib * 1024
  local cap = { cpu = tostring(t.vcpus), memory = string.format("%dKi", mem_ki - 512 * 1024),
    pods = tostring(pods), ["ephemeral-storage"] = "524275692Ki", ["hugepages-1Gi"] = "0", ["hugepages-2Mi"] = "0" }
  local alloc = { cpu = string.format("%dm", t.vcpus * 1000 - reserved_cpu_m(t.vcpus)),
    memory = string.format("%dKi", mem_ki - 512 * 1024 - (255 + 11 * pods + 100) * 1024),
    pods = cap.pods, ["ephemeral-storage"] = "482098954310", ["hugepages-1Gi"] = "0", ["hugepages-2Mi"] = "0" }
  for _, a in ipairs(t.accelerators or {}) do
    local key = a.kind == "gpu" and "nvidia.com/gpu" or a.kind == "neuron" and "aws.amazon.com/neurondevice"
    if key then cap[key], alloc[key] = tostring(a.count), tostring(a.count) end
  end
  if t.efa_supported then
    cap["vpc.amazonaws.com/efa"] = tostring(t.max_efa_interfaces or 1)
    alloc["vpc.amazonaws.com/efa"] = cap["vpc.amazonaws.com/efa"]
  end
  return cap, alloc
end

-- resources(instance_type) -> capacity, allocatable of a node of that type
M.resources = resources

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

local function stable_hex(s, n)
  local h = ctl_.hash(s, 16)
  return (h:gsub(".", function(ch) return string.format("%x", ch:byte() % 16) end)):sub(1, n)
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
  l["node.kubernetes.io/instance-type"] = n.InstanceType
  l["beta.kubernetes.io/instance-type"] = n.InstanceType
  l["topology.kubernetes.io/zone"] = n.az
  l["failure-domain.beta.kubernetes.io/zone"] = n.az
  l["topology.k8s.aws/zone-id"] = n.az_id
  l["topology.kubernetes.io/region"] = ctl.region
  l["failure-domain.beta.kubernetes.io/region"] = ctl.region
  l["kubernetes.io/hostname"] = M.node_name(n.InstanceId)
  l["kubernetes.io/os"], l["beta.kubernetes.io/os"] = "linux", "linux"
  l["kubernetes.io/arch"], l["beta.kubernetes.io/arch"] = "amd64", "amd64"
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

local function conditions(old, ready)
  local list = ctl_.copy(old or {})
  list = ctl_.set_condition(list, "MemoryPressure", "False", "KubeletHasSufficientMemory",
    "kubelet has sufficient memory available")
  list = ctl_.set_condition(list, "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
  list = ctl_.set_condition(list, "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available")
  if ready then
    list = ctl_.set_condition(list, "Ready", "True", "KubeletReady", "kubelet is posting ready status")
  else
    list = ctl_.set_condition(list, "Ready", "False", "KubeletNotReady",
      "node is not ready: HyperPod health checks report the instance unhealthy")
  end
  for _, c in ipairs(list) do c.lastHeartbeatTime = c.lastHeartbeatTime or c.lastTransitionTime end
  return list
end

local function status_of(ctl, old, n, ready)
  local cap, alloc = resources(n.InstanceType)
  local kv = KUBELET[ctl.version or ""] or KUBELET["1.34"]
  local st = {
    capacity = cap, allocatable = alloc,
    conditions = conditions(old and old.conditions, ready),
    addresses = { { type = "InternalIP", address = n.ip }, { type = "InternalDNS", address = n.dns },
      { type = "Hostname", address = n.dns } },
    daemonEndpoints = { kubeletEndpoint = { Port = 10250 } },
    nodeInfo = {
      machineID = stable_hex(n.InstanceId .. "m", 32), systemUUID = stable_hex(n.InstanceId .. "s", 32),
      bootID = (old and old.nodeInfo and old.nodeInfo.bootID) or stable_hex(n.InstanceId .. "b", 32),
      kernelVersion = "6.8.0-1024-aws", osImage = "Ubuntu 22.04.5 LTS", containerRuntimeVersion = "containerd://1.7.27",
      kubeletVersion = kv .. "-eks-" .. stable_hex(kv, 7), kubeProxyVersion = kv .. "-eks-" .. stable_hex(kv, 7),
      operatingSystem = "linux", architecture = "amd64",
    },
  }
  return st
end

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
  md.annotations = md.annotations or {}
  md.annotations[MARK] = n.InstanceId
  md.annotations[SET] = hv
  md.annotations["node.alpha.kubernetes.io/ttl"] = "0"
  md.annotations["volumes.kubernetes.io/controller-managed-attach-detach"] = "true"
  md.annotations["alpha.kubernetes.io/provided-node-ip"] = n.ip
  node.spec = node.spec or {}
  node.spec.providerID = string.format("aws:///%s/sagemaker/cluster/hyperpod-%s-%s", n.az_id or n.az or "",
    (c.ClusterArn or ""):match("([^/]+)$") or c.ClusterName, n.InstanceId)
  node.spec.taints = taints_of(g, bad)
  local status = status_of(ctl, old and old.status, n, ready)
  if not old then
    node.status = status
    cl:create(r, node)
    M.schedule_fault(ctl.region, c, n)
    return
  end
  local cur = cl:update(r, node) or old
  ctl_.put_status(ctl, r, cur, status)
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
  for _, node in ipairs(ctl.cl:list(r)) do
    if node.metadata.annotations and node.metadata.annotations[MARK] and not want[node.metadata.name] then
      ctl.cl:delete(r, nil, node.metadata.name)
    end
  end
  local names = {}
  for name in pairs(want) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do reconcile(ctl, r, want[name].n, want[name].c) end
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
