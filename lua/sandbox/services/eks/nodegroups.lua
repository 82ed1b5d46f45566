-- EKS managed node groups: CreateNodegroup, DescribeNodegroup,
-- ListNodegroups, UpdateNodegroupConfig (scaling, labels, taints),
-- DeleteNodegroup. Records: "nodegroup" (id "<cluster>/<nodegroup>") and
-- "ng_instance" (id the EC2 instance id: the group's Auto Scaling group's
-- instances, which join the cluster's Kubernetes API as Nodes through
-- sandbox.k8s.controllers.nodegroups).
--
-- Simulated time: CREATING -> ACTIVE in 2.5 to 5 minutes (the instances
-- join at the end); UpdateNodegroupConfig shows its new configuration at
-- once, the group UPDATING for 1 to 2.5 minutes while instances launch or
-- terminate; DELETING for 3 to 7 minutes (the Nodes are cordoned at once,
-- gone at the end). An insufficient_capacity fault for an instance type
-- and zone makes a creation CREATE_FAILED and a scale-up DEGRADED, with
-- the AsgInstanceLaunchFailures health issue EKS reports; an instance type
-- EC2 does not have fails the creation with Ec2InstanceTypeDoesNotExist.
local C = require "sandbox.services.eks.clusters"
local D = require "sandbox.services.eks.deps"
local amis = require "sandbox.services.eks.amis"
local json = require "hypd.json"
local log = require "hypd.log"
local types = require "sandbox.data.instance_types"

local M = { operations = {}, transitions = {} }
local ops, tr = M.operations, M.transitions

M.CAPACITY_TYPES = { ON_DEMAND = true, SPOT = true, CAPACITY_BLOCK = true }
M.EFFECTS = { NO_SCHEDULE = true, NO_EXECUTE = true, PREFER_NO_SCHEDULE = true }
M.DEFAULT_SCALING = { minSize = 1, maxSize = 2, desiredSize = 2 }
M.DEFAULT_TYPE = "t3.medium"
local KUBELET = amis.KUBELET

local function key(cluster, name) return cluster .. "/" .. name end

local function bad(ctx, msg) ctx.error("InvalidParameterException", msg) end

-- ec2_type(name) -> the instance type data for an EC2 type name ("g5.xlarge"), or nil
function M.ec2_type(name)
  if type(name) ~= "string" or name:sub(1, 3) == "ml." then return nil end
  return types["ml." .. name]
end

local function kind_of(t)
  for _, a in ipairs(t and t.accelerators or {}) do
    if a.kind == "gpu" or a.kind == "neuron" then return a.kind end
  end
end

-- ami_type(version, types) -> the AMI type EKS picks when none is given
local function ami_type(version, itypes)
  local accel = kind_of(M.ec2_type(itypes[1]))
  local modern = tonumber(version:match("^1%.(%d+)$") or "0") >= 30
  if accel == "neuron" then return modern and "AL2023_x86_64_NEURON" or "AL2_x86_64_GPU" end
  if accel == "gpu" then return modern and "AL2023_x86_64_NVIDIA" or "AL2_x86_64_GPU" end
  return modern and "AL2023_x86_64_STANDARD" or "AL2_x86_64"
end

local view = D.public

-- get(ctx, cluster, name) -> the record, or ResourceNotFoundException
local function get(ctx, cluster, name)
  return D.child(ctx, "nodegroup", cluster, name, "No node group found for name: " .. tostring(name) .. ".")
end
M.get = get

-- instances(ctx, cluster [, nodegroup]) -> the group's (or cluster's) instance records, oldest first
function M.instances(ctx, cluster, nodegroup)
  return D.launched(ctx, "ng_instance", { cluster = cluster, nodegroup = nodegroup })
end

-- k8s(ctx, cluster): the Nodes follow the instances (never fails the AWS side)
local function k8s(ctx, cluster)
  local ok, err = pcall(function() require("sandbox.k8s.controllers.nodegroups").sync(ctx.region, cluster) end)
  if not ok then log.warn("sandbox", "EKS node groups: Kubernetes sync failed: %s", tostring(err)) end
end

