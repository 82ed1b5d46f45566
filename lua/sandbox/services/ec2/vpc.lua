-- sandbox.services.ec2.vpc: VPCs (with their default security group and
-- main route table) and subnets.
local cidr = require "sandbox.services.ec2.cidr"
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"
local routes = require "sandbox.services.ec2.routes"
local sgs = require "sandbox.services.ec2.security_groups"
local zones = require "sandbox.services.ec2.zones"

local M = { operations = {} }
local ops = M.operations

-- block(ctx, text, what) -> parsed CIDR or InvalidParameterValue
local function block(ctx, text, what)
  local b = cidr.parse(text)
  if not b then
    ctx.error("InvalidParameterValue", string.format("Value (%s) for parameter %s is invalid. This is not a valid CIDR block.",
      tostring(text), what))
  end
  return b
end

function ops.CreateVpc(ctx, input)
  if input.CidrBlock == nil and input.Ipv4IpamPoolId == nil then
    ctx.error("MissingParameter", "Either 'cidrBlock' or 'ipv4IpamPoolId' should be provided.")
  end
  local b = block(ctx, input.CidrBlock, "cidrBlock")
  if b.prefix < 16 or b.prefix > 28 then ctx.error("InvalidVpc.Range", "The CIDR '" .. input.CidrBlock .. "' is invalid.") end
  local tenancy = input.InstanceTenancy or "default"
  if tenancy ~= "default" and tenancy ~= "dedicated" then
    ctx.error("InvalidParameterValue", "Value (" .. tostring(tenancy) .. ") for parameter instanceTenancy is invalid.")
  end
  local id = ctx.id("vpc")
  local vpc = {
    _id = id, VpcId = id, OwnerId = ctx.account, State = "available", CidrBlock = b.text,
    DhcpOptionsId = "dopt-0" .. ctx.hex(16), InstanceTenancy = tenancy, IsDefault = false,
    CidrBlockAssociationSet = json.array { { AssociationId = ctx.id("vpc-cidr-assoc"), CidrBlock = b.text,
      CidrBlockState = { State = "associated" } } },
    Ipv6CidrBlockAssociationSet = json.array(),
    BlockPublicAccessStates = { InternetGatewayBlockMode = "off" },
    Tags = common.spec_tags(ctx, input, "vpc"),
    _dns_support = true, _dns_hostnames = false, _nau_metrics = false,
  }
  vpc._default_sg = sgs.create_default(ctx, vpc)
  vpc._main_rtb = routes.create_main(ctx, vpc)
  ctx.state:put("vpc", id, vpc)
  ctx.target = id
  local out = common.public(vpc)
  out.State = "pending"
  return { Vpc = out }
end

local VPC_FIELDS = {
  ["vpc-id"] = function(v) return v.VpcId end,
  cidr = function(v) return v.CidrBlock end,
  ["cidr-block"] = function(v) return v.CidrBlock end,
  ["cidr-block-association.cidr-block"] = function(v)
    local out = {}
    for i, a in ipairs(v.CidrBlockAssociationSet) do out[i] = a.CidrBlock end
    return out
  end,
  ["cidr-block-association.association-id"] = function(v)
    local out = {}
    for i, a in ipairs(v.CidrBlockAssociationSet) do out[i] = a.AssociationId end
    return out
  end,
  ["cidr-block-association.state"] = function() return "associated" end,
  state = function(v) return v.State end,
  ["is-default"] = function(v) return v.IsDefault end,
  ["owner-id"] = function(v) return v.OwnerId end,
  ["dhcp-options-id"] = function(v) return v.DhcpOptionsId end,
}

function ops.DescribeVpcs(ctx, input)
  return { Vpcs = common.describe(ctx, "vpc", input.VpcIds, input.Filters, VPC_FIELDS) }
end

local function live(rec, vpc_id)
  return not rec._gone and rec.VpcId == vpc_id
end

