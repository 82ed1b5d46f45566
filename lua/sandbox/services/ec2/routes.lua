-- sandbox.services.ec2.routes: route tables (the local routes in each, the
-- VPC's main table, subnet associations, routes to internet and NAT
-- gateways; a route whose target is gone is a blackhole).
local cidr = require "sandbox.services.ec2.cidr"
local common = require "sandbox.services.ec2.common"
local json = require "hypd.json"

local M = { operations = {} }
local ops = M.operations

local function new_table(ctx, vpc, tags)
  local id = ctx.id("rtb")
  local t = {
    _id = id, RouteTableId = id, VpcId = vpc.VpcId, OwnerId = ctx.account, Tags = tags or json.array(),
    Routes = json.array(), Associations = json.array(), PropagatingVgws = json.array(),
  }
  for i, a in ipairs(vpc.CidrBlockAssociationSet) do
    t.Routes[i] = { DestinationCidrBlock = a.CidrBlock, GatewayId = "local", Origin = "CreateRouteTable", State = "active" }
  end
  return t
end

-- add_local / remove_local(ctx, vpc_id, cidr): a secondary VPC CIDR's local
-- route in every route table of the VPC
function M.add_local(ctx, vpc_id, block)
  for _, t in ipairs(ctx.state:list("rtb")) do
    if t.VpcId == vpc_id then
      t.Routes[#t.Routes + 1] = { DestinationCidrBlock = block, GatewayId = "local", Origin = "CreateRouteTable",
                                  State = "active" }
      ctx.state:put("rtb", t.RouteTableId, t)
    end
  end
end

