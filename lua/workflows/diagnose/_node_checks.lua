-- diagnose/_node_checks: what diagnose_node_health finds on one HyperPod
-- node, from what it read (the SageMaker node summary, the Kubernetes Node,
-- the group's configured taints, the Node's Warning Events), as findings
-- of diagnose/_findings with their next steps.
local F = require "diagnose._findings"

local M = {}

M.HEALTH = "sagemaker.amazonaws.com/node-health-status"
M.DEEP = "sagemaker.amazonaws.com/deep-health-check-status"
M.GPU, M.EFA = "nvidia.com/gpu", "vpc.amazonaws.com/efa"

-- the health label's values, as HyperPod's health-monitoring agent sets them
local LABELS = {
  UnschedulablePendingReboot = { code = "NODE_PENDING_REBOOT", summary = "the node is marked for a reboot",
    why = "HyperPod's health-monitoring agent found a fault a reboot may clear and marked the node; with " ..
      "automatic node recovery HyperPod reboots it, otherwise it waits for someone to" },
  UnschedulablePendingReplacement = { code = "NODE_PENDING_REPLACEMENT", summary = "the node is marked for replacement",
    why = "HyperPod's health-monitoring agent found a fault a reboot does not clear (a GPU, EFA or host " ..
      "failure) and marked the node to be replaced; its pods are evicted and no new pod lands on it" },
  Unschedulable = { code = "NODE_UNSCHEDULABLE", summary = "HyperPod marked the node unschedulable",
    why = "the node failed HyperPod's health checks; without automatic node recovery it stays out of " ..
      "service until it is rebooted or replaced" },
}

-- PRESSURE: the kubelet's conditions that are bad when True
local PRESSURE = {
  MemoryPressure = { code = "NODE_MEMORY_PRESSURE", why = "the kubelet is short of memory and evicts pods; " ..
    "new pods are not scheduled on the node" },
  DiskPressure = { code = "NODE_DISK_PRESSURE", why = "the node's disk (image or ephemeral storage) is nearly " ..
    "full; the kubelet evicts pods and garbage-collects images" },
  PIDPressure = { code = "NODE_PID_PRESSURE", why = "the node is running out of process ids; pods are evicted" },
  NetworkUnavailable = { code = "NODE_NETWORK_UNAVAILABLE", why = "the node's network is not configured " ..
    "(the CNI did not set it up); pods on it cannot reach the cluster" },
}

-- steps(c, node, group, severe) -> the escalation: inspect (the node list
-- of its group, the monitor when it exists), reboot, and for a severe
-- finding replace
function M.steps(c, node, group, severe)
  local base = { cluster = c.name, region = c.region_given }
  local function with(extra)
    local out = {}
    for k, v in pairs(base) do out[k] = v end
    for k, v in pairs(extra) do out[k] = v end
    return out
  end
  local s = { F.step("inspect", "hyperpod_list_nodes", with { instance_group = group },
    "see the node's instance status, readiness and health label next to its group's") }
  if hypd.tools.exists("monitor_get_cluster") then
    s[#s + 1] = F.step("inspect", "monitor_get_cluster", with { instance_group = group },
      "see the group's GPUs, pending pods and Warning events")
  end
  s[#s + 1] = F.step("reboot", "hyperpod_node_reboot", with { nodes = { node } },
    "a reboot clears most transient GPU, driver and kubelet faults; the node's pods are restarted elsewhere")
  if severe then
    s[#s + 1] = F.step("replace", "hyperpod_node_replace", with { nodes = { node } },
      "when the fault returns after a reboot: a new instance takes the node's place (its local volumes are wiped)")
  end
  return s
end

local function ev(source, quote, at) return F.evidence(source, quote, at) end

