-- cluster/_eks_network: the network under a hypd EKS cluster, what the
-- network's steps of cluster_create_eks call, and the naming and tagging
-- every step shares.
--
-- For cluster tag <tag> in one region it declares (ctx:ensure, hypd.kit):
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

local M = {}

M.TAG_KEY = "hypd:cluster-tag"
M.SLOT_KEY = "hypd:subnet"                 -- public-1, public-2, private-1, private-2
M.NAT_POLL, M.NAT_LIMIT = 15, 20 * 60      -- seconds between NAT checks; give up after
M.SETTLE_EVERY, M.SETTLE_FOR = 3, 30       -- a resource made a moment ago may not be visible yet

-- Zones where EKS places no control plane (CreateCluster answers
-- UnsupportedAvailabilityZoneException for subnets there).
M.EKS_UNSUPPORTED_ZONE_IDS = { ["use1-az3"] = true, ["usw1-az2"] = true, ["cac1-az3"] = true }

-- names and tags --------------------------------------------------------------

-- name(tag [, suffix]) -> "hypd-<tag>" or "hypd-<tag>-<suffix>"
function M.name(tag, suffix)
  return "hypd-" .. tag .. (suffix and ("-" .. suffix) or "")
end

-- tag_list(tag, name [, extra]) -> EC2/IAM Tags: hypd:cluster-tag, Name, extra {key = value}
function M.tag_list(tag, name, extra)
  local tags = { { Key = M.TAG_KEY, Value = tag }, { Key = "Name", Value = name } }
  local keys = {}
  for k in pairs(extra or {}) do keys[#keys + 1] = k end
  table.sort(keys)
  for _, k in ipairs(keys) do tags[#tags + 1] = { Key = k, Value = extra[k] } end
  return tags
end

-- spec(rtype, tag, name [, extra]) -> TagSpecifications for an EC2 create call
function M.spec(rtype, tag, name, extra)
  return { { ResourceType = rtype, Tags = M.tag_list(tag, name, extra) } }
end

-- tag_value(tags, key) -> the value of key in an EC2/IAM tag list, or nil
function M.tag_value(tags, key)
  for _, t in ipairs(tags or {}) do
    if t.Key == key then return t.Value end
  end
end

-- owned_by(tag, tags_of) -> fn(obj) -> true | false, why: the kit's owner
-- check, by the hypd:cluster-tag tag (tags_of(obj) -> an EC2/IAM tag list,
-- or a {key = value} map)
function M.owned_by(tag, tags_of)
  return function(obj)
    local tags = tags_of(obj) or {}
    local have = tags[M.TAG_KEY]
    if have == nil then have = M.tag_value(tags, M.TAG_KEY) end
    if have == tag then return true end
    return false, string.format("its %s tag is %s, not '%s'", M.TAG_KEY, have and ("'" .. have .. "'") or "missing",
      tag)
  end
end

-- not_yet(err) -> a note when err says a resource made a moment ago is not
-- visible yet (EC2 and IAM are eventually consistent): the kit's retry
function M.not_yet(err)
  local code = tostring(err.code)
  if code:find("NotFound", 1, true) or code == "NoSuchEntity" then return "not visible yet (" .. code .. ")" end
end

-- CIDR blocks (hypd.cidr) ------------------------------------------------------

M.parse_cidr, M.format_cidr, M.subnet_prefix, M.next_free = cidr.parse, cidr.format, cidr.subnet_prefix,
  cidr.next_free

-- check_subnet_cidrs(p): the tool's check (before anything is created): the
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
  local function bad(field, rule, message) fields[#fields + 1] = { field = field, rule = rule, message = field .. ": " ..
    message } end
  for i, f in ipairs(M.SUBNET_FIELDS) do
    local other = M.SUBNET_FIELDS[3 - i]
    if p[f] == nil then
      bad(f, "all_or_none", "required with " .. other .. ": give the CIDRs of all four subnets (two public, two " ..
        "private) or of none")
    elseif #p[f] ~= 2 then
      bad(f, "count", "must list exactly two CIDRs (the first zone's subnet, then the second's); got " .. #p[f])
    end
  end
  local vpc = cidr.parse(p.vpc_cidr)
  local blocks = {}
  for _, f in ipairs(M.SUBNET_FIELDS) do
    for i, text in ipairs(p[f] or {}) do
      local name = string.format("%s[%d]", f, i - 1)
      local b, why = cidr.parse(text)
      if not b then
        bad(name, "cidr", tostring(text) .. " is " .. why)
      elseif b.prefix < M.SUBNET_PREFIX_MIN or b.prefix > M.SUBNET_PREFIX_MAX then
        bad(name, "prefix", string.format("%s: a subnet's prefix must be /%d to /%d", text, M.SUBNET_PREFIX_MIN,
          M.SUBNET_PREFIX_MAX))
      elseif vpc and not cidr.contains(vpc, b) then
        bad(name, "within_vpc", string.format("%s is not inside vpc_cidr %s", text, p.vpc_cidr))
      else
        for _, o in ipairs(blocks) do
          if cidr.overlaps(o.block, b) then
            bad(name, "overlap", string.format("%s overlaps %s (%s)", text, o.name, o.text))
          end
        end
        blocks[#blocks + 1] = { block = b, name = name, text = text }
      end
    end
  end
  if #fields > 0 then
    local msgs = {}
    for i, f in ipairs(fields) do msgs[i] = f.message end
    errors.raise("VALIDATION", "cluster_create_eks: " .. table.concat(msgs, "; "), { fields = fields })
  end
end

-- EC2 resources as ensure specs -----------------------------------------------

local function filter(name, ...) return { Name = name, Values = { ... } } end

local function not_found(err) return tostring(err.code):find("NotFound", 1, true) ~= nil end

-- ec2(ctx, r) -> a ctx:ensure spec for an EC2 resource. r: the ensure keys
-- (type, label, name, key, create, desired, update, ...) and
--   describe = {operation, ids member, result list, id field}
--              ({"DescribeVpcs", "VpcIds", "Vpcs", "VpcId"})
--   filters   the search's filters (by tag, within the VPC); also: the
--             filters tried when those find nothing
--   search    replaces the describe by filters (the caller has the list)
--   filter_param "Filters" (DescribeNatGateways: "Filter")
--   live      fn(obj) -> bool: what counts as existing (NAT: pending, available)
--   order     a sort for several matches (default by id); unique: two are a CONFLICT
--   tags      {key = value}: tags that must hold (desired "tag:<key>", set by CreateTags)
--   attrs     {field = fn(id, value)}: how update sets the other desired
--             fields, in the order attr_order lists them
--   tag       the cluster tag (default: the cluster_tag parameter)
-- find and search describe; update sets tags and attrs.
function M.ec2(ctx, r)
  local op, ids, list, idf = table.unpack(r.describe)
  local function live(x) return x and (not r.live or r.live(x)) end
  -- every EC2 resource here is created with its tags (spec()): a plan shows them
  local tag = r.tag or ctx.params.cluster_tag
  local fields = { ["tag:" .. M.TAG_KEY] = tag, ["tag:Name"] = r.name }
  for k, v in pairs(r.fields or {}) do fields[k] = v end
  local spec = { type = r.type, label = r.label, name = r.name, key = r.key, id = idf, needs = r.needs,
    create = r.create, exists = r.exists, fields = fields, owned = r.owned, retry = M.not_yet,
    retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR, placeholder = r.placeholder, current = r.current }
  function spec.find(id)
    local out, err = ctx:try("ec2", op, { [ids] = { id } })
    if not out and not not_found(err) then error(err, 0) end
    local x = out and (out[list] or {})[1]
    if live(x) then return x end
  end
  local function matching(filters)
    local found = {}
    for _, x in ipairs(ctx:call("ec2", op, { [r.filter_param or "Filters"] = filters })[list] or {}) do
      if live(x) then found[#found + 1] = x end
    end
    return found
  end
  function spec.search()
    local found = matching(r.filters)
    if #found == 0 and r.also then found = matching(r.also) end
    table.sort(found, r.order or function(a, b) return a[idf] < b[idf] end)
    if r.unique and #found > 1 then
      local all = {}
      for i, x in ipairs(found) do all[i] = x[idf] end
      errors.raise("CONFLICT", string.format("%d %ss carry the tag %s=%s (%s); hypd expects one. Delete the extra " ..
        "ones, or choose another cluster_tag.", #found, r.label, M.TAG_KEY, tag,
        table.concat(all, ", ")), { ids = all, field = "cluster_tag" })
    end
    return found[1]
  end
  if r.search then spec.search = r.search end
  if r.tags or r.desired then
    spec.desired = {}
    for k, v in pairs(r.desired or {}) do spec.desired[k] = v end
    for k, v in pairs(r.tags or {}) do spec.desired["tag:" .. k] = v end
    spec.current = r.current or function(x)
      local cur = {}
      for k in pairs(spec.desired) do cur[k] = x[k] end
      for _, t in ipairs(x.Tags or {}) do cur["tag:" .. t.Key] = t.Value end
      return cur
    end
    function spec.update(x, changes)
      local id, tags = x[idf], {}
      for _, k in ipairs(r.attr_order or {}) do
        if changes[k] then r.attrs[k](id, changes[k].to) end
      end
      for k, c in pairs(changes) do
        local key = k:match("^tag:(.+)$")
        if key then
          tags[#tags + 1] = { Key = key, Value = c.to }
        elseif not (r.attrs and r.attrs[k]) then
          error("ec2 " .. tostring(r.type) .. ": no attrs entry sets the desired field " .. k, 0)
        end
      end
      table.sort(tags, function(a, b) return a.Key < b.Key end)
      if #tags > 0 then ctx:call("ec2", "CreateTags", { Resources = { id }, Tags = tags }) end
    end
  end
  return spec
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
    errors.raise("VALIDATION", "region " .. ctx.region .. " has fewer than two availability zones EKS supports",
      { field = "region" })
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
    errors.raise("VALIDATION", "vpc_cidr " .. tostring(p.vpc_cidr) .. ": " ..
      (why or "the prefix must be /16 to /24"), { field = "vpc_cidr" })
  end
  M.check_subnet_cidrs(p) -- the call was checked; a resumed operation is too
  zones(ctx)
  local name = M.name(tag, "vpc")
  local attrs = {}
  for _, a in ipairs(DNS) do
    attrs[a] = function(id, v) ctx:call("ec2", "ModifyVpcAttribute", { VpcId = id, [a] = { Value = v } }) end
  end
  local vpc = ctx:ensure(M.ec2(ctx, { type = "ec2:vpc", label = "VPC", name = name, key = "vpc_id",
    describe = { "DescribeVpcs", "VpcIds", "Vpcs", "VpcId" }, filters = { filter("tag:" .. M.TAG_KEY, tag) },
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
      return ctx:call("ec2", "CreateVpc", { CidrBlock = p.vpc_cidr, TagSpecifications = M.spec("vpc", tag, name) }).Vpc
    end }))
  if vpc.CidrBlock ~= p.vpc_cidr then
    ctx:progress("reusing VPC " .. vpc.VpcId .. " with its CIDR " .. tostring(vpc.CidrBlock) .. " (not " ..
      tostring(p.vpc_cidr) .. ")")
  end
  st.vpc_id, st.vpc_cidr = vpc.VpcId, vpc.CidrBlock
end

function M.internet_gateway(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = M.name(tag, "igw")
  local vpc_id = st.vpc_id
  -- a gateway someone else attached to this VPC serves as well
  local igw = ctx:ensure(M.ec2(ctx, { type = "ec2:internet-gateway", label = "internet gateway", name = name,
    key = "internet_gateway_id", describe = { "DescribeInternetGateways", "InternetGatewayIds", "InternetGateways",
      "InternetGatewayId" }, filters = { filter("tag:" .. M.TAG_KEY, tag) },
    also = { filter("attachment.vpc-id", vpc_id) },
    create = function()
      return ctx:call("ec2", "CreateInternetGateway", { TagSpecifications = M.spec("internet-gateway", tag, name) })
        .InternetGateway
    end }))
  local tried = false
  ctx:ensure { type = "ec2:internet-gateway-attachment", label = "internet gateway attachment",
    name = name .. " to " .. M.name(tag, "vpc"), needs = { igw.InternetGatewayId, vpc_id }, field = "cluster_tag",
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
    retry = M.not_yet, retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR,
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
    local slot = M.tag_value(s.Tags, M.SLOT_KEY)
    if slot and M.tag_value(s.Tags, M.TAG_KEY) == tag and not by_slot[slot] then by_slot[slot] = s end
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
    local name = w.subnet and M.tag_value(w.subnet.Tags, "Name") or M.name(tag, slot.role .. "-" .. w.az)
    local elb = { [M.SLOT_KEY] = key, [ELB_TAG[slot.role]] = "1" }
    local tried = false
    local s = ctx:ensure(M.ec2(ctx, { type = "ec2:subnet", label = "subnet", name = name, needs = vpc_id,
      describe = { "DescribeSubnets", "SubnetIds", "Subnets", "SubnetId" },
      search = function() -- found in the VPC's list above, by its slot; after a create whose answer was lost, read again
        if not tried then return w.subnet end
        return (ctx:call("ec2", "DescribeSubnets", { Filters = { filter("vpc-id", vpc_id),
          filter("tag:" .. M.TAG_KEY, tag), filter("tag:" .. M.SLOT_KEY, key) } }).Subnets or {})[1]
      end,
      tags = { [M.TAG_KEY] = tag, [ELB_TAG[slot.role]] = "1" },
      desired = { MapPublicIpOnLaunch = slot.role == "public" or nil }, attr_order = { "MapPublicIpOnLaunch" },
      attrs = { MapPublicIpOnLaunch = function(id, v)
        ctx:call("ec2", "ModifySubnetAttribute", { SubnetId = id, MapPublicIpOnLaunch = { Value = v } })
      end },
      fields = { VpcId = vpc_id, CidrBlock = w.block, AvailabilityZone = w.az, ["tag:" .. M.SLOT_KEY] = key },
      create = function()
        tried = true
        return ctx:call("ec2", "CreateSubnet", { VpcId = vpc_id, CidrBlock = w.block, AvailabilityZone = w.az,
          TagSpecifications = M.spec("subnet", tag, name, elb) }).Subnet
      end }))
    out[slot.role][slot.n], names[s.SubnetId] = s.SubnetId, name
  end
  st.public_subnet_ids, st.private_subnet_ids, st.subnet_names = out.public, out.private, names
end

local function nat_live(n) return n.State == "pending" or n.State == "available" end

function M.nat_gateway(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local eip_name, name = M.name(tag, "nat-eip"), M.name(tag, "nat")
  local subnet_id = st.public_subnet_ids[1]
  local eip = ctx:ensure(M.ec2(ctx, { type = "ec2:elastic-ip", label = "Elastic IP", name = eip_name,
    key = "eip_allocation_id", describe = { "DescribeAddresses", "AllocationIds", "Addresses", "AllocationId" },
    filters = { filter("tag:" .. M.TAG_KEY, tag), filter("tag:Name", eip_name) }, fields = { Domain = "vpc" },
    create = function()
      return ctx:call("ec2", "AllocateAddress", { Domain = "vpc",
        TagSpecifications = M.spec("elastic-ip", tag, eip_name) })
    end }))
  local nat = ctx:ensure(M.ec2(ctx, { type = "ec2:nat-gateway", label = "NAT gateway", name = name,
    key = "nat_gateway_id", describe = { "DescribeNatGateways", "NatGatewayIds", "NatGateways", "NatGatewayId" },
    filter_param = "Filter", filters = { filter("vpc-id", st.vpc_id), filter("tag:" .. M.TAG_KEY, tag) },
    live = nat_live, needs = st.vpc_id,
    order = function(a, b) -- an available gateway first
      if (a.State == "available") ~= (b.State == "available") then return a.State == "available" end
      return a.NatGatewayId < b.NatGatewayId
    end,
    fields = { SubnetId = subnet_id, AllocationId = eip.AllocationId, ConnectivityType = "public" },
    create = function()
      return ctx:call("ec2", "CreateNatGateway", { SubnetId = subnet_id, AllocationId = eip.AllocationId,
        ConnectivityType = "public", TagSpecifications = M.spec("natgateway", tag, name) }).NatGateway
    end }))
  st.nat_gateway_id = nat.NatGatewayId
end

-- route_table(ctx, o) -> the route table's id: route table o.name in VPC
-- o.vpc_id, tagged for cluster tag o.tag, with 0.0.0.0/0 -> o.target
-- ({[o.target_field] = o.target}: GatewayId = igw, NatGatewayId = nat),
-- associated with each subnet of o.subnets ({{id, name}}); o.key is the
-- ctx.state field that remembers its id. The compute subnets of the
-- HyperPod stages are routed this way too (hyperpod/_subnet).
function M.route_table(ctx, o)
  local tag, name, vpc_id = o.tag, o.name, o.vpc_id
  local rt_spec = M.ec2(ctx, { type = "ec2:route-table", label = "route table", name = name, tag = tag, key = o.key,
    describe = { "DescribeRouteTables", "RouteTableIds", "RouteTables", "RouteTableId" },
    filters = { filter("vpc-id", vpc_id), filter("tag:" .. M.TAG_KEY, tag), filter("tag:Name", name) },
    needs = vpc_id, fields = { VpcId = vpc_id },
    create = function()
      return ctx:call("ec2", "CreateRouteTable", { VpcId = vpc_id,
        TagSpecifications = M.spec("route-table", tag, name) }).RouteTable
    end })
  local rt = ctx:ensure(rt_spec)
  local rt_id = rt.RouteTableId
  local target_field, target = o.target_field, o.target
  local route = { RouteTableId = rt_id, DestinationCidrBlock = "0.0.0.0/0", [target_field] = target }
  ctx:ensure { type = "ec2:route", label = "route", name = "0.0.0.0/0 in " .. name, needs = rt_id,
    id = function() return rt_id .. ":0.0.0.0/0" end, fields = route, exists = "RouteAlreadyExists",
    retry = M.not_yet, retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR,
    search = function() -- read again: a lost answer or a race is found this way
      for _, r in ipairs((rt_spec.find(rt_id) or {}).Routes or {}) do
        if r.DestinationCidrBlock == "0.0.0.0/0" then return r end
      end
    end,
    desired = { [target_field] = target, State = "active" },
    current = function(r) return { [target_field] = r[target_field], State = r.State or "active" } end,
    create = function()
      ctx:call("ec2", "CreateRoute", route)
      return { DestinationCidrBlock = "0.0.0.0/0", [target_field] = target, State = "active" }
    end,
    update = function() ctx:call("ec2", "ReplaceRoute", route) end }
  for _, sn in ipairs(o.subnets) do
    local sid = sn.id
    local tried = false
    ctx:ensure { type = "ec2:route-table-association", label = "route table association",
      name = name .. " with " .. tostring(sn.name or sid), needs = { rt_id, sid },
      id = "RouteTableAssociationId", fields = { RouteTableId = rt_id, SubnetId = sid },
      retry = M.not_yet, retry_every = M.SETTLE_EVERY, retry_for = M.SETTLE_FOR,
      search = function() -- the table as read above; after an associate whose answer was lost, read again
        local now = rt
        if tried then now = rt_spec.find(rt_id) or {} end
        for _, a in ipairs(now.Associations or {}) do
          if a.SubnetId == sid then return a end
        end
      end,
      create = function()
        tried = true
        local out = ctx:call("ec2", "AssociateRouteTable", { RouteTableId = rt_id, SubnetId = sid })
        return { RouteTableAssociationId = out.AssociationId, SubnetId = sid }
      end }
  end
  return rt_id
end

-- routes(ctx, kind, target): route table hypd-<tag>-<kind>-rt with
-- 0.0.0.0/0 -> target ({GatewayId = igw} or {NatGatewayId = nat}),
-- associated with the <kind> subnets
local function routes(ctx, kind, target_field, target)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local subnets = {}
  for i, sid in ipairs(st[kind .. "_subnet_ids"]) do subnets[i] = { id = sid, name = (st.subnet_names or {})[sid] } end
  st[kind .. "_route_table_id"] = M.route_table(ctx, { tag = tag, name = M.name(tag, kind .. "-rt"),
    vpc_id = st.vpc_id, key = kind .. "_route_table_id", target_field = target_field, target = target,
    subnets = subnets })
end

function M.public_routes(ctx) routes(ctx, "public", "GatewayId", ctx.state.internet_gateway_id) end

function M.security_group(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = M.name(tag, "cluster")
  local vpc_id = st.vpc_id
  local sg_spec = M.ec2(ctx, { type = "ec2:security-group", label = "security group", name = name,
    key = "security_group_id", describe = { "DescribeSecurityGroups", "GroupIds", "SecurityGroups", "GroupId" },
    filters = { filter("vpc-id", vpc_id), filter("group-name", name) }, needs = vpc_id,
    tags = { [M.TAG_KEY] = tag, Name = name }, exists = "InvalidGroup.Duplicate", fields = { VpcId = vpc_id },
    create = function()
      local out = ctx:call("ec2", "CreateSecurityGroup", { GroupName = name, VpcId = vpc_id,
        Description = "hypd " .. tag .. ": EKS control plane and nodes, all traffic within the group",
        TagSpecifications = M.spec("security-group", tag, name) })
      return { GroupId = out.GroupId, Tags = out.Tags or M.tag_list(tag, name), IpPermissions = {} }
    end })
  local sg = ctx:ensure(sg_spec)
  local id = sg.GroupId
  local rule = { IpProtocol = "-1", UserIdGroupPairs = { { GroupId = id, Description = "within the group" } } }
  ctx:ensure { type = "ec2:security-group-rule", label = "security group rule",
    name = "all traffic within " .. name, needs = id, fields = { GroupId = id, IpPermissions = { rule } },
    exists = "InvalidPermission.Duplicate", retry = M.not_yet, retry_every = M.SETTLE_EVERY,
    retry_for = M.SETTLE_FOR,
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
