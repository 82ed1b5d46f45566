-- diagnose_training_job: why a training job hangs, restarts, fails or is
-- slow, from what the cluster says of it: the HyperPodPyTorchJob's (or
-- RayJob's, or batch Job's) status, conditions and restarts, its pods
-- (Pending with the scheduler's reason, crash loops, OOM kills, exit
-- codes), their Warning events, the nodes they run on, and their logs
-- (NCCL timeouts and warnings, EFA / libfabric errors, CUDA and XID
-- errors, a step counter that stopped, a throughput that fell). Read-only: what would change
-- something is a suggested call (diagnose._findings).
local P = require "_params"
local F = require "diagnose._findings"
local WL = require "diagnose._workloads"
local TL = require "diagnose._train_logs"
local J = require "_training_jobs"
local B = require "_batch"
local hp = require "_hyperpod"

local LOG_PODS = 16     -- pods whose logs are read
local LOG_TAIL = 1000   -- lines of each
local STALL_MIN = 300   -- seconds without a step line before a running job counts as stalled
local STALL_TIMES = 10  -- ... or this many times its usual step interval, when longer

local K8S_NAME = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

local function jobs_kind(job) return job.kind == "Job" and "job" or "training_job" end

-- inspect(s, job) -> the steps every finding starts with
local function inspect(s, job)
  local n, ns = job.metadata.name, job.metadata.namespace
  return WL.list(
    WL.step("inspect", "job_get_logs", s, { kind = jobs_kind(job), name = n, namespace = ns, tail = 200 },
      "the last lines of every pod"),
    job.kind == "Job" and WL.step("inspect", "job_get_status", s, { name = n, namespace = ns }, "the Job's status") or
      WL.step("inspect", "training_get_job", s, { name = n, namespace = ns }, "phase, restarts, pods and events"))
end

local with = WL.with