-- scaling checks, in EKS's words
local function check_sizes(ctx, s, creating)
  for _, f in ipairs { "minSize", "maxSize", "desiredSize" } do
    if s[f] ~= nil and not math.tointeger(s[f]) then bad(ctx, f .. " must be a whole number") end
  end
  if s.minSize < 0 then bad(ctx, "minSize can't be less than 0") end
  if s.desiredSize < 0 then bad(ctx, "desiredSize can't be less than 0") end
  if s.maxSize < 1 then bad(ctx, "maxSize can't be less than 1") end
  if s.minSize > s.maxSize then
    bad(ctx, creating and "minSize can't be greater than maxSize" or string.format(
      "Minimum capacity %d can't be greater than maximum size %d", s.minSize, s.maxSize))
  end
  if s.minSize > s.desiredSize then
    bad(ctx, creating and "minSize can't be greater than desiredSize" or string.format(
      "Minimum capacity %d can't be greater than desired size %d", s.minSize, s.desiredSize))
  end
  if s.desiredSize > s.maxSize then bad(ctx, "desiredSize can't be greater than maxSize") end
end

local function check_taints(ctx, list)
  for _, t in ipairs(list or {}) do
    if type(t.key) ~= "string" or t.key == "" then bad(ctx, "Taint key is required") end
    if not M.EFFECTS[t.effect] then
      bad(ctx, "Taint effect " .. tostring(t.effect) .. " is invalid. Valid values: NO_SCHEDULE, NO_EXECUTE, " ..
        "PREFER_NO_SCHEDULE")
    end
  end
end

local function check_labels(ctx, labels)
  for k in pairs(labels or {}) do
    if type(k) ~= "string" or not k:match("^[%w][%w%-%._/]*$") or #k > 317 then
      bad(ctx, "Label key " .. tostring(k) .. " is invalid")
    end
    if k:match("^kubernetes%.io/") or k:match("^k8s%.io/") or k:match("^eks%.amazonaws%.com/") then
      bad(ctx, "Label key " .. k .. " uses a prefix reserved for Kubernetes and Amazon EKS")
    end
  end
end

function ops.CreateNodegroup(ctx, input)
  local c = C.get(ctx, input.clusterName)
  local name = input.nodegroupName
  ctx.target = c.name .. "/" .. tostring(name)
  if type(name) ~= "string" or not name:match("^[%w][%w_%-]*$") or #name > 63 then
    bad(ctx, "nodegroupName must start with a letter or digit, contain only letters, digits, hyphens and " ..
      "underscores, and be at most 63 characters.")
  end
  local existing = ctx.state:get("nodegroup", key(c.name, name))
  if existing and input.clientRequestToken and existing.token == input.clientRequestToken then
    return { nodegroup = view(existing) } -- a retry of the same request
  end
  if existing then
    ctx.error("ResourceInUseException", "NodeGroup already exists with name " .. name .. " and cluster name " ..
      c.name, 409)
  end
  if c.status ~= "ACTIVE" then
    ctx.error("InvalidRequestException", "Cluster '" .. c.name .. "' is not in ACTIVE status")
  end
  if not D.role(ctx, input.nodeRole) then
    bad(ctx, "The nodeRole " .. tostring(input.nodeRole) .. " does not exist or cannot be found.")
  end
  local subnets = input.subnets or {}
  if #subnets == 0 then bad(ctx, "Subnets are required") end
  for _, id in ipairs(subnets) do
    local s = D.subnet(ctx, id)
    if not s then bad(ctx, "The subnet ID '" .. tostring(id) .. "' does not exist") end
    if c.resourcesVpcConfig.vpcId and s.vpc and s.vpc ~= c.resourcesVpcConfig.vpcId then
      bad(ctx, "Subnet " .. id .. " is not in the VPC of cluster " .. c.name .. " (" .. c.resourcesVpcConfig.vpcId ..
        ").")
    end
  end
  local s = input.scalingConfig or {}
  local scaling = { minSize = s.minSize or M.DEFAULT_SCALING.minSize, maxSize = s.maxSize or M.DEFAULT_SCALING.maxSize,
    desiredSize = s.desiredSize }
  if scaling.desiredSize == nil then scaling.desiredSize = math.max(scaling.minSize, M.DEFAULT_SCALING.desiredSize) end
  check_sizes(ctx, scaling, true)
  local capacity = input.capacityType or "ON_DEMAND"
  if not M.CAPACITY_TYPES[capacity] then
    bad(ctx, "capacityType " .. tostring(capacity) .. " is invalid. Valid values: ON_DEMAND, SPOT, CAPACITY_BLOCK")
  end
  local itypes = D.list(input.instanceTypes or { M.DEFAULT_TYPE })
  if #itypes == 0 then itypes[1] = M.DEFAULT_TYPE end
  if capacity == "ON_DEMAND" and #itypes > 20 then bad(ctx, "At most 20 instance types can be given.") end
  check_labels(ctx, input.labels)
  check_taints(ctx, input.taints)
  local version = input.version or c.version
  if not KUBELET[version] or tonumber(version:match("%.(%d+)$")) > tonumber(c.version:match("%.(%d+)$")) then
    bad(ctx, "Requested Nodegroup version " .. tostring(version) .. " is invalid. The version can't be newer than " ..
      "the cluster's " .. c.version .. ".")
  end
  local id = D.uuid(ctx)
  local now = ctx.now()
  local ng = {
    key = key(c.name, name), nodegroupName = name, clusterName = c.name,
    nodegroupArn = ctx:arn(string.format("nodegroup/%s/%s/%s", c.name, name, id)),
    version = version, releaseVersion = input.releaseVersion or amis.release(version),
    createdAt = now, modifiedAt = now, status = "CREATING", capacityType = capacity, scalingConfig = scaling,
    instanceTypes = itypes, subnets = D.list(subnets), amiType = input.amiType or ami_type(version, itypes),
    nodeRole = input.nodeRole, labels = input.labels or json.object(), taints = D.list(input.taints),
    resources = { autoScalingGroups = { { name = "eks-" .. name .. "-" .. id } } },
    diskSize = input.launchTemplate == nil and (input.diskSize or 20) or nil,
    health = { issues = json.array() }, updateConfig = input.updateConfig or { maxUnavailable = 1 },
    launchTemplate = input.launchTemplate, remoteAccess = input.remoteAccess,
    tags = input.tags or json.object(), token = input.clientRequestToken,
  }
  ctx.state:put("nodegroup", ng.key, ng)
  ctx:later(D.between(150, 300), "nodegroup_active", { key = ng.key })
  return { nodegroup = view(ng) }
