-- _iam_scopes: what hypd's IAM policy (hypd iam-policy, hypd.iam_policy)
-- grants each IAM action on. Everything hypd makes is named hypd-* and
-- tagged hypd:cluster-tag (_names), so an action is scoped to those names
-- where its service has resource-level permissions by name, to the tag
-- where the resource's ARN carries no name (EC2's ids, SageMaker HyperPod's
-- cluster ids, FSx's file system ids): aws:RequestTag when it makes the
-- resource, aws:ResourceTag after. What is left on Resource "*" says why.
--
--   Scopes.RULES: { {sid, actions = {patterns}, resources | why, condition}, ... }
--     the first rule whose pattern (a Lua pattern over "service:Action",
--     anchored) matches an action is the action's; a rule with why keeps
--     Resource "*", and why is the reason (the service has no resource-level
--     permission for it)
--   Scopes.of(action) -> rule | nil
--
-- Accounts and regions are "*" in the ARNs: the policy is the same in every
-- account (the CloudFormation template embeds it as it is), and an identity
-- policy grants nothing on another account's resources.
local Names = require "_names"

local M = {}

local P = Names.PREFIX -- "hypd-"
local TAGGED_AT_CREATE = { StringLike = { ["aws:RequestTag/" .. Names.TAG] = "*" } }
local TAGGED = { StringLike = { ["aws:ResourceTag/" .. Names.TAG] = "*" } }

local function eks(rest) return "arn:aws:eks:*:*:" .. rest end
local function iam(rest) return "arn:aws:iam::*:" .. rest end
local function sm(rest) return "arn:aws:sagemaker:*:*:" .. rest end

