-- cluster_delete_node_group: an EKS managed node group and its nodes, gone.
--
--   check    the cluster and the node group (a HyperPod instance group of
--            that name is refused, naming it; an unknown name is refused
--            with the node groups there are)
--   delete   DeleteNodegroup by ctx:absent (not sent again when the
--            deletion has begun; while the group is creating or updating
--            it waits for it); the wait is the next step, which also sees
--            a DELETE_FAILED group and says why
--   wait     until EKS no longer knows the group, then (when hypd can read
--            the cluster's Kubernetes API) until its Nodes have left
local P = require "_params"
local ng = require "cluster._node_groups"

local errors = hypd.errors

local function check(ctx)
  local st = ctx.state
  local _, g = ng.resolve(ctx, { tool = "cluster_delete_node_group", verb = "delete" })
  st.nodegroup_arn, st.instance_types, st.scaling = g.nodegroupArn, g.instanceTypes, g.scalingConfig
end

local function delete(ctx)
  local st = ctx.state
  st.action = ctx:absent { type = "eks:nodegroup", label = "EKS node group", name = st.cluster .. "/" ..
    st.node_group, id = "nodegroupArn",
    find = function() return ng.describe(ctx, st.cluster, st.node_group) end,
    gone = { "ResourceNotFoundException" },
    retry = function(err)
      if err.code == "ResourceInUseException" then
        return "EKS node group " .. st.node_group .. " is busy; waiting until it can be deleted"
      end
    end,
    retry_every = ng.POLL, retry_for = ng.LIMIT,
    delete = function(g)
      if g.status == "DELETING" then return end -- its deletion has begun: not sent again
      ctx:call("eks", "DeleteNodegroup", { clusterName = st.cluster, nodegroupName = st.node_group })
    end }
end

local function wait(ctx)
  local st = ctx.state
  local name = st.cluster .. "/" .. st.node_group
  local gone = ctx:poll { what = "EKS node group " .. name .. " to be deleted", every = ng.POLL, timeout = ng.LIMIT,
    since = st.started_at,
    check = function()
      local g = ng.describe(ctx, st.cluster, st.node_group)
      if not g then return true, nil, true end
      if g.status == "DELETE_FAILED" then
        local why = ng.issues(g)
        errors.raise("FAILED", "deleting EKS node group " .. name .. " failed" ..
          (#why > 0 and (": " .. table.concat(why, "; ")) or "") .. "; fix what it names, then call again",
          { issues = why })
      end
      local why = ng.issues(g) -- the group's health issues, shown with the wait
      return false, "EKS node group " .. name .. " " .. tostring(g.status) ..
        (#why > 0 and (": " .. table.concat(why, "; ")) or "")
    end }
  if not gone then return end -- a plan does not wait
  local _, why = ng.await_nodes(ctx, st.cluster, st.node_group, 0)
  st.result = { cluster = st.cluster, region = st.region, node_group = st.node_group, deleted = true,
    nodegroup_arn = st.nodegroup_arn, instance_types = st.instance_types, scaling = st.scaling,
    kubernetes = why }
end

return tool {
  name = "cluster_delete_node_group",
  summary = "Delete an EKS managed node group and wait until it and its nodes are gone",
  description = "Deletes an EKS managed node group of the active (or named) cluster: its instances are drained and " ..
    "terminated (3 to 7 minutes). A HyperPod instance group is refused (hyperpod_delete_instance_group " ..
    "deletes those). Follow it with cluster_get_node_group_status (wait_seconds); plan = true shows what " ..
    "it would delete.",
  kind = "destructive",
  status_tool = "cluster_get_node_group_status",
  aws = { "eks:DescribeCluster", "eks:ListNodegroups", "eks:DescribeNodegroup", "eks:DeleteNodegroup",
    "sagemaker:ListClusters", "sagemaker:DescribeCluster" },
  k8s = { "list" },
  params = P.form({ "node_group" },
    { "cluster", "region" },
    {
    cluster = P.cluster, region = P.region,
    node_group = P.with(ng.node_group, { required = true, decision = true,
      description = "the EKS managed node group to delete (cluster_list_instance_groups lists them)" }),
  }),
  target = ng.target,
  steps = {
    { name = "check", run = check },
    { name = "delete", run = delete },
    { name = "wait", run = wait },
  },
}
