-- sandbox.faults_workloads: the faults of workloads, configured with the
-- others (sandbox.faults' configure hands the spec here). Each kind is a
-- list of rules; a rule matches a pod by namespace (absent: any) and
-- pod_prefix (the start of the pod's name; absent: any).
--   training_logs = { { namespace = "default", pod_prefix = "demo-pod-", after_lines = 5,
--                       lines = { "[rank 0] ... NCCL WARN NET/OFI ..." }, stall = true } }
--     (once a matching pod's container has printed after_lines lines, its
--     log gets `lines`; with stall = true the training operator prints no
--     more step lines for the job while that pod runs: a hang; with slow =
--     0.3 the job's throughput drops to that fraction: a slow job; every new
--     pod of the same name gets them again)
--   pod_crash = { { namespace, pod_prefix, reason = "CrashLoopBackOff" | "OOMKilled", exit_code = 1 } }
--     (the containers of a matching pod exit as soon as they start, with
--     exit_code (default 1; 137 for OOMKilled) and the terminated reason
--     Error or OOMKilled; with restartPolicy Always or OnFailure the kubelet
--     restarts them with its back-off (10 s doubling to 300 s): waiting
--     CrashLoopBackOff, restartCount up, the BackOff event; a pod with
--     restartPolicy Never, or of a HyperPodPyTorchJob, fails instead)
--   image_pull = { { namespace, image_prefix } }
--     (an image starting with image_prefix cannot be pulled: the container
--     waits ErrImagePull, then ImagePullBackOff, with the kubelet's events;
--     the kubelet tries again with its back-off, so a rule removed lets the
--     pod start at the next try)
--   readiness_fail = { { namespace, pod_prefix, status = 503 } }
--     (the readiness probes of a matching pod's containers fail: they run
--     and are never Ready; the Unhealthy event "Readiness probe failed: HTTP
--     probe failed with statuscode: 503" every periodSeconds)
-- Pending for lack of GPUs needs no fault: ask more than the nodes have.
local errors = require "hypd.errors"

local M = {}
local spec = {}

M.KINDS = { training_logs = true, pod_crash = true, image_pull = true, readiness_fail = true }
local CRASH = { CrashLoopBackOff = true, OOMKilled = true }

local function bad(kind, i, msg)
  return errors.fail("VALIDATION", string.format("faults.%s[%d]: %s", kind, i, msg), { field = "faults" })
end

local function str(v) return v == nil or type(v) == "string" end

-- configure(s) -> true | nil, err: takes the workload kinds of a faults spec
function M.configure(s)
  local next_spec = {}
  for kind in pairs(M.KINDS) do
    local list = s[kind]
    if list ~= nil then
      if type(list) ~= "table" then return bad(kind, 0, "expected a list of rules") end
      for i, f in ipairs(list) do
        if type(f) ~= "table" or not str(f.namespace) or not str(f.pod_prefix) then
          return bad(kind, i, "expected {namespace, pod_prefix, ...} with string values")
        end
        if kind == "training_logs" then
          if type(f.lines) ~= "table" or #f.lines == 0 then return bad(kind, i, "lines: a list of log lines") end
          for _, l in ipairs(f.lines) do
            if type(l) ~= "string" then return bad(kind, i, "lines: each a string") end
          end
          if f.after_lines ~= nil and not math.tointeger(f.after_lines) then
            return bad(kind, i, "after_lines: an integer")
          end
          if f.slow ~= nil and not (type(f.slow) == "number" and f.slow > 0 and f.slow <= 1) then
            return bad(kind, i, "slow: a fraction of the throughput, above 0 and at most 1")
          end
        elseif kind == "pod_crash" then
          if f.reason ~= nil and not CRASH[f.reason] then return bad(kind, i, "reason: CrashLoopBackOff or OOMKilled") end
          if f.exit_code ~= nil and not math.tointeger(f.exit_code) then return bad(kind, i, "exit_code: an integer") end
        elseif kind == "image_pull" then
          if type(f.image_prefix) ~= "string" or f.image_prefix == "" then
            return bad(kind, i, "image_prefix: the start of the image reference")
          end
        end
      end
      next_spec[kind] = list
    end
  end
  spec = next_spec
  return true
end

local function prefix(s, p) return p == nil or tostring(s):sub(1, #p) == p end

-- match(kind, namespace, pod) -> the first rule of kind matching the pod, or nil
function M.match(kind, ns, pod)
  for _, f in ipairs(spec[kind] or {}) do
    if (f.namespace == nil or f.namespace == ns) and prefix(pod, f.pod_prefix) then return f end
  end
end

-- image(namespace, image) -> the image_pull rule refusing this image, or nil
function M.image(ns, image)
  for _, f in ipairs(spec.image_pull or {}) do
    if (f.namespace == nil or f.namespace == ns) and prefix(image, f.image_prefix) then return f end
  end
end

-- crash(rule) -> exit code, terminated reason
function M.crash(f)
  if f.reason == "OOMKilled" then return math.tointeger(f.exit_code) or 137, "OOMKilled" end
  return math.tointeger(f.exit_code) or 1, "Error"
end

return M
