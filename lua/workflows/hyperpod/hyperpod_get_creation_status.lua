-- hyperpod_get_creation_status: a hyperpod_create or
-- hyperpod_add_instance_group operation, and the live state under it
-- (SageMaker's view of the cluster and its groups, the nodes Kubernetes
-- has).
local P = require "_params"
local create = require "hyperpod._create"
local R = require "_running"
local W = require "_wait"

local TOOLS = { hyperpod_create = true, hyperpod_add_instance_group = true }

-- latest(prefix) -> the newest operation of the HyperPod stage tools whose
-- target starts with prefix ("hyperpod/<region>/<eks>")
local function latest(prefix)
  local best
  for name in pairs(TOOLS) do
    for _, v in ipairs(hypd.operations.list { tool = name, limit = 200 }) do
      local t = tostring(v.target)
      -- one that runs before any that ended: a finished one never hides the work going on
      local vr, br = v.status == "running", best ~= nil and best.status == "running"
      local better = not best or (vr and not br) or (vr == br and v.created_at > best.created_at)
      if (t == prefix or t:sub(1, #prefix + 1) == prefix .. "/") and better then
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
  description = "Reports a hyperpod_create or hyperpod_add_instance_group operation (by operation_id, or the latest " ..
    "on the cluster): status, phase, steps with timings, result or error, and SageMaker's cluster and " ..
    "group status with the Ready nodes. With wait_seconds it answers at the first change; a creation " ..
    "takes about 15 minutes: call it with wait_seconds = 300 until status is succeeded or failed.",
  kind = "read",
  aws = { "sagemaker:DescribeCluster", "eks:DescribeCluster" },
  k8s = { "list" },
  params = P.form({},
    { "operation_id", "cluster", "region", "wait_seconds" },
    {
    operation_id = P.with(P.operation_id, { description = "what hyperpod_create or hyperpod_add_instance_group " ..
      "returned" }),
    cluster = P.with(P.cluster, { description = "find the latest operation for this EKS cluster instead " ..
      "(default: the active cluster)" }),
    region = P.region,
    wait_seconds = P.wait_seconds,
  }),
  run = function(ctx, p)
    local view
    if p.operation_id then
      view = hypd.operations.get(p.operation_id)
    else
      local target = hypd.clusters.target(p)
      if not target then
        hypd.errors.refuse("operation_id", "required", "hyperpod_get_creation_status: give operation_id or cluster " ..
          "(no cluster is active)", { field_message = "operation_id or cluster" })
      end
      view = latest("hyperpod/" .. (target.region or ctx:aws_region()) .. "/" .. target.name)
    end
    if not view or not TOOLS[view.tool] then
      hypd.errors.raise("NOT_FOUND", "no hyperpod_create or hyperpod_add_instance_group operation for " ..
        tostring(p.operation_id or p.cluster or "the active cluster"))
    end
    local id = view.operation_id
    local region0, eks0 = tostring(view.target):match("^hyperpod/([^/]+)/([^/]+)")
    -- read() -> the operation now with the child it runs, the top-level
    -- operation at work on the cluster when that is another (cluster_create
    -- running this stage), and the live state
    local function read()
      local v = hypd.operations.get(id)
      v.running_child = R.short(v).running_child
      local top = v.status == "running" and R.short(R.top(v)) or (eks0 and R.on("hyperpod/" .. region0 .. "/" .. eks0))
      if top and top.operation_id ~= id then v.operation = top end
      local st = hypd.operations.state(v.operation_id) or {}
      if not st.hyperpod_name then -- stopped before it saved what it works on: what hypd knows of the cluster
        local rec = eks0 and hypd.clusters.get(eks0, region0)
        if rec and rec.hyperpod then st = { hyperpod_name = rec.hyperpod.name, eks_name = eks0, region = region0 } end
      end
      ctx.region = st.region or (v.params or {}).region or ctx.region
      if st.hyperpod_name then v.aws = live(ctx, st) end
      return v
    end
    local function states(v)
      local a, out = v.aws or {}, {}
      out[1] = tostring(a.cluster_status)
      for _, g in ipairs(a.instance_groups or {}) do
        out[#out + 1] = tostring(g.status) .. "/" .. tostring(g.current_count) .. "/" .. tostring(g.nodes_ready)
      end
      return out
    end
    local waited
    view, waited = W.follow(p.wait_seconds, { read = read,
      quick = function() return R.fingerprint(eks0 and ("hyperpod/" .. region0 .. "/" .. eks0), { id }) end,
      settled = function(v)
        if v.status == "running" or v.operation then return false end
        for _, s in ipairs(states(v)) do if W.moving((s:match("^[^/]*"))) then return false end end
        return true
      end,
      signature = function(v)
        return R.signature(R.short(v)) .. " " .. R.signature(v.operation) .. " " .. table.concat(states(v), ",")
      end })
    view.waited = waited
    return view
  end,
}
