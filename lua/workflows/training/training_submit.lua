-- training_submit: a recipe's objects (training_render's) applied to the
-- cluster with server-side apply (field manager hypd), after the checks
-- that refuse before anything is created: the operator the job's kind needs
-- is on, and some instance group of the HyperPod cluster can ever hold it.
local P = require "_params"
local R = require "training._recipe"
local J = require "_training_jobs"
local cap = require "_capacity"
local K = require "_k8s_objects"
local ML = require "training._mlflow"
local S = require "_storage"

local FAMILY = "training"

-- with_mlflow(ctx, p, e) -> the recipe's params with params.mlflow filled
-- from the tool's mlflow (a server name or ARN, "none", or the cluster's own
-- server when it exists), and the server used
local function with_mlflow(ctx, p, e)
  local params = hypd.json.object()
  for k, v in pairs(p.params or {}) do params[k] = v end
  if type(params.mlflow) == "table" and params.mlflow.tracking_uri then return params, nil end
  local tag = S.tag_of(e.name, e.record)
  local server = ML.for_job(ctx, tag, p.mlflow)
  if server then
    local m = hypd.json.object()
    for k, v in pairs(type(params.mlflow) == "table" and params.mlflow or {}) do m[k] = v end
    m.tracking_uri = server.arn
    -- the pods' IRSA for MLflow (training_setup_mlflow pod_access), when it is in the job's namespace
    local sa = K.get(ctx:k8s(e.name), "v1", "ServiceAccount", ML.SERVICE_ACCOUNT, params.namespace or "default")
    if sa and m.service_account == nil then
      m.service_account = ML.SERVICE_ACCOUNT
      server.service_account = ML.SERVICE_ACCOUNT
    end
    params.mlflow = m
  end
  return params, server
end

local function check(ctx)
  local p, st = ctx.params, ctx.state
  local e, d = cap.cluster(ctx, p)
  st.eks, st.region, st.hyperpod = e.name, e.region, e.hyperpod
  local with, server = with_mlflow(ctx, p, e)
  st.mlflow = server
  local params, objects = R.render(ctx, p.recipe, with)
  local conn = ctx:k8s(e.name)
  for _, o in ipairs(objects) do
    local k = J.KINDS[o.kind]
    local why = k and (not J.served(conn, o.kind) and "not enabled" or J.operator_missing(conn, o.kind))
    if why then
      local fix = k.fix .. " cluster=" .. e.name -- a whole call (hypd.hints): it names the cluster
      hypd.errors.refuse("recipe", "operator", string.format("a %s needs %s, which is %s on cluster %s: enable it " ..
        "with %s, then submit again", o.kind, k.operator, why == "not enabled" and why or ("not running (" .. why ..
        ")"), e.name, fix), { code = "CONFLICT", field_message = "recipe: " .. o.kind .. " needs " .. fix, fix = fix })
    end
    if k then
      J.fit(d, o)
      J.elastic_check(d, o)
    end
  end
  -- a job (or any object of the recipe) of its name that another tool or
  -- anyone else made is never taken over (_ownership)
  K.claim(conn, objects, FAMILY, { cluster = e.name })
  st.params, st.objects = params, objects
end

local function apply(ctx)
  local st = ctx.state
  local conn = ctx:k8s(st.eks)
  st.applied = {}
  for _, o in ipairs(st.objects) do
    local obj, action = K.ensure(ctx, conn, o, { family = FAMILY, field = "name" })
    st.applied[#st.applied + 1] = { kind = o.kind, name = o.metadata.name, namespace = o.metadata.namespace,
      action = action, uid = obj and obj.uid }
  end
end

local QUEUED = 600 -- seconds a pod may wait for the scheduler before the job is reported queued

