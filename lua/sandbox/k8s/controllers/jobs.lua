-- sandbox.k8s.controllers.jobs: batch/v1 Jobs. A Job keeps
-- min(parallelism, completions - succeeded) pods running until
-- spec.completions pods succeeded (conditions SuccessCriteriaMet and
-- Complete) or more than spec.backoffLimit failed (FailureTarget and Failed,
-- BackoffLimitExceeded); activeDeadlineSeconds fails it (DeadlineExceeded)
-- and ttlSecondsAfterFinished deletes it, both as bounded timers. How long
-- a pod runs is the kubelet's business (kubelet.lua).
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local tbl = require "sandbox.k8s.table"

local M = {}

local key = ctl_.key
local nz = ctl_.nz

local function finished(job)
  local conds = (job.status or {}).conditions
  return ctl_.is_true(conds, "Complete") or ctl_.is_true(conds, "Failed")
end

local function finish(ctl, job, st, ctype, reason, message, live)
  local pr = ctl:r("", "v1", "pods")
  for _, p in ipairs(live) do ctl.cl:delete(pr, p.metadata.namespace, p.metadata.name) end
  if ctype == "Complete" then
    st.conditions = ctl_.set_condition(st.conditions, "SuccessCriteriaMet", "True", reason, message)
    st.completionTime = ctl_.stamp()
    ctl_.event(ctl, job, "Normal", "Completed", "Job completed", "job-controller")
  else
    st.conditions = ctl_.set_condition(st.conditions, "FailureTarget", "True", reason, message)
    ctl_.event(ctl, job, "Warning", reason, message, "job-controller")
  end
  st.conditions = ctl_.set_condition(st.conditions, ctype, "True", reason, message)
  st.active = nil
end

ctl_.handlers.job = function(ctl, k)
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local jr, pr = ctl:r("batch", "v1", "jobs"), ctl:r("", "v1", "pods")
  local job = cl:get(jr, ns, name)
  if not job then return end
  local spec = job.spec or {}
  if finished(job) then
    local ttl = tonumber(spec.ttlSecondsAfterFinished)
    local conds = job.status.conditions
    local done = tbl.epoch(job.status.completionTime) or tbl.epoch(conds[#conds].lastTransitionTime)
    if ttl and done then
      if core.now() >= done + ttl / ctl_.speed() then
        cl:delete(jr, ns, name, { propagation = "Background" })
      else
        ctl:at(done + ttl / ctl_.speed(), "job", k)
      end
    end
    return
  end
  local completions = tonumber(spec.completions) or 1
  local parallelism = tonumber(spec.parallelism) or 1
  local backoff = tonumber(spec.backoffLimit) or 6
  local succeeded, failed, ready, live = 0, 0, 0, {}
  for _, p in ipairs(ctl_.children(ctl, pr, job)) do
    local phase = ctl_.phase(p)
    if phase == "Succeeded" then succeeded = succeeded + 1
    elseif phase == "Failed" then failed = failed + 1
    else
      live[#live + 1] = p
      if ctl_.pod_ready(p) then ready = ready + 1 end
    end
  end
  local st = ctl_.copy(job.status or {})
  st.startTime = st.startTime or ctl_.stamp()
  local started = tbl.epoch(st.startTime) or core.now()
  local deadline = tonumber(spec.activeDeadlineSeconds)
  if succeeded >= completions then
    finish(ctl, job, st, "Complete", "CompletionsReached", "Reached expected number of succeeded pods", live)
  elseif failed > backoff then
    finish(ctl, job, st, "Failed", "BackoffLimitExceeded", "Job has reached the specified backoff limit", live)
  elseif deadline and core.now() >= started + deadline / ctl_.speed() then
    finish(ctl, job, st, "Failed", "DeadlineExceeded", "Job was active longer than specified deadline", live)
  else
    local want = math.min(parallelism, completions - succeeded) - #live
    local labels = { ["batch.kubernetes.io/controller-uid"] = job.metadata.uid,
      ["batch.kubernetes.io/job-name"] = name, ["controller-uid"] = job.metadata.uid, ["job-name"] = name }
    local template = ctl_.copy(spec.template or {})
    template.spec = template.spec or {}
    template.spec.restartPolicy = template.spec.restartPolicy or "Never"
    for _ = 1, want do
      local p = cl:create(pr, ctl_.pod(job, template, name .. "-", labels, true))
      if p then
        live[#live + 1] = p
        ctl_.event(ctl, job, "Normal", "SuccessfulCreate", "Created pod: " .. p.metadata.name, "job-controller")
      end
    end
    st.active = nz(#live)
    if deadline then ctl:at(started + deadline / ctl_.speed(), "job", k) end
  end
  st.succeeded, st.failed = nz(succeeded), nz(failed)
  st.ready, st.terminating = ready, 0
  st.uncountedTerminatedPods = st.uncountedTerminatedPods or {}
  job = ctl_.put_status(ctl, jr, job, st)
  if finished(job) and spec.ttlSecondsAfterFinished then ctl:enqueue("job", k) end
end

function M.watch(ctl, etype, r, obj)
  if r.group == "batch" and r.kind == "Job" then
    if etype ~= "DELETED" then ctl:enqueue("job", key(obj)) end
  elseif r.group == "" and r.kind == "Pod" then
    local o = ctl_.owner(obj, "Job")
    if o then ctl:enqueue("job", obj.metadata.namespace .. "/" .. o.name) end
  end
end

function M.start(ctl)
  for _, j in ipairs(ctl.cl:list(ctl:r("batch", "v1", "jobs"))) do ctl:enqueue("job", key(j)) end
end

return M
