-- hyperpod/_feat: what the managed-feature tools share
-- (hyperpod_get_advanced_features, hyperpod_update_advanced_features,
-- hyperpod_disable_advanced_features): the seven features in the order
-- their chains are built (disabling goes in reverse), the cluster a call
-- works on (env), the names hypd gives what a feature makes, and how a
-- feature's parts make its status (the features' parameters are in
-- _feature_params).
--
-- Every feature module (hyperpod/_feat_*.lua, and _kuberay for the KubeRay
-- operator) gives:
--   read(ctx, env) -> {enabled, status, parts = {part...}, options...}
--       the ACTUAL state, read from AWS and Kubernetes, never remembered
--   enable(ctx, env, want)   builds the whole chain with ctx:ensure (each
--       link found, made only when missing, changed only where it
--       differs); plans itself
--   disable(ctx, env)        removes the same chain in reverse with
--       ctx:absent (hypd's parts only; the rest is kept and said so)
--   matches(state, want) -> true when want already holds (nothing to do)
--   hyperpod = true          when it needs a HyperPod cluster
-- A part: {part = "what it is", name, present, status, ok, pending,
-- failed, prerequisite}; prerequisites are listed but not the feature's
-- own (they stay when it is disabled).
local Names = require "_names"
local hash = require "_hash"
local M = {}

M.FEATURE_TAG = require("_network").FEATURE_KEY

-- the order chains are built in: what a feature needs comes first
M.ORDER = { "cert_manager", "fsx_csi_driver", "training_operator", "inference_operator", "tiered_checkpointing",
  "karpenter", "kuberay_operator" }

-- each feature's module, required when first asked for (they require this one); each require names its
-- module as written, so the loader lists it with the tools (hypd.playbook)
local MODULES = {
  cert_manager = function() return require "hyperpod._feat_addons" end,
  fsx_csi_driver = function() return require "hyperpod._feat_addons" end,
  training_operator = function() return require "hyperpod._feat_addons" end,
  inference_operator = function() return require "hyperpod._feat_inference" end,
  tiered_checkpointing = function() return require "hyperpod._feat_tiered" end,
  karpenter = function() return require "hyperpod._feat_karpenter" end,
  kuberay_operator = function() return require "hyperpod._feat_kuberay" end,
}

-- feature(name) -> its module
function M.feature(name)
  local mod = MODULES[name]()
  return mod.features and mod.features[name] or mod
end

-- the HyperPod cluster parameter of the three tools
M.HYPERPOD_CLUSTER = { type = "string", pattern = "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$|^arn:aws[a-z-]*:sagemaker:",
  pattern_help = "a HyperPod cluster name or ARN",
  description = "the HyperPod cluster (default: the one on the EKS cluster given, or on the active cluster)" }

-- want(v) -> {enabled, options...} for a parameter's value (true, false or an object)
function M.want(v)
  if type(v) == "boolean" then return { enabled = v } end
  local out = {}
  for k, x in pairs(v) do out[k] = x end
  return out
end

-- fit(name, max) -> name, or a shortened one that stays unique (IAM
-- names are at most 64 characters, bucket names 63)
function M.fit(name, max)
  if #name <= max then return name end
  return name:sub(1, max - 9) .. "-" .. hash.fnv1a(name)
end

-- names(env) -> what hypd calls each feature's resources (the names
-- InstantStart gives them, so that a cluster it set up reads the same)
function M.names(env)
  local tag, eks = env.tag, env.eks
  local bucket_tag = tag:lower():gsub("[^a-z0-9-]", "-")
  return {
    training_role = M.fit("SageMakerHyperPodTrainingOperator-" .. tag, 64),
    tiered_role = M.fit("SM_HP_TieredCkpt_Role_" .. eks, 64),
    tiered_policy = M.fit("SM_HP_TieredCkpt_S3Policy_" .. eks, 128),
    karpenter_role = M.fit("hyperpod-karpenter-role-" .. tag, 64),
    karpenter_policy = M.fit("SageMakerHyperPodKarpenterPolicy-" .. tag, 128),
    fsx_role = M.fit("SM_HP_FSX_CSI_ROLE_" .. eks, 64),
    inference_role = M.fit("SageMakerHyperPodInference-" .. tag, 64),
    alb_role = M.fit("HyperPodInferenceALB-" .. tag, 64),
    keda_role = M.fit("HyperPodInferenceKEDA-" .. tag, 64),
    gated_role = M.fit("HyperPodInferenceGated-" .. tag, 64),
    alb_policy = M.fit("HyperPodInferenceALB-" .. tag .. "-Policy", 128),
    keda_policy = M.fit("HyperPodInferenceKEDA-" .. tag .. "-Policy", 128),
    tls_bucket = M.fit("hyperpod-tls-" .. bucket_tag .. "-" .. env.account, 63),
  }
end

-- tags(env, feature) -> the tags hypd puts on what a feature makes
function M.tags(env, feature)
  return { { Key = Names.TAG, Value = env.tag }, { Key = M.FEATURE_TAG, Value = feature } }
