-- inference_deploy_managed: a model served by the HyperPod inference
-- operator: an InferenceEndpointConfig (inference.sagemaker.aws.amazon.com/v1)
-- with its model source (S3 or FSx), instance type, replicas, worker
-- (image, args, port, GPUs), tiered KV cache, intelligent routing and
-- autoscaling, applied by server-side apply and followed until the
-- operator reports DeploymentComplete. It refuses before creating anything
-- when the operator is not enabled and when no group has the instance type.
local P = require "_params"
local M = require "inference._managed"

local STR = { type = "string" }
local params = {
  name = M.NAME, namespace = M.NAMESPACE, cluster = P.cluster, region = P.region,
  model_name = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", max_length = 63,
    pattern_help = "letters, digits and '-', at most 63",
    description = "spec.modelName, the model's name for the operator and SageMaker (default: name)" },
  model_source = { type = "string", enum = { "s3", "fsx" }, required = true, decision = true,
    description = "where the model's files are: s3 (s3_bucket, model_location) or fsx (fsx_file_system_id)" },
  s3_bucket = { type = "string", pattern = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
    pattern_help = "an S3 bucket name", description = "model_source s3: the bucket" },
  s3_region = { type = "string", pattern = P.region.pattern,
    description = "model_source s3: the bucket's region (default: the cluster's)" },
  model_location = { type = "string", pattern = "^[A-Za-z0-9._/=+-]*$", max_length = 1024,
    pattern_help = "a key prefix without '..'",
    description = "the prefix (S3) or directory (FSx) under which the model's files are, e.g. models/qwen2-5-7b" },
  fsx_file_system_id = { type = "string", pattern = "^fs-[0-9a-f]{8,21}$", pattern_help = "an FSx id like fs-0123456789abcdef0",
    description = "model_source fsx: the FSx for Lustre file system" },
  fsx_dns_name = { type = "string", max_length = 255, description = "model_source fsx: its DNS name (optional)" },
  fsx_mount_name = { type = "string", max_length = 64, description = "model_source fsx: its mount name (optional)" },
  instance_type = { type = "string", required = true, decision = true, pattern = P.instance_type.pattern,
    pattern_help = P.instance_type.pattern_help,
    description = "spec.instanceType: the instance type the model runs on (an instance group of the cluster has it)" },
  replicas = { type = "integer", minimum = 1, maximum = 100, default = 1, decision = true,
    description = "spec.replicas: model server pods" },
  image = { type = "string", required = true, decision = true, max_length = 512,
    pattern = "^[a-z0-9]+([._-][a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-][a-z0-9]+)*)*" ..
      "(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$",
    pattern_help = "an image reference like vllm/vllm-openai:v0.8.5 or <account>.dkr.ecr.<region>.amazonaws.com/repo:tag",
    description = "worker.image: the model server image" },
  args = { type = "array", items = STR, description = "worker.args (vLLM: args only, the image's entrypoint runs them)" },
  command = { type = "array", items = STR, description = "worker.command (optional: the image's entrypoint otherwise)" },
  port = { type = "integer", minimum = 1, maximum = 65535, default = 8000,
    description = "worker.modelInvocationPort.containerPort: the port the server listens on" },
  gpus = { type = "integer", minimum = 1, maximum = 64, required = true, decision = true,
    description = "nvidia.com/gpu per replica: a decision, never inferred from the command's parallelism flags" },
  cpu = { type = "string", pattern = "^[0-9]+(\\.[0-9]+)?m?$", description = "CPU request per replica, e.g. 8" },
  memory = { type = "string", pattern = "^[0-9]+(Ki|Mi|Gi|Ti|K|M|G|T)?$", description = "memory request, e.g. 64Gi" },
  env = { type = "object", description = "worker environment variables, name -> value (no secrets here)" },
  invocation_path = { type = "string", default = "v1/chat/completions", pattern = "^[A-Za-z0-9._/-]*$",
    description = "spec.invocationEndpoint: the path requests go to" },
  enable_l1_cache = { type = "boolean", description = "kvCacheSpec.enableL1Cache: the KV cache in CPU memory" },
  enable_l2_cache = { type = "boolean", description = "kvCacheSpec.enableL2Cache: a second, shared KV cache tier" },
  l2_backend = { type = "string", enum = { "tieredstorage", "redis" },
    description = "enable_l2_cache: tieredstorage (HyperPod managed tiered storage) or redis (l2_url)" },
  l2_url = { type = "string", pattern = "^rediss?://[^\\s]+$", pattern_help = "a redis:// or rediss:// URL",
    description = "l2_backend redis: the Redis URL" },
  routing_strategy = { type = "string", enum = { "prefixaware", "kvaware", "session", "roundrobin" },
    description = "intelligentRoutingSpec: turn intelligent routing on with this strategy" },
  min_replicas = { type = "integer", minimum = 0, maximum = 100, description = "autoScalingSpec.minReplicaCount" },
  max_replicas = { type = "integer", minimum = 1, maximum = 100,
    description = "autoScalingSpec.maxReplicaCount: autoscaling is on when given" },
  prometheus_query = { type = "string", max_length = 1024,
    description = "autoscaling on a Prometheus query (prometheusTrigger.query)" },
  prometheus_target = { type = "number", minimum = 0, description = "the query's target value per replica" },
  prometheus_server = { type = "string", pattern = "^https?://[^\\s]+$",
    default = "http://prometheus-server.monitoring.svc.cluster.local:80",
    description = "prometheusTrigger.serverAddress" },
  endpoint_name = M.ENDPOINT,
  max_deploy_seconds = M.MAX_DEPLOY,
  tls_certificate_output_s3_uri = M.TLS,
}

