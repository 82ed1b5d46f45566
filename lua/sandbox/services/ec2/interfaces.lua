-- sandbox.services.ec2.interfaces: DescribeNetworkInterfaces, read-only.
-- The sandbox runs no instances, so the interfaces are the requester-managed
-- ones its own resources hold: NAT gateways, interface VPC endpoints, FSx
-- file systems, EKS control planes and HyperPod clusters.
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"

local M = { operations = {} }
local ops = M.operations

local function interface(ctx, id, subnet, kind, description, private_ip, groups)
  local s = ctx.state:get("subnet", subnet) or {}
  return {
    NetworkInterfaceId = id, SubnetId = subnet, VpcId = s.VpcId, AvailabilityZone = s.AvailabilityZone,
    AvailabilityZoneId = s.AvailabilityZoneId, Description = description, InterfaceType = kind,
    OwnerId = ctx.account, RequesterManaged = true, Status = "in-use", SourceDestCheck = false,
    PrivateIpAddress = private_ip, Groups = groups or json.array(), TagSet = json.array(),
    MacAddress = string.format("02:%s:%s:%s:%s:%s", id:sub(5, 6), id:sub(7, 8), id:sub(9, 10), id:sub(11, 12),
      id:sub(13, 14)),
    Ipv6Addresses = json.array(),
  }
end

local function all(ctx) -- also M.all
  local out = {}
  for _, n in ipairs(ctx.state:list("natgw")) do
    if n.State ~= "deleted" and n.State ~= "failed" then
      for _, a in ipairs(n.NatGatewayAddresses) do
        out[#out + 1] = interface(ctx, a.NetworkInterfaceId, n.SubnetId, "nat_gateway",
          "Interface for NAT Gateway " .. n.NatGatewayId, a.PrivateIp)
      end
    end
  end
  for _, e in ipairs(ctx.state:list("vpce")) do
    for i, eni in ipairs(e.NetworkInterfaceIds) do
      out[#out + 1] = interface(ctx, eni, e.SubnetIds[i], "vpc_endpoint", "VPC Endpoint Interface " .. e.VpcEndpointId,
        nil, e.Groups)
    end
  end
  -- EKS's and HyperPod's (sandbox.services.ec2.managed_enis)
  for _, e in ipairs(require("sandbox.services.ec2.managed_enis").list(ctx)) do
    out[#out + 1] = interface(ctx, e.id, e.subnet, e.kind, e.description, e.ip, e.groups)
  end
  -- FSx file systems' interfaces (sandbox.services.fsx.network)
  for _, e in ipairs(require("sandbox.services.fsx.network").interfaces(ctx)) do
    out[#out + 1] = interface(ctx, e.id, e.subnet, "lustre", e.description, nil, e.groups)
  end
  return out
end

local ENI_FIELDS = {
  ["network-interface-id"] = function(i) return i.NetworkInterfaceId end,
  ["subnet-id"] = function(i) return i.SubnetId end,
  ["vpc-id"] = function(i) return i.VpcId end,
  ["availability-zone"] = function(i) return i.AvailabilityZone end,
  ["interface-type"] = function(i) return i.InterfaceType end,
  status = function(i) return i.Status end,
  description = function(i) return i.Description end,
  ["requester-managed"] = function(i) return i.RequesterManaged end,
  ["group-id"] = function(i)
    local out = {}
    for k, g in ipairs(i.Groups) do out[k] = g.GroupId end
    return out
  end,
}

function ops.DescribeNetworkInterfaces(ctx, input)
  local list = all(ctx)
  local wanted
  if input.NetworkInterfaceIds and #input.NetworkInterfaceIds > 0 then
    wanted = {}
    for _, id in ipairs(input.NetworkInterfaceIds) do
      local found = false
      for _, i in ipairs(list) do found = found or i.NetworkInterfaceId == id end
      if not found then
        ctx.error("InvalidNetworkInterfaceID.NotFound", "The networkInterface ID '" .. id .. "' does not exist")
      end
      wanted[id] = true
    end
  end
  local out = json.array()
  for _, i in ipairs(list) do
    if (not wanted or wanted[i.NetworkInterfaceId]) and common.matches(ctx, i, input.Filters, ENI_FIELDS) then
      out[#out + 1] = i
    end
  end
  return { NetworkInterfaces = out }
end

M.all = all

return M
