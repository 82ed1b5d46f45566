-- hyperpod/_feat_inference: the HyperPod inference operator, a closed loop
-- of ten links (InstantStart's order), each read back before it is made:
--   1 prerequisite add-ons: cert-manager >= v1.18.2-eksbuild.2 and
--     metrics-server >= v0.7.2-eksbuild.4 (installed when missing), the FSx
--     CSI driver >= v1.6.0-eksbuild.1 (the fsx_csi_driver chain, with its
--     role), the Mountpoint S3 CSI driver >= v1.14.1-eksbuild.1 (it needs
--     its own role: cluster_configure_dependencies installs it; missing, the
--     call is refused before anything is made). An older one is refused.
--   2 four IAM roles: SageMakerHyperPodInference-<tag> (the operator:
--     SageMaker and the OIDC provider for its controller's service account;
--     AmazonSageMakerHyperPodInferenceAccess), HyperPodInferenceGated-<tag>
--     (gated JumpStart downloads; AmazonSageMakerHyperPodGatedModelAccess),
--     HyperPodInferenceALB-<tag> and HyperPodInferenceKEDA-<tag> (the load
--     balancer controller and KEDA the add-on runs, each with its policy
--     ...-Policy)
--   3 the TLS certificate bucket hyperpod-tls-<tag>-<account> (private,
--     tagged)
--   4 the public subnets tagged kubernetes.io/role/elb=1
--   5 an S3 gateway endpoint on the route tables of the EKS subnets
--   6 the HyperPod cluster's ARN
--   7 add-on amazon-sagemaker-hyperpod-inference with its configuration
--     (executionRoleArn, tlsCertificateS3Bucket, hyperpodClusterArn,
--     jumpstartGatedModelDownloadRoleArn, alb and keda roles)
--   8 the add-on ACTIVE (15 s checks, 20 minutes at most; its health issues
--     when it fails)
--   9 the operator's controller available in hyperpod-inference-system
--   10 (InstantStart saved metadata here: hypd reads the state back instead)
-- Disabling deletes the add-on (and waits), empties and deletes the TLS
-- bucket, deletes the four roles and the two policies. The subnet tags and
-- the S3 endpoint stay: the network uses them beyond this feature.
local Names = require "_names"
local A = require "_eks_addon"
local AD = require "hyperpod._feat_addons"
local F = require "hyperpod._feat"
local I = require "hyperpod._feat_iam"
local K = require "_k8s_objects"
local LBC = require "_lb_controller_policy"

local M = { name = "inference_operator", hyperpod = true }

M.ADDON = "amazon-sagemaker-hyperpod-inference"
M.NS = "hyperpod-inference-system"
M.CONTROLLER = "hyperpod-inference-operator-controller-manager"
M.TIMEOUT = 20 * 60
M.PREREQUISITES = {
  { "cert-manager", "v1.18.2-eksbuild.2", install = "cert_manager" },
  { "metrics-server", "v0.7.2-eksbuild.4", install = "addon" },
  { "aws-fsx-csi-driver", "v1.6.0-eksbuild.1", install = "fsx_csi_driver" },
  { "aws-mountpoint-s3-csi-driver", "v1.14.1-eksbuild.1" },
}
M.ELB_TAG = "kubernetes.io/role/elb"

-- the service accounts the add-on runs its parts as
local SA = { operator = M.NS .. ":" .. M.CONTROLLER, alb = M.NS .. ":aws-load-balancer-controller",
  keda = M.NS .. ":keda-operator", gated = M.NS .. ":*" }

local function roles(env)
  local n = F.names(env)
  local sm = { Effect = "Allow", Principal = { Service = "sagemaker.amazonaws.com" }, Action = "sts:AssumeRole" }
  return {
    { key = "execution", name = n.inference_role, trust = I.trust_oidc(env, { SA.operator }, { sm }),
      policy = I.aws_policy(env, "AmazonSageMakerHyperPodInferenceAccess"), what = "the inference operator" },
    { key = "gated", name = n.gated_role, trust = I.trust_oidc(env, { SA.gated }, { sm }),
      policy = I.aws_policy(env, "AmazonSageMakerHyperPodGatedModelAccess"), what = "gated JumpStart model downloads" },
    { key = "alb", name = n.alb_role, trust = I.trust_oidc(env, { SA.alb }), own = n.alb_policy,
      what = "the AWS Load Balancer Controller the add-on runs" },
    { key = "keda", name = n.keda_role, trust = I.trust_oidc(env, { SA.keda }), own = n.keda_policy,
      what = "KEDA, the add-on's autoscaler" },
  }
end

-- the policies of the two roles that have their own: the load balancer
-- controller's (_lb_controller_policy), and KEDA reading the metrics it
-- scales on
function M.keda_policy()
  return { Version = "2012-10-17", Statement = {
    { Effect = "Allow", Action = { "cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics",
      "cloudwatch:ListMetrics" }, Resource = "*" },
    { Effect = "Allow", Action = { "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata" },
      Resource = "*" } } }
end

local function bucket_region(env) return env.region ~= "us-east-1" and env.region or nil end

-- bucket(ctx, name) -> {Name, tags} | nil
local function bucket(ctx, name)
  local _, err = ctx:try("s3", "HeadBucket", { Bucket = name })
  if err then
    if err.code == "NotFound" or err.code == "NoSuchBucket" or err.status == 404 then return nil end
    if err.code == "Forbidden" or err.status == 403 then
      return { Name = name, tags = {}, foreign = "the bucket name belongs to another account" }
    end
    error(err, 0)
  end
  local t, terr = ctx:try("s3", "GetBucketTagging", { Bucket = name })
  if not t and terr.code ~= "NoSuchTagSet" then error(terr, 0) end
  return { Name = name, tags = t and t.TagSet or {} }
end

local function controller(ctx, env)
  return K.get(ctx:k8s(env.eks), "apps/v1", "Deployment", M.CONTROLLER, M.NS)
end

function M.read(ctx, env)
  local n = F.names(env)
  local parts = {}
  for _, pre in ipairs(M.PREREQUISITES) do
    local p = A.read(ctx, env, pre[1])
    p.part, p.prerequisite = "EKS add-on " .. pre[1] .. " >= " .. pre[2], true
    if p.present and not A.version_at_least(p.version, pre[2]) then p.ok, p.note = false, "older: " .. p.version end
    F.part(parts, p)
  end
  for _, r in ipairs(roles(env)) do
    if r.own then
      local pol = I.read_policy(ctx, env, r.own)
      pol.part = "IAM policy " .. r.own
      F.part(parts, pol)
    end
    local role = I.read_role(ctx, env, r.name, env.oidc_arn and r.trust, { r.policy or I.arn(env, "policy", r.own) })
    role.part = "IAM role " .. r.name .. " (" .. r.what .. ")"
    F.part(parts, role)
  end
  local b = bucket(ctx, n.tls_bucket)
  F.part(parts, { part = "S3 bucket " .. n.tls_bucket .. " (TLS certificates)", name = n.tls_bucket,
    present = b ~= nil, ok = b ~= nil and F.owned(env, b.tags) or false })
  local a = A.read(ctx, env, M.ADDON)
  a.part = "EKS add-on " .. M.ADDON
  F.part(parts, a)
  local d = a.present and controller(ctx, env)
  local ready = d and ((d.status or {}).availableReplicas or 0) >= 1
  F.part(parts, { part = "Deployment " .. M.NS .. "/" .. M.CONTROLLER .. " available", present = ready or false,
    ok = true, optional = true, prerequisite = true, status = d and (ready and "Available" or "Progressing") or nil })
  local iam = {}
  for _, r in ipairs(roles(env)) do iam[r.key] = I.arn(env, "role", r.name) end
  return F.state(parts, { iam_roles = iam, tls_bucket = n.tls_bucket })
end

function M.matches(state, want) return state.enabled == want.enabled end

-- check(ctx, env): what cannot be made here is refused before anything is
function M.check(ctx, env)
  for _, pre in ipairs(M.PREREQUISITES) do
    local p = A.read(ctx, env, pre[1])
    if not p.present and not pre.install then
      hypd.errors.refuse("inference_operator", "prerequisite", "inference_operator needs EKS add-on " .. pre[1] ..
        " (>= " .. pre[2] .. "), which is not installed on " .. env.eks .. "; cluster_configure_dependencies installs " ..
        "it with its role",
        { code = "STATE", field_message = "inference_operator: needs " .. pre[1] .. " (cluster_configure_dependencies)" })
    end
    if p.present and not A.version_at_least(p.version, pre[2]) then
      hypd.errors.refuse("inference_operator", "prerequisite", "inference_operator needs EKS add-on " .. pre[1] ..
        " " .. pre[2] .. " or newer; " .. env.eks .. " has " .. tostring(p.version) .. ": update it (eks UpdateAddon) first",
        { code = "STATE", field_message = "inference_operator: " .. pre[1] .. " is older than " .. pre[2] })
    end
  end
end

local function subnet_tags(ctx, env)
  local ids = env.public_subnet_ids
  if not ids or #ids == 0 then
    ids = {}
    if env.vpc_id then
      for _, s in ipairs(hypd.aws.all("ec2", "DescribeSubnets", { Filters = { { Name = "vpc-id",
        Values = { env.vpc_id } } } }, ctx:aws_opts()) or {}) do
        if s.MapPublicIpOnLaunch then ids[#ids + 1] = s.SubnetId end
      end
    end
  end
  for _, id in ipairs(ids) do
    ctx:ensure { type = "ec2:subnet-tag", label = "subnet tag", name = M.ELB_TAG .. "=1 on " .. id, id = "SubnetId",
      search = function()
        return (ctx:call("ec2", "DescribeSubnets", { SubnetIds = { id } }).Subnets or {})[1]
      end,
      create = function() hypd.errors.raise("NOT_FOUND", "subnet " .. id .. " is gone") end,
      desired = { [M.ELB_TAG] = "1" },
      current = function(s)
        for _, t in ipairs(s.Tags or {}) do if t.Key == M.ELB_TAG then return { [M.ELB_TAG] = t.Value } end end
        return {}
      end,
      update = function(s)
        ctx:call("ec2", "CreateTags", { Resources = { id }, Tags = { { Key = M.ELB_TAG, Value = "1" } } })
        return s
      end }
  end
end

local function s3_endpoint(ctx, env)
  if not env.vpc_id then return end
  local tables, seen = {}, {}
  for _, sid in ipairs(env.subnet_ids) do
    local rts = hypd.aws.all("ec2", "DescribeRouteTables", { Filters = { { Name = "association.subnet-id",
      Values = { sid } } } }, ctx:aws_opts()) or {}
    for _, rt in ipairs(rts) do
      if not seen[rt.RouteTableId] then seen[rt.RouteTableId] = true; tables[#tables + 1] = rt.RouteTableId end
    end
  end
  if #tables == 0 then return end
  table.sort(tables)
  local service = "com.amazonaws." .. env.region .. ".s3"
  local function find()
    for _, e in ipairs(hypd.aws.all("ec2", "DescribeVpcEndpoints", { Filters = {
      { Name = "vpc-id", Values = { env.vpc_id } }, { Name = "service-name", Values = { service } },
      { Name = "vpc-endpoint-type", Values = { "Gateway" } } } }, ctx:aws_opts()) or {}) do
      if e.State ~= "deleted" and e.State ~= "deleting" then return e end
    end
  end
  ctx:ensure { type = "ec2:vpc-endpoint", label = "S3 gateway endpoint", name = service .. " in " .. env.vpc_id,
    id = "VpcEndpointId", search = find,
    fields = { VpcEndpointType = "Gateway", RouteTableIds = tables },
    desired = { RouteTableIds = tables },
    current = function(e)
      local have, out = {}, {}
      for _, id in ipairs(e.RouteTableIds or {}) do have[id] = true end
      for _, id in ipairs(tables) do if have[id] then out[#out + 1] = id end end
      return { RouteTableIds = out }
    end,
    create = function()
      return ctx:call("ec2", "CreateVpcEndpoint", { VpcId = env.vpc_id, ServiceName = service,
        VpcEndpointType = "Gateway", RouteTableIds = tables, TagSpecifications = { { ResourceType = "vpc-endpoint",
        Tags = { { Key = Names.TAG, Value = env.tag }, { Key = "Name", Value = env.tag .. "-s3" } } } } }).VpcEndpoint
    end,
    update = function(e, changes)
      local have, add = {}, {}
      for _, id in ipairs(changes.RouteTableIds.from or {}) do have[id] = true end
      for _, id in ipairs(tables) do if not have[id] then add[#add + 1] = id end end
      ctx:call("ec2", "ModifyVpcEndpoint", { VpcEndpointId = e.VpcEndpointId, AddRouteTableIds = add })
      return e
    end }
end

function M.enable(ctx, env)
  F.need_hyperpod(env, M.name)
  M.check(ctx, env)
  F.oidc(ctx, env, M.name)
  -- 1 prerequisites
  for _, pre in ipairs(M.PREREQUISITES) do
    if pre.install == "cert_manager" then AD.features.cert_manager.enable(ctx, env)
    elseif pre.install == "fsx_csi_driver" then AD.features.fsx_csi_driver.enable(ctx, env)
    elseif pre.install == "addon" then A.ensure(ctx, env, M.name, pre[1]) end
  end
  -- 2 roles
  local arns = {}
  for _, r in ipairs(roles(env)) do
    local policy = r.policy
    if r.own then
      policy = I.policy(ctx, env, M.name, r.own, r.key == "alb" and LBC.policy() or M.keda_policy()).Arn
    end
    local role = I.role(ctx, env, M.name, r.name, r.trust, "hypd " .. env.tag .. ": " .. r.what)
    I.attach(ctx, role, policy)
    arns[r.key] = role.Arn
  end
  -- 3 the TLS bucket
  local n = F.names(env)
  local tags = F.tags(env, M.name)
  ctx:ensure { type = "s3:bucket", label = "S3 bucket", name = n.tls_bucket, id = "Name", field = M.name,
    exists = { "BucketAlreadyOwnedByYou" },
    search = function() return bucket(ctx, n.tls_bucket) end,
    owned = function(b) return b.foreign == nil and F.owned(env, b.tags) end,
    fields = { purpose = "TLS certificates of the inference endpoints", ["tag:" .. Names.TAG] = env.tag },
    create = function()
      local r = bucket_region(env)
      ctx:call("s3", "CreateBucket", { Bucket = n.tls_bucket,
        CreateBucketConfiguration = r and { LocationConstraint = r } or nil })
      ctx:call("s3", "PutPublicAccessBlock", { Bucket = n.tls_bucket, PublicAccessBlockConfiguration = {
        BlockPublicAcls = true, IgnorePublicAcls = true, BlockPublicPolicy = true, RestrictPublicBuckets = true } })
      ctx:call("s3", "PutBucketTagging", { Bucket = n.tls_bucket, Tagging = { TagSet = tags } })
      return { Name = n.tls_bucket, tags = tags }
    end }
  -- 4 and 5: what the load balancers and the model downloads need of the network
  subnet_tags(ctx, env)
  s3_endpoint(ctx, env)
  -- 6, 7, 8 the add-on, configured with all of the above
  local config = { executionRoleArn = arns.execution, tlsCertificateS3Bucket = n.tls_bucket,
    hyperpodClusterArn = env.hp_arn, jumpstartGatedModelDownloadRoleArn = arns.gated,
    alb = { serviceAccount = { create = true, roleArn = arns.alb } },
    keda = { auth = { aws = { irsa = { roleArn = arns.keda } } } } }
  A.ensure(ctx, env, M.name, M.ADDON, { config = config, timeout = M.TIMEOUT })
  if ctx.plan then return end
  -- 9 the controller runs
  ctx:poll { what = "Deployment " .. M.NS .. "/" .. M.CONTROLLER .. " to be available", every = 10, timeout = 10 * 60,
    check = function()
      local d = controller(ctx, env)
      local st = (d or {}).status or {}
      return (st.availableReplicas or 0) >= 1, d and string.format("%d replica(s) available",
        st.availableReplicas or 0) or "no controller Deployment yet"
    end }
end

function M.disable(ctx, env)
  local n = F.names(env)
  A.absent(ctx, env, M.ADDON)
  ctx:absent { type = "s3:bucket", label = "S3 bucket", name = n.tls_bucket, gone = { "NoSuchBucket" },
    find = function() return bucket(ctx, n.tls_bucket) end,
    owned = function(b)
      if b.foreign then return false, b.foreign end
      return F.owned(env, b.tags)
    end,
    delete = function()
      -- emptied first: the certificates are the operator's, gone with it
      while true do
        local page = ctx:call("s3", "ListObjectsV2", { Bucket = n.tls_bucket, MaxKeys = 1000 })
        local keys = {}
        for _, o in ipairs(page.Contents or {}) do keys[#keys + 1] = { Key = o.Key } end
        if #keys == 0 then break end
        ctx:call("s3", "DeleteObjects", { Bucket = n.tls_bucket, Delete = { Objects = keys, Quiet = true } })
      end
      ctx:call("s3", "DeleteBucket", { Bucket = n.tls_bucket })
    end }
  local rs = roles(env)
  for i = #rs, 1, -1 do I.role_absent(ctx, env, rs[i].name) end
  for i = #rs, 1, -1 do
    if rs[i].own then I.policy_absent(ctx, env, rs[i].own) end
  end
end

return M
