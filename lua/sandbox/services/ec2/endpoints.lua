-- sandbox.services.ec2.endpoints: VPC endpoints. Gateway endpoints (S3,
-- DynamoDB) add a prefix-list route to each of their route tables;
-- interface endpoints hold an interface per subnet and become available
-- after about a minute and a half.
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"

local M = { operations = {} }
local ops = M.operations

local KNOWN_PREFIX_LISTS = { ["us-west-2/s3"] = "pl-68a54001", ["us-east-1/s3"] = "pl-63a5400a",
  ["us-west-2/dynamodb"] = "pl-00a54069", ["us-east-1/dynamodb"] = "pl-02cd2c6b" }

local function prefix_list(region, svc)
  local known = KNOWN_PREFIX_LISTS[region .. "/" .. svc]
  if known then return known end
  local h = 2166136261
  for c in (region .. "/" .. svc):gmatch(".") do h = ((h ~ c:byte()) * 16777619) & 0xffffffff end
  return string.format("pl-%08x", h)
end

local function gateway_service(ctx, name)
  local svc = type(name) == "string" and name:match("^com%.amazonaws%." .. ctx.region:gsub("%-", "%%-") .. "%.(%w+)$")
  if svc == "s3" or svc == "dynamodb" then return svc end
end

local function add_endpoint_route(ctx, e, rtb_id)
  local t = common.need(ctx, "rtb", rtb_id)
  if t.VpcId ~= e.VpcId then
    ctx.error("InvalidParameter", string.format("Route table %s does not belong to vpc %s", rtb_id, e.VpcId))
  end
  for _, r in ipairs(t.Routes) do
    if r.DestinationPrefixListId == e._prefix_list then
      ctx.error("RouteAlreadyExists", string.format("route table %s already has a route with destination-prefix-list-id %s",
        rtb_id, e._prefix_list))
    end
  end
  t.Routes[#t.Routes + 1] = { DestinationPrefixListId = e._prefix_list, GatewayId = e.VpcEndpointId,
                              Origin = "CreateRoute", State = "active" }
  ctx.state:put("rtb", rtb_id, t)
end

