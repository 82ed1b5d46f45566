-- cluster/_eks_network: the network under a hypd EKS cluster, what the
-- network's steps of cluster_create_eks call, made with the names, tags and
-- EC2 ensure specs of _network.
--
-- For cluster tag <tag> in one region it declares (ctx:ensure, hypd.tool.kit):
--   vpc               VPC hypd-<tag>-vpc, DNS support and hostnames on
--   internet_gateway  internet gateway hypd-<tag>-igw, attached to the VPC
--   subnets           in the first two zones EKS supports, a public and a
--                     private subnet each: hypd-<tag>-public-<az> (tag
--                     kubernetes.io/role/elb=1, public IPs on launch) and
--                     hypd-<tag>-private-<az> (kubernetes.io/role/internal-elb=1),
--                     slots hypd:subnet=public-1, public-2, private-1, private-2,
--                     blocks of a sixteenth of the VPC (hypd.cidr), or the
--                     blocks public_subnet_cidrs and private_subnet_cidrs name
--                     (check_subnet_cidrs: all four or none, inside the VPC,
--                     no two overlapping)
--   nat_gateway       Elastic IP hypd-<tag>-nat-eip, NAT gateway hypd-<tag>-nat
--                     in the first public subnet (not waited for here)
--   public_routes     route table hypd-<tag>-public-rt, 0.0.0.0/0 -> the
--                     internet gateway, associated with the public subnets
--   security_group    hypd-<tag>-cluster, all traffic within the group
--   private_routes    waits for the NAT gateway; hypd-<tag>-private-rt,
--                     0.0.0.0/0 -> NAT, associated with the private subnets
--
-- Everything carries hypd:cluster-tag=<tag> and Name, set by the create call
-- itself (TagSpecifications), so a crash between create and tag cannot leave
-- an untagged resource. The kit finds each resource by the id in ctx.state,
-- else by tag, creates only what is missing and changes only what differs;
-- a plan reads the same way and lists what it would do.
local cidr = hypd.cidr
local errors = hypd.errors
local net = require "_network"
local filter, not_found = net.filter, net.not_found

local M = {}

M.SLOT_KEY = "hypd:subnet"                 -- public-1, public-2, private-1, private-2
M.NAT_POLL, M.NAT_LIMIT = 15, 20 * 60      -- seconds between NAT checks; give up after

-- Zones where EKS places no control plane (CreateCluster answers
-- UnsupportedAvailabilityZoneException for subnets there).
M.EKS_UNSUPPORTED_ZONE_IDS = { ["use1-az3"] = true, ["usw1-az2"] = true, ["cac1-az3"] = true }

-- CIDR blocks (hypd.cidr) ------------------------------------------------------

M.parse_cidr, M.format_cidr, M.subnet_prefix, M.next_free = cidr.parse, cidr.format, cidr.subnet_prefix,
  cidr.next_free

-- check_subnet_cidrs(p): the tool's validate (before anything is created): the
-- explicit subnet blocks come all four or not at all (public_subnet_cidrs and
-- private_subnet_cidrs, two each), each an IPv4 block /16 to /28 inside
-- vpc_cidr, no two overlapping. Raises VALIDATION naming every field and rule
-- that fails.
M.SUBNET_FIELDS = { "public_subnet_cidrs", "private_subnet_cidrs" }
M.SUBNET_PREFIX_MIN, M.SUBNET_PREFIX_MAX = 16, 28 -- what EC2 allows a subnet

