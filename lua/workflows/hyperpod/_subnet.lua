-- hyperpod/_subnet: the compute subnets HyperPod instances (and what sits
-- beside them: FSx for Lustre) live in, and the one allocator that chooses
-- their blocks.
--
--   allocate(cidrs, used [, prefix]) -> block, cidr | nil: the first free
--       /prefix (20) block of the VPC's CIDRs, in their order, that
--       overlaps none of used (the VPC's subnets)
--   secondary(cidrs [, prefix]) -> a CIDR to add to the VPC when allocate
--       finds no room: a /16 (prefix) of the primary CIDR's private range
--       (10.0.0.0/8, 172.16.0.0/12; 100.64.0.0/10 for 192.168.0.0/16) that
--       overlaps none of the VPC's CIDRs
--   zone(ctx, az) -> {name, id}: an Availability Zone by name or zone ID
--   ensure(ctx, o) -> {subnet_id, name, az, az_id, cidr, route_table_id,
--       vpc_endpoint_id, reused}: the compute subnet of zone o.az in VPC
--       o.vpc_id, made if missing (ctx:ensure, plans itself):
--         o.tag       the cluster tag (hypd:cluster-tag on all it makes)
--         o.eks       the EKS cluster name (the discovery tags)
--         o.group     an instance group: a dedicated subnet for it
--         o.prefix    the block size (default 20)
--         o.nat_gateway_id  the NAT gateway to route through (default:
--                     an available one of the VPC)
--       In a plan for a VPC that is itself planned, the block is chosen
--       only once the VPC exists (the plan shows no CidrBlock).
--
-- The shared subnet is named hp-compute-<az>, a dedicated one
-- hp-compute-<group>-<az> with tag hyperpod:dedicated-ig=<group>; both carry
-- karpenter.sh/discovery=<eks>, kubernetes.io/role/internal-elb=1 and
-- kubernetes.io/cluster/<eks>=shared. An existing subnet of that name in the
-- VPC is reused (one another tool made is used as it is, never retagged).
-- A new one gets a route table <name>-rt with 0.0.0.0/0 through the VPC's
-- NAT gateway, and the VPC's S3 gateway endpoint serves that route table
-- (the endpoint is made when the VPC has none). A block is chosen once,
-- by allocate, in the VPC's free space; when no /20 is left a secondary
-- CIDR is associated with the VPC first (ec2 AssociateVpcCidrBlock).
local Names = require "_names"
local cidr = hypd.cidr
local errors = hypd.errors
local net = require "_network"

local M = {}

-- the AWS actions ensure calls (for the aws list of a tool that uses it)
M.AWS = { "ec2:Describe*", "ec2:CreateSubnet", "ec2:CreateTags", "ec2:AssociateVpcCidrBlock", "ec2:CreateRouteTable",
  "ec2:CreateRoute", "ec2:ReplaceRoute", "ec2:AssociateRouteTable", "ec2:CreateVpcEndpoint", "ec2:ModifyVpcEndpoint" }

M.PREFIX = 20            -- the compute subnet's size
M.SECONDARY_PREFIX = 16  -- the size of a secondary VPC CIDR
M.DEDICATED_TAG = "hyperpod:dedicated-ig"
M.CIDR_POLL, M.CIDR_LIMIT = 5, 5 * 60 -- a new VPC CIDR is associating for a few seconds

-- name(az [, group]) -> "hp-compute-<az>" | "hp-compute-<group>-<az>"
function M.name(az, group)
  return "hp-compute-" .. (group and (group .. "-") or "") .. az
end

-- the allocator -----------------------------------------------------------------

function M.allocate(cidrs, used, prefix)
  prefix = prefix or M.PREFIX
  for _, c in ipairs(cidrs) do
    local b = cidr.parse(c)
    if b and b.prefix <= prefix then
      local free = cidr.next_free(c, used, prefix)
      if free then return free, c end
    end
  end
end

local POOLS = {
  { "10.0.0.0/8", "10.0.0.0/8" },
  { "172.16.0.0/12", "172.16.0.0/12" },
  { "192.168.0.0/16", "100.64.0.0/10" }, -- 192.168/16 has no room beside itself
}

function M.secondary(cidrs, prefix)
  prefix = prefix or M.SECONDARY_PREFIX
  local primary = cidrs[1]
  local pool = "100.64.0.0/10"
  for _, p in ipairs(POOLS) do
    if primary and cidr.contains(p[1], primary) then pool = p[2] end
  end
  return cidr.next_free(pool, cidrs, prefix)
end

-- reads ------------------------------------------------------------------------------

local function filter(name, ...) return { Name = name, Values = { ... } } end

function M.zone(ctx, az)
  local by_id = tostring(az):match("%-az%d+$") ~= nil
  local out, err = ctx:try("ec2", "DescribeAvailabilityZones", by_id and { ZoneIds = { az } } or { ZoneNames = { az } })
  if not out and err.code ~= "InvalidParameterValue" then error(err, 0) end
  local z = out and (out.AvailabilityZones or {})[1]
  if not z then
    errors.refuse("availability_zone", "exists", tostring(az) .. " is no Availability Zone of " .. ctx:aws_region(),
      { prefix = "message" })
  end
  return { name = z.ZoneName, id = z.ZoneId }
end

-- vpc_cidrs(ctx, vpc_id) -> the VPC's associated (or associating) IPv4 CIDRs, primary first
local function vpc_cidrs(ctx, vpc_id)
  local v = (ctx:call("ec2", "DescribeVpcs", { VpcIds = { vpc_id } }).Vpcs or {})[1]
  if not v then errors.raise("NOT_FOUND", "VPC " .. tostring(vpc_id) .. " is gone", { vpc_id = vpc_id }) end
  local out = {}
  for _, a in ipairs(v.CidrBlockAssociationSet or { { CidrBlock = v.CidrBlock } }) do
    local state = a.CidrBlockState and a.CidrBlockState.State or "associated"
    if state == "associated" or state == "associating" then out[#out + 1] = a.CidrBlock end
  end
  return out
end

local function blocks_of(subnets)
  local out = {}
  for _, s in ipairs(subnets) do out[#out + 1] = s.CidrBlock end
  return out
end

-- nat(ctx, vpc_id, subnets, az) -> the NAT gateway compute traffic leaves by:
-- an available one of the VPC, the one in the same zone first
local function nat(ctx, vpc_id, subnets, az)
  local zone_of = {}
  for _, s in ipairs(subnets) do zone_of[s.SubnetId] = s.AvailabilityZone end
  local best
  for _, n in ipairs(ctx:call("ec2", "DescribeNatGateways", { Filter = { filter("vpc-id", vpc_id),
      filter("state", "available") } }).NatGateways or {}) do
    local here = zone_of[n.SubnetId] == az
    if not best or (here and not best.here) or (here == best.here and n.NatGatewayId < best.id) then
      best = { id = n.NatGatewayId, here = here }
    end
  end
  if not best then
    errors.raise("CONFLICT", "VPC " .. vpc_id .. " has no available NAT gateway; HyperPod instances in a private " ..
      "compute subnet reach AWS through one (cluster_create_eks makes it)", { vpc_id = vpc_id })
  end
  return best.id
end

-- the pieces -----------------------------------------------------------------------

-- secondary_cidr(ctx, o, cidrs) -> the VPC's CIDRs with a new one (its first /20 is free)
local function secondary_cidr(ctx, o, cidrs)
  local block = M.secondary(cidrs)
  if not block then
    errors.raise("CONFLICT", "VPC " .. o.vpc_id .. " has no free /" .. (o.prefix or M.PREFIX) .. " and no " ..
      "private range is left for a secondary CIDR", { vpc_id = o.vpc_id })
  end
  local v = ctx:ensure { type = "ec2:vpc-cidr-block", label = "VPC CIDR block", name = block .. " of " .. o.vpc_id,
    needs = o.vpc_id, id = "CidrBlock", fields = { VpcId = o.vpc_id, CidrBlock = block },
    search = function() return nil end, -- allocate found no room in any CIDR the VPC has
    create = function()
      local a = ctx:call("ec2", "AssociateVpcCidrBlock", { VpcId = o.vpc_id, CidrBlock = block })
      return { CidrBlock = a.CidrBlockAssociation.CidrBlock, AssociationId = a.CidrBlockAssociation.AssociationId }
    end }
  ctx:poll { what = "CIDR " .. block .. " to be associated with " .. o.vpc_id, every = M.CIDR_POLL,
    timeout = M.CIDR_LIMIT, check = function()
      local vv = (ctx:call("ec2", "DescribeVpcs", { VpcIds = { o.vpc_id } }).Vpcs or {})[1] or {}
      for _, a in ipairs(vv.CidrBlockAssociationSet or {}) do
        if a.CidrBlock == v.CidrBlock then
          local state = (a.CidrBlockState or {}).State
          if state == "failed" then
            errors.raise("FAILED", "associating " .. block .. " with " .. o.vpc_id .. " failed: " ..
              tostring((a.CidrBlockState or {}).StatusMessage), { vpc_id = o.vpc_id })
          end
          return state == "associated", "CIDR " .. block .. " " .. tostring(state)
        end
      end
      return false, "CIDR " .. block .. " not listed yet"
    end }
  local out = { table.unpack(cidrs) }
  out[#out + 1] = block
  return out
end

local function subnet_tags(o, name)
  local tags = { [Names.TAG] = o.tag, Name = name, ["karpenter.sh/discovery"] = o.eks,
    ["kubernetes.io/role/internal-elb"] = "1", ["kubernetes.io/cluster/" .. o.eks] = "shared" }
  if o.group then tags[M.DEDICATED_TAG] = o.group end
  return tags
end

-- s3_endpoint(ctx, o, rt_id) -> the VPC's S3 gateway endpoint, serving rt_id
local function s3_endpoint(ctx, o, rt_id)
  local service = "com.amazonaws." .. ctx:aws_region() .. ".s3"
  local name = Names.eks(o.tag, "s3")
  local made = false
  local e = ctx:ensure(net.ec2(ctx, { type = "ec2:vpc-endpoint", label = "S3 gateway endpoint", name = name,
    tag = o.tag, needs = o.vpc_id,
    describe = { "DescribeVpcEndpoints", "VpcEndpointIds", "VpcEndpoints", "VpcEndpointId" },
    filters = { filter("vpc-id", o.vpc_id), filter("service-name", service), filter("vpc-endpoint-type", "Gateway") },
    live = function(x) return x.State ~= "deleted" and x.State ~= "deleting" end,
    fields = { VpcId = o.vpc_id, ServiceName = service, VpcEndpointType = "Gateway", RouteTableIds = { rt_id } },
    placeholder = function(id)
      made = true
      return { VpcEndpointId = id, RouteTableIds = { rt_id } }
    end,
    create = function()
      made = true
      return ctx:call("ec2", "CreateVpcEndpoint", { VpcId = o.vpc_id, ServiceName = service,
        VpcEndpointType = "Gateway", RouteTableIds = { rt_id },
        TagSpecifications = net.spec("vpc-endpoint", o.tag, name) }).VpcEndpoint
    end }))
  if not made then -- an endpoint the VPC had (hypd's or not) also serves the new route table
    ctx:ensure { type = "ec2:vpc-endpoint-route-table", label = "S3 endpoint route", name = e.VpcEndpointId ..
      " for " .. o.rt_name, needs = { e.VpcEndpointId, rt_id }, id = function() return rt_id end,
      fields = { VpcEndpointId = e.VpcEndpointId, AddRouteTableIds = { rt_id } }, retry = net.not_yet,
      retry_every = net.SETTLE_EVERY, retry_for = net.SETTLE_FOR,
      search = function()
        for _, id in ipairs(e.RouteTableIds or {}) do if id == rt_id then return { id = id } end end
      end,
      create = function()
        ctx:call("ec2", "ModifyVpcEndpoint", { VpcEndpointId = e.VpcEndpointId, AddRouteTableIds = { rt_id } })
        return { id = rt_id }
      end }
  end
  return e.VpcEndpointId
end

function M.ensure(ctx, o)
  local z = M.zone(ctx, o.az)
  local name = M.name(z.name, o.group)
  local subnets = ctx:call("ec2", "DescribeSubnets", { Filters = { filter("vpc-id", o.vpc_id) } }).Subnets or {}
  table.sort(subnets, function(a, b) return a.SubnetId < b.SubnetId end)
  local existing
  for _, s in ipairs(subnets) do
    if not existing and net.tag_value(s.Tags, "Name") == name then existing = s end
  end
  if existing and net.tag_value(existing.Tags, Names.TAG) ~= o.tag then
    -- made by someone else (another tool, a person): used as it is
    if existing.AvailabilityZone ~= z.name then
      errors.raise("CONFLICT", "subnet " .. existing.SubnetId .. " is named " .. name .. " but lies in " ..
        tostring(existing.AvailabilityZone) .. "; rename it, or choose another availability_zone",
        { field = "availability_zone" })
    end
    ctx:progress("reusing subnet " .. existing.SubnetId .. " (" .. name .. "), not made by hypd, as it is")
    return { subnet_id = existing.SubnetId, name = name, az = z.name, az_id = z.id, cidr = existing.CidrBlock,
      reused = true }
  end
  local block
  local planned_vpc = hypd.kit.is_planned(o.vpc_id)
  if not existing and not planned_vpc then
    local cidrs = vpc_cidrs(ctx, o.vpc_id)
    block = M.allocate(cidrs, blocks_of(subnets), o.prefix)
    if not block then
      cidrs = secondary_cidr(ctx, o, cidrs)
      block = M.allocate(cidrs, blocks_of(subnets), o.prefix)
    end
  end
  local tags = subnet_tags(o, name)
  local extra = {}
  for k, v in pairs(tags) do if k ~= Names.TAG and k ~= "Name" then extra[k] = v end end
  local tried = false
  local s = ctx:ensure(net.ec2(ctx, { type = "ec2:subnet", label = "subnet", name = name, tag = o.tag,
    needs = o.vpc_id, describe = { "DescribeSubnets", "SubnetIds", "Subnets", "SubnetId" },
    search = function() -- found in the VPC's list above; after a create whose answer was lost, read again
      if not tried then return existing end
      return (ctx:call("ec2", "DescribeSubnets", { Filters = { filter("vpc-id", o.vpc_id),
        filter("tag:" .. Names.TAG, o.tag), filter("tag:Name", name) } }).Subnets or {})[1]
    end, tags = tags,
    fields = { VpcId = o.vpc_id, CidrBlock = block, AvailabilityZone = z.name },
    placeholder = function(id) return { SubnetId = id, CidrBlock = block, AvailabilityZone = z.name } end,
    create = function()
      tried = true
      local req = { VpcId = o.vpc_id, CidrBlock = block, AvailabilityZoneId = z.id,
        TagSpecifications = net.spec("subnet", o.tag, name, extra) }
      local out, err = ctx:try("ec2", "CreateSubnet", req)
      if not out and err.code == "InvalidSubnet.Conflict" then
        -- another allocation took the block meanwhile: the next free one
        local now = ctx:call("ec2", "DescribeSubnets", { Filters = { filter("vpc-id", o.vpc_id) } }).Subnets or {}
        req.CidrBlock = M.allocate(vpc_cidrs(ctx, o.vpc_id), blocks_of(now), o.prefix) or block
        out, err = ctx:try("ec2", "CreateSubnet", req)
      end
      if not out then error(err, 0) end
      return out.Subnet
    end }))
  local rt_name = name .. "-rt"
  o.rt_name = rt_name
  local rt_id = net.route_table(ctx, { tag = o.tag, name = rt_name, vpc_id = o.vpc_id,
    key = "route_table:" .. name, target_field = "NatGatewayId",
    target = o.nat_gateway_id or nat(ctx, o.vpc_id, subnets, z.name),
    subnets = { { id = s.SubnetId, name = name } } })
  local vpce = s3_endpoint(ctx, o, rt_id)
  return { subnet_id = s.SubnetId, name = name, az = z.name, az_id = z.id, cidr = s.CidrBlock or block,
    route_table_id = rt_id, vpc_endpoint_id = vpce, reused = existing ~= nil }
end

return M