local function remove_endpoint_route(ctx, e, rtb_id)
  local t = ctx.state:get("rtb", rtb_id)
  if not t then return end
  local keep = json.array()
  for _, r in ipairs(t.Routes) do
    if r.GatewayId ~= e.VpcEndpointId then keep[#keep + 1] = r end
  end
  t.Routes = keep
  ctx.state:put("rtb", rtb_id, t)
end

local FULL_POLICY = '{"Version":"2008-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"*",' ..
  '"Resource":"*"}]}'

function ops.CreateVpcEndpoint(ctx, input)
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId"))
  local name = common.required(ctx, input, "ServiceName")
  local kind = input.VpcEndpointType or "Gateway"
  if input.ClientToken then
    local seen = ctx.state:get("vpce_token", input.ClientToken)
    if seen then
      return { VpcEndpoint = common.public(common.need(ctx, "vpce", seen.id)), ClientToken = input.ClientToken }
    end
  end
  local svc = gateway_service(ctx, name)
  if kind == "Gateway" and not svc then
    ctx.error("InvalidServiceName", "The Vpc Endpoint Service '" .. tostring(name) .. "' does not exist")
  elseif kind ~= "Gateway" and kind ~= "Interface" then
    ctx.error("InvalidParameterValue", "Invalid VPC endpoint type " .. tostring(kind))
  elseif kind == "Interface" and not name:match("^com%.amazonaws%.") then
    ctx.error("InvalidServiceName", "The Vpc Endpoint Service '" .. tostring(name) .. "' does not exist")
  end
  local id = ctx.id("vpce")
  local e = {
    _id = id, VpcEndpointId = id, VpcEndpointType = kind, VpcId = vpc.VpcId, ServiceName = name,
    State = kind == "Gateway" and "available" or "pending", PolicyDocument = input.PolicyDocument or FULL_POLICY,
    RouteTableIds = json.array(), SubnetIds = json.array(), Groups = json.array(), NetworkInterfaceIds = json.array(),
    DnsEntries = json.array(), PrivateDnsEnabled = kind == "Interface" and input.PrivateDnsEnabled ~= false,
    RequesterManaged = false, CreationTimestamp = ctx.now(), OwnerId = ctx.account, IpAddressType = "ipv4",
    Tags = common.spec_tags(ctx, input, "vpc-endpoint"), _prefix_list = svc and prefix_list(ctx.region, svc),
  }
  if kind == "Gateway" then
    for _, rtb in ipairs(input.RouteTableIds or {}) do
      add_endpoint_route(ctx, e, rtb)
      e.RouteTableIds[#e.RouteTableIds + 1] = rtb
    end
  else
    for _, s in ipairs(input.SubnetIds or {}) do
      common.need(ctx, "subnet", s)
      e.SubnetIds[#e.SubnetIds + 1] = s
      e.NetworkInterfaceIds[#e.NetworkInterfaceIds + 1] = ctx.id("eni")
    end
    for _, g in ipairs(input.SecurityGroupIds or {}) do
      local sg = common.need(ctx, "sg", g)
      e.Groups[#e.Groups + 1] = { GroupId = g, GroupName = sg.GroupName }
    end
    e.DnsEntries[1] = { DnsName = string.format("%s-%s.%s", id, ctx.hex(8), name:gsub("^com%.amazonaws%.(.-)%.(.*)$",
      "%2.%1.vpce.amazonaws.com")), HostedZoneId = "Z1YSA3EXCYUU9Z" }
    ctx:later(90, "vpce_available", { id = id })
  end
  ctx.state:put("vpce", id, e)
  if input.ClientToken then ctx.state:put("vpce_token", input.ClientToken, { id = id }) end
  ctx.target = id
  return { VpcEndpoint = common.public(e), ClientToken = input.ClientToken }
end

M.transitions = {}
function M.transitions.vpce_available(ctx, args)
  local e = ctx.state:get("vpce", args.id)
  if e and e.State == "pending" then
    e.State = "available"
    ctx.state:put("vpce", args.id, e)
  end
end

function ops.ModifyVpcEndpoint(ctx, input)
  local e = common.need(ctx, "vpce", common.required(ctx, input, "VpcEndpointId"))
  for _, rtb in ipairs(input.AddRouteTableIds or {}) do
    add_endpoint_route(ctx, e, rtb)
    e.RouteTableIds[#e.RouteTableIds + 1] = rtb
  end
  for _, rtb in ipairs(input.RemoveRouteTableIds or {}) do
    remove_endpoint_route(ctx, e, rtb)
    local keep = json.array()
    for _, id in ipairs(e.RouteTableIds) do if id ~= rtb then keep[#keep + 1] = id end end
    e.RouteTableIds = keep
  end
  if input.ResetPolicy then e.PolicyDocument = FULL_POLICY elseif input.PolicyDocument then
    e.PolicyDocument = input.PolicyDocument
  end
  ctx.state:put("vpce", e.VpcEndpointId, e)
  ctx.target = e.VpcEndpointId
  return { Return = true }
end

local VPCE_FIELDS = {
  ["service-name"] = function(e) return e.ServiceName end,
  ["vpc-id"] = function(e) return e.VpcId end,
  ["vpc-endpoint-id"] = function(e) return e.VpcEndpointId end,
  ["vpc-endpoint-state"] = function(e) return e.State end,
  ["vpc-endpoint-type"] = function(e) return e.VpcEndpointType end,
}

function ops.DescribeVpcEndpoints(ctx, input)
  return { VpcEndpoints = common.describe(ctx, "vpce", input.VpcEndpointIds, input.Filters, VPCE_FIELDS) }
end

function ops.DeleteVpcEndpoints(ctx, input)
  local unsuccessful = json.array()
  ctx.target = (input.VpcEndpointIds or {})[1] -- what the audit log names
  for _, id in ipairs(input.VpcEndpointIds or {}) do
    local e = ctx.state:get("vpce", id)
    if not e then
      unsuccessful[#unsuccessful + 1] = { ResourceId = id, Error = { Code = "InvalidVpcEndpoint.NotFound",
        Message = "The Vpc Endpoint Id '" .. id .. "' does not exist" } }
    else
      for _, rtb in ipairs(e.RouteTableIds) do remove_endpoint_route(ctx, e, rtb) end
      ctx.state:delete("vpce", id)
    end
  end
  return { Unsuccessful = unsuccessful }
end

return M