-- history(events) -> evidence of the Node's Warning Events (the label's and
-- conditions' changes as they were reported), newest first, at most 5
local function history(name, events)
  local out = {}
  for i = 1, math.min(5, #events) do
    local e = events[i]
    out[#out + 1] = ev("Event on Node/" .. name .. " reason " .. tostring(e.reason) ..
      " (" .. tostring((e.source or {}).component or e.reportingComponent or "?") .. ", x" .. tostring(e.count or 1) .. ")",
      tostring(e.message), e.lastTimestamp or e.eventTime or e.firstTimestamp)
  end
  return out
end

local function join(a, b)
  local out = {}
  for _, x in ipairs(a) do out[#out + 1] = x end
  for _, x in ipairs(b) do out[#out + 1] = x end
  return out
end

local function int(v) return math.tointeger(tonumber(v)) or 0 end

-- check(r, c, s, k8s, opts): the findings of one node. s: its
-- ListClusterNodes summary; k8s: its Node or nil; opts: {events (Warning,
-- newest first), group_taints (key/effect -> true), joined_known (whether
-- the Kubernetes side answered)}
function M.check(r, c, s, node, opts)
  local id = s.InstanceId
  local name = "hyperpod-" .. id
  local group = s.InstanceGroupName
  local subject = "node " .. name .. " (" .. tostring(group) .. ")"
  local st = s.InstanceStatus or {}
  local past = history(name, opts.events or {})
  local function add(sev, code, summary, evidence, why, severe)
    r:add { severity = sev, code = code, subject = subject, summary = summary, evidence = join(evidence, past),
      explanation = why, next = M.steps(c, name, group, severe) }
  end
  if st.Status == "Failure" then
    add("critical", "NODE_FAILED", "SageMaker reports the instance failed",
      { ev("ListClusterNodes " .. id .. " InstanceStatus.Status", st.Status),
        ev("ListClusterNodes " .. id .. " InstanceStatus.Message", tostring(st.Message)) },
      "HyperPod marks an instance Failure when it fails its health or lifecycle checks; with automatic node " ..
      "recovery it is replaced within about 15 minutes, otherwise it stays failed until it is rebooted or replaced",
      true)
  elseif st.Status ~= "Running" and st.Status ~= "SystemUpdating" then
    r:add { severity = "info", code = "NODE_IN_TRANSITION", subject = subject,
      summary = "the instance is " .. tostring(st.Status),
      evidence = { ev("ListClusterNodes " .. id .. " InstanceStatus.Status", tostring(st.Status)),
        ev("ListClusterNodes " .. id .. " InstanceStatus.Message", tostring(st.Message or "")) },
      explanation = "the node is being launched, rebooted or replaced; follow it with hyperpod_list_nodes",
      next = { F.step("inspect", "hyperpod_list_nodes", { cluster = c.name, region = c.region_given,
        instance_group = group, wait_seconds = 60 }, "follow the node until it is Running") } }
    return
  end
  if not node then
    if opts.joined_known and st.Status == "Running" then
      add("warning", "NODE_NOT_JOINED", "the instance is Running but has no Kubernetes node",
        { ev("ListClusterNodes " .. id .. " InstanceStatus.Status", st.Status),
          ev("Kubernetes Node/" .. name, "not found") },
        "a Running HyperPod instance joins the EKS cluster as Node " .. name .. "; when it does not, its " ..
        "kubelet could not register (its access entry, network or bootstrap failed)", false)
    end
    return
  end
  local labels = node.metadata.labels or {}
  local hv = labels[M.HEALTH]
  local known = LABELS[hv]
  if known then
    add("critical", known.code, known.summary, { ev("Node/" .. name .. " label " .. M.HEALTH, hv) }, known.why,
      hv ~= "UnschedulablePendingReboot")
  elseif hv ~= nil and hv ~= "Schedulable" then
    add("warning", "NODE_HEALTH_LABEL", "the node's health label is " .. hv,
      { ev("Node/" .. name .. " label " .. M.HEALTH, hv) },
      "HyperPod's health-monitoring agent sets Schedulable on a healthy node", false)
  end
  local deep = labels[M.DEEP]
  if deep == "Failed" then
    add("critical", "DEEP_HEALTH_CHECK_FAILED", "the node failed HyperPod's deep health checks",
      { ev("Node/" .. name .. " label " .. M.DEEP, deep) },
      "the deep health checks (GPU stress, NCCL and EFA connectivity) found a faulty GPU or interconnect; " ..
      "distributed jobs on the node fail or slow down", true)
  elseif deep ~= nil and deep ~= "Passed" then
    r:add { severity = "info", code = "DEEP_HEALTH_CHECK_" .. (deep:upper():gsub("[^A-Z0-9]", "_")), subject = subject,
      summary = "deep health checks: " .. deep, evidence = { ev("Node/" .. name .. " label " .. M.DEEP, deep) },
      explanation = "the deep health checks have not passed yet", next = {} }
  end
  for _, cd in ipairs((node.status or {}).conditions or {}) do
    local quote = string.format("%s=%s reason=%s message=%s", cd.type, tostring(cd.status), tostring(cd.reason),
      tostring(cd.message))
    local src = "Node/" .. name .. " condition " .. cd.type
    if cd.type == "Ready" and cd.status ~= "True" then
      add("critical", "NODE_NOT_READY", "the node is not Ready (" .. tostring(cd.reason) .. ")",
        { ev(src, quote, cd.lastTransitionTime) },
        cd.status == "Unknown" and "the node controller stopped hearing from the kubelet (the instance is down, " ..
          "hung or cut off the network); its pods are evicted after the toleration period" or
          "the kubelet reports the node not ready; no pod is scheduled on it and its running pods may fail", true)
    elseif PRESSURE[cd.type] and cd.status == "True" then
      local p = PRESSURE[cd.type]
      add(cd.type == "NetworkUnavailable" and "critical" or "warning", p.code,
        cd.type .. " on the node (" .. tostring(cd.reason) .. ")", { ev(src, quote, cd.lastTransitionTime) }, p.why,
        cd.type == "NetworkUnavailable")
    end
  end
  local own = opts.group_taints or {}
  for _, tn in ipairs((node.spec or {}).taints or {}) do
    local hard = tn.effect == "NoSchedule" or tn.effect == "NoExecute"
    local k = tostring(tn.key)
    local from_health = k == M.HEALTH or k:find("^node%.kubernetes%.io/") ~= nil
    if hard and not own[k .. "/" .. tostring(tn.effect)] and not (from_health and (known or st.Status ~= "Running")) then
      add("warning", "NODE_TAINTED", "the node has taint " .. k .. ":" .. tn.effect,
        { ev("Node/" .. name .. " spec.taints", string.format("%s=%s:%s", k, tostring(tn.value or ""), tn.effect)) },
        "the taint is not one of the instance group's configured taints: pods without a matching toleration " ..
        (tn.effect == "NoExecute" and "are evicted and " or "") .. "are not scheduled on the node", false)
    end
  end
  if (node.spec or {}).unschedulable then
    add("warning", "NODE_CORDONED", "the node is cordoned", { ev("Node/" .. name .. " spec.unschedulable", "true") },
      "someone (or a drain) cordoned the node: no new pod is scheduled on it", false)
  end
  local cap, alloc = (node.status or {}).capacity or {}, (node.status or {}).allocatable or {}
  for key, what in pairs { [M.GPU] = { "GPU_LOST", "GPU" }, [M.EFA] = { "EFA_LOST", "EFA device" } } do
    local have, usable = int(cap[key]), int(alloc[key])
    if cap[key] ~= nil and usable < have then
      add("critical", what[1], string.format("%d of %d %ss are not allocatable", have - usable, have, what[2]),
        { ev("Node/" .. name .. " status.capacity " .. key, tostring(cap[key])),
          ev("Node/" .. name .. " status.allocatable " .. key, tostring(alloc[key] or "0")) },
        key == M.GPU and "the NVIDIA device plugin reports fewer healthy GPUs than the instance has (an XID " ..
          "error or a GPU fallen off the bus); jobs asking for all the node's GPUs no longer fit on it" or
          "the EFA device plugin reports fewer EFA interfaces than the instance has; NCCL over EFA on the " ..
          "node fails or falls back to TCP", true)
    end
  end
end

return M