function ops.DeleteVpc(ctx, input)
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId"))
  local id = vpc.VpcId
  local function busy() ctx.error("DependencyViolation", "The vpc '" .. id .. "' has dependencies and cannot be deleted.") end
  for _, s in ipairs(ctx.state:list("subnet")) do if live(s, id) then busy() end end
  for _, g in ipairs(ctx.state:list("igw")) do
    for _, a in ipairs(g.Attachments or {}) do if a.VpcId == id then busy() end end
  end
  for _, sg in ipairs(ctx.state:list("sg")) do if live(sg, id) and sg.GroupId ~= vpc._default_sg then busy() end end
  for _, r in ipairs(ctx.state:list("rtb")) do if live(r, id) and r.RouteTableId ~= vpc._main_rtb then busy() end end
  for _, e in ipairs(ctx.state:list("vpce")) do if live(e, id) then busy() end end
  for _, n in ipairs(ctx.state:list("natgw")) do
    if live(n, id) and n.State ~= "deleted" and n.State ~= "failed" then busy() end
  end
  ctx.state:delete("sg", vpc._default_sg)
  ctx.state:delete("rtb", vpc._main_rtb)
  ctx.state:delete("vpc", id)
  return {}
end

local VPC_ATTRS = { EnableDnsSupport = "_dns_support", EnableDnsHostnames = "_dns_hostnames",
  EnableNetworkAddressUsageMetrics = "_nau_metrics" }
local ATTR_NAMES = { enableDnsSupport = "EnableDnsSupport", enableDnsHostnames = "EnableDnsHostnames",
  enableNetworkAddressUsageMetrics = "EnableNetworkAddressUsageMetrics" }