end

-- placement(ctx, ng) -> the subnet for the next instance: the zone with the
-- fewest of the group's instances first, as an Auto Scaling group balances
local function placement(ctx, ng, live)
  local per = {}
  for _, i in ipairs(live) do per[i.subnet] = (per[i.subnet] or 0) + 1 end
  local best
  for _, id in ipairs(ng.subnets) do
    local s = D.subnet(ctx, id)
    if s and (not best or (per[id] or 0) < (per[best.id] or 0)) then best = s end
  end
  return best or { id = ng.subnets[1], az = ctx.region .. "a", az_id = D.az_id(ctx.region, ctx.region .. "a") }
end

-- shortfall(ctx, ng, count) -> the health issue that stops launching count
-- instances now, or nil
local function shortfall(ctx, ng, live, count)
  local itype = ng.instanceTypes[1]
  if not M.ec2_type(itype) then
    return { code = "Ec2InstanceTypeDoesNotExist", message = "The following supplied instance types do not exist: [" ..
      table.concat(ng.instanceTypes, ", ") .. "]" }
  end
  if count <= 0 then return nil end
  local s = placement(ctx, ng, live)
  for _, zone in ipairs { s.az_id, s.az } do
    if zone and ctx:fault("insufficient_capacity", { instance_type = itype, zone = zone }) then
      local what = ng.capacityType == "SPOT" and "Spot" or "On-Demand"
      return { code = "AsgInstanceLaunchFailures", message = string.format("Could not launch %s Instances. " ..
        "InsufficientInstanceCapacity - We currently do not have sufficient %s capacity in the Availability Zone " ..
        "you requested (%s). Our system will be working on provisioning additional capacity. You can currently get " ..
        "%s capacity by not specifying an Availability Zone in your request or choosing a different Availability " ..
        "Zone. Launching EC2 instance failed.", what, itype, s.az, itype),
        resourceIds = { ng.resources.autoScalingGroups[1].name } }
    end
  end
end

