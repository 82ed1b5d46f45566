-- hyperpod_disable_advanced_features: turns managed features off, each
-- chain removed in reverse (what the steps call: hyperpod/_feat_steps,
-- hyperpod/_feat_*). The destructive half of
-- hyperpod_update_advanced_features, which calls it for the features asked
-- off. Steps:
--   check      reads the state of every feature named and of those that
--              need them; refuses turning off what stays needed; decides,
--              per feature, disable, unchanged or kept (not made by hypd)
--   then one step per feature, in reverse dependency order, each doing
--   something only for a feature the check decided to disable: its chain
--   removed link by link, in reverse of how it was built (a removal a crash
--   left half done is finished; the chains: hyperpod/_feat_*)
--   kuberay_operator      hypd's KubeRay objects gone (the CRDs stay)
--   karpenter             the instance groups out of it, AutoScaling off,
--                         its IAM role and policy gone
--   tiered_checkpointing  its IAM identity gone, TieredStorageConfig off
--   inference_operator    its add-on, IAM roles and TLS bucket gone
--   training_operator     its add-on and IAM role gone
--   fsx_csi_driver        its add-on and IAM role gone
--   cert_manager          its add-on gone
--   result     the state of every feature named, read again
local P = require "_params"
local F = require "hyperpod._feat"
local S = require "hyperpod._feat_steps"

-- wants(p) -> {feature = want}: every feature named, off
local function wants(p)
  local out = {}
  for _, name in ipairs(p.features) do out[name] = { enabled = false } end
  return out
end

return tool {
  name = "hyperpod_disable_advanced_features",
  summary = "Turn managed features of a HyperPod cluster off: their roles, add-ons and objects deleted",
  description = "Turns off the features listed in features (training_operator, inference_operator, " ..
    "tiered_checkpointing, karpenter, fsx_csi_driver, kuberay_operator, cert_manager), each chain removed in " ..
    "reverse of how hyperpod_update_advanced_features builds it: Kubernetes objects, EKS add-ons (waited for " ..
    "until gone), cluster settings set back (AutoScaling and TieredStorageConfig Disable), then IAM roles and " ..
    "policies and the inference TLS bucket. It is destructive: it deletes. Only what hypd made is deleted (its " ..
    "hypd:cluster-tag tag or managed-by label); an EKS add-on is deleted whoever installed it, since that is " ..
    "what turning the feature off means; prerequisites (cert-manager, the Pod Identity Agent, metrics-server, " ..
    "the S3 subnet endpoint and subnet tags) stay. A feature already off changes nothing; a removal a crash " ..
    "left half done is finished by the next call. Turning off cert_manager or fsx_csi_driver while an operator " ..
    "that needs it stays on is refused. hyperpod_update_advanced_features with a feature set to false calls this " ..
    "tool. It answers with an operation; follow it with hyperpod_get_advanced_features (wait_seconds).",
  kind = "destructive",
  status_tool = "hyperpod_get_advanced_features",
  aws = { "eks:DescribeCluster", "eks:DescribeAddon", "eks:DeleteAddon", "eks:ListPodIdentityAssociations",
    "eks:DescribePodIdentityAssociation", "eks:DeletePodIdentityAssociation",
    "sagemaker:ListClusters", "sagemaker:DescribeCluster", "sagemaker:UpdateCluster",
    "iam:GetRole", "iam:DeleteRole", "iam:ListAttachedRolePolicies", "iam:DetachRolePolicy", "iam:ListRolePolicies",
    "iam:GetRolePolicy", "iam:DeleteRolePolicy", "iam:GetPolicy", "iam:GetPolicyVersion", "iam:ListPolicyVersions",
    "iam:DeletePolicyVersion", "iam:DeletePolicy", "iam:GetOpenIDConnectProvider",
    "s3:HeadBucket", "s3:GetBucketTagging", "s3:ListObjectsV2", "s3:DeleteObjects", "s3:DeleteBucket" },
  k8s = { "get", "list", "delete" },
  params = P.form({ "features" },
    { "cluster", "hyperpod_cluster", "region" },
    {
    cluster = P.cluster,
    hyperpod_cluster = F.HYPERPOD_CLUSTER,
    region = P.region,
    features = { type = "array", required = true, decision = true, items = { type = "string", enum = F.ORDER },
      description = "the features to turn off (a list, or a,b,c): " .. table.concat(F.ORDER, ", ") },
  }),
  target = S.target,
  steps = {
    { name = "check", run = function(ctx) S.check(ctx, wants(ctx.params), "disable") end },
    { name = "kuberay_operator", run = S.feature("kuberay_operator", "disable") },
    { name = "karpenter", run = S.feature("karpenter", "disable") },
    { name = "tiered_checkpointing", run = S.feature("tiered_checkpointing", "disable") },
    { name = "inference_operator", run = S.feature("inference_operator", "disable") },
    { name = "training_operator", run = S.feature("training_operator", "disable") },
    { name = "fsx_csi_driver", run = S.feature("fsx_csi_driver", "disable") },
    { name = "cert_manager", run = S.feature("cert_manager", "disable") },
    { name = "result", run = S.result },
  },
}
