-- cluster_get_creation_status: a cluster_create operation (every stage, as
-- its child operations) or a cluster_create_eks one, and the live AWS
-- state under it.
local Names = require "_names"
local P = require "_params"
local stage = require "cluster._eks_stage"
local R = require "_running"
local W = require "_wait"

local TOOLS = { cluster_create = true, cluster_create_eks = true }

-- on_tag(tag [, delete]) -> a match (workflows _running) for the operations
-- that make the tag's cluster, in any region: cluster_create's pipeline and
-- its EKS stage (and with delete, cluster_delete)
local function on_tag(tag, delete)
  return function(target)
    local kind, t = target:match("^(%a+)/[^/]+/([^/]+)$")
    return t == tag and (kind == "pipeline" or kind == "eks" or (delete and kind == "delete"))
  end
end

-- latest(tag) -> the operation to report for tag: the top-level one at work
-- on it (cluster_create, not the stage it runs now), else the newest
-- top-level cluster_create or cluster_create_eks (a stage a cluster_create
-- ran is shown under it, never instead of it)
local function latest(tag)
  local run = R.on(on_tag(tag))
  if run and TOOLS[run.tool] then return hypd.operations.get(run.operation_id) end
  local best
  for _, name in ipairs { "cluster_create", "cluster_create_eks" } do
    for _, v in ipairs(hypd.operations.list { tool = name, limit = 200 }) do
      if (v.params or {}).cluster_tag == tag and not v.parent then
        if not best or v.created_at > best.created_at then best = v end
        break
      end
    end
  end
  return best
end

return tool {
  name = "cluster_get_creation_status",
  summary = "Progress of cluster_create (every stage) or cluster_create_eks, with the live AWS status",
  description = "Reports a cluster_create or cluster_create_eks operation (by operation_id, or the latest one " ..
    "for cluster_tag): status (running, succeeded, failed, cancelled), the current phase, every step with " ..
    "start, end and duration, the result or error, each stage's child operation with its own status and " ..
    "phase (children), and the live AWS state (EKS cluster status, NAT gateway, HyperPod cluster status). " ..
    "With wait_seconds it answers at once when nothing is in progress " ..
    "(waited.ended = settled), else as soon as the phase or status of the operation, or of the stage running " ..
    "now, changes.",
  kind = "read",
  aws = { "eks:DescribeCluster", "ec2:DescribeVpcs", "ec2:DescribeNatGateways", "sagemaker:DescribeCluster" },
  params = P.form({},
    { "cluster_tag", "operation_id", "wait_seconds" },
    {
    operation_id = P.with(P.operation_id, { description = "what cluster_create or cluster_create_eks returned" }),
    cluster_tag = P.with(P.cluster_tag, { description = "find the latest operation for this tag instead" }),
    wait_seconds = P.wait_seconds,
  }),
  run = function(ctx, p)
    local view
    if p.operation_id then
      view = hypd.operations.get(p.operation_id)
    elseif p.cluster_tag then
      view = latest(p.cluster_tag)
    else
      hypd.errors.refuse("operation_id", "required", "cluster_get_creation_status: give operation_id or cluster_tag",
        { field_message = "operation_id or cluster_tag" })
    end
    if not view or not TOOLS[view.tool] then
      hypd.errors.raise("NOT_FOUND", "no cluster_create or cluster_create_eks operation for " ..
        tostring(p.operation_id or p.cluster_tag))
    end
    local id, tag = view.operation_id, (view.params or {}).cluster_tag
    -- read() -> the operation now, the child it runs, another operation at
    -- work on the tag (a new create, a delete), and the live AWS state
    local function read()
      local v = hypd.operations.get(id)
      v.running_child = R.short(v).running_child
      local other = tag and R.on(on_tag(tag, true))
      if other and other.operation_id ~= id then v.operation = other end
      local st = hypd.operations.state(v.operation_id) or {}
      ctx.region = st.region or (v.params or {}).region
      local eks_state = st
      if v.tool == "cluster_create" then
        -- the EKS stage's own state (its ids), when that child has started
        for _, c in ipairs(v.children or {}) do
          if c.tool == "cluster_create_eks" then eks_state = hypd.operations.state(c.operation_id) or {} end
        end
      end
      local ok, live = pcall(stage.status, { params = v.params, state = eks_state, id = v.operation_id,
        region = ctx:aws_region(), try = function(_, ...) return ctx:try(...) end })
      v.aws = ok and live or { error = tostring(live and live.message or live) }
      if ok and v.tool == "cluster_create" then
        local name = Names.hyperpod(v.params.cluster_tag).cluster
        local c, err = ctx:try("sagemaker", "DescribeCluster", { ClusterName = name })
        v.aws.hyperpod_cluster = name
        v.aws.hyperpod_status = c and c.ClusterStatus or
          (err and err.code == "ResourceNotFound" and "NOT_CREATED" or "UNKNOWN")
      end
      return v
    end
    local function aws_states(v)
      local a = v.aws or {}
      return { tostring(a.eks_status), tostring(a.hyperpod_status), tostring(a.nat_gateway_state) }
    end
    local waited
    view, waited = W.follow(p.wait_seconds, { read = read,
      quick = function() return R.fingerprint(tag and on_tag(tag, true), { id }) end,
      settled = function(v) return v.status ~= "running" and not v.operation and not W.any_moving(aws_states(v)) end,
      signature = function(v)
        return R.signature(R.short(v)) .. " " .. R.signature(v.operation) .. " " .. table.concat(aws_states(v), ",")
      end })
    view.waited = waited
    return view
  end,
}
