-- SageMaker HyperPod autoscaling: what managed Karpenter needs of the
-- service. BatchAddClusterNodes (the target count of a group rises, new
-- nodes launch and join), the cluster role's checks (it must exist and
-- trust hyperpod.sagemaker.amazonaws.com when autoscaling turns on; it
-- cannot change while autoscaling is on) and AutoScaling.Status (Creating while an update
-- turns it on, Deleting while one turns it off, InService after).
-- clusters.lua calls check_role, check_trust, status and settle; the Karpenter side is
-- sandbox/k8s/controllers/karpenter.lua.
local C = require "sandbox.services.sagemaker.common"
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

M.SERVICE = "hyperpod.sagemaker.amazonaws.com"
M.MAX_ADD = 50                -- nodes one BatchAddClusterNodes may add
M.JOIN = { 240, 480 }         -- seconds a new node takes to come up

-- trusts(ctx, role, service) -> true when the role's trust policy lets
-- service assume it for the cluster (ctx.source_arn), conditions included
function M.trusts(ctx, role, service)
  return require("sandbox.policy_trust").service(ctx, role, service, ctx.source_arn)
end

-- check_role(ctx, input, c): the ClusterRole of a CreateCluster or UpdateCluster
function M.check_role(ctx, input, c)
  local arn = input.ClusterRole
  if not arn then return end
  local role = D.role(ctx, arn)
  if not role then C.invalid(ctx, "ClusterRole " .. arn .. " does not exist.") end
  local on = c and c.AutoScaling and c.AutoScaling.Mode == "Enable"
  local turning_off = input.AutoScaling and input.AutoScaling.Mode == "Disable"
  if on and not turning_off and c.ClusterRole and c.ClusterRole ~= arn then
    C.invalid(ctx, "ClusterRole cannot be updated while autoscaling is enabled.")
  end
end

-- check_trust(ctx, arn): autoscaling turns on with this role: HyperPod must
-- be able to assume it
function M.check_trust(ctx, arn)
  local role = D.role(ctx, arn)
  if not role then C.invalid(ctx, "ClusterRole " .. tostring(arn) .. " does not exist.") end
  if not M.trusts(ctx, role, M.SERVICE) then
    C.invalid(ctx, "ClusterRole " .. arn .. " cannot be assumed by " .. M.SERVICE .. ": its trust policy must " ..
      "allow " .. M.SERVICE .. " to call sts:AssumeRole.")
  end
end

-- status(c, new) -> the AutoScaling the cluster shows while the update
-- that sets `new` ({Mode, AutoScalerType}) runs
function M.status(c, new)
  local old = c and c.AutoScaling
  local changing = ((old and old.Mode) or "Disable") ~= new.Mode
  local status = (old and old.Status) or "InService"
  if changing then status = new.Mode == "Enable" and "Creating" or "Deleting" end
  return { Mode = new.Mode, AutoScalerType = new.AutoScalerType, Status = status }
end

-- settle(c): the update is done: autoscaling is in service (on or off)
function M.settle(c)
  if c.AutoScaling and (c.AutoScaling.Status == "Creating" or c.AutoScaling.Status == "Deleting") then
    c.AutoScaling.Status = "InService"
  end
end

function ops.BatchAddClusterNodes(ctx, input)
  local c = C.get(ctx, input.ClusterName)
  ctx.target = c.ClusterName
  if c.NodeProvisioningMode ~= "Continuous" then
    C.invalid(ctx, "BatchAddClusterNodes is only supported for clusters using Continuous as the " ..
      "NodeProvisioningMode.")
  end
  if c.ClusterStatus ~= "InService" and c.ClusterStatus ~= "Updating" then
    C.invalid(ctx, "Cluster " .. c.ClusterName .. " is in " .. c.ClusterStatus .. " status.")
  end
  local specs = input.NodesToAdd or {}
  if #specs == 0 then C.invalid(ctx, "NodesToAdd must name at least one instance group.") end
  local total = 0
  for _, s in ipairs(specs) do
    local n = math.tointeger(s.IncrementTargetCountBy)
    if not n or n < 1 or n > M.MAX_ADD then
      C.invalid(ctx, "IncrementTargetCountBy must be between 1 and " .. M.MAX_ADD .. ".")
    end
    total = total + n
  end
  if total > M.MAX_ADD then
    C.invalid(ctx, "The total number of nodes across all instance groups in a single request cannot exceed " ..
      M.MAX_ADD .. ".")
  end
  local key = input.ClientToken and (c.ClusterName .. "/" .. input.ClientToken)
  local again = key and ctx.state:get("batch_add", key)
  if again then return again.answer end -- a retry of the same request
  local out = { Successful = json.array(), Failed = json.array() }
  local launched = json.array()
  for _, s in ipairs(specs) do
    local g = C.group(c, s.InstanceGroupName)
    local n = math.tointeger(s.IncrementTargetCountBy)
    local code, msg
    if not g then
      code, msg = "InstanceGroupNotFound", "Instance group " .. tostring(s.InstanceGroupName) .. " does not exist."
    elseif g.Status ~= "InService" and g.Status ~= "Updating" and g.Status ~= "Degraded" then
      code, msg = "InvalidInstanceGroupStatus", "Instance group " .. g.InstanceGroupName .. " is " .. g.Status .. "."
    elseif s.InstanceTypes and #s.InstanceTypes > 0 and s.InstanceTypes[1] ~= g.InstanceType then
      code, msg = "IncompatibleInstanceTypes", "Instance group " .. g.InstanceGroupName .. " runs " .. g.InstanceType .. "."
    end
    if code then
      out.Failed[#out.Failed + 1] = { InstanceGroupName = s.InstanceGroupName, ErrorCode = code, FailedCount = n,
        Message = msg }
    else
      g.TargetCount = (g.TargetCount or 0) + n
      for _, node in ipairs(C.launch(ctx, c, g, n)) do
        launched[#launched + 1] = node.InstanceId
        out.Successful[#out.Successful + 1] = { NodeLogicalId = node.NodeLogicalId, InstanceGroupName = g.InstanceGroupName,
          Status = "Pending", AvailabilityZones = { node.az }, InstanceTypes = { g.InstanceType } }
      end
    end
  end
  ctx.state:put("cluster", c.ClusterName, c)
  if key then ctx.state:put("batch_add", key, { key = key, answer = out }) end
  if #launched > 0 then ctx:later(D.between(M.JOIN[1], M.JOIN[2]), "nodes_added", { cluster = c.ClusterName, ids = launched }) end
  return out
end

function tr.nodes_added(ctx, args)
  local c = ctx.state:get("cluster", args.cluster)
  if not c then return end
  for _, id in ipairs(args.ids or {}) do
    local n = ctx.state:get("node", id)
    local g = n and C.group(c, n.group)
    if n and g and n.Status == "Pending" then
      local msg = C.capacity_fault(ctx, g, { n })
      if msg then
        n.Message = "Waiting for capacity: " .. msg
        ctx.state:put("node", id, n)
      else
        C.bring_up(ctx, c, g, { n })
      end
    end
  end
  C.k8s(ctx)
end

return M
