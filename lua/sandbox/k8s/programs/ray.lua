-- sandbox.k8s.programs.ray: what Ray containers print. Two kinds, told
-- apart by the command KubeRay gives them:
--   `ray start ... --block`        a Ray head or worker node: the node's
--                                  start-up lines, then it runs until deleted
--   `ray job submit ... -- ENTRY`  a RayJob's submitter: the submission
--                                  lines, then (ray job logs --follow) the
--                                  entrypoint's output over simulated time,
--                                  and it exits with the entrypoint's code
-- The entrypoint's output: for VERL (verl.trainer.main_ppo) the trainer's
-- console lines, one per step (trainer.total_training_steps=N, else STEPS;
-- STEP_SECONDS of simulated time each) with loss, score and throughput;
-- for anything else the texts it echoes (echo X, print('X')). An entrypoint ending with
-- `exit N` or `sys.exit(N)` exits with N (the Ray job FAILED).
-- MLflow: a VERL entrypoint with trainer.logger=[...,mlflow] whose RayJob's
-- head (where the driver runs) has MLFLOW_TRACKING_URI set to a sandbox
-- tracking server's ARN reports as VERL's tracking does: experiment
-- trainer.project_name, run trainer.experiment_name, the config as params,
-- every step's console metrics (the same numbers) with the step, and the
-- run FINISHED or FAILED with the entrypoint (sandbox.mlflow.report).
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local mlflow = require "sandbox.mlflow.report"

local M = {}
M.STEPS = 20
M.STEP_SECONDS = 1
M.WARMUP = 3      -- simulated seconds from the submission to the first step

local words = require("sandbox.k8s.programs").command_line

local function entrypoint(c) return words(c):match("ray job submit .- %-%- (.-) ; fi ;") end

function M.match(_, c)
  local w = words(c)
  return w:find("ray start", 1, true) ~= nil or w:find("ray job submit", 1, true) ~= nil
end

local function steps(entry)
  return math.max(1, tonumber(entry:match("trainer%.total_training_steps=(%d+)")) or M.STEPS)
end

local function verl(entry) return entry:find("verl.trainer", 1, true) ~= nil end

-- duration(entry) -> simulated seconds the entrypoint runs
local function duration(entry)
  if verl(entry) then return M.WARMUP + steps(entry) * M.STEP_SECONDS end
  return M.WARMUP
end

function M.run_seconds(_, c)
  local e = entrypoint(c)
  if e then return duration(e) + 1 end
end

function M.exit_code(_, c)
  local e = entrypoint(c)
  if not e then return nil end
  return tonumber(e:match("sys%.exit%((%d+)%)%s*['\"]?%s*$") or e:match("exit%s+(%d+)%s*['\"]?%s*$")) or 0
end

local function noise(a, b)
  local x = math.sin(a * 12.9898 + b * 78.233) * 43758.5453
  return x - math.floor(x)
end

local function stamp()
  local t = core.now()
  return os.date("!%Y-%m-%d %H:%M:%S", math.floor(t)) .. string.format(",%03d", math.floor((t % 1) * 1000))
end

