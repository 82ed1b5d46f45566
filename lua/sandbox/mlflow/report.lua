-- sandbox.mlflow.report: what a simulated trainer's MLflow client does when
-- its container has MLFLOW_TRACKING_URI set to the ARN of one of the
-- sandbox's tracking servers (the sagemaker-mlflow plugin's way): rank 0
-- finds or creates the experiment MLFLOW_EXPERIMENT_NAME (else Default),
-- starts a run (its name the job's; tags from MLFLOW_TAG_<key> variables),
-- logs the params, then the metrics of every step line it prints (the same
-- values), and ends the run FINISHED, FAILED or KILLED with the process.
-- The calls go to the tracking store directly (the pod's HTTP traffic is
-- not simulated), with the API's rules: a server that is not Created or
-- Started refuses them, and the trainer prints the client's warning.
--
--   local h, why = report.start(region, container_env, {run_name, params, tags})
--   report.log(h, {loss = 1.23, throughput = 181.2}, step)
--   report.finish(h, "FINISHED")
local core = require "hypd.core"
local api = require "sandbox.mlflow.http"
local state = require "sandbox.state"
local T = require "sandbox.mlflow.store"

local M = {}

M.ARN = "^arn:aws[%w-]*:sagemaker:([%w-]+):%d+:mlflow%-tracking%-server/([%w-]+)$"

local function ms() return math.floor(core.now() * 1000) end

-- env_map(list) -> {NAME = value} of a container's env list (or a map)
function M.env_map(env)
  local out = {}
  for k, e in pairs(env or {}) do
    if type(e) == "table" and e.name then out[e.name] = e.value
    elseif type(k) == "string" then out[k] = e end
  end
  return out
end

-- target(env) -> region, server name | nil: where MLFLOW_TRACKING_URI points
function M.target(env)
  local uri = M.env_map(env).MLFLOW_TRACKING_URI
  if type(uri) ~= "string" then return nil end
  return uri:match(M.ARN)
end

local function call(h, path, input)
  local s = state.view(h.region, "sagemaker"):get("mlflow", h.server)
  if not s then return 404, { error_code = "RESOURCE_DOES_NOT_EXIST", message = "Tracking server " .. h.server ..
    " does not exist." } end
  return api.call(h.region, s, path, input)
end

-- start(region, env, o) -> handle | nil, why (why nil: the job does not use
-- a sandbox tracking server)
function M.start(_, env, o)
  local map = M.env_map(env)
  local region, server = M.target(map)
  if not region then return nil end
  local s = state.view(region, "sagemaker"):get("mlflow", server)
  if not s or s.TrackingServerArn ~= map.MLFLOW_TRACKING_URI then
    return nil, "the tracking server " .. tostring(map.MLFLOW_TRACKING_URI) .. " does not exist"
  end
  local h = { region = region, server = server }
  local exp = map.MLFLOW_EXPERIMENT_NAME
  local id = "0"
  if exp and exp ~= "" then
    local st, out = call(h, "experiments/get-by-name", { experiment_name = exp })
    if st == 404 and out.error_code == "RESOURCE_DOES_NOT_EXIST" then
      st, out = call(h, "experiments/create", { name = exp })
      if st == 200 then out = { experiment = { experiment_id = out.experiment_id } } end
    end
    if st ~= 200 then return nil, out.error_code .. ": " .. tostring(out.message) end
    id = out.experiment.experiment_id
  end
  local tags = { { key = "mlflow.user", value = "root" }, { key = "mlflow.source.type", value = "LOCAL" } }
  for k, v in pairs(map) do
    local key = k:match("^MLFLOW_TAG_(.+)$")
    if key then tags[#tags + 1] = { key = key, value = tostring(v) } end
  end
  for k, v in pairs(o.tags or {}) do tags[#tags + 1] = { key = k, value = tostring(v) } end
  table.sort(tags, function(a, b) return a.key < b.key end)
  local st, out = call(h, "runs/create", { experiment_id = id, run_name = o.run_name, start_time = ms(), tags = tags,
    user_id = "root" })
  if st ~= 200 then return nil, out.error_code .. ": " .. tostring(out.message) end
  h.run_id, h.experiment_id = out.run.info.run_id, id
  local params = {}
  for k, v in pairs(o.params or {}) do params[#params + 1] = { key = k, value = tostring(v) } end
  table.sort(params, function(a, b) return a.key < b.key end)
  if #params > 0 then call(h, "runs/log-batch", { run_id = h.run_id, params = params }) end
  return h
end

-- log(h, metrics, step): one step's metrics (keys in order for the history)
function M.log(h, metrics, step)
  if not h then return end
  local list, t = {}, ms()
  for k, v in pairs(metrics) do list[#list + 1] = { key = k, value = v, timestamp = t, step = step } end
  table.sort(list, function(a, b) return a.key < b.key end)
  call(h, "runs/log-batch", { run_id = h.run_id, metrics = list })
end

-- finish(h, status): the run ends (FINISHED, FAILED or KILLED)
function M.finish(h, status)
  if not h or h.done then return end
  h.done = true
  call(h, "runs/update", { run_id = h.run_id, status = status, end_time = ms() })
end

M.READY = T.READY
return M