function ops.ModifyVpcAttribute(ctx, input)
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId"))
  local given = {}
  for member in pairs(VPC_ATTRS) do
    if input[member] ~= nil then given[#given + 1] = member end
  end
  table.sort(given)
  if #given == 0 then ctx.error("MissingParameter", "The request must contain exactly one attribute to modify.") end
  if #given > 1 then
    local names = {}
    for i, g in ipairs(given) do names[i] = g:sub(1, 1):lower() .. g:sub(2) end
    ctx.error("InvalidParameterCombination", "Fields for multiple attribute types specified: " .. table.concat(names, ", "))
  end
  local value = input[given[1]].Value
  if type(value) ~= "boolean" then ctx.error("InvalidParameterValue", "Value for " .. given[1] .. " must be a boolean.") end
  if given[1] == "EnableDnsHostnames" and value and not vpc._dns_support then
    ctx.error("InvalidParameterValue", "Cannot enable DNS hostnames without DNS support.")
  end
  vpc[VPC_ATTRS[given[1]]] = value
  ctx.state:put("vpc", vpc.VpcId, vpc)
  return {}
end

function ops.DescribeVpcAttribute(ctx, input)
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId"))
  local member = ATTR_NAMES[input.Attribute or ""]
  if not member then
    ctx.error("InvalidParameterValue", "Value (" .. tostring(input.Attribute) .. ") for parameter attribute is invalid. " ..
      "Unknown attribute.")
  end
  return { VpcId = vpc.VpcId, [member] = { Value = vpc[VPC_ATTRS[member]] } }
end

-- secondary CIDR blocks ----------------------------------------------------------

function ops.AssociateVpcCidrBlock(ctx, input)
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId", "vpcId"))
  local b = block(ctx, common.required(ctx, input, "CidrBlock", "cidrBlock"), "cidrBlock")
  if b.prefix < 16 or b.prefix > 28 then ctx.error("InvalidVpc.Range", "The CIDR '" .. input.CidrBlock .. "' is invalid.") end
  if #vpc.CidrBlockAssociationSet >= 5 then
    ctx.error("CidrLimitExceeded", "This network '" .. vpc.VpcId .. "' has met its maximum number of allowed CIDRs: 5")
  end
  for _, a in ipairs(vpc.CidrBlockAssociationSet) do
    if cidr.overlaps(cidr.parse(a.CidrBlock), b) then
      ctx.error("InvalidVpc.Range", "The CIDR '" .. input.CidrBlock .. "' conflicts with a CIDR block of the VPC.")
    end
  end
  local assoc = { AssociationId = ctx.id("vpc-cidr-assoc"), CidrBlock = b.text, CidrBlockState = { State = "associated" } }
  vpc.CidrBlockAssociationSet[#vpc.CidrBlockAssociationSet + 1] = assoc
  ctx.state:put("vpc", vpc.VpcId, vpc)
  routes.add_local(ctx, vpc.VpcId, b.text)
  return { VpcId = vpc.VpcId, CidrBlockAssociation = { AssociationId = assoc.AssociationId, CidrBlock = b.text,
    CidrBlockState = { State = "associating" } } }
end

function ops.DisassociateVpcCidrBlock(ctx, input)
  local id = common.required(ctx, input, "AssociationId", "associationId")
  for _, vpc in ipairs(ctx.state:list("vpc")) do
    for i, a in ipairs(vpc.CidrBlockAssociationSet) do
      if a.AssociationId == id then
        if i == 1 then
          ctx.error("OperationNotPermitted", "The vpc CIDR block with association ID " .. id .. " may not be " ..
            "disassociated. It is the primary IPv4 CIDR block of the VPC")
        end
        local b = cidr.parse(a.CidrBlock)
        for _, s in ipairs(ctx.state:list("subnet")) do
          if s.VpcId == vpc.VpcId and cidr.contains(b, cidr.parse(s.CidrBlock)) then
            ctx.error("DependencyViolation", "The vpc cidr block '" .. a.CidrBlock .. "' has dependencies and cannot " ..
              "be disassociated.")
          end
        end
        table.remove(vpc.CidrBlockAssociationSet, i)
        ctx.state:put("vpc", vpc.VpcId, vpc)
        routes.remove_local(ctx, vpc.VpcId, a.CidrBlock)
        ctx.target = vpc.VpcId
        return { VpcId = vpc.VpcId, CidrBlockAssociation = { AssociationId = id, CidrBlock = a.CidrBlock,
          CidrBlockState = { State = "disassociating" } } }
      end
    end
  end
  ctx.error("InvalidVpcCidrBlockAssociationID.NotFound", "The vpc CIDR block association ID '" .. id .. "' does not exist")
end

-- subnets --------------------------------------------------------------------

function ops.CreateSubnet(ctx, input)
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId"))
  local b = block(ctx, common.required(ctx, input, "CidrBlock", "cidrBlock"), "cidrBlock")
  local inside = false
  for _, a in ipairs(vpc.CidrBlockAssociationSet) do
    inside = inside or cidr.contains(cidr.parse(a.CidrBlock), b)
  end
  if b.prefix < 16 or b.prefix > 28 or not inside then
    ctx.error("InvalidSubnet.Range", "The CIDR '" .. input.CidrBlock .. "' is invalid.")
  end
  for _, s in ipairs(ctx.state:list("subnet")) do
    if s.VpcId == vpc.VpcId and cidr.overlaps(cidr.parse(s.CidrBlock), b) then
      ctx.error("InvalidSubnet.Conflict", "The CIDR '" .. input.CidrBlock .. "' conflicts with another subnet")
    end
  end
  local zone
  if input.AvailabilityZone and input.AvailabilityZoneId then
    ctx.error("InvalidParameterCombination", "Only one of availabilityZone or availabilityZoneId may be specified.")
  elseif input.AvailabilityZone or input.AvailabilityZoneId then
    zone = zones.find(ctx.region, input.AvailabilityZone, input.AvailabilityZoneId)
    if not zone then
      local names = {}
      for i, z in ipairs(zones.list(ctx.region)) do
        names[i] = input.AvailabilityZoneId and z.ZoneId or z.ZoneName
      end
      ctx.error("InvalidParameterValue", string.format("Value (%s) for parameter %s is invalid. Subnets can currently " ..
        "only be created in the following availability zones: %s.", input.AvailabilityZone or input.AvailabilityZoneId,
        input.AvailabilityZoneId and "availabilityZoneId" or "availabilityZone", table.concat(names, ", ")))
    end
  else
    local all = zones.list(ctx.region)
    zone = all[#ctx.state:list("subnet") % #all + 1]
  end
  local id = ctx.id("subnet")
  local subnet = {
    _id = id, SubnetId = id, SubnetArn = ctx:arn("subnet/" .. id), VpcId = vpc.VpcId, CidrBlock = b.text,
    AvailabilityZone = zone.ZoneName, AvailabilityZoneId = zone.ZoneId, State = "available",
    AvailableIpAddressCount = cidr.size(b) - 5, DefaultForAz = false, MapPublicIpOnLaunch = false,
    MapCustomerOwnedIpOnLaunch = false, AssignIpv6AddressOnCreation = false, EnableDns64 = false,
    Ipv6Native = false, OwnerId = ctx.account, Ipv6CidrBlockAssociationSet = json.array(),
    PrivateDnsNameOptionsOnLaunch = { HostnameType = "ip-name", EnableResourceNameDnsARecord = false,
      EnableResourceNameDnsAAAARecord = false },
    BlockPublicAccessStates = { InternetGatewayBlockMode = "off" },
    Tags = common.spec_tags(ctx, input, "subnet"),
  }
  ctx.state:put("subnet", id, subnet)
  ctx.target = id
  return { Subnet = common.public(subnet) }
end

local SUBNET_FIELDS = {
  ["vpc-id"] = function(s) return s.VpcId end,
  ["subnet-id"] = function(s) return s.SubnetId end,
  ["subnet-arn"] = function(s) return s.SubnetArn end,
  ["availability-zone"] = function(s) return s.AvailabilityZone end,
  ["availability-zone-id"] = function(s) return s.AvailabilityZoneId end,
  availabilityZone = function(s) return s.AvailabilityZone end,
  ["cidr-block"] = function(s) return s.CidrBlock end,
  cidr = function(s) return s.CidrBlock end,
  cidrBlock = function(s) return s.CidrBlock end,
  state = function(s) return s.State end,
  ["default-for-az"] = function(s) return s.DefaultForAz end,
  defaultForAz = function(s) return s.DefaultForAz end,
  ["map-public-ip-on-launch"] = function(s) return s.MapPublicIpOnLaunch end,
  ["available-ip-address-count"] = function(s) return tostring(s.AvailableIpAddressCount) end,
  ["owner-id"] = function(s) return s.OwnerId end,
}

function ops.DescribeSubnets(ctx, input)
  return { Subnets = common.describe(ctx, "subnet", input.SubnetIds, input.Filters, SUBNET_FIELDS) }
end

local SUBNET_ATTRS = { MapPublicIpOnLaunch = "MapPublicIpOnLaunch", EnableDns64 = "EnableDns64",
  MapCustomerOwnedIpOnLaunch = "MapCustomerOwnedIpOnLaunch",
  AssignIpv6AddressOnCreation = "AssignIpv6AddressOnCreation" }

function ops.ModifySubnetAttribute(ctx, input)
  local subnet = common.need(ctx, "subnet", common.required(ctx, input, "SubnetId"))
  local changed = false
  for member, field in pairs(SUBNET_ATTRS) do
    if input[member] ~= nil then
      subnet[field] = input[member].Value == true
      changed = true
    end
  end
  local dns = subnet.PrivateDnsNameOptionsOnLaunch
  if input.PrivateDnsHostnameTypeOnLaunch then
    if input.PrivateDnsHostnameTypeOnLaunch ~= "ip-name" and input.PrivateDnsHostnameTypeOnLaunch ~= "resource-name" then
      ctx.error("InvalidParameterValue", "Invalid value for PrivateDnsHostnameTypeOnLaunch.")
    end
    dns.HostnameType, changed = input.PrivateDnsHostnameTypeOnLaunch, true
  end
  if input.EnableResourceNameDnsARecordOnLaunch then
    dns.EnableResourceNameDnsARecord, changed = input.EnableResourceNameDnsARecordOnLaunch.Value == true, true
  end
  if not changed then ctx.error("MissingParameter", "The request must contain exactly one attribute to modify.") end
  ctx.state:put("subnet", subnet.SubnetId, subnet)
  return {}
end

function ops.DeleteSubnet(ctx, input)
  local subnet = common.need(ctx, "subnet", common.required(ctx, input, "SubnetId"))
  -- any network interface in it (a NAT gateway's, an endpoint's, a file
  -- system's, an EKS or HyperPod cluster's) holds it, as on AWS
  for _, i in ipairs(require("sandbox.services.ec2.interfaces").all(ctx)) do
    if i.SubnetId == subnet.SubnetId then
      ctx.error("DependencyViolation", "The subnet '" .. subnet.SubnetId .. "' has dependencies and cannot be deleted.")
    end
  end
  routes.forget_subnet(ctx, subnet.SubnetId)
  ctx.state:delete("subnet", subnet.SubnetId)
  return {}
end

return M
