-- sandbox IAM managed policies: the account's own (records) and a few
-- AWS-managed ones (built in, read-only), attachments to roles, versions.
--
-- Record "policy"/<PolicyName>: { PolicyName, PolicyId, Arn, Path,
--   Description, CreateDate, UpdateDate, DefaultVersionId, Tags,
--   versions = [{ VersionId, Document (JSON text), CreateDate }], next_version }
-- Attachments live on the role records (role.attached = [arn]).
local C = require "sandbox.services.iam.common"
local json = require "hypd.json"
local roles = require "sandbox.services.iam.roles"

local M = { operations = {} }
local ops = M.operations

local AWS_DATE = 1430000000 -- AWS-managed policies are old

local function allow(actions, resource)
  return json.encode { Version = "2012-10-17", Statement = { {
    Effect = "Allow", Action = actions, Resource = resource or "*" } } }
end

-- the AWS-managed policies the sandbox knows, by arn
local AWS = {}
local function aws_policy(path, name, description, document)
  local arn = "arn:aws:iam::aws:policy" .. path .. name
  AWS[arn] = {
    PolicyName = name, PolicyId = C.id("ANPA", arn), Arn = arn, Path = path, Description = description,
    CreateDate = AWS_DATE, UpdateDate = AWS_DATE, DefaultVersionId = "v1", aws = true,
    versions = { { VersionId = "v1", Document = document, CreateDate = AWS_DATE } },
  }
end
aws_policy("/", "AdministratorAccess", "Provides full access to AWS services and resources.", allow({ "*" }))
aws_policy("/", "AmazonEKSClusterPolicy",
  "This policy provides Kubernetes the permissions it requires to manage resources on your behalf.",
  allow({ "autoscaling:DescribeAutoScalingGroups", "ec2:AttachVolume", "ec2:CreateTags", "ec2:Describe*",
    "ec2:ModifyInstanceAttribute", "elasticloadbalancing:*", "kms:DescribeKey" }))
aws_policy("/", "AmazonEKSServicePolicy",
  "This policy allows Amazon Elastic Container Service for Kubernetes to create and manage the necessary " ..
  "resources to operate EKS Clusters.",
  allow({ "ec2:CreateNetworkInterface", "ec2:DeleteNetworkInterface", "ec2:Describe*",
    "ec2:ModifyNetworkInterfaceAttribute", "iam:ListAttachedRolePolicies", "route53:AssociateVPCWithHostedZone" }))
aws_policy("/", "AmazonEKSWorkerNodePolicy",
  "This policy allows Amazon EKS worker nodes to connect to Amazon EKS Clusters.",
  allow({ "ec2:DescribeInstances", "ec2:DescribeRouteTables", "ec2:DescribeSecurityGroups", "ec2:DescribeSubnets",
    "ec2:DescribeVolumes", "ec2:DescribeVpcs", "eks:DescribeCluster", "eks-auth:AssumeRoleForPodIdentity" }))
aws_policy("/", "AmazonEKS_CNI_Policy",
  "This policy provides the Amazon VPC CNI Plugin (amazon-vpc-cni-k8s) the permissions it requires to modify " ..
  "the IP address configuration on your EKS worker nodes.",
  allow({ "ec2:AssignPrivateIpAddresses", "ec2:AttachNetworkInterface", "ec2:CreateNetworkInterface",
    "ec2:DeleteNetworkInterface", "ec2:Describe*", "ec2:UnassignPrivateIpAddresses" }))
aws_policy("/", "AmazonEKSVPCResourceController",
  "Policy used by VPC Resource Controller to manage ENI and IPs for worker nodes.",
  allow({ "ec2:CreateNetworkInterfacePermission", "ec2:AssignPrivateIpAddresses", "ec2:UnassignPrivateIpAddresses" }))
aws_policy("/", "AmazonEC2ContainerRegistryReadOnly",
  "Provides read-only access to Amazon EC2 Container Registry repositories.",
  allow({ "ecr:GetAuthorizationToken", "ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer",
    "ecr:BatchGetImage", "ecr:DescribeRepositories", "ecr:ListImages" }))
aws_policy("/", "AmazonSageMakerClusterInstanceRolePolicy",
  "AWS managed policy for SageMaker HyperPod cluster instances.",
  allow({ "cloudwatch:PutMetricData", "logs:CreateLogGroup", "logs:CreateLogStream", "logs:PutLogEvents",
    "s3:GetObject", "s3:ListBucket" }))
