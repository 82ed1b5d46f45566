-- recipes/_common.lua: what every recipe shares. The parameters of a job
-- on the cluster (name, image, instance type or group, replicas, GPUs and
-- EFA, recovery budget), the data contract (the S3 storage claim mounted at
-- /s3 in every pod: datasets read from it, checkpoints and outputs written
-- under it), and the objects: a HyperPodPyTorchJob (sagemaker.amazonaws.com/v1)
-- and a RayJob (ray.io/v1).
local M = {}

M.MOUNT = "/s3"
M.MANAGED = { ["app.kubernetes.io/managed-by"] = "hypd" }

-- GPUs and EFA interfaces per instance type (the HyperPod GPU types)
M.GPU = {
  ["ml.g5.xlarge"] = { 1, 0 }, ["ml.g5.2xlarge"] = { 1, 0 }, ["ml.g5.4xlarge"] = { 1, 0 },
  ["ml.g5.8xlarge"] = { 1, 1 }, ["ml.g5.16xlarge"] = { 1, 1 }, ["ml.g5.12xlarge"] = { 4, 1 },
  ["ml.g5.24xlarge"] = { 4, 1 }, ["ml.g5.48xlarge"] = { 8, 1 },
  ["ml.g6.xlarge"] = { 1, 0 }, ["ml.g6.2xlarge"] = { 1, 0 }, ["ml.g6.4xlarge"] = { 1, 0 },
  ["ml.g6.8xlarge"] = { 1, 1 }, ["ml.g6.16xlarge"] = { 1, 1 }, ["ml.g6.12xlarge"] = { 4, 1 },
  ["ml.g6.24xlarge"] = { 4, 1 }, ["ml.g6.48xlarge"] = { 8, 1 },
  ["ml.g6e.xlarge"] = { 1, 0 }, ["ml.g6e.2xlarge"] = { 1, 0 }, ["ml.g6e.4xlarge"] = { 1, 0 },
  ["ml.g6e.8xlarge"] = { 1, 1 }, ["ml.g6e.16xlarge"] = { 1, 1 }, ["ml.g6e.12xlarge"] = { 4, 1 },
  ["ml.g6e.24xlarge"] = { 4, 2 }, ["ml.g6e.48xlarge"] = { 8, 4 },
  ["ml.p4d.24xlarge"] = { 8, 4 }, ["ml.p4de.24xlarge"] = { 8, 4 },
  ["ml.p5.48xlarge"] = { 8, 32 }, ["ml.p5e.48xlarge"] = { 8, 32 }, ["ml.p5en.48xlarge"] = { 8, 16 },
  ["ml.p6-b200.48xlarge"] = { 8, 8 },
}

local DNS = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
-- a path under /s3: no leading '/', no '..'
local SEG = "[A-Za-z0-9_-][A-Za-z0-9._-]*"
local REL = "^" .. SEG .. "(/" .. SEG .. ")*$"

local function s(spec) return spec end

