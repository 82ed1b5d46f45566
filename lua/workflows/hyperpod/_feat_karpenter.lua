-- hyperpod/_feat_karpenter: managed Karpenter autoscaling. The chain, built
-- in this order and removed in reverse:
--   1 IAM policy SageMakerHyperPodKarpenterPolicy-<tag>: BatchAddClusterNodes
--     and BatchDeleteClusterNodes on the account's HyperPod clusters, and
--     KMS grants through SageMaker
--   2 IAM role hyperpod-karpenter-role-<tag> trusting
--     hyperpod.sagemaker.amazonaws.com, with the policy attached
--   3 UpdateCluster: AutoScaling {Mode Enable, AutoScalerType Karpenter},
--     ClusterRole = the role (tried again while SageMaker does not see the
--     new role yet), NodeRecovery Automatic (and NodeProvisioningMode
--     Continuous, which autoscaling needs); then InService with
--     AutoScaling.Status InService
--   4 per instance group <ig> put under autoscaling (which ones:
--     hyperpod/_karpenter_groups; each group's fate is said in the plan and
--     the progress): HyperpodNodeClass <ig>-nodeclass
--     (karpenter.sagemaker.amazonaws.com/v1, spec.instanceGroups [<ig>]) and
--     NodePool <ig>-nodepool (karpenter.sh/v1) with its disruption
--     settings: WhenEmptyOrUnderutilized, consolidateAfter (default 10m),
--     budget 90% of the nodes
-- consolidateAfter defaults to 10m, not Karpenter's 0s: a HyperPod node
-- takes minutes to come (launch, lifecycle scripts, health checks), and
-- with 0s the node scaled up for a job went the moment it was idle, so a
-- pod retried, restarted or queued behind it waited for a new node. An idle
-- node is kept about as long as getting one back takes.
-- Disabling deletes every NodePool of a HyperpodNodeClass and every
-- HyperpodNodeClass (they mean nothing once autoscaling is off), sets
-- AutoScaling Mode Disable, then removes the role and the policy.
-- NodeRecovery stays Automatic, and the cluster keeps naming the role it
-- had (UpdateCluster cannot clear ClusterRole).
local F = require "hyperpod._feat"
local I = require "hyperpod._feat_iam"
local K = require "_k8s_objects"
local G = require "hyperpod._karpenter_groups"

local M = { name = "karpenter", hyperpod = true }

M.ROLE_WAIT, M.ROLE_FOR = 20, 120   -- IAM propagation: 20 s between tries (InstantStart waits 20 s once)
M.CLASS_API, M.POOL_API = "karpenter.sagemaker.amazonaws.com/v1", "karpenter.sh/v1"
M.DISRUPTION = { consolidationPolicy = "WhenEmptyOrUnderutilized", consolidateAfter = "10m", budgetNodes = "90%" }

local TRUST = I.trust_services({ "hyperpod.sagemaker.amazonaws.com" }, { "sts:AssumeRole" })

function M.policy(env)
  return { Version = "2012-10-17", Statement = {
    { Sid = "HyperPodNodes", Effect = "Allow", Action = { "sagemaker:BatchAddClusterNodes",
      "sagemaker:BatchDeleteClusterNodes" }, Resource = "arn:" .. env.partition .. ":sagemaker:*:*:cluster/*",
      Condition = { StringEquals = { ["aws:ResourceAccount"] = "${aws:PrincipalAccount}" } } },
    { Sid = "KmsGrantsThroughSageMaker", Effect = "Allow", Action = { "kms:CreateGrant", "kms:DescribeKey" },
      Resource = "*", Condition = { StringLike = { ["kms:ViaService"] = "sagemaker.*.amazonaws.com" } } } } }
end

local class_name, pool_name = G.class_name, G.pool_name