aws_policy("/", "AmazonSageMakerFullAccess", "Provides full access to Amazon SageMaker via the AWS Management " ..
  "Console and SDK.", allow({ "sagemaker:*", "ec2:Describe*", "iam:PassRole", "s3:GetObject", "s3:ListBucket" }))
aws_policy("/", "AmazonSageMakerHyperPodObservabilityAdminAccess",
  "Provides administrative access to set up SageMaker HyperPod observability.",
  allow({ "aps:*", "grafana:*", "eks:DescribeAddon", "eks:CreateAddon" }))
aws_policy("/", "AmazonSageMakerHyperPodInferenceAccess",
  "Provides the permissions the SageMaker HyperPod inference operator needs.",
  allow({ "sagemaker:*", "s3:GetObject", "s3:PutObject", "ecr:*", "elasticloadbalancing:*" }))
aws_policy("/", "AmazonSageMakerHyperPodGatedModelAccess",
  "Provides access to SageMaker JumpStart gated models for HyperPod.",
  allow({ "s3:GetObject", "s3:ListBucket" }))
aws_policy("/", "AmazonSageMakerHyperPodTrainingOperatorAccess",
  "Provides the permissions the SageMaker HyperPod training operator needs.",
  allow({ "sagemaker:DescribeClusterNode", "sagemaker:ListClusterNodes" }))
aws_policy("/", "AmazonSSMManagedInstanceCore", "The policy for Amazon EC2 Role to enable AWS Systems Manager " ..
  "service core functionality.", allow({ "ssm:*", "ssmmessages:*", "ec2messages:*" }))
aws_policy("/", "AmazonS3FullAccess", "Provides full access to all buckets via the AWS Management Console.",
  allow({ "s3:*", "s3-object-lambda:*" }))
aws_policy("/", "AmazonS3ReadOnlyAccess", "Provides read only access to all buckets via the AWS Management Console.",
  allow({ "s3:Get*", "s3:List*", "s3:Describe*" }))
aws_policy("/", "AmazonFSxFullAccess", "Provides full access to Amazon FSx.", allow({ "fsx:*", "ec2:Describe*" }))
aws_policy("/", "CloudWatchAgentServerPolicy", "Permissions required to use AmazonCloudWatchAgent on servers",
  allow({ "cloudwatch:PutMetricData", "ec2:DescribeTags", "logs:PutLogEvents", "logs:CreateLogStream" }))
aws_policy("/service-role/", "AmazonEBSCSIDriverPolicy",
  "IAM Policy that allows the CSI driver service account to make calls to related services such as EC2 on your behalf.",
  allow({ "ec2:CreateSnapshot", "ec2:AttachVolume", "ec2:DetachVolume", "ec2:ModifyVolume", "ec2:Describe*" }))
M.AWS = AWS