-- the parameters every recipe takes
function M.params(image, extra)
  local p = {
    job_name = s { type = "string", required = true, decision = true, pattern = DNS, max_length = 53,
      pattern_help = "a Kubernetes name: lowercase letters, digits and '-', starting and ending with a letter or digit",
      description = "the job's name (its pods and its output folder are named after it)" },
    namespace = s { type = "string", default = "default", pattern = DNS, max_length = 63,
      pattern_help = "a Kubernetes namespace name", description = "the namespace the job runs in" },
    image = s { type = "string", default = image, pattern = "^[a-zA-Z0-9][a-zA-Z0-9._/:@-]*$", max_length = 512,
      pattern_help = "a container image reference like registry/name:tag", description = "the container image" },
    instance_type = s { type = "string", required = true, decision = true, pattern = "^ml\\.[a-z0-9-]+\\.[a-z0-9]+$",
      pattern_help = "a HyperPod instance type like ml.g5.12xlarge",
      description = "the instance type the pods run on (sets the GPU and EFA requests unless given)" },
    instance_group = s { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
      pattern_help = "an instance group name: up to 63 letters, digits and '-'",
      description = "place the pods on this HyperPod instance group (instead of by instance type)" },
    replicas = s { type = "integer", default = 1, minimum = 1, maximum = 1000,
      description = "how many nodes (pods) the job runs on" },
    gpus_per_node = s { type = "integer", minimum = 1, maximum = 64,
      description = "GPUs each pod requests (and processes per node); default: the instance type's GPUs" },
    efa_per_node = s { type = "integer", minimum = 0, maximum = 64,
      description = "EFA interfaces each pod requests; default: the instance type's" },
    storage_claim = s { type = "string", default = "s3-claim", pattern = DNS, max_length = 253,
      pattern_help = "a PersistentVolumeClaim name",
      description = "the S3 storage claim mounted at /s3 (datasets are read from it, outputs written to it)" },
    max_retries = s { type = "integer", default = 5, minimum = 0, maximum = 100,
      description = "the recovery budget: how many times the job is restarted after a failure (jobMaxRetryCount)" },
    mlflow = s { type = "object", properties = {
      tracking_uri = { type = "string", required = true, max_length = 2048,
        pattern = "^arn:aws[a-z-]*:sagemaker:[a-z0-9-]+:[0-9]{12}:mlflow-tracking-server/[A-Za-z0-9-]+$|^https?://[^ ]+$",
        pattern_help = "a SageMaker MLflow tracking server ARN (or an http(s) MLflow URL)",
        description = "MLFLOW_TRACKING_URI: the tracking server's ARN (training_get_mlflow's tracking_uri)" },
      experiment_name = { type = "string", min_length = 1, max_length = 256, pattern = "^[A-Za-z0-9][A-Za-z0-9 _./:-]*$",
        pattern_help = "letters, digits, spaces and _ . / : -",
        description = "MLFLOW_EXPERIMENT_NAME (default: the job name)" },
      service_account = { type = "string", pattern = DNS, max_length = 253, pattern_help = "a ServiceAccount name",
        description = "the pods' service account (its IRSA role may use the tracking server; training_submit " ..
          "sets hypd-mlflow when training_setup_mlflow made it)" },
    }, description = "report to MLflow: the job gets MLFLOW_TRACKING_URI and MLFLOW_EXPERIMENT_NAME and the " ..
      "recipe logs loss and throughput to it (training_submit fills it from its mlflow parameter)" },
  }
  for k, v in pairs(extra or {}) do p[k] = v end
  return M.form(p)
end

