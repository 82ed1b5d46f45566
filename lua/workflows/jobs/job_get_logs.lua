-- job_get_logs: the log lines of a workload's pods, read through the
-- Kubernetes API (pods/{name}/log with tailLines, sinceSeconds,
-- timestamps=true), every pod and container (or the one named) interleaved
-- by time, each line with its pod and container. For a live stream of the
-- same lines, /ws offers logs.follow (docs/api.md).
local P = require "_params"
local L = require "jobs._logs"
local hp = require "_hyperpod"

local KNAME = { type = "string", pattern = "^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$", max_length = 253,
  pattern_help = "a Kubernetes name" }

local TAIL_MAX = 5000
local BYTES_PER_CONTAINER = 1 << 20 -- limitBytes of one read
local BYTES_TOTAL = 4 << 20         -- the lines of one answer, at most

local function starting(err)
  local m = tostring(type(err) == "table" and err.message or err)
  return m:find("waiting to start", 1, true) or m:find("ContainerCreating", 1, true) or
    m:find("PodInitializing", 1, true)
end

-- one_pod(pods, p) -> {the pod p.pod names}: refused unless the workload has it
local function one_pod(pods, p)
  local names = {}
  for _, pod in ipairs(pods) do
    names[#names + 1] = pod.metadata.name
    if pod.metadata.name == p.pod then return { pod } end
  end
  hypd.errors.refuse("pod", "member", string.format("pod: %s is not a pod of %s %s (its pods: %s)", p.pod, p.kind, p.name,
    #names > 0 and table.concat(names, ", ") or "none"))
end

-- no_pods(p, r, e): the CONFLICT of a workload without pods, saying its phase
local function no_pods(p, r, e)
  -- a finished job whose pods are gone (a HyperPodPyTorchJob's cleanPodPolicy All deletes them at its end)
  local gone = r.finished and "has no pods left: it is %s and its pods were deleted when it ended%s" or
    "has no pods yet: it is %s%s"
  hypd.errors.raise("CONFLICT", string.format("%s %s/%s " .. gone, p.kind, p.namespace, p.name,
    r.phase, p.kind == "training_job" and " (training_get_job shows its events)" or ""),
    { phase = r.phase, finished = r.finished, cluster = e.name, region = e.region })
end

-- has_container(pods, p): refused unless some pod has the container p.container
local function has_container(pods, p)
  local names = {}
  for _, pod in ipairs(pods) do
    for _, c in ipairs(pod.spec.containers or {}) do
      if c.name == p.container then return end
      names[c.name] = true
    end
  end
  local list = {}
  for n in pairs(names) do list[#list + 1] = n end
  table.sort(list)
  hypd.errors.refuse("container", "member", string.format("container: the pods of %s %s have no container %s " ..
    "(containers: %s)", p.kind, p.name, p.container, table.concat(list, ", ")))
end

-- read_container(conn, p, pod, c, acc) -> the container's row: its last
-- lines added to acc.lines (acc.read counts the reads that answered), or
-- why there are none (still starting: acc.waiting; an error)
local function read_container(conn, p, pod, c, acc)
  local crow = { name = c.name, state = c.state, reason = c.reason }
  if p.tail == 0 then return crow end
  if c.state == "waiting" then
    crow.message = string.format("container %s of pod %s is still starting (%s): no lines yet", c.name, pod,
      c.reason)
    acc.waiting[#acc.waiting + 1] = crow.message
    return crow
  end
  local text, err = conn:logs(pod, { namespace = p.namespace, container = c.name, tail = p.tail,
    since = p.since_seconds, timestamps = true, limit_bytes = BYTES_PER_CONTAINER })
  if not text then
    if starting(err) then
      crow.state = "waiting"
      crow.message = string.format("container %s of pod %s is still starting: no lines yet", c.name, pod)
      acc.waiting[#acc.waiting + 1] = crow.message
    else
      crow.error = tostring(type(err) == "table" and err.message or err)
    end
    return crow
  end
  acc.read = acc.read + 1
  local n, lines = 0, acc.lines
  for line in tostring(text):gmatch("[^\n]+") do
    local ts, body = L.parse(line)
    if ts then
      n = n + 1
      lines[#lines + 1] = { pod = pod, container = c.name, time = ts, line = body, k = L.key(ts), i = #lines + 1 }
    end
  end
  crow.lines = n
  if #text >= BYTES_PER_CONTAINER then crow.truncated = true; acc.truncated = true end
  return crow
end

-- pod_row(conn, p, pod, acc) -> what the answer lists of a pod, its
-- containers read (read_container)
local function pod_row(conn, p, pod, acc)
  local ps = pod.status or {}
  local restarts = 0
  for _, cs in ipairs(ps.containerStatuses or {}) do restarts = restarts + (tonumber(cs.restartCount) or 0) end
  local row = { name = pod.metadata.name, uid = pod.metadata.uid, phase = ps.phase or "Pending",
    node = pod.spec.nodeName, restarts = restarts, containers = hypd.json.array(), lines = 0 }
  for _, c in ipairs(L.containers(pod)) do
    if not p.container or c.name == p.container then
      local crow = read_container(conn, p, row.name, c, acc)
      row.lines = row.lines + (crow.lines or 0)
      row.containers[#row.containers + 1] = crow
    end
  end
  return row
end

-- interleave(lines, out): the lines by time (then as read) into out.lines;
-- the newest win when the answer would be over BYTES_TOTAL (out.truncated)
local function interleave(lines, out)
  table.sort(lines, function(a, b)
    if a.k ~= b.k then return a.k < b.k end
    return a.i < b.i
  end)
  local bytes, first = 0, 1
  for i = #lines, 1, -1 do
    bytes = bytes + #lines[i].line + #lines[i].pod + 64
    if bytes > BYTES_TOTAL then first = i + 1; out.truncated = true; break end
  end
  for i = first, #lines do
    local l = lines[i]
    out.lines[#out.lines + 1] = { pod = l.pod, container = l.container, time = l.time, line = l.line }
  end
end

return tool {
  name = "job_get_logs",
  summary = "Log lines of a training job, job, deployment, inference deployment or pod: tail and since, " ..
    "all pods interleaved by time with the pod name, or one pod",
  description = "Finds the pods of a workload on the active (or named) cluster: a training job " ..
    "(HyperPodPyTorchJob or RayJob, kind training_job), a batch Job (job), a Deployment (deployment), an " ..
    "inference deployment (inference: the pods labelled hypd.io/inference=<name>) or one pod (pod), and reads " ..
    "their logs through the Kubernetes API: the last `tail` lines of each pod (default 100, at most 5000) or " ..
    "those of the last since_seconds, every container or the one named, all interleaved by time, each line " ..
    "with its pod, container and time; `pod` reads one pod of the workload. The answer lists the pods with " ..
    "their phase, node and container states. No pods yet is an error that says the workload's phase; a " ..
    "container still starting is shown as such. tail = 0 lists the pods without reading lines. For lines as " ..
    "they are written, subscribe over /ws (logs.follow).",
  kind = "read",
  aws = { "eks:DescribeCluster" },
  k8s = { "get", "list", "logs" },
  params = P.form({ "name", "kind" },
    { "container", "pod", "since_seconds", "tail", "namespace", "cluster", "region" },
    {
    kind = { type = "string", required = true, enum = L.KINDS,
      description = "what name is: training_job, job (a batch Job), deployment, inference, pod" },
    name = { type = "string", required = true, pattern = KNAME.pattern, max_length = 253,
      pattern_help = KNAME.pattern_help, description = "the workload's name" },
    namespace = { type = "string", default = "default", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
      max_length = 63, pattern_help = "a Kubernetes namespace name", description = "the workload's namespace" },
    container = { type = "string", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
      pattern_help = "a container name", description = "one container of the pods (default: every container)" },
    pod = { type = "string", pattern = KNAME.pattern, max_length = 253, pattern_help = KNAME.pattern_help,
      description = "read only this pod of the workload" },
    tail = { type = "integer", default = 100, minimum = 0, maximum = TAIL_MAX,
      description = "the last lines of each pod's container (0: list the pods only)" },
    since_seconds = { type = "integer", minimum = 1, maximum = 30 * 86400,
      description = "only lines written in the last this many seconds" },
    cluster = P.cluster, region = P.region,
  }, { name = "Workload" }),
  run = function(ctx, p)
    local e = hp.eks(ctx, p)
    local conn = L.connect(ctx, e)
    local ok, r = pcall(L.resolve, conn, p.kind, p.name, p.namespace)
    if not ok then
      if not (type(r) == "table" and r.code == "NOT_FOUND") then L.forget(e) end
      error(r, 0)
    end
    local out = { cluster = e.name, region = e.region, namespace = p.namespace, kind = p.kind, name = p.name,
      phase = r.phase, finished = r.finished, pods = hypd.json.array(), lines = hypd.json.array(),
      truncated = false }
    local pods = p.pod and one_pod(r.pods, p) or r.pods
    if #pods == 0 then no_pods(p, r, e) end
    if p.container then has_container(pods, p) end
    local acc = { lines = {}, read = 0, waiting = {}, truncated = false }
    for _, pod in ipairs(pods) do out.pods[#out.pods + 1] = pod_row(conn, p, pod, acc) end
    if acc.truncated then out.truncated = true end
    if p.tail > 0 and acc.read == 0 and #acc.waiting > 0 then
      hypd.errors.raise("CONFLICT", table.concat(acc.waiting, "; ") .. "; try again in a few seconds",
        { phase = r.phase })
    end
    interleave(acc.lines, out)
    if #acc.waiting > 0 then out.message = table.concat(acc.waiting, "; ") end
    return out
  end,
}
