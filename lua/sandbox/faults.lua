-- sandbox.faults: injected failures, reproducible from a seed.
--   { seed = 42,
--     services = { ec2 = { throttle = 0.2, error5xx = 0.05, reset = 0.01, latency = 0.3 } },
--     (latency: simulated seconds before each answer; hold = true: requests wait,
--     with no timeout, until the faults are configured again without it;
--     error5xx answers InternalFailure 500 BEFORE doing the work, error5xx_after
--     (a rate too, e.g. error5xx_after = 0.05) carries the request out, audit
--     log included, and THEN answers InternalFailure 500, as AWS sometimes
--     does: the caller cannot tell whether its create took effect)
--     insufficient_capacity = { { instance_type = "ml.p5.48xlarge", zone = "usw2-az2" } },
--     failing_nodes = { { cluster = "hp1", instance_group = "workers", count = 1 } },   -- at launch
--     node_failures = { { cluster = "hp1", instance_group = "workers", after = 300, count = 1 } } }
--     (a Running node fails `after` simulated seconds once it has joined Kubernetes)
--     log_stream_cuts = { { namespace = "default", pod = "train-0", container = "main", after_lines = 10,
--                           count = 1 } }   (pod_prefix = "train-" instead of pod: every pod so named)
--     (a followed pod log, GET pods/{name}/log?follow=true, of a matching container is cut after it
--     sent after_lines lines: half of the next line goes out, then the connection drops, as a real
--     API server or kubelet drops a long stream; count streams are cut, 1 unless given)
--     training_logs, pod_crash, image_pull, readiness_fail: sandbox.faults_workloads
--     node_health, lifecycle_failure, addon_unhealthy, eks_failure: see sandbox.faults_nodes
-- The same seed gives the same faults for the same sequence of requests.
local errors = require "hypd.errors"
local task = require "hypd.task"

local M = {}
local spec = { services = {} }
local changed = task.signal() -- fired when the faults are configured again
local rng_state = 1

-- xorshift32: deterministic across runs and machines
local function rand()
  local x = rng_state
  x = x ~ ((x << 13) & 0xffffffff)
  x = x ~ (x >> 17)
  x = x ~ ((x << 5) & 0xffffffff)
  rng_state = x & 0xffffffff
  return rng_state / 4294967296
end

local THROTTLE = { json = "ThrottlingException", ["rest-json"] = "ThrottlingException", query = "Throttling",
  ec2 = "RequestLimitExceeded", ["rest-xml"] = "SlowDown" }

function M.configure(s)
  if type(s) ~= "table" then return errors.fail("VALIDATION", "faults must be a JSON object") end
  for name, f in pairs(s.services or {}) do
    for k, v in pairs(f) do
      local ok = k == "hold" and type(v) == "boolean" or
        (k == "throttle" or k == "error5xx" or k == "error5xx_after" or k == "reset" or k == "latency") and
        type(v) == "number" and v >= 0
      if not ok then
        return errors.fail("VALIDATION", "faults.services." .. name .. "." .. tostring(k) ..
          ": expected throttle, error5xx, error5xx_after, reset (rates 0..1), latency (seconds) or hold " ..
          "(true or false)", { field = "faults" })
      end
    end
  end
  local wl_ok, wl_err = require("sandbox.faults_workloads").configure(s) if not wl_ok then return nil, wl_err end
  local nodes_ok, nodes_err = require("sandbox.faults_nodes").check(s) -- node, lifecycle, add-on, EKS faults
  if not nodes_ok then return nil, nodes_err end
  spec = s
  spec.services = spec.services or {}
  rng_state = math.tointeger(s.seed) or 1
  if rng_state == 0 then rng_state = 1 end
  changed:fire()
  return true
end

-- on_request(service, protocol) -> an AWS error to answer instead, or nil
function M.on_request(service, protocol)
  while (spec.services[service] or {}).hold do changed:wait() end
  local f = spec.services[service]
  if not f then return nil end
  if f.latency and f.latency > 0 then task.sleep(f.latency) end
  if f.throttle and rand() < f.throttle then
    return { code = THROTTLE[protocol] or "Throttling", message = "Rate exceeded",
             status = protocol == "rest-xml" and 503 or 400 }
  end
  if f.reset and rand() < f.reset then
    return { reset = true }
  end
  if f.error5xx and rand() < f.error5xx then
    return { code = "InternalFailure", message = "We encountered an internal error. Please try again.", status = 500 }
  end
end

-- after_request(service) -> an AWS error to answer instead of the result of
-- a request that was carried out (error5xx_after), or nil
function M.after_request(service)
  local f = spec.services[service]
  if f and f.error5xx_after and rand() < f.error5xx_after then
    return { code = "InternalFailure", message = "We encountered an internal error. Please try again.", status = 500 }
  end
end

-- log_cut(namespace, pod, container) -> after how many lines this follow
-- stream is cut, or nil; each cut uses one of the rule's count
function M.log_cut(ns, pod, container)
  for _, f in ipairs(spec.log_stream_cuts or {}) do
    if (f.namespace == nil or f.namespace == ns) and (f.pod == nil or f.pod == pod) and
        (f.pod_prefix == nil or pod:sub(1, #f.pod_prefix) == f.pod_prefix) and
        (f.container == nil or f.container == container) and (f.count or 1) > (f.used or 0) then
      f.used = (f.used or 0) + 1
      return math.max(0, math.tointeger(f.after_lines) or 0)
    end
  end
end

-- applies(kind, args, ctx) -> true when a configured fault matches
function M.applies(kind, args)
  for _, f in ipairs(spec[kind] or {}) do
    local match = true
    for k, v in pairs(f) do
      if k ~= "count" and k ~= "after" and args[k] ~= nil and args[k] ~= v then match = false end
    end
    if match then return true, f end
  end
  return false
end

return M
