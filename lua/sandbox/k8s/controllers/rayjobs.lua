-- sandbox.k8s.controllers.rayjobs: the KubeRay operator's RayCluster and
-- RayJob (ray.io/v1), as KubeRay 1.x reconciles them, while the ray.io CRDs
-- are served and a KubeRay operator pod (image .../kuberay/operator:...) is
-- Running somewhere in the cluster (nothing reconciles Ray objects before).
--
-- RayCluster <rc>: a head Service <rc>-head-svc (headless, ports gcs 6379,
-- dashboard 8265, client 10001, metrics 8080), a head pod <rc>-head-XXXXX
-- and, per workerGroupSpecs[i], `replicas` (clamped to min/maxReplicas) pods
-- <rc>-<group>-worker-XXXXX; the Ray container runs `ray start ... --block`
-- (KubeRay's command); labels ray.io/cluster, ray.io/node-type, ray.io/group,
-- ray.io/is-ray-node, ray.io/identifier. A failed pod is deleted and made
-- again. status.state is "ready" once every pod runs (conditions
-- HeadPodReady, RayClusterProvisioned; ready/desired/min/max worker
-- replicas; desiredCPU/GPU/Memory; head podIP/serviceIP; endpoints).
--
-- RayJob <job>: jobDeploymentStatus "" -> Initializing (jobId <job>-XXXXX,
-- a RayCluster <job>-XXXXX owned by the job, the job's head Service
-- <job>-head-svc, dashboardURL) -> Running once the cluster is ready (the
-- submitter batch/v1 Job <job>, container ray-job-submitter, the head's
-- image, `ray job submit --no-wait --submission-id <jobId> -- <entrypoint>;
-- ray job logs --follow`, backoffLimit 2) -> Complete when the Ray job
-- ended SUCCEEDED, Failed (reason AppFailed) when it ended FAILED and the
-- retries (spec.backoffLimit; each retry a new cluster, deployment status
-- Retrying, status.failed counting) are used up. jobStatus follows the Ray
-- job: PENDING while the submitter starts, RUNNING while it follows the
-- logs, SUCCEEDED or FAILED as the entrypoint ended (the submitter's exit
-- code: what the programs ray_submit decides). activeDeadlineSeconds fails
-- it (DeadlineExceeded). A Ray node that dies mid-run (its pod failed with
-- its node) fails the Ray job (FAILED, AppFailed), which is then retried as
-- above on a new cluster. With shutdownAfterJobFinishes the RayCluster is
-- deleted ttlSecondsAfterFinished after endTime; the submitter Job and its
-- pod (the entrypoint's output) stay, as with KubeRay.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local kubelet = require "sandbox.k8s.controllers.kubelet"
local tbl = require "sandbox.k8s.table"

local M = {}
M.GROUP, M.VERSION = "ray.io", "v1"
M.OPERATOR_IMAGE = "kuberay/operator"

local key = ctl_.key

local function rand5()
  local a = "bcdfghjklmnpqrstvwxz2456789"
  local out = {}
  for i = 1, 5 do
    local d = math.random(1, #a)
    out[i] = a:sub(d, d)
  end
  return table.concat(out)
end

-- operator(ctl) -> true while a KubeRay operator pod is Running
function M.operator(ctl)
  for _, p in ipairs(ctl.cl:list(ctl:r("", "v1", "pods"))) do
    if ctl_.phase(p) == "Running" then
      for _, c in ipairs(p.spec.containers or {}) do
        if tostring(c.image or ""):find(M.OPERATOR_IMAGE, 1, true) then return true end
      end
    end
  end
  return false
end

-- ray_start(params, head, address) -> KubeRay's `ray start` line
local function ray_start(params, head, address)
  local keys = {}
  for k in pairs(params or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  local parts = { "ulimit -n 65536; ray start" }
  parts[#parts + 1] = head and "--head" or ("--address=" .. address)
  for _, k in ipairs(keys) do parts[#parts + 1] = "--" .. k .. "=" .. tostring(params[k]) end
  parts[#parts + 1] = "--block"
  parts[#parts + 1] = "--metrics-export-port=8080"
  parts[#parts + 1] = "--dashboard-agent-listen-port=52365"
  return table.concat(parts, " ")
end

-- ray_pod(rc, tpl, group, head) -> a new Ray pod of the cluster
local function ray_pod(rc, tpl, group, params, head)
  local name = rc.metadata.name
  local ntype = head and "head" or "worker"
  local labels = { ["ray.io/cluster"] = name, ["ray.io/node-type"] = ntype, ["ray.io/group"] = group,
    ["ray.io/is-ray-node"] = "yes", ["ray.io/identifier"] = name .. "-" .. ntype,
    ["app.kubernetes.io/name"] = "kuberay", ["app.kubernetes.io/created-by"] = "kuberay-operator" }
  local prefix = head and (name .. "-head-") or (name .. "-" .. group .. "-worker-")
  local p = ctl_.pod(rc, tpl or {}, prefix, labels, true)
  local c = (p.spec.containers or {})[1]
  local svc = name .. "-head-svc." .. rc.metadata.namespace .. ".svc.cluster.local"
  if c then
    c.command = { "/bin/bash", "-lc", "--" }
    c.args = { ray_start(params, head, svc .. ":6379") }
    c.env = c.env or {}
    for _, e in ipairs { { name = "RAY_CLUSTER_NAME", value = name }, { name = "RAY_CLOUD_INSTANCE_ID",
      valueFrom = { fieldRef = { fieldPath = "metadata.name" } } }, { name = "RAY_NODE_TYPE_NAME", value = group },
      { name = "KUBERAY_GEN_RAY_START_CMD", value = c.args[1] }, { name = "RAY_PORT", value = "6379" },
      { name = "RAY_ADDRESS", value = head and "127.0.0.1:6379" or (svc .. ":6379") },
      { name = "RAY_USAGE_STATS_KUBERAY_IN_USE", value = "1" } } do
      c.env[#c.env + 1] = e
    end
  end
  if not head then
    p.spec.initContainers = { { name = "wait-gcs-ready", image = c and c.image, command = { "/bin/bash", "-lc", "--" },
      args = { "until ray health-check --address " .. svc .. ":6379 > /dev/null 2>&1; do echo wait for GCS " ..
        "to be ready; sleep 5; done" } } }
  end
  return p
end

local function head_service(owner, name, selector_cluster, labels)
  return { apiVersion = "v1", kind = "Service",
    metadata = { name = name, namespace = owner.metadata.namespace, labels = labels,
      ownerReferences = { ctl_.owner_ref(owner) } },
    spec = { clusterIP = "None", selector = { ["ray.io/cluster"] = selector_cluster, ["ray.io/node-type"] = "head" },
      ports = { { name = "gcs-server", port = 6379, protocol = "TCP", targetPort = 6379 },
        { name = "dashboard", port = 8265, protocol = "TCP", targetPort = 8265 },
        { name = "client", port = 10001, protocol = "TCP", targetPort = 10001 },
        { name = "metrics", port = 8080, protocol = "TCP", targetPort = 8080 } } } }
end

-- quantity(n, cpu) -> n as the API server prints a quantity: "2", "500m", "4Gi", "200Mi"
local function quantity(n, cpu)
  if cpu then
    if math.abs(n - math.floor(n + 0.5)) < 1e-9 then return tostring(math.floor(n + 0.5)) end
    return string.format("%dm", math.floor(n * 1000 + 0.5))
  end
  for _, u in ipairs { { "Ti", 1024 ^ 4 }, { "Gi", 1024 ^ 3 }, { "Mi", 1024 ^ 2 }, { "Ki", 1024 } } do
    if n >= u[2] and n % u[2] == 0 then return string.format("%d%s", n // u[2], u[1]) end
  end
  return tostring(math.floor(n + 0.5))
end

local function sum_requests(pods, res)
  local n = 0
  for _, p in ipairs(pods) do
    for _, c in ipairs(p.spec.containers or {}) do
      local r = (c.resources or {}).requests or (c.resources or {}).limits or {}
      n = n + ctl_.quantity(r[res])
    end
  end
  return n
end

-- RayCluster ---------------------------------------------------------------

ctl_.handlers.raycluster = function(ctl, k)
  local r = ctl:r(M.GROUP, M.VERSION, "rayclusters")
  if not r or not M.operator(ctl) then return end
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local rc = cl:get(r, ns, name)
  if not rc then return end
  local spec = rc.spec or {}
  local pr, sr = ctl:r("", "v1", "pods"), ctl:r("", "v1", "services")
  local svc_name = name .. "-head-svc"
  local svc = cl:get(sr, ns, svc_name)
  if not svc then
    svc = cl:create(sr, head_service(rc, svc_name, name, { ["ray.io/cluster"] = name,
      ["ray.io/node-type"] = "head", ["ray.io/identifier"] = name .. "-head",
      ["app.kubernetes.io/name"] = "kuberay", ["app.kubernetes.io/created-by"] = "kuberay-operator" }))
  end
  local groups = { { name = "headgroup", head = true, want = 1, spec = spec.headGroupSpec or {} } }
  for _, g in ipairs(spec.workerGroupSpecs or {}) do
    local want = tonumber(g.replicas) or tonumber(g.minReplicas) or 0
    if g.minReplicas then want = math.max(want, tonumber(g.minReplicas)) end
    if g.maxReplicas then want = math.min(want, tonumber(g.maxReplicas)) end
    if g.suspend then want = 0 end
    groups[#groups + 1] = { name = g.groupName or "workers", want = want, spec = g, min = tonumber(g.minReplicas) or 0,
      max = tonumber(g.maxReplicas) or want }
  end
  local all, ready_workers, head_pod, head_ready, desired, minw, maxw = {}, 0, nil, false, 0, 0, 0
  for _, g in ipairs(groups) do
    local live = {}
    for _, p in ipairs(ctl_.children(ctl, pr, rc)) do
      local l = p.metadata.labels or {}
      if l["ray.io/group"] == g.name and not p.metadata.deletionTimestamp then
        if ctl_.phase(p) == "Failed" or ctl_.phase(p) == "Succeeded" then
          -- KubeRay deletes a Ray pod that ended and makes a new one; the
          -- Ray job running on the cluster loses that node's actors
          ctl:memo("raycluster_lost")[k] = string.format("the Ray node in pod %s (node %s) died: %s", p.metadata.name,
            tostring(p.spec.nodeName), tostring((p.status or {}).reason or ctl_.phase(p)))
          cl:delete(pr, ns, p.metadata.name)
          ctl_.event(ctl, rc, "Normal", "Deleted", "Deleted pod " .. ns .. "/" .. p.metadata.name, "raycluster-controller")
        else
          live[#live + 1] = p
        end
      end
    end
    for _ = #live + 1, g.want do
      local p = cl:create(pr, ray_pod(rc, g.spec.template, g.name, g.spec.rayStartParams, g.head))
      if p then
        live[#live + 1] = p
        ctl_.event(ctl, rc, "Normal", "Created", string.format("Created %s Pod %s/%s", g.head and "head" or "worker",
          ns, p.metadata.name), "raycluster-controller")
      end
    end
    for i = #live, g.want + 1, -1 do
      cl:delete(pr, ns, live[i].metadata.name)
      live[i] = nil
    end
    for _, p in ipairs(live) do
      all[#all + 1] = p
      local running = ctl_.phase(p) == "Running"
      if g.head then head_pod, head_ready = p, running
      elseif running then ready_workers = ready_workers + 1 end
    end
    if not g.head then desired, minw, maxw = desired + g.want, minw + g.min, maxw + g.max end
  end
  local st = ctl_.copy(rc.status or {})
  local ready = head_ready and ready_workers == desired
  st.desiredWorkerReplicas, st.minWorkerReplicas, st.maxWorkerReplicas = desired, minw, maxw
  st.readyWorkerReplicas, st.availableWorkerReplicas = ready_workers, ready_workers
  st.desiredCPU = quantity(sum_requests(all, "cpu"), true)
  st.desiredGPU = quantity(sum_requests(all, "nvidia.com/gpu"), true)
  st.desiredMemory = quantity(math.floor(sum_requests(all, "memory") + 0.5))
  st.desiredTPU = "0"
  st.endpoints = { ["client"] = "10001", dashboard = "8265", ["gcs-server"] = "6379", metrics = "8080" }
  st.head = { podName = head_pod and head_pod.metadata.name or nil,
    podIP = head_pod and (head_pod.status or {}).podIP or nil, serviceName = svc_name,
    -- a headless head service has no cluster IP: the head pod's is the address
    serviceIP = svc and (svc.spec or {}).clusterIP ~= "None" and svc.spec.clusterIP or
      (head_pod and (head_pod.status or {}).podIP) or nil }
  st.observedGeneration = rc.metadata.generation
  st.conditions = ctl_.set_condition(st.conditions, "HeadPodReady", head_ready and "True" or "False",
    head_ready and "HeadPodRunningAndReady" or "HeadPodNotFound", head_ready and "" or "the head pod is not ready")
  if ready or ctl_.is_true(st.conditions, "RayClusterProvisioned") then
    st.conditions = ctl_.set_condition(st.conditions, "RayClusterProvisioned", "True", "AllPodRunningAndReadyFirstTime",
      "All Ray Pods are ready for the first time")
  else
    st.conditions = ctl_.set_condition(st.conditions, "RayClusterProvisioned", "False", "RayClusterPodsProvisioning",
      "RayCluster Pods are being provisioned for first time")
  end
  local state = ready and "ready" or nil
  if st.state ~= state then
    st.state = state
    st.stateTransitionTimes = st.stateTransitionTimes or {}
    if state then st.stateTransitionTimes[state] = ctl_.stamp() end
  end
  if not ctl_.equal(rc.status, st) then st.lastUpdateTime = ctl_.stamp() end
  ctl_.put_status(ctl, r, rc, st)
end

-- RayJob -------------------------------------------------------------------

local function dashboard(job) return job.metadata.name .. "-head-svc." .. job.metadata.namespace ..
  ".svc.cluster.local:8265" end

-- submit_command(job, st) -> the submitter's shell line (KubeRay's BuildJobSubmitCommand, K8sJobMode)
local function submit_command(job, st)
  local addr = "http://" .. st.dashboardURL
  local entry = tostring((job.spec or {}).entrypoint or ""):gsub("^%s+", ""):gsub("%s+$", "")
  return table.concat({ "until python -c \"import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('" ..
    addr .. "/api/gcs_healthz', timeout=5).status == 200 else 1)\" >/dev/null 2>&1 ; do echo \"Waiting for Ray " ..
    "Dashboard GCS to become healthy at " .. addr .. " ...\" ; sleep 2 ; done ;",
    "if ! ray job status --address " .. addr .. " " .. st.jobId .. " >/dev/null 2>&1 ; then",
    "ray job submit --address " .. addr .. " --no-wait --submission-id " .. st.jobId .. " -- " .. entry .. " ;",
    "fi ; ray job logs --address " .. addr .. " --follow " .. st.jobId }, " ")
end

local function submitter(job, rc, st)
  local spec = job.spec or {}
  local head = ((((rc.spec or {}).headGroupSpec or {}).template or {}).spec or {}).containers or {}
  local tpl = spec.submitterPodTemplate and ctl_.copy(spec.submitterPodTemplate) or {
    spec = { restartPolicy = "Never", containers = { { name = "ray-job-submitter", image = head[1] and head[1].image,
      resources = { limits = { cpu = "1", memory = "1Gi" }, requests = { cpu = "500m", memory = "200Mi" } } } } } }
  local c = tpl.spec.containers[1]
  c.command = { "/bin/bash", "-ce", "--" }
  c.args = { submit_command(job, st) }
  c.env = c.env or {}
  c.env[#c.env + 1] = { name = "PYTHONUNBUFFERED", value = "1" }
  c.env[#c.env + 1] = { name = "RAY_DASHBOARD_ADDRESS", value = st.dashboardURL }
  c.env[#c.env + 1] = { name = "RAY_JOB_SUBMISSION_ID", value = st.jobId }
  local labels = { ["ray.io/originated-from-crd"] = "RayJob", ["ray.io/originated-from-cr-name"] = job.metadata.name,
    ["app.kubernetes.io/created-by"] = "kuberay-operator" }
  tpl.metadata = tpl.metadata or {}
  tpl.metadata.labels = tpl.metadata.labels or {}
  for k, v in pairs(labels) do tpl.metadata.labels[k] = v end
  local backoff = tonumber(((spec.submitterConfig or {}).backoffLimit)) or 2
  return { apiVersion = "batch/v1", kind = "Job",
    metadata = { name = job.metadata.name, namespace = job.metadata.namespace, labels = labels,
      ownerReferences = { ctl_.owner_ref(job) } },
    spec = { backoffLimit = backoff, template = tpl } }
end

-- the submitter Job's pods, the newest last
local function submitter_pods(ctl, sj)
  local out = ctl_.children(ctl, ctl:r("", "v1", "pods"), sj)
  table.sort(out, function(a, b) return tostring(a.metadata.creationTimestamp) < tostring(b.metadata.creationTimestamp) end)
  return out
end

local function finish(ctl, job, st, dstatus, reason, message)
  st.jobDeploymentStatus = dstatus
  st.reason, st.message = reason, message
  st.endTime = ctl_.stamp()
  st.rayJobInfo = st.rayJobInfo or {}
  st.rayJobInfo.endTime = st.endTime
  ctl_.event(ctl, job, dstatus == "Complete" and "Normal" or "Warning", dstatus == "Complete" and "Completed" or
    "Failed", message, "rayjob-controller")
end

ctl_.handlers.rayjob = function(ctl, k)
  local r = ctl:r(M.GROUP, M.VERSION, "rayjobs")
  local rcr = ctl:r(M.GROUP, M.VERSION, "rayclusters")
  if not r or not rcr or not M.operator(ctl) then return end
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local job = cl:get(r, ns, name)
  if not job or job.metadata.deletionTimestamp then return end
  local spec = job.spec or {}
  local st = ctl_.copy(job.status or {})
  local jr, sr = ctl:r("batch", "v1", "jobs"), ctl:r("", "v1", "services")
  local ds = st.jobDeploymentStatus or ""
  local now = core.now()
  if ds == "" or ds == "New" then
    st.jobId = spec.jobId or (name .. "-" .. rand5())
    st.rayClusterName = name .. "-" .. rand5()
    st.dashboardURL = dashboard(job)
    st.startTime = st.startTime or ctl_.stamp()
    st.jobDeploymentStatus, st.jobStatus = "Initializing", nil
    st.reason, st.message, st.endTime, st.rayJobInfo = nil, nil, nil, nil
    st.failed, st.succeeded = st.failed or 0, st.succeeded or 0
    st.observedGeneration = job.metadata.generation
    local rcs = ctl_.copy(spec.rayClusterSpec or {})
    local rc = cl:create(rcr, { apiVersion = "ray.io/v1", kind = "RayCluster",
      metadata = { name = st.rayClusterName, namespace = ns, labels = { ["ray.io/originated-from-crd"] = "RayJob",
        ["ray.io/originated-from-cr-name"] = name, ["app.kubernetes.io/created-by"] = "kuberay-operator" },
        ownerReferences = { ctl_.owner_ref(job) } }, spec = rcs })
    if rc then
      ctl_.event(ctl, job, "Normal", "Created", "Created RayCluster " .. ns .. "/" .. st.rayClusterName,
        "rayjob-controller")
    end
    if not cl:get(sr, ns, name .. "-head-svc") then
      cl:create(sr, head_service(job, name .. "-head-svc", st.rayClusterName, {
        ["ray.io/originated-from-cr-name"] = name, ["ray.io/originated-from-crd"] = "RayJob",
        ["ray.io/node-type"] = "head", ["ray.io/identifier"] = name .. "-head" }))
    end
    ctl_.put_status(ctl, r, job, st)
    return
  end
  local rc = st.rayClusterName and cl:get(rcr, ns, st.rayClusterName)
  if rc then st.rayClusterStatus = ctl_.copy(rc.status or {}) end
  local deadline = tonumber(spec.activeDeadlineSeconds)
  local started = tbl.epoch(st.startTime) or now
  if (ds == "Initializing" or ds == "Running") and deadline and now >= started + deadline / ctl_.speed() then
    finish(ctl, job, st, "Failed", "DeadlineExceeded", string.format("The RayJob has passed the " ..
      "activeDeadlineSeconds. DeadlineSeconds: %d", deadline))
    st.failed = (st.failed or 0) + 1
    ds = "Failed"
  elseif deadline and (ds == "Initializing" or ds == "Running") then
    ctl:at(started + deadline / ctl_.speed(), "rayjob", k)
  end
  if ds == "Initializing" then
    if rc and (rc.status or {}).state == "ready" then
      local sj = cl:get(jr, ns, name) or cl:create(jr, submitter(job, rc, st))
      if sj then
        ctl_.event(ctl, job, "Normal", "Created", "Created Kubernetes Job " .. ns .. "/" .. name, "rayjob-controller")
        st.jobDeploymentStatus, st.jobStatus = "Running", "PENDING"
        st.rayJobInfo = {}
      end
    end
  elseif ds == "Running" then
    local sj = cl:get(jr, ns, name)
    local pods = sj and submitter_pods(ctl, sj) or {}
    local last = pods[#pods]
    local ended
    for _, p in ipairs(pods) do
      if ctl_.phase(p) == "Succeeded" or ctl_.phase(p) == "Failed" then ended = ended or p end
    end
    local lost_memo = ctl:memo("raycluster_lost")
    local lost = st.rayClusterName and lost_memo[ns .. "/" .. st.rayClusterName]
    if lost and not ended and last then
      -- a node of the cluster died mid-run: the driver fails (Ray Train is not
      -- fault tolerant unless the job makes it so), and with it the submitter
      lost_memo[ns .. "/" .. st.rayClusterName] = nil
      local pr = ctl:r("", "v1", "pods")
      for _, p in ipairs(pods) do
        if not ctl_.finished(p) then kubelet.stop(ctl, pr, p, "Failed", 1, "Error") end
      end
      st.jobStatus = "FAILED"
      st.failed = (st.failed or 0) + 1
      finish(ctl, job, st, "Failed", "AppFailed", "Job failed: " .. lost)
      ds = st.jobDeploymentStatus
    elseif ended then
      -- the Ray job ended with the entrypoint (its exit code is the submitter's)
      local ok = ctl_.phase(ended) == "Succeeded"
      st.jobStatus = ok and "SUCCEEDED" or "FAILED"
      if ok then
        st.succeeded = (st.succeeded or 0) + 1
        finish(ctl, job, st, "Complete", nil, "Job finished successfully.")
      else
        local code = "1"
        for _, cs in ipairs((ended.status or {}).containerStatuses or {}) do
          code = tostring(((cs.state or {}).terminated or {}).exitCode or code)
        end
        st.failed = (st.failed or 0) + 1
        finish(ctl, job, st, "Failed", "AppFailed", "Job entrypoint command failed with exit code " .. code)
      end
      ds = st.jobDeploymentStatus
    elseif last and ctl_.phase(last) == "Running" then
      if st.jobStatus ~= "RUNNING" then
        st.jobStatus = "RUNNING"
        st.rayJobInfo = { startTime = ctl_.stamp() }
      end
    end
  end
  if ds == "Failed" and st.reason ~= "DeadlineExceeded" and (st.failed or 0) < (tonumber(spec.backoffLimit) or 0) + 1 then
    -- a retry: a new cluster and submitter (KubeRay's Retrying, then New)
    ctl_.event(ctl, job, "Normal", "Retrying", string.format("Retrying the RayJob (%d of %d)", st.failed,
      tonumber(spec.backoffLimit) or 0), "rayjob-controller")
    if rc then cl:delete(rcr, ns, rc.metadata.name) end
    if cl:get(jr, ns, name) then cl:delete(jr, ns, name, { propagation = "Background" }) end
    st.jobDeploymentStatus, st.rayClusterName, st.jobId, st.jobStatus = "New", nil, nil, nil
    st.rayClusterStatus = nil
    ctl_.put_status(ctl, r, job, st)
    return ctl:after(1, "rayjob", k)
  end
  if (ds == "Complete" or ds == "Failed") and spec.shutdownAfterJobFinishes and rc then
    local ended = tbl.epoch(st.endTime) or now
    local at = ended + (tonumber(spec.ttlSecondsAfterFinished) or 0) / ctl_.speed()
    if now >= at then
      cl:delete(rcr, ns, rc.metadata.name)
      ctl_.event(ctl, job, "Normal", "Deleted", "Deleted RayCluster " .. ns .. "/" .. rc.metadata.name,
        "rayjob-controller")
    else
      ctl:at(at, "rayjob", k)
    end
  end
  ctl_.put_status(ctl, r, job, st)
end

local function enqueue_all(ctl)
  for _, plural in ipairs { "rayclusters", "rayjobs" } do
    local r = ctl:r(M.GROUP, M.VERSION, plural)
    if r then
      for _, o in ipairs(ctl.cl:list(r)) do ctl:enqueue(plural == "rayjobs" and "rayjob" or "raycluster", key(o)) end
    end
  end
end

local function is_operator(pod)
  for _, c in ipairs((pod.spec or {}).containers or {}) do
    if tostring(c.image or ""):find(M.OPERATOR_IMAGE, 1, true) then return true end
  end
end

function M.watch(ctl, etype, r, obj)
  if r.group == M.GROUP and r.kind == "RayJob" then
    if etype ~= "DELETED" then ctl:enqueue("rayjob", key(obj)) end
  elseif r.group == M.GROUP and r.kind == "RayCluster" then
    if etype ~= "DELETED" then ctl:enqueue("raycluster", key(obj)) end
    local o = ctl_.owner(obj, "RayJob")
    if o then ctl:enqueue("rayjob", obj.metadata.namespace .. "/" .. o.name) end
  elseif r.group == "batch" and r.kind == "Job" then
    local o = ctl_.owner(obj, "RayJob")
    if o then ctl:enqueue("rayjob", obj.metadata.namespace .. "/" .. o.name) end
  elseif r.group == "" and r.kind == "Pod" then
    local l = obj.metadata.labels or {}
    if l["ray.io/cluster"] then ctl:enqueue("raycluster", obj.metadata.namespace .. "/" .. l["ray.io/cluster"]) end
    local from = l["ray.io/originated-from-cr-name"]
    if from and l["ray.io/originated-from-crd"] == "RayJob" then
      ctl:enqueue("rayjob", obj.metadata.namespace .. "/" .. from)
    end
    if is_operator(obj) then enqueue_all(ctl) end
  elseif r.group == "apiextensions.k8s.io" and r.kind == "CustomResourceDefinition" then
    enqueue_all(ctl)
  end
end

function M.start(ctl) enqueue_all(ctl) end

return M