-- the AWS managed policies hypd attaches to the roles it makes
-- (AttachRolePolicy's iam:PolicyARN): nothing broader can be attached
M.MANAGED_POLICIES = {}
for i, name in ipairs { "AmazonEKSClusterPolicy", "AmazonEKSWorkerNodePolicy", "AmazonEKS_CNI_Policy",
  "AmazonEC2ContainerRegistryReadOnly", "AmazonSageMakerClusterInstanceRolePolicy", "AmazonFSxFullAccess",
  "AmazonSageMakerHyperPodTrainingOperatorAccess", "AmazonSageMakerHyperPodInferenceAccess",
  "AmazonSageMakerHyperPodGatedModelAccess" } do
  M.MANAGED_POLICIES[i] = "arn:aws:iam::aws:policy/" .. name
end

-- the names hypd gives IAM roles, customer policies and buckets: hypd-*,
-- and the names the HyperPod features keep from the reference set-up
-- (hyperpod._feat names: a cluster it set up reads the same)
M.ROLES = { P .. "*", "SageMakerHyperPodTrainingOperator-*", "SM_HP_TieredCkpt_Role_*", "hyperpod-karpenter-role-*",
  "SM_HP_FSX_CSI_ROLE_*", "SageMakerHyperPodInference-*", "HyperPodInferenceALB-*", "HyperPodInferenceKEDA-*",
  "HyperPodInferenceGated-*" }
M.POLICIES = { P .. "*", "SM_HP_TieredCkpt_S3Policy_*", "SageMakerHyperPodKarpenterPolicy-*",
  "HyperPodInferenceALB-*-Policy", "HyperPodInferenceKEDA-*-Policy" }
M.BUCKETS = { P .. "*", "hyperpod-tls-*" }

local function each(list, fn)
  local out = {}
  for i, x in ipairs(list) do out[i] = fn(x) end
  return out
end
local ROLE_ARNS = each(M.ROLES, function(n) return iam("role/" .. n) end)
local POLICY_ARNS = each(M.POLICIES, function(n) return iam("policy/" .. n) end)
local ATTACHABLE = each(M.POLICIES, function(n) return iam("policy/" .. n) end)
for _, a in ipairs(M.MANAGED_POLICIES) do ATTACHABLE[#ATTACHABLE + 1] = a end

M.RULES = {
  -- EC2: ids, not names, so the tag
  { "Ec2Read", actions = { "ec2:Describe.*" },
    why = "EC2 has no resource-level permissions for its Describe actions" },
  { "Ec2CreateTagged", actions = { "ec2:CreateVpc", "ec2:CreateSubnet", "ec2:CreateSecurityGroup",
      "ec2:CreateRouteTable", "ec2:CreateInternetGateway", "ec2:CreateNatGateway", "ec2:CreateVpcEndpoint",
      "ec2:AllocateAddress" },
    resources = { "*" }, condition = TAGGED_AT_CREATE },
  { "Ec2ChangeTagged", actions = { "ec2:.*" }, resources = { "*" }, condition = TAGGED },
  -- IAM: by name
  { "IamPassRoleToServices", actions = { "iam:PassRole" }, resources = ROLE_ARNS,
    condition = { StringEquals = { ["iam:PassedToService"] = {
      "eks.amazonaws.com", "pods.eks.amazonaws.com", "sagemaker.amazonaws.com" } } } },
  { "IamAttachKnownPolicies", actions = { "iam:AttachRolePolicy", "iam:DetachRolePolicy" },
    resources = ROLE_ARNS, condition = { ArnLike = { ["iam:PolicyARN"] = ATTACHABLE } } },
  { "IamServiceLinkedRoles", actions = { "iam:CreateServiceLinkedRole" }, resources = { iam("role/aws-service-role/*") },
    condition = { StringLike = { ["iam:AWSServiceName"] = {
      "eks.amazonaws.com", "eks-nodegroup.amazonaws.com", "sagemaker.amazonaws.com", "fsx.amazonaws.com",
      "s3.data-source.lustre.fsx.amazonaws.com", "elasticloadbalancing.amazonaws.com" } } } },
  { "IamRoles", actions = { "iam:.*Role", "iam:.*RolePolicy", "iam:.*RolePolicies", "iam:ListInstanceProfilesForRole",
      "iam:RemoveRoleFromInstanceProfile", "iam:UpdateAssumeRolePolicy" },
    resources = ROLE_ARNS },
  { "IamPolicies", actions = { "iam:.*Policy", "iam:.*PolicyVersion", "iam:ListPolicyVersions" },
    resources = POLICY_ARNS },
  { "IamOidcProviders", actions = { "iam:.*OpenIDConnectProvider" },
    resources = { iam("oidc-provider/oidc.eks.*.amazonaws.com/id/*") } },
  { "IamList", actions = { "iam:List.*" }, why = "IAM's ListRoles, ListPolicies and ListOpenIDConnectProviders " ..
    "have no resource-level permissions" },
  -- EKS: by name
  { "EksList", actions = { "eks:ListClusters", "eks:DescribeAddonVersions" },
    why = "EKS has no resource-level permissions for ListClusters and DescribeAddonVersions" },
  { "EksClusters", actions = { "eks:.*" }, resources = { eks("cluster/" .. P .. "*"), eks("nodegroup/" .. P .. "*/*/*"),
    eks("addon/" .. P .. "*/*/*"), eks("access-entry/" .. P .. "*/*"), eks("podidentityassociation/" .. P .. "*/*") } },
  -- SageMaker: a HyperPod cluster's ARN holds its id, so the tag; MLflow servers by name
  { "SageMakerPublicHub", actions = { "sagemaker:DescribeHubContent", "sagemaker:ListHubContents",
      "sagemaker:ListHubContentVersions" },
    resources = { "arn:aws:sagemaker:*:aws:hub/SageMakerPublicHub",
      "arn:aws:sagemaker:*:aws:hub-content/SageMakerPublicHub/*" } },
  { "SageMakerRead", actions = { "sagemaker:Describe.*", "sagemaker:List.*" },
    why = "a HyperPod cluster's ARN holds its id, not its name: a read by name of a cluster that is gone names no " ..
      "resource to scope (the reads change nothing; every SageMaker change is scoped)" },
  { "SageMakerCreateTagged", actions = { "sagemaker:CreateCluster" }, resources = { sm("cluster/*") },
    condition = TAGGED_AT_CREATE },
  { "SageMakerMlflow", actions = { "sagemaker:.*MlflowTrackingServer", "sagemaker%-mlflow:.*" },
    resources = { sm("mlflow-tracking-server/" .. P .. "*") } },
  { "SageMakerTagged", actions = { "sagemaker:.*" }, resources = { sm("cluster/*"), sm("mlflow-tracking-server/*") },
    condition = TAGGED },
  -- S3: by bucket name
  { "S3ListBuckets", actions = { "s3:ListAllMyBuckets" }, why = "S3's ListAllMyBuckets has no resource-level permission" },
  { "S3Objects", actions = { "s3:.*Object", "s3:.*ObjectVersion" },
    resources = each(M.BUCKETS, function(b) return "arn:aws:s3:::" .. b .. "/*" end) },
  { "S3Buckets", actions = { "s3:.*" }, resources = each(M.BUCKETS, function(b) return "arn:aws:s3:::" .. b end) },
  -- FSx: ids, so the tag
  { "FsxRead", actions = { "fsx:DescribeFileSystems" }, why = "FSx's DescribeFileSystems lists every file system " ..
    "(resource-level permission applies to the ones named, hypd lists them)" },
  { "FsxCreateTagged", actions = { "fsx:CreateFileSystem", "fsx:TagResource" }, resources = { "*" },
    condition = TAGGED_AT_CREATE },
  { "FsxTagged", actions = { "fsx:.*" }, resources = { "*" }, condition = TAGGED },
  -- the rest
  { "Logs", actions = { "logs:.*" }, resources = { "arn:aws:logs:*:*:log-group:/aws/sagemaker/Clusters/" .. P .. "*" } },
  { "Pricing", actions = { "pricing:.*" }, why = "the Price List API has no resource-level permissions" },
  { "ServiceQuotas", actions = { "servicequotas:ListServiceQuotas" },
    why = "Service Quotas' ListServiceQuotas has no resource-level permission" },
  { "Identity", actions = { "sts:GetCallerIdentity" }, why = "sts:GetCallerIdentity needs no permission and has no resource" },
}

function M.of(action)
  for _, rule in ipairs(M.RULES) do
    for _, p in ipairs(rule.actions) do
      if action:match("^" .. p .. "$") then return rule end
    end
  end
end

return M
