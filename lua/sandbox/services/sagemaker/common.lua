-- SageMaker HyperPod helpers shared by clusters.lua and nodes.lua: finding
-- clusters, validating instance groups, placing and launching nodes.
-- Records: "cluster" (id ClusterName, instance groups inside as `groups`),
-- "node" (id InstanceId).
local D = require "sandbox.services.eks.deps"
local json = require "hypd.json"
local log = require "hypd.log"
local types = require "sandbox.data.instance_types"

local M = {}

-- efa-only interfaces need EFA support and more than one EFA interface
M.EFA_ONLY = {}
for name, t in pairs(types) do
  if t.efa_supported and (t.max_efa_interfaces or 0) > 1 then M.EFA_ONLY[name] = true end
end

function M.invalid(ctx, msg) ctx.error("ValidationException", msg) end

-- find(ctx, name_or_arn) -> the cluster record or nil
function M.find(ctx, id)
  if type(id) ~= "string" then return nil end
  if id:sub(1, 4) ~= "arn:" then return ctx.state:get("cluster", id) end
  for _, c in ipairs(ctx.state:list("cluster")) do
    if c.ClusterArn == id then return c end
  end
end

function M.get(ctx, id)
  local c = M.find(ctx, id)
  if not c then ctx.error("ResourceNotFound", "Cluster with name or ARN '" .. tostring(id) .. "' not found.") end
  return c
end

function M.group(c, name)
  for i, g in ipairs(c.groups) do
    if g.InstanceGroupName == name then return g, i end
  end
end

function M.nodes(ctx, cluster, group)
  return D.launched(ctx, "node", { cluster = cluster, group = group })
end

-- k8s(ctx): after node records change, the Node objects of the EKS
-- clusters follow (sandbox.k8s.controllers.nodes); never fails the AWS side
function M.k8s(ctx)
  local ok, err = pcall(function()
    require("sandbox.k8s.controllers.nodes").sync(ctx.region)
    require("sandbox.k8s.controllers.karpenter").sync(ctx.region)
  end)
  if not ok then log.warn("sandbox", "HyperPod nodes: Kubernetes sync failed: %s", tostring(err)) end
end

-- plan(ctx, arn) -> the training plan record (seeding the catalogue first)
function M.plan(ctx, arn)
  require("sandbox.services.sagemaker.plans").seed(ctx)
  for _, p in ipairs(ctx.state:list("training_plan")) do
    if p.TrainingPlanArn == arn then return p end
  end
end

local function check_vpc(ctx, vpc, where)
  if type(vpc) ~= "table" or type(vpc.Subnets) ~= "table" or #vpc.Subnets == 0 then
    M.invalid(ctx, where .. ".Subnets must name at least one subnet.")
  end
  for _, id in ipairs(vpc.Subnets) do
    if not D.subnet(ctx, id) then M.invalid(ctx, "Subnet " .. tostring(id) .. " in " .. where .. " does not exist.") end
  end
  for _, id in ipairs(vpc.SecurityGroupIds or {}) do
    if not D.security_group(ctx, id) then
      M.invalid(ctx, "Security group " .. tostring(id) .. " in " .. where .. " does not exist.")
    end
  end
end
M.check_vpc = check_vpc

-- lustre(ctx, dns, mount) -> true when an AVAILABLE FSx for Lustre file system matches
function M.lustre(ctx, dns, mount)
  for _, fs in ipairs(ctx:view("fsx"):list("filesystem")) do
    if fs.DNSName == dns and fs.LustreConfiguration.MountName == mount and fs.Lifecycle == "AVAILABLE" then
      return true
    end
  end
  return false
end

-- assumable(ctx, role, service) -> true when the role's trust policy lets
-- the service principal call sts:AssumeRole (SageMaker assumes the execution
-- role), with aws:SourceAccount and aws:SourceArn the cluster's
-- (ctx.source_arn: the cluster the request creates or updates)
function M.assumable(ctx, role, service)
  return require("sandbox.policy_trust").service(ctx, role, service, ctx.source_arn)
end

