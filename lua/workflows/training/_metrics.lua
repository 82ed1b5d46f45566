-- training/_metrics: reading what a training job reported to its SageMaker
-- managed MLflow tracking server, through the server's MLflow REST API
-- (SigV4, service sagemaker-mlflow, the regional experiments endpoint and
-- the x-mlflow-sm-tracking-server-arn header, as the sagemaker-mlflow plugin
-- sends them; a configured endpoint wins, hypd.aws.signed). training_get_metrics and
-- training_get_job share it.
--
--   M.tracking(job) -> {uri, experiment} | nil: the job's MLFLOW_* env
--   M.read(ctx, server_name, experiment, run, history) -> the view, or
--     {message} when there is nothing (yet) to show
local ML = require "training._mlflow"

local M = {}

M.ACTIONS = { "sagemaker:DescribeMlflowTrackingServer", "sagemaker-mlflow:GetExperimentByName",
  "sagemaker-mlflow:SearchRuns", "sagemaker-mlflow:GetRun", "sagemaker-mlflow:GetMetricHistory" }

-- what each framework calls its loss and its throughput, first match wins
M.LOSS = { "loss", "train/loss", "actor/pg_loss", "train_loss" }
M.THROUGHPUT = { "throughput", "perf/throughput", "train_speed_iter/s_", "train_samples_per_second" }

local function env_of(c)
  local out = {}
  for _, e in ipairs((c or {}).env or {}) do out[e.name] = e.value end
  return out
end

-- tracking(job) -> {uri, experiment, run} | nil: where the job reports (the
-- first container of its first replica spec, or its Ray head for a RayJob)
function M.tracking(job)
  local spec = job.spec or {}
  local tpl
  if job.kind == "RayJob" then
    tpl = (((spec.rayClusterSpec or {}).headGroupSpec or {}).template or {}).spec
  else
    tpl = (((spec.replicaSpecs or {})[1] or {}).template or {}).spec
  end
  local env = env_of(((tpl or {}).containers or {})[1])
  if not env.MLFLOW_TRACKING_URI then return nil end
  local experiment, run = env.MLFLOW_EXPERIMENT_NAME, job.metadata.name
  if job.kind == "RayJob" then
    -- VERL: experiment = trainer.project_name, run = trainer.experiment_name
    local function arg(n)
      local v = tostring(spec.entrypoint or ""):match("trainer%." .. n .. "=(%S+)")
      return v and (v:gsub("^'(.*)'$", "%1"))
    end
    experiment, run = arg("project_name") or experiment, arg("experiment_name") or run
  end
  return { uri = env.MLFLOW_TRACKING_URI, experiment = experiment, run = run }
end

-- endpoint(d) -> where the sagemaker-mlflow plugin sends a server's MLflow
-- calls (sagemaker_mlflow.mlflow_sagemaker_helpers get_tracking_server_url):
-- https://<region>.experiments.sagemaker.aws, the server named by the
-- x-mlflow-sm-tracking-server-arn header; the server's own TrackingServerUrl
-- host when its ARN does not parse
local function endpoint(d)
  local region = tostring(d.TrackingServerArn):match("^arn:aws[%w-]*:sagemaker:([%w-]+):")
  return region and ("https://" .. region .. ".experiments.sagemaker.aws") or d.TrackingServerUrl
end

local function api(ctx, d, action, method, path, args)
  local r = { service = "sagemaker-mlflow", action = action, url = endpoint(d), method = method,
    path = "/api/2.0/mlflow/" .. path, headers = { ["x-mlflow-sm-tracking-server-arn"] = d.TrackingServerArn },
    region = ctx:aws_region() }
  if method == "GET" then r.query = args else r.body = args end
  return hypd.aws.signed_json(r)
end

local function raise(err) error(err, 0) end

local function first(map, names)
  for _, n in ipairs(names) do if map[n] then return n end end
end

