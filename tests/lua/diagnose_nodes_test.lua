-- diagnose_node_health against the sandbox in this process (virtual clock),
-- on a HyperPod cluster of gpu x2 (ml.g6e.24xlarge, EFA) and cpu x1
-- (capacity_helpers): healthy with no fault; each node_health fault
-- (sandbox.faults_nodes), a failing node and an unschedulable pod give
-- their finding with its code, severity and quoted evidence; nothing is
-- mutated while it runs; every suggested call validates.
local t = require "hypd.tap"
local json = require "hypd.json"
local task = require "hypd.task"
local faults = require "sandbox.faults"
local k8s = require "hypd.k8s"
local dispatch = require "hypd.tool.dispatch"
local C = dofile("tests/lua/capacity_helpers.lua")
local D = dofile("tests/lua/diag_helpers.lua")

local S, gpu, cpu
local function skip() return t.skip("no cluster: the first test failed to make it") end

-- inject(spec): the faults configured, the Nodes given time to follow
local function inject(spec)
  assert(faults.configure(spec))
  task.sleep(10)
end

t.test("a sandbox with an EKS cluster and a HyperPod cluster of three nodes", function()
  S = C.here()
  t.cleanup(function() faults.configure {} end)
  S.build("diag-nodes", "hp-diag")
  local list = dispatch.call("hyperpod_list_nodes", {}, C.OPER).nodes
  for _, n in ipairs(list) do
    if n.instance_group == "gpu" and not gpu then gpu = n.node_name end
    if n.instance_group == "cpu" then cpu = n.node_name end
  end
  t.ok(gpu and cpu, "a gpu and a cpu node")
end)

