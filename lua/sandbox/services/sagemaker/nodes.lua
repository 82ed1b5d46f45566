-- SageMaker HyperPod nodes: ListClusterNodes, DescribeClusterNode,
-- BatchDeleteClusterNodes (failures carry `Code`), BatchRebootClusterNodes
-- and BatchReplaceClusterNodes (failures carry `ErrorCode`),
-- UpdateClusterSoftware.
local C = require "sandbox.services.sagemaker.common"
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

local function summary(n)
  return { InstanceGroupName = n.group, InstanceId = n.InstanceId, NodeLogicalId = n.NodeLogicalId,
    InstanceType = n.InstanceType, LaunchTime = n.LaunchTime, LastSoftwareUpdateTime = n.LastSoftwareUpdateTime,
    InstanceStatus = { Status = n.Status, Message = n.Message ~= "" and n.Message or nil },
    PrivateDnsHostname = n.dns, ImageVersionStatus = "UpToDate" }
end

function ops.ListClusterNodes(ctx, input)
  local c = C.get(ctx, input.ClusterName)
  local all = {}
  for _, n in ipairs(C.nodes(ctx, c.ClusterName)) do
    if (not input.InstanceGroupNameContains or n.group:find(input.InstanceGroupNameContains, 1, true))
      and (not input.CreationTimeAfter or n.LaunchTime > input.CreationTimeAfter)
      and (not input.CreationTimeBefore or n.LaunchTime < input.CreationTimeBefore) then
      local s = summary(n)
      if not input.IncludeNodeLogicalIds then s.NodeLogicalId = nil end
      all[#all + 1] = s
    end
  end
  local by = input.SortBy or "CREATION_TIME"
  local desc = input.SortOrder == "Descending" -- Ascending by default
  table.sort(all, function(a, b)
    local x, y = a.LaunchTime, b.LaunchTime
    if by == "NAME" or x == y then x, y = a.InstanceGroupName .. a.InstanceId, b.InstanceGroupName .. b.InstanceId end
    if desc then return x > y end
    return x < y
  end)
  local page, nxt = D.page(ctx, all, input.MaxResults, input.NextToken, 100, "ValidationException")
  return { ClusterNodeSummaries = page, NextToken = nxt }
end

local function find_node(ctx, c, id, logical)
  for _, n in ipairs(C.nodes(ctx, c.ClusterName)) do
    if (id and n.InstanceId == id) or (logical and n.NodeLogicalId == logical) then return n end
  end
end

function ops.DescribeClusterNode(ctx, input)
  local c = C.get(ctx, input.ClusterName)
  local n = find_node(ctx, c, input.NodeId, input.NodeLogicalId)
  if not n then
    ctx.error("ResourceNotFound", "Node " .. tostring(input.NodeId or input.NodeLogicalId) .. " not found in cluster " ..
      c.ClusterName .. ".")
  end
  local g = C.group(c, n.group) or {}
  return { NodeDetails = {
    InstanceGroupName = n.group, InstanceId = n.InstanceId, NodeLogicalId = n.NodeLogicalId,
    InstanceStatus = { Status = n.Status, Message = n.Message ~= "" and n.Message or nil },
    InstanceType = n.InstanceType, LaunchTime = n.LaunchTime, LastSoftwareUpdateTime = n.LastSoftwareUpdateTime,
    LifeCycleConfig = g.LifeCycleConfig, OverrideVpcConfig = g.OverrideVpcConfig, ThreadsPerCore = g.ThreadsPerCore,
    InstanceStorageConfigs = g.InstanceStorageConfigs, PrivatePrimaryIp = n.ip, PrivateDnsHostname = n.dns,
    Placement = { AvailabilityZone = n.az, AvailabilityZoneId = n.az_id },
    CurrentImageId = g.CurrentImageId, DesiredImageId = g.DesiredImageId, ImageVersionStatus = "UpToDate",
    KubernetesConfig = { CurrentLabels = g.labels, DesiredLabels = g.labels, CurrentTaints = g.taints,
      DesiredTaints = g.taints },
    CapacityType = n.capacity,
    NetworkInterface = g.NetworkInterface and { InterfaceType = g.NetworkInterface.InterfaceType } or nil,
  } }
end

-- batch(ctx, input, codes, field, act) -> the Batch*ClusterNodes answer;
-- act(c, n) returns nil (done) or the key of a failure in `codes`
-- max: how many NodeIds one request may name (the API model: 25 for reboot
-- and replace; delete's model says 3000, its documentation 99)
local function batch(ctx, input, codes, field, act, max)
  local c = C.get(ctx, input.ClusterName)
  ctx.target = c.ClusterName
  local ids, logical = input.NodeIds or {}, input.NodeLogicalIds or {}
  if #ids + #logical == 0 then C.invalid(ctx, "Specify NodeIds or NodeLogicalIds.") end
  if #ids > max then
    C.invalid(ctx, "1 validation error detected: Value at 'nodeIds' failed to satisfy constraint: Member must " ..
      "have length less than or equal to " .. max)
  end
  if #logical > 99 then C.invalid(ctx, "At most 99 NodeLogicalIds can be named in one request.") end
  for i, id in ipairs(ids) do
    -- ClusterNodeId's pattern: an EC2 instance ID, never a Kubernetes node name
    if type(id) ~= "string" or not (id:match("^i%-%x%x%x%x%x%x%x%x$") or id:match("^i%-" .. ("%x"):rep(17) .. "$"))
      or id:find("%u") then
      C.invalid(ctx, "1 validation error detected: Value '" .. tostring(id) .. "' at 'nodeIds." .. i .. ".member' " ..
        "failed to satisfy constraint: Member must satisfy regular expression pattern: i-[a-f0-9]{8}(?:[a-f0-9]{9})?")
    end
  end
  if c.ClusterStatus ~= "InService" and c.ClusterStatus ~= "Updating" then
    C.invalid(ctx, "Cluster " .. c.ClusterName .. " is in " .. c.ClusterStatus .. " status.")
  end
  local out = { Successful = json.array(), Failed = json.array(), SuccessfulNodeLogicalIds = json.array(),
    FailedNodeLogicalIds = json.array() }
  local function one(id, is_logical)
    local n = find_node(ctx, c, not is_logical and id, is_logical and id)
    local why = not n and "missing" or act(c, n)
    if not why then
      if is_logical then out.SuccessfulNodeLogicalIds[#out.SuccessfulNodeLogicalIds + 1] = id
      else out.Successful[#out.Successful + 1] = id end
      return
    end
    local code, msg = codes[why][1], string.format(codes[why][2], id)
    local e = { Message = msg, [field] = code }
    if is_logical then
      e.NodeLogicalId = id
      out.FailedNodeLogicalIds[#out.FailedNodeLogicalIds + 1] = e
    else
      e.NodeId = id
      out.Failed[#out.Failed + 1] = e
    end
  end
  for _, id in ipairs(ids) do one(id, false) end
  for _, id in ipairs(logical) do one(id, true) end
  ctx.state:put("cluster", c.ClusterName, c)
  C.k8s(ctx)
  return out
end

local DELETE_CODES = {
  missing = { "NodeIdNotFound", "Node %s was not found in the cluster." },
  status = { "InvalidNodeStatus", "Node %s is not in a status that allows deletion." },
}
local NODE_CODES = {
  missing = { "InstanceIdNotFound", "Instance %s was not found in the cluster." },
  status = { "InvalidInstanceStatus", "Instance %s is not in a status that allows this operation." },
  busy = { "InstanceIdInUse", "Instance %s already has an operation in progress." },
}

function ops.BatchDeleteClusterNodes(ctx, input)
  return batch(ctx, input, DELETE_CODES, "Code", function(c, n)
    if n.Status == "ShuttingDown" then return "status" end
    local g = C.group(c, n.group)
    if g and g.TargetCount > 0 then g.TargetCount = g.TargetCount - 1 end
    n.Status, n.Message = "ShuttingDown", ""
    ctx.state:put("node", n.InstanceId, n)
    ctx:later(D.between(60, 240), "node_gone", { id = n.InstanceId })
  end, 99)
end

function tr.node_gone(ctx, args)
  ctx.state:delete("node", args.id)
  C.k8s(ctx)
end

function ops.BatchRebootClusterNodes(ctx, input)
  return batch(ctx, input, NODE_CODES, "ErrorCode", function(_, n)
    if n.busy then return "busy" end
    if n.Status ~= "Running" and n.Status ~= "Failure" then return "status" end
    n.Status, n.Message, n.busy = "Pending", "Rebooting", true
    ctx.state:put("node", n.InstanceId, n)
    ctx:later(D.between(180, 360), "node_rebooted", { id = n.InstanceId })
  end, 25)
end

function tr.node_rebooted(ctx, args)
  local n = ctx.state:get("node", args.id)
  if not n then return end
  n.Status, n.Message, n.busy = "Running", "", nil
  ctx.state:put("node", n.InstanceId, n)
  C.k8s(ctx)
end

function ops.BatchReplaceClusterNodes(ctx, input)
  return batch(ctx, input, NODE_CODES, "ErrorCode", function(c, n)
    if n.busy then return "busy" end
    if n.Status ~= "Running" and n.Status ~= "Failure" then return "status" end
    local g = C.group(c, n.group)
    n.Status, n.Message, n.busy = "ShuttingDown", "Replacing", true
    ctx.state:put("node", n.InstanceId, n)
    local fresh = C.launch(ctx, c, g, 1)[1]
    fresh.busy = true
    ctx.state:put("node", fresh.InstanceId, fresh)
    ctx:later(D.between(480, 900), "node_replaced", { old = n.InstanceId, new = fresh.InstanceId })
  end, 25)
end

function tr.node_replaced(ctx, args)
  ctx.state:delete("node", args.old)
  C.k8s(ctx)
  local n = ctx.state:get("node", args.new)
  if not n then return end
  n.Status, n.Message, n.busy = "Running", "", nil
  ctx.state:put("node", n.InstanceId, n)
end

function ops.UpdateClusterSoftware(ctx, input)
  local c = C.get(ctx, input.ClusterName)
  ctx.target = c.ClusterName
  if c.ClusterStatus ~= "InService" then
    C.invalid(ctx, "Cluster " .. c.ClusterName .. " is in " .. c.ClusterStatus .. " status; software can be " ..
      "updated only when InService.")
  end
  if input.InstanceGroups ~= nil and #input.InstanceGroups == 0 then
    C.invalid(ctx, "1 validation error detected: Value '[]' at 'instanceGroups' failed to satisfy constraint: " ..
      "Member must have length greater than or equal to 1")
  end
  local image = input.ImageId
  if image ~= nil and not (image == "default" or tostring(image):match("^ami%-%x+$")) then
    C.invalid(ctx, "1 validation error detected: Value '" .. tostring(image) .. "' at 'imageId' failed to satisfy " ..
      "constraint: Member must satisfy regular expression pattern: ami-[0-9a-fA-F]{8,17}|default")
  end
  local names = {}
  for _, g in ipairs(input.InstanceGroups or {}) do
    if not C.group(c, g.InstanceGroupName) then
      C.invalid(ctx, "Instance group " .. tostring(g.InstanceGroupName) .. " does not exist in cluster " ..
        c.ClusterName .. ".")
    end
    names[g.InstanceGroupName] = true
  end
  local all = next(names) == nil
  for _, g in ipairs(c.groups) do
    if all or names[g.InstanceGroupName] then
      g.SoftwareUpdateStatus, g.Status = "InProgress", "SystemUpdating"
      g.ActiveSoftwareUpdateConfig = input.DeploymentConfig
      -- without ImageId the group takes the latest release of the image it names ("default" stays "default")
      if image then g.DesiredImageId = image end
      for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
        if n.Status == "Running" then
          n.Status = "SystemUpdating"
          ctx.state:put("node", n.InstanceId, n)
        end
      end
    end
  end
  c.ClusterStatus = "SystemUpdating"
  ctx.state:put("cluster", c.ClusterName, c)
  ctx:later(D.between(600, 1200), "software_updated", { name = c.ClusterName })
  C.k8s(ctx)
  return { ClusterArn = c.ClusterArn }
end

function tr.software_updated(ctx, args)
  local c = ctx.state:get("cluster", args.name)
  if not c then return end
  for _, g in ipairs(c.groups) do
    if g.SoftwareUpdateStatus == "InProgress" then
      g.SoftwareUpdateStatus, g.Status, g.CurrentImageId = "Succeeded", "InService", g.DesiredImageId
      g.ActiveSoftwareUpdateConfig = nil
      for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
        if n.Status == "SystemUpdating" then
          n.Status, n.LastSoftwareUpdateTime = "Running", ctx.now()
          ctx.state:put("node", n.InstanceId, n)
        end
      end
    end
  end
  if c.ClusterStatus == "SystemUpdating" then c.ClusterStatus = "InService" end
  ctx.state:put("cluster", c.ClusterName, c)
  C.k8s(ctx)
end

return M
