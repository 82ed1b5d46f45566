-- EC2 instances of the account: those RunInstances launched (ec2/launch)
-- and those of Amazon EKS managed node groups (their records are EKS's
-- "ng_instance", services/eks/nodegroups.lua). HyperPod's instances run in
-- a SageMaker service account and are not EC2 instances of this one, so
-- DescribeInstances never lists them, as AWS does not. Each instance is
-- its own reservation (as an Auto Scaling group launches them) and carries
-- the tags EKS and Auto Scaling put on it; a terminated instance is gone.
-- Its state (running, or stopping, stopped and pending after
-- StopInstances and StartInstances) is ec2/power's.
-- Filters: instance-id, instance-type, instance-state-name,
-- availability-zone, subnet-id, vpc-id, private-ip-address,
-- private-dns-name, image-id, tag:<key>, tag-key, tag-value.
local amis = require "sandbox.services.eks.amis"
local common = require "sandbox.services.ec2.common"
local ctl_ = require "sandbox.k8s.controllers._ctl"
local json = require "hypd.json"
local launch = require "sandbox.services.ec2.launch"
local power = require "sandbox.services.ec2.power"

local M = { operations = {} }
local ops = M.operations

local function hex(s, n)
  return (ctl_.hash(s, n):gsub(".", function(ch) return string.format("%x", ch:byte() % 16) end))
end

-- instance(ctx, i) -> the Instance (and its reservation id) of an EKS node group instance record
local function instance(ctx, i)
  local eks = ctx:view("eks")
  local ng = eks:get("nodegroup", i.cluster .. "/" .. i.nodegroup) or {}
  local subnet = ctx.state:get("subnet", i.subnet) or {}
  local asg = ng.resources and ng.resources.autoScalingGroups and ng.resources.autoScalingGroups[1]
  local tags = json.array {
    { Key = "eks:cluster-name", Value = i.cluster },
    { Key = "eks:nodegroup-name", Value = i.nodegroup },
    { Key = "kubernetes.io/cluster/" .. i.cluster, Value = "owned" },
  }
  if asg then tags[#tags + 1] = { Key = "aws:autoscaling:groupName", Value = asg.name } end
  local state, reason, why = power.describe(i, ctx.now())
  return {
    InstanceId = i.InstanceId, InstanceType = i.InstanceType, LaunchTime = i.LaunchTime,
    ImageId = amis.image_id(ctx.region, ng.amiType, ng.releaseVersion),
    State = state, StateReason = reason, StateTransitionReason = why,
    Placement = { AvailabilityZone = i.az, Tenancy = "default" },
    PrivateIpAddress = i.ip, PrivateDnsName = i.dns, SubnetId = i.subnet, VpcId = subnet.VpcId,
    InstanceLifecycle = i.capacity == "SPOT" and "spot" or nil,
    Architecture = tostring(ng.amiType):find("ARM", 1, true) and "arm64" or "x86_64",
    Tags = tags,
  }, "r-0" .. hex(i.InstanceId, 16)
end

local FIELDS = {
  ["instance-id"] = function(x) return x.InstanceId end,
  ["instance-type"] = function(x) return x.InstanceType end,
  ["instance-state-name"] = function(x) return x.State.Name end,
  ["availability-zone"] = function(x) return x.Placement.AvailabilityZone end,
  ["subnet-id"] = function(x) return x.SubnetId end,
  ["vpc-id"] = function(x) return x.VpcId end,
  ["private-ip-address"] = function(x) return x.PrivateIpAddress end,
  ["private-dns-name"] = function(x) return x.PrivateDnsName end,
  ["image-id"] = function(x) return x.ImageId end,
}

-- records(ctx [, ids]) -> the instance records the ids name, in their
-- order (all of them, oldest first, when ids is nil or empty); a malformed
-- id raises InvalidInstanceID.Malformed, unknown ones
-- InvalidInstanceID.NotFound naming them all, in AWS's words
function M.records(ctx, wanted)
  local records = {}
  for _, i in ipairs(ctx:view("eks"):list("ng_instance")) do records[i.InstanceId] = i end
  local list = {}
  if wanted and #wanted > 0 then
    local missing = {}
    for _, id in ipairs(wanted) do
      if type(id) ~= "string" or not id:match("^i%-%x+$") then
        ctx.error("InvalidInstanceID.Malformed", 'Invalid id: "' .. tostring(id) .. '"')
      end
      if records[id] then list[#list + 1] = records[id] else missing[#missing + 1] = id end
    end
    if #missing > 0 then
      ctx.error("InvalidInstanceID.NotFound", "The instance ID" .. (#missing > 1 and "s" or "") .. " '" ..
        table.concat(missing, ", ") .. "' " .. (#missing > 1 and "do" or "does") .. " not exist")
    end
  else
    for _, i in pairs(records) do list[#list + 1] = i end
    table.sort(list, function(a, b)
      if a.LaunchTime ~= b.LaunchTime then return a.LaunchTime < b.LaunchTime end
      return a.InstanceId < b.InstanceId
    end)
  end
  return list
end

function ops.DescribeInstances(ctx, input)
  -- the instances RunInstances launched (ec2/launch), then the node groups'
  local launched, rest = launch.lookup(ctx, input.InstanceIds)
  local list = {}
  if not input.InstanceIds or #input.InstanceIds == 0 or #rest > 0 then list = M.records(ctx, rest) end
  local out = json.array()
  for _, i in ipairs(launched) do
    local x, rid = launch.describe(ctx, i)
    if common.matches(ctx, x, input.Filters, FIELDS) then
      out[#out + 1] = { ReservationId = rid, OwnerId = ctx.account, Groups = json.array(), Instances = { x } }
    end
  end
  for _, i in ipairs(list) do
    local x, rid = instance(ctx, i)
    if common.matches(ctx, x, input.Filters, FIELDS) then
      out[#out + 1] = { ReservationId = rid, OwnerId = ctx.account, Groups = json.array(), Instances = { x } }
    end
  end
  return { Reservations = out }
end

return M
