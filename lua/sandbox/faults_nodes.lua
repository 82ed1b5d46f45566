-- sandbox.faults_nodes: the node, lifecycle and add-on faults the
-- diagnostics find (sandbox.faults.configure hands them here to check):
--   node_health = { { cluster = "hp1", node = "hyperpod-i-0abc..." | instance_group = "gpu",
--                     label = "UnschedulablePendingReboot",      -- node-health-status label
--                     deep_health = "Failed",                    -- deep-health-check-status label
--                     condition = { type = "MemoryPressure", status = "True", reason = "...", message = "..." },
--                     taint = { key = "...", value = "...", effect = "NoSchedule" },
--                     gpu_lost = 1, efa_lost = 1 } }            -- allocatable below capacity
--     (the health-monitoring agent's verdict on a node: the label and the
--     condition as it sets them, a Warning Event on the Node for each label
--     it changes; the HyperPod side is untouched: the node stays Running)
--   lifecycle_failure = { { cluster = "hp1", instance_group = "workers", message = "...", count = 1 } }
--     (the group's OnCreate script fails on count new nodes, 1 unless
--     given: its error lines go to the node's LifecycleConfig/<group>/<id>
--     stream, the node fails; a cluster being created fails with
--     HyperPod's FailureMessage unless NodeProvisioningMode is Continuous)
--   addon_unhealthy = { { cluster = "eks1", addon = "vpc-cni", code = "InsufficientNumberOfReplicas",
--                         message = "..." } }
--     (DescribeAddon shows the add-on DEGRADED with that health issue)
--   eks_failure = { { cluster = "eks1", code = "Ec2SubnetNotFound", message = "..." } }
--     (the EKS cluster's creation ends FAILED with that health issue)
local errors = require "hypd.errors"

local M = {}

local function fail(kind, i, what)
  return errors.fail("VALIDATION", string.format("faults.%s[%d]: %s", kind, i, what), { field = "faults" })
end

local function str(v) return v == nil or type(v) == "string" end

-- check(spec) -> true | nil, err: the kinds above are well formed
function M.check(s)
  for i, f in ipairs(s.node_health or {}) do
    if type(f.cluster) ~= "string" then return fail("node_health", i, "cluster (the HyperPod cluster) is required") end
    if not str(f.node) or not str(f.instance_group) or not str(f.label) or not str(f.deep_health) then
      return fail("node_health", i, "node, instance_group, label and deep_health are strings")
    end
    local c = f.condition
    if c ~= nil and (type(c) ~= "table" or type(c.type) ~= "string" or
        (c.status ~= "True" and c.status ~= "False" and c.status ~= "Unknown")) then
      return fail("node_health", i, "condition needs type and status True, False or Unknown")
    end
    local t = f.taint
    if t ~= nil and (type(t) ~= "table" or type(t.key) ~= "string" or
        (t.effect ~= "NoSchedule" and t.effect ~= "PreferNoSchedule" and t.effect ~= "NoExecute")) then
      return fail("node_health", i, "taint needs key and effect NoSchedule, PreferNoSchedule or NoExecute")
    end
    for _, k in ipairs { "gpu_lost", "efa_lost" } do
      if f[k] ~= nil and not (math.tointeger(f[k]) and f[k] > 0) then
        return fail("node_health", i, k .. " is a positive integer")
      end
    end
  end
  for i, f in ipairs(s.lifecycle_failure or {}) do
    if type(f.cluster) ~= "string" or not str(f.instance_group) or not str(f.message) then
      return fail("lifecycle_failure", i, "cluster is required; instance_group and message are strings")
    end
  end
  for i, f in ipairs(s.addon_unhealthy or {}) do
    if type(f.cluster) ~= "string" or type(f.addon) ~= "string" or not str(f.code) or not str(f.message) then
      return fail("addon_unhealthy", i, "cluster and addon are required; code and message are strings")
    end
  end
  for i, f in ipairs(s.eks_failure or {}) do
    if type(f.cluster) ~= "string" or not str(f.code) or not str(f.message) then
      return fail("eks_failure", i, "cluster is required; code and message are strings")
    end
  end
  M.spec = s
  -- the Nodes follow at once, in every region's controllers
  local ok, ctl_ = pcall(require, "sandbox.k8s.controllers._ctl")
  if ok then
    for _, ctl in ipairs(ctl_.all and ctl_.all() or {}) do ctl:enqueue("nodes") end
  end
  return true
end
M.spec = {}

-- node(cluster, group, name) -> the node_health rules that apply to a Node
function M.node(cluster, group, name)
  local out = {}
  for _, f in ipairs(M.spec.node_health or {}) do
    if f.cluster == cluster and (f.node == nil or f.node == name) and
        (f.instance_group == nil or f.instance_group == group) then out[#out + 1] = f end
  end
  return out
end

local used = setmetatable({}, { __mode = "k" })

-- lifecycle(cluster, group) -> the failure message when the group's
-- lifecycle script fails on the next new node (uses one of the rule's count)
function M.lifecycle(cluster, group)
  for _, f in ipairs(M.spec.lifecycle_failure or {}) do
    if f.cluster == cluster and (f.instance_group == nil or f.instance_group == group) and
        (used[f] or 0) < (math.tointeger(f.count) or 1) then
      used[f] = (used[f] or 0) + 1
      return f.message or "mount: /fsx: mount(2) system call failed: No route to host."
    end
  end
end

-- addon(cluster, addon) -> the injected health issue of an EKS add-on, or nil
function M.addon(cluster, addon)
  for _, f in ipairs(M.spec.addon_unhealthy or {}) do
    if f.cluster == cluster and f.addon == addon then
      return { code = f.code or "InsufficientNumberOfReplicas",
        message = f.message or "The add-on is unhealthy because it doesn't have the desired number of replicas." }
    end
  end
end

-- eks(cluster) -> the health issue an EKS cluster's creation fails with, or nil
function M.eks(cluster)
  for _, f in ipairs(M.spec.eks_failure or {}) do
    if f.cluster == cluster then
      return { code = f.code or "Ec2SubnetNotFound",
        message = f.message or "One or more of the subnets of the cluster's VPC configuration do not exist." }
    end
  end
end

return M
