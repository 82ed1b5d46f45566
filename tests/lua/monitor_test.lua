-- monitor_get_cluster against the sandbox in this process (virtual clock),
-- on a HyperPod cluster of gpu x2 and cpu x1 (capacity_helpers) plus Nodes
-- of a group "ext" made here (one failed, one degraded, one unknown), GPU
-- pods running and GPU pods that fit nowhere. Every count is compared with
-- one made here, independently, from the sandbox's own objects; the cache
-- answers a second call without a list; a 410 relists and drops what went
-- during the gap; wait_seconds answers at a change; the filters filter.
local t = require "hypd.tap"
local json = require "hypd.json"
local dispatch = require "hypd.tool.dispatch"
local objects = require "sandbox.k8s.objects"
local skube = require "sandbox.k8s"
local task = require "hypd.task"
local kcache = require "hypd.k8s.cache"
local C = dofile("tests/lua/capacity_helpers.lua")

local OPER = C.OPER
local S, cl
local function skip() return t.skip("no cluster: the first test failed to make it") end

-- the cache's watches are open HTTP transfers: each test stops it at its
-- end (the next call builds it again), or the harness counts them as left behind
local function stop_cache()
  kcache.stop_all()
  task.sleep(0.1)
end

local GPU = "nvidia.com/gpu"

local function r(res) return cl.reg:find(res == "deployments" and "apps" or "", "v1", res) end

local function call(params)
  local out, err = dispatch.call("monitor_get_cluster", params or {}, OPER)
  if not out then error("monitor_get_cluster: " .. json.encode(err), 0) end
  return out
end

local function pod(ns, name, gpus, selector)
  local res = gpus > 0 and { requests = { [GPU] = tostring(gpus) }, limits = { [GPU] = tostring(gpus) } } or nil
  assert(cl:create(r("pods"), { metadata = { name = name, namespace = ns },
    spec = { nodeSelector = selector, containers = { { name = "main", image = "busybox", resources = res } } } }))
end