-- script(entry, env) -> { {at = seconds after start, text} } the entrypoint's output
local function script(entry, job_id)
  local out = {}
  local function add(at, text) out[#out + 1] = { at = at, text = text } end
  if verl(entry) then
    local n = steps(entry)
    local pid = 1800 + #entry % 400
    local tr = "(TaskRunner pid=" .. pid .. ") "
    add(0.5, tr .. "Using dataset class: RLHFDataset")
    add(1, tr .. "Size of train dataloader: " .. n .. ", Size of val dataloader: 1")
    add(1, tr .. "Total training steps: " .. n)
    add(2, tr .. "Checkpoint tracker file does not exist: " .. (entry:match("trainer%.default_local_dir=(%S+)") or
      "checkpoints") .. "/latest_checkpointed_iteration.txt")
    add(2.5, tr .. "Training from scratch")
    for i = 1, n do
      local loss = 0.05 * math.exp(-2 * i / n) + 0.01 * (noise(i, 1) - 0.5)
      local score = 0.2 + 0.55 * (1 - math.exp(-3 * i / n)) + 0.03 * (noise(i, 2) - 0.5)
      local tput = 1450 * (1 + 0.08 * (noise(2, i) - 0.5))
      local entropy, rlen = 0.6 - 0.2 * i / n, 180 + 40 * noise(i, 3)
      add(M.WARMUP + i * M.STEP_SECONDS - 0.1, string.format("%sstep:%d - actor/pg_loss:%.4f - actor/entropy:%.3f - " ..
        "critic/score/mean:%.3f - critic/rewards/mean:%.3f - response_length/mean:%.1f - perf/throughput:%.1f - " ..
        "timing_s/step:%.2f", tr, i, loss, entropy, score, score, rlen, tput, M.STEP_SECONDS))
      local f = function(fmt, x) return tonumber(string.format(fmt, x)) end
      out[#out].step, out[#out].metrics = i, { ["actor/pg_loss"] = f("%.4f", loss),
        ["actor/entropy"] = f("%.3f", entropy), ["critic/score/mean"] = f("%.3f", score),
        ["critic/rewards/mean"] = f("%.3f", score), ["response_length/mean"] = f("%.1f", rlen),
        ["perf/throughput"] = f("%.1f", tput), ["timing_s/step"] = f("%.2f", M.STEP_SECONDS) }
    end
    add(M.WARMUP + n * M.STEP_SECONDS, string.format("%sFinal validation metrics: {'val-core/openai/gsm8k/" ..
      "reward/mean@1': %.3f}", tr, 0.2 + 0.55 * (1 - math.exp(-3))))
  else
    for text in entry:gmatch("echo%s+([^;&|]+)") do
      add(1, (text:gsub("%s+$", ""):gsub("^[\"'](.*)[\"']$", "%1")))
    end
    for text in entry:gmatch("print%(%s*[\"']([^\"']*)[\"']%s*%)") do add(1, text) end
  end
  add(duration(entry) + 0.5, "")
  out[#out].text = nil -- the marker of the end: the job's last line below
  out[#out].last = job_id
  return out
end

ctl_.handlers.ray_lines = function(ctl, k)
  local mem = ctl:memo("ray_lines")
  local m = mem[k]
  if not m then return end
  local ns, name = k:match("^([^/]*)/([^/]*)/")
  local pod = ctl.cl:get(ctl:r("", "v1", "pods"), ns, name)
  if not pod or pod.metadata.uid ~= m.uid or ctl_.phase(pod) ~= "Running" then
    mlflow.finish(m.mlflow, "KILLED") -- the submitter went before the entrypoint ended
    mem[k] = nil
    return
  end
  local now = core.now()
  while m.lines[m.i] and now >= m.t0 + m.lines[m.i].at / ctl_.speed() do
    local l = m.lines[m.i]
    if l.text then
      m.log(l.text)
      if l.metrics then mlflow.log(m.mlflow, l.metrics, l.step) end
    elseif l.last then
      mlflow.finish(m.mlflow, m.code == 0 and "FINISHED" or "FAILED")
      m.log(stamp() .. "\t" .. (m.code == 0 and "SUCC" or "ERR") .. " cli.py:" .. (m.code == 0 and 90 or 93) ..
        " -- Job '" .. l.last .. "' " .. (m.code == 0 and "succeeded" or "failed"))
    end
    m.i = m.i + 1
  end
  if m.lines[m.i] then ctl:at(m.t0 + m.lines[m.i].at / ctl_.speed(), "ray_lines", k)
  else mem[k] = nil end
end

local function node_lines(env, head)
  local ip = (env.pod.status or {}).podIP or "10.0.0.1"
  local lines = { "Usage stats collection is enabled by default without user confirmation because this terminal " ..
    "is detected to be non-interactive.", "Local node IP: " .. ip, "", "--------------------", "Ray runtime started.",
    "--------------------", "" }
  if head then
    lines[#lines + 1] = "Next steps"
    lines[#lines + 1] = "  To add another node to this Ray cluster, run"
    lines[#lines + 1] = "    ray start --address='" .. ip .. ":6379'"
    lines[#lines + 1] = "  To submit a Ray job using the Ray Jobs CLI:"
    lines[#lines + 1] = "    RAY_ADDRESS='http://" .. ip .. ":8265' ray job submit --working-dir . -- python my_script.py"
  end
  lines[#lines + 1] = "--block"
  lines[#lines + 1] = "  This command will now block forever until terminated by a signal."
  lines[#lines + 1] = "  Running subprocesses are monitored and a message will be printed if any of them terminate " ..
    "unexpectedly. Subprocesses exit with SIGTERM will be treated as graceful, thus NOT reported."
  for _, l in ipairs(lines) do env.log(l) end
end

-- report_start(env, entry) -> the VERL driver's MLflow run, or nil
local function report_start(env, entry)
  if not verl(entry) or not (entry:match("trainer%.logger=(%S+)") or ""):find("mlflow", 1, true) then return nil end
  local l = env.pod.metadata.labels or {}
  local rj = l["ray.io/originated-from-cr-name"] and env.ctl:r("ray.io", "v1", "rayjobs")
  local job = rj and env.cl:get(rj, env.pod.metadata.namespace, l["ray.io/originated-from-cr-name"])
  local head = job and ((((job.spec or {}).rayClusterSpec or {}).headGroupSpec or {}).template or {}).spec
  local c = head and (head.containers or {})[1]
  local vars = mlflow.env_map(c and c.env)
  if not mlflow.target(vars) then return nil end
  local function arg(name)
    local v = entry:match("trainer%." .. name .. "=(%S+)")
    return v and (v:gsub("^'(.*)'$", "%1"))
  end
  vars.MLFLOW_EXPERIMENT_NAME = arg("project_name") or vars.MLFLOW_EXPERIMENT_NAME
  local params = { ["trainer.total_training_steps"] = steps(entry), throughput_unit = "tokens/s" }
  for k, v in entry:gmatch("(%a[%w_%.]*)=(%S+)") do
    if k:find(".", 1, true) and k ~= "trainer.logger" then params[k] = (v:gsub("^'(.*)'$", "%1")) end
  end
  local h, why = mlflow.start(env.ctl.region, vars, { run_name = arg("experiment_name") or job.metadata.name,
    params = params })
  if not h and why then env.log("WARNING mlflow: could not start the run (" .. why .. ")") end
  return h
end

function M.start(env)
  local c = env.container
  local entry = entrypoint(c)
  if not entry then return node_lines(env, words(c):find("--head", 1, true) ~= nil) end
  local w = words(c)
  local addr = w:match("ray job submit %-%-address (%S+)") or "http://127.0.0.1:8265"
  local id = w:match("%-%-submission%-id (%S+)") or "raysubmit"
  env.log(stamp() .. "\tINFO cli.py:41 -- Job submission server address: " .. addr)
  env.log(stamp() .. "\tSUCC cli.py:65 -- -------------------------------------------------------")
  env.log(stamp() .. "\tSUCC cli.py:66 -- Job '" .. id .. "' submitted successfully")
  env.log(stamp() .. "\tSUCC cli.py:67 -- -------------------------------------------------------")
  env.log(stamp() .. "\tINFO cli.py:291 -- Next steps")
  env.log(stamp() .. "\tINFO cli.py:292 -- Query the logs of the job:")
  env.log(stamp() .. "\tINFO cli.py:294 -- ray job logs " .. id)
  env.log(stamp() .. "\tINFO job_manager.py:531 -- Runtime env is setting up.")
  env.log("Running entrypoint for job " .. id .. ": " .. entry)
  local pod = env.pod
  local k = pod.metadata.namespace .. "/" .. pod.metadata.name .. "/" .. c.name
  local mem = env.ctl:memo("ray_lines")
  mem[k] = { uid = pod.metadata.uid, t0 = core.now(), i = 1, lines = script(entry, id), log = env.log,
    code = M.exit_code(pod, c), mlflow = report_start(env, entry) }
  env.ctl:at(core.now() + mem[k].lines[1].at / ctl_.speed(), "ray_lines", k)
end

return M