-- resize(ctx, ng) -> the group's instances made desiredSize (launching into
-- the least used zone, terminating the newest first)
local function resize(ctx, ng)
  local live = M.instances(ctx, ng.clusterName, ng.nodegroupName)
  local want = ng.scalingConfig.desiredSize
  while #live < want do
    local s = placement(ctx, ng, live)
    local ip, dns = D.address(ctx, s.cidr)
    local i = { cluster = ng.clusterName, nodegroup = ng.nodegroupName, InstanceId = "i-0" .. ctx.hex(16),
      InstanceType = ng.instanceTypes[1], LaunchTime = ctx.now(), state = "running", ip = ip, dns = dns,
      subnet = s.id, az = s.az, az_id = s.az_id, capacity = ng.capacityType }
    ctx.state:put("ng_instance", i.InstanceId, i)
    live[#live + 1] = i
  end
  while #live > want do
    ctx.state:delete("ng_instance", live[#live].InstanceId)
    live[#live] = nil
  end
end

function tr.nodegroup_active(ctx, args)
  local ng = ctx.state:get("nodegroup", args.key)
  if not ng or ng.status ~= "CREATING" then return end
  local issue = shortfall(ctx, ng, {}, ng.scalingConfig.desiredSize)
  if issue then
    issue.resourceIds = D.list(issue.resourceIds)
    ng.status, ng.health = "CREATE_FAILED", { issues = { issue } }
  else
    resize(ctx, ng)
    ng.status = "ACTIVE"
  end
  ng.modifiedAt = ctx.now()
  ctx.state:put("nodegroup", ng.key, ng)
  k8s(ctx, ng.clusterName)
end

function ops.DescribeNodegroup(ctx, input)
  return { nodegroup = view(get(ctx, input.clusterName, input.nodegroupName)) }
end

function ops.ListNodegroups(ctx, input)
  local page, nxt = D.children(ctx, "nodegroup", input, "nodegroupName")
  return { nodegroups = page, nextToken = nxt }
end

-- retried(ctx, ng, token) -> the update an earlier request with this client token started
local function retried(ctx, ng, token)
  if not token then return nil end
  for _, u in ipairs(ctx.state:list("update")) do
    if u.clusterName == ng.clusterName and u.nodegroupName == ng.nodegroupName and u.token == token then return u end
  end
end

-- note(params, type, value): an update parameter (value as JSON) when value holds something
local function note(params, ptype, value)
  if type(value) == "table" and next(value) ~= nil then
    params[#params + 1] = { type = ptype, value = json.encode(value) }
  end
end

function ops.UpdateNodegroupConfig(ctx, input)
  local ng = get(ctx, input.clusterName, input.nodegroupName)
  ctx.target = ng.key
  local again = retried(ctx, ng, input.clientRequestToken)
  if again then return { update = C.update_view(again) } end
  if ng.status ~= "ACTIVE" then
    ctx.error("ResourceInUseException", "Nodegroup cannot be updated as it is currently not in Active State", 409)
  end
  local params, change = json.array(), {}
  local s = input.scalingConfig
  if s then
    local cur = ng.scalingConfig
    local new = { minSize = s.minSize or cur.minSize, maxSize = s.maxSize or cur.maxSize,
      desiredSize = s.desiredSize or cur.desiredSize }
    check_sizes(ctx, new, false)
    for _, f in ipairs { { "minSize", "MinSize" }, { "maxSize", "MaxSize" }, { "desiredSize", "DesiredSize" } } do
      if s[f[1]] ~= nil then params[#params + 1] = { type = f[2], value = tostring(s[f[1]]) } end
    end
    change.scaling = new
  end
  local l = input.labels
  if l then
    check_labels(ctx, l.addOrUpdateLabels)
    note(params, "LabelsToAdd", l.addOrUpdateLabels)
    note(params, "LabelsToRemove", l.removeLabels)
    change.labels = l
  end
  local t = input.taints
  if t then
    check_taints(ctx, t.addOrUpdateTaints)
    check_taints(ctx, t.removeTaints)
    note(params, "TaintsToAdd", t.addOrUpdateTaints)
    note(params, "TaintsToRemove", t.removeTaints)
    change.taints = t
  end
  if input.updateConfig then
    local u = input.updateConfig
    if u.maxUnavailable then params[#params + 1] = { type = "MaxUnavailable", value = tostring(u.maxUnavailable) } end
    if u.maxUnavailablePercentage then
      params[#params + 1] = { type = "MaxUnavailablePercentage", value = tostring(u.maxUnavailablePercentage) }
    end
    change.update_config = u
  end
  if #params == 0 then bad(ctx, "No changes needed") end
  local u = C.new_update(ctx, ng.clusterName, "ConfigUpdate", params, nil, input.clientRequestToken)
  u.nodegroupName = ng.nodegroupName
  ctx.state:put("update", u.key, u)
  -- the configuration reads back at once; the instances follow during UPDATING
  if change.scaling then ng.scalingConfig = change.scaling end
  if change.update_config then ng.updateConfig = change.update_config end
  ng.status, ng.modifiedAt = "UPDATING", ctx.now()
  ctx.state:put("nodegroup", ng.key, ng)
  ctx:later(D.between(60, 150), "nodegroup_updated", { key = ng.key, update = u.key, change = change })
  return { update = C.update_view(u) }
end

local function same_taint(a, b) return a.key == b.key and a.effect == b.effect end

function tr.nodegroup_updated(ctx, args)
  local ng = ctx.state:get("nodegroup", args.key)
  local u = ctx.state:get("update", args.update)
  if not ng or ng.status ~= "UPDATING" then return end
  local ch = args.change or {}
  if ch.labels then
    local labels = D.copy(ng.labels or {})
    for k, v in pairs(ch.labels.addOrUpdateLabels or {}) do labels[k] = v end
    for _, k in ipairs(ch.labels.removeLabels or {}) do labels[k] = nil end
    ng.labels = next(labels) and labels or json.object()
  end
  if ch.taints then
    local out = json.array()
    for _, old in ipairs(ng.taints or {}) do
      local drop = false
      for _, r in ipairs(ch.taints.removeTaints or {}) do drop = drop or same_taint(old, r) end
      for _, a in ipairs(ch.taints.addOrUpdateTaints or {}) do drop = drop or same_taint(old, a) end
      if not drop then out[#out + 1] = old end
    end
    for _, a in ipairs(ch.taints.addOrUpdateTaints or {}) do out[#out + 1] = a end
    ng.taints = out
  end
  local live = M.instances(ctx, ng.clusterName, ng.nodegroupName)
  local issue = shortfall(ctx, ng, live, ng.scalingConfig.desiredSize - #live)
  if issue then
    issue.resourceIds = D.list(issue.resourceIds)
    ng.status, ng.health = "DEGRADED", { issues = { issue } }
  else
    resize(ctx, ng)
    ng.status, ng.health = "ACTIVE", { issues = json.array() }
  end
  ng.modifiedAt = ctx.now()
  ctx.state:put("nodegroup", ng.key, ng)
  if u then
    u.status = issue and "Failed" or "Successful"
    if issue then
      u.errors = { { errorCode = issue.code, errorMessage = issue.message, resourceIds = D.list(issue.resourceIds) } }
    end
    ctx.state:put("update", u.key, u)
  end
  k8s(ctx, ng.clusterName)
end

function ops.DeleteNodegroup(ctx, input)
  local ng = get(ctx, input.clusterName, input.nodegroupName)
  ctx.target = ng.key
  if ng.status == "CREATING" or ng.status == "UPDATING" then
    ctx.error("ResourceInUseException", "Nodegroup " .. ng.nodegroupName .. " is currently " .. ng.status ..
      " and cannot be deleted.", 409)
  end
  if ng.status ~= "DELETING" then
    ng.status, ng.modifiedAt = "DELETING", ctx.now()
    ctx.state:put("nodegroup", ng.key, ng)
    -- its nodes are cordoned and drained first
    for _, i in ipairs(M.instances(ctx, ng.clusterName, ng.nodegroupName)) do
      i.state = "draining"
      ctx.state:put("ng_instance", i.InstanceId, i)
    end
    ctx:later(D.between(180, 420), "nodegroup_deleted", { key = ng.key })
    k8s(ctx, ng.clusterName)
  end
  return { nodegroup = view(ng) }
end

function tr.nodegroup_deleted(ctx, args)
  local ng = ctx.state:get("nodegroup", args.key)
  if not ng then return end
  for _, i in ipairs(M.instances(ctx, ng.clusterName, ng.nodegroupName)) do ctx.state:delete("ng_instance", i.InstanceId) end
  ctx.state:delete("nodegroup", ng.key)
  k8s(ctx, ng.clusterName)
end

-- of(ctx, cluster) -> the cluster's node group records
local function of(ctx, cluster)
  local out = {}
  for _, ng in ipairs(ctx.state:list("nodegroup")) do
    if ng.clusterName == cluster then out[#out + 1] = ng end
  end
  return out
end

-- forget(ctx, cluster): a deleted cluster's node groups and instances
function M.forget(ctx, cluster)
  for _, i in ipairs(M.instances(ctx, cluster)) do ctx.state:delete("ng_instance", i.InstanceId) end
  for _, ng in ipairs(of(ctx, cluster)) do ctx.state:delete("nodegroup", ng.key) end
end

-- any(ctx, cluster) -> true when the cluster has node groups
function M.any(ctx, cluster) return #of(ctx, cluster) > 0 end

return M
