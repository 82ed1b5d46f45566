-- cluster_configure_dependencies: stage 3, what an EKS cluster needs for
-- HyperPod (the items and rules: cluster/_deps; what the steps call:
-- cluster/_deps_steps). Steps:
--   cluster            the EKS cluster (the named or the active one): ACTIVE,
--                      and hypd may read and write its Kubernetes API
--   oidc_provider      the IAM OIDC provider of its issuer
--   s3_csi_role        the S3 CSI driver's IRSA role and its inline policy
--   addons             each add-on created, or updated where it drifted, with
--                      no waiting (EKS takes a minute or two each, all at once)
--   node_dependencies  each Kubernetes component, object by object: applied
--                      server-side where missing or where a dry run says an
--                      apply would change it
--   wait_addons        until every add-on made or changed here is ACTIVE
--   load_balancer_controller  when asked: its IRSA role and its objects,
--                      once cert-manager serves its API
--   finish             the result; a FAILED error naming each item that failed
local P = require "_params"
local steps = require "cluster._deps_steps"

return tool {
  name = "cluster_configure_dependencies",
  summary = "Stage 3: the OIDC provider, EKS add-ons and HyperPod node dependencies of the active (or named) cluster",
  description = "Configures what an EKS cluster (the active one, or cluster) needs before HyperPod nodes join: the " ..
    "IAM OIDC provider, the EKS add-ons (vpc-cni, coredns, kube-proxy, pod identity, cert-manager, " ..
    "metrics-server, the S3 CSI driver with its role), the NVIDIA and EFA device plugins, the health " ..
    "monitoring agent and deep-health-check RBAC; KubeRay with kuberay = true, the AWS Load Balancer " ..
    "Controller with load_balancer_controller = true. Only what is missing or drifted is changed; what " ..
    "hypd did not make is kept and reported unless adopt_existing = true. Follow it with " ..
    "cluster_get_dependency_status (wait_seconds); plan = true lists what it would create or change.",
  kind = "mutating",
  status_tool = "cluster_get_dependency_status",
  aws = { "eks:DescribeCluster", "eks:DescribeAddonVersions", "eks:DescribeAddon", "eks:CreateAddon",
    "eks:UpdateAddon", "eks:TagResource", "eks:DescribeAccessEntry", "eks:ListAssociatedAccessPolicies", "sts:GetCallerIdentity",
    "iam:GetOpenIDConnectProvider", "iam:CreateOpenIDConnectProvider", "iam:AddClientIDToOpenIDConnectProvider",
    "iam:TagOpenIDConnectProvider", "iam:GetRole", "iam:CreateRole", "iam:TagRole", "iam:UpdateAssumeRolePolicy",
    "iam:GetRolePolicy", "iam:PutRolePolicy" },
  k8s = { "get", "list", "apply" },
  params = P.form({ "kuberay", "load_balancer_controller" },
    { "adopt_existing", "cluster", "region" },
    {
    cluster = P.with(P.cluster, { description = "EKS cluster name (default: the active cluster; see cluster_switch)" }),
    region = P.region,
    kuberay = { type = "boolean", default = false, decision = true,
      description = "Also install the KubeRay operator (its ray.io CRDs, RBAC and Deployment in the " ..
        "kuberay-operator namespace), for RayJob and RayCluster workloads." },
    load_balancer_controller = { type = "boolean", default = false, decision = true,
      description = "Also install the AWS Load Balancer Controller (kube-system/aws-load-balancer-controller, as " ..
        "its Helm chart installs it, its webhook certificate from cert-manager) with its IRSA role " ..
        "hypd-<tag>-lb-controller: what gives a LoadBalancer Service of type external (an NLB, " ..
        "inference_deploy_container service=external) its address. EKS offers no add-on for it." },
    adopt_existing = { type = "boolean", default = false,
      description = "Also bring what hypd did not make to hypd's configuration: add-ons are updated (version, " ..
        "service account role; never deleted), objects of the same name applied over (forced). Without it " ..
        "they are kept as they are and reported." },
  }),
  target = steps.target,
  validate = steps.validate,
  steps = {
    { name = "cluster", run = steps.cluster },
    { name = "oidc_provider", run = steps.oidc_provider },
    { name = "s3_csi_role", run = steps.s3_csi_role },
    { name = "addons", run = steps.addons },
    { name = "node_dependencies", run = steps.node_dependencies },
    { name = "wait_addons", run = steps.wait_addons },
    { name = "load_balancer_controller", run = steps.load_balancer_controller },
    { name = "finish", run = steps.finish },
  },
}