-- rules across fields, at the call (before an operation starts)
local function validate(p)
  if p.model_source == "s3" and not p.s3_bucket then
    hypd.errors.refuse("s3_bucket", "required", "model_source s3 needs s3_bucket", { prefix = "field" })
  end
  if p.model_source == "fsx" and not p.fsx_file_system_id then
    hypd.errors.refuse("fsx_file_system_id", "required", "model_source fsx needs fsx_file_system_id", { prefix = "field" })
  end
  if p.model_source ~= "s3" and (p.s3_bucket or p.s3_region) then
    hypd.errors.refuse("s3_bucket", "source", "s3_bucket and s3_region go with model_source s3", { prefix = "field" })
  end
  if p.model_source ~= "fsx" and (p.fsx_file_system_id or p.fsx_dns_name or p.fsx_mount_name) then
    hypd.errors.refuse("fsx_file_system_id", "source", "the fsx_* fields go with model_source fsx", { prefix = "field" })
  end
  if p.model_location and (("/" .. p.model_location .. "/"):find("/%.%./") or p.model_location:find("^/")) then
    hypd.errors.refuse("model_location", "pattern", "must be a relative prefix without '..'", { prefix = "field" })
  end
  if (p.l2_backend or p.l2_url) and not p.enable_l2_cache then
    hypd.errors.refuse("enable_l2_cache", "required", "l2_backend and l2_url need enable_l2_cache=true", { prefix = "field" })
  end
  if p.l2_backend == "redis" and not p.l2_url then
    hypd.errors.refuse("l2_url", "required", "l2_backend redis needs l2_url", { prefix = "field" })
  end
  if p.l2_url and p.l2_backend ~= "redis" then
    hypd.errors.refuse("l2_url", "backend", "l2_url goes with l2_backend redis", { prefix = "field" })
  end
  local auto = p.max_replicas or p.min_replicas or p.prometheus_query or p.prometheus_target
  if auto and not p.max_replicas then
    hypd.errors.refuse("max_replicas", "required", "autoscaling needs max_replicas", { prefix = "field" })
  end
  if auto and (p.prometheus_query == nil) ~= (p.prometheus_target == nil) then
    hypd.errors.refuse(p.prometheus_query and "prometheus_target" or "prometheus_query", "required",
      "prometheus_query and prometheus_target go together", { prefix = "field" })
  end
  if p.max_replicas and (p.min_replicas or 1) > p.max_replicas then
    hypd.errors.refuse("min_replicas", "maximum", "min_replicas must not exceed max_replicas", { prefix = "field" })
  end
  if p.max_replicas and (p.replicas > p.max_replicas or p.replicas < (p.min_replicas or 1)) then
    hypd.errors.refuse("replicas", "range", "replicas must lie between min_replicas and max_replicas", { prefix = "field" })
  end
  for k, v in pairs(p.env or {}) do
    if type(k) ~= "string" or not k:match("^[A-Za-z_][A-Za-z0-9_]*$") then
      hypd.errors.refuse("env", "name", "environment variable names are C identifiers; got " .. hypd.errors.echo(tostring(k)),
        { prefix = "field" })
    end
    if type(v) ~= "string" then hypd.errors.refuse("env." .. k, "type", "must be text", { prefix = "field" }) end
  end
end

