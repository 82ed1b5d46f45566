-- cluster/_eks_network: the network under a hypd EKS cluster, the first
-- step of cluster_create_eks (cluster/_eks_stage), and the naming and
-- tagging every step shares.
--
-- For cluster tag <tag> in one region it makes, or finds again:
--   VPC hypd-<tag>-vpc (DNS support and hostnames on), internet gateway
--   hypd-<tag>-igw attached to it; in the first two zones of the region a
--   public and a private subnet each (hypd-<tag>-public-<az>, tagged
--   kubernetes.io/role/elb=1 and mapping public IPs; hypd-<tag>-private-<az>,
--   tagged kubernetes.io/role/internal-elb=1); an Elastic IP and NAT gateway
--   hypd-<tag>-nat in the first public subnet; route tables hypd-<tag>-public-rt
--   (0.0.0.0/0 -> internet gateway) and hypd-<tag>-private-rt (0.0.0.0/0 ->
--   NAT); security group hypd-<tag>-cluster (all traffic within the group).
--
-- Everything carries hypd:cluster-tag=<tag> and Name, set by the create call
-- itself (TagSpecifications), so a crash between create and tag cannot leave
-- an untagged resource. Every resource is looked up before it is created:
-- by the id in ctx.state, else by tag, so a re-run creates nothing and a run
-- that lost its state finds everything again. Only what differs changes.
local cidr = hypd.cidr
local errors = hypd.errors

local M = {}

M.TAG_KEY = "hypd:cluster-tag"
M.SLOT_KEY = "hypd:subnet"                 -- public-1, public-2, private-1, private-2
M.NAT_POLL, M.NAT_LIMIT = 15, 20 * 60      -- seconds between NAT checks; give up after

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