local function node(name, ready, extra)
  local conds = { { type = "Ready", status = ready, reason = ready == "True" and "KubeletReady" or "KubeletNotReady",
    message = ready == "True" and "kubelet is posting ready status" or "PLEG is not healthy" } }
  for _, c in ipairs(extra or {}) do conds[#conds + 1] = c end
  assert(cl:create(r("nodes"), { metadata = { name = name, labels = {
    ["sagemaker.amazonaws.com/instance-group-name"] = "ext", ["node.kubernetes.io/instance-type"] = "ml.p5.48xlarge" } },
    spec = { taints = ready ~= "True" and { { key = "node.kubernetes.io/not-ready", effect = "NoSchedule" } } or nil },
    status = { capacity = { [GPU] = "8", ["vpc.amazonaws.com/efa"] = "32" },
      allocatable = { [GPU] = "8", ["vpc.amazonaws.com/efa"] = "32" }, conditions = conds } }))
end

-- the count made here from the sandbox's objects, by rules written out
-- again (not monitor._view's code)
local function expected(filter)
  filter = filter or {}
  local e = { health = { healthy = 0, degraded = 0, failed = 0, unknown = 0 }, groups = {}, phases = {},
    pods = 0, pending_pods = 0, pending_gpus = 0, nodes = 0 }
  local req = {}
  for _, p in ipairs(cl:list(r("pods"))) do
    local g = tonumber(((p.spec.containers[1].resources or {}).requests or {})[GPU] or 0)
    local phase = (p.status or {}).phase or "Unknown"
    if p.spec.nodeName and phase ~= "Succeeded" and phase ~= "Failed" then
      req[p.spec.nodeName] = (req[p.spec.nodeName] or 0) + g
    end
    if not filter.namespace or p.metadata.namespace == filter.namespace then
      e.pods = e.pods + 1
      e.phases[phase] = (e.phases[phase] or 0) + 1
      local sel = (p.spec.nodeSelector or {})["sagemaker.amazonaws.com/instance-group-name"]
      if phase == "Pending" and not p.spec.nodeName and (not filter.instance_group or sel == filter.instance_group) then
        e.pending_pods, e.pending_gpus = e.pending_pods + 1, e.pending_gpus + g
      end
    end
  end
  for _, n in ipairs(cl:list(r("nodes"))) do
    local l = n.metadata.labels or {}
    local grp = l["sagemaker.amazonaws.com/instance-group-name"]
    if not filter.instance_group or grp == filter.instance_group then
      e.nodes = e.nodes + 1
      local ready, pressure = "Unknown", false
      for _, c in ipairs(n.status.conditions or {}) do
        if c.type == "Ready" then ready = c.status elseif c.status == "True" then pressure = true end
      end
      local hl = l["sagemaker.amazonaws.com/node-health-status"]
      local h
      if hl == "Unschedulable" or ready == "False" then h = "failed"
      elseif hl and hl:find("Pending", 1, true) then h = "degraded"
      elseif ready == "Unknown" then h = "unknown"
      elseif pressure then h = "degraded"
      else h = "healthy" end
      e.health[h] = e.health[h] + 1
      local alloc = tonumber((n.status.allocatable or {})[GPU] or 0)
      local g = e.groups[grp] or { nodes = 0, allocatable = 0, requested = 0 }
      g.nodes, g.allocatable, g.requested = g.nodes + 1, g.allocatable + alloc, g.requested + (req[n.metadata.name] or 0)
      e.groups[grp] = g
    end
  end
  return e
end

local function compare(out, e, what)
  t.eq(out.nodes.total, e.nodes, what .. ": nodes")
  t.eq(json.encode(out.nodes.by_health), json.encode(e.health), what .. ": nodes by health")
  local groups = {}
  for _, g in ipairs(out.instance_groups) do
    groups[g.name] = { nodes = g.nodes, allocatable = g.gpu.allocatable, requested = g.gpu.requested }
  end
  t.eq(json.encode(groups), json.encode(e.groups), what .. ": GPUs per instance group")
  t.eq(out.pods.total, e.pods, what .. ": pods")
  for phase, n in pairs(e.phases) do t.eq(out.pods.by_phase[phase], n, what .. ": pods " .. phase) end
  t.eq(out.pending.pods, e.pending_pods, what .. ": pending pods")
  t.eq(out.pending.gpus, e.pending_gpus, what .. ": pending GPUs")
end

-- stable(fn) -> fn()'s answer once the sandbox did not change while it ran
local function stable(fn)
  for _ = 1, 10 do
    local before = cl.rv
    local out = fn()
    if cl.rv == before then return out end
    task.sleep(1)
  end
  error("the sandbox kept changing", 0)
end

t.test("a HyperPod cluster with mixed groups, failed, degraded and unknown nodes, running and pending GPU pods",
  function()
    S = C.here()
    S.build("mon-eks", "mon-hp")
    cl = skube.cluster("us-west-2", "mon-eks")
    assert(cl:create(r("namespaces"), { metadata = { name = "train" } }))
    node("ext-failed", "False")
    node("ext-degraded", "True", { { type = "MemoryPressure", status = "True", reason = "KubeletHasInsufficientMemory",
      message = "kubelet has insufficient memory available" } })
    node("ext-unknown", "Unknown")
    for i = 1, 2 do pod("train", "run-" .. i, 2, { ["sagemaker.amazonaws.com/instance-group-name"] = "gpu" }) end
    for i = 1, 3 do pod("train", "big-" .. i, 64, { ["sagemaker.amazonaws.com/instance-group-name"] = "gpu" }) end
    for i = 1, 4 do pod("default", "web-" .. i, 0) end
    -- let the scheduler and the kubelet place what fits
    task.sleep(30)
    local running = 0
    for _, p in ipairs(cl:list(r("pods"), "train")) do
      if p.status and p.status.phase == "Running" then running = running + 1 end
    end
    t.eq(running, 2, "the two small GPU pods run")
  end)

t.test("the first answer's counts equal the sandbox's own", function()
  if not cl then return skip() end
  local out = stable(call)
  t.eq(out.cache.state, "cold", "the first call built the cache")
  compare(out, expected(), "whole cluster")
  t.eq(out.nodes.items[1].health, "failed", "failed nodes come first")
  t.eq(out.nodes.items[1].name, "ext-failed")
  t.like(out.nodes.items[1].message or "", "PLEG", "with the condition's message")
  t.eq(out.pending.items[1].gpus, 64, "pending GPU pods first")
  t.ok(out.pending.items[1].reason, "with the scheduler's reason")
  t.eq(out.gpus.pending, 192, "192 GPUs asked for and unplaceable")
  local gpu
  for _, g in ipairs(out.instance_groups) do if g.name == "gpu" then gpu = g end end
  t.eq(gpu.gpu.pending, 192, "the pending demand is the gpu group's (its nodeSelector)")
  t.ok(gpu.gpu.capacity > 0 and gpu.gpu.free == gpu.gpu.allocatable - gpu.gpu.requested, "free = allocatable - requested")
  t.eq(out.utilisation, nil, "no DCGM exporter: no utilisation")
  t.like(out.utilisation_absent or "", "dcgm%-exporter", "and the answer says why")
  t.ok(#out.history >= 1, "a GPU allocation sample")
  stop_cache()
end)

t.test("a second call answers from the cache: no list request", function()
  if not cl then return skip() end
  t.eq(call().cache.state, "cold", "the first call builds the cache")
  local lists = kcache.stats().lists
  local out = stable(call)
  t.eq(kcache.stats().lists, lists, "no new list")
  t.eq(out.cache.state, "warm")
  compare(out, expected(), "cached")
  stop_cache()
end)

t.test("filters: namespace and instance group", function()
  if not cl then return skip() end
  local out = stable(function() return call { namespace = "train" } end)
  compare(out, expected { namespace = "train" }, "namespace train")
  for _, e in ipairs(out.events) do t.eq(e.namespace, "train", "events of the namespace only") end
  out = stable(function() return call { instance_group = "gpu" } end)
  compare(out, expected { instance_group = "gpu" }, "instance group gpu")
  for _, n in ipairs(out.nodes.items) do t.eq(n.instance_group, "gpu") end
  local _, err = dispatch.call("monitor_get_cluster", { namespace = "Not_A_Namespace" }, OPER)
  t.like(err and err.message or "", "namespace", "a bad namespace is refused naming the field")
  stop_cache()
end)

t.test("wait_seconds answers at a change", function()
  if not cl then return skip() end
  local got
  local w = task.spawn(function() got = call { wait_seconds = 120 } end)
  task.sleep(2)
  pod("train", "late", 64, { ["sagemaker.amazonaws.com/instance-group-name"] = "gpu" })
  w:wait()
  t.ok(got, "answered")
  t.eq(got.waited and got.waited.ended, "changed", "at the change")
  t.ok(got.waited.seconds < 60, "long before the time was up")
  local found = false
  for _, p in ipairs(got.pending.items) do found = found or p.name == "late" end
  t.ok(found, "with the new pending pod")
  stop_cache()
end)

t.test("a 410 Gone relists: what was deleted during the gap is gone", function()
  if not cl then return skip() end
  local before = call()
  local lists = kcache.stats().lists
  local ring = objects.RING
  objects.RING = 5
  -- the deletion and enough changes to push it out of the ring, with no
  -- yield between them: the cache's watches wake to a resourceVersion the
  -- ring no longer has
  assert(cl:delete(r("pods"), "train", "big-1"))
  for i = 1, 20 do assert(cl:create(r("configmaps"), { metadata = { name = "fill-" .. i, namespace = "train" } })) end
  objects.RING = ring
  local out = call { wait_seconds = 60 }
  for _ = 1, 10 do
    if kcache.stats().lists > lists then break end
    out = call { wait_seconds = 30 }
  end
  t.ok(kcache.stats().lists > lists, "the cache listed again")
  local seen = false
  for _, p in ipairs(out.pending.items) do seen = seen or p.name == "big-1" end
  t.ok(not seen, "the pod deleted during the gap is gone")
  t.eq(out.pending.pods, before.pending.pods - 1)
  compare(stable(call), expected(), "after the relist")
  stop_cache()
end)

t.test("the cache stops", function()
  if not cl then return skip() end
  kcache.stop_all()
  t.eq(kcache.stats().caches, 0)
end)
