-- sandbox.k8s.controllers.karpenter: HyperPod's managed Karpenter. While
-- the HyperPod cluster of this EKS cluster has AutoScaling Mode Enable:
--   * the cluster serves the HyperpodNodeClass
--     (karpenter.sagemaker.amazonaws.com/v1) and NodePool (karpenter.sh/v1)
--     APIs (their CRDs come and go with autoscaling; the objects go with
--     them);
--   * a HyperpodNodeClass gets its status: each instance group it names
--     with its instance types, spot capacity and subnets, and a Ready
--     condition (False naming a group that does not exist);
--   * scale-up: a pod the scheduler left Pending (Unschedulable) that a node
--     of an instance group under a NodePool would take (its selectors and
--     affinity, tolerations, GPU/EFA/Neuron requests against the instance
--     type's allocatable, the NodePool's requirements) makes HyperPod add
--     nodes to that group with BatchAddClusterNodes, as the cluster role
--     lets it: the group's target count rises, a node launches, joins and
--     the pod schedules. Pods that fit a node already on its way are not
--     counted twice; each pod is nominated once (event Nominated);
--   * consolidation when empty: a node of such a group that runs no pod
--     but DaemonSet ones for the NodePool's disruption.consolidateAfter
--     (counted from when it became empty: when it joined, or when its last
--     pod ended; Karpenter's default 0s; "Never" turns it off) is removed with
--     BatchDeleteClusterNodes (target count down by one), within the
--     NodePool's budget (a percentage of its nodes, rounded up) and never
--     below the group's MinCount, and not while pods are nominated to the
--     group or to the node itself: a Pending pod the scheduler marked
--     Unschedulable that the node can take (the node launched for it has
--     joined and the scheduler has not bound it yet) holds the node, as
--     Karpenter's nominations do; its clock starts again once the pod ran.
--     (Moving pods off underutilized nodes is not simulated.)
-- The SageMaker side tells us when its clusters change (sync, from
-- services/sagemaker/common.lua); Pod, Node and NodePool changes reach the
-- handler through the watch hook, and waits (an idle node's delay) through
-- ctl:after.
local C = require "sandbox.services.sagemaker.common"
local aws = require "sandbox.k8s.controllers._aws"
local core = require "hypd.core"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local log = require "hypd.log"
local node_ = require "sandbox.k8s.controllers._node"
local nodes = require "sandbox.k8s.controllers.nodes"
local resources = require "sandbox.k8s.resources"
local sched = require "sandbox.k8s.controllers.scheduler"
local state = require "sandbox.state"

local M = {}
M.ANN = "sandbox.hypd.io/karpenter"   -- on the CRDs this controller serves
M.GROUP_LABEL = "sagemaker.amazonaws.com/instance-group-name"
M.RETRY = 30                          -- seconds before a failed scale-up is tried again
local PLURALS = { nodepools = true, hyperpodnodeclasses = true }

-- sync(region): the HyperPod side changed (soon, in each cluster's task)
function M.sync(region)
  for _, ctl in ipairs(ctl_.each(region)) do ctl:enqueue("karpenter") end
end

local function eks_of(c)
  local arn = c.Orchestrator and c.Orchestrator.Eks and c.Orchestrator.Eks.ClusterArn
  return tostring(arn):match("^arn:aws[%w-]*:eks:([%w-]+):%d+:cluster/(.+)$")
end

-- hyperpod(ctl) -> the HyperPod cluster record this EKS cluster orchestrates
local function hyperpod(ctl)
  for _, c in ipairs(state.view(ctl.region, "sagemaker"):list("cluster")) do
    local region, name = eks_of(c)
    if region == ctl.region and name == ctl.cl.name then return c end
  end
end

-- crds(ctl, on): the Karpenter CRDs served while autoscaling is on
local function crds(ctl, on)
  local cl = ctl.cl
  local r = ctl:r("apiextensions.k8s.io", "v1", "customresourcedefinitions")
  for _, row in ipairs(resources.CRDS) do
    if PLURALS[row[3]] then
      local name = row[3] .. "." .. row[1]
      local have = cl:get(r, nil, name)
      if on and not have then
        local obj = resources.crd(row)
        obj.metadata.annotations = { [M.ANN] = "managed Karpenter" }
        obj.metadata.labels = { ["app.kubernetes.io/managed-by"] = "sagemaker-hyperpod" }
        cl:create(r, obj, { manager = "hyperpod" })
      elseif not on and have and (have.metadata.annotations or {})[M.ANN] then
        cl:delete(r, nil, name)
      end
    end
  end
end

-- duration("5m") -> seconds; "Never" -> nil
local function duration(v)
  if v == nil then return 0 end
  if v == "Never" then return nil end
  local n, u = tostring(v):match("^(%d+)([smh]?)$")
  if not n then return 0 end
  return tonumber(n) * ({ s = 1, m = 60, h = 3600, [""] = 1 })[u]
end

-- budget("90%", n) -> how many of n nodes may be disrupted at once
local function budget(pool, n)
  local b = ((((pool.spec or {}).disruption or {}).budgets) or {})[1]
  local v = b and b.nodes or "10%"
  local pct = tostring(v):match("^(%d+)%%$")
  if pct then return math.ceil(n * tonumber(pct) / 100) end
  return tonumber(v) or 1
end

local function requirement_ok(req, labels)
  local v = labels[req.key]
  local set = {}
  for _, x in ipairs(req.values or {}) do set[x] = true end
  if req.operator == "Exists" then return v ~= nil end
  if req.operator == "DoesNotExist" then return v == nil end
  if req.operator == "In" then return v ~= nil and set[v] == true end
  if req.operator == "NotIn" then return v == nil or not set[v] end
  return true
end

-- shape(ctl, c, g) -> a node of group g as it would join: labels, taints, allocatable
local function shape(ctl, c, g)
  local labels = {}
  for k, v in pairs(g.labels or {}) do labels[k] = v end
  labels["sagemaker.amazonaws.com/compute-type"] = "hyperpod"
  labels["sagemaker.amazonaws.com/cluster-name"] = c.ClusterName
  labels[M.GROUP_LABEL] = g.InstanceGroupName
  labels[nodes.HEALTH] = "Schedulable"
  labels[nodes.DEEP] = "Passed"
  labels["node.kubernetes.io/instance-type"] = g.InstanceType
  labels["beta.kubernetes.io/instance-type"] = g.InstanceType
  labels["topology.kubernetes.io/region"] = ctl.region
  labels["kubernetes.io/os"], labels["kubernetes.io/arch"] = "linux", "amd64"
  local taints = {}
  for _, t in ipairs(g.taints or {}) do
    taints[#taints + 1] = { key = t.Key or t.key, value = t.Value or t.value, effect = t.Effect or t.effect }
  end
  local _, alloc = node_.resources(g.InstanceType)
  return { metadata = { name = "(new " .. g.InstanceGroupName .. " node)", labels = labels },
    spec = { taints = #taints > 0 and taints or nil },
    status = { allocatable = alloc, conditions = { { type = "Ready", status = "True" } } } }
end

-- fits(pod, node, need) -> true when the pod would schedule on an empty node like this one
local function fits(pod, node, need, free)
  if sched.untolerated(pod.spec, node) then return false end
  if not sched.selects(pod.spec, node) then return false end
  for _, res in ipairs(sched.RESOURCES) do
    local n = need[res]
    if n and n > 0 and (free[res] or 0) < n then return false end
  end
  return true
end

local function free_of(node)
  local out = {}
  for _, res in ipairs(sched.RESOURCES) do out[res] = ctl_.quantity((node.status.allocatable or {})[res]) end
  return out
end

local function take(free, need)
  for res, n in pairs(need) do free[res] = (free[res] or 0) - n end
end

local function unschedulable(pod)
  local cond = ctl_.condition((pod.status or {}).conditions, "PodScheduled")
  return cond and cond.status == "False" and cond.reason == "Unschedulable"
end

local function daemon(pod) return ctl_.owner(pod, "DaemonSet") ~= nil end

local function call(ctl, op, input)
  local out, err = aws.call(ctl.region, "sagemaker", op, input)
  if not out then
    log.warn("sandbox", "managed Karpenter (%s): %s failed: %s", ctl.cl.name, op, tostring(err and err.message))
  end
  return out, err
end

-- node classes: status; pools by group -> {pool, class}
local function classes(ctl, c)
  local cl = ctl.cl
  local cr = ctl:r("karpenter.sagemaker.amazonaws.com", "v1", "hyperpodnodeclasses")
  local pr = ctl:r("karpenter.sh", "v1", "nodepools")
  if not cr or not pr then return {} end
  local by_class = {}
  for _, nc in ipairs(cl:list(cr)) do
    local groups, missing = {}, {}
    for _, name in ipairs((nc.spec or {}).instanceGroups or {}) do
      local g = C.group(c, name)
      if g then
        local subnets = {}
        for _, id in ipairs((g.OverrideVpcConfig or c.VpcConfig or {}).Subnets or {}) do subnets[#subnets + 1] = { id = id } end
        groups[#groups + 1] = { name = name, instanceTypes = { g.InstanceType },
          capacity = { spot = (g.CapacityRequirements and g.CapacityRequirements.Spot) ~= nil }, subnets = subnets }
      else
        missing[#missing + 1] = name
      end
    end
    local st = ctl_.copy(nc.status or {})
    st.instanceGroups = groups
    if #missing > 0 then
      st.conditions = ctl_.set_condition(st.conditions, "Ready", "False", "InstanceGroupNotFound",
        "instance group(s) " .. table.concat(missing, ", ") .. " not found in HyperPod cluster " .. c.ClusterName)
    else
      st.conditions = ctl_.set_condition(st.conditions, "Ready", "True", "Ready", "")
      by_class[nc.metadata.name] = groups
    end
    ctl_.put_status(ctl, cr, nc, st)
  end
  local out = {}
  for _, pool in ipairs(cl:list(pr)) do
    local ref = ((((pool.spec or {}).template or {}).spec or {}).nodeClassRef) or {}
    if ref.kind == "HyperpodNodeClass" and by_class[ref.name] then
      for _, g in ipairs(by_class[ref.name]) do
        if not out[g.name] then out[g.name] = pool end
      end
    end
  end
  return out
end

local function scale_up(ctl, c, pools, m)
  local cl = ctl.cl
  local pr = ctl:r("", "v1", "pods")
  local sm = state.view(ctl.region, "sagemaker")
  -- the nodes on their way: HyperPod nodes not yet joined
  local coming = {}
  for _, n in ipairs(sm:list("node")) do
    if n.cluster == c.ClusterName and n.Status == "Pending" and pools[n.group] then
      local g = C.group(c, n.group)
      if g then
        coming[n.group] = coming[n.group] or {}
        local list = coming[n.group]
        list[#list + 1] = free_of(shape(ctl, c, g))
      end
    end
  end
  -- the nodes already there, with what bound pods leave free: a pod one of
  -- them takes is the scheduler's (it may not have run since the node joined)
  local here = {}
  local used = {}
  for _, pod in ipairs(cl:list(pr)) do
    local nn = pod.spec.nodeName
    if nn and nn ~= "" and not ctl_.finished(pod) then
      used[nn] = used[nn] or {}
      for res, n in pairs(sched.requests(pod)) do used[nn][res] = (used[nn][res] or 0) + n end
    end
  end
  for _, node in ipairs(cl:list(ctl:r("", "v1", "nodes"))) do
    local gname = (node.metadata.labels or {})[M.GROUP_LABEL]
    if gname and pools[gname] and sched.node_ready(node) and not (node.spec or {}).unschedulable then
      local free = free_of(node)
      take(free, used[node.metadata.name] or {})
      here[#here + 1] = { node = node, free = free }
    end
  end
  local names = {}
  for name in pairs(pools) do names[#names + 1] = name end
  table.sort(names)
  local add, nominated, held = {}, {}, {}
  m.nominated = m.nominated or {}
  for _, pod in ipairs(cl:list(pr)) do
    if not (pod.spec.nodeName and pod.spec.nodeName ~= "") and not ctl_.finished(pod) and unschedulable(pod) then
      local need = sched.requests(pod)
      local taken = false
      for _, h in ipairs(here) do
        if not taken and fits(pod, h.node, need, h.free) then
          take(h.free, need)
          taken = true
          held[h.node.metadata.name] = true
        end
      end
      for _, gname in ipairs(taken and {} or names) do
        local g = C.group(c, gname)
        local pool = pools[gname]
        local node = g and shape(ctl, c, g)
        local ok = node ~= nil
        for _, req in ipairs(ok and ((((pool.spec or {}).template or {}).spec or {}).requirements) or {}) do
          ok = ok and requirement_ok(req, node.metadata.labels)
        end
        if ok and fits(pod, node, need, free_of(node)) then
          local placed = false
          for _, free in ipairs(coming[gname] or {}) do
            if not placed and fits(pod, node, need, free) then take(free, need); placed = true end
          end
          if not placed then
            add[gname] = (add[gname] or 0) + 1
            local free = free_of(node)
            take(free, need)
            coming[gname] = coming[gname] or {}
            table.insert(coming[gname], free)
          end
          nominated[pod.metadata.uid] = gname
          if m.nominated[pod.metadata.uid] ~= gname then
            ctl_.event(ctl, pod, "Normal", "Nominated", "Pod should schedule on: nodeclaim/" .. gname .. "-" ..
              ctl_.hex(5) .. " (instance group " .. gname .. ", " .. g.InstanceType .. ")", "karpenter")
          end
          break
        end
      end
    end
  end
  m.nominated = nominated
  local specs = {}
  for _, gname in ipairs(names) do
    if add[gname] then specs[#specs + 1] = { InstanceGroupName = gname, IncrementTargetCountBy = add[gname] } end
  end
  if #specs > 0 then
    local out = call(ctl, "BatchAddClusterNodes", { ClusterName = c.ClusterName, NodesToAdd = specs,
      ClientToken = ctl_.hex(16) })
    if not out or #(out.Failed or {}) > 0 then ctl:after(M.RETRY, "karpenter") end
    if out then
      for _, s in ipairs(out.Successful or {}) do
        log.info("sandbox", "managed Karpenter (%s): adding a node to %s", ctl.cl.name, s.InstanceGroupName)
      end
    end
  end
  return nominated, held
end

local function consolidate(ctl, c, pools, m, nominated, held)
  local cl = ctl.cl
  local nr, pr = ctl:r("", "v1", "nodes"), ctl:r("", "v1", "pods")
  local busy = {}
  for _, pod in ipairs(cl:list(pr)) do
    local nn = pod.spec.nodeName
    if nn and nn ~= "" and not ctl_.finished(pod) and not daemon(pod) then busy[nn] = true end
  end
  local waiting = {}
  for _, g in pairs(nominated) do waiting[g] = true end
  m.idle = m.idle or {}
  local now = core.now()
  local per_group, removing = {}, {}
  local live = {}
  for _, node in ipairs(cl:list(nr)) do
    local gname = (node.metadata.labels or {})[M.GROUP_LABEL]
    if gname and pools[gname] then
      per_group[gname] = (per_group[gname] or 0) + 1
      live[node.metadata.name] = true
      local id = (node.metadata.annotations or {})["sandbox.hypd.io/instance-id"]
      if busy[node.metadata.name] or held[node.metadata.name] or not sched.node_ready(node) or waiting[gname] or
          not id then
        m.idle[node.metadata.name] = nil
      else
        local since = m.idle[node.metadata.name] or now
        m.idle[node.metadata.name] = since
        local after = duration((((pools[gname].spec or {}).disruption) or {}).consolidateAfter)
        if after then
          local due = since + after / ctl_.speed()
          if now >= due then
            removing[gname] = removing[gname] or {}
            table.insert(removing[gname], { node = node, id = id })
          else
            ctl:at(due, "karpenter")
          end
        end
      end
    end
  end
  for name in pairs(m.idle) do if not live[name] then m.idle[name] = nil end end
  for gname, list in pairs(removing) do
    local g = C.group(c, gname)
    local floor = (g and g.MinCount) or 0
    local room = math.min(budget(pools[gname], per_group[gname]), per_group[gname] - floor)
    local ids = {}
    for i = 1, math.min(room, #list) do
      ids[#ids + 1] = list[i].id
      ctl_.event(ctl, list[i].node, "Normal", "DisruptionTerminating", "Disrupting Node: Empty/Delete (idle " ..
        "past consolidateAfter)", "karpenter")
      m.idle[list[i].node.metadata.name] = nil
    end
    if #ids > 0 then
      log.info("sandbox", "managed Karpenter (%s): removing %d idle node(s) of %s", ctl.cl.name, #ids, gname)
      call(ctl, "BatchDeleteClusterNodes", { ClusterName = c.ClusterName, NodeIds = ids })
    end
  end
end

ctl_.handlers.karpenter = function(ctl)
  local c = hyperpod(ctl)
  local on = c ~= nil and c.AutoScaling ~= nil and c.AutoScaling.Mode == "Enable" and c.ClusterStatus ~= "Deleting"
    and c.ClusterStatus ~= "Failed"
  crds(ctl, on)
  if not on then return end
  local m = ctl:memo("karpenter")
  local pools = classes(ctl, c)
  if next(pools) == nil then return end
  local nominated, held = scale_up(ctl, c, pools, m)
  consolidate(ctl, c, pools, m, nominated, held)
end

function M.watch(ctl, _, r)
  if r.kind == "Pod" or r.kind == "Node" or r.kind == "NodePool" or r.kind == "HyperpodNodeClass" then
    ctl:enqueue("karpenter")
  end
end

function M.start(ctl) ctl:enqueue("karpenter") end

return M