-- check_group(ctx, spec, cluster_vpc, where): one ClusterInstanceGroupSpecification
function M.check_group(ctx, g, cluster_vpc, where)
  local name = g.InstanceGroupName
  if type(name) ~= "string" or not name:match("^[%w]") or name:find("[^%w%-]") or #name > 63 then
    M.invalid(ctx, "1 validation error detected: Value '" .. tostring(name) .. "' at '" .. where ..
      ".instanceGroupName' failed to satisfy constraint: Member must satisfy regular expression pattern: " ..
      "^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")
  end
  if not types[g.InstanceType or ""] then
    M.invalid(ctx, "1 validation error detected: Value '" .. tostring(g.InstanceType) .. "' at '" .. where ..
      ".instanceType' failed to satisfy constraint: Member must satisfy enum value set")
  end
  local count = math.tointeger(g.InstanceCount)
  if not count or count < 0 or count > 6758 then
    M.invalid(ctx, "InstanceCount for instance group " .. name .. " must be between 0 and 6758.")
  end
  if g.MinInstanceCount and g.MinInstanceCount > count then
    M.invalid(ctx, "MinInstanceCount for instance group " .. name .. " cannot be greater than InstanceCount.")
  end
  if g.ThreadsPerCore and g.ThreadsPerCore ~= 1 and g.ThreadsPerCore ~= 2 then
    M.invalid(ctx, "ThreadsPerCore for instance group " .. name .. " must be 1 or 2.")
  end
  local role = D.role(ctx, g.ExecutionRole)
  if not role or not M.assumable(ctx, role, "sagemaker.amazonaws.com") then
    M.invalid(ctx, "The execution role " .. tostring(g.ExecutionRole) .. " for instance group " .. name ..
      " does not exist or cannot be assumed by SageMaker.")
  end
  local lcc = g.LifeCycleConfig
  if lcc then
    if not D.s3_uri(lcc.SourceS3Uri) then
      M.invalid(ctx, "LifeCycleConfig.SourceS3Uri for instance group " .. name .. " must be an s3:// URI.")
    end
    if not D.s3_prefix(ctx, lcc.SourceS3Uri) then
      M.invalid(ctx, "No objects found at LifeCycleConfig.SourceS3Uri " .. lcc.SourceS3Uri .. " for instance group " ..
        name .. ". Upload the lifecycle scripts first.")
    end
    -- the OnCreate script must be one of them (HyperPod runs it on every new node)
    local script = type(lcc.OnCreate) == "string" and lcc.OnCreate ~= "" and
      (lcc.SourceS3Uri:gsub("/*$", "") .. "/" .. lcc.OnCreate:gsub("^/+", ""))
    if not script or not D.s3_object(ctx, script) then
      M.invalid(ctx, "The lifecycle script " .. tostring(lcc.OnCreate) .. " for instance group " .. name ..
        " was not found under LifeCycleConfig.SourceS3Uri " .. lcc.SourceS3Uri .. ".")
    end
  end
  local iface = g.NetworkInterface and g.NetworkInterface.InterfaceType
  if iface == "efa-only" and not M.EFA_ONLY[g.InstanceType] then
    M.invalid(ctx, "NetworkInterface InterfaceType efa-only is not supported for instance type " .. g.InstanceType .. ".")
  end
  if iface and iface ~= "efa" and iface ~= "efa-only" then
    M.invalid(ctx, "NetworkInterface InterfaceType must be efa or efa-only.")
  end
  if g.CapacityRequirements and g.CapacityRequirements.Spot and g.CapacityRequirements.OnDemand then
    M.invalid(ctx, "CapacityRequirements can specify either Spot or OnDemand, not both.")
  end
  if g.TrainingPlanArn and g.CapacityRequirements and g.CapacityRequirements.Spot then
    M.invalid(ctx, "Instance group " .. name .. " uses a training plan; its capacity is reserved, so " ..
      "CapacityRequirements cannot be Spot.")
  end
  for _, sc in ipairs(g.InstanceStorageConfigs or {}) do
    local fsx = sc.FsxLustreConfig
    if fsx and not M.lustre(ctx, fsx.DnsName, fsx.MountName) then
      M.invalid(ctx, "FsxLustreConfig for instance group " .. name .. " names no AVAILABLE FSx for Lustre file " ..
        "system with DNS name " .. tostring(fsx.DnsName) .. " and mount name " .. tostring(fsx.MountName) .. ".")
    end
  end
  if g.OverrideVpcConfig then
    check_vpc(ctx, g.OverrideVpcConfig, where .. ".OverrideVpcConfig")
    -- an override places nodes in other subnets of the cluster's VPC, never in another VPC
    local home = cluster_vpc and cluster_vpc.Subnets and D.subnet(ctx, cluster_vpc.Subnets[1])
    for _, id in ipairs(home and g.OverrideVpcConfig.Subnets or {}) do
      if D.subnet(ctx, id).vpc ~= home.vpc then
        M.invalid(ctx, "Subnet " .. id .. " in OverrideVpcConfig of instance group " .. name .. " is not in " ..
          home.vpc .. ", the VPC of the cluster's VpcConfig.")
      end
    end
  end
  if not g.OverrideVpcConfig and not cluster_vpc then
    M.invalid(ctx, "VpcConfig is required for instance group " .. name .. ".")
  end
  if g.TrainingPlanArn then
    local p = M.plan(ctx, g.TrainingPlanArn)
    if not p then M.invalid(ctx, "Training plan " .. g.TrainingPlanArn .. " does not exist.") end
    -- a Scheduled plan's capacity is usable already: its nodes come when it starts
    if p.Status ~= "Active" and p.Status ~= "Scheduled" then
      M.invalid(ctx, "Training plan " .. p.TrainingPlanName .. " is " .. p.Status .. "; it must be Active or " ..
        "Scheduled.")
    end
    local rc = p.ReservedCapacitySummaries[1]
    if rc.InstanceType ~= g.InstanceType then
      M.invalid(ctx, "Instance type " .. g.InstanceType .. " does not match the training plan's " .. rc.InstanceType .. ".")
    end
    if count > rc.TotalInstanceCount then
      M.invalid(ctx, "InstanceCount " .. count .. " exceeds the " .. rc.TotalInstanceCount ..
        " instances reserved by training plan " .. p.TrainingPlanName .. ".")
    end
    local ok = false
    for _, id in ipairs((g.OverrideVpcConfig or cluster_vpc).Subnets) do
      local s = D.subnet(ctx, id)
      ok = ok or (s and s.az == rc.AvailabilityZone)
    end
    if not ok then
      M.invalid(ctx, "Instance group " .. name .. " uses training plan " .. p.TrainingPlanName .. " reserved in " ..
        rc.AvailabilityZone .. ", but none of its subnets is in that Availability Zone.")
    end
  end