-- render(p, region) -> the InferenceEndpointConfig
local function render(p, region)
  local a = hypd.json.array
  local name = p.name
  local src = { modelSourceType = p.model_source, modelLocation = p.model_location }
  if p.model_source == "s3" then
    src.s3Storage = { bucketName = p.s3_bucket, region = p.s3_region or region }
  else
    src.fsxStorage = { fileSystemId = p.fsx_file_system_id, dnsName = p.fsx_dns_name, mountName = p.fsx_mount_name }
  end
  local req = { ["nvidia.com/gpu"] = tostring(p.gpus), cpu = p.cpu, memory = p.memory }
  local env = a()
  local keys = {}
  for k in pairs(p.env or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do env[#env + 1] = { name = k, value = p.env[k] } end
  local worker = { image = p.image, args = p.args and a(p.args) or nil, command = p.command and a(p.command) or nil,
    modelInvocationPort = { containerPort = p.port, name = "http" },
    modelVolumeMount = { name = "model-weights", mountPath = "/opt/ml/model" },
    resources = { requests = req, limits = { ["nvidia.com/gpu"] = tostring(p.gpus) } },
    environmentVariables = #env > 0 and env or nil }
  local spec = { modelName = p.model_name or name, invocationEndpoint = p.invocation_path,
    instanceType = p.instance_type, replicas = p.replicas, modelSourceConfig = src, worker = worker,
    endpointName = p.endpoint_name, metrics = { enabled = true, modelMetrics = { port = p.port } },
    maxDeployTimeInSeconds = p.max_deploy_seconds,
    tlsConfig = p.tls_certificate_output_s3_uri and { tlsCertificateOutputS3Uri = p.tls_certificate_output_s3_uri } or nil }
  if p.enable_l1_cache ~= nil or p.enable_l2_cache ~= nil then
    spec.kvCacheSpec = { enableL1Cache = p.enable_l1_cache == true, enableL2Cache = p.enable_l2_cache == true }
    if p.enable_l2_cache then
      spec.kvCacheSpec.l2CacheSpec = { l2CacheBackend = p.l2_backend or "tieredstorage", l2CacheLocalUrl = p.l2_url }
    end
  end
  if p.routing_strategy then spec.intelligentRoutingSpec = { enabled = true, routingStrategy = p.routing_strategy } end
  if p.max_replicas then
    spec.autoScalingSpec = { minReplicaCount = p.min_replicas or 1, maxReplicaCount = p.max_replicas,
      pollingInterval = 30, cooldownPeriod = 120, scaleDownStabilizationTime = 60, scaleUpStabilizationTime = 0 }
    if p.prometheus_query then
      spec.autoScalingSpec.prometheusTrigger = { serverAddress = p.prometheus_server, query = p.prometheus_query,
        targetValue = p.prometheus_target }
    end
  end
  return { apiVersion = M.API, kind = "InferenceEndpointConfig",
    metadata = { name = name, namespace = p.namespace, labels = M.labels(name, "managed") }, spec = spec }
end

return tool {
  name = "inference_deploy_managed",
  summary = "Deploy a model with the HyperPod inference operator (an InferenceEndpointConfig), followed until ready",
  description = "Deploys a model with the HyperPod inference operator (an InferenceEndpointConfig) on the active (or " ..
    "named) cluster: its files from S3 or FSx, instance type, replicas, the worker (image, args, port, " ..
    "gpus: a decision), optionally the tiered KV cache, intelligent routing, autoscaling and a SageMaker " ..
    "endpoint. Refused first: the inference operator off (hyperpod_update_advanced_features " ..
    "inference_operator=true), no instance group of that type, more GPUs than one instance has. Follow it " ..
    "with inference_get (wait_seconds); plan = true lists what it would create.",
  kind = "mutating",
  status_tool = "inference_get",
  aws = M.aws("ec2:DescribeInstanceTypes"),
  k8s = { "get", "list", "apply" },
  params = P.form({ "name", "instance_type", "gpus", "image", "model_source", "replicas" },
    { "args", "command", "cpu", "enable_l1_cache", "enable_l2_cache", "endpoint_name", "env", "fsx_dns_name",
      "fsx_file_system_id", "fsx_mount_name", "invocation_path", "l2_backend", "l2_url", "max_deploy_seconds", "max_replicas",
      "memory", "min_replicas", "model_location", "model_name", "port", "prometheus_query", "prometheus_server",
      "prometheus_target", "routing_strategy", "s3_bucket", "s3_region", "tls_certificate_output_s3_uri", "namespace",
      "cluster", "region" },
    params, { name = "Endpoint name" }),
  validate = validate,
  target = M.target,
  steps = {
    { name = "check", on_call = true, run = function(ctx) -- refused on the call (hypd.tool.operations): reads only
      local e = M.check(ctx, "InferenceEndpointConfig")
      M.gpus_fit(ctx, ctx.params.instance_type, ctx.params.gpus)
      ctx.state.object = render(ctx.params, e.region)
    end },
    { name = "apply", run = M.apply },
    { name = "wait", run = M.wait },
    { name = "result", run = function(ctx)
      M.result(ctx, { model_source = ctx.params.model_source, instance_type = ctx.params.instance_type })
    end },
  },
}
