-- sandbox.policy_resources: what a request asks IAM for: the action, the
-- resource ARNs it is authorized on, and the roles it passes.
--
--   R.action(service, operation) -> "service:Action"
--   R.checks(ctx, service, operation, input) -> list of { action, resource
--     | nil, passed_to = service principal | nil } that must all be allowed,
--     in the order AWS checks them
--
-- The action is service:Operation (the IAM prefix is the service name),
-- except S3, where IAM's names differ (ListObjectsV2 is s3:ListBucket,
-- HeadObject and GetObject s3:GetObject, UploadPart s3:PutObject, ...).
-- The resources: first the table of sandbox.data.policy_resources (the
-- Service Authorization Reference's resource types, for the actions the
-- generic rules below would get wrong, e.g. EC2's CreateSubnet on subnet/*
-- and on its VPC); otherwise, where the operation names one clearly:
--   iam   the role (RoleName, with its path when the role exists), the
--         instance profile (InstanceProfileName, before RoleName), the policy
--         (PolicyArn; CreatePolicy: Path and PolicyName), the OIDC provider
--   sts   AssumeRole: RoleArn
--   ec2   Create<Type>: "<type>/*"; CreateTags and DeleteTags: every id of
--         Resources, by its prefix; otherwise the resource an id names
--         (RouteTableId, GroupId, ..., in that order); Describe*: none (EC2
--         has no resource-level permissions for them)
--   eks   cluster/<name> for operations on a cluster (name; Create*/List* of
--         its add-ons, access entries, pod identity associations and node
--         groups by clusterName); an add-on, access entry, pod identity
--         association or node group by the ARN of its record (when it does
--         not exist, that ARN with "*" for the id EKS would give it);
--         resourceArn for tag operations
--   sagemaker  cluster/* for CreateCluster; the cluster's ARN (ClusterName
--         as an ARN, or the record's) otherwise; mlflow-tracking-server/<name>,
--         training-plan/<name>; ResourceArn for tag operations
--   s3    arn:aws:s3:::bucket, or bucket/key for object operations;
--         DeleteObjects: every key; CopyObject: s3:PutObject on the target
--         and s3:GetObject on the source
--   fsx   file-system/* for CreateFileSystem, file-system/<id>, ResourceARN
-- Every other request has no resource (only Resource "*" matches it, and
-- the refusal names none).
--
-- iam:PassRole, as AWS checks it, after the operation's own action, on each
-- role the table's `passed` entry names (eks CreateCluster, CreateNodegroup
-- and CreatePodIdentityAssociation, sagemaker CreateCluster, UpdateCluster
-- and CreateMlflowTrackingServer), with iam:PassedToService the service the
-- role goes to.
local policy_values = require "sandbox.policy_values"
local data = require "sandbox.data.policy_resources"

local M = {}

local as_list = policy_values.as_list

-- S3 operations whose IAM action has another name
local S3_ACTIONS = {
  ListObjects = "ListBucket", ListObjectsV2 = "ListBucket", HeadBucket = "ListBucket",
  ListObjectVersions = "ListBucketVersions", ListBuckets = "ListAllMyBuckets",
  HeadObject = "GetObject", CreateMultipartUpload = "PutObject", UploadPart = "PutObject",
  UploadPartCopy = "PutObject", CompleteMultipartUpload = "PutObject", CopyObject = "PutObject",
  DeleteObjects = "DeleteObject", ListParts = "ListMultipartUploadParts",
  ListMultipartUploads = "ListBucketMultipartUploads",
  GetBucketEncryption = "GetEncryptionConfiguration", PutBucketEncryption = "PutEncryptionConfiguration",
  DeleteBucketEncryption = "PutEncryptionConfiguration",
  GetPublicAccessBlock = "GetBucketPublicAccessBlock", PutPublicAccessBlock = "PutBucketPublicAccessBlock",
  DeletePublicAccessBlock = "PutBucketPublicAccessBlock", DeleteBucketTagging = "PutBucketTagging",
  GetBucketLifecycleConfiguration = "GetLifecycleConfiguration",
  PutBucketLifecycleConfiguration = "PutLifecycleConfiguration", DeleteBucketLifecycle = "PutLifecycleConfiguration",
  DeleteObjectTagging = "DeleteObjectTagging",
}

-- action(service, operation) -> the IAM action a request needs
function M.action(service, operation)
  if service == "s3" then return "s3:" .. (S3_ACTIONS[operation] or operation) end
  if service == "sagemaker-runtime" then return "sagemaker:" .. operation end -- IAM's prefix for both
  return service .. ":" .. operation
end

local function str(v) return type(v) == "string" and v ~= "" and v or nil end

-- ec2: what an id names, by its prefix
local EC2_ID = { vpc = "vpc", subnet = "subnet", sg = "security-group", rtb = "route-table",
  igw = "internet-gateway", nat = "natgateway", eipalloc = "elastic-ip", vpce = "vpc-endpoint", i = "instance",
  eni = "network-interface", vol = "volume", lt = "launch-template", sgr = "security-group-rule" }
local EC2_CREATE = { CreateVpc = "vpc", CreateSubnet = "subnet", CreateSecurityGroup = "security-group",
  CreateRouteTable = "route-table", CreateInternetGateway = "internet-gateway", CreateNatGateway = "natgateway",
  CreateVpcEndpoint = "vpc-endpoint", AllocateAddress = "elastic-ip", CreateNetworkInterface = "network-interface",
  CreateVolume = "volume", CreateLaunchTemplate = "launch-template" }
local EC2_IDS = { "RouteTableId", "GroupId", "InternetGatewayId", "NatGatewayId", "SubnetId", "VpcId", "AllocationId",
  "VpcEndpointId", "InstanceId", "NetworkInterfaceId", "VolumeId" }
local EC2_ID_LISTS = { CreateTags = "Resources", DeleteTags = "Resources", DeleteVpcEndpoints = "VpcEndpointIds",
  TerminateInstances = "InstanceIds", StopInstances = "InstanceIds", StartInstances = "InstanceIds" }

local function ec2_arn(ctx, id)
  local kind = EC2_ID[id:match("^(%w+)%-") or ""]
  return kind and ctx:arn(kind .. "/" .. id, "ec2") or nil
end

-- association(ctx, id) -> the ARNs an association id stands for: a route
-- table association's route table and subnet, a VPC CIDR association's VPC
local function association(ctx, id)
  local view = ctx:view("ec2")
  if id:match("^rtbassoc%-") then
    for _, t in ipairs(view:list("rtb")) do
      for _, a in ipairs(t.Associations or {}) do
        if a.RouteTableAssociationId == id then
          return { ctx:arn("route-table/" .. t.RouteTableId, "ec2"), a.SubnetId and ctx:arn("subnet/" .. a.SubnetId, "ec2") }
        end
      end
    end
  elseif id:match("^vpc%-cidr%-assoc%-") then
    for _, v in ipairs(view:list("vpc")) do
      for _, a in ipairs(v.CidrBlockAssociationSet or {}) do
        if a.AssociationId == id then return { ctx:arn("vpc/" .. v.VpcId, "ec2") } end
      end
    end
  end
  return {}
end

local function ec2(ctx, op, input)
  if op:match("^Describe") then return {} end
  if str(input.AssociationId) then return association(ctx, input.AssociationId) end
  if EC2_CREATE[op] then return { ctx:arn(EC2_CREATE[op] .. "/*", "ec2") } end
  local list = EC2_ID_LISTS[op]
  if list then
    local out = {}
    for _, id in ipairs(as_list(input[list])) do
      if type(id) == "string" then out[#out + 1] = ec2_arn(ctx, id) end
    end
    return out
  end
  for _, k in ipairs(EC2_IDS) do
    local id = str(input[k])
    if id then return { ec2_arn(ctx, id) } end
  end
  return {}
end

local function iam(ctx, op, input)
  local view = ctx:view("iam")
  local function path(p) return str(p) or "/" end
  if str(input.InstanceProfileName) then
    local p = view:get("instance_profile", input.InstanceProfileName)
    return { p and p.Arn or ctx:arn("instance-profile" .. path(input.Path) .. input.InstanceProfileName, "iam") }
  end
  if str(input.RoleName) then
    local r = op ~= "CreateRole" and view:get("role", input.RoleName)
    return { r and r.Arn or ctx:arn("role" .. path(input.Path) .. input.RoleName, "iam") }
  end
  if str(input.PolicyArn) then return { input.PolicyArn } end
  if op == "CreatePolicy" and str(input.PolicyName) then
    return { ctx:arn("policy" .. path(input.Path) .. input.PolicyName, "iam") }
  end
  if str(input.OpenIDConnectProviderArn) then return { input.OpenIDConnectProviderArn } end
  if op == "CreateOpenIDConnectProvider" and str(input.Url) then
    return { ctx:arn("oidc-provider/" .. input.Url:gsub("^https://", ""):gsub("/$", ""), "iam") }
  end
  if str(input.UserName) then return { ctx:arn("user" .. path(input.Path) .. input.UserName, "iam") } end
  return {}
end

local function eks(ctx, op, input)
  if str(input.resourceArn) then return { input.resourceArn } end
  local view = ctx:view("eks")
  local cluster = str(input.clusterName)
  if str(input.name) and not cluster then return { ctx:arn("cluster/" .. input.name, "eks") } end
  if not cluster then return {} end
  if op:match("^Create") or op:match("^List[A-Z]%l+s$") or op == "ListPodIdentityAssociations"
      or op == "ListAccessEntries" then
    return { ctx:arn("cluster/" .. cluster, "eks") }
  end
  -- the record's ARN; a missing one's, its id unknown: "*" in its place
  local rec, field, missing
  if str(input.addonName) then
    rec, field = view:get("addon", cluster .. "/" .. input.addonName), "addonArn"
    missing = "addon/" .. cluster .. "/" .. input.addonName .. "/*"
  elseif str(input.principalArn) then
    rec, field = view:get("access_entry", cluster .. "/" .. input.principalArn), "accessEntryArn"
    missing = "access-entry/" .. cluster .. "/*"
  elseif str(input.associationId) then
    rec, field = view:get("pod_identity", cluster .. "/" .. input.associationId), "associationArn"
    missing = "podidentityassociation/" .. cluster .. "/" .. input.associationId
  elseif str(input.nodegroupName) then
    rec, field = view:get("nodegroup", cluster .. "/" .. input.nodegroupName), "nodegroupArn"
    missing = "nodegroup/" .. cluster .. "/" .. input.nodegroupName .. "/*"
  else
    return { ctx:arn("cluster/" .. cluster, "eks") }
  end
  return { rec and rec[field] or ctx:arn(missing, "eks") }
end

local function sagemaker(ctx, op, input)
  if str(input.ResourceArn) then return { input.ResourceArn } end
  local name = str(input.ClusterName)
  if name then
    if op == "CreateCluster" then return { ctx:arn("cluster/*", "sagemaker") } end
    if name:sub(1, 4) == "arn:" then return { name } end
    local c = ctx:view("sagemaker"):get("cluster", name)
    return { c and c.ClusterArn or nil }
  end
  if str(input.TrackingServerName) then
    return { ctx:arn("mlflow-tracking-server/" .. input.TrackingServerName, "sagemaker") }
  end
  if str(input.TrainingPlanName) then return { ctx:arn("training-plan/" .. input.TrainingPlanName, "sagemaker") } end
  return {}
end

local function s3_arn(bucket, key) return "arn:aws:s3:::" .. bucket .. (key and "/" .. key or "") end

local function unescape(s) return (s:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)) end

-- s3(ctx, op, input) -> resources, plus extra { action, resource } checks
local function s3(_, op, input)
  local bucket = str(input.Bucket)
  if not bucket then return {} end
  if op == "DeleteObjects" then
    local out = {}
    for _, o in ipairs(as_list((input.Delete or {}).Objects)) do
      if type(o) == "table" and str(o.Key) then out[#out + 1] = s3_arn(bucket, o.Key) end
    end
    return out
  end
  if op == "CopyObject" and str(input.CopySource) then
    local src = unescape(input.CopySource:gsub("%?versionId=.*$", ""))
    local sb, sk = src:match("^/?([^/]+)/(.+)$")
    return { s3_arn(bucket, str(input.Key)) }, sb and { { "s3:GetObject", s3_arn(sb, sk) } } or nil
  end
  return { s3_arn(bucket, str(input.Key)) }
end

local function fsx(ctx, op, input)
  if str(input.ResourceARN) then return { input.ResourceARN } end
  if op == "CreateFileSystem" then return { ctx:arn("file-system/*", "fsx") } end
  if str(input.FileSystemId) then return { ctx:arn("file-system/" .. input.FileSystemId, "fsx") } end
  return {}
end

local function sts(_, op, input)
  if op == "AssumeRole" and str(input.RoleArn) then return { input.RoleArn } end
  return {}
end

local RESOURCES = { ec2 = ec2, iam = iam, eks = eks, sagemaker = sagemaker, s3 = s3, fsx = fsx, sts = sts }

-- from_table(ctx, action, input) -> the resources the data table names, or nil
local function from_table(ctx, action, input)
  local templates = data.arns[action]
  if not templates then return nil end
  local service = action:match("^([^:]+):")
  local out = {}
  local function add(r) out[#out + 1] = r:sub(1, 4) == "arn:" and r or ctx:arn(r, service) end
  for _, tpl in ipairs(templates) do
    tpl = tpl:gsub("{:region}", ctx.region or "")
    local members = {}
    for m in tpl:gmatch("{(%w+)}") do members[#members + 1] = m end
    if #members == 0 then
      add(tpl)
    elseif #members == 1 then -- a list member: one resource per element
      for _, v in ipairs(as_list(input[members[1]])) do
        if str(v) then add((tpl:gsub("{%w+}", (v:gsub("%%", "%%%%"))))) end
      end
    else -- every member present, each a string
      local whole = true
      local r = tpl:gsub("{(%w+)}", function(m)
        if not str(input[m]) then whole = false return "" end
        return input[m]
      end)
      if whole then add(r) end
    end
  end
  return out
end

-- values(input, path) -> the strings at a member path ("List[].Member" or "Member")
local function values(input, path)
  local list, member = path:match("^(%w+)%[%]%.(%w+)$")
  local out = {}
  if list then
    for _, g in ipairs(as_list(input[list])) do
      if type(g) == "table" and str(g[member]) then out[#out + 1] = g[member] end
    end
  elseif str(input[path]) then
    out[1] = input[path]
  end
  return out
end

-- passed_roles(action, input) -> the roles (each once), the service they go to
local function passed_roles(action, input)
  local p = data.passed[action]
  if not p then return {}, nil end
  local seen, out = {}, {}
  for _, path in ipairs(p.members) do
    for _, r in ipairs(values(input, path)) do
      if not seen[r] then seen[r], out[#out + 1] = true, r end
    end
  end
  return out, p.to
end

function M.checks(ctx, service, operation, input)
  input = type(input) == "table" and input or {}
  local action = M.action(service, operation)
  local resources, extra = from_table(ctx, action, input), nil
  if not resources then
    local fn = RESOURCES[service]
    resources = {}
    if fn then resources, extra = fn(ctx, operation, input) end
  end
  local out = {}
  if #resources == 0 then out[1] = { action } end
  for _, r in ipairs(resources) do out[#out + 1] = { action, r } end
  for _, c in ipairs(extra or {}) do out[#out + 1] = c end
  local roles, to = passed_roles(service .. ":" .. operation, input)
  for _, role in ipairs(roles) do out[#out + 1] = { "iam:PassRole", role, passed_to = to } end
  return out
end

return M
