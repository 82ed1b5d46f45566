-- sandbox.k8s.controllers.hyperpod_jobs: the HyperPod training operator's
-- HyperPodPyTorchJob (sagemaker.amazonaws.com/v1), once its CRD is served.
-- Every replicaSpecs[i] gives `replicas` pods <job>-pod-<rank> (label
-- HPJob=<job>, owned by the job). Conditions go Created -> Running (every
-- pod Running) -> Completed, the newest True condition last as `hyp list`
-- reads them. While running, each pod prints one training line per step
-- (sandbox.hypd.io/steps steps, else the --max_steps N of its command line,
-- else STEPS; STEP_SECONDS of simulated time each):
--   [rank 0] step 10/20 loss=1.2345 throughput=181.2 samples/s
-- The lines follow the framework the container runs (its command):
-- LLaMA-Factory and MS-Swift print as the Hugging Face Trainer does
-- ("***** Running training *****", then {'loss': ..., 'epoch': ...} every
-- step), anything else the line above after an "Experiment configuration"
-- line (the reference templates' start marker).
-- runPolicy.logMonitoringConfiguration rules are evaluated as the HyperPod
-- elastic agent's log agent does (hyperpod-elastic-agent LogEvaluator):
-- logPattern is matched at the start of each line of rank 0 (Python
-- re.match); no match within expectedStartCutOffInSeconds of the start, or
-- none for expectedRecurringFrequencyInSeconds after the last one, is
-- HANGING; the value of its first group compared to metricThreshold with
-- operator (gt, gteq, lt, lteq, eq) for metricEvaluationDataPoints lines in
-- a row is SLOW; stopPattern deactivates the rule. A HANGING or SLOW rule
-- is a fault like a failed pod: the job restarts (restartCount + 1) within
-- its budget, the Restarting (or Failed) condition and the JobRestarting
-- event naming "log monitoring rule NAME found the job HANGING|SLOW".
-- When a pod fails (its node failed or went), the job restarts all its pods
-- (restartCount + 1, condition Restarting, then Running again) while
-- runPolicy.jobMaxRetryCount (or restartPolicy.maxFullJobRestarts) allows,
-- and fails (condition Failed) after that. Every restart is a full job
-- restart from step 0; pod-level restarts are not simulated.
-- A training_logs fault with stall (sandbox.faults_workloads) stops the
-- step lines while its pods run: the job hangs (a log monitoring rule sees
-- it as HANGING); with slow = f every rank's throughput is f of what it was
-- (all ranks wait for the slowest).
-- MLflow: when rank 0's container has MLFLOW_TRACKING_URI set to a sandbox
-- tracking server's ARN (and the framework reports to it: report_to mlflow
-- for LLaMA-Factory and MS-Swift), its client makes the experiment
-- MLFLOW_EXPERIMENT_NAME and a run named after the job (sandbox.mlflow.report),
-- logs the params and, for every step line rank 0 prints, the same numbers
-- as metrics with the step; the run ends FINISHED with the job, KILLED when
-- the job restarts (the new attempt starts a new run), FAILED when it fails.
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local kubelet = require "sandbox.k8s.controllers.kubelet"
local logs = require "sandbox.k8s.logs"
local mlflow = require "sandbox.mlflow.report"
local programs = require "sandbox.k8s.programs"
local sched = require "sandbox.k8s.controllers.scheduler"

local M = {}
M.STEPS = 20          -- steps unless annotated
M.STEP_SECONDS = 1    -- simulated seconds per step
M.STEPS_ANN = "sandbox.hypd.io/steps"
M.GROUP, M.VERSION, M.PLURAL = "sagemaker.amazonaws.com", "v1", "hyperpodpytorchjobs"

local key = ctl_.key
local regex = require "hypd.regex"

