-- hyperpod_create: stage 4, the SageMaker HyperPod cluster on an EKS
-- cluster (what the steps call: hyperpod/_create). Steps:
--   check            every decision against the account (hyperpod/_checks);
--                    reads only, refused on the call
--   execution_role   role hypd-<tag>-hyperpod-exec and its policies
--   lifecycle        bucket hypd-<tag>-lifecycle-... with the lifecycle scripts
--   subnet           the /20 compute subnet hp-compute-<az>, its route table
--                    and the VPC's S3 gateway endpoint (hyperpod/_subnet)
--   cluster          HyperPod cluster hypd-<tag>-hp (CreateCluster:
--                    NodeRecovery Automatic, NodeProvisioningMode Continuous)
--   wait_in_service  until it is InService (about 15 minutes)
--   wait_nodes       the nodes Ready in Kubernetes with their health labels
--   record           the clusters registry, the result
local P = require "_params"
local create = require "hyperpod._create"
local setup = require "_hyperpod_setup"

-- the decisions and the defaults (an operator who copies this file into
-- the playbook directory changes them here)
local params = {
  cluster = P.cluster,
  region = P.region,
  instance_type = P.with(P.instance_type, { required = true, decision = true,
    description = "the instance type of the first instance group, e.g. ml.g5.12xlarge or ml.p5.48xlarge " ..
      "(aws_get_instance_types lists what a zone offers)" }),
  instance_count = P.with(P.instance_count, { required = true, decision = true,
    description = "how many instances the first group has (within the account's Service Quotas quota " ..
      "'<type> for cluster usage', or the training plan's reservation)" }),
  instance_group = P.with(P.instance_group, { fixed = true,
    description = "the first instance group's name (default: <cluster tag>-ig)" }),
  node_recovery = { type = "string", enum = { "Automatic", "None" }, default = "Automatic",
    description = "whether HyperPod replaces or reboots faulty nodes by itself" },
}
for k, spec in pairs(setup.GROUP_PARAMS) do params[k] = spec end

local AWS = { "pricing:GetProducts", "eks:DescribeCluster", "sagemaker:ListClusters", "sagemaker:DescribeCluster",
  "sagemaker:CreateCluster", "sagemaker:UpdateCluster", "sagemaker:AddTags", "sagemaker:ListTags",
  "sagemaker:DescribeTrainingPlan", "sagemaker:ListClusterNodes", "servicequotas:ListServiceQuotas", "iam:PassRole" }
for _, list in ipairs { require("hyperpod._subnet").AWS, setup.AWS_ROLE, setup.AWS_LIFECYCLE } do
  for _, a in ipairs(list) do AWS[#AWS + 1] = a end
end

return tool {
  name = "hyperpod_create",
  summary = "Stage 4: create the SageMaker HyperPod cluster on the active (or named) EKS cluster",
  description = "Creates (or reuses) the HyperPod cluster hypd-<tag>-hp of an EKS cluster (the active one unless " ..
    "cluster is given) with one instance group, its execution role, lifecycle scripts bucket and compute " ..
    "subnet. The decisions are instance_type, instance_count, availability_zone and capacity_type: ask " ..
    "the person. They are checked against the account first (type offered in the zone, quota, training " ..
    "plan) and refused with the field and the rule. About 15 minutes; follow it with " ..
    "hyperpod_get_creation_status (wait_seconds); plan = true lists what it would create.",
  kind = "mutating",
  aws = AWS,
  k8s = { "list" },
  params = P.form({ "availability_zone", "instance_type", "instance_count", "capacity_type", "training_plan" },
    { "instance_group", "volume_size_gb", "deep_health_checks", "efa_only", "threads_per_core", "node_recovery",
      "cluster", "region" },
    params),
  status_tool = "hyperpod_get_creation_status",
  target = create.target,
  steps = {
    { name = "check", run = create.check, on_call = true }, -- refused on the call (hypd.tool.operations): reads only
    { name = "execution_role", run = create.execution_role },
    { name = "lifecycle", run = create.lifecycle },
    { name = "subnet", run = create.subnet },
    { name = "cluster", run = create.cluster },
    { name = "wait_in_service", run = create.wait_cluster },
    { name = "wait_nodes", run = create.wait_ready_nodes },
    { name = "record", run = create.record },
  },
}