-- status(r, job, s, steps, events): the job object's own findings
local function status(r, job, s, steps, events)
  local src = job.kind .. "/" .. job.metadata.name
  local st = job.status or {}
  local failed = WL.cond(job, "Failed")
  if job.kind == "RayJob" and (st.jobStatus == "FAILED" or st.jobDeploymentStatus == "Failed") then
    failed = { status = "True", reason = st.reason or st.jobStatus, message = st.message }
  end
  if failed and failed.status == "True" then
    r:add { severity = "critical", code = "JOB_FAILED", subject = "job " .. job.metadata.name,
      summary = "the job failed", evidence = { F.evidence(src .. " condition Failed", tostring(failed.reason) .. ": " ..
        tostring(failed.message), failed.lastTransitionTime) },
      explanation = "The job ended Failed: it used its restart budget (or its backoffLimit) on the fault quoted; " ..
        "the other findings say what the fault was.", next = steps }
  end
  local restarts = job.kind == "Job" and (tonumber(st.failed) or 0) or J.restarts(job)
  if restarts > 0 and not (failed and failed.status == "True") then
    local ev = { F.evidence(src .. (job.kind == "Job" and " status.failed" or " status.restartCount"),
      string.format("%d of %d", restarts, job.kind == "Job" and (tonumber((job.spec or {}).backoffLimit) or 6) or
        J.budget(job))) }
    local rc = WL.cond(job, "Restarting")
    if rc and rc.message then ev[#ev + 1] = F.evidence(src .. " condition Restarting", rc.message, rc.lastTransitionTime) end
    for _, e in ipairs(events) do
      if e.reason == "JobRestarting" and #ev < WL.MAX_EVIDENCE then ev[#ev + 1] = WL.event_evidence(e) end
    end
    local next = steps
    local faulty = st.latestFaultyPodInstanceList
    local id = faulty and (faulty.faultyInstanceIdList or {})[1]
    if id and tostring(id):match("^i%-%x+$") then
      ev[#ev + 1] = F.evidence(src .. " status.latestFaultyPodInstanceList", faulty)
      next = with(steps, WL.node_steps(s, "hyperpod-" .. id, "the node of the pod at fault of the last restart"))
    end
    r:add { severity = "warning", code = "JOB_RESTARTED", subject = "job " .. job.metadata.name,
      summary = string.format("the job restarted %d time(s)", restarts), evidence = ev,
      explanation = "Every restart starts the job again from its last checkpoint: a pod failed, its node failed, " ..
        "or a log monitoring rule found it hanging or slow. The events and the other findings say which.",
      next = next }
  end
  r:checked("job status", string.format("%s %s: phase %s, %d restart(s)", job.kind, job.metadata.name,
    job.kind == "Job" and B.phase(job) or J.phase(job), restarts))
end

-- logs(r, conn, job, pods, s, steps): the log lines' findings and a stall
local function logs(r, conn, job, pods, s, steps)
  local hits, newest, every, read, running, errs = {}, nil, nil, 0, 0, 0
  local slowest = {} -- the pod with the most throughput numbers
  local started
  for _, pod in ipairs(pods) do
    local ps = pod.status or {}
    if ps.phase == "Running" then running = running + 1 end
    if read < LOG_PODS and (ps.phase == "Running" or ps.phase == "Failed" or ps.phase == "Succeeded") then
      read = read + 1
      local text = conn:logs(pod.metadata.name, { namespace = pod.metadata.namespace, tail = LOG_TAIL,
        timestamps = true, container = ((pod.spec.containers or {})[1] or {}).name })
      if not text then errs = errs + 1 end
      local lines = {}
      for line in tostring(text or ""):gmatch("[^\n]+") do lines[#lines + 1] = line end
      local scan = TL.scan(lines)
      if #scan.tputs > #(slowest.tputs or {}) then slowest = { tputs = scan.tputs, pod = pod.metadata.name } end
      for code, list in pairs(scan.hits) do
        hits[code] = hits[code] or {}
        for _, h in ipairs(list) do
          h.pod, h.node = pod.metadata.name, pod.spec.nodeName
          local hl = hits[code]
          hl[#hl + 1] = h
        end
      end
      if ps.phase == "Running" then
        if scan.last_step and scan.last_step.t and (not newest or scan.last_step.t > newest.t) then
          newest = scan.last_step
          newest.pod = pod.metadata.name
        end
        every = every or scan.every
        if scan.first_t and (not started or scan.first_t < started) then started = scan.first_t end
      end
    end
  end
  for _, pat in ipairs(TL.PATTERNS) do
    local list = hits[pat.code]
    if list then
      table.sort(list, function(a, b) return tostring(a.at) < tostring(b.at) end)
      local ev, pods_hit, seen = {}, {}, {}
      for _, h in ipairs(list) do
        if not seen[h.pod] then seen[h.pod] = true; pods_hit[#pods_hit + 1] = h.pod end
        if #ev < WL.MAX_EVIDENCE then ev[#ev + 1] = F.evidence("Pod/" .. h.pod .. " log", h.line, h.at) end
      end
      local next = with(steps)
      local node = list[1].node
      if node and pat.code ~= "NCCL_WARN" then
        -- the node of the first line: an NCCL timeout's first reporter is
        -- near the rank that stopped; XID, EFA and CUDA errors are the node's
        local ns = WL.node_steps(s, node, "the node whose pod printed the first such line")
        if pat.code == "NCCL_TIMEOUT" or pat.code == "CUDA_OOM" then ns = { ns[1] } end
        next = with(next, ns)
      end
      r:add { severity = pat.severity, code = pat.code, subject = #pods_hit == 1 and "pod " .. pods_hit[1] or
        string.format("%d pods of job %s", #pods_hit, job.metadata.name), summary = pat.summary,
        evidence = ev, explanation = pat.explanation, next = next }
    end
  end
  -- a throughput that fell to a fraction of what it was
  local early, late, first, last = TL.slowdown(slowest.tputs or {})
  if early then
    r:add { severity = "warning", code = "TRAINING_SLOW", subject = "job " .. job.metadata.name,
      summary = string.format("the throughput fell from %.1f to %.1f", early, late), evidence = {
        F.evidence("Pod/" .. slowest.pod .. " log (first slow step)", first.line, first.at),
        F.evidence("Pod/" .. slowest.pod .. " log (last step)", last.line, last.at),
        F.evidence("diagnose_training_job", string.format("median throughput %.1f over the first third of the " ..
          "steps read, %.1f over the last %d", early, late, TL.RECENT)) },
      explanation = "Every rank waits for the slowest at each collective: one degraded GPU (thermal or power " ..
        "throttling, ECC retirements), an EFA link falling back to sockets, or a busy node slows the whole job. " ..
        "NCCL WARN or EFA findings, and the node health of the job's nodes, point to which.",
      next = steps }
  end
  -- a step counter that stopped while the pods run
  local now = hypd.now()
  local limit = math.max(STALL_MIN, STALL_TIMES * (every or 0))
  local phase = job.kind == "Job" and B.phase(job) or J.phase(job)
  if running > 0 and running == #pods and (phase == "Running" or job.kind == "Job") then
    if newest and now - newest.t > limit then
      r:add { severity = "critical", code = "TRAINING_STALLED", subject = "job " .. job.metadata.name,
        summary = string.format("no training step for %d s while the pods run", math.floor(now - newest.t)),
        evidence = { F.evidence("Pod/" .. newest.pod .. " log (last step line)", newest.line, newest.at),
          F.evidence("diagnose_training_job", string.format("%d s since that line; steps came every %s s; the " ..
            "limit is %d s", math.floor(now - newest.t), every and string.format("%.1f", every) or "?", limit)) },
        explanation = "The pods run but the training makes no progress: a rank hangs in a collective (a bad " ..
          "GPU or EFA device, a dead peer), the data loader is stuck, or a checkpoint write blocks. The " ..
          "other findings and the last lines of every rank say which.", next = steps }
    elseif not newest and started and now - started > limit then
      r:add { severity = "critical", code = "TRAINING_STALLED", subject = "job " .. job.metadata.name,
        summary = string.format("no training step in %d s since the pods started", math.floor(now - started)),
        evidence = { F.evidence("diagnose_training_job", string.format("no step line in the last %d lines of %d " ..
          "pod(s); the first line is %d s old", LOG_TAIL, read, math.floor(now - started))) },
        explanation = "The pods run but never print a step: the ranks wait for each other at the rendezvous, " ..
          "or the setup (data, model download) hangs.", next = steps }
    end
  end
  r:checked("logs", string.format("%d pod(s), last %d lines each%s", read, LOG_TAIL,
    errs > 0 and string.format(" (%d could not be read)", errs) or ""))
end

return tool {
  name = "diagnose_training_job",
  summary = "Why a training job hangs, restarts, fails or is slow: findings with evidence and suggested calls",
  description = "Read-only diagnosis of a training job (HyperPodPyTorchJob, RayJob or batch Job): its " ..
    "status and restarts, its pods (Pending and why, crash loops, OOM kills), Warning events, the health of " ..
    "its nodes, and its logs (NCCL timeouts, EFA errors, CUDA and XID errors, stalled steps). Call it when a " ..
    "job does not progress; it runs nothing: each finding suggests the exact calls, inspect first.",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "logs" },
  params = P.form({ "job" },
    { "namespace", "cluster", "region" },
    {
    job = { type = "string", required = true, pattern = K8S_NAME, max_length = 63, pattern_help = "a Kubernetes name",
      description = "the HyperPodPyTorchJob, RayJob or batch Job name (training_list_jobs, job_list)" },
    namespace = { type = "string", default = "default", pattern = K8S_NAME, max_length = 63,
      pattern_help = "a Kubernetes namespace name", description = "the job's namespace" },
    cluster = P.cluster, region = P.region }),
  result = F.RESULT,
  run = function(ctx, p)
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    local s = WL.scope(e)
    local job, pods = J.find(conn, p.job, p.namespace), nil
    if job then
      pods = J.pods(conn, job)
    else
      job = B.find(conn, p.job, p.namespace)
      if job then job.kind, pods = "Job", B.pods(conn, job) end
    end
    if not job then
      hypd.errors.refuse("job", "exists", string.format("no HyperPodPyTorchJob, RayJob or Job %s/%s on cluster %s " ..
        "(training_list_jobs and job_list list them)", p.namespace, p.job, e.name),
        { code = "NOT_FOUND", field_message = "job: no such job" })
    end
    table.sort(pods, function(a, b) return a.metadata.name < b.metadata.name end)
    local r = F.new()
    local steps = inspect(s, job)
    local events = WL.events(conn, p.namespace, { [job.kind .. "/" .. p.job] = true }, pods)
    status(r, job, s, steps, events)
    local fix, more = WL.scale_fix(conn, s, pods)
    WL.pods(r, pods, { inspect = steps, fix = fix, evidence = more, readiness = false })
    WL.nodes(r, conn, pods, s)
    logs(r, conn, job, pods, s, steps)
    WL.other_events(r, events, { JobRestarting = true, JobFailed = true, BackoffLimitExceeded = true },
      { inspect = steps })
    return r:result()
  end,
}
