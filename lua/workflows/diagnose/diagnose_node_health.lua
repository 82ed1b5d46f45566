-- diagnose_node_health: what is wrong with one HyperPod node or all of
-- them, read from SageMaker (ListClusterNodes, DescribeClusterNode) and the
-- cluster's Kubernetes API (Nodes, their Warning Events, Pending pods),
-- answered as findings (diagnose/_findings) with the evidence quoted and
-- the next steps inspect, reboot, replace as calls to review. Read only.
local F = require "diagnose._findings"
local N = require "diagnose._node_checks"
local P = require "_params"
local cap = require "_capacity"

local GROUP = cap.GROUP_LABEL

-- summaries(ctx, e, group) -> every ListClusterNodes summary of the cluster (of group)
local function summaries(ctx, e, group)
  local out, token = {}, nil
  repeat
    local r = ctx:call("sagemaker", "ListClusterNodes", { ClusterName = e.hyperpod, MaxResults = 100,
      NextToken = token, InstanceGroupNameContains = group })
    for _, s in ipairs(r.ClusterNodeSummaries or {}) do
      if not group or s.InstanceGroupName == group then out[#out + 1] = s end
    end
    token = r.NextToken
  until not token
  table.sort(out, function(a, b) return a.InstanceId < b.InstanceId end)
  return out
end

-- pod_group(pod) -> the instance group a pod asks for (its node
-- selector or required affinity on the group label), or nil
local function pod_group(pod)
  local spec = pod.spec or {}
  if (spec.nodeSelector or {})[GROUP] then return spec.nodeSelector[GROUP] end
  local req = ((spec.affinity or {}).nodeAffinity or {}).requiredDuringSchedulingIgnoredDuringExecution
  for _, term in ipairs(req and req.nodeSelectorTerms or {}) do
    for _, ex in ipairs(term.matchExpressions or {}) do
      if ex.key == GROUP and ex.operator == "In" and #(ex.values or {}) == 1 then return ex.values[1] end
    end
  end
end

local function gpus_of(pod)
  local n = 0
  for _, ct in ipairs((pod.spec or {}).containers or {}) do
    local req = (ct.resources or {}).requests or (ct.resources or {}).limits or {}
    n = n + (math.tointeger(tonumber(req[N.GPU])) or 0)
  end
  return n
end

-- pending(r, c, pods, groups, whole): the pods the scheduler cannot place,
-- by the group they ask for (only the groups looked at; unplaced pods that
-- name no group count when the whole cluster is looked at)
local function pending(r, c, pods, groups, whole)
  local by = {}
  for _, pod in ipairs(pods) do
    local cond
    for _, cd in ipairs((pod.status or {}).conditions or {}) do
      if cd.type == "PodScheduled" and cd.status == "False" then cond = cd end
    end
    local g = pod_group(pod)
    if cond and ((g and groups[g]) or (not g and whole)) then
      local k = g or ""
      by[k] = by[k] or {}
      table.insert(by[k], { pod = pod, cond = cond })
    end
  end
  local keys = {}
  for k in pairs(by) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do
    local list = by[k]
    local ev, gpus = {}, 0
    for i, x in ipairs(list) do
      gpus = gpus + gpus_of(x.pod)
      if i <= 5 then
        ev[#ev + 1] = F.evidence("Pod/" .. x.pod.metadata.namespace .. "/" .. x.pod.metadata.name ..
          " condition PodScheduled", "reason=" .. tostring(x.cond.reason) .. " message=" .. tostring(x.cond.message),
          x.cond.lastTransitionTime)
      end
    end
    local args = { cluster = c.name, region = c.region_given, instance_group = k ~= "" and k or nil }
    local next = { F.step("inspect", "hyperpod_list_nodes", args, "see how many of the group's nodes are Ready") }
    if hypd.tools.exists("monitor_get_cluster") then
      next[#next + 1] = F.step("inspect", "monitor_get_cluster", args, "see the pending GPU demand next to the free GPUs")
    end
    r:add { severity = "warning", code = "PODS_PENDING",
      subject = k ~= "" and ("instance group " .. k) or ("cluster " .. c.name),
      summary = string.format("%d pod%s cannot be scheduled%s", #list, #list == 1 and "" or "s",
        gpus > 0 and string.format(" (%d GPUs asked)", gpus) or ""),
      evidence = ev,
      explanation = "the scheduler found no node that fits these pods (the reasons quoted: too few free GPUs " ..
        "or EFA devices, taints, unready nodes); they stay Pending until capacity frees up or grows",
      next = next }
  end
end

return tool {
  name = "diagnose_node_health",
  summary = "Find what is wrong with HyperPod nodes: health labels, conditions, taints, lost GPUs/EFA, Pending pods",
  description = "Read-only diagnosis of one HyperPod node or all of them: findings with the evidence quoted " ..
    "and suggested calls (inspect, reboot, replace) for a person to review. Call it when a node is unhealthy, " ..
    "NotReady, or jobs stay Pending.",
  kind = "read",
  aws = cap.aws("sagemaker:ListClusterNodes", "sagemaker:DescribeClusterNode"),
  k8s = { "get", "list" },
  params = P.form({},
    { "instance_group", "node", "cluster", "region" },
    {
    cluster = P.cluster, region = P.region,
    node = { type = "string", pattern = "^(hyperpod-)?i-[a-f0-9]{8}([a-f0-9]{9})?$",
      pattern_help = "a Kubernetes node name like hyperpod-i-0123456789abcdef0 or its instance id",
      description = "the node to diagnose (Kubernetes node name hyperpod-i-... or instance id); absent: every node" },
    instance_group = P.with(P.instance_group, { description = "only the nodes of this instance group" }),
  }),
  result = F.RESULT,
  run = function(ctx, p)
    local e, d = cap.cluster(ctx, p)
    if p.instance_group then cap.group(d, p.instance_group) end
    local c = { name = e.name, region_given = p.region }
    local r = F.new()
    local list = summaries(ctx, e, p.instance_group)
    if p.node then
      local id = p.node:gsub("^hyperpod%-", "")
      local one
      for _, s in ipairs(list) do if s.InstanceId == id then one = s end end
      if not one then
        hypd.errors.refuse("node", "exists", string.format("HyperPod cluster %s has no node %s%s", e.hyperpod, id,
          p.instance_group and (" in instance group " .. p.instance_group) or ""),
          { code = "NOT_FOUND", field_message = "node: no such node in " .. e.hyperpod })
      end
      local dn = ctx:call("sagemaker", "DescribeClusterNode", { ClusterName = e.hyperpod, NodeId = id }).NodeDetails
      one.InstanceStatus = dn and dn.InstanceStatus or one.InstanceStatus
      list = { one }
    end
    r:checked("SageMaker node status", string.format("%d node%s of %s", #list, #list == 1 and "" or "s", e.hyperpod))
    local taints = {}
    for _, g in ipairs(d.InstanceGroups or {}) do
      local set = {}
      for _, t in ipairs((g.KubernetesConfig or {}).CurrentTaints or {}) do
        set[tostring(t.Key) .. "/" .. tostring(t.Effect)] = true
      end
      taints[g.InstanceGroupName] = set
    end
    -- the Kubernetes side: the Nodes, their Warning Events, the Pending pods
    local ok, conn = pcall(ctx.k8s, ctx, e.name)
    local nodes, events, pods, kerr = {}, {}, {}, nil
    if ok then
      local items, err = conn:list("v1", "Node", { labels = { [cap.CLUSTER_LABEL] = e.hyperpod } })
      if items then
        for _, n in ipairs(items) do nodes[n.metadata.name] = n end
        for _, ev in ipairs(conn:list("v1", "Event", { all_namespaces = true, fields = "involvedObject.kind=Node" }) or {}) do
          local io = ev.involvedObject or {}
          if io.kind == "Node" and ev.type == "Warning" then
            events[io.name] = events[io.name] or {}
            table.insert(events[io.name], ev)
          end
        end
        for _, l in pairs(events) do
          table.sort(l, function(a, b)
            return tostring(a.lastTimestamp or a.eventTime) > tostring(b.lastTimestamp or b.eventTime)
          end)
        end
        pods = conn:list("v1", "Pod", { all_namespaces = true, fields = "status.phase=Pending" }) or {}
      else
        kerr = err
      end
    else
      kerr = conn
    end
    if kerr then
      r:add { severity = "warning", code = "KUBERNETES_UNREACHABLE", subject = "cluster " .. e.name,
        summary = "the cluster's Kubernetes API did not answer: only SageMaker's view was checked",
        evidence = { F.evidence("Kubernetes API of " .. e.name, tostring(kerr.message or kerr)) },
        explanation = "labels, conditions, taints and device counts live on the Kubernetes Nodes; without " ..
          "them only the instance status is known",
        next = { F.step("inspect", "cluster_get_status", { cluster = e.name, region = p.region },
          "see whether the EKS cluster and its endpoint are up") } }
    else
      r:checked("Kubernetes nodes", "labels, conditions, taints, GPU and EFA devices of " .. #list .. " nodes")
      r:checked("node events", "Warning events on the nodes")
    end
    local groups = {}
    for _, s in ipairs(list) do
      groups[s.InstanceGroupName] = true
      local name = "hyperpod-" .. s.InstanceId
      N.check(r, c, s, nodes[name], { events = events[name], group_taints = taints[s.InstanceGroupName],
        joined_known = not kerr })
    end
    if not kerr then
      pending(r, c, pods, groups, not p.node and not p.instance_group)
      r:checked("Pending pods", #pods .. " Pending pods, the scheduler's reasons")
    end
    return r:result()
  end,
}
