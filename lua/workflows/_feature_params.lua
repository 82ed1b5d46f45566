-- _feature_params: the parameters naming the managed features of a
-- HyperPod cluster, as hyperpod_update_advanced_features takes them and
-- cluster_create passes them on (its features object); the disable tool
-- takes their names as a list (hyperpod/_feat ORDER).
local M = {}

-- toggle(label, help, description, options): a feature's switch; help
-- says what it gives a person, description what an agent passes
local function toggle(label, help, description, options)
  local props = { enabled = { type = "boolean", required = true, label = "On", order = 1,
    description = "true: on; false: off" } }
  for k, v in pairs(options or {}) do props[k] = v end
  return { type = { "boolean", "object" }, properties = props, label = label, help = help,
    description = description .. " true or false, or {\"enabled\": true|false" .. (options and ", ..." or "") ..
      "}. Absent: left as it is." }
end

M.MEMORY = { type = "integer", minimum = 20, maximum = 100, label = "Memory for checkpoints (%)", order = 2,
  description = "the percentage of each instance's memory given to checkpoints (20 to 100; default: the " ..
    "service's, 20)" }
M.CONSOLIDATE = { type = "string", pattern = "^(0|[1-9][0-9]{0,4})(s|m|h)$|^Never$", label = "Remove idle nodes after",
  order = 2,
  pattern_help = "a duration like 0s, 30s, 5m or 1h, or Never",
  description = "how long a node must be idle before Karpenter removes it (the NodePool's " ..
    "disruption.consolidateAfter; default 10m, about the time a new HyperPod node takes to join, so the node " ..
    "scaled up for a job stays for its retries and the next job)" }
M.KARPENTER_GROUPS = { type = "array", label = "Instance groups it scales", order = 3,
  items = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$", pattern_help = "an instance group name" },
  description = "the instance groups to put under autoscaling (a NodePool each). Default: the groups at 0 " ..
    "nodes, and those already under it; a group with nodes is covered only when named here, since Karpenter " ..
    "removes its idle nodes down to its MinCount. A group covered earlier and not named stays covered" }

-- the parameters naming the features
M.PARAMS = {
  training_operator = toggle("Training operator", "Runs HyperPod training jobs (HyperPodPyTorchJob) " ..
    "that resume from their checkpoint when a node fails.",
    "The HyperPod training operator (EKS add-on " ..
    "amazon-sagemaker-hyperpod-training-operator, the HyperPodPyTorchJob API) with its IAM role and Pod " ..
    "Identity association; cert-manager and the EKS Pod Identity Agent are installed first when missing."),
  inference_operator = toggle("Inference operator", "Deploys models from S3, FSx or JumpStart as " ..
    "endpoints that HyperPod manages; it adds IAM roles and a bucket for TLS certificates.",
    "The HyperPod inference operator (EKS add-on amazon-sagemaker-hyperpod-inference) " ..
    "with its four IAM roles, TLS certificate bucket and prerequisites (cert-manager, metrics-server, FSx CSI " ..
    "driver; the Mountpoint S3 CSI driver must be installed, cluster_configure_dependencies does it)."),
  tiered_checkpointing = toggle("Tiered checkpointing", "Training jobs write checkpoints to the " ..
    "instances' memory first and to S3 after, so a restart loses less; part of each instance's memory is kept for it.",
    "Managed tiered checkpointing: the cluster's TieredStorageConfig and the " ..
    "identity training pods use for S3 (service account default/tiered-storage-sa, its IAM role trusting the " ..
    "cluster's OIDC provider for exactly that service account, its S3 policy).",
    { memory_percentage = M.MEMORY }),
  karpenter = toggle("Karpenter autoscaling", "Adds instances when jobs wait for room and removes idle " ..
    "ones, so a group at 0 costs nothing until work arrives.",
    "Managed Karpenter autoscaling: the cluster role HyperPod assumes, AutoScaling " ..
    "Mode Enable (Karpenter), NodeRecovery Automatic, and a HyperpodNodeClass and NodePool per instance group.",
    { consolidate_after = M.CONSOLIDATE, instance_groups = M.KARPENTER_GROUPS }),
  fsx_csi_driver = toggle("FSx for Lustre CSI driver", "Lets pods mount FSx for Lustre file systems.",
    "The FSx for Lustre CSI driver (EKS add-on aws-fsx-csi-driver) with its IAM role."),
  kuberay_operator = toggle("KubeRay operator", "Runs Ray clusters and Ray jobs on the cluster.",
    "The KubeRay operator (Kubernetes objects in namespace kuberay-system: Deployment " ..
    "kuberay-operator, its service account and RBAC; the Ray CRDs)."),
  cert_manager = toggle("cert-manager", "Issues the TLS certificates the operators need.",
    "cert-manager (the EKS add-on cert-manager)."),
}
-- the order a person's form shows them in
for i, k in ipairs({ "training_operator", "inference_operator", "tiered_checkpointing", "karpenter", "fsx_csi_driver",
  "kuberay_operator", "cert_manager" }) do M.PARAMS[k].order = i end

return M