-- elapsed(seconds) -> "4m10s"
function M.elapsed(s)
  s = math.max(0, math.floor(s + 0.5))
  if s < 60 then return s .. "s" end
  return string.format("%dm%02ds", s // 60, s % 60)
end

-- settled(ctx, service, op, params) -> result. ctx:call, retried for a short
-- while when the answer is NotFound: EC2 and IAM are eventually consistent,
-- and a resource created a moment ago may not be visible to the next call.
function M.settled(ctx, service, op, params)
  local tries = 6
  for attempt = 1, tries do
    local out, err = ctx:try(service, op, params)
    if out then return out end
    local code = tostring(err.code)
    if attempt == tries or not (code:find("NotFound", 1, true) or code == "NoSuchEntity") then error(err, 0) end
    ctx:sleep(2 * attempt)
  end
end

-- CIDR blocks (hypd.cidr) ------------------------------------------------------

M.parse_cidr, M.format_cidr, M.subnet_prefix, M.next_free = cidr.parse, cidr.format, cidr.subnet_prefix,
  cidr.next_free

-- lookups ---------------------------------------------------------------------

local function filter(name, ...) return { Name = name, Values = { ... } } end

-- recall(ctx, s) -> the EC2 record or nil; s = { key (ctx.state field with its
-- id), op, ids (the op's id list member), list (result member), id (record id
-- member), filters, filter_param ("Filters"), live(rec) -> bool, unique (two
-- matches are a CONFLICT), what }. Found ids are written to ctx.state[key].
local function recall(ctx, s)
  local st = ctx.state
  if st[s.key] then
    local out, err = ctx:try("ec2", s.op, { [s.ids] = { st[s.key] } })
    if not out and not tostring(err.code):find("NotFound", 1, true) then error(err, 0) end
    local r = out and out[s.list] and out[s.list][1]
    if r and (not s.live or s.live(r)) then return r end
    st[s.key] = nil
  end
  local found = {}
  for _, r in ipairs(ctx:call("ec2", s.op, { [s.filter_param or "Filters"] = s.filters })[s.list] or {}) do
    if not s.live or s.live(r) then found[#found + 1] = r end
  end
  table.sort(found, s.order or function(a, b) return a[s.id] < b[s.id] end)
  if s.unique and #found > 1 then
    local ids = {}
    for i, r in ipairs(found) do ids[i] = r[s.id] end
    errors.raise("CONFLICT", string.format("%d %ss carry the tag %s=%s (%s); hypd expects one. Delete the extra " ..
      "ones, or choose another cluster_tag.", #found, s.what, M.TAG_KEY, ctx.params.cluster_tag,
      table.concat(ids, ", ")), { ids = ids })
  end
  local r = found[1]
  st[s.key] = r and r[s.id] or nil
  return r
end

-- ensure_tags(ctx, id, have, want): adds the tags in want (a tag list) that
-- the resource lacks or has with another value
local function ensure_tags(ctx, id, have, want, what)
  local missing = {}
  for _, t in ipairs(want) do
    if M.tag_value(have, t.Key) ~= t.Value then missing[#missing + 1] = t end
  end
  if #missing == 0 then return end
  ctx:phase("tagging " .. what)
  M.settled(ctx, "ec2", "CreateTags", { Resources = { id }, Tags = missing })
end

-- the steps' parts -------------------------------------------------------------

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

local function ensure_vpc(ctx)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local vpc = recall(ctx, { key = "vpc_id", op = "DescribeVpcs", ids = "VpcIds", list = "Vpcs", id = "VpcId",
    filters = { filter("tag:" .. M.TAG_KEY, tag) }, unique = true, what = "VPC" })
  if vpc then
    if vpc.CidrBlock ~= ctx.params.vpc_cidr then
      ctx:progress("reusing VPC " .. vpc.VpcId .. " with its CIDR " .. vpc.CidrBlock .. " (not " ..
        tostring(ctx.params.vpc_cidr) .. ")")
    end
  else
    local ok, why = M.parse_cidr(ctx.params.vpc_cidr)
    if not ok or ok.prefix < 16 or ok.prefix > 24 then
      errors.raise("VALIDATION", "vpc_cidr " .. tostring(ctx.params.vpc_cidr) .. ": " ..
        (why or "the prefix must be /16 to /24"), { field = "vpc_cidr" })
    end
    ctx:phase("creating VPC " .. M.name(tag, "vpc") .. " (" .. ctx.params.vpc_cidr .. ")")
    vpc = ctx:call("ec2", "CreateVpc", { CidrBlock = ctx.params.vpc_cidr,
      TagSpecifications = M.spec("vpc", tag, M.name(tag, "vpc")) }).Vpc
    st.vpc_id = vpc.VpcId
    ctx:save()
  end
  st.vpc_id, st.vpc_cidr = vpc.VpcId, vpc.CidrBlock
  -- DNS support first: EC2 refuses hostnames without it
  for _, attr in ipairs { { "enableDnsSupport", "EnableDnsSupport", "DNS support" },
                          { "enableDnsHostnames", "EnableDnsHostnames", "DNS hostnames" } } do
    local cur = M.settled(ctx, "ec2", "DescribeVpcAttribute", { VpcId = vpc.VpcId, Attribute = attr[1] })
    if not (cur[attr[2]] and cur[attr[2]].Value) then
      ctx:phase("enabling " .. attr[3] .. " on VPC " .. vpc.VpcId)
      M.settled(ctx, "ec2", "ModifyVpcAttribute", { VpcId = vpc.VpcId, [attr[2]] = { Value = true } })
    end
  end
  return vpc
end

local function ensure_igw(ctx, vpc)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = M.name(tag, "igw")
  local igw = recall(ctx, { key = "internet_gateway_id", op = "DescribeInternetGateways", ids = "InternetGatewayIds",
    list = "InternetGateways", id = "InternetGatewayId", filters = { filter("tag:" .. M.TAG_KEY, tag) } })
  if not igw then -- a gateway someone else attached to this VPC serves as well
    igw = recall(ctx, { key = "internet_gateway_id", op = "DescribeInternetGateways", ids = "InternetGatewayIds",
      list = "InternetGateways", id = "InternetGatewayId", filters = { filter("attachment.vpc-id", vpc.VpcId) } })
  end
  if not igw then
    ctx:phase("creating internet gateway " .. name)
    igw = ctx:call("ec2", "CreateInternetGateway", { TagSpecifications = M.spec("internet-gateway", tag, name) })
      .InternetGateway
    st.internet_gateway_id = igw.InternetGatewayId
    ctx:save()
  end
  local att = (igw.Attachments or {})[1]
  if att and att.VpcId ~= vpc.VpcId then
    errors.raise("CONFLICT", "internet gateway " .. igw.InternetGatewayId .. " (tagged " .. M.TAG_KEY .. "=" .. tag ..
      ") is attached to " .. att.VpcId .. ", not to " .. vpc.VpcId)
  end
  if not att then
    ctx:phase("attaching internet gateway " .. igw.InternetGatewayId .. " to " .. vpc.VpcId)
    M.settled(ctx, "ec2", "AttachInternetGateway", { InternetGatewayId = igw.InternetGatewayId, VpcId = vpc.VpcId })
  end
  return igw.InternetGatewayId
end

local SLOTS = {
  { role = "public", n = 1 }, { role = "public", n = 2 }, { role = "private", n = 1 }, { role = "private", n = 2 },
}
local ELB_TAG = { public = "kubernetes.io/role/elb", private = "kubernetes.io/role/internal-elb" }

-- ensure_subnets(ctx, vpc, azs) -> { public = {ids}, private = {ids} }
local function ensure_subnets(ctx, vpc, azs)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local all = ctx:call("ec2", "DescribeSubnets", { Filters = { filter("vpc-id", vpc.VpcId) } }).Subnets or {}
  local by_slot, used = {}, {}
  table.sort(all, function(a, b) return a.SubnetId < b.SubnetId end)
  for _, s in ipairs(all) do
    used[#used + 1] = s.CidrBlock
    local slot = M.tag_value(s.Tags, M.SLOT_KEY)
    if slot and M.tag_value(s.Tags, M.TAG_KEY) == tag and not by_slot[slot] then by_slot[slot] = s end
  end
  local out = { public = {}, private = {} }
  for _, slot in ipairs(SLOTS) do
    local key = slot.role .. "-" .. slot.n
    local s = by_slot[key]
    if not s then
      local az = azs[slot.n]
      local sibling = by_slot[slot.role .. "-" .. (3 - slot.n)]
      if sibling and sibling.AvailabilityZone == az then az = azs[3 - slot.n] end
      local block = M.next_free(vpc.CidrBlock, used)
      if not block then
        errors.raise("CONFLICT", "VPC " .. vpc.VpcId .. " (" .. vpc.CidrBlock .. ") has no free block for subnet " ..
          key, { field = "vpc_cidr" })
      end
      local name = M.name(tag, slot.role .. "-" .. az)
      ctx:phase("creating subnet " .. name .. " (" .. block .. ")")
      s = ctx:call("ec2", "CreateSubnet", { VpcId = vpc.VpcId, CidrBlock = block, AvailabilityZone = az,
        TagSpecifications = M.spec("subnet", tag, name, { [M.SLOT_KEY] = key, [ELB_TAG[slot.role]] = "1" }) }).Subnet
      used[#used + 1] = block
      by_slot[key] = s
    end
    out[slot.role][slot.n] = s.SubnetId
    st[slot.role .. "_subnet_ids"] = out[slot.role]
    ctx:save()
    ensure_tags(ctx, s.SubnetId, s.Tags, { { Key = M.TAG_KEY, Value = tag }, { Key = ELB_TAG[slot.role], Value = "1" } },
      "subnet " .. s.SubnetId)
    if slot.role == "public" and not s.MapPublicIpOnLaunch then
      ctx:phase("mapping public IPs on launch in subnet " .. s.SubnetId)
      M.settled(ctx, "ec2", "ModifySubnetAttribute", { SubnetId = s.SubnetId, MapPublicIpOnLaunch = { Value = true } })
    end
  end
  return out
end

local function nat_live(n) return n.State == "pending" or n.State == "available" end

-- ensure_nat(ctx, vpc, subnet_id) -> the NAT gateway record (maybe still pending)
local function ensure_nat(ctx, vpc, subnet_id)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local nat = recall(ctx, { key = "nat_gateway_id", op = "DescribeNatGateways", ids = "NatGatewayIds",
    list = "NatGateways", id = "NatGatewayId", filter_param = "Filter", live = nat_live,
    filters = { filter("vpc-id", vpc.VpcId), filter("tag:" .. M.TAG_KEY, tag) },
    order = function(a, b) -- an available gateway first
      if (a.State == "available") ~= (b.State == "available") then return a.State == "available" end
      return a.NatGatewayId < b.NatGatewayId
    end })
  if nat then
    local addr = (nat.NatGatewayAddresses or {})[1]
    st.eip_allocation_id = addr and addr.AllocationId or st.eip_allocation_id
    return nat
  end
  local eip_name = M.name(tag, "nat-eip")
  local eip = recall(ctx, { key = "eip_allocation_id", op = "DescribeAddresses", ids = "AllocationIds",
    list = "Addresses", id = "AllocationId", live = function(a) return a.AssociationId == nil end,
    filters = { filter("tag:" .. M.TAG_KEY, tag), filter("tag:Name", eip_name) } })
  if not eip then
    ctx:phase("allocating Elastic IP " .. eip_name)
    eip = ctx:call("ec2", "AllocateAddress", { Domain = "vpc", TagSpecifications = M.spec("elastic-ip", tag, eip_name) })
    st.eip_allocation_id = eip.AllocationId
    ctx:save()
  end
  ctx:phase("creating NAT gateway " .. M.name(tag, "nat") .. " in " .. subnet_id)
  nat = M.settled(ctx, "ec2", "CreateNatGateway", { SubnetId = subnet_id, AllocationId = eip.AllocationId,
    ConnectivityType = "public", TagSpecifications = M.spec("natgateway", tag, M.name(tag, "nat")) }).NatGateway
  st.nat_gateway_id = nat.NatGatewayId
  ctx:save()
  return nat
end

local function wait_nat(ctx, nat)
  if nat.State == "available" then return end
  local id = nat.NatGatewayId
  ctx:phase("waiting for NAT gateway " .. id .. " to be available")
  local started = hypd.now()
  while true do
    local n = M.settled(ctx, "ec2", "DescribeNatGateways", { NatGatewayIds = { id } }).NatGateways[1]
    local state = n and n.State or "gone"
    if state == "available" then return end
    if state ~= "pending" then
      ctx.state.nat_gateway_id = nil
      ctx:save()
      errors.raise("FAILED", string.format("NAT gateway %s is %s%s; a new run creates another", id, state,
        n and n.FailureMessage and (": " .. n.FailureMessage) or ""), { nat_gateway_id = id })
    end
    local waited = hypd.now() - started
    if waited > M.NAT_LIMIT then
      errors.raise("TIMEOUT", "NAT gateway " .. id .. " still pending after " .. M.elapsed(waited))
    end
    ctx:progress("NAT gateway " .. id .. " " .. state .. " (" .. M.elapsed(waited) .. ")")
    ctx:sleep(M.NAT_POLL)
  end
end

-- ensure_routes(ctx, vpc, kind, target, subnet_ids): route table hypd-<tag>-<kind>-rt
-- with 0.0.0.0/0 -> target ({GatewayId = igw} or {NatGatewayId = nat}),
-- associated with the subnets
local function ensure_routes(ctx, vpc, kind, target, subnet_ids)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = M.name(tag, kind .. "-rt")
  local key = kind .. "_route_table_id"
  local rt = recall(ctx, { key = key, op = "DescribeRouteTables", ids = "RouteTableIds", list = "RouteTables",
    id = "RouteTableId", filters = { filter("vpc-id", vpc.VpcId), filter("tag:" .. M.TAG_KEY, tag),
      filter("tag:Name", name) } })
  if not rt then
    ctx:phase("creating route table " .. name)
    rt = ctx:call("ec2", "CreateRouteTable", { VpcId = vpc.VpcId, TagSpecifications = M.spec("route-table", tag, name) })
      .RouteTable
    st[key] = rt.RouteTableId
    ctx:save()
  end
  local tk, tv = next(target)
  local default
  for _, r in ipairs(rt.Routes or {}) do
    if r.DestinationCidrBlock == "0.0.0.0/0" then default = r end
  end
  local route = { RouteTableId = rt.RouteTableId, DestinationCidrBlock = "0.0.0.0/0", [tk] = tv }
  if not default then
    ctx:phase("routing 0.0.0.0/0 in " .. name .. " to " .. tv)
    M.settled(ctx, "ec2", "CreateRoute", route)
  elseif default[tk] ~= tv or default.State == "blackhole" then
    ctx:phase("rerouting 0.0.0.0/0 in " .. name .. " to " .. tv)
    M.settled(ctx, "ec2", "ReplaceRoute", route)
  end
  local associated = {}
  for _, a in ipairs(rt.Associations or {}) do
    if a.SubnetId then associated[a.SubnetId] = true end
  end
  for _, sid in ipairs(subnet_ids) do
    if not associated[sid] then
      ctx:phase("associating " .. name .. " with subnet " .. sid)
      M.settled(ctx, "ec2", "AssociateRouteTable", { RouteTableId = rt.RouteTableId, SubnetId = sid })
    end
  end
end

local function ensure_sg(ctx, vpc)
  local tag, st = ctx.params.cluster_tag, ctx.state
  local name = M.name(tag, "cluster")
  local sg = recall(ctx, { key = "security_group_id", op = "DescribeSecurityGroups", ids = "GroupIds",
    list = "SecurityGroups", id = "GroupId", filters = { filter("vpc-id", vpc.VpcId), filter("group-name", name) } })
  if not sg then
    ctx:phase("creating security group " .. name)
    local out = ctx:call("ec2", "CreateSecurityGroup", { GroupName = name, VpcId = vpc.VpcId,
      Description = "hypd " .. tag .. ": EKS control plane and nodes, all traffic within the group",
      TagSpecifications = M.spec("security-group", tag, name) })
    sg = { GroupId = out.GroupId, Tags = out.Tags or M.tag_list(tag, name), IpPermissions = {} }
    st.security_group_id = sg.GroupId
    ctx:save()
  end
  ensure_tags(ctx, sg.GroupId, sg.Tags, M.tag_list(tag, name), "security group " .. sg.GroupId)
  for _, p in ipairs(sg.IpPermissions or {}) do
    if tostring(p.IpProtocol) == "-1" then
      for _, pair in ipairs(p.UserIdGroupPairs or {}) do
        if pair.GroupId == sg.GroupId then return sg.GroupId end
      end
    end
  end
  ctx:phase("allowing all traffic within security group " .. sg.GroupId)
  local _, err = ctx:try("ec2", "AuthorizeSecurityGroupIngress", { GroupId = sg.GroupId, IpPermissions = {
    { IpProtocol = "-1", UserIdGroupPairs = { { GroupId = sg.GroupId, Description = "within the group" } } } } })
  if err and err.code ~= "InvalidPermission.Duplicate" then error(err, 0) end
  return sg.GroupId
end

-- run(ctx): the "network" step
function M.run(ctx)
  local st = ctx.state
  st.region, st.cluster_tag = st.region or ctx.region, ctx.params.cluster_tag
  local azs = zones(ctx)
  local vpc = ensure_vpc(ctx)
  local igw = ensure_igw(ctx, vpc)
  local subnets = ensure_subnets(ctx, vpc, azs)
  local nat = ensure_nat(ctx, vpc, subnets.public[1])
  ensure_routes(ctx, vpc, "public", { GatewayId = igw }, subnets.public)
  ensure_sg(ctx, vpc)
  wait_nat(ctx, nat) -- the public side is done meanwhile
  ensure_routes(ctx, vpc, "private", { NatGatewayId = nat.NatGatewayId }, subnets.private)
  ctx:save()
end

return M
