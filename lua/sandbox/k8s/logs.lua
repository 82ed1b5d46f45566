-- sandbox.k8s.logs: what the simulated containers print, and the
-- pods/{name}/log endpoint (container, tailLines, sinceSeconds, sinceTime,
-- timestamps, limitBytes, follow as a stream; a follow can be cut by the
-- fault log_stream_cuts, sandbox.faults; training_logs adds lines and
-- stalls a training, sandbox.faults_workloads).
local core = require "hypd.core"
local faults = require "sandbox.faults"
local objects = require "sandbox.k8s.objects"
local tbl = require "sandbox.k8s.table"
local task = require "hypd.task"
local workloads = require "sandbox.faults_workloads"

local M = {}
M.MAX_LINES = 20000

local function key(ns, pod, container) return ns .. "/" .. pod .. "/" .. container end

local function buffer(cl, ns, pod, container)
  cl.logs = cl.logs or {}
  local k = key(ns, pod, container)
  local b = cl.logs[k]
  if not b then
    b = { lines = {}, first = 1, sig = task.signal() }
    cl.logs[k] = b
  end
  return b
end

local function add(b, text)
  b.lines[#b.lines + 1] = { t = core.now(), text = text }
  b.printed = (b.printed or 0) + 1
  if #b.lines - b.first + 1 > M.MAX_LINES then
    b.lines[b.first] = nil
    b.first = b.first + 1
  end
end

-- append(cl, ns, pod, container, text): one line of a container's output;
-- a training_logs fault (sandbox.faults_workloads) adds its lines once the
-- container has printed its after_lines
function M.append(cl, ns, pod, container, text)
  local b = buffer(cl, ns, pod, container)
  add(b, text)
  if not b.fault then
    local f = workloads.match("training_logs", ns, pod)
    if f and b.printed >= (math.tointeger(f.after_lines) or 0) then
      b.fault = f
      for _, line in ipairs(f.lines) do add(b, line) end
    end
  end
  b.sig:fire()
end

-- struck(cl, ns, pod) -> the training_logs fault that has struck one of
-- the pod's containers, or nil (stall: it prints no more steps; slow: its
-- throughput is that fraction)
function M.struck(cl, ns, pod)
  for k, b in pairs(cl.logs or {}) do
    if b.fault and k:sub(1, #ns + #pod + 2) == ns .. "/" .. pod .. "/" then return b.fault end
  end
end

-- ended(cl, ns, pod): the pod stopped or went; followers finish
function M.ended(cl, ns, pod)
  for k, b in pairs(cl.logs or {}) do
    if k:sub(1, #ns + #pod + 2) == ns .. "/" .. pod .. "/" then b.sig:fire() end
  end
end

-- forget(cl, ns, pod): a deleted pod's logs go with it
function M.forget(cl, ns, pod)
  for k, b in pairs(cl.logs or {}) do
    if k:sub(1, #ns + #pod + 2) == ns .. "/" .. pod .. "/" then b.sig:fire(); cl.logs[k] = nil end
  end
end

local function text(line, stamps)
  if not stamps then return line.text .. "\n" end
  local frac = line.t - math.floor(line.t)
  return os.date("!%Y-%m-%dT%H:%M:%S", math.floor(line.t)) .. string.format(".%09dZ ", math.floor(frac * 1e9)) ..
    line.text .. "\n"
end

local function bad(msg) return { status = 400, headers = { ["content-type"] = "application/json" },
  body = require("hypd.json").encode(objects.status(400, "BadRequest", msg)) } end

local function started(pod, container)
  for _, s in ipairs((pod.status or {}).containerStatuses or {}) do
    if s.name == container then return s.state and (s.state.running or s.state.terminated) ~= nil end
  end
  return false
end

local function finished(pod)
  local phase = pod and (pod.status or {}).phase
  return not pod or phase == "Succeeded" or phase == "Failed"
end

function M.serve(cl, r, rt, q)
  local pod = cl:get(r, rt.ns, rt.name)
  if not pod then
    return { status = 404, headers = { ["content-type"] = "application/json" }, body = require("hypd.json").encode(
      objects.status(404, "NotFound", string.format("pods %q not found", rt.name), { name = rt.name, kind = "pods" })) }
  end
  local names = {}
  for _, c in ipairs((pod.spec or {}).containers or {}) do names[#names + 1] = c.name end
  local container = q.container
  if not container or container == "" then
    if #names ~= 1 then
      return bad(string.format("a container name must be specified for pod %s, choose one of: [%s]", rt.name,
        table.concat(names, " ")))
    end
    container = names[1]
  end
  local known = false
  for _, n in ipairs(names) do known = known or n == container end
  if not known then
    return bad(string.format("container %s is not valid for pod %s", container, rt.name))
  end
  if not started(pod, container) then
    return bad(string.format("container %q in pod %q is waiting to start: ContainerCreating", container, rt.name))
  end
  local since = tonumber(q.sinceSeconds) and core.now() - tonumber(q.sinceSeconds) or tbl.epoch(q.sinceTime)
  local tail, stamps = tonumber(q.tailLines), q.timestamps == "true"
  local limit = tonumber(q.limitBytes)
  local b = buffer(cl, rt.ns, rt.name, container)
  local first = b.first
  if since then
    while b.lines[first] and b.lines[first].t < since do first = first + 1 end
  end
  if tail then first = math.max(first, #b.lines - tail + 1) end
  if q.follow ~= "true" then
    local out = {}
    for i = first, #b.lines do out[#out + 1] = text(b.lines[i], stamps) end
    local body = table.concat(out)
    if limit and #body > limit then body = body:sub(1, limit) end
    return { status = 200, headers = { ["content-type"] = "text/plain" }, body = body }
  end
  return { status = 200, headers = { ["content-type"] = "text/plain", ["transfer-encoding"] = "chunked" },
    stream = function(w)
      local i, sent = first, 0
      local cut, n = faults.log_cut(rt.ns, rt.name, container), 0
      while true do
        while i < b.first do i = b.first end
        while b.lines[i] do
          local s = text(b.lines[i], stamps)
          if cut and n >= cut then
            w:write(s:sub(1, #s // 2))
            error("sandbox fault: the log stream of " .. rt.name .. " is cut (log_stream_cuts)", 0)
          end
          n = n + 1
          if limit and sent + #s > limit then w:write(s:sub(1, limit - sent)) return end
          if not w:write(s) then return end
          sent, i = sent + #s, i + 1
        end
        local now_pod = cl:get(r, rt.ns, rt.name)
        if finished(now_pod) or cl.gone or (cl.logs or {})[key(rt.ns, rt.name, container)] ~= b then return end
        if not b.sig:wait(not core.virtual() and 5 or nil) and not w:write("") then return end
      end
    end }
end

return M
