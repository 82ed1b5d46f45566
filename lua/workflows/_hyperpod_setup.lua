-- _hyperpod_setup: what creating a HyperPod cluster takes besides the
-- cluster itself, shared by hyperpod_create and cluster_create (which makes
-- them while EKS is still creating, then runs hyperpod_create):
--   GROUP_PARAMS    the decisions and options of an instance group
--   ensure_role(ctx, tag) -> role: the execution role hypd-<tag>-hyperpod-exec
--     (trusts sagemaker.amazonaws.com) with AmazonSageMakerClusterInstanceRolePolicy
--     and the inline policy hypd-hyperpod-nodes (the VPC, ECR and Pod
--     Identity actions HyperPod's EKS nodes need, and reading the
--     lifecycle buckets)
--   ensure_lifecycle(ctx, tag) -> {bucket, source_s3_uri, on_create}: the
--     bucket hypd-<tag>-lifecycle-<hash of account and region> with the
--     lifecycle scripts (_lifecycle) uploaded
--   Neither needs the EKS cluster. Both are ctx:ensure resources (plan
--   themselves); the actions they call are M.AWS_ROLE and M.AWS_LIFECYCLE.
local errors = hypd.errors
local json = hypd.json
local Names = require "_names"
local iam = require "_iam"
local lifecycle = require "_lifecycle"
local net = require "_network"
local P = require "_params"

local M = {}

M.VOLUME_GB = 500
M.MANAGED_POLICY = "AmazonSageMakerClusterInstanceRolePolicy"
M.NODE_POLICY = "hypd-hyperpod-nodes"

-- the decisions and options of an instance group, the same on hyperpod_create
-- and hyperpod_add_instance_group, and cluster_create's first group (a tool's
-- file changes one with P.with)
M.GROUP_PARAMS = {
  availability_zone = P.with(P.availability_zone, { decision = true, fixed = true,
    description = "the Availability Zone (name or zone ID) of the instances; required unless a training plan " ..
      "is used, whose reserved zone then decides (and overrides one given here; the result says so)" }),
  capacity_type = P.with(P.capacity_type, { decision = true, fixed = true }),
  training_plan = P.with(P.training_plan, { decision = true, fixed = true }),
  efa_only = { type = "boolean", default = false, fixed = true,
    description = "an efa-only network interface (types with EFA and more than one EFA interface: p4d, p5, " ..
      "p6, g6e.24xlarge and larger, ...)" },
  volume_size_gb = { type = "integer", minimum = 1, maximum = 16384, default = M.VOLUME_GB,
    description = "the EBS volume each instance gets for containers and data, in GB (mounted at /opt/sagemaker)" },
  threads_per_core = { type = "integer", enum = { 1, 2 },
    description = "threads per CPU core (default: 2 for ml.p4*, ml.p5*, ml.p6* and training plans, else 1)" },
  deep_health_checks = { type = "boolean", default = false,
    description = "run HyperPod's deep health checks (instance stress and connectivity) when instances start; " ..
      "they add time to every new node" },
}

M.AWS_ROLE = { "iam:GetRole", "iam:CreateRole", "iam:UpdateAssumeRolePolicy", "iam:ListAttachedRolePolicies",
  "iam:AttachRolePolicy", "iam:GetRolePolicy", "iam:PutRolePolicy" }
M.AWS_LIFECYCLE = { "sts:GetCallerIdentity", "s3:CreateBucket", "s3:GetBucketTagging", "s3:GetObject",
  "s3:PutObject" }

