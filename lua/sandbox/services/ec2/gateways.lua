-- sandbox.services.ec2.gateways: internet gateways, elastic IPs (from the
-- 203.0.113.0/24 documentation range) and NAT gateways (pending ->
-- available after about two minutes; deleting -> deleted after one).
local cidr = require "sandbox.services.ec2.cidr"
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"

local M = { operations = {}, transitions = {} }
local ops = M.operations

local NAT_READY, NAT_GONE, NAT_PURGE = 120, 60, 3600

-- internet gateways --------------------------------------------------------------

function ops.CreateInternetGateway(ctx, input)
  local id = ctx.id("igw")
  local g = { _id = id, InternetGatewayId = id, OwnerId = ctx.account, Attachments = json.array(),
              Tags = common.spec_tags(ctx, input, "internet-gateway") }
  ctx.state:put("igw", id, g)
  ctx.target = id
  return { InternetGateway = common.public(g) }
end

function ops.AttachInternetGateway(ctx, input)
  local g = common.need(ctx, "igw", common.required(ctx, input, "InternetGatewayId", "internetGatewayId"))
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId", "vpcId"))
  if #g.Attachments > 0 then
    ctx.error("Resource.AlreadyAssociated", string.format("resource %s is already attached to network %s",
      g.InternetGatewayId, g.Attachments[1].VpcId))
  end
  for _, other in ipairs(ctx.state:list("igw")) do
    for _, a in ipairs(other.Attachments) do
      if a.VpcId == vpc.VpcId then
        ctx.error("Resource.AlreadyAssociated", string.format("Network %s already has an internet gateway attached",
          vpc.VpcId))
      end
    end
  end
  g.Attachments[1] = { VpcId = vpc.VpcId, State = "available" }
  ctx.state:put("igw", g.InternetGatewayId, g)
  ctx.target = g.InternetGatewayId
  return {}
end

local function live_nat(n) return n.State ~= "deleted" and n.State ~= "failed" end

function ops.DetachInternetGateway(ctx, input)
  local g = common.need(ctx, "igw", common.required(ctx, input, "InternetGatewayId", "internetGatewayId"))
  local vpc_id = common.required(ctx, input, "VpcId", "vpcId")
  if not g.Attachments[1] or g.Attachments[1].VpcId ~= vpc_id then
    ctx.error("Gateway.NotAttached", string.format("resource %s is not attached to network %s", g.InternetGatewayId,
      vpc_id))
  end
  for _, n in ipairs(ctx.state:list("natgw")) do
    if n.VpcId == vpc_id and live_nat(n) and n.ConnectivityType == "public" then
      ctx.error("DependencyViolation", string.format("Network %s has some mapped public address(es). Please unmap " ..
        "those public address(es) before detaching the gateway.", vpc_id))
    end
  end
  g.Attachments = json.array()
  ctx.state:put("igw", g.InternetGatewayId, g)
  ctx.target = g.InternetGatewayId
  return {}
end

function ops.DeleteInternetGateway(ctx, input)
  local g = common.need(ctx, "igw", common.required(ctx, input, "InternetGatewayId", "internetGatewayId"))
  if #g.Attachments > 0 then
    ctx.error("DependencyViolation", "The internetGateway '" .. g.InternetGatewayId ..
      "' has dependencies and cannot be deleted.")
  end
  ctx.state:delete("igw", g.InternetGatewayId)
  ctx.target = g.InternetGatewayId
  return {}
end

local IGW_FIELDS = {
  ["internet-gateway-id"] = function(g) return g.InternetGatewayId end,
  ["attachment.vpc-id"] = function(g) return g.Attachments[1] and g.Attachments[1].VpcId end,
  ["attachment.state"] = function(g) return g.Attachments[1] and g.Attachments[1].State end,
  ["owner-id"] = function(g) return g.OwnerId end,
}

function ops.DescribeInternetGateways(ctx, input)
  return { InternetGateways = common.describe(ctx, "igw", input.InternetGatewayIds, input.Filters, IGW_FIELDS) }
end

-- elastic IPs -------------------------------------------------------------------------

local POOL = cidr.parse("203.0.113.0/24")