function M.check_subnet_cidrs(p)
  local pub, priv = p.public_subnet_cidrs, p.private_subnet_cidrs
  if pub == nil and priv == nil then return end
  local fields = {}
  local function add(field, rule, message) fields[#fields + 1] = { field = field, rule = rule, message = field .. ": " ..
    message } end
  for i, f in ipairs(M.SUBNET_FIELDS) do
    local other = M.SUBNET_FIELDS[3 - i]
    if p[f] == nil then
      add(f, "all_or_none", "required with " .. other .. ": give the CIDRs of all four subnets (two public, two " ..
        "private) or of none")
    elseif #p[f] ~= 2 then
      add(f, "count", "must list exactly two CIDRs (the first zone's subnet, then the second's); got " .. #p[f])
    end
  end
  local vpc = cidr.parse(p.vpc_cidr)
  local blocks = {}
  for _, f in ipairs(M.SUBNET_FIELDS) do
    for i, text in ipairs(p[f] or {}) do
      local name = string.format("%s[%d]", f, i - 1)
      local b, why = cidr.parse(text)
      if not b then
        add(name, "cidr", tostring(text) .. " is " .. why)
      elseif b.prefix < M.SUBNET_PREFIX_MIN or b.prefix > M.SUBNET_PREFIX_MAX then
        add(name, "prefix", string.format("%s: a subnet's prefix must be /%d to /%d", text, M.SUBNET_PREFIX_MIN,
          M.SUBNET_PREFIX_MAX))
      elseif vpc and not cidr.contains(vpc, b) then
        add(name, "within_vpc", string.format("%s is not inside vpc_cidr %s", text, p.vpc_cidr))
      else
        for _, o in ipairs(blocks) do
          if cidr.overlaps(o.block, b) then
            add(name, "overlap", string.format("%s overlaps %s (%s)", text, o.name, o.text))
          end
        end
        blocks[#blocks + 1] = { block = b, name = name, text = text }
      end
    end
  end
  if #fields > 0 then
    local msgs = {}
    for i, f in ipairs(fields) do msgs[i] = f.message end
    errors.refuse_all(fields, "cluster_create_eks: " .. table.concat(msgs, "; "))
  end
end

-- the steps --------------------------------------------------------------------

local function zones(ctx)
  local st = ctx.state
  if st.zones and #st.zones >= 2 then return st.zones end
  local all = ctx:call("ec2", "DescribeAvailabilityZones", { Filters = { filter("state", "available"),
    filter("zone-type", "availability-zone") } }).AvailabilityZones or {}
  table.sort(all, function(a, b) return a.ZoneName < b.ZoneName end)
  local out = {}
  for _, z in ipairs(all) do
    if not M.EKS_UNSUPPORTED_ZONE_IDS[z.ZoneId] and #out < 2 then out[#out + 1] = z.ZoneName end
  end
  if #out < 2 then
    errors.refuse("region", "validation", "region " .. ctx.region .. " has fewer than two availability zones EKS " ..
      "supports")
  end
  st.zones = out
  return out
end

local DNS = { "EnableDnsSupport", "EnableDnsHostnames" } -- support first: EC2 refuses hostnames without it

function M.vpc(ctx)
  local p, st = ctx.params, ctx.state
  local tag = p.cluster_tag
  st.region, st.cluster_tag = st.region or ctx.region, tag
  local block, why = M.parse_cidr(p.vpc_cidr)
  if not block or block.prefix < 16 or block.prefix > 24 then
    errors.refuse("vpc_cidr", "validation", "vpc_cidr " .. tostring(p.vpc_cidr) .. ": " ..
      (why or "the prefix must be /16 to /24"))
  end
  M.check_subnet_cidrs(p) -- the call was checked; a resumed operation is too
  zones(ctx)
  local name = net.name(tag, "vpc")
  local attrs = {}
  for _, a in ipairs(DNS) do
    attrs[a] = function(id, v) ctx:call("ec2", "ModifyVpcAttribute", { VpcId = id, [a] = { Value = v } }) end
  end
  local vpc = ctx:ensure(net.ec2(ctx, { type = "ec2:vpc", label = "VPC", name = name, key = "vpc_id",
    describe = { "DescribeVpcs", "VpcIds", "Vpcs", "VpcId" }, filters = { filter("tag:" .. net.TAG_KEY, tag) },
    unique = true, fields = { CidrBlock = p.vpc_cidr }, desired = { EnableDnsSupport = true, EnableDnsHostnames = true },
    current = function(v)
      local cur = {}
      for _, a in ipairs(DNS) do
        local out = ctx:call("ec2", "DescribeVpcAttribute", { VpcId = v.VpcId, Attribute = a:sub(1, 1):lower() ..
          a:sub(2) })
        cur[a] = (out[a] or {}).Value == true
      end
      return cur
    end,
    attrs = attrs, attr_order = DNS,
    placeholder = function(id) return { VpcId = id, CidrBlock = p.vpc_cidr } end,
    create = function()
      return ctx:call("ec2", "CreateVpc", { CidrBlock = p.vpc_cidr, TagSpecifications = net.spec("vpc", tag, name) }).Vpc
    end }))
  if vpc.CidrBlock ~= p.vpc_cidr then
    ctx:progress("reusing VPC " .. vpc.VpcId .. " with its CIDR " .. tostring(vpc.CidrBlock) .. " (not " ..
      tostring(p.vpc_cidr) .. ")")
  end
  st.vpc_id, st.vpc_cidr = vpc.VpcId, vpc.CidrBlock
end

function M.internet_gateway(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = net.name(tag, "igw")
  local vpc_id = st.vpc_id
  -- a gateway someone else attached to this VPC serves as well
  local igw = ctx:ensure(net.ec2(ctx, { type = "ec2:internet-gateway", label = "internet gateway", name = name,
    key = "internet_gateway_id", describe = { "DescribeInternetGateways", "InternetGatewayIds", "InternetGateways",
      "InternetGatewayId" }, filters = { filter("tag:" .. net.TAG_KEY, tag) },
    also = { filter("attachment.vpc-id", vpc_id) },
    create = function()
      return ctx:call("ec2", "CreateInternetGateway", { TagSpecifications = net.spec("internet-gateway", tag, name) })
        .InternetGateway
    end }))
  local tried = false
  ctx:ensure { type = "ec2:internet-gateway-attachment", label = "internet gateway attachment",
    name = name .. " to " .. net.name(tag, "vpc"), needs = { igw.InternetGatewayId, vpc_id }, field = "cluster_tag",
    id = function(a) return a.VpcId end, fields = { InternetGatewayId = igw.InternetGatewayId, VpcId = vpc_id },
    search = function() -- the gateway as read above; after an attach whose answer was lost, read again
      if not tried then return (igw.Attachments or {})[1] end
      local now = ctx:call("ec2", "DescribeInternetGateways", { InternetGatewayIds = { igw.InternetGatewayId } })
      return (((now.InternetGateways or {})[1] or {}).Attachments or {})[1]
    end,
    owned = function(a)
      return a.VpcId == vpc_id, "it attaches " .. tostring(igw.InternetGatewayId) .. " to " .. tostring(a.VpcId) ..
        ", not to " .. tostring(vpc_id)
    end,
    retry = net.not_yet, retry_every = net.SETTLE_EVERY, retry_for = net.SETTLE_FOR,
    create = function()
      tried = true
      ctx:call("ec2", "AttachInternetGateway", { InternetGatewayId = igw.InternetGatewayId, VpcId = vpc_id })
      return { VpcId = vpc_id, State = "attached" }
    end }
  st.internet_gateway_id = igw.InternetGatewayId
end

local SLOTS = {
  { role = "public", n = 1 }, { role = "public", n = 2 }, { role = "private", n = 1 }, { role = "private", n = 2 },
}
local ELB_TAG = { public = "kubernetes.io/role/elb", private = "kubernetes.io/role/internal-elb" }

-- explicit(p) -> {[slot] = {block, field}} for the subnet blocks the caller
-- named (public_subnet_cidrs, private_subnet_cidrs), or nil
local function explicit(p)
  if not p.public_subnet_cidrs then return nil end
  local out = {}
  for _, slot in ipairs(SLOTS) do
    local f = slot.role .. "_subnet_cidrs"
    out[slot.role .. "-" .. slot.n] = { block = p[f][slot.n], field = string.format("%s[%d]", f, slot.n - 1) }
  end
  return out
end

-- subnet_blocks(vpc_cidr, existing, azs, tag [, wanted]) -> {[slot] = {block, az, subnet}}: where each slot's
-- subnet is or goes. existing: the VPC's subnets; hypd's (tagged with the slot and this
-- tag) keep their place; a missing one takes the first free block, in slot
-- order, and its slot's zone (the other zone when its sibling took that one).
-- wanted (explicit()): the blocks the caller named; a subnet hypd has in a
-- slot with another block, or a named block the VPC cannot take (outside
-- its CIDR, overlapping a subnet already there), is a CONFLICT naming the field
function M.subnet_blocks(vpc_cidr, existing, azs, tag, wanted)
  local by_slot, used = {}, {}
  table.sort(existing, function(a, b) return a.SubnetId < b.SubnetId end)
  for _, s in ipairs(existing) do
    used[#used + 1] = s.CidrBlock
    local slot = net.tag_value(s.Tags, M.SLOT_KEY)
    if slot and net.tag_value(s.Tags, net.TAG_KEY) == tag and not by_slot[slot] then by_slot[slot] = s end
  end
  local out = {}
  for _, slot in ipairs(SLOTS) do
    local key = slot.role .. "-" .. slot.n
    local s = by_slot[key]
    local want = wanted and wanted[key]
    if s and want and s.CidrBlock ~= want.block then
      errors.raise("CONFLICT", string.format("%s: subnet %s (%s) exists with the block %s, not %s; a subnet's block " ..
        "cannot change: give its block, or leave the subnet CIDRs out", want.field, s.SubnetId, key,
        tostring(s.CidrBlock), want.block), { field = want.field, rule = "fixed", subnet_id = s.SubnetId })
    end
    if s then
      out[key] = { block = s.CidrBlock, az = s.AvailabilityZone, subnet = s }
    else
      local az = azs[slot.n]
      local sib = slot.role .. "-" .. (3 - slot.n)
      local sibling = out[sib] or (by_slot[sib] and { az = by_slot[sib].AvailabilityZone })
      if sibling and sibling.az == az then az = azs[3 - slot.n] end
      local block = want and want.block or M.next_free(vpc_cidr, used)
      if want then
        if not cidr.contains(vpc_cidr, block) then
          errors.raise("CONFLICT", string.format("%s: %s is not inside the VPC's block %s (the VPC hypd reuses)",
            want.field, block, vpc_cidr), { field = want.field, rule = "within_vpc" })
        end
        for _, u in ipairs(used) do
          if cidr.overlaps(u, block) then
            errors.raise("CONFLICT", string.format("%s: %s overlaps %s, a subnet already in the VPC", want.field,
              block, u), { field = want.field, rule = "overlap" })
          end
        end
      end
      if not block then
        errors.raise("CONFLICT", "the VPC's block " .. vpc_cidr .. " has no free block for subnet " .. key,
          { field = "vpc_cidr" })
      end
      used[#used + 1] = block
      out[key] = { block = block, az = az }
    end
  end
  return out
end


function M.subnets(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local vpc_id = st.vpc_id
  local existing = ctx:call("ec2", "DescribeSubnets", { Filters = { filter("vpc-id", vpc_id) } }).Subnets or {}
  local where = M.subnet_blocks(st.vpc_cidr, existing, st.zones, tag, explicit(ctx.params))
  local out, names = { public = {}, private = {} }, {}
  for _, slot in ipairs(SLOTS) do
    local key = slot.role .. "-" .. slot.n
    local w = where[key]
    local name = w.subnet and net.tag_value(w.subnet.Tags, "Name") or net.name(tag, slot.role .. "-" .. w.az)
    local elb = { [M.SLOT_KEY] = key, [ELB_TAG[slot.role]] = "1" }
    local tried = false
    local s = ctx:ensure(net.ec2(ctx, { type = "ec2:subnet", label = "subnet", name = name, needs = vpc_id,
      describe = { "DescribeSubnets", "SubnetIds", "Subnets", "SubnetId" },
      search = function() -- found in the VPC's list above, by its slot; after a create whose answer was lost, read again
        if not tried then return w.subnet end
        return (ctx:call("ec2", "DescribeSubnets", { Filters = { filter("vpc-id", vpc_id),
          filter("tag:" .. net.TAG_KEY, tag), filter("tag:" .. M.SLOT_KEY, key) } }).Subnets or {})[1]
      end,
      tags = { [net.TAG_KEY] = tag, [ELB_TAG[slot.role]] = "1" },
      desired = { MapPublicIpOnLaunch = slot.role == "public" or nil }, attr_order = { "MapPublicIpOnLaunch" },
      attrs = { MapPublicIpOnLaunch = function(id, v)
        ctx:call("ec2", "ModifySubnetAttribute", { SubnetId = id, MapPublicIpOnLaunch = { Value = v } })
      end },
      fields = { VpcId = vpc_id, CidrBlock = w.block, AvailabilityZone = w.az, ["tag:" .. M.SLOT_KEY] = key },
      create = function()
        tried = true
        return ctx:call("ec2", "CreateSubnet", { VpcId = vpc_id, CidrBlock = w.block, AvailabilityZone = w.az,
          TagSpecifications = net.spec("subnet", tag, name, elb) }).Subnet
      end }))
    out[slot.role][slot.n], names[s.SubnetId] = s.SubnetId, name
  end
  st.public_subnet_ids, st.private_subnet_ids, st.subnet_names = out.public, out.private, names
end

local function nat_live(n) return n.State == "pending" or n.State == "available" end

function M.nat_gateway(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local eip_name, name = net.name(tag, "nat-eip"), net.name(tag, "nat")
  local subnet_id = st.public_subnet_ids[1]
  local eip = ctx:ensure(net.ec2(ctx, { type = "ec2:elastic-ip", label = "Elastic IP", name = eip_name,
    key = "eip_allocation_id", describe = { "DescribeAddresses", "AllocationIds", "Addresses", "AllocationId" },
    filters = { filter("tag:" .. net.TAG_KEY, tag), filter("tag:Name", eip_name) }, fields = { Domain = "vpc" },
    create = function()
      return ctx:call("ec2", "AllocateAddress", { Domain = "vpc",
        TagSpecifications = net.spec("elastic-ip", tag, eip_name) })
    end }))
  local nat = ctx:ensure(net.ec2(ctx, { type = "ec2:nat-gateway", label = "NAT gateway", name = name,
    key = "nat_gateway_id", describe = { "DescribeNatGateways", "NatGatewayIds", "NatGateways", "NatGatewayId" },
    filter_param = "Filter", filters = { filter("vpc-id", st.vpc_id), filter("tag:" .. net.TAG_KEY, tag) },
    live = nat_live, needs = st.vpc_id,
    order = function(a, b) -- an available gateway first
      if (a.State == "available") ~= (b.State == "available") then return a.State == "available" end
      return a.NatGatewayId < b.NatGatewayId
    end,
    fields = { SubnetId = subnet_id, AllocationId = eip.AllocationId, ConnectivityType = "public" },
    create = function()
      return ctx:call("ec2", "CreateNatGateway", { SubnetId = subnet_id, AllocationId = eip.AllocationId,
        ConnectivityType = "public", TagSpecifications = net.spec("natgateway", tag, name) }).NatGateway
    end }))
  st.nat_gateway_id = nat.NatGatewayId
end

-- routes(ctx, kind, target): route table hypd-<tag>-<kind>-rt with
-- 0.0.0.0/0 -> target ({GatewayId = igw} or {NatGatewayId = nat}),
-- associated with the <kind> subnets
local function routes(ctx, kind, target_field, target)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local subnets = {}
  for i, sid in ipairs(st[kind .. "_subnet_ids"]) do subnets[i] = { id = sid, name = (st.subnet_names or {})[sid] } end
  st[kind .. "_route_table_id"] = net.route_table(ctx, { tag = tag, name = net.name(tag, kind .. "-rt"),
    vpc_id = st.vpc_id, key = kind .. "_route_table_id", target_field = target_field, target = target,
    subnets = subnets })
end

function M.public_routes(ctx) routes(ctx, "public", "GatewayId", ctx.state.internet_gateway_id) end

function M.security_group(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = net.name(tag, "cluster")
  local vpc_id = st.vpc_id
  local sg_spec = net.ec2(ctx, { type = "ec2:security-group", label = "security group", name = name,
    key = "security_group_id", describe = { "DescribeSecurityGroups", "GroupIds", "SecurityGroups", "GroupId" },
    filters = { filter("vpc-id", vpc_id), filter("group-name", name) }, needs = vpc_id,
    tags = { [net.TAG_KEY] = tag, Name = name }, exists = "InvalidGroup.Duplicate", fields = { VpcId = vpc_id },
    create = function()
      local out = ctx:call("ec2", "CreateSecurityGroup", { GroupName = name, VpcId = vpc_id,
        Description = "hypd " .. tag .. ": EKS control plane and nodes, all traffic within the group",
        TagSpecifications = net.spec("security-group", tag, name) })
      return { GroupId = out.GroupId, Tags = out.Tags or net.tag_list(tag, name), IpPermissions = {} }
    end })
  local sg = ctx:ensure(sg_spec)
  local id = sg.GroupId
  local rule = { IpProtocol = "-1", UserIdGroupPairs = { { GroupId = id, Description = "within the group" } } }
  ctx:ensure { type = "ec2:security-group-rule", label = "security group rule",
    name = "all traffic within " .. name, needs = id, fields = { GroupId = id, IpPermissions = { rule } },
    exists = "InvalidPermission.Duplicate", retry = net.not_yet, retry_every = net.SETTLE_EVERY,
    retry_for = net.SETTLE_FOR,
    search = function() -- read again: a lost answer or a race is found this way
      for _, p in ipairs((sg_spec.find(id) or {}).IpPermissions or {}) do
        for _, pair in ipairs(tostring(p.IpProtocol) == "-1" and p.UserIdGroupPairs or {}) do
          if pair.GroupId == id then return p end
        end
      end
    end,
    create = function()
      ctx:call("ec2", "AuthorizeSecurityGroupIngress", { GroupId = id, IpPermissions = { rule } })
      return rule
    end }
  st.security_group_id = id
end

function M.private_routes(ctx)
  local st = ctx.state
  local id = st.nat_gateway_id
  ctx:poll { what = "NAT gateway " .. tostring(id) .. " to be available", every = M.NAT_POLL, timeout = M.NAT_LIMIT,
    check = function()
      local out, err = ctx:try("ec2", "DescribeNatGateways", { NatGatewayIds = { id } })
      if not out and not not_found(err) then error(err, 0) end
      local n = out and (out.NatGateways or {})[1]
      local state = n and n.State or "gone"
      if state == "available" then return true end
      if state ~= "pending" then
        errors.raise("FAILED", string.format("NAT gateway %s is %s%s; a new run creates another", id, state,
          n and n.FailureMessage and (": " .. n.FailureMessage) or ""), { nat_gateway_id = id })
      end
      return false, "NAT gateway " .. id .. " " .. state
    end }
  routes(ctx, "private", "NatGatewayId", id)
end

return M
