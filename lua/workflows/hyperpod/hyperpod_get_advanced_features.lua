-- hyperpod_get_advanced_features: the actual state of the seven managed
-- features of a HyperPod cluster, read now from AWS and Kubernetes (never a
-- remembered one), and the operation changing them, if any.
local P = require "_params"
local R = require "_running"
local W = require "_wait"
local F = require "hyperpod._feat"
local S = require "hyperpod._feat_steps"

local TOOLS = { hyperpod_update_advanced_features = true, hyperpod_disable_advanced_features = true }

return tool {
  name = "hyperpod_get_advanced_features",
  summary = "The managed features of a HyperPod cluster: each on or off, with the parts of its chain",
  description = "Reads, now, the state of training_operator, inference_operator, tiered_checkpointing, " ..
    "karpenter, fsx_csi_driver, kuberay_operator and cert_manager on the HyperPod cluster of the active (or " ..
    "named) EKS cluster: for each, enabled, status (enabled, disabled, partial: a chain half built or half " ..
    "removed, which the next hyperpod_update_advanced_features call finishes; pending; failed), and every " ..
    "part of its chain (IAM roles and policies, EKS add-ons, cluster settings, Kubernetes objects), present " ..
    "or missing; for karpenter also instance_groups: each group with its count and whether it is under " ..
    "autoscaling (a NodePool) or not, and what that means for it; plus the latest " ..
    "hyperpod_update_advanced_features or hyperpod_disable_advanced_features " ..
    "operation on the cluster. With wait_seconds it first waits for that operation's phase or status to " ..
    "change (up to that many seconds), so an agent follows a change with a few calls.",
  kind = "read",
  aws = { "eks:DescribeCluster", "eks:DescribeAddon", "eks:ListPodIdentityAssociations",
    "eks:DescribePodIdentityAssociation", "sagemaker:ListClusters", "sagemaker:DescribeCluster", "iam:GetRole",
    "iam:ListAttachedRolePolicies", "iam:GetPolicy", "iam:GetOpenIDConnectProvider", "s3:HeadBucket",
    "s3:GetBucketTagging" },
  k8s = { "get", "list" },
  params = P.form({},
    { "features", "operation_id", "cluster", "hyperpod_cluster", "region", "wait_seconds" },
    {
    cluster = P.cluster,
    hyperpod_cluster = F.HYPERPOD_CLUSTER,
    region = P.region,
    features = { type = "array", items = { type = "string", enum = F.ORDER },
      description = "only these features (default: all seven)" },
    operation_id = P.with(P.operation_id, { description = "the operation to follow (default: the latest one " ..
      "changing this cluster's features)" }),
    wait_seconds = P.wait_seconds,
  }),
  run = function(ctx, p)
    local env = F.env(ctx, p)
    local target = S.target { cluster = env.eks, region = env.region }
    local first = true
    -- read() -> the features now, with the operation shown: the one named,
    -- else the top-level one at work on the cluster's features (a
    -- cluster_create running this stage), else the latest of these tools
    local function read()
      if not first then env = F.refresh(ctx, env) end
      first = false
      local view
      if p.operation_id then
        view = hypd.operations.get(p.operation_id)
        if not view or not TOOLS[view.tool] then
          hypd.errors.refuse("operation_id", "exists", "no managed-features operation " .. p.operation_id,
            { code = "NOT_FOUND", field_message = "operation_id: not one of these tools'" })
        end
      else
        for _, v in ipairs(hypd.operations.list { target = target, limit = 20 }) do
          if TOOLS[v.tool] and (not view or v.created_at > view.created_at) then view = v end
        end
      end
      local only
      if p.features then
        only = {}
        for _, f in ipairs(p.features) do only[f] = true end
      end
      local features = {}
      for _, name in ipairs(F.ORDER) do
        if not only or only[name] then features[name] = S.read(ctx, env, name) end
      end
      local op
      if view then
        op = { operation_id = view.operation_id, tool = view.tool, status = view.status, phase = view.phase,
          error = view.error, created_at = view.created_at, finished_at = view.finished_at, steps = view.steps }
        if view.status == "running" then
          local top = R.short(R.top(view))
          op.running_child = R.short(view).running_child
          if top.operation_id ~= view.operation_id then op.top = top end
        end
      end
      local at_work = R.on(target)
      if at_work and not (op and op.status == "running") then op = at_work end
      return { cluster = env.eks, region = env.region, hyperpod_cluster = env.hp_name,
        has_hyperpod = env.hyperpod ~= nil, hyperpod_status = env.hyperpod and env.hyperpod.ClusterStatus,
        features = features, operation = op }
    end
    local function sig(x)
      local parts = { tostring(x.hyperpod_status), R.signature(x.operation and x.operation.status == "running" and
        x.operation or nil) }
      for _, name in ipairs(F.ORDER) do
        local f = x.features[name]
        if f then parts[#parts + 1] = name .. "=" .. tostring(f.state or f.status) end
      end
      return table.concat(parts, " ")
    end
    local out, waited = W.follow(p.wait_seconds, { read = read, signature = sig,
      quick = function() return R.fingerprint(target, { p.operation_id }) end,
      settled = function(x)
        if x.operation and x.operation.status == "running" or W.moving(x.hyperpod_status) then return false end
        for _, f in pairs(x.features) do if W.moving(f.state or f.status) then return false end end
        return true
      end })
    out.waited = waited
    return out
  end,
}
