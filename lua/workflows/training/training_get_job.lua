-- training_get_job: a training job as it is now: phase, replicas, restarts
-- used of its budget, its pods and their nodes, recent events and the last
-- log lines of its pods; with wait_seconds, first waits for the phase (or
-- the restart count) to change.
local P = require "_params"
local J = require "_training_jobs"
local ML = require "training._mlflow"
local MX = require "training._metrics"
local hp = require "_hyperpod"
local R = require "_running"
local W = require "_wait"

local NAME = { type = "string", required = true, pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
  pattern_help = "a Kubernetes name", description = "the job's name (its recipe's job_name)" }
local NS = { type = "string", default = "default", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
  pattern_help = "a Kubernetes namespace name", description = "the job's namespace" }

local function view(conn, p)
  local job = J.find(conn, p.name, p.namespace)
  if not job then
    hypd.errors.refuse("name", "exists", "no training job " .. p.namespace .. "/" .. p.name ..
      " (training_list_jobs lists them)", { code = "NOT_FOUND", field_message = "name: no such job" })
  end
  local s = J.summary(job)
  local st = job.status or {}
  s.restarts_left = math.max(0, s.max_retries - s.restarts)
  s.conditions = st.conditions or hypd.json.array()
  s.faulty = st.latestFaultyPodInstanceList
  if job.kind == "RayJob" then
    s.ray = { job_status = st.jobStatus, deployment_status = st.jobDeploymentStatus, job_id = st.jobId,
      ray_cluster = st.rayClusterName, dashboard = st.dashboardURL, reason = st.reason, message = st.message,
      succeeded = st.succeeded, failed = st.failed, start_time = st.startTime, end_time = st.endTime }
  end
  s.pods = hypd.json.array()
  for _, pod in ipairs(J.pods(conn, job)) do
    local ps = pod.status or {}
    local restarts = 0
    for _, cs in ipairs(ps.containerStatuses or {}) do restarts = restarts + (tonumber(cs.restartCount) or 0) end
    local l = pod.metadata.labels or {}
    local row = { name = pod.metadata.name, phase = ps.phase, node = pod.spec.nodeName, restarts = restarts,
      role = l["ray.io/node-type"] or (l["ray.io/originated-from-crd"] and "submitter") or nil }
    local text, err = conn:logs(pod.metadata.name, { namespace = pod.metadata.namespace, tail = p.tail_lines })
    if text then
      local lines = hypd.json.array()
      for line in tostring(text):gmatch("[^\n]+") do lines[#lines + 1] = line end
      row.logs = lines
    else
      row.logs_error = tostring(err and err.message or err)
    end
    s.pods[#s.pods + 1] = row
  end
  local events = hypd.json.array()
  local uid = job.metadata.uid
  for _, ev in ipairs(conn:list("v1", "Event", { namespace = p.namespace }) or {}) do
    local io = ev.involvedObject or {}
    local mine = io.uid == uid or (io.kind == job.kind and io.name == p.name)
    if not mine and io.kind == "Pod" then
      for _, pod in ipairs(s.pods) do if pod.name == io.name then mine = true end end
    end
    if mine then
      events[#events + 1] = { type = ev.type, reason = ev.reason, message = ev.message, object = io.kind .. "/" ..
        tostring(io.name), time = ev.lastTimestamp or ev.eventTime or (ev.metadata or {}).creationTimestamp }
    end
  end
  table.sort(events, function(a, b) return tostring(a.time) < tostring(b.time) end)
  local rules = ((job.spec or {}).runPolicy or {}).logMonitoringConfiguration
  if type(rules) == "table" and #rules > 0 then
    -- which rule fired: the operator's restart (or failure) names it
    local lm = { rules = hypd.json.array(), fired = hypd.json.array() }
    for _, r in ipairs(rules) do lm.rules[#lm.rules + 1] = r.name end
    for _, ev in ipairs(events) do
      local rule, state, why = tostring(ev.message):match("log monitoring rule (%S+) found the job (%u+) %((.*)%)")
      if rule then lm.fired[#lm.fired + 1] = { rule = rule, state = state, why = why, time = ev.time } end
    end
    s.log_monitoring = lm
  end
  while #events > p.events do table.remove(events, 1) end
  s.events = events
  return s, job
end

-- metrics(ctx, job) -> the latest MLflow metrics of a job that reports to a
-- managed tracking server (training_get_metrics has the history), or nil
local function metrics(ctx, job)
  local tr = MX.tracking(job)
  if not tr or not tostring(tr.uri):match(ML.ARN) then return nil end
  local ok, r = pcall(MX.read, ctx, ML.name_of(tr.uri), tr.experiment, tr.run, 1)
  if not ok then
    return { tracking_uri = tr.uri, error = tostring(type(r) == "table" and (r.message or r.code) or r) }
  end
  local out = { tracking_uri = tr.uri, experiment = tr.experiment, message = r.message, latest = r.latest,
    run = r.run and { id = r.run.id, name = r.run.name, status = r.run.status, attempts = r.run.attempts } or nil }
  for _, k in ipairs { "loss", "throughput" } do
    if r[k] then out[k] = { key = r[k].key, value = r[k].latest, step = r[k].step, unit = r[k].unit } end
  end
  return out
end

return tool {
  name = "training_get_job",
  summary = "A training job now: phase, replicas, restarts used of the budget, pods, nodes, events, last log lines",
  description = "Reads a training job (HyperPodPyTorchJob or RayJob) of the active (or named) cluster: its phase " ..
    "(Pending, Created, Running, Restarting, Completed, Failed), replicas, restarts used of its recovery budget " ..
    "(runPolicy.jobMaxRetryCount) and the pod at fault of the last restart, its pods with their nodes and " ..
    "phases, the recent events of the job and its pods, and the last log lines of each pod (tail_lines). " ..
    "With wait_seconds it first waits up to that long for the phase or restart count to change, so an agent " ..
    "follows a job submitted with training_submit with a few calls. A job that reports to a managed MLflow " ..
    "server also shows its run and latest loss and throughput (mlflow; training_get_metrics has the history).",
  kind = "read",
  aws = { "eks:DescribeCluster", table.unpack(MX.ACTIONS) },
  k8s = { "get", "list", "logs" },
  params = P.form({ "name" },
    { "events", "tail_lines", "namespace", "cluster", "region", "wait_seconds" },
    { name = NAME, namespace = NS, cluster = P.cluster, region = P.region, wait_seconds = P.wait_seconds,
    tail_lines = { type = "integer", default = 20, minimum = 0, maximum = 1000,
      description = "the last log lines shown per pod" },
    events = { type = "integer", default = 20, minimum = 0, maximum = 200, description = "the newest events shown" } },
    { name = "Job" }),
  run = function(ctx, p)
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    local target = string.format("training/%s/%s/%s/%s", e.region, e.name, p.namespace, p.name)
    -- read() -> the job now and the operation at work on it (training_submit,
    -- training_delete_job); before a submit made the job, the operation alone
    local job
    local function read()
      local op = R.on(target)
      local ok, s, j = pcall(view, conn, p)
      if not ok then
        if not (op and type(s) == "table" and s.code == "NOT_FOUND") then error(s, 0) end
        s, j = { name = p.name, namespace = p.namespace, exists = false }, nil
      end
      s.operation, job = op, j
      return s
    end
    local function sig(x)
      return (x.exists == false and "absent" or (tostring(x.phase) .. "/" .. tostring(x.restarts))) .. " " ..
        R.signature(x.operation)
    end
    -- a job that runs moves on by itself: only a finished one (or none, with
    -- nothing at work on it) is settled
    local s, waited = W.follow(p.wait_seconds, { read = read, signature = sig,
      quick = function() return R.fingerprint(target) end,
      settled = function(x) return not x.operation and (x.exists == false or J.DONE[x.phase] == true) end })
    if waited then s.waited, s.changed = waited, waited.ended == "changed" end
    if job then s.mlflow = metrics(ctx, job) end
    s.cluster, s.region = e.name, e.region
    return s
  end,
}
