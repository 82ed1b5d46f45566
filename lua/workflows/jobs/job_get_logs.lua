-- job_get_logs: the log lines of a workload's pods, read through the
-- Kubernetes API (pods/{name}/log with tailLines, sinceSeconds,
-- timestamps=true), every pod and container (or the one named) interleaved
-- by time, each line with its pod and container. For a live stream of the
-- same lines, /ws offers logs.follow (docs/api.md).
local P = require "_params"
local L = require "jobs._logs"
local hp = require "hyperpod._hp"

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
  params = {
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
  },
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
    local pods = r.pods
    if p.pod then
      local names, found = {}, nil
      for _, pod in ipairs(pods) do
        names[#names + 1] = pod.metadata.name
        if pod.metadata.name == p.pod then found = pod end
      end
      if not found then
        hypd.errors.refuse("pod", "member", string.format("pod: %s is not a pod of %s %s (its pods: %s)", p.pod, p.kind, p.name,
          #names > 0 and table.concat(names, ", ") or "none"))
      end
      pods = { found }
    end
    if #pods == 0 then
      -- a finished job whose pods are gone (a HyperPodPyTorchJob's cleanPodPolicy All deletes them at its end)
      local gone = r.finished and "has no pods left: it is %s and its pods were deleted when it ended%s" or
        "has no pods yet: it is %s%s"
      hypd.errors.raise("CONFLICT", string.format("%s %s/%s " .. gone, p.kind, p.namespace, p.name,
        r.phase, p.kind == "training_job" and " (training_get_job shows its events)" or ""),
        { phase = r.phase, finished = r.finished, cluster = e.name, region = e.region })
    end
    if p.container then
      local any, names = false, {}
      for _, pod in ipairs(pods) do
        for _, c in ipairs(pod.spec.containers or {}) do
          any = any or c.name == p.container
          names[c.name] = true
        end
      end
      if not any then
        local list = {}
        for n in pairs(names) do list[#list + 1] = n end
        table.sort(list)
        hypd.errors.refuse("container", "member", string.format("container: the pods of %s %s have no container %s " ..
          "(containers: %s)", p.kind, p.name, p.container, table.concat(list, ", ")))
      end
    end
    local lines, bytes, read, waiting = {}, 0, 0, {}
    for _, pod in ipairs(pods) do
      local ps = pod.status or {}
      local restarts = 0
      for _, cs in ipairs(ps.containerStatuses or {}) do restarts = restarts + (tonumber(cs.restartCount) or 0) end
      local row = { name = pod.metadata.name, uid = pod.metadata.uid, phase = ps.phase or "Pending",
        node = pod.spec.nodeName, restarts = restarts, containers = hypd.json.array(), lines = 0 }
      for _, c in ipairs(L.containers(pod)) do
        if not p.container or c.name == p.container then
          local crow = { name = c.name, state = c.state, reason = c.reason }
          if p.tail > 0 and c.state == "waiting" then
            crow.message = string.format("container %s of pod %s is still starting (%s): no lines yet", c.name,
              row.name, c.reason)
            waiting[#waiting + 1] = crow.message
          elseif p.tail > 0 then
            local text, err = conn:logs(row.name, { namespace = p.namespace, container = c.name, tail = p.tail,
              since = p.since_seconds, timestamps = true, limit_bytes = BYTES_PER_CONTAINER })
            if not text then
              if starting(err) then
                crow.state = "waiting"
                crow.message = string.format("container %s of pod %s is still starting: no lines yet", c.name,
                  row.name)
                waiting[#waiting + 1] = crow.message
              else
                crow.error = tostring(type(err) == "table" and err.message or err)
              end
            else
              read = read + 1
              local n = 0
              for line in tostring(text):gmatch("[^\n]+") do
                local ts, body = L.parse(line)
                if ts then
                  n = n + 1
                  lines[#lines + 1] = { pod = row.name, container = c.name, time = ts, line = body,
                    k = L.key(ts), i = #lines + 1 }
                end
              end
              crow.lines = n
              row.lines = row.lines + n
              if #text >= BYTES_PER_CONTAINER then crow.truncated = true; out.truncated = true end
            end
          end
          row.containers[#row.containers + 1] = crow
        end
      end
      out.pods[#out.pods + 1] = row
    end
    if p.tail > 0 and read == 0 and #waiting > 0 then
      hypd.errors.raise("CONFLICT", table.concat(waiting, "; ") .. "; try again in a few seconds", { phase = r.phase })
    end
    table.sort(lines, function(a, b)
      if a.k ~= b.k then return a.k < b.k end
      return a.i < b.i
    end)
    -- the newest lines win when the answer would be too big
    local keep = #lines
    local first = 1
    for i = keep, 1, -1 do
      bytes = bytes + #lines[i].line + #lines[i].pod + 64
      if bytes > BYTES_TOTAL then first = i + 1; out.truncated = true; break end
    end
    for i = first, keep do
      local l = lines[i]
      out.lines[#out.lines + 1] = { pod = l.pod, container = l.container, time = l.time, line = l.line }
    end
    if #waiting > 0 then out.message = table.concat(waiting, "; ") end
    return out
  end,
}
