-- job_get_status: a batch/v1 Job as it is now (phase, times, counts, its
-- pods and their nodes, recent events, the last log lines) and, for a model
-- download, the files it wrote to the S3 storage; with wait_seconds, first
-- waits for the phase to change. model_download's status tool: it also
-- takes the operation_id model_download answered.
local P = require "_params"
local B = require "_batch"
local D = require "jobs._download"
local S = require "_storage"
local hp = require "_hyperpod"
local R = require "_running"
local W = require "_wait"

-- written(conn, job) -> what a model download wrote, read from its storage
local function written(conn, job)
  local ann = job.metadata.annotations or {}
  local claim, dest = ann[D.ANN.claim], ann[D.ANN.destination]
  if not claim or not dest then return nil end
  local out = { model_id = ann[D.ANN.model], revision = ann[D.ANN.revision], claim_name = claim, destination = dest,
    path = D.MOUNT .. "/" .. dest }
  local pvc = S.get(conn, "v1", "PersistentVolumeClaim", claim, job.metadata.namespace)
  local pv = pvc and pvc.spec.volumeName and S.get(conn, "v1", "PersistentVolume", pvc.spec.volumeName)
  if not pv or S.kind_of(pv) ~= "s3" then
    out.error = "claim " .. claim .. " is gone or not an S3 storage"
    return out
  end
  local bucket = pv.spec.csi.volumeAttributes.bucketName
  local key = (S.mount_option(pv, "prefix") or "") .. dest .. "/"
  local ok, w = pcall(D.written, bucket, S.mount_option(pv, "region"), key)
  out.s3_uri = "s3://" .. bucket .. "/" .. key
  if ok then
    out.files, out.bytes, out.truncated = w.files, w.bytes, w.truncated
  else
    out.error = tostring(type(w) == "table" and w.message or w)
  end
  return out
end

