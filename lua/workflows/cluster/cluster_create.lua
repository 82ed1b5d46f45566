-- cluster_create: stages 1 to 5 as one operation, each stage its own
-- tool run as a child operation (what the steps call: cluster/_pipeline).
-- Steps:
--   check         every stage planned first (reads only): a bad decision of
--                 any stage is refused before anything is made
--   eks           stage 1 (cluster_create_eks) while, beside it, the HyperPod
--                 execution role, the lifecycle bucket and the S3 storage
--                 bucket are made (they need no EKS cluster)
--   active        stage 2: the new cluster becomes the active one
--   dependencies  stage 3 (cluster_configure_dependencies)
--   hyperpod_and_storage   stage 4 (hyperpod_create) and, beside it, stage
--                 5's storage_create_s3 (it needs the CSI driver of stage 3,
--                 not the HyperPod cluster); storage_create_fsx after stage
--                 4, in the compute subnet stage 4 made
--   features      the managed features asked for
--                 (hyperpod_update_advanced_features)
--   result        what was made, with each stage's operation
local P = require "_params"
local FP = require "_feature_params"
local setup = require "_hyperpod_setup"
local pipeline = require "cluster._pipeline"

local CIDRS = { type = "array", items = { type = "string" } }

-- bare(spec) -> the spec without its descriptions: the features' rules as
-- hyperpod_update_advanced_features checks them, their words said once, in
-- that tool's schema (an agent loads cluster_create's for every session)
local function bare(spec)
  if type(spec) ~= "table" then return spec end
  local out = {}
  for k, v in pairs(spec) do
    if k ~= "description" then out[k] = (k == "properties" or k == "items") and bare(v) or v end
  end
  if spec.properties then
    out.properties = {}
    for k, v in pairs(spec.properties) do out.properties[k] = bare(v) end
  end
  return out
end
local FEATURES = {}
for k, spec in pairs(FP.PARAMS) do FEATURES[k] = bare(spec) end

local params = {
  cluster_tag = P.with(P.cluster_tag, { required = true, decision = true, fixed = true,
    description = "Short lowercase name of the cluster (3 to 32 characters: a-z, 0-9, '-'); it names every " ..
      "resource (EKS cluster hypd-<tag>, HyperPod cluster hypd-<tag>-hp, ...). Ask the person; never invent it.",
    help = P.CLUSTER_TAG_HELP }),
  region = P.region,
  eks = { type = "object", description = "Stage 1's options, as cluster_create_eks takes them (its rules apply " ..
      "and are checked before anything is made): kubernetes_version, vpc_cidr, public_subnet_cidrs, " ..
      "private_subnet_cidrs.",
    label = "EKS network options", help = "The Kubernetes version and the VPC's address blocks; hypd picks " ..
      "them when left empty. They cannot change once the cluster exists.",
    properties = { kubernetes_version = { type = "string", label = "Kubernetes version", order = 1 },
      vpc_cidr = { type = "string", label = "VPC address block", order = 2 },
      public_subnet_cidrs = P.with(CIDRS, { label = "Public subnet blocks", order = 3 }),
      private_subnet_cidrs = P.with(CIDRS, { label = "Private subnet blocks", order = 4 }) } },
  kuberay = { type = "boolean", default = false,
    description = "Stage 3 also installs the KubeRay operator (Ray clusters and jobs)" },
  instance_type = P.with(P.instance_type, { required = true, decision = true,
    description = "the instance type of the HyperPod cluster's first group, e.g. ml.g5.12xlarge " ..
      "(aws_get_instance_types lists what a zone offers)" }),
  instance_count = P.with(P.instance_count, { required = true, decision = true,
    description = "how many instances the first group has (within the account's quota or the training plan)" }),
  instance_group = P.with(P.instance_group, { description = "the first instance group's name (default <tag>-ig)" }),
  s3_storage = { type = "boolean", default = true,
    description = "Stage 5: an S3 bucket mounted as the claim s3-claim (Mountpoint for S3); its bucket is made " ..
      "while EKS is still creating",
    help = "A new S3 bucket the cluster's pods read datasets from and write checkpoints to (mounted at /s3). " ..
      "S3 bills for what it stores." },
  s3_bucket = { type = "string", pattern = "^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$",
    pattern_help = "an S3 bucket name: 3 to 63 lowercase letters, digits, '.' and '-'",
    description = "an existing bucket to mount instead of hypd's own hypd-<tag>-data-..." },
  fsx_storage = { type = "boolean", default = false,
    description = "Stage 5: also an FSx for Lustre file system (1.2 TiB PERSISTENT_2) as the claim fsx-claim, in " ..
      "the HyperPod compute subnet",
    help = "A 1.2 TiB FSx for Lustre file system beside the instances, for fast shared reads; it is billed " ..
      "by the hour for its whole size, used or not." },
  features = { type = "object", properties = FEATURES, help = "Turned on once the HyperPod cluster is ready; " ..
      "each can be turned on or off later on the cluster's Features page.",
    description = "Managed features to turn on once the HyperPod cluster is InService, as " ..
      "hyperpod_update_advanced_features takes them (its schema describes each), e.g. {\"training_operator\": true}" },
}
for k, spec in pairs(setup.GROUP_PARAMS) do params[k] = spec end

-- the early work runs in this operation; each stage's tool declares its own
local AWS = { "sts:GetCallerIdentity", "eks:DescribeCluster", "sagemaker:DescribeCluster", "pricing:GetProducts" }
for _, a in ipairs(pipeline.AWS) do AWS[#AWS + 1] = a end

return tool {
  name = "cluster_create",
  summary = "Stages 1 to 5 in one operation: EKS, active cluster, dependencies, HyperPod, storage, features",
  description = "Takes an AWS account to a working HyperPod cluster on EKS, with storage, in one operation: " ..
    "cluster_create_eks, the cluster made active, cluster_configure_dependencies, hyperpod_create with " ..
    "storage_create_s3 (and storage_create_fsx when asked), then hyperpod_update_advanced_features for " ..
    "the features asked for, each a child operation. Every stage is planned first, so a bad decision is " ..
    "refused before anything is made. The decisions are cluster_tag, instance_type, instance_count, " ..
    "availability_zone and capacity_type: ask the person. Takes 30 to 45 minutes; follow it with " ..
    "cluster_get_creation_status (wait_seconds). Safe to call again (resumes, or changes nothing once " ..
    "done); plan = true lists every resource.",
  kind = "mutating",
  aws = AWS,
  params = P.form({ "cluster_tag", "availability_zone", "instance_type", "instance_count", "capacity_type", "training_plan" },
    { "s3_storage", "fsx_storage", "features", "instance_group", "volume_size_gb", "deep_health_checks", "efa_only",
      "threads_per_core", "kuberay", "s3_bucket", "eks", "region" },
    params),
  status_tool = "cluster_get_creation_status",
  target = pipeline.target,
  steps = {
    { name = "check", run = pipeline.check, on_call = true }, -- every stage planned on the call: reads only
    { name = "eks", run = pipeline.eks },
    { name = "active", run = pipeline.active },
    { name = "dependencies", run = function(ctx) pipeline.stage(ctx, "cluster_configure_dependencies") end },
    { name = "hyperpod_and_storage", run = pipeline.hyperpod_and_storage },
    { name = "features", run = function(ctx) pipeline.stage(ctx, "hyperpod_update_advanced_features") end },
    { name = "result", run = pipeline.result },
  },
}