t.test("with no fault every node is healthy and the answer says what was checked", function()
  if not S then return skip() end
  local r = D.run("diagnose_node_health", {})
  t.eq(r.healthy, true, json.encode(D.codes(r)))
  t.eq(r.counts, { critical = 0, warning = 0, info = 0 })
  t.ok(#r.checked >= 4, "it lists what it looked at")
  t.eq(D.run("diagnose_node_health", { node = gpu }).healthy, true, "one node")
end)

t.test("bad input names the field: a malformed node, an unknown node, an unknown group", function()
  if not S then return skip() end
  local out, err = dispatch.call("diagnose_node_health", { node = "node-1" }, C.OPER)
  t.fails(out, err, "VALIDATION")
  t.eq(err.fields[1].field, "node")
  out, err = dispatch.call("diagnose_node_health", { node = C.UNKNOWN }, C.OPER)
  t.fails(out, err, "NOT_FOUND")
  t.eq(err.fields[1].field, "node")
  out, err = dispatch.call("diagnose_node_health", { instance_group = "nope" }, C.OPER)
  t.fails(out, err, "NOT_FOUND")
  t.eq(err.fields[1].field, "instance_group")
end)

t.test("the health agent's UnschedulablePendingReboot label: a critical NODE_PENDING_REBOOT quoting the label " ..
  "and its change in the node's events, with inspect then reboot suggested", function()
  if not S then return skip() end
  inject { node_health = { { cluster = S.hp, node = gpu, label = "UnschedulablePendingReboot" } } }
  local r = D.run("diagnose_node_health", {})
  t.eq(r.healthy, false)
  local f = D.find(r, "NODE_PENDING_REBOOT", gpu)
  t.ok(f, json.encode(D.codes(r)))
  if not f then return end
  t.eq(f.severity, "critical")
  t.eq(f.evidence[1], { source = "Node/" .. gpu .. " label sagemaker.amazonaws.com/node-health-status",
    quote = "UnschedulablePendingReboot" })
  t.ok(D.quoted(f, "changed from Schedulable to UnschedulablePendingReboot"), "the label's history, from the Event")
  t.eq(D.actions(f)[1], "inspect hyperpod_list_nodes")
  t.eq(f.next[#f.next].call, "hyperpod_node_reboot cluster=diag-nodes nodes:='[\"" .. gpu .. "\"]'")
  t.eq(f.next[#f.next].order, #f.next)
  t.eq(D.find(r, "NODE_PENDING_REBOOT", cpu), nil, "the other nodes are not named")
  local one = D.run("diagnose_node_health", { node = cpu })
  t.eq(one.healthy, true, "the cpu node alone is healthy")
end)

t.test("a failed deep health check and a lost GPU and EFA device: critical, with capacity and allocatable " ..
  "quoted, and replace as the last step", function()
  if not S then return skip() end
  inject { node_health = { { cluster = S.hp, node = gpu, deep_health = "Failed", gpu_lost = 1, efa_lost = 1 } } }
  local r = D.run("diagnose_node_health", { node = gpu })
  local deep, lost, efa = D.find(r, "DEEP_HEALTH_CHECK_FAILED"), D.find(r, "GPU_LOST"), D.find(r, "EFA_LOST")
  t.ok(deep and lost and efa, json.encode(D.codes(r)))
  if not (deep and lost and efa) then return end
  t.eq({ deep.severity, lost.severity, efa.severity }, { "critical", "critical", "critical" })
  t.eq(deep.evidence[1].quote, "Failed")
  t.eq({ lost.evidence[1].quote, lost.evidence[2].quote }, { "4", "3" }, "an ml.g6e.24xlarge has 4 GPUs; 3 usable")
  t.like(lost.summary, "1 of 4 GPUs")
  t.like(efa.evidence[2].source, "allocatable vpc.amazonaws.com/efa")
  t.eq(D.actions(lost), { "inspect hyperpod_list_nodes", "reboot hyperpod_node_reboot", "replace hyperpod_node_replace" })
end)

t.test("node conditions and a taint: MemoryPressure, DiskPressure, NetworkUnavailable and Ready Unknown with " ..
  "their reason and message; a NoExecute taint the group does not configure", function()
  if not S then return skip() end
  inject { node_health = {
    { cluster = S.hp, node = gpu, condition = { type = "MemoryPressure", status = "True",
      reason = "KubeletHasInsufficientMemory", message = "kubelet has insufficient memory available" } },
    { cluster = S.hp, node = gpu, condition = { type = "NetworkUnavailable", status = "True",
      reason = "NoRouteCreated", message = "RouteController failed to create a route" } },
    { cluster = S.hp, instance_group = "cpu", condition = { type = "Ready", status = "Unknown",
      reason = "NodeStatusUnknown", message = "Kubelet stopped posting node status." },
      taint = { key = "example.com/broken", value = "yes", effect = "NoExecute" } },
    { cluster = S.hp, instance_group = "cpu", condition = { type = "DiskPressure", status = "True",
      reason = "KubeletHasDiskPressure", message = "kubelet has disk pressure" } } } }
  local r = D.run("diagnose_node_health", {})
  local mem, net = D.find(r, "NODE_MEMORY_PRESSURE", gpu), D.find(r, "NODE_NETWORK_UNAVAILABLE", gpu)
  local ready, disk, taint = D.find(r, "NODE_NOT_READY", cpu), D.find(r, "NODE_DISK_PRESSURE", cpu),
    D.find(r, "NODE_TAINTED", cpu)
  t.ok(mem and net and ready and disk and taint, json.encode(D.codes(r)))
  if not (mem and net and ready and disk and taint) then return end
  t.eq({ mem.severity, net.severity, ready.severity, disk.severity, taint.severity },
    { "warning", "critical", "critical", "warning", "warning" })
  t.eq(mem.evidence[1].quote, "MemoryPressure=True reason=KubeletHasInsufficientMemory message=kubelet has " ..
    "insufficient memory available")
  t.like(ready.evidence[1].quote, "Ready=Unknown reason=NodeStatusUnknown message=Kubelet stopped posting")
  t.eq(taint.evidence[1].quote, "example.com/broken=yes:NoExecute")
  t.eq(r.findings[1].severity, "critical", "worst first")
  inject {}
  r = D.run("diagnose_node_health", {})
  t.eq(r.healthy, true, "the conditions go with the faults: " .. json.encode(D.codes(r)))
end)

t.test("a cordoned node: NODE_CORDONED quoting spec.unschedulable; uncordoned, healthy again", function()
  if not S then return skip() end
  inject {}
  local conn = k8s.connect { cluster = S.eks, region = "us-west-2" }
  assert(conn:patch("v1", "Node", cpu, { spec = { unschedulable = true } }, { type = "merge" }))
  local r = D.run("diagnose_node_health", { node = cpu })
  local f = D.find(r, "NODE_CORDONED")
  t.ok(f, json.encode(D.codes(r)))
  if f then
    t.eq({ f.severity, f.evidence[1].source, f.evidence[1].quote }, { "warning", "Node/" .. cpu .. " spec.unschedulable",
      "true" })
    t.eq(D.actions(f), { "inspect hyperpod_list_nodes", "reboot hyperpod_node_reboot" }, "no replace for a warning")
  end
  assert(conn:patch("v1", "Node", cpu, { spec = { unschedulable = false } }, { type = "merge" }))
  t.eq(D.run("diagnose_node_health", { node = cpu }).healthy, true)
end)

t.test("a node SageMaker reports Failure: NODE_FAILED quoting InstanceStatus, plus its Kubernetes side", function()
  if not S then return skip() end
  inject {}
  local id = gpu:gsub("^hyperpod%-", "")
  -- the health agent's report of an unrecoverable fault (the sandbox's own path, as node_failures takes)
  assert(require("sandbox.k8s.controllers.nodes").fail("us-west-2", S.hp, id, "Node failed health checks: " ..
    "GPU 2 reported XID 79 (fallen off the bus)."))
  task.sleep(10)
  local r = D.run("diagnose_node_health", { node = gpu })
  local f = D.find(r, "NODE_FAILED")
  t.ok(f, json.encode(D.codes(r)))
  if not f then return end
  t.eq(f.evidence[1], { source = "ListClusterNodes " .. id .. " InstanceStatus.Status", quote = "Failure" })
  t.like(f.evidence[2].quote, "XID 79")
  t.ok(D.find(r, "NODE_PENDING_REPLACEMENT") and D.find(r, "NODE_NOT_READY"), json.encode(D.codes(r)))
  t.eq(D.find(r, "NODE_TAINTED"), nil, "HyperPod's own taints on a failed node are not a separate finding")
end)

t.test("a pod asking more GPUs than its group has: PODS_PENDING on the group with the scheduler's reason", function()
  if not S then return skip() end
  local conn = k8s.connect { cluster = S.eks, region = "us-west-2" }
  assert(conn:create { apiVersion = "v1", kind = "Pod", metadata = { name = "big", namespace = "default" },
    spec = { nodeSelector = { ["sagemaker.amazonaws.com/instance-group-name"] = "cpu" },
      containers = { { name = "main", image = "busybox",
        resources = { requests = { ["nvidia.com/gpu"] = "8" }, limits = { ["nvidia.com/gpu"] = "8" } } } } } })
  task.sleep(10)
  local r = D.run("diagnose_node_health", { instance_group = "cpu" })
  local f = D.find(r, "PODS_PENDING")
  t.ok(f, json.encode(D.codes(r)))
  if not f then return end
  t.eq({ f.severity, f.subject }, { "warning", "instance group cpu" })
  t.like(f.summary, "1 pod cannot be scheduled %(8 GPUs asked%)")
  t.eq(f.evidence[1].source, "Pod/default/big condition PodScheduled")
  t.like(f.evidence[1].quote, "reason=Unschedulable message=0/%d+ nodes are available")
end)