local function view(conn, p, name, ns)
  local job = B.find(conn, name, ns)
  if not job then
    hypd.errors.refuse("name", "exists", "no Job " .. ns .. "/" .. name .. " (job_list lists hypd's Jobs; a finished " ..
      "download is deleted a day after it ends)", { code = "NOT_FOUND", prefix = "field" })
  end
  local s = B.summary(job)
  local st = job.status or {}
  local _, cond = B.phase(job)
  s.message = cond and cond.message or nil
  s.conditions = st.conditions or hypd.json.array()
  s.backoff_limit, s.active_deadline_seconds = job.spec.backoffLimit, job.spec.activeDeadlineSeconds
  s.ttl_seconds_after_finished = job.spec.ttlSecondsAfterFinished
  s.pods = hypd.json.array()
  local names = {}
  for _, pod in ipairs(B.pods(conn, job)) do
    local ps = pod.status or {}
    local reason, message, code = B.pod_state(pod)
    local row = { name = pod.metadata.name, phase = ps.phase, node = pod.spec.nodeName, reason = reason,
      message = message, exit_code = code, start_time = ps.startTime }
    local lines, err = B.log_lines(conn, pod, p.tail_lines)
    if lines then row.logs = lines else row.logs_error = err end
    s.pods[#s.pods + 1] = row
    names[#names + 1] = pod.metadata.name
  end
  s.events = B.events(conn, job, names, p.events)
  if s.kind == D.KIND then
    local w = written(conn, job)
    if w then
      local pods = B.pods(conn, job)
      local last = pods[#pods]
      w.progress = D.progress(last and B.log_lines(conn, last, 60) or {}, s.phase)
      s.download = w
    end
  end
  return s
end

-- from_operation(id) -> name, namespace of the Job a model_download operation made
local function from_operation(id)
  local ok, v = pcall(hypd.operations.get, id)
  if not ok or not v then
    hypd.errors.refuse("operation_id", "exists", "no operation " .. id, { code = "NOT_FOUND", prefix = "field" })
  end
  local st = hypd.operations.state(id) or {}
  local d = st.d or {}
  local args = v.params or {}
  local name = d.name or (v.result or {}).name or args.name or
    (type(args.model_id) == "string" and D.default_name(args.model_id))
  if not name then
    hypd.errors.refuse("operation_id", "job", "operation " .. id .. " names no Job", { code = "NOT_FOUND", prefix = "field" })
  end
  return name, d.namespace or args.namespace or "default", v
end

return tool {
  name = "job_get_status",
  summary = "A Kubernetes Job now: phase, times, counts, pods and nodes, events, last log lines, files a download wrote",
  description = "Reads a batch/v1 Job of the active (or named) cluster by name (or by the operation_id " ..
    "model_download answered): its phase (Pending, Running, Succeeded, Failed) and the reason it ended, start " ..
    "and completion times, active/succeeded/failed pod counts, its pods with node, phase, exit code and the last " ..
    "log lines (tail_lines), the recent events of the Job and its pods, and for a model download the files it " ..
    "wrote under its folder of the S3 storage (key, size). With wait_seconds it first waits up to that long for " ..
    "the phase to change, so an agent follows a download with a few calls.",
  kind = "read",
  aws = { "eks:DescribeCluster", "s3:ListObjectsV2" },
  k8s = { "get", "list", "logs" },
  params = P.form({},
    { "name", "events", "operation_id", "tail_lines", "namespace", "cluster", "region", "wait_seconds" },
    { name = P.with(B.NAME, { description = "the Job's name (model_download's name)" }),
    namespace = B.NAMESPACE, operation_id = P.operation_id, cluster = P.cluster, region = P.region,
    wait_seconds = P.wait_seconds,
    tail_lines = { type = "integer", default = 20, minimum = 0, maximum = 1000,
      description = "the last log lines shown per pod" },
    events = { type = "integer", default = 20, minimum = 0, maximum = 200, description = "the newest events shown" } },
    { name = "Job" }),
  validate = function(p)
    if not p.name and not p.operation_id then
      hypd.errors.refuse("name", "required", "give name (the Job's) or operation_id (model_download's)", { prefix = "field" })
    end
  end,
  run = function(ctx, p)
    local name, ns, opv = p.name, p.namespace, nil
    if not name then name, ns, opv = from_operation(p.operation_id) end
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    local target = "jobs/" .. e.region .. "/" .. e.name .. "/" .. ns .. "/" .. name
    -- read() -> the Job now and the operation at work on it (model_download,
    -- job_delete); before the operation made its Job, phase Pending
    local function read()
      local op = R.on(target)
      if opv then opv = hypd.operations.get(opv.operation_id) or opv end
      local at_work = op or (opv and opv.status == "running" and R.short(R.top(opv)))
      local s
      if not B.find(conn, name, ns) and (at_work or (opv and opv.status ~= "succeeded" and opv.status ~= "failed")) then
        s = { name = name, namespace = ns, phase = "Pending", exists = false }
      else
        local ok, v = pcall(view, conn, p, name, ns)
        if not ok then
          if not (type(v) == "table" and v.code == "NOT_FOUND") or (opv == nil and not at_work) then error(v, 0) end
          v = { name = name, namespace = ns, phase = "Deleted" }
        end
        s = v
      end
      if at_work then
        s.operation = at_work
        s.operation.id = at_work.operation_id
      elseif opv then
        s.operation = { id = opv.operation_id, operation_id = opv.operation_id, tool = opv.tool,
          status = opv.status, phase = opv.phase, error = opv.error }
      end
      return s
    end
    local s, waited = W.follow(p.wait_seconds, { read = read,
      quick = function() return R.fingerprint(target, { opv and opv.operation_id }) end,
      settled = function(x)
        return not (x.operation and x.operation.status == "running") and (B.DONE[x.phase] or x.phase == "Deleted")
      end,
      signature = function(x)
        return tostring(x.phase) .. " " .. R.signature(x.operation and x.operation.status == "running" and x.operation)
      end })
    if waited then s.waited, s.changed = waited, waited.ended == "changed" end
    s.cluster, s.region = e.name, e.region
    return s
  end,
}
