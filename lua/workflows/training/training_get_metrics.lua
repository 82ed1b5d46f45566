-- training_get_metrics: what a training job reported to MLflow: its run's
-- status and params, and the latest value and recent history (with steps)
-- of its loss and throughput, read from the SageMaker managed MLflow
-- tracking server the job reports to (its MLFLOW_TRACKING_URI), or from a
-- named experiment and run.
local Names = require "_names"
local P = require "_params"
local J = require "_training_jobs"
local ML = require "training._mlflow"
local MX = require "training._metrics"
local S = require "_storage"
local hp = require "_hyperpod"

local NAME = { type = "string", pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63,
  pattern_help = "a Kubernetes name", description = "the training job (its recipe's job_name); or give experiment " ..
    "and run instead" }

local actions = { "eks:DescribeCluster" }
for _, a in ipairs(MX.ACTIONS) do actions[#actions + 1] = a end

return tool {
  name = "training_get_metrics",
  summary = "A training job's MLflow metrics: run status, params, loss and throughput (latest and history)",
  description = "Reads what a training job reported to its SageMaker managed MLflow tracking server (the one its " ..
    "MLFLOW_TRACKING_URI names; training_setup_mlflow makes it and training_submit sets it): the run (named " ..
    "after the job; the newest when the job restarted, attempts counts them) with its status (RUNNING, " ..
    "FINISHED, FAILED, KILLED), params and latest metrics, and the last `history` points (step, value) of " ..
    "its loss and throughput with their trend. Give the job's name (cluster, namespace), or experiment and run " ..
    "(a run name or id) with mlflow (the server; default the cluster's). A job without MLflow, or one that has " ..
    "not reported yet, answers a message and no metrics.",
  kind = "read",
  aws = actions,
  k8s = { "get", "list" },
  params = P.form({},
    { "name", "experiment", "history", "mlflow", "run", "namespace", "cluster", "region" },
    { name = NAME, namespace = { type = "string", default = "default",
      pattern = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", max_length = 63, pattern_help = "a Kubernetes namespace name",
      description = "the job's namespace" },
    cluster = P.cluster, region = P.region,
    experiment = { type = "string", min_length = 1, max_length = 256,
      description = "the MLflow experiment (default: the job's MLFLOW_EXPERIMENT_NAME)" },
    run = { type = "string", min_length = 1, max_length = 256,
      description = "the run's name or id (default: the job's name)" },
    mlflow = { type = "string", max_length = 2048,
      pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$|^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:" ..
        "mlflow-tracking-server/[A-Za-z0-9-]+$", pattern_help = "a tracking server name or ARN",
      description = "the tracking server, with experiment and run (default: the cluster's, hypd-<tag>-mlflow)" },
    history = { type = "integer", default = 20, minimum = 1, maximum = 1000,
      description = "the last points of loss and throughput shown" } }, { name = "Job" }),
  validate = function(p)
    if not p.name and not (p.experiment and p.run) then
      hypd.errors.refuse("name", "required", "name: give the job's name, or experiment and run")
    end
  end,
  run = function(ctx, p)
    local server, experiment, run = p.mlflow and ML.name_of(p.mlflow), p.experiment, p.run
    local out = hypd.json.object()
    if p.name then
      local e = hp.eks(ctx, p)
      out.cluster, out.region = e.name, e.region
      local job = J.find(ctx:k8s(e.name), p.name, p.namespace)
      if not job then
        hypd.errors.refuse("name", "exists", "no training job " .. p.namespace .. "/" .. p.name ..
          " (training_list_jobs lists them)", { code = "NOT_FOUND", field_message = "name: no such job" })
      end
      out.job, out.namespace, out.kind = p.name, p.namespace, job.kind
      local tr = MX.tracking(job)
      if not tr then
        out.metrics = false
        out.message = "the job " .. p.name .. " does not report to MLflow (it has no MLFLOW_TRACKING_URI): " ..
          "there are no metrics; submit with an MLflow server (training_setup_mlflow, then training_submit) " ..
          "to record loss and throughput, and read its log lines with training_get_job meanwhile"
        return out
      end
      out.tracking_uri = tr.uri
      if not tr.uri:match(ML.ARN) then
        out.metrics = false
        out.message = "the job reports to " .. tr.uri .. ", not a SageMaker managed MLflow tracking server; " ..
          "hypd reads only those (open that MLflow's UI)"
        return out
      end
      server, experiment, run = server or ML.name_of(tr.uri), experiment or tr.experiment, run or tr.run
    elseif not server then
      server = Names.mlflow(S.cluster(ctx, p).tag).server
    end
    local r = MX.read(ctx, server, experiment, run, p.history)
    for k, v in pairs(r) do out[k] = v end
    out.metrics = r.run ~= nil and (r.loss ~= nil or r.throughput ~= nil)
    out.region = out.region or ctx:aws_region()
    return out
  end,
}