function ops.AllocateAddress(ctx, input)
  local domain = input.Domain or "vpc"
  if domain ~= "vpc" and domain ~= "standard" then
    ctx.error("InvalidParameterValue", "Invalid value '" .. tostring(domain) .. "' for domain.")
  end
  local used = {}
  for _, a in ipairs(ctx.state:list("address")) do used[a.PublicIp] = true end
  local ip
  for i = 1, 254 do
    if not used[cidr.host(POOL, i)] then ip = cidr.host(POOL, i); break end
  end
  if not ip then ctx.error("AddressLimitExceeded", "The maximum number of addresses has been reached.") end
  local id = ctx.id("eipalloc")
  local a = { _id = id, AllocationId = id, PublicIp = ip, Domain = "vpc", PublicIpv4Pool = "amazon",
              NetworkBorderGroup = ctx.region, Tags = common.spec_tags(ctx, input, "elastic-ip") }
  ctx.state:put("address", id, a)
  ctx.target = id
  return { AllocationId = id, PublicIp = ip, Domain = "vpc", PublicIpv4Pool = "amazon", NetworkBorderGroup = ctx.region }
end

local ADDR_FIELDS = {
  ["allocation-id"] = function(a) return a.AllocationId end,
  ["public-ip"] = function(a) return a.PublicIp end,
  domain = function(a) return a.Domain end,
  ["association-id"] = function(a) return a.AssociationId end,
  ["network-interface-id"] = function(a) return a.NetworkInterfaceId end,
  ["private-ip-address"] = function(a) return a.PrivateIpAddress end,
  ["network-border-group"] = function(a) return a.NetworkBorderGroup end,
}

