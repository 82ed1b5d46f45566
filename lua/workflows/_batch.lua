-- _batch: what the batch/v1 Job tools share (model_download,
-- job_get_status, job_list): a Job's phase from its conditions and counts,
-- its pods (by the controller-uid label the Job controller sets), its
-- recent events and last log lines, and the short view job_list gives.
local M = {}

M.MANAGED_BY = "app.kubernetes.io/managed-by"
M.KIND_LABEL = "hypd.io/job-kind"          -- model-download, ...
M.API = "batch/v1"

M.NAME = { type = "string", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
  pattern_help = "a Kubernetes name: lowercase letters, digits and '-', starting and ending with a letter or digit",
  description = "the Job's name" }
M.NAMESPACE = { type = "string", default = "default", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
  pattern_help = "a Kubernetes namespace name", description = "the Job's namespace" }

local function missing(err)
  return type(err) == "table" and (err.code == "NotFound" or err.status == 404)
end

local function is_true(conds, ctype)
  for _, c in ipairs(conds or {}) do
    if c.type == ctype and c.status == "True" then return c end
  end
end

-- phase(job) -> Pending | Running | Succeeded | Failed, and the condition
-- that ended it (reason, message)
function M.phase(job)
  local st = job.status or {}
  local c = is_true(st.conditions, "Complete")
  if c then return "Succeeded", c end
  c = is_true(st.conditions, "Failed")
  if c then return "Failed", c end
  -- active pods of which one is ready (started): Running; else they wait
  if (tonumber(st.active) or 0) > 0 and (tonumber(st.ready) or 0) > 0 then return "Running" end
  return "Pending"
end

M.DONE = { Succeeded = true, Failed = true }

-- find(conn, name, ns) -> the Job | nil
function M.find(conn, name, ns)
  local o, err = conn:get(M.API, "Job", name, { namespace = ns })
  if o then return o end
  if missing(err) then return nil end
  error(err, 0)
end

-- pods(conn, job) -> the Job's pods, oldest first
function M.pods(conn, job)
  local ns, uid = job.metadata.namespace, job.metadata.uid
  local items = conn:list("v1", "Pod", { namespace = ns, labels = { ["batch.kubernetes.io/controller-uid"] = uid } })
    or {}
  if #items == 0 then
    for _, p in ipairs(conn:list("v1", "Pod", { namespace = ns }) or {}) do
      for _, r in ipairs(p.metadata.ownerReferences or {}) do
        if r.uid == uid then items[#items + 1] = p end
      end
    end
  end
  table.sort(items, function(a, b)
    return tostring(a.metadata.creationTimestamp) .. a.metadata.name < tostring(b.metadata.creationTimestamp) ..
      b.metadata.name
  end)
  return items
end

-- pod_phase(pod) -> the pod's phase, with the waiting or terminated reason
-- of its first container that has one
function M.pod_state(pod)
  local ps = pod.status or {}
  for _, cs in ipairs(ps.containerStatuses or {}) do
    local s = cs.state or {}
    if s.waiting then return s.waiting.reason, s.waiting.message end
    if s.terminated then return s.terminated.reason, s.terminated.message, s.terminated.exitCode end
  end
  return ps.reason, ps.message
end

-- log_lines(conn, pod, tail) -> lines | nil, error message
function M.log_lines(conn, pod, tail)
  local text, err = conn:logs(pod.metadata.name, { namespace = pod.metadata.namespace, tail = tail })
  if not text then return nil, tostring(err and err.message or err) end
  local lines = hypd.json.array()
  for line in tostring(text):gmatch("[^\n]+") do lines[#lines + 1] = line end
  return lines
end

-- events(conn, job, pod_names, limit) -> the newest events of the Job and its pods
function M.events(conn, job, pod_names, limit)
  local ns, uid = job.metadata.namespace, job.metadata.uid
  local pods = {}
  for _, n in ipairs(pod_names) do pods[n] = true end
  local out = hypd.json.array()
  for _, ev in ipairs(conn:list("v1", "Event", { namespace = ns }) or {}) do
    local io = ev.involvedObject or {}
    if io.uid == uid or (io.kind == "Job" and io.name == job.metadata.name) or (io.kind == "Pod" and pods[io.name]) then
      out[#out + 1] = { type = ev.type, reason = ev.reason, message = ev.message,
        object = tostring(io.kind) .. "/" .. tostring(io.name),
        time = ev.lastTimestamp or ev.eventTime or (ev.metadata or {}).creationTimestamp }
    end
  end
  table.sort(out, function(a, b) return tostring(a.time) < tostring(b.time) end)
  while #out > limit do table.remove(out, 1) end
  return out
end

local function epoch(ts)
  local y, mo, d, h, mi, s = tostring(ts):match("^(%d+)-(%d+)-(%d+)T(%d+):(%d+):(%d+)")
  if not y then return nil end
  -- days from civil (Howard Hinnant's algorithm), UTC
  y, mo, d = tonumber(y), tonumber(mo), tonumber(d)
  y = mo <= 2 and y - 1 or y
  local era = (y >= 0 and y or y - 399) // 400
  local yoe = y - era * 400
  local doy = (153 * (mo + (mo > 2 and -3 or 9)) + 2) // 5 + d - 1
  local doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return (era * 146097 + doe - 719468) * 86400 + tonumber(h) * 3600 + tonumber(mi) * 60 + tonumber(s)
end
M.epoch = epoch

-- age(ts) -> "42s", "5m", "3h", "2d" since ts
function M.age(ts)
  local t = epoch(ts)
  if not t then return nil end
  local s = math.max(0, math.floor(hypd.now() - t))
  if s < 120 then return s .. "s" end
  if s < 7200 then return (s // 60) .. "m" end
  if s < 2 * 86400 then return (s // 3600) .. "h" end
  return (s // 86400) .. "d"
end

-- summary(job) -> what job_list shows of a Job
function M.summary(job)
  local md, st = job.metadata, job.status or {}
  local ann = md.annotations or {}
  local phase, cond = M.phase(job)
  return { name = md.name, namespace = md.namespace, kind = (md.labels or {})[M.KIND_LABEL] or "job", phase = phase,
    reason = cond and cond.reason or nil, active = tonumber(st.active) or 0, succeeded = tonumber(st.succeeded) or 0,
    failed = tonumber(st.failed) or 0, created = md.creationTimestamp, age = M.age(md.creationTimestamp),
    start_time = st.startTime, completion_time = st.completionTime, model_id = ann["hypd.io/model-id"],
    destination = ann["hypd.io/destination"] }
end

return M
