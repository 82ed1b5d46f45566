-- cluster_get_creation_status: cluster_create_eks's operation and the live
-- AWS state under it.
local P = require "_params"
local stage = require "cluster._eks_stage"

return tool {
  name = "cluster_get_creation_status",
  summary = "Progress of cluster_create_eks: each phase with timings, and the live AWS status",
  description = "Reports a cluster_create_eks operation (by operation_id, or the latest one for cluster_tag): " ..
    "status (running, succeeded, failed, cancelled), the current phase, every step with start, end and " ..
    "duration, the result or error, and the live AWS state (EKS cluster status, NAT gateway). With " ..
    "wait_seconds it answers as soon as the phase or status changes.",
  kind = "read",
  aws = { "eks:DescribeCluster", "ec2:DescribeVpcs", "ec2:DescribeNatGateways" },
  params = {
    operation_id = P.with(P.operation_id, { description = "what cluster_create_eks returned" }),
    cluster_tag = P.with(P.cluster_tag, { description = "find the latest operation for this tag instead" }),
    wait_seconds = P.wait_seconds,
  },
  run = function(ctx, p)
    local view
    if p.operation_id then
      view = hypd.operations.get(p.operation_id)
    elseif p.cluster_tag then
      for _, v in ipairs(hypd.operations.list { tool = "cluster_create_eks", limit = 200 }) do
        if (v.params or {}).cluster_tag == p.cluster_tag then view = v break end
      end
    else
      hypd.errors.raise("VALIDATION", "cluster_get_creation_status: give operation_id or cluster_tag",
        { fields = { { field = "operation_id", rule = "required", message = "operation_id or cluster_tag" } } })
    end
    if not view or view.tool ~= "cluster_create_eks" then
      hypd.errors.raise("NOT_FOUND", "no cluster_create_eks operation for " .. tostring(p.operation_id or p.cluster_tag))
    end
    if p.wait_seconds > 0 then view = hypd.operations.wait(view.operation_id, p.wait_seconds) end
    local st = hypd.operations.state(view.operation_id) or {}
    ctx.region = st.region or (view.params or {}).region
    local ok, live = pcall(stage.status, { params = view.params, state = st, id = view.operation_id,
      region = ctx:aws_region(), try = function(_, ...) return ctx:try(...) end })
    view.aws = ok and live or { error = tostring(live and live.message or live) }
    return view
  end,
}