local function wait(ctx)
  local st = ctx.state
  if ctx.plan then return end
  local conn = ctx:k8s(st.eks)
  local main = st.objects[1]
  local ns, name = main.metadata.namespace, main.metadata.name
  local unplaced -- since when a pod of the job cannot be placed
  st.phase = ctx:poll { what = main.kind .. " " .. ns .. "/" .. name .. " to be Running", every = 5,
    timeout = 30 * 60,
    check = function()
      local job = J.find(conn, name, ns)
      local ph = job and J.phase(job) or "Pending"
      if ph == "Running" or J.DONE[ph] ~= nil then return true, nil, ph end
      -- a pod the scheduler still cannot place after QUEUED seconds (the
      -- GPUs are busy): the job is queued, not failed; the answer says why,
      -- as inference deploys do
      local why
      for _, pod in ipairs(job and J.pods(conn, job) or {}) do
        for _, c in ipairs((pod.status or {}).conditions or {}) do
          if c.type == "PodScheduled" and c.status == "False" then
            why = why or (pod.metadata.name .. ": " .. tostring(c.message or c.reason))
          end
        end
      end
      if not why then unplaced = nil
      else
        unplaced = unplaced or hypd.now()
        if hypd.now() - unplaced >= QUEUED then
          st.pending_reason = why
          return true, nil, "Pending"
        end
      end
      return false, "the job is " .. ph .. (why and (" (" .. why .. ")") or ""), ph
    end }
end

local function result(ctx)
  local st, p = ctx.state, ctx.params
  if ctx.plan then return end
  local main = st.objects[1]
  st.result = { cluster = st.eks, region = st.region, hyperpod_cluster = st.hyperpod, recipe = p.recipe,
    name = main.metadata.name, namespace = main.metadata.namespace, kind = main.kind, phase = st.phase,
    pending_reason = st.pending_reason,
    objects = st.applied, params = st.params, mlflow = st.mlflow,
    next = "training_get_job name=" .. main.metadata.name .. " namespace=" .. main.metadata.namespace ..
      " wait_seconds=60" }
end

return tool {
  name = "training_submit",
  summary = "Submit a training recipe: its objects applied to the cluster, followed until the job runs",
  description = "Submits a training recipe with its parameters (training_list_recipes gives them; training_render " ..
    "shows the objects) to the active (or named) cluster and waits until the job runs, or is queued with " ..
    "the scheduler's reason. Refused first, naming the fix: the operator the job needs is off (training " ..
    "operator, KubeRay), no instance group can hold it, or the cluster does not allow what it asks " ..
    "(elastic on spot, ...). Follow it with training_get_job (wait_seconds); plan = true lists the " ..
    "objects.",
  kind = "mutating",
  aws = cap.aws("sagemaker:DescribeMlflowTrackingServer"),
  k8s = { "get", "list", "apply" },
  params = P.form({ "recipe", "params" },
    { "mlflow", "cluster", "region" },
    { recipe = R.recipe, params = R.params, cluster = P.cluster, region = P.region,
    mlflow = { type = "string", max_length = 2048,
      pattern = "^none$|^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,255}$|^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:" ..
        "mlflow-tracking-server/[A-Za-z0-9-]+$",
      pattern_help = "a tracking server name or ARN, or none",
      description = "the MLflow tracking server the job reports to (name or ARN; none: no MLflow). Default: the " ..
        "cluster's own (hypd-<tag>-mlflow, training_setup_mlflow) when it exists. The job gets " ..
        "MLFLOW_TRACKING_URI (the server's ARN) and MLFLOW_EXPERIMENT_NAME (params.mlflow.experiment_name, " ..
        "default the job name); the recipes report loss and throughput to it" } }),
  status_tool = "training_get_job",
  -- bad recipe parameters are refused at the call, before an operation starts
  validate = function(p)
    local params = p.params
    if type(params) == "table" and type(params.mlflow) == "table" and params.mlflow.tracking_uri == nil then
      -- the tracking URI comes from the mlflow parameter inside the operation: check the rest now
      params = hypd.json.object()
      for k, v in pairs(p.params) do params[k] = v end
      params.mlflow = hypd.json.object()
      for k, v in pairs(p.params.mlflow) do params.mlflow[k] = v end
      params.mlflow.tracking_uri = "arn:aws:sagemaker:us-east-1:000000000000:mlflow-tracking-server/checked-later"
    end
    R.render(nil, p.recipe, params)
  end,
  target = function(p)
    local job = type(p.params) == "table" and p.params.job_name or "?"
    local ns = type(p.params) == "table" and p.params.namespace or "default"
    return (cap.target(p, tostring(ns) .. "/" .. tostring(job)):gsub("^hyperpod/", "training/"))
  end,
  steps = {
    { name = "check", run = check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "apply", run = apply },
    { name = "wait", run = wait },
    { name = "result", run = result },
  },
}
