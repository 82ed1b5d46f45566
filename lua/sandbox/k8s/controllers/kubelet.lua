-- sandbox.k8s.controllers.kubelet: the kubelets of every node. A pod bound
-- to a Ready node starts after START seconds of simulated time (phase
-- Running, IPs, container statuses, the usual conditions, a few lines of
-- output derived from its image and command). Pods that run to completion
-- finish after their run time: Job pods (default JOB_SECONDS) and pods with
-- restartPolicy Never/OnFailure carrying the annotation
-- sandbox.hypd.io/run-seconds; sandbox.hypd.io/exit-code sets how they end.
-- A running pod whose node goes NotReady or away fails (NodeLost); the
-- pods of a node whose kubelet stopped (its instance stopped:
-- heartbeats.stopped) are left as they were last posted until it is back,
-- then their containers, gone with the machine's stop, start again
-- (restartCount + 1, lastState terminated Unknown 255; a restartPolicy
-- Never pod fails instead); a
-- finished pod of a ReplicaSet or DaemonSet on a node that is gone is
-- deleted (the pod garbage collector). HyperPodPyTorchJob pods are started
-- here but finished by their job (hyperpod_jobs.lua). The workload faults
-- (sandbox.faults_workloads: image_pull, pod_crash, readiness_fail) are
-- played here with the statuses, reasons and events a kubelet gives.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local heartbeats = require "sandbox.k8s.heartbeats"
local logs = require "sandbox.k8s.logs"
local probes = require "sandbox.k8s.controllers._probes"
local programs = require "sandbox.k8s.programs"
local sched = require "sandbox.k8s.controllers.scheduler"
local workloads = require "sandbox.faults_workloads"

local M = {}
M.START = 2          -- simulated seconds from binding to Running
M.JOB_SECONDS = 5    -- how long a Job's pod runs unless annotated
M.RUN = "sandbox.hypd.io/run-seconds"
M.EXIT = "sandbox.hypd.io/exit-code"

local function key(pod) return pod.metadata.namespace .. "/" .. pod.metadata.name end

-- run_seconds(pod) -> how long the pod runs before its containers exit, or
-- nil when it runs until deleted
function M.run_seconds(pod)
  if ctl_.owner(pod, "HyperPodPyTorchJob") then return nil end
  local ann = (pod.metadata.annotations or {})[M.RUN]
  local rp = pod.spec.restartPolicy or "Always"
  if rp == "Always" then return nil end
  if ann and tonumber(ann) then return tonumber(ann) end
  local prog = programs.run_seconds(pod)
  if prog then return prog end
  if ctl_.owner(pod, "Job") then return M.JOB_SECONDS end
end

local words = programs.argv

