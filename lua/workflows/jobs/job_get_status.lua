-- job_get_status: a batch/v1 Job as it is now (phase, times, counts, its
-- pods and their nodes, recent events, the last log lines) and, for a model
-- download, the files it wrote to the S3 storage; with wait_seconds, first
-- waits for the phase to change. model_download's status tool: it also
-- takes the operation_id model_download answered.
local P = require "_params"
local B = require "jobs._batch"
local D = require "jobs._download"
local S = require "storage._storage"
local hp = require "hyperpod._hp"

local function fail(code, field, rule, msg)
  hypd.errors.raise(code, msg, { fields = { { field = field, rule = rule, message = field .. ": " .. msg } } })
end

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
    fail("NOT_FOUND", "name", "exists", "no Job " .. ns .. "/" .. name .. " (job_list lists hypd's Jobs; a finished " ..
      "download is deleted a day after it ends)")
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
  if not ok or not v then fail("NOT_FOUND", "operation_id", "exists", "no operation " .. id) end
  local st = hypd.operations.state(id) or {}
  local d = st.d or {}
  local args = v.params or {}
  local name = d.name or (v.result or {}).name or args.name or
    (type(args.model_id) == "string" and D.default_name(args.model_id))
  if not name then fail("NOT_FOUND", "operation_id", "job", "operation " .. id .. " names no Job") end
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
  params = { name = P.with(B.NAME, { description = "the Job's name (model_download's name)" }),
    namespace = B.NAMESPACE, operation_id = P.operation_id, cluster = P.cluster, region = P.region,
    wait_seconds = P.wait_seconds,
    tail_lines = { type = "integer", default = 20, minimum = 0, maximum = 1000,
      description = "the last log lines shown per pod" },
    events = { type = "integer", default = 20, minimum = 0, maximum = 200, description = "the newest events shown" } },
  check = function(p)
    if not p.name and not p.operation_id then
      fail("VALIDATION", "name", "required", "give name (the Job's) or operation_id (model_download's)")
    end
  end,
  run = function(ctx, p)
    local name, ns, opv = p.name, p.namespace, nil
    if not name then name, ns, opv = from_operation(p.operation_id) end
    local e = hp.eks(ctx, p)
    local conn = ctx:k8s(e.name)
    if opv and opv.status ~= "succeeded" and opv.status ~= "failed" and not B.find(conn, name, ns) then
      -- the operation has not made its Job yet
      return { cluster = e.name, region = e.region, name = name, namespace = ns, phase = "Pending",
        operation = { id = opv.operation_id, status = opv.status, phase = opv.phase } }
    end
    local s = view(conn, p, name, ns)
    if p.wait_seconds > 0 and not B.DONE[s.phase] then
      local before, deadline = s.phase, hypd.now() + p.wait_seconds
      local first = true
      ctx:poll { what = "the Job's phase to change", every = math.min(5, p.wait_seconds),
        timeout = p.wait_seconds + 5, phase = false,
        check = function()
          if first then first = false; return false, "the Job is " .. s.phase end
          local job = B.find(conn, name, ns)
          local now = job and B.phase(job) or "gone"
          return now ~= before or hypd.now() >= deadline
        end }
      local ok, after = pcall(view, conn, p, name, ns)
      if ok then
        after.changed = after.phase ~= before
        s = after
      else
        s.phase, s.changed = "Deleted", true
      end
    end
    if opv then s.operation = { id = opv.operation_id, status = opv.status, error = opv.error } end
    s.cluster, s.region = e.name, e.region
    return s
  end,
}