function M.objects(ig, consolidate_after)
  local class = { apiVersion = M.CLASS_API, kind = "HyperpodNodeClass", metadata = { name = class_name(ig) },
    spec = { instanceGroups = { ig } } }
  local pool = { apiVersion = M.POOL_API, kind = "NodePool", metadata = { name = pool_name(ig) },
    spec = {
      template = { spec = {
        nodeClassRef = { group = "karpenter.sagemaker.amazonaws.com", kind = "HyperpodNodeClass", name = class_name(ig) },
        expireAfter = "Never",
        requirements = { { key = "node.kubernetes.io/instance-type", operator = "Exists" } } } },
      disruption = { consolidationPolicy = M.DISRUPTION.consolidationPolicy,
        consolidateAfter = consolidate_after or M.DISRUPTION.consolidateAfter,
        budgets = { { nodes = M.DISRUPTION.budgetNodes } } } } }
  return class, pool
end

local function groups(env)
  local out = {}
  for _, g in ipairs((env.hyperpod or {}).InstanceGroups or {}) do out[#out + 1] = g.InstanceGroupName end
  return out
end

local function list(conn, api, kind)
  local items, err = conn:list(api, kind)
  if items then return items end
  if type(err) == "table" and (err.code == "NotFound" or err.status == 404) then return {} end
  error(err, 0)
end

function M.read(ctx, env)
  local n = F.names(env)
  local parts = {}
  local pol = I.read_policy(ctx, env, n.karpenter_policy)
  pol.part = "IAM policy " .. n.karpenter_policy
  F.part(parts, pol)
  local role = I.read_role(ctx, env, n.karpenter_role, TRUST, { I.arn(env, "policy", n.karpenter_policy) })
  role.part = "IAM role " .. n.karpenter_role .. " (hyperpod.sagemaker.amazonaws.com)"
  F.part(parts, role)
  local d = env.hyperpod or {}
  local as = d.AutoScaling or {}
  F.part(parts, { part = "AutoScaling Mode Enable (Karpenter) on HyperPod cluster " .. (env.hp_name or "(none)"),
    present = as.Mode == "Enable", status = as.Status, ok = as.Status == "InService",
    pending = as.Status == "Creating" or as.Status == "Deleting" or d.ClusterStatus == "Updating" or nil,
    failed = as.Status == "Failed" or nil, note = as.FailureMessage, role = d.ClusterRole })
  local consolidate
  local covered = {}
  if as.Mode == "Enable" or role.present then
    local conn = ctx:k8s(env.eks)
    local classes, pools = {}, {}
    for _, o in ipairs(list(conn, M.CLASS_API, "HyperpodNodeClass")) do classes[o.metadata.name] = o end
    for _, o in ipairs(list(conn, M.POOL_API, "NodePool")) do pools[o.metadata.name] = o end
    -- a group is a part of the feature only once it is under autoscaling:
    -- a group left out (by choice) does not make the feature partial
    for _, ig in ipairs(groups(env)) do
      local c, p = classes[class_name(ig)], pools[pool_name(ig)]
      if p then
        covered[ig] = true
        F.part(parts, { part = "HyperpodNodeClass " .. class_name(ig), present = c ~= nil, ok = true,
          status = c and c.status and c.status.conditions and c.status.conditions[#c.status.conditions].type or nil })
        F.part(parts, { part = "NodePool " .. pool_name(ig), present = true, ok = true })
        consolidate = consolidate or ((p.spec or {}).disruption or {}).consolidateAfter
      end
    end
  end
  local disruption = { consolidationPolicy = M.DISRUPTION.consolidationPolicy,
    consolidateAfter = consolidate or M.DISRUPTION.consolidateAfter, budgetNodes = M.DISRUPTION.budgetNodes }
  local rows = G.rows(env, covered)
  local out = {}
  for _, r in ipairs(rows) do
    r.note = G.coverage(r, disruption.consolidateAfter)
    if as.Mode == "Enable" and not r.autoscaling then out[#out + 1] = r.instance_group end
  end
  return F.state(parts, { role_name = n.karpenter_role, node_recovery = d.NodeRecovery, disruption = disruption,
    consolidate_after = consolidate, instance_groups = rows, note = #out > 0 and ("instance group(s) " ..
    table.concat(out, ", ") .. " not under Karpenter: their nodes are only what their count says; " ..
    "hyperpod_update_advanced_features karpenter:={\"enabled\":true,\"instance_groups\":[\"" ..
    table.concat(out, "\",\"") .. "\"]} puts them under it") or nil })
end

-- check_want(env, want): the groups named exist (before anything is read or sent)
function M.check_want(env, want) G.check(env, want) end

function M.matches(state, want)
  if want.enabled == false then return state.status == "disabled" end
  if not state.enabled then return false end
  if want.consolidate_after ~= nil and state.consolidate_after ~= want.consolidate_after then return false end
  local chosen = G.choose(state.instance_groups or {}, want)
  for _, r in ipairs(state.instance_groups or {}) do
    if chosen[r.instance_group] and not r.autoscaling then return false end
  end
  return true
end

-- autoscaling(ctx, env, want): the cluster's AutoScaling (and what goes
-- with it) made to hold, then waited for until InService
local function autoscaling(ctx, env, want, role_arn)
  local desired = { AutoScaling = want }
  if want.Mode == "Enable" then
    desired.NodeRecovery = "Automatic"
    desired.NodeProvisioningMode = "Continuous"
  end
  local function as_of(c) return c.AutoScaling or { Mode = "Disable", Status = "InService" } end
  return F.setting(ctx, env, "AutoScaling", { desired = desired,
    current = function(c)
      local as = as_of(c)
      return { AutoScaling = { Mode = as.Mode, AutoScalerType = want.AutoScalerType and as.AutoScalerType or nil },
        NodeRecovery = desired.NodeRecovery and c.NodeRecovery, NodeProvisioningMode = desired.NodeProvisioningMode and
        c.NodeProvisioningMode }
    end,
    retry_every = M.ROLE_WAIT, retry_for = M.ROLE_FOR,
    retry = function(err)
      if err.code == "ValidationException" and tostring(err.message):find("ClusterRole", 1, true) then
        return "SageMaker does not see role " .. tostring(role_arn) .. " yet"
      end
    end,
    request = function(c)
      local req = { ClusterName = env.hp_name, AutoScaling = want }
      if want.Mode == "Enable" then
        -- the role cannot change while autoscaling is on
        if not (c.AutoScaling and c.AutoScaling.Mode == "Enable") then req.ClusterRole = role_arn end
        if c.NodeRecovery ~= "Automatic" then req.NodeRecovery = "Automatic" end
        if c.NodeProvisioningMode ~= "Continuous" then req.NodeProvisioningMode = "Continuous" end
      end
      return req
    end,
    waiting = "autoscaling to be " .. want.Mode .. "d",
    failed = function(c) return as_of(c).Status == "Failed" and tostring(as_of(c).FailureMessage) or nil end,
    done = function(c)
      local as = as_of(c)
      return as.Mode == want.Mode and (want.Mode == "Disable" or as.Status == "InService")
    end,
    note = function(c) return "autoscaling " .. tostring(as_of(c).Mode) .. " " .. tostring(as_of(c).Status) end })
end

function M.enable(ctx, env, want)
  F.need_hyperpod(env, M.name)
  local n = F.names(env)
  local policy = I.policy(ctx, env, M.name, n.karpenter_policy, M.policy(env))
  local role = I.role(ctx, env, M.name, n.karpenter_role, TRUST,
    "hypd " .. env.tag .. ": managed Karpenter autoscaling of HyperPod cluster " .. env.hp_name)
  I.attach(ctx, role, policy.Arn)
  autoscaling(ctx, env, { Mode = "Enable", AutoScalerType = "Karpenter" }, role.Arn)
  local conn = ctx:k8s(env.eks)
  if not ctx.plan then
    -- with autoscaling on, the cluster serves the Karpenter APIs
    ctx:poll { what = "the HyperpodNodeClass and NodePool APIs", every = 5, timeout = 5 * 60, check = function()
      return K.get(conn, "apiextensions.k8s.io/v1", "CustomResourceDefinition",
        "hyperpodnodeclasses.karpenter.sagemaker.amazonaws.com") ~= nil and
        K.get(conn, "apiextensions.k8s.io/v1", "CustomResourceDefinition", "nodepools.karpenter.sh") ~= nil
    end }
  end
  env = F.refresh(ctx, env)
  local consolidate = want.consolidate_after
  if consolidate == nil then consolidate = M.read_consolidate(ctx, env) or M.DISRUPTION.consolidateAfter end
  -- each group, what this call does to it: said in the plan and the progress
  local covered = {}
  for _, o in ipairs(list(conn, M.POOL_API, "NodePool")) do
    local ig = o.metadata.name:match("^(.*)%-nodepool$")
    if ig then covered[ig] = true end
  end
  local rows = G.rows(env, covered)
  local chosen = G.choose(rows, want)
  local todo = {}
  for _, r in ipairs(rows) do
    local action, how = G.how(r, chosen, want, consolidate)
    G.say(ctx, action, env.hp_name, r.instance_group, how)
    if chosen[r.instance_group] then todo[#todo + 1] = r.instance_group end
  end
  for _, ig in ipairs(todo) do
    local class, pool = M.objects(ig, consolidate)
    K.ensure(ctx, conn, class, { field = M.name })
    K.ensure(ctx, conn, pool, { field = M.name })
  end
  if ctx.plan then return end
  -- HyperPod reads each node class: Ready, or why not
  for _, ig in ipairs(todo) do
    ctx:poll { what = "HyperpodNodeClass " .. class_name(ig) .. " to be Ready", every = 5, timeout = 5 * 60,
      check = function()
        local c = K.get(conn, M.CLASS_API, "HyperpodNodeClass", class_name(ig))
        local ready
        for _, cond in ipairs(((c or {}).status or {}).conditions or {}) do
          if cond.type == "Ready" then ready = cond end
        end
        if ready and ready.status == "False" then
          hypd.errors.raise("FAILED", "HyperpodNodeClass " .. class_name(ig) .. " is not Ready: " ..
            tostring(ready.reason) .. ": " .. tostring(ready.message))
        end
        return ready ~= nil and ready.status == "True", "HyperpodNodeClass " .. class_name(ig) .. " not Ready yet"
      end }
  end
end

-- read_consolidate(ctx, env) -> the consolidateAfter hypd's NodePools have now (kept on a re-run)
function M.read_consolidate(ctx, env)
  if ctx.plan then return nil end
  local conn = ctx:k8s(env.eks)
  for _, ig in ipairs(groups(env)) do
    local p = K.get(conn, M.POOL_API, "NodePool", pool_name(ig))
    local v = p and ((p.spec or {}).disruption or {}).consolidateAfter
    if v then return v end
  end
end

function M.disable(ctx, env)
  F.need_hyperpod(env, M.name)
  local n = F.names(env)
  local conn = ctx:k8s(env.eks)
  for _, p in ipairs(list(conn, M.POOL_API, "NodePool")) do
    local ref = (((p.spec or {}).template or {}).spec or {}).nodeClassRef or {}
    if ref.kind == "HyperpodNodeClass" then
      ctx:absent { type = "k8s:nodepool", label = "NodePool", name = p.metadata.name, every = 5, timeout = 10 * 60,
        find = function() return K.get(conn, M.POOL_API, "NodePool", p.metadata.name) end,
        delete = function() assert(conn:delete(M.POOL_API, "NodePool", p.metadata.name)) end }
    end
  end
  for _, c in ipairs(list(conn, M.CLASS_API, "HyperpodNodeClass")) do
    ctx:absent { type = "k8s:hyperpodnodeclass", label = "HyperpodNodeClass", name = c.metadata.name, every = 5,
      timeout = 10 * 60,
      find = function() return K.get(conn, M.CLASS_API, "HyperpodNodeClass", c.metadata.name) end,
      delete = function() assert(conn:delete(M.CLASS_API, "HyperpodNodeClass", c.metadata.name)) end }
  end
  local as = (env.hyperpod or {}).AutoScaling or {}
  if as.Mode == "Enable" then autoscaling(ctx, env, { Mode = "Disable" }) end
  I.role_absent(ctx, env, n.karpenter_role)
  I.policy_absent(ctx, env, n.karpenter_policy)
end

return M
