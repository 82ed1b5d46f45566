-- EC2 instances launched with RunInstances (a CloudFormation stack's
-- management host, or a caller's own): one instance a call (MinCount and
-- MaxCount must allow 1), in a subnet, in security groups of its VPC, with
-- its instance profile, MetadataOptions and BlockDeviceMappings kept as
-- given, each EBS mapping an attached volume (DescribeVolumes shows its
-- Encrypted, size and type; a root volume the call does not map is 8 GiB,
-- unencrypted, as an AMI's default). The image is not looked up: any
-- well-formed ami- id launches. An instance is pending for its first 5
-- simulated seconds, then running; TerminateInstances makes it
-- shutting-down for 5 seconds, then terminated (still described, as AWS
-- describes a terminated instance for a while), and deletes the volumes
-- marked DeleteOnTermination. EKS node group instances (ec2/instances) are
-- not terminated here: their node group owns them; StopInstances and
-- StartInstances (ec2/power) are for those node group instances only.
-- Records: "instance"/<id> (Instance members plus _ fields), "volume"/<id>.
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"

local M = { operations = {} }
local ops = M.operations
local SETTLE = 5 -- simulated seconds of pending and shutting-down

local STATES = { pending = 0, running = 16, ["shutting-down"] = 32, terminated = 48 }

local function speed() return require("sandbox").speed or 1 end

-- state_of(i, now) -> the instance's state name at now
local function state_of(i, now)
  if i._terminated_at then
    return now - i._terminated_at < SETTLE / speed() and "shutting-down" or "terminated"
  end
  return now - i._launched_at < SETTLE / speed() and "pending" or "running"
end

local function state(name) return { Code = STATES[name], Name = name } end

-- describe(ctx, i) -> the Instance and its reservation id
function M.describe(ctx, i)
  local name = state_of(i, ctx.now())
  local x = {}
  for k, v in pairs(i) do
    if k:sub(1, 1) ~= "_" then x[k] = v end
  end
  x.State = state(name)
  if name == "terminated" or name == "shutting-down" then
    x.BlockDeviceMappings, x.PrivateIpAddress, x.PrivateDnsName = json.array(), nil, nil
    x.StateTransitionReason = "User initiated"
  end
  return x, i._reservation
end

-- lookup(ctx, ids) -> the launched records among ids (all when ids is
-- empty or nil), and the ids that are not launched instances
function M.lookup(ctx, ids)
  local found, rest = {}, {}
  if not ids or #ids == 0 then return ctx.state:list("instance"), rest end
  for _, id in ipairs(ids) do
    local i = ctx.state:get("instance", id)
    if i then found[#found + 1] = i else rest[#rest + 1] = id end
  end
  return found, rest
end

-- profile(ctx, spec) -> {Arn, Id} of the instance profile spec names (Arn or Name)
local function profile(ctx, spec)
  if spec == nil then return nil end
  local name = spec.Name or (type(spec.Arn) == "string" and spec.Arn:match(":instance%-profile/.-([^/]+)$"))
  local p = name and ctx:view("iam"):get("instance_profile", name)
  if not p or (spec.Arn and spec.Arn ~= p.Arn) then
    ctx.error("InvalidParameterValue", string.format("Value (%s) for parameter iamInstanceProfile.%s is invalid. " ..
      "Invalid IAM Instance Profile %s", tostring(spec.Name or spec.Arn), spec.Name and "name" or "arn",
      spec.Name and "name" or "arn"))
  end
  return { Arn = p.Arn, Id = p.InstanceProfileId }
end

-- the instance's volumes from its BlockDeviceMappings (the root one added
-- when it is not mapped)
local function volumes(ctx, input, id, az, now)
  local maps, vols = {}, {}
  local root = "/dev/xvda"
  local mapped = {}
  for _, m in ipairs(input.BlockDeviceMappings or {}) do mapped[#mapped + 1] = m end
  local has_root = false
  for _, m in ipairs(mapped) do has_root = has_root or m.DeviceName == root end
  if not has_root then table.insert(mapped, 1, { DeviceName = root, Ebs = { VolumeSize = 8 } }) end
  for _, m in ipairs(mapped) do
    if m.Ebs then
      local e = m.Ebs
      local size = e.VolumeSize or 8
      if math.type(size) ~= "integer" or size < 1 or size > 16384 then
        ctx.error("InvalidParameterValue", "Volume of size " .. tostring(size) .. "GB is not within the allowed range")
      end
      local v = { VolumeId = ctx.id("vol"), Size = size, VolumeType = e.VolumeType or "gp2",
        Encrypted = e.Encrypted == true, AvailabilityZone = az, CreateTime = now, SnapshotId = e.SnapshotId or "",
        Iops = e.Iops or (e.VolumeType == "gp3" and 3000 or nil), Throughput = e.VolumeType == "gp3" and
          (e.Throughput or 125) or nil, MultiAttachEnabled = false,
        _instance = id, _device = m.DeviceName, _delete_on_termination = e.DeleteOnTermination ~= false }
      vols[#vols + 1] = v
      maps[#maps + 1] = { DeviceName = m.DeviceName, Ebs = { VolumeId = v.VolumeId, Status = "attached",
        AttachTime = now, DeleteOnTermination = v._delete_on_termination } }
    end
  end
  return json.array(maps), vols, root
end

-- specs_of(input, rtype) -> the TagSpecifications for rtype (RunInstances
-- takes several resource types in one list)
local function specs_of(input, rtype)
  local only = {}
  for _, spec in ipairs(input.TagSpecifications or {}) do
    if spec.ResourceType == rtype then only[#only + 1] = spec end
  end
  return only
end

function ops.RunInstances(ctx, input)
  local image = common.required(ctx, input, "ImageId")
  if not tostring(image):match("^ami%-%x+$") then
    ctx.error("InvalidAMIID.Malformed", 'Invalid id: "' .. tostring(image) .. '" (expecting "ami-...")')
  end
  local min, max = input.MinCount or 1, input.MaxCount or 1
  if min > 1 or max < 1 or min > max then
    ctx.error("InvalidParameterValue", "The hypd sandbox launches one instance a call (MinCount 1, MaxCount 1)")
  end
  if not input.SubnetId then ctx.error("VPCIdNotSpecified", "No default VPC for this user") end
  local subnet = common.need(ctx, "subnet", input.SubnetId)
  local vpc = common.need(ctx, "vpc", subnet.VpcId)
  local groups = json.array()
  local ids = input.SecurityGroupIds or {}
  if #ids == 0 then ids = { vpc._default_sg } end
  for _, gid in ipairs(ids) do
    local g = common.need(ctx, "sg", gid)
    if g.VpcId ~= vpc.VpcId then
      ctx.error("InvalidParameter", "Security group " .. gid .. " and subnet " .. subnet.SubnetId ..
        " belong to different networks.")
    end
    groups[#groups + 1] = { GroupId = g.GroupId, GroupName = g.GroupName }
  end
  local md = input.MetadataOptions or {}
  local hop = md.HttpPutResponseHopLimit or 1
  if math.type(hop) ~= "integer" or hop < 1 or hop > 64 then
    ctx.error("InvalidParameterValue", "The HTTP PUT response hop limit must be between 1 and 64")
  end
  local now = ctx.now()
  local id = ctx.id("i")
  local maps, vols, root = volumes(ctx, input, id, subnet.AvailabilityZone, now)
  local octets = { tostring(subnet.CidrBlock):match("^(%d+)%.(%d+)%.(%d+)%.") }
  local ip = #octets == 3 and string.format("%s.%s.%s.%d", octets[1], octets[2], octets[3], 10 + #ctx.state:list(
    "instance") % 240) or nil
  local i = {
    InstanceId = id, ImageId = image, InstanceType = common.required(ctx, input, "InstanceType"),
    LaunchTime = now, Placement = { AvailabilityZone = subnet.AvailabilityZone, Tenancy = "default" },
    SubnetId = subnet.SubnetId, VpcId = vpc.VpcId, PrivateIpAddress = ip,
    PrivateDnsName = ip and ("ip-" .. ip:gsub("%.", "-") .. "." .. ctx.region .. ".compute.internal") or nil,
    SecurityGroups = groups, IamInstanceProfile = profile(ctx, input.IamInstanceProfile),
    MetadataOptions = { State = "applied", HttpTokens = md.HttpTokens or "optional", HttpPutResponseHopLimit = hop,
      HttpEndpoint = md.HttpEndpoint or "enabled", HttpProtocolIpv6 = md.HttpProtocolIpv6 or "disabled",
      InstanceMetadataTags = md.InstanceMetadataTags or "disabled" },
    BlockDeviceMappings = maps, RootDeviceName = root, RootDeviceType = "ebs", Architecture = "x86_64",
    Hypervisor = "xen", VirtualizationType = "hvm", EbsOptimized = input.EbsOptimized == true,
    Tags = common.spec_tags(ctx, { TagSpecifications = specs_of(input, "instance") }, "instance"),
    _launched_at = now, _reservation = ctx.id("r"), _user_data = input.UserData,
  }
  for _, v in ipairs(vols) do ctx.state:put("volume", v.VolumeId, v) end
  ctx.state:put("instance", id, i)
  ctx.target = id
  local x, rid = M.describe(ctx, i)
  return { ReservationId = rid, OwnerId = ctx.account, Groups = json.array(), Instances = { x } }
end

function ops.TerminateInstances(ctx, input)
  local found, rest = M.lookup(ctx, input.InstanceIds or {})
  if #(input.InstanceIds or {}) == 0 then
    ctx.error("MissingParameter", "The request must contain the parameter InstanceId")
  end
  if #rest > 0 then
    local eks = require("sandbox.services.ec2.instances").records(ctx, rest) -- raises NotFound for unknown ids
    ctx.error("OperationNotPermitted", "The hypd sandbox terminates only instances RunInstances launched; " ..
      eks[1].InstanceId .. " belongs to an EKS node group (delete or scale the node group)")
  end
  local now, out = ctx.now(), json.array()
  for _, i in ipairs(found) do
    local before = state_of(i, now)
    if not i._terminated_at then
      i._terminated_at = now
      for _, v in ipairs(ctx.state:list("volume")) do
        if v._instance == i.InstanceId and v._delete_on_termination then
          ctx.state:delete("volume", v.VolumeId)
        elseif v._instance == i.InstanceId then
          v._instance = nil
          ctx.state:put("volume", v.VolumeId, v)
        end
      end
      ctx.state:put("instance", i.InstanceId, i)
    end
    out[#out + 1] = { InstanceId = i.InstanceId, PreviousState = state(before), CurrentState = state(state_of(i, now)) }
  end
  return { TerminatingInstances = out }
end

local VOLUME_FIELDS = {
  ["volume-id"] = function(v) return v.VolumeId end,
  ["attachment.instance-id"] = function(v) return v.Attachments[1] and v.Attachments[1].InstanceId end,
  ["attachment.device"] = function(v) return v.Attachments[1] and v.Attachments[1].Device end,
  encrypted = function(v) return tostring(v.Encrypted) end,
  ["volume-type"] = function(v) return v.VolumeType end,
  ["availability-zone"] = function(v) return v.AvailabilityZone end,
}

local function volume_view(v)
  local x = {}
  for k, val in pairs(v) do
    if k:sub(1, 1) ~= "_" then x[k] = val end
  end
  x.State = v._instance and "in-use" or "available"
  x.Attachments = json.array(v._instance and { { VolumeId = v.VolumeId, InstanceId = v._instance,
    Device = v._device, State = "attached", AttachTime = v.CreateTime,
    DeleteOnTermination = v._delete_on_termination } } or {})
  return x
end

function ops.DescribeVolumes(ctx, input)
  local list = json.array()
  local wanted = input.VolumeIds or {}
  local by_id = {}
  for _, v in ipairs(ctx.state:list("volume")) do by_id[v.VolumeId] = v end
  local chosen = {}
  if #wanted > 0 then
    for _, id in ipairs(wanted) do
      if not by_id[id] then
        ctx.error("InvalidVolume.NotFound", "The volume '" .. tostring(id) .. "' does not exist.")
      end
      chosen[#chosen + 1] = by_id[id]
    end
  else
    chosen = ctx.state:list("volume")
  end
  for _, v in ipairs(chosen) do
    local x = volume_view(v)
    if common.matches(ctx, x, input.Filters, VOLUME_FIELDS) then list[#list + 1] = x end
  end
  return { Volumes = list }
end

return M