end

-- owned(env, list_of_tags) -> true | false, why: tagged as this cluster's
function M.owned(env, tags)
  for _, t in ipairs(tags or {}) do
    if (t.Key or t.key) == Names.TAG then
      local v = t.Value or t.value
      if v == env.tag then return true end
      return false, "tagged " .. Names.TAG .. "=" .. tostring(v)
    end
  end
  if type(tags) == "table" and tags[Names.TAG] ~= nil then -- EKS' {key = value} tags
    if tags[Names.TAG] == env.tag then return true end
    return false, "tagged " .. Names.TAG .. "=" .. tostring(tags[Names.TAG])
  end
  return false, "no " .. Names.TAG .. " tag: not made by hypd"
end

-- try(ctx, absent, service, op, params) -> the result, or nil when AWS answers
-- one of the error codes in absent (there is no such thing)
function M.try(ctx, absent, service, op, params)
  local out, err = ctx:try(service, op, params)
  if out then return out end
  for _, c in ipairs(type(absent) == "table" and absent or { absent }) do
    if err.code == c then return nil end
  end
  error(err, 0)
end

-- the EKS cluster a call works on --------------------------------------------------

local hp = require "_hyperpod"

-- env(ctx, p) -> {eks, region, arn, account, partition, version, oidc_issuer,
-- oidc_host, oidc_arn, vpc_id, subnet_ids, public_subnet_ids, tag, hyperpod
-- (its DescribeCluster, or nil), hp_name, hp_arn}: read now. p.cluster (EKS),
-- else p.hyperpod_cluster (its orchestrator), else the active cluster.
function M.env(ctx, p)
  local eks_name, hyper
  if p.hyperpod_cluster then
    if p.region then ctx.region = p.region end
    hyper = hp.find(ctx, nil, p.hyperpod_cluster)
    if not hyper then
      hypd.errors.refuse("hyperpod_cluster", "exists", "no HyperPod cluster " .. p.hyperpod_cluster .. " in " .. ctx:aws_region(),
        { code = "NOT_FOUND", field_message = "hyperpod_cluster: not found" })
    end
    local arn = ((hyper.Orchestrator or {}).Eks or {}).ClusterArn
    eks_name = arn and arn:match(":cluster/(.+)$")
    if not eks_name then
      hypd.errors.refuse("hyperpod_cluster", "eks", "HyperPod cluster " .. p.hyperpod_cluster .. " is not orchestrated by EKS",
        { field_message = "hyperpod_cluster: not an EKS one" })
    end
    if p.cluster and p.cluster ~= eks_name then
      hypd.errors.refuse("cluster", "match", "HyperPod cluster " .. p.hyperpod_cluster .. " runs on EKS cluster " ..
        eks_name .. ", not " .. p.cluster, { field_message = "cluster: the HyperPod cluster's EKS cluster is " .. eks_name })
    end
  else
    eks_name = hp.eks(ctx, p).name
  end
  local region = ctx:aws_region()
  local c = M.try(ctx, "ResourceNotFoundException", "eks", "DescribeCluster", { name = eks_name })
  if not c then
    hypd.errors.refuse("cluster", "exists", "no EKS cluster " .. eks_name .. " in " .. region,
      { code = "NOT_FOUND", field_message = "cluster: no EKS cluster " .. eks_name })
  end
  c = c.cluster
  if c.status ~= "ACTIVE" then
    hypd.errors.raise("STATE", "EKS cluster " .. eks_name .. " is " .. tostring(c.status) .. "; managed features " ..
      "need it ACTIVE", { cluster = eks_name })
  end
  local part, account = tostring(c.arn):match("^arn:([^:]+):eks:[^:]*:(%d+):")
  local record = hypd.clusters.get(eks_name, region) or {}
  local issuer = ((c.identity or {}).oidc or {}).issuer
  local host = issuer and issuer:gsub("^https://", "")
  hyper = hyper or hp.find(ctx, c.arn)
  local vpc = c.resourcesVpcConfig or {}
  return {
    eks = eks_name, region = region, arn = c.arn, account = account or "000000000000", partition = part or "aws",
    version = c.version, oidc_issuer = issuer, oidc_host = host,
    oidc_arn = host and string.format("arn:%s:iam::%s:oidc-provider/%s", part or "aws", account, host),
    vpc_id = vpc.vpcId, subnet_ids = vpc.subnetIds or {}, public_subnet_ids = record.public_subnet_ids,
    tag = record.tag or (c.tags or {})[Names.TAG] or eks_name,
    hyperpod = hyper, hp_name = hyper and hyper.ClusterName, hp_arn = hyper and hyper.ClusterArn,
  }
end

-- refresh(ctx, env) -> env with the HyperPod cluster described again
function M.refresh(ctx, env)
  if env.hp_name then env.hyperpod = hp.find(ctx, nil, env.hp_name) end
  return env
end

M.POLL, M.LIMIT = 30, 45 * 60   -- a HyperPod cluster update takes 5 to 10 minutes