local function customer_name(arn)
  local prefix = "arn:aws:iam::" .. C.ACCOUNT .. ":policy/"
  if type(arn) ~= "string" or arn:sub(1, #prefix) ~= prefix then return nil end
  return arn:match("([^/]+)$")
end

local function check_arn(ctx, arn)
  if type(arn) ~= "string" or not arn:match("^arn:aws:iam::[%w]+:policy/") then
    ctx.error("InvalidInput", "ARN " .. tostring(arn) .. " is not valid.")
  end
end

-- lookup(ctx, arn) -> the policy record (AWS-managed or the account's) or nil
function M.lookup(ctx, arn)
  if AWS[arn] then return AWS[arn] end
  local name = customer_name(arn)
  local p = name and ctx.state:get("policy", name)
  if p and p.Arn == arn then return p end
end

local function get(ctx, arn)
  check_arn(ctx, arn)
  local p = M.lookup(ctx, arn)
  if not p then ctx.error("NoSuchEntity", "Policy " .. arn .. " does not exist or is not attachable.", 404) end
  return p
end

local function attachments(ctx, arn)
  local n = 0
  for _, r in ipairs(ctx.state:list("role")) do
    for _, a in ipairs(r.attached) do
      if a == arn then n = n + 1 end
    end
  end
  return n
end

local function view(ctx, p, count)
  return {
    PolicyName = p.PolicyName, PolicyId = p.PolicyId, Arn = p.Arn, Path = p.Path,
    DefaultVersionId = p.DefaultVersionId, AttachmentCount = count or attachments(ctx, p.Arn),
    PermissionsBoundaryUsageCount = 0, IsAttachable = true, Description = p.Description,
    CreateDate = p.CreateDate, UpdateDate = p.UpdateDate,
    Tags = p.Tags and #p.Tags > 0 and p.Tags or nil,
  }
end

local function version_view(p, v)
  return { Document = C.urlencode(v.Document), VersionId = v.VersionId,
           IsDefaultVersion = v.VersionId == p.DefaultVersionId, CreateDate = v.CreateDate }
end

function ops.CreatePolicy(ctx, input)
  local name = input.PolicyName
  C.check_name(ctx, name, "policyName", 128)
  local path = C.check_path(ctx, input.Path, "path")
  C.parse_policy(ctx, input.PolicyDocument, "identity")
  local tags = C.check_tags(ctx, input.Tags)
  if ctx.state:get("policy", name) then
    ctx.error("EntityAlreadyExists", "A policy called " .. name .. " already exists. Duplicate names are not allowed.",
      409)
  end
  local now = C.now(ctx)
  local p = {
    PolicyName = name, PolicyId = C.id("ANPA"), Arn = C.arn("policy", path, name), Path = path,
    Description = input.Description, CreateDate = now, UpdateDate = now, DefaultVersionId = "v1", Tags = tags,
    versions = { { VersionId = "v1", Document = input.PolicyDocument, CreateDate = now } }, next_version = 2,
  }
  ctx.state:put("policy", name, p)
  local out = view(ctx, p, 0)
  out.Description = nil -- CreatePolicy does not echo the description
  return { Policy = out }
end

function ops.GetPolicy(ctx, input)
  return { Policy = view(ctx, get(ctx, input.PolicyArn)) }
end

function ops.DeletePolicy(ctx, input)
  local p = get(ctx, input.PolicyArn)
  if p.aws then ctx.error("AccessDenied", "An AWS-managed policy cannot be deleted.", 403) end
  if attachments(ctx, p.Arn) > 0 then
    ctx.error("DeleteConflict", "Cannot delete a policy attached to entities.", 409)
  end
  if #p.versions > 1 then
    ctx.error("DeleteConflict", "This policy has more than one version. Before you delete a policy, you must " ..
      "delete the policy's versions. The default version is deleted with the policy.", 409)
  end
  ctx.state:delete("policy", p.PolicyName)
  return {}
end

function ops.ListPolicies(ctx, input)
  local scope = input.Scope or "All"
  if scope ~= "All" and scope ~= "AWS" and scope ~= "Local" then
    ctx.error("ValidationError", "1 validation error detected: Value '" .. tostring(scope) .. "' at 'scope' " ..
      "failed to satisfy constraint: Member must satisfy enum value set: [All, AWS, Local]")
  end
  local only = input.OnlyAttached == true or input.OnlyAttached == "true"
  local prefix = input.PathPrefix or "/"
  local counts = {}
  for _, r in ipairs(ctx.state:list("role")) do
    for _, a in ipairs(r.attached) do counts[a] = (counts[a] or 0) + 1 end
  end
  local all = {}
  local function consider(p)
    if p.Path:sub(1, #prefix) == prefix and (not only or (counts[p.Arn] or 0) > 0) then all[#all + 1] = p end
  end
  if scope ~= "Local" then
    for _, p in pairs(AWS) do consider(p) end
  end
  if scope ~= "AWS" then
    for _, p in ipairs(ctx.state:list("policy")) do consider(p) end
  end
  table.sort(all, function(a, b) return a.Arn < b.Arn end)
  local page, truncated, marker = C.page(ctx, all, input, function(p) return p.Arn end)
  local out = json.array()
  for i, p in ipairs(page) do
    out[i] = view(ctx, p, counts[p.Arn] or 0)
    out[i].Description, out[i].Tags = nil, nil
  end
  return { Policies = out, IsTruncated = truncated, Marker = marker }
end

function ops.AttachRolePolicy(ctx, input)
  local r = roles.get(ctx, input.RoleName)
  local p = get(ctx, input.PolicyArn)
  for _, a in ipairs(r.attached) do
    if a == p.Arn then return {} end
  end
  C.append(ctx, r.attached, p.Arn, 20, "Cannot exceed quota for PoliciesPerRole: 20.")
  ctx.state:put("role", r.RoleName, r)
  ctx.target = r.RoleName
  return {}
end

function ops.DetachRolePolicy(ctx, input)
  local r = roles.get(ctx, input.RoleName)
  check_arn(ctx, input.PolicyArn)
  r.attached = C.without(ctx, r.attached, input.PolicyArn, "Policy " .. input.PolicyArn .. " was not found.")
  ctx.state:put("role", r.RoleName, r)
  ctx.target = r.RoleName
  return {}
end

function ops.ListAttachedRolePolicies(ctx, input)
  local r = roles.get(ctx, input.RoleName)
  local prefix = input.PathPrefix or "/"
  local all = {}
  for _, a in ipairs(r.attached) do
    local p = M.lookup(ctx, a)
    if p and p.Path:sub(1, #prefix) == prefix then
      all[#all + 1] = { PolicyName = p.PolicyName, PolicyArn = p.Arn }
    end
  end
  local page, truncated, marker = C.page(ctx, all, input, function(x) return x.PolicyArn end)
  return { AttachedPolicies = page, IsTruncated = truncated, Marker = marker }
end

-- --- versions -----------------------------------------------------------

local function find_version(ctx, p, id)
  if type(id) ~= "string" or not id:match("^v%d+$") then
    ctx.error("ValidationError", "1 validation error detected: Value '" .. tostring(id) .. "' at 'versionId' " ..
      "failed to satisfy constraint: Member must satisfy regular expression pattern: v[1-9][0-9]*(\\.[A-Za-z0-9-]*)?")
  end
  for i, v in ipairs(p.versions) do
    if v.VersionId == id then return v, i end
  end
  ctx.error("NoSuchEntity", "Policy " .. p.Arn .. " version " .. id .. " does not exist or is not attachable.", 404)
end

function ops.GetPolicyVersion(ctx, input)
  local p = get(ctx, input.PolicyArn)
  return { PolicyVersion = version_view(p, find_version(ctx, p, input.VersionId)) }
end

function ops.ListPolicyVersions(ctx, input)
  local p = get(ctx, input.PolicyArn)
  local all = {}
  for i = #p.versions, 1, -1 do
    local v = version_view(p, p.versions[i])
    v.Document = nil
    all[#all + 1] = v
  end
  local page, truncated, marker = C.page(ctx, all, input, function(v)
    return string.format("%09d", 100000000 - tonumber(v.VersionId:sub(2)))
  end)
  return { Versions = page, IsTruncated = truncated, Marker = marker }
end

local function customer(ctx, arn)
  local p = get(ctx, arn)
  if p.aws then ctx.error("AccessDenied", "An AWS-managed policy cannot be changed.", 403) end
  return p
end

function ops.CreatePolicyVersion(ctx, input)
  local p = customer(ctx, input.PolicyArn)
  C.parse_policy(ctx, input.PolicyDocument, "identity")
  if #p.versions >= 5 then
    ctx.error("LimitExceeded", "A managed policy can have up to 5 versions. Before you create a new version, " ..
      "you must delete an existing version.", 409)
  end
  local now = C.now(ctx)
  local v = { VersionId = "v" .. p.next_version, Document = input.PolicyDocument, CreateDate = now }
  p.next_version = p.next_version + 1
  p.versions[#p.versions + 1] = v
  if input.SetAsDefault == true or input.SetAsDefault == "true" then p.DefaultVersionId = v.VersionId end
  p.UpdateDate = now
  ctx.state:put("policy", p.PolicyName, p)
  local out = version_view(p, v)
  out.Document = nil
  return { PolicyVersion = out }
end

function ops.DeletePolicyVersion(ctx, input)
  local p = customer(ctx, input.PolicyArn)
  local v, i = find_version(ctx, p, input.VersionId)
  if v.VersionId == p.DefaultVersionId then
    ctx.error("DeleteConflict", "Cannot delete the default version of a policy.", 409)
  end
  table.remove(p.versions, i)
  ctx.state:put("policy", p.PolicyName, p)
  return {}
end

function ops.SetDefaultPolicyVersion(ctx, input)
  local p = customer(ctx, input.PolicyArn)
  local v = find_version(ctx, p, input.VersionId)
  p.DefaultVersionId = v.VersionId
  p.UpdateDate = C.now(ctx)
  ctx.state:put("policy", p.PolicyName, p)
  return {}
end

return M
