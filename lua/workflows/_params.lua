-- _params: the parameter rules several tools share, defined once.
--   local P = require "_params"
--   params = { region = P.region, cluster = P.cluster, ... }
local M = {}

M.region = { type = "string", pattern = "^[a-z]{2}(-gov|-iso[a-z]?)?-[a-z]+-\\d$",
  pattern_help = "an AWS region name like us-west-2",
  description = "AWS region, e.g. us-west-2 (default: the configured region)" }

M.cluster = { type = "string", pattern = hypd.aws.eks_cluster_name,
  pattern_help = "an EKS cluster name: 1 to 100 letters, digits, '-' or '_', starting with a letter or digit",
  description = "EKS cluster name (default: the active cluster; see cluster_switch)" }

M.CLUSTER_TAG_HELP = "A short name for the cluster: every resource hypd makes is named after it (the EKS " ..
  "cluster is hypd-<name>). It cannot change once the cluster exists."

M.cluster_tag = { type = "string", pattern = "^[a-z][a-z0-9-]{1,30}[a-z0-9]$",
  pattern_help = "a cluster tag: 3 to 32 characters of a-z, 0-9 and '-', starting with a letter",
  description = "Short lowercase name of the cluster (3 to 32 characters: a-z, 0-9, '-'). It names every " ..
    "resource hypd makes for it: EKS cluster hypd-<tag>, VPC hypd-<tag>-vpc, ...; all are tagged " ..
    "hypd:cluster-tag=<tag>.", help = M.CLUSTER_TAG_HELP }

M.operation_id = { type = "string", pattern = "^op-[0-9a-f]{16}$",
  pattern_help = "an operation id: op- and 16 hex digits", description = "the id a mutating tool returned" }

M.wait_seconds = { type = "integer", minimum = 0, maximum = 300, default = 0,
  description = "wait up to this many seconds for a change (the phase or status; for events, a new event) " ..
    "before answering: at once when nothing is at work on it and it is in no passing state (Creating, " ..
    "Pending, ...), else at the first change, else when the time is up; waited = {seconds, ended = settled, " ..
    "changed or timeout} says which. 0 answers at once" }

-- HyperPod decisions, shared by the tools that create and change capacity
M.instance_type = { type = "string", pattern = "^ml\\.[a-z0-9-]+\\.[a-z0-9]+$",
  pattern_help = "a HyperPod instance type like ml.g5.12xlarge (aws_get_instance_types lists them)",
  description = "the HyperPod instance type (aws_get_instance_types lists those the zone offers)",
  help = "The hardware of each instance: its GPUs, memory and network. It sets what the group costs per hour; a " ..
    "group keeps its type (add another group for another type). Only types the chosen zone offers are listed." }
M.instance_count = { type = "integer", minimum = 0, maximum = 1000,
  description = "how many instances the group has",
  help = "Each instance is billed from the moment it runs; your account's quota for the type caps the number." }
M.availability_zone = { type = "string", pattern = "^([a-z]{2}-[a-z]+-\\d[a-z]|[a-z]{3,4}\\d-az\\d+)$",
  pattern_help = "an Availability Zone name like us-west-2a or a zone ID like usw2-az1",
  description = "the Availability Zone (name or zone ID) the instances are placed in",
  help = "Where the instances run. Large GPU types are offered in only some zones, and the zone cannot change " ..
    "once the group exists." }
M.capacity_type = { type = "string", enum = { "on-demand", "spot", "training-plan" }, default = "on-demand",
  description = "how the capacity is bought: on-demand, spot, or a SageMaker training plan (training_plan names it)",
  help = "On-demand: billed by the hour while it runs. Spot: cheaper, but AWS may take instances back. Training " ..
    "plan: capacity reserved and paid for ahead. It cannot change once the group exists." }
M.training_plan = { type = "string", pattern = "^[A-Za-z0-9][A-Za-z0-9-]{0,63}$|^arn:aws[a-z-]*:sagemaker:",
  pattern_help = "a training plan name or ARN",
  description = "the SageMaker training plan whose reserved capacity the group uses (capacity_type training-plan)",
  help = "The training plan whose reserved instances the group uses (only with the training-plan capacity type)." }
M.instance_group = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$",
  pattern_help = "an instance group name: up to 63 letters, digits and '-'",
  description = "the instance group's name" }

-- with(spec, changes) -> a copy of spec with changes applied
function M.with(spec, changes)
  local out = {}
  for k, v in pairs(spec) do out[k] = v end
  for k, v in pairs(changes or {}) do out[k] = v end
  return out
end