function M.remove_local(ctx, vpc_id, block)
  for _, t in ipairs(ctx.state:list("rtb")) do
    if t.VpcId == vpc_id then
      local keep = json.array()
      for _, r in ipairs(t.Routes) do
        if not (r.GatewayId == "local" and r.DestinationCidrBlock == block) then keep[#keep + 1] = r end
      end
      t.Routes = keep
      ctx.state:put("rtb", t.RouteTableId, t)
    end
  end
end

-- create_main(ctx, vpc) -> the id of the VPC's new main route table
function M.create_main(ctx, vpc)
  local t = new_table(ctx, vpc)
  t.Associations[1] = { Main = true, RouteTableAssociationId = ctx.id("rtbassoc"), RouteTableId = t.RouteTableId,
                        AssociationState = { State = "associated" } }
  ctx.state:put("rtb", t.RouteTableId, t)
  return t.RouteTableId
end

-- forget_subnet(ctx, subnet_id): a deleted subnet leaves its association
function M.forget_subnet(ctx, subnet_id)
  for _, t in ipairs(ctx.state:list("rtb")) do
    local keep, changed = json.array(), false
    for _, a in ipairs(t.Associations) do
      if a.SubnetId == subnet_id then changed = true else keep[#keep + 1] = a end
    end
    if changed then
      t.Associations = keep
      ctx.state:put("rtb", t.RouteTableId, t)
    end
  end
end

-- a route whose target is gone is a blackhole
local function route_state(ctx, r)
  if r.NatGatewayId then
    local n = ctx.state:get("natgw", r.NatGatewayId)
    if not n or n.State == "deleted" or n.State == "deleting" or n.State == "failed" then return "blackhole" end
  elseif r.GatewayId and r.GatewayId:sub(1, 4) == "igw-" then
    local g = ctx.state:get("igw", r.GatewayId)
    if not g or #g.Attachments == 0 then return "blackhole" end
  end
  return "active"
end

local function render(ctx)
  return function(t)
    local out = common.public(t)
    out.Routes = json.array()
    for i, r in ipairs(t.Routes) do
      local copy = {}
      for k, v in pairs(r) do copy[k] = v end
      copy.State = route_state(ctx, r)
      out.Routes[i] = copy
    end
    return out
  end
end

function ops.CreateRouteTable(ctx, input)
  local vpc = common.need(ctx, "vpc", common.required(ctx, input, "VpcId"))
  if input.ClientToken then
    local seen = ctx.state:get("rtb_token", input.ClientToken)
    if seen then return { RouteTable = render(ctx)(common.need(ctx, "rtb", seen.id)), ClientToken = input.ClientToken } end
  end
  local t = new_table(ctx, vpc, common.spec_tags(ctx, input, "route-table"))
  ctx.state:put("rtb", t.RouteTableId, t)
  if input.ClientToken then ctx.state:put("rtb_token", input.ClientToken, { id = t.RouteTableId }) end
  ctx.target = t.RouteTableId
  return { RouteTable = render(ctx)(t), ClientToken = input.ClientToken }
end

local function each(t, f)
  local out = {}
  for _, x in ipairs(t) do
    local v = f(x)
    if v ~= nil then out[#out + 1] = v end
  end
  return out
end

local RTB_FIELDS = {
  ["vpc-id"] = function(t) return t.VpcId end,
  ["route-table-id"] = function(t) return t.RouteTableId end,
  ["owner-id"] = function(t) return t.OwnerId end,
  ["association.subnet-id"] = function(t) return each(t.Associations, function(a) return a.SubnetId end) end,
  ["association.main"] = function(t) return each(t.Associations, function(a) return a.Main end) end,
  ["association.route-table-association-id"] = function(t)
    return each(t.Associations, function(a) return a.RouteTableAssociationId end)
  end,
  ["association.route-table-id"] = function(t)
    return each(t.Associations, function(a) return a.RouteTableId end)
  end,
  ["route.destination-cidr-block"] = function(t) return each(t.Routes, function(r) return r.DestinationCidrBlock end) end,
  ["route.destination-prefix-list-id"] = function(t)
    return each(t.Routes, function(r) return r.DestinationPrefixListId end)
  end,
  ["route.gateway-id"] = function(t) return each(t.Routes, function(r) return r.GatewayId end) end,
  ["route.nat-gateway-id"] = function(t) return each(t.Routes, function(r) return r.NatGatewayId end) end,
  ["route.origin"] = function(t) return each(t.Routes, function(r) return r.Origin end) end,
}

function ops.DescribeRouteTables(ctx, input)
  local tables = common.describe(ctx, "rtb", input.RouteTableIds, input.Filters, RTB_FIELDS, render(ctx))
  if input.Filters then
    -- route.state needs the computed state
    for _, f in ipairs(input.Filters) do
      if f.Name == "route.state" then
        local keep = json.array()
        for _, t in ipairs(tables) do
          if common.matches(ctx, t, { f }, { ["route.state"] = function(x)
            return each(x.Routes, function(r) return r.State end)
          end }) then keep[#keep + 1] = t end
        end
        tables = keep
      end
    end
  end
  return { RouteTables = tables }
end
RTB_FIELDS["route.state"] = function() return { "active", "blackhole" } end

function ops.AssociateRouteTable(ctx, input)
  local t = common.need(ctx, "rtb", common.required(ctx, input, "RouteTableId"))
  local subnet = common.need(ctx, "subnet", common.required(ctx, input, "SubnetId"))
  if subnet.VpcId ~= t.VpcId then
    ctx.error("InvalidParameterValue", string.format("Route table %s and subnet %s belong to different networks",
      t.RouteTableId, subnet.SubnetId))
  end
  for _, other in ipairs(ctx.state:list("rtb")) do
    for _, a in ipairs(other.Associations) do
      if a.SubnetId == subnet.SubnetId then
        if other.RouteTableId == t.RouteTableId then
          return { AssociationId = a.RouteTableAssociationId, AssociationState = { State = "associated" } }
        end
        ctx.error("Resource.AlreadyAssociated", string.format("the specified association for route table %s conflicts " ..
          "with an existing association", t.RouteTableId))
      end
    end
  end
  local id = ctx.id("rtbassoc")
  t.Associations[#t.Associations + 1] = { Main = false, RouteTableAssociationId = id, RouteTableId = t.RouteTableId,
    SubnetId = subnet.SubnetId, AssociationState = { State = "associated" } }
  ctx.state:put("rtb", t.RouteTableId, t)
  ctx.target = t.RouteTableId
  return { AssociationId = id, AssociationState = { State = "associated" } }
end

function ops.DisassociateRouteTable(ctx, input)
  local id = common.required(ctx, input, "AssociationId", "associationId")
  for _, t in ipairs(ctx.state:list("rtb")) do
    for i, a in ipairs(t.Associations) do
      if a.RouteTableAssociationId == id then
        if a.Main then
          ctx.error("InvalidParameterValue", "cannot disassociate the main route table association " .. id)
        end
        table.remove(t.Associations, i)
        ctx.state:put("rtb", t.RouteTableId, t)
        ctx.target = t.RouteTableId
        return {}
      end
    end
  end
  ctx.error("InvalidAssociationID.NotFound", "The association ID '" .. tostring(id) .. "' does not exist")
end

-- target(ctx, t, input) -> the route's target members, validated
local function target(ctx, t, input)
  local given = {}
  for _, k in ipairs { "GatewayId", "NatGatewayId", "InstanceId", "NetworkInterfaceId", "VpcPeeringConnectionId",
    "TransitGatewayId", "EgressOnlyInternetGatewayId", "VpcEndpointId", "LocalGatewayId", "CarrierGatewayId" } do
    if input[k] then given[#given + 1] = k end
  end
  if #given == 0 then
    ctx.error("MissingParameter", "The request must contain exactly one of gatewayId, natGatewayId, networkInterfaceId, " ..
      "vpcPeeringConnectionId, transitGatewayId, egressOnlyInternetGatewayId, instanceId")
  elseif #given > 1 then
    ctx.error("InvalidParameterCombination", "More than one target specified for the route: " .. table.concat(given, ", "))
  end
  local k, v = given[1], input[given[1]]
  if k == "GatewayId" and v:sub(1, 4) == "igw-" then
    local g = common.need(ctx, "igw", v)
    local attached = false
    for _, a in ipairs(g.Attachments) do attached = attached or a.VpcId == t.VpcId end
    if not attached then
      ctx.error("InvalidParameterValue", string.format("route table %s and network gateway %s belong to different networks",
        t.RouteTableId, v))
    end
  elseif k == "NatGatewayId" then
    local n = ctx.state:get("natgw", v)
    if not n or n.State == "deleted" then
      ctx.error("InvalidNatGatewayID.NotFound", "The natGateway ID '" .. v .. "' does not exist")
    end
  elseif k == "GatewayId" and v:sub(1, 5) == "vpce-" then
    common.need(ctx, "vpce", v)
  end
  return { [k] = v }
end

local function destination(ctx, input)
  local d = common.required(ctx, input, "DestinationCidrBlock", "destinationCidrBlock")
  local b = cidr.parse(d)
  if not b then
    ctx.error("InvalidParameterValue", "Value (" .. tostring(d) .. ") for parameter destinationCidrBlock is invalid. " ..
      "This is not a valid CIDR block.")
  end
  return b.text
end

local function find_route(t, dest)
  for i, r in ipairs(t.Routes) do
    if r.DestinationCidrBlock == dest then return i, r end
  end
end

function ops.CreateRoute(ctx, input)
  local t = common.need(ctx, "rtb", common.required(ctx, input, "RouteTableId"))
  local dest = destination(ctx, input)
  local route = target(ctx, t, input)
  if find_route(t, dest) then
    ctx.error("RouteAlreadyExists", "The route identified by " .. dest .. " already exists.")
  end
  route.DestinationCidrBlock, route.Origin, route.State = dest, "CreateRoute", "active"
  t.Routes[#t.Routes + 1] = route
  ctx.state:put("rtb", t.RouteTableId, t)
  ctx.target = t.RouteTableId
  return { Return = true }
end

function ops.ReplaceRoute(ctx, input)
  local t = common.need(ctx, "rtb", common.required(ctx, input, "RouteTableId"))
  local dest = destination(ctx, input)
  local i, old = find_route(t, dest)
  if not i then
    ctx.error("InvalidParameterValue", "There is no route defined for '" .. dest .. "' in the route table. " ..
      "Use CreateRoute instead.")
  end
  if old.GatewayId == "local" and not input.LocalTarget then
    ctx.error("InvalidParameterValue", "cannot replace local route " .. dest .. " in route table " .. t.RouteTableId)
  end
  if not input.LocalTarget then
    local route = target(ctx, t, input)
    route.DestinationCidrBlock, route.Origin, route.State = dest, "CreateRoute", "active"
    t.Routes[i] = route
  end
  ctx.state:put("rtb", t.RouteTableId, t)
  ctx.target = t.RouteTableId
  return {}
end

function ops.DeleteRoute(ctx, input)
  local t = common.need(ctx, "rtb", common.required(ctx, input, "RouteTableId"))
  local dest = destination(ctx, input)
  local i, r = find_route(t, dest)
  if not i then
    ctx.error("InvalidRoute.NotFound", string.format("no route with destination-cidr-block %s in route table %s", dest,
      t.RouteTableId))
  end
  if r.GatewayId == "local" then
    ctx.error("InvalidParameterValue", "cannot remove local route " .. dest .. " in route table " .. t.RouteTableId)
  end
  table.remove(t.Routes, i)
  ctx.state:put("rtb", t.RouteTableId, t)
  ctx.target = t.RouteTableId
  return {}
end

function ops.DeleteRouteTable(ctx, input)
  local t = common.need(ctx, "rtb", common.required(ctx, input, "RouteTableId"))
  if #t.Associations > 0 then
    ctx.error("DependencyViolation", "The routeTable '" .. t.RouteTableId .. "' has dependencies and cannot be deleted.")
  end
  for _, e in ipairs(ctx.state:list("vpce")) do
    local keep, changed = json.array(), false
    for _, id in ipairs(e.RouteTableIds) do
      if id == t.RouteTableId then changed = true else keep[#keep + 1] = id end
    end
    if changed then
      e.RouteTableIds = keep
      ctx.state:put("vpce", e.VpcEndpointId, e)
    end
  end
  ctx.state:delete("rtb", t.RouteTableId)
  ctx.target = t.RouteTableId
  return {}
end

return M