end

-- new_group(spec) -> the stored group record
local SPEC_FIELDS = { "InstanceGroupName", "InstanceType", "LifeCycleConfig", "ExecutionRole", "ThreadsPerCore",
  "InstanceStorageConfigs", "OnStartDeepHealthChecks", "TrainingPlanArn", "OverrideVpcConfig",
  "ScheduledUpdateConfig", "CapacityRequirements", "NetworkInterface" }
function M.new_group(g)
  local out = { TargetCount = g.InstanceCount, MinCount = g.MinInstanceCount, Status = "Creating",
    CurrentImageId = g.ImageId or "default", DesiredImageId = g.ImageId or "default",
    labels = g.KubernetesConfig and g.KubernetesConfig.Labels or json.object(),
    taints = g.KubernetesConfig and g.KubernetesConfig.Taints or json.array() }
  for _, f in ipairs(SPEC_FIELDS) do out[f] = D.copy(g[f]) end
  out.ThreadsPerCore = out.ThreadsPerCore or 1
  return out
end

-- group_view(ctx, c, g) -> ClusterInstanceGroupDetails
function M.group_view(ctx, c, g)
  local running = 0
  for _, n in ipairs(M.nodes(ctx, c.ClusterName, g.InstanceGroupName)) do
    if n.Status == "Running" then running = running + 1 end
  end
  local out = { CurrentCount = running, TargetCount = g.TargetCount, MinCount = g.MinCount, Status = g.Status,
    ImageVersionStatus = "UpToDate", SoftwareUpdateStatus = g.SoftwareUpdateStatus,
    ActiveSoftwareUpdateConfig = g.ActiveSoftwareUpdateConfig,
    CurrentImageId = g.CurrentImageId, DesiredImageId = g.DesiredImageId,
    InstanceTypeDetails = { { InstanceType = g.InstanceType, CurrentCount = running, ThreadsPerCore = g.ThreadsPerCore } },
    KubernetesConfig = { CurrentLabels = g.labels, DesiredLabels = g.labels, CurrentTaints = g.taints,
      DesiredTaints = g.taints } }
  for _, f in ipairs(SPEC_FIELDS) do out[f] = g[f] end
  if g.TrainingPlanArn then out.TrainingPlanStatus = "Active" end
  return out
