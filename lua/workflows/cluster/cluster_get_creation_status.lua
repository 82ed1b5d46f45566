-- cluster_get_creation_status: a cluster_create operation (every stage, as
-- its child operations) or a cluster_create_eks one, and the live AWS
-- state under it.
local P = require "_params"
local hp = require "hyperpod._hp"
local stage = require "cluster._eks_stage"

local TOOLS = { cluster_create = true, cluster_create_eks = true }

-- latest(tag) -> the newest cluster_create or cluster_create_eks operation for tag
local function latest(tag)
  local best
  for _, name in ipairs { "cluster_create", "cluster_create_eks" } do
    for _, v in ipairs(hypd.operations.list { tool = name, limit = 200 }) do
      if (v.params or {}).cluster_tag == tag then
        if not best or v.created_at > best.created_at then best = v end
        break
      end
    end
  end
  return best
end

-- running(view) -> the id of a child operation still running (the stage now)
local function running(view)
  for _, c in ipairs(view.children or {}) do
    if c.status == "running" then return c.operation_id end
  end
end

-- follow(view, seconds) -> the view once the operation or the stage it runs
-- changes phase or status, or the time is up
local function follow(view, seconds)
  local child = view.status == "running" and running(view)
  if child then
    hypd.operations.wait(child, seconds)
    return hypd.operations.get(view.operation_id)
  end
  return hypd.operations.wait(view.operation_id, seconds)
end

return tool {
  name = "cluster_get_creation_status",
  summary = "Progress of cluster_create (every stage) or cluster_create_eks, with the live AWS status",
  description = "Reports a cluster_create or cluster_create_eks operation (by operation_id, or the latest one " ..
    "for cluster_tag): status (running, succeeded, failed, cancelled), the current phase, every step with " ..
    "start, end and duration, the result or error, each stage's child operation with its own status and " ..
    "phase (children), and the live AWS state (EKS cluster status, NAT gateway, HyperPod cluster status). " ..
    "With wait_seconds it answers as soon as the phase or status of the operation, or of the stage running " ..
    "now, changes.",
  kind = "read",
  aws = { "eks:DescribeCluster", "ec2:DescribeVpcs", "ec2:DescribeNatGateways", "sagemaker:DescribeCluster" },
  params = {
    operation_id = P.with(P.operation_id, { description = "what cluster_create or cluster_create_eks returned" }),
    cluster_tag = P.with(P.cluster_tag, { description = "find the latest operation for this tag instead" }),
    wait_seconds = P.wait_seconds,
  },
  run = function(ctx, p)
    local view
    if p.operation_id then
      view = hypd.operations.get(p.operation_id)
    elseif p.cluster_tag then
      view = latest(p.cluster_tag)
    else
      hypd.errors.raise("VALIDATION", "cluster_get_creation_status: give operation_id or cluster_tag",
        { fields = { { field = "operation_id", rule = "required", message = "operation_id or cluster_tag" } } })
    end
    if not view or not TOOLS[view.tool] then
      hypd.errors.raise("NOT_FOUND", "no cluster_create or cluster_create_eks operation for " ..
        tostring(p.operation_id or p.cluster_tag))
    end
    if p.wait_seconds > 0 then view = follow(view, p.wait_seconds) end
    local st = hypd.operations.state(view.operation_id) or {}
    ctx.region = st.region or (view.params or {}).region
    local eks_state = st
    if view.tool == "cluster_create" then
      -- the EKS stage's own state (its ids), when that child has started
      for _, c in ipairs(view.children or {}) do
        if c.tool == "cluster_create_eks" then eks_state = hypd.operations.state(c.operation_id) or {} end
      end
    end
    local ok, live = pcall(stage.status, { params = view.params, state = eks_state, id = view.operation_id,
      region = ctx:aws_region(), try = function(_, ...) return ctx:try(...) end })
    view.aws = ok and live or { error = tostring(live and live.message or live) }
    if ok and view.tool == "cluster_create" then
      local name = hp.names(view.params.cluster_tag).cluster
      local c, err = ctx:try("sagemaker", "DescribeCluster", { ClusterName = name })
      view.aws.hyperpod_cluster = name
      view.aws.hyperpod_status = c and c.ClusterStatus or
        (err and err.code == "ResourceNotFound" and "NOT_CREATED" or "UNKNOWN")
    end
    return view
  end,
}