-- lines(container) -> what the container prints when it starts
function M.lines(c)
  local image = c.image or ""
  local cmd = table.concat(words(c), " ")
  local out = {}
  for text in cmd:gmatch("echo%s+([^;&|]+)") do
    out[#out + 1] = (text:gsub("%s+$", ""):gsub("^[\"'](.*)[\"']$", "%1"))
  end
  if #out > 0 then return out end
  local name = image:match("([^/:@]+)[:@]?[^/]*$") or image
  if name == "nginx" then
    return { "/docker-entrypoint.sh: Configuration complete; ready for start up",
      "2025/01/01 00:00:00 [notice] 1#1: start worker processes" }
  elseif name == "coredns" then
    return { ".:53", "[INFO] plugin/reload: Running configuration SHA512 = " .. ctl_.hash(image, 16),
      "CoreDNS-1.12.1", "linux/amd64, go1.23.6" }
  elseif name:find("vllm") or cmd:find("vllm") then
    return { "INFO: Started server process [1]", "INFO: Waiting for application startup.",
      "INFO: Application startup complete.", "INFO: Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)" }
  elseif name:find("sglang") or cmd:find("sglang") then
    return { "[INFO] server_args: host=0.0.0.0 port=30000", "[INFO] The server is fired up and ready to roll!" }
  elseif cmd:find("python") or name:find("pytorch") or name:find("python") then
    return { "Python 3.12.8 (main) [GCC 12.2.0] on linux", "running: " .. (cmd ~= "" and cmd or image) }
  end
  return { string.format("[%s] started from %s", c.name or "main", image),
    cmd ~= "" and "[" .. (c.name or "main") .. "] command: " .. cmd or nil }
end

-- pod_ip(cl, pr, node_ip) -> an address in the node's /24 that no other
-- running pod has (the VPC CNI never hands one address to two pods)
local function pod_ip(cl, pr, node_ip)
  local a, b, c = tostring(node_ip):match("^(%d+)%.(%d+)%.(%d+)%.%d+$")
  if not a then a, b, c = 10, 0, math.random(0, 255) end
  local used = {}
  for _, p in ipairs(cl:list(pr)) do
    local st = p.status or {}
    if st.podIP and st.phase ~= "Succeeded" and st.phase ~= "Failed" then used[st.podIP] = true end
  end
  local ip
  for _ = 1, 1000 do
    ip = string.format("%s.%s.%s.%d", a, b, c, math.random(4, 254))
    if not used[ip] then break end
  end
  return ip
end

local function internal_ip(node)
  for _, a in ipairs((node.status or {}).addresses or {}) do
    if a.type == "InternalIP" then return a.address end
  end
  return "10.0.0.1"
end

local function qos(pod)
  local any, guaranteed = false, true
  for _, c in ipairs(pod.spec.containers or {}) do
    local r = c.resources or {}
    if next(r.requests or {}) or next(r.limits or {}) then any = true end
    local lim = r.limits or {}
    if not lim.cpu or not lim.memory then guaranteed = false end
  end
  if not any then return "BestEffort" end
  return guaranteed and "Guaranteed" or "Burstable"
end

local function image_id(image)
  local repo = image:gsub("[:@].*$", "")
  if not repo:find("/") then repo = "docker.io/library/" .. repo end
  return repo .. "@sha256:" .. (ctl_.hash(image .. "1", 16) .. ctl_.hash(image .. "2", 16)):gsub(".", function(ch)
    return string.format("%02x", ch:byte()) end):sub(1, 64)
end

local function conditions(list, ready, reason)
  list = ctl_.set_condition(list, "PodReadyToStartContainers", ready == nil and "False" or "True")
  list = ctl_.set_condition(list, "Initialized", "True")
  list = ctl_.set_condition(list, "Ready", ready and "True" or "False", not ready and reason or nil)
  list = ctl_.set_condition(list, "ContainersReady", ready and "True" or "False", not ready and reason or nil)
  return ctl_.set_condition(list, "PodScheduled", "True")
end

-- creating(ctl, pr, pod, node): what the kubelet reports while it sets a
-- bound pod up (kubectl shows ContainerCreating): Pending, its hostIP and
-- startTime, every container waiting
local function creating(ctl, pr, pod, node)
  local st = ctl_.copy(pod.status or {})
  if st.containerStatuses then return end
  local host = internal_ip(node)
  st.hostIP, st.hostIPs = host, { { ip = host } }
  st.startTime = st.startTime or ctl_.stamp()
  st.qosClass = qos(pod)
  local cs = {}
  for i, c in ipairs(pod.spec.containers or {}) do
    cs[i] = { name = c.name, image = c.image, imageID = "", ready = false, started = false, restartCount = 0,
      state = { waiting = { reason = "ContainerCreating" } }, lastState = {} }
  end
  st.containerStatuses = cs
  st.conditions = conditions(st.conditions, nil, "ContainersNotReady")
  ctl_.put_status(ctl, pr, pod, st)
end

-- start(ctl, pr, pod, node [, restarts]) -> the pod Running (restarts: its containers' restartCount)
local function start(ctl, pr, pod, node, restarts, last)
  local now = ctl_.stamp()
  local host = internal_ip(node)
  local st = ctl_.copy(pod.status or {})
  st.phase = "Running"
  st.hostIP, st.hostIPs = host, { { ip = host } }
  st.podIP = pod.spec.hostNetwork and host or pod_ip(ctl.cl, pr, host)
  st.podIPs = { { ip = st.podIP } }
  st.startTime = st.startTime or now
  st.qosClass = qos(pod)
  local cs, all = {}, true
  local unready = workloads.match("readiness_fail", pod.metadata.namespace, pod.metadata.name)
  for i, c in ipairs(pod.spec.containers or {}) do
    -- a readiness probe the program answers decides (controllers/_probes); readiness_fail: never ready
    local ready = not probes.probed(pod, c) and not (c.readinessProbe and unready)
    all = all and ready
    cs[i] = { name = c.name, image = c.image, imageID = image_id(c.image or ""), ready = ready, started = true,
      restartCount = restarts or 0, containerID = "containerd://" .. ctl_.hex(64), state = { running = { startedAt = now } },
      lastState = last and last[c.name] or {} }
  end
  st.containerStatuses = cs
  st.conditions = conditions(st.conditions, all, "ContainersNotReady")
  if pod.spec.initContainers then
    local ics = {}
    for i, c in ipairs(pod.spec.initContainers) do
      ics[i] = { name = c.name, image = c.image, imageID = image_id(c.image or ""), ready = true, started = false,
        restartCount = 0, containerID = "containerd://" .. ctl_.hex(64),
        state = { terminated = { exitCode = 0, reason = "Completed", startedAt = now, finishedAt = now } } }
    end
    st.initContainerStatuses = ics
  end
  local cur = ctl_.put_status(ctl, pr, pod, st)
  for _, c in ipairs(pod.spec.containers or {}) do
    local field = "spec.containers{" .. c.name .. "}"
    ctl_.event(ctl, cur, "Normal", "Pulled", string.format('Container image "%s" already present on machine',
      c.image or ""), "kubelet", field)
    ctl_.event(ctl, cur, "Normal", "Created", "Created container: " .. c.name, "kubelet", field)
    ctl_.event(ctl, cur, "Normal", "Started", "Started container " .. c.name, "kubelet", field)
    for _, line in ipairs(programs.lines(cur, c) or M.lines(c)) do
      logs.append(ctl.cl, pod.metadata.namespace, pod.metadata.name, c.name, line)
    end
  end
  programs.started(ctl, cur)
  return cur
end

-- stop(ctl, pr, pod, phase, code, reason [, status_reason, message]) -> the
-- stored pod with its containers terminated
function M.stop(ctl, pr, pod, phase, code, reason, pod_reason, message)
  local now = ctl_.stamp()
  local st = ctl_.copy(pod.status or {})
  st.phase = phase
  st.reason, st.message = pod_reason, message
  st.conditions = conditions(st.conditions, false, phase == "Succeeded" and "PodCompleted" or "PodFailed")
  for _, s in ipairs(st.containerStatuses or {}) do
    local started = s.state and s.state.running and s.state.running.startedAt or now
    s.ready, s.started = false, false
    s.state = { terminated = { exitCode = code, reason = reason, startedAt = started, finishedAt = now,
      containerID = s.containerID } }
  end
  local cur = ctl_.put_status(ctl, pr, pod, st)
  logs.ended(ctl.cl, pod.metadata.namespace, pod.metadata.name)
  return cur
end

-- rebooted(ctl, pr, pod, node, down) -> the pod once its node's kubelet
-- is back after its machine stopped at `down`: its containers ended with
-- the machine and start again, as a kubelet finds them at boot; a
-- restartPolicy Never pod fails
local function rebooted(ctl, pr, pod, node, down)
  if pod.spec.restartPolicy == "Never" then return M.stop(ctl, pr, pod, "Failed", 255, "Unknown") end
  local restarts, last = 0, {}
  for _, s in ipairs((pod.status or {}).containerStatuses or {}) do
    restarts = math.max(restarts, (s.restartCount or 0) + 1)
    local started = s.state and s.state.running and s.state.running.startedAt
    last[s.name] = { terminated = { exitCode = 255, reason = "Unknown", startedAt = started,
      finishedAt = ctl_.stamp(down), containerID = s.containerID } }
  end
  return start(ctl, pr, pod, node, restarts, last)
end

local function backoff(n) return math.min(300, 10 * 2 ^ math.max(0, n - 1)) end

-- pull_failed(ctl, pr, pod, m, images) -> the engine time of the next
-- pull: the containers whose image the image_pull fault refuses wait
-- ErrImagePull on the first failure, ImagePullBackOff after, with the
-- kubelet's Failed and BackOff events
local function pull_failed(ctl, pr, pod, m, images)
  m.pulls = (m.pulls or 0) + 1
  local st = ctl_.copy(pod.status or {})
  for _, s in ipairs(st.containerStatuses or {}) do
    local image = images[s.name]
    if image then
      local msg = string.format('failed to pull and unpack image "%s": failed to resolve reference "%s": %s: not found',
        image, image, image)
      if m.pulls == 1 then
        s.state = { waiting = { reason = "ErrImagePull", message = "rpc error: code = NotFound desc = " .. msg } }
      else
        s.state = { waiting = { reason = "ImagePullBackOff", message = string.format('Back-off pulling image "%s": ' ..
          'ErrImagePull: rpc error: code = NotFound desc = %s', image, msg) } }
      end
    end
  end
  st.conditions = conditions(st.conditions, false, "ContainersNotReady")
  local cur = ctl_.put_status(ctl, pr, pod, st)
  for _, c in ipairs(pod.spec.containers or {}) do
    local image = images[c.name]
    if image then
      local field = "spec.containers{" .. c.name .. "}"
      if m.pulls == 1 then
        ctl_.event(ctl, cur, "Normal", "Pulling", string.format('Pulling image "%s"', image), "kubelet", field)
        ctl_.event(ctl, cur, "Warning", "Failed", string.format('Failed to pull image "%s": rpc error: code = ' ..
          'NotFound desc = failed to pull and unpack image "%s": failed to resolve reference "%s": %s: not found',
          image, image, image, image), "kubelet", field)
        ctl_.event(ctl, cur, "Warning", "Failed", "Error: ErrImagePull", "kubelet", field)
      else
        ctl_.event(ctl, cur, "Normal", "BackOff", string.format('Back-off pulling image "%s"', image), "kubelet", field)
        ctl_.event(ctl, cur, "Warning", "Failed", "Error: ImagePullBackOff", "kubelet", field)
      end
    end
  end
  return core.now() + backoff(m.pulls) / ctl_.speed()
end

-- refused_images(pod) -> {container = image} the image_pull fault refuses, or nil
local function refused_images(pod)
  local out
  for _, c in ipairs(pod.spec.containers or {}) do
    if workloads.image(pod.metadata.namespace, c.image or "") then
      out = out or {}
      out[c.name] = c.image
    end
  end
  return out
end

-- crashed(ctl, pr, pod, m, rule) -> the engine time of the next restart, or
-- nil when the pod failed: the pod_crash fault's containers exit at once;
-- restartPolicy Always / OnFailure restarts them with back-off
-- (CrashLoopBackOff), Never (and a HyperPodPyTorchJob's pod, which its job
-- restarts) fails the pod
local function crashed(ctl, pr, pod, m, rule)
  local code, reason = workloads.crash(rule)
  local rp = pod.spec.restartPolicy or "Always"
  if rp == "Never" or ctl_.owner(pod, "HyperPodPyTorchJob") then
    M.stop(ctl, pr, pod, "Failed", code, reason)
    return nil
  end
  m.crashes = (m.crashes or 0) + 1
  local now = ctl_.stamp()
  local st = ctl_.copy(pod.status or {})
  local names = {}
  for _, s in ipairs(st.containerStatuses or {}) do
    names[#names + 1] = s.name
    local started = s.state and s.state.running and s.state.running.startedAt or
      (s.lastState and s.lastState.terminated and s.lastState.terminated.startedAt) or now
    s.ready, s.started = false, false
    s.restartCount = m.crashes
    s.lastState = { terminated = { exitCode = code, reason = reason, startedAt = started, finishedAt = now,
      containerID = s.containerID } }
    s.state = { waiting = { reason = "CrashLoopBackOff", message = string.format("back-off %ds restarting failed " ..
      "container=%s pod=%s_%s(%s)", backoff(m.crashes), s.name, pod.metadata.name, pod.metadata.namespace,
      pod.metadata.uid) } }
  end
  st.conditions = conditions(st.conditions, false, "ContainersNotReady")
  local cur = ctl_.put_status(ctl, pr, pod, st)
  for _, n in ipairs(names) do
    ctl_.event(ctl, cur, "Warning", "BackOff", string.format("Back-off restarting failed container %s in pod %s_%s(%s)",
      n, pod.metadata.name, pod.metadata.namespace, pod.metadata.uid), "kubelet", "spec.containers{" .. n .. "}")
  end
  return core.now() + backoff(m.crashes) / ctl_.speed()
end

-- probe_failed(ctl, pod, rule) -> the engine time of the next probe: the
-- readiness_fail fault's probes fail, the Unhealthy event each period
local function probe_failed(ctl, pod, rule)
  local every
  for _, c in ipairs(pod.spec.containers or {}) do
    local probe = c.readinessProbe
    if probe then
      every = math.min(every or math.huge, tonumber(probe.periodSeconds) or 10)
      local msg = probe.httpGet and string.format("Readiness probe failed: HTTP probe failed with statuscode: %d",
        math.tointeger(rule.status) or 503) or "Readiness probe failed: "
      ctl_.event(ctl, pod, "Warning", "Unhealthy", msg, "kubelet", "spec.containers{" .. c.name .. "}")
    end
  end
  return every and core.now() + every / ctl_.speed()
end

local function gc_owner(pod)
  local o = ctl_.owner(pod)
  return o and (o.kind == "ReplicaSet" or o.kind == "DaemonSet")
end

ctl_.handlers.pod = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local pr, nr = ctl:r("", "v1", "pods"), ctl:r("", "v1", "nodes")
  local mem = ctl:memo("kubelet")
  local pod = cl:get(pr, ns, name)
  local m = mem[k]
  if not pod or (m and m.uid ~= pod.metadata.uid) then
    -- a deleted pod's output goes with it (a new pod of the same name starts clean)
    logs.forget(cl, ns, name)
    mem[k], m = nil, nil
  end
  if not pod then return end
  if not m then
    m = { uid = pod.metadata.uid }
    mem[k] = m
  end
  local node_name = pod.spec.nodeName
  if not node_name or node_name == "" then return end
  local node = cl:get(nr, nil, node_name)
  local phase = ctl_.phase(pod)
  if phase == "Succeeded" or phase == "Failed" then
    if not node and gc_owner(pod) then cl:delete(pr, ns, name) end
    return
  end
  if node and heartbeats.stopped(node) then
    m.down = m.down or (phase == "Running" and heartbeats.stopped(node)) or nil
    return -- no kubelet: nothing is posted for its pods
  end
  local ready = node and sched.node_ready(node)
  -- a pod this kubelet started or the scheduler placed fails with its node;
  -- one bound by hand to a node that does not exist is left alone
  local ours = (pod.status or {}).hostIP or ctl_.is_true((pod.status or {}).conditions, "PodScheduled")
  if not node and not ours then return end
  if not node or (not ready and phase == "Running") then
    M.stop(ctl, pr, pod, "Failed", 137, "ContainerStatusUnknown", "NodeLost",
      string.format("Node %s which was running pod %s is unresponsive", node_name, name))
    return
  end
  if not ready then return end -- a pending pod waits for its node
  if m.down and phase == "Running" then
    pod, m.down = rebooted(ctl, pr, pod, node, m.down), nil
    if ctl_.phase(pod) == "Failed" then return end
  end
  local now = core.now()
  if phase == "Pending" then
    if not m.start_at then
      m.start_at = now + M.START / ctl_.speed()
      creating(ctl, pr, pod, node)
      return ctl:at(m.start_at, "pod", k)
    end
    if now < m.start_at then return ctl:at(m.start_at, "pod", k) end
    local refused = refused_images(pod)
    if refused then
      m.start_at = pull_failed(ctl, pr, pod, m, refused)
      return ctl:at(m.start_at, "pod", k)
    end
    pod = start(ctl, pr, pod, node)
  end
  local crash = workloads.match("pod_crash", ns, name)
  if crash or m.crash_at then
    if m.crash_at and now < m.crash_at then return ctl:at(m.crash_at, "pod", k) end
    if crash then
      m.crash_at = crashed(ctl, pr, pod, m, crash)
      if m.crash_at then ctl:at(m.crash_at, "pod", k) end
      return
    end
    -- the fault is gone: the container comes back at its restart
    m.crash_at = nil
    pod = start(ctl, pr, pod, node, m.crashes)
  end
  local unready = workloads.match("readiness_fail", ns, name)
  if unready then
    if not m.probe_at or now >= m.probe_at then
      m.probe_at = probe_failed(ctl, pod, unready)
    end
    if m.probe_at then return ctl:at(m.probe_at, "pod", k) end
    return
  end
  if not ctl_.pod_ready(pod) and phase ~= "Succeeded" then
    local at
    pod, at = probes.check(ctl, pr, pod)
    if at then ctl:at(at, "pod", k) end
  end
  local run = M.run_seconds(pod)
  if not run then return end
  if not m.finish_at then
    m.finish_at = now + run / ctl_.speed()
    return ctl:at(m.finish_at, "pod", k)
  end
  if now < m.finish_at then return ctl:at(m.finish_at, "pod", k) end
  local code = tonumber((pod.metadata.annotations or {})[M.EXIT]) or programs.exit_code(pod) or 0
  M.stop(ctl, pr, pod, code == 0 and "Succeeded" or "Failed", code, code == 0 and "Completed" or "Error")
end

function M.watch(ctl, _, r, obj)
  if r.group ~= "" then return end
  if r.kind == "Pod" then
    ctl:enqueue("pod", key(obj))
  elseif r.kind == "Node" then
    local pr = ctl:r("", "v1", "pods")
    for _, p in ipairs(ctl.cl:list(pr)) do
      if p.spec and p.spec.nodeName == obj.metadata.name then ctl:enqueue("pod", key(p)) end
    end
  end
end

function M.start(ctl)
  for _, p in ipairs(ctl.cl:list(ctl:r("", "v1", "pods"))) do ctl:enqueue("pod", key(p)) end
end

return M
