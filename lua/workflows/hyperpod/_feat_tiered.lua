-- hyperpod/_feat_tiered: managed tiered checkpointing. The chain, built in
-- this order and removed in reverse:
--   1 the HyperPod cluster's TieredStorageConfig {Mode = Enable
--     [, InstanceMemoryAllocationPercentage]}: UpdateCluster resends every
--     instance group through _hyperpod's update_group (a tiered-storage
--     update carries all groups), then the cluster is InService again
--   2 IAM policy SM_HP_TieredCkpt_S3Policy_<eks>: the checkpoints/ prefix
--     of the cluster's data bucket, and the CloudWatch Logs writes the
--     checkpointing library makes
--   3 IAM role SM_HP_TieredCkpt_Role_<eks> trusting the cluster's OIDC
--     provider for exactly default/tiered-storage-sa (sub and aud)
--   4 the policy attached to the role
--   5 service account default/tiered-storage-sa annotated
--     eks.amazonaws.com/role-arn=<role>
-- Disabling sets Mode Disable last, once the identity chain is gone.
local F = require "hyperpod._feat"
local Names = require "_names"
local I = require "hyperpod._feat_iam"
local K = require "_k8s_objects"
local hp = require "_hyperpod"

local M = { name = "tiered_checkpointing", hyperpod = true }

M.NS, M.SA = "default", "tiered-storage-sa"
M.ANNOTATION = "eks.amazonaws.com/role-arn"

-- the checkpoints go to the cluster's data bucket (storage_create_s3's,
-- mounted at /s3), under checkpoints/ as the recipes write them
M.PREFIX = "checkpoints/"

-- policy(env) -> the pods' policy: that bucket's checkpoints/ prefix only,
-- and the CloudWatch Logs writes the checkpointing library makes
function M.policy(env)
  local bucket = "arn:" .. env.partition .. ":s3:::" .. Names.bucket(env.tag, env.account, env.region)
  return { Version = "2012-10-17", Statement = {
    { Sid = "CheckpointBucket", Effect = "Allow", Action = { "s3:GetBucketLocation" }, Resource = bucket },
    { Sid = "CheckpointList", Effect = "Allow", Action = { "s3:ListBucket" }, Resource = bucket,
      Condition = { StringLike = { ["s3:prefix"] = { M.PREFIX, M.PREFIX .. "*" } } } },
    { Sid = "Checkpoints", Effect = "Allow", Action = { "s3:GetObject", "s3:PutObject", "s3:DeleteObject",
      "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts" }, Resource = bucket .. "/" .. M.PREFIX .. "*" },
    { Sid = "CheckpointLogs", Effect = "Allow", Action = { "logs:CreateLogGroup", "logs:CreateLogStream",
      "logs:PutLogEvents" }, Resource = "*" } } }
end

local function trust(env) return I.trust_oidc(env, { M.NS .. ":" .. M.SA }) end

local function setting(d)
  local ts = (d or {}).TieredStorageConfig or {}
  return { mode = ts.Mode or "Disable", percentage = ts.InstanceMemoryAllocationPercentage }
end

local function sa_object(role_arn)
  return { apiVersion = "v1", kind = "ServiceAccount", metadata = { name = M.SA, namespace = M.NS,
    annotations = { [M.ANNOTATION] = role_arn } } }
end

function M.read(ctx, env)
  local n = F.names(env)
  local parts = {}
  local s = setting(env.hyperpod)
  F.part(parts, { part = "TieredStorageConfig Mode Enable on HyperPod cluster " .. (env.hp_name or "(none)"),
    present = s.mode == "Enable", status = s.mode, ok = true,
    pending = env.hyperpod and env.hyperpod.ClusterStatus == "Updating" or nil })
  local pol = I.read_policy(ctx, env, n.tiered_policy)
  pol.part = "IAM policy " .. n.tiered_policy
  F.part(parts, pol)
  local role = I.read_role(ctx, env, n.tiered_role, env.oidc_arn and trust(env), { I.arn(env, "policy", n.tiered_policy) })
  role.part = "IAM role " .. n.tiered_role .. " (OIDC, " .. M.NS .. ":" .. M.SA .. ")"
  F.part(parts, role)
  local sa = K.get(ctx:k8s(env.eks), "v1", "ServiceAccount", M.SA, M.NS)
  local ann = sa and ((sa.metadata.annotations or {})[M.ANNOTATION])
  F.part(parts, { part = "service account " .. M.NS .. "/" .. M.SA .. " annotated " .. M.ANNOTATION,
    present = sa ~= nil, ok = sa ~= nil and ann == role.id, role = ann,
    note = sa and ann ~= role.id and ("annotated " .. tostring(ann)) or nil })
  return F.state(parts, { memory_percentage = s.percentage, mode = s.mode,
    config_mode = s.percentage and "custom" or "default" })
end

function M.matches(state, want)
  if want.enabled == false then return state.status == "disabled" end
  if want.enabled == nil then -- only the percentage
    return state.enabled and state.memory_percentage == want.memory_percentage
  end
  return state.enabled and (want.memory_percentage == nil or state.memory_percentage == want.memory_percentage)
end

-- cluster(ctx, env, config): the cluster's TieredStorageConfig made to
-- hold, every group resent as it is, then waited for until InService
local function cluster(ctx, env, want)
  return F.setting(ctx, env, "TieredStorageConfig", {
    desired = { TieredStorageConfig = want },
    current = function(c)
      local ts = c.TieredStorageConfig or { Mode = "Disable" }
      -- the percentage matters only when it is asked for (the service's default otherwise)
      return { TieredStorageConfig = { Mode = ts.Mode, InstanceMemoryAllocationPercentage =
        want.InstanceMemoryAllocationPercentage and ts.InstanceMemoryAllocationPercentage or nil } }
    end,
    request = function(c)
      local groups = {}
      for _, g in ipairs(c.InstanceGroups or {}) do groups[#groups + 1] = hp.update_group(g) end
      return { ClusterName = env.hp_name, InstanceGroups = groups, TieredStorageConfig = want }
    end })
end

function M.enable(ctx, env, want)
  F.need_hyperpod(env, M.name)
  F.oidc(ctx, env, M.name)
  local n = F.names(env)
  local cfg = { Mode = "Enable" }
  local pct = want.memory_percentage
  if pct == nil and want.enabled == nil then pct = setting(env.hyperpod).percentage end
  cfg.InstanceMemoryAllocationPercentage = pct
  cluster(ctx, env, cfg)
  local policy = I.policy(ctx, env, M.name, n.tiered_policy, M.policy(env))
  local role = I.role(ctx, env, M.name, n.tiered_role, trust(env),
    "hypd " .. env.tag .. ": managed tiered checkpointing (service account " .. M.NS .. "/" .. M.SA .. ")")
  I.attach(ctx, role, policy.Arn)
  K.ensure(ctx, ctx:k8s(env.eks), sa_object(role.Arn), { field = M.name })
end

function M.disable(ctx, env)
  F.need_hyperpod(env, M.name)
  local n = F.names(env)
  K.absent(ctx, ctx:k8s(env.eks), "v1", "ServiceAccount", M.SA, M.NS)
  I.role_absent(ctx, env, n.tiered_role)
  I.policy_absent(ctx, env, n.tiered_policy)
  if setting(env.hyperpod).mode ~= "Disable" then cluster(ctx, env, { Mode = "Disable" }) end
end

return M
