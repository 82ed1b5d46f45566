-- hyperpod_delete_instance_group: remove an instance group and its
-- instances from a HyperPod cluster (UpdateCluster InstanceGroupsToDelete),
-- then wait until it is gone from DescribeCluster and its nodes from
-- Kubernetes. The last group is refused: SageMaker keeps at least one
-- instance group in a cluster (hyperpod_delete removes a whole cluster).
local P = require "_params"
local cap = require "_capacity"
local hp = require "_hyperpod"

local WAIT_EVERY, WAIT_LIMIT = 30, 60 * 60

return tool {
  name = "hyperpod_delete_instance_group",
  summary = "Delete an instance group and its instances from the active (or named) HyperPod cluster",
  description = "Deletes one instance group of the HyperPod cluster: its instances are terminated and their local and " ..
    "root volumes lost. The last group cannot be deleted (hyperpod_delete the cluster, or scale the group " ..
    "to 0). Follow it with hyperpod_list_instance_groups (operation_id, wait_seconds); plan = true shows " ..
    "what would be deleted.",
  kind = "destructive",
  aws = cap.aws("sagemaker:UpdateCluster"),
  k8s = { "get", "list" },
  params = P.form({ "instance_group" },
    { "cluster", "region" },
    {
    cluster = P.cluster, region = P.region,
    instance_group = P.with(P.instance_group, { required = true, decision = true,
      description = "the instance group to delete, with all its instances (ask the person: the work on them stops " ..
        "and their local data is lost)",
      help = "The group goes with all its instances: the work on them stops and their local data is lost." }),
  }),
  status_tool = "hyperpod_list_instance_groups",
  target = function(p) return cap.target(p, "group/" .. p.instance_group) end,
  steps = {
    { name = "check", run = function(ctx)
      local p, st = ctx.params, ctx.state
      local e, d = cap.cluster(ctx, p)
      local g = hp.group(d, p.instance_group)
      if not g and not st.sent_at then cap.group(d, p.instance_group) end -- NOT_FOUND, naming the groups
      if g and g.Status ~= "Deleting" then
        local left = #(d.RestrictedInstanceGroups or {})
        for _, o in ipairs(d.InstanceGroups or {}) do
          if o.InstanceGroupName ~= p.instance_group and o.Status ~= "Deleting" then left = left + 1 end
        end
        if left == 0 then
          local msg = "instance_group: " .. p.instance_group .. " is the last instance group of HyperPod cluster " ..
            d.ClusterName .. ", and SageMaker keeps at least one group in a cluster. To remove the cluster, use " ..
            "hyperpod_delete; to stop paying for its instances, scale it to 0 with hyperpod_scale_instance_group"
          hypd.errors.refuse("instance_group", "last_group", msg)
        end
      end
      return { eks = e.name, region = e.region, hyperpod = d.ClusterName,
        instance_type = g and g.InstanceType, count = g and g.CurrentCount }
    end },
    { name = "delete", run = function(ctx)
      local p, st = ctx.params, ctx.state
      -- a group already Deleting (this operation's request before a stop, or
      -- someone else's) is left to go: nothing is sent again
      local action = ctx:absent {
        type = "sagemaker:instance-group", label = "instance group", name = p.instance_group .. " of " .. st.hyperpod,
        id = "InstanceGroupName",
        find = function()
          local g = hp.group(cap.describe(ctx, st.hyperpod), p.instance_group)
          if g and g.Status ~= "Deleting" then return g end
        end,
        delete = function()
          cap.in_service(cap.describe(ctx, st.hyperpod), "deleting an instance group")
          ctx:call("sagemaker", "UpdateCluster", { ClusterName = st.hyperpod,
            InstanceGroupsToDelete = { p.instance_group } })
          st.sent_at = hypd.now()
        end,
      }
      return { action = action }
    end },
    { name = "wait", run = function(ctx)
      local p, st = ctx.params, ctx.state
      local e = { name = st.eks, hyperpod = st.hyperpod }
      local left = ctx:poll { what = "instance group " .. p.instance_group .. " to be gone", every = WAIT_EVERY,
        timeout = WAIT_LIMIT, since = st.sent_at,
        check = function()
          local d = cap.describe(ctx, st.hyperpod)
          local g = hp.group(d, p.instance_group)
          local nodes = cap.k8s_nodes(ctx, e)
          local _, total = cap.group_nodes(nodes, p.instance_group)
          if g and g.Status ~= "Deleting" and d.ClusterStatus == "InService" then
            hypd.errors.raise("FAILED", "SageMaker kept instance group " .. p.instance_group .. " (" ..
              tostring(g.Status) .. ")" .. (d.FailureMessage and (": " .. d.FailureMessage) or ""))
          end
          return not g and total == 0, g and ("group " .. tostring(g.Status) .. ", " .. tostring(g.CurrentCount) ..
            " instance(s) left") or (total .. " Kubernetes node(s) of it left"), total
        end }
      if ctx.plan then return end
      st.result = { hyperpod_cluster = st.hyperpod, instance_group = p.instance_group, deleted = true,
        instance_type = st.instance_type, instances = st.count, kubernetes_nodes_left = left }
    end },
  },
}