end

-- subnets(ctx, c, g) -> the subnet records nodes of g are placed in
function M.subnets(ctx, c, g)
  local ids = (g.OverrideVpcConfig or c.VpcConfig or {}).Subnets or {}
  local out = {}
  local plan = g.TrainingPlanArn and M.plan(ctx, g.TrainingPlanArn)
  local az = plan and plan.ReservedCapacitySummaries[1].AvailabilityZone
  for _, id in ipairs(ids) do
    local s = D.subnet(ctx, id)
    if s and (not az or s.az == az) then out[#out + 1] = s end
  end
  if #out == 0 then out[1] = { id = ids[1], az = ctx.region .. "a", az_id = D.az_id(ctx.region, ctx.region .. "a") } end
  return out
end

-- launch(ctx, c, g, n) -> n new Pending node records of group g
function M.launch(ctx, c, g, count)
  local subnets = M.subnets(ctx, c, g)
  local existing = #M.nodes(ctx, c.ClusterName, g.InstanceGroupName)
  local out = {}
  for i = 1, count do
    local s = subnets[((existing + i - 1) % #subnets) + 1]
    local ip, dns = D.address(ctx, s.cidr)
    local n = {
      cluster = c.ClusterName, group = g.InstanceGroupName, InstanceId = "i-" .. ctx.hex(17),
      InstanceType = g.InstanceType, LaunchTime = ctx.now(), Status = "Pending", Message = "",
      ip = ip, dns = dns,
      subnet = s.id, az = s.az, az_id = s.az_id, NodeLogicalId = g.InstanceGroupName .. "-" .. ctx.hex(8),
      capacity = g.CapacityRequirements and g.CapacityRequirements.Spot and "Spot" or "OnDemand",
    }
    -- a Scheduled training plan's instances come when the plan starts
    local plan = g.TrainingPlanArn and M.plan(ctx, g.TrainingPlanArn)
    if plan and plan.Status == "Scheduled" then
      n.Message = "Waiting for training plan " .. plan.TrainingPlanName .. " to become Active."
    end
    ctx.state:put("node", n.InstanceId, n)
    out[#out + 1] = n
  end
  return out
end

-- capacity_fault(ctx, g, nodes) -> a failure message when an injected
-- insufficient_capacity fault matches the group's type and a node's zone
function M.capacity_fault(ctx, g, nodes)
  for _, n in ipairs(nodes) do
    for _, zone in ipairs { n.az_id, n.az } do
      if zone and ctx:fault("insufficient_capacity", { instance_type = g.InstanceType, zone = zone }) then
        return string.format("InsufficientCapacity: We currently do not have sufficient capacity to launch new %s " ..
          "instances in %s (%s) for instance group %s. Please try again later or use a different Availability Zone.",
          g.InstanceType, n.az or "?", n.az_id or "?", g.InstanceGroupName)
      end
    end
  end
end

-- bring_up(ctx, c, g, nodes) -> ok, lifecycle_failed: Pending nodes run
-- their lifecycle script (sagemaker/lifecycle) and become Running, except
-- where a failing_nodes fault applies or the script fails (lifecycle_failed:
-- the instance ids it failed on)
function M.bring_up(ctx, c, g, nodes)
  local _, f = ctx:fault("failing_nodes", { cluster = c.ClusterName, instance_group = g.InstanceGroupName })
  local failing = f and (f.count or 1) or 0
  local lifecycle, failed = require "sandbox.services.sagemaker.lifecycle", {}
  for _, n in ipairs(nodes) do
    local script_error = lifecycle.run(ctx, c, g, n)
    if script_error then
      failed[#failed + 1] = n.InstanceId
      n.Status, n.Message = "Failure", script_error
    elseif failing > 0 then
      failing = failing - 1
      n.Status = "Failure"
      n.Message = "Node failed health checks after launch: the instance did not pass the lifecycle and " ..
        "health-monitoring checks (injected failing_nodes fault)."
    else
      n.Status, n.Message = "Running", ""
    end
    ctx.state:put("node", n.InstanceId, n)
  end
  return failing == 0, failed
end

return M
