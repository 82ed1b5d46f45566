-- hyperpod_get_creation_status: a hyperpod_create or
-- hyperpod_add_instance_group operation, and the live state under it
-- (SageMaker's view of the cluster and its groups, the nodes Kubernetes
-- has).
local P = require "_params"
local create = require "hyperpod._create"

local TOOLS = { hyperpod_create = true, hyperpod_add_instance_group = true }

-- latest(prefix) -> the newest operation of the HyperPod stage tools whose
-- target starts with prefix ("hyperpod/<region>/<eks>")
local function latest(prefix)
  local best
  for name in pairs(TOOLS) do
    for _, v in ipairs(hypd.operations.list { tool = name, limit = 200 }) do
      local t = tostring(v.target)
      if (t == prefix or t:sub(1, #prefix + 1) == prefix .. "/") and (not best or v.created_at > best.created_at) then
        best = v
      end
    end
  end
  return best
end

-- live(ctx, st) -> {cluster_status, failure_message, instance_groups, nodes_ready, errors}
local function live(ctx, st)
  local out, problems = { hyperpod_cluster = st.hyperpod_name }, {}
  local ok, c = pcall(create.describe, ctx, st.hyperpod_name)
  if not ok then
    problems[#problems + 1] = tostring(c and c.code) .. ": " .. tostring(c and c.message or c)
  elseif not c then
    out.cluster_status = "NOT_CREATED"
  else
    out.cluster_status, out.failure_message, out.hyperpod_arn = c.ClusterStatus, c.FailureMessage, c.ClusterArn
    out.node_recovery, out.node_provisioning_mode = c.NodeRecovery, c.NodeProvisioningMode
    out.instance_groups = hypd.json.array()
    for _, g in ipairs(c.InstanceGroups or {}) do
      local row = { name = g.InstanceGroupName, instance_type = g.InstanceType, status = g.Status,
        current_count = g.CurrentCount, target_count = g.TargetCount }
      if st.eks_name then
        local jok, n = pcall(create.joined, ctx, st.eks_name, st.hyperpod_name, g.InstanceGroupName)
        if jok then row.nodes_ready = n else problems[#problems + 1] = "Kubernetes: " ..
          tostring(type(n) == "table" and n.message or n) end
      end
      out.instance_groups[#out.instance_groups + 1] = row
    end
  end
  if #problems > 0 then out.errors = problems end
  return out
end

return tool {
  name = "hyperpod_get_creation_status",
  summary = "Progress of hyperpod_create or hyperpod_add_instance_group: phases, and the live HyperPod state",
  description = "Reports a hyperpod_create or hyperpod_add_instance_group operation (by operation_id, or the " ..
    "latest one for the EKS cluster: the active one unless cluster is given): status (running, succeeded, " ..
    "failed, cancelled), the current phase, every step with start, end and duration, the result or error, and " ..
    "the live state: SageMaker's cluster status (Creating, InService, Failed with its message), each instance " ..
    "group's status and counts, and how many of its nodes are Ready in Kubernetes with their health labels. " ..
    "With wait_seconds it answers as soon as the phase or status changes: a HyperPod cluster takes about 15 " ..
    "minutes, so follow it with wait_seconds = 300 a few times.",
  kind = "read",
  aws = { "sagemaker:DescribeCluster", "eks:DescribeCluster" },
  k8s = { "list" },
  params = {
    operation_id = P.with(P.operation_id, { description = "what hyperpod_create or hyperpod_add_instance_group " ..
      "returned" }),
    cluster = P.with(P.cluster, { description = "find the latest operation for this EKS cluster instead " ..
      "(default: the active cluster)" }),
    region = P.region,
    wait_seconds = P.wait_seconds,
  },
  run = function(ctx, p)
    local view
    if p.operation_id then
      view = hypd.operations.get(p.operation_id)
    else
      local act = hypd.clusters.active() or {}
      local name = p.cluster or act.name
      if not name then
        hypd.errors.raise("VALIDATION", "hyperpod_get_creation_status: give operation_id or cluster (no cluster " ..
          "is active)", { fields = { { field = "operation_id", rule = "required", message = "operation_id or " ..
            "cluster" } } })
      end
      local region = p.region or (not p.cluster and act.region) or ctx:aws_region()
      view = latest("hyperpod/" .. region .. "/" .. name)
    end
    if not view or not TOOLS[view.tool] then
      hypd.errors.raise("NOT_FOUND", "no hyperpod_create or hyperpod_add_instance_group operation for " ..
        tostring(p.operation_id or p.cluster or "the active cluster"))
    end
    if p.wait_seconds > 0 then view = hypd.operations.wait(view.operation_id, p.wait_seconds) end
    local st = hypd.operations.state(view.operation_id) or {}
    if not st.hyperpod_name then -- stopped before it saved what it works on: what hypd knows of the cluster
      local region, eks = tostring(view.target):match("^hyperpod/([^/]+)/([^/]+)")
      local rec = eks and hypd.clusters.get(eks, region)
      if rec and rec.hyperpod then st = { hyperpod_name = rec.hyperpod.name, eks_name = eks, region = region } end
    end
    ctx.region = st.region or (view.params or {}).region or ctx.region
    if st.hyperpod_name then view.aws = live(ctx, st) end
    return view
  end,
}
