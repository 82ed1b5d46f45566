-- hyperpod_update_advanced_features: turns the managed features of a
-- HyperPod cluster on or off, only those named (field presence: an absent
-- feature is left as it is). What the steps call is in hyperpod/_feat_steps,
-- each feature's chain in hyperpod/_feat_*. Steps:
--   check      reads the actual state of every feature asked for and of
--              those that depend on them; refuses conflicts and missing
--              prerequisites before anything is changed; decides, per
--              feature, enable, disable or unchanged (kept in the
--              operation's state, so a resumed operation does what was decided)
--   disable    the features asked off, through
--              hyperpod_disable_advanced_features (its child operation)
--   then one step per feature, in dependency order, each doing something
--   only for a feature the check decided to enable: its chain built link by
--   link, each link read back first (a chain a crash left half built is
--   finished; the chains: hyperpod/_feat_*)
--   cert_manager          the EKS add-on cert-manager
--   fsx_csi_driver        the FSx CSI driver's IAM role and its EKS add-on
--   training_operator     its prerequisites, IAM role and EKS add-on
--   inference_operator    its prerequisites, IAM roles, TLS bucket and add-on
--   tiered_checkpointing  the cluster's TieredStorageConfig and its IAM identity
--   karpenter             its IAM policy and role, the cluster's AutoScaling,
--                         the instance groups put under it
--   kuberay_operator      the KubeRay operator's Kubernetes objects
--   result     the state of every feature asked for, read again
local P = require "_params"
local F = require "hyperpod._feat"
local FP = require "_feature_params"
local S = require "hyperpod._feat_steps"

local params = {
  cluster = P.cluster,
  hyperpod_cluster = F.HYPERPOD_CLUSTER,
  region = P.region,
}
for name, spec in pairs(FP.PARAMS) do params[name] = spec end

-- wants(p) -> {feature = want}: the features named, on or off
local function wants(p)
  local out = {}
  for _, name in ipairs(F.ORDER) do
    if p[name] ~= nil then out[name] = F.want(p[name]) end
  end
  return out
end

return tool {
  name = "hyperpod_update_advanced_features",
  summary = "Turn managed features of a HyperPod cluster on or off: only the ones named change",
  description = "Turns the named managed features of the active (or named) HyperPod cluster on or off " ..
    "(training_operator, inference_operator, tiered_checkpointing, karpenter, fsx_csi_driver, " ..
    "kuberay_operator, cert_manager); absent ones are left as they are, and a feature already as asked " ..
    "sends nothing. Turning one on builds its whole chain (IAM, add-ons, cluster settings, Kubernetes " ..
    "objects) and waits until it works; turning one off runs hyperpod_disable_advanced_features " ..
    "(destructive: admin scope). Conflicts and missing prerequisites are refused first. Follow it with " ..
    "hyperpod_get_advanced_features (wait_seconds); plan = true lists every link it would make.",
  kind = "mutating",
  status_tool = "hyperpod_get_advanced_features",
  aws = { "eks:DescribeCluster", "eks:DescribeAddon", "eks:CreateAddon", "eks:UpdateAddon",
    "eks:ListPodIdentityAssociations", "eks:DescribePodIdentityAssociation", "eks:CreatePodIdentityAssociation",
    "sagemaker:ListClusters", "sagemaker:DescribeCluster", "sagemaker:UpdateCluster",
    "iam:GetRole", "iam:CreateRole", "iam:UpdateAssumeRolePolicy", "iam:ListAttachedRolePolicies",
    "iam:AttachRolePolicy", "iam:GetPolicy", "iam:GetPolicyVersion", "iam:ListPolicyVersions", "iam:CreatePolicy",
    "iam:CreatePolicyVersion", "iam:GetOpenIDConnectProvider", "iam:PassRole",
    "s3:HeadBucket", "s3:GetBucketTagging", "s3:CreateBucket", "s3:PutPublicAccessBlock", "s3:PutBucketTagging",
    "ec2:DescribeSubnets", "ec2:DescribeRouteTables", "ec2:DescribeVpcEndpoints", "ec2:CreateTags",
    "ec2:CreateVpcEndpoint", "ec2:ModifyVpcEndpoint" },
  k8s = { "get", "list", "apply" },
  params = P.form({ "training_operator", "inference_operator", "tiered_checkpointing", "karpenter", "fsx_csi_driver",
      "kuberay_operator", "cert_manager" },
    { "cluster", "hyperpod_cluster", "region" },
    params),
  target = S.target,
  steps = {
    { name = "check", run = function(ctx) S.check(ctx, wants(ctx.params), "enable") end },
    { name = "disable", run = S.disable_step },
    { name = "cert_manager", run = S.feature("cert_manager", "enable") },
    { name = "fsx_csi_driver", run = S.feature("fsx_csi_driver", "enable") },
    { name = "training_operator", run = S.feature("training_operator", "enable") },
    { name = "inference_operator", run = S.feature("inference_operator", "enable") },
    { name = "tiered_checkpointing", run = S.feature("tiered_checkpointing", "enable") },
    { name = "karpenter", run = S.feature("karpenter", "enable") },
    { name = "kuberay_operator", run = S.feature("kuberay_operator", "enable") },
    { name = "result", run = S.result },
  },
}
