-- sandbox.k8s.controllers._node: what every simulated machine's Node has,
-- whichever service launched it (HyperPod instances: controllers/nodes.lua;
-- EKS managed node group instances: controllers/nodegroups.lua): capacity
-- and allocatable from the instance type data (lua/sandbox/data/
-- instance_types.lua, "ml.<type>" or the EC2 "<type>"), the kubelet's
-- conditions, nodeInfo and addresses, the well-known labels, and one write
-- that creates a Node or changes only what differs.
--
-- An instance here is { InstanceId, InstanceType, ip, dns, az, az_id }.
local ctl_ = require "sandbox.k8s.controllers._ctl"
local types = require "sandbox.data.instance_types"

local M = {}

M.KUBELET = { ["1.28"] = "v1.28.15", ["1.29"] = "v1.29.15", ["1.30"] = "v1.30.14", ["1.31"] = "v1.31.10",
  ["1.32"] = "v1.32.6", ["1.33"] = "v1.33.3", ["1.34"] = "v1.34.1" }

-- type_info(itype) -> the instance type data for "ml.g5.xlarge" or "g5.xlarge", or nil
function M.type_info(itype)
  itype = tostring(itype)
  return types[itype] or types["ml." .. itype]
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
function M.resources(itype)
  local t = M.type_info(itype) or { vcpus = 2, memory_mib = 4096, accelerators = {} }
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

function M.stable_hex(s, n)
  local h = ctl_.hash(s, 16)
  return (h:gsub(".", function(ch) return string.format("%x", ch:byte() % 16) end)):sub(1, n)
end

-- labels(ctl, inst, hostname, itype) -> the labels the kubelet and the
-- cloud provider give every node: instance type, zone and region (current
-- and beta keys), zone ID, hostname, OS and architecture
function M.labels(ctl, inst, hostname, itype)
  local l = {}
  l["node.kubernetes.io/instance-type"] = itype or inst.InstanceType
  l["beta.kubernetes.io/instance-type"] = itype or inst.InstanceType
  l["topology.kubernetes.io/zone"] = inst.az
  l["failure-domain.beta.kubernetes.io/zone"] = inst.az
  l["topology.k8s.aws/zone-id"] = inst.az_id
  l["topology.kubernetes.io/region"] = ctl.region
  l["failure-domain.beta.kubernetes.io/region"] = ctl.region
  l["kubernetes.io/hostname"] = hostname
  l["kubernetes.io/os"], l["beta.kubernetes.io/os"] = "linux", "linux"
  l["kubernetes.io/arch"], l["beta.kubernetes.io/arch"] = "amd64", "amd64"
  return l
end

-- conditions(old, ready [, not_ready_message]) -> the kubelet's conditions
function M.conditions(old, ready, why)
  local list = ctl_.copy(old or {})
  list = ctl_.set_condition(list, "MemoryPressure", "False", "KubeletHasSufficientMemory",
    "kubelet has sufficient memory available")
  list = ctl_.set_condition(list, "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
  list = ctl_.set_condition(list, "PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available")
  if ready then
    list = ctl_.set_condition(list, "Ready", "True", "KubeletReady", "kubelet is posting ready status")
  else
    list = ctl_.set_condition(list, "Ready", "False", "KubeletNotReady", why or "node is not ready")
  end
  for _, c in ipairs(list) do c.lastHeartbeatTime = c.lastHeartbeatTime or c.lastTransitionTime end
  return list
end

-- status(ctl, old, inst, ready, o) -> the Node status of an instance; old:
-- the Node's current status (conditions and bootID are kept); o: { os_image,
-- kernel, not_ready (the Ready=False message) }
function M.status(ctl, old, inst, ready, o)
  o = o or {}
  local cap, alloc = M.resources(inst.InstanceType)
  local kv = M.KUBELET[ctl.version or ""] or M.KUBELET["1.34"]
  local id = inst.InstanceId
  return {
    capacity = cap, allocatable = alloc,
    conditions = M.conditions(old and old.conditions, ready, o.not_ready),
    addresses = { { type = "InternalIP", address = inst.ip }, { type = "InternalDNS", address = inst.dns },
      { type = "Hostname", address = inst.dns } },
    daemonEndpoints = { kubeletEndpoint = { Port = 10250 } },
    nodeInfo = {
      machineID = M.stable_hex(id .. "m", 32), systemUUID = M.stable_hex(id .. "s", 32),
      bootID = (old and old.nodeInfo and old.nodeInfo.bootID) or M.stable_hex(id .. "b", 32),
      kernelVersion = o.kernel or "6.8.0-1024-aws", osImage = o.os_image or "Ubuntu 22.04.5 LTS",
      containerRuntimeVersion = "containerd://1.7.27",
      kubeletVersion = kv .. "-eks-" .. M.stable_hex(kv, 7), kubeProxyVersion = kv .. "-eks-" .. M.stable_hex(kv, 7),
      operatingSystem = "linux", architecture = "amd64",
    },
  }
end

-- annotate(md, inst): the annotations the kubelet and the node controller set
function M.annotate(md, inst)
  md.annotations = md.annotations or {}
  md.annotations["node.alpha.kubernetes.io/ttl"] = "0"
  md.annotations["volumes.kubernetes.io/controller-managed-attach-detach"] = "true"
  md.annotations["alpha.kubernetes.io/provided-node-ip"] = inst.ip
end

-- wake(region, name, kind): the controllers of EKS cluster `name` (of every
-- served cluster of the region when name is nil) reconcile `kind` soon
function M.wake(region, name, kind)
  for _, ctl in ipairs(ctl_.each(region)) do
    if not name or ctl.cl.name == name then ctl:enqueue(kind) end
  end
end

-- follow(ctl, r, mark, want, reconcile): the Nodes that carry annotation
-- `mark` become exactly want's (name -> what it is made from): the others
-- are deleted, then reconcile(name, want[name]) runs for each, by name
function M.follow(ctl, r, mark, want, reconcile)
  for _, node in ipairs(ctl.cl:list(r)) do
    local a = node.metadata.annotations
    if a and a[mark] and not want[node.metadata.name] then ctl.cl:delete(r, nil, node.metadata.name) end
  end
  local names = {}
  for name in pairs(want) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do reconcile(name, want[name]) end
end

-- put(ctl, r, old, node, status) -> true when it created the Node: a new
-- Node is created with its status; an existing one is updated (a write only
-- when something differs) and its status written when it differs
function M.put(ctl, r, old, node, status)
  if not old then
    node.status = status
    ctl.cl:create(r, node)
    return true
  end
  local cur = ctl.cl:update(r, node) or old
  ctl_.put_status(ctl, r, cur, status)
  return false
end

return M
