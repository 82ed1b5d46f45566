-- EC2 StopInstances and StartInstances for the instances the sandbox
-- launches (EKS managed node groups' instances, ec2/instances). What a
-- request changes is kept on EKS's "ng_instance" record as
--   power = { name = "stopping" | "pending", at = when it was asked,
--             stopped = when the last stop was asked, reason = StateTransitionReason }
-- and read on the simulated clock: an instance is stopping for M.STOPPING
-- seconds, then stopped; pending for M.PENDING seconds after a start, then
-- running again. No record means running since launch.
--
-- The node's kubelet posts only while its instance runs (kubelet_down,
-- read by k8s/controllers/nodegroups); the EKS Auto Scaling group does not
-- replace a stopped instance here (AWS's ASG health check would, minutes
-- later).
local M = { operations = {} }
local ops = M.operations

M.STOPPING, M.PENDING = 20, 15 -- simulated seconds
M.CODES = { pending = 0, running = 16, ["shutting-down"] = 32, terminated = 48, stopping = 64, stopped = 80 }

local function speed() return require("sandbox").speed or 1 end

-- name(i, now) -> the instance's state name
function M.name(i, now)
  local p = i.power
  if not p then return "running" end
  if p.name == "stopping" then return now - p.at >= M.STOPPING / speed() and "stopped" or "stopping" end
  if p.name == "pending" then return now - p.at >= M.PENDING / speed() and "running" or "pending" end
  return p.name
end

-- running_at(i) -> when a started instance runs again (nil when it was never stopped)
function M.running_at(i)
  local p = i.power
  return p and p.name == "pending" and p.at + M.PENDING / speed() or nil
end

-- describe(i, now) -> State, StateReason, StateTransitionReason as
-- DescribeInstances shows them
function M.describe(i, now)
  local name = M.name(i, now)
  local state = { Code = M.CODES[name], Name = name }
  local p = i.power
  if name == "stopping" or name == "stopped" then
    return state, { Code = "Client.UserInitiatedShutdown", Message = "Client.UserInitiatedShutdown: User initiated " ..
      "shutdown" }, p.reason
  end
  return state, nil, p and p.reason or ""
end

-- kubelet_down(i, now) -> when the instance's kubelet stopped posting (the
-- stop request), or nil while the instance runs
function M.kubelet_down(i, now)
  if M.name(i, now) == "running" then return nil end
  return i.power.stopped
end

-- "User initiated (2026-01-01 10:00:00 GMT)", AWS's StateTransitionReason
local function user_initiated(t)
  return os.date("!User initiated (%Y-%m-%d %H:%M:%S GMT)", math.floor(t))
end

local function change(i, current, previous)
  return { InstanceId = i.InstanceId, CurrentState = { Code = M.CODES[current], Name = current },
    PreviousState = { Code = M.CODES[previous], Name = previous } }
end

-- each(ctx, input, check, apply) -> the InstanceStateChangeList: every
-- instance checked before any changes (one refused id fails the call)
local function each(ctx, input, check, apply)
  if #(input.InstanceIds or {}) == 0 then
    ctx.error("MissingParameter", "The request must contain the parameter InstanceId")
  end
  local list = require("sandbox.services.ec2.instances").records(ctx, input.InstanceIds)
  local now = ctx.now()
  for _, i in ipairs(list) do check(i, M.name(i, now)) end
  local out, eks, clusters = {}, ctx:view("eks"), {}
  for _, i in ipairs(list) do
    local before = M.name(i, now)
    local after = apply(i, before, now)
    if after ~= before then eks:put("ng_instance", i.InstanceId, i) end
    clusters[i.cluster] = true
    out[#out + 1] = change(i, after, before)
  end
  for name in pairs(clusters) do
    -- the cluster's Nodes follow (the kubelet stops or comes back); never fails the EC2 side
    local ok, err = pcall(function() require("sandbox.k8s.controllers.nodegroups").sync(ctx.region, name) end)
    if not ok then require("hypd.log").warn("sandbox", "EC2 power: Kubernetes sync failed: %s", tostring(err)) end
  end
  return out
end

function ops.StopInstances(ctx, input)
  local out = each(ctx, input, function(i, name)
    if i.capacity == "SPOT" then
      ctx.error("UnsupportedOperation", string.format("You can't stop the Spot Instance '%s' because it is " ..
        "associated with a one-time Spot Instance request. You can only stop Spot Instances associated with " ..
        "persistent Spot Instance requests.", i.InstanceId))
    end
    if input.Hibernate then
      ctx.error("UnsupportedHibernationConfiguration", "The instance can't be hibernated because it was not " ..
        "configured at launch for hibernation: " .. i.InstanceId)
    end
    if name == "pending" then
      ctx.error("IncorrectInstanceState", string.format("The instance '%s' is not in a state from which it can " ..
        "be stopped.", i.InstanceId))
    end
  end, function(i, name, now)
    if name ~= "running" then return name end -- stopping or stopped already: unchanged
    i.power = { name = "stopping", at = now, stopped = now, reason = user_initiated(now) }
    return "stopping"
  end)
  return { StoppingInstances = out }
end

function ops.StartInstances(ctx, input)
  local out = each(ctx, input, function(i, name)
    if name == "stopping" then
      ctx.error("IncorrectInstanceState", string.format("The instance '%s' is not in a state from which it can " ..
        "be started.", i.InstanceId))
    end
  end, function(i, name, now)
    if name ~= "stopped" then return name end -- running or pending already: unchanged
    i.power = { name = "pending", at = now, stopped = i.power.stopped, reason = "" }
    return "pending"
  end)
  return { StartingInstances = out }
end

return M