function ops.DescribeAddresses(ctx, input)
  local ids = input.AllocationIds
  if input.PublicIps and #input.PublicIps > 0 then
    ids = json.array()
    for _, ip in ipairs(input.PublicIps) do
      local found
      for _, a in ipairs(ctx.state:list("address")) do if a.PublicIp == ip then found = a.AllocationId end end
      if not found then ctx.error("InvalidAddress.NotFound", "Address '" .. ip .. "' not found.") end
      ids[#ids + 1] = found
    end
  end
  return { Addresses = common.describe(ctx, "address", ids, input.Filters, ADDR_FIELDS) }
end

function ops.ReleaseAddress(ctx, input)
  local a
  if input.AllocationId then
    a = common.need(ctx, "address", input.AllocationId)
  elseif input.PublicIp then
    for _, x in ipairs(ctx.state:list("address")) do if x.PublicIp == input.PublicIp then a = x end end
    if not a then ctx.error("InvalidAddress.NotFound", "Address '" .. input.PublicIp .. "' not found.") end
  else
    ctx.error("MissingParameter", "The request must contain the parameter allocationId")
  end
  if a._nat then ctx.error("InvalidIPAddress.InUse", "Address " .. a.PublicIp .. " is in use.") end
  ctx.state:delete("address", a.AllocationId)
  ctx.target = a.AllocationId
  return {}
end

-- NAT gateways -----------------------------------------------------------------------

local function subnet_ips(ctx, subnet_id, delta)
  local s = ctx.state:get("subnet", subnet_id)
  if s then
    s.AvailableIpAddressCount = s.AvailableIpAddressCount + delta
    ctx.state:put("subnet", subnet_id, s)
  end
end

function ops.CreateNatGateway(ctx, input)
  local subnet = common.need(ctx, "subnet", common.required(ctx, input, "SubnetId"))
  if input.ClientToken then
    local seen = ctx.state:get("nat_token", input.ClientToken)
    if seen then
      local n = ctx.state:get("natgw", seen.id)
      if n and (n.SubnetId ~= input.SubnetId or (input.AllocationId and seen.allocation ~= input.AllocationId)) then
        ctx.error("IdempotentParameterMismatch", "The client token you have provided is associated with a resource " ..
          "that is already deleted or has different parameters. Please use a different client token.")
      end
      if n then return { NatGateway = common.public(n), ClientToken = input.ClientToken } end
    end
  end
  local connectivity = input.ConnectivityType or "public"
  if connectivity ~= "public" and connectivity ~= "private" then
    ctx.error("InvalidParameterValue", "Invalid value '" .. tostring(connectivity) .. "' for ConnectivityType.")
  end
  local address
  if connectivity == "public" then
    if not input.AllocationId then
      ctx.error("MissingParameter", "Public NAT gateways require an Elastic IP allocation (parameter AllocationId).")
    end
    address = common.need(ctx, "address", input.AllocationId)
    if address._nat or address.AssociationId then
      ctx.error("Resource.AlreadyAssociated", "Elastic IP address [" .. address.AllocationId .. "] is already associated")
    end
  elseif input.AllocationId then
    ctx.error("InvalidParameterCombination", "Private NAT gateways cannot have an Elastic IP address.")
  end
  local id = ctx.id("nat")
  local eni = ctx.id("eni")
  local private_ip = cidr.host(cidr.parse(subnet.CidrBlock), 4 + (#ctx.state:list("natgw") % 8))
  local n = {
    _id = id, NatGatewayId = id, SubnetId = subnet.SubnetId, VpcId = subnet.VpcId, State = "pending",
    ConnectivityType = connectivity, CreateTime = ctx.now(), AvailabilityMode = "zonal",
    NatGatewayAddresses = json.array { { AllocationId = address and address.AllocationId, NetworkInterfaceId = eni,
      PrivateIp = private_ip, PublicIp = address and address.PublicIp, IsPrimary = true, Status = "associating" } },
    Tags = common.spec_tags(ctx, input, "natgateway"),
  }
  ctx.state:put("natgw", id, n)
  if address then
    address._nat = id
    address.AssociationId, address.NetworkInterfaceId = ctx.id("eipassoc"), eni
    address.NetworkInterfaceOwnerId, address.PrivateIpAddress = ctx.account, private_ip
    ctx.state:put("address", address.AllocationId, address)
  end
  subnet_ips(ctx, subnet.SubnetId, -1)
  if input.ClientToken then
    ctx.state:put("nat_token", input.ClientToken, { id = id, allocation = input.AllocationId })
  end
  ctx:later(NAT_READY, "nat_available", { id = id })
  ctx.target = id
  return { NatGateway = common.public(n), ClientToken = input.ClientToken }
end

function M.transitions.nat_available(ctx, args)
  local n = ctx.state:get("natgw", args.id)
  if not n or n.State ~= "pending" then return end
  n.State = "available"
  for _, a in ipairs(n.NatGatewayAddresses) do a.Status = "succeeded" end
  ctx.state:put("natgw", n.NatGatewayId, n)
end

function ops.DeleteNatGateway(ctx, input)
  local id = common.required(ctx, input, "NatGatewayId")
  local n = ctx.state:get("natgw", id)
  if not n then common.not_found(ctx, "natgw", id) end
  if n.State == "pending" or n.State == "available" then
    n.State = "deleting"
    for _, a in ipairs(n.NatGatewayAddresses) do a.Status = "disassociating" end
    ctx.state:put("natgw", id, n)
    ctx:later(NAT_GONE, "nat_deleted", { id = id })
  end
  ctx.target = id
  return { NatGatewayId = id }
end

function M.transitions.nat_deleted(ctx, args)
  local n = ctx.state:get("natgw", args.id)
  if not n or n.State ~= "deleting" then return end
  n.State, n.DeleteTime = "deleted", ctx.now()
  for _, a in ipairs(n.NatGatewayAddresses) do
    a.Status = "succeeded"
    local address = a.AllocationId and ctx.state:get("address", a.AllocationId)
    if address and address._nat == n.NatGatewayId then
      address._nat, address.AssociationId, address.NetworkInterfaceId = nil, nil, nil
      address.NetworkInterfaceOwnerId, address.PrivateIpAddress = nil, nil
      ctx.state:put("address", address.AllocationId, address)
    end
  end
  ctx.state:put("natgw", n.NatGatewayId, n)
  subnet_ips(ctx, n.SubnetId, 1)
end

-- deleted NAT gateways stay visible for about an hour, then vanish (lazily:
-- a timer would outlive the caller)
local function purge(ctx)
  for _, n in ipairs(ctx.state:list("natgw")) do
    if n.State == "deleted" and n.DeleteTime and ctx.now() - n.DeleteTime > NAT_PURGE then
      ctx.state:delete("natgw", n.NatGatewayId)
    end
  end
end

local NAT_FIELDS = {
  ["nat-gateway-id"] = function(n) return n.NatGatewayId end,
  state = function(n) return n.State end,
  ["subnet-id"] = function(n) return n.SubnetId end,
  ["vpc-id"] = function(n) return n.VpcId end,
}

function ops.DescribeNatGateways(ctx, input)
  purge(ctx)
  local out = json.array()
  for _, id in ipairs(input.NatGatewayIds or {}) do
    if not ctx.state:get("natgw", id) then common.not_found(ctx, "natgw", id) end
  end
  local records = ctx.state:list("natgw")
  local wanted
  if input.NatGatewayIds and #input.NatGatewayIds > 0 then
    wanted = {}
    for _, id in ipairs(input.NatGatewayIds) do wanted[id] = true end
  end
  for _, n in ipairs(records) do
    if (not wanted or wanted[n.NatGatewayId]) and common.matches(ctx, n, input.Filter, NAT_FIELDS) then
      out[#out + 1] = common.public(n)
    end
  end
  return { NatGateways = out }
end

return M