-- a person's words for the recipes' parameters (a recipe's own label wins)
M.LABELS = { job_name = "Job name", namespace = "Namespace", image = "Container image", instance_type = "Instance type",
  instance_group = "Instance group", replicas = "Nodes", gpus_per_node = "GPUs per node", efa_per_node = "EFA per node",
  storage_claim = "Storage claim", max_retries = "Restarts after a failure", mlflow = "MLflow tracking",
  log_monitoring = "Log monitoring rules", hang_detection = "Hang detection", elastic = "Elastic training",
  checkpointless = "Checkpointless training", model = "Model", dataset = "Dataset", dataset_dir = "Dataset folder",
  epochs = "Epochs", finetuning_type = "Fine-tuning type", learning_rate = "Learning rate", template = "Chat template",
  mode = "Training mode", train_type = "Training type", script = "Training script", args = "Script arguments",
  launcher = "Launcher", algorithm = "Algorithm", ray_version = "Ray version", train_files = "Training data",
  val_files = "Validation data", tracking_uri = "Tracking server", experiment_name = "Experiment",
  service_account = "Service account", min_replicas = "Fewest nodes", max_replicas = "Most nodes",
  replica_increment_step = "Step", start_pattern = "Start line", progress_pattern = "Progress line",
  start_cutoff_seconds = "Start within (seconds)", progress_frequency_seconds = "Longest gap between progress lines (seconds)" }
-- the form's order: these decisions first, the recipe's own decisions, the
-- recipe's other parameters, then these
local FIRST = { "job_name", "instance_type", "replicas" }
local LAST = { "image", "instance_group", "gpus_per_node", "efa_per_node", "storage_claim", "max_retries",
  "hang_detection", "log_monitoring", "elastic", "checkpointless", "mlflow", "namespace" }

local NESTED = { tracking_uri = 1, experiment_name = 2, service_account = 3, min_replicas = 1, max_replicas = 2,
  replica_increment_step = 3, start_pattern = 1, start_cutoff_seconds = 2, progress_pattern = 3,
  progress_frequency_seconds = 4 }

-- labelled(spec, key) -> a copy of spec whose nested fields have their labels too
local function labelled(spec, key)
  local c = {}
  for k, v in pairs(spec) do c[k] = v end
  c.label = c.label or M.LABELS[key]
  if spec.properties then
    c.properties = {}
    local names = {}
    for k in pairs(spec.properties) do names[#names + 1] = k end
    table.sort(names, function(x, y) return (NESTED[x] or 99) < (NESTED[y] or 99) or
      ((NESTED[x] or 99) == (NESTED[y] or 99) and x < y) end)
    for i, k in ipairs(names) do
      c.properties[k] = labelled(spec.properties[k], k)
      c.properties[k].order = c.properties[k].order or i
    end
  end
  return c
end

-- form(p) -> p with each parameter's label, group and order for the web
-- form (hypd.tool.registry): decisions first; elastic training, an option
-- a person turns to, among the rest
function M.form(p)
  local rank, names = {}, {}
  for i, k in ipairs(FIRST) do rank[k] = i end
  for i, k in ipairs(LAST) do rank[k] = 1000 + i end
  for k in pairs(p) do names[#names + 1] = k end
  local function decision(k) return k ~= "elastic" and (p[k].decision or p[k].required) end
  table.sort(names, function(a, b)
    local ra = rank[a] or (decision(a) and 100 or 500)
    local rb = rank[b] or (decision(b) and 100 or 500)
    if ra ~= rb then return ra < rb end
    return a < b
  end)
  local out = {}
  for i, k in ipairs(names) do
    out[k] = labelled(p[k], k)
    out[k].order, out[k].group = i, decision(k) and "decisions" or "more"
  end
  return out
end

-- mlflow(p) -> nil | {uri, experiment, run}: where the job reports
function M.mlflow(p)
  if not p.mlflow then return nil end
  return { uri = p.mlflow.tracking_uri, experiment = p.mlflow.experiment_name or p.job_name, run = p.job_name }
end

-- Log monitoring (HyperPodPyTorchJob runPolicy.logMonitoringConfiguration):
-- rules the HyperPod elastic agent evaluates on each training process's
-- stdout (hyperpod-elastic-agent's LogEvaluator): a rule whose logPattern
-- does not match within expectedStartCutOffInSeconds of the start, or not
-- again within expectedRecurringFrequencyInSeconds, marks the job HANGING;
-- a captured value compared to metricThreshold by operator for
-- metricEvaluationDataPoints lines in a row marks it SLOW; stopPattern ends
-- the rule; the training operator then restarts the job (a retry of its
-- budget). Patterns are matched at the start of a line (Python re.match),
-- so they usually begin with ".*".
local RULE_NAME = "^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$"
local SECONDS = { type = "integer", minimum = 1, maximum = 7 * 24 * 3600 }
local function secs(d) local x = {}; for k, v in pairs(SECONDS) do x[k] = v end; x.description = d; return x end

M.RULE = { type = "object", properties = {
  name = { type = "string", required = true, pattern = RULE_NAME, pattern_help = "up to 63 letters, digits, '_', '.' " ..
    "or '-'", description = "the rule's name (shown when it fires)" },
  log_pattern = { type = "string", required = true, min_length = 1, max_length = 1024,
    description = "the regular expression of the lines the rule watches, matched at the start of a line " ..
      "(begin with .* to match anywhere); a metric rule captures the value in its first group" },
  expected_start_cutoff_seconds = secs("the job hangs when no line matches within this many seconds of the start"),
  expected_recurring_frequency_seconds = secs("the job hangs when no line matches for this many seconds after " ..
    "the last match"),
  metric_threshold = { type = "integer", minimum = -1000000000, maximum = 1000000000,
    description = "the threshold the captured value is compared to (an integer: the elastic agent reads it with " ..
      "int())" },
  operator = { type = "string", enum = { "gt", "gteq", "lt", "lteq", "eq" },
    description = "how the captured value is compared to metric_threshold: when true for " ..
      "metric_evaluation_data_points lines in a row the job is SLOW" },
  metric_evaluation_data_points = { type = "integer", minimum = 1, maximum = 100000,
    description = "how many matching lines in a row must meet the condition (default 1)" },
  stop_pattern = { type = "string", min_length = 1, max_length = 1024,
    description = "a regular expression: the rule stops watching at the first line it matches" },
} }

M.MONITORING = {
  log_monitoring = { type = "array", items = M.RULE, default = hypd.json.array(),
    description = "log monitoring rules for hang and stall detection (runPolicy.logMonitoringConfiguration): each " ..
      "{name, log_pattern, expected_start_cutoff_seconds?, expected_recurring_frequency_seconds?, " ..
      "metric_threshold?, operator? (gt|gteq|lt|lteq|eq), metric_evaluation_data_points?, stop_pattern?}; a rule " ..
      "that fires restarts the job (one retry of max_retries)" },
  hang_detection = { type = { "boolean", "object" }, default = false,
    properties = {
      start_pattern = { type = "string", min_length = 1, max_length = 1024,
        description = "the line that shows training started (default: the recipe's)" },
      progress_pattern = { type = "string", min_length = 1, max_length = 1024,
        description = "the line every training step (or logging step) prints (default: the recipe's)" },
      start_cutoff_seconds = secs("how long the start may take (default 600)"),
      progress_frequency_seconds = secs("the longest gap between two progress lines (default 1800)"),
    },
    description = "true (or an object to tune it) adds two rules: JobStart (the recipe's start line within " ..
      "start_cutoff_seconds) and JobHangingDetection (a progress line at least every progress_frequency_seconds); " ..
      "the patterns match what the recipe's program prints" },
}

local function rule_error(field, rule, msg)
  hypd.errors.raise("VALIDATION", msg, { fields = { { field = field, rule = rule, message = msg } } })
end

local function check_regex(field, src)
  local ok, err = hypd.regex.compile(src)
  if not ok then rule_error(field, "pattern", field .. ": not a regular expression hypd can check: " .. tostring(err)) end
  return ok
end

-- log_monitoring(p, hang) -> the runPolicy.logMonitoringConfiguration list
-- (nil when empty); hang = {start = pattern, progress = pattern} the
-- recipe's defaults for hang_detection. Raises VALIDATION naming
-- log_monitoring[i].<field> (rule pattern, requires, capture, condition,
-- unique)
function M.log_monitoring(p, hang)
  local out, seen = {}, {}
  local function add(r, at)
    local f = at .. "."
    local re = check_regex(f .. "log_pattern", r.log_pattern)
    if r.stop_pattern then check_regex(f .. "stop_pattern", r.stop_pattern) end
    if (r.metric_threshold ~= nil) ~= (r.operator ~= nil) then
      local miss = r.operator == nil and "operator" or "metric_threshold"
      rule_error(f .. miss, "requires", f .. miss .. ": a metric rule takes both metric_threshold and operator")
    end
    if r.metric_evaluation_data_points and r.operator == nil then
      rule_error(f .. "operator", "requires", f .. "operator: metric_evaluation_data_points needs operator and " ..
        "metric_threshold")
    end
    if r.operator ~= nil and (re.groups or 0) == 0 then
      rule_error(f .. "log_pattern", "capture", f .. "log_pattern: a metric rule captures the value in a group " ..
        "( ... ), e.g. .*loss=(\\d+(\\.\\d+)?).*")
    end
    if not (r.expected_start_cutoff_seconds or r.expected_recurring_frequency_seconds or r.operator) then
      rule_error(f .. "expected_start_cutoff_seconds", "condition", f .. "expected_start_cutoff_seconds: a rule " ..
        "needs a condition: expected_start_cutoff_seconds, expected_recurring_frequency_seconds or " ..
        "metric_threshold with operator")
    end
    if seen[r.name] then
      rule_error(f .. "name", "unique", f .. "name: rule " .. r.name .. " is given twice")
    end
    seen[r.name] = true
    out[#out + 1] = { name = r.name, logPattern = r.log_pattern,
      expectedStartCutOffInSeconds = r.expected_start_cutoff_seconds,
      expectedRecurringFrequencyInSeconds = r.expected_recurring_frequency_seconds,
      metricThreshold = r.metric_threshold, operator = r.operator,
      metricEvaluationDataPoints = r.metric_evaluation_data_points, stopPattern = r.stop_pattern }
  end
  local hd = p.hang_detection
  if hd then
    local o = type(hd) == "table" and hd or {}
    local start = o.start_pattern or (hang and hang.start)
    local progress = o.progress_pattern or (hang and hang.progress)
    if start then
      add({ name = "JobStart", log_pattern = start, expected_start_cutoff_seconds = o.start_cutoff_seconds or 600 },
        "hang_detection")
    end
    if progress then
      add({ name = "JobHangingDetection", log_pattern = progress,
        expected_start_cutoff_seconds = (o.start_cutoff_seconds or 600) + (o.progress_frequency_seconds or 1800),
        expected_recurring_frequency_seconds = o.progress_frequency_seconds or 1800 }, "hang_detection")
    end
  end
  for i, r in ipairs(p.log_monitoring or {}) do add(r, "log_monitoring[" .. (i - 1) .. "]") end
  if #out == 0 then return nil end
  return out
end

-- the patterns hang_detection watches: what the recipe's program prints.
-- A script of your own (pytorch-torchrun) prints the reference templates'
-- start marker and a loss per step; the Hugging Face Trainer (LLaMA-Factory,
-- MS-Swift) prints "***** Running training *****" and {'loss': ...} lines
M.HANG_PLAIN = { start = ".*Experiment configuration.*", progress = ".*[Ll]oss[:=] ?(\\d+(\\.\\d+)?).*" }
M.HANG_HF = { start = ".*\\*\\*\\*\\*\\* Running training \\*\\*\\*\\*\\*.*",
  progress = ".*'loss': (\\d+(\\.\\d+)?).*" }

-- Elastic training (spec.elasticPolicy, training operator 1.2+): the job
-- starts with `replicas` pods and the operator scales it between
-- min_replicas and max_replicas data-parallel replicas as capacity comes
-- and goes. Refused for checkpointless training here, and at submission on
-- spot capacity and with managed tiered checkpointing (training/_jobs.lua
-- M.elastic_check): AWS documents checkpointless training as "currently
-- incompatible with HyperPod managed tiered checkpointing and elastic
-- training" (docs.aws.amazon.com/sagemaker/latest/dg/
-- sagemaker-eks-checkpointless-considerations.html). The spot refusal is
-- the issue's rule: AWS's elastic training page
-- (sagemaker-eks-elastic-training.html) states no spot restriction that
-- hypd found; a spot reclaim takes a node with two minutes' notice, before
-- the checkpoint an elastic scale-down relies on.
M.ELASTIC = {
  elastic = { type = "object", decision = true, properties = {
    min_replicas = { type = "integer", required = true, minimum = 1, maximum = 1000,
      description = "the fewest nodes (pods) the job keeps running" },
    max_replicas = { type = "integer", required = true, minimum = 1, maximum = 1000,
      description = "the most nodes (pods) the job grows to" },
    replica_increment_step = { type = "integer", minimum = 1, maximum = 1000,
      description = "grow and shrink by this many replicas at a time (default 1)" },
  }, description = "elastic training (elasticPolicy): the job starts with replicas pods and scales between " ..
    "min_replicas and max_replicas as capacity allows; refused on spot capacity, with managed tiered checkpointing " ..
    "on the cluster, and with checkpointless" },
  checkpointless = { type = "boolean", default = false,
    description = "the job uses HyperPod checkpointless training (peer-to-peer state recovery; training operator " ..
      "1.2+): refused with elastic and on a cluster with managed tiered checkpointing, which AWS documents as " ..
      "incompatible" },
}

-- elastic_policy(p) -> spec.elasticPolicy (nil without p.elastic), the max
-- replicas; raises VALIDATION naming params.elastic.<field> or params.replicas
function M.elastic_policy(p)
  local e = p.elastic
  if not e then return nil end
  if p.checkpointless then
    rule_error("elastic", "checkpointless", "elastic: elastic training cannot run with checkpointless training " ..
      "(AWS: checkpointless training is incompatible with elastic training); drop elastic or checkpointless")
  end
  if e.max_replicas < e.min_replicas then
    rule_error("elastic.max_replicas", "range", string.format("elastic.max_replicas: %d is below min_replicas %d",
      e.max_replicas, e.min_replicas))
  end
  if p.replicas < e.min_replicas or p.replicas > e.max_replicas then
    rule_error("replicas", "range", string.format("replicas: the job starts with %d pods, outside elastic's %d..%d",
      p.replicas, e.min_replicas, e.max_replicas))
  end
  local step = e.replica_increment_step
  if step and e.max_replicas > e.min_replicas and step > e.max_replicas - e.min_replicas then
    rule_error("elastic.replica_increment_step", "range", string.format("elastic.replica_increment_step: %d is " ..
      "more than max_replicas - min_replicas (%d)", step, e.max_replicas - e.min_replicas))
  end
  return { minReplicas = e.min_replicas, maxReplicas = e.max_replicas, replicaIncrementStep = step }, e.max_replicas
end

-- hpj_params(image, extra) -> params(image, extra) with the options of a
-- HyperPodPyTorchJob (log monitoring, elastic training, checkpointless)
function M.hpj_params(image, extra)
  local p = M.params(image, extra)
  for k, v in pairs(M.MONITORING) do p[k] = v end
  for k, v in pairs(M.ELASTIC) do p[k] = v end
  return M.form(p)
end

-- path(description [, required]) -> the spec of a path under /s3
function M.path(description, required)
  return { type = "string", required = required, decision = required or nil, pattern = REL, max_length = 1024,
    pattern_help = "a path inside the storage (under /s3), without a leading '/' or '..'", description = description }
end

-- a Hugging Face model id or a path under /s3
M.MODEL = { type = "string", required = true, decision = true, max_length = 256,
  pattern = REL,
  pattern_help = "a Hugging Face model id (Qwen/Qwen2.5-0.5B-Instruct) or a path under /s3 (models/qwen)",
  description = "the model: a path under /s3 (what model_download wrote) or a Hugging Face model id" }

-- model_path(m) -> /s3/<m> when it names a folder of the storage (models/...), else the id
function M.model_path(m)
  if m:match("^models/") then return M.MOUNT .. "/" .. m end
  return m
end

-- sizes(p) -> gpus, efa per pod (a VALIDATION naming gpus_per_node when unknown)
function M.sizes(p)
  local known = M.GPU[p.instance_type]
  local gpus = p.gpus_per_node or (known and known[1])
  if not gpus then
    local msg = "gpus_per_node: required for " .. p.instance_type .. " (hypd does not know its GPUs)"
    hypd.errors.raise("VALIDATION", msg, { fields = { { field = "gpus_per_node", rule = "required", message = msg } } })
  end
  return gpus, p.efa_per_node or (known and known[2]) or 0
end

-- dirs(p) -> the job's checkpoint and output folders under /s3
function M.dirs(p)
  return M.MOUNT .. "/checkpoints/" .. p.job_name, M.MOUNT .. "/outputs/" .. p.job_name
end

local function labels(p, recipe)
  return { ["app.kubernetes.io/managed-by"] = "hypd", ["app.kubernetes.io/name"] = p.job_name,
    ["hypd.io/recipe"] = recipe }
end

-- pod_spec(p, container) -> a pod's spec with the data contract and placement
function M.pod_spec(p, c, gpu)
  local ckpt, out = M.dirs(p)
  c.volumeMounts = { { name = "s3", mountPath = M.MOUNT }, { name = "shm", mountPath = "/dev/shm" } }
  local env = { { name = "DATA_DIR", value = M.MOUNT }, { name = "CHECKPOINT_DIR", value = ckpt },
    { name = "OUTPUT_DIR", value = out } }
  local ml = M.mlflow(p)
  if ml then
    -- the reference templates' MLflow contract (the sagemaker-mlflow plugin resolves the ARN)
    env[#env + 1] = { name = "MLFLOW_TRACKING_URI", value = ml.uri }
    env[#env + 1] = { name = "MLFLOW_EXPERIMENT_NAME", value = ml.experiment }
    env[#env + 1] = { name = "MLFLOW_TAG_hypd_job", value = p.job_name }
  end
  for _, e in ipairs(c.env or {}) do env[#env + 1] = e end
  c.env = env
  if gpu then
    local gpus, efa = M.sizes(p)
    local res = { ["nvidia.com/gpu"] = gpus }
    if efa > 0 then
      res["vpc.amazonaws.com/efa"] = efa
      c.env[#c.env + 1] = { name = "FI_PROVIDER", value = "efa" }
    end
    c.env[#c.env + 1] = { name = "NCCL_SOCKET_IFNAME", value = "eth0" }
    c.resources = { requests = res, limits = res }
  end
  local sel = p.instance_group and { ["sagemaker.amazonaws.com/instance-group-name"] = p.instance_group } or
    { ["node.kubernetes.io/instance-type"] = p.instance_type }
  return { nodeSelector = sel, containers = { c }, serviceAccountName = p.mlflow and p.mlflow.service_account or nil,
    tolerations = gpu and { { key = "nvidia.com/gpu", operator = "Exists", effect = "NoSchedule" } } or nil,
    volumes = { { name = "s3", persistentVolumeClaim = { claimName = p.storage_claim } },
      { name = "shm", emptyDir = { medium = "Memory" } } } }
end

-- launch(p, argv) -> torchrun with the job's nodes and processes per node, then argv
-- (hyperpodrun, the training operator's torchrun with its elastic agent on
-- port 8080, unless p.launcher is "torchrun")
function M.launch(p, argv)
  local gpus = M.sizes(p)
  local parts = { p.launcher or "hyperpodrun", "--nnodes=" .. p.replicas, "--nproc-per-node=" .. gpus }
  if parts[1] == "hyperpodrun" then
    for _, a in ipairs { "--server-host=0.0.0.0", "--server-port=8080", "--tee=3", "--log_dir=/tmp/hyperpod" } do
      parts[#parts + 1] = a
    end
  end
  for _, a in ipairs(argv) do parts[#parts + 1] = a end
  return parts
end

-- pytorch_job(p, recipe, container [, opts]) -> a HyperPodPyTorchJob;
-- opts.hang = {start, progress}: the patterns hang_detection uses
function M.pytorch_job(p, recipe, c, opts)
  opts = opts or {}
  local gpus = M.sizes(p)
  local monitoring = M.log_monitoring(p, opts.hang)
  local elastic, max_replicas = M.elastic_policy(p)
  local lab = labels(p, recipe)
  if p.checkpointless then lab["hypd.io/checkpointless"] = "true" end
  c.name = c.name or "pytorch"
  c.ports = { { containerPort = 8080, name = "elastic-agent" } }
  return {
    apiVersion = "sagemaker.amazonaws.com/v1", kind = "HyperPodPyTorchJob",
    metadata = { name = p.job_name, namespace = p.namespace, labels = lab },
    spec = {
      nprocPerNode = tostring(gpus),
      elasticPolicy = elastic,
      replicaSpecs = { { name = "pods", replicas = p.replicas, maxReplicas = max_replicas, template = {
        metadata = { labels = labels(p, recipe) }, spec = M.pod_spec(p, c, true) } } },
      -- cleanPodPolicy None: a finished job's pods stay (Completed, holding no
      -- GPUs) so their logs stay readable, as Kubernetes keeps a terminated
      -- container's log while its pod exists; training_delete_job takes
      -- them with the job (they are its dependents)
      runPolicy = { jobMaxRetryCount = p.max_retries, cleanPodPolicy = "None",
        restartPolicy = { numRestartBeforeFullJobRestart = 3, evalPeriodSeconds = 21600, maxFullJobRestarts = 1 },
        logMonitoringConfiguration = monitoring },
    },
  }
end

-- ray_job(p, recipe, entrypoint, ray_version) -> a RayJob: a head pod
-- (no GPUs) and p.replicas GPU workers, every pod with the data contract;
-- the cluster goes when the job ends; p.max_retries is its backoffLimit
function M.ray_job(p, recipe, entrypoint, ray_version)
  local function pod(name, gpu)
    local c = { name = name, image = p.image, ports = name == "ray-head" and {
      { containerPort = 6379, name = "gcs" }, { containerPort = 8265, name = "dashboard" },
      { containerPort = 10001, name = "client" } } or nil }
    return { metadata = { labels = labels(p, recipe) }, spec = M.pod_spec(p, c, gpu) }
  end
  local gpus = M.sizes(p)
  return {
    apiVersion = "ray.io/v1", kind = "RayJob",
    metadata = { name = p.job_name, namespace = p.namespace, labels = labels(p, recipe) },
    spec = {
      entrypoint = entrypoint, shutdownAfterJobFinishes = true, ttlSecondsAfterFinished = 300,
      backoffLimit = p.max_retries, submissionMode = "K8sJobMode",
      rayClusterSpec = {
        rayVersion = ray_version,
        headGroupSpec = { rayStartParams = { ["dashboard-host"] = "0.0.0.0", ["num-gpus"] = "0" },
          template = pod("ray-head", false) },
        workerGroupSpecs = { { groupName = "gpu-workers", replicas = p.replicas, minReplicas = p.replicas,
          maxReplicas = p.replicas, rayStartParams = { ["num-gpus"] = tostring(gpus) },
          template = pod("ray-worker", true) } },
      },
    },
  }
end

-- shell(lines) -> a container command running the lines with sh -c
function M.shell(lines) return { "/bin/sh", "-c", table.concat(lines, "\n") } end

-- quote(s) -> s quoted for sh
function M.quote(v) return "'" .. tostring(v):gsub("'", "'\\''") .. "'" end

M.labels = labels
return M
