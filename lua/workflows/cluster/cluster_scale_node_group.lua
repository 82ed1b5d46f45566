-- cluster_scale_node_group: an EKS managed node group to a new size.
--
--   check   the cluster and the node group (a HyperPod instance group of
--           that name is refused, naming it), the sizes it will have
--           (desired within min and max, the ones given or the group's)
--   scale   the scaling configuration, by ctx:ensure's explicit diff:
--           UpdateNodegroupConfig with only the sizes that differ (its
--           clientRequestToken is the operation's, so a retried update is
--           the same update); while the group is busy (creating, updating)
--           the update waits for it
--   wait    the group ACTIVE with the new sizes and its update Successful,
--           then (when hypd can read the cluster's Kubernetes API) that
--           many Ready nodes of the group
local Names = require "_names"
local P = require "_params"
local ng = require "cluster._node_groups"

local errors, json = hypd.errors, hypd.json

-- sizes(g, p) -> {minSize, maxSize, desiredSize}: what the group will have,
-- or VALIDATION naming the parameter that does not fit
local function sizes(g, p)
  local cur = g.scalingConfig or {}
  local s = { minSize = p.min_size or cur.minSize, maxSize = p.max_size or cur.maxSize, desiredSize = p.desired_size }
  if s.minSize > s.maxSize then
    if p.min_size and p.max_size then errors.refuse("min_size", "range", "min_size " .. s.minSize .. " is above max_size " ..
      s.maxSize, { prefix = "message" }) end
    if p.min_size then
      errors.refuse("min_size", "range", "min_size " .. s.minSize .. " is above the node group's maximum size " ..
        s.maxSize .. "; pass max_size as well", { prefix = "message" })
    end
    errors.refuse("max_size", "range", "max_size " .. s.maxSize .. " is below the node group's minimum size " .. s.minSize ..
      "; pass min_size as well", { prefix = "message" })
  end
  if s.desiredSize < s.minSize then
    errors.refuse("desired_size", "minimum", "desired_size " .. s.desiredSize .. " is below " .. (p.min_size and "min_size " or
      "the node group's minimum size ") .. s.minSize .. (p.min_size and "" or "; pass min_size to lower it"),
      { prefix = "message" })
  end
  if s.desiredSize > s.maxSize then
    errors.refuse("desired_size", "maximum", "desired_size " .. s.desiredSize .. " is above " .. (p.max_size and "max_size " or
      "the node group's maximum size ") .. s.maxSize .. (p.max_size and "" or "; pass max_size to raise it"),
      { prefix = "message" })
  end
  return s
end

local BUSY = { CREATING = true, UPDATING = true }

local function check(ctx)
  local st = ctx.state
  local c, g = ng.resolve(ctx, { tool = "cluster_scale_node_group", verb = "scale" })
  -- EKS updates a group that is ACTIVE, or soon will be (CREATING, UPDATING: the scale waits for it)
  if not BUSY[g.status] and g.status ~= "ACTIVE" then
    errors.refuse("node_group", "state", string.format("EKS node group %s of %s is %s and cannot be scaled until it is ACTIVE%s",
      g.nodegroupName, c.name, g.status, #ng.issues(g) > 0 and (": " .. table.concat(ng.issues(g), "; ")) or ""),
      { code = "CONFLICT", field_message = g.nodegroupName .. " is " .. g.status })
  end
  st.from = g.scalingConfig
  st.to = sizes(g, ctx.params)
end

local function scale(ctx)
  local st = ctx.state
  local name = st.cluster .. "/" .. st.node_group
  local _, action = ctx:ensure { type = "eks:nodegroup-scaling", label = "EKS node group scaling", name = name,
    id = "nodegroupArn", field = "node_group",
    search = function() return ng.describe(ctx, st.cluster, st.node_group) end,
    create = function() errors.raise("NOT_FOUND", "EKS node group " .. name .. " is gone") end,
    desired = st.to,
    current = function(g) return g.scalingConfig or {} end,
    -- a group that is creating or updating takes no update until it is ACTIVE
    retry = function(err)
      if err.code ~= "ResourceInUseException" then return nil end
      local g = ng.describe(ctx, st.cluster, st.node_group)
      if g and BUSY[g.status] then return "EKS node group " .. name .. " is " .. g.status .. "; waiting for ACTIVE" end
    end,
    retry_every = ng.POLL, retry_for = ng.LIMIT,
    update = function(_, changes)
      local sc = {}
      for k, ch in pairs(changes) do sc[k] = ch.to end
      local r = ctx:call("eks", "UpdateNodegroupConfig", { clusterName = st.cluster, nodegroupName = st.node_group,
        scalingConfig = sc, clientRequestToken = Names.token(ctx.op_id) })
      st.update_id = r.update and r.update.id
    end }
  st.action = action
end

local function matches(g, to)
  local s = g.scalingConfig or {}
  return s.minSize == to.minSize and s.maxSize == to.maxSize and s.desiredSize == to.desiredSize
end

local function wait(ctx)
  local st = ctx.state
  local name = st.cluster .. "/" .. st.node_group
  local g = ctx:poll { what = "EKS node group " .. name .. " to be ACTIVE at " .. st.to.desiredSize .. " nodes",
    every = ng.POLL, timeout = ng.LIMIT, since = st.started_at,
    check = function()
      local g = ng.describe(ctx, st.cluster, st.node_group)
      if not g then errors.raise("NOT_FOUND", "EKS node group " .. name .. " is gone") end
      local u
      -- the update's outcome is read once the group has left UPDATING (one call per check, not two)
      if st.update_id and g.status ~= "UPDATING" then
        u = ctx:call("eks", "DescribeUpdate", { name = st.cluster, updateId = st.update_id,
          nodegroupName = st.node_group }).update
        if u.status == "Failed" or u.status == "Cancelled" then
          local why = {}
          for _, e in ipairs(u.errors or {}) do why[#why + 1] = tostring(e.errorCode) .. ": " .. tostring(e.errorMessage) end
          errors.raise("FAILED", string.format("scaling EKS node group %s failed (update %s %s)%s", name, st.update_id,
            u.status, #why > 0 and (": " .. table.concat(why, "; ")) or ""), { update_id = st.update_id })
        end
      end
      if g.status == "DELETING" or g.status == "DELETE_FAILED" or g.status == "CREATE_FAILED" then
        errors.raise("FAILED", "EKS node group " .. name .. " is " .. g.status, { issues = ng.issues(g) })
      end
      local done = g.status == "ACTIVE" and matches(g, st.to) and (not st.update_id or u.status == "Successful")
      local why = ng.issues(g) -- the group's health issues, shown with the wait
      return done, "EKS node group " .. name .. " " .. tostring(g.status) .. (u and (", update " .. u.status) or "") ..
        (#why > 0 and (": " .. table.concat(why, "; ")) or ""), g
    end }
  if not g then return end -- a plan does not wait
  local ready, why = ng.await_nodes(ctx, st.cluster, st.node_group, st.to.desiredSize)
  st.result = { cluster = st.cluster, region = st.region, node_group = st.node_group, from = st.from, to = st.to,
    status = g.status, changed = st.action == "changed", update_id = st.update_id,
    nodes_ready = ready or json.null, kubernetes = why }
end

return tool {
  name = "cluster_scale_node_group",
  summary = "Scale an EKS managed node group (desired size, and min/max when needed) and wait until it has the nodes",
  description = "Sets the desired size (and min and max when given) of an EKS managed node group of the active (or " ..
    "named) cluster and waits until the group is ACTIVE with that many Ready nodes. HyperPod instance " ..
    "groups are refused (hyperpod_scale_instance_group scales those). Follow it with " ..
    "cluster_get_node_group_status (wait_seconds); plan = true shows the change.",
  kind = "mutating",
  status_tool = "cluster_get_node_group_status",
  aws = { "eks:DescribeCluster", "eks:ListNodegroups", "eks:DescribeNodegroup", "eks:UpdateNodegroupConfig",
    "eks:DescribeUpdate", "sagemaker:ListClusters", "sagemaker:DescribeCluster" },
  k8s = { "list" },
  params = P.form({ "node_group", "desired_size", "min_size", "max_size" },
    { "cluster", "region" },
    {
    cluster = P.cluster, region = P.region,
    node_group = P.with(ng.node_group, { required = true, decision = true }),
    desired_size = { type = "integer", minimum = 0, maximum = 1000, required = true, decision = true,
      description = "how many nodes the group should have" },
    min_size = { type = "integer", minimum = 0, maximum = 1000, decision = true,
      description = "the group's new minimum size (default: kept)" },
    max_size = { type = "integer", minimum = 1, maximum = 1000, decision = true,
      description = "the group's new maximum size (default: kept)" },
  }),
  target = ng.target,
  steps = {
    { name = "check", run = check },
    { name = "scale", run = scale },
    { name = "wait", run = wait },
  },
}
