-- SageMaker HyperPod clusters: CreateCluster, DescribeCluster, ListClusters,
-- DeleteCluster, UpdateCluster (instance-group upsert and delete, node
-- recovery, tiered storage, autoscaling).
local AS = require "sandbox.services.sagemaker.autoscaling"
local C = require "sandbox.services.sagemaker.common"
local D = require "sandbox.services.eks.deps"
local U = require "sandbox.services.sagemaker.upsert"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

-- CreateCluster to InService: about 15 minutes, as AWS takes for an EKS-orchestrated cluster
M.CREATE_SECONDS = { 780, 1020 }

local function view(ctx, c)
  local groups = json.array()
  for _, g in ipairs(c.groups) do groups[#groups + 1] = C.group_view(ctx, c, g) end
  return {
    ClusterArn = c.ClusterArn, ClusterName = c.ClusterName, ClusterStatus = c.ClusterStatus,
    CreationTime = c.CreationTime, FailureMessage = c.FailureMessage, InstanceGroups = groups,
    VpcConfig = c.VpcConfig, Orchestrator = c.Orchestrator,
    TieredStorageConfig = c.TieredStorageConfig, NodeRecovery = c.NodeRecovery,
    NodeProvisioningMode = c.NodeProvisioningMode, ClusterRole = c.ClusterRole, AutoScaling = c.AutoScaling,
  }
end

-- the EKS cluster an Orchestrator.Eks.ClusterArn names (must be usable)
local function check_eks(ctx, orch)
  local arn = orch.Eks and orch.Eks.ClusterArn
  local region, name = tostring(arn):match("^arn:aws:eks:([%w-]+):%d+:cluster/(.+)$")
  if not name then C.invalid(ctx, "Orchestrator.Eks.ClusterArn '" .. tostring(arn) .. "' is not a valid EKS cluster ARN.") end
  local eks = region == ctx.region and ctx:view("eks"):get("cluster", name)
  if not eks then C.invalid(ctx, "EKS cluster " .. arn .. " does not exist.") end
  if eks.status ~= "ACTIVE" then
    C.invalid(ctx, "EKS cluster " .. name .. " is in " .. eks.status .. " state; it must be ACTIVE.")
  end
  local mode = eks.accessConfig and eks.accessConfig.authenticationMode
  if mode ~= "API" and mode ~= "API_AND_CONFIG_MAP" then
    C.invalid(ctx, "The authentication mode of EKS cluster " .. name .. " is " .. tostring(mode) ..
      "; HyperPod requires API or API_AND_CONFIG_MAP.")
  end
  for _, c in ipairs(ctx.state:list("cluster")) do
    if c.Orchestrator and c.Orchestrator.Eks and c.Orchestrator.Eks.ClusterArn == arn then
      C.invalid(ctx, "EKS cluster " .. name .. " is already associated with HyperPod cluster " .. c.ClusterName .. ".")
    end
  end
  return eks
end

local function check_settings(ctx, input, c)
  if input.NodeRecovery and input.NodeRecovery ~= "Automatic" and input.NodeRecovery ~= "None" then
    C.invalid(ctx, "NodeRecovery must be Automatic or None.")
  end
  local ts = input.TieredStorageConfig
  if ts then
    if ts.Mode ~= "Enable" and ts.Mode ~= "Disable" then C.invalid(ctx, "TieredStorageConfig.Mode must be Enable or Disable.") end
    local p = ts.InstanceMemoryAllocationPercentage
    if p and (p < 20 or p > 100) then
      C.invalid(ctx, "TieredStorageConfig.InstanceMemoryAllocationPercentage must be between 20 and 100.")
    end
  end
  AS.check_role(ctx, input, c)
end

local function autoscaling(ctx, input, c)
  local a = input.AutoScaling
  if not a then return end
  if a.Mode ~= "Enable" and a.Mode ~= "Disable" then C.invalid(ctx, "AutoScaling.Mode must be Enable or Disable.") end
  if a.Mode == "Enable" then
    if not (input.ClusterRole or c.ClusterRole) then
      C.invalid(ctx, "ClusterRole is required when AutoScaling is enabled.")
    end
    if (input.NodeProvisioningMode or c.NodeProvisioningMode) ~= "Continuous" then
      C.invalid(ctx, "AutoScaling requires NodeProvisioningMode Continuous.")
    end
    AS.check_trust(ctx, input.ClusterRole or c.ClusterRole)
  end
  return AS.status(c, { Mode = a.Mode, AutoScalerType = a.AutoScalerType or (a.Mode == "Enable" and "Karpenter" or nil) })
end

function ops.CreateCluster(ctx, input)
  local name = input.ClusterName
  if type(name) ~= "string" or not name:match("^[%w][%w%-]*$") or name:find("%-$") or #name > 63 then
    C.invalid(ctx, "1 validation error detected: Value '" .. tostring(name) .. "' at 'clusterName' failed to " ..
      "satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
  end
  if ctx.state:get("cluster", name) then
    ctx.error("ResourceInUse", "Cluster " .. name .. " already exists.")
  end
  local groups = input.InstanceGroups or {}
  if #groups == 0 then C.invalid(ctx, "At least one instance group is required.") end
  local orch = input.Orchestrator
  local eks
  if orch and orch.Eks then
    eks = check_eks(ctx, orch)
    if not input.VpcConfig then C.invalid(ctx, "VpcConfig is required for clusters orchestrated by Amazon EKS.") end
  end
  if input.VpcConfig then
    C.check_vpc(ctx, input.VpcConfig, "VpcConfig")
    for _, id in ipairs(input.VpcConfig.Subnets) do
      local s = D.subnet(ctx, id)
      if eks and eks.resourcesVpcConfig.vpcId and s.vpc and s.vpc ~= eks.resourcesVpcConfig.vpcId then
        C.invalid(ctx, "Subnet " .. id .. " is not in the VPC of EKS cluster " .. eks.name .. ".")
      end
    end
  end
  local seen = {}
  ctx.source_arn = ctx:arn("cluster/" .. ctx.hex(12)) -- the roles are checked for the cluster being made
  for i, g in ipairs(groups) do
    C.check_group(ctx, g, input.VpcConfig, "instanceGroups." .. i .. ".member")
    if not orch or not orch.Eks then
      if not g.LifeCycleConfig then C.invalid(ctx, "LifeCycleConfig is required for instance group " .. g.InstanceGroupName) end
    end
    if seen[g.InstanceGroupName] then C.invalid(ctx, "Duplicate InstanceGroupName " .. g.InstanceGroupName .. ".") end
    seen[g.InstanceGroupName] = true
  end
  check_settings(ctx, input)
  require("sandbox.services.sagemaker.quotas").check(ctx, name, groups)
  local c = {
    ClusterName = name, ClusterArn = ctx.source_arn, ClusterStatus = "Creating",
    CreationTime = ctx.now(), VpcConfig = input.VpcConfig, Orchestrator = input.Orchestrator,
    NodeRecovery = input.NodeRecovery or "Automatic", TieredStorageConfig = input.TieredStorageConfig,
    NodeProvisioningMode = input.NodeProvisioningMode, ClusterRole = input.ClusterRole,
    Tags = input.Tags or json.array(), groups = json.array(),
  }
  c.AutoScaling = autoscaling(ctx, input, c)
  for _, g in ipairs(groups) do c.groups[#c.groups + 1] = C.new_group(g) end
  ctx.state:put("cluster", name, c)
  for i, g in ipairs(c.groups) do C.launch(ctx, c, g, groups[i].InstanceCount) end
  ctx:later(D.between(M.CREATE_SECONDS[1], M.CREATE_SECONDS[2]), "cluster_created", { name = name })
  return { ClusterArn = c.ClusterArn }
end

-- settle(ctx, c, g, nodes, creating) -> failure message or nil: the Pending
-- nodes of g come up, unless capacity is short
local function settle(ctx, c, g, nodes)
  local msg = C.capacity_fault(ctx, g, nodes)
  if msg then
    if c.NodeProvisioningMode == "Continuous" then
      for _, n in ipairs(nodes) do
        n.Message = "Waiting for capacity: " .. msg
        ctx.state:put("node", n.InstanceId, n)
      end
      g.Status = "Degraded"
      -- continuous provisioning keeps trying, as HyperPod does
      ctx:later(M.CAPACITY_RETRY, "capacity_retry", { name = c.ClusterName, group = g.InstanceGroupName })
      return nil
    end
    for _, n in ipairs(nodes) do ctx.state:delete("node", n.InstanceId) end
    g.Status = "Failed"
    return msg
  end
  local _, script_failed = C.bring_up(ctx, c, g, nodes)
  -- a failed lifecycle script fails a cluster being created (continuous
  -- provisioning keeps the cluster and the failed nodes instead)
  if #script_failed > 0 and c.ClusterStatus == "Creating" and c.NodeProvisioningMode ~= "Continuous" then
    g.Status = "Failed"
    return require("sandbox.services.sagemaker.lifecycle").failure(c, g, script_failed)
  end
  g.Status = "InService"
  for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
    if n.Status == "Failure" then
      g.Status = "Degraded"
      -- automatic node recovery replaces a failed node after a while
      if c.NodeRecovery == "Automatic" and not n.recovering then
        n.recovering = true
        ctx.state:put("node", n.InstanceId, n)
        ctx:later(D.between(600, 900), "node_recovered", { id = n.InstanceId })
      end
    end
  end
end

function tr.node_recovered(ctx, args)
  local old = ctx.state:get("node", args.id)
  local c = old and ctx.state:get("cluster", old.cluster)
  local g = c and C.group(c, old.group)
  if not g or old.Status ~= "Failure" then return end
  ctx.state:delete("node", old.InstanceId)
  local fresh = C.launch(ctx, c, g, 1)[1]
  fresh.Status = "Running"
  ctx.state:put("node", fresh.InstanceId, fresh)
  local degraded = false
  for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do degraded = degraded or n.Status == "Failure" end
  if g.Status == "Degraded" and not degraded then g.Status = "InService" end
  ctx.state:put("cluster", c.ClusterName, c)
  C.k8s(ctx)
end

local function pending(ctx, c, g)
  local out = {}
  for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
    if n.Status == "Pending" and n.Message == "" then out[#out + 1] = n end
  end
  return out
end

function tr.cluster_created(ctx, args)
  local c = ctx.state:get("cluster", args.name)
  if not c or c.ClusterStatus ~= "Creating" then return end
  local failure
  for _, g in ipairs(c.groups) do
    failure = settle(ctx, c, g, pending(ctx, c, g)) or failure
  end
  if failure then
    c.ClusterStatus, c.FailureMessage = "Failed", failure
    for _, n in ipairs(C.nodes(ctx, c.ClusterName)) do ctx.state:delete("node", n.InstanceId) end
  else
    c.ClusterStatus = "InService"
    AS.settle(c)
  end
  ctx.state:put("cluster", c.ClusterName, c)
  C.k8s(ctx)
end

-- capacity_retry: a group waiting for capacity (continuous provisioning)
-- tries again; its nodes come up once the capacity fault is gone
M.CAPACITY_RETRY = 300
function tr.capacity_retry(ctx, args)
  local c = ctx.state:get("cluster", args.name)
  if not c then return end
  for _, g in ipairs(c.groups) do
    if g.InstanceGroupName == args.group and g.Status == "Degraded" then
      local waiting = {}
      for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
        if n.Status == "Pending" and tostring(n.Message):find("^Waiting for capacity") then
          waiting[#waiting + 1] = n
        end
      end
      if #waiting > 0 then
        settle(ctx, c, g, waiting)
        ctx.state:put("cluster", c.ClusterName, c)
        C.k8s(ctx)
      end
    end
  end
end

function ops.DescribeCluster(ctx, input)
  return view(ctx, C.get(ctx, input.ClusterName))
end

function ops.ListClusters(ctx, input)
  local all = {}
  for _, c in ipairs(ctx.state:list("cluster")) do
    local plans = json.array()
    for _, g in ipairs(c.groups) do
      if g.TrainingPlanArn then plans[#plans + 1] = g.TrainingPlanArn end
    end
    local keep = (not input.NameContains or c.ClusterName:find(input.NameContains, 1, true))
      and (not input.CreationTimeAfter or c.CreationTime > input.CreationTimeAfter)
      and (not input.CreationTimeBefore or c.CreationTime < input.CreationTimeBefore)
    if keep and input.TrainingPlanArn then
      keep = false
      for _, p in ipairs(plans) do keep = keep or p == input.TrainingPlanArn end
    end
    if keep then
      all[#all + 1] = { ClusterArn = c.ClusterArn, ClusterName = c.ClusterName, CreationTime = c.CreationTime,
        ClusterStatus = c.ClusterStatus, TrainingPlanArns = plans }
    end
  end
  local by = input.SortBy or "CREATION_TIME"
  local desc = input.SortOrder == "Descending" -- Ascending by default
  table.sort(all, function(a, b)
    local x, y = a.CreationTime, b.CreationTime
    if by == "NAME" or x == y then x, y = a.ClusterName, b.ClusterName end
    if desc then return x > y end
    return x < y
  end)
  local page, nxt = D.page(ctx, all, input.MaxResults, input.NextToken, 100, "ValidationException")
  return { ClusterSummaries = page, NextToken = nxt }
end

function ops.DeleteCluster(ctx, input)
  local c = C.get(ctx, input.ClusterName)
  ctx.target = c.ClusterName
  if c.ClusterStatus ~= "Deleting" then
    c.ClusterStatus = "Deleting"
    for _, g in ipairs(c.groups) do g.Status = "Deleting" end
    ctx.state:put("cluster", c.ClusterName, c)
    for _, n in ipairs(C.nodes(ctx, c.ClusterName)) do
      n.Status = "ShuttingDown"
      ctx.state:put("node", n.InstanceId, n)
    end
    ctx:later(D.between(240, 480), "cluster_deleted", { name = c.ClusterName })
    C.k8s(ctx)
  end
  return { ClusterArn = c.ClusterArn }
end

function tr.cluster_deleted(ctx, args)
  for _, n in ipairs(C.nodes(ctx, args.name)) do ctx.state:delete("node", n.InstanceId) end
  ctx.state:delete("cluster", args.name)
  C.k8s(ctx)
end

function ops.UpdateCluster(ctx, input)
  local c = C.get(ctx, input.ClusterName)
  ctx.source_arn = c.ClusterArn -- the roles it passes are checked for this cluster
  ctx.target = c.ClusterName
  if c.ClusterStatus ~= "InService" then
    C.invalid(ctx, "Cluster " .. c.ClusterName .. " is in " .. c.ClusterStatus .. " status; it can be updated only " ..
      "when InService.")
  end
  local deleting = {}
  for _, name in ipairs(input.InstanceGroupsToDelete or {}) do
    if not C.group(c, name) then
      C.invalid(ctx, "Instance group " .. name .. " does not exist in cluster " .. c.ClusterName .. ".")
    end
    deleting[name] = true
  end
  local changes = {}
  for i, spec in ipairs(input.InstanceGroups or {}) do
    local where = "instanceGroups." .. i .. ".member"
    if deleting[spec.InstanceGroupName] then
      C.invalid(ctx, "Instance group " .. tostring(spec.InstanceGroupName) .. " cannot be both updated and deleted.")
    end
    local g = C.group(c, spec.InstanceGroupName)
    if g then U.check(ctx, g, spec) end -- what a sent group may change (sagemaker/upsert)
    C.check_group(ctx, spec, c.VpcConfig, where)
    changes[#changes + 1] = { spec = spec, group = g }
  end
  local adding = 0
  for _, ch in ipairs(changes) do if not ch.group then adding = adding + 1 end end
  U.deletable(ctx, c, deleting, adding)
  check_settings(ctx, input, c)
  require("sandbox.services.sagemaker.quotas").check(ctx, c.ClusterName, input.InstanceGroups)
  local scaling = autoscaling(ctx, input, c)
  if #changes == 0 and not next(deleting) and not input.NodeRecovery and not input.TieredStorageConfig
    and not scaling and not input.ClusterRole and not input.NodeProvisioningMode then
    C.invalid(ctx, "The update request does not change the cluster.")
  end
  local prev = {}
  for _, ch in ipairs(changes) do
    local g, spec = ch.group, ch.spec
    if not g then
      g = C.new_group(spec)
      c.groups[#c.groups + 1] = g
      prev[g.InstanceGroupName] = 0
    else
      prev[g.InstanceGroupName] = g.TargetCount
      U.apply(g, spec)
      g.Status = "Updating"
    end
    local live = 0
    for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
      if n.Status ~= "ShuttingDown" then live = live + 1 end
    end
    if g.TargetCount > live then
      C.launch(ctx, c, g, g.TargetCount - live)
    elseif g.TargetCount < live then
      local nodes = C.nodes(ctx, c.ClusterName, g.InstanceGroupName)
      for i = #nodes, 1, -1 do
        if live <= g.TargetCount then break end
        if nodes[i].Status ~= "ShuttingDown" then
          nodes[i].Status = "ShuttingDown"
          ctx.state:put("node", nodes[i].InstanceId, nodes[i])
          live = live - 1
        end
      end
    end
  end
  for _, g in ipairs(c.groups) do
    if deleting[g.InstanceGroupName] then
      g.Status = "Deleting"
      for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
        n.Status = "ShuttingDown"
        ctx.state:put("node", n.InstanceId, n)
      end
    end
  end
  if input.NodeRecovery then c.NodeRecovery = input.NodeRecovery end
  if input.TieredStorageConfig then c.TieredStorageConfig = input.TieredStorageConfig end
  if input.ClusterRole then c.ClusterRole = input.ClusterRole end
  if input.NodeProvisioningMode then c.NodeProvisioningMode = input.NodeProvisioningMode end
  if scaling then c.AutoScaling = scaling end
  c.ClusterStatus, c.FailureMessage = "Updating", nil
  ctx.state:put("cluster", c.ClusterName, c)
  ctx:later(D.between(300, 600), "cluster_updated", { name = c.ClusterName, prev = prev })
  C.k8s(ctx)
  return { ClusterArn = c.ClusterArn }
end

function tr.cluster_updated(ctx, args)
  local c = ctx.state:get("cluster", args.name)
  if not c or c.ClusterStatus ~= "Updating" then return end
  local kept = json.array()
  for _, g in ipairs(c.groups) do
    for _, n in ipairs(C.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
      if n.Status == "ShuttingDown" then ctx.state:delete("node", n.InstanceId) end
    end
    if g.Status ~= "Deleting" then
      local msg = settle(ctx, c, g, pending(ctx, c, g))
      if msg then
        -- the update rolls back for this group: its target returns to what it was
        c.FailureMessage = msg
        g.TargetCount = (args.prev or {})[g.InstanceGroupName] or g.TargetCount
        g.Status = #C.nodes(ctx, c.ClusterName, g.InstanceGroupName) > 0 and "InService" or "Failed"
      end
      if g.Status ~= "Failed" or g.TargetCount > 0 then kept[#kept + 1] = g end
    end
  end
  c.groups = kept
  c.ClusterStatus = "InService"
  AS.settle(c)
  ctx.state:put("cluster", c.ClusterName, c)
  C.k8s(ctx)
end

return M