-- the label of a parameter by its name, where a tool's spec gives none
-- (a person's words for it; a tool whose parameter means more gives its own)
M.LABELS = {
  accept_eula = "Accept the model's licence", activation_threshold = "Activation threshold",
  adopt_existing = "Adopt what exists", after = "After event", args = "Arguments",
  automatic_model_registration = "Register models automatically", availability_zone = "Availability Zone",
  bucket = "Existing bucket", capacity_type = "Capacity type", cert_manager = "cert-manager",
  claim_name = "Storage claim", cluster = "Cluster", cluster_tag = "Cluster name", command = "Command",
  container = "Container", cooldown_period = "Cool-down (seconds)", count = "Pods", cpu = "CPU per replica",
  dedicated_subnet = "Subnet of its own", deep_health_checks = "Deep health checks",
  delete_bucket = "Also delete the bucket", delete_file_system = "Also delete the file system",
  deployment_type = "Deployment type", desired_size = "Nodes", destination = "Destination folder",
  efa_only = "EFA-only network interface", eks = "EKS network options", enable_l1_cache = "KV cache in CPU memory",
  enable_l2_cache = "Shared KV cache tier", endpoint_name = "SageMaker endpoint name", engine = "Serving engine",
  env = "Environment variables", events = "Events shown", experiment = "MLflow experiment",
  features = "Managed features", file_system_id = "Existing file system", force = "Delete even what holds data",
  fsx_csi_driver = "FSx for Lustre CSI driver", fsx_dns_name = "FSx DNS name",
  fsx_file_system_id = "FSx file system", fsx_mount_name = "FSx mount name", fsx_storage = "FSx for Lustre storage",
  gpu_only = "Accelerated types only", gpus = "GPUs per pod", health_path = "Health check path",
  hf_token = "Hugging Face token", history = "Points shown", hyperpod_cluster = "HyperPod cluster",
  image = "Container image", image_id = "Image (AMI)", inference_operator = "Inference operator",
  instance_count = "Instances", instance_group = "Instance group", instance_groups = "Instance groups",
  instance_type = "Instance type", invocation_path = "Invocation path", job = "Job", karpenter = "Karpenter autoscaling",
  kind = "Kind", kuberay = "KubeRay operator", kuberay_operator = "KubeRay operator",
  kubernetes_labels = "Kubernetes labels", kubernetes_version = "Kubernetes version", l2_backend = "Shared cache backend",
  l2_url = "Redis URL", limit = "At most", load_balancer_controller = "AWS Load Balancer Controller",
  max_deploy_seconds = "Deployment time limit (seconds)", max_replicas = "Most replicas", max_results = "Models per page",
  max_size = "Most nodes", max_tokens = "Most tokens", memory = "Memory per replica", messages = "Chat messages",
  metric_type = "Threshold applies to", min_instance_count = "Fewest instances up", min_replicas = "Fewest replicas",
  min_size = "Fewest nodes", mlflow = "MLflow tracking server", mlflow_version = "MLflow version", model = "Model",
  model_id = "JumpStart model", model_location = "Model location", model_name = "Model name",
  model_source = "Model source", model_version = "Model version", mount_options = "Mount options", name = "Name",
  name_contains = "Name contains", namespace = "Namespace", next_token = "Next page", node = "Node",
  node_group = "Node group", node_recovery = "Node recovery", nodes = "Nodes", operation_id = "Operation",
  page_size = "Per page", page_token = "Page", params = "Recipe parameters", plan = "Only plan", pod = "Pod",
  pod_access = "Access for the jobs' pods", pods = "Pods", policy = "Routing policy",
  polling_interval = "Polling interval (seconds)", pool = "Model pool", port = "Port", prefix = "Folder",
  private_subnet_cidrs = "Private subnet blocks", prometheus_query = "Prometheus query",
  prometheus_server = "Prometheus server", prometheus_target = "Target per replica", prompt = "Prompt",
  public_subnet_cidrs = "Public subnet blocks", query = "PromQL query", recipe = "Recipe", region = "Region",
  replicas = "Replicas", revision = "Revision", role = "Existing IAM role", routing_strategy = "Routing strategy",
  run = "MLflow run", s3_bucket = "Existing S3 bucket", s3_region = "Bucket region", s3_storage = "S3 storage",
  scaled_object_name = "ScaledObject name", scheme = "Load balancer scheme", secret_env = "Variables from Secrets",
  server_address = "Prometheus server", service = "Service", service_name = "Service name",
  service_type = "Service type", since_seconds = "Since (seconds ago)", size = "Server size", status = "Status",
  storage_capacity_gib = "Capacity (GiB)", storage_claim = "Storage claim", subnet_id = "Subnet",
  tail = "Last lines", tail_lines = "Log lines shown", task = "Task", temperature = "Temperature",
  threads_per_core = "Threads per core", threshold = "Threshold", throughput = "Throughput (MB/s per TiB)",
  tiered_checkpointing = "Tiered checkpointing", timeout_seconds = "Time limit (seconds)", tool = "Tool",
  tls_certificate_output_s3_uri = "TLS certificate location (S3)",
  training_operator = "Training operator", training_plan = "Training plan", volume_size_gb = "Volume size (GB)",
  vpc_cidr = "VPC address block", wait_seconds = "Wait (seconds)", workers = "Workers", zone = "Availability Zone",
}

-- form(decisions, more, params [, labels]) -> params, each spec a copy with
-- its label (labels[name], else its own, else M.LABELS by name), group and
-- order (hypd.tool.registry): decisions and more name every parameter, in
-- the order a person's form shows them (decisions first; more folded under
-- more options)
function M.form(decisions, more, params, labels)
  local out, seen = {}, {}
  for g, names in pairs({ decisions = decisions, more = more }) do
    local base = g == "more" and #decisions or 0
    for i, name in ipairs(names) do
      local spec = params[name]
      if not spec then error("form: " .. name .. " is not a parameter", 2) end
      if seen[name] then error("form: " .. name .. " is listed twice", 2) end
      seen[name] = true
      local label = (labels or {})[name] or spec.label or M.LABELS[name]
      if not label then error("form: " .. name .. " has no label (give it one, or add it to LABELS)", 2) end
      out[name] = M.with(spec, { label = label, group = g, order = base + i })
    end
  end
  for name in pairs(params) do
    if not seen[name] then error("form: " .. name .. " is in no group of the form", 2) end
  end
  return out
end

-- where(p) -> region, cluster: what a call with P.cluster and P.region works
-- on (the named cluster, else the active one; the region given, else the
-- active cluster's, else the configured one, else "default"), for targets
function M.where(p)
  local c = hypd.clusters.target(p) or { region = p.region }
  local region = c.region
  if not region then
    local ok, r = pcall(hypd.aws.region, {})
    region = ok and r or "default"
  end
  return region, c.name or "?"
end

return M
