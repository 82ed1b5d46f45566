-- jobs/_logs: the pods of a workload and their logs, for job_get_logs (and,
-- through that tool, hypd's live log streams over /ws).
--
--   connect(ctx, e) -> the connection to the EKS cluster e (hp.eks), kept a while
--   resolve(conn, kind, name, ns) -> {kind, name, phase, finished, pods}
--     kind: training_job (HyperPodPyTorchJob or RayJob: pods labelled
--     HPJob=<name> as the HyperPod training operator labels them, or
--     ray.io/cluster, or owned by the job), job (a batch Job: its selector,
--     controller-uid, else job-name), deployment (its selector), inference
--     (pods labelled hypd.io/inference=<name>) or pod; raises NOT_FOUND
--   containers(pod) -> { {name, state = running|waiting|terminated, reason} }
--   parse(line) -> time, text: a line of a log read with timestamps=true
--   key(time) -> a string that sorts as the time does (RFC 3339, 9 digits)
local J = require "_training_jobs"

local M = {}
M.KINDS = { "training_job", "job", "deployment", "inference", "pod" }
M.INFERENCE = "hypd.io/inference"

-- connect(ctx, e) -> the cluster's connection, kept CONN_TTL seconds: a
-- live follow resolves its pods every few seconds, and each new
-- connection would describe the EKS cluster again (the token is made per
-- request in C, so a kept connection stays valid); forget(e) drops it
M.CONN_TTL = 300
local conns = {}
function M.connect(ctx, e)
  local k = e.name .. "|" .. tostring(e.region)
  local c = conns[k]
  if c and hypd.now() - c.at < M.CONN_TTL then return c.conn end
  local conn = ctx:k8s(e.name)
  conns[k] = { conn = conn, at = hypd.now() }
  return conn
end
function M.forget(e) conns[e.name .. "|" .. tostring(e.region)] = nil end

local function missing(err)
  return type(err) == "table" and (err.code == "NotFound" or err.status == 404)
end

local function not_found(kind, ns, name, hint)
  hypd.errors.refuse("name", "exists", string.format("no %s %s/%s%s", (kind:gsub("_", " ")), ns, name, hint or ""),
    { code = "NOT_FOUND", field_message = "name: no such " .. kind })
end

local function get(conn, api, kind, name, ns)
  local o, err = conn:get(api, kind, name, { namespace = ns })
  if o then return o end
  if missing(err) then return nil end
  error(err, 0)
end

local function list(conn, ns, labels)
  local items, err = conn:list("v1", "Pod", { namespace = ns, labels = labels })
  if not items then error(err, 0) end
  return items
end

-- selector(label_selector) -> the labelSelector text of a LabelSelector
function M.selector(sel)
  local out = {}
  local keys = {}
  for k in pairs((sel or {}).matchLabels or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do out[#out + 1] = k .. "=" .. sel.matchLabels[k] end
  for _, e in ipairs((sel or {}).matchExpressions or {}) do
    local op = e.operator
    if op == "In" or op == "NotIn" then
      out[#out + 1] = string.format("%s %s (%s)", e.key, op:lower(), table.concat(e.values or {}, ","))
    elseif op == "Exists" then out[#out + 1] = e.key
    elseif op == "DoesNotExist" then out[#out + 1] = "!" .. e.key end
  end
  return table.concat(out, ",")
end

local function cond(o, t)
  for _, c in ipairs(((o or {}).status or {}).conditions or {}) do
    if c.type == t and c.status == "True" then return true end
  end
  return false
end

local function deployment_phase(d)
  local st = d.status or {}
  local want = tonumber((d.spec or {}).replicas) or 1
  return string.format("%d/%d ready", tonumber(st.readyReplicas) or 0, want)
end

local RESOLVE = {}

function RESOLVE.training_job(conn, name, ns)
  local job = J.find(conn, name, ns)
  if not job then not_found("training_job", ns, name, " (training_list_jobs lists them)") end
  local phase = J.phase(job)
  return { phase = phase, finished = J.DONE[phase] == true, pods = J.pods(conn, job) }
end

function RESOLVE.job(conn, name, ns)
  local job = get(conn, "batch/v1", "Job", name, ns)
  if not job then not_found("job", ns, name, " (job_list lists them)") end
  local sel = (job.spec or {}).selector
  local labels = sel and M.selector(sel) or nil
  if not labels or labels == "" then labels = { ["job-name"] = name } end
  local st = job.status or {}
  local phase = cond(job, "Complete") and "Complete" or cond(job, "Failed") and "Failed" or
    (job.spec or {}).suspend and "Suspended" or ((tonumber(st.active) or 0) > 0 and "Running" or "Pending")
  return { phase = phase, finished = phase == "Complete" or phase == "Failed", pods = list(conn, ns, labels) }
end

function RESOLVE.deployment(conn, name, ns)
  local d = get(conn, "apps/v1", "Deployment", name, ns)
  if not d then not_found("deployment", ns, name) end
  return { phase = deployment_phase(d), finished = false, pods = list(conn, ns, M.selector((d.spec or {}).selector)) }
end

function RESOLVE.inference(conn, name, ns)
  local pods = list(conn, ns, { [M.INFERENCE] = name })
  local ds, err = conn:list("apps/v1", "Deployment", { namespace = ns, labels = { [M.INFERENCE] = name } })
  if not ds then error(err, 0) end
  if #pods == 0 and #ds == 0 then not_found("inference", ns, name, " (inference_list lists them)") end
  local phase = ds[1] and deployment_phase(ds[1]) or "Running"
  return { phase = phase, finished = false, pods = pods }
end

function RESOLVE.pod(conn, name, ns)
  local pod = get(conn, "v1", "Pod", name, ns)
  if not pod then not_found("pod", ns, name) end
  local phase = (pod.status or {}).phase or "Pending"
  return { phase = phase, finished = phase == "Succeeded" or phase == "Failed", pods = { pod } }
end

function M.resolve(conn, kind, name, ns)
  local r = RESOLVE[kind](conn, name, ns)
  table.sort(r.pods, function(a, b)
    local ta, tb = a.metadata.creationTimestamp or "", b.metadata.creationTimestamp or ""
    if ta ~= tb then return ta < tb end
    return a.metadata.name < b.metadata.name
  end)
  r.kind, r.name = kind, name
  return r
end

-- containers(pod) -> the pod's containers with their state (waiting while
-- the kubelet has not started them)
function M.containers(pod)
  local st = {}
  for _, s in ipairs((pod.status or {}).containerStatuses or {}) do st[s.name] = s end
  local out = {}
  for _, c in ipairs((pod.spec or {}).containers or {}) do
    local s = st[c.name] and st[c.name].state or {}
    local row = { name = c.name, state = "waiting", reason = "ContainerCreating" }
    if s.running then row.state, row.reason = "running", nil
    elseif s.terminated then row.state, row.reason = "terminated", s.terminated.reason
    elseif s.waiting then row.reason = s.waiting.reason or row.reason end
    if not (pod.spec or {}).nodeName or pod.spec.nodeName == "" then row.reason = "Unschedulable (not on a node yet)" end
    out[#out + 1] = row
  end
  return out
end

function M.parse(line) return hypd.k8s.log_line(line) end
function M.key(ts) return hypd.k8s.time_key(ts) end

return M