-- wanted(job) -> { {name, rank, spec} } the pods the job runs
local function wanted(job)
  local out, rank = {}, 0
  for _, rs in ipairs((job.spec or {}).replicaSpecs or {}) do
    for _ = 1, tonumber(rs.replicas) or 1 do
      out[#out + 1] = { name = job.metadata.name .. "-pod-" .. rank, rank = rank, spec = rs }
      rank = rank + 1
    end
  end
  return out
end

local function retries(job)
  local rp = (job.spec or {}).runPolicy or {}
  return tonumber(rp.jobMaxRetryCount) or tonumber((rp.restartPolicy or {}).maxFullJobRestarts) or 0
end

local function build(job, w)
  local labels = { HPJob = job.metadata.name, ["sagemaker.amazonaws.com/job-name"] = job.metadata.name }
  local p = ctl_.pod(job, w.spec.template or {}, w.name, labels)
  p.spec.hostname = w.name
  return p
end

local function noise(a, b)
  local x = math.sin(a * 12.9898 + b * 78.233) * 43758.5453
  return x - math.floor(x)
end

local function gpus(pod)
  local n = sched.requests(pod)["nvidia.com/gpu"] or 0
  return n > 0 and n or 0
end

local function say(ctl, pod, text)
  local c = (pod.spec.containers or {})[1]
  if c then logs.append(ctl.cl, pod.metadata.namespace, pod.metadata.name, c.name, text) end
end

-- command(job) -> the first container (of the first replica spec) and its command line
local function command(job)
  local rs = ((job.spec or {}).replicaSpecs or {})[1] or {}
  local c = ((((rs.template or {}).spec or {}).containers) or {})[1] or {}
  return c, programs.command_line(c)
end

-- style(job) -> "hf" (LLaMA-Factory, MS-Swift: the Hugging Face Trainer's
-- lines), "swift" or "plain", from what the first container runs
local function style(job)
  local _, cmd = command(job)
  if cmd:find("llamafactory-cli", 1, true) then return "hf" end
  if cmd:find("swift sft", 1, true) or cmd:find("swift rlhf", 1, true) then return "swift" end
  return "plain"
end

-- MLflow's rule for metric names, as the Trainer's MLflow callback applies it
local function metric_name(k) return (k:gsub("[^%w_%-%. :/]", "_")) end

-- report_start(job, kind, pods, steps) -> the MLflow run of rank 0, or nil
-- (and a warning line when the client could not reach the server)
local function report_start(ctl, job, kind, pods, steps)
  local c, cmd = command(job)
  local pod_c = ((pods[1].spec or {}).containers or {})[1] or c
  if not mlflow.target(pod_c.env) then return nil end
  if kind == "hf" and not cmd:find("report_to: mlflow", 1, true) and not cmd:find("report_to: all", 1, true) then
    return nil
  end
  if kind == "swift" and not cmd:find("--report_to mlflow", 1, true) then return nil end
  local params = { world_size = #pods, max_steps = steps,
    throughput_unit = kind == "swift" and "iter/s" or "samples/s" }
  local run_name = job.metadata.name
  if kind == "hf" then
    for _, pk in ipairs { "model_name_or_path", "finetuning_type", "dataset", "template", "learning_rate",
        "num_train_epochs", "output_dir", "run_name" } do
      params[pk] = cmd:match("\n" .. pk .. ": ([^\n]+)") or params[pk]
    end
    run_name = params.run_name or run_name
  elseif kind == "swift" then
    for _, pk in ipairs { "model", "dataset", "train_type", "learning_rate", "num_train_epochs", "run_name" } do
      local v = cmd:match("%-%-" .. pk .. " (%S+)")
      if v then params[pk] = (v:gsub("^'(.*)'$", "%1")) end
    end
    run_name = params.run_name or run_name
  else
    params.nproc_per_node = tostring(job.spec.nprocPerNode or "auto")
  end
  local h, why = mlflow.start(ctl.region, pod_c.env, { run_name = run_name, params = params })
  if not h and why then
    say(ctl, pods[1], "[rank 0] WARNING mlflow: could not start the run (" .. why .. "); training goes on " ..
      "without MLflow")
  end
  return h
end

local function r4(x) return tonumber(string.format("%.4f", x)) end

local OPS = { gt = function(a, b) return a > b end, gteq = function(a, b) return a >= b end,
  lt = function(a, b) return a < b end, lteq = function(a, b) return a <= b end,
  eq = function(a, b) return a == b end }

-- rules(job, t0) -> the job's log monitoring rules, each with its state
local function rules(job, t0)
  local out = {}
  for _, r in ipairs(((job.spec or {}).runPolicy or {}).logMonitoringConfiguration or {}) do
    -- re.match: anchored at the start of the line
    local re = r.logPattern and regex.compile("^(?:" .. tostring(r.logPattern) .. ")")
    local stop = r.stopPattern and regex.compile("^(?:" .. tostring(r.stopPattern) .. ")")
    if re and r.name then
      out[#out + 1] = { name = tostring(r.name), pattern = tostring(r.logPattern), re = re, stop = stop,
        cutoff = tonumber(r.expectedStartCutOffInSeconds), every = tonumber(r.expectedRecurringFrequencyInSeconds),
        threshold = tonumber(r.metricThreshold), op = OPS[r.operator or ""], opname = r.operator,
        points = tonumber(r.metricEvaluationDataPoints) or 1, slow = 0, active = true, t0 = t0 }
    end
  end
  return out
end

-- evaluate(m, line) -> nil | {rule, state, why}: the log agent's verdict
-- after a line (or after time alone, line nil)
local function evaluate(m, line)
  local now = core.now()
  local sp = ctl_.speed()
  for _, r in ipairs(m.rules or {}) do
    if r.active then
      local caps = line and r.re:match(line)
      if caps then r.last = now end
      if line and r.stop and r.stop:test(line) then
        r.active = false
      elseif r.cutoff and not r.last and (now - r.t0) * sp > r.cutoff then
        return { rule = r.name, state = "HANGING", why = string.format("no line matched %q within %d s of the start",
          r.pattern, r.cutoff) }
      elseif r.every and r.last and (now - r.last) * sp > r.every then
        return { rule = r.name, state = "HANGING", why = string.format("no line matched %q for %d s after the " ..
          "last one", r.pattern, r.every) }
      elseif caps and r.op and r.threshold and caps[1] and tonumber(caps[1]) then
        if r.op(tonumber(caps[1]), r.threshold) then r.slow = math.min(r.slow + 1, r.points) else r.slow = 0 end
        if r.slow >= r.points then
          return { rule = r.name, state = "SLOW", why = string.format("the value %s was %s %s for %d line(s) in a " ..
            "row", caps[1], r.opname, tostring(r.threshold), r.points) }
        end
      end
    end
  end
end

-- next_check(m) -> the engine time a rule's timer runs out, or nil
local function next_check(m)
  local at
  local sp = ctl_.speed()
  for _, r in ipairs(m.rules or {}) do
    if r.active then
      local t = (r.cutoff and not r.last and r.t0 + r.cutoff / sp) or (r.every and r.last and r.last + r.every / sp)
      if t and (not at or t < at) then at = t end
    end
  end
  return at and at + 0.001
end

-- hf_line(...) -> the Trainer's log line, and its numbers (as printed) by metric name
local function hf_line(step, steps, loss, tput, swift)
  local epoch = step / steps
  if swift then
    local acc, gn, speed = 0.5 + 0.4 * epoch, 1.2 - 0.5 * epoch, tput / 100
    return string.format("{'loss': %.4f, 'token_acc': %.4f, 'grad_norm': %.4f, 'learning_rate': 9.5e-05, " ..
      "'memory(GiB)': 17.92, 'train_speed(iter/s)': %.3f, 'epoch': %.2f, 'global_step/max_steps': '%d/%d'}", loss,
      acc, gn, speed, epoch, step, steps), { loss = r4(loss), token_acc = r4(acc), grad_norm = r4(gn),
      learning_rate = 9.5e-05, [metric_name("memory(GiB)")] = 17.92,
      [metric_name("train_speed(iter/s)")] = tonumber(string.format("%.3f", speed)),
      epoch = tonumber(string.format("%.2f", epoch)) }
  end
  local gn = 1.2 - 0.5 * epoch
  return string.format("{'loss': %.4f, 'grad_norm': %.4f, 'learning_rate': 9.5e-05, 'epoch': %.2f, " ..
    "'throughput': %.1f}", loss, gn, epoch, tput), { loss = r4(loss), grad_norm = r4(gn), learning_rate = 9.5e-05,
    epoch = tonumber(string.format("%.2f", epoch)), throughput = tonumber(string.format("%.1f", tput)) }
end

-- train(ctl, job, m, pods, k) -> true when the last step is done, or
-- {rule, state, why} when a log monitoring rule fired: prints the steps
-- that are due and comes back for the next one
-- steps_of(job) -> how many steps it trains: the annotation, else the
-- --max_steps (--max-steps) its command line gives, as a Hugging Face or
-- torchrun script takes it, else STEPS
local function steps_of(job)
  local ann = tonumber((job.metadata.annotations or {})[M.STEPS_ANN])
  if ann then return math.max(1, ann) end
  local _, cmd = command(job)
  local n = tonumber(tostring(cmd or ""):match("%-%-max[_%-]steps[= ](%d+)"))
  return math.max(1, math.min(n or M.STEPS, 1000000))
end

local function train(ctl, job, m, pods, k)
  local steps = steps_of(job)
  local dt = M.STEP_SECONDS / ctl_.speed()
  local now = core.now()
  local kind = style(job)
  local fired
  local function out(rank, p, text)
    say(ctl, p, text)
    if rank == 1 and not fired then fired = evaluate(m, text) end
  end
  if not m.next_at then
    m.next_at = now + dt
    m.rules = rules(job, now)
    for rank, p in ipairs(pods) do
      if kind == "plain" then
        out(rank, p, string.format("[rank %d] Experiment configuration: job=%s world_size=%d nproc_per_node=%s " ..
          "steps=%d master=%s:23456", rank - 1, job.metadata.name, #pods, tostring(job.spec.nprocPerNode or "auto"),
          steps, pods[1].metadata.name))
      else
        out(rank, p, "[INFO|trainer.py:2405] ***** Running training *****")
        out(rank, p, string.format("[INFO|trainer.py:2406]   Num examples = %d", steps * 64))
        out(rank, p, string.format("[INFO|trainer.py:2410]   Total optimization steps = %d", steps))
      end
    end
    m.mlflow = report_start(ctl, job, kind, pods, steps)
  end
  -- a training_logs fault with stall: a rank hangs, no step goes on
  local stalled, slow = false, 1
  for _, p in ipairs(pods) do
    local f = logs.struck(ctl.cl, p.metadata.namespace, p.metadata.name)
    stalled = stalled or (f and f.stall) == true
    if f and tonumber(f.slow) then slow = math.min(slow, tonumber(f.slow)) end
  end
  while not fired and not stalled and m.step < steps and now >= m.next_at do
    m.step = m.step + 1
    for rank, p in ipairs(pods) do
      local loss = 0.35 + 2.2 * math.exp(-3 * m.step / steps) + 0.04 * (noise(m.step, rank) - 0.5)
      local g = gpus(p)
      local tput = (g > 0 and 180 * g or 12.5) * (1 + 0.05 * (noise(rank, m.step) - 0.5)) * slow
      m.loss = loss
      if kind == "plain" then
        out(rank, p, string.format("[rank %d] step %d/%d loss=%.4f throughput=%.1f samples/s", rank - 1, m.step,
          steps, loss, tput))
        if rank == 1 then
          mlflow.log(m.mlflow, { loss = r4(loss), throughput = tonumber(string.format("%.1f", tput)) }, m.step)
        end
      elseif rank == 1 then
        local line, metrics = hf_line(m.step, steps, loss, tput * #pods, kind == "swift")
        out(rank, p, line)
        mlflow.log(m.mlflow, metrics, m.step)
      end
    end
    m.next_at = m.next_at + dt
  end
  fired = fired or evaluate(m, nil)
  if fired then return fired end
  if m.step >= steps then
    say(ctl, pods[1], string.format("[rank 0] Training completed: %d steps, final loss=%.4f", steps, m.loss or 0))
    mlflow.finish(m.mlflow, "FINISHED")
    return true
  end
  local at = next_check(m)
  if stalled then
    if at then ctl:at(at, "hpj", k) end
    return
  end
  ctl:at(at and at < m.next_at and at or m.next_at, "hpj", k)
end

local function clean(ctl, job, pods, all)
  local policy = ((job.spec or {}).runPolicy or {}).cleanPodPolicy or "None"
  local pr = ctl:r("", "v1", "pods")
  for _, p in pairs(pods) do
    if policy == "All" or (policy == "Running" and not ctl_.finished(p)) or all then
      ctl.cl:delete(pr, p.metadata.namespace, p.metadata.name)
    end
  end
end

ctl_.handlers.hpj = function(ctl, k)
  local r = ctl:r(M.GROUP, M.VERSION, M.PLURAL)
  if not r then return end
  local cl = ctl.cl
  local ns, name = k:match("^([^/]*)/(.*)$")
  local mem = ctl:memo("hpj")
  local job = cl:get(r, ns, name)
  if not job then mem[k] = nil return end
  local m = mem[k]
  if not m or m.uid ~= job.metadata.uid then
    m = { uid = job.metadata.uid, step = 0 }
    mem[k] = m
  end
  local st = ctl_.copy(job.status or {})
  if ctl_.is_true(st.conditions, "Completed") or ctl_.is_true(st.conditions, "Failed") then return end
  local last = { last = true }
  st.restartCount = st.restartCount or 0
  if not ctl_.condition(st.conditions, "Created") then
    st.conditions = ctl_.set_condition(st.conditions, "Created", "True", "JobCreated",
      string.format("HyperPodPyTorchJob %s is created.", name), last)
    st.startTime = st.startTime or ctl_.stamp()
  end
  local pr = ctl:r("", "v1", "pods")
  local want = wanted(job)
  local pods, failed = {}, nil
  for i, w in ipairs(want) do
    local p = cl:get(pr, ns, w.name)
    if p and ctl_.owned_by(p, job.metadata.uid) then
      pods[i] = p
      if ctl_.phase(p) == "Failed" then failed = failed or p end
    end
  end
  local why
  if failed then
    why = string.format("pod %s on node %s failed (%s)", failed.metadata.name,
      tostring(failed.spec.nodeName), tostring((failed.status or {}).reason or "Error"))
    st.latestFaultyPodInstanceList = { restartType = "JLR", faultyPodList = { failed.metadata.name },
      faultyInstanceIdList = { (tostring(failed.spec.nodeName):gsub("^hyperpod%-", "")) },
      faultyRankList = { (failed.metadata.name:match("(%d+)$")) } }
  elseif m.fired then
    why = string.format("log monitoring rule %s found the job %s (%s)", m.fired.rule, m.fired.state, m.fired.why)
    m.fired = nil
  end
  if why then
    if st.restartCount < retries(job) then
      mlflow.finish(m.mlflow, "KILLED") -- the attempt's processes are stopped; the next attempt starts a new run
      m.mlflow = nil
      clean(ctl, job, pods, true)
      pods = {}
      st.restartCount = st.restartCount + 1
      m.step, m.next_at = 0, nil
      st.conditions = ctl_.set_condition(st.conditions, "Running", "False", "JobRestarting", "The job is restarting.")
      st.conditions = ctl_.set_condition(st.conditions, "Restarting", "True", "JobRestarting",
        string.format("HyperPodPyTorchJob %s is restarting (%d of %d): %s.", name, st.restartCount, retries(job), why),
        last)
      ctl_.event(ctl, job, "Warning", "JobRestarting", "Restarting the job: " .. why, "hp-training-operator")
    else
      st.conditions = ctl_.set_condition(st.conditions, "Running", "False", "JobFailed", "The job failed.")
      st.conditions = ctl_.set_condition(st.conditions, "Failed", "True", "JobFailed",
        string.format("HyperPodPyTorchJob %s failed: %s; the %d retries allowed are used up.", name, why,
          retries(job)), last)
      ctl_.event(ctl, job, "Warning", "JobFailed", "The job failed: " .. why, "hp-training-operator")
      mlflow.finish(m.mlflow, "FAILED")
      clean(ctl, job, pods)
      ctl_.put_status(ctl, r, job, st)
      return
    end
  end
  for i, w in ipairs(want) do
    if not pods[i] and not cl:get(pr, ns, w.name) then pods[i] = cl:create(pr, build(job, w)) end
  end
  local refs, running = {}, #want > 0
  for i = 1, #want do
    local p = pods[i]
    if p then refs[#refs + 1] = { apiVersion = "v1", kind = "Pod", name = p.metadata.name, namespace = ns,
      uid = p.metadata.uid } end
    if not p or ctl_.phase(p) ~= "Running" then running = false end
  end
  st.jobPods = refs
  st.masterAddr, st.masterPort = #want > 0 and want[1].name or nil, "23456"
  if running then
    if not ctl_.is_true(st.conditions, "Running") then
      if ctl_.condition(st.conditions, "Restarting") then
        st.conditions = ctl_.set_condition(st.conditions, "Restarting", "False", "JobRestarted",
          "The job restarted.")
      end
      st.conditions = ctl_.set_condition(st.conditions, "Running", "True", "JobRunning",
        string.format("HyperPodPyTorchJob %s is running.", name), last)
    end
    local done = train(ctl, job, m, pods, k)
    if type(done) == "table" then
      -- a log monitoring rule fired: handled as a fault on the next pass
      m.fired = done
      ctl:enqueue("hpj", k)
    elseif done then
      for _, p in ipairs(pods) do kubelet.stop(ctl, pr, p, "Succeeded", 0, "Completed") end
      st.conditions = ctl_.set_condition(st.conditions, "Running", "False", "JobSucceeded", "The job finished.")
      st.conditions = ctl_.set_condition(st.conditions, "Completed", "True", "JobSucceeded",
        string.format("HyperPodPyTorchJob %s is successfully completed.", name), last)
      st.completionTime = ctl_.stamp()
      ctl_.event(ctl, job, "Normal", "JobSucceeded", "The job completed.", "hp-training-operator")
      clean(ctl, job, pods)
    end
  end
  ctl_.put_status(ctl, r, job, st)
end

function M.watch(ctl, _, r, obj)
  if r.group == M.GROUP and r.kind == "HyperPodPyTorchJob" then
    ctl:enqueue("hpj", key(obj))
  elseif r.group == "" and r.kind == "Pod" then
    local o = ctl_.owner(obj, "HyperPodPyTorchJob")
    if o then ctl:enqueue("hpj", obj.metadata.namespace .. "/" .. o.name) end
  end
end

function M.start(ctl)
  local r = ctl:r(M.GROUP, M.VERSION, M.PLURAL)
  if not r then return end
  for _, j in ipairs(ctl.cl:list(r)) do ctl:enqueue("hpj", key(j)) end
end

return M