-- trend(points) -> "decreasing" | "increasing" | "flat" from the first to the last point
local function trend(points)
  if #points < 2 then return nil end
  local a, b = points[1].value, points[#points].value
  if b < a * 0.98 then return "decreasing" elseif b > a * 1.02 then return "increasing" end
  return "flat"
end

-- read(ctx, name, experiment, run, history) -> what training_get_metrics answers
function M.read(ctx, name, experiment, run, history)
  local d = ML.describe(ctx, name)
  local out = { tracking_server = { name = name } }
  if not d then
    out.message = "the MLflow tracking server " .. name .. " does not exist (any more); no metrics to read"
    return out
  end
  out.tracking_server = { name = name, arn = d.TrackingServerArn, status = d.TrackingServerStatus,
    url = d.TrackingServerUrl }
  if not ML.READY[d.TrackingServerStatus] then
    out.message = "the MLflow tracking server " .. name .. " is " .. tostring(d.TrackingServerStatus) ..
      "; it serves metrics once it is Created (or Started)"
    return out
  end
  local exp_name = experiment or "Default"
  local e, err = api(ctx, d, "GetExperimentByName", "GET", "experiments/get-by-name", { experiment_name = exp_name })
  if not e then
    if err.code == "RESOURCE_DOES_NOT_EXIST" then
      out.message = "no MLflow experiment '" .. exp_name .. "' on " .. name .. " yet: the job has not reported " ..
        "(it creates the experiment when training starts)"
      return out
    end
    raise(err)
  end
  out.experiment = { id = e.experiment.experiment_id, name = e.experiment.name }
  local runs
  if tostring(run):match("^%x+$") and #run == 32 then
    local g, gerr = api(ctx, d, "GetRun", "GET", "runs/get", { run_id = run })
    if not g then
      if gerr.code ~= "RESOURCE_DOES_NOT_EXIST" then raise(gerr) end
      runs = {}
    else
      runs = { g.run }
    end
  else
    local s = assert(api(ctx, d, "SearchRuns", "POST", "runs/search", { experiment_ids = { out.experiment.id },
      filter = "attributes.run_name = '" .. tostring(run):gsub("'", "") .. "'", max_results = 50,
      order_by = { "attributes.start_time DESC" } }))
    runs = s.runs or {}
  end
  if #runs == 0 then
    out.message = "no MLflow run '" .. tostring(run) .. "' in experiment '" .. exp_name .. "' yet: the job has " ..
      "not reported (it starts its run when training starts)"
    return out
  end
  local r = runs[1]
  local info, data = r.info, r.data or {}
  out.run = { id = info.run_id, name = info.run_name, status = info.status, start_time = info.start_time,
    end_time = info.end_time, attempts = #runs, artifact_uri = info.artifact_uri }
  out.params = hypd.json.object()
  for _, p in ipairs(data.params or {}) do out.params[p.key] = p.value end
  out.tags = hypd.json.object()
  for _, t in ipairs(data.tags or {}) do out.tags[t.key] = t.value end
  local latest = {}
  out.latest = hypd.json.object()
  for _, m in ipairs(data.metrics or {}) do
    latest[m.key] = m
    out.latest[m.key] = { value = m.value, step = m.step, timestamp = m.timestamp }
  end
  for what, names in pairs { loss = M.LOSS, throughput = M.THROUGHPUT } do
    local key = first(latest, names)
    if key then
      local h = assert(api(ctx, d, "GetMetricHistory", "GET", "metrics/get-history",
        { run_id = info.run_id, metric_key = key }))
      local pts = h.metrics or {}
      table.sort(pts, function(a, b)
        if a.step ~= b.step then return a.step < b.step end
        return a.timestamp < b.timestamp
      end)
      local hist = hypd.json.array()
      for i = math.max(1, #pts - history + 1), #pts do hist[#hist + 1] = { step = pts[i].step, value = pts[i].value } end
      out[what] = { key = key, latest = latest[key].value, step = latest[key].step, points = #pts, history = hist,
        trend = trend(pts), unit = what == "throughput" and out.params.throughput_unit or nil }
    end
  end
  if not out.loss and not out.throughput then
    out.message = "the run " .. info.run_id .. " has logged no loss or throughput yet"
  end
  return out
end

return M