M.TRUST = json.encode { Version = "2012-10-17", Statement = { { Effect = "Allow",
  Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" } } }

-- node_policy(tag, partition) -> what HyperPod's EKS nodes do as the
-- execution role beyond the managed policy (AWS docs, "IAM role for
-- SageMaker HyperPod", EKS orchestration): their network interfaces in the
-- VPC, images from ECR, EKS Pod Identity, and reading the lifecycle scripts
function M.node_policy(tag, partition)
  local bucket = "arn:" .. partition .. ":s3:::" .. Names.hyperpod(tag).lifecycle_prefix .. "-*"
  return { Version = "2012-10-17", Statement = {
    { Sid = "NodeNetworking", Effect = "Allow", Resource = "*", Action = {
      "ec2:AssignPrivateIpAddresses", "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
      "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission", "ec2:DescribeNetworkInterfaces",
      "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups",
      "ec2:DetachNetworkInterface", "ec2:ModifyNetworkInterfaceAttribute", "ec2:UnassignPrivateIpAddresses",
      "ecr:BatchCheckLayerAvailability", "ecr:BatchGetImage", "ecr:GetAuthorizationToken",
      "ecr:GetDownloadUrlForLayer", "eks-auth:AssumeRoleForPodIdentity" } },
    { Sid = "NodeInterfaceTags", Effect = "Allow", Action = { "ec2:CreateTags" },
      Resource = { "arn:" .. partition .. ":ec2:*:*:network-interface/*" } },
    { Sid = "LifecycleScripts", Effect = "Allow", Action = { "s3:ListBucket", "s3:GetObject" },
      Resource = { bucket, bucket .. "/*" } },
  } }
end

function M.ensure_role(ctx, tag)
  local name = Names.hyperpod(tag).execution_role
  local role = iam.role(ctx, { name = name, tag = tag, key = "execution_role_arn", trust = M.TRUST,
    service = "sagemaker.amazonaws.com",
    description = "hypd " .. tag .. ": the execution role of the HyperPod cluster's instances" })
  local part = iam.partition(role.Arn)
  iam.attach(ctx, role, "arn:" .. part .. ":iam::aws:policy/" .. M.MANAGED_POLICY, M.MANAGED_POLICY)
  iam.inline(ctx, role, M.NODE_POLICY, M.node_policy(tag, part))
  return role
end


local function absent(err, ...)
  for _, c in ipairs { ... } do if err.code == c then return true end end
  return err.status == 404
end

function M.ensure_lifecycle(ctx, tag)
  local region = ctx:aws_region()
  local account = ctx:call("sts", "GetCallerIdentity", {}).Account
  local bucket = Names.lifecycle_bucket(tag, account, region)
  local cfg = { Tags = net.tag_list(tag, bucket) }
  if region ~= "us-east-1" then cfg.LocationConstraint = region end
  ctx:ensure { type = "s3:bucket", label = "S3 bucket", name = bucket, key = "lifecycle_bucket", id = "Name",
    field = "cluster_tag", exists = { "BucketAlreadyOwnedByYou" },
    owned = net.owned_by(tag, function(b) return b.Tags end),
    search = function()
      local out, err = ctx:try("s3", "GetBucketTagging", { Bucket = bucket })
      if out then return { Name = bucket, Tags = hypd.aws.tags.map(out.TagSet) } end
      if err.code == "NoSuchTagSet" then return { Name = bucket, Tags = {} } end
      if absent(err, "NoSuchBucket") then return nil end
      if err.code == "AccessDenied" or err.status == 403 then
        errors.raise("CONFLICT", "S3 bucket " .. bucket .. " belongs to another account; S3 bucket names are " ..
          "global", { field = "cluster_tag" })
      end
      error(err, 0)
    end,
    fields = { Region = region, ["tag:" .. Names.TAG] = tag },
    create = function()
      ctx:call("s3", "CreateBucket", { Bucket = bucket, CreateBucketConfiguration = cfg })
      return { Name = bucket, Tags = hypd.aws.tags.map(cfg.Tags) }
    end }
  local needs = ctx.state.lifecycle_bucket -- a planned id while the bucket is only planned
  for _, s in ipairs(lifecycle.SCRIPTS) do
    local key = lifecycle.PREFIX .. s.key
    local etag = '"' .. hypd.digest("md5", s.body) .. '"'
    local function put()
      return ctx:call("s3", "PutObject", { Bucket = bucket, Key = key, Body = s.body,
        ContentType = "text/x-shellscript" })
    end
    ctx:ensure { type = "s3:object", label = "lifecycle script", name = "s3://" .. bucket .. "/" .. key,
      needs = needs, id = "Key", fields = { Bucket = bucket, Key = key, Bytes = #s.body },
      desired = { ETag = etag }, current = function(o) return { ETag = o.ETag } end,
      search = function()
        -- (a script is small; GetObject is also the IAM action HeadObject needs)
        local out, err = ctx:try("s3", "GetObject", { Bucket = bucket, Key = key })
        if out then return { Key = key, ETag = out.ETag } end
        if absent(err, "NotFound", "NoSuchKey") then return nil end
        error(err, 0)
      end,
      create = function() return { Key = key, ETag = put().ETag } end,
      update = function() put() end }
  end
  return { bucket = bucket, source_s3_uri = "s3://" .. bucket .. "/" .. lifecycle.PREFIX,
    on_create = lifecycle.ON_CREATE }
end

return M