-- setting(ctx, env, what, spec) -> the cluster once done: settings of the
-- HyperPod cluster made to hold with one UpdateCluster when they differ
-- (spec.desired, spec.current(c), spec.request(c) -> its input; spec.retry,
-- retry_every, retry_for as ensure's), then waited for until the cluster is
-- InService again and spec.done(c) holds (spec.waiting names the wait;
-- spec.failed(c) -> a message when it cannot come)
function M.setting(ctx, env, what, spec)
  local name = env.hp_name
  ctx:ensure { type = "sagemaker:cluster-setting", label = "HyperPod cluster", name = name .. " " .. what,
    id = "ClusterArn", search = function() return hp.find(ctx, nil, name) end,
    create = function() hypd.errors.raise("NOT_FOUND", "HyperPod cluster " .. name .. " is gone") end,
    desired = spec.desired, current = spec.current, retry = spec.retry, retry_every = spec.retry_every,
    retry_for = spec.retry_for,
    update = function(c)
      if c.ClusterStatus ~= "InService" then
        hypd.errors.raise("STATE", "HyperPod cluster " .. name .. " is " .. tostring(c.ClusterStatus) ..
          "; its " .. what .. " can change only when it is InService: call again once it is")
      end
      ctx:call("sagemaker", "UpdateCluster", spec.request(c))
      return c
    end }
  if ctx.plan then return nil end
  return ctx:poll { what = "HyperPod cluster " .. name .. " " .. (spec.waiting or "to be InService"), every = M.POLL,
    timeout = M.LIMIT,
    check = function()
      local c = hp.find(ctx, nil, name)
      if not c then hypd.errors.raise("NOT_FOUND", "HyperPod cluster " .. name .. " is gone") end
      local why = (c.ClusterStatus == "Failed" and tostring(c.FailureMessage)) or (spec.failed and spec.failed(c))
      if why then hypd.errors.raise("FAILED", "HyperPod cluster " .. name .. " " .. what .. " failed: " .. why) end
      return c.ClusterStatus == "InService" and (not spec.done or spec.done(c)),
        "HyperPod cluster " .. name .. " " .. tostring(c.ClusterStatus) .. (spec.note and (", " .. spec.note(c)) or ""),
        c
    end }
end

-- need_hyperpod(env, feature)
function M.need_hyperpod(env, feature)
  if not env.hyperpod then
    hypd.errors.refuse(feature, "hyperpod", feature .. " needs a HyperPod cluster on EKS cluster " .. env.eks ..
      " and there is none (hyperpod_create makes one)", { field_message = feature .. ": needs a HyperPod cluster" })
  end
end

-- status ------------------------------------------------------------------------

-- summarize(parts) -> status, enabled: from a feature's own parts (not its
-- prerequisites): enabled when every one is there and healthy, disabled when
-- none is, failed or pending when one is, partial otherwise (a chain half
-- built or half removed: the next call finishes or removes it)
function M.summarize(parts)
  local own, present, ok, failed, pending = 0, 0, 0, false, false
  for _, pt in ipairs(parts) do
    if not pt.prerequisite then
      own = own + 1
      if pt.present then present = present + 1 end
      if pt.present and pt.ok ~= false then ok = ok + 1 end
      failed = failed or pt.failed == true
      pending = pending or pt.pending == true
    end
  end
  if present == 0 then return "disabled", false end
  if failed then return "failed", false end
  if pending then return "pending", false end
  if ok == own then return "enabled", true end
  return "partial", false
end

-- part(list, fields) -> appends one part
function M.part(list, p)
  if p.present == nil then p.present = false end
  list[#list + 1] = p
  return p
end

-- state(parts [, extra]) -> {enabled, status, parts, missing}
function M.state(parts, extra)
  local status, enabled = M.summarize(parts)
  local missing = hypd.json.array()
  for _, pt in ipairs(parts) do
    if not pt.present and not pt.optional then missing[#missing + 1] = pt.part end
  end
  local out = { enabled = enabled, status = status, parts = parts, missing = missing }
  for k, v in pairs(extra or {}) do out[k] = v end
  return out
end

-- oidc(ctx, env) -> the IAM OIDC provider of the cluster, or raises: IRSA
-- roles trust it (cluster_configure_dependencies makes it)
function M.oidc(ctx, env, feature)
  if not env.oidc_arn then
    hypd.errors.raise("STATE", "EKS cluster " .. env.eks .. " has no OIDC issuer", { cluster = env.eks })
  end
  local got = M.try(ctx, { "NoSuchEntity" }, "iam", "GetOpenIDConnectProvider",
    { OpenIDConnectProviderArn = env.oidc_arn })
  if not got then
    hypd.errors.refuse(feature, "prerequisite", feature .. " needs the IAM OIDC provider of EKS cluster " .. env.eks ..
      " (" .. env.oidc_host .. "), which is missing; cluster_configure_dependencies creates it", { code = "STATE",
        field_message = feature .. ": the cluster's IAM OIDC provider is missing (cluster_configure_dependencies)" })
  end
  return env.oidc_arn
end

return M
